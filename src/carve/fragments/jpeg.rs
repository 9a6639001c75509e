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
/// Most other JPEGs whose extent one search asks for (validated by the
/// search or by the validation stage).
const MAX_OWNERS: u64 = 1024;
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

/// What a decode of a candidate join gave, kept for the other searches of
/// the carving ([`KnownJpegs`]): a pure function of the join's runs, the
/// snapshot it resumed from (which the head's bytes decide), whether it is
/// charged as a whole decode and the trail asked for. Only decodes of at
/// least [`CHECK_MEMO_MIN`] bytes are kept; at most [`CHECK_MEMO_ENTRIES`]
/// of them and [`CHECK_MEMO_BYTES`] of trails (forgotten all at once).
#[derive(Debug, Default)]
pub struct CheckMemo {
    map: HashMap<CheckKey, CheckOutcome>,
    /// Bytes of the trails held.
    held: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct CheckKey {
    runs: [(u64, u64); MAX_RUNS],
    n: usize,
    len: u64,
    resume: Option<(u64, u64)>,
    whole: bool,
    trail: Option<vj::TrailSpec>,
}

/// The verdict, the damage and the bytes charged.
type CheckOutcome = (Option<Verdict>, Damage, u64);

/// Least bytes decoded for a check to be kept.
const CHECK_MEMO_MIN: u64 = 16 << 10;
const CHECK_MEMO_ENTRIES: usize = 4096;
const CHECK_MEMO_BYTES: u64 = 64 << 20;

impl CheckMemo {
    fn get(&self, k: &CheckKey) -> Option<CheckOutcome> {
        self.map.get(k).cloned()
    }

