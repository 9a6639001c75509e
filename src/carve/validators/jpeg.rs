//! JPEG (JFIF/EXIF): a marker walk from SOI to the real EOI.
//!
//! Structure (ITU-T T.81 Annex B, JFIF 1.02, EXIF 2.3 §4.5): `FF D8` (SOI),
//! then marker segments `FF xx | length (u16 BE, ≥ 2, includes itself) | data`.
//! `SOS` (`FF DA`) is followed by entropy-coded data in which `FF 00` is a
//! stuffed byte and `FF D0..D7` are restart markers; the first other marker
//! ends the scan (progressive files have many scans with `DHT`s between
//! them). Standalone markers (`TEM`, `RSTn`) carry no length; `FF` fill bytes
//! may precede any marker. `FF D9` (EOI) ends the file.
//!
//! An EXIF thumbnail (a whole JPEG inside `APP1`) never ends the outer file:
//! the `APP1` length skips it.
//!
//! Checked: the fourth byte is a real segment marker; every marker is a
//! defined one (no reserved `02..BF`, no second SOI; hierarchical and
//! extension markers `DE DF F0..FD` are not accepted); segment lengths fit;
//! SOF (1..4 components, `len = 8 + 3·components`, precision 8/12, 2..16 for
//! lossless, non-zero width), SOS (`len = 6 + 2·components`, components 1..4,
//! spectral/approximation fields in range), DRI (`len = 4`), DQT and DHT
//! bodies parsed table by table to exactly the segment length; SOF before SOS.
//!
//! Entropy-coded data is *decoded* (Huffman codes only: no dequantisation
//! or IDCT) for baseline, extended-sequential and progressive Huffman frames
//! (T.81 Annex F and G): every code must be in its table, coefficient
//! indices must stay in the block / spectral band, the scan must hold
//! exactly the number of MCUs the frame size requires, restart markers must
//! come every restart interval in sequence, and the scan must end at a
//! marker. This is what catches a fragmented or cut file whose tail is
//! someone else's data (which a marker walk alone accepts as soon as any
//! `FF D9` turns up). Progressive refinement (AC successive approximation)
//! needs the per-block history of non-zero coefficients, kept as one bit per
//! coefficient for at most [`MAX_HISTORY_BLOCKS`] blocks; larger progressive
//! images, arithmetic-coded and lossless frames, frames whose height comes
//! from a DNL marker and scans whose tables are missing (Motion-JPEG) fall
//! back to the marker walk for that scan (noted). At most [`MAX_BLOCKS`]
//! blocks are decoded per candidate (end-of-band runs make blocks cheap to
//! claim), and one frame header is allowed (no hierarchical mode).
//!
//! Decoding is table-driven (`Huff`): an 11-bit lookahead gives a code's
//! length and symbol; for AC tables one lookup also gives what a symbol does
//! to the coefficient index with its extra bits dropped (the values are not
//! needed), and in long sequential scans several symbols at once. Each such
//! step is taken only where decoding code by code would neither fill the
//! bit reader in between nor fail, so the reader's position, and with it
//! every verdict and damage offset, is exactly that of a code-by-code
//! decoder (checked against the previous decoder, kept for the tests).
//!
//! * `None`: not `FF D8 FF <segment marker>`, or damage before the second
//!   segment (a lone plausible segment is not evidence enough).
//! * `Complete`: EOI reached after at least one frame header and one scan,
//!   every scan decoded; length = end of EOI.
//! * `Partial`: the walk runs past the window (length = window), or hits an
//!   invalid marker/segment or undecodable entropy data after a valid start
//!   (length = where the damage begins: the segment, or the start of the
//!   restart interval / MCU row that failed), or EOI comes without any image
//!   data.

use super::ByteReader as _;
use super::Verdict;
use super::read::{Cursor, RunsView, Src};

/// More markers than this is not a real JPEG.
const MAX_MARKERS: u32 = 1_000_000;

/// Markers that may legitimately follow SOI as the first segment.
fn first_segment_marker(m: u8) -> bool {
    matches!(m, 0xC0..=0xCF | 0xDB..=0xDF | 0xE0..=0xEF | 0xFE)
}

/// Markers with a length field accepted inside a file: SOFn (not the
/// reserved `C8`), DHT, DAC, SOS, DQT, DNL, DRI, APPn, COM. Hierarchical
/// (`DE`, `DF`) and JPEG extension markers (`F0..FD`, e.g. JPEG-LS) are not
/// accepted: they are rare in real files and common in random data.
fn has_length(m: u8) -> bool {
    matches!(m, 0xC0..=0xC7 | 0xC9..=0xCF | 0xDA..=0xDD | 0xE0..=0xEF | 0xFE)
}

/// DQT body: tables of `Pq/Tq` + 64 (8-bit) or 128 (16-bit) values.
fn dqt_ok(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        let (pq, tq) = (b[i] >> 4, b[i] & 15);
        if pq > 1 || tq > 3 {
            return false;
        }
        i += 1 + 64 * (usize::from(pq) + 1);
    }
    i == b.len() && !b.is_empty()
}

/// DHT body: tables of `Tc/Th`, 16 code counts, then the symbols.
fn dht_ok(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        let (tc, th) = (b[i] >> 4, b[i] & 15);
        let Some(counts) = b.get(i + 1..i + 17) else {
            return false;
        };
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        if tc > 1 || th > 3 || n > 256 {
            return false;
        }
        i += 17 + n;
    }
    i == b.len() && !b.is_empty()
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut d = Damage::default();
    // The validation stage's own validation of a header leaves a trail of
    // snapshots for the fragment search ([`with_trail`]).
    let spec = TRAIL
        .with(|t| *t.borrow())
        .filter(|&(_, id, at)| id == src.reader_id() && at == src.abs(0))
        .map(|(spec, _, _)| spec);
    let (v, trail) = match spec {
        Some(spec) => validate_trail(src, &mut d, None, spec),
        None => (validate_probe(src, &mut d), None),
    };
    let mut v = v?;
    if d.damaged && v.status == super::Status::Partial {
        v.broke_at = Some(d.fail_at);
        v.trail = trail
            .map(|mut t| {
                t.fill_sticky(src);
                t
            })
            .and_then(Trail::kept)
            .map(|t| super::TrailRef(std::sync::Arc::new(t)));
    }
    Some(v)
}

