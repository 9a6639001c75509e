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

pub mod auto;
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

/// Default block size of a GPU engine (see README: chosen from `gpucarve
/// bench` sweeps), and what its buffers are sized for when no block size
/// is given ([`crate::scan::haystack_len`]).
pub const DEFAULT_BLOCK_SIZE: usize = 8 << 20;

/// Default block size of the CPU engine: its scan is as fast with 1-8 MiB
/// blocks, and a carving reads fewer fresh buffer pages and keeps less in
/// flight with smaller ones (ext2 carving: CPU time -25 ms, FAT32 -57 ms,
/// dense 64 MiB peak RSS 306 -> 247 MiB, against 8 MiB; session 13).
pub const CPU_BLOCK_SIZE: usize = 4 << 20;

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
    /// [`CPU_BLOCK_SIZE`]; a GPU's larger blocks spare it
    /// dispatches ([`DEFAULT_BLOCK_SIZE`]).
    fn default_block_size(&self) -> usize {
        CPU_BLOCK_SIZE
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

    /// [`search_profiled`](Self::search_profiled) if the engine can start
    /// at once; `None`, having searched nothing, when it is busy (every GPU
    /// slot in flight): the caller searches the haystack elsewhere. The
    /// default always searches.
    fn try_search_profiled(
        &self,
        haystack: &[u8],
        out: &mut Vec<Hit>,
        clock: &StageClock,
    ) -> Option<Result<(), EngineError>> {
        Some(self.search_profiled(haystack, out, clock))
    }

    /// How long each step of the engine's set-up took, in order, seconds
    /// (`gpucarve bench` reports them). Default: none measured.
    fn setup_steps(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// What the engine has to tell the examiner once a scan is over
    /// (`--engine auto`: why a GPU that is present could not be used), as a
    /// one-line warning. Default: nothing.
    fn closing_note(&self) -> Option<String> {
        None
    }

    /// Memory this engine searches without copying it first (the GPU
    /// engine's staging buffers), for the pipeline's buffer pool. `None`:
    /// any memory will do (the CPU engine), or the engine copies every
    /// haystack anyway. The engine still searches a haystack that lies
    /// anywhere else, by copying it.
    fn buffer_provider(&self) -> Option<Arc<dyn BufferProvider>> {
        None
    }

    /// How many block buffers of `buffer_bytes` the pipeline's pool should
    /// hold at most for this engine: a GPU's ring (what its slots keep in
    /// flight, plus the blocks being read), within [`STAGING_BUDGET`].
    /// `None`: as many as the threads can use (the CPU engine).
    fn buffers_in_flight(&self, buffer_bytes: usize) -> Option<usize> {
        let _ = buffer_bytes;
        None
    }

    /// How the blocks were shared between engines and why (`--engine
    /// auto`: each engine's blocks and bytes, and the figures measured on
    /// the image that decided), for audit.txt and `scan`'s summary.
    /// Default: nothing (one engine searched every block).
    fn work_split(&self) -> Option<String> {
        None
    }
}

/// The most block-buffer memory a GPU's ring (or `--engine auto`'s pool)
/// holds, whatever the block size and thread count (issue 38: peak RSS with
/// the GPU ≤ 512 MiB); a block larger than half of it still gets one buffer.
pub const STAGING_BUDGET: usize = 512 << 20;

/// Buffers of `buffer_bytes` a ring of `wanted` holds within [`STAGING_BUDGET`]
/// (at least one).
pub fn ring_buffers(wanted: usize, buffer_bytes: usize) -> usize {
    wanted.min(STAGING_BUDGET / buffer_bytes.max(1)).max(1)
}

/// Searches in flight on a GPU under `--engine gpu`: enough to keep it busy
/// (one uploading, one computing, one being read back), not one per thread.
pub const GPU_SLOTS: usize = 3;

/// Longest pattern length; the pipeline's block overlap is this minus one.
pub fn max_pattern_len(patterns: &[Pattern]) -> usize {
    patterns.iter().map(Pattern::len).max().unwrap_or(0)
}

/// Which engine a scan asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// The CPU engine, joined by a real GPU when one exists and the input
    /// is at least [`AUTO_GPU_MIN_BYTES`] (the GPU's set-up costs more than
    /// it saves below); the scan never waits for the GPU.
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

/// The least input for which `--engine auto` sets up a GPU (beside the CPU
/// engine, [`auto::AutoEngine`]). Measured on an H200 machine (session 16,
/// BENCHMARKS.md), images in the page cache: the set-up takes a third of
/// a second and its CPU time and tear-down cost ~0.1-0.3 s, so below a few
/// GiB the CPU engine alone is as fast or faster (2 GiB, carve: 16 cores
/// 1.12 s CPU vs 1.22 s with the GPU beside it; 2 cores 1.70 vs 1.95);
/// at 4 GiB they are level on 16 cores (1.00 vs 1.00 s), and at 8 GiB the
/// GPU beside the CPU carves 7-16% faster on 2 cores and within ±7% on 16.
pub const AUTO_GPU_MIN_BYTES: u64 = 4 << 30;

/// GPU slots (searches in flight) beside the CPU engine under `--engine
/// auto`: a worker that finds them all busy searches on the CPU.
pub const AUTO_GPU_SLOTS: usize = 4;

/// `GPUCARVE_AUTO_GPU=1`: `--engine auto` sets up a GPU for any input size
/// and accepts a software device (lavapipe): how CI and `bench` exercise
/// the measured split without a GPU machine. `=wait`: the same, and the
/// scan waits for the set-up (so the GPU is calibrated even on a small
/// image; tests).
pub const AUTO_GPU_ENV: &str = "GPUCARVE_AUTO_GPU";

fn auto_gpu_forced() -> bool {
    std::env::var(AUTO_GPU_ENV).is_ok_and(|v| v == "1" || v == "wait")
}

/// Builds the engines for `choice`. `haystack_len` is the largest haystack
/// the pipeline will pass (block + overlap): GPU buffers are sized to it.
/// `input_len` is how many bytes the scan will search (`--engine auto`
/// gives a GPU only to [`AUTO_GPU_MIN_BYTES`] or more).
pub fn build_engines(
    patterns: &[Pattern],
    choice: &EngineChoice,
    haystack_len: usize,
    input_len: u64,
) -> Result<EngineSet, EngineError> {
    let cpu =
        || -> Result<Box<dyn Engine>, EngineError> { Ok(Box::new(cpu::CpuEngine::new(patterns)?)) };
    let slot_bytes = haystack_len.max(1 << 16).next_multiple_of(4);
    // The GPU engine's tuning, with `slots` searches in flight.
    let gpu_config = |slots: usize| -> Result<gpu::GpuConfig, EngineError> {
        Ok(gpu::GpuConfig {
            slot_bytes,
            slots,
            upload: gpu::UploadPath::from_env().map_err(EngineError::Build)?,
            max_states: pfac::state_cap(patterns),
            ..gpu::GpuConfig::default()
        })
    };
    match choice {
        EngineChoice::Cpu => Ok(EngineSet {
            primary: cpu()?,
            fallback: None,
        }),
        // A small input, done before a GPU would be ready; or no GPU device
        // node: the CPU engine, without loading Vulkan.
        EngineChoice::Auto
            if !auto_gpu_forced() && (input_len < AUTO_GPU_MIN_BYTES || !gpu::may_have_gpu()) =>
        {
            Ok(EngineSet {
                primary: cpu()?,
                fallback: None,
            })
        }
        EngineChoice::Auto => {
            let config = gpu_config(AUTO_GPU_SLOTS)?;
            let owned = patterns.to_vec();
            let software = auto_gpu_forced();
            let auto = auto::AutoEngine::start(cpu()?, slot_bytes, DEFAULT_BLOCK_SIZE, move || {
                match gpu::GpuEngine::with_config(&owned, gpu::DeviceChoice::Auto, software, config)
                {
                    Ok(g) => Ok(Box::new(g) as Box<dyn Engine>),
                    // No loader, no driver, no device or only a software
                    // rasteriser: the CPU engine is the expected choice.
                    Err(
                        gpu::GpuError::NoLoader
                        | gpu::GpuError::NoDriver
                        | gpu::GpuError::NoComputeDevice
                        | gpu::GpuError::SoftwareOnly(_),
                    ) => Err(auto::SetupFailure::Absent),
                    Err(e) => Err(auto::SetupFailure::Failed(e.to_string())),
                }
            });
            if std::env::var(AUTO_GPU_ENV).is_ok_and(|v| v == "wait") {
                auto.wait_for_setup();
            }
            Ok(EngineSet {
                primary: Box::new(auto),
                fallback: Some(cpu()?),
            })
        }
        EngineChoice::Gpu { device } => {
            let d = match device.as_deref() {
                None => gpu::DeviceChoice::Auto,
                Some(s) => match s.parse::<usize>() {
                    Ok(i) => gpu::DeviceChoice::Index(i),
                    Err(_) => gpu::DeviceChoice::NameContains(s.to_string()),
                },
            };
            let slots = GPU_SLOTS;
            // (Errors, that of the environment's upload path too, as device failures.)
            let config = gpu_config(slots).map_err(|e| EngineError::Device(e.to_string()))?;
            let g = gpu::GpuEngine::with_config(patterns, d, true, config)
                .map_err(|e| EngineError::Device(e.to_string()))?;
            Ok(EngineSet {
                primary: Box::new(g),
                fallback: Some(cpu()?),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_stays_within_the_staging_budget() {
        assert_eq!(ring_buffers(5, 8 << 20), 5);
        assert_eq!(ring_buffers(5, 128 << 20), 4);
        assert_eq!(ring_buffers(5, 256 << 20), 2);
        assert_eq!(ring_buffers(5, 1 << 30), 1, "one buffer, whatever its size");
        assert_eq!(ring_buffers(usize::MAX, 64 << 20), 8);
        for bytes in [1 << 20, 8 << 20, 64 << 20, 200 << 20, 512 << 20] {
            assert!(ring_buffers(usize::MAX, bytes) * bytes <= STAGING_BUDGET);
        }
    }
}
