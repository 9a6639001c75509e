//! ISO base media files: MP4, MOV, M4A, 3GP (and HEIF/AVIF).
//!
//! Structure (ISO/IEC 14496-12 §4.2; Apple QuickTime File Format): a
//! sequence of top-level boxes `size (u32 BE) | type (4 chars) | body`, where
//! size 1 means a u64 `largesize` follows the type and size 0 means "to the
//! end of the file". The first box is `ftyp` (major brand, minor version,
//! compatible brands).
//!
//! The walk goes box by box while the type is a known top-level type
//! (`ftyp moov mdat free skip wide uuid pdin moof mfra meta sidx ssix styp
//! prft emsg jumb pnot junk PICT bloc udta`) and the size is plausible; it stops at the
//! first unknown or implausible box — that is where the file ends.
//!
//! * `None`: the first box is not an `ftyp` of sane size with a printable
//!   major brand.
//! * `Complete`: a `moov` (or, for HEIF/AVIF brands, a `meta`) was seen;
//!   length = end of the last known box.
//! * `Partial`: a box runs past the window (length = window), or no `moov`
//!   was seen (length = end of the last known box).
//! * `Unvalidated`: a box of size 0 ("to end of file"); length = window.
//!
//! Subtype from the major brand: `qt  ` → mov, `M4A `/`M4B `/`M4P ` → m4a,
//! `3gp*`/`3g2*` → 3gp, `heic`/`heix`/`mif1`/`msf1` → heic, `avif`/`avis` →
//! avif, otherwise mp4.
//!
//! Not checked: the insides of `moov` (track tables, chunk offsets into
//! `mdat`).

use super::Verdict;
use super::read::Src;
use super::walks::{Noting, Took, took};

/// Boxes walked at most.
const MAX_BOXES: u32 = 1_000_000;
/// Flags of the walk's segments: a `moov`, a `meta` box.
const MOOV: u32 = 1;
const META: u32 = 2;

