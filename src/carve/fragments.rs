//! Fragment gap carving: recovering a file stored in two (to four) pieces.
//!
//! When a structure validator reports `Partial` for a PNG, ZIP or JPEG (its
//! structure breaks partway), the file may simply be fragmented: its first
//! fragment runs from the header to a cluster boundary at or before the break,
//! and its second fragment starts at a cluster-aligned position elsewhere (in
//! order: after a gap following the first fragment; out of order: before the
//! header). This module searches for that second fragment and accepts a join
//! only when the format itself proves it:
//!
//! * **PNG**: our own chunk walk finds the chunk at which the CRC chain breaks
//!   (`pos`). The split `S` (relative to the header) is a cluster multiple in
//!   `[pos, pos + 12 + length)` (the breaking chunk spans the join; when its
//!   header is itself foreign, `S ≤ pos + 8`). For every split the CRC of the
//!   chunk's bytes before the split is computed once and kept; a candidate
//!   second start `s2` is then tested cheaply (the joined chunk header is
//!   plausible, the next chunk header after it is plausible, the chunk's CRC
//!   continued over the bytes at `s2` matches the stored CRC) and finally the
//!   full PNG validator must return `Complete` over the joined virtual file.
//! * **ZIP**: our own local-header walk finds the entry in which the walk
//!   breaks. Candidate end-of-central-directory records (`PK\5\6`) are searched
//!   after the break (and before the header, out of order); each one fixes the
//!   gap exactly (its position minus the central directory's end). For each
//!   cluster-aligned split in the breaking entry, the joined file must have:
//!   every central header parsed up to exactly the EOCD, every central
//!   header's local-header offset landing on a `PK\3\4` with the same name, and
//!   the CRC-32 of the entry spanning the split (stored or inflated with
//!   flate2) equal to the central directory's; then every other stored or
//!   deflated entry's CRC is checked while the byte budget lasts. When a ZIP
//!   validator is registered and disagrees (`Partial`), the join is refused.
//! * **JPEG**: no checksum, and a Huffman decode is a weak detector on its
//!   own: it resynchronises after foreign bits, and pictures coded with the
//!   same tables (copies, one camera) decode as each other's continuation.
//!   So the search is narrow and the proof layered:
//!   - splits: the cluster multiples within one cluster below where the
//!     decoder failed (its read position is an upper bound on the split).
//!     Foreign data that decodes for longer is same-table data and the split
//!     cannot be placed: no join is attempted;
//!   - second starts: clusters whose next 4 KiB look like entropy-coded data
//!     (every `FF` is stuffing, a restart marker, EOI or a between-scans
//!     marker; no 64-byte runs; not text), not inside a range already carved
//!     ([`Claims`]) nor inside another JPEG stored contiguously (one of the
//!     nearest cluster-aligned JPEG headers before it validates past it), and
//!     not in the middle of an unowned run of entropy-like data (the 4 KiB
//!     before must not look like entropy data, unless another JPEG owns it);
//!   - a cheap decode of 32 KiB past the split, then the same decode with the
//!     cluster before the second start in its place must fail (else that
//!     cluster continues the head as well as the candidate does), then the
//!     full validator over the join: every Huffman code valid, coefficient
//!     indices in range, the exact MCU count of every scan, restart markers in
//!     sequence, EOI after the last MCU; and at least 2 KiB of second fragment
//!     (a few hundred bytes ending in EOI match the missing MCU count by
//!     chance).
//!
//!   The head is decoded once per split: the decoder's state at the last MCU
//!   boundary before the split ([`validators::jpeg::Snap`]) is kept, and each
//!   candidate decodes only what follows it. Bytes decoded per file are
//!   capped (64 MiB).
//!
//! **Three or four fragments** ([`MAX_RUNS`]): a join whose crossing is
//! proven but whose file breaks again later becomes the head of the next
//! search, from the end of its last run (candidates nearest first from where
//! that run would continue, and before where it starts). The crossing proof:
//! PNG, the chunk across the split has its CRC; ZIP (no EOCD proves the last
//! fragment), the entry across it has its local header's CRC-32 and a header
//! follows its data exactly; JPEG, the decode stays valid at least 8 KiB and
//! two clusters past it (beyond what the cluster before the candidate may
//! reach), and such crossings are followed only when no two-fragment join is
//! proven, within half the budget spent so far. The file's final proof is the
//! same as for two fragments, over every run; a JPEG join is also refused
//! when any boundary moved by one cluster decodes as well. No cluster is
//! taken twice, and all runs share the file's budget.
//!
//! A proven join becomes a `complete` file with two byte runs and a note
//! `bifragment join proven by …`; the number of candidates tried is noted
//! either way.
//!
//! **Cluster size**: `--cluster-size`, else estimated from the starts of the
//! complete files carved so far: the largest power of two (512 B … 1 MiB)
//! modulo which at least 75% of them share the candidate's own phase; 512 when
//! fewer than 4 complete files are known. Splits and second starts are taken
//! relative to the candidate's start, so a file system whose data area is not
//! aligned to the cluster size in absolute terms works too.
//!
//! **Bounds** (per file, [`FragLimits`]): splits tried, gap searched (bytes
//! either side), candidate (split, second start) pairs, bytes read for
//! checksums and validation, and wall time. Reads go through a small block
//! cache (fixed size); nothing is allocated in proportion to a length field
//! (central directories are walked record by record; at most 65 535 entries,
//! the 16-bit EOCD count).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::validators::{self, ByteReader, Limits, Status, Verdict};

/// Per-file bounds of the search.
#[derive(Clone, Copy, Debug)]
pub struct FragLimits {
    /// Largest gap searched (bytes), after the first fragment and before the header.
    pub max_gap: u64,
    /// Most split points tried.
    pub max_splits: u64,
    /// Most (split, second start) candidates tried.
    pub max_candidates: u64,
    /// Most bytes read for checksums, inflation and full validation.
    pub max_bytes: u64,
    /// Wall-time cap per file: a safety net only. The byte and candidate caps
    /// bound the work (and keep reports reproducible); this one should never
    /// be what stops a search.
    pub max_time: Duration,
}

impl Default for FragLimits {
    fn default() -> Self {
        FragLimits {
            max_gap: 64 << 20,
            max_splits: 4096,
            max_candidates: 4_000_000,
            max_bytes: 512 << 20,
            max_time: Duration::from_secs(30),
        }
    }
}

/// A proven two-fragment file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    /// `(image offset, length)` of each fragment, in file order.
    pub runs: Vec<(u64, u64)>,
    /// Total length.
    pub length: u64,
    pub subtype: Option<String>,
    pub notes: Vec<String>,
}

/// The result of a recovery attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub joined: Option<Joined>,
    /// Candidates tried, why it stopped (for the report).
    pub note: String,
}

/// True for the validators this module can recover.
pub fn supported(validator: &str) -> bool {
    matches!(validator, "png" | "zip" | "jpeg")
}

/// Byte ranges of the image already known to belong to a file: complete
/// files and proven joins carved so far. A cluster belongs to one file, so a
/// second fragment is never taken from inside one of them (this is what keeps
/// several copies of one picture from being grafted onto each other).
/// Bounded: ranges ending more than the largest gap behind the file being
/// searched are forgotten, and at most 2^18 are kept.
#[derive(Clone, Debug, Default)]
pub struct Claims {
    /// start → end.
    ranges: std::collections::BTreeMap<u64, u64>,
    /// JPEG headers validated by the search (to see whether they own a
    /// candidate second fragment): header → validated length.
    jpeg_heads: std::collections::BTreeMap<u64, u64>,
    /// ZIP end-of-central-directory records around the searches so far.
    eocds: PosIndex,
    /// Cluster-aligned JPEG headers around the searches so far.
    sois: PosIndex,
    /// Whether the `n` bytes at a position look like entropy-coded data:
    /// (position, n) → verdict, shared by the JPEG searches (their windows
    /// overlap: each cluster is examined once per carving, not once per search).
    entropy: std::collections::BTreeMap<(u64, u64), bool>,
    /// The validation stage's JPEG verdicts.
    known: Option<Arc<KnownJpegs>>,
}

/// Positions of one signature in a stretch `[lo, hi)` of the image, shared by
/// every search of a carving: consecutive searches look at overlapping
/// windows (up to [`FragLimits::max_gap`] either side of their file), and
/// each byte of the image is searched for the signature once instead of once
/// per search. The stretch grows at either end as searches ask, is restarted
/// when a search looks somewhere disjoint, and forgets what lies more than
/// [`MAX_SPAN`] behind its end. At most [`MAX_INDEXED`] positions: past that
/// (dense input) the index says so and the search reads the image itself, as
/// bounded by its own budget.
#[derive(Clone, Debug, Default)]
struct PosIndex {
    needle: &'static [u8],
    /// Only positions `≡ phase (mod modulus)` are kept (`modulus` 1: all).
    modulus: u64,
    phase: u64,
    lo: u64,
    hi: u64,
    at: std::collections::BTreeSet<u64>,
    overflow: bool,
}

/// Most positions one index holds.
const MAX_INDEXED: usize = 1 << 18;
/// Longest stretch an index covers.
const MAX_SPAN: u64 = 512 << 20;
/// Bytes searched per read when an index grows.
const INDEX_PIECE: usize = 1 << 20;
/// Least an index grows by.
const INDEX_STEP: u64 = 1 << 20;

