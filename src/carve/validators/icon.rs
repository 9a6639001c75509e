//! Icons: Windows icons and cursors (ICO, CUR) and Apple icon images (ICNS).
//!
//! Structure:
//!
//! * **ICO / CUR** (Microsoft, "Icons" in the Win32 documentation, the
//!   ICONDIR / ICONDIRENTRY structures): `reserved (0) | type (1 icon, 2
//!   cursor) | count` (u16 LE), then `count` 16-byte entries `width | height
//!   | colours | reserved | planes or hotspot x | bit count or hotspot y |
//!   bytes (u32) | offset (u32)`; each image is a PNG or a DIB (a
//!   BITMAPINFOHEADER whose height is twice the icon's: the XOR and the AND
//!   masks). Nothing follows the images: the file ends where the last one
//!   ends.
//! * **ICNS** (Apple, Icon Services: `IconFamilyResource`): `'icns' | length
//!   (u32 BE, the whole file)`, then elements `type (4 chars) | length (u32
//!   BE, header included)` that fill the file exactly.
//!
//! Checked: ICO/CUR, every entry's image after the directory and inside
//! the window, each image a PNG whose structure and CRCs check out (the
//! [`super::png`] validator, ending exactly at the entry's size) or a DIB
//! header (size 40, 108 or 124; one plane; a valid bit count; the width
//! the entry gives); ICNS, the elements chain to the declared length
//! (types printable, lengths at least 8).
//!
//! * `None`: a directory or first element that is a chance match.
//! * `Complete`: everything above holds; length = the last image's end
//!   (ICO/CUR) or the declared length (ICNS).
//! * `Partial`: an image or element past the window (length = window), or
//!   a PNG image that fails its CRCs (length = the file's end).
//!
//! Work: at most [`MAX_IMAGES`] entries (each a PNG walk of its own bytes)
//! and [`MAX_ELEMENTS`] ICNS elements.
//!
//! Subtype: `cur` for cursors.

use super::read::{Src, printable};
use super::{Status, Verdict};

/// Directory entries read at most.
pub const MAX_IMAGES: u64 = 512;
/// ICNS elements read at most.
pub const MAX_ELEMENTS: u32 = 4096;

