//! Where a scan's time goes: how long each stage of the pipeline was busy,
//! and how many bytes the CPU copied on the way from the disk to the engine.
//!
//! A block goes through up to four stages: **read** (the reader fills a
//! buffer), **upload** (the bytes reach the memory the engine searches: a
//! copy by the CPU into an engine buffer, a DMA copy to device memory),
//! **compute** (the search itself) and **read-back** (the hits come back to
//! the host). Several blocks are in flight at once, so stages overlap; for
//! each stage a [`StageClock`] keeps two figures:
//!
//! * **busy**: wall time during which at least one block was in the stage
//!   (a union of intervals): `busy / wall` is the stage's busy fraction, and
//!   busy fractions that add up to more than 1 show the overlap;
//! * **summed**: time summed over blocks (what workers spent in the stage).
//!
//! and for the pipeline as a whole, the time during which any stage was busy:
//! the busy times add up to more than that exactly by the time stages spent
//! overlapping one another ([`StageTimes::overlap`]).
//!
//! The clock is shared by the reader, the workers and the engine of one
//! scan; it knows nothing of devices or files.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A stage of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Read,
    Upload,
    Compute,
    Readback,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Read, Stage::Upload, Stage::Compute, Stage::Readback];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Read => "read",
            Stage::Upload => "upload",
            Stage::Compute => "compute",
            Stage::Readback => "readback",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Intervals kept per stage before they are merged (sorted and joined where
/// they overlap): bounds memory on long scans without changing the union.
const COMPACT_AT: usize = 4096;

#[derive(Default)]
struct Track {
    /// Intervals the stage was occupied; may overlap, in any order.
    intervals: Vec<(Instant, Instant)>,
    /// Length of `intervals` after the last merge.
    merged: usize,
    summed: Duration,
}

impl Track {
    fn push(&mut self, start: Instant, end: Instant) {
        self.summed += end.saturating_duration_since(start);
        self.intervals.push((start, end.max(start)));
        if self.intervals.len() >= (2 * self.merged).max(COMPACT_AT) {
            self.merge();
        }
    }

    /// Sorts and joins the intervals: same union, fewer intervals.
    fn merge(&mut self) {
        union(&mut self.intervals);
        self.merged = self.intervals.len();
    }
}

/// Sorts and joins `intervals` in place; returns the length of their union.
fn union(intervals: &mut Vec<(Instant, Instant)>) -> Duration {
    intervals.sort_unstable();
    let mut out: Vec<(Instant, Instant)> = Vec::with_capacity(intervals.len());
    for &(s, e) in intervals.iter() {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    *intervals = out;
    intervals
        .iter()
        .map(|&(s, e)| e.saturating_duration_since(s))
        .sum()
}

/// Busy time per stage and host copies of one scan; see the module docs.
pub struct StageClock {
    stages: [Mutex<Track>; 4],
    host_copied: AtomicU64,
}

impl Default for StageClock {
    fn default() -> StageClock {
        StageClock::new()
    }
}

impl std::fmt::Debug for StageClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageClock")
            .field("times", &self.times())
            .finish()
    }
}

impl StageClock {
    pub fn new() -> StageClock {
        StageClock {
            stages: Default::default(),
            host_copied: AtomicU64::new(0),
        }
    }

    fn lock(&self, stage: Stage) -> std::sync::MutexGuard<'_, Track> {
        self.stages[stage.index()]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// A block enters `stage` now; it leaves when the guard is dropped.
    pub fn enter(&self, stage: Stage) -> Busy<'_> {
        Busy {
            clock: self,
            stage,
            start: Instant::now(),
        }
    }

    /// A block was in `stage` from `start` to `end`, known after the fact
    /// (a device's own timestamps, placed on the host's clock).
    pub fn add_interval(&self, stage: Stage, start: Instant, end: Instant) {
        self.lock(stage).push(start, end);
    }

    /// Counts bytes copied by the CPU on their way to the engine.
    pub fn add_host_copy(&self, bytes: u64) {
        self.host_copied.fetch_add(bytes, Ordering::Relaxed);
    }

    /// What the clock measured so far (guards still alive are not counted).
    pub fn times(&self) -> StageTimes {
        let mut t = StageTimes {
            host_copied: self.host_copied.load(Ordering::Relaxed),
            ..StageTimes::default()
        };
        let mut all = Vec::new();
        for stage in Stage::ALL {
            let mut track = self.lock(stage);
            track.merge();
            t.busy[stage.index()] = union(&mut track.intervals.clone());
            t.summed[stage.index()] = track.summed;
            all.extend_from_slice(&track.intervals);
        }
        t.any = union(&mut all);
        t
    }
}

