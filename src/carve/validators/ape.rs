//! Monkey's Audio (APE).
//!
//! Structure (Monkey's Audio SDK, `MACLib/APEInfo.h`, `APE_DESCRIPTOR` and
//! `APE_HEADER`, files of version 3.98 (3980) and later): the descriptor
//! `"MAC " | nVersion u16 | padding u16 | nDescriptorBytes u32 |
//! nHeaderBytes u32 | nSeekTableBytes u32 | nHeaderDataBytes u32 |
//! nAPEFrameDataBytes u32 | nAPEFrameDataBytesHigh u32 |
//! nTerminatingDataBytes u32 | MD5 [16]` (all LE), then the header
//! (`nCompressionLevel u16 | nFormatFlags u16 | nBlocksPerFrame u32 |
//! nFinalFrameBlocks u32 | nTotalFrames u32 | nBitsPerSample u16 |
//! nChannels u16 | nSampleRate u32`), the seek table, the WAV header
//! kept from the source, the frame data and the terminating data: the file
//! is the sum of those six sizes. Taggers append an APEv2 tag (and ID3v1).
//!
//! Older files (`APE_HEADER_OLD`, versions before 3980) record no frame
//! data size: their end cannot be known from the structure, so they are
//! `Unvalidated` to the window's end.
//!
//! Checked: descriptor 52-1024 bytes, header at least 24; compression level
//! a multiple of 1000 up to 5000; 1-32 channels, 8/16/24/32 bits, a
//! sample rate; a seek table of 4 bytes per frame at least; the final
//! frame's blocks at most a frame's.
//!
//! * `None`: a header failing those checks;
//! * `Complete`: the sizes fit in the window; length = their sum plus the
//!   tags after it;
//! * `Partial`: the sum is past the window (length = window).

use super::Verdict;
use super::mp3::complete_with_tags;
use super::read::Src;

pub fn validate(src: Src) -> Option<Verdict> {
    let d = src.bytes::<52>(0);
    let h = src.bytes::<8>(0)?;
    if &h[..4] != b"MAC " {
        return None;
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if !(3800..=4100).contains(&version) {
        return None;
    }
    if version < 3980 {
        return old(&src, version);
    }
    let d = d?;
    let u32at = |o: usize| u64::from(u32::from_le_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]));
    let (desc, head, seek, wav) = (u32at(8), u32at(12), u32at(16), u32at(20));
    let frames_bytes = u32at(24) | u32at(28) << 32;
    let term = u32at(32);
    if !(52..=1024).contains(&desc) || !(24..=1024).contains(&head) || seek % 4 != 0 {
        return None;
    }
    let x = src.bytes::<24>(desc)?;
    let level = u16::from_le_bytes([x[0], x[1]]);
    let per_frame = u32::from_le_bytes([x[4], x[5], x[6], x[7]]);
    let final_blocks = u32::from_le_bytes([x[8], x[9], x[10], x[11]]);
    let total_frames = u64::from(u32::from_le_bytes([x[12], x[13], x[14], x[15]]));
    let bits = u16::from_le_bytes([x[16], x[17]]);
    let channels = u16::from_le_bytes([x[18], x[19]]);
    let rate = u32::from_le_bytes([x[20], x[21], x[22], x[23]]);
    let sane = level % 1000 == 0
        && (1000..=5000).contains(&level)
        && (1..=32).contains(&channels)
        && matches!(bits, 8 | 16 | 24 | 32)
        && rate > 0
        && final_blocks <= per_frame
        && seek >= 4 * total_frames
        && (total_frames == 0) == (frames_bytes == 0);
    if !sane {
        return None;
    }
    // (Lengths from the file: a sum of 2^64 is a file past the window.)
    let end = [head, seek, wav, frames_bytes, term]
        .iter()
        .fold(desc, |a, &b| a.saturating_add(b));
    if end > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(complete_with_tags(
        &src,
        end,
        format!("Monkey's Audio {version}: {total_frames} frames, sizes add up"),
    ))
}

