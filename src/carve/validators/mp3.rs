//! MP3 (MPEG-1/2/2.5 audio, layers I–III), with ID3v2 / ID3v1 tags.
//!
//! Structure (ISO/IEC 11172-3 §2.4.1.3, ISO/IEC 13818-3; id3.org ID3v2.3.0 /
//! v2.4.0 §3.1, ID3v1): an optional ID3v2 tag `ID3 | major 2..4 | revision |
//! flags | size (4 × 7-bit syncsafe)` plus a 10-byte footer when flag 0x10 is
//! set; then MPEG audio frames, each a 4-byte header (11-bit sync, version,
//! layer, bitrate index, sample-rate index, padding, …) whose fields give the
//! frame length (`144·bitrate/rate + pad` for layer II/III MPEG-1, `72·…`
//! for layer III MPEG-2/2.5, `(12·bitrate/rate + pad)·4` for layer I); then an
//! optional 128-byte ID3v1 tag `TAG…`.
//!
//! The first frame is looked for right after the ID3v2 tag (skipping up to
//! [`MAX_GAP`] bytes of zero padding, of which at most [`MAX_JUNK`] may be
//! other bytes); it only counts when [`MIN_FRAMES`]
//! consecutive valid frames with the same version, layer and sample rate
//! follow. The walk then goes frame by frame while that holds. When the
//! first frame is an info frame (LAME `Xing`/`Info` with the frame-count
//! flag, or Fraunhofer `VBRI`), the walk stops at the declared number of
//! frames (the info frame counted) and must reach it.
//!
//! * `None`: no [`MIN_FRAMES`] valid frames at the candidate (or within
//!   [`MAX_GAP`] after a valid ID3v2 tag): a stray `FF Fx`, or the ID3 tag of
//!   something else.
//! * `Complete`: the declared number of frames, or (without an info frame)
//!   at least [`MIN_FRAMES`] frames and the chain ends cleanly (the next
//!   bytes are not a frame header); length = end of the last frame (+ 128
//!   for an ID3v1 tag).
//! * `Partial`: a frame (or the ID3v2 tag) runs past the window (length =
//!   window), or the frame chain after an ID3v2 tag breaks before
//!   [`MIN_FRAMES`] frames, or before the info frame's count (a cut or
//!   fragmented file; length = end of the last frame).
//!
//! Not handled: free-format bitrate streams (bitrate index 0), APEv2 and
//! Lyrics3 trailers (not included in the length). Without an info frame, a
//! file cut (or fragmented) exactly at a frame boundary looks complete.

use super::Verdict;
use super::read::Src;

/// Consecutive frames needed to accept a frame chain.
pub const MIN_FRAMES: u32 = 4;
/// Bytes searched after an ID3v2 tag for the first frame (zero padding).
pub const MAX_GAP: u64 = 64 * 1024;
/// Non-zero bytes tolerated between an ID3v2 tag and the first frame.
pub const MAX_JUNK: u64 = 128;
/// Frames walked at most.
const MAX_FRAMES: u32 = 10_000_000;

const BR_V1: [[u32; 16]; 3] = [
    [
        0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 0,
    ], // layer I
    [
        0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 0,
    ], // layer II
    [
        0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0,
    ], // layer III
];
const BR_V2: [[u32; 16]; 2] = [
    [
        0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256, 0,
    ], // layer I
    [
        0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0,
    ], // layers II, III
];

/// Frame length and a key of the fields that stay constant in a stream.
fn frame(h: [u8; 4]) -> Option<(u64, u16)> {
    if h[0] != 0xFF || h[1] & 0xE0 != 0xE0 {
        return None;
    }
    let ver = (h[1] >> 3) & 3; // 0: 2.5, 2: 2, 3: 1
    let layer = (h[1] >> 1) & 3; // 1: III, 2: II, 3: I
    let bri = usize::from(h[2] >> 4);
    let sri = (h[2] >> 2) & 3;
    let pad = u32::from((h[2] >> 1) & 1);
    if ver == 1 || layer == 0 || sri == 3 || h[3] & 3 == 2 {
        return None;
    }
    let rate = [44100u32, 48000, 32000][usize::from(sri)]
        >> (match ver {
            3 => 0,
            2 => 1,
            _ => 2,
        });
    let br = if ver == 3 {
        BR_V1[usize::from(3 - layer)][bri]
    } else {
        BR_V2[usize::from(layer != 3)][bri]
    } * 1000;
    if br == 0 {
        return None;
    }
    let len = match layer {
        3 => (12 * br / rate + pad) * 4,
        1 if ver != 3 => 72 * br / rate + pad,
        _ => 144 * br / rate + pad,
    };
    Some((u64::from(len), u16::from(h[1] & 0xFE) << 8 | u16::from(sri)))
}