thread_local! {
    /// The trail asked for by [`with_trail`]: its spec, and the reader (by
    /// [`Src::reader_id`]) and offset of the header it is asked for.
    static TRAIL: std::cell::RefCell<Option<(TrailSpec, usize, u64)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f`, a validation of the header at `start` of `image`, such that a
/// JPEG verdict of damage there carries the decode's [`Trail`] (only that
/// validation: any other window decodes as without it).
pub fn with_trail<R>(
    spec: TrailSpec,
    image: &dyn super::ByteReader,
    start: u64,
    f: impl FnOnce() -> R,
) -> R {
    let asked = (spec, super::read::reader_id(image), start);
    super::read::with_local(&TRAIL, asked, f)
}

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
const TRAIL_STICKY: usize = 4;

/// The splits a [`Trail`] keeps snapshots of at the ext2/3 block-map
/// boundaries (blocks of `bs` bytes) below `below`: a grid step before each
/// boundary and the boundary, those on the grid, ascending.
fn block_map_splits(bs: u64, grid: u64, below: u64) -> impl Iterator<Item = u64> {
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
    /// Bytes counted in [`TRAILS_HELD`] while it lives ([`Trail::kept`]).
    held: u64,
    spec: TrailSpec,
    /// The length of the window decoded (a trail answers only for the same
    /// window: where a window ends decides where its decode is cut).
    window: u64,
    /// Settled snapshots of recent grid points, ascending, with the length
    /// of the history log when each was taken.
    ring: std::collections::VecDeque<(Snap, usize)>,
    /// Settled snapshots at block-map boundaries, ascending (history set).
    sticky: std::collections::VecDeque<Snap>,
    /// The latest boundary's state and log length: every grid point from
    /// `next` on (until a later boundary) gets it.
    tail: Option<(Mark, usize)>,
    /// The tail's scan ends, once its scan has ended (until then, those of
    /// the scan being decoded).
    tail_ends: Option<Vec<(u32, u64)>>,
    /// The lowest grid point not settled yet.
    next: u64,
    /// Where the first boundary was: a split before it has no snapshot.
    first: Option<u64>,
    /// History words as they were before an MCU changed them (component,
    /// block, word), oldest first; `log_base` entries were dropped before.
    log: std::collections::VecDeque<(usize, usize, u64)>,
    log_base: usize,
    /// The word the MCU being decoded may change, as it was before it.
    pending: Option<(usize, usize, u64)>,
    /// The history the decode ended with.
    history: History,
    /// False when a second frame began, or a scan's failure was a memo's
    /// answer: the trail then answers nothing.
    valid: bool,
    /// Where the decode last went on after a memo's answer or from a memo's
    /// mark ([`Trail::resumed_at`]): the boundaries before it were not seen
    /// here, so no split below it is answered.
    floor: u64,
}

/// Bytes held by the trails kept on verdicts ([`Trail::kept`]), and the
/// most they may hold: a verdict waits in the stage and the carver's
/// look-ahead, and a progressive file's history is up to 8 MiB.
static TRAILS_HELD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
const MAX_TRAILS_HELD: u64 = 64 << 20;

impl Drop for Trail {
    fn drop(&mut self) {
        TRAILS_HELD.fetch_sub(self.held, std::sync::atomic::Ordering::Relaxed);
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

    /// The trail, to be kept on a verdict, when the trails kept so far leave
    /// room for it (else the search captures its snapshots by decoding).
    fn kept(mut self) -> Option<Self> {
        use std::sync::atomic::Ordering::Relaxed;
        let n = self.bytes();
        let before = TRAILS_HELD.fetch_add(n, Relaxed);
        if before.saturating_add(n) > MAX_TRAILS_HELD {
            TRAILS_HELD.fetch_sub(n, Relaxed);
            return None;
        }
        self.held = n;
        Some(self)
    }

    fn new(spec: TrailSpec, window: u64) -> Self {
        Trail {
            held: 0,
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
    fn resumed_at(&mut self, at: u64) {
        self.floor = self.floor.max(at);
        self.tail = None;
        self.tail_ends = None;
        self.pending = None;
        self.next = self
            .next
            .max(at.div_ceil(self.spec.grid).saturating_mul(self.spec.grid));
    }

    fn log_len(&self) -> usize {
        self.log_base + self.log.len()
    }

    /// Logs the word the last MCU changed (if it did).
    #[inline]
    fn flush(&mut self, history: &History) {
        if let Some((ci, i, w)) = self.pending.take()
            && let Some(now) = history.as_ref().and_then(|h| h.get(ci)?.get(i))
            && *now != w
        {
            self.log.push_back((ci, i, w));
        }
    }

    /// `history` with the words changed since the log was `at` long put
    /// back; `None` when the log no longer reaches back there.
    fn history_at(&self, history: &History, at: usize) -> Option<History> {
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
    fn boundary(&mut self, mark: Mark, scan_ends: &[(u32, u64)], history: &History) {
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
    fn settle(&mut self, at: u64, scan_ends: &[(u32, u64)], history: &History) {
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
    fn fill_sticky(&mut self, src: Src) {
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
    fn end_scan(&mut self, scan_ends: &[(u32, u64)], history: &History) {
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

    fn get(&self, w: u64) -> Option<Option<Snap>> {
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

/// The history word the MCU `mcu` of a progressive AC scan may change
/// (component, block, word as it is before), which a snapshot taken before
/// it must see unchanged.
fn changed_word(t: &Tables, s: &Scan, progressive: bool, mcu: u64) -> Option<Undo> {
    if !progressive || s.ss == 0 {
        return None;
    }
    let ci = s.comps.first()?.0;
    let w = *t.history.as_ref()?.get(ci)?.get(mcu as usize)?;
    Some((ci, mcu as usize, w))
}

/// The decoder's state at an MCU boundary: a [`Snap`] without its split,
/// scan ends and history (what a [`Trail`] keeps of every boundary).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mark {
    /// The scan (1-based count) it was taken in.
    scan: u32,
    mcu: u64,
    eobrun: u32,
    rst: u8,
    good: u64,
    acc: u64,
    n: u32,
    pad: u32,
    at: u64,
    budget: u64,
}

impl Mark {
    /// The state of the decoder `b` over `t` at the boundary before MCU
    /// `mcu` (with the scan's end-of-band run, restart count and good end).
    fn here(b: &Bits, t: &Tables, (mcu, eobrun, rst, good): (u64, u32, u8, u64)) -> Mark {
        Mark {
            scan: t.snap.scan,
            mcu,
            eobrun,
            rst,
            good,
            acc: b.acc,
            n: b.n,
            pad: b.pad,
            at: b.at(),
            budget: t.budget,
        }
    }

    fn snap(&self, split: u64, scan_ends: Vec<(u32, u64)>, history: History) -> Snap {
        Snap {
            split,
            scan_ends,
            history: history.map(std::sync::Arc::new),
            m: *self,
        }
    }
}

/// [`validate_probe`] (resumed from `resume` when given, as
/// [`validate_resume`]), leaving a [`Trail`] of snapshots.
pub fn validate_trail(
    src: Src,
    d: &mut Damage,
    resume: Option<&Snap>,
    spec: TrailSpec,
) -> (Option<Verdict>, Option<Trail>) {
    let ctl = SnapCtl {
        scan_ends: resume.map(|r| r.scan_ends.clone()).unwrap_or_default(),
        resume: resume.cloned(),
        trail: Some(Trail::new(spec, src.len())),
        ..SnapCtl::default()
    };
    let mut tables = Tables::new(MAX_BLOCKS, ctl, false);
    let v = walk_inner(src, d, &mut tables);
    let trail = tables.snap.trail.take().map(|mut t| {
        t.history = tables.history.take();
        t
    });
    (v, trail)
}

/// Where a damaged JPEG broke, for the fragment search
/// ([`crate::carve::fragments`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Damage {
    /// The verdict is `Partial` because of damage (not because the window
    /// ended first).
    pub damaged: bool,
    /// An upper bound on where foreign data begins: everything before the
    /// first foreign byte decodes, so the decoder reads past it before it
    /// fails. Meaningful when `damaged`.
    pub fail_at: u64,
}

/// [`validate`], also filling `d` when the verdict is damage.
pub fn validate_probe(src: Src, d: &mut Damage) -> Option<Verdict> {
    walk(src, d, SnapCtl::default())
}

/// The decoder's state at an MCU boundary inside a scan, taken while
/// validating a file, such that every byte it has consumed lies before
/// `split`: [`validate_resume`] then validates any window whose bytes before
/// `split` are the same without decoding them again (the fragment search
/// tries many second fragments after one first fragment).
#[derive(Clone, Debug, PartialEq)]
pub struct Snap {
    split: u64,
    /// Scans decoded before it: (count, offset of the marker that ends it).
    scan_ends: Vec<(u32, u64)>,
    /// The coefficient history there (shared: a fragment search resumes
    /// thousands of probes from one snapshot, [`restore_history`]).
    history: SnapHistory,
    /// The decoder's state there.
    m: Mark,
}

/// A [`Snap`]'s coefficient history.
type SnapHistory = Option<std::sync::Arc<Vec<Vec<u64>>>>;

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

/// [`validate_probe`], also returning the decoder's state at the last MCU
/// boundary before `split` (`None` when `split` is not inside a decoded scan):
/// the decode the tests compare [`capture_snaps`] and the trails with.
#[cfg(test)]
pub fn validate_capture(src: Src, d: &mut Damage, split: u64) -> (Option<Verdict>, Option<Snap>) {
    let (v, mut snaps) = validate_capture_all(src, d, &[split]);
    (v, snaps.pop().flatten())
}

/// [`validate_capture`] for several splits in one decode: `snaps[i]` is the
/// snapshot for `splits[i]` (in any order), each equal to what
/// [`validate_capture`] takes for that split alone.
#[cfg(test)]
pub fn validate_capture_all(
    src: Src,
    d: &mut Damage,
    splits: &[u64],
) -> (Option<Verdict>, Vec<Option<Snap>>) {
    capture(src, d, None, splits, false)
}

/// The decoder's state at the last MCU boundary before each of `splits` (in
/// any order; `None` for a split not inside a decoded scan), decoding
/// `src` from its start, or resumed from `from`, a snapshot taken over the
/// same bytes (the scans before its own skipped; `None` for a split before
/// where it resumes). The decode stops at the first MCU boundary past the
/// last split, where every snapshot is final: a fragment search wants the
/// decoder's state at its splits, not how the rest of the file decodes.
/// (The tests compare it with a capture decoding on, `validate_capture_all`.)
pub fn capture_snaps(src: Src, from: Option<&Snap>, splits: &[u64]) -> Vec<Option<Snap>> {
    capture(src, &mut Damage::default(), from, splits, true).1
}

/// [`capture_snaps`], with the decode's verdict; `stop`: stop past the last
/// split (else decode on as a validation does).
fn capture(
    src: Src,
    d: &mut Damage,
    from: Option<&Snap>,
    splits: &[u64],
    stop: bool,
) -> (Option<Verdict>, Vec<Option<Snap>>) {
    let mut wants: Vec<u64> = splits
        .iter()
        .copied()
        .filter(|&s| from.is_none_or(|sn| s >= sn.at()))
        .collect();
    wants.sort_unstable();
    wants.dedup();
    let ctl = SnapCtl {
        got: vec![None; wants.len()],
        wants,
        // The scans before the snapshot's are skipped, not decoded: their
        // ends are the snapshot's.
        scan_ends: from.map(|sn| sn.scan_ends.clone()).unwrap_or_default(),
        resume: from.cloned(),
        stop,
        ..SnapCtl::default()
    };
    let mut tables = Tables::new(MAX_BLOCKS, ctl, false);
    let v = walk_inner(src, d, &mut tables);
    let ctl = &mut tables.snap;
    let snaps = splits
        .iter()
        .map(|s| {
            let i = ctl.wants.binary_search(s).ok()?;
            ctl.got.get_mut(i)?.take()
        })
        .collect();
    (v, snaps)
}

/// [`validate_capture_all`] of a window whose bytes before `snap`'s split
/// are those the snapshot was taken over, resumed there: the same verdict,
/// and for every split at or after where the snapshot resumes (its
/// [`Snap::at`]) the same snapshot, without decoding the bytes before it
/// again; `None` for a split before that. (A search that follows a file
/// into its next fragment captures the longer head from the last split's
/// snapshot, not from the file's start.)
#[cfg(test)]
pub fn validate_capture_from(
    src: Src,
    d: &mut Damage,
    snap: &Snap,
    splits: &[u64],
) -> (Option<Verdict>, Vec<Option<Snap>>) {
    capture(src, d, Some(snap), splits, false)
}

/// [`validate_probe`] of a window whose bytes before `snap`'s split are those
/// the snapshot was taken over: equal verdict, without decoding them again.
pub fn validate_resume(src: Src, d: &mut Damage, snap: &Snap) -> Option<Verdict> {
    let ctl = SnapCtl {
        resume: Some(snap.clone()),
        ..SnapCtl::default()
    };
    walk(src, d, ctl)
}

/// A history word to put back: (component, block, word).
type Undo = (usize, usize, u64);

/// What a walk captures or resumes from.
#[derive(Default)]
struct SnapCtl {
    /// Capture: the splits, ascending.
    wants: Vec<u64>,
    /// Capture: the split being captured now (`wants[k]`; those before are done).
    k: usize,
    /// The scan being decoded (the outer walk's count).
    scan: u32,
    /// Scans decoded so far.
    scan_ends: Vec<(u32, u64)>,
    /// Capture: the last MCU boundary with everything consumed before the
    /// split, and the history word its MCU may change (component, block, word).
    latest: Option<(Snap, Option<Undo>)>,
    /// Capture: the snapshot for each split.
    got: Vec<Option<Snap>>,
    /// Resume from this state.
    resume: Option<Snap>,
    /// Capture: stop decoding once every snapshot is final ([`capture_snaps`]).
    stop: bool,
    /// Rolling capture: the snapshots of every grid point ([`Trail`]).
    trail: Option<Trail>,
    /// The marks a decode under a [`ScanMemo`] leaves for later copies.
    marks: Option<MarkRec>,
}

/// Marks of a sequential scan's decoder state, about every `every` bytes,
/// recorded for its [`ScanMemo`] entry: a later scan whose bytes repeat
/// this one's up to some point resumes from the last mark before it.
#[derive(Debug)]
struct MarkRec {
    /// Window offset of the scan's first byte.
    start: u64,
    /// Bytes between marks (doubled, every other mark dropped, when
    /// [`MEMO_MARKS`] are held).
    every: u64,
    /// The next mark is taken at the first boundary at or after this.
    next: u64,
    /// The marks, `at` and `good` relative to `start`, ascending.
    list: Vec<Mark>,
}

/// Bytes between the marks of a [`ScanMemo`] entry, at first.
const MEMO_MARK_EVERY: u64 = 32 * 1024;
/// Most marks an entry keeps.
const MEMO_MARKS: usize = 256;

impl MarkRec {
    /// A recorder for the scan at `start`, going on from `below` (marks of
    /// an earlier decode, relative, ending with the one resumed from).
    fn new(start: u64, below: Vec<Mark>) -> Self {
        let next = start + below.last().map_or(0, |m| m.at + MEMO_MARK_EVERY);
        MarkRec {
            start,
            every: MEMO_MARK_EVERY,
            next,
            list: below,
        }
    }

    fn push(&mut self, m: Mark) {
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
    fn finalize(&mut self, history: &Option<Vec<Vec<u64>>>) {
        self.finalize_upto(self.wants.len(), history);
    }

    /// [`SnapCtl::finalize`] for the splits below `wants[upto]` only.
    fn finalize_upto(&mut self, upto: usize, history: &Option<Vec<Vec<u64>>>) {
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

fn walk(src: Src, d: &mut Damage, ctl: SnapCtl) -> Option<Verdict> {
    let mut tables = Tables::new(MAX_BLOCKS, ctl, false);
    walk_inner(src, d, &mut tables)
}

fn walk_inner(src: Src, d: &mut Damage, tables: &mut Tables) -> Option<Verdict> {
    let head = src.bytes::<4>(0);
    let Some(head) = head else {
        // Fewer than 4 bytes: only a partial SOI can be judged.
        let mut b = [0u8; 3];
        let n = src.read(0, &mut b);
        return (b[..n] == [0xFF, 0xD8, 0xFF][..n] && n >= 2)
            .then(|| Verdict::partial(src.len(), src.cut_note()));
    };
    if head[..3] != [0xFF, 0xD8, 0xFF] || !first_segment_marker(head[3]) {
        return None;
    }
    // Room for one DQT/DHT segment body (lengths are 16-bit).
    let mut seg_buf = Vec::new();
    // Entropy-coded data, read in large pieces (allocated on the first scan).
    let mut entropy_buf = Vec::new();
    let mut kept = Buffered::default();
    let mut c = Cursor::new(src, 2);
    let mut frame: Option<Frame> = None;
    let mut scan: Option<Scan> = None;
    let mut undecoded = 0u32;
    let mut undecoded_why: Option<&'static str> = None;
    let mut seen_sof = false;
    let mut scans = 0u32;
    let mut segments = 0u32;
    let mut progressive = false;
    // Further images an MPF (multi-picture) index lists: (offset, size).
    let mut mpf: Vec<(u64, u64)> = Vec::new();
    let cut = |src: &Src| Some(Verdict::partial(src.len(), src.cut_note()));
    // End of the last structure that was fully validated.
    let mut good_end: u64 = 2;
    let mut damaged = |good_end: u64, fail: u64, segments: u32, note: String| {
        // Damage before a second segment confirmed the first: a false hit.
        if segments < 2 {
            None
        } else {
            d.damaged = true;
            d.fail_at = fail.max(good_end);
            Some(Verdict::partial(good_end, note))
        }
    };
    for _ in 0..MAX_MARKERS {
        // Marker: FF, optional fill FFs, then the code.
        let marker_pos = c.pos();
        match c.u8() {
            Some(0xFF) => {}
            Some(b) => {
                return damaged(
                    good_end,
                    c.pos(),
                    segments,
                    format!("expected a marker at {marker_pos}, found {b:#04x}"),
                );
            }
            None => return cut(&src),
        }
        let mut m = 0xFF;
        for _ in 0..4096 {
            match c.u8() {
                Some(0xFF) => continue,
                Some(b) => {
                    m = b;
                    break;
                }
                None => return cut(&src),
            }
        }
        match m {
            0xD9 => {
                let end = c.pos();
                if !seen_sof || scans == 0 {
                    return Some(Verdict::partial(end, "EOI without a frame header and scan"));
                }
                let mut v = Verdict::complete(end);
                if progressive {
                    v.notes.push(format!("progressive, {scans} scans"));
                }
                if !mpf.is_empty() {
                    match mpf_end(&src, end, &mpf, tables.budget) {
                        Some(all) => {
                            v.length = all;
                            v.notes.push(format!(
                                "multi-picture (MPF): {} more image(s) after the first EOI, each decoded; the last ends at {all}",
                                mpf.len()
                            ));
                        }
                        None => v.notes.push(format!(
                            "the MPF index lists {} more image(s) that are not intact after the first EOI: carved to the first image",
                            mpf.len()
                        )),
                    }
                }
                if let Some(why) = undecoded_why {
                    v.notes.push(format!(
                        "{undecoded} scan(s) checked by marker walk only ({why})"
                    ));
                }
                return Some(v);
            }
            0x01 | 0xD0..=0xD7 => {
                good_end = c.pos();
                continue;
            }
            0xD8 => {
                return damaged(
                    good_end,
                    c.pos(),
                    segments,
                    format!("second SOI at {marker_pos}"),
                );
            }
            0xFF => return damaged(good_end, c.pos(), segments, "run of fill bytes".into()),
            m if !has_length(m) => {
                return damaged(
                    good_end,
                    c.pos(),
                    segments,
                    format!("reserved marker {m:#04x} at {marker_pos}"),
                );
            }
            _ => {}
        }
        let Some(len) = c.u16be() else {
            return cut(&src);
        };
        let len = u64::from(len);
        let body = c.pos();
        let seg_end = body - 2 + len;
        if len < 2 {
            return damaged(
                good_end,
                c.pos(),
                segments,
                format!("segment length {len} at {marker_pos}"),
            );
        }
        if m == 0xE2 && !tables.inner && mpf.is_empty() {
            mpf = mpf_images(&src, body, len - 2);
        }
        // Per-marker checks on the first bytes of the segment.
        let ok = match m {
            0xC0..=0xCF if m != 0xC4 && m != 0xC8 && m != 0xCC => {
                // SOFn: P, Y, X, Nf, then 3 bytes per component.
                let mut h = [0u8; 6 + 3 * 4];
                let n = src.read(body, &mut h);
                if n < 6 {
                    return cut(&src);
                }
                let nf = u64::from(h[5]);
                if seen_sof {
                    // One frame per (non-hierarchical) image.
                    return damaged(
                        good_end,
                        seg_end,
                        segments,
                        format!("second frame header at {marker_pos}"),
                    );
                }
                progressive |= matches!(m, 0xC2 | 0xC6 | 0xCA | 0xCE);
                seen_sof = true;
                let lossless = matches!(m, 0xC3 | 0xC7 | 0xCB | 0xCF);
                let precision_ok = if lossless {
                    matches!(h[0], 2..=16)
                } else {
                    matches!(h[0], 8 | 12)
                };
                let ok =
                    (1..=4).contains(&nf) && len == 8 + 3 * nf && precision_ok && h[3..5] != [0, 0];
                if ok && n < 6 + 3 * nf as usize {
                    return cut(&src);
                }
                let comps: Vec<(u8, u32, u32)> = (0..nf.min(4) as usize)
                    .map(|i| {
                        let hv = h[6 + 3 * i + 1];
                        (h[6 + 3 * i], u32::from(hv >> 4), u32::from(hv & 15))
                    })
                    .collect();
                let hv_ok = comps
                    .iter()
                    .all(|&(_, a, b)| (1..=4).contains(&a) && (1..=4).contains(&b));
                let kind = match m {
                    0xC0 | 0xC1 => FrameKind::Sequential,
                    0xC2 => FrameKind::Progressive,
                    _ => FrameKind::Other,
                };
                let f = Frame {
                    kind,
                    precision: h[0],
                    height: u32::from(u16::from_be_bytes([h[1], h[2]])),
                    width: u32::from(u16::from_be_bytes([h[3], h[4]])),
                    hmax: comps.iter().map(|c| c.1).max().unwrap_or(1).max(1),
                    vmax: comps.iter().map(|c| c.2).max().unwrap_or(1).max(1),
                    comps,
                };
                if !(ok && hv_ok) {
                    return damaged(
                        good_end,
                        seg_end,
                        segments,
                        format!("invalid frame header at {marker_pos}"),
                    );
                }
                if let Some(tr) = tables.snap.trail.as_mut()
                    && tr.first.is_some()
                {
                    // (A second frame starts a history of its own.)
                    tr.valid = false;
                }
                // (A history restored for an earlier frame is not the snapshot's for this one.)
                tables.restored = None;
                tables.resume_ready = false;
                tables.memo_sync = false;
                let blocks: Vec<(u64, u64)> = (0..f.comps.len()).map(|i| f.blocks(i)).collect();
                // Resuming from a snapshot with a history of this frame's
                // shape: the history the resumed scan starts from, at once
                // (the scans before it are skipped).
                let resumed = tables
                    .snap
                    .resume
                    .as_ref()
                    .and_then(|r| r.history.clone())
                    .filter(|h| {
                        kind == FrameKind::Progressive
                            && h.len() == blocks.len()
                            && h.iter()
                                .zip(&blocks)
                                .all(|(c, (w, b))| c.len() as u64 == w * b)
                    });
                if let Some(from) = resumed {
                    tables.history = Some(restore_history(&from));
                    tables.restored = Some(Restored {
                        from,
                        dirty: Some(Vec::new()),
                    });
                    tables.resume_ready = true;
                } else if kind == FrameKind::Progressive {
                    let total: u64 = blocks.iter().map(|(w, h)| w * h).sum();
                    // Zeroed by writing, not `vec![0; n]`: calloc's fresh
                    // pages map the shared zero page, and the decode's
                    // first store to each then faults again and flushes
                    // the other cores' TLBs (2-5% of a carving's time).
                    tables.history = (total <= MAX_HISTORY_BLOCKS).then(|| {
                        blocks
                            .iter()
                            .map(|(w, h)| {
                                let n = (w * h) as usize;
                                #[allow(clippy::slow_vector_initialization)]
                                let words = {
                                    let mut words = Vec::with_capacity(n);
                                    words.resize(n, 0u64);
                                    words
                                };
                                words
                            })
                            .collect()
                    });
                }
                frame = Some(f);
                ok && hv_ok
            }
            0xC4 | 0xDB => {
                let body_len = (len - 2) as usize;
                if seg_buf.len() < body_len {
                    seg_buf.resize(body_len, 0);
                }
                let Some(b) = seg_buf.get_mut(..body_len) else {
                    return cut(&src);
                };
                if !src.read_exact(body, b) {
                    return cut(&src);
                }
                if m == 0xC4 {
                    dht_ok(b) && load_dht(b, tables)
                } else {
                    dqt_ok(b)
                }
            }
            0xDD => {
                if let Some(ri) = src.u16be(body) {
                    tables.restart = u32::from(ri);
                }
                len == 4
            }
            0xDA => {
                let Some(ns) = src.u8(body) else {
                    return cut(&src);
                };
                let ns = u64::from(ns);
                let tail = src.bytes::<3>(body + 1 + 2 * ns);
                let Some([ss, se, a]) = tail else {
                    return cut(&src);
                };
                let prog_ok =
                    !progressive || ((ss == 0) == (se == 0) && se >= ss && (ss == 0 || ns == 1));
                let ok = seen_sof
                    && (1..=4).contains(&ns)
                    && len == 6 + 2 * ns
                    && ss <= 63
                    && se <= 63
                    && a >> 4 <= 13
                    && prog_ok;
                scan = None;
                if ok && let Some(f) = &frame {
                    let mut sc = Scan {
                        comps: Vec::new(),
                        ss,
                        se,
                        ah: a >> 4,
                    };
                    for i in 0..ns {
                        let Some([cs, tt]) = src.bytes::<2>(body + 1 + 2 * i) else {
                            return cut(&src);
                        };
                        if let Some(ci) = f.comps.iter().position(|c| c.0 == cs) {
                            sc.comps
                                .push((ci, usize::from(tt >> 4 & 3), usize::from(tt & 3)));
                        }
                    }
                    scan = Some(sc);
                }
                ok
            }
            _ => true,
        };
        if !ok {
            return damaged(
                good_end,
                seg_end,
                segments,
                format!("invalid segment {m:#04x} at {marker_pos}"),
            );
        }
        if seg_end > src.len() {
            return cut(&src);
        }
        c.seek(seg_end);
        segments += 1;
        good_end = seg_end;
        if m == 0xDA {
            scans += 1;
            tables.snap.scan = scans;
            // Resuming: scans decoded before the snapshot's are skipped.
            let skip = tables.snap.resume.as_ref().and_then(|r| {
                (r.m.scan > scans)
                    .then(|| r.scan_ends.iter().find(|e| e.0 == scans).map(|e| e.1))
                    .flatten()
            });
            if let Some(end) = skip {
                c.seek(end);
                good_end = end;
                continue;
            }
            let decodable = match (&frame, &scan) {
                (Some(f), Some(s)) => scan_decodable(f, s, tables),
                _ => Err("no usable frame/scan header"),
            };
            match decodable {
                Ok(()) => {
                    let (Some(f), Some(s)) = (&frame, &scan) else {
                        return cut(&src);
                    };
                    let r = decode_scan(&mut c, &mut entropy_buf, &mut kept, tables, f, s);
                    if tables.snap.latest.is_some() {
                        tables.snap.finalize(&tables.history);
                    }
                    if let Some(tr) = tables.snap.trail.as_mut() {
                        tr.end_scan(&tables.snap.scan_ends, &tables.history);
                    }
                    match r {
                        Ok(()) => {
                            good_end = c.pos();
                            if !tables.snap.wants.is_empty() || tables.snap.trail.is_some() {
                                tables.snap.scan_ends.push((scans, good_end));
                            }
                        }
                        Err((ScanErr::Cut, _, _)) => return cut(&src),
                        Err((ScanErr::Bad(why), at, fail)) => {
                            return damaged(
                                at.max(good_end),
                                fail,
                                segments,
                                format!("scan {scans}: {why}"),
                            );
                        }
                    }
                }
                Err(why) => {
                    // Not decodable here: find the first FF not followed by
                    // 00, RSTn or FF.
                    undecoded_why.get_or_insert(why);
                    undecoded += 1;
                    match scan_entropy(&mut c) {
                        Some(p) => {
                            c.seek(p);
                            good_end = p;
                        }
                        None => return cut(&src),
                    }
                }
            }
        }
    }
    damaged(good_end, c.pos(), segments, "too many markers".into())
}

/// From the start of entropy-coded data, returns the offset of the marker
/// that ends it (the `FF` of a marker other than stuffing/RST/fill), or
/// `None` when the window ends first.
fn scan_entropy(c: &mut Cursor) -> Option<u64> {
    loop {
        let chunk = c.chunk();
        if chunk.is_empty() {
            return None;
        }
        let Some(i) = memchr::memchr(0xFF, chunk) else {
            let n = chunk.len() as u64;
            c.skip(n);
            continue;
        };
        let ff = c.pos() + i as u64;
        c.seek(ff + 1);
        // Skip fill FFs; look at the byte after them.
        loop {
            match c.u8()? {
                0xFF => continue,
                0x00 | 0xD0..=0xD7 => break,
                _ => {
                    // The marker starts at the last FF before this byte.
                    return Some(c.pos() - 2);
                }
            }
        }
    }
}

/// Blocks whose non-zero-coefficient history is kept for progressive
/// refinement scans (8 bytes each).
pub const MAX_HISTORY_BLOCKS: u64 = 1 << 20;

/// Stores the tables of a DHT body (already checked by [`dht_ok`]).
fn load_dht(b: &[u8], t: &mut Tables) -> bool {
    let mut i = 0;
    while i + 17 <= b.len() {
        let (tc, th) = (b[i] >> 4, usize::from(b[i] & 3));
        let counts = &b[i + 1..i + 17];
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        let Some(syms) = b.get(i + 17..i + 17 + n) else {
            return false;
        };
        let Some(h) = Huff::shared(counts, syms, tc != 0) else {
            return false;
        };
        if tc == 0 {
            t.dc[th] = Some(h);
        } else {
            t.ac[th] = Some(h);
        }
        i += 17 + n;
    }
    true
}

/// Whether a scan can be decoded here; otherwise why not.
fn scan_decodable(f: &Frame, s: &Scan, t: &Tables) -> Result<(), &'static str> {
    if f.kind == FrameKind::Other {
        return Err("arithmetic, lossless or hierarchical coding");
    }
    if f.height == 0 {
        return Err("height given by DNL");
    }
    if s.comps.is_empty() {
        return Err("scan names no frame component");
    }
    let blocks: u32 = s
        .comps
        .iter()
        .map(|&(ci, _, _)| f.comps[ci].1 * f.comps[ci].2)
        .sum();
    if s.comps.len() > 1 && blocks > 10 {
        return Err("more than 10 blocks per MCU");
    }
    let progressive = f.kind == FrameKind::Progressive;
    let needs_dc = !progressive || (s.ss == 0 && s.ah == 0);
    let needs_ac = !progressive || s.ss > 0;
    for &(_, td, ta) in &s.comps {
        if (needs_dc && t.dc[td].is_none()) || (needs_ac && t.ac[ta].is_none()) {
            return Err("Huffman table not defined (e.g. Motion-JPEG)");
        }
    }
    if progressive && s.ss > 0 && s.ah > 0 && t.history.is_none() {
        return Err("progressive image too large to track refinement");
    }
    Ok(())
}

/// Bits of lookahead of the decoding tables ([`Huff::look`], [`Huff::fast`]).
const LOOK_BITS: u32 = 11;

/// [`Huff::fast`]: the symbol ends a sequential block (EOB, or an EOBn that
/// a sequential decoder reads as EOB).
const FAST_EOB: u16 = 1 << 15;
/// [`Huff::fast`]: the symbol is ZRL (sixteen zeros, no coefficient).
const FAST_ZRL: u16 = 1 << 14;
/// [`Huff::multi`]: the last symbol ends the block.
const MULTI_EOB: u32 = 1 << 15;

/// The next [`LOOK_BITS`] bits of a reader's accumulator, as a table index.
#[inline]
fn ahead(acc: u64) -> usize {
    (acc >> (64 - LOOK_BITS)) as usize
}

/// [`Huff::multi`] before it is built: nothing at once.
static NO_MULTI: [u32; 1 << LOOK_BITS] = [0; 1 << LOOK_BITS];

/// [`Huff::fast`] of a DC table: nothing in one lookup.
static NO_FAST: [u16; 1 << LOOK_BITS] = [0; 1 << LOOK_BITS];

/// A zeroed table on the heap (not built on the stack and moved).
fn zeroed<T: Copy + Default, const N: usize>() -> Option<Box<[T; N]>> {
    vec![T::default(); N].into_boxed_slice().try_into().ok()
}

/// A Huffman decoding table (T.81 F.2.2.3) with an 11-bit lookup.
#[derive(Clone)]
struct Huff {
    /// By the next [`LOOK_BITS`] bits: code length << 8 | symbol; 0 when
    /// the code is longer (or there is none).
    look: Box<[u16; 1 << LOOK_BITS]>,
    /// AC tables, by the next [`LOOK_BITS`] bits: what the code does to the
    /// coefficient index, for the one-lookup path. A coefficient of size
    /// 1..=10: code length + size (the bits to drop, extra bits included)
    /// | (run + 1) << 8; ZRL: code length | 16 << 8 | [`FAST_ZRL`]; a size-0
    /// symbol other than ZRL: code length | [`FAST_EOB`]. 0: none (longer
    /// code, no code, or a size over 10), decode the long way.
    fast: Option<Box<[u16; 1 << LOOK_BITS]>>,
    /// Sequential AC tables, by the next [`LOOK_BITS`] bits: the symbols of
    /// [`Huff::fast`] that follow one another inside those bits, at once:
    /// bits to drop (codes and extra bits; the last one's may run past the
    /// lookahead) | their index increments << 8 | [`MULTI_EOB`] when the
    /// last ends the block | the offset of the last code << 24 (a reader
    /// holding fewer than 16 bits there would fill first). 0: none. Built
    /// by [`Huff::build_multi`] for the first scan long enough to repay it,
    /// once for every decode sharing the table ([`Huff::shared`]).
    multi: std::sync::OnceLock<Option<Box<[u32; 1 << LOOK_BITS]>>>,
    maxcode: [i32; 18],
    valptr: [i32; 17],
    mincode: [i32; 17],
    vals: [u8; 256],
}

/// The Huffman tables built in this process, by DHT table: most pictures
/// (every camera's, every copy of one) use a few, and each decode of one
/// (the validation, the layouts, the fragment searches' proofs) parsed
/// and built its tables again. At most [`MAX_HUFFS`] (then forgotten all
/// at once): what a table decodes is a function of its DHT bytes alone.
static HUFFS: std::sync::Mutex<Option<std::collections::HashMap<HuffKey, std::sync::Arc<Huff>>>> =
    std::sync::Mutex::new(None);

/// Most tables [`HUFFS`] holds (up to 16 KiB each).
const MAX_HUFFS: usize = 256;

/// A DHT table: its class (AC), its 16 counts, its symbols.
type HuffKey = (bool, [u8; 16], Vec<u8>);

impl Huff {
    /// [`Huff::new`] of a DHT table, built once per table ([`HUFFS`]).
    fn shared(counts: &[u8], syms: &[u8], ac: bool) -> Option<std::sync::Arc<Huff>> {
        let key: HuffKey = (ac, counts.try_into().ok()?, syms.to_vec());
        let lock = || HUFFS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = lock().as_ref().and_then(|m| m.get(&key)) {
            return Some(h.clone());
        }
        let h = std::sync::Arc::new(Huff::new(counts, syms, ac)?);
        let mut m = lock();
        let m = m.get_or_insert_with(Default::default);
        if m.len() >= MAX_HUFFS {
            m.clear();
        }
        m.insert(key, h.clone());
        Some(h)
    }

    /// From the 16 code counts and the symbols of a DHT table (`ac`: of
    /// class AC, which the one-lookup tables are built for); `None` when
    /// the counts over-subscribe the code space.
    fn new(counts: &[u8], syms: &[u8], ac: bool) -> Option<Huff> {
        let mut h = Huff {
            look: zeroed()?,
            fast: if ac { Some(zeroed()?) } else { None },
            multi: Default::default(),
            maxcode: [-1; 18],
            valptr: [0; 17],
            mincode: [0; 17],
            vals: [0; 256],
        };
        let n = syms.len().min(256);
        h.vals[..n].copy_from_slice(&syms[..n]);
        let (mut code, mut k) = (0i32, 0i32);
        for l in 1..=16usize {
            let cnt = i32::from(*counts.get(l - 1)?);
            h.valptr[l] = k;
            h.mincode[l] = code;
            if code + cnt > 1 << l {
                return None;
            }
            if cnt > 0 {
                if l <= LOOK_BITS as usize {
                    let shift = LOOK_BITS as usize - l;
                    for j in 0..cnt {
                        let sym = u16::from(*h.vals.get((k + j) as usize)?);
                        let first = ((code + j) << shift) as usize;
                        let (run, size) = (sym >> 4, sym & 15);
                        let fast = match (run, size) {
                            (15, 0) => l as u16 | 16 << 8 | FAST_ZRL,
                            (_, 0) => l as u16 | FAST_EOB,
                            (_, 1..=10) => (l as u16 + size) | (run + 1) << 8,
                            _ => 0,
                        };
                        let range = first..first + (1 << shift);
                        h.look.get_mut(range.clone())?.fill((l as u16) << 8 | sym);
                        if let Some(f) = h.fast.as_deref_mut() {
                            f.get_mut(range)?.fill(fast);
                        }
                    }
                }
                code += cnt;
                k += cnt;
                h.maxcode[l] = code - 1;
            }
            code <<= 1;
        }
        h.maxcode[17] = i32::MAX;
        Some(h)
    }

    /// Fills [`Huff::multi`] from [`Huff::fast`]: from each lookahead, the
    /// symbols whose codes lie wholly inside it, one after the other, up to
    /// a block's end (EOB) and at most 64 index steps.
    fn build_multi(&self) {
        if let Some(table) = self.fast.as_deref() {
            self.multi.get_or_init(|| self.multi_from(table));
        }
    }

    fn multi_from(&self, table: &[u16; 1 << LOOK_BITS]) -> Option<Box<[u32; 1 << LOOK_BITS]>> {
        let mut multi = zeroed::<u32, { 1 << LOOK_BITS }>()?;
        let mask = (1usize << LOOK_BITS) - 1;
        for (idx, m) in multi.iter_mut().enumerate() {
            // Bits taken so far, index steps so far.
            let (mut p, mut inc) = (0u32, 0u32);
            while p < LOOK_BITS {
                let sub = (idx << p) & mask;
                let (look, fast) = (self.look[sub], table[sub]);
                let l = u32::from(look >> 8);
                if look == 0 || l > LOOK_BITS - p || fast == 0 {
                    break;
                }
                if fast & FAST_EOB != 0 {
                    *m = (p + l) | inc << 8 | MULTI_EOB | p << 24;
                    break;
                }
                let step = u32::from(fast >> 8 & 0x3F);
                if inc + step > 64 {
                    break;
                }
                let t = u32::from(fast & 0xFF);
                *m = (p + t) | (inc + step) << 8 | p << 24;
                p += t;
                inc += step;
            }
        }
        Some(multi)
    }

    /// [`Huff::multi`], once built.
    fn multi(&self) -> Option<&[u32; 1 << LOOK_BITS]> {
        self.multi.get().and_then(Option::as_deref)
    }
}

/// Why entropy decoding stopped.
enum ScanErr {
    /// The window ended.
    Cut,
    /// Invalid data; the note.
    Bad(&'static str),
}

/// First piece of entropy-coded data read at once; pieces double up to
/// [`MAX_PIECE`].
const FIRST_PIECE: usize = 64 * 1024;

/// First piece read by a decode resumed from a [`Snap`].
const RESUME_PIECE: usize = 4096;

/// Largest piece of entropy-coded data read at once (the buffer never grows
/// past this plus a few bytes).
const MAX_PIECE: usize = 512 * 1024;

/// The range of the window that an entropy buffer holds.
#[derive(Clone, Copy, Default)]
struct Buffered {
    off: u64,
    len: usize,
    piece: usize,
}

/// Bits of entropy-coded data (stuffing removed), stopping at a marker: past
/// a marker (or the window's end) only padding is supplied, and consuming it
/// is an error.
///
/// The data is read from the window in large pieces into `buf` (reused
/// across scans, at most [`MAX_PIECE`] + 8 bytes). `acc` holds `n` bits,
/// MSB first, of which the last `pad` are padding; [`Bits::fill`] tops it up
/// to more than 56 bits a whole byte at a time (eight at once when none of
/// them is `FF`), so the state after every call is the same as a byte-by-byte
/// reader's.
struct Bits<'s, 'b> {
    src: Src<'s>,
    buf: &'b mut Vec<u8>,
    /// Window offset of `buf[0]`.
    off: u64,
    /// Next unread byte in `buf`.
    i: usize,
    /// Valid bytes in `buf`.
    len: usize,
    /// Size of the next read.
    piece: usize,
    acc: u64,
    n: u32,
    pad: u32,
    marker: bool,
    cut: bool,
}

impl<'s, 'b> Bits<'s, 'b> {
    /// A reader at `at`, reusing what `keep` (the buffered range left by
    /// the previous scan's reader) holds.
    fn new(src: Src<'s>, at: u64, buf: &'b mut Vec<u8>, keep: Buffered) -> Self {
        let (off, i, len, piece) = match at.checked_sub(keep.off) {
            Some(d) if d <= keep.len as u64 => (keep.off, d as usize, keep.len, keep.piece),
            _ => (at, 0, 0, FIRST_PIECE),
        };
        Bits {
            src,
            buf,
            off,
            i,
            len,
            piece,
            acc: 0,
            n: 0,
            pad: 0,
            marker: false,
            cut: false,
        }
    }

    /// Moves the reader to window offset `at` with the state of `m`, a
    /// mark of a decode of the same bytes there (as a reader made there by
    /// [`Bits::new`] with what this one buffers, then given the mark).
    fn reposition(&mut self, at: u64, m: &Mark) {
        let keep = self.buffered();
        (self.off, self.i, self.len, self.piece) = match at.checked_sub(keep.off) {
            Some(d) if d <= keep.len as u64 => (keep.off, d as usize, keep.len, keep.piece),
            _ => (at, 0, 0, FIRST_PIECE),
        };
        (self.acc, self.n, self.pad) = (m.acc, m.n, m.pad);
        (self.marker, self.cut) = (false, false);
    }

    /// What the buffer holds, for the next scan's reader.
    fn buffered(&self) -> Buffered {
        Buffered {
            off: self.off,
            len: self.len,
            piece: self.piece,
        }
    }

    /// Window offset of the next unread byte.
    fn at(&self) -> u64 {
        self.off + self.i as u64
    }

    /// Reads the next piece after the buffered bytes, keeping the unread
    /// bytes and the one before them (so that [`Bits::back`] always works).
    fn refill(&mut self) {
        let keep = self.i.saturating_sub(1).min(self.len);
        self.buf.copy_within(keep..self.len, 0);
        self.off += keep as u64;
        self.i -= keep;
        self.len -= keep;
        // No more than the window holds (no zeroed space that is never read).
        let left = self.src.len().saturating_sub(self.off + self.len as u64);
        let want = self.len + self.piece.min(usize::try_from(left).unwrap_or(usize::MAX));
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let Some(dst) = self.buf.get_mut(self.len..want) else {
            return;
        };
        let got = self.src.read(self.off + self.len as u64, dst);
        self.len += got.min(want - self.len);
        self.piece = (self.piece * 2).min(MAX_PIECE);
    }

    /// Next byte, `None` at the window's end.
    fn next(&mut self) -> Option<u8> {
        if self.i >= self.len {
            self.refill();
        }
        let b = if self.i < self.len {
            self.buf.get(self.i).copied()
        } else {
            None
        };
        if b.is_some() {
            self.i += 1;
        }
        b
    }

    /// Next byte without advancing.
    fn peek(&mut self) -> Option<u8> {
        if self.i >= self.len {
            self.refill();
        }
        if self.i < self.len {
            self.buf.get(self.i).copied()
        } else {
            None
        }
    }

    /// Steps back over the byte [`Bits::next`] just returned.
    fn back(&mut self) {
        self.i = self.i.saturating_sub(1);
    }

    /// Tops the accumulator up: the common case (eight bytes buffered,
    /// none of them `FF`) inline, the rest in [`Bits::fill_slow`].
    #[inline(always)]
    fn fill(&mut self) {
        if self.n <= 56 && !self.marker && !self.cut && self.fill_eight() {
            return;
        }
        self.fill_slow();
    }

    /// Takes the whole bytes that fit from the next eight buffered ones, at
    /// once, when none of them is `FF`; false (nothing taken) otherwise.
    #[inline(always)]
    fn fill_eight(&mut self) -> bool {
        let Some(w) = self
            .buf
            .get(self.i..self.i + 8)
            .filter(|_| self.i + 8 <= self.len)
        else {
            return false;
        };
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        let w = u64::from_be_bytes(a);
        // Whole bytes that fit: the byte-by-byte loop of `fill_slow` stops
        // once more than 56 bits are held.
        let cnt = (56 - self.n) / 8 + 1;
        let bits = 8 * cnt;
        let top = w >> (64 - bits) << (64 - bits);
        // Any FF among those bytes (a zero byte of !top; the bytes not
        // taken are FF there, so never zero)?
        let x = !top;
        let ff = x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080;
        if ff != 0 {
            return false;
        }
        self.acc |= top >> self.n;
        self.n += bits;
        self.i += cnt as usize;
        true
    }

    #[inline(never)]
    fn fill_slow(&mut self) {
        if self.n <= 56 && !self.marker && !self.cut {
            if self.len - self.i < 8 {
                self.refill();
            }
            if self.fill_eight() {
                return;
            }
        }
        while self.n <= 56 {
            if self.marker || self.cut {
                self.n += 8;
                self.pad += 8;
                continue;
            }
            match self.next() {
                None => self.cut = true,
                Some(0xFF) => match self.peek() {
                    Some(0x00) => {
                        self.i += 1;
                        self.push(0xFF);
                    }
                    other => {
                        // A marker (or the window ends after FF): stop before the FF.
                        if other.is_some() {
                            self.marker = true;
                        } else {
                            self.cut = true;
                        }
                        self.back();
                    }
                },
                Some(b) => self.push(b),
            }
        }
    }

    fn push(&mut self, b: u8) {
        self.acc |= u64::from(b) << (56 - self.n);
        self.n += 8;
    }

    fn real(&self) -> u32 {
        self.n - self.pad
    }

    /// Approximate offset of the next unread bit's byte.
    fn pos(&self) -> u64 {
        self.at().saturating_sub(u64::from(self.real() / 8))
    }

    #[inline]
    fn consume(&mut self, k: u32) -> Result<(), ScanErr> {
        if k > self.real() {
            return Err(if self.cut {
                ScanErr::Cut
            } else {
                ScanErr::Bad("entropy-coded data runs into a marker")
            });
        }
        self.acc = if k >= 64 { 0 } else { self.acc << k };
        self.n -= k;
        Ok(())
    }

    /// `k ≤ 16` raw bits.
    #[inline]
    fn bits(&mut self, k: u32) -> Result<u32, ScanErr> {
        if k == 0 {
            return Ok(0);
        }
        if self.n < k {
            self.fill();
        }
        let v = (self.acc >> (64 - k)) as u32;
        self.consume(k)?;
        Ok(v)
    }

    /// Skips `k ≤ 16` raw bits (the value is not needed).
    #[inline]
    fn skip(&mut self, k: u32) -> Result<(), ScanErr> {
        if k == 0 {
            return Ok(());
        }
        if self.n < k {
            self.fill();
        }
        self.consume(k)
    }

    /// Skips `c` single bits, the same as `c` calls of [`Bits::skip`]`(1)`
    /// (at once when they are held: no fill falls between them then).
    #[inline]
    fn skip_bits(&mut self, c: u32) -> Result<(), ScanErr> {
        if c <= self.real() {
            self.acc = if c >= 64 { 0 } else { self.acc << c };
            self.n -= c;
            return Ok(());
        }
        for _ in 0..c {
            self.skip(1)?;
        }
        Ok(())
    }

    /// A DC difference category and its extra bits (the value is not
    /// needed), at most `max_dc` of them: the same as [`Bits::decode`] then
    /// [`Bits::skip`], in one step when the table has the code, no fill
    /// falls between the two and the real bits suffice.
    #[inline(always)]
    fn dc(&mut self, h: &Huff, max_dc: u8) -> Result<(), ScanErr> {
        if self.n < 16 {
            self.fill();
        }
        let e = h.look[ahead(self.acc)];
        let (l, size) = (u32::from(e >> 8), u32::from(e & 0xFF));
        if e != 0 && size <= u32::from(max_dc) && l + size + self.pad <= self.n {
            // l + size ≤ 11 + 15 bits.
            self.acc <<= l + size;
            self.n -= l + size;
            return Ok(());
        }
        // No fill here: at least 16 bits are held.
        let n = self.decode(h)?;
        if n > max_dc {
            return Err(ScanErr::Bad("DC difference too large"));
        }
        self.skip(u32::from(n))
    }

    #[inline]
    fn decode(&mut self, h: &Huff) -> Result<u8, ScanErr> {
        if self.n < 16 {
            self.fill();
        }
        let e = h.look[ahead(self.acc)];
        if e != 0 {
            self.consume(u32::from(e >> 8))?;
            return Ok(e as u8);
        }
        self.decode_slow(h)
    }

    /// Codes longer than the lookup table's [`LOOK_BITS`].
    #[cold]
    fn decode_slow(&mut self, h: &Huff) -> Result<u8, ScanErr> {
        for l in LOOK_BITS as usize + 1..=16 {
            let code = (self.acc >> (64 - l)) as i32;
            if code <= h.maxcode[l] {
                self.consume(l as u32)?;
                let i = h.valptr[l] + code - h.mincode[l];
                return h
                    .vals
                    .get(i as usize)
                    .copied()
                    .ok_or(ScanErr::Bad("bad Huffman table"));
            }
        }
        Err(if self.real() < 16 && self.cut {
            ScanErr::Cut
        } else {
            ScanErr::Bad("invalid Huffman code")
        })
    }

    /// After the last MCU of an interval or scan: drops the padding bits,
    /// requires the next thing in the stream to be a marker (at most
    /// `tolerance` data bytes before it) and returns its code and the offset
    /// of its first `FF`, leaving the reader after the code.
    fn finish(&mut self, tolerance: u32) -> Result<(u8, u64), ScanErr> {
        let mut extra = self.real() / 8;
        self.acc = 0;
        self.n = 0;
        self.pad = 0;
        if !self.marker {
            if self.cut {
                return Err(ScanErr::Cut);
            }
            loop {
                if extra > tolerance {
                    return Err(ScanErr::Bad("data after the last MCU"));
                }
                match self.next() {
                    None => return Err(ScanErr::Cut),
                    Some(0xFF) => match self.peek() {
                        Some(0x00) => {
                            self.i += 1;
                            extra += 1;
                        }
                        Some(_) => {
                            self.back();
                            break;
                        }
                        None => return Err(ScanErr::Cut),
                    },
                    Some(_) => extra += 1,
                }
            }
        }
        if extra > tolerance {
            return Err(ScanErr::Bad("data after the last MCU"));
        }
        self.marker = false;
        let at = self.at();
        for _ in 0..4096 {
            match self.next() {
                Some(0xFF) => continue,
                Some(m) => return Ok((m, at)),
                None => return Err(ScanErr::Cut),
            }
        }
        Err(ScanErr::Bad("run of fill bytes"))
    }
}

/// The frame header (SOF) as far as decoding needs it.
#[derive(Clone)]
struct Frame {
    /// Huffman sequential (SOF0/1) or progressive (SOF2); others are not decoded.
    kind: FrameKind,
    precision: u8,
    width: u32,
    height: u32,
    /// (component id, H, V)
    comps: Vec<(u8, u32, u32)>,
    hmax: u32,
    vmax: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    Sequential,
    Progressive,
    Other,
}

impl Frame {
    /// Blocks across and down of component `i` (non-interleaved order).
    fn blocks(&self, i: usize) -> (u64, u64) {
        let (_, h, v) = self.comps[i];
        let w = (u64::from(self.width) * u64::from(h)).div_ceil(u64::from(self.hmax));
        let hh = (u64::from(self.height) * u64::from(v)).div_ceil(u64::from(self.vmax));
        (w.div_ceil(8), hh.div_ceil(8))
    }
}

/// A scan header (SOS).
struct Scan {
    /// (frame component index, DC table, AC table)
    comps: Vec<(usize, usize, usize)>,
    ss: u8,
    se: u8,
    ah: u8,
}

/// Decoding state kept across segments.
/// Most further images an MPF index may list.
const MAX_MPF_IMAGES: usize = 64;

/// The images other than the first that the MPF segment (`APP2` "MPF\0",
/// CIPA DC-007) whose body of `n` bytes starts at `body` lists: (offset from
/// the file's start, size). Offsets in the index count from the segment's
/// TIFF header. Empty when the segment is not MPF or its index is unusable.
fn mpf_images(src: &Src, body: u64, n: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if n < 16 || !src.starts_with_at(body, b"MPF\0") {
        return out;
    }
    let mp = body + 4;
    let Some(order) = src.bytes::<2>(mp) else {
        return out;
    };
    let le = match &order {
        b"II" => true,
        b"MM" => false,
        _ => return out,
    };
    let u16at = |o: u64| if le { src.u16le(o) } else { src.u16be(o) };
    let u32at = |o: u64| if le { src.u32le(o) } else { src.u32be(o) };
    if u16at(mp + 2) != Some(42) {
        return out;
    }
    let Some(ifd) = u32at(mp + 4).map(|o| mp + u64::from(o)) else {
        return out;
    };
    let count = u16at(ifd).unwrap_or(0);
    for i in 0..u64::from(count.min(64)) {
        let e = ifd + 2 + 12 * i;
        if u16at(e) != Some(0xB002) {
            continue;
        }
        let (Some(bytes), Some(at)) = (u32at(e + 4), u32at(e + 8)) else {
            return out;
        };
        let entries = (u64::from(bytes) / 16).min(MAX_MPF_IMAGES as u64 + 1);
        for k in 0..entries {
            let ent = mp + u64::from(at) + 16 * k;
            let (Some(size), Some(off)) = (u32at(ent + 4), u32at(ent + 8)) else {
                return Vec::new();
            };
            // The first image's offset is 0: it is this file's start.
            if off != 0 && size >= 4 {
                out.push((mp + u64::from(off), u64::from(size)));
            }
        }
        break;
    }
    out.sort_unstable();
    out
}

/// Where a multi-picture file ends: every image the MPF index lists after
/// the first (which ends at `first_end`) starts at or after it, in order, and
/// validates as a complete JPEG of exactly its listed size. `None` when one
/// of them is missing, damaged or cut.
fn mpf_end(src: &Src, first_end: u64, images: &[(u64, u64)], budget: u64) -> Option<u64> {
    let mut end = first_end;
    for &(off, size) in images {
        if off < end {
            return None;
        }
        let sub = src.sub(off, size)?;
        if sub.len() < size {
            return None;
        }
        let mut tables = Tables::new(budget, SnapCtl::default(), true);
        let v = walk_inner(sub, &mut Damage::default(), &mut tables)?;
        if v.status != super::Status::Complete || v.length != size {
            return None;
        }
        end = off + size;
    }
    Some(end)
}

struct Tables {
    dc: [Option<std::sync::Arc<Huff>>; 4],
    ac: [Option<std::sync::Arc<Huff>>; 4],
    restart: u32,
    /// Progressive: per component, one bit per coefficient per block.
    history: Option<Vec<Vec<u64>>>,
    /// The history after the last scan a [`ScanMemo`] kept or answered
    /// (shared by the next scan's entry where equal).
    memo_last: MemoHistory,
    /// `history` equals `memo_last` (nothing decoded since it was set):
    /// a copy of a picture decoded before, answered scan by scan, then
    /// compares and restores only the components a scan changed, known
    /// by the memo's shared components ([`memo_history`]).
    memo_sync: bool,
    /// Blocks that may still be decoded (a bound on time: end-of-band runs
    /// decode many blocks from few bits).
    budget: u64,
    snap: SnapCtl,
    /// Validating an image that an MPF index of another one lists: its own
    /// MPF segment is not followed again.
    inner: bool,
    /// `history` was restored from the snapshot resumed from, and what
    /// may have changed in it since ([`restore_history`]).
    restored: Option<Restored>,
    /// `history` is the snapshot's, which the scan resumed from has not
    /// taken yet (it was restored where the frame was read).
    resume_ready: bool,
    /// One past the last block whose history word a progressive AC scan's
    /// decode asked for.
    hist_hi: u64,
    /// A scan's decode stops at its first MCU boundary with the reader at
    /// or past this window offset ([`Shifted`]), leaving its state in
    /// `paused`.
    pause_at: u64,
    paused: Option<(u64, u32, u8, u64)>,
}

impl Tables {
    fn new(budget: u64, snap: SnapCtl, inner: bool) -> Self {
        Tables {
            dc: Default::default(),
            ac: Default::default(),
            restart: 0,
            history: None,
            memo_last: None,
            memo_sync: false,
            budget,
            snap,
            inner,
            restored: None,
            resume_ready: false,
            hist_hi: 0,
            pause_at: u64::MAX,
            paused: None,
        }
    }

    /// Every word of the history may differ from the snapshot's.
    fn all_dirty(&mut self) {
        if let Some(r) = self.restored.as_mut() {
            r.dirty = None;
        }
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        // (Given back for the next decode on this thread resumed from the
        // same snapshot.)
        if let (Some(r), Some(h)) = (self.restored.take(), self.history.take()) {
            let _ = RESTORED.try_with(|k| *k.borrow_mut() = Some((h, r)));
        }
    }
}

/// A history restored from a snapshot's: the snapshot's, and the words
/// that may differ from it since (per component, blocks `[lo, hi)`;
/// `None`: any).
struct Restored {
    from: std::sync::Arc<Vec<Vec<u64>>>,
    dirty: Option<Vec<(usize, u64, u64)>>,
}

/// Ranges [`Restored`] lists before it calls the whole history changed.
const MAX_DIRTY: usize = 64;

thread_local! {
    /// The last history restored from a snapshot on this thread, given
    /// back when its decode ended. A fragment search resumes thousands of
    /// probes from the same few snapshots, each failing a few bytes on:
    /// copying a progressive file's whole history (up to 8 MiB) for each,
    /// after zeroing a fresh one where the frame was read, took most of
    /// such a probe's time (50-400 µs against a few for its decode). One
    /// history and the snapshot's it came from per thread (16 MiB at
    /// most), until the thread ends.
    static RESTORED: std::cell::RefCell<Option<(Vec<Vec<u64>>, Restored)>> =
        const { std::cell::RefCell::new(None) };
}

/// The history `from`, in the buffer the last decode on this thread
/// restored (only the words that decode may have changed copied again
/// when it was restored from `from` too), else a copy.
fn restore_history(from: &std::sync::Arc<Vec<Vec<u64>>>) -> Vec<Vec<u64>> {
    let kept = RESTORED.try_with(|k| k.borrow_mut().take()).ok().flatten();
    match kept {
        Some((mut buf, r)) if std::sync::Arc::ptr_eq(&r.from, from) && r.dirty.is_some() => {
            for (ci, lo, hi) in r.dirty.unwrap_or_default() {
                if let (Some(dst), Some(src)) = (buf.get_mut(ci), from.get(ci)) {
                    let hi = usize::try_from(hi)
                        .unwrap_or(usize::MAX)
                        .min(dst.len())
                        .min(src.len());
                    let lo = usize::try_from(lo).unwrap_or(usize::MAX).min(hi);
                    dst[lo..hi].copy_from_slice(&src[lo..hi]);
                }
            }
            buf
        }
        Some((mut buf, _)) => {
            buf.clone_from(&**from);
            buf
        }
        None => (**from).clone(),
    }
}

/// Blocks of a sequential scan from which building [`Huff::multi`] pays.
const MULTI_MIN_BLOCKS: u64 = 256;

/// Blocks decoded at most per candidate, over all scans.
pub const MAX_BLOCKS: u64 = 1 << 28;

/// Scans decoded once per carving: a picture stored several
/// times (copies in several folders, caches, backups) has the same
/// entropy-coded data in every copy, and decoding it again gives the same
/// answer. Each decode's outcome is kept with where its bytes lie; a later
/// scan with the same frame, tables, restart interval and scan header
/// (compared as a SHA-256 of all of them) whose bytes, read again, equal
/// every byte the earlier decode depended on gets that outcome without
/// decoding. Exact: the decode is a function of those and nothing else (the
/// blocks budget is checked and charged the same way), and the bytes are
/// compared, not hashed. Only for the validation stage's validations
/// ([`with_memo`]) of the image's bytes, read directly or through a view
/// of them (a file system's layout of a file): an entry keeps where in the
/// image its bytes lie, as runs. A progressive scan also depends on
/// what the scans before it left (which coefficients are non-zero): its
/// outcome is kept with that history before it and after it, and taken only
/// when the history is equal too.
///
/// A copy that repeats a sequential scan only up to some byte (a copy the
/// image holds in fragments, read contiguously; a copy cut short) is not
/// decoded from its start either: a decode leaves marks of its state every
/// 32 KiB or so (`Mark`, as a fragment search's snapshots), and the copy
/// resumes from the last mark its bytes repeat to (far enough before the
/// first differing byte that a [`Trail`] being left still gets every
/// snapshot near where the decode stops; below the mark the trail answers
/// nothing, and the fragment search decodes for itself).
///
/// Two validations of copies running at once: the second waits for the
/// first's outcome (a scan being decoded claims its key), then takes it.
///
/// Bounded: at most 16 Ki outcomes (forgotten all at once when full), each
/// over at most 64 runs of the image and with at most 256 marks; a lookup
/// of a scan never seen costs a 4 KiB checksum.
#[derive(Default)]
pub struct ScanMemo {
    state: std::sync::Mutex<MemoState>,
    /// A claim was given up ([`Claim`]).
    freed: std::sync::Condvar,
    /// Scans answered from the memo, and their bytes.
    hits: std::sync::atomic::AtomicU64,
    hit_bytes: std::sync::atomic::AtomicU64,
    /// Scans resumed from a mark, and the bytes not decoded again.
    resumes: std::sync::atomic::AtomicU64,
    resumed_bytes: std::sync::atomic::AtomicU64,
    /// Decodes that went on from a kept decode's mark found by [`Shifted`].
    shifts: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for ScanMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanMemo")
            .field("hits", &self.hits())
            .field("resumes", &self.resumes())
            .finish()
    }
}

#[derive(Default)]
struct MemoState {
    map: MemoMap,
    /// Bytes of history and marks held by the entries.
    held: usize,
    /// Keys of the scans being decoded now (by [`ScanMemo::lookup`]'s callers).
    pending: std::collections::HashSet<MemoKey>,
}

/// Checksum of the first 4 KiB of entropy-coded data, digest of the
/// decoding parameters.
type MemoKey = (u32, [u8; 32]);

/// Key → outcomes.
type MemoMap = std::collections::HashMap<MemoKey, Vec<MemoEntry>>;

/// Longest a lookup waits for another thread's decode of the same key (a
/// safety net: the decode holding it never waits for anything).
const MAX_CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What a [`ScanMemo`] knows of a scan.
enum Lookup {
    /// Its bytes repeat a kept decode's: that outcome.
    Whole(MemoEntry),
    /// Its bytes repeat a kept decode's up to a mark: the marks up to it
    /// (relative to the scan's start), the last one to resume from.
    From(Vec<Mark>),
    Miss,
}

/// A scan's key claimed while it is decoded: lookups of the same key wait
/// for its outcome.
struct Claim<'m> {
    memo: &'m ScanMemo,
    key: MemoKey,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut st = self.memo.state.lock().unwrap_or_else(|e| e.into_inner());
        st.pending.remove(&self.key);
        drop(st);
        self.memo.freed.notify_all();
    }
}

/// Most outcomes a [`ScanMemo`] keeps.
const MEMO_ENTRIES: usize = 1 << 14;
/// Most runs of the image an outcome's bytes may lie in to be kept (a
/// file listed in many extents would make an entry as large as its list).
const MEMO_MAX_RUNS: usize = 64;

/// Bytes of entropy-coded data the memo's checksum covers.
const MEMO_PREFIX: usize = 4096;

/// Bytes past the decoder's stopping point included in what a failed
/// decode depends on (the reader may have looked at one byte past what it
/// consumed; a scan that ended consumed its marker and looked no further).
const MEMO_SLACK: u64 = 2;

#[derive(Clone)]
struct MemoEntry {
    /// Where in the image the bytes the outcome depends on lie (runs of
    /// `(offset, length)`: one, unless the scan was decoded through a view
    /// such as a file system's layout of the file).
    runs: Vec<(u64, u64)>,
    /// Bytes from there that the outcome depends on.
    depends: u64,
    /// The scan's outcome, offsets from its first byte: the marker that ends
    /// it, or the error with where good data ended and where the decoder
    /// stopped.
    outcome: Result<u64, (&'static str, u64, u64)>,
    /// A progressive scan's coefficient history before it (which the
    /// outcome also depends on) and after it (what it leaves).
    history: Option<std::sync::Arc<(MemoHistory, MemoHistory)>>,
    /// A sequential scan's marks ([`MarkRec`]): `at` and `good` relative to
    /// the scan's first byte, ascending.
    marks: std::sync::Arc<[Mark]>,
}

/// [`Tables::history`].
type History = Option<Vec<Vec<u64>>>;

/// A [`History`] as a [`ScanMemo`] keeps it: each component shared with
/// the history kept before it where equal (a progressive scan changes one
/// component, or the DC bits of all; the history after one scan is the
/// history before the next). A first decode of a progressive file under
/// the memo copied the whole history twice per scan: 1.9x the decode's
/// time on `d-debian.jpg` (800 x 600, ten scans in 160 KB).
type MemoHistory = Option<Vec<std::sync::Arc<Vec<u64>>>>;

/// `h` as a [`MemoHistory`], each component equal to `like`'s taken from
/// it (not copied).
fn memo_history(h: &History, like: &MemoHistory) -> MemoHistory {
    let like = like.as_deref().unwrap_or_default();
    Some(
        h.as_ref()?
            .iter()
            .enumerate()
            .map(|(ci, c)| match like.get(ci) {
                Some(a) if **a == *c => a.clone(),
                _ => std::sync::Arc::new(c.clone()),
            })
            .collect(),
    )
}

/// True when `m` holds the history `h`; `last`, when given, is a
/// [`MemoHistory`] that `h` equals (its components shared with `m` are
/// equal without being compared).
fn memo_history_is(m: &MemoHistory, h: &History, last: Option<&MemoHistory>) -> bool {
    let last = last.and_then(Option::as_deref).unwrap_or_default();
    match (m, h) {
        (None, None) => true,
        (Some(m), Some(h)) => {
            m.len() == h.len()
                && m.iter().zip(h).enumerate().all(|(ci, (a, b))| {
                    last.get(ci).is_some_and(|l| std::sync::Arc::ptr_eq(a, l)) || **a == *b
                })
        }
        _ => false,
    }
}

/// Sets `h` to the history `m` holds; `last`, when given, is a
/// [`MemoHistory`] that `h` equals (its components shared with `m` are
/// not copied again).
fn memo_history_restore(h: &mut History, m: &MemoHistory, last: Option<&MemoHistory>) {
    let last = last.and_then(Option::as_deref).unwrap_or_default();
    match m {
        None => *h = None,
        Some(m) => {
            let h = h.get_or_insert_with(Vec::new);
            let same_shape = h.len() == m.len();
            h.truncate(m.len());
            h.resize_with(m.len(), Vec::new);
            for (ci, (d, s)) in h.iter_mut().zip(m).enumerate() {
                if same_shape && last.get(ci).is_some_and(|l| std::sync::Arc::ptr_eq(s, l)) {
                    continue;
                }
                d.clone_from(s);
            }
        }
    }
}

/// Most bytes of coefficient history and marks a [`ScanMemo`] keeps.
const MEMO_HELD_BYTES: usize = 64 << 20;

thread_local! {
    /// The memo of the validation running on this thread, if any, and the
    /// reader (by [`Src::reader_id`]) its offsets are of.
    static MEMO: std::cell::RefCell<Option<(std::sync::Arc<ScanMemo>, usize)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f`, a validation of `image`'s bytes, with `memo` answering its
/// JPEG scans and keeping their outcomes; a memo is only ever used with one
/// image's reader and views of it ([`super::ByteReader::lies_in`]: a file
/// system's layout of a file, a join); windows of another reader decode as
/// without it.
pub fn with_memo<R>(
    memo: &std::sync::Arc<ScanMemo>,
    image: &dyn super::ByteReader,
    f: impl FnOnce() -> R,
) -> R {
    let id = super::read::reader_id(image);
    super::read::with_local(&MEMO, (memo.clone(), id), f)
}

/// The decoding parameters of a sequential scan, as a SHA-256 digest.
fn memo_params(t: &Tables, f: &Frame, s: &Scan) -> Option<[u8; 32]> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update([f.precision]);
    h.update(f.width.to_le_bytes());
    h.update(f.height.to_le_bytes());
    h.update(t.restart.to_le_bytes());
    for &(id, hh, vv) in &f.comps {
        h.update([id]);
        h.update(hh.to_le_bytes());
        h.update(vv.to_le_bytes());
    }
    h.update([0xFF, s.ss, s.se, s.ah]);
    for &(ci, td, ta) in &s.comps {
        h.update((ci as u32).to_le_bytes());
        for table in [t.dc.get(td)?.as_deref()?, t.ac.get(ta)?.as_deref()?] {
            for v in table
                .maxcode
                .iter()
                .chain(&table.valptr)
                .chain(&table.mincode)
            {
                h.update(v.to_le_bytes());
            }
            h.update(table.vals);
        }
    }
    Some(h.finalize().into())
}

