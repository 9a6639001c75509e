//! The scan pipeline: image → blocks → engine → one ordered match stream.
//!
//! ```text
//!  reader thread ──(bounded queue of blocks)──▶ N worker threads ──(results)──▶ merger (caller's thread)
//!  fills pooled buffers                          engine.search(block)             reorders by block index,
//!                                                keeps hits the block owns        hands matches to the sink
//! ```
//!
//! This is the only place that knows blocks overlap. Block `i` is searched
//! over its owned bytes plus `overlap` bytes of lookahead, and keeps exactly
//! the hits that *start* in its owned bytes: a match crossing a seam is seen
//! whole by the block where it starts and discarded by no one else, so it is
//! reported once. Both engines go through this logic.
//!
//! Memory is bounded by the buffer pool (`threads + queue + 2` blocks) plus
//! the matches of the blocks in flight, whatever the image size: a worker
//! searches a block only while it is within [`ReorderWindow`] blocks of the
//! next one the merger delivers, so results waiting to be put in order stay
//! as few however long one block takes. If the
//! primary engine fails with a device error, that block and every later one
//! are searched by the fallback engine, with one warning: nothing is lost.
//!
//! The pool's buffers come from the primary engine when it offers memory it
//! searches without copying (the GPU engine's staging buffers): blocks are
//! then read straight into it, by DMA with `O_DIRECT` backends, and the
//! fallback engine and the sink see the same buffers. A [`StageClock`]
//! records how long reading, upload, compute and read-back were busy and how
//! many bytes the CPU copied on the way ([`ScanStats::stages`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::engine::{Engine, EngineError, Hit, PatternId, Stage, StageClock, StageTimes};
use crate::source::{
    Block, BlockPlan, BlockSpec, BufferPool, DIRECT_ALIGN, Delivery, Image, IoMode, SourceError,
    open_reader,
};

/// A match in the image: `pattern` occurs at absolute byte `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Match {
    pub offset: u64,
    pub pattern: PatternId,
}

/// The engines' block sizes, re-exported where scans are configured.
pub use crate::engine::{CPU_BLOCK_SIZE, DEFAULT_BLOCK_SIZE};

/// The longest haystack the engines are built for: a block of `block_size`
/// bytes (0: the engine's default, [`DEFAULT_BLOCK_SIZE`] at most) and its
/// overlap.
pub fn haystack_len(block_size: usize, overlap: usize) -> usize {
    let bs = if block_size == 0 {
        DEFAULT_BLOCK_SIZE
    } else {
        block_size
    };
    bs.saturating_add(overlap)
}

/// Settings of one scan.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    /// Bytes per block; 0: the engine's default
    /// ([`crate::engine::Engine::default_block_size`]).
    pub block_size: usize,
    pub io: IoMode,
    /// Worker threads searching blocks (0 = all cores).
    pub threads: usize,
    /// Shown the owned bytes of every block, by the worker that searched
    /// it, while the block is in memory (a GPU's staging memory too: it is
    /// host memory imported into Vulkan, read by the CPU like any other).
    pub observer: Option<Arc<dyn BlockObserver>>,
    /// The image is read again after the scan (a carving): `direct` and
    /// `uring` read through the page cache ([`crate::source::open_reader`]).
    pub read_again: bool,
}

/// Something that looks at the image's bytes as the scan passes them (the
/// carver's fragment searches keep a summary instead of reading the image
/// again): called from the scan's worker threads, blocks in any order,
/// each block once.
pub trait BlockObserver: Send + Sync + std::fmt::Debug {
    /// `owned` are the bytes the block at image offset `offset` owns.
    fn observe(&self, offset: u64, owned: &[u8]);
}

impl Default for ScanOptions {
    fn default() -> ScanOptions {
        ScanOptions {
            block_size: 0,
            io: IoMode::Buffered,
            threads: 0,
            observer: None,
            read_again: false,
        }
    }
}

