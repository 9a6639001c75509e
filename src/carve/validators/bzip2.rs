//! bzip2: blocks between 48-bit magics, closed by the stream's combined CRC.
//!
//! Structure (bzip2 format notes, Seward's `bzip2` 1.0 sources): `BZh` and
//! the block size digit `1`-`9`; then, packed as bits (not byte-aligned
//! after the first), blocks that each start with the magic `0x314159265359`
//! and the block's CRC-32, and the end-of-stream magic `0x177245385090`
//! followed by the combined CRC (for each block, `combined =
//! rotl(combined, 1) ^ block_crc`) and padding to a byte. Streams may be concatenated
//! (pbzip2, lbzip2).
//!
//! The end is found without decoding: the bits are scanned for the two
//! magics, each block's CRC is folded into the combined CRC, and the stream
//! ends when the end-of-stream magic's CRC equals it, which ties every block
//! of the stream together. The first block's header is checked before the
//! scan (randomised bit 0, `origPtr` within the block size, a non-empty
//! symbol map, 2-6 Huffman tables, at least one selector).
//!
//! * `None`: a bad block size digit or first block header;
//! * `Complete`: the combined CRC matches; length = the end of the last
//!   stream (another follows while the next bytes start a stream);
//! * `Partial`: the window ends first (length = window), more compressed
//!   bytes than a block of that size can take pass without a magic
//!   (damaged, length = the last magic), the combined CRC does not match
//!   (length = the stream's end), or another stream's header (`BZh`, a size
//!   digit, a byte-aligned block magic) comes before the end-of-stream magic
//!   (truncated, length = that header).
//!
//! One forward pass over the stream's bytes, at most a block's worth
//! (1.25 × 100 kB × the size digit, plus slack) past the last magic, and
//! never past the next stream's header: on headers packed in noise each
//! candidate's walk ends at the next, not at the image's end.

use super::Verdict;
use super::read::{CHUNK, Src};

const BLOCK: u64 = 0x3141_5926_5359;
const EOS: u64 = 0x1772_4538_5090;
const MASK48: u64 = (1 << 48) - 1;
/// Streams followed at most.
const MAX_STREAMS: u32 = 100_000;

enum Stream {
    /// The stream ends at this byte offset.
    Ok(u64),
    NotBzip2,
    Cut,
    /// Damaged: a partial verdict.
    Bad(u64, String),
}

/// The first block's header fields, from bit 80 of the stream (after the
/// 4-byte header, the block magic and its CRC).
fn header_ok(src: &Src, pos: u64, level: u64) -> bool {
    // randomised (1), origPtr (24), inUse16 (16), a 16-bit map per set bit
    // of inUse16, nGroups (3), nSelectors (15): at most 315 bits.
    let mut b = [0u8; 40];
    let n = src.read(pos + 14, &mut b);
    let bit =
        |i: usize| -> Option<u64> { (i / 8 < n).then(|| u64::from((b[i / 8] >> (7 - i % 8)) & 1)) };
    let bits = |from: usize, count: usize| -> Option<u64> {
        (from..from + count).try_fold(0u64, |v, i| Some((v << 1) | bit(i)?))
    };
    let (Some(randomised), Some(orig_ptr), Some(in_use16)) = (bit(0), bits(1, 24), bits(25, 16))
    else {
        return false;
    };
    if randomised != 0 || orig_ptr >= level * 100_000 || in_use16 == 0 {
        return false;
    }
    let mut at = 41;
    let mut used = 0u32;
    for k in 0..16 {
        if in_use16 >> (15 - k) & 1 == 1 {
            let Some(m) = bits(at, 16) else {
                return false;
            };
            used += m.count_ones();
            at += 16;
        }
    }
    let (Some(groups), Some(selectors)) = (bits(at, 3), bits(at + 3, 15)) else {
        return false;
    };
    used > 0 && (2..=6).contains(&groups) && (1..=18_002).contains(&selectors)
}

/// The verdict's note for a stream cut short by another stream's header.
const NEXT_STREAM: &str = "another bzip2 stream starts inside this one (truncated)";

/// Whether the byte-aligned block magic that ends at `end` is another
/// stream's first (`BZh` and a size digit before it) rather than a block of
/// the stream at `pos`. A real stream meets none: its magics are packed as
/// bits, and the stream header before a byte-aligned one is a 1 in 2^32
/// accident. Hostile input meets one per header: each stream's walk stops at
/// the next header, so the walks of all candidates read the image about once.
fn next_stream_at(held: &mut Held, end: u64, pos: u64) -> bool {
    end >= pos + 20
        && held
            .bytes4(end - 10)
            .is_some_and(|h| &h[..3] == b"BZh" && (b'1'..=b'9').contains(&h[3]))
}