impl PosIndex {
    /// Makes `[from, to)` indexed for `needle` at positions `≡ phase (mod
    /// modulus)` whose byte after the needle passes `next_ok`; false when the
    /// index overflowed (the caller must search itself).
    fn cover(
        &mut self,
        r: &dyn ByteReader,
        (needle, modulus, phase): (&'static [u8], u64, u64),
        next_ok: fn(u8) -> bool,
        from: u64,
        to: u64,
    ) -> bool {
        let modulus = modulus.max(1);
        let phase = phase % modulus;
        let same = self.needle == needle && self.modulus == modulus && self.phase == phase;
        // A window near the stretch extends it (the bytes between are
        // searched too); one far from it starts a new stretch.
        let far = to.saturating_add(MAX_SPAN / 4) < self.lo
            || from > self.hi.saturating_add(MAX_SPAN / 4);
        if !same || far || self.hi == 0 {
            *self = PosIndex {
                needle,
                modulus,
                phase,
                lo: from,
                hi: from,
                ..PosIndex::default()
            };
        }
        if self.overflow {
            return false;
        }
        // Grown by at least `INDEX_STEP` at a time: callers ask for windows
        // a little past the last one, and a read per small step would cost
        // more than the bytes it searches.
        if from < self.lo {
            let lo = self.lo;
            let from = from.min(lo.saturating_sub(INDEX_STEP));
            self.search(r, next_ok, from, lo);
            self.lo = from;
        }
        if to > self.hi {
            let hi = self.hi;
            let to = to.max(hi.saturating_add(INDEX_STEP));
            self.search(r, next_ok, hi, to);
            self.hi = to;
        }
        if self.hi - self.lo > MAX_SPAN {
            self.lo = (self.hi - MAX_SPAN).min(from);
            let keep = self.at.split_off(&self.lo);
            self.at = keep;
        }
        !self.overflow
    }

    fn search(&mut self, r: &dyn ByteReader, next_ok: fn(u8) -> bool, from: u64, to: u64) {
        let finder = memchr::memmem::Finder::new(self.needle);
        let extra = self.needle.len();
        let piece = usize::try_from(to - from).map_or(INDEX_PIECE, |n| n.min(INDEX_PIECE));
        let mut buf = vec![0u8; piece + extra];
        let mut pos = from;
        while pos < to && !self.overflow {
            let span = (to - pos).min(piece as u64);
            let want = span as usize + extra;
            let got = r.read_at(pos, &mut buf[..want]).min(want);
            for i in finder.find_iter(&buf[..got]) {
                let p = pos + i as u64;
                if (i as u64) >= span || p % self.modulus != self.phase {
                    continue;
                }
                if !buf.get(i + self.needle.len()).copied().is_some_and(next_ok) {
                    continue;
                }
                self.at.insert(p);
                if self.at.len() > MAX_INDEXED {
                    self.overflow = true;
                    return;
                }
            }
            if got < want {
                break;
            }
            pos += span;
        }
    }

    /// Indexed positions in `[from, to)`.
    fn range(&self, from: u64, to: u64) -> std::collections::btree_set::Range<'_, u64> {
        self.at.range(from..to.max(from))
    }
}

/// Most claimed ranges kept.
const MAX_CLAIMS: usize = 1 << 18;

impl Claims {
    /// Records `[start, end)` as belonging to a file.
    pub fn claim(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        if self.ranges.len() >= MAX_CLAIMS {
            self.ranges.pop_first();
        }
        let e = self.ranges.entry(start).or_insert(end);
        *e = (*e).max(end);
    }

    /// Forgets ranges that end at or before `before`.
    fn prune(&mut self, before: u64) {
        while let Some((_, &end)) = self.ranges.first_key_value() {
            if end > before {
                break;
            }
            self.ranges.pop_first();
        }
        while let Some((&(p, _), _)) = self.entropy.first_key_value() {
            if p >= before && self.entropy.len() < MAX_CLAIMS * 4 {
                break;
            }
            self.entropy.pop_first();
        }
        while let Some((&h, &len)) = self.jpeg_heads.first_key_value() {
            if h.saturating_add(len) > before && self.jpeg_heads.len() < MAX_CLAIMS {
                break;
            }
            self.jpeg_heads.pop_first();
        }
    }

    /// True when `pos` lies inside a claimed range.
    pub fn covers(&self, pos: u64) -> bool {
        // Ranges are not merged: a long one may start before shorter ones.
        self.ranges
            .range(..=pos)
            .rev()
            .take(64)
            .any(|(_, &end)| end > pos)
    }

    /// True when a claimed range starts inside `(a, b)`.
    pub fn starts_within(&self, a: u64, b: u64) -> bool {
        a.checked_add(1)
            .is_some_and(|lo| lo < b && self.ranges.range(lo..b).next().is_some())
    }
}

/// Carver-side state: the cluster-size estimate and the limits.
#[derive(Clone, Debug)]
pub struct Fragments {
    pub cluster_size: Option<u64>,
    pub limits: FragLimits,
    /// Ranges already carved (complete files, proven joins).
    pub claims: Claims,
    starts: Vec<u64>,
    /// End of the furthest complete file (starts inside it are embedded files, not counted).
    complete_end: u64,
    /// Searches run so far (for the carving's stage profile).
    pub searches: u64,
}

/// Most complete-file starts remembered for the estimate.
const MAX_STARTS: usize = 1 << 16;

impl Fragments {
    pub fn new(cluster_size: Option<u64>) -> Self {
        Fragments {
            cluster_size: cluster_size.filter(|&c| c > 0),
            limits: FragLimits::default(),
            claims: Claims::default(),
            starts: Vec::new(),
            complete_end: 0,
            searches: 0,
        }
    }

    /// Records the start of a complete file (for the cluster-size estimate).
    pub fn note_complete(&mut self, start: u64) {
        if self.starts.len() < MAX_STARTS {
            self.starts.push(start);
        }
    }

    /// Re-learns from files carved before a resume checkpoint: complete,
    /// top-level, single-run files (what `after_validate` noted the first time).
    pub fn seed(&mut self, start: u64, length: u64) {
        if start >= self.complete_end {
            self.note_complete(start);
        }
        self.claims.claim(start, start.saturating_add(length));
        self.complete_end = self.complete_end.max(start.saturating_add(length));
    }

    /// The cluster size to use for a candidate at `start`.
    pub fn cluster_for(&self, start: u64) -> u64 {
        if let Some(c) = self.cluster_size {
            return c;
        }
        estimate_cluster(&self.starts, start)
    }

    /// Tells the search what the carver's own JPEG validation found at
    /// `start` (`length` 0: not a JPEG), so that the search does not decode it
    /// again to see whether it owns a candidate second fragment. Verdicts cut
    /// by the window (`max_len`) or shortened by the ext2/3 indirect-block
    /// check are not the search's own kind of answer and are left out.
    pub fn note_jpeg(&mut self, start: u64, max_len: u64, verdict: Option<&Verdict>) {
        if let Some(length) = owner_length(max_len, verdict)
            && self.claims.jpeg_heads.len() < MAX_CLAIMS
        {
            self.claims.jpeg_heads.insert(start, length);
        }
    }

    /// Verdicts of JPEG headers validated ahead of the carver (by the
    /// validation stage), consulted before a search decodes a JPEG itself.
    pub fn share_jpegs(&mut self, known: Arc<KnownJpegs>) {
        self.claims.known = Some(known);
    }

    /// The carver's hook: given the validator's verdict for a candidate,
    /// tries a bifragment recovery when it is a `Partial` PNG/ZIP/JPEG (or a ZIP
    /// the validator rejected). Returns the verdict to use and, for a proven
    /// join, its byte runs.
    pub fn after_validate(
        &mut self,
        validator: &str,
        r: &dyn ByteReader,
        start: u64,
        max_len: u64,
        verdict: Option<Verdict>,
    ) -> (Option<Verdict>, Option<Vec<(u64, u64)>>) {
        self.claims
            .prune(start.saturating_sub(self.limits.max_gap.saturating_mul(2)));
        let try_it = match &verdict {
            Some(v) if v.status == Status::Complete => {
                if start >= self.complete_end {
                    self.note_complete(start);
                }
                self.claims.claim(start, start.saturating_add(v.length));
                self.complete_end = self.complete_end.max(start.saturating_add(v.length));
                false
            }
            Some(v) => v.status == Status::Partial && supported(validator),
            None => false,
        };
        if !try_it {
            return (verdict, None);
        }
        let cl = self.cluster_for(start);
        // A file system starts files at cluster boundaries: a header elsewhere
        // is an object inside something else or a remnant, not a fragment's head.
        if !start.is_multiple_of(cl.max(512)) {
            return (verdict, None);
        }
        self.searches += 1;
        let a = recover_with(
            validator,
            r,
            start,
            max_len,
            cl,
            &self.limits,
            &mut self.claims,
        );
        match (a.joined, verdict) {
            (Some(j), _) => {
                for &(off, len) in &j.runs {
                    self.claims.claim(off, off.saturating_add(len));
                }
                let mut v = Verdict::complete(j.length);
                v.subtype = j.subtype;
                v.notes = j.notes;
                v.notes.push(a.note);
                (Some(v), Some(j.runs))
            }
            (None, Some(mut v)) => {
                v.notes.push(a.note);
                (Some(v), None)
            }
            (None, None) => (None, None),
        }
    }
}

/// What the search would learn by validating the JPEG header itself: the
/// validated length (0: not a JPEG), or `None` for a verdict that is not that
/// kind of answer (cut by the window `max_len`, or shortened by the ext2/3
/// indirect-block check).
fn owner_length(max_len: u64, verdict: Option<&Verdict>) -> Option<u64> {
    match verdict {
        None => Some(0),
        Some(v)
            if v.length < max_len
                && !v
                    .notes
                    .iter()
                    .any(|n| n.starts_with("ext2/3 indirect block")) =>
        {
            Some(v.length)
        }
        Some(_) => None,
    }
}

/// JPEG verdicts shared between the validation stage, which runs ahead of
/// the carver on every core, and the fragment searches, which ask whether a
/// JPEG stored contiguously owns a candidate second fragment: a header the
/// stage has validated is not decoded again. Verdicts are pure functions of
/// the image, so what a search finds here equals what it would compute.
/// Bounded: past [`MAX_CLAIMS`] entries the lowest offsets are dropped.
#[derive(Debug, Default)]
pub struct KnownJpegs {
    lengths: std::sync::Mutex<std::collections::BTreeMap<u64, u64>>,
}

impl KnownJpegs {
    /// Records the validation stage's verdict for the JPEG header at `start`.
    pub fn note(&self, start: u64, max_len: u64, verdict: Option<&Verdict>) {
        let Some(length) = owner_length(max_len, verdict) else {
            return;
        };
        let mut m = self.lengths.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(start, length);
        if m.len() > MAX_CLAIMS {
            m.pop_first();
        }
    }