/// What a scan measured.
#[derive(Clone, Debug, Default)]
pub struct ScanStats {
    pub bytes: u64,
    pub blocks: u64,
    pub matches: u64,
    pub wall: Duration,
    /// Time during which a read was in progress (not waiting for free
    /// buffers or queue space; io_uring: from submission to completion;
    /// zero for mmap, whose pages are read when the engine touches them).
    pub read: Duration,
    /// Engine time summed over workers.
    pub search: Duration,
    /// Time the merger spent in the sink.
    pub sink: Duration,
    pub io_backend: String,
    pub engine: String,
    /// How the blocks were shared between engines, and why (`--engine auto`).
    pub engine_split: Option<String>,
    pub threads: usize,
    pub block_size: usize,
    pub pool_bytes: usize,
    /// What the blocks were read into: the pool's memory (`heap`, the GPU
    /// engine's staging memory), or `mapping` for mmap.
    pub buffers: String,
    /// Busy time per stage, and bytes the CPU copied between the disk (or
    /// page cache) and the memory the engine searched (reader and engine
    /// copies; see [`crate::engine::profile`]).
    pub stages: StageTimes,
    /// Blocks searched by the fallback engine after a device failure.
    pub fallback_blocks: u64,
}

impl ScanStats {
    /// Bytes copied by the CPU per byte scanned (0 when blocks go from the
    /// disk to the engine's memory by DMA only).
    pub fn host_copies_per_byte(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.stages.host_copied as f64 / self.bytes as f64
        }
    }

    /// `stage`'s busy time as a fraction of the wall time.
    pub fn busy_fraction(&self, stage: Stage) -> f64 {
        self.stages.busy(stage).as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }

    /// Time the stages spent overlapping one another, as a fraction of the
    /// wall time (see [`StageTimes::overlap`]): 0 for a pipeline that runs
    /// one stage at a time.
    pub fn overlap_fraction(&self) -> f64 {
        self.stages.overlap().as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }
}

/// Why a scan stopped.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("search failed at block offset {offset}: {source}")]
    Engine { offset: u64, source: EngineError },
    #[error("{0}")]
    Sink(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// Engines for a scan: the primary, and where to go if it fails mid-scan.
pub struct Engines<'a> {
    pub primary: &'a dyn Engine,
    pub fallback: Option<&'a dyn Engine>,
}

/// Receives the match stream, block by block, in ascending offset order.
pub trait MatchSink {
    /// `matches` are the matches starting in `block`'s owned bytes, sorted by (offset, pattern).
    fn block(&mut self, block: &BlockSpec, matches: &[Match]) -> Result<(), String>;
}

impl<F: FnMut(&BlockSpec, &[Match]) -> Result<(), String>> MatchSink for F {
    fn block(&mut self, block: &BlockSpec, matches: &[Match]) -> Result<(), String> {
        self(block, matches)
    }
}

/// Effective block size: requested size (0: the engine's default), capped
/// so a block plus its overlap fits the engine's largest haystack, aligned
/// for `O_DIRECT`.
pub fn effective_block_size(
    requested: usize,
    overlap: usize,
    engine: &dyn Engine,
) -> Result<usize, SourceError> {
    let requested = if requested == 0 {
        engine.default_block_size()
    } else {
        requested
    };
    if requested == 0 || !requested.is_multiple_of(DIRECT_ALIGN) {
        return Err(SourceError::Settings(format!(
            "block size {requested} must be a positive multiple of {DIRECT_ALIGN} bytes"
        )));
    }
    let mut bs = requested;
    if let Some(max) = engine.max_haystack_len() {
        bs = bs.min(max.saturating_sub(overlap));
    }
    Ok((bs / DIRECT_ALIGN * DIRECT_ALIGN).max(DIRECT_ALIGN))
}

