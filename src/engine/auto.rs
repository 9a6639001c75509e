//! `--engine auto` on a machine with a GPU: the CPU engine searches from the
//! first block while the GPU is set up on a thread of its own, and once the
//! GPU is ready each block goes to whichever engine is expected to finish
//! it sooner, by measurement ([`Split`]).
//!
//! **Calibration.** Every block the CPU engine searches gives its time per
//! byte on this image (the first blocks, before the GPU is ready, calibrate
//! it). Once the GPU has joined, its first [`CALIBRATION_BLOCKS`] blocks
//! (whenever a slot is free) calibrate it: the time of each search divided
//! by the bytes the device had to get through (the block, and the bytes of
//! the searches already in flight before it). A figure is the lowest of its
//! calibration samples (the first dispatch pays for lazy allocations), then
//! follows the blocks the engine takes (a moving average).
//!
//! **Decision.** A later block of `n` bytes goes to the GPU when
//! `(queued + n) × gpu_ns_per_byte < n × cpu_ns_per_byte` (`queued`: bytes
//! the GPU has in flight), else to the CPU engine on the worker's own
//! thread; the GPU also takes nothing while all its slots are busy. One
//! block in [`PROBE_EVERY`] goes to the engine predicted slower, so that its
//! figure follows the image and the machine's load (a carving's validators
//! share the cores). On lavapipe (a software device) the CPU engine takes
//! all but a few blocks. The split and the figures are in audit.txt and
//! `scan`'s summary ([`Engine::work_split`]).
//!
//! Setting up Vulkan on a real GPU takes a third of a second before the
//! first block can be searched (NVIDIA H100 and H200, session 16: the
//! instance 80 ms, the device 80 ms, the PFAC table's upload 100 ms, the
//! slots 70 ms), and a 16-core CPU engine scans a 512 MiB image from the
//! page cache in 0.1 s. Making the scan wait for the GPU (as `--engine
//! auto` did until then) made `carve` of such an image 2.3× slower than
//! with the CPU engine, and of 4 GiB 1.8× slower. Here the set-up is
//! off the critical path: the CPU engine starts at once, and the GPU takes
//! the blocks the measurement above gives it while one of its few slots is
//! free (a worker that finds them all in flight searches on the CPU
//! instead). Every block is searched by exactly one
//! engine, both exact, so the match stream is the same whichever took it.
//!
//! Blocks are read into heap buffers until the GPU is set up, then into its
//! staging memory (the heap buffers are replaced as they come back to the
//! pool), so the GPU's blocks go from the disk to memory it reads without a
//! copy by the CPU, as with `--engine gpu`.
//!
//! A GPU that fails mid-scan returns the error (the scan's fallback, the
//! CPU engine, takes that block and the rest, with one warning). A GPU
//! that cannot be set up leaves the CPU engine alone, and says why (in the
//! engine's name, which reports show, and in a warning once the scan is
//! over) where the reason is not simply that there is no GPU.
//!
//! Dropping the engine waits for a set-up still under way (a thread inside
//! the driver must not outlive the process's exit handlers): small inputs
//! are therefore not given a GPU at all ([`build_engines`]'s threshold).
//!
//! [`build_engines`]: super::build_engines

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::{Engine, EngineError, Hit, StageClock};
use crate::source::{AlignedBuf, BlockMemory, BufferProvider};

/// How a GPU set-up ended, when it did not give an engine.
#[derive(Debug)]
pub enum SetupFailure {
    /// No GPU here (no loader, no driver, no device, only a software
    /// rasteriser): the CPU engine is the expected choice, nothing to say.
    Absent,
    /// A GPU exists but could not be used: said in the engine's name and
    /// in a warning at the end of the scan ([`Engine::closing_note`]).
    Failed(String),
}

/// What the set-up thread leaves.
#[derive(Default)]
struct Joined {
    gpu: OnceLock<Box<dyn Engine>>,
    failure: Mutex<Option<String>>,
}

