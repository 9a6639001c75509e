//! Adobe Flash (SWF).
//!
//! Structure (SWF File Format Specification 19, chapter 2): `signature
//! ('FWS' uncompressed, 'CWS' zlib, 'ZWS' LZMA) | version | FileLength (u32
//! LE: the uncompressed file's size)`, then (compressed from offset 8 in
//! CWS) `FrameSize (RECT: 5 bits of Nbits, 4 × Nbits bits) | FrameRate
//! (u16) | FrameCount (u16)` and tags `code << 6 | length (u16 LE; length
//! 0x3F: a u32 follows)` to the End tag (code 0).
//!
//! Checked: FWS, the tags chain to an End tag that ends at FileLength; CWS,
//! the zlib stream (header, deflate, Adler-32 of the output) inflates to
//! FileLength − 8 bytes; ZWS, only the header (LZMA is not decoded).
//!
//! * `None`: a header that is a chance match; a zlib stream that is
//!   corrupt at once.
//! * `Complete`: FWS, length FileLength; CWS, the end of the zlib stream.
//! * `Partial`: a tag or the stream past the window (length = window); a
//!   tag chain that breaks, an End tag before FileLength, a stream of
//!   another size or checksum (length = FileLength or the stream's end).
//! * `Unvalidated`: ZWS, length 17 + the LZMA data's declared size.
//!
//! Work: FWS, at most [`super::metafile::MAX_RECORDS`] tags, stretches
//! other candidates walked jumped ([`super::walks`]); CWS, one inflate of at
//! most FileLength bytes of output.
//!
//! Subtypes: `cws` and `zws` for the compressed ones.

use super::Verdict;
use super::metafile::{Step, walk};
use super::read::{Inflated, Src, inflate};

/// A SWF file.
pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<9>(0)?;
    let len = u64::from(u32::from_le_bytes([h[4], h[5], h[6], h[7]]));
    if &h[1..3] != b"WS" || !(1..=60).contains(&h[3]) || len < 21 {
        return None;
    }
    match h[0] {
        b'F' => fws(&src, len, h[8]),
        b'C' => cws(&src, len).map(|v| v.with_subtype(Some("cws"))),
        b'Z' => {
            let n = u64::from(src.u32le(8)?);
            let end = 17 + n;
            let v = if end > src.len() {
                Verdict::partial(src.len(), src.cut_note())
            } else {
                Verdict::unvalidated(end, "LZMA data not decoded")
            };
            (n > 0 && n < len).then(|| v.with_subtype(Some("zws")))
        }
        _ => None,
    }
}

/// Bytes of the header's RECT whose first byte is `b`.
fn rect_len(b: u8) -> u64 {
    (5 + 4 * u64::from(b >> 3)).div_ceil(8)
}

/// An uncompressed SWF of `len` bytes whose RECT starts with `rect`.
fn fws(src: &Src, len: u64, rect: u8) -> Option<Verdict> {
    let below = len.min(src.len());
    let step = |pos: u64| {
        let Some(t) = src.u16le(pos) else {
            return Step::Cut;
        };
        let (code, short) = (t >> 6, u64::from(t & 0x3F));
        let (head, body) = if short == 0x3F {
            match src.u32le(pos + 2) {
                Some(n) => (6, u64::from(n)),
                None => return Step::Cut,
            }
        } else {
            (2, short)
        };
        let n = head + body;
        if code == 0 {
            Step::End(n)
        } else if code > 1023 || pos + n > len {
            Step::Bad
        } else if pos + n > src.len() {
            Step::Cut
        } else {
            Step::Record(n)
        }
    };
    let first = 8 + rect_len(rect) + 4;
    let (pos, tags, last) = walk(src, "swf", (first, below), step);
    match last {
        Step::End(n) if pos + n == len => {
            Some(Verdict::complete(len).with_note(format!("{} tag(s)", tags + 1)))
        }
        Step::Cut => Some(Verdict::partial(src.len(), src.cut_note())),
        _ if tags == 0 => None,
        Step::End(_) => Some(Verdict::partial(
            below,
            format!("End tag at {pos}, not at FileLength"),
        )),
        _ => Some(Verdict::partial(
            below,
            format!("tag {} at {pos} breaks", tags + 1),
        )),
    }
}

