//! The snapshot trail of the fragment search: [`Trail`] records, as a picture
//! is decoded, where each restart interval / MCU row began ([`Snap`]s and the
//! marks between them), so that a join tried at a later split resumes decoding
//! from the last snapshot before it instead of from SOI.

use super::bits::Mark;
use super::capture_snaps;
use super::frame::History;

use crate::carve::validators::read::Src;

/// Where a [`Trail`] keeps snapshots: at every multiple of `grid` (window
/// offsets) over the last `span` bytes before the decode stopped, and at
/// the ext2/3 block-map boundaries of blocks of `block_map` bytes (and a
/// grid step before each): the splits the fragment search places, by where
/// the decode failed, and the boundaries it moves back by one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrailSpec {
    pub grid: u64,
    pub span: u64,
    pub block_map: Option<u64>,
}

/// Most block-map snapshots a trail keeps (the latest ones).
pub(super) const TRAIL_STICKY: usize = 4;

/// The splits a [`Trail`] keeps snapshots of at the ext2/3 block-map
/// boundaries (blocks of `bs` bytes) below `below`: a grid step before each
/// boundary and the boundary, those on the grid, ascending.
pub(super) fn block_map_splits(bs: u64, grid: u64, below: u64) -> impl Iterator<Item = u64> {
    crate::carve::geometry::block_map_boundaries(bs, below)
        .flat_map(move |b| [b.saturating_sub(grid), b])
        .filter(move |g| g.is_multiple_of(grid))
}

/// The snapshots a decode left behind ([`TrailSpec`]), each equal to what
/// a capture of that split takes ([`capture_snaps`], from the file's start
/// or resumed from a snapshot): the fragment search learns its splits only from where
/// the decode failed, and takes them from here instead of decoding the
/// file again. A progressive file's snapshots hold its coefficient history
/// as it was there: the trail keeps the history the decode ended with and
/// a log of the words changed since its oldest recent snapshot (undone to
/// answer), and a copy at each block-map snapshot. Bounded by the spec's
/// span (and the log by the blocks decoded in it).
#[derive(Debug)]
pub struct Trail {
    /// Bytes counted in `budget` while it lives ([`Trail::kept`]).
    pub(super) held: u64,
    pub(super) budget: Option<std::sync::Arc<TrailBudget>>,
    pub(super) spec: TrailSpec,
    /// The length of the window decoded (a trail answers only for the same
    /// window: where a window ends decides where its decode is cut).
    pub(super) window: u64,
    /// Settled snapshots of recent grid points, ascending, with the length
    /// of the history log when each was taken.
    pub(super) ring: std::collections::VecDeque<(Snap, usize)>,
    /// Settled snapshots at block-map boundaries, ascending (history set).
    pub(super) sticky: std::collections::VecDeque<Snap>,
    /// The latest boundary's state and log length: every grid point from
    /// `next` on (until a later boundary) gets it.
    pub(super) tail: Option<(Mark, usize)>,
    /// The tail's scan ends, once its scan has ended (until then, those of
    /// the scan being decoded).
    pub(super) tail_ends: Option<Vec<(u32, u64)>>,
    /// The lowest grid point not settled yet.
    pub(super) next: u64,
    /// Where the first boundary was: a split before it has no snapshot.
    pub(super) first: Option<u64>,
    /// History words as they were before an MCU changed them (component,
    /// block, word), oldest first; `log_base` entries were dropped before.
    pub(super) log: std::collections::VecDeque<(usize, usize, u64)>,
    pub(super) log_base: usize,
    /// The word the MCU being decoded may change, as it was before it.
    pub(super) pending: Option<(usize, usize, u64)>,
    /// The history the decode ended with.
    pub(super) history: History,
    /// False when a second frame began, or a scan's failure was a memo's
    /// answer: the trail then answers nothing.
    pub(super) valid: bool,
    /// Where the decode last went on after a memo's answer or from a memo's
    /// mark ([`Trail::resumed_at`]): the boundaries before it were not seen
    /// here, so no split below it is answered.
    pub(super) floor: u64,
}

