//! xz: streams of header, blocks, index and footer, found from the footer.
//!
//! Structure (.xz file format 1.x): a stream header (`FD 37 7A 58 5A 00`,
//! two flag bytes, CRC-32 of the flags); blocks; an index (indicator 0x00,
//! the number of records and per block its unpadded and uncompressed sizes
//! as multibyte integers, padding to 4 bytes, CRC-32); a stream footer
//! (CRC-32, `Backward Size` = index size / 4 - 1, the same two flag bytes,
//! `59 5A`). Streams may be concatenated, with stream padding (zero bytes
//! in multiples of 4) between and after them. Every part is a multiple of
//! four bytes long.
//!
//! Blocks need not say their compressed size, so the end is found without
//! decompressing: the validator looks for the footer magic `YZ` at 4-byte
//! aligned positions, and a candidate is the stream's footer when its CRC
//! matches, its flags equal the header's, the index it points back to has
//! its indicator, a matching CRC and records whose padded block sizes add up
//! to exactly the bytes between the stream header and the index. That ties
//! the whole stream together: a footer of another stream or a `YZ` in
//! compressed data does not pass.
//!
//! * `None`: a bad stream header CRC or reserved flag bits, or a first block
//!   header (or empty index) that is neither;
//! * `Complete`: every stream's footer and index check out; length = the end
//!   of the last stream plus the stream padding after it, when the padding
//!   is followed by another stream, or ends before a non-zero byte in the
//!   sector where the stream ends (padding that reaches a sector's end
//!   before foreign bytes is not included: it cannot be told from zero
//!   slack);
//! * `Partial`: no footer in the window (length = window).
//!
//! Bounded: the scan is one forward pass; the bytes CRC'd while checking
//! candidate indexes are limited to the window's length (a hostile run of
//! fake footers with long indexes ends as `Partial`).

use super::Verdict;
use super::read::Src;

const MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0];
/// Streams followed at most.
const MAX_STREAMS: u32 = 100_000;

/// A multibyte integer at `p` (at most 9 bytes): (value, bytes).
fn mbi(b: &[u8], p: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for i in 0..9 {
        let x = *b.get(p + i)?;
        v |= u64::from(x & 0x7F) << (7 * i);
        if x & 0x80 == 0 {
            return (i == 0 || x != 0).then_some((v, i + 1));
        }
    }
    None
}

enum Stream {
    Ok(u64),
    NotXz,
    Cut,
    Budget,
}

/// The stream at `pos`: its end (after the footer).
fn stream(src: &Src, pos: u64, budget: &mut u64) -> Stream {
    let Some(h) = src.bytes::<12>(pos) else {
        return Stream::Cut;
    };
    if h[..6] != MAGIC || h[6] != 0 || h[7] & 0xF0 != 0 {
        return Stream::NotXz;
    }
    if crc32fast::hash(&h[6..8]) != u32::from_le_bytes([h[8], h[9], h[10], h[11]]) {
        return Stream::NotXz;
    }
    let flags = [h[6], h[7]];
    // The first block header (size byte != 0) or the index (0x00).
    let Some(first) = src.u8(pos + 12) else {
        return Stream::Cut;
    };
    if first != 0 {
        let hsize = (u64::from(first) + 1) * 4;
        let mut bh = vec![0u8; hsize as usize];
        if !src.read_exact(pos + 12, &mut bh) {
            return Stream::Cut;
        }
        let n = bh.len();
        let want = u32::from_le_bytes([bh[n - 4], bh[n - 3], bh[n - 2], bh[n - 1]]);
        if crc32fast::hash(&bh[..n - 4]) != want || bh[1] & 0x3C != 0 {
            return Stream::NotXz;
        }
    }
    let mut scratch = Vec::new();
    let mut at = pos + 12;
    loop {
        let Some(y) = src.find(b"YZ", at, src.len(), &mut scratch) else {
            return Stream::Cut;
        };
        at = y + 1;
        if (y - pos) % 4 != 2 || y < pos + 12 + 8 + 10 {
            continue;
        }
        let fpos = y - 10;
        let Some(f) = src.bytes::<12>(fpos) else {
            return Stream::Cut;
        };
        if f[8..10] != flags
            || crc32fast::hash(&f[4..10]) != u32::from_le_bytes([f[0], f[1], f[2], f[3]])
        {
            continue;
        }
        let ilen = (u64::from(u32::from_le_bytes([f[4], f[5], f[6], f[7]])) + 1) * 4;
        let Some(ipos) = fpos.checked_sub(ilen).filter(|&i| i >= pos + 12) else {
            continue;
        };
        if *budget < ilen {
            return Stream::Budget;
        }
        *budget -= ilen;
        if index_ok(src, ipos, ilen, ipos - (pos + 12)) {
            return Stream::Ok(fpos + 12);
        }
    }
}