/// An ICO / CUR file.
pub fn validate_ico(src: Src) -> Option<Verdict> {
    let h = src.bytes::<6>(0)?;
    let kind = u16::from_le_bytes([h[2], h[3]]);
    let n = u64::from(u16::from_le_bytes([h[4], h[5]]));
    if h[..2] != [0, 0] || !matches!(kind, 1 | 2) || n == 0 || n > MAX_IMAGES {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    let dir_end = 6 + 16 * n;
    let mut end = dir_end;
    let mut bad = None;
    for i in 0..n {
        let Some(e) = src.bytes::<16>(6 + 16 * i) else {
            return cut();
        };
        let size = u64::from(u32::from_le_bytes([e[8], e[9], e[10], e[11]]));
        let off = u64::from(u32::from_le_bytes([e[12], e[13], e[14], e[15]]));
        let bits = u16::from_le_bytes([e[6], e[7]]);
        // Icons: planes 0 or 1, a bit count an encoder writes (cursors keep
        // their hotspot there).
        if kind == 1 && (e[4] > 1 || e[5] != 0 || !matches!(bits, 0 | 1 | 2 | 4 | 8 | 16 | 24 | 32))
        {
            return None;
        }
        if size == 0 || off < dir_end {
            return None;
        }
        if off >= src.len() {
            return cut();
        }
        // A DIB's own size counts when the entry's is less than its header
        // (some writers put a wrong byte count there; readers go by the
        // header). (A 32-bit DIB may leave out its AND mask: an entry's size
        // that holds the header is believed.)
        let image_end = match image(&src, off, size, e[0]) {
            Image::Fine(n) => off.saturating_add(if size >= 40 { size } else { n }),
            Image::Damaged if off.saturating_add(size) > src.len() => return cut(),
            Image::Damaged => {
                bad = bad.or(Some(i));
                off + size
            }
            Image::Not => return None,
        };
        if image_end > src.len() {
            return cut();
        }
        end = end.max(image_end);
    }
    let subtype = (kind == 2).then_some("cur");
    let v = match bad {
        None => Verdict::complete(end).with_note(format!("{n} image(s)")),
        Some(i) => Verdict::partial(end, format!("image {i}: its PNG does not check out")),
    };
    Some(v.with_subtype(subtype))
}

/// What an icon's image is.
enum Image {
    /// A PNG, or a DIB of this many bytes (header, palette, masks).
    Fine(u64),
    /// A PNG that fails its checks (damaged or not contiguous).
    Damaged,
    /// Neither a PNG nor a DIB: the directory is a chance match.
    Not,
}

/// The image of `size` bytes at `off` of an entry `width` pixels wide (0:
/// 256).
fn image(src: &Src, off: u64, size: u64, width: u8) -> Image {
    if src.starts_with_at(off, b"\x89PNG\r\n\x1a\n") {
        let Some(sub) = src.sub(off, size) else {
            return Image::Damaged;
        };
        return match super::png::validate(sub) {
            Some(v) if v.status == Status::Complete && v.length == size => Image::Fine(size),
            _ => Image::Damaged,
        };
    }
    let Some(d) = src.bytes::<36>(off) else {
        return Image::Not;
    };
    let le32 = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    let (hsize, w, h2) = (le32(0), le32(4) as i32, le32(8) as i32);
    let planes = u16::from_le_bytes([d[12], d[13]]);
    let bits = u16::from_le_bytes([d[14], d[15]]);
    let used = u64::from(le32(32));
    let want = if width == 0 { 256 } else { i32::from(width) };
    let width_ok = w == want || (width == 0 && (1..=4096).contains(&w));
    if !(matches!(hsize, 40 | 108 | 124)
        && planes == 1
        && matches!(bits, 1 | 2 | 4 | 8 | 16 | 24 | 32)
        && width_ok
        && (2..=8192).contains(&h2))
    {
        return Image::Not;
    }
    // Header, palette, the XOR rows and the AND rows (each row padded to
    // 32 bits), for the icon's height (half the DIB's).
    let (w, h, bits) = (w as u64, (h2 / 2) as u64, u64::from(bits));
    let colours = if bits <= 8 {
        if used > 0 { used.min(256) } else { 1 << bits }
    } else {
        used.min(256)
    };
    let row = |bits_per_row: u64| bits_per_row.div_ceil(32) * 4;
    Image::Fine(u64::from(hsize) + 4 * colours + (row(w * bits) + row(w)) * h)
}

/// An Apple icon image (ICNS).
pub fn validate_icns(src: Src) -> Option<Verdict> {
    let h = src.bytes::<8>(0)?;
    let len = u64::from(u32::from_be_bytes([h[4], h[5], h[6], h[7]]));
    if &h[..4] != b"icns" || len < 16 {
        return None;
    }
    let mut pos = 8u64;
    let mut elements = 0u32;
    while pos < len {
        let Some(e) = src.bytes::<8>(pos) else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        let elen = u64::from(u32::from_be_bytes([e[4], e[5], e[6], e[7]]));
        elements += 1;
        if !printable(&e[..4]) || elen < 8 || pos + elen > len || elements > MAX_ELEMENTS {
            return (elements > 1).then(|| {
                Verdict::partial(pos, format!("element {elements} at {pos} breaks the chain"))
            });
        }
        pos += elen;
    }
    if len > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(Verdict::complete(len).with_note(format!("{elements} element(s)")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A DIB image for an icon `w` pixels square: header, 2-colour palette,
    /// 1-bit XOR and AND masks.
    fn dib(w: u8) -> Vec<u8> {
        let w32 = i32::from(w);
        let mut d = 40u32.to_le_bytes().to_vec();
        d.extend_from_slice(&w32.to_le_bytes());
        d.extend_from_slice(&(2 * w32).to_le_bytes());
        d.extend_from_slice(&1u16.to_le_bytes());
        d.extend_from_slice(&1u16.to_le_bytes());
        d.extend_from_slice(&[0; 24]);
        d.extend_from_slice(&[0, 0, 0, 0, 255, 255, 255, 0]);
        let row = usize::from(w).div_ceil(32) * 4;
        d.extend((0..2 * row * usize::from(w)).map(|i| (i * 13) as u8));
        d
    }

    /// An icon of the given images (`(width, bytes)`).
    pub fn ico(kind: u16, images: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut d = vec![0, 0];
        d.extend_from_slice(&kind.to_le_bytes());
        d.extend_from_slice(&(images.len() as u16).to_le_bytes());
        let mut off = 6 + 16 * images.len();
        for (w, img) in images {
            d.extend_from_slice(&[*w, *w, 0, 0, 1, 0, 1, 0]);
            d.extend_from_slice(&(img.len() as u32).to_le_bytes());
            d.extend_from_slice(&(off as u32).to_le_bytes());
            off += img.len();
        }
        for (_, img) in images {
            d.extend_from_slice(img);
        }
        d
    }

    pub fn seed() -> Vec<u8> {
        ico(1, &[(16, dib(16)), (32, super::super::png::tests::seed())])
    }

    pub fn icns_seed() -> Vec<u8> {
        let mut body = Vec::new();
        for (t, n) in [(b"ic08", 30usize), (b"TOC ", 16), (b"is32", 9)] {
            body.extend_from_slice(t);
            body.extend_from_slice(&((n + 8) as u32).to_be_bytes());
            body.extend(std::iter::repeat_n(0x42u8, n));
        }
        let mut d = b"icns".to_vec();
        d.extend_from_slice(&((body.len() + 8) as u32).to_be_bytes());
        d.extend(body);
        d
    }

    #[test]
    fn ico_complete_prefixes_and_damage() {
        let d = seed();
        assert_eq!(assert_complete("ico", &d), None);
        assert_prefixes("ico", &d);
        let c = ico(2, &[(16, dib(16))]);
        assert_eq!(assert_complete("ico", &c).as_deref(), Some("cur"));
        // A byte of the PNG image changed: its CRC fails.
        let mut bad = d.clone();
        let n = bad.len();
        bad[n - 20] ^= 0x40;
        assert_eq!(run("ico", &bad).unwrap().status, Status::Partial);
        // An image that is neither PNG nor DIB, an offset inside the
        // directory, a DIB of another width: chance matches.
        let mut junk = ico(1, &[(16, vec![0x33; 200])]);
        assert!(run("ico", &junk).is_none());
        junk = seed();
        junk[6 + 12..6 + 16].copy_from_slice(&4u32.to_le_bytes());
        assert!(run("ico", &junk).is_none());
        assert!(run("ico", &ico(1, &[(48, dib(16))])).is_none());
        // A size of 4 GiB: cut.
        let mut h = seed();
        h[6 + 8..6 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(run("ico", &h).unwrap().status, Status::Partial);
    }

    #[test]
    fn icns_complete_prefixes_and_damage() {
        let d = icns_seed();
        assert_eq!(assert_complete("icns", &d), None);
        assert_prefixes("icns", &d);
        let mut b = d.clone();
        b[8 + 38 + 4..8 + 38 + 8].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(run("icns", &b).unwrap().status, Status::Partial);
        let mut l = d.clone();
        l[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(run("icns", &l).unwrap().status, Status::Partial);
    }
}