impl Joined {
    fn failure(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.failure.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fail(&self, why: String) {
        *self.failure() = Some(why);
    }
}

/// GPU blocks that calibrate it once it has joined.
pub const CALIBRATION_BLOCKS: u32 = 2;
/// One decided block in this many goes to the engine predicted slower.
pub const PROBE_EVERY: u64 = 64;

/// One engine's share and figure.
#[derive(Clone, Copy, Debug, Default)]
pub struct Share {
    /// Blocks and bytes it searched.
    pub blocks: u64,
    pub bytes: u64,
    /// Samples taken (each block it searched).
    pub samples: u32,
    /// Its time per byte (ns), once it has a sample.
    pub ns_per_byte: Option<f64>,
}

impl Share {
    fn record(&mut self, bytes: usize, ns_per_byte: f64) {
        self.blocks += 1;
        self.bytes += bytes as u64;
        self.samples = self.samples.saturating_add(1);
        self.ns_per_byte = Some(match self.ns_per_byte {
            None => ns_per_byte,
            Some(r) if self.samples <= CALIBRATION_BLOCKS => r.min(ns_per_byte),
            Some(r) => r + (ns_per_byte - r) / 8.0,
        });
    }
}

/// Which engine a block goes to, and what the engines have done.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split {
    pub cpu: Share,
    pub gpu: Share,
    /// Bytes and searches in flight on the GPU now.
    queued: u64,
    in_flight: u32,
    /// Blocks decided by the figures (for the probes).
    decided: u64,
}

/// Where a block should go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    Cpu,
    Gpu,
}

impl Split {
    /// The engine for a block of `len` bytes, the GPU being set up.
    fn choose(&mut self, len: usize) -> Choice {
        // Calibration: no more GPU blocks than samples still wanted (a
        // slow device must not take every block while it is measured).
        if self.gpu.samples < CALIBRATION_BLOCKS {
            return if self.gpu.samples + self.in_flight < CALIBRATION_BLOCKS {
                Choice::Gpu
            } else {
                Choice::Cpu
            };
        }
        let (Some(cpu), Some(gpu)) = (self.cpu.ns_per_byte, self.gpu.ns_per_byte) else {
            return Choice::Cpu;
        };
        let n = len as f64;
        let faster = if (self.queued as f64 + n) * gpu < n * cpu {
            Choice::Gpu
        } else {
            Choice::Cpu
        };
        self.decided += 1;
        if self.decided.is_multiple_of(PROBE_EVERY) {
            return match faster {
                Choice::Gpu => Choice::Cpu,
                Choice::Cpu => Choice::Gpu,
            };
        }
        faster
    }
}

/// `12.0 MiB`.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// `0.31 ns/byte (3.0 GiB/s)`, or `not measured`.
fn figure(s: &Share) -> String {
    match s.ns_per_byte {
        Some(r) if r > 0.0 => format!(
            "{r:.3} ns/byte ({:.2} GiB/s)",
            1e9 / r / (1u64 << 30) as f64
        ),
        Some(_) => "under the clock's resolution".into(),
        None => "not measured".into(),
    }
}

/// The CPU engine, joined by a GPU engine once it is set up.
pub struct AutoEngine {
    cpu: Box<dyn Engine>,
    joined: Arc<Joined>,
    setup: Mutex<Option<JoinHandle<()>>>,
    max_haystack: usize,
    block_size: usize,
    gpu_blocks: AtomicU64,
    blocks: AtomicU64,
    split: Mutex<Split>,
}

impl AutoEngine {
    /// Searches with `cpu` at once and starts `setup` on a thread of its
    /// own; the engine it returns takes blocks from then on. Haystacks are
    /// at most `max_haystack` bytes (what the GPU's buffers are built for)
    /// and blocks default to `block_size`.
    pub fn start<F>(
        cpu: Box<dyn Engine>,
        max_haystack: usize,
        block_size: usize,
        setup: F,
    ) -> AutoEngine
    where
        F: FnOnce() -> Result<Box<dyn Engine>, SetupFailure> + Send + 'static,
    {
        let joined = Arc::new(Joined::default());
        let to_fill = Arc::clone(&joined);
        let handle =
            std::thread::Builder::new()
                .name("gpu set-up".into())
                .spawn(move || match setup() {
                    Ok(engine) => {
                        // The only writer: `set` cannot find it filled.
                        let _ = to_fill.gpu.set(engine);
                    }
                    Err(SetupFailure::Absent) => {}
                    Err(SetupFailure::Failed(why)) => to_fill.fail(why),
                });
        if let Err(e) = &handle {
            joined.fail(format!("cannot start a thread: {e}"));
        }
        AutoEngine {
            cpu,
            joined,
            setup: Mutex::new(handle.ok()),
            max_haystack,
            block_size,
            gpu_blocks: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            split: Mutex::default(),
        }
    }

