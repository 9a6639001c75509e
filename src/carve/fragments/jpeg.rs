//! JPEG: no checksum; the entropy decode across the join is the proof.
//!
//! Also the JPEG-only state a carving shares: what the scan saw of every
//! sector ([`EntropySectors`]), the memo of decoded candidate joins
//! ([`CheckMemo`]) and the validation stage's JPEG verdicts with the
//! prefilter's ([`KnownJpegs`]).

use super::Joined;
use super::budget::Budget;
use super::cache::Cache;
use super::entropy::{LOOK, SECTOR};
use super::join::{joined, nearest_first, tail_of_copy};
use super::known::{CHECK_MEMO_MIN, CheckKey};
use super::runs::{MAX_RUNS, TwoRuns};
use crate::carve::validators::{ByteReader, Context, Limits, Status, Verdict};
use std::collections::HashMap;

use super::validators::jpeg::{self as vj, Damage, Snap};
use super::validators::read::Src;

/// Clusters a boundary of a join of three or more runs is moved, by
/// different amounts in the file and in the image, to prove it is placed.
const NUDGES: i64 = 3;

/// `(file clusters, image clusters, direction)` of those moves: every pair
/// of different counts from 1 to [`NUDGES`], earlier and later.
fn shifts() -> impl Iterator<Item = (i64, i64, i64)> {
    (1..=NUDGES)
        .flat_map(|a| (1..=NUDGES).map(move |b| (a, b)))
        .filter(|(a, b)| a != b)
        .flat_map(|(a, b)| [(a, b, -1), (a, b, 1)])
}

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
/// Most fragments of a JPEG join: a decode proves no order, and the
/// fragments of one picture (or of pictures coded with the same tables)
/// decode as each other's continuation (in five fragments, middle ones
/// permuted reached the exact MCU count: a false join on raw seed 11);
/// [`order_proven`] refuses a join any other order of whose runs decodes
/// as well.
const JPEG_MAX_RUNS: usize = 5;
const _: () = assert!(JPEG_MAX_RUNS <= MAX_RUNS);
/// Least (candidates, bytes) allowed to the searches after crossings.
const CROSS_FLOOR: (u64, u64) = (128 << 10, 32 << 20);

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
    let memo = b.memory.known.clone();
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
            let shared = match &memo {
                Some(m) => Context::NONE.with_jpeg_memo(&m.scan_memo, j.r),
                None => Context::NONE,
            };
            let src = Src::in_context(j, 0, Limits { max_len: j.len }, &shared);
            let (v, t) = vj::validate_trail(src, &mut d, resume, spec);
            v.map(|v| {
                v.with_trail(t.map(|t| crate::carve::validators::TrailRef(std::sync::Arc::new(t))))
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

/// [`entropy_like`] of the `n` bytes at `pos`: the scan's verdict when it
/// saw every sector of them ([`EntropySectors`]), else the verdict shared
/// by the carving's searches (reading them).
fn looks_entropy(
    b: &mut Budget,
    (cache, look): (&mut Cache, &mut [u8; LOOK as usize]),
    pos: u64,
    n: u64,
) -> bool {
    let seen = b
        .memory
        .needles
        .as_ref()
        .and_then(|l| l.sectors.as_ref())
        .and_then(|e| e.verdict(pos, n.clamp(SECTOR as u64, LOOK)));
    match seen {
        Some(v) => v,
        None => b
            .memory
            .entropy_verdict((pos, n), || entropy_like(cache, look, pos, n)),
    }
}

/// True when the `n` bytes (512 to [`LOOK`]) at `s2` could continue
/// entropy-coded data ([`entropy_like_bytes`]); false when they cannot be
/// read.
fn entropy_like(cache: &mut Cache, buf: &mut [u8; LOOK as usize], s2: u64, n: u64) -> bool {
    let n = n.clamp(SECTOR as u64, LOOK) as usize;
    let Some(buf) = buf.get_mut(..n) else {
        return false;
    };
    cache.read(s2, buf) && entropy_like_bytes(buf)
}

/// True when `buf` (at least a [`SECTOR`]) could continue entropy-coded
/// data: every `FF` is stuffing, a restart marker, fill, EOI (the file
/// ends: stop looking) or a marker that may sit between the scans of a
/// progressive file; no run of 64 equal bytes (zeroed or unwritten space:
/// checked as no 32-byte aligned chunk of one value); at least one byte in
/// 16 with its top bit set (not text), and at least 2 of the first 64.
fn entropy_like_bytes(buf: &[u8]) -> bool {
    // Zeros and text fail on their first 64 bytes, most other foreign
    // data in its first 512: look at those first.
    let (Some(head), Some(first)) = (buf.get(..64), buf.get(..SECTOR)) else {
        return false;
    };
    if count_high(head) < 2 || (buf.len() > SECTOR && ff_rule(first).is_none()) {
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
    let near: Vec<u64> = if b.memory.sois.cover(
        r,
        b.memory.needles.as_deref(),
        (SOI, heads.cl, heads.phase),
        marker,
        from,
        s2,
    ) {
        b.memory
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
        let len = match b.memory.jpeg_heads.get(&p) {
            Some(&l) => l,
            None => {
                // The validation stage's verdict, once it has passed the
                // header (waiting for it: decoding here would do its work
                // twice, on the carver's thread).
                let l = b
                    .memory
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
                b.memory.jpeg_heads.insert(p, l);
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
    let (v, d) = head_verdict(&whole, (given, decoded), (from, spec), b)?;
    if v.status != Status::Partial || !d.damaged || v.length < 2 {
        return None;
    }
    let (splits, past_foreign) = place_splits(head, &d, max_len, cl, block_map, b);
    if splits.is_empty() {
        return None;
    }
    let snaps = snaps_at(head, &splits, cl, (&v, from, prior), b)?;
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
        // Whether the last bytes before s2 cannot be entropy-coded data
        // (zeroed space, text): what they decode as then says nothing of
        // where the fragment starts ([`try_join`]).
        let m = cl.clamp(SECTOR as u64, LOOK).min(s2);
        let foreign = m >= SECTOR as u64 && !looks_entropy(b, (&mut cache, &mut look), s2 - m, m);
        // A split placed back at the start of data the decode ran through
        // adds candidates a decode proves less well: the tail after it
        // must be longer.
        let min_tail = if past_foreign == Some(split) {
            MIN_CROSS
        } else {
            MIN_TAIL
        };
        let at = (split, s2, cl, foreign, min_tail);
        match try_join(head, at, max_len, (&snaps, spec), b)? {
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

/// The verdict of the whole of `head` and where its decode broke. The
/// verdict the validation stage gave the same bytes (`given`, for a single
/// run), with where the decode broke, is what a validation here would give:
/// charged alike, not decoded again; so is the decode that proved the
/// crossing `head` follows (`decoded`). Else `head` is decoded here, from
/// the snapshot `from` at its last split on.
fn head_verdict(
    whole: &TwoRuns,
    (given, decoded): (Option<&Verdict>, Option<(Verdict, Damage)>),
    (from, spec): (Option<&Snap>, vj::TrailSpec),
    b: &mut Budget,
) -> Option<(Verdict, Damage)> {
    match given {
        Some(v) if whole.count() == 1 && v.broke_at().is_some() => {
            let fail_at = v.broke_at().unwrap_or(0);
            let used = v.length.max(fail_at).min(whole.len);
            if !b.ok() || !b.bytes(used.max(1)) {
                return None;
            }
            let d = Damage {
                damaged: true,
                fail_at,
                ..Damage::default()
            };
            Some((v.clone(), d))
        }
        // Decoded already: charged as that decode was.
        _ => match decoded {
            Some((v, d)) => {
                let used = v.length.max(d.fail_at).min(whole.len);
                if !b.ok() || !b.bytes(used.max(1)) {
                    return None;
                }
                Some((v, d))
            }
            None => check_charged(whole, from, b, true, Some(spec)),
        },
    }
}

/// The split points of `head`, whose decode failed at `d.fail_at`
/// (the start of a run of foreign data the decode ran through, then those
/// nearest the failure, then an ext2/3 block-map boundary), and the first
/// of those when there is one.
fn place_splits(
    head: &TwoRuns,
    d: &Damage,
    max_len: u64,
    cl: u64,
    block_map: Option<u64>,
    b: &Budget,
) -> (Vec<u64>, Option<u64>) {
    // The split lies at or before the point where decoding failed, and
    // within a cluster of it: foreign data that decodes for longer is
    // coded with the same tables, and the split cannot be placed.
    let top = d.fail_at.min(max_len) / cl * cl;
    let lowest = d.fail_at.saturating_sub(cl + SLACK);
    let mut splits: Vec<u64> = (0..MAX_SPLITS.min(b.lim.max_splits))
        .map_while(|k| {
            top.checked_sub(k * cl)
                .filter(|&s| s >= cl && s >= lowest && s > head.split())
        })
        .collect();
    // Zeroed space after a fragment decodes on (with many encoders'
    // tables zero bits are valid blocks), and so may text: the decode
    // fails only where that data ends, clusters past the split. The start
    // of that run of clusters that are not entropy-coded data is a split
    // (first: the split nearest the failure lies inside the run). The
    // candidates' prefilter refuses such clusters as a fragment's start.
    let mut past_foreign = None;
    if let Some(s) = foreign_run_start(head, d.fail_at.min(max_len), cl)
        && !splits.contains(&s)
    {
        splits.insert(0, s);
        past_foreign = Some(s);
    }
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
    (splits, past_foreign)
}

/// Where the run of whole clusters that cannot be entropy-coded data
/// ([`entropy_like_bytes`] of their first [`LOOK`] bytes: zeroed space,
/// text) ending within two clusters of `fail_at` starts, in `head` after
/// its last split (walked back cluster by cluster over bytes the decode
/// went through: bounded by what it read); `None` without such a run.
fn foreign_run_start(head: &TwoRuns, fail_at: u64, cl: u64) -> Option<u64> {
    let floor = head.split().saturating_add(1).max(cl);
    let mut buf = [0u8; LOOK as usize];
    let n = cl.clamp(SECTOR as u64, LOOK) as usize;
    let mut foreign = |s: u64| -> bool {
        let Some(piece) = buf.get_mut(..n) else {
            return false;
        };
        head.read_at(s, piece) == n && !entropy_like_bytes(piece)
    };
    let top = fail_at / cl * cl;
    let mut s = (0..3)
        .map_while(|k| top.checked_sub(k * cl).filter(|&s| s >= floor))
        .find(|&s| foreign(s))?;
    while s >= floor + cl && foreign(s - cl) {
        s -= cl;
    }
    Some(s)
}

/// The head's decoder state at each split and a cluster before it, so
/// that a candidate costs a decode of what follows the split only: the
/// snapshots of `prior` that hold for `head`, then those the decode that
/// gave `v` left in its trail, then the rest captured by decoding `head`
/// again from `from`. `None` when the budget ends.
fn snaps_at(
    head: &TwoRuns,
    splits: &[u64],
    cl: u64,
    (v, from, prior): (&Verdict, Option<&Snap>, &Snaps),
    b: &mut Budget,
) -> Option<Snaps> {
    // The head's decoder state at each split, so that a candidate costs
    // a decode of what follows the split only.
    // One decode for every split, charged as one per split. A cluster
    // before each split too: the join's proof decodes it with the boundary
    // moved one cluster back ([`try_join`]).
    let whole = *head;
    let src = Src::new(&whole, 0, Limits { max_len: whole.len });
    let mut wanted = splits.to_vec();
    wanted.extend(
        splits
            .iter()
            .filter_map(|s| s.checked_sub(cl))
            .filter(|&s| head.count() == 1 || s > head.split()),
    );
    // The decode that placed the splits left their snapshots behind (the
    // validation stage's, or the one that proved the crossing): each taken
    // from its trail where the trail holds it; the others are captured by
    // decoding again, up to the first boundary past the last of them.
    let mut got = match v.trail() {
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
    Some(snaps)
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
    (split, s2, cl, foreign, min_tail): (u64, u64, u64, bool, u64),
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
    let more = head.count() + 2 <= JPEG_MAX_RUNS;
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
        // So may data before s2 that cannot be the file's at all (its last
        // bytes are not entropy-coded data: zeroed space, text), decoding
        // on into the candidate's bytes in step with them, then failing:
        // it says nothing of where the fragment starts, as long as it does
        // not complete the file in s2's place.
        Some((pv, d))
            if foreign
                || (!d.damaged && pv.status == Status::Partial && pv.length >= probe.len) =>
        {
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
    if v.status != Status::Complete || v.length < split.saturating_add(min_tail) {
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
    // Past two runs, a boundary may also be off in the file and in the
    // image by different amounts (fat32 seed 16: a 3-run join took three
    // clusters of the gap after its second run and started the third two
    // clusters late, and decoded to the exact MCU count): the same file
    // with boundary `i` moved by a different number of clusters (one to
    // [`NUDGES`], the same way) in the file and in the image must fail.
    // (Not charged either: at most 12 decodes per such boundary, of the one
    // join accepted.)
    if j.count() > 2 {
        for i in 2..j.count() {
            let v = j.at[i].0;
            for (a, b, sign) in shifts() {
                let step = cl as i64 * sign;
                let Some(alt) = j.shifted(i, a * step, b * step) else {
                    continue;
                };
                let mut d = Damage::default();
                let src = Src::new(&alt, 0, Limits { max_len: alt.len });
                let from = v.min(alt.at[i].0);
                let sn = snaps.get(&from).and_then(Option::as_ref);
                let w = match sn {
                    Some(sn) => vj::validate_resume(src, &mut d, sn),
                    None => vj::validate_probe(src, &mut d),
                };
                if w.is_some_and(|w| w.status == Status::Complete) {
                    return None;
                }
            }
        }
    }
    if !order_proven(&j, v.length, snaps) {
        return None;
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

/// Every order of runs `1..n` (the header run stays first) but the
/// join's own: at most 4! − 1 = 23 for five runs.
fn other_orders(n: usize) -> Vec<Vec<usize>> {
    fn extend(prefix: &mut Vec<usize>, n: usize, out: &mut Vec<Vec<usize>>) {
        if prefix.len() == n {
            if prefix.iter().enumerate().any(|(i, &k)| i != k) {
                out.push(prefix.clone());
            }
            return;
        }
        for k in 1..n {
            if !prefix.contains(&k) {
                prefix.push(k);
                extend(prefix, n, out);
                prefix.pop();
            }
        }
    }
    let mut out = Vec::new();
    if (2..=MAX_RUNS).contains(&n) {
        extend(&mut vec![0], n, &mut out);
    }
    out
}

/// The order proof of a join `j` whose first `length` bytes decode to the
/// exact MCU count: no other order of its runs after the header does.
/// A Huffman decode proves no order by itself: the fragments of one
/// picture (or of pictures coded with the same tables) decode as each
/// other's continuation (raw seed 17: the middle two of four, swapped;
/// raw seed 11: the middle ones of five, permuted, reached the exact MCU
/// count). Where the file has restart markers their numbers prove the
/// order and every other order fails; where it has none the join is
/// taken only when its order is the only one that decodes. Each other
/// order is decoded from the snapshot at the first run it moves when the
/// search holds one. (Not charged to the search's budget, spent by then:
/// at most 23 decodes of the one join accepted, most failing within a
/// cluster or two of the first moved run.)
fn order_proven(j: &TwoRuns, length: u64, snaps: &Snaps) -> bool {
    for order in other_orders(j.count()) {
        let Some(alt) = j.reordered(&order, length) else {
            continue;
        };
        let moved = order.iter().enumerate().position(|(i, &k)| i != k);
        let from = moved.map_or(0, |i| j.at[i].0);
        let sn = snaps
            .get(&from)
            .and_then(Option::as_ref)
            .filter(|sn| sn.split() == from);
        let mut d = Damage::default();
        let src = Src::new(&alt, 0, Limits { max_len: alt.len });
        let w = match sn {
            Some(sn) => vj::validate_resume(src, &mut d, sn),
            None => vj::validate_probe(src, &mut d),
        };
        if w.is_some_and(|w| w.status == Status::Complete) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carve::fragments::entropy::{
        BUSY, EntropySectors, SLOT_SECTORS, masks, masks_bytewise,
    };

    /// A baseline grey JPEG of `w` × `h` blocks whose every pair of blocks
    /// codes as the same two bytes (`AD 88`: DC +2, one AC coefficient,
    /// EOB; DC −1, EOB): a flat picture, any cluster of which decodes as
    /// any other.
    fn flat_jpeg(w: u16, h: u16) -> Vec<u8> {
        fn seg(out: &mut Vec<u8>, m: u8, data: &[u8]) {
            out.extend_from_slice(&[0xFF, m]);
            out.extend_from_slice(&((data.len() + 2) as u16).to_be_bytes());
            out.extend_from_slice(data);
        }
        let mut v = vec![0xFF, 0xD8];
        let mut dqt = vec![0u8];
        dqt.extend((1..=64).map(|i| i as u8));
        seg(&mut v, 0xDB, &dqt);
        let (pw, ph) = ((w * 8).to_be_bytes(), (h * 8).to_be_bytes());
        seg(
            &mut v,
            0xC0,
            &[8, ph[0], ph[1], pw[0], pw[1], 1, 1, 0x11, 0],
        );
        // DC symbols 0, 1, 2 (codes 00, 01, 10); AC EOB, 0/1, ZRL, 1/1,
        // 0/2, 1/0 (codes 00, 01, 100, 101, 110, 111).
        let mut dht = vec![0x00, 0, 3];
        dht.extend_from_slice(&[0; 14]);
        dht.extend_from_slice(&[0, 1, 2, 0x10, 0, 2, 4]);
        dht.extend_from_slice(&[0; 13]);
        dht.extend_from_slice(&[0x00, 0x01, 0xF0, 0x11, 0x02, 0x10]);
        seg(&mut v, 0xC4, &dht);
        seg(&mut v, 0xDA, &[1, 1, 0x00, 0, 63, 0]);
        for _ in 0..u32::from(w) * u32::from(h) / 2 {
            v.extend_from_slice(&[0xAD, 0x88]);
        }
        v.extend_from_slice(&[0xFF, 0xD9]);
        v
    }

    /// The order proof: a real picture cut in five at cluster boundaries
    /// and joined in its own order is proven (no other order of its runs
    /// decodes to the exact MCU count) and complete; a permuted join of
    /// it fails to decode; a flat picture cut alike decodes in every order
    /// (as the middle fragments of one picture did on raw seed 11): no
    /// order proven, the join refused.
    #[test]
    fn a_join_of_five_runs_is_taken_only_in_the_one_order_that_decodes() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples/d-debian.jpg");
        let real = std::fs::read(path).unwrap();
        let flat = flat_jpeg(64, 4096);
        assert_eq!(other_orders(5).len(), 23);
        assert_eq!(other_orders(3), vec![vec![0, 2, 1]]);
        assert!(other_orders(1).is_empty() && other_orders(6).is_empty());
        for (file, proven) in [(&real, true), (&flat, false)] {
            let whole = Src::new(
                file,
                0,
                Limits {
                    max_len: file.len() as u64,
                },
            );
            let v = vj::validate_probe(whole, &mut Damage::default()).unwrap();
            assert_eq!(v.status, Status::Complete);
            // Cuts at 40, 80, 130 and 180 clusters of 512; the pieces laid
            // out in the image in the order 0, 3, 1, 4, 2 with gaps.
            let cuts = [0u64, 40 * 512, 80 * 512, 130 * 512, 180 * 512];
            let sizes: Vec<u64> = (0..5)
                .map(|i| cuts.get(i + 1).copied().unwrap_or(file.len() as u64) - cuts[i])
                .collect();
            let mut img = vec![0x55u8; 1 << 20];
            let mut at = [0u64; 5];
            let mut pos = 4096;
            for i in [0, 3, 1, 4, 2] {
                at[i] = pos;
                let (c, n) = (cuts[i] as usize, sizes[i] as usize);
                img[pos as usize..pos as usize + n].copy_from_slice(&file[c..c + n]);
                pos += sizes[i].div_ceil(512) * 512 + 3 * 512;
            }
            let r: &dyn ByteReader = &img;
            let len = file.len() as u64;
            let mut j = TwoRuns::one(r, at[0], len);
            for i in 1..5 {
                j = j.then(cuts[i], at[i], len).unwrap();
            }
            let src = Src::new(&j, 0, Limits { max_len: j.len });
            let got = vj::validate_probe(src, &mut Damage::default()).unwrap();
            assert_eq!((got.status, got.length), (Status::Complete, len));
            assert_eq!(order_proven(&j, len, &Snaps::new()), proven);
            // Runs 1 and 3 in each other's place (not neighbours).
            let alt = j.reordered(&[0, 3, 2, 1, 4], len).unwrap();
            let src = Src::new(&alt, 0, Limits { max_len: alt.len });
            let w = vj::validate_probe(src, &mut Damage::default());
            assert_eq!(w.is_some_and(|w| w.status == Status::Complete), !proven);
        }
    }

    /// An image of 512-byte sectors of every kind the prefilter tells
    /// apart: entropy-like bytes, zeros, text, a few high bytes (windows
    /// on either side of one in 16), a bad `FF`, an EOI anywhere (the last
    /// bytes too) with a bad `FF` or a run after it, a run of one value
    /// across or inside a 32-byte chunk, too few high bytes in the first
    /// 64, an `FF` as the last byte followed by each kind of first byte.
    fn sectors(n: usize) -> Vec<u8> {
        let mut rng = crate::synth::XorShift(0x2545_f491_4f6c_dd1d);
        let mut img = Vec::with_capacity(n * SECTOR + 300);
        for _ in 0..n {
            let kind = rng.next_u64() % 13;
            let mut s: Vec<u8> = (0..SECTOR)
                .map(|_| (rng.next_u64() as u8 | 0x80).min(0xFE))
                .collect();
            let at = (rng.next_u64() as usize) % (SECTOR - 1);
            match kind {
                1 => s.fill(0),
                2 => s.copy_from_slice(&[b'a'; SECTOR]),
                3 => s[at..at + 2].copy_from_slice(&[0xFF, 0x12]),
                4 => {
                    // An EOI, then what would fail the window were it data.
                    let e = [at / 2, SECTOR - 2, SECTOR - 3, 30, 62][at % 5];
                    s[e..e + 2].copy_from_slice(&[0xFF, 0xD9]);
                    if e + 4 < SECTOR {
                        s[e + 2..e + 4].copy_from_slice(&[0xFF, 0x12]);
                    }
                    if at.is_multiple_of(3) {
                        s[..e].fill(0x90);
                    }
                }
                5 => s[..64].iter_mut().for_each(|b| *b &= 0x7F),
                6 => {
                    s[SECTOR - 1] = 0xFF;
                    // (What the next sector starts with decides.)
                }
                7 => {
                    // A run of one value, inside a chunk or across two.
                    let len = [32, 40, 64, 31][at % 4];
                    let from = (at / 32 * 32 + [0, 8][at % 2]).min(SECTOR - len);
                    s[from..from + len].fill(0x99);
                }
                8 => {
                    // Few high bytes: one in 12 to one in 24.
                    let every = 12 + at % 13;
                    for (k, b) in s.iter_mut().enumerate() {
                        if k % every != 0 {
                            *b &= 0x7F;
                        }
                    }
                }
                9 => {
                    let first = [0xD9, 0x00, 0xFF, 0x12, 0xD0, 0xC4][at % 6];
                    s[0] = first;
                }
                10 => s[0..2].copy_from_slice(&[0xD9, 0x80]),
                11 => {
                    // A run of FF (fill) opening the sector, then an EOI
                    // or stuffing.
                    s[..32 + at % 8].fill(0xFF);
                    s[32 + at % 8] = [0xD9, 0x00][at % 2];
                }
                _ => s[at..at + 2].copy_from_slice(&[0xFF, 0x00]),
            }
            img.extend_from_slice(&s);
        }
        // A tail shorter than a sector.
        img.extend_from_slice(&[0x99; 300]);
        img
    }

    /// Windows of 1 to 8 sectors at every sector of `img`, within it.
    fn windows(img: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..img.len())
            .step_by(SECTOR)
            .flat_map(|p| (1..=8).map(move |m| (p, m * SECTOR)))
            .filter(|&(p, n)| p + n <= img.len())
    }

    #[test]
    fn the_scans_verdicts_equal_the_prefilters() {
        let img = sectors(700);
        let len = img.len() as u64;
        let e = EntropySectors::new(len);
        // Blocks as the scan shows them: owned bytes from offsets that are
        // not chunk (or even sector) multiples; a chunk ends at 81 920
        // with the block after it unseen.
        let cuts = [0usize, 40_000, 70_001, 81_920, 150_000, 200_000, img.len()];
        for w in cuts.windows(2).rev() {
            if w[0] != 81_920 {
                e.record(w[0] as u64, &img[w[0]..w[1]]);
            }
        }
        let span = SECTOR * SLOT_SECTORS as usize;
        let whole = |p: usize| {
            let c = p / span * span;
            cuts.windows(2)
                .any(|w| w[0] != 81_920 && w[0] <= c && c + span <= w[1])
        };
        // (The vector masks equal a byte-by-byte look.)
        for c in img.chunks_exact(64) {
            assert_eq!(masks(c), masks_bytewise(c));
        }
        let mut cache = Cache::new(&img);
        let mut look = [0u8; LOOK as usize];
        let (mut seen, mut answered, mut passing) = (0, 0, 0);
        for (p, n) in windows(&img) {
            let says = e.verdict(p as u64, n as u64);
            let truth = entropy_like(&mut cache, &mut look, p as u64, n as u64);
            assert_eq!(truth, entropy_like_bytes(&img[p..p + n]));
            if let Some(v) = says {
                assert_eq!(v, truth, "{p} {n}");
                answered += 1;
                passing += usize::from(v);
            }
            if (p..p + n).step_by(SECTOR).all(whole) {
                seen += 1;
            } else {
                assert_eq!(says, None, "{p} {n}: not seen whole, not answered");
            }
            // Off a sector boundary, or not whole sectors: never answered.
            assert_eq!(e.verdict(p as u64 + 1, n as u64), None);
            assert_eq!(e.verdict(p as u64, n as u64 - 1), None);
        }
        // Unanswered among those seen: an FF as a chunk's last byte before
        // bytes not seen.
        assert!(answered * 50 >= seen * 49, "{answered} of {seen}");
        assert!(
            passing > 300 && passing < answered - 1000,
            "{passing} of {answered}"
        );
    }

    #[test]
    fn a_window_is_decided_across_its_sectors_as_one_read_is() {
        let plain: Vec<u8> = (0..SECTOR).map(|i| 0x80 | (i as u8 & 0x3F)).collect();
        let verdict = |img: &[u8]| {
            let e = EntropySectors::new(img.len() as u64);
            e.record(0, img);
            e.verdict(0, img.len() as u64)
        };
        // (Sectors, then plain ones up to a chunk.)
        let chunk = |sectors: &[Vec<u8>]| -> Vec<u8> {
            let mut c = sectors.concat();
            while c.len() < SECTOR * SLOT_SECTORS as usize {
                c.extend_from_slice(&plain);
            }
            c
        };
        let check = |img: &[u8], n: usize, expect: bool| {
            let e = EntropySectors::new(img.len() as u64);
            e.record(0, img);
            assert_eq!(e.verdict(0, n as u64), Some(expect));
            assert_eq!(entropy_like_bytes(&img[..n]), expect);
        };
        // An FF as a sector's last byte: a D9 as the next one's first byte
        // ends the body one byte into it (that D9 counted); a bad byte
        // fails; in a window that ends there, nothing follows it.
        let mut a = plain.clone();
        a[SECTOR - 1] = 0xFF;
        let mut b = plain.clone();
        b[0] = 0xD9;
        b[1..].fill(0x00);
        check(&chunk(&[a.clone(), b.clone()]), 2 * SECTOR, true);
        b[0] = 0x12;
        check(&chunk(&[a.clone(), b.clone()]), 2 * SECTOR, false);
        check(&chunk(&[a.clone(), b.clone()]), SECTOR, true);
        // An EOI ending at the sector's end: its last chunk is in the body;
        // one byte before, it is not.
        let mut c = plain.clone();
        c[SECTOR - 32..].fill(0x90);
        c[SECTOR - 2..].copy_from_slice(&[0xFF, 0xD9]);
        check(&chunk(&[c.clone()]), 2 * SECTOR, true);
        let mut c = plain.clone();
        c[SECTOR - 32..].fill(0x90);
        c[SECTOR - 3..SECTOR - 1].copy_from_slice(&[0xFF, 0xD9]);
        check(&chunk(&[c.clone()]), 2 * SECTOR, true);
        let mut c = plain.clone();
        c[SECTOR - 64..].fill(0x90);
        c[SECTOR - 2..].copy_from_slice(&[0xFF, 0xD9]);
        check(&chunk(&[c]), 2 * SECTOR, false);
        // The count over the body: one high byte in 16 passes, fewer fails.
        let mut d = vec![0x11u8; SECTOR];
        d.iter_mut().step_by(16).for_each(|x| *x = 0x80);
        d[1] = 0x80;
        check(&chunk(&[d.clone(), d.clone()]), 2 * SECTOR, true);
        d[16] = 0x11;
        d[32] = 0x11;
        check(&chunk(&[d.clone(), d.clone()]), 2 * SECTOR, false);
        // At the edge of one high byte in 16: the D9 after a sector ending
        // in FF counts, and the body is 513 bytes long; an EOI's body ends
        // after its D9, whatever follows.
        let low: Vec<u8> = (0..SECTOR).map(|i| i as u8 & 0x3F).collect();
        let with_high = |n: usize| {
            let mut a = low.clone();
            a[SECTOR - 1] = 0xFF;
            for k in 0..n - 1 {
                a[k * 16] = 0x80;
            }
            a
        };
        let mut d9 = low.clone();
        d9[0] = 0xD9;
        check(&chunk(&[with_high(32), d9.clone()]), 2 * SECTOR, true);
        check(&chunk(&[with_high(31), d9.clone()]), 2 * SECTOR, false);
        let mut eoi = low.clone();
        for k in 0..10 {
            eoi[k * 16] = 0x80;
        }
        eoi[200..202].copy_from_slice(&[0xFF, 0xD9]);
        eoi[202..].iter_mut().for_each(|b| *b |= 0x80);
        check(&chunk(&[eoi.clone()]), 2 * SECTOR, false);
        eoi[177] = 0x80;
        check(&chunk(&[eoi]), 2 * SECTOR, true);
        // An EOI across two 64-byte pieces: its D9 counts (9 high bytes in
        // a 130-byte body).
        let mut eoi = low.clone();
        for k in 0..7 {
            eoi[k * 16] = 0x80;
        }
        eoi[127..129].copy_from_slice(&[0xFF, 0xD9]);
        check(&chunk(&[eoi.clone()]), SECTOR, true);
        eoi[96] = 0x10;
        check(&chunk(&[eoi]), SECTOR, false);
        // A chunk whose last byte is an FF with nothing seen after it.
        let mut last = chunk(std::slice::from_ref(&plain));
        let n = last.len();
        last[n - 1] = 0xFF;
        let e = EntropySectors::new(2 * n as u64);
        e.record(0, &last);
        assert_eq!(e.verdict((n - SECTOR) as u64, SECTOR as u64), Some(true));
        assert_eq!(
            e.verdict((n - 2 * SECTOR) as u64, 2 * SECTOR as u64),
            Some(true)
        );
        let f = EntropySectors::new(2 * n as u64);
        f.record(0, &[&last[..], &[0x12][..], &last[1..]].concat());
        assert_eq!(
            f.verdict((n - SECTOR) as u64, 2 * SECTOR as u64),
            Some(false)
        );
        assert_eq!(e.verdict((n - SECTOR) as u64, 2 * SECTOR as u64), None);
        assert_eq!(verdict(&plain), None, "less than a chunk is not seen");
    }

    #[test]
    fn a_ring_smaller_than_the_image_answers_only_its_latest_chunks() {
        let img = sectors(2048);
        let span = SECTOR * SLOT_SECTORS as usize;
        // Room for 8 chunks of an image of 64.
        let e = EntropySectors::new(8 * span as u64);
        let (lo, hi) = (16 * span, 40 * span);
        e.record(lo as u64, &img[lo..hi]);
        let one = |p: usize| entropy_like_bytes(&img[p..p + SECTOR]);
        for p in (0..img.len() - SECTOR).step_by(SECTOR) {
            let latest = (hi - 8 * span..hi).contains(&p);
            assert_eq!(
                e.verdict(p as u64, SECTOR as u64),
                latest.then(|| one(p)),
                "{p}"
            );
        }
        // An earlier block seen after a later one takes the slots back:
        // the later chunks no longer answer.
        e.record(0, &img[..8 * span]);
        for p in (0..8 * span).step_by(SECTOR) {
            assert_eq!(e.verdict(p as u64, SECTOR as u64), Some(one(p)));
        }
        assert!(
            (hi - 8 * span..hi)
                .step_by(SECTOR)
                .all(|p| e.verdict(p as u64, SECTOR as u64).is_none())
        );
        // A slot being written answers nothing.
        e.slots[0]
            .tag
            .store(BUSY, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(e.verdict(0, SECTOR as u64), None);
    }
}
