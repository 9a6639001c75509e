//! JPEG 2000: the JP2 / JPX file format (boxes) and the raw codestream
//! (`.j2k`, `.j2c`).
//!
//! Structure (ISO/IEC 15444-1 Annex A (codestream) and Annex I (JP2 file
//! format); ISO/IEC 15444-2 Annex M (JPX)):
//!
//! * A **box** is `LBox (u32 BE) | TBox (4 chars) | [XLBox (u64 BE) when
//!   LBox = 1] | contents`; LBox is the box's whole length, 0 meaning "to the
//!   end of the file" (the last box only). A JP2 file is a sequence of boxes:
//!   the signature box `0000000C 'jP  ' 0D0A870A`, the File Type box `ftyp`
//!   (brand `jp2 `, `jpx `, `jpm `, `mjp2`…), then the header and
//!   codestream boxes (`jp2h`, `jp2c`, and metadata boxes `xml `, `uuid`,
//!   `res `… in any order). Nothing records where the last box is: the walk
//!   goes on while the next 8 bytes are a box of a type the standards define
//!   ([`KNOWN`]), and stops at anything else (slack, the next file, another
//!   signature box).
//! * A **codestream** is `SOC (FF4F)`, `SIZ (FF51)` and the other main
//!   header marker segments (`FFxx | length (u16) | …`, xx in 50-6F), then
//!   tile-parts, each `SOT (FF90) | Lsot = 10 | Isot | Psot (u32: the
//!   tile-part's length from its SOT) | TPsot | TNsot` chained by Psot, then
//!   `EOC (FFD9)`. Psot = 0 means "to the EOC" (the last tile-part only).
//!
//! Checked: every box length inside the window and at least its header;
//! `ftyp` right after the signature; each contiguous codestream box (`jp2c`)
//! holds a codestream that starts with SOC and SIZ and ends with EOC at the
//! box's end, its tile-parts chained (the first [`MAX_TILE_PARTS`]: a file
//! broken between tile-parts shows there); a raw codestream, the same walk
//! from its first byte. The compressed data inside the tile-parts is not
//! decoded.
//!
//! * `None`: a signature box or SOC/SIZ that is a chance match (lengths or
//!   SIZ fields out of range), or a box walk that breaks before any `jp2c`.
//! * `Complete`: the boxes chain, with at least one codestream box whose
//!   codestream checks out (JP2/JPX), or a Motion JPEG 2000 / JPM file's
//!   boxes (`moov` or `jp2c` seen); a raw codestream from SOC to EOC.
//! * `Partial`: a box or tile-part runs past the window (length = window),
//!   or a codestream does not end with EOC where its box ends (length = the
//!   box's end).
//! * `Unvalidated`: a last box of length 0 that is not a codestream, or a
//!   raw codestream whose last tile-part has Psot = 0 (no end recorded).
//!
//! Work: at most [`MAX_BOXES`] boxes and [`MAX_TILE_PARTS`] tile-parts and
//! [`MAX_MARKERS`] main-header segments per candidate, each a few bytes
//! read: a constant per candidate.
//!
//! Subtypes: `jpx` (brand `jpx `), `jpm`, `mj2`; the raw codestream's type is
//! its own.

use super::Verdict;
use super::read::Src;

/// Top-level boxes walked at most (JP2 files hold a handful; JPX a few
/// dozen).
pub const MAX_BOXES: u32 = 1024;
/// Tile-parts followed at most per codestream; after them only the EOC at
/// the codestream's end is checked.
pub const MAX_TILE_PARTS: u32 = 4096;
/// Main-header marker segments read at most.
pub const MAX_MARKERS: u32 = 1024;

/// The signature box.
pub const SIGNATURE: [u8; 12] = [
    0, 0, 0, 0x0C, b'j', b'P', b' ', b' ', 0x0D, 0x0A, 0x87, 0x0A,
];

