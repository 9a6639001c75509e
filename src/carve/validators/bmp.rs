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
//! Any bytes are valid pixels, so the pixel array of an uncompressed 8/16/
//! 24/32-bit bitmap gets a heuristic *seam* check instead (carving
//! literature's fragmentation point detection): row by row, the mean
//! difference between vertically adjacent bytes is compared with that of
//! bytes a few pixels apart. Image rows are vertically correlated (ratio
//! well below 1, even in detailed areas); someone else's data is not (ratio
//! ≈ 1). A seam is reported where [`SEAM_ROWS`] rows with ratio < 0.8 are
//! followed by [`SEAM_ROWS`] rows with ratio > 0.93, mean difference > 20,
//! *and* bytes that look like foreign data: entropy ≥ 7.5 bits/byte
//! (compressed or random data) or ≥ 98 % printable text. Tuned on 129 real
//! bitmaps (photos and graphics, 24-bit, 8-bit grey and palette, dithered or
//! not) with no false seam; it finds most cuts followed by random,
//! compressed, JPEG or text data, and none followed by zeros or by another
//! image's pixels.
//!
//! A file longer than 12 blocks that holds an ext2/3 indirect block where
//! its 13th block should be ([`super::read::ext_indirect_block`]) is not
//! contiguous either.
//!
//! * `None`: any header check fails (a stray `BM`).
//! * `Complete`: the header is sane, the whole file (its size field) lies
//!   inside the window, no indirect block and no seam was found; length =
//!   the file size field.
//! * `Partial`: sane header, but the file size runs past the window (length =
//!   window), or a seam (length = start of the row where it begins), or an
//!   indirect block (length = its offset).

use super::Verdict;
use super::read::{Src, ext_indirect_block, le16, le32, looks_foreign};

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
    if let Some(at) = ext_indirect_block(&src, file_size) {
        let mut v = Verdict::partial(at, format!("ext2/3 indirect block at {at}: not contiguous"));
        v.notes.extend(notes);
        return Some(v);
    }
    if matches!(compression, 0 | 3 | 6) && matches!(bpp, 8 | 16 | 24 | 32) {
        let row = (width as u64 * u64::from(bpp)).div_ceil(32) * 4;
        let used = width as u64 * u64::from(bpp / 8);
        if let Some(r) = seam(
            &src,
            offset,
            row,
            used,
            height.unsigned_abs(),
            u64::from(bpp / 8),
        ) {
            let at = offset + r * row;
            let mut v = Verdict::partial(
                at,
                format!("pixel data stops looking like an image at row {r}"),
            );
            v.notes.extend(notes);
            return Some(v);
        }
    }
    let mut v = Verdict::complete(file_size);
    v.notes = notes;
    Some(v)
}

/// Rows on each side of a seam.
pub const SEAM_ROWS: usize = 8;
/// Bytes of a row compared (sampled evenly).
const SAMPLES: u64 = 256;