/// `n` frames ending at `end`; `cut` when the window ended inside a frame.
struct Chain {
    n: u32,
    end: u64,
    cut: bool,
}

/// The total number of frames a Xing/Info (LAME) or VBRI (Fraunhofer) header
/// in the frame at `pos` declares, counting that frame itself.
fn vbr_frames(src: &Src, pos: u64) -> Option<u32> {
    let h = src.bytes::<4>(pos)?;
    let ver = (h[1] >> 3) & 3;
    let mono = h[3] >> 6 == 3;
    let crc = if h[1] & 1 == 0 { 2 } else { 0 };
    let side: u64 = match (ver == 3, mono) {
        (true, false) => 32,
        (true, true) => 17,
        (false, false) => 17,
        (false, true) => 9,
    };
    let x = pos + 4 + crc + side;
    if src.starts_with_at(x, b"Xing") || src.starts_with_at(x, b"Info") {
        let flags = src.u32be(x + 4)?;
        if flags & 1 == 0 {
            return None;
        }
        let frames = src.u32be(x + 8)?;
        return (frames > 0).then(|| frames.saturating_add(1));
    }
    let v = pos + 4 + 32;
    if src.starts_with_at(v, b"VBRI") {
        let frames = src.u32be(v + 14)?;
        return (frames > 0).then(|| frames.saturating_add(1));
    }
    None
}