/// A block's stay in a stage; see [`StageClock::enter`].
#[must_use = "the stage ends when this guard is dropped"]
pub struct Busy<'a> {
    clock: &'a StageClock,
    stage: Stage,
    start: Instant,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.clock
            .add_interval(self.stage, self.start, Instant::now());
    }
}

/// Busy and summed time per stage, and bytes copied by the CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes {
    busy: [Duration; 4],
    summed: [Duration; 4],
    /// Wall time during which at least one stage was busy.
    any: Duration,
    /// Bytes the CPU copied between the disk (or page cache) and the memory
    /// the engine searches: the reader's copies and the engine's own.
    pub host_copied: u64,
}

impl StageTimes {
    /// Wall time during which at least one block was in `stage`.
    pub fn busy(&self, stage: Stage) -> Duration {
        self.busy[stage.index()]
    }

    /// Time summed over blocks (and threads) in `stage`.
    pub fn summed(&self, stage: Stage) -> Duration {
        self.summed[stage.index()]
    }

    /// Wall time during which at least one stage was busy.
    pub fn any(&self) -> Duration {
        self.any
    }

    /// Time the stages spent overlapping one another: the busy times of
    /// all stages minus the time any was busy (a moment when k stages are
    /// busy counts k − 1 times). Zero when nothing ran at the same time.
    pub fn overlap(&self) -> Duration {
        self.busy.iter().sum::<Duration>().saturating_sub(self.any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_is_the_union_and_summed_the_sum() {
        let clock = StageClock::new();
        let a = clock.enter(Stage::Compute);
        std::thread::sleep(Duration::from_millis(30));
        let b = clock.enter(Stage::Compute);
        std::thread::sleep(Duration::from_millis(30));
        drop(a);
        std::thread::sleep(Duration::from_millis(30));
        drop(b);
        clock.add_host_copy(10);
        clock.add_host_copy(5);
        let t = clock.times();
        let (busy, summed) = (t.busy(Stage::Compute), t.summed(Stage::Compute));
        // Union: ~90 ms; sum: ~60 + ~60 ms.
        assert!(busy >= Duration::from_millis(90), "{busy:?}");
        assert!(summed >= Duration::from_millis(120), "{summed:?}");
        assert!(
            summed > busy + Duration::from_millis(20),
            "{summed:?} {busy:?}"
        );
        assert_eq!(t.busy(Stage::Read), Duration::ZERO);
        assert_eq!(t.busy(Stage::Upload), Duration::ZERO);
        assert_eq!(t.any(), t.busy(Stage::Compute));
        assert_eq!(t.overlap(), Duration::ZERO);
        assert_eq!(t.host_copied, 15);
        // Intervals known after the fact, in any order, merged into the union.
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        for (a, b) in [(50, 60), (0, 10), (5, 20), (100, 101), (55, 58)] {
            clock.add_interval(Stage::Upload, ms(a), ms(b));
        }
        let t = clock.times();
        assert_eq!(t.busy(Stage::Upload), Duration::from_millis(31));
        assert_eq!(t.summed(Stage::Upload), Duration::from_millis(39));
        // Read during part of an upload: the overlap is that part.
        clock.add_interval(Stage::Read, ms(15), ms(25));
        let t = clock.times();
        assert_eq!(t.busy(Stage::Read), Duration::from_millis(10));
        assert_eq!(t.overlap(), Duration::from_millis(5));
        // Many intervals: merged as they come, the union unchanged.
        for i in 0..10_000u64 {
            clock.add_interval(Stage::Readback, ms(i), ms(i + 2));
        }
        assert!(clock.lock(Stage::Readback).intervals.len() < 4096);
        let t = clock.times();
        assert_eq!(t.busy(Stage::Readback), Duration::from_millis(10_001));
        assert_eq!(t.summed(Stage::Readback), Duration::from_millis(20_000));
    }
}