    fn keep(&mut self, k: CheckKey, o: CheckOutcome) {
        let bytes =
            o.0.as_ref()
                .and_then(|v| v.trail.as_ref())
                .map_or(0, |t| t.0.bytes());
        if self.map.len() >= CHECK_MEMO_ENTRIES
            || self.held.saturating_add(bytes) > CHECK_MEMO_BYTES
        {
            self.map.clear();
            self.held = 0;
        }
        if bytes <= CHECK_MEMO_BYTES / 4 {
            self.held += bytes;
            self.map.insert(k, o);
        }
    }
}

/// The validator over `j`, with where it broke. With a snapshot of the
/// head taken for `j`'s split, the bytes before the split are not decoded
/// again. Charges the budget the bytes the validator got through (the
/// window is usually far larger than the file).
fn check(j: &TwoRuns, snap: Option<&Snap>, b: &mut Budget) -> Option<(Verdict, Damage)> {
    check_charged(j, snap, b, false, None)
}

/// The [`vj::TrailSpec`] of a search with clusters of `cl` bytes (and an
/// ext2/3 block map of blocks of `block_map` bytes): the splits and the
/// cluster before each that `recover` asks for, a cluster or three
/// before where a decode failed, and the block-map boundaries.
pub fn trail_spec(cl: u64, block_map: Option<u64>) -> vj::TrailSpec {
    vj::TrailSpec {
        grid: cl.max(1),
        span: cl.saturating_mul(4).saturating_add(TRAIL_SLACK),
        block_map,
    }
}

/// Bytes a trail keeps beyond four clusters: a decode fails a little past
/// its last MCU boundary (at most an MCU's worth of bits, and [`SLACK`]).
pub const TRAIL_SLACK: u64 = 64 << 10;

/// [`check`], charged as the decode from the file's start it stands for
/// when `whole` (the head a search follows past a proven crossing: the
/// budget, and so the result, never depends on which snapshots were at
/// hand).
/// With `trail`, the verdict carries the decode's [`vj::Trail`].
fn check_charged(
    j: &TwoRuns,
    snap: Option<&Snap>,
    b: &mut Budget,
    whole: bool,
    trail: Option<vj::TrailSpec>,
) -> Option<(Verdict, Damage)> {
    if !b.ok() {
        return None;
    }
    let mut d = Damage::default();
    let src = Src::new(j, 0, Limits { max_len: j.len });
    let resume = snap.filter(|sn| sn.split() == j.split());
    let from = match resume {
        Some(sn) if !whole => sn.at(),
        _ => 0,
    };
    // Decoded before by a search of this carving: that outcome, charged
    // the same.
    let memo = b.claims.known.clone();
    let key = CheckKey {
        runs: j.at,
        n: j.n,
        len: j.len,
        resume: resume.map(|sn| (sn.split(), sn.at())),
        whole,
        trail,
    };
    if let Some(m) = &memo
        && let Some((v, d, used)) = m.checks.lock().unwrap_or_else(|e| e.into_inner()).get(&key)
    {
        if !b.bytes(used.max(1)) {
            return None;
        }
        return Some((v?, d));
    }
    let v = match (trail, resume) {
        (Some(spec), _) => {
            // (A proof or a head decoded whole: under the carving's memo of
            // scans, which a copy of the picture decoded before answers.)
            let mut validate = || vj::validate_trail(src, &mut d, resume, spec);
            let (v, t) = match &memo {
                Some(m) => vj::with_memo(&m.scan_memo, j.r, validate),
                None => validate(),
            };
            v.map(|mut v| {
                v.trail = t.map(|t| crate::carve::validators::TrailRef(std::sync::Arc::new(t)));
                v
            })
        }
        (None, Some(sn)) => vj::validate_resume(src, &mut d, sn),
        (None, None) => vj::validate_probe(src, &mut d),
    };
    let used = v
        .as_ref()
        .map_or(0, |v| v.length)
        .max(d.fail_at)
        .min(j.len)
        .saturating_sub(from);
    if let Some(m) = &memo
        && used >= CHECK_MEMO_MIN
    {
        m.checks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keep(key, (v.clone(), d, used));
    }
    if !b.bytes(used.max(1)) {
        return None;
    }
    Some((v?, d))
}

/// [`entropy_like`] of the `n` bytes at `pos`: no when the scan saw their
/// first sector fail ([`EntropySectors`]), else the verdict shared by the
/// carving's searches.
fn looks_entropy(
    b: &mut Budget,
    (cache, look): (&mut Cache, &mut [u8; LOOK as usize]),
    pos: u64,
    n: u64,
) -> bool {
    let scan_says_no = || {
        n.clamp(SECTOR as u64, LOOK) > SECTOR as u64
            && b.claims
                .needles
                .as_ref()
                .and_then(|l| l.sectors.as_ref())
                .is_some_and(|e| e.fails(pos))
    };
    !scan_says_no()
        && b.claims
            .entropy_verdict((pos, n), || entropy_like(cache, look, pos, n))
}

/// True when the `n` bytes (512 to [`LOOK`]) at `s2` could continue
/// entropy-coded data: every `FF` is stuffing, a restart marker, fill,
/// EOI (the file ends: stop looking) or a marker that may sit between the
/// scans of a progressive file; no run of 64 equal bytes (zeroed or
/// unwritten space: checked as no 32-byte aligned chunk of one value); at
/// least one byte in 16 with its top bit set (not text), and at least 2 of
/// the first 64.
fn entropy_like(cache: &mut Cache, buf: &mut [u8; LOOK as usize], s2: u64, n: u64) -> bool {
    // One read of everything the tests below may look at: each needs all of
    // it before it can pass, so a short read fails them alike.
    let n = n.clamp(512, LOOK) as usize;
    let Some(buf) = buf.get_mut(..n) else {
        return false;
    };
    if !cache.read(s2, buf) {
        return false;
    }
    // Zeros and text fail on their first 64 bytes, most other foreign
    // data in its first 512: look at those first.
    let (Some(head), Some(first)) = (buf.get(..64), buf.get(..SECTOR)) else {
        return false;
    };
    if count_high(head) < 2 || (n > SECTOR && ff_rule(first).is_none()) {
        return false;
    }
    let Some(body) = ff_rule(buf).and_then(|seen| buf.get(..seen)) else {
        return false;
    };
    // A run of 64 equal bytes holds an aligned 32-byte chunk of one value.
    if body.chunks_exact(32).any(|c| c.iter().all(|&x| x == c[0])) {
        return false;
    }
    body.len() >= 16 && count_high(body) * 16 >= body.len()
}

/// The sector of [`entropy_like`]'s first tests.
const SECTOR: usize = 512;

/// True when the [`SECTOR`] bytes at the start of a window of more than
/// [`SECTOR`] bytes fail [`entropy_like`]'s first tests: fewer than 2 of the
/// first 64 have their top bit set, or an `FF` is followed by what
/// entropy-coded data cannot hold before any EOI.
fn first_sector_fails(first: &[u8]) -> bool {
    first.get(..64).is_none_or(|head| count_high(head) < 2)
        || first.get(..SECTOR).is_none_or(|s| ff_rule(s).is_none())
}

/// Sectors per slot of [`EntropySectors`] (the bits of one `u64` beside
/// a 32-bit tag).
const SLOT_SECTORS: u64 = 32;
/// Most slots of [`EntropySectors`]: 8 MiB, the sectors of the last 16 GiB
/// the scan has passed.
const MAX_SLOTS: u64 = 1 << 20;

/// The scan's verdicts of [`entropy_like`]'s first tests at every
/// image-aligned sector it passes ([`first_sector_fails`]), so that the
/// JPEG searches' prefilter need not read a candidate cluster that fails
/// them: on the fragmented ext2 image the searches examined 52 000
/// clusters (80% of the image) and 84% failed on their first sector; each
/// was read through 64 KiB blocks, 260 MB in all.
///
/// A ring of slots of [`SLOT_SECTORS`] sectors (a chunk), each one atomic
/// word: which of the chunks sharing the slot it holds (the chunk's number
/// divided by the ring's size, plus one) in the top 32 bits, a bit per
/// failing sector below. A word is written whole by the
/// scan worker that saw its whole chunk in one block (a chunk across two
/// blocks is not written), and read whole: a word of another chunk, or
/// none, says nothing, and the search reads the cluster as before. The
/// answer is the same either way; only what is read differs. Bounded by
/// [`MAX_SLOTS`] whatever the image's size.
#[derive(Debug)]
pub struct EntropySectors {
    slots: Box<[std::sync::atomic::AtomicU64]>,
}

impl EntropySectors {
    /// A ring for an image of `len` bytes.
    pub fn new(len: u64) -> Self {
        let n = len
            .div_ceil(SECTOR as u64 * SLOT_SECTORS)
            .clamp(1, MAX_SLOTS);
        EntropySectors {
            slots: (0..n).map(|_| Default::default()).collect(),
        }
    }