/// The index at `ipos` of `ilen` bytes: indicator, CRC, and records whose
/// padded unpadded sizes add up to `blocks` bytes.
fn index_ok(src: &Src, ipos: u64, ilen: u64, blocks: u64) -> bool {
    if src.u8(ipos) != Some(0) {
        return false;
    }
    let mut hc = crc32fast::Hasher::new();
    let mut scratch = Vec::new();
    src.for_each_chunk(ipos, ilen - 4, &mut scratch, |b| hc.update(b));
    if src.u32le(ipos + ilen - 4) != Some(hc.finalize()) {
        return false;
    }
    // Walk the records in pieces of up to 4 KiB, refilled when fewer than
    // the 18 bytes of a record's two integers remain.
    let end = ipos + ilen - 4;
    let mut buf = [0u8; 4096];
    let (mut base, mut n, mut i) = (ipos + 1, 0usize, 0usize);
    let refill = |base: &mut u64, n: &mut usize, i: &mut usize, buf: &mut [u8; 4096]| {
        *base += *i as u64;
        *n = ((end - *base) as usize).min(buf.len());
        *i = 0;
        src.read_exact(*base, &mut buf[..*n])
    };
    if !refill(&mut base, &mut n, &mut i, &mut buf) {
        return false;
    }
    let Some((count, k)) = mbi(&buf[..n], 0) else {
        return false;
    };
    i = k;
    if count > ilen / 2 {
        return false;
    }
    let mut total = 0u64;
    for _ in 0..count {
        if n - i < 18 && base + (n as u64) < end && !refill(&mut base, &mut n, &mut i, &mut buf) {
            return false;
        }
        let Some((unpadded, a)) = mbi(&buf[..n], i) else {
            return false;
        };
        let Some((_, b)) = mbi(&buf[..n], i + a) else {
            return false;
        };
        i += a + b;
        if unpadded < 5 {
            return false;
        }
        total = match total.checked_add(unpadded.div_ceil(4) * 4) {
            Some(t) => t,
            None => return false,
        };
    }
    let off = base + i as u64;
    // Index padding: zeros up to the CRC.
    if end < off || end - off > 3 {
        return false;
    }
    let mut pad = [0u8; 3];
    let p = (end - off) as usize;
    src.read_exact(off, &mut pad[..p]) && pad[..p].iter().all(|&b| b == 0) && total == blocks
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut budget = src.len();
    let mut pos = 0u64;
    let mut streams = 0u32;
    while streams < MAX_STREAMS {
        match stream(&src, pos, &mut budget) {
            Stream::Ok(end) => {
                streams += 1;
                pos = end;
                // Stream padding, then maybe another stream.
                let mut q = pos;
                while src.bytes::<4>(q) == Some([0; 4]) {
                    q += 4;
                    if q - pos > 1 << 20 {
                        break;
                    }
                }
                // Padding that crosses into the sector where another stream
                // begins on its boundary is taken for the gap between two
                // files (zero slack, then the next file's first sector).
                let crosses =
                    src.abs(q).is_multiple_of(512) && src.abs(pos) / 512 != src.abs(q) / 512;
                if !src.starts_with_at(q, &MAGIC) || crosses {
                    // Padding that ends before a non-zero byte in the sector
                    // where the stream ends is not slack (slack runs to the
                    // sector's end): the file's own, as the format allows.
                    if q > pos
                        && src.abs(q) / 512 == src.abs(pos) / 512
                        && src.u8(q).is_some_and(|b| b != 0)
                    {
                        pos = q;
                    }
                    break;
                }
                pos = q;
            }
            Stream::NotXz if streams == 0 => return None,
            Stream::NotXz => break,
            Stream::Cut => return Some(Verdict::partial(src.len(), src.cut_note())),
            Stream::Budget => {
                return Some(Verdict::partial(
                    src.len(),
                    "checking candidate footers used the budget; end not found",
                ));
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

    fn mbi(mut v: u64, o: &mut Vec<u8>) {
        while v >= 0x80 {
            o.push((v as u8) | 0x80);
            v >>= 7;
        }
        o.push(v as u8);
    }

    /// An xz stream with one "block" of `payload` (a block header, then the
    /// payload as its data: the validator does not decompress).
    pub fn make(payload: &[u8]) -> Vec<u8> {
        let mut f = super::MAGIC.to_vec();
        let flags = [0u8, 1]; // CRC32 check
        f.extend_from_slice(&flags);
        f.extend_from_slice(&crc32fast::hash(&flags).to_le_bytes());
        let mut bh = vec![1u8, 0, 0x21, 1, 0x16, 0, 0, 0]; // size (1+1)*4=8... see below
        bh[0] = 2; // header size (2+1)*4 = 12
        bh.resize(8, 0);
        let c = crc32fast::hash(&bh);
        bh.extend_from_slice(&c.to_le_bytes());
        let mut block = bh.clone();
        block.extend_from_slice(payload);
        let unpadded = block.len() as u64 + 4; // + CRC32 check
        block.resize(block.len().next_multiple_of(4), 0);
        block.extend_from_slice(&[0xAA; 4]); // the check
        f.extend_from_slice(&block);
        let mut idx = vec![0u8];
        mbi(1, &mut idx);
        mbi(unpadded, &mut idx);
        mbi(payload.len() as u64, &mut idx);
        idx.resize(idx.len().next_multiple_of(4), 0);
        let c = crc32fast::hash(&idx);
        idx.extend_from_slice(&c.to_le_bytes());
        let back = (idx.len() as u32 / 4 - 1).to_le_bytes();
        f.extend_from_slice(&idx);
        let mut foot = back.to_vec();
        foot.extend_from_slice(&flags);
        let c = crc32fast::hash(&foot);
        f.extend_from_slice(&c.to_le_bytes());
        f.extend_from_slice(&foot);
        f.extend_from_slice(b"YZ");
        f
    }

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        make(b"compressed bytes, with a YZ inside them and more YZ")
    }

    #[test]
    fn valid_multi_stream_and_cut() {
        let f = seed();
        assert_complete("xz", &f);
        assert_prefixes("xz", &f);
        let mut two = f.clone();
        two.extend_from_slice(&[0; 8]);
        two.extend_from_slice(&make(b"second"));
        assert_complete("xz", &two);
        // Padding before foreign bytes in the sector where the stream
        // ends is the file's; padding to the sector's end (slack) is not.
        let mut pad = f.clone();
        pad.extend_from_slice(&[0; 8]);
        pad.extend_from_slice(b"foreign");
        let v = run("xz", &pad).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64 + 8));
        let mut slack = f.clone();
        slack.resize(512, 0);
        slack.extend_from_slice(b"foreign");
        let v = run("xz", &slack).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
        // Zeros not a multiple of 4 before foreign bytes: not padding.
        let mut odd = f.clone();
        odd.extend_from_slice(&[0; 6]);
        odd.extend_from_slice(b"foreign");
        let v = run("xz", &odd).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
    }

    #[test]
    fn damaged_and_garbage() {
        let mut f = seed();
        let n = f.len();
        f[n - 16] ^= 1; // index CRC
        let v = run("xz", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, n as u64));
        let mut g = seed();
        g[7] = 0x11; // reserved flag bits
        assert!(run("xz", &g).is_none());
        let mut junk = super::MAGIC.to_vec();
        junk.extend((0..300u32).map(|i| (i * 57 + 3) as u8));
        assert!(run("xz", &junk).is_none());
    }

    #[test]
    fn hostile_footers_are_bounded() {
        // Many fake footers each claiming a huge index: the budget ends it.
        let mut f = seed();
        let n = f.len();
        f.truncate(n - 12);
        for _ in 0..2000 {
            let mut foot = (0x3FFF_FFFFu32).to_le_bytes().to_vec();
            foot.extend_from_slice(&[0, 1]);
            let c = crc32fast::hash(&foot);
            f.extend_from_slice(&c.to_le_bytes());
            f.extend_from_slice(&foot);
            f.extend_from_slice(b"YZ");
        }
        let v = run("xz", &f).unwrap();
        assert_ne!(v.status, Status::Complete);
    }
}