fn stream(src: &Src, pos: u64) -> Stream {
    let Some(h) = src.bytes::<10>(pos) else {
        return Stream::Cut;
    };
    if &h[..3] != b"BZh" || !(b'1'..=b'9').contains(&h[3]) {
        return Stream::NotBzip2;
    }
    let level = u64::from(h[3] - b'0');
    let first_magic = h[4..10] == [0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
    let eos_first = h[4..10] == [0x17, 0x72, 0x45, 0x38, 0x50, 0x90];
    if !(first_magic && header_ok(src, pos, level) || eos_first) {
        return Stream::NotBzip2;
    }
    let max_gap = level * 125_000 + 4096;
    let mut held = Held::new(src);
    // The first bit the next magic may start at: the stream's first, then
    // any whose last bit follows the last CRC read.
    let mut from = (pos + 4) * 8;
    let mut last_magic = pos + 4; // the byte after the last magic
    let mut combined = 0u32;
    loop {
        // A magic ends at most `max_gap` bytes past the last (the byte it
        // ends in starts at most that far on).
        let limit = last_magic.saturating_add(max_gap + 1);
        let Some((m, eos)) = next_magic(&mut held, from, limit.min(src.len())) else {
            return if limit <= src.len() {
                Stream::Bad(
                    last_magic,
                    "no block or end-of-stream magic where one must be (damaged)".into(),
                )
            } else {
                Stream::Cut
            };
        };
        let magic_end = m + 48;
        last_magic = magic_end.div_ceil(8);
        if !eos && magic_end.is_multiple_of(8) && next_stream_at(&mut held, last_magic, pos) {
            // Another stream's header: this one is cut short there.
            return Stream::Bad(last_magic - 10, NEXT_STREAM.into());
        }
        let Some(crc) = held.u32_at_bit(magic_end) else {
            return Stream::Cut;
        };
        if eos {
            let end = (magic_end + 32).div_ceil(8);
            return if crc == combined {
                Stream::Ok(end)
            } else {
                Stream::Bad(end, "combined CRC does not match".into())
            };
        }
        combined = combined.rotate_left(1) ^ crc;
        from = magic_end + 32 - 47;
    }
}

/// The stream's bytes, read in pieces (256 bytes first, doubling to
/// [`CHUNK`]) and held: the magic search and the CRC reads read each byte
/// of the stream about once, however small its blocks.
struct Held<'s, 'a> {
    src: &'s Src<'a>,
    buf: Vec<u8>,
    /// The window offset of `buf[0]`.
    off: u64,
    piece: usize,
}

impl<'s, 'a> Held<'s, 'a> {
    fn new(src: &'s Src<'a>) -> Self {
        Held {
            src,
            buf: Vec::new(),
            off: 0,
            piece: 256,
        }
    }

    /// Whether the held bytes run to the window's end.
    fn to_end(&self) -> bool {
        self.off + self.buf.len() as u64 >= self.src.len()
    }

    /// The bytes from `at` on (at least 7 where the window has them), and
    /// whether they run to the window's end.
    fn from(&mut self, at: u64) -> (&[u8], bool) {
        let held_end = self.off + self.buf.len() as u64;
        if at < self.off || at > held_end || (at + 7 > held_end && !self.to_end()) {
            let want = self.piece;
            self.piece = (self.piece * 2).min(CHUNK);
            self.buf.resize(want, 0);
            let got = self.src.read(at, &mut self.buf);
            self.buf.truncate(got);
            self.off = at;
        }
        let to_end = self.to_end();
        let i = usize::try_from(at - self.off).unwrap_or(usize::MAX);
        (self.buf.get(i..).unwrap_or(&[]), to_end)
    }

    fn bytes4(&mut self, at: u64) -> Option<[u8; 4]> {
        self.from(at).0.get(..4)?.try_into().ok()
    }

    /// The 32 bits from bit `bit` of the window.
    fn u32_at_bit(&mut self, bit: u64) -> Option<u32> {
        let shift = (bit % 8) as u32;
        let need = (shift as usize + 32).div_ceil(8);
        let b = self.from(bit / 8).0.get(..need)?;
        let v = b.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x)) << (8 * (8 - need));
        Some((v >> (32 - shift)) as u32)
    }
}

