//! PNG: signature, then a chain of chunks up to `IEND`.
//!
//! Structure (PNG spec, ISO/IEC 15948 / W3C PNG 3rd ed. §5): the 8-byte
//! signature `89 50 4E 47 0D 0A 1A 0A`, then chunks of
//! `length (u32 BE, ≤ 2^31-1) | type (4 ASCII letters) | data | CRC-32`, the CRC
//! covering type and data. `IHDR` (13 bytes) must come first and `IEND`
//! (empty) last.
//!
//! Checked: the signature; `IHDR` first with length 13, a correct CRC and
//! non-zero dimensions ≤ 2^31-1 (a bit depth / colour type combination, a
//! compression or filter method other than 0, or an interlace method other
//! than 0/1 is only noted: under a correct CRC it is what the writer wrote);
//! for every chunk the
//! length bound, letter-only type and CRC-32 (computed in 64 KiB pieces, so a
//! huge chunk costs time proportional to the bytes present, not memory). One
//! ancillary chunk (lower-case first letter, which decoders may skip) whose
//! CRC does not match is passed when every chunk after it checks out to
//! `IEND`: its content was damaged in place (Pillow's test suite holds such
//! a file; PhotoRec carves it too), and a note says so.
//!
//! * `None`: bad signature or an invalid/corrupt `IHDR`.
//! * `Complete`: every CRC matched up to `IEND` (but one ancillary chunk's,
//!   noted); length = end of `IEND`.
//! * `Partial`: a later chunk is corrupt (length = end of the last good chunk)
//!   or the chain runs past the window (length = the window).
//!
//! Subtype `apng` when an `acTL` chunk precedes the image data.

use super::read::Src;
use super::{Status, Verdict};

const SIG: &[u8; 8] = b"\x89PNG\r\n\x1a\n";
/// More chunks than this is not a real PNG.
const MAX_CHUNKS: u32 = 10_000_000;

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, SIG) {
        return None;
    }
    // IHDR.
    let Some(ihdr) = src.bytes::<25>(8) else {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    };
    if ihdr[0..8] != *b"\x00\x00\x00\x0dIHDR" {
        return None;
    }
    let w = u32::from_be_bytes([ihdr[8], ihdr[9], ihdr[10], ihdr[11]]);
    let h = u32::from_be_bytes([ihdr[12], ihdr[13], ihdr[14], ihdr[15]]);
    let (depth, color, comp, filter, interlace) =
        (ihdr[16], ihdr[17], ihdr[18], ihdr[19], ihdr[20]);
    let depth_ok = match color {
        0 => matches!(depth, 1 | 2 | 4 | 8 | 16),
        3 => matches!(depth, 1 | 2 | 4 | 8),
        2 | 4 | 6 => matches!(depth, 8 | 16),
        _ => false,
    };
    if w == 0 || h == 0 || w > 0x7fff_ffff || h > 0x7fff_ffff {
        return None;
    }
    let crc = crc32fast::hash(&ihdr[4..21]);
    if crc != u32::from_be_bytes([ihdr[21], ihdr[22], ihdr[23], ihdr[24]]) {
        return None;
    }
    // Fields no decoder reads, under a correct CRC: the file is what its
    // writer made (Pillow's test suite holds one), said in a note.
    let mut odd = Vec::new();
    if !depth_ok {
        odd.push(format!("bit depth {depth} with colour type {color}"));
    }
    if comp != 0 {
        odd.push(format!("compression method {comp}"));
    }
    if filter != 0 {
        odd.push(format!("filter method {filter}"));
    }
    if interlace > 1 {
        odd.push(format!("interlace method {interlace}"));
    }
    let mut bad_ancillary = None;
    let mut v = chunks(&src, &odd, &mut bad_ancillary)?;
    match bad_ancillary {
        // The chunks after a damaged ancillary chunk are all intact: the
        // file is whole, its content damaged in that chunk.
        Some((_, note)) if v.status == Status::Complete => v.notes.push(note),
        Some((bad, _)) => v = bad,
        None => {}
    }
    Some(v)
}

/// Walks the chunks after `IHDR` to `IEND`. A CRC mismatch in an ancillary
/// chunk (lower-case first letter: a decoder may skip it) is kept in
/// `bad_ancillary` (the verdict it gives, and the note for a whole file)
/// and the walk goes on; a second one ends it.
fn chunks(
    src: &Src,
    odd: &[String],
    bad_ancillary: &mut Option<(Verdict, String)>,
) -> Option<Verdict> {
    let mut scratch = Vec::new();
    let mut pos: u64 = 33;
    let mut apng = false;
    let mut seen_idat = false;
    for _ in 0..MAX_CHUNKS {
        let Some(head) = src.bytes::<8>(pos) else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let ty = [head[4], head[5], head[6], head[7]];
        if len > 0x7fff_ffff || !ty.iter().all(u8::is_ascii_alphabetic) {
            return Some(damaged(pos, "chunk with an invalid length or type"));
        }
        let end = pos + 12 + u64::from(len);
        if end > src.len() {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&ty);
        src.for_each_chunk(pos + 8, u64::from(len), &mut scratch, |b| h.update(b));
        let stored = src.u32be(pos + 8 + u64::from(len))?;
        if h.finalize() != stored {
            let name = String::from_utf8_lossy(&ty).into_owned();
            let v = damaged(pos, format!("CRC mismatch in chunk {name} at {pos}"));
            if ty[0].is_ascii_lowercase() && bad_ancillary.is_none() {
                let note = format!(
                    "CRC mismatch in ancillary chunk {name} at {pos} (its content is damaged; every chunk after it is intact)"
                );
                *bad_ancillary = Some((v, note));
                pos = end;
                continue;
            }
            return Some(v);
        }
        match &ty {
            b"IEND" => {
                if len != 0 {
                    return Some(damaged(pos, "IEND with data"));
                }
                let mut v = Verdict::complete(end);
                if !odd.is_empty() {
                    v.notes
                        .push(format!("IHDR: {} (no decoder reads it)", odd.join(", ")));
                }
                if !seen_idat {
                    v.status = Status::Partial;
                    v.notes.push("no IDAT chunk".into());
                }
                return Some(v.with_subtype(apng.then_some("apng")));
            }
            b"IHDR" => return Some(damaged(pos, "second IHDR")),
            b"acTL" if !seen_idat => apng = true,
            b"IDAT" => seen_idat = true,
            _ => {}
        }
        pos = end;
    }
    Some(damaged(pos, "too many chunks"))
}