/// The bytes held by one carving's trails kept on verdicts ([`Trail::kept`]),
/// at most [`MAX_TRAILS_HELD`]: a verdict waits in the stage and the
/// carver's look-ahead, and a progressive file's history is up to 8 MiB.
#[derive(Debug, Default)]
pub struct TrailBudget {
    held: std::sync::atomic::AtomicU64,
}

/// The most bytes one carving's kept trails hold together.
pub(super) const MAX_TRAILS_HELD: u64 = 64 << 20;

impl Drop for Trail {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.held
                .fetch_sub(self.held, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Trail {
    /// About the bytes it holds.
    pub fn bytes(&self) -> u64 {
        let history = |h: Option<&Vec<Vec<u64>>>| {
            h.iter()
                .flat_map(|h| h.iter())
                .map(|c| c.len() as u64 * 8)
                .sum::<u64>()
        };
        let snaps =
            (self.ring.len() + self.sticky.len() + 1) as u64 * std::mem::size_of::<Snap>() as u64;
        history(self.history.as_ref())
            + self
                .sticky
                .iter()
                .map(|s| history(s.history.as_deref()))
                .sum::<u64>()
            + self.log.len() as u64 * 24
            + snaps
    }

    /// The trail, to be kept on a verdict, when the trails `budget` holds
    /// leave room for it (else the search captures its snapshots by decoding).
    pub(super) fn kept(mut self, budget: &std::sync::Arc<TrailBudget>) -> Option<Self> {
        use std::sync::atomic::Ordering::Relaxed;
        let n = self.bytes();
        let before = budget.held.fetch_add(n, Relaxed);
        if before.saturating_add(n) > MAX_TRAILS_HELD {
            budget.held.fetch_sub(n, Relaxed);
            return None;
        }
        self.held = n;
        self.budget = Some(budget.clone());
        Some(self)
    }

    pub(super) fn new(spec: TrailSpec, window: u64) -> Self {
        Trail {
            held: 0,
            budget: None,
            spec: TrailSpec {
                grid: spec.grid.max(1),
                ..spec
            },
            window,
            ring: Default::default(),
            sticky: Default::default(),
            tail: None,
            tail_ends: None,
            next: 0,
            first: None,
            log: Default::default(),
            log_base: 0,
            pending: None,
            history: None,
            valid: true,
            floor: 0,
        }
    }

    /// The decode goes on from window offset `at` (a [`ScanMemo`] mark, or
    /// the end of a scan the memo answered), not having decoded the MCUs
    /// since its last boundary: those grid points and block-map boundaries
    /// get no snapshot here (a split below `at` is not answered), and the
    /// ones from `at` on are settled as before.
    pub(super) fn resumed_at(&mut self, at: u64) {
        self.floor = self.floor.max(at);
        self.tail = None;
        self.tail_ends = None;
        self.pending = None;
        self.next = self
            .next
            .max(at.div_ceil(self.spec.grid).saturating_mul(self.spec.grid));
    }

    pub(super) fn log_len(&self) -> usize {
        self.log_base + self.log.len()
    }

    /// Logs the word the last MCU changed (if it did).
    #[inline]
    pub(super) fn flush(&mut self, history: &History) {
        if let Some((ci, i, w)) = self.pending.take()
            && let Some(now) = history.as_ref().and_then(|h| h.get(ci)?.get(i))
            && *now != w
        {
            self.log.push_back((ci, i, w));
        }
    }

    /// `history` with the words changed since the log was `at` long put
    /// back; `None` when the log no longer reaches back there.
    pub(super) fn history_at(&self, history: &History, at: usize) -> Option<History> {
        let Some(h) = history else {
            return Some(None);
        };
        let from = at.checked_sub(self.log_base)?;
        let mut h = h.clone();
        for &(ci, i, w) in self.log.range(from..).rev() {
            if let Some(slot) = h.get_mut(ci).and_then(|c| c.get_mut(i)) {
                *slot = w;
            }
        }
        Some(Some(h))
    }

    /// A boundary with state `mark`, with the history as it is now: the
    /// grid points before it get the previous one.
    #[inline]
    pub(super) fn boundary(&mut self, mark: Mark, scan_ends: &[(u32, u64)], history: &History) {
        let at = mark.at;
        if self.first.is_none() {
            self.first = Some(at);
        }
        if at > self.next {
            self.settle(at, scan_ends, history);
        }
        self.tail = Some((mark, self.log_len()));
        self.tail_ends = None;
        // The log from the oldest snapshot that may still need it.
        if !self.log.is_empty() {
            let keep = self.ring.front().map_or(self.log_len(), |r| r.1);
            while self.log_base < keep && self.log.pop_front().is_some() {
                self.log_base += 1;
            }
        }
    }

    /// Settles the grid points in `[next, at)` with the tail.
    #[inline(never)]
    pub(super) fn settle(&mut self, at: u64, scan_ends: &[(u32, u64)], history: &History) {
        let grid = self.spec.grid;
        let upto = at.div_ceil(grid).saturating_mul(grid);
        if let Some((mark, log_at)) = self.tail.take() {
            let ends = self.tail_ends.take().unwrap_or_else(|| scan_ends.to_vec());
            let tail = mark.snap(0, ends, None);
            // The grid points within the span (the older ones would be
            // dropped at once) and the block-map ones.
            let lo = self
                .next
                .max(at.saturating_sub(self.spec.span) / grid * grid);
            let mut g = lo;
            while g < upto {
                self.ring.push_back((
                    Snap {
                        split: g,
                        ..tail.clone()
                    },
                    log_at,
                ));
                g += grid;
            }
            if let Some(bs) = self.spec.block_map {
                let next = self.next;
                for g in block_map_splits(bs, grid, upto.saturating_add(grid))
                    .filter(|&g| g >= next && g < upto)
                {
                    let Some(h) = self.history_at(history, log_at) else {
                        continue;
                    };
                    self.sticky.push_back(Snap {
                        split: g,
                        history: h.map(std::sync::Arc::new),
                        ..tail.clone()
                    });
                }
                while self.sticky.len() > TRAIL_STICKY {
                    self.sticky.pop_front();
                }
            }
        }
        while self
            .ring
            .front()
            .is_some_and(|f| f.0.split.saturating_add(self.spec.span) < at)
        {
            self.ring.pop_front();
        }
        self.next = upto;
    }

    /// The block-map snapshots a decode settled up to here keeps (the
    /// latest [`TRAIL_STICKY`] block-map splits below [`Trail::next`]) that
    /// it did not take itself, within [`CHEAP_STICKY`] of the start: it went
    /// on from a memo's answer or mark past them (a copy of a picture
    /// decoded before is compared, not decoded, up to near where it
    /// differs). Captured from `src`'s start to the last of them, as a
    /// fragment search would capture them (the validation stage's trails:
    /// a search's own decode, resumed from a snapshot, leaves them to it).
    pub(super) fn fill_sticky(&mut self, src: Src) {
        let Some(bs) = self.spec.block_map else {
            return;
        };
        if !self.valid || self.floor == 0 {
            return;
        }
        let (grid, next) = (self.spec.grid, self.next);
        let points: Vec<u64> = block_map_splits(bs, grid, next.saturating_add(grid))
            .filter(|&g| g < next)
            .collect();
        let kept = &points[points.len().saturating_sub(TRAIL_STICKY)..];
        // (Farther ones are left to the search: a capture from the start
        // would cost more than the memo saved.)
        let missing: Vec<u64> = kept
            .iter()
            .copied()
            .filter(|&g| g <= CHEAP_STICKY && !self.sticky.iter().any(|s| s.split == g))
            .collect();
        if missing.is_empty() {
            return;
        }
        for snap in capture_snaps(src, None, &missing).into_iter().flatten() {
            self.sticky.push_back(snap);
        }
        self.sticky.make_contiguous().sort_by_key(|s| s.split);
        while self.sticky.len() > TRAIL_STICKY {
            self.sticky.pop_front();
        }
    }

    /// The scan ended, with `history`: the tail's scan ends are those before it.
    pub(super) fn end_scan(&mut self, scan_ends: &[(u32, u64)], history: &History) {
        self.flush(history);
        if self.tail.is_some() && self.tail_ends.is_none() {
            self.tail_ends = Some(scan_ends.to_vec());
        }
    }

    /// [`Trail::answer_each`] when the trail holds every one of the splits
    /// (the tests' form).
    #[cfg(test)]
    pub fn answer(&self, window: u64, splits: &[u64]) -> Option<Vec<Option<Snap>>> {
        self.answer_each(window, splits).into_iter().collect()
    }

    /// The snapshots of `splits`, as a capture of a window `window` bytes
    /// long takes them ([`capture_snaps`]): `None` for each split the trail
    /// does not hold (all of them when it is not of such a window).
    pub fn answer_each(&self, window: u64, splits: &[u64]) -> Vec<Option<Option<Snap>>> {
        let usable = self.valid && window == self.window;
        splits
            .iter()
            .map(|&w| usable.then(|| self.get(w)).flatten())
            .collect()
    }

    pub(super) fn get(&self, w: u64) -> Option<Option<Snap>> {
        // (A block-map snapshot holds wherever the decode went on from: it
        // was taken by decoding, here or by a capture.)
        if let Some(s) = self.sticky.iter().find(|s| s.split == w) {
            return Some(Some(s.clone()));
        }
        // (No boundary before `w`: no snapshot, unless the decode skipped
        // scans or MCUs before it, whose boundaries were not seen here.)
        let Some(first) = self.first else {
            return (self.floor == 0).then_some(None);
        };
        if w < first {
            return (self.floor == 0 || first < self.floor).then_some(None);
        }
        if w < self.floor {
            return None;
        }
        if !w.is_multiple_of(self.spec.grid) {
            return None;
        }
        if w >= self.next {
            // (A tail's scan ends are final once its scan has ended; the
            // trail is read after the decode.)
            let (mark, log_at) = self.tail.as_ref()?;
            let ends = self.tail_ends.clone()?;
            let history = self.history_at(&self.history, *log_at)?;
            return Some(Some(mark.snap(w, ends, history)));
        }
        let (snap, log_at) = self.ring.iter().find(|s| s.0.split == w)?;
        Some(Some(Snap {
            history: self
                .history_at(&self.history, *log_at)?
                .map(std::sync::Arc::new),
            ..snap.clone()
        }))
    }
}

/// The decoder's state at an MCU boundary inside a scan, taken while
/// validating a file, such that every byte it has consumed lies before
/// `split`: [`validate_resume`] then validates any window whose bytes before
/// `split` are the same without decoding them again (the fragment search
/// tries many second fragments after one first fragment).
#[derive(Clone, Debug, PartialEq)]
pub struct Snap {
    pub(super) split: u64,
    /// Scans decoded before it: (count, offset of the marker that ends it).
    pub(super) scan_ends: Vec<(u32, u64)>,
    /// The coefficient history there (shared: a fragment search resumes
    /// thousands of probes from one snapshot, [`restore_history`]).
    pub(super) history: SnapHistory,
    /// The decoder's state there.
    pub(super) m: Mark,
}

/// A [`Snap`]'s coefficient history.
pub(super) type SnapHistory = Option<std::sync::Arc<Vec<Vec<u64>>>>;

impl Snap {
    /// The split it was taken for.
    pub fn split(&self) -> u64 {
        self.split
    }
    /// Offset of the next byte the resumed decoder reads (≤ the split).
    pub fn at(&self) -> u64 {
        self.m.at
    }
}

/// A history word to put back: (component, block, word).
pub(super) type Undo = (usize, usize, u64);

/// What a walk captures or resumes from.
#[derive(Default)]
pub(super) struct SnapCtl {
    /// Capture: the splits, ascending.
    pub(super) wants: Vec<u64>,
    /// Capture: the split being captured now (`wants[k]`; those before are done).
    pub(super) k: usize,
    /// The scan being decoded (the outer walk's count).
    pub(super) scan: u32,
    /// Scans decoded so far.
    pub(super) scan_ends: Vec<(u32, u64)>,
    /// Capture: the last MCU boundary with everything consumed before the
    /// split, and the history word its MCU may change (component, block, word).
    pub(super) latest: Option<(Snap, Option<Undo>)>,
    /// Capture: the snapshot for each split.
    pub(super) got: Vec<Option<Snap>>,
    /// Resume from this state.
    pub(super) resume: Option<Snap>,
    /// Capture: stop decoding once every snapshot is final ([`capture_snaps`]).
    pub(super) stop: bool,
    /// Rolling capture: the snapshots of every grid point ([`Trail`]).
    pub(super) trail: Option<Trail>,
    /// The marks a decode under a [`ScanMemo`] leaves for later copies.
    pub(super) marks: Option<MarkRec>,
}

/// Marks of a sequential scan's decoder state, about every `every` bytes,
/// recorded for its [`ScanMemo`] entry: a later scan whose bytes repeat
/// this one's up to some point resumes from the last mark before it.
#[derive(Debug)]
pub(super) struct MarkRec {
    /// Window offset of the scan's first byte.
    pub(super) start: u64,
    /// Bytes between marks (doubled, every other mark dropped, when
    /// [`MEMO_MARKS`] are held).
    pub(super) every: u64,
    /// The next mark is taken at the first boundary at or after this.
    pub(super) next: u64,
    /// The marks, `at` and `good` relative to `start`, ascending.
    pub(super) list: Vec<Mark>,
}

/// Bytes between the marks of a [`ScanMemo`] entry, at first.
pub(super) const MEMO_MARK_EVERY: u64 = 32 * 1024;
/// Most marks an entry keeps.
pub(super) const MEMO_MARKS: usize = 256;

impl MarkRec {
    /// A recorder for the scan at `start`, going on from `below` (marks of
    /// an earlier decode, relative, ending with the one resumed from).
    pub(super) fn new(start: u64, below: Vec<Mark>) -> Self {
        let next = start + below.last().map_or(0, |m| m.at + MEMO_MARK_EVERY);
        MarkRec {
            start,
            every: MEMO_MARK_EVERY,
            next,
            list: below,
        }
    }

    pub(super) fn push(&mut self, m: Mark) {
        if self.list.len() >= MEMO_MARKS {
            let mut keep = false;
            self.list.retain(|_| {
                keep = !keep;
                keep
            });
            self.every = self.every.saturating_mul(2);
        }
        self.next = m.at.saturating_add(self.every);
        self.list.push(Mark {
            at: m.at.saturating_sub(self.start),
            good: m.good.saturating_sub(self.start),
            ..m
        });
    }
}

impl SnapCtl {
    /// Turns the latest boundary into the snapshot of every split it lies
    /// before (history as it was there; a later boundary before a split
    /// replaces it).
    pub(super) fn finalize(&mut self, history: &Option<Vec<Vec<u64>>>) {
        self.finalize_upto(self.wants.len(), history);
    }

    /// [`SnapCtl::finalize`] for the splits below `wants[upto]` only.
    pub(super) fn finalize_upto(&mut self, upto: usize, history: &Option<Vec<Vec<u64>>>) {
        if upto <= self.k {
            return;
        }
        if let Some((mut snap, undo)) = self.latest.take() {
            let mut h = history.clone();
            if let (Some(h), Some((ci, i, w))) = (h.as_mut(), undo)
                && let Some(slot) = h.get_mut(ci).and_then(|c| c.get_mut(i))
            {
                *slot = w;
            }
            snap.history = h.map(std::sync::Arc::new);
            snap.scan_ends = self.scan_ends.clone();
            for j in self.k..upto.min(self.wants.len()) {
                if let (Some(slot), Some(&w)) = (self.got.get_mut(j), self.wants.get(j)) {
                    let mut one = snap.clone();
                    one.split = w;
                    *slot = Some(one);
                }
            }
        }
    }
}

/// Block-map splits this near a file's start that a decode under a memo
/// passed by are captured for its trail ([`Trail::fill_sticky`]) rather than
/// decoded through: an ext2/3 file's first ones, at 44 and 48 KiB (4 KiB
/// blocks; a broken copy of a picture decoded before resumed from there to
/// near where it broke, 1-2 MB later: 11 ms against 1 ms for the copy's
/// decode on session 15's ext2 image); the next ones lie past 4 MiB.
pub(super) const CHEAP_STICKY: u64 = 256 << 10;
