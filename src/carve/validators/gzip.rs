//! gzip: members of header + deflate stream + CRC-32/ISIZE trailer.
//!
//! Structure (RFC 1952 §2.3): `1F 8B 08 FLG MTIME(4) XFL OS`; then, by FLG,
//! `FEXTRA` (XLEN u16 LE + data), `FNAME` and `FCOMMENT` (zero-terminated),
//! `FHCRC` (low 16 bits of the CRC-32 of the header); the raw deflate stream
//! (RFC 1951); `CRC32` of the uncompressed data and `ISIZE` (its length mod
//! 2^32). A file may hold several members back to back.
//!
//! The deflate stream is inflated with fixed-size buffers (`flate2`), the
//! output fed to a CRC-32 and discarded, to find where the stream ends; the
//! trailer must match. At most [`MAX_INFLATE_OUT`] bytes of output are made per
//! member (a bound on time for decompression bombs).
//!
//! * `None`: reserved FLG bits set, an OS byte over 19 (not 255), a bad
//!   header CRC, or a
//!   first member whose deflate data is invalid before producing any output.
//! * `Complete`: every member's trailer matched; length = end of the last
//!   member (another member follows while the next bytes are a gzip header;
//!   a following member that is invalid is not included, with a note).
//! * `Partial`: the data runs past the window (length = window), the output
//!   cap was reached (length = window), deflate data is corrupt (length =
//!   where it failed) or the trailer does not match (length = its end).
//!
//! Subtype `tgz` when the first member's output is a ustar/GNU tar archive.

use super::Verdict;
use super::read::{Inflated, MAX_INFLATE_OUT, Src, inflate};

/// Members followed at most.
const MAX_MEMBERS: u32 = 1_000_000;
/// Longest FNAME/FCOMMENT accepted.
const MAX_STRING: u64 = 64 * 1024;

enum Member {
    /// A good member ending at this offset; `tar` when its output is a tar.
    Ok { end: u64, tar: bool },
    /// Not a gzip header here.
    NotGzip,
    /// The window ends inside the member.
    Cut,
    /// Invalid from this offset; `output` when some data was inflated first.
    Bad { at: u64, output: bool, note: String },
    /// Output cap reached.
    TooLarge,
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut pos = 0u64;
    let mut members = 0u32;
    let mut tar = false;
    while members < MAX_MEMBERS {
        let m = member(&src, pos);
        let first = members == 0;
        match m {
            Member::Ok { end, tar: t } => {
                tar |= first && t;
                members += 1;
                pos = end;
                if !src.starts_with_at(pos, &[0x1F, 0x8B, 0x08]) {
                    break;
                }
            }
            Member::NotGzip if first => return None,
            Member::Bad { output: false, .. } if first => return None,
            Member::NotGzip | Member::Bad { .. } if !first => {
                let note = "followed by an invalid gzip member (not included)";
                return Some(done(pos, members, tar).with_note(note));
            }
            Member::Bad { at, note, .. } => return Some(Verdict::partial(at, note)),
            Member::Cut => return Some(Verdict::partial(src.len(), src.cut_note())),
            Member::TooLarge => {
                return Some(Verdict::partial(
                    src.len(),
                    "inflate output cap reached; end not found",
                ));
            }
            Member::NotGzip => return None,
        }
    }
    Some(done(pos, members, tar))
}

fn done(end: u64, members: u32, tar: bool) -> Verdict {
    let mut v = Verdict::complete(end).with_subtype(tar.then_some("tgz"));
    if members > 1 {
        v.notes.push(format!("{members} members"));
    }
    v
}