const TOP_LEVEL: &[&[u8; 4]] = &[
    b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"uuid", b"pdin", b"moof", b"mfra",
    b"meta", b"sidx", b"ssix", b"styp", b"prft", b"emsg", b"jumb", b"pnot", b"junk", b"PICT",
    b"bloc", b"udta", b"mfro",
];

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<12>(0)?;
    if &h[4..8] != b"ftyp" {
        return None;
    }
    let fsize = u64::from(u32::from_be_bytes([h[0], h[1], h[2], h[3]]));
    let brand = [h[8], h[9], h[10], h[11]];
    if !(16..=4096).contains(&fsize) || fsize % 4 != 0 || !super::read::printable(&brand) {
        return None;
    }
    let heif = matches!(
        &brand,
        b"heic" | b"heix" | b"mif1" | b"msf1" | b"avif" | b"avis"
    );
    let subtype = match &brand {
        b"qt  " => "mov",
        b"M4A " | b"M4B " | b"M4P " => "m4a",
        b if b.starts_with(b"3gp") || b.starts_with(b"3g2") => "3gp",
        b"heic" | b"heix" | b"mif1" | b"msf1" => "heic",
        b"avif" | b"avis" => "avif",
        _ => "mp4",
    };
    let mut pos = 0u64;
    let mut moov = false;
    let mut meta = false;
    let mut boxes = 0u32;
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()).with_subtype(Some(subtype)));
    // After the first box, a box's step depends on its bytes alone: the
    // stretches other candidates walked are jumped ([`super::walks`]).
    let mut noting = Noting::new("mp4");
    while boxes < MAX_BOXES {
        if boxes > 0
            && let Some(j) =
                src.walk_jump("mp4", (pos, 0), (src.len(), MAX_BOXES - boxes), |_| true)
        {
            moov |= j.flags & MOOV != 0;
            meta |= j.flags & META != 0;
            (pos, boxes) = (j.to, boxes + j.steps);
            src.walk_took(&mut noting, took(j), (pos, 0));
            continue;
        }
        let Some(b) = src.bytes::<8>(pos) else {
            if pos == src.len() {
                break;
            }
            // Fewer than 8 bytes left: a cut box header, or the end.
            return cut();
        };
        let ty = [b[4], b[5], b[6], b[7]];
        if !TOP_LEVEL.contains(&&ty) || (boxes > 0 && &ty == b"ftyp") {
            break;
        }
        let size32 = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let size = match size32 {
            0 => {
                return Some(
                    Verdict::unvalidated(
                        src.len(),
                        format!(
                            "box {} extends to the end of the file",
                            String::from_utf8_lossy(&ty)
                        ),
                    )
                    .with_subtype(Some(subtype)),
                );
            }
            1 => match src.u64be(pos + 8) {
                Some(l) if l >= 16 => l,
                Some(_) => break,
                None => return cut(),
            },
            n if n < 8 => break,
            n => u64::from(n),
        };
        let Some(end) = pos.checked_add(size) else {
            break;
        };
        moov |= &ty == b"moov";
        meta |= &ty == b"meta";
        if end > src.len() {
            return cut();
        }
        pos = end;
        boxes += 1;
        let flags = match &ty {
            b"moov" => MOOV,
            b"meta" => META,
            _ => 0,
        };
        let t = Took {
            steps: 1,
            flags,
            count: 0,
        };
        src.walk_took(&mut noting, t, (pos, 0));
    }
    let v = if moov || (heif && meta) {
        Verdict::complete(pos)
    } else {
        Verdict::partial(pos, "no moov box")
    };
    Some(
        v.with_note(format!("{boxes} top-level boxes"))
            .with_subtype(Some(subtype)),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample(b"isom")
    }

    fn bx(out: &mut Vec<u8>, ty: &[u8; 4], body: &[u8]) {
        out.extend_from_slice(&((body.len() + 8) as u32).to_be_bytes());
        out.extend_from_slice(ty);
        out.extend_from_slice(body);
    }

    fn sample(brand: &[u8; 4]) -> Vec<u8> {
        let mut v = Vec::new();
        let mut ftyp = brand.to_vec();
        ftyp.extend_from_slice(&[0, 0, 2, 0]);
        ftyp.extend_from_slice(b"isommp41");
        bx(&mut v, b"ftyp", &ftyp);
        bx(&mut v, b"free", b"");
        // mdat with a 64-bit largesize.
        v.extend_from_slice(&1u32.to_be_bytes());
        v.extend_from_slice(b"mdat");
        v.extend_from_slice(&(16u64 + 100).to_be_bytes());
        v.extend_from_slice(&[0xAB; 100]);
        let mut moov = Vec::new();
        bx(&mut moov, b"mvhd", &[0; 100]);
        bx(&mut v, b"moov", &moov);
        v
    }

    #[test]
    fn brands() {
        for (b, want) in [
            (b"isom", "mp4"),
            (b"qt  ", "mov"),
            (b"M4A ", "m4a"),
            (b"3gp5", "3gp"),
            (b"mp42", "mp4"),
        ] {
            let f = sample(b);
            assert_eq!(assert_complete("mp4", &f).as_deref(), Some(want));
        }
        assert_prefixes("mp4", &sample(b"isom"));
    }

    #[test]
    fn partial_and_odd() {
        // No moov.
        let f = sample(b"isom");
        let cut = &f[..f.len() - 116];
        let v = run("mp4", cut).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, cut.len() as u64));
        // Size 0 box.
        let mut f = sample(b"isom");
        f.extend_from_slice(&0u32.to_be_bytes());
        f.extend_from_slice(b"mdat");
        f.extend_from_slice(&[1, 2, 3]);
        let v = run("mp4", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Unvalidated, f.len() as u64));
        // Huge largesize.
        let mut f = sample(b"isom");
        let i = f.windows(4).position(|w| w == b"mdat").unwrap();
        f[i + 4..i + 12].copy_from_slice(&(1u64 << 40).to_be_bytes());
        let v = run("mp4", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        assert!(run("mp4", b"\x00\x00\x00\x18ftyp\x01\x02\x03\x04").is_none());
        assert!(run("mp4", b"\x00\x00\x00\x08ftypisom").is_none());
        let v = run_at("mp4", &sample(b"isom"), 0, Limits { max_len: 60 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 60));
    }

    #[test]
    fn real_mp4s() {
        check_real(
            "mp4",
            &real_files(&[], &[".mp4", ".m4a", ".mov", ".3gp"], 10),
        );
    }
}