/// The first row where the pixel data turns into something that is not an
/// image (see the module documentation), if any.
fn seam(src: &Src, offset: u64, row: u64, used: u64, height: u64, pixel: u64) -> Option<u64> {
    let k = SEAM_ROWS;
    if height < 2 * k as u64 + 2 || used < 16 * pixel {
        return None;
    }
    // Sampled bytes (pairs: a byte and the byte 7 pixels on) of a row; at
    // most the first 64 KiB of a row are looked at.
    let span = used.min(64 * 1024);
    let step = (span / SAMPLES).max(1);
    let shift = 7 * pixel;
    let mut raw = vec![0u8; span as usize];
    let mut take = |r: u64, buf: &mut Vec<u8>| -> bool {
        buf.clear();
        if !src.read_exact(offset + r * row, &mut raw) {
            return false;
        }
        let mut i = 0;
        while i + shift < span {
            buf.push(raw[i as usize]);
            buf.push(raw[(i + shift) as usize]);
            i += step;
        }
        true
    };
    // (vertical, shifted) mean differences for rows 1.., kept for 2k+1 rows.
    let mut hist: std::collections::VecDeque<(f64, f64)> = std::collections::VecDeque::new();
    let (mut prev, mut cur) = (Vec::new(), Vec::new());
    if !take(0, &mut prev) {
        return None;
    }
    for r in 1..height {
        if !take(r, &mut cur) {
            return None;
        }
        let (mut v, mut s, mut n) = (0u64, 0u64, 0u64);
        for (a, b) in prev.chunks_exact(2).zip(cur.chunks_exact(2)) {
            v += u64::from(a[0].abs_diff(b[0]));
            s += u64::from(a[1].abs_diff(b[0]));
            n += 1;
        }
        let n = n.max(1) as f64;
        hist.push_back((v as f64 / n, s as f64 / n));
        std::mem::swap(&mut prev, &mut cur);
        if hist.len() > 2 * k + 1 {
            hist.pop_front();
        }
        if hist.len() == 2 * k + 1 {
            // Candidate seam at the middle row `m`: k rows before, k after.
            let m = r - k as u64;
            let sum = |it: &mut dyn Iterator<Item = &(f64, f64)>| {
                it.fold((0.0, 0.0), |(a, b), (v, s)| (a + v, b + s))
            };
            let (av, as_) = sum(&mut hist.iter().take(k));
            let (bv, bs) = sum(&mut hist.iter().skip(k + 1));
            let (qa, qb) = (av / (as_ + 1e-9), bv / (bs + 1e-9));
            if bv / k as f64 > 20.0
                && qb > 0.93
                && qa < 0.8
                && looks_foreign(src, offset + (m + 1) * row, row * k as u64)
            {
                // The first row after `m` that is unlike the one above it.
                let first = hist
                    .iter()
                    .skip(k)
                    .position(|(v, s)| *v > 0.9 * *s && *v > 20.0)
                    .unwrap_or(0);
                return Some(m + first as u64);
            }
        }
    }
    None
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

    /// A 24-bit w×h image of smooth gradients with some texture.
    fn picture(w: u32, h: u32) -> Vec<u8> {
        let row = (w * 24).div_ceil(32) * 4;
        let mut v = sample(w, h);
        for y in 0..h {
            for x in 0..w {
                let o = (54 + y * row + 3 * x) as usize;
                let t = ((x * 7 + y * 13) % 11) as u8;
                v[o] = (x * 255 / w) as u8 ^ t;
                v[o + 1] = (y * 255 / h) as u8;
                v[o + 2] = ((x + y) * 127 / (w + h)) as u8 + t;
            }
        }
        v
    }

    #[test]
    fn seams_and_indirect_blocks() {
        let p = picture(160, 120);
        assert_complete("bmp", &p);
        let row = 160 * 3;
        // Cut at row 50, then compressed or random bytes: a seam near row 50.
        let cut = 54 + 50 * row + 17;
        let mut bad = p[..cut].to_vec();
        bad.extend(
            (0..p.len() - cut).map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 11) as u8),
        );
        let v = run("bmp", &bad).unwrap();
        assert_eq!(v.status, Status::Partial, "{:?}", v.notes);
        assert!((v.length as usize).abs_diff(cut) <= 2 * row, "{v:?}");
        // Then text.
        let mut bad = p[..cut].to_vec();
        bad.extend(
            b"The quick brown fox jumps over the lazy dog. "
                .iter()
                .cycle()
                .take(p.len() - cut),
        );
        assert_eq!(run("bmp", &bad).unwrap().status, Status::Partial);
        // An ext2 indirect block (4 KiB blocks) at offset 48 KiB.
        let mut ind = p.clone();
        let remaining = (p.len() - 49152).div_ceil(4096);
        ind[49152..49152 + 4096].fill(0);
        for i in 0..remaining {
            ind[49152 + 4 * i..49156 + 4 * i].copy_from_slice(&(5000 + i as u32).to_le_bytes());
        }
        let v = run("bmp", &ind).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 49152));
        // The same numbers but not matching the file's block count: not an indirect block.
        ind[49152 + 4 * remaining..49156 + 4 * remaining]
            .copy_from_slice(&(5000 + remaining as u32).to_le_bytes());
        assert_ne!(run("bmp", &ind).unwrap().length, 49152);
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
