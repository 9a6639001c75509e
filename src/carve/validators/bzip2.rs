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
//!   (damaged, length = the last magic), or the combined CRC does not match
//!   (length = the stream's end).
//!
//! One forward pass over the stream's bytes, at most a block's worth
//! (1.25 × 100 kB × the size digit, plus slack) past the last magic.

use super::Verdict;
use super::read::{Cursor, Src};

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
    let mut cur = Cursor::new(*src, pos + 4);
    let mut reg = 0u64;
    let mut bits = 0u64; // bits shifted in since pos + 4
    let mut last_magic = 0u64; // byte offset of the last magic
    let mut combined = 0u32;
    // Bits still to read for a CRC after a magic (0: scanning), and whether
    // it is the end-of-stream magic's.
    let mut want = 0u32;
    let mut eos = false;
    loop {
        let Some(byte) = cur.u8() else {
            return Stream::Cut;
        };
        for k in (0..8).rev() {
            reg = (reg << 1) | u64::from((byte >> k) & 1);
            bits += 1;
            if want > 0 {
                want -= 1;
                if want == 0 {
                    let crc = reg as u32;
                    if eos {
                        let end = cur.pos();
                        return if crc == combined {
                            Stream::Ok(end)
                        } else {
                            Stream::Bad(end, "combined CRC does not match".into())
                        };
                    }
                    combined = combined.rotate_left(1) ^ crc;
                }
                continue;
            }
            if bits >= 48 {
                let m = reg & MASK48;
                if m == BLOCK || m == EOS {
                    eos = m == EOS;
                    want = 32;
                    last_magic = cur.pos();
                }
            }
        }
        if cur.pos() - last_magic.max(pos + 4) > max_gap {
            return Stream::Bad(
                last_magic.max(pos + 4),
                "no block or end-of-stream magic where one must be (damaged)".into(),
            );
        }
    }
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
    fn real_bzip2() {
        let files = real_files(&["/usr/share/doc"], &[".bz2"], 20);
        if !files.is_empty() {
            check_real("bzip2", &files);
        }
    }
}