/// The middle five bytes of each magic placed at each of the eight bit
/// shifts of a 7-byte window: every magic covers them whole.
fn finder() -> Option<&'static aho_corasick::AhoCorasick> {
    static FINDER: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::OnceLock::new();
    FINDER
        .get_or_init(|| {
            let pats: Vec<[u8; 5]> = [BLOCK, EOS]
                .iter()
                .flat_map(|&m| (0..8).map(move |s| window_bytes(m, s)))
                .collect();
            aho_corasick::AhoCorasick::new(pats).ok()
        })
        .as_ref()
}

/// Bytes 1-5 of a 7-byte window holding `magic` from its bit `shift`.
fn window_bytes(magic: u64, shift: u32) -> [u8; 5] {
    let w = magic << (8 - shift);
    let b = w.to_be_bytes(); // the window is bytes 1..8
    [b[2], b[3], b[4], b[5], b[6]]
}

/// The first block or end-of-stream magic that starts at bit `from` or
/// later and ends by byte `to` of the window: its first bit and whether it
/// ends the stream. One multi-pattern search of the bytes (every magic
/// holds one of [`window_bytes`]), then the bits of each hit's window.
fn next_magic(held: &mut Held, from: u64, to: u64) -> Option<(u64, bool)> {
    let mut ws0 = from / 8; // where the windows searched start
    while ws0 < to {
        let (s, to_end) = held.from(ws0);
        let avail = ws0 + s.len() as u64;
        let last = to_end || avail >= to;
        // Windows starting in [ws0, ws0 + starts) are checked here (all of
        // those held when no more bytes are needed).
        let starts = if last {
            s.len()
        } else {
            s.len().saturating_sub(6)
        };
        let end = to.min(avail);
        let mut at = 1usize; // a hit at `i` is of the window at `i - 1`
        while at <= starts {
            let i = match finder() {
                Some(f) => match f.find(aho_corasick::Input::new(s).range(at..)) {
                    Some(m) => m.start(),
                    None => break,
                },
                None => at,
            };
            if i > starts {
                break;
            }
            if let Some(hit) = window_magic(s, i - 1, ws0, (from, end)) {
                return Some(hit);
            }
            at = i + 1;
        }
        if last || starts == 0 {
            return None;
        }
        ws0 += starts as u64;
    }
    None
}