impl ScanMemo {
    /// Scans answered from the memo so far, and the bytes not decoded again.
    pub fn hits(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.hits.load(Relaxed), self.hit_bytes.load(Relaxed))
    }

    /// The key of the scan at window offset `start` (with a progressive
    /// scan's history before it).
    fn key(src: &Src, start: u64, t: &Tables, f: &Frame, s: &Scan) -> Option<(u32, [u8; 32])> {
        let mut head = [0u8; MEMO_PREFIX];
        let n = src.read(start, &mut head).min(MEMO_PREFIX);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head[..n]);
        // (Native byte order: the key only has to agree within one run.)
        for comp in t.history.iter().flatten() {
            crc.update(bytemuck::cast_slice(comp));
        }
        Some((crc.finalize(), memo_params(t, f, s)?))
    }

    /// Decodes that went on from a kept decode's mark found in step with
    /// them from another offset (a wrong split joined to the picture's own
    /// data).
    pub fn shifts(&self) -> u64 {
        self.shifts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Scans resumed from a mark so far, and the bytes not decoded again.
    pub fn resumes(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.resumes.load(Relaxed), self.resumed_bytes.load(Relaxed))
    }

    /// What the memo knows of the scan at window offset `start` (with the
    /// history before it): a kept outcome whose bytes (and history) it
    /// repeats (a failure only when no `trail` is being left), or else the
    /// marks up to the last one at most `usable(common)` bytes into the
    /// scan, `common` being how many of its first bytes repeat a kept
    /// decode's. With `claim`, waits while another thread decodes a scan
    /// with the same key, and returns this thread's claim (held while it
    /// decodes, so that others wait for it).
    fn lookup(
        &self,
        key: &MemoKey,
        (src, image, id): (&Src, &dyn super::ByteReader, usize),
        (start, history, last): (u64, &History, Option<&MemoHistory>),
        (claim, trail, kin): (bool, bool, bool),
        usable: impl Fn(u64) -> u64,
    ) -> (Lookup, Option<Claim<'_>>, Vec<MemoEntry>) {
        // (Where this scan starts in the image: not answered by itself.)
        let Some(at) = src
            .image_runs(id, start, 1)
            .and_then(|r| r.first().map(|r| r.0))
        else {
            return (Lookup::Miss, None, Vec::new());
        };
        let t0 = std::time::Instant::now();
        let (found, claimed) = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            while claim && st.pending.contains(key) {
                let Some(left) = MAX_CLAIM_WAIT.checked_sub(t0.elapsed()) else {
                    break;
                };
                st = match self.freed.wait_timeout(st, left) {
                    Ok((g, _)) => g,
                    Err(e) => e.into_inner().0,
                };
            }
            let claimed = claim && st.pending.insert(*key);
            (st.map.get(key).cloned().unwrap_or_default(), claimed)
        };
        let claim = claimed.then(|| Claim {
            memo: self,
            key: *key,
        });
        // (Kept decodes of a sequential scan with these parameters and
        // first bytes, for [`Shifted`].)
        let kin = if kin {
            found
                .iter()
                .filter(|e| e.history.is_none() && e.marks.len() >= 2)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        // (Compared outside the lock: other threads go on meanwhile.)
        let mut best: Option<(u64, MemoEntry, usize)> = None;
        for e in found {
            if !e
                .history
                .as_ref()
                .map_or(history.is_none(), |h| memo_history_is(&h.0, history, last))
            {
                continue;
            }
            let common = src.common_prefix_runs(start, (image, id), &e.runs, e.depends);
            // (A failure answered whole leaves a trail nothing near it: with
            // one asked for, the decode resumes from a mark before it.)
            if common == e.depends
                && e.runs.first().is_some_and(|r| r.0 != at)
                && (e.outcome.is_ok() || !trail)
            {
                use std::sync::atomic::Ordering::Relaxed;
                self.hits.fetch_add(1, Relaxed);
                self.hit_bytes.fetch_add(e.depends, Relaxed);
                return (Lookup::Whole(e), claim, kin);
            }
            let upto = usable(common);
            let k = e.marks.partition_point(|m| m.at <= upto);
            if let Some(m) = k.checked_sub(1).and_then(|i| e.marks.get(i))
                && m.at > 0
                && best.as_ref().is_none_or(|b| m.at > b.0)
            {
                best = Some((m.at, e, k));
            }
        }
        match best {
            Some((_, e, k)) => (Lookup::From(e.marks[..k].to_vec()), claim, kin),
            None => (Lookup::Miss, claim, kin),
        }
    }

    fn keep(&self, key: MemoKey, entry: MemoEntry) {
        // (Components shared with other entries counted in each.)
        let size = |h: &MemoHistory| h.iter().flatten().map(|c| c.len() * 8).sum::<usize>();
        let bytes = entry
            .history
            .as_ref()
            .map_or(0, |h| size(&h.0) + size(&h.1))
            + entry.marks.len() * std::mem::size_of::<Mark>();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        if st.map.values().map(Vec::len).sum::<usize>() >= MEMO_ENTRIES
            || st.held + bytes > MEMO_HELD_BYTES
        {
            st.map.clear();
            st.held = 0;
        }
        let list = st.map.entry(key).or_default();
        if list.len() < 8 && !list.iter().any(|e| e.runs.first() == entry.runs.first()) {
            list.push(entry);
            st.held += bytes;
        }
    }
}

