//! Adobe Photoshop documents (PSD, version 1; PSB, version 2).
//!
//! Structure (Adobe Photoshop File Formats Specification): a 26-byte header
//! (`8BPS`, version, 6 zero bytes, channels 1-56, height and width 1-30,000
//! (PSB: 300,000), depth 1/8/16/32, colour mode 0-9), then three sections
//! each with its length in front (colour mode data u32, image resources
//! u32, layer and mask information u32 (PSB: u64)), then the merged image
//! data to the end of the file: a compression method (u16) and
//!
//! * 0, raw: channels × height rows of ⌈width × depth / 8⌉ bytes;
//! * 1, PackBits RLE: a table of channels × height row byte counts (u16;
//!   PSB: u32), then the rows;
//! * 2/3, ZIP: no length is recorded.
//!
//! * `None`: a header field out of range (a stray `8BPS`), or an RLE row
//!   count of zero;
//! * `Complete`: the sections and image data add up within the window;
//!   length = the end of the image data;
//! * `Partial`: they run past the window (length = window);
//! * `Unvalidated`: ZIP image data, whose end is not recorded (length = the
//!   window, as a rule of thumb) or an unknown compression method.
//!
//! Work: the header, three length fields and, for RLE, the row-count table,
//! read up to its first zero count: another header inside it (six zero
//! bytes) ends the read, so a run of headers reads each table byte about
//! once.

use super::Verdict;
use super::read::Src;

const MAX_CHANNELS: u16 = 56;

