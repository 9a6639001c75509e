//! JPEG: no checksum; the entropy decode across the join is the proof.
//!
//! Also the JPEG-only state a carving shares: what the scan saw of every
//! sector ([`EntropySectors`]), the memo of decoded candidate joins
//! ([`CheckMemo`]) and the validation stage's JPEG verdicts with the
//! prefilter's ([`KnownJpegs`]).
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

/// The sector of [`EntropySectors`].
const SECTOR: usize = 512;

/// One sector's part in [`entropy_like_bytes`] of any window of whole
/// sectors holding it, packed in a word (0: not known):
///
/// * bits 0-9: bytes with the top bit set, up to and including an EOI's
///   `D9` when the sector holds the first one, else all of the sector's;
/// * bits 10-18 and 19-20: where the sector's first decisive `FF` is, and
///   what it is (0 none, [`EV_EOI`], [`EV_BAD`]); an `FF` as the last byte
///   is decided by the next sector's first byte, bits 27-29;
/// * bits 21-25: the first aligned 32-byte chunk of one value (16: none);
/// * bit 26: at least 2 of the first 64 bytes have the top bit set;
/// * bit 27: the last byte is an `FF` (no decisive one before it); bits
///   28-29: the class of the byte after the sector (0 any, [`EV_EOI`],
///   [`EV_BAD`], 3 not seen);
/// * bit 31: known.
mod sum {
    pub const COUNT: u32 = 0x3FF;
    pub const POS_SHIFT: u32 = 10;
    pub const EV_SHIFT: u32 = 19;
    pub const UNI_SHIFT: u32 = 21;
    pub const HEAD_OK: u32 = 1 << 26;
    pub const LAST_FF: u32 = 1 << 27;
    pub const NEXT_SHIFT: u32 = 28;
    pub const KNOWN: u32 = 1 << 31;
    pub const NOT_SEEN: u32 = 3;
}
const EV_EOI: u32 = 1;
const EV_BAD: u32 = 2;

/// What [`ff_rule`] makes of an `FF` followed by `b`: 0 (goes on),
/// [`EV_EOI`] or [`EV_BAD`].
fn ff_class(b: u8) -> u32 {
    match b {
        0x00 | 0xD0..=0xD7 | 0xFF | 0xC4 | 0xDA | 0xDB | 0xDD => 0,
        0xD9 => EV_EOI,
        _ => EV_BAD,
    }
}

/// Bits of 64 bytes, bit `i` for byte `i`: the byte is `FF`, and its top
/// bit is set.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Masks {
    ff: u64,
    high: u64,
}

/// [`Masks`] of 64 bytes, 16 at a time (SSE2, which every x86-64 CPU has).
#[cfg(target_arch = "x86_64")]
fn masks(c: &[u8]) -> Masks {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let mut m = Masks::default();
    for (q, v) in c.chunks_exact(16).take(4).enumerate() {
        // SAFETY: SSE2 is part of the x86-64 baseline (every x86-64 CPU
        // has it), and `v` is 16 bytes long: the unaligned 16-byte load
        // reads exactly them.
        let (h, f) = unsafe {
            let x = _mm_loadu_si128(v.as_ptr().cast::<__m128i>());
            let ones = _mm_set1_epi8(-1);
            (
                _mm_movemask_epi8(x),
                _mm_movemask_epi8(_mm_cmpeq_epi8(x, ones)),
            )
        };
        m.high |= u64::from(h as u16) << (16 * q);
        m.ff |= u64::from(f as u16) << (16 * q);
    }
    m
}