/// A magic in the 7-byte window at `s[ws..]` (window offset `ws0 + ws`)
/// that starts at bit `from` or later and ends by byte `end`.
fn window_magic(s: &[u8], ws: usize, ws0: u64, (from, end): (u64, u64)) -> Option<(u64, bool)> {
    let mut b = [0u8; 8];
    let w = s.get(ws..)?;
    let n = w.len().min(7);
    b[1..=n].copy_from_slice(&w[..n]);
    let v = u64::from_be_bytes(b);
    let first = (ws0 + ws as u64) * 8;
    (0..8u64).find_map(|shift| {
        let start = first + shift;
        let m = (v >> (8 - shift)) & MASK48;
        (start >= from && (start + 48).div_ceil(8) <= end && (m == BLOCK || m == EOS))
            .then_some((start, m == EOS))
    })
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut pos = 0u64;
    let mut streams = 0u32;
    while streams < MAX_STREAMS {
        match stream(&src, pos) {
            Stream::Ok(end) => {
                streams += 1;
                pos = end;
                let next = src.bytes::<4>(pos);
                if !next.is_some_and(|b| &b[..3] == b"BZh" && (b'1'..=b'9').contains(&b[3])) {
                    break;
                }
            }
            Stream::NotBzip2 if streams == 0 => return None,
            Stream::NotBzip2 => break,
            Stream::Cut => return Some(Verdict::partial(src.len(), src.cut_note())),
            Stream::Bad(at, note) => {
                if streams > 0 {
                    break;
                }
                return Some(Verdict::partial(at, note));
            }
        }
    }
    let mut v = Verdict::complete(pos);
    if streams > 1 {
        v.notes.push(format!("{streams} streams"));
    }
    Some(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// sample3.bz2 of bzip2 1.0.8 would do, but the tests make their own:
    /// a stream written bit by bit (block magic, CRC, a header that passes,
    /// opaque bits, end-of-stream magic, combined CRC).
    pub fn make(crcs: &[u32], body: &[u8]) -> Vec<u8> {
        let mut bits: Vec<bool> = Vec::new();
        let put = |v: u64, n: u32, bits: &mut Vec<bool>| {
            for k in (0..n).rev() {
                bits.push((v >> k) & 1 == 1);
            }
        };
        let mut combined = 0u32;
        for &c in crcs {
            put(super::BLOCK, 48, &mut bits);
            put(u64::from(c), 32, &mut bits);
            put(0, 1, &mut bits); // not randomised
            put(5, 24, &mut bits); // origPtr
            put(0x8000, 16, &mut bits); // inUse16
            put(0x0100, 16, &mut bits); // the first map: one symbol
            put(2, 3, &mut bits); // nGroups
            put(1, 15, &mut bits); // nSelectors
            for &b in body {
                put(u64::from(b), 7, &mut bits); // unaligned on purpose
            }
            combined = combined.rotate_left(1) ^ c;
        }
        put(super::EOS, 48, &mut bits);
        put(u64::from(combined), 32, &mut bits);
        let mut f = b"BZh9".to_vec();
        for ch in bits.chunks(8) {
            let mut b = 0u8;
            for (i, &x) in ch.iter().enumerate() {
                b |= u8::from(x) << (7 - i);
            }
            f.push(b);
        }
        f
    }

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        make(
            &[0x1234_5678, 0x9ABC_DEF0],
            b"opaque compressed bits of a block",
        )
    }

    #[test]
    fn valid_multi_stream_cut() {
        let f = seed();
        assert_complete("bzip2", &f);
        assert_prefixes("bzip2", &f);
        let mut two = f.clone();
        two.extend_from_slice(&make(&[7], b"x"));
        assert_complete("bzip2", &two);
    }

    #[test]
    fn bad_crc_and_garbage() {
        let mut f = seed();
        let n = f.len();
        f[n - 2] ^= 0x10; // combined CRC
        let v = run("bzip2", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, n as u64));
        let mut junk = b"BZh91AY&SY".to_vec();
        junk.extend([0xFFu8; 300]);
        assert!(run("bzip2", &junk).is_none());
    }

    #[test]
    fn no_magic_is_bounded() {
        // A valid start, then 2 MB without a magic: damaged, not a scan to
        // the window's end.
        let f = seed();
        let mut g = f[..20].to_vec();
        g.extend(std::iter::repeat_n(0x55u8, 2 << 20));
        let v = run("bzip2", &g).unwrap();
        assert_eq!(v.status, Status::Partial);
        assert!(v.length < 1 << 20);
    }

    #[test]
    fn next_header_ends_a_truncated_stream() {
        // A stream cut before its end-of-stream magic, then a whole one: the
        // first ends where the second starts, the second is complete.
        let whole = seed();
        let cut = &whole[..whole.len() - 11];
        let mut f = cut.to_vec();
        f.extend_from_slice(&whole);
        let v = run("bzip2", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, cut.len() as u64));
        assert!(v.notes.iter().any(|n| n.contains("another bzip2 stream")));
        assert_complete("bzip2", &f[cut.len()..]);
    }

    /// The walk as it was first written, bit by bit (with the stop at the
    /// next stream's header): the reference the search of the magics must
    /// agree with. `(kind, offset)`: 0 ok, 1 not bzip2, 2 cut, 3 bad.
    fn bit_by_bit(d: &[u8], pos: usize) -> (u8, u64) {
        let Some(h) = d.get(pos..pos + 10) else {
            return (2, 0);
        };
        if &h[..3] != b"BZh" || !(b'1'..=b'9').contains(&h[3]) {
            return (1, 0);
        }
        let slice = Slice(d);
        let src = super::super::read::Src::new(&slice, 0, NO_LIMIT);
        let level = u64::from(h[3] - b'0');
        let first = h[4..10] == [0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
        let eos_first = h[4..10] == [0x17, 0x72, 0x45, 0x38, 0x50, 0x90];
        if !(first && super::header_ok(&src, pos as u64, level) || eos_first) {
            return (1, 0);
        }
        let max_gap = level * 125_000 + 4096;
        let (mut reg, mut bits, mut last, mut combined) = (0u64, 0u64, 0u64, 0u32);
        let (mut want, mut eos) = (0u32, false);
        let start = pos as u64 + 4;
        for (c, &byte) in d.iter().enumerate().skip(pos + 4) {
            let at = c as u64 + 1;
            for k in (0..8).rev() {
                reg = (reg << 1) | u64::from((byte >> k) & 1);
                bits += 1;
                if want > 0 {
                    want -= 1;
                    if want == 0 {
                        let crc = reg as u32;
                        if eos {
                            return (if crc == combined { 0 } else { 3 }, at);
                        }
                        combined = combined.rotate_left(1) ^ crc;
                    }
                    continue;
                }
                let m = reg & super::MASK48;
                if bits >= 48 && (m == super::BLOCK || m == super::EOS) {
                    if m == super::BLOCK
                        && k == 0
                        && at >= start + 16
                        && &d[c - 9..c - 6] == b"BZh"
                        && (b'1'..=b'9').contains(&d[c - 6])
                    {
                        return (3, at - 10);
                    }
                    (eos, want, last) = (m == super::EOS, 32, at);
                }
            }
            if at - last.max(start) > max_gap {
                return (3, last.max(start));
            }
        }
        (2, 0)
    }

    fn searched(d: &[u8], pos: usize) -> (u8, u64) {
        let slice = Slice(d);
        let src = super::super::read::Src::new(&slice, 0, NO_LIMIT);
        match super::stream(&src, pos as u64) {
            super::Stream::Ok(e) => (0, e),
            super::Stream::NotBzip2 => (1, 0),
            super::Stream::Cut => (2, 0),
            super::Stream::Bad(e, _) => (3, e),
        }
    }

    /// `v` as `n` bits at bit `at` of `d` (most significant first).
    fn put_bits(d: &mut [u8], at: usize, v: u64, n: usize) {
        for i in 0..n {
            let (byte, bit) = ((at + i) / 8, 7 - (at + i) % 8);
            if let Some(b) = d.get_mut(byte) {
                let one = (v >> (n - 1 - i)) & 1 == 1;
                *b = (*b & !(1 << bit)) | (u8::from(one) << bit);
            }
        }
    }

    #[test]
    fn searching_the_magics_walks_as_bit_by_bit() {
        // Streams with magics planted at every bit shift, noise, stream
        // headers, cuts and gaps: the verdict of every start agrees.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut checked = 0;
        for round in 0..1000 {
            let mut d: Vec<u8> = if round % 3 == 0 {
                seed()
            } else {
                make(&[next() as u32, next() as u32, next() as u32], &[0x5A; 40])
            };
            let mut len = d.len() + (next() % 3000) as usize;
            if round % 10 == 0 {
                // Level 1: gaps of 129 096 bytes at most, past or not.
                d[3] = b'1';
                len = 127_000 + (next() % 6000) as usize;
            }
            d.resize(len, 0);
            for b in d.iter_mut().skip(60) {
                if next() % 4 == 0 {
                    *b = next() as u8;
                }
            }
            for _ in 0..(next() % 12) {
                let at = 80 + (next() as usize % (d.len() * 8 - 80));
                let magic = if next() % 3 == 0 {
                    super::EOS
                } else {
                    super::BLOCK
                };
                put_bits(&mut d, at, magic, 48);
                if next() % 3 == 0 {
                    // Another overlapping the CRC's bits, or just after.
                    let then = at + 33 + next() as usize % 60;
                    put_bits(&mut d, then, super::BLOCK, 48);
                }
                if next() % 4 == 0 {
                    let crc = next() % (1 << 32);
                    put_bits(&mut d, at + 48, crc, 32);
                }
                if next() % 5 == 0 && at.is_multiple_of(8) && at >= 32 {
                    let h = u64::from_be_bytes([0, 0, 0, 0, b'B', b'Z', b'h', b'9']);
                    put_bits(&mut d, at - 32, h, 32);
                }
            }
            if next() % 4 == 0 {
                let keep = 10 + next() as usize % d.len();
                d.truncate(keep.min(d.len()));
            }
            for pos in [0usize, (next() as usize) % d.len()] {
                assert_eq!(
                    searched(&d, pos),
                    bit_by_bit(&d, pos),
                    "round {round} at {pos}"
                );
                checked += usize::from(bit_by_bit(&d, pos).0 != 1);
            }
        }
        assert!(checked > 100, "only {checked} walks");
    }

    #[test]
    fn real_bzip2() {
        let files = real_files(&["/usr/share/doc"], &[".bz2"], 20);
        if !files.is_empty() {
            check_real("bzip2", &files);
        }
    }
}