    fn get(&self, start: u64) -> Option<u64> {
        let m = self.lengths.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&start).copied()
    }
}

/// Largest power of two in 512..=1 MiB modulo which at least 75% of `starts`
/// share `start`'s phase; 512 with fewer than 4 starts.
pub fn estimate_cluster(starts: &[u64], start: u64) -> u64 {
    if starts.len() < 4 {
        return 512;
    }
    let mut best = 512;
    let mut p = 512u64;
    while p <= 1 << 20 {
        let same = starts.iter().filter(|&&s| s % p == start % p).count();
        if same * 4 >= starts.len() * 3 {
            best = p;
        }
        p <<= 1;
    }
    best
}

/// Tries to recover the file of type `validator` whose header is at `start`.
pub fn recover(
    validator: &str,
    r: &dyn ByteReader,
    start: u64,
    max_len: u64,
    cluster: u64,
    limits: &FragLimits,
) -> Attempt {
    recover_with(
        validator,
        r,
        start,
        max_len,
        cluster,
        limits,
        &mut Claims::default(),
    )
}

/// [`recover`], never taking a second fragment from a range in `claims`
/// (which also keeps what the search learnt about other files).
pub fn recover_with(
    validator: &str,
    r: &dyn ByteReader,
    start: u64,
    max_len: u64,
    cluster: u64,
    limits: &FragLimits,
    claims: &mut Claims,
) -> Attempt {
    let cluster = cluster.max(1);
    let max_len = max_len.min(r.len().saturating_sub(start));
    let mut b = Budget::new(*limits, claims);
    let joined = match validator {
        "png" => png::recover(&TwoRuns::one(r, start, max_len), cluster, &mut b),
        "zip" => zip::recover(&TwoRuns::one(r, start, max_len), cluster, &mut b),
        "jpeg" => jpeg::recover(&TwoRuns::one(r, start, max_len), max_len, cluster, &mut b),
        _ => None,
    };
    let why = if joined.is_some() {
        "join found"
    } else if b.exhausted {
        "search budget exhausted"
    } else {
        "no join proven"
    };
    Attempt {
        joined,
        note: format!(
            "fragment search ({validator}, cluster {cluster}): {} candidates, {} bytes checked, {why}",
            b.cands, b.bytes
        ),
    }
}

/// Counts candidates, bytes and time against the limits; holds the claims.
struct Budget<'c> {
    lim: FragLimits,
    claims: &'c mut Claims,
    cands: u64,
    bytes: u64,
    t0: Instant,
    exhausted: bool,
}

impl<'c> Budget<'c> {
    fn new(lim: FragLimits, claims: &'c mut Claims) -> Self {
        Budget {
            lim,
            claims,
            cands: 0,
            bytes: 0,
            t0: Instant::now(),
            exhausted: false,
        }
    }
    /// Counts one candidate; false when a limit is reached.
    fn cand(&mut self) -> bool {
        self.cands += 1;
        if self.cands > self.lim.max_candidates
            || (self.cands.is_multiple_of(512) && self.t0.elapsed() > self.lim.max_time)
        {
            self.exhausted = true;
        }
        !self.exhausted
    }
    /// Counts `n` bytes read; false when a limit is reached.
    fn bytes(&mut self, n: u64) -> bool {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.lim.max_bytes || self.t0.elapsed() > self.lim.max_time {
            self.exhausted = true;
        }
        !self.exhausted
    }
    fn ok(&self) -> bool {
        !self.exhausted
    }
}

/// Reads exactly `buf.len()` bytes at `off`.
fn read_exact(r: &dyn ByteReader, off: u64, buf: &mut [u8]) -> bool {
    let mut done = 0;
    for _ in 0..4 {
        if done == buf.len() {
            break;
        }
        let Some(dst) = buf.get_mut(done..) else {
            break;
        };
        let got = r
            .read_at(off.saturating_add(done as u64), dst)
            .min(dst.len());
        if got == 0 {
            break;
        }
        done += got;
    }
    done == buf.len()
}

/// Most fragments a recovered file may have.
pub const MAX_RUNS: usize = 4;

/// A virtual file made of up to [`MAX_RUNS`] runs of the image: run `i`
/// holds virtual offsets `[v_i, v_{i+1})` (the last one up to `len`) and
/// reads them from the image at `img_i + (off − v_i)`. Two runs are a
/// bifragment join; the search extends a proven join by one run at a time.
#[derive(Clone, Copy)]
pub struct TwoRuns<'a> {
    r: &'a dyn ByteReader,
    /// `(virtual start, image offset)` of each run; `at[0].0 == 0`.
    at: [(u64, u64); MAX_RUNS],
    n: usize,
    len: u64,
}

impl<'a> TwoRuns<'a> {
    /// The join of `[a, a + split)` and `[b, …)`; its length is bounded by the
    /// image, by `max_len` and, out of order (`b < a`), by the header.
    pub fn new(r: &'a dyn ByteReader, a: u64, split: u64, b: u64, max_len: u64) -> Self {
        let second = if b < a {
            a - b
        } else {
            r.len().saturating_sub(b)
        };
        let mut at = [(0, 0); MAX_RUNS];
        at[0] = (0, a);
        at[1] = (split, b);
        TwoRuns {
            r,
            at,
            n: 2,
            len: split.saturating_add(second).min(max_len),
        }
    }
    /// The image from `a` on as one run, at most `max_len` bytes.
    pub fn one(r: &'a dyn ByteReader, a: u64, max_len: u64) -> Self {
        let mut at = [(0, 0); MAX_RUNS];
        at[0] = (0, a);
        TwoRuns {
            r,
            at,
            n: 1,
            len: r.len().saturating_sub(a).min(max_len),
        }
    }
    /// This file cut at virtual `split` (inside its last run) and continued
    /// with the image from `b` on: bounded by `max_len`, the image and the
    /// nearest run of this file that starts after `b` in the image. `None`
    /// when the runs are all used or `split` is not inside the last run.
    pub fn then(&self, split: u64, b: u64, max_len: u64) -> Option<Self> {
        if self.n >= MAX_RUNS || split <= self.split() || split > self.len {
            return None;
        }
        let stop = self.at[..self.n]
            .iter()
            .map(|&(_, img)| img)
            .filter(|&img| img > b)
            .min()
            .unwrap_or(self.r.len());
        let mut j = *self;
        j.at[j.n] = (split, b);
        j.n += 1;
        j.len = split.saturating_add(stop.saturating_sub(b)).min(max_len);
        Some(j)
    }
    /// Image offset of the first run (the header).
    pub fn a(&self) -> u64 {
        self.at[0].1
    }
    /// Virtual offset where the last run starts.
    pub fn split(&self) -> u64 {
        self.at[self.n - 1].0
    }
    /// Image offset of the last run.
    pub fn b(&self) -> u64 {
        self.at[self.n - 1].1
    }
    /// Runs used.
    pub fn count(&self) -> usize {
        self.n
    }
    /// This file with the start of run `i` (≥ 1) moved by one cluster `cl`,
    /// earlier (`back`) or later, in both the file and the image; `None` when
    /// a run would become empty.
    fn nudged(&self, i: usize, back: bool, cl: u64) -> Option<Self> {
        if i == 0 || i >= self.n {
            return None;
        }
        let (v, img) = self.at[i];
        let next = if i + 1 < self.n {
            self.at[i + 1].0
        } else {
            self.len
        };
        let moved = if back {
            (v.checked_sub(cl)?, img.checked_sub(cl)?)
        } else {
            (v + cl, img + cl)
        };
        if moved.0 <= self.at[i - 1].0 || moved.0 >= next {
            return None;
        }
        let mut j = *self;
        j.at[i] = moved;
        Some(j)
    }
    /// The run holding virtual offset `off`: (virtual start, image offset, virtual end).
    fn run_of(&self, off: u64) -> (u64, u64, u64) {
        let i = self.at[..self.n]
            .iter()
            .rposition(|&(v, _)| v <= off)
            .unwrap_or(0);
        let end = if i + 1 < self.n {
            self.at[i + 1].0
        } else {
            self.len.max(self.at[i].0)
        };
        (self.at[i].0, self.at[i].1, end)
    }
    /// Image offset of virtual offset `off`.
    fn map(&self, off: u64) -> u64 {
        let (v, img, _) = self.run_of(off);
        img + (off - v)
    }
    /// Virtual offset where the run holding `off` ends.
    fn piece_end(&self, off: u64) -> u64 {
        self.run_of(off).2
    }
    /// The byte runs of the first `length` bytes.
    fn runs(&self, length: u64) -> Vec<(u64, u64)> {
        (0..self.n)
            .map(|i| {
                let (v, img) = self.at[i];
                let end = if i + 1 < self.n {
                    self.at[i + 1].0
                } else {
                    u64::MAX
                };
                (img, end.min(length).saturating_sub(v))
            })
            .collect()
    }
    /// True when image offset `pos` lies in the first `upto` virtual bytes
    /// of this file: a fragment is never taken twice.
    fn holds(&self, pos: u64, upto: u64) -> bool {
        self.runs(upto)
            .iter()
            .any(|&(img, len)| img <= pos && pos < img.saturating_add(len))
    }
}

impl ByteReader for TwoRuns<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let mut done = 0usize;
        while done < buf.len() {
            let off = offset + done as u64;
            if off >= self.len {
                break;
            }
            let piece_end = self.piece_end(off);
            let want = usize::try_from(piece_end.min(self.len) - off)
                .map_or(buf.len() - done, |w| w.min(buf.len() - done));
            if want == 0 {
                break;
            }
            let got = self.r.read_at(self.map(off), &mut buf[done..done + want]);
            if got == 0 {
                break;
            }
            done += got.min(want);
        }
        done
    }
}

/// Size of a cache block.
const BLOCK: u64 = 256 * 1024;
/// Blocks kept.
const BLOCKS: usize = 16;

/// A small read cache for the many tiny reads of the candidate prefilters.
struct Cache<'a> {
    r: &'a dyn ByteReader,
    blocks: Vec<(u64, Vec<u8>)>,
    next: usize,
}