fn member(src: &Src, pos: u64) -> Member {
    let Some(h) = src.bytes::<10>(pos) else {
        let mut b = [0u8; 10];
        let n = src.read(pos, &mut b);
        return if b[..n.min(3)] == [0x1F, 0x8B, 0x08][..n.min(3)] {
            Member::Cut
        } else {
            Member::NotGzip
        };
    };
    let flg = h[3];
    // OS: RFC 1952 lists 0-13 and 255; npm's tarballs say 19. Higher
    // values are refused (headers back to back would pass otherwise).
    if h[..3] != [0x1F, 0x8B, 0x08] || flg & 0xE0 != 0 || !(h[9] <= 19 || h[9] == 255) {
        return Member::NotGzip;
    }
    let mut p = pos + 10;
    if flg & 4 != 0 {
        let Some(xlen) = src.u16le(p) else {
            return Member::Cut;
        };
        p += 2 + u64::from(xlen);
    }
    let mut scratch = Vec::new();
    for bit in [8u8, 16] {
        if flg & bit != 0 {
            match src.find(&[0], p, p.saturating_add(MAX_STRING), &mut scratch) {
                Some(z) => p = z + 1,
                None if src.len() < p.saturating_add(MAX_STRING) => return Member::Cut,
                None => return Member::NotGzip,
            }
        }
    }
    if flg & 2 != 0 {
        let Some(stored) = src.u16le(p) else {
            return Member::Cut;
        };
        let mut hc = crc32fast::Hasher::new();
        src.for_each_chunk(pos, p - pos, &mut scratch, |b| hc.update(b));
        if hc.finalize() as u16 != stored {
            return Member::NotGzip;
        }
        p += 2;
    }
    if p > src.len() {
        return Member::Cut;
    }
    let mut crc = crc32fast::Hasher::new();
    let mut head = [0u8; 512];
    let mut head_len = 0usize;
    let r = inflate(src, p, MAX_INFLATE_OUT, |b| {
        crc.update(b);
        let n = b.len().min(head.len() - head_len);
        head[head_len..head_len + n].copy_from_slice(&b[..n]);
        head_len += n;
    });
    let (consumed, produced) = match r {
        Inflated::End { consumed, produced } => (consumed, produced),
        Inflated::Cut => return Member::Cut,
        Inflated::TooLarge => return Member::TooLarge,
        Inflated::Corrupt { consumed } => {
            return Member::Bad {
                at: p + consumed,
                output: head_len > 0,
                note: format!("corrupt deflate data at {}", p + consumed),
            };
        }
    };
    let t = p + consumed;
    let Some(trailer) = src.bytes::<8>(t) else {
        return Member::Cut;
    };
    let want_crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let want_size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
    if want_crc != crc.finalize() || want_size != produced as u32 {
        return Member::Bad {
            at: t + 8,
            output: true,
            note: format!("trailer mismatch for the member at {pos}"),
        };
    }
    let tar = head_len >= 262 && &head[257..262] == b"ustar";
    Member::Ok { end: t + 8, tar }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};
    use std::io::Write;

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        gz(&text())
    }

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn text() -> Vec<u8> {
        (0..20_000u32).map(|i| (i * i % 97) as u8 + b' ').collect()
    }

    #[test]
    fn single_member() {
        let g = gz(&text());
        assert_eq!(assert_complete("gzip", &g), None);
        assert_prefixes("gzip", &g);
        let e = gz(b"");
        assert_complete("gzip", &e);
        // OS 19, as npm's tarballs have it.
        let mut o = gz(&text());
        o[9] = 19;
        assert_complete("gzip", &o);
        assert_prefixes("gzip", &e);
    }

    #[test]
    fn header_fields() {
        let mut e = flate2::GzBuilder::new()
            .filename("name.txt")
            .comment("a comment")
            .extra(&b"XYZ"[..])
            .write(Vec::new(), flate2::Compression::fast());
        e.write_all(&text()).unwrap();
        let g = e.finish().unwrap();
        assert_complete("gzip", &g);
        assert_prefixes("gzip", &g);
        // Add FHCRC by hand.
        let hlen = 10 + 2 + 3 + 9 + 10;
        let mut h = g[..hlen].to_vec();
        h[3] |= 2;
        let c = crc32fast::hash(&h) as u16;
        let mut g2 = h.clone();
        g2.extend_from_slice(&c.to_le_bytes());
        g2.extend_from_slice(&g[hlen..]);
        assert_complete("gzip", &g2);
        g2[hlen] ^= 1;
        assert!(run("gzip", &g2).is_none());
    }

    #[test]
    fn multi_member_and_tar() {
        let mut g = gz(b"first member ");
        g.extend_from_slice(&gz(&text()));
        g.extend_from_slice(&gz(b"third"));
        assert_complete("gzip", &g);
        // A tar inside.
        let mut tar = vec![0u8; 1024];
        tar[..5].copy_from_slice(b"a.txt");
        tar[257..263].copy_from_slice(b"ustar\0");
        assert_eq!(assert_complete("gzip", &gz(&tar)).as_deref(), Some("tgz"));
    }

    #[test]
    fn corrupt() {
        let mut g = gz(&text());
        let n = g.len();
        g[n - 6] ^= 1; // CRC
        let v = run("gzip", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, n as u64));
        let mut g = gz(&text());
        g[3] = 0x20; // reserved flag
        assert!(run("gzip", &g).is_none());
        assert!(
            run(
                "gzip",
                b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xff\xff\xff\xff\xff"
            )
            .is_none()
        );
        let v = run_at("gzip", &gz(&text()), 0, Limits { max_len: 50 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 50));
    }

    #[test]
    fn real_gzips() {
        let files = real_files(&["/usr/share/doc", "/usr/share/man/man1"], &[".gz"], 40);
        check_real("gzip", &files);
    }
}