fn damaged(pos: u64, note: impl Into<String>) -> Verdict {
    Verdict::partial(pos, note)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample()
    }

    pub fn chunk(out: &mut Vec<u8>, ty: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(ty);
        out.extend_from_slice(data);
        let mut h = crc32fast::Hasher::new();
        h.update(ty);
        h.update(data);
        out.extend_from_slice(&h.finalize().to_be_bytes());
    }

    /// A small valid PNG (2x2 RGB, stored IDAT via flate2).
    pub fn sample() -> Vec<u8> {
        use std::io::Write;
        let mut v = super::SIG.to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&2u32.to_be_bytes());
        ihdr.extend_from_slice(&2u32.to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(&mut v, b"IHDR", &ihdr);
        chunk(&mut v, b"tEXt", b"Comment\0hello");
        let raw = [0u8, 1, 2, 3, 4, 5, 6, 0, 7, 8, 9, 10, 11, 12];
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&raw).unwrap();
        let z = z.finish().unwrap();
        chunk(&mut v, b"IDAT", &z[..5]);
        chunk(&mut v, b"IDAT", &z[5..]);
        chunk(&mut v, b"IEND", b"");
        v
    }

    #[test]
    fn valid_png() {
        let p = sample();
        assert_eq!(assert_complete("png", &p), None);
        assert_prefixes("png", &p);
    }

    #[test]
    fn corrupt_crc_is_partial_at_last_good_chunk() {
        // An ancillary chunk (tEXt at 33) damaged in place, every chunk
        // after it intact: the whole file, noted.
        let mut p = sample();
        p[33 + 10] ^= 1;
        let v = run("png", &p).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, p.len() as u64));
        assert!(
            v.notes
                .iter()
                .any(|n| n.contains("ancillary chunk tEXt at 33")),
            "{v:?}"
        );
        // ...but a chunk after it broken too (another file's bytes), or the
        // window cut: partial where the first damage is.
        let idat = 33 + 12 + 13;
        let mut q = p.clone();
        q[idat + 9] ^= 1;
        let v = run("png", &q).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 33));
        let v = run_at(
            "png",
            &p,
            0,
            Limits {
                max_len: idat as u64 + 4,
            },
        )
        .unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 33));
        // A critical chunk's CRC: partial there.
        let mut q = sample();
        q[idat + 9] ^= 1;
        let v = run("png", &q).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, idat as u64));
        // Corrupt IHDR: not a PNG.
        let mut p = sample();
        p[20] ^= 1;
        assert!(run("png", &p).is_none());
    }

    #[test]
    fn hostile_chunk_length() {
        let mut p = sample();
        p.truncate(33);
        p.extend_from_slice(&0x7fff_fff0u32.to_be_bytes());
        p.extend_from_slice(b"IDAT");
        p.extend_from_slice(&[0u8; 100]);
        let v = run("png", &p).unwrap();
        assert_eq!(v.status, Status::Partial);
        assert_eq!(v.length, p.len() as u64);
        p[33] = 0xff;
        let v = run("png", &p).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 33));
        // Limited window.
        let v = run_at("png", &sample(), 0, Limits { max_len: 40 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 40));
    }

    #[test]
    fn false_positive_header() {
        let mut p = super::SIG.to_vec();
        p.extend_from_slice(&[0x12; 64]);
        assert!(run("png", &p).is_none());
    }

    #[test]
    fn real_pngs() {
        let files = real_files(&["/usr/share", "/usr/lib"], &[".png"], 40);
        check_real("png", &files);
    }
    /// An IHDR field no decoder reads, under a correct CRC: complete, noted;
    /// the same bytes with a wrong CRC: not a PNG.
    #[test]
    fn odd_ihdr_fields_under_a_correct_crc() {
        let p = sample();
        let mut odd = super::SIG.to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&2u32.to_be_bytes());
        ihdr.extend_from_slice(&2u32.to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 1, 0, 0]);
        chunk(&mut odd, b"IHDR", &ihdr);
        odd.extend_from_slice(&p[33..]);
        let v = run("png", &odd).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, odd.len() as u64));
        assert!(
            v.notes.iter().any(|n| n.contains("compression method 1")),
            "{v:?}"
        );
        odd[30] ^= 1; // the IHDR CRC
        assert!(run("png", &odd).is_none());
    }
}