    fn split_lock(&self) -> MutexGuard<'_, Split> {
        // Plain numbers: a panicking holder leaves them usable.
        self.split.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Each engine's blocks, bytes and figure so far.
    pub fn split(&self) -> Split {
        *self.split_lock()
    }

    /// The GPU engine, once set up.
    pub fn gpu(&self) -> Option<&dyn Engine> {
        self.joined.gpu.get().map(|g| g.as_ref())
    }

    /// Blocks searched so far: (by the GPU, in all).
    pub fn blocks(&self) -> (u64, u64) {
        (
            self.gpu_blocks.load(Ordering::Relaxed),
            self.blocks.load(Ordering::Relaxed),
        )
    }

    /// Waits for the set-up to end (for tests and for `Drop`).
    pub fn wait_for_setup(&self) {
        let handle = self
            .setup
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(h) = handle {
            // A panic in the set-up leaves the CPU engine alone.
            if h.join().is_err() {
                self.joined.fail("the GPU set-up panicked".into());
            }
        }
    }
}

/// The pool's memory under `--engine auto`: heap buffers until the GPU is
/// set up, then its staging memory (blocks read straight into memory the
/// GPU reads, as with `--engine gpu`); the heap buffers read before are
/// replaced as they come back to the pool.
struct AutoBuffers {
    joined: Arc<Joined>,
    /// Set when the staging memory refused a buffer: heap from then on.
    refused: AtomicBool,
}

impl AutoBuffers {
    fn staging(&self) -> Option<Arc<dyn BufferProvider>> {
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        self.joined.gpu.get().and_then(|g| g.buffer_provider())
    }
}

impl BufferProvider for AutoBuffers {
    fn describe(&self) -> String {
        "heap until a GPU is set up, then its staging memory".into()
    }

    /// Staging memory once the GPU offers it, else (and after it refused
    /// one) the heap: the GPU engine copies what lies there.
    fn allocate(&self, capacity: usize) -> Result<Box<dyn BlockMemory>, String> {
        if let Some(s) = self.staging() {
            match s.allocate(capacity) {
                Ok(b) => return Ok(b),
                Err(_) => self.refused.store(true, Ordering::Relaxed),
            }
        }
        Ok(Box::new(AlignedBuf::new(capacity)))
    }

    fn replaces(&self, buf: &dyn BlockMemory) -> bool {
        self.staging().is_some_and(|s| s.replaces(buf))
    }
}

impl Drop for AutoEngine {
    fn drop(&mut self) {
        self.wait_for_setup();
    }
}

impl Engine for AutoEngine {
    /// `cpu` until a GPU joins; then `cpu+<gpu> (N of M blocks on the GPU)`;
    /// `cpu (GPU unavailable: why)` when one exists but could not be used.
    fn name(&self) -> String {
        if let Some(g) = self.gpu() {
            let (on_gpu, all) = self.blocks();
            return format!(
                "{}+{} ({on_gpu} of {all} blocks on the GPU)",
                self.cpu.name(),
                g.name()
            );
        }
        match &*self.joined.failure() {
            Some(why) => format!("{} (GPU unavailable: {why})", self.cpu.name()),
            None => self.cpu.name(),
        }
    }

    fn search(&self, haystack: &[u8], out: &mut Vec<Hit>) -> Result<(), EngineError> {
        self.search_profiled(haystack, out, &StageClock::new())
    }