/// The top-level box types of JP2 (15444-1 I.5), JPX (15444-2 M.11), JPM
/// (15444-6) and Motion JPEG 2000 (15444-3, ISO base media boxes).
const KNOWN: &[&[u8; 4]] = &[
    b"ftyp", b"jp2h", b"jp2c", b"jp2i", b"xml ", b"uuid", b"uinf", b"res ", b"rreq", b"ftbl",
    b"asoc", b"nlst", b"lbl ", b"cref", b"dtbl", b"jpch", b"jplh", b"cgrp", b"chck", b"mp7b",
    b"free", b"skip", b"moov", b"mdat", b"wide", b"meta", b"pagt", b"page", b"mhdr", b"objc",
    b"prfl", b"scal", b"copt", b"drep", b"roid", b"crgn", b"comp", b"inst", b"opct", b"creg",
];

/// One box's header.
struct BoxHead {
    kind: [u8; 4],
    /// Where its contents start.
    body: u64,
    /// Where it ends; `None` for length 0 ("to the end of the file").
    end: Option<u64>,
}

/// The box at `pos`: `None` when its header cannot be a box (lengths too
/// small for their header); `Err(())` when the window ends inside the
/// header.
fn box_at(src: &Src, pos: u64) -> Result<Option<BoxHead>, ()> {
    let h = src.bytes::<8>(pos).ok_or(())?;
    let lbox = u64::from(u32::from_be_bytes([h[0], h[1], h[2], h[3]]));
    let kind = [h[4], h[5], h[6], h[7]];
    let (body, end) = match lbox {
        0 => (pos + 8, None),
        1 => {
            let x = src.u64be(pos + 8).ok_or(())?;
            if x < 16 {
                return Ok(None);
            }
            (pos + 16, Some(pos.saturating_add(x)))
        }
        2..=7 => return Ok(None),
        n => (pos + 8, Some(pos + n)),
    };
    Ok(Some(BoxHead { kind, body, end }))
}

