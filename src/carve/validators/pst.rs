//! Outlook personal folders (PST, ANSI or Unicode): a header that records
//! the file's size, then allocation-map (AMap) pages every 253,952 bytes
//! from 0x4400 on.
//!
//! Structure ([MS-PST] 2.2.2.6 HEADER, 2.2.2.5 ROOT, 2.2.2.7.1 PAGETRAILER,
//! 5.3 CRC): `!BDN`, the CRC of the 471 bytes from offset 8 (u32 at 4),
//! `SM`, the version (u16 at 10: 14 or 15 ANSI, 23 Unicode, 36 Unicode with
//! 4 KiB pages). The ROOT is at 164 (ANSI) or 180 (Unicode): a reserved
//! dword, then `ibFileEof`, the file's size, and `ibAMapLast`, the offset of
//! the last AMap page (u32 each in ANSI, u64 in Unicode). `bSentinel` 0x80
//! is at 460 (ANSI) or 512 (Unicode). An AMap page of 512 bytes ends in its
//! trailer: page type 0x84 twice, at 500 (ANSI, 12-byte trailer) or 496
//! (Unicode, 16-byte trailer). The CRC is [MS-PST] 5.3's: the CRC-32 table
//! walked from 0 with no final inversion.
//!
//! Checked: the version, sentinel and header CRC; that the last AMap page
//! lies on the AMap grid below the recorded end; and (512-byte pages) that
//! the first and last AMap pages carry the AMap page type.
//!
//! * `None`: bad magic, version, sentinel or CRC.
//! * `Complete`: the recorded size fits the window and the AMap pages check
//!   out; length = `ibFileEof`.
//! * `Partial`: the recorded size runs past the window (length = window),
//!   or an AMap page is not where the header says (length = 0x4400, the
//!   header and its reserved pages).

use super::Verdict;
use super::read::Src;

/// Where the first AMap page is.
const AMAP0: u64 = 0x4400;
/// The page size of ANSI and Unicode files.
const PAGE: u64 = 512;
/// The bytes one AMap page maps: 496 bytes of bitmap (ANSI pads its page
/// with a dword first), a bit per 64 bytes ([MS-PST] 2.2.2.7.2).
const INTERVAL: u64 = 496 * 8 * 64;
/// AMap page type ([MS-PST] 2.2.2.7.1 ptypeAMap).
const PTYPE_AMAP: u8 = 0x84;

/// [MS-PST] 5.3's CRC: the reflected CRC-32 table walked from 0, with no
/// final inversion (crc32fast starts from !0 and inverts at the end).
fn pst_crc(data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(u32::MAX);
    h.update(data);
    !h.finalize()
}