/// A file of the old header (before 3980), which records no frame data
/// size: checked, and `Unvalidated` to the window's end.
fn old(src: &Src, version: u16) -> Option<Verdict> {
    let h = src.bytes::<32>(0)?;
    let u16at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
    let u32at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let level = u16at(6);
    let sane = level % 1000 == 0
        && (1000..=5000).contains(&level)
        && (1..=32).contains(&u16at(10))
        && u32at(12) > 0
        && u32at(16) <= 1 << 20;
    sane.then(|| {
        Verdict::unvalidated(
            src.len(),
            format!("Monkey's Audio {version}: the old header records no data size"),
        )
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A version-3990 file of `frames` frames of `per` bytes each.
    pub fn make(frames: u32, per: usize) -> Vec<u8> {
        let wav = b"RIFF\x24\x00\x00\x00WAVEfmt ".to_vec();
        let data = frames as usize * per;
        let mut f = b"MAC \x96\x0f\x00\x00".to_vec();
        for v in [52, 24, 4 * frames, wav.len() as u32, data as u32, 0, 0] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(&[0x11; 16]);
        f.extend_from_slice(&2000u16.to_le_bytes());
        f.extend_from_slice(&0u16.to_le_bytes());
        f.extend_from_slice(&73728u32.to_le_bytes());
        f.extend_from_slice(&100u32.to_le_bytes());
        f.extend_from_slice(&frames.to_le_bytes());
        f.extend_from_slice(&16u16.to_le_bytes());
        f.extend_from_slice(&2u16.to_le_bytes());
        f.extend_from_slice(&44100u32.to_le_bytes());
        for i in 0..frames {
            f.extend_from_slice(&(i * per as u32).to_le_bytes());
        }
        f.extend_from_slice(&wav);
        f.extend((0..data).map(|i| (i * 13 + 7) as u8));
        f
    }

    pub fn seed() -> Vec<u8> {
        make(3, 40)
    }

    #[test]
    fn sizes_add_up_with_tags() {
        let f = seed();
        assert_complete("ape", &f);
        assert_prefixes("ape", &f);
        // An APEv2 tag with its header, and an ID3v1 tag, appended.
        let mut t = make(2, 30);
        let mut tag = b"APETAGEX".to_vec();
        tag.extend_from_slice(&2000u32.to_le_bytes());
        tag.extend_from_slice(&32u32.to_le_bytes()); // size: footer only
        tag.extend_from_slice(&0u32.to_le_bytes());
        tag.extend_from_slice(&(1u32 << 29 | 1 << 31).to_le_bytes());
        tag.extend_from_slice(&[0; 8]);
        let mut foot = tag.clone();
        foot[20..24].copy_from_slice(&(1u32 << 31).to_le_bytes());
        t.extend(tag);
        t.extend(foot);
        t.extend_from_slice(b"TAG");
        t.extend_from_slice(&[0; 125]);
        assert_complete("ape", &t);
    }

    #[test]
    fn hostile_and_chance() {
        let mut f = seed();
        f[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("ape", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        let mut g = seed();
        g[52] = 7; // compression level 2007
        assert!(run("ape", &g).is_none());
        let mut h = b"MAC \x96\x0f".to_vec();
        h.extend((0..200u32).map(|i| (i * 37 + 11) as u8));
        assert!(run("ape", &h).is_none());
        // The old header: no size to end it.
        let mut o = b"MAC \x78\x0f\xd0\x07\x16\x00\x02\x00\x44\xac\x00\x00\x2c".to_vec();
        o.resize(200, 0);
        assert_eq!(run("ape", &o).unwrap().status, Status::Unvalidated);
    }

    #[test]
    fn frame_data_of_2_to_the_64_is_cut_not_an_overflow() {
        // The fuzzer's case: the 64-bit frame data size (at 24 and 28) near
        // 2^64, which the sum of the descriptor's sizes overflowed.
        let mut d = seed();
        d[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        d[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("ape", &d).unwrap();
        assert_eq!(v.status, super::super::Status::Partial);
    }
}
