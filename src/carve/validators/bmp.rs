//! BMP (Windows/OS/2 device-independent bitmap).
//!
//! Structure (Microsoft "Bitmap Storage", BITMAPFILEHEADER + BITMAPINFOHEADER
//! and its V4/V5 successors; OS/2 BITMAPCOREHEADER): `BM`, file size (u32 LE),
//! 4 reserved bytes, pixel-data offset (u32 LE), then the DIB header whose
//! first field is its own size: 12 (core), 40 (info), 52/56 (info + masks),
//! 64 (OS/2 v2), 108 (V4), 124 (V5).
//!
//! Checked: header size, width/height non-zero (and width positive), planes
//! = 1, a legal bit count, a known compression; the pixel offset lies after
//! the headers and before the end of the file; the file size covers the
//! headers; for uncompressed bitmaps the computed pixel array must fit in the
//! file size.
//!
//! * `None`: any of the above fails (a stray `BM`).
//! * `Complete`: the header is sane and the whole file (its size field) lies
//!   inside the window; length = the file size field.
//! * `Partial`: sane header, but the file size runs past the window (length =
//!   window).
//!
//! The pixel data itself cannot be checked: any bytes are valid pixels.

use super::Verdict;
use super::read::{Src, le16, le32};

pub fn validate(src: Src) -> Option<Verdict> {
    let mut h = [0u8; 14 + 40];
    let n = src.read(0, &mut h);
    if n < 2 || h[..2] != *b"BM" {
        return None;
    }
    if n < 18 {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let file_size = u64::from(le32(&h[2..]));
    let offset = u64::from(le32(&h[10..]));
    let hsize = u64::from(le32(&h[14..]));
    if !matches!(hsize, 12 | 40 | 52 | 56 | 64 | 108 | 124) {
        return None;
    }
    let headers = 14 + hsize;
    if n < 14 + 12 || (hsize >= 40 && n < 14 + 40) {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let d = &h[14..];
    let (width, height, planes, bpp, compression): (i64, i64, u16, u16, u32) = if hsize == 12 {
        (
            i64::from(le16(&d[4..])),
            i64::from(le16(&d[6..])),
            le16(&d[8..]),
            le16(&d[10..]),
            0,
        )
    } else {
        (
            i64::from(le32(&d[4..]) as i32),
            i64::from(le32(&d[8..]) as i32),
            le16(&d[12..]),
            le16(&d[14..]),
            le32(&d[16..]),
        )
    };
    let bpp_ok = matches!(bpp, 1 | 2 | 4 | 8 | 16 | 24 | 32 | 64)
        || (bpp == 0 && matches!(compression, 4 | 5));
    if width <= 0 || height == 0 || planes != 1 || !bpp_ok || compression > 13 {
        return None;
    }
    if width > 1 << 20 || height.unsigned_abs() > 1 << 20 {
        return None;
    }
    if offset < headers || file_size < headers || offset > file_size {
        return None;
    }
    let mut notes = Vec::new();
    // Uncompressed (BI_RGB, BI_BITFIELDS, BI_ALPHABITFIELDS): rows are padded to 4 bytes.
    if matches!(compression, 0 | 3 | 6) {
        let row = (width as u64 * u64::from(bpp)).div_ceil(32) * 4;
        let pixels = row * height.unsigned_abs();
        if offset + pixels > file_size {
            // A size field smaller than the pixel array: not a trustworthy header.
            return None;
        }
        if offset + pixels < file_size {
            notes.push(format!(
                "{} bytes after the pixel array",
                file_size - offset - pixels
            ));
        }
    }
    if file_size > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let mut v = Verdict::complete(file_size);
    v.notes = notes;
    Some(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample(3, 5)
    }

    fn sample(w: u32, h: u32) -> Vec<u8> {
        let row = (w * 24).div_ceil(32) * 4;
        let size = 54 + row * h;
        let mut v = b"BM".to_vec();
        v.extend_from_slice(&size.to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        v.extend_from_slice(&54u32.to_le_bytes());
        v.extend_from_slice(&40u32.to_le_bytes());
        v.extend_from_slice(&w.to_le_bytes());
        v.extend_from_slice(&h.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&24u16.to_le_bytes());
        v.extend_from_slice(&[0; 24]);
        v.extend((0..row * h).map(|i| i as u8));
        v
    }

    #[test]
    fn valid_bmp() {
        let b = sample(3, 5);
        assert_complete("bmp", &b);
        assert_prefixes("bmp", &b);
    }

    #[test]
    fn rejects() {
        assert!(
            run(
                "bmp",
                b"BM\x00\x01garbage garbage garbage garbage garbage garbage garbage"
            )
            .is_none()
        );
        let mut b = sample(3, 5);
        b[14] = 41; // header size
        assert!(run("bmp", &b).is_none());
        let mut b = sample(3, 5);
        b[2..6].copy_from_slice(&60u32.to_le_bytes()); // file size smaller than pixels
        assert!(run("bmp", &b).is_none());
        let mut b = sample(3, 5);
        b[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("bmp", &b).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, b.len() as u64));
    }

    #[test]
    fn real_bmps() {
        let d = py_dirs("test/imghdrdata");
        let d: Vec<&str> = d.iter().map(String::as_str).collect();
        check_real("bmp", &real_files(&d, &[".bmp"], 20));
    }
}