/// Walks frames from `pos` (at most `limit` frames).
fn walk(src: &Src, pos: u64, limit: u32) -> Chain {
    let mut p = pos;
    let mut n = 0u32;
    let mut key = None;
    while n < limit {
        let Some(h) = src.bytes::<4>(p) else {
            // Fewer than 4 bytes left: a cut header if it starts like one.
            let cut = p < src.len() && src.u8(p) == Some(0xFF);
            return Chain { n, end: p, cut };
        };
        let Some((len, k)) = frame(h) else { break };
        if key.is_some_and(|kk| kk != k) {
            break;
        }
        key = Some(k);
        if p + len > src.len() {
            return Chain {
                n,
                end: p,
                cut: true,
            };
        }
        p += len;
        n += 1;
    }
    Chain {
        n,
        end: p,
        cut: false,
    }
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut start = 0u64;
    let mut tagged = false;
    if src.starts_with_at(0, b"ID3") {
        let Some(h) = src.bytes::<10>(0) else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        if !(2..=4).contains(&h[3]) || h[4] == 0xFF || h[6..10].iter().any(|b| b & 0x80 != 0) {
            return None;
        }
        let size = h[6..10].iter().fold(0u64, |a, b| a << 7 | u64::from(*b));
        let footer = if h[3] == 4 && h[5] & 0x10 != 0 { 10 } else { 0 };
        start = 10 + size + footer;
        if start > src.len() {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        tagged = true;
    }
    // Find the first frame that starts a chain of MIN_FRAMES. Between the
    // tag and it only zero padding, or at most MAX_JUNK other bytes.
    let search_end = if tagged { start + MAX_GAP } else { start + 1 };
    let mut first = None;
    let mut p = start;
    let mut junk = 0u64;
    while p < search_end && p < src.len() {
        match src.u8(p) {
            Some(0xFF) => {}
            Some(b) => {
                if b == b'I' && src.starts_with_at(p, b"ID3") {
                    // Another tag before any audio: this one is not its file's.
                    return None;
                }
                if b != 0 {
                    junk += 1;
                    if junk > MAX_JUNK {
                        return None;
                    }
                }
                p += 1;
                continue;
            }
            None => break,
        }
        let Chain { n, cut, .. } = walk(&src, p, MIN_FRAMES);
        if n >= MIN_FRAMES || (cut && n > 0) {
            first = Some(p);
            break;
        }
        if cut && n == 0 && !tagged {
            // A single header cut by the window: can't tell.
            return None;
        }
        junk += 1;
        if junk > MAX_JUNK {
            return None;
        }
        p += 1;
    }
    let Some(first) = first else {
        // No MPEG audio after the tag (e.g. the ID3 tag of another format).
        return None;
    };
    // A VBR/CBR info frame (Xing/Info/VBRI) says how many frames follow.
    let declared = vbr_frames(&src, first);
    let limit = declared.map_or(MAX_FRAMES, |d| d.min(MAX_FRAMES));
    let Chain { n, end, cut } = walk(&src, first, limit);
    if cut {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    if n < MIN_FRAMES && declared.is_none_or(|d| d > n) {
        return tagged.then(|| Verdict::partial(end, "too few MPEG audio frames"));
    }
    if let Some(d) = declared
        && n < d
    {
        // The chain breaks before the declared end: cut or fragmented.
        return Some(Verdict::partial(
            end,
            format!("{n} of {d} frames declared by the info frame"),
        ));
    }
    let mut len = end;
    let mut v_notes = vec![format!("{n} frames")];
    if declared.is_some() {
        v_notes.push("frame count matches the info frame".into());
    }
    if first > start {
        v_notes.push(format!("{} bytes before the first frame", first - start));
    }
    if src.starts_with_at(end, b"TAG") {
        if src.has(end, 128) {
            len += 128;
            v_notes.push("ID3v1 tag".into());
        } else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
    }
    let mut v = Verdict::complete(len);
    v.notes = v_notes;
    Some(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        let mut t = id3(b"TIT2\x00\x00\x00\x02\x00\x00\x00x");
        t.extend_from_slice(&frames(5));
        t.extend_from_slice(b"TAG");
        t.extend_from_slice(&[b' '; 125]);
        t
    }

    /// MPEG-1 layer III, 128 kbit/s, 44.1 kHz frames (417/418 bytes).
    fn frames(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..n {
            let pad = i % 3 == 0;
            v.extend_from_slice(&[0xFF, 0xFB, 0x90 | if pad { 2 } else { 0 }, 0x64]);
            let len = if pad { 418 } else { 417 };
            v.extend((4..len).map(|j| (j * 7 + i) as u8 & 0x7F));
        }
        v
    }

    fn id3(body: &[u8]) -> Vec<u8> {
        let mut v = b"ID3\x03\x00\x00".to_vec();
        let n = body.len() as u32;
        v.extend_from_slice(&[
            (n >> 21) as u8 & 0x7F,
            (n >> 14) as u8 & 0x7F,
            (n >> 7) as u8 & 0x7F,
            n as u8 & 0x7F,
        ]);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn frames_id3_and_trailer() {
        let f = frames(10);
        assert_complete("mp3", &f);
        let mut t = id3(b"TIT2\x00\x00\x00\x06\x00\x00\x00title\x00\x00\x00\x00");
        t.extend_from_slice(&frames(6));
        t.extend_from_slice(b"TAG");
        t.extend_from_slice(&[b' '; 125]);
        assert_complete("mp3", &t);
        for n in 0..t.len() {
            let _ = run("mp3", &t[..n]);
        }
    }

    /// `n` frames whose first is a LAME info frame declaring `n` in all.
    fn with_xing(n: usize, tag: &[u8; 4]) -> Vec<u8> {
        let mut f = frames(n);
        f[36..40].copy_from_slice(tag);
        f[40..44].copy_from_slice(&3u32.to_be_bytes()); // frames + bytes present
        f[44..48].copy_from_slice(&(n as u32 - 1).to_be_bytes());
        let len = f.len() as u32;
        f[48..52].copy_from_slice(&len.to_be_bytes());
        f
    }

    #[test]
    fn info_frame_count() {
        let x = with_xing(10, b"Xing");
        assert_complete("mp3", &x);
        assert_complete("mp3", &with_xing(7, b"Info"));
        // Fragmented: the chain stops at 6 of 10 frames.
        let cut_at = frames(6).len();
        let mut frag = x[..cut_at].to_vec();
        frag.extend_from_slice(&[0x11; 900]);
        let v = run("mp3", &frag).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, cut_at as u64));
        // Frames of another stream right after: stop at the declared count.
        let mut two = x.clone();
        two.extend_from_slice(&frames(5));
        let v = run("mp3", &two).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, x.len() as u64));
    }

    #[test]
    fn rejects_and_partial() {
        assert!(run("mp3", &frames(2)).is_none());
        assert!(run("mp3", b"\xFF\xFB\x90\x64 nonsense").is_none());
        assert!(run("mp3", b"ID3\x09\x00\x00\x00\x00\x00\x00").is_none());
        let mut t = id3(b"abc");
        t.extend_from_slice(b"no audio here");
        assert!(run("mp3", &t).is_none());
        let f = frames(10);
        let v = run("mp3", &f[..f.len() - 10]).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64 - 10));
        let v = run_at("mp3", &f, 0, Limits { max_len: 3000 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 3000));
    }

    #[test]
    fn real_mp3s() {
        let d = [
            "/usr/share/forensics-samples/original-files",
            "/usr/lib/google-cloud-sdk/platform/gsutil/gslib/tests/test_data",
        ];
        check_real("mp3", &real_files(&d, &[".mp3"], 10));
    }
}