/// [`Masks`] of 64 bytes, a byte at a time.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn masks_bytewise(c: &[u8]) -> Masks {
    let mut m = Masks::default();
    for (i, &b) in c.iter().take(64).enumerate() {
        m.ff |= u64::from(b == 0xFF) << i;
        m.high |= u64::from(b >> 7) << i;
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
use masks_bytewise as masks;

/// The first aligned 32-byte chunk of `s` holding one value (16: none).
fn first_uniform(s: &[u8]) -> u32 {
    let word = |c: &[u8], k: usize| {
        c.get(k * 8..k * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_ne_bytes)
    };
    s.chunks_exact(32)
        .position(|c| {
            let w0 = word(c, 0);
            w0 == word(c, 1)
                && w0 == word(c, 2)
                && w0 == word(c, 3)
                && w0 == u64::from(c[0]) * 0x0101_0101_0101_0101
        })
        .unwrap_or(16) as u32
}

/// The [`sum`] word of a whole sector `s`; `next` is the byte after it,
/// when seen. 64 bytes at a time: most foreign data has a bad `FF`
/// within a few hundred bytes, and nothing after it matters.
fn summarize(s: &[u8], next: Option<u8>) -> u32 {
    // Zeroed or filled space: a window reaching a sector whose first 32
    // bytes are one value fails there (its first decisive FF, if any, is
    // at 31 or later: that chunk is in the body), whatever follows.
    if s.get(..32).is_some_and(|c| first_uniform(c) == 0) {
        return sum::KNOWN;
    }
    let mut w = sum::KNOWN;
    let mut high = 0u32;
    let mut last_ff = false;
    for (k, c) in s.chunks_exact(64).take(SECTOR / 64).enumerate() {
        let m = masks(c);
        if k == 0 && m.high.count_ones() >= 2 {
            w |= sum::HEAD_OK;
        }
        // The first decisive FF (one as the last byte waits for the next
        // byte).
        let mut bits = m.ff;
        while bits != 0 {
            let i = k * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let Some(&b) = s.get(i + 1) else {
                last_ff = i + 1 == SECTOR;
                break;
            };
            let kind = ff_class(b);
            if kind == EV_BAD {
                // (Nothing else of the sector matters.)
                return w | EV_BAD << sum::EV_SHIFT | (i as u32) << sum::POS_SHIFT;
            }
            if kind == EV_EOI {
                // High bytes up to and including the D9.
                let upto = i % 64 + 2;
                let part = if upto >= 64 {
                    m.high
                } else {
                    m.high & ((1u64 << upto) - 1)
                };
                // (An FF as a chunk's last byte: its D9 opens the next.)
                let d9 = u32::from(upto > 64);
                return w
                    | EV_EOI << sum::EV_SHIFT
                    | (i as u32) << sum::POS_SHIFT
                    | (high + part.count_ones() + d9) & sum::COUNT
                    | first_uniform(s) << sum::UNI_SHIFT;
            }
        }
        high += m.high.count_ones();
    }
    w |= high & sum::COUNT | first_uniform(s) << sum::UNI_SHIFT;
    if last_ff {
        w |= sum::LAST_FF | next.map_or(sum::NOT_SEEN, ff_class) << sum::NEXT_SHIFT;
    }
    w
}

/// [`entropy_like_bytes`] of a window of whole sectors, from their
/// [`sum`] words; `None` when one is not known (or the verdict depends on
/// a byte that was not seen).
fn window_verdict(words: &[u32]) -> Option<bool> {
    let m = words.len();
    let (mut count, mut seen) = (0usize, m * SECTOR);
    for (j, &w) in words.iter().enumerate() {
        if w & sum::KNOWN == 0 {
            return None;
        }
        if j == 0 && w & sum::HEAD_OK == 0 {
            return Some(false);
        }
        let uniform = ((w >> sum::UNI_SHIFT) & 0x1F) as usize;
        let pos = ((w >> sum::POS_SHIFT) & 0x1FF) as usize;
        let high = (w & sum::COUNT) as usize;
        match (w >> sum::EV_SHIFT) & 3 {
            EV_BAD => return Some(false),
            EV_EOI => {
                // The body ends after the D9: the chunks wholly before it count.
                if uniform < 16 && (uniform + 1) * 32 <= pos + 2 {
                    return Some(false);
                }
                count += high;
                seen = j * SECTOR + pos + 2;
                break;
            }
            _ => {
                if uniform < 16 {
                    return Some(false);
                }
                count += high;
                // (An FF as the window's last byte is followed by nothing.)
                if w & sum::LAST_FF != 0 && j + 1 < m {
                    match (w >> sum::NEXT_SHIFT) & 3 {
                        0 => {}
                        // The D9 is the next sector's first byte (top bit set).
                        EV_EOI => {
                            count += 1;
                            seen = (j + 1) * SECTOR + 1;
                            break;
                        }
                        EV_BAD => return Some(false),
                        _ => return None,
                    }
                }
            }
        }
    }
    Some(seen >= 16 && count * 16 >= seen)
}

/// Sectors per slot of [`EntropySectors`] (a chunk).
const SLOT_SECTORS: u64 = 32;
/// Most slots of [`EntropySectors`]: 1 GiB of sectors, about 8.5 MiB.
/// The scan runs at most a few blocks ahead of the carver (its match
/// batches wait in a bounded queue), and the searches look no further
/// than [`super::FragLimits::max_gap`] either side of their file.
const MAX_SLOTS: u64 = 1 << 16;
/// A slot's tag while its words are being written.
const BUSY: u64 = u64::MAX;

/// One chunk of [`EntropySectors`]: which chunk it holds, and its words.
#[derive(Debug, Default)]
struct Slot {
    tag: std::sync::atomic::AtomicU64,
    words: [std::sync::atomic::AtomicU32; SLOT_SECTORS as usize],
}

/// What the scan saw of every sector it passed, for [`entropy_like`] of
/// any window of whole sectors ([`summarize`], [`window_verdict`]), so
/// that the JPEG searches' prefilter need not read the clusters it
/// examines: on the fragmented ext2 image the searches examined 52 000
/// clusters (80% of the image), read through 64 KiB blocks (about the
/// whole image again); each scan worker summarises the blocks it searched
/// while they are in its cache.
///
/// A ring of slots of [`SLOT_SECTORS`] sectors (a chunk), each with a tag
/// (which of the chunks sharing the slot it holds: the chunk's number
/// divided by the ring's size, plus one) and a word per sector. A slot is
/// written whole by the scan worker that saw its whole chunk in one block
/// (a chunk across two blocks is not written), under a sequence lock: the
/// tag is [`BUSY`] while the words change, and a reader takes the words
/// only when the tag it read before them is still there after them. A
/// slot of another chunk, or none, says nothing, and the search reads the
/// window as before: the answer is the same either way; only what is read
/// differs. Bounded by [`MAX_SLOTS`] whatever the image's size.
#[derive(Debug)]
pub struct EntropySectors {
    slots: Box<[Slot]>,
}

impl EntropySectors {
    /// A ring for an image of `len` bytes.
    pub fn new(len: u64) -> Self {
        let n = len
            .div_ceil(SECTOR as u64 * SLOT_SECTORS)
            .clamp(1, MAX_SLOTS);
        let slots: Box<[Slot]> = (0..n).map(|_| Slot::default()).collect();
        // Written once here, before anything reads them: a zeroed
        // allocation's pages read first map the shared zero page, and the
        // scan workers' first writes would then each fault again and flush
        // the other cores' TLBs.
        for s in &slots {
            s.tag.store(0, std::sync::atomic::Ordering::Relaxed);
        }
        EntropySectors { slots }
    }

    /// The slot of chunk `c`, and the tag it carries when it holds `c`.
    fn slot(&self, c: u64) -> Option<(&Slot, u64)> {
        let n = self.slots.len() as u64;
        let tag = (c / n).checked_add(1).filter(|&t| t != BUSY)?;
        Some((self.slots.get(usize::try_from(c % n).ok()?)?, tag))
    }

    /// Records the chunks wholly inside `owned`, the bytes at image offset
    /// `offset`.
    pub fn record(&self, offset: u64, owned: &[u8]) {
        use std::sync::atomic::{Ordering, fence};
        let span = SECTOR as u64 * SLOT_SECTORS;
        let mut words = [0u32; SLOT_SECTORS as usize];
        let mut c = offset.div_ceil(span);
        while let Some((at, chunk)) = c
            .checked_mul(span)
            .and_then(|at| usize::try_from(at - offset).ok())
            .and_then(|at| Some((at, owned.get(at..at.checked_add(span as usize)?)?)))
        {
            for (k, (o, sector)) in words.iter_mut().zip(chunk.chunks_exact(SECTOR)).enumerate() {
                let next = owned.get(at + (k + 1) * SECTOR).copied();
                *o = summarize(sector, next);
            }
            if let Some((slot, tag)) = self.slot(c) {
                let cur = slot.tag.load(Ordering::Relaxed);
                // (Another worker writing the slot: this chunk is not kept.)
                if cur != BUSY
                    && slot
                        .tag
                        .compare_exchange(cur, BUSY, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    fence(Ordering::Release);
                    for (a, &w) in slot.words.iter().zip(&words) {
                        a.store(w, Ordering::Relaxed);
                    }
                    slot.tag.store(tag, Ordering::Release);
                }
            }
            c += 1;
        }
    }

    /// [`entropy_like_bytes`] of the `n` bytes at `pos` (a whole number of
    /// sectors, at most [`LOOK`], at a sector boundary), when the scan
    /// saw all of them.
    pub fn verdict(&self, pos: u64, n: u64) -> Option<bool> {
        use std::sync::atomic::{Ordering, fence};
        let sector = SECTOR as u64;
        if !pos.is_multiple_of(sector) || !n.is_multiple_of(sector) || n == 0 || n > LOOK {
            return None;
        }
        let mut words = [0u32; (LOOK / SECTOR as u64) as usize];
        let words = words.get_mut(..(n / sector) as usize)?;
        let first = pos / sector;
        let mut k = 0;
        while k < words.len() {
            let s = first + k as u64;
            let (slot, tag) = self.slot(s / SLOT_SECTORS)?;
            if slot.tag.load(Ordering::Acquire) != tag {
                return None;
            }
            let from = (s % SLOT_SECTORS) as usize;
            let take = (SLOT_SECTORS as usize - from).min(words.len() - k);
            for (o, a) in words[k..k + take].iter_mut().zip(&slot.words[from..]) {
                *o = a.load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if slot.tag.load(Ordering::Relaxed) != tag {
                return None;
            }
            k += take;
        }
        window_verdict(words)
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
    let splits = place_splits(head, &d, max_len, cl, block_map, b);
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
        Some(v) if whole.count() == 1 && v.broke_at.is_some() => {
            let fail_at = v.broke_at.unwrap_or(0);
            let used = v.length.max(fail_at).min(whole.len);
            if !b.ok() || !b.bytes(used.max(1)) {
                return None;
            }
            let d = Damage {
                damaged: true,
                fail_at,
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
/// (nearest the failure first, then an ext2/3 block-map boundary).
fn place_splits(
    head: &TwoRuns,
    d: &Damage,
    max_len: u64,
    cl: u64,
    block_map: Option<u64>,
    b: &Budget,
) -> Vec<u64> {
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
    splits
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

/// What the search would learn by validating the JPEG header itself: the
/// validated length (0: not a JPEG), or `None` for a verdict that is not that
/// kind of answer (cut by the window `max_len`, or shortened by the ext2/3
/// indirect-block check).
pub(super) fn owner_length(max_len: u64, verdict: Option<&Verdict>) -> Option<u64> {
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
/// Bounded: past [`MAX_KNOWN`] entries the lowest offsets are dropped.
///
/// The stage also says how far it has got ([`KnownJpegs::stage_through`]),
/// so that a search can wait for verdicts instead of decoding the same JPEGs
/// on the carver's thread ([`KnownJpegs::wait_for`]). Only who decodes
/// depends on timing, never what a search finds.
#[derive(Debug, Default)]
pub struct KnownJpegs {
    lengths: std::sync::Mutex<std::collections::BTreeMap<u64, u64>>,
    /// The JPEG searches' prefilter verdicts ([`Claims::entropy`]), shared by
    /// the carver's searches and those run ahead: each cluster is read and
    /// examined once per carving, whichever thread asks first (a verdict is
    /// a function of the image's bytes there, so who computed it does not
    /// matter). At most `MAX_KNOWN * 4`; the carver forgets those behind it.
    entropy: std::sync::Mutex<std::collections::BTreeMap<(u64, u64), bool>>,
    /// The JPEG searches' costlier decodes of candidate joins
    /// ([`CheckMemo`]), shared like the prefilter's verdicts: a search
    /// the carver runs again (its answer run ahead was not usable) or one
    /// whose window another search covered does not decode them again.
    pub(super) checks: std::sync::Mutex<CheckMemo>,
    /// The JPEG scans decoded in this carving
    /// ([`crate::carve::validators::jpeg::ScanMemo`]): the validation
    /// stage's, and the searches' proofs of joins, which a copy of a picture
    /// validated before answers.
    pub scan_memo: Arc<crate::carve::validators::jpeg::ScanMemo>,
    stage: std::sync::Mutex<Stage>,
    moved: std::sync::Condvar,
    /// Waits that found the stage behind, and their nanoseconds (for the
    /// stage profile).
    waits: std::sync::atomic::AtomicU64,
    waited_ns: std::sync::atomic::AtomicU64,
}

/// Where the validation stage stands.
#[derive(Debug, Default)]
struct Stage {
    /// Every header candidate below this offset has been validated.
    through: u64,
    /// The stage waits for the carver (its output queue is full).
    blocked: bool,
    /// The stage has ended.
    finished: bool,
}

/// Most JPEG verdicts kept (and four times as many prefilter verdicts).
const MAX_KNOWN: usize = 1 << 18;

/// Longest a search waits for the validation stage (a safety net: the stage
/// is never waiting for the carver then, so it always gets there).
const MAX_STAGE_WAIT: Duration = Duration::from_secs(60);

impl KnownJpegs {
    fn update(&self, f: impl FnOnce(&mut Stage)) {
        let mut st = self.stage.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut st);
        self.moved.notify_all();
    }

    /// The stage has validated every header candidate below `pos`.
    pub fn stage_through(&self, pos: u64) {
        self.update(|st| st.through = st.through.max(pos));
    }

    /// The stage is (or no longer is) waiting for the carver.
    pub fn stage_blocked(&self, blocked: bool) {
        self.update(|st| st.blocked = blocked);
    }

    /// The stage has ended (its verdicts are all in).
    pub fn stage_finished(&self) {
        self.update(|st| st.finished = true);
    }

    /// Waits until the stage has validated the candidates below `pos`, or
    /// waits for the carver itself (it will not get further), or has ended.
    pub fn wait_for(&self, pos: u64) {
        let t0 = Instant::now();
        let mut st = self.stage.lock().unwrap_or_else(|e| e.into_inner());
        let behind = st.through < pos && !st.blocked && !st.finished;
        while st.through < pos && !st.blocked && !st.finished {
            let Some(left) = MAX_STAGE_WAIT.checked_sub(t0.elapsed()) else {
                break;
            };
            st = match self.moved.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        drop(st);
        if behind {
            use std::sync::atomic::Ordering::Relaxed;
            self.waits.fetch_add(1, Relaxed);
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.waited_ns.fetch_add(ns, Relaxed);
        }
    }

    /// The prefilter verdict of the `n` bytes at `pos`: known, or computed
    /// by `f` (outside the lock) and kept.
    pub(super) fn entropy(&self, (pos, n): (u64, u64), f: impl FnOnce() -> bool) -> bool {
        let lock = || self.entropy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&v) = lock().get(&(pos, n)) {
            return v;
        }
        let v = f();
        let mut m = lock();
        if m.len() >= MAX_KNOWN * 4 {
            m.pop_first();
        }
        m.insert((pos, n), v);
        v
    }

    /// Forgets the prefilter verdicts below `before` (the carver's searches
    /// look no further back; those run ahead look further on).
    pub(super) fn forget_entropy(&self, before: u64) {
        let mut m = self.entropy.lock().unwrap_or_else(|e| e.into_inner());
        while m.first_key_value().is_some_and(|(&(p, _), _)| p < before) {
            m.pop_first();
        }
    }

    /// How many waits found the stage behind, and the seconds they took.
    pub fn waited(&self) -> (u64, f64) {
        use std::sync::atomic::Ordering::Relaxed;
        let ns = self.waited_ns.load(Relaxed);
        (self.waits.load(Relaxed), ns as f64 / 1e9)
    }

    /// Records the validation stage's verdict for the JPEG header at `start`.
    pub fn note(&self, start: u64, max_len: u64, verdict: Option<&Verdict>) {
        let Some(length) = owner_length(max_len, verdict) else {
            return;
        };
        let mut m = self.lengths.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(start, length);
        if m.len() > MAX_KNOWN {
            m.pop_first();
        }
    }

    fn get(&self, start: u64) -> Option<u64> {
        let m = self.lengths.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&start).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image of 512-byte sectors of every kind the prefilter tells
    /// apart: entropy-like bytes, zeros, text, a few high bytes (windows
    /// on either side of one in 16), a bad `FF`, an EOI anywhere (the last
    /// bytes too) with a bad `FF` or a run after it, a run of one value
    /// across or inside a 32-byte chunk, too few high bytes in the first
    /// 64, an `FF` as the last byte followed by each kind of first byte.
    fn sectors(n: usize) -> Vec<u8> {
        let mut next = super::xorshift(0x2545_f491_4f6c_dd1d);
        let mut img = Vec::with_capacity(n * SECTOR + 300);
        for _ in 0..n {
            let kind = next() % 13;
            let mut s: Vec<u8> = (0..SECTOR)
                .map(|_| (next() as u8 | 0x80).min(0xFE))
                .collect();
            let at = (next() as usize) % (SECTOR - 1);
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
