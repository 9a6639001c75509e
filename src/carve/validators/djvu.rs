//! DjVu documents.
//!
//! Structure (DjVu v3 specification, Lizardtech 2005, sections 3-4, and
//! EA IFF 85): `'AT&T' | 'FORM' | length (u32 BE) | 'DJVU' (single page),
//! 'DJVM' (multi-page), 'DJVI' (shared data) or 'THUM' (thumbnails)`, then
//! chunks `id (4 characters) | length (u32 BE) | data | a pad byte when the
//! length is odd` that fill the FORM; the file is 12 + length bytes (the
//! last chunk's pad byte, if any, is inside the length: djvulibre writes
//! none after an odd last chunk).
//!
//! Checked: the header; the chunks chain to exactly the FORM's end (ids
//! letters, digits or spaces); the first chunk is `INFO` (a page), `DIRM`
//! (a document's directory) or another the kind allows.
//!
//! * `None`: a header that is a chance match, or a first chunk that is not
//!   one.
//! * `Complete`: the chunks fill the FORM; length = 12 + its length.
//! * `Partial`: a chunk past the window (length = window); a chunk that
//!   breaks the chain (length = the FORM's end, within the window).
//!
//! Work: at most [`super::metafile::MAX_RECORDS`] chunks per candidate;
//! stretches other candidates walked are jumped ([`super::walks`]).
//!
//! Subtypes: `djvm` (multi-page), `djvi`, `thum`.

use super::Verdict;
use super::metafile::{Step, walk};
use super::read::Src;

/// A DjVu file.
pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<24>(0)?;
    let len = u64::from(u32::from_be_bytes([h[8], h[9], h[10], h[11]]));
    let subtype = match &h[12..16] {
        b"DJVU" => None,
        b"DJVM" => Some("djvm"),
        b"DJVI" => Some("djvi"),
        b"THUM" => Some("thum"),
        _ => return None,
    };
    let first_ok = match &h[12..16] {
        b"DJVU" => &h[16..20] == b"INFO",
        b"DJVM" => &h[16..20] == b"DIRM",
        _ => is_id(&h[16..20]),
    };
    if &h[..8] != b"AT&TFORM" || len < 12 || !first_ok {
        return None;
    }
    let end = 12 + len;
    let below = end.min(src.len());
    let step = |pos: u64| {
        if pos == end {
            return Step::End(0);
        }
        let Some(c) = src.bytes::<8>(pos) else {
            return Step::Cut;
        };
        let n = u64::from(u32::from_be_bytes([c[4], c[5], c[6], c[7]]));
        let padded = 8 + n + (n & 1);
        if !is_id(&c[..4]) || pos + 8 + n > end {
            Step::Bad
        } else if pos + 8 + n > src.len() {
            Step::Cut
        } else if pos + padded > end {
            // An odd last chunk with no pad byte.
            Step::Record(8 + n)
        } else {
            Step::Record(padded)
        }
    };
    let (pos, chunks, last) = walk(&src, "djvu", (16, below), step);
    let v = match last {
        Step::End(_) => Verdict::complete(end).with_note(format!("{chunks} chunk(s)")),
        Step::Cut => Verdict::partial(src.len(), src.cut_note()),
        _ if pos >= src.len() && end > src.len() => Verdict::partial(src.len(), src.cut_note()),
        _ if chunks == 0 => return None,
        _ => Verdict::partial(below, format!("chunk {} at {pos} breaks", chunks + 1)),
    };
    Some(v.with_subtype(subtype))
}

/// An IFF chunk id: letters, digits, spaces.
fn is_id(id: &[u8]) -> bool {
    id.iter().all(|&c| c.is_ascii_alphanumeric() || c == b' ')
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A chunk with its pad byte.
    fn chunk(id: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut c = id.to_vec();
        c.extend_from_slice(&(data.len() as u32).to_be_bytes());
        c.extend_from_slice(data);
        if data.len() % 2 == 1 {
            c.push(0);
        }
        c
    }

    /// A form of `kind` with `chunks`; the last chunk's pad byte dropped.
    fn form(kind: &[u8; 4], chunks: &[Vec<u8>], at_t: bool) -> Vec<u8> {
        let mut body = kind.to_vec();
        for c in chunks {
            body.extend_from_slice(c);
        }
        if chunks.last().is_some_and(|c| (c.len() - 8) % 2 == 1) {
            body.pop();
        }
        let mut d = if at_t { b"AT&T".to_vec() } else { Vec::new() };
        d.extend_from_slice(b"FORM");
        d.extend_from_slice(&(body.len() as u32).to_be_bytes());
        d.extend(body);
        d
    }

    /// A single page: INFO, an odd-sized Sjbz, an odd last chunk.
    pub fn seed() -> Vec<u8> {
        let info = [0, 100, 0, 80, 24, 0, 100, 0, 22, 1];
        let sjbz: Vec<u8> = (0..51).map(|i| (i * 37) as u8).collect();
        form(
            b"DJVU",
            &[
                chunk(b"INFO", &info),
                chunk(b"Sjbz", &sjbz),
                chunk(b"BG44", &[9; 33]),
            ],
            true,
        )
    }

    #[test]
    fn complete_prefixes_and_damage() {
        let d = seed();
        assert_eq!(assert_complete("djvu", &d), None);
        assert_prefixes("djvu", &d);
        // A multi-page document: DIRM, then pages as FORM chunks.
        let page = form(b"DJVU", &[chunk(b"INFO", &[1; 10])], false);
        let mut m = vec![chunk(b"DIRM", &[0x81, 0, 1, 0, 0, 0, 30])];
        m.push(page);
        let multi = form(b"DJVM", &m, true);
        assert_eq!(assert_complete("djvu", &multi).as_deref(), Some("djvm"));
        // A chunk's length changed: Partial at the FORM's end.
        let mut bad = d.clone();
        bad[16 + 18 + 7] = 200;
        let v = run("djvu", &bad).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d.len() as u64));
        // A FORM length of 4 GiB: cut.
        let mut big = d.clone();
        big[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(run("djvu", &big).unwrap().status, Status::Partial);
        // Another kind, a first chunk that is not INFO: chance matches.
        let mut j = d.clone();
        j[12] = b'X';
        assert!(run("djvu", &j).is_none());
        j = d.clone();
        j[16] = b'X';
        assert!(run("djvu", &j).is_none());
    }
}