/// Keeps the hits `block` owns (those starting before `owned_len`) as absolute matches.
/// This is the pipeline's one boundary rule.
fn owned_matches(spec: &BlockSpec, hits: &[Hit], out: &mut Vec<Match>) {
    out.extend(
        hits.iter()
            .filter(|h| h.pos < spec.owned_len)
            .map(|h| Match {
                offset: spec.offset + h.pos as u64,
                pattern: h.pattern,
            }),
    );
}

struct BlockResult {
    spec: BlockSpec,
    matches: Result<Vec<Match>, ScanError>,
}

/// A sink returning this error ends the scan early, successfully (a carver
/// that has decided everything it owns).
pub const STOP_SCAN: &str = "\u{0}stop scan";

/// Scans `image` for the engine's patterns; `overlap` = longest pattern − 1.
/// `progress` is called with the bytes done after each block; `warn` with one-line warnings.
pub fn scan(
    image: &Image,
    engines: Engines<'_>,
    overlap: usize,
    opts: &ScanOptions,
    sink: &mut dyn MatchSink,
    progress: &mut dyn FnMut(u64),
    warn: &mut dyn FnMut(String),
) -> Result<ScanStats, ScanError> {
    scan_range(
        image,
        engines,
        overlap,
        opts,
        0..image.len(),
        sink,
        progress,
        warn,
    )
}