/// A resumed sequential decode (a fragment search's, past its split) that
/// has gone on for [`SHIFT_AFTER`] bytes may be decoding a kept decode's
/// bytes from another offset: a wrong split joined to the picture's own
/// later data (a copy's fragment, or the file's own next fragment joined
/// one split too early) decodes in step with that picture's decode until
/// the MCU count runs out or the data ends, megabytes on. Once the decode
/// is at a boundary of the kept decode's marks in the very state the mark
/// holds (same bytes ahead, verified), everything up to a later mark
/// decodes as the kept decode did, only numbered `δ` MCUs apart: the decode
/// goes on from that mark with its own MCU count. The mark is chosen so
/// that the decode reads at least an MCU row after it before it can stop
/// (the kept decode went on past it for a row, and the count leaves a row),
/// so the row start it reports as good data is its own; with a trail, no
/// later than the trail's snapshots near where it can first stop and at
/// its block-map boundaries ([`memo_resume_limit`]). The verdict is the
/// same either way (a test decodes both ways).
struct Shifted<'i> {
    kin: Vec<MemoEntry>,
    /// The image the kept decodes' runs lie in, and its identity.
    image: &'i dyn super::ByteReader,
    id: usize,
    trail: Option<TrailSpec>,
    below: u64,
    /// The entry the bytes were found in, its offsets minus the window's,
    /// and the mark checked next.
    found: Option<(usize, i128, usize)>,
    tries: u32,
}

/// What a paused decode does next ([`Shifted::paused`]).
enum Step {
    /// Goes on, to pause again at this window offset.
    Pause(u64),
    /// Goes on to the scan's end.
    Go,
    /// Goes on from window offset `.0` (the reader is there), MCU `.1`.
    Jump(u64, u64),
}

/// Bytes a resumed decode goes on for before [`Shifted`] looks.
const SHIFT_AFTER: u64 = 128 << 10;
/// Bytes looked for in the kept decodes.
const SHIFT_NEEDLE: usize = 64;
/// Marks tried for the decode in step with one.
const SHIFT_TRIES: u32 = 8;
/// Fewest bytes worth skipping.
const SHIFT_MIN_JUMP: u64 = 64 << 10;
/// Most bytes of the kept decodes searched, in all (a decode pauses to
/// search once, after decoding [`SHIFT_AFTER`] bytes, at ~8 ns a byte;
/// searching costs well under 1 ns a byte).
const SHIFT_MAX_SEARCH: u64 = 16 << 20;