pub fn validate(src: Src) -> Option<Verdict> {
    if src.bytes::<12>(0)? != SIGNATURE {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    // The File Type box follows the signature.
    let ftyp = match box_at(&src, 12) {
        Err(()) => return cut(),
        Ok(Some(b)) if &b.kind == b"ftyp" => b,
        Ok(_) => return None,
    };
    let brand = src.bytes::<4>(ftyp.body)?;
    let ftyp_end = ftyp.end?;
    if ftyp_end < ftyp.body + 8 {
        return None;
    }
    let subtype = match &brand {
        b"jpx " => Some("jpx"),
        b"jpm " => Some("jpm"),
        b"mjp2" | b"mj2s" => Some("mj2"),
        _ => None,
    };
    let mut pos = ftyp_end;
    let (mut codestreams, mut moov) = (0u32, false);
    for _ in 0..MAX_BOXES {
        if pos > src.len() {
            return cut();
        }
        let b = match box_at(&src, pos) {
            // Fewer than 8 bytes left, or no box: the file ends here.
            Err(()) | Ok(None) => break,
            Ok(Some(b)) => b,
        };
        if !KNOWN.contains(&&b.kind) {
            break;
        }
        match (&b.kind, b.end) {
            (b"jp2c", end) => {
                let limit = end.unwrap_or(src.len());
                if limit > src.len() {
                    return cut();
                }
                let Some(sub) = src.sub(b.body, limit - b.body) else {
                    return cut();
                };
                match codestream(&sub, end.is_some()) {
                    Stream::Ends(n) if end.is_none_or(|e| b.body + n == e) => {
                        codestreams += 1;
                        pos = b.body + n;
                        if end.is_none() {
                            break;
                        }
                        continue;
                    }
                    Stream::Ends(_) | Stream::NoEoc => {
                        return Some(Verdict::partial(
                            limit,
                            format!("codestream box at {pos}: no EOC where the box ends"),
                        ));
                    }
                    Stream::Cut => return cut(),
                    Stream::Unended => {
                        return Some(Verdict::unvalidated(
                            src.len(),
                            "last tile-part of length 0: the codestream's end is not recorded",
                        ));
                    }
                    Stream::Invalid => {
                        if codestreams == 0 {
                            return None;
                        }
                        return Some(Verdict::partial(
                            pos,
                            format!("codestream box at {pos} holds no codestream"),
                        ));
                    }
                }
            }
            (_, None) => {
                return Some(Verdict::unvalidated(
                    src.len(),
                    format!(
                        "last box {:?} of length 0: its end is not recorded",
                        String::from_utf8_lossy(&b.kind)
                    ),
                ));
            }
            (kind, Some(end)) => {
                if end > src.len() {
                    return cut();
                }
                moov |= kind == b"moov";
                pos = end;
            }
        }
    }
    if codestreams == 0 && !moov {
        // A signature and file type, then no image: a chance match or a
        // file broken before its codestream.
        return Some(Verdict::partial(pos, "no codestream box"));
    }
    Some(
        Verdict::complete(pos)
            .with_subtype(subtype)
            .with_note(format!("{codestreams} codestream(s)")),
    )
}

/// A raw codestream (`.j2k`): SOC, SIZ … EOC.
pub fn validate_codestream(src: Src) -> Option<Verdict> {
    match codestream(&src, false) {
        Stream::Ends(n) => Some(Verdict::complete(n)),
        Stream::Cut => Some(Verdict::partial(src.len(), src.cut_note())),
        Stream::Unended => Some(Verdict::unvalidated(
            src.len(),
            "last tile-part of length 0: the codestream's end is not recorded",
        )),
        Stream::NoEoc => Some(Verdict::partial(src.len(), "no EOC")),
        Stream::Invalid => None,
    }
}

/// What the walk of a codestream found.
#[derive(Debug, PartialEq, Eq)]
enum Stream {
    /// SOC … EOC, this many bytes.
    Ends(u64),
    /// The window ends inside it.
    Cut,
    /// Its last tile-part has Psot = 0 and its end is not known.
    Unended,
    /// Tile-parts chain to the window's end but no EOC closes it.
    NoEoc,
    /// Not a codestream (SOC, SIZ or a marker out of place).
    Invalid,
}

/// Walks the codestream at the start of `src`. `sized`: `src` ends where
/// the codestream must end (a `jp2c` box), so a last tile-part of length 0
/// ends there too.
fn codestream(src: &Src, sized: bool) -> Stream {
    let Some(h) = src.bytes::<42>(0) else {
        return if src.len() < 42 && src.starts_with_at(0, &[0xFF, 0x4F]) {
            Stream::Cut
        } else {
            Stream::Invalid
        };
    };
    if h[..4] != [0xFF, 0x4F, 0xFF, 0x51] || !siz_ok(src, &h) {
        return Stream::Invalid;
    }
    // Main header: marker segments up to the first SOT.
    let mut pos = 4 + u64::from(u16::from_be_bytes([h[4], h[5]]));
    let mut markers = 0u32;
    loop {
        let Some(m) = src.bytes::<4>(pos) else {
            return Stream::Cut;
        };
        if m[0] != 0xFF {
            return Stream::Invalid;
        }
        if m[1] == 0x90 {
            break;
        }
        let len = u64::from(u16::from_be_bytes([m[2], m[3]]));
        markers += 1;
        if !(0x50..=0x6F).contains(&m[1]) || len < 2 || markers > MAX_MARKERS {
            return Stream::Invalid;
        }
        pos += 2 + len;
    }
    // Tile-parts.
    let mut parts = 0u32;
    loop {
        let Some(m) = src.bytes::<2>(pos) else {
            return Stream::Cut;
        };
        if m == [0xFF, 0xD9] {
            return Stream::Ends(pos + 2);
        }
        if parts >= MAX_TILE_PARTS {
            // Enough seen: the end must be where a sized box says.
            return if sized && src.bytes::<2>(src.len() - 2) == Some([0xFF, 0xD9]) {
                Stream::Ends(src.len())
            } else if sized {
                Stream::NoEoc
            } else {
                Stream::Unended
            };
        }
        let Some(sot) = src.bytes::<12>(pos) else {
            return Stream::Cut;
        };
        if sot[..4] != [0xFF, 0x90, 0, 10] {
            return if parts == 0 {
                Stream::Invalid
            } else {
                Stream::NoEoc
            };
        }
        let psot = u64::from(u32::from_be_bytes([sot[6], sot[7], sot[8], sot[9]]));
        parts += 1;
        match psot {
            0 if sized => {
                return if src.bytes::<2>(src.len().saturating_sub(2)) == Some([0xFF, 0xD9]) {
                    Stream::Ends(src.len())
                } else {
                    Stream::NoEoc
                };
            }
            0 => return Stream::Unended,
            // A tile-part holds at least its SOT segment and an SOD.
            1..=13 => return Stream::Invalid,
            n => pos += n,
        }
        if pos > src.len() {
            return Stream::Cut;
        }
    }
}

/// Whether the SIZ segment at 4 (`h`: the codestream's first 42 bytes) is
/// one an encoder writes: `Lsiz = 38 + 3 × Csiz`, the image and tile
/// offsets inside the reference grid, 1 to 16 384 components of 1 to 38
/// bits, subsampling factors of at least 1.
fn siz_ok(src: &Src, h: &[u8; 42]) -> bool {
    let u32at = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let lsiz = u16::from_be_bytes([h[4], h[5]]);
    let (xsiz, ysiz, xo, yo) = (u32at(8), u32at(12), u32at(16), u32at(20));
    let (xt, yt, xto, yto) = (u32at(24), u32at(28), u32at(32), u32at(36));
    let csiz = u16::from_be_bytes([h[40], h[41]]);
    if !(1..=16384).contains(&csiz)
        || u32::from(lsiz) != 38 + 3 * u32::from(csiz)
        || xo >= xsiz
        || yo >= ysiz
        || xt == 0
        || yt == 0
        || xto > xo
        || yto > yo
        || u64::from(xto) + u64::from(xt) <= u64::from(xo)
        || u64::from(yto) + u64::from(yt) <= u64::from(yo)
    {
        return false;
    }
    // The first few components (all of them for up to 16).
    for c in 0..u64::from(csiz).min(16) {
        let Some([ssiz, xr, yr]) = src.bytes::<3>(42 + 3 * c) else {
            return false;
        };
        if (ssiz & 0x7F) > 37 || xr == 0 || yr == 0 {
            return false;
        }
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;
    use super::*;

    /// A codestream: SOC, SIZ (one 8-bit component, 64×32, tiles of
    /// `tile`×32), COD, QCD, then `parts` tile-parts of `body` bytes each
    /// (after their SOT and SOD), EOC.
    pub fn codestream_bytes(parts: u32, body: usize) -> Vec<u8> {
        let mut d = vec![0xFF, 0x4F, 0xFF, 0x51, 0, 41, 0, 0];
        for v in [64u32, 32, 0, 0, 64 / parts.max(1), 32, 0, 0] {
            d.extend_from_slice(&v.to_be_bytes());
        }
        d.extend_from_slice(&1u16.to_be_bytes());
        d.extend_from_slice(&[7, 1, 1]);
        // COD (12 bytes of parameters) and QCD.
        d.extend_from_slice(&[0xFF, 0x52, 0, 12, 0, 0, 0, 1, 0, 5, 4, 4, 0, 0]);
        d.extend_from_slice(&[0xFF, 0x5C, 0, 5, 0x40, 0x48, 0x48]);
        for t in 0..parts {
            let psot = 12 + 2 + body as u32;
            d.extend_from_slice(&[0xFF, 0x90, 0, 10]);
            d.extend_from_slice(&(t as u16).to_be_bytes());
            d.extend_from_slice(&psot.to_be_bytes());
            d.extend_from_slice(&[0, 1]);
            d.extend_from_slice(&[0xFF, 0x93]);
            d.extend((0..body).map(|i| (i * 7 % 0x8F) as u8));
        }
        d.extend_from_slice(&[0xFF, 0xD9]);
        d
    }

    pub fn boxed(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut d = ((body.len() + 8) as u32).to_be_bytes().to_vec();
        d.extend_from_slice(kind);
        d.extend_from_slice(body);
        d
    }

    /// A JP2 file: signature, ftyp, jp2h (ihdr, colr), an `xml ` box and a
    /// codestream box.
    pub fn seed() -> Vec<u8> {
        let mut d = SIGNATURE.to_vec();
        d.extend(boxed(b"ftyp", b"jp2 \0\0\0\0jp2 "));
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&32u32.to_be_bytes());
        ihdr.extend_from_slice(&64u32.to_be_bytes());
        ihdr.extend_from_slice(&[0, 1, 7, 7, 0, 0]);
        let mut h = boxed(b"ihdr", &ihdr);
        h.extend(boxed(b"colr", &[1, 0, 0, 0, 0, 0, 17]));
        d.extend(boxed(b"jp2h", &h));
        d.extend(boxed(b"xml ", b"<x/>"));
        d.extend(boxed(b"jp2c", &codestream_bytes(2, 40)));
        d
    }

    #[test]
    fn jp2_complete_and_prefixes() {
        let d = seed();
        assert_eq!(assert_complete("jp2", &d), None);
        assert_prefixes("jp2", &d);
        // JPX brand: subtype.
        let mut x = d.clone();
        x[20..24].copy_from_slice(b"jpx ");
        assert_eq!(assert_complete("jp2", &x).as_deref(), Some("jpx"));
    }

    #[test]
    fn raw_codestream_complete_and_prefixes() {
        for parts in [1, 3] {
            let d = codestream_bytes(parts, 50);
            assert_eq!(assert_complete("j2k", &d), None);
            assert_prefixes("j2k", &d);
        }
    }

    #[test]
    fn stops_at_the_next_file_and_at_unknown_boxes() {
        let d = seed();
        let mut two = d.clone();
        two.extend_from_slice(&d);
        let v = run("jp2", &two).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, d.len() as u64));
        // A box of a type no JPEG 2000 standard defines is not the file's.
        let mut t = d.clone();
        t.extend(boxed(b"abcd", b"xxxx"));
        assert_eq!(run("jp2", &t).unwrap().length, d.len() as u64);
        // Metadata after the codestream is.
        let mut m = d.clone();
        m.extend(boxed(b"uuid", &[7u8; 20]));
        assert_eq!(run("jp2", &m).unwrap().length, m.len() as u64);
    }

    #[test]
    fn codestream_damage_is_partial() {
        let d = seed();
        // The last bytes (EOC) overwritten: a box whose codestream does not end.
        let mut e = d.clone();
        let n = e.len();
        e[n - 2..].copy_from_slice(&[0x12, 0x34]);
        let v = run("jp2", &e).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, n as u64));
        // A tile-part length that does not land on the next SOT.
        let mut c = codestream_bytes(3, 50);
        let first_sot = c.windows(2).position(|w| w == [0xFF, 0x90]).unwrap();
        c[first_sot + 9] += 1;
        assert_ne!(run("j2k", &c).map(|v| v.status), Some(Status::Complete));
        // Hostile lengths: a box claiming 2^64 - 1 bytes, a tile-part 4 GiB.
        let mut h = d.clone();
        let jp2c = h.windows(4).position(|w| w == b"jp2c").unwrap() - 4;
        h[jp2c..jp2c + 4].copy_from_slice(&1u32.to_be_bytes());
        h.splice(jp2c + 8..jp2c + 8, u64::MAX.to_be_bytes());
        let v = run("jp2", &h).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, h.len() as u64));
        let mut t = codestream_bytes(1, 50);
        let sot = t.windows(2).position(|w| w == [0xFF, 0x90]).unwrap();
        t[sot + 6..sot + 10].copy_from_slice(&u32::MAX.to_be_bytes());
        let v = run("j2k", &t).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, t.len() as u64));
    }

    #[test]
    fn chance_matches_are_refused() {
        // SIZ fields out of range.
        let mut c = codestream_bytes(1, 20);
        c[41] = 0; // Csiz 0
        assert!(run("j2k", &c).is_none());
        let mut c = codestream_bytes(1, 20);
        c[8..12].copy_from_slice(&0u32.to_be_bytes()); // Xsiz 0
        assert!(run("j2k", &c).is_none());
        // A signature box then no ftyp.
        let mut s = SIGNATURE.to_vec();
        s.extend_from_slice(&[0x55; 64]);
        assert!(run("jp2", &s).is_none());
        // A last tile-part of length 0 in a sized box ends with the box.
        let mut z = codestream_bytes(2, 30);
        let last = z.windows(2).rposition(|w| w == [0xFF, 0x90]).unwrap();
        z[last + 6..last + 10].copy_from_slice(&0u32.to_be_bytes());
        assert_eq!(run("j2k", &z).unwrap().status, Status::Unvalidated);
        let mut f = SIGNATURE.to_vec();
        f.extend(boxed(b"ftyp", b"jp2 \0\0\0\0jp2 "));
        f.extend(boxed(b"jp2c", &z));
        assert_eq!(assert_complete("jp2", &f), None);
    }
}