/// [`scan`] over the slice `range` of the image only: the blocks own the
/// matches that start in it, and the last block looks `overlap` bytes past
/// its end like any block (the seam rule). `range.start` must be a multiple
/// of 4096. Progress counts bytes from `range.start`.
#[allow(clippy::too_many_arguments)]
pub fn scan_range(
    image: &Image,
    engines: Engines<'_>,
    overlap: usize,
    opts: &ScanOptions,
    range: std::ops::Range<u64>,
    sink: &mut dyn MatchSink,
    progress: &mut dyn FnMut(u64),
    warn: &mut dyn FnMut(String),
) -> Result<ScanStats, ScanError> {
    let started = Instant::now();
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.threads
    };
    let block_size = effective_block_size(opts.block_size, overlap, engines.primary)?;
    let plan = BlockPlan::range(image.len(), block_size, overlap, range.start, range.end)?;
    let queue = threads + 1;
    // A container decodes long reads on the scan's threads.
    image.media().use_threads(threads);
    let mut reader = open_reader(image, opts.io, opts.read_again, warn)?;
    let io_backend = reader.name().to_string();
    let delivery = reader.delivery();
    let pool = block_pool(
        pool_size(&plan, threads + queue + 2, engines.primary),
        plan.buffer_capacity(),
        delivery,
        engines.primary,
        warn,
    );
    let observer = opts.observer.as_deref();
    let clock = StageClock::new();

    let stop = AtomicBool::new(false);
    let use_fallback = AtomicBool::new(false);
    let fallback_blocks = AtomicU64::new(0);
    let search_nanos = AtomicU64::new(0);
    let warnings: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let (block_tx, block_rx) = sync_channel::<Block>(queue);
    let block_rx = Arc::new(Mutex::new(block_rx));
    let (result_tx, result_rx) = sync_channel::<BlockResult>(queue + threads);
    let window = ReorderWindow::new((queue + 2 * threads) as u64);

    let mut stats = ScanStats {
        io_backend: io_backend.clone(),
        threads,
        block_size,
        pool_bytes: pool.bytes(),
        buffers: if delivery == Delivery::Mapped {
            "mapping".into()
        } else {
            pool.memory().to_string()
        },
        ..ScanStats::default()
    };

    let outcome = std::thread::scope(|s| -> Result<(), ScanError> {
        // Reader.
        let reader_handle = {
            let stop = &stop;
            let pool = &pool;
            let plan = &plan;
            let clock = &clock;
            s.spawn(move || -> Result<(), SourceError> {
                let r = reader.read_blocks(plan, pool, &mut |block| {
                    if let Some((started, done)) = block.read_interval() {
                        clock.add_interval(Stage::Read, started, done);
                    }
                    if delivery == Delivery::Copied {
                        clock.add_host_copy(block.spec.data_len as u64);
                    }
                    !stop.load(Ordering::Relaxed) && block_tx.send(block).is_ok()
                });
                drop(block_tx);
                r
            })
        };
        // Workers.
        for _ in 0..threads {
            let rx = Arc::clone(&block_rx);
            let tx = result_tx.clone();
            let (stop, use_fallback, fallback_blocks, search_nanos, warnings) = (
                &stop,
                &use_fallback,
                &fallback_blocks,
                &search_nanos,
                &warnings,
            );
            let engines = &engines;
            let clock = &clock;
            let window = &window;
            s.spawn(move || {
                let mut hits: Vec<Hit> = Vec::new();
                loop {
                    let block = {
                        let guard = rx.lock().unwrap_or_else(|p| p.into_inner());
                        match guard.recv() {
                            Ok(b) => b,
                            Err(_) => break,
                        }
                    };
                    if stop.load(Ordering::Relaxed) {
                        continue;
                    }
                    window.wait_for(block.spec.index);
                    let t = Instant::now();
                    hits.clear();
                    let matches = search_block(
                        &block,
                        engines,
                        &mut hits,
                        use_fallback,
                        fallback_blocks,
                        warnings,
                        clock,
                    );
                    search_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    let spec = block.spec;
                    if let Some(o) = observer
                        && let Some(owned) = block.bytes().get(..spec.owned_len)
                    {
                        o.observe(spec.offset, owned);
                    }
                    drop(block); // the buffer goes back to the pool before we wait on the merger
                    if tx.send(BlockResult { spec, matches }).is_err() {
                        break;
                    }
                }
            });
        }
        drop(result_tx);

        // Merger: deliver blocks in order.
        let merged = merge(&result_rx, plan.len(), sink, progress, &mut stats, &window);
        window.close();
        if !matches!(merged, Ok(false)) {
            stop.store(true, Ordering::Relaxed);
            // Unblock workers and the reader: drain what remains.
            while result_rx.recv().is_ok() {}
        }
        let read = reader_handle
            .join()
            .map_err(|_| ScanError::Internal("reader thread panicked".into()))?;
        if merged? {
            // Stopped early on purpose: a read error after the stop is moot.
            return Ok(());
        }
        read?;
        Ok(())
    });
    for w in warnings.into_inner().unwrap_or_else(|p| p.into_inner()) {
        warn(w);
    }
    if let Some(n) = engines.primary.closing_note() {
        warn(n);
    }
    outcome?;
    // (At the end: `--engine auto`'s name says whether a GPU joined.)
    stats.engine = engines.primary.name();
    stats.engine_split = engines.primary.work_split();
    stats.search = Duration::from_nanos(search_nanos.load(Ordering::Relaxed));
    stats.fallback_blocks = fallback_blocks.load(Ordering::Relaxed);
    stats.stages = clock.times();
    stats.read = stats.stages.busy(Stage::Read);
    stats.wall = started.elapsed();
    Ok(stats)
}

/// The reader's buffers: the engine's own memory when it offers some and
/// the reader fills buffers (not for mmap, whose blocks borrow the mapping),
/// else the heap. A provider that fails leaves the heap, with a warning.
/// How many block buffers the scan keeps: `wanted` (its threads and
/// queue), no more than blocks (a staging pool pins each one as it is
/// made: a 64 KiB image took 35 imported 8 MiB buffers on an H200), and no
/// more than a GPU's ring, what its slots keep in flight within a memory
/// budget (issue 38: 35 pinned 64 MiB buffers on 16 cores).
fn pool_size(plan: &BlockPlan, wanted: usize, engine: &dyn Engine) -> usize {
    let blocks = usize::try_from(plan.len()).map_or(usize::MAX, |n| n.max(1));
    let ring = engine
        .buffers_in_flight(plan.buffer_capacity())
        .unwrap_or(usize::MAX);
    wanted.min(blocks).min(ring).max(1)
}