impl<'a> Cache<'a> {
    fn new(r: &'a dyn ByteReader) -> Self {
        Cache {
            r,
            blocks: Vec::new(),
            next: 0,
        }
    }
    fn block(&mut self, base: u64) -> &[u8] {
        if let Some(i) = self.blocks.iter().position(|(b, _)| *b == base) {
            return &self.blocks[i].1;
        }
        // Reuse the buffer of the block it replaces (no zeroing per miss).
        let mut buf = if self.blocks.len() < BLOCKS {
            vec![0u8; BLOCK as usize]
        } else {
            let mut b = std::mem::take(&mut self.blocks[self.next].1);
            b.resize(BLOCK as usize, 0);
            b
        };
        let mut n = 0;
        while n < buf.len() {
            let got = self.r.read_at(base + n as u64, &mut buf[n..]);
            if got == 0 {
                break;
            }
            n += got;
        }
        buf.truncate(n);
        let i = if self.blocks.len() < BLOCKS {
            self.blocks.push((base, buf));
            self.blocks.len() - 1
        } else {
            let i = self.next;
            self.blocks[i] = (base, buf);
            self.next = (self.next + 1) % BLOCKS;
            i
        };
        &self.blocks[i].1
    }
    /// Reads exactly `out.len()` bytes at image offset `off`.
    fn read(&mut self, off: u64, out: &mut [u8]) -> bool {
        let mut done = 0usize;
        while done < out.len() {
            let o = off + done as u64;
            let base = o - o % BLOCK;
            let blk = self.block(base);
            let Some(src) = blk.get((o - base) as usize..) else {
                return false;
            };
            if src.is_empty() {
                return false;
            }
            let n = src.len().min(out.len() - done);
            out[done..done + n].copy_from_slice(&src[..n]);
            done += n;
        }
        true
    }
    /// Reads `out.len()` bytes at virtual offset `off` of the join `j`.
    fn read_joined(&mut self, j: &TwoRuns, off: u64, out: &mut [u8]) -> bool {
        if off.saturating_add(out.len() as u64) > j.len {
            return false;
        }
        let mut done = 0usize;
        while done < out.len() {
            let o = off + done as u64;
            let end = j.piece_end(o).min(off + out.len() as u64);
            let n = (end - o) as usize;
            if !self.read(j.map(o), &mut out[done..done + n]) {
                return false;
            }
            done += n;
        }
        true
    }
}

/// Candidate starts of the next fragment of `head` cut at `split`, nearest
/// first: `p + g·cl` where `p` is the image offset at which `head` would
/// continue contiguously (in order) and `q − g·cl` where `q` is where its
/// last run starts (out of order; for a single run, the header), `g = 1, 2,
/// …`, within `max_gap` and the image.
fn second_starts(head: &TwoRuns, split: u64, cl: u64, max_gap: u64, g: u64) -> [Option<u64>; 2] {
    let gap = g.saturating_mul(cl);
    if gap > max_gap {
        return [None, None];
    }
    let fwd = head
        .map(split)
        .checked_add(gap)
        .filter(|&s| s < head.r.len());
    let back = head.b().checked_sub(gap);
    [fwd, back]
}

/// Walks the (split, next start) candidates of `head` nearest first (gap
/// `g = 1, 2, …` clusters; for each, every split, in order then out of
/// order), calling `f(i, s2, b)` for split `splits[i]` until it returns an
/// answer, the gaps run out or the budget ends. A start inside the part of
/// `head` kept before the split is skipped: no cluster is taken twice.
fn nearest_first<T>(
    head: &TwoRuns,
    splits: &[u64],
    cl: u64,
    b: &mut Budget,
    mut f: impl FnMut(usize, u64, &mut Budget) -> Option<T>,
) -> Option<T> {
    let mut g = 1u64;
    while b.ok() {
        let mut any = false;
        for (i, &split) in splits.iter().enumerate() {
            for s2 in second_starts(head, split, cl, b.lim.max_gap, g)
                .into_iter()
                .flatten()
            {
                any = true;
                if head.count() > 1 && head.holds(s2, split) {
                    continue;
                }
                if !b.cand() {
                    return None;
                }
                if let Some(t) = f(i, s2, b) {
                    return Some(t);
                }
            }
        }
        if !any {
            break;
        }
        g += 1;
    }
    None
}

/// Feeds `[off, off + n)` of `r` to `f` in 64 KiB pieces; false if short.
fn for_each_piece(
    r: &dyn ByteReader,
    off: u64,
    n: u64,
    b: &mut Budget,
    mut f: impl FnMut(&[u8]) -> bool,
) -> bool {
    let mut buf = vec![0u8; n.min(64 * 1024) as usize];
    let mut done = 0u64;
    while done < n {
        let want = (n - done).min(buf.len() as u64) as usize;
        if !b.bytes(want as u64) {
            return false;
        }
        if !read_exact(r, off + done, &mut buf[..want]) {
            return false;
        }
        if !f(&buf[..want]) {
            return false;
        }
        done += want as u64;
    }
    true
}

/// True when the second fragment is the tail of another copy of the file:
/// the signature `sig` sits exactly `split` bytes before it (a contiguous
/// copy starting there), so the join would only graft that copy's body onto
/// this header.
fn tail_of_copy(r: &dyn ByteReader, j: &TwoRuns, sig: &[u8]) -> bool {
    let Some(copy) = j.b().checked_sub(j.split()) else {
        return false;
    };
    let mut buf = [0u8; 8];
    let Some(dst) = buf.get_mut(..sig.len()) else {
        return false;
    };
    copy != j.a() && read_exact(r, copy, dst) && dst == sig
}

/// The proven join `j`, `length` bytes long; `None` when two of its runs
/// overlap in the image (an out-of-order fragment running into the header's
/// cluster or into another fragment).
fn joined(j: &TwoRuns, length: u64, subtype: Option<String>, note: String) -> Option<Joined> {
    let runs = j.runs(length);
    let overlap = runs.iter().enumerate().any(|(i, &(a, n))| {
        runs[..i]
            .iter()
            .any(|&(c, m)| a < c.saturating_add(m) && c < a.saturating_add(n))
    });
    if overlap {
        return None;
    }
    Some(Joined {
        runs,
        length,
        subtype,
        notes: vec![note],
    })
}

/// Runs the registered validator over a join; `Complete` past the split → the file's length.
fn validate_join(name: &str, j: &TwoRuns, b: &mut Budget) -> Option<Verdict> {
    if !b.bytes(j.len.min(64 << 20)) {
        return None;
    }
    validators::validate(name, j, 0, Limits { max_len: j.len })
}

mod png {
    //! PNG: the chunk whose CRC breaks spans the join.
    use super::*;

    const SIG: &[u8; 8] = b"\x89PNG\r\n\x1a\n";

    fn plausible(h: &[u8; 8]) -> Option<(u64, [u8; 4])> {
        let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let ty = [h[4], h[5], h[6], h[7]];
        (len <= 0x7fff_ffff && ty.iter().all(u8::is_ascii_alphabetic))
            .then_some((u64::from(len), ty))
    }

    /// Walks the chunks of the virtual file `r`; returns the offset of the
    /// first chunk that fails (bad header, bad CRC, or past its end), or
    /// `None` for an intact PNG or no PNG.
    fn break_at(r: &TwoRuns, b: &mut Budget) -> Option<u64> {
        let max_len = r.len();
        let mut sig = [0u8; 8];
        if !read_exact(r, 0, &mut sig) || &sig != SIG {
            return None;
        }
        let mut pos = 8u64;
        for _ in 0..1_000_000 {
            let mut h = [0u8; 8];
            if pos + 8 > max_len || !read_exact(r, pos, &mut h) {
                return Some(pos);
            }
            let Some((len, ty)) = plausible(&h) else {
                return Some(pos);
            };
            let end = pos + 12 + len;
            if end > max_len {
                return Some(pos);
            }
            let mut crc = crc32fast::Hasher::new();
            crc.update(&ty);
            if !for_each_piece(r, pos + 8, len, b, |d| {
                crc.update(d);
                true
            }) {
                return None;
            }
            let mut stored = [0u8; 4];
            if !read_exact(r, pos + 8 + len, &mut stored)
                || crc.finalize() != u32::from_be_bytes(stored)
            {
                return Some(pos);
            }
            if &ty == b"IEND" {
                return None;
            }
            pos = end;
        }
        None
    }

    /// Recovers the PNG whose proven part is `head` (from its header; the
    /// last run open-ended): finds where its chunk chain breaks and the next
    /// fragment, recursively while runs are left.
    pub(super) fn recover(head: &TwoRuns, cl: u64, b: &mut Budget) -> Option<Joined> {
        let max_len = head.len();
        let pos = break_at(head, b)?;
        if pos < 33 {
            return None;
        }
        let mut h = [0u8; 8];
        let hdr = if read_exact(head, pos, &mut h) {
            plausible(&h)
        } else {
            None
        };
        let hi = match hdr {
            Some((len, _)) => (pos + 12 + len).min(max_len),
            None => (pos + 9).min(max_len),
        };
        // A breaking chunk that claims more than max_len allows cannot end in
        // any join whose split leaves its header in fragment 1: only splits
        // inside the header remain (without this, a hostile image of PNGs
        // claiming 2 GiB chunks cost max_candidates tries per PNG).
        let fits = hdr.is_some_and(|(len, _)| pos + 12 + len <= max_len);
        // Splits: cluster multiples in [pos, hi), with the CRC state of the
        // breaking chunk's bytes before each (when its header is in fragment 1).
        let mut splits: Vec<(u64, Option<crc32fast::Hasher>)> = Vec::new();
        let first = pos.div_ceil(cl) * cl;
        let mut crc = crc32fast::Hasher::new();
        let mut crc_pos = pos + 4; // bytes [pos + 4, crc_pos) are in `crc`
        let mut s = first;
        while s < hi && (splits.len() as u64) < b.lim.max_splits {
            if s <= head.split() {
                s += cl;
                continue;
            }
            let state = if s >= pos + 8 {
                if !fits {
                    break;
                }
                let n = s - crc_pos;
                let ok = for_each_piece(head, crc_pos, n, b, |d| {
                    crc.update(d);
                    true
                });
                if !ok {
                    return None;
                }
                crc_pos = s;
                Some(crc.clone())
            } else {
                None
            };
            splits.push((s, state));
            s += cl;
        }
        if splits.is_empty() {
            return None;
        }
        let mut cache = Cache::new(head.r);
        let at: Vec<u64> = splits.iter().map(|(s, _)| *s).collect();
        nearest_first(head, &at, cl, b, |i, s2, b| {
            let (split, state) = &splits[i];
            let j = head.then(*split, s2, max_len)?;
            match try_join(&j, pos, state.as_ref(), &mut cache, b)? {
                Ok(found) => Some(Some(found)),
                // The chunk across this join is proven; the file breaks
                // again further on: that search decides for the file.
                Err(note) => Some(recover(&j, cl, b).map(|mut f| {
                    f.notes.insert(0, note);
                    f
                })),
            }
        })
        .flatten()
    }

