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
//! After the frames, the tags taggers append are part of the file: APEv2
//! (with its header), Lyrics3 v1/v2, an ID3v2 tag written after the audio,
//! and an ID3v1 tag last. Right after a valid ID3v2 tag, a chain of fewer
//! than [`MIN_FRAMES`] frames (one is enough) that ends cleanly is a whole
//! file: the tag and a frame header exactly where the tag ends are the
//! evidence.
//!
//! Not handled: free-format bitrate streams (bitrate index 0), an APEv2 tag
//! without its header (only a footer), and MPEG audio with no ID3v2 tag in
//! front (no signature starts it: see the catalogue). Without an info
//! frame, a file cut (or fragmented) exactly at a frame boundary looks
//! complete.

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

/// The longest frame the `mpa` signatures start: layer II, MPEG-1 at
/// 384 kbit/s, 32 kHz, padded (`144 * 384000 / 32000 + 1`; layer III's
/// longest is 1 441 bytes).
const MAX_FRAME: u64 = 1729;

/// MPEG audio with no ID3v2 tag in front (the `mpa` type: layer II and III
/// frame syncs at the start of a sector): a file when it does not continue a
/// stream (no frame of the same stream ends exactly where it starts: inside
/// an MP3, every frame starts one) and [`MIN_FRAMES`] frames chain from its
/// first byte; then as [`validate`]. Its subtype is `mp3`.
pub fn validate_untagged(src: Src) -> Option<Verdict> {
    let (_, key) = frame(src.bytes::<4>(0)?)?;
    let mut before = Vec::new();
    src.preceding(MAX_FRAME + 3, &mut before);
    let n = before.len();
    let continues = (0..n.saturating_sub(3)).any(|q| {
        before[q] == 0xFF
            && frame([before[q], before[q + 1], before[q + 2], before[q + 3]])
                .is_some_and(|(len, k)| k == key && q as u64 + len == n as u64)
    });
    if continues {
        return None;
    }
    validate(src).map(|v| v.with_subtype(Some("mp3")))
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
        // (Right at the end of a valid ID3v2 tag, one frame is enough: a
        // file of a handful of frames, as test suites and short sounds are.)
        if n >= MIN_FRAMES || (cut && n > 0) || (tagged && p == start && n > 0) {
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
    let short_after_tag = tagged && first == start && n > 0;
    if n < MIN_FRAMES && declared.is_none_or(|d| d > n) && !short_after_tag {
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
    // Tags after the audio, in any order (Audacious writes an ID3v2 tag
    // after the ID3v1 tag).
    for _ in 0..4 {
        match trailer(&src, len) {
            Trailer::None => break,
            Trailer::Cut => return Some(Verdict::partial(src.len(), src.cut_note())),
            Trailer::Tag(n, what) => {
                len += n;
                v_notes.push(what.into());
            }
        }
    }
    let mut v = Verdict::complete(len);
    v.notes = v_notes;
    Some(v)
}

/// The tags appended after another format's audio ending at `at` (ID3v1,
/// APEv2, Lyrics3, ID3v2, in any order, at most four): their total length
/// and names, or `None` when the window ends inside one. For the audio
/// formats whose taggers append these (Monkey's Audio, WavPack, TTA,
/// Musepack, AIFF...).
pub(super) fn trailing_tags(src: &Src, at: u64) -> Option<(u64, Vec<&'static str>)> {
    let mut len = 0u64;
    let mut names = Vec::new();
    for _ in 0..4 {
        match trailer(src, at + len) {
            Trailer::None => break,
            Trailer::Cut => return None,
            Trailer::Tag(n, what) => {
                len += n;
                names.push(what);
            }
        }
    }
    Some((len, names))
}

/// A `Complete` verdict for audio that ends at `end`, with the tags
/// appended after it ([`trailing_tags`]) included; `Partial` when the window
/// ends inside a tag.
pub(super) fn complete_with_tags(src: &Src, end: u64, note: String) -> Verdict {
    match trailing_tags(src, end) {
        None => Verdict::partial(src.len(), src.cut_note()),
        Some((n, names)) => {
            let mut v = Verdict::complete(end + n).with_note(note);
            for w in names {
                v = v.with_note(w);
            }
            v
        }
    }
}

/// A tag after the audio frames.
enum Trailer {
    None,
    /// One starts there but the window ends inside it.
    Cut,
    /// One of this many bytes.
    Tag(u64, &'static str),
}

/// Largest APEv2 or Lyrics3 tag accepted (cover art included).
const MAX_TRAILER: u64 = 16 << 20;

/// The tag at `at`, if any: ID3v1 (`TAG`, 128 bytes), APEv2 with its
/// header (`APETAGEX`: the size, which counts the items and the footer,
/// plus the 32-byte header; the footer must be where the size says),
/// Lyrics3 v2 (`LYRICSBEGIN`, fields of 3-letter id and 5-digit size, then a
/// 6-digit size and `LYRICS200`) or v1 (up to `LYRICSEND`, at most 5 100
/// bytes of lyrics), or an ID3v2 tag appended after the audio.
fn trailer(src: &Src, at: u64) -> Trailer {
    let fits = |n: u64| {
        if src.has(at, n) {
            Trailer::Tag(n, "")
        } else {
            Trailer::Cut
        }
    };
    let named = |t: Trailer, what: &'static str| match t {
        Trailer::Tag(n, _) => Trailer::Tag(n, what),
        other => other,
    };
    if src.starts_with_at(at, b"TAG") {
        return named(fits(128), "ID3v1 tag");
    }
    if src.starts_with_at(at, b"APETAGEX") {
        let (Some(size), Some(flags)) = (src.u32le(at + 12), src.u32le(at + 20)) else {
            return Trailer::Cut;
        };
        let size = u64::from(size);
        if flags & (1 << 29) == 0 || !(32..=MAX_TRAILER).contains(&size) {
            return Trailer::None;
        }
        let total = size + 32;
        if !src.has(at, total) {
            return Trailer::Cut;
        }
        return if src.starts_with_at(at + total - 32, b"APETAGEX") {
            Trailer::Tag(total, "APEv2 tag")
        } else {
            Trailer::None
        };
    }
    if src.starts_with_at(at, b"LYRICSBEGIN") {
        return lyrics3(src, at);
    }
    if src.starts_with_at(at, b"ID3") {
        let Some(h) = src.bytes::<10>(at) else {
            return Trailer::Cut;
        };
        if !(2..=4).contains(&h[3]) || h[4] == 0xFF || h[6..10].iter().any(|b| b & 0x80 != 0) {
            return Trailer::None;
        }
        let size = h[6..10].iter().fold(0u64, |a, b| a << 7 | u64::from(*b));
        let footer = if h[3] == 4 && h[5] & 0x10 != 0 { 10 } else { 0 };
        return named(fits(10 + size + footer), "ID3v2 tag after the audio");
    }
    Trailer::None
}

/// A Lyrics3 tag at `at` (`LYRICSBEGIN` there).
fn lyrics3(src: &Src, at: u64) -> Trailer {
    let digits = |off: u64, n: usize| -> Option<u64> {
        let mut v = 0u64;
        for i in 0..n as u64 {
            let b = src.u8(off + i)?;
            if !b.is_ascii_digit() {
                return None;
            }
            v = v * 10 + u64::from(b - b'0');
        }
        Some(v)
    };
    // v2: fields, then the size of everything from LYRICSBEGIN and LYRICS200.
    let mut q = at + 11;
    for _ in 0..64 {
        if src.starts_with_at(q + 6, b"LYRICS200") && digits(q, 6) == Some(q - at) {
            return Trailer::Tag(q + 15 - at, "Lyrics3 v2 tag");
        }
        let Some(id) = src.bytes::<3>(q) else {
            return Trailer::Cut;
        };
        if !id.iter().all(u8::is_ascii_uppercase) {
            break;
        }
        let Some(n) = digits(q + 3, 5) else {
            return if src.has(q, 8) {
                Trailer::None
            } else {
                Trailer::Cut
            };
        };
        q += 8 + n;
        if q - at > MAX_TRAILER {
            return Trailer::None;
        }
    }
    // v1: lyrics up to LYRICSEND (at most 5 100 bytes).
    for e in at + 11..at + 11 + 5100 {
        match src.u8(e) {
            None => return Trailer::Cut,
            Some(b'L') if src.starts_with_at(e, b"LYRICSEND") => {
                return Trailer::Tag(e + 9 - at, "Lyrics3 v1 tag");
            }
            _ => {}
        }
    }
    Trailer::None
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
    /// Untagged MPEG audio (`mpa`): a chain from the candidate's first byte
    /// that does not continue an earlier frame; its subtype is `mp3`.
    #[test]
    fn untagged_streams_and_continuations() {
        let f = frames(10);
        let v = run("mpa", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
        assert_eq!(v.subtype.as_deref(), Some("mp3"));
        // After other bytes, at a sector's start: a file.
        let mut img: Vec<u8> = (0..512u32).map(|i| (i * 13 % 251) as u8).collect();
        img.extend_from_slice(&f);
        let v = run_at("mpa", &img, 512, NO_LIMIT).unwrap();
        assert_eq!(v.length, f.len() as u64);
        // Each later frame continues the one before it: not a file.
        let second = 418;
        assert!(run_at("mpa", &f, second, NO_LIMIT).is_none());
        let third = 418 + 417;
        assert!(run_at("mpa", &f, third, NO_LIMIT).is_none());
        // Fewer than MIN_FRAMES frames with no tag: nothing.
        assert!(run("mpa", &frames(3)).is_none());
    }

    /// Right after an ID3v2 tag, one frame is a file; the tags taggers
    /// append after the audio (APEv2 with its header, Lyrics3 v2 and v1, an
    /// ID3v2 tag, ID3v1) are part of it.
    #[test]
    fn short_tagged_files_and_trailers() {
        let mut t = id3(b"TIT2\x00\x00\x00\x02\x00\x00\x00x");
        t.extend_from_slice(&frames(1));
        let mut img = t.clone();
        img.extend_from_slice(&[0x5a; 300]);
        let v = run("mp3", &img).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, t.len() as u64));

        let mut f = frames(6);
        // APEv2: header, one item, footer (size counts item + footer).
        let item = b"\x05\x00\x00\x00\x00\x00\x00\x00Title\x00hello";
        let ape = |header: bool| {
            let mut v = b"APETAGEX".to_vec();
            v.extend_from_slice(&2000u32.to_le_bytes());
            v.extend_from_slice(&(item.len() as u32 + 32).to_le_bytes());
            v.extend_from_slice(&1u32.to_le_bytes());
            let flags = (1u32 << 31) | if header { 1 << 29 } else { 0 };
            v.extend_from_slice(&flags.to_le_bytes());
            v.extend_from_slice(&[0; 8]);
            v
        };
        f.extend_from_slice(&ape(true));
        f.extend_from_slice(item);
        f.extend_from_slice(&ape(false));
        // Lyrics3 v2: one field, then the size and LYRICS200.
        let mut lyr = b"LYRICSBEGININD0000210".to_vec();
        let size = format!("{:06}", lyr.len());
        lyr.extend_from_slice(size.as_bytes());
        lyr.extend_from_slice(b"LYRICS200");
        f.extend_from_slice(&lyr);
        f.extend_from_slice(b"TAG");
        f.extend_from_slice(&[b' '; 125]);
        // Audacious appends an ID3v2 tag after the ID3v1 tag.
        f.extend_from_slice(&id3(b"TIT2\x00\x00\x00\x02\x00\x00\x00y"));
        let mut img = f.clone();
        img.extend_from_slice(&[0x33; 200]);
        let v = run("mp3", &img).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Complete, f.len() as u64),
            "{v:?}"
        );
        assert!(v.notes.iter().any(|n| n == "APEv2 tag"), "{v:?}");
        assert!(v.notes.iter().any(|n| n == "Lyrics3 v2 tag"), "{v:?}");
        // A trailer cut by the window: partial.
        let v = run("mp3", &f[..f.len() - 5]).unwrap();
        assert_eq!(v.status, Status::Partial);
        // Lyrics3 v1.
        let mut g = frames(5);
        g.extend_from_slice(b"LYRICSBEGINla la laLYRICSEND");
        let v = run("mp3", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, g.len() as u64));
    }
}