impl<'i> Shifted<'i> {
    fn new(
        kin: Vec<MemoEntry>,
        (image, id): (&'i dyn super::ByteReader, usize),
        trail: Option<TrailSpec>,
        below: u64,
    ) -> Self {
        Shifted {
            kin,
            image,
            id,
            trail,
            below,
            found: None,
            tries: 0,
        }
    }

    /// Where the mark checked next lies in the window.
    fn next_pause(&self, now: u64) -> Step {
        let Some((e, shift, k)) = self.found else {
            return Step::Go;
        };
        let at = self.kin[e]
            .marks
            .get(k)
            .and_then(|m| u64::try_from(i128::from(m.at) - shift).ok());
        match at {
            Some(at) if at > now && self.tries < SHIFT_TRIES => Step::Pause(at),
            _ => Step::Go,
        }
    }

    /// The decode paused at an MCU boundary (`b` there, `(mcu, eobrun, rst,
    /// good)` its state; the scan `(mcux, total)` MCUs across and in all).
    fn paused(&mut self, b: &mut Bits, p: (u64, u32, u8, u64), (mcux, total): (u64, u64)) -> Step {
        let at = b.at();
        let Some((e, shift, k)) = self.found else {
            // Where do the next bytes lie in a kept decode?
            let mut needle = [0u8; SHIFT_NEEDLE];
            if b.src.read(at, &mut needle) < SHIFT_NEEDLE {
                return Step::Go;
            }
            let mut left = SHIFT_MAX_SEARCH;
            let hit = self.kin.iter().enumerate().find_map(|(i, entry)| {
                let y = find_in_runs(self.image, &entry.runs, &needle, &mut left)?;
                let k = entry.marks.partition_point(|m| m.at <= y);
                Some((i, i128::from(y) - i128::from(at), k))
            });
            self.found = hit;
            return self.next_pause(at);
        };
        let entry = &self.kin[e];
        let (Some(m), Some(last)) = (entry.marks.get(k), entry.marks.last()) else {
            return Step::Go;
        };
        let in_step = i128::from(at) == i128::from(m.at) - shift
            && (b.acc, b.n, b.pad, p.1, b.marker, b.cut)
                == (m.acc, m.n, m.pad, m.eobrun, false, false);
        if !in_step {
            self.found = Some((e, shift, k + 1));
            self.tries += 1;
            return self.next_pause(at);
        }
        self.tries = SHIFT_TRIES;
        // How far the window's bytes from here are the kept decode's: the
        // decode goes as it did through the marks before there.
        let Ok(upto) = u64::try_from(i128::from(last.at) - shift) else {
            return Step::Go;
        };
        // (Where the kept decode's bytes from the mark on lie in the image.)
        let view = RunsView::new(self.image, &entry.runs);
        let len = upto.saturating_sub(at).min(view.len().saturating_sub(m.at));
        let common = view.lies_in(m.at, len).map_or(0, |(_, runs)| {
            b.src
                .common_prefix_runs(at, (self.image, self.id), &runs, len)
        });
        let covered = |j: &&Mark| {
            u64::try_from(i128::from(j.at) - shift)
                .is_ok_and(|x| x.saturating_add(MEMO_SLACK) <= at.saturating_add(common))
        };
        let Some(lastc) = entry.marks[k..].iter().rev().find(covered) else {
            return Step::Go;
        };
        let delta = i128::from(p.0) - i128::from(m.mcu);
        let (mcux, total) = (i128::from(mcux), i128::from(total));
        // Where the decode can first stop: past the last mark it decodes
        // through as the kept decode did, or where its own count runs out.
        let ends = entry.marks[k..]
            .iter()
            .rev()
            .filter(covered)
            .find(|j| i128::from(j.mcu) + delta <= total)
            .and_then(|j| u64::try_from(i128::from(j.at) - shift).ok());
        let Some(ends) = ends else {
            return Step::Go;
        };
        let limit = match self.trail {
            Some(_) => memo_resume_limit(0, ends, self.trail, self.below),
            None => ends,
        };
        let Some((j, to)) = entry.marks[k..].iter().rev().find_map(|j| {
            let mcu = i128::from(j.mcu);
            let to = u64::try_from(i128::from(j.at) - shift).ok()?;
            (mcu + mcux <= i128::from(lastc.mcu)
                && mcu + delta >= 0
                && mcu + delta + mcux < total
                && to <= limit
                && to >= at.saturating_add(SHIFT_MIN_JUMP))
            .then_some((j, to))
        }) else {
            return Step::Go;
        };
        let Ok(mcu) = u64::try_from(i128::from(j.mcu) + delta) else {
            return Step::Go;
        };
        b.reposition(to, j);
        Step::Jump(to, mcu)
    }
}

/// The first offset, in the file `runs` of `image` make (at most `left`
/// of its bytes read, counted off), of `needle`.
fn find_in_runs(
    image: &dyn super::ByteReader,
    runs: &[(u64, u64)],
    needle: &[u8],
    left: &mut u64,
) -> Option<u64> {
    let view = RunsView::new(image, runs);
    let finder = memchr::memmem::Finder::new(needle);
    let total = view.len().min(*left);
    *left -= total;
    let mut buf = vec![0u8; usize::try_from(total.min(1 << 20)).ok()? + needle.len()];
    let mut pos = 0u64;
    while pos < total {
        let want = usize::try_from((total - pos).min(buf.len() as u64)).ok()?;
        let got = view.read_at(pos, &mut buf[..want]);
        if let Some(i) = buf.get(..got).and_then(|b| finder.find(b)) {
            return Some(pos + i as u64);
        }
        if got < want || got <= needle.len() {
            return None;
        }
        pos += (got - needle.len() + 1) as u64;
    }
    None
}

/// Decodes one scan starting at the cursor; on success the cursor is at the
/// marker that ends the scan. Errors carry the offset where good data ends
/// (the start of the failing MCU row or restart interval) and the offset
/// the decoder had reached when it failed (plus the bytes it may hold).
fn decode_scan(
    c: &mut Cursor,
    buf: &mut Vec<u8>,
    kept: &mut Buffered,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
) -> Result<(), (ScanErr, u64, u64)> {
    let start = c.pos();
    let resume = t
        .snap
        .resume
        .take_if(|r| r.m.scan == t.snap.scan && r.m.at >= start);
    if t.resume_ready && resume.is_none() {
        // A scan decoded before the one resumed from: from the history the
        // frame starts with, as without the snapshot's restored early.
        t.resume_ready = false;
        t.memo_sync = false;
        for c in t.history.iter_mut().flatten() {
            c.fill(0);
        }
        t.all_dirty();
    }
    // A scan decoded before in this carving (same parameters, same bytes):
    // its outcome, charged as a decode; or (a sequential scan whose bytes
    // repeat only up to some point) the last of its marks before there.
    // A decode resumed from a snapshot (a fragment search's) asks too, for
    // a sequential scan: the scan's outcome does not depend on where its
    // decode resumed, and a mark past the snapshot is nearer the end.
    let progressive = f.kind == FrameKind::Progressive;
    let sequential = f.kind == FrameKind::Sequential;
    let blocks = scan_blocks(f, s);
    let fresh = resume.is_none();
    let memo = (t.snap.wants.is_empty()
        && if fresh {
            (progressive || sequential) && t.budget >= blocks
        } else {
            sequential
        })
    .then(|| MEMO.with(|m| m.borrow().clone()))
    .flatten()
    .and_then(|(m, id)| {
        // The image's reader, or a view of it (a file system's layout).
        let image = c.src().image_reader(id)?;
        Some((ScanMemo::key(&c.src(), start, t, f, s)?, m, image, id))
    });
    // (The scan's blocks: charged at its start, or in the snapshot's budget.)
    let charge = |t: &mut Tables| match &resume {
        Some(r) => t.budget = r.m.budget,
        None => t.budget -= blocks,
    };
    let mut from = None;
    let mut _claim = None;
    let mut shifted = None;
    if let Some((key, m, image, id)) = &memo {
        let trail = t
            .snap
            .trail
            .as_ref()
            .filter(|tr| tr.valid)
            .map(|tr| tr.spec);
        // (A decode resumed from a snapshot leaves no snapshot below it.)
        let below = resume.as_ref().map_or(0, |r| r.m.at);
        let usable = |common: u64| memo_resume_limit(start, common, trail, below);
        // (A resumed sequential decode that goes on for long may be
        // decoding a kept decode's bytes from elsewhere: [`Shifted`].)
        let shifts = !fresh && sequential && t.restart == 0 && t.snap.wants.is_empty();
        let (found, claim, kin) = m.lookup(
            key,
            (&c.src(), *image, *id),
            (start, &t.history, t.memo_sync.then_some(&t.memo_last)),
            (fresh, trail.is_some(), shifts),
            usable,
        );
        if !kin.is_empty() {
            shifted = Some(Shifted::new(kin, (*image, *id), trail, below));
        }
        match found {
            Lookup::Whole(e) => {
                if let Some(tr) = t.snap.trail.as_mut() {
                    // (Not decoded here: no snapshots in this scan. A
                    // failure here leaves none near it.)
                    match e.outcome {
                        Ok(end) => tr.resumed_at(start + end),
                        Err(_) => tr.valid = false,
                    }
                }
                charge(t);
                if let Some(h) = &e.history {
                    t.all_dirty();
                    let last = t.memo_sync.then_some(&t.memo_last);
                    memo_history_restore(&mut t.history, &h.1, last);
                    t.memo_last = h.1.clone();
                    t.memo_sync = true;
                }
                return match e.outcome {
                    Ok(end) => {
                        c.seek(start + end);
                        Ok(())
                    }
                    Err((why, good, fail)) => Err((ScanErr::Bad(why), start + good, start + fail)),
                };
            }
            // (A snapshot at or past the mark: resumed from there.)
            Lookup::From(marks)
                if resume
                    .as_ref()
                    .is_none_or(|r| marks.last().is_some_and(|m| start + m.at > r.m.at)) =>
            {
                use std::sync::atomic::Ordering::Relaxed;
                let skipped = marks.last().map_or(0, |m| m.at);
                m.resumes.fetch_add(1, Relaxed);
                m.resumed_bytes.fetch_add(skipped, Relaxed);
                from = Some(marks);
            }
            Lookup::From(_) | Lookup::Miss => {}
        }
        _claim = claim;
    }
    let mut b = match (&resume, from.as_ref().and_then(|m| m.last())) {
        (Some(r), None) => {
            // (A resumed decode is often a probe of a few KiB past a split:
            // its first read is small, and pieces double from there.)
            let first = Buffered {
                off: r.m.at,
                len: 0,
                piece: RESUME_PIECE,
            };
            let mut b = Bits::new(c.src(), r.m.at, buf, first);
            b.acc = r.m.acc;
            b.n = r.m.n;
            b.pad = r.m.pad;
            if !std::mem::take(&mut t.resume_ready) {
                t.all_dirty();
                t.memo_sync = false;
                match (t.history.as_mut(), r.history.as_deref()) {
                    (Some(h), Some(from)) => h.clone_from(from),
                    (_, from) => t.history = from.cloned(),
                }
            }
            t.budget = r.m.budget;
            b
        }
        (_, Some(m)) => {
            // A memo's mark: the state a decode of the same bytes had there
            // (a sequential scan: no history).
            let at = start + m.at;
            let first = Buffered {
                off: at,
                len: 0,
                piece: FIRST_PIECE,
            };
            let mut b = Bits::new(c.src(), at, buf, first);
            b.acc = m.acc;
            b.n = m.n;
            b.pad = m.pad;
            charge(t);
            if let Some(tr) = t.snap.trail.as_mut() {
                tr.resumed_at(at);
            }
            b
        }
        (None, None) => Bits::new(c.src(), start, buf, *kept),
    };
    let init = match (&resume, from.as_ref().and_then(|m| m.last())) {
        (_, Some(m)) => Some((m.mcu, m.eobrun, m.rst, start + m.good)),
        (Some(r), None) => Some((r.m.mcu, r.m.eobrun, r.m.rst, r.m.good)),
        (None, None) => None,
    };
    // (Outcomes and marks are kept from decodes of the whole scan.)
    let keeps = memo.as_ref().filter(|_| fresh);
    let before = (keeps.is_some() && progressive).then(|| {
        if t.memo_sync {
            t.memo_last.clone()
        } else {
            memo_history(&t.history, &t.memo_last)
        }
    });
    t.memo_sync = false;
    if keeps.is_some() && !progressive {
        t.snap.marks = Some(MarkRec::new(start, from.unwrap_or_default()));
    }
    t.hist_hi = 0;
    let mut init = init;
    if shifted.is_some() {
        t.pause_at = b.at().saturating_add(SHIFT_AFTER);
    }
    let r = loop {
        let r = scan_body_best(&mut b, start, t, f, s, init);
        let Some(p) = t.paused.take() else {
            break r;
        };
        init = Some(p);
        let Some(sh) = shifted.as_mut() else {
            continue;
        };
        let (mcux, mcuy, _) = scan_geometry(f, s);
        match sh.paused(&mut b, p, (mcux, mcux * mcuy)) {
            Step::Pause(at) => t.pause_at = at,
            Step::Go => {}
            Step::Jump(at, mcu) => {
                init = Some((mcu, 0, p.2, p.3));
                if let Some(tr) = t.snap.trail.as_mut() {
                    tr.resumed_at(at);
                }
                if let Some((_, m, _, _)) = &memo {
                    use std::sync::atomic::Ordering::Relaxed;
                    m.shifts.fetch_add(1, Relaxed);
                }
            }
        }
    };
    t.pause_at = u64::MAX;
    t.paused = None;
    if progressive
        && s.ss > 0
        && let Some(d) = t.restored.as_mut().and_then(|r| r.dirty.as_mut())
    {
        // (The words an AC scan may have changed: blocks from where it
        // started to the last it asked for.)
        let lo = init.map_or(0, |i| i.0);
        for &(ci, _, _) in &s.comps {
            d.push((ci, lo, t.hist_hi));
        }
        if d.len() > MAX_DIRTY {
            t.all_dirty();
        }
    }
    let marks = t.snap.marks.take().map(|r| r.list);
    *kept = b.buffered();
    let fail = b.at();
    if let Some((key, m, _, id)) = keeps {
        let outcome = match &r {
            Ok(end) => Some(Ok(end - start)),
            Err((ScanErr::Bad(why), good)) => Some(Err((*why, good - start, fail - start))),
            // (Cut by the window: depends on where the window ends.)
            Err((ScanErr::Cut, _)) => None,
        };
        // (An outcome that may have seen the window's end is not kept.)
        let slack = if r.is_ok() { 0 } else { MEMO_SLACK };
        let depends = fail.saturating_add(slack).saturating_sub(start);
        if let Some(outcome) = outcome
            && start.saturating_add(depends) <= c.src().len()
            && let Some(runs) = c.src().image_runs(*id, start, depends)
            && runs.len() <= MEMO_MAX_RUNS
        {
            m.keep(
                *key,
                MemoEntry {
                    runs,
                    depends,
                    outcome,
                    history: before.map(|h| {
                        let after = memo_history(&t.history, &h);
                        t.memo_last = after.clone();
                        t.memo_sync = true;
                        std::sync::Arc::new((h, after))
                    }),
                    marks: marks.unwrap_or_default().into(),
                },
            );
        }
    }
    let at = r.map_err(|(e, good)| (e, good, fail))?;
    c.seek(at);
    Ok(())
}

/// How far into a scan at window offset `start` the mark it resumes from
/// may lie, when its first `common` bytes repeat a kept decode's: before
/// the first differing byte (by the slack the reader may look ahead), and,
/// when the decode leaves a [`Trail`], before the grid points within the
/// trail's span of there and the block-map boundaries it keeps (the decode
/// stops at or past the first differing byte, and the trail's snapshots
/// there must all be taken; those below `below`, where the decode resumed
/// from a snapshot, it never takes).
fn memo_resume_limit(start: u64, common: u64, trail: Option<TrailSpec>, below: u64) -> u64 {
    let differs = start.saturating_add(common);
    let mut limit = differs.saturating_sub(MEMO_SLACK);
    if let Some(spec) = trail {
        let grid = spec.grid.max(1);
        limit = limit.min(differs.saturating_sub(spec.span.saturating_add(grid)));
        if let Some(bs) = spec.block_map {
            // The latest TRAIL_STICKY of them are kept: those within
            // CHEAP_STICKY of the file's start are captured afterwards
            // ([`Trail::fill_sticky`]), the decode goes through the others.
            let points: Vec<u64> = block_map_splits(bs, grid, differs.saturating_add(grid))
                .filter(|&g| g >= below)
                .collect();
            let kept = &points[points.len().saturating_sub(TRAIL_STICKY)..];
            if let Some(&p) = kept.iter().find(|&&p| p > CHEAP_STICKY) {
                limit = limit.min(p);
            }
        }
    }
    limit.saturating_sub(start)
}

/// Block-map splits this near a file's start that a decode under a memo
/// passed by are captured for its trail ([`Trail::fill_sticky`]) rather than
/// decoded through: an ext2/3 file's first ones, at 44 and 48 KiB (4 KiB
/// blocks; a broken copy of a picture decoded before resumed from there to
/// near where it broke, 1-2 MB later: 11 ms against 1 ms for the copy's
/// decode on session 15's ext2 image); the next ones lie past 4 MiB.
const CHEAP_STICKY: u64 = 256 << 10;

/// Blocks a scan decodes (what [`scan_body`] charges the budget).
fn scan_blocks(f: &Frame, s: &Scan) -> u64 {
    let (mcux, mcuy, per_mcu) = scan_geometry(f, s);
    mcux * mcuy * per_mcu
}

/// MCUs across and down of a scan, and blocks per MCU.
fn scan_geometry(f: &Frame, s: &Scan) -> (u64, u64, u64) {
    let interleaved = s.comps.len() > 1;
    let (mcux, mcuy) = if interleaved {
        (
            u64::from(f.width).div_ceil(8 * u64::from(f.hmax)),
            u64::from(f.height).div_ceil(8 * u64::from(f.vmax)),
        )
    } else {
        f.blocks(s.comps[0].0)
    };
    let per_mcu: u64 = if interleaved {
        s.comps
            .iter()
            .map(|&(ci, _, _)| u64::from(f.comps[ci].1 * f.comps[ci].2))
            .sum()
    } else {
        1
    };
    (mcux, mcuy, per_mcu)
}

/// [`scan_body`], compiled for the CPU's bit-counting instructions when it
/// has them: on x86-64 without them (the baseline target) every
/// `count_ones` of the progressive refinement's masks is a dozen
/// instructions, and `trailing_zeros` a branch (measured: progressive files
/// decode about 16% faster with them). The same integer operations either
/// way: the verdicts are identical.
fn scan_body_best(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("lzcnt")
    {
        if std::arch::is_x86_feature_detected!("bmi2") {
            // SAFETY: scan_body_shifts needs POPCNT, BMI1, LZCNT and BMI2,
            // and this CPU has all four (checked just above).
            return unsafe { scan_body_shifts(b, start, t, f, s, init) };
        }
        // SAFETY: scan_body_bits needs POPCNT, BMI1 and LZCNT, and this CPU
        // has all three (checked just above).
        return unsafe { scan_body_bits(b, start, t, f, s, init) };
    }
    scan_body(b, start, t, f, s, init)
}

/// [`scan_body_bits`] with BMI2 too: shifts by a register amount
/// (`SHLX`/`SHRX`) without the flags dependency of `SHL`, on the decoder's
/// critical path (measured 2-6% faster than without).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,lzcnt,bmi2")]
fn scan_body_shifts(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    scan_body(b, start, t, f, s, init)
}

/// [`scan_body`] with POPCNT, BMI1 (TZCNT) and LZCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,lzcnt")]
fn scan_body_bits(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    scan_body(b, start, t, f, s, init)
}

/// [`decode_scan`] on a reader at `start`; returns the offset of the marker
/// that ends the scan.
#[inline(always)]
fn scan_body(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    let interleaved = s.comps.len() > 1;
    let (mcux, mcuy, per_mcu) = scan_geometry(f, s);
    let total = mcux * mcuy;
    if init.is_none() {
        match t.budget.checked_sub(total * per_mcu) {
            Some(left) => t.budget = left,
            None => return Err((ScanErr::Bad("too many blocks to decode"), start)),
        }
    }
    let (max_dc, max_ac) = if f.precision > 8 { (15, 14) } else { (11, 10) };
    let progressive = f.kind == FrameKind::Progressive;
    if !progressive && total * per_mcu >= MULTI_MIN_BLOCKS {
        for &(_, _, ta) in &s.comps {
            if let Some(h) = &t.ac[ta] {
                h.build_multi();
            }
        }
    }
    let (mcu0, mut eobrun, mut rst, mut good) = init.unwrap_or((0, 0, 0, start));
    let restart = u64::from(t.restart);
    // `mcu % mcux` and `mcu % restart`, counted rather than divided.
    let mut col = mcu0.checked_rem(mcux).unwrap_or(0);
    let mut in_interval = mcu0.checked_rem(restart).unwrap_or(0);
    // An end-of-band run of a first AC scan may be counted off at once: a
    // block in it reads nothing (see the end of the loop).
    // (Not while snapshots are captured: they need every boundary. A
    // trail needs only the last boundary of a run, where the decode goes
    // on reading: every boundary of a run lies at the same bit, each
    // replaces the one before it, and the first to follow the run is where
    // the grid points before that bit are settled.)
    let runs = progressive && s.ss > 0 && s.ah == 0 && !interleaved && t.snap.wants.is_empty();
    let trailing = t.snap.trail.is_some();
    let mut mcu = mcu0;
    while mcu < total {
        if init.is_some() && mcu == mcu0 {
            // Resumed: this boundary was handled before the snapshot.
        } else if restart > 0 && mcu > 0 && in_interval == 0 {
            match b.finish(0) {
                Ok((m, _)) if m == 0xD0 + rst => {}
                Ok(_) => {
                    return Err((
                        ScanErr::Bad("restart marker missing or out of sequence"),
                        good,
                    ));
                }
                Err(e) => return Err((e, good)),
            }
            rst = (rst + 1) % 8;
            eobrun = 0;
            good = b.at();
        } else if col == 0 {
            good = b.pos().max(good);
        }
        col += 1;
        if col == mcux {
            col = 0;
        }
        in_interval += 1;
        if in_interval == restart {
            in_interval = 0;
        }
        if b.at() >= t.pause_at && !b.marker && !b.cut {
            // (Resumed with `init` at this boundary: handled above, and the
            // counters counted again from `mcu`.)
            t.pause_at = u64::MAX;
            t.paused = Some((mcu, eobrun, rst, good));
            return Err((ScanErr::Cut, good));
        }
        // Capture: the latest boundary at or before each split. This
        // boundary replaces the latest one for the splits it lies before;
        // for the others the latest one is final.
        if !t.snap.wants.is_empty() {
            let ok = !b.marker && !b.cut;
            let k = if ok {
                t.snap.wants.partition_point(|&w| w < b.at())
            } else {
                t.snap.wants.len()
            };
            if t.snap.latest.is_some() {
                t.snap.finalize_upto(k, &t.history);
            }
            // Past every split: no later boundary changes a snapshot (a
            // split's is final once a boundary past it is seen).
            if ok && k == t.snap.wants.len() && t.snap.stop {
                return Err((ScanErr::Bad("every snapshot taken"), good));
            }
            if ok && k < t.snap.wants.len() {
                let undo = changed_word(t, s, progressive, mcu);
                let snap = Mark::here(b, t, (mcu, eobrun, rst, good)).snap(
                    t.snap.wants[k],
                    Vec::new(),
                    None,
                );
                t.snap.latest = Some((snap, undo));
                t.snap.k = k;
            }
        } else if t.snap.trail.as_ref().is_some_and(|tr| tr.valid) {
            let undo = changed_word(t, s, progressive, mcu);
            let mark = (!b.marker && !b.cut).then(|| Mark::here(b, t, (mcu, eobrun, rst, good)));
            if let Some(tr) = t.snap.trail.as_mut() {
                // The word the last MCU may have changed is logged if it
                // did; this MCU's, at the next boundary.
                tr.flush(&t.history);
                tr.pending = undo;
                if let Some(m) = mark {
                    tr.boundary(m, &t.snap.scan_ends, &t.history);
                }
            }
        }
        if t.snap.marks.as_ref().is_some_and(|r| b.at() >= r.next) && !b.marker && !b.cut {
            let mark = Mark::here(b, t, (mcu, eobrun, rst, good));
            if let Some(r) = t.snap.marks.as_mut() {
                r.push(mark);
            }
        }
        for &(ci, td, ta) in &s.comps {
            let (_, h, v) = f.comps[ci];
            let nblocks = if interleaved { h * v } else { 1 };
            for _ in 0..nblocks {
                let r = if !progressive {
                    let (Some(dc), Some(ac)) = (&t.dc[td], &t.ac[ta]) else {
                        return Err((ScanErr::Bad("missing table"), good));
                    };
                    block_sequential(b, dc, ac, max_dc, max_ac)
                } else if s.ss == 0 {
                    if s.ah == 0 {
                        match &t.dc[td] {
                            Some(dc) => b.dc(dc, max_dc),
                            None => Err(ScanErr::Bad("missing table")),
                        }
                    } else {
                        b.skip(1)
                    }
                } else {
                    let Some(ac) = &t.ac[ta] else {
                        return Err((ScanErr::Bad("missing table"), good));
                    };
                    t.hist_hi = mcu + 1;
                    let hist = t
                        .history
                        .as_mut()
                        .and_then(|hh| hh.get_mut(ci))
                        .and_then(|hc| hc.get_mut(mcu as usize));
                    if s.ah == 0 {
                        block_ac_first(b, ac, s, &mut eobrun, max_ac, hist)
                    } else {
                        match hist {
                            Some(hb) => block_ac_refine(b, ac, s, &mut eobrun, hb),
                            None => Err(ScanErr::Bad("no history")),
                        }
                    }
                };
                r.map_err(|e| (e, good))?;
            }
        }
        mcu += 1;
        if runs && eobrun > 0 {
            // The next blocks up to the run's end, the scan's end or the
            // next restart: each would only take one off the run (and mark
            // a row start at the unchanged position).
            let mut limit = total - mcu;
            if restart > 0 {
                limit = if in_interval == 0 {
                    0
                } else {
                    limit.min(restart - in_interval)
                };
            }
            let mut skip = u64::from(eobrun).min(limit);
            // (A trail's last boundary at this bit: not skipped where the
            // scan or the restart interval ends with the run.)
            if trailing && skip == limit {
                skip = skip.saturating_sub(1);
            }
            if skip > 0 {
                if col == 0 || col + skip > mcux {
                    good = b.pos().max(good);
                }
                eobrun -= skip as u32;
                mcu += skip;
                col = (col + skip) % mcux;
                in_interval = in_interval.wrapping_add(skip);
                if restart > 0 {
                    in_interval %= restart;
                }
            }
        }
    }
    match b.finish(0) {
        Ok((m, at)) if !matches!(m, 0x00 | 0xD0..=0xD7) => Ok(at),
        Ok(_) => Err((ScanErr::Bad("restart marker after the last MCU"), good)),
        Err(e) => Err((e, good)),
    }
}

/// One block of a sequential scan. Every step keeps the reader's state
/// (bits held, fills, errors) exactly that of decoding code by code with
/// [`Bits::decode`] and [`Bits::skip`]: a fill where a code is next and
/// fewer than 16 bits are held, a code and its extra bits dropped in one
/// step when the lookup has them and the real bits suffice (no fill falls
/// between them then), anything else the long way.
#[inline(always)]
fn block_sequential(
    b: &mut Bits,
    dc: &Huff,
    ac: &Huff,
    max_dc: u8,
    max_ac: u8,
) -> Result<(), ScanErr> {
    b.dc(dc, max_dc)?;
    let multi = ac.multi().unwrap_or(&NO_MULTI);
    let fast = ac.fast.as_deref().unwrap_or(&NO_FAST);
    let mut k = 1u32;
    // The accumulator in registers between fills and long-way symbols.
    let (mut acc, mut n, mut pad) = (b.acc, b.n, b.pad);
    loop {
        if n < 16 {
            b.acc = acc;
            b.n = n;
            b.fill();
            (acc, n, pad) = (b.acc, b.n, b.pad);
        }
        let idx = ahead(acc);
        // Several symbols at once when no fill falls before the last code
        // (at least 16 bits held there) and the real bits suffice.
        let e = multi[idx];
        let t = e & 0xFF;
        if e != 0 && t + pad <= n && (e >> 24) + 16 <= n {
            let next = k + (e >> 8 & 0x7F);
            if e & MULTI_EOB != 0 {
                // The symbols before the EOB stay inside the block.
                if next < 64 {
                    b.acc = acc << t;
                    b.n = n - t;
                    return Ok(());
                }
            } else if next <= 64 {
                acc <<= t;
                n -= t;
                k = next;
                if k == 64 {
                    b.acc = acc;
                    b.n = n;
                    return Ok(());
                }
                continue;
            }
        }
        let e = fast[idx];
        // Code length + extra bits: at most 11 + 10.
        let t = u32::from(e & 0xFF);
        if e != 0 && t + pad <= n {
            if e & FAST_EOB != 0 {
                b.acc = acc << t;
                b.n = n - t;
                return Ok(());
            }
            // Run + 1 (16 for ZRL): the index after the coefficient.
            let next = k + u32::from(e >> 8 & 0x3F);
            if next <= 64 {
                acc <<= t;
                n -= t;
                k = next;
                if k == 64 {
                    b.acc = acc;
                    b.n = n;
                    return Ok(());
                }
                continue;
            }
        }
        // The long way (at least 16 bits are held: no fill before the code).
        b.acc = acc;
        b.n = n;
        let rs = b.decode(ac)?;
        let (r, sz) = (u32::from(rs >> 4), rs & 15);
        if sz == 0 {
            if r != 15 {
                return Ok(());
            }
            k += 16;
            if k > 64 {
                return Err(ScanErr::Bad("zero run past the block"));
            }
        } else {
            k += r;
            if k > 63 || sz > max_ac {
                return Err(ScanErr::Bad("coefficient past the block"));
            }
            b.skip(u32::from(sz))?;
            k += 1;
        }
        if k >= 64 {
            return Ok(());
        }
        (acc, n, pad) = (b.acc, b.n, b.pad);
    }
}

/// One block of a progressive first AC scan (T.81 G.1.2.2), with the
/// one-lookup step of [`block_sequential`] for coefficients and ZRL.
#[inline(always)]
fn block_ac_first(
    b: &mut Bits,
    ac: &Huff,
    s: &Scan,
    eobrun: &mut u32,
    max_ac: u8,
    mut hist: Option<&mut u64>,
) -> Result<(), ScanErr> {
    if *eobrun > 0 {
        *eobrun -= 1;
        return Ok(());
    }
    let se = u32::from(s.se);
    let mut k = u32::from(s.ss);
    let fast = ac.fast.as_deref().unwrap_or(&NO_FAST);
    while k <= se {
        if b.n < 16 {
            b.fill();
        }
        let e = fast[ahead(b.acc)];
        let t = u32::from(e & 0xFF);
        if e != 0 && e & FAST_EOB == 0 && t + b.pad <= b.n {
            if e & FAST_ZRL != 0 {
                b.acc <<= t;
                b.n -= t;
                k += 16;
                continue;
            }
            // After the coefficient at k + run.
            let next = k + u32::from(e >> 8 & 0x3F);
            if next <= se + 1 {
                b.acc <<= t;
                b.n -= t;
                k = next;
                if let Some(h) = hist.as_deref_mut() {
                    *h |= 1 << (k - 1);
                }
                continue;
            }
        }
        // The long way (at least 16 bits are held: no fill before the code).
        let rs = b.decode(ac)?;
        let (r, sz) = (u32::from(rs >> 4), rs & 15);
        if sz == 0 {
            if r < 15 {
                *eobrun = (1 << r) - 1;
                if r > 0 {
                    *eobrun += b.bits(r)?;
                }
                break;
            }
            k += 16;
            continue;
        }
        k += r;
        if k > se || sz > max_ac {
            return Err(ScanErr::Bad("coefficient past the spectral band"));
        }
        b.skip(u32::from(sz))?;
        if let Some(h) = hist.as_deref_mut() {
            *h |= 1 << k;
        }
        k += 1;
    }
    if k > se + 1 {
        return Err(ScanErr::Bad("zero run past the spectral band"));
    }
    Ok(())
}

/// Coefficients `k..=se` of a block, as a mask (empty when `k > se`).
#[inline]
fn band(k: u32, se: u32) -> u64 {
    let from = if k >= 64 { 0 } else { !0u64 << k };
    let to = if se >= 63 { !0 } else { (1u64 << (se + 1)) - 1 };
    from & to
}

/// AC successive-approximation refinement (T.81 G.1.2.3; libjpeg's
/// decode_mcu_AC_refine), reading one correction bit per already-non-zero
/// coefficient. The walk over the history is done with masks: the
/// correction bits before the next zero coefficient are counted and
/// dropped at once ([`Bits::skip_bits`], the same as one by one).
#[inline(always)]
fn block_ac_refine(
    b: &mut Bits,
    ac: &Huff,
    s: &Scan,
    eobrun: &mut u32,
    hist: &mut u64,
) -> Result<(), ScanErr> {
    let se = u32::from(s.se);
    let mut k = u32::from(s.ss);
    if *eobrun == 0 {
        while k <= se {
            if b.n < 16 {
                b.fill();
            }
            let e = ac.look[ahead(b.acc)];
            let l = u32::from(e >> 8);
            let (r, sz);
            if e != 0 && e & 15 == 1 && l + 1 + b.pad <= b.n {
                // A new coefficient and its sign bit in one step (no fill
                // falls between them, the real bits suffice).
                b.acc <<= l + 1;
                b.n -= l + 1;
                (r, sz) = (u32::from(e >> 4 & 15), 1);
            } else {
                // No fill here: at least 16 bits are held.
                let rs = b.decode(ac)?;
                (r, sz) = (u32::from(rs >> 4), rs & 15);
                if sz != 0 {
                    if sz != 1 {
                        return Err(ScanErr::Bad("refinement coefficient size is not 1"));
                    }
                    b.skip(1)?;
                } else if r != 15 {
                    *eobrun = 1 << r;
                    if r > 0 {
                        *eobrun += b.bits(r)?;
                    }
                    break;
                }
            }
            // Skip r zero coefficients (with the correction bits of the
            // non-zero ones among them): stop at the (r + 1)-th zero one,
            // past the band when there is none.
            let rest = band(k, se);
            let mut zeros = !*hist & rest;
            for _ in 0..r {
                zeros &= zeros.wrapping_sub(1);
            }
            let stop = if zeros == 0 {
                se + 1
            } else {
                zeros.trailing_zeros()
            };
            b.skip_bits((*hist & rest & !band(stop, 63)).count_ones())?;
            k = stop;
            if sz != 0 {
                if k > se {
                    return Err(ScanErr::Bad("coefficient past the spectral band"));
                }
                *hist |= 1 << k;
            }
            k += 1;
        }
    }
    if *eobrun > 0 {
        b.skip_bits((*hist & band(k, se)).count_ones())?;
        *eobrun -= 1;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample()
    }

    /// A DHT table's Huffman tables are those built from it alone, whoever
    /// asked first, by class; an over-subscribed table has none; the
    /// tables kept stay bounded however many tables an image holds.
    #[test]
    fn huffman_tables_are_shared_by_dht_table_and_bounded() {
        use super::{HUFFS, Huff, MAX_HUFFS};
        // T.81 K.3: the luminance DC table.
        let counts = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
        let syms: Vec<u8> = (0..12).collect();
        let same = |a: &Huff, b: &Huff| {
            a.look == b.look && a.fast == b.fast && a.maxcode == b.maxcode && a.vals == b.vals
        };
        for ac in [false, true] {
            let built = Huff::new(&counts, &syms, ac).unwrap();
            let first = Huff::shared(&counts, &syms, ac).unwrap();
            let again = Huff::shared(&counts, &syms, ac).unwrap();
            assert!(same(&built, &first) && same(&first, &again));
            assert_eq!(first.fast.is_some(), ac);
        }
        let over = [3u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(Huff::shared(&over, &[1, 2, 3], false).is_none());
        for k in 0..MAX_HUFFS + 10 {
            let syms: Vec<u8> = (0..12).map(|i| (i + k) as u8).collect();
            let h = Huff::shared(&counts, &syms, true).unwrap();
            assert_eq!(h.vals[..12], syms[..]);
            let held = HUFFS.lock().unwrap().as_ref().map_or(0, |m| m.len());
            assert!(held <= MAX_HUFFS, "{held}");
        }
    }

    fn seg(out: &mut Vec<u8>, m: u8, data: &[u8]) {
        out.extend_from_slice(&[0xFF, m]);
        out.extend_from_slice(&((data.len() + 2) as u16).to_be_bytes());
        out.extend_from_slice(data);
    }

    /// Entropy-coded data writer: MSB first, `FF` stuffed, 1-padded.
    #[derive(Default)]
    struct W {
        out: Vec<u8>,
        acc: u32,
        n: u32,
    }

    impl W {
        fn put(&mut self, v: u32, k: u32) {
            for i in (0..k).rev() {
                self.acc = self.acc << 1 | (v >> i) & 1;
                self.n += 1;
                if self.n == 8 {
                    self.out.push(self.acc as u8);
                    if self.acc == 0xFF {
                        self.out.push(0);
                    }
                    self.acc = 0;
                    self.n = 0;
                }
            }
        }
        fn flush(&mut self) {
            while self.n != 0 {
                self.put(1, 1);
            }
        }
        /// Table codes (see [`tables`]).
        fn dc(&mut self, cat: u32, bits: u32) {
            self.put(cat, 2); // DC symbols 0, 1, 2 have codes 00, 01, 10
            self.put(bits, cat);
        }
        fn ac(&mut self, sym: u8, bits: u32) {
            let (code, len) = match sym {
                0x00 => (0b00, 2),
                0x01 => (0b01, 2),
                0xF0 => (0b100, 3),
                0x11 => (0b101, 3),
                0x02 => (0b110, 3),
                0x10 => (0b111, 3),
                _ => unreachable!(),
            };
            self.put(code, len);
            let extra = if sym == 0x10 { 1 } else { u32::from(sym & 15) };
            self.put(bits, extra);
        }
    }

    /// DHT body: DC table 0 (symbols 0, 1, 2, codes of 2 bits) and AC table
    /// 0 (EOB, 0/1 with 2 bits; ZRL, 1/1, 0/2, EOBRUN 1 with 3 bits).
    fn tables() -> Vec<u8> {
        let mut d = vec![0x00, 0, 3];
        d.extend_from_slice(&[0; 14]);
        d.extend_from_slice(&[0, 1, 2]);
        d.extend_from_slice(&[0x10, 0, 2, 4]);
        d.extend_from_slice(&[0; 13]);
        d.extend_from_slice(&[0x00, 0x01, 0xF0, 0x11, 0x02, 0x10]);
        d
    }

    /// One baseline block: DC, a few AC coefficients incl. a zero run, EOB.
    fn block(w: &mut W, i: u32) {
        w.dc(i % 3, i);
        w.ac(0x01, 1);
        w.ac(0xF0, 0);
        w.ac(0x11, 0);
        w.ac(0x02, 3);
        if i.is_multiple_of(2) {
            w.ac(0x00, 0);
        } else {
            // Fill the block to coefficient 63 exactly (no EOB): k is 21
            // here, 21 × (1/1) brings it to 63, a last 0/1 to 64.
            for _ in 0..21 {
                w.ac(0x11, 1);
            }
            w.ac(0x01, 0);
        }
    }

    /// A baseline JPEG: 32x16, Y 2x2 + Cb + Cr (4:2:0), restart interval 1
    /// (two MCUs, so one RST0), with DQT, SOF0, DHT, DRI, SOS, EOI.
    fn jpeg(app: impl FnOnce(&mut Vec<u8>), scans: usize) -> Vec<u8> {
        let mut v = vec![0xFF, 0xD8];
        app(&mut v);
        let mut dqt = vec![0u8];
        dqt.extend((1..=64).map(|i| i as u8));
        seg(&mut v, 0xDB, &dqt);
        seg(
            &mut v,
            0xC0,
            &[8, 0, 16, 0, 32, 3, 1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0],
        );
        seg(&mut v, 0xC4, &tables());
        seg(&mut v, 0xDD, &[0, 1]);
        for s in 0..scans {
            seg(&mut v, 0xDA, &[3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0]);
            for mcu in 0..2u32 {
                let mut w = W::default();
                for b in 0..6 {
                    block(&mut w, mcu * 6 + b + s as u32);
                }
                w.flush();
                v.extend_from_slice(&w.out);
                if mcu == 0 {
                    v.extend_from_slice(&[0xFF, 0xD0]);
                }
            }
            if s + 1 < scans {
                seg(&mut v, 0xC4, &tables());
            }
        }
        v.extend_from_slice(&[0xFF, 0xD9]);
        v
    }

    /// A progressive JPEG, 16x16 grey: DC first, AC first (with an EOB
    /// run), DC refinement, AC refinement (with correction bits and a newly
    /// non-zero coefficient).
    pub fn progressive() -> Vec<u8> {
        let mut v = vec![0xFF, 0xD8];
        app0(&mut v);
        let mut dqt = vec![0u8];
        dqt.extend((1..=64).map(|i| i as u8));
        seg(&mut v, 0xDB, &dqt);
        seg(&mut v, 0xC2, &[8, 0, 16, 0, 16, 1, 1, 0x11, 0]);
        seg(&mut v, 0xC4, &tables());
        // DC first (Al = 1): four blocks.
        seg(&mut v, 0xDA, &[1, 1, 0x00, 0, 0, 0x01]);
        let mut w = W::default();
        for i in 0..4 {
            w.dc(i % 3, i);
        }
        w.flush();
        v.extend_from_slice(&w.out);
        // AC first 1..63: block 0 one coefficient at 1; then an EOB run of 3.
        seg(&mut v, 0xDA, &[1, 1, 0x00, 1, 63, 0x01]);
        let mut w = W::default();
        w.ac(0x01, 1);
        w.ac(0x00, 0);
        w.ac(0x10, 0); // EOBRUN = 2 + 0 → this block and the next one…
        w.ac(0x00, 0); // …then the last block.
        w.flush();
        v.extend_from_slice(&w.out);
        // DC refinement: one bit per block.
        seg(&mut v, 0xDA, &[1, 1, 0x00, 0, 0, 0x10]);
        let mut w = W::default();
        w.put(0b1010, 4);
        w.flush();
        v.extend_from_slice(&w.out);
        // AC refinement: block 0 gets a new coefficient at 2 (after the
        // correction bit of coefficient 1), then EOB; blocks 1..3 EOB.
        seg(&mut v, 0xDA, &[1, 1, 0x00, 1, 63, 0x10]);
        let mut w = W::default();
        w.ac(0x01, 1); // new coefficient, sign bit
        w.put(1, 1); // correction bit for coefficient 1
        w.ac(0x00, 0); // EOB: EOBRUN 1, nothing else non-zero in the band
        for _ in 1..4 {
            w.ac(0x00, 0);
        }
        w.flush();
        v.extend_from_slice(&w.out);
        v.extend_from_slice(&[0xFF, 0xD9]);
        v
    }

    fn app0(v: &mut Vec<u8>) {
        seg(v, 0xE0, b"JFIF\0\x01\x02\x00\x00\x01\x00\x01\x00\x00");
    }

    /// APP1 with an EXIF TIFF header and a complete thumbnail JPEG inside.
    fn app1_exif(v: &mut Vec<u8>) {
        let thumb = jpeg(app0, 1);
        let mut d = b"Exif\0\0II*\0\x08\0\0\0\0\0".to_vec();
        d.extend_from_slice(&thumb);
        d.extend_from_slice(b"trailing exif bytes");
        seg(v, 0xE1, &d);
    }

    pub fn sample() -> Vec<u8> {
        jpeg(
            |v| {
                app0(v);
                app1_exif(v);
                seg(v, 0xFE, b"a comment \xFF\xD9 with an EOI inside");
            },
            1,
        )
    }

    #[test]
    fn valid_jpegs() {
        assert_complete("jpeg", &jpeg(app0, 1));
        let s = sample();
        assert_complete("jpeg", &s);
        assert_prefixes("jpeg", &s);
        // Progressive with refinement scans.
        let p = progressive();
        assert_complete("jpeg", &p);
        assert_prefixes("jpeg", &p);
        // Several sequential scans with DHT between them.
        let m = jpeg(app0, 3);
        assert_complete("jpeg", &m);
    }

    /// Offset of the first entropy-coded byte of the first scan.
    fn scan_data(j: &[u8]) -> usize {
        let i = j.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        i + 2 + usize::from(u16::from_be_bytes([j[i + 2], j[i + 3]]))
    }

    #[test]
    fn foreign_data_in_the_scan_is_caught() {
        let good = jpeg(app0, 1);
        let d = scan_data(&good);
        let rst = d + good[d..]
            .windows(2)
            .position(|w| w == [0xFF, 0xD0])
            .unwrap();
        // Cut after the restart marker, then someone else's bytes and an EOI:
        // a marker walk would call this complete.
        for junk in [
            (0..200u32)
                .map(|i| (i * 37 % 251) as u8)
                .collect::<Vec<u8>>(),
            vec![0u8; 300],
            b"plain text that happens to follow the cut ".repeat(8),
        ] {
            let mut bad = good[..rst + 2].to_vec();
            bad.extend_from_slice(&junk);
            bad.extend_from_slice(&[0xFF, 0xD9]);
            let v = run("jpeg", &bad).unwrap();
            assert_eq!(v.status, Status::Partial, "{:?}", v.notes);
            assert!(
                v.length >= rst as u64 + 2 && v.length < bad.len() as u64,
                "{v:?}"
            );
        }
        // Restart marker out of sequence.
        let mut bad = good.clone();
        bad[rst + 1] = 0xD3;
        assert_eq!(run("jpeg", &bad).unwrap().status, Status::Partial);
        // An MCU too few: the EOI comes early.
        let mut short = good[..rst].to_vec();
        short.extend_from_slice(&[0xFF, 0xD9]);
        assert_eq!(run("jpeg", &short).unwrap().status, Status::Partial);
        // Same for progressive data.
        let p = progressive();
        let d = scan_data(&p);
        let mut bad = p[..d].to_vec();
        bad.extend(std::iter::repeat_n(0x5Au8, 64));
        bad.extend_from_slice(&p[p.len() - 40..]);
        assert_eq!(run("jpeg", &bad).unwrap().status, Status::Partial);
    }

    #[test]
    fn scans_without_tables_fall_back_to_the_marker_walk() {
        // Motion-JPEG frames omit DHT (the decoder uses the standard tables).
        let good = jpeg(app0, 1);
        let i = good.windows(2).position(|w| w == [0xFF, 0xC4]).unwrap();
        let n = usize::from(u16::from_be_bytes([good[i + 2], good[i + 3]])) + 2;
        let mut mj = good[..i].to_vec();
        mj.extend_from_slice(&good[i + n..]);
        let v = run("jpeg", &mj).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, mj.len() as u64));
        assert!(
            v.notes.iter().any(|n| n.contains("marker walk")),
            "{:?}",
            v.notes
        );
    }