    /// The slot of chunk `c`, and the tag its word carries (none past 32
    /// bits: an image of 2^32 rings, whose chunks there are not kept).
    fn slot(&self, c: u64) -> Option<(&std::sync::atomic::AtomicU64, u64)> {
        let n = self.slots.len() as u64;
        let tag = c / n + 1;
        if tag > u64::from(u32::MAX) {
            return None;
        }
        Some((self.slots.get(usize::try_from(c % n).ok()?)?, tag))
    }

    /// Records the chunks wholly inside `owned`, the bytes at image offset
    /// `offset`.
    pub fn record(&self, offset: u64, owned: &[u8]) {
        let span = SECTOR as u64 * SLOT_SECTORS;
        let mut c = offset.div_ceil(span);
        while let Some(chunk) = c
            .checked_mul(span)
            .and_then(|at| usize::try_from(at - offset).ok())
            .and_then(|at| owned.get(at..at.checked_add(span as usize)?))
        {
            let mut fails = 0u64;
            for (k, sector) in chunk.chunks_exact(SECTOR).enumerate() {
                if first_sector_fails(sector) {
                    fails |= 1 << k;
                }
            }
            if let Some((word, tag)) = self.slot(c) {
                word.store(tag << 32 | fails, std::sync::atomic::Ordering::Relaxed);
            }
            c += 1;
        }
    }