    fn search_profiled(
        &self,
        haystack: &[u8],
        out: &mut Vec<Hit>,
        clock: &StageClock,
    ) -> Result<(), EngineError> {
        self.blocks.fetch_add(1, Ordering::Relaxed);
        let len = haystack.len();
        if let Some(g) = self.gpu() {
            let ahead = {
                let mut split = self.split_lock();
                match split.choose(len) {
                    Choice::Gpu => {
                        let ahead = split.queued;
                        split.queued += len as u64;
                        split.in_flight += 1;
                        Some(ahead)
                    }
                    Choice::Cpu => None,
                }
            };
            if let Some(ahead) = ahead {
                let first = out.len();
                let started = Instant::now();
                let r = g.try_search_profiled(haystack, out, clock);
                let ns = started.elapsed().as_nanos() as f64;
                let mut split = self.split_lock();
                split.queued = split.queued.saturating_sub(len as u64);
                split.in_flight = split.in_flight.saturating_sub(1);
                match r {
                    Some(Ok(())) => {
                        split
                            .gpu
                            .record(len, ns / (ahead + len as u64).max(1) as f64);
                        self.gpu_blocks.fetch_add(1, Ordering::Relaxed);
                        return Ok(());
                    }
                    Some(Err(e)) => {
                        out.truncate(first);
                        return Err(e);
                    }
                    // Every slot busy: the CPU engine, here and now.
                    None => {}
                }
            }
        }
        let started = Instant::now();
        self.cpu.search_profiled(haystack, out, clock)?;
        let ns = started.elapsed().as_nanos() as f64;
        self.split_lock().cpu.record(len, ns / len.max(1) as f64);
        Ok(())
    }

    /// `cpu 61 blocks (244.0 MiB), gpu 3 blocks (12.0 MiB); calibrated on
    /// this image: cpu 0.310 ns/byte (3.00 GiB/s), gpu ...; each block to
    /// the engine expected to finish it sooner`.
    fn work_split(&self) -> Option<String> {
        let s = self.split();
        let shares = format!(
            "cpu {} blocks ({}), gpu {} blocks ({})",
            s.cpu.blocks,
            mib(s.cpu.bytes),
            s.gpu.blocks,
            mib(s.gpu.bytes)
        );
        if self.gpu().is_none() {
            return Some(format!(
                "{shares}: no GPU joined; cpu measured {}",
                figure(&s.cpu)
            ));
        }
        Some(format!(
            "{shares}; measured on this image: cpu {}, gpu {}; each block to the engine expected to finish it sooner (the GPU's queued bytes counted), 1 in {PROBE_EVERY} to the other to re-measure it",
            figure(&s.cpu),
            figure(&s.gpu)
        ))
    }

    fn closing_note(&self) -> Option<String> {
        let why = self.joined.failure().clone()?;
        Some(format!(
            "GPU engine unavailable ({why}); the CPU engine searched every block"
        ))
    }

    fn max_haystack_len(&self) -> Option<usize> {
        Some(self.max_haystack)
    }

    fn default_block_size(&self) -> usize {
        self.block_size
    }

    /// Enough for every thread, within the staging budget (the buffers
    /// become the GPU's pinned staging memory once it is set up).
    fn buffers_in_flight(&self, buffer_bytes: usize) -> Option<usize> {
        Some(super::ring_buffers(usize::MAX, buffer_bytes))
    }