    /// A multi-picture file: a first JPEG whose APP2 MPF index lists a
    /// second JPEG of `second.len()` bytes placed `gap` bytes after the
    /// first EOI.
    fn mpf_file(second: &[u8], gap: usize, little: bool) -> (Vec<u8>, usize) {
        let u16b = |x: u16| {
            if little {
                x.to_le_bytes()
            } else {
                x.to_be_bytes()
            }
        };
        let u32b = |x: u32| {
            if little {
                x.to_le_bytes()
            } else {
                x.to_be_bytes()
            }
        };
        // Body: "MPF\0", TIFF header, IFD (2 entries), then the 2 MP entries.
        let build = |off: u32, size1: u32| {
            let mut d = b"MPF\0".to_vec();
            d.extend_from_slice(if little { b"II" } else { b"MM" });
            d.extend_from_slice(&u16b(42));
            d.extend_from_slice(&u32b(8));
            d.extend_from_slice(&u16b(2));
            // B000 version, B002 MP entries (32 bytes at 8 + 2 + 24 + 4 = 38).
            d.extend_from_slice(&u16b(0xB000));
            d.extend_from_slice(&u16b(7));
            d.extend_from_slice(&u32b(4));
            d.extend_from_slice(b"0100");
            d.extend_from_slice(&u16b(0xB002));
            d.extend_from_slice(&u16b(7));
            d.extend_from_slice(&u32b(32));
            d.extend_from_slice(&u32b(38));
            d.extend_from_slice(&u32b(0)); // next IFD
            for (size, o) in [(size1, 0u32), (second.len() as u32, off)] {
                d.extend_from_slice(&u32b(0x0003_0000));
                d.extend_from_slice(&u32b(size));
                d.extend_from_slice(&u32b(o));
                d.extend_from_slice(&[0; 4]);
            }
            d
        };
        let first_len = jpeg(|v| seg(v, 0xE2, &build(0, 0)), 1).len();
        // The MP header starts after SOI (2), APP2 marker+length (4), "MPF\0" (4).
        let mp = 2 + 4 + 4;
        let off = (first_len + gap - mp) as u32;
        let mut v = jpeg(|v| seg(v, 0xE2, &build(off, first_len as u32)), 1);
        assert_eq!(v.len(), first_len);
        v.extend(std::iter::repeat_n(0u8, gap));
        v.extend_from_slice(second);
        (v, first_len)
    }

    #[test]
    fn multi_picture_files_end_after_their_last_image() {
        let second = jpeg(app0, 1);
        for little in [true, false] {
            for gap in [0, 3] {
                let (mut d, _) = mpf_file(&second, gap, little);
                let n = d.len() as u64;
                d.extend_from_slice(&[0x42; 100]);
                let v = run("jpeg", &d).expect("jpeg");
                assert_eq!(
                    (v.status, v.length),
                    (Status::Complete, n),
                    "{little} {gap}"
                );
                assert!(v.notes.iter().any(|x| x.contains("multi-picture")));
            }
        }
        // The second image damaged or missing: the first image alone.
        let (mut d, first) = mpf_file(&second, 0, true);
        d[first + 1] = 0x00; // the second image's SOI
        let v = run("jpeg", &d).expect("jpeg");
        assert_eq!((v.status, v.length), (Status::Complete, first as u64));
        assert!(v.notes.iter().any(|x| x.contains("not intact")));
        let (d, first) = mpf_file(&second, 0, false);
        let v = run("jpeg", &d[..first + 10]).expect("jpeg");
        assert_eq!((v.status, v.length), (Status::Complete, first as u64));
    }

    #[test]
    fn thumbnail_does_not_end_file() {
        let s = sample();
        let v = run("jpeg", &s).unwrap();
        assert_eq!(v.length, s.len() as u64);
    }