    /// `Ok`: the join proves the whole file; `Err(note)`: the chunk across
    /// the join is proven by its CRC but the file breaks again later (and
    /// `j` may take one more run).
    fn try_join(
        j: &TwoRuns,
        pos: u64,
        state: Option<&crc32fast::Hasher>,
        cache: &mut Cache,
        b: &mut Budget,
    ) -> Option<Result<Joined, String>> {
        let mut h = [0u8; 8];
        if !cache.read_joined(j, pos, &mut h) {
            return None;
        }
        let (len, ty) = plausible(&h)?;
        let end = pos + 12 + len;
        if &ty != b"IEND" && !cache.read_joined(j, end, &mut h) {
            return None;
        }
        if &ty != b"IEND" {
            plausible(&h)?;
        }
        // CRC of the chunk across the join.
        let mut stored = [0u8; 4];
        if !cache.read_joined(j, pos + 8 + len, &mut stored) {
            return None;
        }
        let data_end = pos + 8 + len;
        let crc = match state {
            Some(st) if j.split() <= data_end => {
                let mut c = st.clone();
                let ok = for_each_piece(j.r, j.b(), data_end - j.split(), b, |d| {
                    c.update(d);
                    true
                });
                ok.then(|| c.finalize())?
            }
            _ => {
                let mut c = crc32fast::Hasher::new();
                let ok = for_each_piece(j, pos + 4, len + 4, b, |d| {
                    c.update(d);
                    true
                });
                ok.then(|| c.finalize())?
            }
        };
        if crc != u32::from_be_bytes(stored) || tail_of_copy(j.r, j, SIG) {
            return None;
        }
        let v = validate_join("png", j, b)?;
        if v.status != Status::Complete || v.length <= j.split() {
            return (j.count() < MAX_RUNS).then(|| {
                Err(format!(
                    "fragment {} proven by the CRC of the PNG chunk at {pos} across its start; split at {}, fragment at {}",
                    j.count(),
                    j.split(),
                    j.b()
                ))
            });
        }
        let kind = if j.count() == 2 {
            "bifragment"
        } else {
            "multi-fragment"
        };
        let note = format!(
            "{kind} join proven by PNG chunk CRCs (chunk at {pos} spans the join) and a complete chunk walk; split at {}, second fragment at {}",
            j.split(),
            j.b()
        );
        joined(j, v.length, v.subtype, note).map(Ok)
    }
}

mod jpeg {
    //! JPEG: no checksum; the entropy decode across the join is the proof.
    use std::collections::HashMap;

    use super::validators::jpeg::{self as vj, Damage, Snap};
    use super::validators::read::Src;
    use super::*;

    const SOI: &[u8; 3] = &[0xFF, 0xD8, 0xFF];
    /// Bytes decoded past the split by the cheap test of a candidate.
    const PROBE: u64 = 32 << 10;
    /// Most split points tried (nearest the failure first; in practice the
    /// one-cluster rule in [`recover`] leaves one or two). Foreign data that
    /// decodes for clusters on end is entropy data coded with the same tables
    /// (another copy of the picture, or one from the same camera): a join
    /// found further back would be a guess, not a proof.
    const MAX_SPLITS: u64 = 3;
    /// Most bytes decoded by all the tests of one file.
    const MAX_DECODED: u64 = 64 << 20;
    /// Shortest second fragment accepted: a few hundred bytes ending in EOI
    /// (the last cluster of any picture coded with the same tables) match
    /// the missing MCU count by chance too often to prove anything.
    const MIN_TAIL: u64 = 2048;
    /// Bytes looked back for the header of a JPEG owning a candidate.
    const MAX_BACK: u64 = 8 << 20;
    /// Longest stretch of another JPEG validated to see whether it owns a candidate.
    const MAX_OWNER: u64 = 64 << 20;
    /// Most other JPEGs validated by one search.
    const MAX_OWNERS: u64 = 256;
    /// Bytes the decoder may hold beyond where it failed ([`Damage::fail_at`]).
    const SLACK: u64 = 16;
    /// Least decoded past a split for a join to count as a proven crossing
    /// (the file breaks again later) when noise before the candidate may
    /// reach less far.
    const MIN_CROSS: u64 = 8 << 10;
    /// Most proven crossings kept per search, followed (nearest first) when
    /// no join proves the whole file.
    const MAX_CROSSINGS: usize = 2;
    /// Least (candidates, bytes) allowed to the searches after crossings.
    const CROSS_FLOOR: (u64, u64) = (32 << 10, 8 << 20);
    /// Bytes of a candidate second fragment examined by [`entropy_like`].
    const LOOK: u64 = 4096;

    /// The validator over `j`, with where it broke. With a snapshot of the
    /// head taken for `j`'s split, the bytes before the split are not decoded
    /// again. Charges the budget the bytes the validator got through (the
    /// window is usually far larger than the file).
    fn check(j: &TwoRuns, snap: Option<&Snap>, b: &mut Budget) -> Option<(Verdict, Damage)> {
        if !b.ok() {
            return None;
        }
        let mut d = Damage::default();
        let src = Src::new(j, 0, Limits { max_len: j.len });
        let (v, from) = match snap {
            Some(sn) if sn.split() == j.split() => (vj::validate_resume(src, &mut d, sn), sn.at()),
            _ => (vj::validate_probe(src, &mut d), 0),
        };
        let used = v
            .as_ref()
            .map_or(0, |v| v.length)
            .max(d.fail_at)
            .min(j.len)
            .saturating_sub(from);
        if !b.bytes(used.max(1)) {
            return None;
        }
        Some((v?, d))
    }

    /// True when the `n` bytes (512 to [`LOOK`]) at `s2` could continue
    /// entropy-coded data: every `FF` is stuffing, a restart marker, fill,
    /// EOI (the file ends: stop looking) or a marker that may sit between the
    /// scans of a progressive file; no run of 64 equal bytes (zeroed or
    /// unwritten space: checked as no 32-byte aligned chunk of one value); at
    /// least one byte in 16 with its top bit set (not text), and at least 2 of
    /// the first 64.
    fn entropy_like(cache: &mut Cache, buf: &mut [u8; LOOK as usize], s2: u64, n: u64) -> bool {
        // Zeros and text fail on their first 64 bytes, most other foreign
        // data in its first 512: look at those first.
        let Some(head) = buf.get_mut(..64) else {
            return false;
        };
        if !cache.read(s2, head) || head.iter().filter(|&&x| x >= 0x80).count() < 2 {
            return false;
        }
        (n <= 512 || ff_ok(cache, buf, s2)) && scan_like(cache, buf, s2, n)
    }

    /// The `FF` rule of [`entropy_like`]: `None` when an `FF` is followed by
    /// anything entropy-coded data cannot hold, else how many bytes count
    /// (up to an EOI, or all).
    fn ff_rule(buf: &[u8]) -> Option<usize> {
        for i in memchr::memchr_iter(0xFF, buf) {
            match buf.get(i + 1) {
                Some(0x00 | 0xD0..=0xD7 | 0xFF | 0xC4 | 0xDA | 0xDB | 0xDD) | None => {}
                Some(0xD9) => return Some(i + 2),
                Some(_) => return None,
            }
        }
        Some(buf.len())
    }

    /// [`ff_rule`] on the first 512 bytes at `s2`.
    fn ff_ok(cache: &mut Cache, buf: &mut [u8; LOOK as usize], s2: u64) -> bool {
        match buf.get_mut(..512) {
            Some(b) => cache.read(s2, b) && ff_rule(b).is_some(),
            None => false,
        }
    }

    fn scan_like(cache: &mut Cache, buf: &mut [u8; LOOK as usize], s2: u64, n: u64) -> bool {
        let n = n.clamp(512, LOOK) as usize;
        let Some(buf) = buf.get_mut(..n) else {
            return false;
        };
        if !cache.read(s2, buf) {
            return false;
        }
        let Some(body) = ff_rule(buf).and_then(|seen| buf.get(..seen)) else {
            return false;
        };
        // A run of 64 equal bytes holds an aligned 32-byte chunk of one value.
        if body.chunks_exact(32).any(|c| c.iter().all(|&x| x == c[0])) {
            return false;
        }
        let high = body.iter().filter(|&&x| x >= 0x80).count();
        body.len() >= 16 && high * 16 >= body.len()
    }

    /// Cluster-aligned JPEG headers (`FF D8 FF` and a segment marker) in the
    /// part of the image looked at so far (`[lo, hi)`, searched with memmem
    /// in 1 MiB pieces); positions `≡ phase (mod cl)` count.
    struct Heads {
        /// Owner validations done by this search.
        validated: u64,
        phase: u64,
        cl: u64,
        lo: u64,
        hi: u64,
        at: std::collections::BTreeSet<u64>,
        buf: Vec<u8>,
    }

    /// Bytes searched for headers per read.
    const HEAD_PIECE: u64 = 1 << 20;