fn block_pool(
    count: usize,
    capacity: usize,
    delivery: Delivery,
    engine: &dyn Engine,
    warn: &mut dyn FnMut(String),
) -> BufferPool {
    if delivery != Delivery::Mapped
        && let Some(provider) = engine.buffer_provider()
    {
        match BufferPool::with_provider(count, capacity, provider) {
            Ok(pool) => return pool,
            Err(e) => warn(format!(
                "cannot read blocks into the engine's memory ({e}); reading into the heap, the engine copies each block"
            )),
        }
    }
    BufferPool::new(count, capacity)
}

fn search_block(
    block: &Block,
    engines: &Engines<'_>,
    hits: &mut Vec<Hit>,
    use_fallback: &AtomicBool,
    fallback_blocks: &AtomicU64,
    warnings: &Mutex<Vec<String>>,
    clock: &StageClock,
) -> Result<Vec<Match>, ScanError> {
    let spec = block.spec;
    let engine_error = |source| ScanError::Engine {
        offset: spec.offset,
        source,
    };
    let mut run_fallback = use_fallback.load(Ordering::Relaxed);
    if !run_fallback {
        match engines.primary.search_profiled(block.bytes(), hits, clock) {
            Ok(()) => {}
            Err(EngineError::Device(msg)) if engines.fallback.is_some() => {
                if !use_fallback.swap(true, Ordering::Relaxed) {
                    warnings.lock().unwrap_or_else(|p| p.into_inner()).push(format!(
                        "{} failed at byte offset {} ({msg}); this and the remaining blocks are searched on the CPU",
                        engines.primary.name(),
                        spec.offset
                    ));
                }
                hits.clear();
                run_fallback = true;
            }
            Err(e) => return Err(engine_error(e)),
        }
    }
    if run_fallback {
        let fb = engines
            .fallback
            .ok_or_else(|| ScanError::Internal("no fallback engine".into()))?;
        fb.search_profiled(block.bytes(), hits, clock)
            .map_err(engine_error)?;
        fallback_blocks.fetch_add(1, Ordering::Relaxed);
    }
    let mut matches = Vec::with_capacity(hits.len());
    owned_matches(&spec, hits, &mut matches);
    Ok(matches)
}

/// How far ahead of the merger the workers may search: block `i` waits
/// while `i >= next + size`, `next` being the first block not yet
/// delivered. The block `next` never waits, so the scan always moves; the
/// results the merger holds out of order are fewer than `size`.
struct ReorderWindow {
    next: Mutex<u64>,
    moved: Condvar,
    size: u64,
}

impl ReorderWindow {
    fn new(size: u64) -> Self {
        ReorderWindow {
            next: Mutex::new(0),
            moved: Condvar::new(),
            size: size.max(1),
        }
    }