    #[test]
    fn false_positives() {
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0x00, 1, 2, 3]).is_none());
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0x12, 1, 2, 3]).is_none());
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xD9]).is_none());
        // Valid 4th byte, nonsense segment after.
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 1, 2, 0x55, 0x66]).is_none());
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0, 1, 2]).is_none());
    }

    #[test]
    fn damage_after_valid_start() {
        let mut s = jpeg(app0, 1);
        // Overwrite the DHT marker with a reserved marker.
        let i = s.windows(2).position(|w| w == [0xFF, 0xC4]).unwrap();
        s[i + 1] = 0x05;
        let v = run("jpeg", &s).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, i as u64));
        // The same right after the first segment: not enough evidence.
        let mut s = jpeg(app0, 1);
        let i = s.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap();
        s[i + 1] = 0x05;
        assert!(run("jpeg", &s).is_none());
        // Hostile segment length past the end.
        let mut s = jpeg(app0, 1);
        let i = s.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap();
        s[i + 2] = 0xFF;
        let v = run("jpeg", &s).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, s.len() as u64));
        // Window limit.
        let v = run_at("jpeg", &sample(), 0, Limits { max_len: 100 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 100));
    }

    #[test]
    fn real_jpegs() {
        let mut dirs = vec!["/usr/share".to_string()];
        dirs.extend(py_dirs("test/imghdrdata"));
        let d: Vec<&str> = dirs.iter().map(String::as_str).collect();
        check_real("jpeg", &real_files(&d, &[".jpg", ".jpeg"], 30));
    }

    /// The files the snapshot tests decode: the hand-made baseline and
    /// progressive samples, and three real pictures (progressive and
    /// baseline, with and without chroma subsampling).
    /// Every `FF DA` (start of scan) in `f`, with where that scan's
    /// entropy-coded data starts (after its header).
    fn scan_starts(f: &[u8]) -> Vec<(usize, usize)> {
        (0..f.len().saturating_sub(3))
            .filter(|&i| f[i] == 0xFF && f[i + 1] == 0xDA)
            .map(|i| {
                (
                    i,
                    i + 2 + usize::from(u16::from_be_bytes([f[i + 2], f[i + 3]])),
                )
            })
            .collect()
    }

    fn snapshot_files() -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
        let mut files = vec![sample(), progressive()];
        for name in ["d-debian.jpg", "debian_logo.jpg", "IMG-20191006-WA0002.jpg"] {
            files.push(std::fs::read(dir.join(name)).unwrap());
        }
        files
    }

    /// Resuming from a snapshot gives the verdict (and damage) of a whole
    /// validation, for windows equal to the captured file before the split:
    /// the file itself, its head followed by noise, by a later part of
    /// itself, and cut short.
    #[test]
    fn resume_from_a_snapshot_equals_a_whole_validation() {
        use super::{Damage, Src, validate, validate_capture, validate_probe, validate_resume};
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let files = snapshot_files();
        let mut snaps = 0;
        for f in &files {
            let step = (f.len() / 7).max(1);
            for split in (step..f.len()).step_by(step) {
                let mut d0 = Damage::default();
                let sl = Slice(f);
                let src = Src::new(&sl, 0, NO_LIMIT);
                let (v0, snap) = validate_capture(src, &mut d0, split as u64);
                assert_eq!(v0, validate(src), "capture changes nothing");
                let Some(snap) = snap else { continue };
                snaps += 1;
                assert!(snap.at() <= split as u64);
                let noise: Vec<u8> = (0..f.len()).map(|i| (i * 7919 % 251) as u8).collect();
                let mut variants = vec![f.clone(), f[..split].to_vec()];
                variants.push([&f[..split], &noise[..]].concat());
                let later = (split + 4096).min(f.len());
                variants.push([&f[..split], &f[later..]].concat());
                // (Twice, the second time backwards: each resume restores
                // the history the decode before it on this thread changed,
                // from the same snapshot, [`super::restore_history`].)
                let again: Vec<&Vec<u8>> = variants.iter().chain(variants.iter().rev()).collect();
                for w in again {
                    let sl = Slice(w);
                    let src = Src::new(&sl, 0, NO_LIMIT);
                    let (mut d1, mut d2) = (Damage::default(), Damage::default());
                    let whole = validate_probe(src, &mut d1);
                    let resumed = validate_resume(src, &mut d2, &snap);
                    assert_eq!(whole, resumed, "split {split} of a {} byte file", f.len());
                    assert_eq!(d1, d2);
                }
            }
        }
        assert!(snaps >= 20, "only {snaps} snapshots taken");
    }

    /// One decode capturing several splits takes, for each, the snapshot a
    /// capture of that split alone takes (splits a cluster apart, as the
    /// fragment search asks, and far apart, across progressive scans).
    #[test]
    fn capturing_several_splits_equals_one_at_a_time() {
        use super::{Damage, Src, capture_snaps, validate_capture, validate_capture_all};
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let files = snapshot_files();
        let mut compared = 0;
        for f in &files {
            let sl = Slice(f);
            let src = Src::new(&sl, 0, NO_LIMIT);
            let n = f.len() as u64;
            for gap in [64u64, 512, 4096, n / 3] {
                for first in [gap.max(1), n / 5, n / 2, n.saturating_sub(3 * gap)] {
                    let splits: Vec<u64> = (0..3).map(|i| first + i * gap.max(1)).collect();
                    // Any order in, answers in that order.
                    let asked = [splits[2], splits[0], splits[1]];
                    let mut d = Damage::default();
                    let (v, all) = validate_capture_all(src, &mut d, &asked);
                    // Stopped past the last split: the same snapshots.
                    let stopped = capture_snaps(src, None, &asked);
                    assert_eq!(format!("{all:?}"), format!("{stopped:?}"), "{n}");
                    for (split, got) in asked.iter().zip(&all) {
                        let mut d1 = Damage::default();
                        let (v1, one) = validate_capture(src, &mut d1, *split);
                        assert_eq!((&v, d), (&v1, d1));
                        assert_eq!(
                            format!("{got:?}"),
                            format!("{one:?}"),
                            "split {split} of {n}"
                        );
                        compared += usize::from(one.is_some());
                    }
                }
            }
        }
        assert!(compared >= 40, "only {compared} snapshots compared");
    }

    /// A capture resumed from a snapshot takes, for every later split, the
    /// snapshot a capture from the file's start takes, with the same
    /// verdict: over the file itself and over its head followed by other
    /// bytes (what the fragment search captures when it follows a file
    /// into a further fragment).
    #[test]
    fn capture_resumed_from_a_snapshot_equals_one_from_the_start() {
        use super::{
            Damage, Src, capture_snaps, validate_capture, validate_capture_all,
            validate_capture_from,
        };
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let files = snapshot_files();
        let mut compared = 0;
        for f in &files {
            let n = f.len() as u64;
            for first in [n / 7, n / 3, n / 2] {
                let sl = Slice(f);
                let (_, from) =
                    validate_capture(Src::new(&sl, 0, NO_LIMIT), &mut Damage::default(), first);
                let Some(from) = from else { continue };
                // The file, and its head up to `first` then a later part of itself.
                let later = (first as usize + 8192).min(f.len());
                let windows = [f.clone(), [&f[..first as usize], &f[later..]].concat()];
                for w in &windows {
                    let sl = Slice(w);
                    let src = Src::new(&sl, 0, NO_LIMIT);
                    let m = w.len() as u64;
                    let asked = [
                        m / 2 + 4096,
                        first + 1,
                        m.saturating_sub(100),
                        first,
                        m / 2,
                        from.at() - 1,
                    ];
                    let (mut d0, mut d1) = (Damage::default(), Damage::default());
                    let (v0, all) = validate_capture_all(src, &mut d0, &asked);
                    let (v1, resumed) = validate_capture_from(src, &mut d1, &from, &asked);
                    assert_eq!((&v0, d0), (&v1, d1), "{first} of {n}");
                    let stopped = capture_snaps(src, Some(&from), &asked);
                    assert_eq!(
                        format!("{resumed:?}"),
                        format!("{stopped:?}"),
                        "{first} of {n}"
                    );
                    for ((split, a), b) in asked.iter().zip(&all).zip(&resumed) {
                        if *split < from.at() {
                            assert!(b.is_none());
                            continue;
                        }
                        assert_eq!(
                            format!("{a:?}"),
                            format!("{b:?}"),
                            "split {split}, from {first} of {n}"
                        );
                        compared += usize::from(a.is_some());
                    }
                }
            }
        }
        assert!(compared >= 40, "only {compared} snapshots compared");
    }

    /// A trail holds, for every grid point and block-map boundary it answers
    /// for, the snapshot a capture of that split takes (coefficient history
    /// included), from the file's start or resumed from a snapshot, for
    /// baseline and progressive files; it answers for the splits the
    /// fragment search places (up to three grid points before where the
    /// decode broke), and for no other window length. The verdict and
    /// damage are a plain validation's.
    #[test]
    fn a_trail_holds_the_snapshots_a_capture_takes() {
        use super::{Damage, Src, TrailSpec, validate_capture, validate_probe, validate_trail};
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        // Noise that breaks a decode soon after it starts.
        let noise = xorshift_noise(0x9E37_79B9_7F4A_7C15, 16384);
        let (mut compared, mut placed, mut progressive_placed) = (0, 0, 0);
        for (k, f) in snapshot_files().iter().enumerate() {
            let n = f.len();
            // (An SOF2 marker: entropy data holds no FF C2.)
            let progressive = f.windows(2).any(|m| m == [0xFF, 0xC2]);
            for cut in [n / 5, n / 2, n * 4 / 5] {
                let w = [&f[..cut], &noise[..]].concat();
                let sl = Slice(&w);
                let src = Src::new(&sl, 0, NO_LIMIT);
                let len = src.len();
                let (_, from) = validate_capture(src, &mut Damage::default(), (n / 7) as u64);
                for grid in [512u64, 4096] {
                    let spec = TrailSpec {
                        grid,
                        span: 4 * grid + 1024,
                        block_map: Some(1024),
                    };
                    for resume in [None, from.as_ref()] {
                        let (mut d0, mut d1) = (Damage::default(), Damage::default());
                        let (v, trail) = validate_trail(src, &mut d1, resume, spec);
                        assert_eq!((v, d1), (validate_probe(src, &mut d0), d0));
                        let trail = trail.unwrap();
                        // (Another window's length: no answer.)
                        assert!(trail.answer(len + 1, &[0]).is_none());
                        // The splits the search asks for near the failure.
                        let top = d1.fail_at / grid * grid;
                        let near: Vec<u64> =
                            (0..3).filter_map(|i| top.checked_sub(i * grid)).collect();
                        let got = trail.answer(len, &near);
                        assert!(got.is_some(), "{k}: cut {cut}, grid {grid}: {near:?}");
                        placed += 1;
                        progressive_placed += usize::from(progressive);
                        // Every grid point and block-map boundary it answers for.
                        let bounds = crate::carve::geometry::block_map_boundaries(1024, len)
                            .flat_map(|b| [b, b - grid]);
                        let points = (0..len).step_by(grid as usize).chain(bounds);
                        let at = format!("{k}: cut {cut}, grid {grid}");
                        compared += trail_equals_captures(&trail, src, resume, points, &at);
                    }
                }
            }
        }
        assert!(
            placed >= 20 && compared >= 200 && progressive_placed >= 8,
            "{placed} placed ({progressive_placed} progressive), {compared} compared"
        );
    }

    /// Asserts that `trail` holds, for each of `points` it answers, the
    /// snapshot a capture over `src` takes (resumed from `resume` when
    /// given); returns how many it answered.
    fn trail_equals_captures(
        trail: &super::Trail,
        src: super::Src,
        resume: Option<&super::Snap>,
        points: impl Iterator<Item = u64>,
        at: &str,
    ) -> usize {
        use super::{Damage, validate_capture_all, validate_capture_from};
        let mut compared = 0;
        for p in points {
            let Some(mut got) = trail.answer(src.len(), &[p]) else {
                continue;
            };
            let want = match resume {
                Some(sn) => validate_capture_from(src, &mut Damage::default(), sn, &[p]).1,
                None => validate_capture_all(src, &mut Damage::default(), &[p]).1,
            };
            assert_eq!(got.pop(), want.into_iter().next(), "{at}, split {p}");
            compared += 1;
        }
        compared
    }

    /// Where a scan of a progressive file ends with an end-of-band run (the
    /// decode counts the run off at once, [`scan_body`]), a trail still
    /// holds the snapshots a capture takes: at every grid point from the
    /// scan's last bytes to the next scan's first boundary, for a window
    /// cut a little into the next scan (the decode fails there, so the
    /// trail covers those bytes).
    #[test]
    fn a_trail_holds_the_snapshots_at_the_ends_of_scans() {
        use super::{Damage, Src, TrailSpec, validate_trail};
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let noise = xorshift_noise(0x2545_F491_4F6C_DD1D, 4096);
        let (mut ends, mut compared) = (0, 0);
        for f in snapshot_files() {
            if !f.windows(2).any(|m| m == [0xFF, 0xC2]) {
                continue;
            }
            let scans = scan_starts(&f);
            for &(_, body) in &scans {
                // The marker that ends the scan: the first after its
                // entropy-coded data.
                let Some(end) = (body..f.len() - 1)
                    .find(|&i| f[i] == 0xFF && !matches!(f[i + 1], 0x00 | 0xD0..=0xD7))
                else {
                    break;
                };
                // Cut a little into the next scan's data: its first
                // boundaries settle the grid points up to them.
                let Some(&(_, next_body)) = scans.iter().find(|&&(sos, _)| sos >= end) else {
                    continue;
                };
                let cut = (next_body + 256).min(f.len());
                let w = [&f[..cut], &noise[..]].concat();
                let sl = Slice(&w);
                let src = Src::new(&sl, 0, NO_LIMIT);
                let spec = TrailSpec {
                    grid: 8,
                    span: 4 * 8 + 1024,
                    block_map: None,
                };
                let (_, trail) = validate_trail(src, &mut Damage::default(), None, spec);
                let Some(trail) = trail else { continue };
                ends += 1;
                let points = (end.saturating_sub(96) as u64..next_body as u64 + 16).step_by(8);
                compared +=
                    trail_equals_captures(&trail, src, None, points, &format!("scan end {end}"));
            }
        }
        assert!(
            ends >= 10 && compared >= 40,
            "{ends} scan ends, {compared} compared"
        );
    }

    /// A wrong split joined to the picture's own later data (or earlier:
    /// the decode's MCU count behind or ahead of the bytes it decodes)
    /// decodes in step with a kept decode of the picture for megabytes: it
    /// goes on from the kept decode's mark near its end ([`super::Shifted`])
    /// with the verdict, the damage and the trail's snapshots of a decode of
    /// every byte; joined to a copy whose bytes stop being the kept
    /// decode's (a marker written into them), no further than that.
    #[test]
    fn a_split_joined_to_the_pictures_own_data_goes_on_from_a_kept_mark_alike() {
        use super::{
            Damage, ScanMemo, Src, capture_snaps, validate, validate_resume, validate_trail,
            with_memo,
        };
        use crate::carve::fragments::TwoRuns;
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
        let p = std::fs::read(dir.join("IMG_20200124_231153.jpg")).unwrap();
        let mut next = crate::carve::fragments::xorshift(7);
        let noise: Vec<u8> = (0..1 << 20).map(|_| next() as u8).collect();
        let n = p.len() as u64;
        // The picture, then copies of it with two bytes of the entropy-coded
        // data changed (where the bytes stop being the kept decode's).
        let changed: Vec<u64> = (0..4).map(|_| 300_000 + next() % (n - 320_000)).collect();
        let mut img = p.clone();
        for &q in &changed {
            let mut copy = p.clone();
            // (A marker where none may be: the decode breaks there.)
            copy[q as usize..q as usize + 2].copy_from_slice(&[0xFF, 0x01]);
            img.extend_from_slice(&copy);
        }
        img.extend_from_slice(&noise);
        let sl = Slice(&img);
        let memo = std::sync::Arc::new(ScanMemo::default());
        let whole = Src::new(&sl, 0, NO_LIMIT);
        assert_eq!(with_memo(&memo, &sl, || validate(whole)), validate(whole));
        let spec = crate::carve::fragments::jpeg_trail_spec(4096, Some(4096));
        let (mut jumped, mut compared) = (0, 0);
        // Splits at the ext2 block-map boundaries and at random, continued
        // from the picture's own data later or earlier.
        let fixed = [
            (49152, 274432),
            (49152, 1_000_000),
            (851968, 2_039_808),
            (630784, 1_800_000),
            (1_500_000, 600_000),
            (300_000, 90_000),
            (200_000, 200_000 + 4096 * 37),
        ];
        let random: Vec<(u64, u64)> = (0..16)
            .map(|_| {
                (
                    16384 + next() % (n - 400_000),
                    16384 + next() % (n - 300_000),
                )
            })
            .collect();
        // Continued from a changed copy, before the change.
        let into_changed = changed.iter().enumerate().flat_map(|(i, &q)| {
            let copy = (i as u64 + 1) * n;
            [
                (49152, copy + q.saturating_sub(900_000).max(20_000)),
                (49152, copy + q - 200_000),
                (q / 2, copy + q / 3),
            ]
        });
        let pairs: Vec<(u64, u64)> = fixed
            .into_iter()
            .chain(random)
            .chain(into_changed)
            .collect();
        let mut jumped_changed = 0;
        for (split, cont) in pairs {
            let j = TwoRuns::new(&sl, 0, split, cont, n + (1 << 20));
            let src = Src::new(&j, 0, NO_LIMIT);
            let at = format!("split {split}, continued from {cont} (changed at {changed:?})");
            let Some(Some(snap)) = capture_snaps(src, None, &[split]).pop() else {
                panic!("{at}: no snapshot");
            };
            let mut d0 = Damage::default();
            let plain = validate_resume(src, &mut d0, &snap);
            let seen = memo.shifts();
            let mut d1 = Damage::default();
            let memoised = with_memo(&memo, &sl, || validate_resume(src, &mut d1, &snap));
            assert_eq!((&memoised, d1), (&plain, d0), "{at}");
            // As a search's proof: leaving a trail.
            let mut d2 = Damage::default();
            let (v, trail) = with_memo(&memo, &sl, || {
                validate_trail(src, &mut d2, Some(&snap), spec)
            });
            assert_eq!((&v, d2), (&plain, d0), "{at}, trail");
            jumped += usize::from(memo.shifts() >= seen + 2);
            jumped_changed += usize::from(memo.shifts() >= seen + 2 && cont >= n);
            if let (Some(trail), true) = (trail, d2.damaged) {
                let top = d2.fail_at / 4096 * 4096;
                let bounds = crate::carve::geometry::block_map_boundaries(4096, d2.fail_at)
                    .flat_map(|b| [b, b - 4096]);
                let points = (top.saturating_sub(24 * 4096)..=top + 4096)
                    .step_by(4096)
                    .chain(bounds);
                compared += trail_equals_captures(&trail, src, Some(&snap), points, &at);
            }
        }
        assert!(
            jumped >= 14 && jumped_changed >= 1,
            "{jumped} decodes went on from a kept mark, {jumped_changed} of a changed copy"
        );
        assert!(compared >= 300, "{compared} snapshots compared");
    }

    /// The scan memo gives every verdict a decode gives, for a baseline and
    /// a progressive file: a copy with other header bytes (the same scans) is
    /// answered from the memo; copies with one byte of a scan changed
    /// (anywhere, in a later scan of the progressive file, at the end
    /// marker), cut short by the window, or followed by other bytes get the
    /// verdict their own decode gives.
    #[test]
    fn memoised_scans_give_the_verdicts_of_a_decode() {
        use super::{ScanMemo, Src, validate, with_memo};
        use crate::carve::validators::ByteReader;
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
        for name in ["debian_logo.jpg", "d-debian.jpg"] {
            let f = std::fs::read(dir.join(name)).unwrap();
            let (_, body) = scan_starts(&f)[0];
            let mut copy = f[..2].to_vec();
            copy.extend_from_slice(&[0xFF, 0xFE, 0, 6, b'c', b'o', b'p', b'y']);
            copy.extend_from_slice(&f[2..]);
            let mut variants = vec![f.clone(), copy.clone()];
            let n = f.len();
            for at in [
                body,
                body + 1,
                body + 777,
                (body + n) / 2,
                n * 3 / 4,
                n - 3,
                n - 2,
                n - 1,
            ] {
                for x in [0x00, 0x5A, 0xFF] {
                    let mut v = f.clone();
                    if v[at] != x {
                        v[at] = x;
                        variants.push(v);
                    }
                }
            }
            let mut junk_after = f.clone();
            junk_after.extend_from_slice(&[0x12; 300]);
            variants.push(junk_after);
            let slot = n.next_power_of_two() * 2;
            // The file stored in two pieces (as a file system lays it out),
            // twice: the second time with a byte of its second piece changed.
            let split = body + (n - body) / 3;
            let mut changed = f.clone();
            changed[split + (n - split) / 2] ^= 0x5A;
            let pieces: [&[u8]; 4] = [&f[..split], &f[split..], &f[..split], &changed[split..]];
            let mut img = vec![0x33u8; slot * (variants.len() + pieces.len() + 1)];
            for (i, v) in variants.iter().enumerate() {
                img[i * slot..i * slot + v.len()].copy_from_slice(v);
            }
            let piece_at = |k: usize| (variants.len() + k) * slot;
            for (k, p) in pieces.iter().enumerate() {
                img[piece_at(k)..piece_at(k) + p.len()].copy_from_slice(p);
            }
            // Last, a copy the image cuts inside its scans.
            let cut_at = img.len() - (n - body) / 2 - body;
            img.truncate(cut_at + body + (n - body) / 2);
            let kept = img.len() - cut_at;
            img[cut_at..].copy_from_slice(&f[..kept]);
            let memo = std::sync::Arc::new(ScanMemo::default());
            let sl = Slice(&img);
            let starts = (0..variants.len())
                .map(|i| (i * slot) as u64)
                .chain([cut_at as u64]);
            for start in starts {
                let src = Src::new(&sl, start, NO_LIMIT);
                let plain = validate(src);
                let memoised = with_memo(&memo, &sl, || validate(src));
                assert_eq!(memoised, plain, "{name}: variant at {start}");
            }
            let (hits, bytes) = memo.hits();
            // The copy with a comment added, and the file followed by other
            // bytes (every scan of each, for the progressive file).
            assert!(hits >= 2, "{name}: {hits} scans answered from the memo");
            assert!(bytes as usize >= n - body, "{name}: {bytes} bytes");
            // Views of the image (the file joined from its pieces, as a file
            // system lays it out) keep their outcomes and are answered from
            // the memo where their bytes repeat a decode's, wherever those
            // lie: each gets the verdict a decode of its bytes gives. A fresh
            // memo: the first view's outcome is kept over its two pieces,
            // the second view differs in its second piece, and the file
            // stored whole repeats the first.
            let views = crate::carve::fragments::TwoRuns::new;
            let memo2 = std::sync::Arc::new(ScanMemo::default());
            let whole = Src::new(&sl, 0, NO_LIMIT);
            // (A progressive file's scans before the changed byte repeat.)
            for (k, repeats) in [(Some(0), Some(false)), (Some(2), None), (None, Some(true))] {
                let before = memo2.hits().0;
                let (plain, memoised) = match k {
                    Some(k) => {
                        let view = views(
                            &sl,
                            piece_at(k) as u64,
                            split as u64,
                            piece_at(k + 1) as u64,
                            u64::MAX,
                        );
                        let mut bytes = vec![0u8; view.len() as usize];
                        assert_eq!(view.read_at(0, &mut bytes), bytes.len());
                        (
                            validate(Src::new(&Slice(&bytes), 0, NO_LIMIT)),
                            with_memo(&memo2, &sl, || validate(Src::new(&view, 0, NO_LIMIT))),
                        )
                    }
                    None => (validate(whole), with_memo(&memo2, &sl, || validate(whole))),
                };
                assert_eq!(memoised, plain, "{name}: view {k:?}");
                if let Some(r) = repeats {
                    assert_eq!(memo2.hits().0 > before, r, "{name}: view {k:?}");
                }
            }
            // And without a memo, nothing is kept or answered; nor for a
            // window of another reader (the memo's offsets are of the image's).
            let before = memo.hits();
            let _ = validate(Src::new(&sl, slot as u64, NO_LIMIT));
            let copy_of_image = img.clone();
            let other = Slice(&copy_of_image);
            let _ = with_memo(&memo, &sl, || {
                validate(Src::new(&other, slot as u64, NO_LIMIT))
            });
            assert_eq!(memo.hits(), before);
        }
    }

    /// A copy that repeats a sequential scan only up to some byte (cut and
    /// followed by other data, as a fragmented copy read contiguously; one
    /// byte changed; behind other header bytes) resumes from the memo's
    /// last usable mark and gets the verdict a decode of it gives. A trail
    /// left by such a decode answers every split near where the decode
    /// stopped with the snapshot a capture takes, and none below where it
    /// resumed. Two validations of copies at once: one decodes, the other
    /// takes its outcome.
    /// `n` bytes of xorshift noise from `seed`.
    fn xorshift_noise(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    /// True when `trail` answers for `split` (asserting that its snapshot is
    /// the one a capture of `src` takes there).
    fn answers_as_captured(trail: &super::super::TrailRef, src: super::Src, split: u64) -> bool {
        let Some(mut one) = trail.0.answer(src.len(), &[split]) else {
            return false;
        };
        let capture = super::validate_capture_all(src, &mut super::Damage::default(), &[split]).1;
        assert_eq!(one.pop(), capture.into_iter().next(), "split {split}");
        true
    }

    /// A history known to equal a memo's `last` is compared with and
    /// restored from a memo entry's as a word-by-word look does, skipping
    /// only the components the entry shares with `last` (and a component
    /// that only looks like `last`'s, not shared, is still compared).
    #[test]
    fn a_history_known_equal_to_the_memos_last_skips_only_shared_components() {
        use super::{History, MemoHistory, memo_history, memo_history_is, memo_history_restore};
        use std::sync::Arc;
        let comps = |seed: u64| -> Vec<Vec<u64>> {
            (0..3u64)
                .map(|c| (0..50 + 10 * c).map(|i| (i * 31 + c + seed) % 7).collect())
                .collect()
        };
        let h: History = Some(comps(0));
        let last: MemoHistory = memo_history(&h, &None);
        // An entry whose history before it is `last` (all shared), one with
        // component 1 equal but not shared, one with component 2 changed.
        let shared = last.clone();
        let mut copied = last.clone();
        if let Some(c) = copied.as_mut() {
            c[1] = Arc::new((*c[1]).clone());
        }
        let mut changed = last.clone();
        if let Some(c) = changed.as_mut() {
            c[2] = Arc::new(c[2].iter().map(|w| w ^ 1).collect());
        }
        for m in [&shared, &copied, &changed] {
            assert_eq!(
                memo_history_is(m, &h, Some(&last)),
                memo_history_is(m, &h, None),
            );
        }
        assert!(memo_history_is(&copied, &h, Some(&last)));
        assert!(!memo_history_is(&changed, &h, Some(&last)));
        // Restored: the changed component copied, the shared ones kept.
        let mut fast = h.clone();
        memo_history_restore(&mut fast, &changed, Some(&last));
        let mut slow = h.clone();
        memo_history_restore(&mut slow, &changed, None);
        assert_eq!(fast, slow);
        assert_ne!(fast, h);
        // (What it skips it takes as equal: a history that is not `last`
        // keeps its own words in the shared components.)
        let mut other: History = Some(comps(3));
        memo_history_restore(&mut other, &changed, Some(&last));
        assert_eq!(
            other.as_ref().map(|c| c[0].clone()),
            Some(comps(3)[0].clone())
        );
        assert_eq!(
            other.as_ref().map(|c| c[2].clone()),
            changed.as_ref().map(|c| (*c[2]).clone())
        );
    }

    /// An ext2/3 file's first block-map splits (4 KiB blocks: 44 and 48
    /// KiB) do not hold a broken copy's decode under the memo back there:
    /// it resumes from a mark near where the copy breaks, 1.9 MB on, and
    /// its trail still answers those splits (captured afterwards, as a
    /// capture takes them) and the ones near the break.
    #[test]
    fn a_broken_copy_resumes_past_the_first_block_map_splits() {
        use super::{ScanMemo, Src, validate, with_memo, with_trail};
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
        let f = std::fs::read(dir.join("IMG_20200124_231153.jpg")).unwrap();
        let n = f.len();
        let cut = n * 3 / 4;
        let noise = xorshift_noise(0x9E37_79B9_7F4A_7C15, 64 * 1024);
        let copy = [&f[..cut], &noise[..]].concat();
        let slot = (n + noise.len()).next_power_of_two();
        let mut img = vec![0x33u8; slot * 2];
        img[..n].copy_from_slice(&f);
        img[slot..slot + copy.len()].copy_from_slice(&copy);
        let sl = Slice(&img);
        let memo = std::sync::Arc::new(ScanMemo::default());
        let whole = Src::new(&sl, 0, NO_LIMIT);
        assert_eq!(with_memo(&memo, &sl, || validate(whole)), validate(whole));
        let at = slot as u64;
        let src = Src::new(&sl, at, NO_LIMIT);
        let spec = crate::carve::fragments::jpeg_trail_spec(4096, Some(4096));
        let before = memo.resumes();
        let got = with_memo(&memo, &sl, || with_trail(spec, &sl, at, || validate(src)));
        let bare = got
            .clone()
            .map(|v| super::super::Verdict { trail: None, ..v });
        assert_eq!(bare, validate(src));
        let (resumes, skipped) = memo.resumes();
        assert_eq!(resumes, before.0 + 1, "not resumed from a mark");
        assert!(
            skipped - before.1 > cut as u64 / 2,
            "resumed only {} bytes in",
            skipped - before.1
        );
        let v = got.expect("a verdict");
        let trail = v.trail.clone().expect("a trail");
        for split in [45056, 49152] {
            assert!(answers_as_captured(&trail, src, split), "split {split}");
        }
        let top = v.broke_at.expect("broken") / 4096 * 4096;
        for split in (0..3).filter_map(|k| top.checked_sub(k * 4096)) {
            assert!(answers_as_captured(&trail, src, split), "split {split}");
        }
    }

    #[test]
    fn a_copy_repeating_a_scan_in_part_resumes_from_a_mark() {
        use super::{
            Damage, ScanMemo, Src, validate, validate_capture, validate_capture_from,
            validate_resume, validate_trail, with_memo, with_trail,
        };
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
        let f = std::fs::read(dir.join("IMG_20200124_231153.jpg")).unwrap();
        let n = f.len();
        assert!(f.windows(2).any(|m| m == [0xFF, 0xC0]), "a baseline file");
        let noise = xorshift_noise(0x2545_F491_4F6C_DD1D, 64 * 1024);
        let mut commented = f[..2].to_vec();
        commented.extend_from_slice(&[0xFF, 0xFE, 0, 6, b'c', b'o', b'p', b'y']);
        commented.extend_from_slice(&f[2..]);
        // (variant, resumes from a mark)
        let mut variants: Vec<(Vec<u8>, bool)> = Vec::new();
        for p in [n * 2 / 5, n * 7 / 10, n - 5000] {
            variants.push(([&f[..p], &noise[..]].concat(), true));
            let mut one = f.clone();
            one[p] ^= 0x5A;
            variants.push((one, true));
            let mut c = commented.clone();
            c[p + 8] ^= 0x21;
            variants.push((c, true));
        }
        // (Breaks before the first mark a trail may use.)
        variants.push(([&f[..n / 50], &noise[..]].concat(), false));
        // Breaking a few bytes past a mark (the picture's scan data start
        // + k·32 KiB): inside the MCU row the decode resumes in.
        let (_, body) = *scan_starts(&f).last().unwrap();
        for (k, resumes) in [(3, false), (20, true)] {
            let p = body + k * 32 * 1024 + 200;
            variants.push(([&f[..p], &noise[..]].concat(), resumes));
        }
        let slot = (n + noise.len()).next_power_of_two();
        let mut img = vec![0x33u8; slot * (variants.len() + 3)];
        img[..n].copy_from_slice(&f);
        for (i, (v, _)) in variants.iter().enumerate() {
            img[(i + 1) * slot..(i + 1) * slot + v.len()].copy_from_slice(v);
        }
        let sl = Slice(&img);
        let mut checked = 0;
        for block_map in [None, Some(1024)] {
            for with_a_trail in [false, true] {
                let memo = std::sync::Arc::new(ScanMemo::default());
                let whole = Src::new(&sl, 0, NO_LIMIT);
                assert_eq!(with_memo(&memo, &sl, || validate(whole)), validate(whole));
                for (i, (_, resumes)) in variants.iter().enumerate() {
                    let at = ((i + 1) * slot) as u64;
                    let src = Src::new(&sl, at, NO_LIMIT);
                    // As a fragment search's proof asks (4 KiB clusters).
                    let spec = crate::carve::fragments::jpeg_trail_spec(4096, block_map);
                    let grid = spec.grid;
                    let before = memo.resumes().0;
                    let got = with_memo(&memo, &sl, || {
                        if with_a_trail {
                            with_trail(spec, &sl, at, || validate(src))
                        } else {
                            validate(src)
                        }
                    });
                    let want = validate(src);
                    let bare = got.clone().map(|v| super::Verdict { trail: None, ..v });
                    assert_eq!(
                        bare, want,
                        "variant {i}, trail {with_a_trail}, {block_map:?}"
                    );
                    let resumed = memo.resumes().0 > before;
                    if *resumes || !with_a_trail {
                        assert!(resumed, "variant {i}: not resumed");
                    } else {
                        assert!(!resumed, "variant {i}: resumed");
                    }
                    let Some(trail) = got.as_ref().and_then(|v| v.trail.clone()) else {
                        continue;
                    };
                    // Near the failure: every split the search places.
                    let fail = got.as_ref().and_then(|v| v.broke_at).unwrap();
                    let top = fail / grid * grid;
                    let near: Vec<u64> = (0..3).filter_map(|k| top.checked_sub(k * grid)).collect();
                    assert!(
                        trail.0.answer(src.len(), &near).is_some(),
                        "variant {i}: {near:?}"
                    );
                    // The last block-map boundary before the failure (a
                    // split the search places too) and the cluster before it.
                    if let Some(bs) = block_map
                        && let Some(b) = crate::carve::geometry::block_map_boundaries(bs, fail)
                            .filter(|&b| b >= grid)
                            .last()
                    {
                        assert!(
                            trail.0.answer(src.len(), &[b, b - grid]).is_some(),
                            "variant {i}: boundary {b}"
                        );
                    }
                    // Every split it answers for near there and at the
                    // block-map boundaries, as a capture takes it; none far
                    // below the failure when the decode resumed past it.
                    let bounds = crate::carve::geometry::block_map_boundaries(1024, fail)
                        .flat_map(|b| [b, b - grid]);
                    let near = (top.saturating_sub(24 * grid)..=top + grid).step_by(grid as usize);
                    let low = [grid, 2 * grid, (n as u64 / 20) / grid * grid];
                    for p in near.chain(bounds).chain(low) {
                        if answers_as_captured(&trail, src, p) {
                            assert!(
                                !(*resumes && low.contains(&p)),
                                "variant {i}: split {p} answered"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked >= 100, "{checked} snapshots compared");
        // A decode resumed from a snapshot (a fragment search's) asks the
        // memo too: the verdict of a decode, and a copy repeating the kept
        // scan past the snapshot is answered or resumed further on.
        let memo = std::sync::Arc::new(ScanMemo::default());
        let whole = Src::new(&sl, 0, NO_LIMIT);
        assert_eq!(with_memo(&memo, &sl, || validate(whole)), validate(whole));
        let (mut jumped, mut trailed_jumps) = (0, 0);
        for (i, _) in variants.iter().enumerate() {
            let at = ((i + 1) * slot) as u64;
            let src = Src::new(&sl, at, NO_LIMIT);
            let Some(snap) = validate_capture(src, &mut Damage::default(), n as u64 / 8).1 else {
                continue;
            };
            let (mut d0, mut d1) = (Damage::default(), Damage::default());
            let plain = validate_resume(src, &mut d0, &snap);
            let seen = memo.hits().0 + memo.resumes().0;
            let memoised = with_memo(&memo, &sl, || validate_resume(src, &mut d1, &snap));
            assert_eq!((memoised, d1), (plain.clone(), d0), "resumed variant {i}");
            jumped += usize::from(memo.hits().0 + memo.resumes().0 > seen);
            // Leaving a trail (block maps of 1 KiB: boundaries every 256
            // KiB), as a search's proof does: the trail answers near where
            // the decode stops as a capture resumed from the snapshot does.
            let spec = crate::carve::fragments::jpeg_trail_spec(4096, Some(1024));
            let mut d2 = Damage::default();
            let seen = memo.resumes().0;
            let (v, trail) = with_memo(&memo, &sl, || {
                validate_trail(src, &mut d2, Some(&snap), spec)
            });
            assert_eq!((v, d2), (plain.clone(), d0), "resumed variant {i}, trail");
            let (Some(trail), true) = (trail, d2.damaged) else {
                continue;
            };
            trailed_jumps += usize::from(memo.resumes().0 > seen);
            let top = d2.fail_at / 4096 * 4096;
            let near: Vec<u64> = (0..3).filter_map(|k| top.checked_sub(k * 4096)).collect();
            assert!(
                trail.answer(src.len(), &near).is_some(),
                "variant {i}: {near:?}"
            );
            let bounds = crate::carve::geometry::block_map_boundaries(1024, d2.fail_at)
                .flat_map(|b| [b, b - 4096]);
            for w in (top.saturating_sub(24 * 4096)..=top)
                .step_by(4096)
                .chain(bounds)
            {
                if let Some(mut one) = trail.answer(src.len(), &[w]) {
                    let capture = validate_capture_from(src, &mut Damage::default(), &snap, &[w]).1;
                    assert_eq!(
                        one.pop(),
                        capture.into_iter().next(),
                        "variant {i}, split {w}"
                    );
                }
            }
        }
        assert!(jumped >= 8, "{jumped} resumed decodes answered or moved on");
        assert!(
            trailed_jumps >= 3,
            "{trailed_jumps} trailed decodes moved on"
        );
        // A progressive copy broken in a later scan: the scans before it are
        // the memo's answers, and the trail still answers near the failure.
        let p = std::fs::read(dir.join("IMG_1054.jpg")).unwrap();
        let pn = p.len();
        let pslot = (pn + noise.len()).next_power_of_two();
        let cuts = [pn / 2, pn * 3 / 5, pn * 7 / 10, pn * 4 / 5, pn * 9 / 10];
        let mut pimg = vec![0x33u8; pslot * (cuts.len() + 1)];
        pimg[..pn].copy_from_slice(&p);
        for (i, &cut) in cuts.iter().enumerate() {
            let v = [&p[..cut], &noise[..]].concat();
            pimg[(i + 1) * pslot..(i + 1) * pslot + v.len()].copy_from_slice(&v);
        }
        let psl = Slice(&pimg);
        let memo = std::sync::Arc::new(ScanMemo::default());
        let whole = Src::new(&psl, 0, NO_LIMIT);
        assert_eq!(with_memo(&memo, &psl, || validate(whole)), validate(whole));
        let (mut answered, mut compared) = (0, 0);
        for i in 0..cuts.len() {
            let at = ((i + 1) * pslot) as u64;
            let src = Src::new(&psl, at, NO_LIMIT);
            let spec = crate::carve::fragments::jpeg_trail_spec(4096, None);
            let grid = spec.grid;
            let before = memo.hits().0;
            let got = with_memo(&memo, &psl, || with_trail(spec, &psl, at, || validate(src)));
            assert!(memo.hits().0 > before, "cut {i}: no scan answered");
            let bare = got.clone().map(|v| super::Verdict { trail: None, ..v });
            assert_eq!(bare, validate(src), "progressive cut {i}");
            let Some(v) = got else { continue };
            let (Some(trail), Some(fail)) = (v.trail, v.broke_at) else {
                continue;
            };
            let top = fail / grid * grid;
            let near: Vec<u64> = (0..3).filter_map(|k| top.checked_sub(k * grid)).collect();
            answered += usize::from(trail.0.answer(src.len(), &near).is_some());
            for w in (top.saturating_sub(24 * grid)..=top + grid).step_by(grid as usize) {
                compared += usize::from(answers_as_captured(&trail, src, w));
            }
        }
        assert!(
            answered >= 3 && compared >= 20,
            "{answered} answered, {compared} compared"
        );
        // Two copies validated at once: one decode.
        let memo = std::sync::Arc::new(ScanMemo::default());
        let copy_at = ((variants.len() + 1) * slot) as u64;
        img[copy_at as usize..copy_at as usize + commented.len()].copy_from_slice(&commented);
        let sl = Slice(&img);
        let verdicts: Vec<_> = std::thread::scope(|sc| {
            [0, copy_at]
                .map(|at| {
                    let (memo, sl) = (&memo, &sl);
                    sc.spawn(move || with_memo(memo, sl, || validate(Src::new(sl, at, NO_LIMIT))))
                })
                .map(|h| h.join().unwrap())
                .to_vec()
        });
        for (v, at) in verdicts.iter().zip([0, copy_at]) {
            assert_eq!(*v, validate(Src::new(&sl, at, NO_LIMIT)));
        }
        // (The picture's one scan: decoded once.)
        assert_eq!(memo.hits().0, 1, "{:?}", memo.hits());
    }

    /// C source of a small libjpeg encoder used by [`libjpeg_variants`].
    const GEN_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>
int main(int argc, char **argv) {
  if (argc < 11) return 2;
  const char *out = argv[1];
  int w = atoi(argv[2]), h = atoi(argv[3]), nc = atoi(argv[4]);
  int hs = atoi(argv[5]), vs = atoi(argv[6]), prog = atoi(argv[7]);
  int rst = atoi(argv[8]), opt = atoi(argv[9]), arith = atoi(argv[10]);
  int q = argc > 11 ? atoi(argv[11]) : 85;
  struct jpeg_compress_struct c; struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e); jpeg_create_compress(&c);
  FILE *f = fopen(out, "wb"); if (!f) return 3;
  jpeg_stdio_dest(&c, f);
  c.image_width = w; c.image_height = h; c.input_components = nc;
  c.in_color_space = nc == 1 ? JCS_GRAYSCALE : nc == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, q, TRUE);
  if (nc == 3) { c.comp_info[0].h_samp_factor = hs; c.comp_info[0].v_samp_factor = vs; }
  if (prog) jpeg_simple_progression(&c);
  if (rst > 0) c.restart_interval = rst; else if (rst < 0) c.restart_in_rows = -rst;
  c.optimize_coding = opt ? TRUE : FALSE;
  c.arith_code = arith ? TRUE : FALSE;
  jpeg_start_compress(&c, TRUE);
  unsigned char *row = malloc(w * nc);
  unsigned s = 12345;
  while (c.next_scanline < c.image_height) {
    int y = c.next_scanline;
    for (int x = 0; x < w * nc; x++) {
      s = s * 1103515245 + 12345;
      int v = (x * 3 + y * 5 + ((x / 7) ^ (y / 5)) * 11) & 255;
      if (((x / 13) + (y / 9)) % 4 == 0) v = (s >> 16) & 255; /* noisy patches */
      row[x] = v;
    }
    JSAMPROW r = row; jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c); fclose(f); jpeg_destroy_compress(&c);
  return 0;
}
"#;

    /// JPEGs written by the system's libjpeg in many configurations
    /// (sampling factors, grey/RGB/CMYK, progressive, restart intervals,
    /// optimised tables, arithmetic coding, odd sizes): each must be Complete
    /// with its exact length, and each cut in its scan data and followed by
    /// foreign bytes and an EOI must not be. Skipped without cc + libjpeg.
    /// Builds [`GEN_C`] in a fresh temporary directory `tag`; returns the
    /// directory and the executable, `None` (directory removed) without cc
    /// or libjpeg.
    fn libjpeg_gen(tag: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
        let dir = std::env::temp_dir().join(format!("gpucarve-{tag}-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let c = dir.join("gen.c");
        let exe = dir.join("gen");
        std::fs::write(&c, GEN_C).ok()?;
        let built = std::process::Command::new("cc")
            .arg("-O1")
            .arg("-o")
            .arg(&exe)
            .arg(&c)
            .arg("-ljpeg")
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        Some((dir, exe))
    }

    /// Generator arguments (after the output path) of [`libjpeg_variants`]:
    /// width height components h v progressive restart optimise arith [q].
    const LIBJPEG_CONFIGS: [&str; 13] = [
        "64 48 3 2 2 0 0 0 0",
        "65 49 3 2 2 1 0 0 0",
        "33 17 1 1 1 0 5 0 0",
        "33 17 1 1 1 1 3 0 0",
        "100 75 3 2 1 0 -1 1 0",
        "100 75 3 2 1 1 -2 1 0",
        "80 80 3 1 1 1 0 1 0 95",
        "80 80 3 4 1 0 0 0 0",
        "40 40 4 1 1 0 0 0 0",
        "40 40 4 1 1 1 0 0 0",
        "257 129 3 2 2 1 7 1 0 50",
        "64 64 3 2 2 0 0 0 1",
        "300 200 3 1 2 1 0 0 0 100",
    ];

    #[test]
    fn libjpeg_variants() {
        let Some((dir, exe)) = libjpeg_gen("jpeg") else {
            eprintln!("cc or libjpeg not available; skipped");
            return;
        };
        let configs = LIBJPEG_CONFIGS;
        let mut files = Vec::new();
        for (i, args) in configs.iter().enumerate() {
            let out = dir.join(format!("{i}.jpg"));
            let ok = std::process::Command::new(&exe)
                .arg(&out)
                .args(args.split(' '))
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "generator failed for {args}");
            files.push(out);
        }
        let (total, exact) = check_real("jpeg", &files);
        assert_eq!(total, exact);
        for (f, args) in files.iter().zip(configs) {
            let d = std::fs::read(f).unwrap();
            let arith = args.ends_with(" 1");
            let sd = scan_data(&d);
            for cut in [sd + 7, sd + (d.len() - sd) / 2] {
                let mut bad = d[..cut].to_vec();
                bad.extend((0..2000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
                bad.extend_from_slice(&[0xFF, 0xD9]);
                let v = run("jpeg", &bad).unwrap();
                // Arithmetic-coded scans are only marker-walked.
                if !arith {
                    assert_ne!(
                        v.status,
                        Status::Complete,
                        "{args} cut at {cut}: {:?}",
                        v.notes
                    );
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The crate's deterministic pseudo-random sequence (splitmix64).
    use crate::synth::SplitMix as Rng;

    /// `f` damaged the way a carver meets JPEGs: bits flipped, an `FF`
    /// written, a cluster deleted, replaced or inserted (zeros, noise or
    /// another file's bytes), or cut and followed by another file's tail.
    /// Only bytes at or after `from` change.
    fn mutate(f: &[u8], others: &[Vec<u8>], from: usize, rng: &mut Rng) -> Vec<u8> {
        let mut v = f.to_vec();
        let len = v.len();
        if from >= len {
            return v;
        }
        let at = from + rng.below(len - from);
        let cluster = [512, 1024, 4096][rng.below(3)];
        let other = &others[rng.below(others.len())];
        let piece = |rng: &mut Rng| -> Vec<u8> {
            match rng.below(3) {
                0 => vec![0; cluster],
                1 => (0..cluster).map(|_| rng.next_u64() as u8).collect(),
                _ => {
                    let o = rng.below(other.len().saturating_sub(cluster).max(1));
                    other[o.min(other.len())..(o + cluster).min(other.len())].to_vec()
                }
            }
        };
        match rng.below(7) {
            0 => {
                for _ in 0..1 + rng.below(3) {
                    let i = from + rng.below(len - from);
                    v[i] ^= 1 << rng.below(8);
                }
            }
            1 => {
                v[at] = 0xFF;
                if at + 1 < len && rng.below(2) == 0 {
                    v[at + 1] = [0x00, 0xD0, 0xD1, 0xD9, 0xC4, 0xDA, 0xFF][rng.below(7)];
                }
            }
            2 => {
                let end = (at + cluster).min(len);
                v.drain(at..end);
            }
            3 => {
                let p = piece(rng);
                let end = (at + p.len()).min(len);
                v.splice(at..end, p[..end - at].iter().copied());
            }
            4 => {
                let p = piece(rng);
                v.splice(at..at, p);
            }
            5 => {
                // Aligned like a file system cluster of the file.
                let a = at - at % cluster;
                let a = a.max(from);
                let p = piece(rng);
                let end = (a + p.len()).min(len);
                v.splice(a..end, p[..end - a].iter().copied());
            }
            _ => {
                v.truncate(at);
                let o = rng.below(other.len());
                v.extend_from_slice(&other[o..]);
                v.extend_from_slice(&[0xFF, 0xD9]);
            }
        }
        v
    }

    /// The table-driven decoder gives exactly the verdicts (status, length,
    /// subtype, notes), damage and snapshots of the decoder it replaced
    /// ([`crate::carve::validators::jpeg_reference`], this file as of
    /// commit 4389248), over: every JPEG of `corpora/samples`, JPEGs found
    /// under `/usr/share`, synthetic baseline/progressive files and libjpeg
    /// variants (progressive, restart intervals, sampling factors, when cc
    /// and libjpeg are there); each whole, inside an image after junk, cut
    /// at many points (by the image's end and by `max_len`), and mutated
    /// (bit flips, `FF`s, deleted / replaced / inserted clusters of zeros,
    /// noise or other files' bytes, cut and joined to another file), the
    /// mutants also cut; and snapshots: captures at several splits of the
    /// files and mutants (verdict, damage, whether a snapshot is taken, its
    /// split and offset), then resumes over windows equal before the split
    /// (the file, cut, followed by noise, by a later part of itself, by
    /// another file, mutated after the split).
    #[test]
    fn fast_decoder_verdicts_equal_the_reference() {
        use super::super::jpeg_reference as old;
        use super::{Damage, Src, validate_capture, validate_probe, validate_resume};
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};

        // (name, bytes)
        let mut files: Vec<(String, Vec<u8>)> = vec![
            ("sample".into(), sample()),
            ("progressive".into(), progressive()),
            ("three scans".into(), jpeg(app0, 3)),
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
        let manifest = std::fs::read_to_string(root.join("MANIFEST.tsv")).unwrap();
        let mut corpus = 0;
        for line in manifest.lines().skip(1) {
            let cols: Vec<&str> = line.split('\t').collect();
            if cols.get(1) == Some(&"jpeg") {
                files.push((cols[0].into(), std::fs::read(root.join(cols[0])).unwrap()));
                corpus += 1;
            }
        }
        assert!(corpus >= 6, "corpus JPEGs missing");
        for p in real_files(&["/usr/share"], &[".jpg", ".jpeg"], 40) {
            if let Ok(d) = std::fs::read(&p) {
                files.push((p.display().to_string(), d));
            }
        }
        if let Some((dir, exe)) = libjpeg_gen("jpeg-ref") {
            let more = [
                "512 384 3 2 2 1 0 1 0 90",
                "640 480 3 2 2 0 4 0 0 75",
                "333 222 1 1 1 1 2 1 0 98",
                "256 256 3 1 1 1 -1 0 0 100",
            ];
            for (i, args) in LIBJPEG_CONFIGS.iter().chain(&more).enumerate() {
                if args.ends_with(" 1") {
                    continue; // arithmetic coding is not decoded
                }
                let out = dir.join(format!("{i}.jpg"));
                let ok = std::process::Command::new(&exe)
                    .arg(&out)
                    .args(args.split(' '))
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(ok, "generator failed for {args}");
                files.push((format!("libjpeg {args}"), std::fs::read(&out).unwrap()));
            }
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            eprintln!("cc or libjpeg not available: no libjpeg variants");
        }
        files.sort_by(|a, b| a.1.cmp(&b.1));
        files.dedup_by(|a, b| a.1 == b.1);
        let others: Vec<Vec<u8>> = files.iter().map(|f| f.1.clone()).collect();

        let mut cases = 0u64;
        // Both validators over `data` at `start` with `max_len`.
        let mut same = |data: &[u8], start: u64, max_len: u64, what: &dyn Fn() -> String| {
            let sl = Slice(data);
            let src = Src::new(&sl, start, Limits { max_len });
            let (mut d1, mut d2) = (Damage::default(), old::Damage::default());
            let v1 = validate_probe(src, &mut d1);
            let v2 = old::validate_probe(src, &mut d2);
            assert_eq!(v1, v2, "{}", what());
            assert_eq!(
                (d1.damaged, d1.fail_at),
                (d2.damaged, d2.fail_at),
                "{}",
                what()
            );
            cases += 1;
        };
        // Fewer cases unoptimised.
        let scale = if cfg!(debug_assertions) { 4 } else { 1 };
        let mut rng = Rng(0x6A09_E667_F3BC_C908);
        for (name, f) in &files {
            let len = f.len();
            same(f, 0, NO_LIMIT.max_len, &|| format!("{name}: whole"));
            let mut img = b"junk before \xFF\xD8\xFF\xE0".to_vec();
            img.extend_from_slice(f);
            img.extend_from_slice(&[0x55; 700]);
            same(&img, 16, NO_LIMIT.max_len, &|| {
                format!("{name}: in an image")
            });
            // Cut: evenly spaced and random points, by the image's end or by
            // max_len.
            let cuts = 48 / scale;
            for i in 0..cuts {
                let cut = if i % 2 == 0 {
                    len * (i + 1) / (cuts + 1)
                } else {
                    rng.below(len + 1)
                };
                if i % 4 < 2 {
                    same(&f[..cut], 0, NO_LIMIT.max_len, &|| {
                        format!("{name}: cut {cut}")
                    });
                } else {
                    same(f, 0, cut as u64, &|| format!("{name}: max_len {cut}"));
                }
            }
            // Mutants, some also cut.
            let muts = if len > 1 << 20 { 24 } else { 64 } / scale;
            for i in 0..muts {
                let seed = rng.0;
                let m = mutate(f, &others, 0, &mut rng);
                let what = || format!("{name}: mutant {i} (rng {seed:#x})");
                same(&m, 0, NO_LIMIT.max_len, &what);
                if rng.below(3) == 0 {
                    let cut = rng.below(m.len() + 1);
                    same(&m[..cut], 0, NO_LIMIT.max_len, &|| {
                        format!("{} cut {cut}", what())
                    });
                }
            }
        }

        // Snapshots: capture, then resume over windows that keep the bytes
        // before the split.
        let (mut snaps, mut resumes) = (0u64, 0u64);
        for (name, f) in &files {
            let mut subjects = vec![f.clone()];
            for _ in 0..3 {
                subjects.push(mutate(f, &others, 0, &mut rng));
            }
            let splits = if f.len() > 1 << 20 { 4 } else { 7 };
            for (si, g) in subjects.iter().enumerate() {
                let len = g.len();
                for j in 1..=splits {
                    let split = if j % 2 == 0 {
                        len * j / (splits + 1)
                    } else {
                        rng.below(len + 1)
                    };
                    let what = || format!("{name}: subject {si} split {split}");
                    let sl = Slice(g);
                    let src = Src::new(&sl, 0, NO_LIMIT);
                    let (mut d1, mut d2) = (Damage::default(), old::Damage::default());
                    let (v1, s1) = validate_capture(src, &mut d1, split as u64);
                    let (v2, s2) = old::validate_capture(src, &mut d2, split as u64);
                    assert_eq!(v1, v2, "{}", what());
                    assert_eq!(
                        (d1.damaged, d1.fail_at),
                        (d2.damaged, d2.fail_at),
                        "{}",
                        what()
                    );
                    assert_eq!(
                        s1.as_ref().map(|s| (s.split(), s.at())),
                        s2.as_ref().map(|s| (s.split(), s.at())),
                        "{}",
                        what()
                    );
                    let (Some(s1), Some(s2)) = (s1, s2) else {
                        continue;
                    };
                    snaps += 1;
                    if si > 1 && scale > 1 {
                        continue;
                    }
                    let head = &g[..split];
                    let noise: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
                    let later = (split + 4096).min(len);
                    let other = &others[rng.below(others.len())];
                    let o = rng.below(other.len());
                    let windows = [
                        g.clone(),
                        head.to_vec(),
                        [head, &noise[..]].concat(),
                        [head, &g[later..]].concat(),
                        [head, &other[o..]].concat(),
                        mutate(g, &others, split, &mut rng),
                        mutate(g, &others, split, &mut rng),
                    ];
                    for (wi, w) in windows.iter().enumerate() {
                        let sl = Slice(w);
                        let src = Src::new(&sl, 0, NO_LIMIT);
                        let (mut d1, mut d2, mut d3) =
                            (Damage::default(), old::Damage::default(), Damage::default());
                        let r1 = validate_resume(src, &mut d1, &s1);
                        let r2 = old::validate_resume(src, &mut d2, &s2);
                        let whole = validate_probe(src, &mut d3);
                        let what = || format!("{}: window {wi}", what());
                        assert_eq!(r1, r2, "{}", what());
                        assert_eq!(
                            (d1.damaged, d1.fail_at),
                            (d2.damaged, d2.fail_at),
                            "{}",
                            what()
                        );
                        assert_eq!(r1, whole, "{}", what());
                        assert_eq!(d1, d3, "{}", what());
                        resumes += 1;
                    }
                }
            }
        }
        eprintln!(
            "{} files, {cases} validations, {snaps} snapshots, {resumes} resumes: all equal",
            files.len()
        );
        assert!(snaps >= 50, "only {snaps} snapshots");
    }

    /// Decoding speed of this validator against the reference
    /// ([`fast_decoder_verdicts_equal_the_reference`]) on the JPEGs of
    /// `corpora/samples`, alternating, best of several rounds: `cargo test
    /// --release --lib jpeg_decode_speed -- --ignored --nocapture`. Then,
    /// per file, what the carving's bookkeeping adds to a decode: a trail
    /// of snapshots (clusters of 4 KiB, an ext2/3 block map, as the
    /// validation stage's contiguous validations and a search's proofs
    /// leave) and a first decode under a memo of scans (as every stage
    /// validation is). `ONLY=name` picks files, `ROUNDS=n` the rounds.
    #[test]
    #[ignore]
    fn jpeg_decode_speed() {
        use super::super::jpeg_reference as old;
        use super::{Src, validate};
        use crate::carve::validators::testutil::{NO_LIMIT, Slice};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
        let manifest = std::fs::read_to_string(root.join("MANIFEST.tsv")).unwrap();
        let files: Vec<(String, Vec<u8>)> = manifest
            .lines()
            .filter(|l| l.split('\t').nth(1) == Some("jpeg"))
            .filter_map(|l| l.split('\t').next())
            .filter(|n| std::env::var("ONLY").map_or(true, |o| n.contains(&o)))
            .map(|n| (n.to_string(), std::fs::read(root.join(n)).unwrap()))
            .collect();
        let rounds: usize = std::env::var("ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(7);
        let (mut all_new, mut all_old) = (0f64, 0f64);
        for (name, f) in &files {
            let sl = Slice(f);
            let src = Src::new(&sl, 0, NO_LIMIT);
            let reps = (20_000_000 / f.len()).clamp(1, 2000);
            let (mut best_new, mut best_old) = (f64::MAX, f64::MAX);
            for _ in 0..rounds {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    std::hint::black_box(validate(std::hint::black_box(src)));
                }
                best_new = best_new.min(t.elapsed().as_secs_f64() / reps as f64);
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    std::hint::black_box(old::validate(std::hint::black_box(src)));
                }
                best_old = best_old.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            all_new += best_new;
            all_old += best_old;
            let mb = f.len() as f64 / 1e6;
            eprintln!(
                "{name:>26}: {:>8.1} MB/s, reference {:>8.1} MB/s ({:.2}x)",
                mb / best_new,
                mb / best_old,
                best_old / best_new
            );
        }
        let mb: f64 = files.iter().map(|f| f.1.len() as f64 / 1e6).sum();
        eprintln!(
            "{:>26}: {:>8.1} MB/s, reference {:>8.1} MB/s ({:.2}x)",
            "all",
            mb / all_new,
            mb / all_old,
            all_old / all_new
        );
        let spec = super::TrailSpec {
            grid: 4096,
            span: 4 * 4096 + (64 << 10),
            block_map: Some(4096),
        };
        for (name, f) in &files {
            let sl = Slice(f);
            let src = Src::new(&sl, 0, NO_LIMIT);
            let reps = (20_000_000 / f.len()).clamp(1, 2000);
            let mut best = [f64::MAX; 3];
            for _ in 0..rounds {
                for (k, b) in best.iter_mut().enumerate() {
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        let src = std::hint::black_box(src);
                        std::hint::black_box(match k {
                            0 => validate(src),
                            1 => super::with_trail(spec, &sl, 0, || validate(src)),
                            _ => {
                                let memo = std::sync::Arc::new(super::ScanMemo::default());
                                super::with_memo(&memo, &sl, || validate(src))
                            }
                        });
                    }
                    *b = b.min(t.elapsed().as_secs_f64() / reps as f64);
                }
            }
            // A copy with a comment segment inserted after APP0 (as
            // mkimage's modified copies), decoded under the memo after the
            // original: with and without a trail.
            if f.len() > 1000 && f[2] == 0xFF && f[3] == 0xE0 {
                let pos = 4 + usize::from(u16::from_be_bytes([f[4], f[5]]));
                let mut img = f.clone();
                img.resize(f.len().next_multiple_of(4096), 0);
                let at = img.len() as u64;
                img.extend_from_slice(&f[..pos]);
                img.extend_from_slice(&[
                    0xFF, 0xFE, 0, 10, b'c', b'o', b'p', b'y', b' ', b'n', b'o', b'w',
                ]);
                img.extend_from_slice(&f[pos..]);
                let sl = Slice(&img);
                let mut t2 = [f64::MAX; 2];
                for _ in 0..rounds {
                    for (k, b) in t2.iter_mut().enumerate() {
                        let memo = std::sync::Arc::new(super::ScanMemo::default());
                        super::with_memo(&memo, &sl, || validate(Src::new(&sl, 0, NO_LIMIT)));
                        let t = std::time::Instant::now();
                        let v = super::with_memo(&memo, &sl, || {
                            let src = Src::new(&sl, at, NO_LIMIT);
                            if k == 0 {
                                validate(src)
                            } else {
                                super::with_trail(spec, &sl, at, || validate(src))
                            }
                        });
                        *b = b.min(t.elapsed().as_secs_f64());
                        assert!(v.is_some_and(
                            |v| v.status == crate::carve::validators::Status::Complete
                        ));
                    }
                }
                eprintln!(
                    "{name:>26}: a copy under the memo {:.3} ms, with a trail {:.3} ms",
                    t2[0] * 1e3,
                    t2[1] * 1e3
                );
            }
            eprintln!(
                "{name:>26}: {:.3} ms; with a trail {:.3} ms ({:.2}x); first under a memo {:.3} ms ({:.2}x)",
                best[0] * 1e3,
                best[1] * 1e3,
                best[1] / best[0],
                best[2] * 1e3,
                best[2] / best[0]
            );
        }
    }
}