    impl Heads {
        fn new(phase: u64, cl: u64) -> Self {
            Heads {
                validated: 0,
                phase: phase % cl,
                cl,
                lo: phase,
                hi: phase,
                at: Default::default(),
                buf: Vec::new(),
            }
        }
        /// Searches `[from, to)` of the image for headers.
        fn search(&mut self, r: &dyn ByteReader, from: u64, to: u64) {
            let finder = memchr::memmem::Finder::new(SOI);
            let mut buf = std::mem::take(&mut self.buf);
            // Each piece reads 4 bytes more: a header starting in it is seen whole.
            buf.resize((HEAD_PIECE + 4) as usize, 0);
            let mut pos = from;
            while pos < to {
                let span = (to - pos).min(HEAD_PIECE);
                let want = (span + 4) as usize;
                let got = r.read_at(pos, &mut buf[..want]).min(want);
                for i in finder.find_iter(&buf[..got]) {
                    let p = pos + i as u64;
                    let marker = buf.get(i + 3).copied().unwrap_or(0);
                    if (i as u64) < span
                        && p % self.cl == self.phase
                        && (0xC0..=0xFE).contains(&marker)
                    {
                        self.at.insert(p);
                    }
                }
                if got < want {
                    break;
                }
                pos += span;
            }
            self.buf = buf;
        }
        /// Makes `[from, to)` looked at; returns the headers in it, nearest `to` first.
        fn before(&mut self, r: &dyn ByteReader, from: u64, to: u64) -> Vec<u64> {
            // Grow a piece at a time, not a cluster at a time.
            if from < self.lo {
                let lo = self.lo;
                let new_lo = from.min(lo.saturating_sub(HEAD_PIECE));
                self.search(r, new_lo, lo);
                self.lo = new_lo;
            }
            if to > self.hi {
                let hi = self.hi.max(self.lo);
                let new_hi = to.max(hi.saturating_add(HEAD_PIECE));
                self.search(r, hi, new_hi);
                self.hi = new_hi;
            }
            self.at.range(from..to).rev().take(4).copied().collect()
        }
    }

    /// True when `s2` lies inside another JPEG stored contiguously: one of
    /// the four nearest cluster-aligned JPEG headers before it (at most
    /// [`MAX_BACK`] bytes back) validates, complete or not, past `s2`.
    /// Validated extents are remembered in the claims (header → length).
    fn owned(r: &dyn ByteReader, heads: &mut Heads, start: u64, s2: u64, b: &mut Budget) -> bool {
        let from = s2.saturating_sub(MAX_BACK);
        let marker = |m: u8| (0xC0..=0xFE).contains(&m);
        let near: Vec<u64> =
            if b.claims
                .sois
                .cover(r, (SOI, heads.cl, heads.phase), marker, from, s2)
            {
                b.claims
                    .sois
                    .range(from, s2)
                    .rev()
                    .take(4)
                    .copied()
                    .collect()
            } else {
                heads.before(r, from, s2)
            };
        for p in near {
            if p == start {
                return false;
            }
            let known = b
                .claims
                .jpeg_heads
                .get(&p)
                .copied()
                .or_else(|| b.claims.known.as_ref().and_then(|k| k.get(p)));
            let len = match known {
                Some(l) => l,
                None => {
                    // Whole validations, once per header per carving; not
                    // counted against the candidate budget but capped in number.
                    if heads.validated >= MAX_OWNERS {
                        return false;
                    }
                    heads.validated += 1;
                    let w = TwoRuns::new(r, p, MAX_OWNER, p, MAX_OWNER);
                    let mut d = Damage::default();
                    let l = vj::validate_probe(Src::new(&w, 0, Limits { max_len: w.len }), &mut d)
                        .map_or(0, |v| v.length);
                    b.claims.jpeg_heads.insert(p, l);
                    l
                }
            };
            if p + len > s2 {
                return true;
            }
        }
        false
    }

    /// Recovers the JPEG whose proven part is `head` (from its header; the
    /// last run open-ended), recursively while runs are left.
    pub(super) fn recover(head: &TwoRuns, max_len: u64, cl: u64, b: &mut Budget) -> Option<Joined> {
        let (r, start, whole) = (head.r, head.a(), *head);
        let (v, d) = check(&whole, None, b)?;
        if v.status != Status::Partial || !d.damaged || v.length < 2 {
            return None;
        }
        // The split lies at or before the point where decoding failed, and
        // within a cluster of it: foreign data that decodes for longer is
        // coded with the same tables, and the split cannot be placed.
        let top = d.fail_at.min(max_len) / cl * cl;
        let lowest = d.fail_at.saturating_sub(cl + SLACK);
        let splits: Vec<u64> = (0..MAX_SPLITS.min(b.lim.max_splits))
            .map_while(|k| {
                top.checked_sub(k * cl)
                    .filter(|&s| s >= cl && s >= lowest && s > head.split())
            })
            .collect();
        if splits.is_empty() {
            return None;
        }
        // The head's decoder state at each split, so that a candidate costs
        // a decode of what follows the split only.
        let mut snaps: HashMap<u64, Option<Snap>> = HashMap::new();
        for &split in &splits {
            let mut d = Damage::default();
            let src = Src::new(&whole, 0, Limits { max_len: whole.len });
            let (_, sn) = vj::validate_capture(src, &mut d, split);
            if !b.bytes(split) {
                return None;
            }
            snaps.insert(split, sn);
        }
        let lim = b.lim.max_bytes.min(MAX_DECODED);
        let mut cache = Cache::new(r);
        let mut look = [0u8; LOOK as usize];
        let mut heads = Heads::new(start, cl);
        let mut crossings: Vec<(TwoRuns, String)> = Vec::new();
        let found = nearest_first(head, &splits, cl, b, |i, s2, b| {
            let split = splits[i];
            if b.claims.covers(s2) || b.claims.starts_within(head.b(), head.map(split)) {
                return None;
            }
            let good = *b
                .claims
                .entropy
                .entry((s2, LOOK))
                .or_insert_with(|| entropy_like(&mut cache, &mut look, s2, LOOK));
            if !good || owned(r, &mut heads, start, s2, b) {
                return None;
            }
            // A fragment starts where the data before it is not the same
            // kind of stream, unless that data is another JPEG's, ending
            // there: the middle of a run of entropy data owned by no one is
            // not a start. At least [`LOOK`] bytes: a few hundred random
            // bytes pass for entropy data too often.
            if let Some(before) = s2.checked_sub(cl) {
                let n = cl.max(LOOK).min(s2);
                let like = *b
                    .claims
                    .entropy
                    .entry((s2 - n, n))
                    .or_insert_with(|| entropy_like(&mut cache, &mut look, s2 - n, n));
                if like && !owned(r, &mut heads, start, before, b) {
                    return None;
                }
            }
            if b.bytes > lim {
                b.exhausted = true;
                return None;
            }
            let snap = snaps.get(&split).and_then(Option::as_ref);
            match try_join(head, (split, s2, cl), max_len, snap, b)? {
                Ok(found) => Some(found),
                Err(c) => {
                    if crossings.len() < MAX_CROSSINGS {
                        crossings.push(c);
                    }
                    None
                }
            }
        });
        if found.is_some() {
            return found;
        }
        // No join proves the whole file: the file may break again after a
        // proven crossing (the decode is weaker evidence than a checksum,
        // so the search above went on past the crossings it found). Those
        // searches share an allowance of half what this one spent (at least
        // [`CROSS_FLOOR`]), so that a file in k fragments costs a bounded
        // multiple of a bifragment search, not k of them.
        if !crossings.is_empty() {
            let cands = b.cands.saturating_add((b.cands / 2).max(CROSS_FLOOR.0));
            let bytes = b.bytes.saturating_add((b.bytes / 2).max(CROSS_FLOOR.1));
            b.lim.max_candidates = b.lim.max_candidates.min(cands);
            b.lim.max_bytes = b.lim.max_bytes.min(bytes);
        }
        for (j, note) in crossings {
            if !b.ok() {
                break;
            }
            if let Some(mut f) = recover(&j, max_len, cl, b) {
                f.notes.insert(0, note);
                return Some(f);
            }
        }
        None
    }

    /// `Ok`: the join proves the whole file; `Err((join, note))`: the decode
    /// runs valid across the join well past where noise before the candidate
    /// may reach (see the test of the cluster before it) but fails again
    /// later, and the join may take one more run.
    #[allow(clippy::type_complexity)]
    fn try_join<'a>(
        head: &TwoRuns<'a>,
        (split, s2, cl): (u64, u64, u64),
        max_len: u64,
        snap: Option<&Snap>,
        b: &mut Budget,
    ) -> Option<Result<Joined, (TwoRuns<'a>, String)>> {
        let r = head.r;
        // Where the decode of a candidate's join must still be valid for
        // the crossing to count when the file breaks again: beyond what
        // the cluster before the candidate is allowed to decode (below).
        let noise_reach = split + cl + cl.max(1024) + SLACK;
        let more = head.count() + 2 <= MAX_RUNS;
        let crosses =
            |d: &Damage| more && d.damaged && d.fail_at > noise_reach.max(split + MIN_CROSS);
        // Cheap test: decode a little past the split.
        let probe = head.then(split, s2, split.saturating_add(PROBE).min(max_len))?;
        let (v, d) = check(&probe, snap, b)?;
        let mut crossing = crosses(&d);
        if (d.damaged && !crossing) || (v.status == Status::Complete && v.length <= split) {
            return None;
        }
        let j = head.then(split, s2, max_len)?;
        if tail_of_copy(r, &j, SOI) {
            return None;
        }
        // The second fragment must start at s2: what lies before it in the
        // image must not decode as a continuation of the head either (else
        // s2 is inside a run of entropy data coded with the same tables,
        // such as another copy of the picture, and the MCU count alone
        // cannot tell which cluster the file goes on with).
        let before = s2.checked_sub(cl)?;
        let probe = head.then(split, before, split.saturating_add(cl + PROBE).min(max_len))?;
        match check(&probe, snap, b) {
            // Noise before s2 may decode a little way into the real tail
            // before the decoder notices: allow one more cluster (1 KiB at least).
            Some((_, d)) if d.damaged && d.fail_at <= noise_reach => {}
            Some(_) => return None,
            None => {
                if !b.ok() {
                    return None;
                }
            }
        }
        let mut v = None;
        if !crossing {
            let (full, d) = check(&j, snap, b)?;
            crossing = full.status != Status::Complete && crosses(&d);
            v = Some(full);
        }
        if crossing {
            let note = format!(
                "fragment {} proven by a JPEG entropy decode valid across its start for more than two clusters; split at {split}, fragment at {s2}",
                j.count()
            );
            return Some(Err((j, note)));
        }
        let v = v?;
        if v.status != Status::Complete || v.length < split.saturating_add(MIN_TAIL) {
            return None;
        }
        // Some scans take any bits at a fixed number of blocks per byte (DC
        // refinement): a cluster of foreign data in place of one of the
        // file's own then decodes as well. Every boundary must be placed: the
        // same file with a boundary one cluster earlier or later must fail.
        // (Not charged to the search's budget, spent by then: at most two
        // decodes per boundary of the one join accepted.)
        for i in 1..j.count() {
            for back in [true, false] {
                let Some(alt) = j.nudged(i, back, cl) else {
                    continue;
                };
                let mut d = Damage::default();
                let src = Src::new(&alt, 0, Limits { max_len: alt.len });
                if vj::validate_probe(src, &mut d).is_some_and(|w| w.status == Status::Complete) {
                    return None;
                }
            }
        }
        let scans = if v.notes.iter().any(|n| n.contains("progressive")) {
            " in every scan"
        } else {
            ""
        };
        let kind = if j.count() == 2 {
            "bifragment"
        } else {
            "multi-fragment"
        };
        let note = format!(
            "{kind} join proven by a JPEG entropy decode across the join (every Huffman code valid, the exact MCU count{scans}, EOI after the last MCU); split at {split}, second fragment at {s2}"
        );
        joined(&j, v.length, v.subtype, note).map(Ok)
    }
}

