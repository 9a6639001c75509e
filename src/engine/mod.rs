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
//!
//! An engine may also offer the memory it searches without copying
//! ([`Engine::buffer_provider`]): the pipeline then reads blocks straight
//! into it. Each search reports its stages (upload, compute, read-back) and
//! the bytes it copied to a [`StageClock`] (see [`profile`]).

pub mod cpu;
pub mod gpu;
pub mod naive;
pub mod pfac;
pub mod profile;

use std::sync::Arc;

use crate::pattern::Pattern;
use crate::source::BufferProvider;
pub use profile::{Busy, Stage, StageClock, StageTimes};

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

    /// The block size a scan uses when none is asked for: the CPU engine's
    /// [`crate::scan::CPU_BLOCK_SIZE`]; a GPU's larger blocks spare it
    /// dispatches ([`crate::scan::DEFAULT_BLOCK_SIZE`]).
    fn default_block_size(&self) -> usize {
        crate::scan::CPU_BLOCK_SIZE
    }

    /// [`search`](Self::search), reporting the time spent in each stage and
    /// the bytes copied to `clock`. The default counts the whole search as
    /// compute (a CPU engine searches the bytes where they lie).
    fn search_profiled(
        &self,
        haystack: &[u8],
        out: &mut Vec<Hit>,
        clock: &StageClock,
    ) -> Result<(), EngineError> {
        let _busy = clock.enter(Stage::Compute);
        self.search(haystack, out)
    }

    /// Memory this engine searches without copying it first (the GPU
    /// engine's staging buffers), for the pipeline's buffer pool. `None`:
    /// any memory will do (the CPU engine), or the engine copies every
    /// haystack anyway. The engine still searches a haystack that lies
    /// anywhere else, by copying it.
    fn buffer_provider(&self) -> Option<Arc<dyn BufferProvider>> {
        None
    }
}

/// Longest pattern length; the pipeline's block overlap is this minus one.
pub fn max_pattern_len(patterns: &[Pattern]) -> usize {
    patterns.iter().map(Pattern::len).max().unwrap_or(0)
}

/// Which engine a scan asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// A real GPU when one exists, else the CPU.
    Auto,
    Cpu,
    /// The GPU; `device` picks one by index or name substring.
    Gpu {
        device: Option<String>,
    },
}

impl std::str::FromStr for EngineChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<EngineChoice, String> {
        match s {
            "auto" => Ok(EngineChoice::Auto),
            "cpu" => Ok(EngineChoice::Cpu),
            "gpu" => Ok(EngineChoice::Gpu { device: None }),
            _ => Err(format!("unknown engine `{s}` (auto, cpu, gpu)")),
        }
    }
}

/// The engines a scan runs: the chosen one, and the CPU engine to take over
/// if a GPU fails mid-scan (`None` when the primary is the CPU engine).
pub struct EngineSet {
    pub primary: Box<dyn Engine>,
    pub fallback: Option<Box<dyn Engine>>,
}

/// Builds the engines for `choice`. `haystack_len` is the largest haystack
/// the pipeline will pass (block + overlap): GPU buffers are sized to it.
/// Notes about the choice go to `note`.
pub fn build_engines(
    patterns: &[Pattern],
    choice: &EngineChoice,
    haystack_len: usize,
    note: &mut dyn FnMut(String),
) -> Result<EngineSet, EngineError> {
    let cpu =
        || -> Result<Box<dyn Engine>, EngineError> { Ok(Box::new(cpu::CpuEngine::new(patterns)?)) };
    let gpu = |device: gpu::DeviceChoice, allow_software: bool| {
        let config = gpu::GpuConfig {
            slot_bytes: haystack_len.max(1 << 16).next_multiple_of(4),
            slots: std::thread::available_parallelism().map_or(2, |n| n.get()) + 1,
            upload: gpu::UploadPath::from_env().map_err(gpu::GpuError::Build)?,
            ..gpu::GpuConfig::default()
        };
        gpu::GpuEngine::with_config(patterns, device, allow_software, config)
    };
    match choice {
        EngineChoice::Cpu => Ok(EngineSet {
            primary: cpu()?,
            fallback: None,
        }),
        // No GPU device node: the CPU engine, without loading Vulkan.
        EngineChoice::Auto if !gpu::may_have_gpu() => Ok(EngineSet {
            primary: cpu()?,
            fallback: None,
        }),
        EngineChoice::Auto => match gpu(gpu::DeviceChoice::Auto, false) {
            Ok(g) => Ok(EngineSet {
                primary: Box::new(g),
                fallback: Some(cpu()?),
            }),
            Err(e) => {
                // No loader, no driver, no device or only a software rasteriser:
                // the CPU engine is the expected choice, not worth a warning.
                if !matches!(
                    e,
                    gpu::GpuError::NoLoader
                        | gpu::GpuError::NoDriver
                        | gpu::GpuError::NoComputeDevice
                        | gpu::GpuError::SoftwareOnly(_)
                ) {
                    note(format!(
                        "GPU engine unavailable ({e}); using the CPU engine"
                    ));
                }
                Ok(EngineSet {
                    primary: cpu()?,
                    fallback: None,
                })
            }
        },
        EngineChoice::Gpu { device } => {
            let d = match device.as_deref() {
                None => gpu::DeviceChoice::Auto,
                Some(s) => match s.parse::<usize>() {
                    Ok(i) => gpu::DeviceChoice::Index(i),
                    Err(_) => gpu::DeviceChoice::NameContains(s.to_string()),
                },
            };
            let g = gpu(d, true).map_err(|e| EngineError::Device(e.to_string()))?;
            Ok(EngineSet {
                primary: Box::new(g),
                fallback: Some(cpu()?),
            })
        }
    }
}
