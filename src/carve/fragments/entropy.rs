//! What the scan saw of every sector, for the JPEG searches' prefilter:
//! each 512-byte sector summarised (entropy-coded data or not, an EOI,
//! bytes such data cannot hold) into a bounded ring ([`EntropySectors`]),
//! so a search asks whether a window looks like entropy-coded data without
//! reading it again.

/// Bytes of a candidate second fragment examined by the JPEG search's
/// `entropy_like` (a window of sectors here).
pub(super) const LOOK: u64 = 4096;

/// The sector of [`EntropySectors`].
pub(super) const SECTOR: usize = 512;

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
pub(super) mod sum {
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
pub(super) const EV_EOI: u32 = 1;
pub(super) const EV_BAD: u32 = 2;

/// What [`ff_rule`] makes of an `FF` followed by `b`: 0 (goes on),
/// [`EV_EOI`] or [`EV_BAD`].
pub(super) fn ff_class(b: u8) -> u32 {
    match b {
        0x00 | 0xD0..=0xD7 | 0xFF | 0xC4 | 0xDA | 0xDB | 0xDD => 0,
        0xD9 => EV_EOI,
        _ => EV_BAD,
    }
}

/// Bits of 64 bytes, bit `i` for byte `i`: the byte is `FF`, and its top
/// bit is set.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Masks {
    pub(super) ff: u64,
    pub(super) high: u64,
}

/// [`Masks`] of 64 bytes, 16 at a time (SSE2, which every x86-64 CPU has).
#[cfg(target_arch = "x86_64")]
pub(super) fn masks(c: &[u8]) -> Masks {
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
pub(super) fn masks_bytewise(c: &[u8]) -> Masks {
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
pub(super) fn first_uniform(s: &[u8]) -> u32 {
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
pub(super) fn summarize(s: &[u8], next: Option<u8>) -> u32 {
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
pub(super) fn window_verdict(words: &[u32]) -> Option<bool> {
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
pub(super) const SLOT_SECTORS: u64 = 32;
/// Most slots of [`EntropySectors`]: 1 GiB of sectors, about 8.5 MiB.
/// The scan runs at most a few blocks ahead of the carver (its match
/// batches wait in a bounded queue), and the searches look no further
/// than [`super::FragLimits::max_gap`] either side of their file.
pub(super) const MAX_SLOTS: u64 = 1 << 16;
/// A slot's tag while its words are being written.
pub(super) const BUSY: u64 = u64::MAX;

/// One chunk of [`EntropySectors`]: which chunk it holds, and its words.
#[derive(Debug, Default)]
pub(super) struct Slot {
    pub(super) tag: std::sync::atomic::AtomicU64,
    pub(super) words: [std::sync::atomic::AtomicU32; SLOT_SECTORS as usize],
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
    pub(super) slots: Box<[Slot]>,
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
    pub(super) fn slot(&self, c: u64) -> Option<(&Slot, u64)> {
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