pub fn validate(src: Src) -> Option<Verdict> {
    let h: [u8; 26] = src.bytes(0)?;
    if h[..4] != *b"8BPS" || h[6..12] != [0; 6] {
        return None;
    }
    let psb = match u16::from_be_bytes([h[4], h[5]]) {
        1 => false,
        2 => true,
        _ => return None,
    };
    let channels = u64::from(u16::from_be_bytes([h[12], h[13]]));
    let height = u64::from(u32::from_be_bytes([h[14], h[15], h[16], h[17]]));
    let width = u64::from(u32::from_be_bytes([h[18], h[19], h[20], h[21]]));
    let depth = u64::from(u16::from_be_bytes([h[22], h[23]]));
    let mode = u16::from_be_bytes([h[24], h[25]]);
    let max_side = if psb { 300_000 } else { 30_000 };
    if channels == 0
        || channels > u64::from(MAX_CHANNELS)
        || !(1..=max_side).contains(&height)
        || !(1..=max_side).contains(&width)
        || !matches!(depth, 1 | 8 | 16 | 32)
        || mode > 9
    {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    // Colour mode data, image resources, layer and mask information.
    let mut pos = 26u64;
    for wide in [false, false, psb] {
        let len = if wide {
            src.u64be(pos)
        } else {
            src.u32be(pos).map(u64::from)
        };
        let Some(len) = len else {
            return cut();
        };
        pos = pos
            .saturating_add(if wide { 8 } else { 4 })
            .saturating_add(len);
    }
    let Some(method) = src.u16be(pos) else {
        return cut();
    };
    pos += 2;
    let rows = channels * height;
    let end = match method {
        0 => pos.saturating_add(rows.saturating_mul((width * depth).div_ceil(8))),
        1 => {
            let entry = if psb { 4 } else { 2 };
            let table = rows * entry;
            if !src.has(pos, table) {
                return cut();
            }
            let sum = rle_sum(&src, pos, table, entry)?;
            pos.saturating_add(table).saturating_add(sum)
        }
        2 | 3 => {
            return Some(Verdict::unvalidated(
                src.len(),
                "ZIP-compressed image data: its end is not recorded",
            ));
        }
        _ => {
            return Some(Verdict::unvalidated(
                src.len(),
                format!("unknown image data compression {method}"),
            ));
        }
    };
    if end > src.len() {
        return cut();
    }
    Some(Verdict::complete(end).with_subtype(psb.then_some("psb")))
}

/// The sum of the RLE row byte counts at `[pos, pos + table)` (entries of
/// `entry` bytes, big-endian), or `None` at a zero count: a PackBits row of
/// at least one pixel takes 2 bytes or more. The check also bounds the work:
/// another PSD header inside the table (6 zero bytes) stops the read there,
/// so headers back to back read each byte of their tables about once.
fn rle_sum(src: &Src, pos: u64, table: u64, entry: u64) -> Option<u64> {
    let mut buf = vec![0u8; 64 << 10];
    let mut sum = 0u64;
    let mut off = 0u64;
    // Small first reads, doubling: a table that another header cuts short
    // costs what lies before that header.
    let mut piece = 256u64;
    while off < table {
        let want = usize::try_from((table - off).min(piece)).ok()?;
        piece = (piece * 2).min(buf.len() as u64);
        let got = src.read(pos + off, &mut buf[..want]).min(want);
        let whole = got - got % entry as usize;
        if whole == 0 {
            return None;
        }
        for e in buf[..whole].chunks_exact(entry as usize) {
            let n = e.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b));
            if n == 0 {
                return None;
            }
            sum += n;
        }
        off += whole as u64;
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::super::testutil::run;

    /// A PSD of `channels` × `h` × `w` at 8 bits, with the given resources
    /// and RLE (method 1) or raw (0) data.
    fn psd(channels: u16, h: u32, w: u32, rle: bool) -> Vec<u8> {
        let mut d = b"8BPS\x00\x01\x00\x00\x00\x00\x00\x00".to_vec();
        d.extend(channels.to_be_bytes());
        d.extend(h.to_be_bytes());
        d.extend(w.to_be_bytes());
        d.extend(8u16.to_be_bytes());
        d.extend(3u16.to_be_bytes());
        d.extend(0u32.to_be_bytes()); // colour mode data
        d.extend(12u32.to_be_bytes()); // image resources
        d.extend(b"8BIM\x04\x0c\x00\x00\x00\x00\x00\x00");
        d.extend(0u32.to_be_bytes()); // layer and mask information
        if rle {
            d.extend(1u16.to_be_bytes());
            let rows = u32::from(channels) * h;
            for r in 0..rows {
                d.extend((2 + (r % 3) as u16).to_be_bytes());
            }
            for r in 0..rows {
                d.extend(vec![0x80u8; 2 + (r % 3) as usize]);
            }
        } else {
            d.extend(0u16.to_be_bytes());
            d.extend(vec![7u8; (u32::from(channels) * h * w) as usize]);
        }
        d
    }

    #[test]
    fn raw_and_rle_end_where_their_data_ends() {
        for rle in [false, true] {
            let doc = psd(3, 5, 7, rle);
            let mut d = doc.clone();
            d.extend([0xEE; 300]);
            let v = run("psd", &d).expect("psd");
            assert_eq!((v.status, v.length), (Status::Complete, doc.len() as u64));
            // Cut anywhere after the header: partial.
            let v = run("psd", &doc[..doc.len() - 1]).expect("psd");
            assert_eq!(v.status, Status::Partial);
        }
    }

    #[test]
    fn stray_signatures_and_hostile_fields() {
        let good = psd(1, 2, 2, false);
        for (at, b) in [
            (5, 3u8),
            (8, 1),
            (13, 0),
            (13, 57),
            (17, 0),
            (23, 7),
            (25, 10),
        ] {
            let mut d = good.clone();
            d[at] = b;
            assert!(run("psd", &d).is_none(), "byte {at} = {b}");
        }
        // A section length of 4 GiB: partial, nothing read past the window.
        let mut d = good.clone();
        d[30..34].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(run("psd", &d).expect("psd").status, Status::Partial);
        // Another PSD header inside an RLE row-count table: a zero count.
        let mut d = psd(3, 5, 7, true);
        let at = 26 + 4 + 4 + 12 + 4 + 2 + 6;
        d.splice(at..at + 12, *b"8BPS\x00\x01\x00\x00\x00\x00\x00\x00");
        assert!(run("psd", &d).is_none());
        // ZIP image data: no recorded end.
        let mut d = good;
        let at = d.len() - 4 - 2;
        d[at..at + 2].copy_from_slice(&2u16.to_be_bytes());
        assert_eq!(run("psd", &d).expect("psd").status, Status::Unvalidated);
    }
}