    fn buffer_provider(&self) -> Option<Arc<dyn BufferProvider>> {
        Some(Arc::new(AutoBuffers {
            joined: Arc::clone(&self.joined),
            refused: AtomicBool::new(false),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuEngine;
    use crate::engine::naive::NaiveEngine;
    use crate::pattern::Pattern;
    use crate::source::Upgrading;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::time::Duration;

    /// `AutoEngine::start` with the CPU engine for [`patterns`].
    fn start<F>(setup: F) -> AutoEngine
    where
        F: FnOnce() -> Result<Box<dyn Engine>, SetupFailure> + Send + 'static,
    {
        AutoEngine::start(
            Box::new(CpuEngine::new(&patterns()).expect("cpu")),
            1 << 20,
            1 << 16,
            setup,
        )
    }

    fn patterns() -> Vec<Pattern> {
        [&b"\xFF\xD8\xFF"[..], b"PK\x03\x04", b"%PDF", b"\xD8\xFF"]
            .iter()
            .map(|b| Pattern::literal(b).expect("pattern"))
            .collect()
    }

    /// An "accelerator" for the tests: the naive engine behind a fixed
    /// number of slots, failing on request.
    struct Slots {
        inner: NaiveEngine,
        free: AtomicUsize,
        fail: bool,
    }

    impl Engine for Slots {
        fn name(&self) -> String {
            "gpu:test".into()
        }
        fn search(&self, haystack: &[u8], out: &mut Vec<Hit>) -> Result<(), EngineError> {
            self.inner.search(haystack, out)
        }
        fn try_search_profiled(
            &self,
            haystack: &[u8],
            out: &mut Vec<Hit>,
            _clock: &StageClock,
        ) -> Option<Result<(), EngineError>> {
            self.free
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .ok()?;
            let r = if self.fail {
                out.push(Hit { pos: 0, pattern: 0 });
                Err(EngineError::Device("lost".into()))
            } else {
                std::thread::sleep(Duration::from_millis(2));
                self.inner.search(haystack, out)
            };
            self.free.fetch_add(1, Ordering::AcqRel);
            Some(r)
        }
    }

    fn haystack(seed: u64) -> Vec<u8> {
        let mut rng = crate::synth::XorShift(seed | 1);
        (0..20_000)
            .map(|_| [0xFF, 0xD8, b'P', b'K', 3, 4, b'%', b'D', b'F', b'P'][rng.below(10) as usize])
            .collect()
    }

    #[test]
    fn blocks_go_to_the_gpu_once_set_up_and_every_result_is_exact() {
        let pats = patterns();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let auto = start(move || {
            // Set up only when the test says so.
            go_rx.recv().ok();
            Ok(Box::new(Slots {
                inner: NaiveEngine::new(&patterns()),
                free: AtomicUsize::new(1),
                fail: false,
            }) as Box<dyn Engine>)
        });
        let oracle = NaiveEngine::new(&pats);
        let check = |seed| {
            let h = haystack(seed);
            let (mut got, mut want) = (Vec::new(), Vec::new());
            auto.search(&h, &mut got).expect("search");
            oracle.search(&h, &mut want).expect("oracle");
            assert!(!want.is_empty());
            assert_eq!(got, want, "seed {seed}");
        };
        // Before the set-up ends: the CPU alone.
        for seed in 0..4 {
            check(seed);
        }
        assert_eq!(auto.blocks(), (0, 4));
        assert_eq!(auto.name(), "cpu");
        go_tx.send(()).expect("send");
        auto.wait_for_setup();
        assert!(auto.gpu().is_some());
        // Four threads, one GPU slot: the GPU takes some blocks, the CPU the
        // ones that find it busy; every result equals the oracle's.
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let check = &check;
                s.spawn(move || {
                    for seed in 0..25 {
                        check(100 + t * 100 + seed);
                    }
                });
            }
        });
        let (on_gpu, all) = auto.blocks();
        assert_eq!(all, 104);
        assert!((1..100).contains(&on_gpu), "{on_gpu} of {all} on the GPU");
        assert!(
            auto.name()
                .starts_with(&format!("cpu+gpu:test ({on_gpu} of 104")),
            "{}",
            auto.name()
        );
    }

    #[test]
    fn the_split_calibrates_then_sends_each_block_to_the_sooner_engine() {
        let mut s = Split::default();
        // The GPU's calibration blocks first (no more in flight than
        // samples wanted), then the CPU's.
        assert_eq!(s.choose(1000), Choice::Gpu);
        s.in_flight = 2;
        assert_eq!(s.choose(1000), Choice::Cpu, "two calibrating already");
        s.in_flight = 0;
        s.gpu.record(1000, 4.0);
        assert_eq!(s.choose(1000), Choice::Gpu);
        s.gpu.record(1000, 2.0);
        assert_eq!(s.choose(1000), Choice::Cpu, "the CPU is not measured yet");
        s.cpu.record(1000, 1.0);
        // The lowest calibration sample counts: GPU 2 ns/byte, CPU 1.
        assert_eq!(s.gpu.ns_per_byte, Some(2.0));
        assert_eq!(s.choose(1000), Choice::Cpu);
        // A faster GPU wins while its queue is short, not behind a long one.
        s.gpu.ns_per_byte = Some(0.25);
        assert_eq!(s.choose(1000), Choice::Gpu);
        s.queued = 3000;
        assert_eq!(s.choose(1000), Choice::Cpu);
        s.queued = 0;
        // One decided block in PROBE_EVERY goes to the slower engine.
        let mut to_cpu = 0;
        for _ in 0..PROBE_EVERY * 4 {
            if s.choose(1000) == Choice::Cpu {
                to_cpu += 1;
            }
        }
        assert_eq!(to_cpu, 4);
        // The lowest of the calibration samples, then a moving average: one
        // slow block moves it by 1/8.
        s.cpu.record(1000, 9.0);
        assert_eq!(s.cpu.ns_per_byte, Some(1.0));
        s.cpu.record(1000, 9.0);
        assert_eq!(s.cpu.ns_per_byte, Some(2.0));
        assert_eq!((s.cpu.blocks, s.cpu.bytes), (3, 3000));
    }

    /// A GPU whose staging memory hands out marked heap buffers, or refuses.
    struct StagedGpu(Arc<Upgrading>);

    impl Engine for StagedGpu {
        fn name(&self) -> String {
            "gpu:staged".into()
        }
        fn search(&self, _: &[u8], _: &mut Vec<Hit>) -> Result<(), EngineError> {
            Ok(())
        }
        fn buffer_provider(&self) -> Option<Arc<dyn BufferProvider>> {
            Some(self.0.clone())
        }
    }

    #[test]
    fn blocks_are_read_into_the_gpus_memory_once_it_is_set_up() {
        for refuse in [false, true] {
            let staged = Arc::new(Upgrading {
                better: true.into(),
                refuse,
                made: Mutex::default(),
            });
            let gpu_memory = staged.clone();
            let (go_tx, go_rx) = mpsc::channel::<()>();
            let auto = start(move || {
                go_rx.recv().ok();
                Ok(Box::new(StagedGpu(gpu_memory)) as Box<dyn Engine>)
            });
            let provider = auto.buffer_provider().expect("a provider");
            let heap = provider.allocate(4096).expect("heap");
            assert!(!provider.replaces(heap.as_ref()), "no GPU yet");
            go_tx.send(()).expect("send");
            auto.wait_for_setup();
            let next = provider.allocate(4096).expect("a buffer");
            let made = staged.made.lock().unwrap().clone();
            if refuse {
                // Refused once: the heap, and nothing is replaced any more.
                assert!(made.is_empty());
                assert!(!provider.replaces(heap.as_ref()));
            } else {
                assert_eq!(made, vec![next.as_slice().as_ptr() as usize]);
                assert!(provider.replaces(heap.as_ref()));
                assert!(!provider.replaces(next.as_ref()));
            }
        }
    }

    #[test]
    fn a_failing_gpu_returns_the_error_with_nothing_appended() {
        let auto = start(move || {
            Ok(Box::new(Slots {
                inner: NaiveEngine::new(&patterns()),
                free: AtomicUsize::new(1),
                fail: true,
            }) as Box<dyn Engine>)
        });
        auto.wait_for_setup();
        let mut out = vec![Hit { pos: 7, pattern: 1 }];
        let r = auto.search(&haystack(1), &mut out);
        assert!(matches!(r, Err(EngineError::Device(_))), "{r:?}");
        assert_eq!(out, vec![Hit { pos: 7, pattern: 1 }]);
    }

    #[test]
    fn a_gpu_that_cannot_be_set_up_leaves_the_cpu_and_says_why_unless_absent() {
        let pats = patterns();
        for (failure, name) in [
            (SetupFailure::Absent, "cpu".to_string()),
            (
                SetupFailure::Failed("too many patterns".into()),
                "cpu (GPU unavailable: too many patterns)".to_string(),
            ),
        ] {
            let auto = start(move || Err(failure));
            auto.wait_for_setup();
            assert!(auto.gpu().is_none());
            assert_eq!(auto.name(), name);
            let note = auto.closing_note();
            assert_eq!(note.is_some(), name != "cpu", "{note:?}");
            assert!(note.is_none_or(|n| n.contains("too many patterns")));
            let h = haystack(3);
            let (mut got, mut want) = (Vec::new(), Vec::new());
            auto.search(&h, &mut got).expect("search");
            NaiveEngine::new(&pats)
                .search(&h, &mut want)
                .expect("oracle");
            assert_eq!(got, want);
            assert_eq!(auto.blocks(), (0, 1));
        }
        // A set-up that panics: the CPU engine, and the reason.
        let auto = start(|| panic!("driver bug"));
        auto.wait_for_setup();
        assert_eq!(
            auto.name(),
            "cpu (GPU unavailable: the GPU set-up panicked)"
        );
    }
}