pub fn validate(src: Src) -> Option<Verdict> {
    let Some(h) = src.bytes::<528>(0) else {
        let mut b = [0u8; 10];
        let n = src.read(0, &mut b);
        return (n == 10 && b[..4] == *b"!BDN" && b[8..10] == *b"SM")
            .then(|| Verdict::partial(src.len(), src.cut_note()));
    };
    let u16at = |i: usize| u64::from(u16::from_le_bytes([h[i], h[i + 1]]));
    let u32at = |i: usize| u64::from(u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let u64at = |i: usize| u32at(i) | u32at(i + 4) << 32;
    let ver = u16at(10);
    let (eof, amap_last, sentinel, trailer) = match ver {
        14 | 15 => (u32at(168), u32at(172), 460, 12),
        23 | 36 => (u64at(184), u64at(192), 512, 16),
        _ => return None,
    };
    if h[..4] != *b"!BDN"
        || h[8..10] != *b"SM"
        || h[sentinel] != 0x80
        || pst_crc(&h[8..8 + 471]) as u64 != u32at(4)
    {
        return None;
    }
    let min = AMAP0 + PAGE;
    let on_grid = amap_last >= AMAP0 && (amap_last - AMAP0).is_multiple_of(INTERVAL);
    if eof < min || !on_grid || amap_last + PAGE > eof {
        return Some(Verdict::partial(
            AMAP0.min(src.len()),
            format!("file size {eof}, last AMap page at {amap_last}"),
        ));
    }
    if eof > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    if ver != 36 {
        for at in [AMAP0, amap_last] {
            let Some(t) = src.bytes::<2>(at + PAGE - trailer) else {
                return Some(Verdict::partial(src.len(), src.cut_note()));
            };
            if t != [PTYPE_AMAP, PTYPE_AMAP] {
                return Some(Verdict::partial(AMAP0, format!("no AMap page at {at}")));
            }
        }
    }
    let mut v = Verdict::complete(eof);
    v.notes.push(format!(
        "{} PST, version {ver}, last AMap page at {amap_last}",
        if trailer == 12 { "ANSI" } else { "Unicode" }
    ));
    Some(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;
    use super::*;

    /// A Unicode PST of `amaps` AMap intervals: header (CRC, sentinel,
    /// size, last AMap page) and the AMap pages' trailers; the rest zero.
    fn unicode(amaps: u64) -> Vec<u8> {
        let len = AMAP0 + amaps * INTERVAL;
        let mut d = vec![0u8; len as usize];
        d[..4].copy_from_slice(b"!BDN");
        d[8..10].copy_from_slice(b"SM");
        d[10..12].copy_from_slice(&23u16.to_le_bytes());
        d[12..14].copy_from_slice(&19u16.to_le_bytes());
        d[184..192].copy_from_slice(&len.to_le_bytes());
        let last = AMAP0 + (amaps - 1) * INTERVAL;
        d[192..200].copy_from_slice(&last.to_le_bytes());
        d[512] = 0x80;
        let crc = pst_crc(&d[8..8 + 471]);
        d[4..8].copy_from_slice(&crc.to_le_bytes());
        for i in 0..amaps {
            let t = (AMAP0 + i * INTERVAL + 496) as usize;
            d[t] = PTYPE_AMAP;
            d[t + 1] = PTYPE_AMAP;
        }
        d
    }

    /// An ANSI PST of one AMap interval.
    fn ansi() -> Vec<u8> {
        let len = AMAP0 + INTERVAL;
        let mut d = vec![0u8; len as usize];
        d[..4].copy_from_slice(b"!BDN");
        d[8..10].copy_from_slice(b"SM");
        d[10..12].copy_from_slice(&14u16.to_le_bytes());
        d[168..172].copy_from_slice(&(len as u32).to_le_bytes());
        d[172..176].copy_from_slice(&(AMAP0 as u32).to_le_bytes());
        d[460] = 0x80;
        let crc = pst_crc(&d[8..8 + 471]);
        d[4..8].copy_from_slice(&crc.to_le_bytes());
        let t = (AMAP0 + 500) as usize;
        d[t] = PTYPE_AMAP;
        d[t + 1] = PTYPE_AMAP;
        d
    }

    /// A Unicode PST of one AMap interval, the smallest there is: the
    /// mutation test's seed.
    pub fn seed() -> Vec<u8> {
        unicode(1)
    }

    #[test]
    fn crc_is_the_spec_walk() {
        // [MS-PST] 5.3 written out: the table walk from 0, no inversion.
        let data = b"!BDN personal folders";
        let mut crc = 0u32;
        for &b in data {
            let mut c = (crc ^ u32::from(b)) & 0xFF;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            crc = c ^ (crc >> 8);
        }
        assert_eq!(pst_crc(data), crc);
    }

    #[test]
    fn valid_is_exact_with_trailing_bytes() {
        for d in [seed(), unicode(3), ansi()] {
            let mut e = d.clone();
            e.extend_from_slice(&[0xAB; 9000]);
            let v = run("pst", &e).unwrap();
            assert_eq!(v.status, Status::Complete, "{:?}", v.notes);
            assert_eq!(v.length, d.len() as u64);
        }
    }

    #[test]
    fn truncated_is_partial() {
        let s = seed();
        for cut in [12, 600, AMAP0 as usize + 100, s.len() - 1] {
            let v = run("pst", &s[..cut]).unwrap();
            assert_eq!(
                (v.status, v.length),
                (Status::Partial, cut as u64),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn garbage_and_broken_headers_refused() {
        assert!(run("pst", &[0u8; 2000]).is_none());
        let mut d = seed();
        d[300] ^= 1; // inside the CRC's range
        assert!(run("pst", &d).is_none());
        let mut d = seed();
        d[10] = 99; // unknown version
        assert!(run("pst", &d).is_none());
    }

    #[test]
    fn amap_pages_must_be_where_the_header_says() {
        // The last AMap page overwritten by foreign data.
        let mut d = unicode(2);
        d[(AMAP0 + INTERVAL + 496) as usize] = 0;
        let v = run("pst", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, AMAP0));
        // A last AMap page off the grid, or past the recorded end.
        for last in [AMAP0 + 512, AMAP0 + 2 * INTERVAL] {
            let mut d = unicode(2);
            d[192..200].copy_from_slice(&last.to_le_bytes());
            let crc = pst_crc(&d[8..8 + 471]);
            d[4..8].copy_from_slice(&crc.to_le_bytes());
            let v = run("pst", &d).unwrap();
            assert_eq!((v.status, v.length), (Status::Partial, AMAP0), "{last}");
        }
    }

    #[test]
    fn hostile_sizes_bounded() {
        // A recorded size of 2^63 on a small window: cut by the window.
        let mut d = seed();
        d[184..192].copy_from_slice(&(1u64 << 63).to_le_bytes());
        let crc = pst_crc(&d[8..8 + 471]);
        d[4..8].copy_from_slice(&crc.to_le_bytes());
        let v = run("pst", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d.len() as u64));
    }
}