/// A zlib-compressed SWF of `len` bytes uncompressed.
fn cws(src: &Src, len: u64) -> Option<Verdict> {
    let z = src.bytes::<2>(8)?;
    if z[0] & 0x0F != 8 || z[0] >> 4 > 7 || (u16::from(z[0]) << 8 | u16::from(z[1])) % 31 != 0 {
        return None;
    }
    let want = len - 8;
    let mut adler = adler2::Adler32::new();
    match inflate(src, 10, want + 1, |b| adler.write_slice(b)) {
        Inflated::End { consumed, produced } => {
            let end = 10 + consumed + 4;
            let Some(sum) = src.u32be(10 + consumed) else {
                return Some(Verdict::partial(src.len(), src.cut_note()));
            };
            if produced == want && sum == adler.checksum() {
                Some(Verdict::complete(end))
            } else {
                Some(Verdict::partial(
                    end,
                    format!("inflates to {produced} bytes, not {want}, or its Adler-32 differs"),
                ))
            }
        }
        Inflated::Cut => Some(Verdict::partial(src.len(), src.cut_note())),
        Inflated::Corrupt { consumed } if consumed > 64 => Some(Verdict::partial(
            10 + consumed,
            format!("deflate data corrupt after {consumed} bytes"),
        )),
        Inflated::Corrupt { .. } => None,
        Inflated::TooLarge => Some(Verdict::partial(
            src.len(),
            format!("inflates past FileLength ({len})"),
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;
    use std::io::Write;

    /// A tag of `code` with `body` (long form when `long`).
    fn tag(code: u16, body: &[u8], long: bool) -> Vec<u8> {
        let mut t = Vec::new();
        if long || body.len() >= 0x3F {
            t.extend_from_slice(&(code << 6 | 0x3F).to_le_bytes());
            t.extend_from_slice(&(body.len() as u32).to_le_bytes());
        } else {
            t.extend_from_slice(&(code << 6 | body.len() as u16).to_le_bytes());
        }
        t.extend_from_slice(body);
        t
    }

    /// An uncompressed SWF.
    pub fn seed() -> Vec<u8> {
        // RECT of Nbits 15: 5 + 60 bits, 9 bytes; frame rate, count.
        let mut body = vec![0x78, 0, 5, 0x5F, 0, 0, 0x0F, 0xA0, 0, 0, 0x18, 1, 0];
        body.extend(tag(9, &[255, 255, 255], false));
        body.extend(tag(
            39,
            &(0..100).map(|i| i as u8).collect::<Vec<_>>(),
            false,
        ));
        body.extend(tag(1, &[], false));
        body.extend(tag(2, &[7; 10], true));
        body.extend(tag(1, &[], false));
        body.extend(tag(0, &[], false));
        let mut d = b"FWS\x0A".to_vec();
        d.extend_from_slice(&((body.len() + 8) as u32).to_le_bytes());
        d.extend(body);
        d
    }

    /// The seed compressed (CWS).
    pub fn cws_seed() -> Vec<u8> {
        let f = seed();
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&f[8..]).unwrap();
        let mut d = b"CWS\x0A".to_vec();
        d.extend_from_slice(&f[4..8]);
        d.extend(e.finish().unwrap());
        d
    }

    #[test]
    fn fws_complete_prefixes_and_damage() {
        let d = seed();
        assert_eq!(assert_complete("swf", &d), None);
        assert_prefixes("swf", &d);
        // The second tag's length past FileLength: the chain breaks.
        let mut bad = d.clone();
        bad[8 + 13 + 5 + 2] = 0xF0;
        assert_eq!(run("swf", &bad).unwrap().status, Status::Partial);
        // FileLength one more: the End tag ends before it.
        let mut l = d.clone();
        l[4] += 1;
        l.push(0);
        assert_eq!(run("swf", &l).unwrap().status, Status::Partial);
        // A version of 0, a first tag past FileLength: chance matches.
        let mut j = d.clone();
        j[3] = 0;
        assert!(run("swf", &j).is_none());
        j = d.clone();
        j[8 + 13..8 + 15].copy_from_slice(&(9u16 << 6 | 0x3E).to_le_bytes());
        j[4..8].copy_from_slice(&30u32.to_le_bytes());
        assert!(run("swf", &j).is_none());
    }

    #[test]
    fn cws_complete_prefixes_and_damage() {
        let d = cws_seed();
        assert_eq!(assert_complete("swf", &d).as_deref(), Some("cws"));
        assert_prefixes("swf", &d);
        // Another FileLength: Partial.
        let mut l = d.clone();
        l[4] += 1;
        assert_eq!(run("swf", &l).unwrap().status, Status::Partial);
        // The Adler-32 changed: Partial.
        let mut a = d.clone();
        let n = a.len();
        a[n - 1] ^= 1;
        assert_eq!(run("swf", &a).unwrap().status, Status::Partial);
        // Not zlib: None.
        let mut z = d.clone();
        z[8] = 0x77;
        assert!(run("swf", &z).is_none());
    }

    #[test]
    fn zws_is_unvalidated_to_its_declared_size() {
        // Header, FileLength 1000, LZMA size 40, LZMA properties, data.
        let mut d = b"ZWS\x0D".to_vec();
        d.extend_from_slice(&1000u32.to_le_bytes());
        d.extend_from_slice(&40u32.to_le_bytes());
        d.extend_from_slice(&[0x5D, 0, 0, 0x10, 0]);
        d.extend((0..40).map(|i| (i * 77) as u8));
        let mut img = d.clone();
        img.extend_from_slice(&[0; 100]);
        let v = run("swf", &img).unwrap();
        assert_eq!((v.status, v.length), (Status::Unvalidated, d.len() as u64));
        assert_eq!(v.subtype.as_deref(), Some("zws"));
        assert_eq!(run("swf", &d[..40]).unwrap().status, Status::Partial);
    }
}