mod zip {
    //! ZIP: the EOCD fixes the gap; central-directory offsets and CRCs prove the split.
    use super::*;

    const LFH: &[u8; 4] = b"PK\x03\x04";
    const CDH: &[u8; 4] = b"PK\x01\x02";
    const EOCD: &[u8; 4] = b"PK\x05\x06";
    /// Most EOCD records considered per file.
    const MAX_EOCDS: usize = 64;
    /// Most splits tried for a crossing entry.
    const MAX_CROSS_SPLITS: u64 = 4;
    /// Most bytes of second fragment searched for its EOCD beyond the gap.
    const MAX_TAIL: u64 = 64 << 20;

    fn le16(b: &[u8], i: usize) -> u64 {
        u64::from(u16::from_le_bytes([b[i], b[i + 1]]))
    }
    fn le32(b: &[u8], i: usize) -> u64 {
        u64::from(u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]))
    }

    /// The local-header walk: `(last good local header, break offset)`, or
    /// `None` when the walk reaches the central directory (not fragmented
    /// in the entries) or is not a ZIP.
    fn break_at(r: &TwoRuns, b: &mut Budget) -> Option<(u64, u64)> {
        let max_len = r.len();
        let mut pos = 0u64;
        let mut last: Option<u64> = None;
        for _ in 0..65_536 {
            let mut h = [0u8; 30];
            if pos + 30 > max_len || !read_exact(r, pos, &mut h) {
                return last.map(|l| (l, pos.min(max_len)));
            }
            if &h[..4] == CDH {
                return cd_break(r, pos);
            }
            if &h[..4] != LFH {
                return last.map(|l| (l, pos));
            }
            let flags = le16(&h, 6);
            let method = le16(&h, 8);
            let csize = le32(&h, 18);
            let data = pos + 30 + le16(&h, 26) + le16(&h, 28);
            let end = if flags & 8 != 0 && csize == 0 {
                if method != 8 {
                    return None;
                }
                // Inflate to find the end; an error means the split is before it.
                match inflate(r, data, max_len - data.min(max_len), u64::MAX, b) {
                    Inflate::Ok { consumed, .. } => {
                        let mut sig = [0u8; 4];
                        let dd =
                            if read_exact(r, data + consumed, &mut sig) && &sig == b"PK\x07\x08" {
                                16
                            } else {
                                12
                            };
                        data + consumed + dd
                    }
                    Inflate::Err { at } => return Some((pos, data + at)),
                    Inflate::Budget => return None,
                }
            } else {
                data + csize + if flags & 8 != 0 { 12 } else { 0 }
            };
            if end > max_len {
                return Some((pos, max_len));
            }
            last = Some(pos);
            pos = end;
        }
        None
    }

    /// The central-directory walk from `pos`: `None` when it reaches the
    /// EOCD intact, else `(last good central header, break offset)`.
    fn cd_break(r: &TwoRuns, mut pos: u64) -> Option<(u64, u64)> {
        let max_len = r.len();
        let mut last = None;
        for _ in 0..65_536 {
            let mut h = [0u8; 46];
            let ok = pos + 46 <= max_len && read_exact(r, pos, &mut h);
            if ok && &h[..4] == EOCD {
                return None;
            }
            if !ok || &h[..4] != CDH {
                return last.map(|l| (l, pos.min(max_len)));
            }
            last = Some(pos);
            pos += 46 + le16(&h, 28) + le16(&h, 30) + le16(&h, 32);
        }
        None
    }

    pub(super) enum Inflate {
        /// Stream ended: bytes consumed, bytes produced, CRC-32 of the output.
        Ok {
            consumed: u64,
            out: u64,
            crc: u32,
        },
        /// Invalid data at about this input offset (relative to the data start).
        Err {
            at: u64,
        },
        Budget,
    }

    /// Inflates raw deflate data at `off` of `r` (at most `max_in` bytes in,
    /// `max_out` out); fixed buffers.
    pub(super) fn inflate(
        r: &dyn ByteReader,
        off: u64,
        max_in: u64,
        max_out: u64,
        b: &mut Budget,
    ) -> Inflate {
        let mut d = flate2::Decompress::new(false);
        let mut inbuf = vec![0u8; 64 * 1024];
        let mut outbuf = vec![0u8; 64 * 1024];
        let mut crc = crc32fast::Hasher::new();
        let mut fed = 0u64; // bytes read into inbuf so far (absolute count)
        let mut have = 0usize; // valid bytes in inbuf
        let mut used = 0usize; // bytes of inbuf consumed
        loop {
            if used == have {
                let want = (max_in - fed).min(inbuf.len() as u64) as usize;
                if !b.bytes(want as u64) {
                    return Inflate::Budget;
                }
                have = r.read_at(off + fed, &mut inbuf[..want]).min(want);
                used = 0;
                fed += have as u64;
            }
            let before_in = d.total_in();
            let before_out = d.total_out();
            let res = d.decompress(
                &inbuf[used..have],
                &mut outbuf,
                flate2::FlushDecompress::None,
            );
            let ate = (d.total_in() - before_in) as usize;
            let made = (d.total_out() - before_out) as usize;
            used += ate;
            crc.update(&outbuf[..made]);
            if d.total_out() > max_out {
                return Inflate::Err { at: d.total_in() };
            }
            match res {
                Ok(flate2::Status::StreamEnd) => {
                    return Inflate::Ok {
                        consumed: d.total_in(),
                        out: d.total_out(),
                        crc: crc.finalize(),
                    };
                }
                Ok(_) => {
                    if ate == 0 && made == 0 {
                        // No progress: the input is exhausted (or stuck).
                        return Inflate::Err { at: d.total_in() };
                    }
                }
                Err(_) => return Inflate::Err { at: d.total_in() },
            }
        }
    }

    /// EOCD records in `[from, to)` of the image (at most [`MAX_EOCDS`]),
    /// nearest `from` first, or nearest `to` first with `backwards`; from the
    /// shared index, else read here (charged to the budget).
    fn eocds(
        r: &dyn ByteReader,
        (from, to): (u64, u64),
        backwards: bool,
        b: &mut Budget,
        out: &mut Vec<u64>,
    ) {
        let any = |_: u8| true;
        if b.claims.eocds.cover(r, (EOCD, 1, 0), any, from, to) {
            let found = b.claims.eocds.range(from, to);
            if backwards {
                out.extend(found.rev().take(MAX_EOCDS));
            } else {
                out.extend(found.take(MAX_EOCDS));
            }
            return;
        }
        let mut all = Vec::new();
        let finder = memchr::memmem::Finder::new(EOCD);
        let mut buf = vec![0u8; 1 << 20];
        let mut pos = from;
        while pos < to && (backwards || all.len() < MAX_EOCDS) {
            let want = (to - pos).min(buf.len() as u64) as usize;
            if !b.bytes(want as u64) {
                break;
            }
            let got = r.read_at(pos, &mut buf[..want]).min(want);
            if got < 4 {
                break;
            }
            all.extend(finder.find_iter(&buf[..got]).map(|i| pos + i as u64));
            if got < want {
                break;
            }
            pos += got as u64 - 3;
        }
        if backwards {
            out.extend(all.into_iter().rev().take(MAX_EOCDS));
        } else {
            out.extend(all.into_iter().take(MAX_EOCDS));
        }
    }

    /// Recovers the archive whose proven part is `head` (from its first
    /// local header; the last run open-ended): the EOCD fixes the last
    /// fragment; else a fragment whose crossing entry's CRC is proven heads
    /// the next search, while runs are left.
    pub(super) fn recover(head: &TwoRuns, cl: u64, b: &mut Budget) -> Option<Joined> {
        let (r, start, max_len) = (head.r, head.a(), head.len());
        let (last, brk) = break_at(head, b)?;
        let first = ((last + 1).div_ceil(cl) * cl).max((head.split() / cl + 1) * cl);
        let splits: Vec<u64> = (0..b.lim.max_splits)
            .map(|k| first + k * cl)
            .take_while(|&s| s <= brk)
            .collect();
        if splits.is_empty() {
            return None;
        }
        // EOCD candidates: after the break (in order), before the header (out of order).
        let mut found = Vec::new();
        // The EOCD lies within max_gap plus the rest of the file (bounded) after the break.
        // (Image offsets from where the last run holds `last` on.)
        let here = head.map(last.max(head.split()));
        let fwd_to = here
            .saturating_add(brk - last.max(head.split()).min(brk))
            .saturating_add(b.lim.max_gap)
            .saturating_add(MAX_TAIL)
            .min(
                here.saturating_add(max_len - last.max(head.split()).min(max_len))
                    .saturating_add(b.lim.max_gap),
            )
            .min(r.len());
        eocds(r, (here, fwd_to), false, b, &mut found);
        let back_from = head.b().saturating_sub(b.lim.max_gap);
        eocds(r, (back_from, head.b()), true, b, &mut found);
        let mut cache = Cache::new(r);
        for e in found {
            let mut rec = [0u8; 22];
            if !cache.read(e, &mut rec) {
                continue;
            }
            let (disk, cd_disk) = (le16(&rec, 4), le16(&rec, 6));
            let (n_disk, n) = (le16(&rec, 8), le16(&rec, 10));
            let (cd_size, cd_off, clen) = (le32(&rec, 12), le32(&rec, 16), le16(&rec, 20));
            if disk != 0 || cd_disk != 0 || n_disk != n || n == 0 || cd_size < 46 * n {
                continue;
            }
            let cd_end = cd_off + cd_size;
            let total = cd_end + 22 + clen;
            if cd_end <= last || total > max_len || e + 22 + clen > r.len() {
                continue;
            }
            // The last run reads virtual offset v at image v + D (e = cd_end + D).
            let d = i128::from(e) - i128::from(cd_end);
            if (d - i128::from(start)) % i128::from(cl) != 0 {
                continue;
            }
            if head.count() == 1
                && d > i128::from(start) - i128::from(total)
                && d <= i128::from(start)
            {
                continue;
            }
            for &split in &splits {
                if split > cd_end {
                    break;
                }
                if !b.cand() {
                    return None;
                }
                let Ok(s2) = u64::try_from(i128::from(split) + d) else {
                    continue;
                };
                if s2 == head.map(split) || head.holds(s2, split) {
                    continue;
                }
                let Some(j) = head.then(split, s2, total) else {
                    continue;
                };
                if j.len != total {
                    continue;
                }
                if let Some(found) = verify(&j, n, cd_off, cd_end, &mut cache, b) {
                    return Some(found);
                }
            }
        }
        if head.count() + 2 > MAX_RUNS || !b.ok() {
            return None;
        }
        cross(head, last, cl, &mut cache, b)
    }

    /// The entry whose local header is at `last` runs into foreign data:
    /// tries the next fragment nearest first, for splits at most
    /// [`MAX_CROSS_SPLITS`] clusters below where its data stops inflating
    /// (or anywhere in a short stored entry). A candidate is a proven
    /// crossing when a local or central header follows the entry's data
    /// exactly and the entry's CRC-32 (from its local header) matches; the
    /// search then goes on from that join.
    fn cross(
        head: &TwoRuns,
        last: u64,
        cl: u64,
        cache: &mut Cache,
        b: &mut Budget,
    ) -> Option<Joined> {
        let mut h = [0u8; 30];
        if !read_exact(head, last, &mut h) || &h[..4] != LFH {
            return None;
        }
        let (flags, method) = (le16(&h, 6), le16(&h, 8));
        if flags & 9 != 0 || !matches!(method, 0 | 8) {
            return None;
        }
        let data = last + 30 + le16(&h, 26) + le16(&h, 28);
        let e = Entry {
            method,
            crc: le32(&h, 14) as u32,
            csize: le32(&h, 18),
            usize: le32(&h, 22),
            data,
        };
        let end = data + e.csize;
        let low = data.max(head.split()) / cl + 1;
        let fail = if method == 8 {
            match inflate(head, data, e.csize, e.usize, b) {
                Inflate::Err { at } => data + at,
                _ => return None,
            }
        } else {
            end
        };
        let top = fail.min(end.saturating_sub(1)) / cl;
        if top < low || (method == 0 && top - low >= MAX_CROSS_SPLITS) {
            return None;
        }
        let splits: Vec<u64> = (top.saturating_sub(MAX_CROSS_SPLITS - 1).max(low)..=top)
            .rev()
            .map(|k| k * cl)
            .collect();
        let max_len = head.len();
        let found = nearest_first(head, &splits, cl, b, |i, s2, b| {
            let j = head.then(splits[i], s2, max_len)?;
            let mut sig = [0u8; 4];
            if !cache.read_joined(&j, end, &mut sig) || (&sig != LFH && &sig != CDH) {
                return None;
            }
            if crc_ok(&j, &e, b) != Some(true) {
                return None;
            }
            let note = format!(
                "fragment {} proven by the CRC-32 of the ZIP entry at {last} across its start and the header after it; split at {}, fragment at {s2}",
                j.count(),
                j.split()
            );
            Some((j, note))
        });
        let (j, note) = found?;
        let mut f = recover(&j, cl, b)?;
        f.notes.insert(0, note);
        Some(f)
    }

    struct Entry {
        method: u64,
        crc: u32,
        csize: u64,
        usize: u64,
        data: u64,
    }

    /// Checks the joined archive; `Some` when the join is proven.
    fn verify(
        j: &TwoRuns,
        n: u64,
        cd_off: u64,
        cd_end: u64,
        cache: &mut Cache,
        b: &mut Budget,
    ) -> Option<Joined> {
        let mut entries = Vec::new();
        let mut p = cd_off;
        for _ in 0..n {
            let mut h = [0u8; 46];
            if !cache.read_joined(j, p, &mut h) || &h[..4] != CDH {
                return None;
            }
            let flags = le16(&h, 8);
            let method = le16(&h, 10);
            let crc = le32(&h, 16) as u32;
            let (csize, usize) = (le32(&h, 20), le32(&h, 24));
            let (nl, xl, cl) = (le16(&h, 28), le16(&h, 30), le16(&h, 32));
            let local = le32(&h, 42);
            if local >= cd_off || flags & 1 != 0 {
                return None;
            }
            let mut lh = [0u8; 30];
            if !cache.read_joined(j, local, &mut lh) || &lh[..4] != LFH || le16(&lh, 26) != nl {
                return None;
            }
            // Names equal (first 256 bytes).
            let k = nl.min(256) as usize;
            let (mut n1, mut n2) = ([0u8; 256], [0u8; 256]);
            if !cache.read_joined(j, p + 46, &mut n1[..k])
                || !cache.read_joined(j, local + 30, &mut n2[..k])
                || n1[..k] != n2[..k]
            {
                return None;
            }
            let data = local + 30 + nl + le16(&lh, 28);
            if data + csize > cd_off {
                return None;
            }
            entries.push(Entry {
                method,
                crc,
                csize,
                usize,
                data,
            });
            p += 46 + nl + xl + cl;
        }
        if p != cd_end || tail_of_copy(j.r, j, LFH) {
            return None;
        }
        // The entry spanning the split must be checked; then the others.
        let spans = |e: &Entry| {
            (1..j.count()).any(|i| {
                let s = j.at[i].0;
                e.data < s && s < e.data + e.csize
            })
        };
        let mut spanning = 0;
        for e in entries.iter().filter(|e| spans(e)) {
            if !crc_ok(j, e, b)? {
                return None;
            }
            spanning += 1;
        }
        let mut checked = spanning;
        for e in entries.iter().filter(|e| !spans(e)) {
            if !b.ok() {
                break;
            }
            match crc_ok(j, e, b) {
                Some(true) => checked += 1,
                Some(false) => return None,
                None if !b.ok() => break,
                None => {}
            }
        }
        let v = validate_join("zip", j, b);
        let subtype = match v {
            Some(v) if v.status == Status::Complete && v.length == j.len => v.subtype,
            Some(_) => return None,
            None => None,
        };
        let kind = if j.count() == 2 {
            "bifragment"
        } else {
            "multi-fragment"
        };
        let note = format!(
            "{kind} join proven by ZIP central directory offsets ({n} entries land on their local headers) and {checked} entry CRC-32s; split at {}, second fragment at {}",
            j.split(),
            j.b()
        );
        joined(j, j.len, subtype, note)
    }

    /// CRC check of one entry: `Some(ok)`, or `None` when it cannot be checked
    /// (other method, budget).
    fn crc_ok(j: &TwoRuns, e: &Entry, b: &mut Budget) -> Option<bool> {
        match e.method {
            0 => {
                if e.csize != e.usize {
                    return Some(false);
                }
                let mut c = crc32fast::Hasher::new();
                let ok = for_each_piece(j, e.data, e.csize, b, |d| {
                    c.update(d);
                    true
                });
                if !ok {
                    return if b.ok() { Some(false) } else { None };
                }
                Some(c.finalize() == e.crc)
            }
            8 => match inflate(j, e.data, e.csize, e.usize, b) {
                Inflate::Ok { consumed, out, crc } => {
                    Some(consumed == e.csize && out == e.usize && crc == e.crc)
                }
                Inflate::Err { .. } => Some(false),
                Inflate::Budget => None,
            },
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_estimate() {
        let starts: Vec<u64> = (1..20).map(|i| i * 4096).chain([512 * 3]).collect();
        assert_eq!(estimate_cluster(&starts, 8192), 4096);
        assert_eq!(estimate_cluster(&starts[..2], 8192), 512);
        // Data area not aligned: phase 1024 modulo 4096.
        let starts: Vec<u64> = (1..20).map(|i| i * 4096 + 1024).collect();
        assert_eq!(estimate_cluster(&starts, 5 * 4096 + 1024), 4096);
    }

    #[test]
    fn two_runs_reads_across_the_join() {
        let img: Vec<u8> = (0..100u8).collect();
        let j = TwoRuns::new(&img, 10, 5, 50, 12);
        let mut buf = [0u8; 12];
        assert_eq!(j.read_at(0, &mut buf), 12);
        assert_eq!(buf, [10, 11, 12, 13, 14, 50, 51, 52, 53, 54, 55, 56]);
        let mut c = Cache::new(&img);
        let mut b2 = [0u8; 4];
        assert!(c.read_joined(&j, 3, &mut b2));
        assert_eq!(b2, [13, 14, 50, 51]);
        assert!(!c.read_joined(&j, 10, &mut b2));
        // Out of order: the second piece ends at the header.
        let j = TwoRuns::new(&img, 50, 5, 40, 1000);
        assert_eq!(j.len(), 15);
    }
}
