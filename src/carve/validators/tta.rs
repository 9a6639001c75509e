//! True Audio (TTA1, `.tta`).
//!
//! Structure (TTA Lossless Audio Codec, "TTA1 format" description and
//! `libtta` `tta_decoder::read_tta_header`; all LE): a 22-byte header
//! `"TTA1" | format u16 (1: PCM, 2: encrypted) | channels u16 | bits per
//! sample u16 | sample rate u32 | data length u32 (samples per channel) |
//! CRC-32 of the 18 bytes before`, a seek table of one u32 size per frame
//! followed by its CRC-32, then the frames. A frame holds
//! `256 * rate / 245` samples (1.045 s), the last one the rest. The file
//! is the header, the table and the sum of the frame sizes; taggers add an
//! ID3v2 tag in front (carved as the MP3 type's tag, not here) and APEv2 /
//! ID3v1 after.
//!
//! Checked: the header's CRC; format 1 or 2, 1-8 channels, 8/16/24 bits,
//! a sample rate; the seek table's CRC.
//!
//! * `None`: a header failing those checks;
//! * `Complete`: the table's CRC holds and the frames fit in the window;
//!   length = header + table + frames + the tags after;
//! * `Partial`: the table or the frames run past the window (length =
//!   window), or the table's CRC fails (length = the header's end).
//!
//! Reads the seek table once (4 bytes per frame, inside the window), up
//! to another `TTA1` signature in it (then `Partial`): candidates read
//! tables that do not overlap, linear in the image.

use super::Verdict;
use super::mp3::complete_with_tags;
use super::read::Src;

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<22>(0)?;
    let u16at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
    let u32at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let (format, channels, bits) = (u16at(4), u16at(6), u16at(8));
    let (rate, samples) = (u64::from(u32at(10)), u64::from(u32at(14)));
    let ok = &h[..4] == b"TTA1"
        && matches!(format, 1 | 2)
        && (1..=8).contains(&channels)
        && matches!(bits, 8 | 16 | 24)
        && (245..=1_000_000).contains(&rate)
        && crc32fast::hash(&h[..18]) == u32at(18);
    if !ok {
        return None;
    }
    let frame = 256 * rate / 245;
    let frames = samples.div_ceil(frame);
    let table = 4 * frames;
    if !src.has(22, table + 4) {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let Some((crc, sum)) = read_table(&src, table) else {
        return Some(Verdict::partial(
            22,
            "another TTA1 header inside the seek table",
        ));
    };
    if src.u32le(22 + table) != Some(crc) {
        return Some(Verdict::partial(22, "seek table CRC fails"));
    }
    let end = 22 + table + 4 + sum;
    if end > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(complete_with_tags(
        &src,
        end,
        format!("TTA1: {frames} frames, seek table CRC holds"),
    ))
}

/// The seek table's CRC and the sum of its entries; `None` when another
/// `TTA1` signature lies inside it (a seek table holds frame sizes: a
/// header there is another file's, and stopping there keeps the tables the
/// candidates read from overlapping, so the reads stay linear in the image).
fn read_table(src: &Src, table: u64) -> Option<(u32, u64)> {
    const PIECE: usize = 64 << 10;
    let (mut crc, mut sum) = (crc32fast::Hasher::new(), 0u64);
    let (mut entry, mut held) = ([0u8; 4], 0usize);
    let mut buf = vec![0u8; 3 + usize::try_from(table).map_or(PIECE, |t| t.min(PIECE))];
    let (mut kept, mut at) = (0usize, 0u64);
    while at < table {
        // Pieces of 512 bytes first, doubling: a candidate reads about as
        // far as the next signature.
        let step = usize::try_from(at.clamp(512, PIECE as u64)).unwrap_or(PIECE);
        let room = (buf.len() - kept).min(step);
        let want = usize::try_from(table - at).map_or(room, |w| w.min(room));
        let got = src.read(22 + at, &mut buf[kept..kept + want]);
        if got == 0 {
            break;
        }
        let piece = &buf[..kept + got];
        if memchr::memmem::find(piece, b"TTA1").is_some() {
            return None;
        }
        crc.update(&piece[kept..]);
        for b in &piece[kept..] {
            entry[held] = *b;
            held += 1;
            if held == 4 {
                sum = sum.saturating_add(u64::from(u32::from_le_bytes(entry)));
                held = 0;
            }
        }
        at += got as u64;
        let keep = piece.len().min(3);
        let tail = piece.len() - keep;
        buf.copy_within(tail..tail + keep, 0);
        kept = keep;
    }
    Some((crc.finalize(), sum))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A TTA1 of `samples` mono 16-bit samples at 8 kHz, frames of
    /// `per` bytes.
    pub fn make(samples: u32, per: u32) -> Vec<u8> {
        let mut f = b"TTA1\x01\x00\x01\x00\x10\x00".to_vec();
        f.extend_from_slice(&8000u32.to_le_bytes());
        f.extend_from_slice(&samples.to_le_bytes());
        let c = crc32fast::hash(&f);
        f.extend_from_slice(&c.to_le_bytes());
        let frames = samples.div_ceil(256 * 8000 / 245);
        let table: Vec<u8> = (0..frames).flat_map(|_| per.to_le_bytes()).collect();
        f.extend_from_slice(&table);
        f.extend_from_slice(&crc32fast::hash(&table).to_le_bytes());
        f.extend((0..frames * per).map(|i| (i * 17 + 1) as u8));
        f
    }

    pub fn seed() -> Vec<u8> {
        make(20_000, 30)
    }

    #[test]
    fn frames_add_up() {
        for f in [seed(), make(0, 10), make(1, 5)] {
            assert_complete("tta", &f);
            assert_prefixes("tta", &f);
        }
    }

    #[test]
    fn hostile_and_damaged() {
        // The largest sample count: a seek table past the window.
        let mut f = seed();
        f[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
        let c = crc32fast::hash(&f[..18]);
        f[18..22].copy_from_slice(&c.to_le_bytes());
        let v = run("tta", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        // A damaged seek table.
        let mut g = seed();
        g[23] ^= 1;
        assert_eq!(run("tta", &g).unwrap().status, Status::Partial);
        // A header whose CRC fails.
        let mut h = seed();
        h[12] ^= 1;
        assert!(run("tta", &h).is_none());
    }
}