    /// True when the window at `pos` (more than [`SECTOR`] bytes) is known
    /// to fail [`entropy_like`]; false when it passes its first tests or is
    /// not known.
    pub fn fails(&self, pos: u64) -> bool {
        if !pos.is_multiple_of(SECTOR as u64) {
            return false;
        }
        let sector = pos / SECTOR as u64;
        self.slot(sector / SLOT_SECTORS).is_some_and(|(word, tag)| {
            let w = word.load(std::sync::atomic::Ordering::Relaxed);
            w >> 32 == tag && w & (1 << (sector % SLOT_SECTORS)) != 0
        })
    }
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

/// Bytes with the top bit set, counted in byte-wide lanes (255 at a time,
/// so no lane overflows): the count of `x >= 0x80` vectorised without
/// widening every lane to 64 bits.
fn count_high(b: &[u8]) -> usize {
    b.chunks(255)
        .map(|c| usize::from(c.iter().fold(0u8, |a, &x| a.wrapping_add(x >> 7))))
        .sum()
}

/// Cluster-aligned JPEG headers (`FF D8 FF` and a segment marker) in the
/// part of the image looked at so far (`[lo, hi)`, searched with memmem
/// in 1 MiB pieces); positions `≡ phase (mod cl)` count.
struct Heads {
    /// Other JPEG headers this search has asked about (however their
    /// length was known: the count never depends on what was cached).
    asked: std::collections::HashSet<u64>,
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
            asked: Default::default(),
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
                if (i as u64) < span && p % self.cl == self.phase && (0xC0..=0xFE).contains(&marker)
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
    let near: Vec<u64> = if b.claims.sois.cover(
        r,
        b.claims.needles.as_deref(),
        (SOI, heads.cl, heads.phase),
        marker,
        from,
        s2,
    ) {
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
        // Whole validations, once per header per carving (the stage's
        // verdict when it has one); not counted against the candidate
        // budget but capped in number. Counted whoever decodes and whether
        // cached or not: the search's result never depends on how far the
        // stage or earlier searches had got.
        if !heads.asked.contains(&p) {
            if heads.asked.len() as u64 >= MAX_OWNERS {
                return false;
            }
            heads.asked.insert(p);
        }
        let len = match b.claims.jpeg_heads.get(&p) {
            Some(&l) => l,
            None => {
                // The validation stage's verdict, once it has passed the
                // header (waiting for it: decoding here would do its work
                // twice, on the carver's thread).
                let l = b
                    .claims
                    .known
                    .as_ref()
                    .and_then(|k| {
                        k.wait_for(p.saturating_add(1));
                        k.get(p)
                    })
                    .unwrap_or_else(|| {
                        let w = TwoRuns::new(r, p, MAX_OWNER, p, MAX_OWNER);
                        let mut d = Damage::default();
                        let src = Src::new(&w, 0, Limits { max_len: w.len });
                        vj::validate_probe(src, &mut d).map_or(0, |v| v.length)
                    });
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
/// last run open-ended), recursively while runs are left. `prior`: the
/// decoder's snapshots at the splits (and a cluster before them) the
/// searches before this one took, by position in the file (those up to
/// `head`'s last split hold for `head`: it is the file they were taken
/// over up to there). `decoded`: the verdict of the whole of `head`, when
/// the search that proved its crossing decoded it.
pub(super) fn recover(
    head: &TwoRuns,
    max_len: u64,
    cl: u64,
    (given, block_map): (Option<&Verdict>, Option<u64>),
    b: &mut Budget,
    (prior, decoded): (&Snaps, Option<(Verdict, Damage)>),
) -> Option<Joined> {
    let (r, start, whole) = (head.r, head.a(), *head);
    let spec = trail_spec(cl, block_map);
    // Following a crossing: the head is decoded from its last split's
    // snapshot on, not from its start.
    let from = (head.count() > 1)
        .then(|| prior.get(&head.split()).and_then(Option::as_ref))
        .flatten();
    // The verdict the validation stage gave the same bytes, with where the
    // decode broke, is what a validation here would give: charged alike,
    // not decoded again.
    let (v, d) = match given {
        Some(v) if head.count() == 1 && v.broke_at.is_some() => {
            let fail_at = v.broke_at.unwrap_or(0);
            let used = v.length.max(fail_at).min(whole.len);
            if !b.ok() || !b.bytes(used.max(1)) {
                return None;
            }
            let d = Damage {
                damaged: true,
                fail_at,
            };
            (v.clone(), d)
        }
        // Decoded already: charged as that decode was.
        _ => match decoded {
            Some((v, d)) => {
                let used = v.length.max(d.fail_at).min(whole.len);
                if !b.ok() || !b.bytes(used.max(1)) {
                    return None;
                }
                (v, d)
            }
            None => check_charged(&whole, from, b, true, Some(spec))?,
        },
    };
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
    let mut splits = splits;
    // In an ext2/3 volume the file goes on after an indirect block at its
    // block-map boundaries. An indirect block is mostly zero bytes, and
    // zero bits decode as flat blocks with many encoders' tables: the
    // decode may run clean through it and into the real continuation,
    // failing only at the end. The last boundary before the failure is a
    // split too (PhotoRec's ext2 mode makes the same assumption; here
    // the decode across the join proves it).
    if let Some(bs) = block_map
        && let Some(s) = crate::carve::geometry::block_map_boundaries(bs, d.fail_at.min(max_len))
            .filter(|&s| s >= cl && s > head.split())
            .last()
        && !splits.contains(&s)
    {
        splits.push(s);
    }
    if splits.is_empty() {
        return None;
    }
    // The head's decoder state at each split, so that a candidate costs
    // a decode of what follows the split only.
    // One decode for every split, charged as one per split. A cluster
    // before each split too: the join's proof decodes it with the boundary
    // moved one cluster back ([`try_join`]).
    let src = Src::new(&whole, 0, Limits { max_len: whole.len });
    let mut wanted = splits.clone();
    wanted.extend(
        splits
            .iter()
            .filter_map(|s| s.checked_sub(cl))
            .filter(|&s| head.count() == 1 || s > head.split()),
    );
    // The decode that placed the splits left their snapshots behind (the
    // validation stage's, or the one that proved the crossing): taken from
    // its trail when it holds them all, else captured by decoding again.
    // Those it does not hold are captured by a decode that stops past the
    // last of them.
    let mut got = match v.trail.as_ref() {
        Some(t) => t.0.answer_each(whole.len, &wanted),
        None => vec![None; wanted.len()],
    };
    let missing: Vec<u64> = wanted
        .iter()
        .zip(&got)
        .filter(|(_, g)| g.is_none())
        .map(|(&w, _)| w)
        .collect();
    if !missing.is_empty() {
        let mut captured = vj::capture_snaps(src, from, &missing).into_iter();
        for g in got.iter_mut().filter(|g| g.is_none()) {
            *g = captured.next();
        }
    }
    let got = got.into_iter().map(Option::flatten);
    // The snapshots before this head's last split hold for it (it equals
    // the file they were taken over up to there); later ones do not.
    let mut snaps: Snaps = prior
        .iter()
        .filter(|&(&at, _)| at <= head.split())
        .map(|(&at, sn)| (at, sn.clone()))
        .collect();
    for (i, (&split, sn)) in wanted.iter().zip(got).enumerate() {
        if i < splits.len() && !b.bytes(split) {
            return None;
        }
        let slot = snaps.entry(split).or_insert(None);
        if slot.is_none() {
            *slot = sn;
        }
    }
    let lim = b.lim.max_bytes.min(MAX_DECODED);
    let mut cache = Cache::new(r);
    let mut look = [0u8; LOOK as usize];
    let mut heads = Heads::new(start, cl);
    let mut crossings: Vec<Crossing> = Vec::new();
    let found = nearest_first(head, &splits, cl, b, |i, s2, b| {
        let split = splits[i];
        if b.covers(s2) || b.starts_within(head.b(), head.map(split)) {
            return None;
        }
        let good = looks_entropy(b, (&mut cache, &mut look), s2, LOOK);
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
            let like = looks_entropy(b, (&mut cache, &mut look), s2 - n, n);
            if like && !owned(r, &mut heads, start, before, b) {
                return None;
            }
        }
        if b.bytes > lim {
            b.exhausted = true;
            return None;
        }
        match try_join(head, (split, s2, cl), max_len, (&snaps, spec), b)? {
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
    for (j, note, decoded) in crossings {
        if !b.ok() {
            break;
        }
        if let Some(mut f) = recover(&j, max_len, cl, (None, block_map), b, (&snaps, decoded)) {
            f.notes.insert(0, note);
            return Some(f);
        }
    }
    None
}

/// Decoder snapshots by position in the file (see [`recover`]).
type Snaps = HashMap<u64, Option<Snap>>;

/// A join proven across its start that breaks again later: the join, the
/// note, and its whole verdict when the test decoded it.
type Crossing<'a> = (TwoRuns<'a>, String, Option<(Verdict, Damage)>);

/// `Ok`: the join proves the whole file; `Err`: the decode runs valid
/// across the join well past where noise before the candidate may reach
/// (see the test of the cluster before it) but fails again later, and the
/// join may take one more run.
fn try_join<'a>(
    head: &TwoRuns<'a>,
    (split, s2, cl): (u64, u64, u64),
    max_len: u64,
    (snaps, spec): (&Snaps, vj::TrailSpec),
    b: &mut Budget,
) -> Option<Result<Joined, Crossing<'a>>> {
    let r = head.r;
    let snap = snaps.get(&split).and_then(Option::as_ref);
    // Where the decode of a candidate's join must still be valid for
    // the crossing to count when the file breaks again: beyond what
    // the cluster before the candidate is allowed to decode (below).
    let noise_reach = split + cl + cl.max(1024) + SLACK;
    let more = head.count() + 2 <= MAX_RUNS;
    let crosses = |d: &Damage| more && d.damaged && d.fail_at > noise_reach.max(split + MIN_CROSS);
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
        // Through the probe's window without a fault. Zeroed space does
        // that (with many encoders' tables a run of zero bits is a run of
        // flat blocks, and the decoder falls back in step with the tail):
        // the MCU count decides, at the end of the file. What lies before
        // s2 must not complete the file; if it does not, s2 is the only
        // place the tail can start (the nudge test below checks it again).
        Some((pv, d)) if !d.damaged && pv.status == Status::Partial && pv.length >= probe.len => {
            let from_before = head.then(split, before, max_len)?;
            match check(&from_before, snap, b) {
                Some((fv, _)) if fv.status == Status::Complete => return None,
                Some(_) => {}
                None => return None,
            }
        }
        Some(_) => return None,
        None => {
            if !b.ok() {
                return None;
            }
        }
    }
    let mut v = None;
    let mut decoded = None;
    if !crossing {
        let (full, d) = check_charged(&j, snap, b, false, Some(spec))?;
        crossing = full.status != Status::Complete && crosses(&d);
        if crossing {
            decoded = Some((full.clone(), d));
        }
        v = Some(full);
    }
    if crossing {
        let note = format!(
            "fragment {} proven by a JPEG entropy decode valid across its start for more than two clusters; split at {split}, fragment at {s2}",
            j.count()
        );
        return Some(Err((j, note, decoded)));
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
    // decodes per boundary of the one join accepted. Boundary `i` at `v`
    // moved back or on keeps the file's bytes before `v − cl` or `v`:
    // decoded from the snapshot there, which the search of that boundary
    // took.)
    for i in 1..j.count() {
        let v = j.at[i].0;
        for back in [true, false] {
            let Some(alt) = j.nudged(i, back, cl) else {
                continue;
            };
            let mut d = Damage::default();
            let src = Src::new(&alt, 0, Limits { max_len: alt.len });
            let from = if back { v.checked_sub(cl) } else { Some(v) };
            let sn = from.and_then(|f| snaps.get(&f)).and_then(Option::as_ref);
            let v = match sn {
                Some(sn) => vj::validate_resume(src, &mut d, sn),
                None => vj::validate_probe(src, &mut d),
            };
            if v.is_some_and(|w| w.status == Status::Complete) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An image of 512-byte sectors of every kind the prefilter's first
    /// tests tell apart: entropy-like bytes, zeros, text, a bad `FF`, a bad
    /// `FF` after an EOI, too few high bytes in the first 64, an `FF` as
    /// the last byte followed by a bad byte in the next sector.
    fn sectors(n: usize) -> Vec<u8> {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut img = Vec::with_capacity(n * SECTOR + 300);
        for _ in 0..n {
            let kind = next() % 8;
            let mut s: Vec<u8> = (0..SECTOR)
                .map(|_| (next() as u8 | (0x80 * u8::from(kind != 5))).min(0xFE))
                .collect();
            let at = (next() as usize) % (SECTOR - 1);
            match kind {
                1 => s.fill(0),
                2 => s.copy_from_slice(&[b'a'; SECTOR]),
                3 => s[at..at + 2].copy_from_slice(&[0xFF, 0x12]),
                4 => {
                    s[at / 2..at / 2 + 2].copy_from_slice(&[0xFF, 0xD9]);
                    s[SECTOR - 2..].copy_from_slice(&[0xFF, 0x12]);
                }
                5 => s[..64].fill(0x11),
                6 => s[SECTOR - 1] = 0xFF,
                _ => s[at..at + 2].copy_from_slice(&[0xFF, 0x00]),
            }
            img.extend_from_slice(&s);
        }
        // A tail shorter than a sector.
        img.extend_from_slice(&[0x99; 300]);
        img
    }

    #[test]
    fn the_scans_sector_verdicts_agree_with_the_prefilter() {
        let img = sectors(700);
        let len = img.len() as u64;
        let e = EntropySectors::new(len);
        // Blocks as the scan shows them: owned bytes from offsets that are
        // not chunk (or even sector) multiples.
        let cuts = [0usize, 40_000, 70_001, 150_000, 200_000, img.len()];
        for w in cuts.windows(2).rev() {
            e.record(w[0] as u64, &img[w[0]..w[1]]);
        }
        let span = SECTOR * SLOT_SECTORS as usize;
        let whole = |p: usize| {
            let c = p / span * span;
            cuts.windows(2).any(|w| w[0] <= c && c + span <= w[1])
        };
        let mut cache = Cache::new(&img);
        let mut look = [0u8; LOOK as usize];
        let (mut known, mut failing) = (0, 0);
        for p in (0..img.len()).step_by(SECTOR) {
            let says = e.fails(p as u64);
            if whole(p) {
                // Answered: exactly the first tests' verdict.
                known += 1;
                failing += usize::from(says);
                assert_eq!(says, first_sector_fails(&img[p..p + SECTOR]), "{p}");
            } else {
                assert!(!says, "{p}: not seen whole, not answered");
            }
            if says {
                assert!(!entropy_like(&mut cache, &mut look, p as u64, LOOK), "{p}");
            }
            // Off a sector boundary: never answered.
            assert!(!e.fails(p as u64 + 1));
        }
        assert!(
            known > 500 && failing > 200 && failing < known - 200,
            "{known} {failing}"
        );
        // Every kind of sector, passing or failing, meets entropy_like's
        // own verdict: a window passing the first tests is decided by it.
        let passes = (0..img.len() - SECTOR)
            .step_by(SECTOR)
            .filter(|&p| entropy_like(&mut cache, &mut look, p as u64, LOOK))
            .count();
        assert!(passes > 50, "{passes}");
    }

    #[test]
    fn the_first_tests_look_at_one_sector_as_a_window_starting_there_does() {
        let plain: Vec<u8> = (0..SECTOR).map(|i| 0x80 | (i as u8 & 0x3F)).collect();
        assert!(!first_sector_fails(&plain));
        // An FF as the sector's last byte: what follows is the window's
        // next sector, not these tests'.
        let mut s = plain.clone();
        s[SECTOR - 1] = 0xFF;
        assert!(!first_sector_fails(&s));
        // A bad FF after an EOI is past the data.
        s[10..12].copy_from_slice(&[0xFF, 0xD9]);
        s[20..22].copy_from_slice(&[0xFF, 0x12]);
        assert!(!first_sector_fails(&s));
        s[10] = 0x80;
        assert!(first_sector_fails(&s));
        // One high byte in the first 64 is too few; two are enough.
        let mut s = plain.clone();
        s[..64].fill(0x01);
        s[63] = 0x80;
        assert!(first_sector_fails(&s));
        s[0] = 0x80;
        assert!(!first_sector_fails(&s));
        assert!(first_sector_fails(&plain[..SECTOR - 1]), "short");
    }

    #[test]
    fn a_ring_smaller_than_the_image_answers_only_its_latest_chunks() {
        let img = sectors(2048);
        let span = SECTOR * SLOT_SECTORS as usize;
        // Room for 8 chunks of an image of 64.
        let e = EntropySectors::new(8 * span as u64);
        let (lo, hi) = (16 * span, 40 * span);
        e.record(lo as u64, &img[lo..hi]);
        for p in (0..img.len() - SECTOR).step_by(SECTOR) {
            let latest = (hi - 8 * span..hi).contains(&p);
            let expect = latest && first_sector_fails(&img[p..p + SECTOR]);
            assert_eq!(e.fails(p as u64), expect, "{p}");
        }
        // An earlier block seen after a later one takes the slots back:
        // the later chunks no longer answer.
        e.record(0, &img[..8 * span]);
        for p in (0..8 * span).step_by(SECTOR) {
            assert_eq!(e.fails(p as u64), first_sector_fails(&img[p..p + SECTOR]));
        }
        assert!(
            (hi - 8 * span..hi)
                .step_by(SECTOR)
                .all(|p| !e.fails(p as u64))
        );
    }
}
