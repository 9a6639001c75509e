//! Search engines: find every occurrence of every pattern in a slice of bytes.
//!
//! An engine knows bytes and patterns, nothing else: not files, not blocks of
//! an image, not carving. It is given a haystack and reports every `Hit`
//! (position, pattern index) whose whole pattern lies inside the haystack —
//! overlapping hits, patterns that are prefixes or suffixes of one another and
//! wildcard patterns included. Which hits belong to which block of an image is
//! decided once, by the pipeline in `scan.rs`.
//!
//! Implementations:
//! * [`naive::NaiveEngine`]: the brute-force oracle every other engine is tested against;
//! * [`cpu::CpuEngine`]: SIMD prefilter (aho-corasick/Teddy) to candidate positions, then exact verification;
//! * [`pfac`]: the failureless automaton table shared by the GPU shader and its CPU reference;
//! * [`gpu::GpuEngine`]: the PFAC compute shader through Vulkan (loaded at run time).

pub mod cpu;
pub mod gpu;
pub mod naive;
pub mod pfac;

use crate::pattern::Pattern;

/// Index of a pattern in the slice an engine was built from.
pub type PatternId = u32;

/// One occurrence: `pattern` matches the haystack starting at `pos`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hit {
    pub pos: usize,
    pub pattern: PatternId,
}

/// Why an engine could not search a haystack.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Build(String),
    #[error("device failure: {0}")]
    Device(String),
}

/// A searcher built once from a pattern set and shared by all worker threads.
pub trait Engine: Send + Sync {
    /// Short name shown in reports and benchmarks (`cpu`, `gpu:<device>`).
    fn name(&self) -> String;

    /// Appends every hit in `haystack` to `out`, sorted by (pos, pattern).
    /// `out` is not cleared first.
    fn search(&self, haystack: &[u8], out: &mut Vec<Hit>) -> Result<(), EngineError>;

    /// The largest haystack the engine searches efficiently in one go (a
    /// GPU's input buffer); the pipeline keeps its blocks, overlap included,
    /// no larger. `None`: no limit.
    fn max_haystack_len(&self) -> Option<usize> {
        None
    }
}

/// Longest pattern length; the pipeline's block overlap is this minus one.
pub fn max_pattern_len(patterns: &[Pattern]) -> usize {
    patterns.iter().map(Pattern::len).max().unwrap_or(0)
}