    /// Waits until block `index` is inside the window.
    fn wait_for(&self, index: u64) {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        while index >= next.saturating_add(self.size) {
            next = self.moved.wait(next).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Blocks before `next` have been delivered.
    fn delivered(&self, next: u64) {
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) = next;
        self.moved.notify_all();
    }

    /// The merger is done (or stopped): no worker waits any more.
    fn close(&self) {
        self.delivered(u64::MAX);
    }
}

fn merge(
    rx: &Receiver<BlockResult>,
    total: u64,
    sink: &mut dyn MatchSink,
    progress: &mut dyn FnMut(u64),
    stats: &mut ScanStats,
    window: &ReorderWindow,
) -> Result<bool, ScanError> {
    let mut pending: BTreeMap<u64, BlockResult> = BTreeMap::new();
    let mut next = 0u64;
    while next < total {
        let Ok(r) = rx.recv() else {
            // Workers ended early: the reader failed; its error is reported by the caller.
            return Ok(false);
        };
        pending.insert(r.spec.index, r);
        while let Some(r) = pending.remove(&next) {
            let matches = r.matches?;
            let t = Instant::now();
            match sink.block(&r.spec, &matches) {
                Ok(()) => {}
                Err(e) if e == STOP_SCAN => {
                    stats.sink += t.elapsed();
                    return Ok(true);
                }
                Err(e) => return Err(ScanError::Sink(e)),
            }
            stats.sink += t.elapsed();
            stats.bytes += r.spec.owned_len as u64;
            stats.blocks += 1;
            stats.matches += matches.len() as u64;
            progress(stats.bytes);
            next += 1;
            window.delivered(next);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineError, Hit};

    /// An engine with a GPU's defaults: larger blocks, a largest haystack.
    struct Wide;
    impl Engine for Wide {
        fn name(&self) -> String {
            "wide".into()
        }
        fn search(&self, _haystack: &[u8], _out: &mut Vec<Hit>) -> Result<(), EngineError> {
            Ok(())
        }
        fn max_haystack_len(&self) -> Option<usize> {
            Some((6 << 20) + 2)
        }
        fn default_block_size(&self) -> usize {
            DEFAULT_BLOCK_SIZE
        }
    }

    #[test]
    fn block_size_zero_is_the_engines_default() {
        let pattern = crate::pattern::Pattern::literal(b"abc").unwrap();
        let cpu = crate::engine::cpu::CpuEngine::new(&[pattern]).unwrap();
        assert_eq!(effective_block_size(0, 2, &cpu).unwrap(), CPU_BLOCK_SIZE);
        assert_eq!(effective_block_size(1 << 20, 2, &cpu).unwrap(), 1 << 20);
        assert!(effective_block_size(1000, 2, &cpu).is_err());
        // A GPU's default, capped to what its buffers hold with the overlap.
        assert_eq!(effective_block_size(0, 2, &Wide).unwrap(), 6 << 20);
        assert_eq!(effective_block_size(0, 0, &Wide).unwrap(), 6 << 20);
        // Buffers are built for the larger default when none is given.
        assert_eq!(haystack_len(0, 2), DEFAULT_BLOCK_SIZE + 2);
        assert_eq!(haystack_len(1 << 20, 2), (1 << 20) + 2);
        const { assert!(CPU_BLOCK_SIZE <= DEFAULT_BLOCK_SIZE) };
    }

    /// One block that takes long to search does not let the others pile up
    /// out of order: workers wait within the reorder window.
    #[test]
    fn a_slow_block_holds_the_others_within_the_window() {
        use std::sync::atomic::AtomicI64;
        /// Sleeps on its first search; counts searches begun but not
        /// delivered (the merger's sink lowers the count).
        #[derive(Default)]
        struct Slow {
            calls: AtomicU64,
            outstanding: Arc<AtomicI64>,
            most: AtomicI64,
        }
        impl Engine for Slow {
            fn name(&self) -> String {
                "slow".into()
            }
            fn search(&self, _h: &[u8], _out: &mut Vec<Hit>) -> Result<(), EngineError> {
                let now = self.outstanding.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(now, Ordering::SeqCst);
                if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    std::thread::sleep(Duration::from_millis(300));
                }
                Ok(())
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img.dd");
        std::fs::write(&path, vec![0u8; 256 * 4096]).unwrap();
        let image = Image::open(&path).unwrap();
        let engine = Slow::default();
        let outstanding = Arc::clone(&engine.outstanding);
        let mut sink = |_: &BlockSpec, _: &[Match]| {
            outstanding.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        };
        let threads = 4;
        let opts = ScanOptions {
            block_size: 4096,
            threads,
            ..ScanOptions::default()
        };
        let stats = scan(
            &image,
            Engines {
                primary: &engine,
                fallback: None,
            },
            0,
            &opts,
            &mut sink,
            &mut |_| {},
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(stats.blocks, 256);
        let queue = threads + 1;
        let window = (queue + 2 * threads) as i64;
        let most = engine.most.load(Ordering::SeqCst);
        assert!(
            most <= window + 1,
            "{most} blocks searched and waiting for the slow one (window {window})"
        );
    }
}
