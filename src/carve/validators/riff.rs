//! RIFF containers: WAV, AVI, WebP (and other RIFF forms).
//!
//! Structure (Microsoft/IBM "Multimedia Programming Interface and Data
//! Specifications 1.0" §2, 1991; WebP container spec; OpenDML AVI 1.02):
//! `RIFF | size (u32 LE) | form type (4 chars)` followed by chunks
//! `id (4 chars) | size (u32 LE) | data | pad byte to even`. The file is
//! `size + 8` bytes. AVI files over 1 GiB continue with further `RIFF AVIX`
//! chunks right after the first (OpenDML), which are included.
//!
//! Checked: the form type is four printable ASCII characters; the top-level
//! chunk walk (ids printable, sizes inside the RIFF) ends exactly at the RIFF
//! end (a missing final pad byte is tolerated); per form, the first/required
//! chunks: WAVE needs `fmt ` and `data`, WEBP starts with `VP8 `/`VP8L`/`VP8X`,
//! AVI starts with `LIST` (hdrl).
//!
//! * `None`: not `RIFF`, a form type that is not text, a size < 4, or a first
//!   chunk that is not plausible.
//! * `Complete`: the chunk walk ends at `size + 8` and the form's required
//!   chunks are present; length = `size + 8` (+ AVIX parts).
//! * `Partial`: the RIFF runs past the window (length = window), or a chunk is
//!   damaged (length = end of the last good chunk), or required chunks are
//!   missing (length = `size + 8`).
//!
//! For WAVE files with 8/16-bit PCM data, two content checks catch a file
//! that is not contiguous: an ext2/3 indirect block where the 13th block
//! should be ([`super::read::ext_indirect_block`]) and a heuristic seam
//! where the samples stop looking like audio ([`pcm_seam`]); either makes
//! the verdict Partial at that offset.
//!
//! Subtype: WAVE → wav, `AVI ` → avi, WEBP → webp; other forms none.

use super::Verdict;
use super::read::{Src, ext_indirect_block, looks_foreign, printable};
use super::walks::{Noting, Took, took};

/// Chunks walked at most per RIFF.
const MAX_CHUNKS: u32 = 1_000_000;
/// OpenDML extension RIFFs followed at most.
const MAX_AVIX: u32 = 10_000;
/// Flags of the walk's segments: a `fmt `, a `data` chunk.
const FMT: u32 = 1;
const DATA: u32 = 2;

/// Frames per block and blocks on each side of a seam (see [`pcm_seam`]).
pub const SEAM_BLOCK: u64 = 64;
pub const SEAM_BLOCKS: usize = 8;

/// Per-block statistics of the first channel (see [`pcm_seam`]).
#[derive(Clone, Copy, Default)]
struct Block {
    /// Mean |x[i] − x[i−1]|.
    step: f64,
    /// Mean |x[i] − x[i−7]|.
    lag: f64,
    /// Fraction of samples beyond 75 % of full scale.
    top: f64,
    /// Mean sample value (DC).
    mean: f64,
}

/// Blocks needed before a candidate seam (up to [`SEAM_BLOCKS`] are used).
const MIN_BEFORE: usize = 4;

/// For 8/16-bit PCM WAVE data: the offset of the first block where the
/// samples stop looking like audio, when the [`SEAM_BLOCKS`] blocks after a
/// point hold bytes that look like someone else's data (entropy ≥ 7.5
/// bits/byte or ≥ 98 % text, see [`looks_foreign`]) *and* their samples
/// change character from the blocks before in one of these ways:
/// * audio is correlated from sample to sample — the mean step between
///   neighbours is well below that between samples 7 apart (ratio < 0.8
///   before) — whereas foreign data is not (ratio > 0.93 after, steps above
///   2 % of full scale);
/// * foreign bytes read as samples are spread evenly over the whole range
///   (ratio > 0.93 and ≥ 18 % of samples beyond 75 % of full scale after,
///   at least 1.6 times as many as before), which even loud noise-like
///   audio rarely is;
/// * text read as samples has a large DC offset (mean beyond 12 % of full
///   scale after, within 3 % before).
///
/// And one more: loud audio (mean level above 5 % of full scale in one of
/// the two blocks before) followed,
/// without any decay, by exact digital silence to the end of the data that
/// fills at least a quarter of it (and [`SEAM_BLOCKS`] blocks) — the zeroed
/// clusters a fragmented file runs into.
///
/// Only the first channel is looked at. Tuned on the PCM files of this
/// machine (speech, music, plucked strings, noise) with no false seam;
/// audio that turns into loud white noise, or stops dead into long digital
/// silence, would be flagged.
pub fn pcm_seam(src: &Src, fmt: u64, data: u64, len: u64) -> Option<u64> {
    let f = src.bytes::<16>(fmt)?;
    let tag = u16::from_le_bytes([f[0], f[1]]);
    let channels = u64::from(u16::from_le_bytes([f[2], f[3]]));
    let bits = u16::from_le_bytes([f[14], f[15]]);
    if !matches!(tag, 1 | 0xFFFE) || !matches!(bits, 8 | 16) || !(1..=16).contains(&channels) {
        return None;
    }
    let width = u64::from(bits / 8);
    let frame = width * channels;
    let block = SEAM_BLOCK * frame;
    let k = SEAM_BLOCKS;
    let nblocks = len / block;
    if nblocks < (MIN_BEFORE + 1 + k) as u64 || !src.has(data, len) {
        return None;
    }
    let full = if bits == 8 { 256.0 } else { 65536.0 };
    let high = if bits == 8 { 96 } else { 24576 };
    let mut buf = vec![0u8; block as usize];
    let mut x = vec![0i32; SEAM_BLOCK as usize];
    let mut hist: std::collections::VecDeque<Block> = std::collections::VecDeque::new();
    let n = SEAM_BLOCK as f64;
    // Trailing digital silence: where it began, and whether audio was loud
    // right before it.
    let mut zero_from: Option<u64> = None;
    let mut loud_before_zero = false;
    let mut prev_level = 0.0f64;
    let mut prev_prev_level = 0.0f64;
    for b in 0..nblocks {
        if !src.read_exact(data + b * block, &mut buf) {
            return None;
        }
        for (i, s) in x.iter_mut().enumerate() {
            let o = i * frame as usize;
            *s = if bits == 8 {
                i32::from(buf[o]) - 128
            } else {
                i32::from(i16::from_le_bytes([buf[o], buf[o + 1]]))
            };
        }
        let step: i64 = x.windows(2).map(|w| i64::from((w[1] - w[0]).abs())).sum();
        let lag: i64 = x.windows(8).map(|w| i64::from((w[7] - w[0]).abs())).sum();
        let top = x.iter().filter(|v| v.abs() > high).count();
        let sum: i64 = x.iter().map(|&v| i64::from(v)).sum();
        let level = x.iter().map(|&v| f64::from(v.abs())).sum::<f64>() / n;
        if buf.iter().all(|&c| c == 0) {
            if zero_from.is_none() {
                zero_from = Some(b);
                // (The block holding the boundary is part silence already.)
                loud_before_zero = prev_level.max(prev_prev_level) > 0.05 * full;
            }
        } else {
            zero_from = None;
        }
        prev_prev_level = prev_level;
        prev_level = level;
        hist.push_back(Block {
            step: step as f64 / (n - 1.0),
            lag: lag as f64 / (n - 7.0),
            top: top as f64 / n,
            mean: sum as f64 / n,
        });
        if hist.len() > 2 * k + 1 {
            hist.pop_front();
        }
        if hist.len() < MIN_BEFORE + 1 + k {
            continue;
        }
        // Candidate seam at `mi` (index in `hist`): blocks before it, k after.
        let mi = hist.len() - 1 - k;
        let m = b - k as u64;
        let avg = |it: &mut dyn Iterator<Item = &Block>| {
            let mut t = Block::default();
            let mut c = 0.0;
            for bl in it {
                t.step += bl.step;
                t.lag += bl.lag;
                t.top += bl.top;
                t.mean += bl.mean.abs();
                c += 1.0;
            }
            (t, c)
        };
        let (a, ac) = avg(&mut hist.iter().take(mi));
        let (z, zc) = avg(&mut hist.iter().skip(mi + 1));
        let (qa, qz) = (a.step / (a.lag + 1e-9), z.step / (z.lag + 1e-9));
        let decorrelated = qa < 0.8 && qz > 0.93 && z.step / zc > 0.02 * full;
        let spread = qz > 0.93 && z.top / zc >= 0.18 && z.top / zc >= 1.6 * (a.top / ac);
        let offset = z.mean / zc > 0.12 * full && a.mean / ac < 0.03 * full;
        if (decorrelated || spread || offset)
            && looks_foreign(src, data + (m + 1) * block, block * k as u64)
        {
            // The first block from `m` on that is unlike audio.
            let first = hist
                .iter()
                .skip(mi)
                .position(|bl| {
                    (bl.step > 0.9 * bl.lag && bl.step > 0.02 * full && bl.top >= 0.1)
                        || bl.mean.abs() > 0.12 * full
                        || (decorrelated && bl.step > 0.9 * bl.lag && bl.step > 0.02 * full)
                })
                .unwrap_or(0);
            return Some(data + (m + first as u64) * block);
        }
    }
    match zero_from {
        Some(z) if loud_before_zero && nblocks - z >= (nblocks / 4).max(k as u64) => {
            Some(data + z * block)
        }
        _ => None,
    }
}

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"RIFF") {
        return None;
    }
    let Some(h) = src.bytes::<12>(0) else {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    };
    let size = u64::from(u32::from_le_bytes([h[4], h[5], h[6], h[7]]));
    let form = [h[8], h[9], h[10], h[11]];
    if size < 4 || !printable(&form) {
        return None;
    }
    let subtype = match &form {
        b"WAVE" => Some("wav"),
        b"AVI " => Some("avi"),
        b"WEBP" => Some("webp"),
        _ => None,
    };
    let end = size + 8;
    let mut seen_fmt = false;
    let mut seen_data = false;
    let mut fmt_at: Option<u64> = None;
    let mut data_at: Option<(u64, u64)> = None;
    let mut first: Option<[u8; 4]> = None;
    let mut pos = 12u64;
    let mut chunks = 0u32;
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()).with_subtype(subtype));
    // After the first chunk, a chunk's step depends on its bytes alone (and
    // the RIFF's end, which bounds the jumps): the stretches other
    // candidates walked are jumped ([`super::walks`]), those holding a
    // `fmt ` or `data` chunk only once this walk has its first.
    let mut noting = Noting::new("riff");
    while pos < end && chunks < MAX_CHUNKS {
        if chunks > 0
            && let Some(j) = src.walk_jump("riff", (pos, 0), (end, MAX_CHUNKS - chunks), |f| {
                (f & FMT == 0 || fmt_at.is_some()) && (f & DATA == 0 || data_at.is_some())
            })
        {
            seen_fmt |= j.flags & FMT != 0;
            seen_data |= j.flags & DATA != 0;
            (pos, chunks) = (j.to, chunks + j.steps);
            src.walk_took(&mut noting, took(j), (pos, 0));
            continue;
        }
        let Some(ch) = src.bytes::<8>(pos) else {
            return cut();
        };
        let id = [ch[0], ch[1], ch[2], ch[3]];
        let csize = u64::from(u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]));
        let data_end = pos + 8 + csize;
        if !printable(&id) || data_end > end {
            if chunks == 0 {
                return None;
            }
            return Some(
                Verdict::partial(pos, format!("damaged chunk at {pos}")).with_subtype(subtype),
            );
        }
        if first.is_none() {
            first = Some(id);
            let ok = match &form {
                b"WEBP" => matches!(&id, b"VP8 " | b"VP8L" | b"VP8X"),
                b"AVI " => &id == b"LIST",
                _ => true,
            };
            if !ok {
                return None;
            }
        }
        seen_fmt |= &id == b"fmt ";
        seen_data |= &id == b"data";
        if &id == b"fmt " {
            fmt_at.get_or_insert(pos + 8);
        }
        if &id == b"data" {
            data_at.get_or_insert((pos + 8, csize));
        }
        if data_end > src.len() {
            return cut();
        }
        // A missing pad byte after the last chunk is tolerated.
        let next = data_end + (csize & 1);
        pos = next.min(end);
        chunks += 1;
        if next > end {
            // A step the RIFF's end cut short: another's would not be.
            noting.stop();
        } else {
            let flags = match &id {
                b"fmt " => FMT,
                b"data" => DATA,
                _ => 0,
            };
            let t = Took {
                steps: 1,
                flags,
                count: 0,
            };
            src.walk_took(&mut noting, t, (pos, 0));
        }
    }
    if end > src.len() {
        return cut();
    }
    if pos != end {
        return Some(Verdict::partial(pos, "too many chunks").with_subtype(subtype));
    }
    let missing = match &form {
        b"WAVE" if !seen_fmt || !seen_data => Some("WAVE without fmt/data chunk"),
        _ => None,
    };
    let mut total = end;
    let mut v = match missing {
        Some(m) => Verdict::partial(end, m),
        None => Verdict::complete(end),
    };
    if &form == b"WAVE" && v.status == super::Status::Complete {
        if let Some(at) = ext_indirect_block(&src, end) {
            return Some(
                Verdict::partial(at, format!("ext2/3 indirect block at {at}: not contiguous"))
                    .with_subtype(subtype),
            );
        }
        if let (Some(f), Some((d, n))) = (fmt_at, data_at)
            && let Some(at) = pcm_seam(&src, f, d, n)
        {
            return Some(
                Verdict::partial(at, format!("samples stop looking like audio at {at}"))
                    .with_subtype(subtype),
            );
        }
    }
    if &form == b"AVI " && v.status == super::Status::Complete {
        // OpenDML: RIFF AVIX parts follow the first RIFF.
        let mut parts = 0u32;
        while parts < MAX_AVIX
            && src.starts_with_at(total, b"RIFF")
            && src.starts_with_at(total + 8, b"AVIX")
        {
            let Some(sz) = src.u32le(total + 4) else {
                break;
            };
            let e = total + 8 + u64::from(sz);
            if e > src.len() {
                return cut();
            }
            total = e;
            parts += 1;
        }
        v.length = total;
        if parts > 0 {
            v.notes.push(format!("{parts} AVIX part(s)"));
        }
    }
    Some(v.with_subtype(subtype))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        wav()
    }

    fn riff(form: &[u8; 4], chunks: &[(&[u8; 4], &[u8])]) -> Vec<u8> {
        let mut body = form.to_vec();
        for (id, data) in chunks {
            body.extend_from_slice(*id);
            body.extend_from_slice(&(data.len() as u32).to_le_bytes());
            body.extend_from_slice(data);
            if data.len() % 2 == 1 {
                body.push(0);
            }
        }
        let mut v = b"RIFF".to_vec();
        v.extend_from_slice(&(body.len() as u32).to_le_bytes());
        v.extend_from_slice(&body);
        v
    }

    fn wav() -> Vec<u8> {
        let fmt = [
            1u8, 0, 1, 0, 0x44, 0xAC, 0, 0, 0x88, 0x58, 1, 0, 2, 0, 16, 0,
        ];
        riff(
            b"WAVE",
            &[
                (b"fmt ", &fmt),
                (b"LIST", b"INFOISFT\x03\x00\x00\x00ab\0\0"),
                (b"data", &[1, 2, 3, 4, 5]),
            ],
        )
    }

    /// A 16-bit stereo PCM WAVE of `n` frames of a smooth tone.
    fn tone(n: usize) -> Vec<u8> {
        let fmt = [
            1u8, 0, 2, 0, 0x44, 0xAC, 0, 0, 0x10, 0xB1, 2, 0, 4, 0, 16, 0,
        ];
        let mut pcm = Vec::new();
        for i in 0..n {
            let t = i as f64 / 44100.0;
            let s = ((t * 440.0 * std::f64::consts::TAU).sin() * 12000.0
                + (t * 1330.0 * std::f64::consts::TAU).sin() * 3000.0) as i16;
            pcm.extend_from_slice(&s.to_le_bytes());
            pcm.extend_from_slice(&(s / 2).to_le_bytes());
        }
        riff(b"WAVE", &[(b"fmt ", &fmt), (b"data", &pcm)])
    }

    #[test]
    fn wav_content_checks() {
        let w = tone(20_000);
        assert_complete("riff", &w);
        // Cut, then random bytes: a seam.
        let cut = 44 + 4 * 5000;
        let mut bad = w[..cut].to_vec();
        bad.extend(
            (0..w.len() - cut).map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 11) as u8),
        );
        let v = run("riff", &bad).unwrap();
        assert_eq!(v.status, Status::Partial, "{:?}", v.notes);
        assert!((v.length as usize).abs_diff(cut) <= 2 * 256, "{v:?}");
        // Loud audio that stops dead into digital silence for the rest.
        let mut dead = w.clone();
        let stop = 44 + 4 * 6400;
        dead[stop..].fill(0);
        let v = run("riff", &dead).unwrap();
        assert_eq!(v.status, Status::Partial, "{:?}", v.notes);
        assert!((v.length as usize).abs_diff(stop) <= 256, "{v:?}");
        // A fade to silence is fine.
        let mut fade = w.clone();
        let n = (w.len() - 44) / 4;
        for i in 0..n {
            let g = if i < n / 2 {
                1.0
            } else {
                (1.0 - (i - n / 2) as f64 / (n / 4) as f64).max(0.0)
            };
            for c in 0..2 {
                let o = 44 + 4 * i + 2 * c;
                let s = i16::from_le_bytes([fade[o], fade[o + 1]]);
                fade[o..o + 2].copy_from_slice(&((f64::from(s) * g) as i16).to_le_bytes());
            }
        }
        assert_complete("riff", &fade);
        // An ext2 indirect block (1 KiB blocks) at offset 12 KiB.
        let mut ind = w.clone();
        let remaining = (w.len() - 12 * 1024).div_ceil(1024).min(256);
        ind[12 * 1024..13 * 1024].fill(0);
        for i in 0..remaining {
            let o = 12 * 1024 + 4 * i;
            ind[o..o + 4].copy_from_slice(&(777 + i as u32).to_le_bytes());
        }
        let v = run("riff", &ind).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 12 * 1024));
    }

    #[test]
    fn forms() {
        assert_eq!(assert_complete("riff", &wav()).as_deref(), Some("wav"));
        assert_prefixes("riff", &wav());
        let webp = riff(
            b"WEBP",
            &[(b"VP8 ", &[0x30, 1, 0, 0x9D, 0x01, 0x2A, 1, 0, 1, 0])],
        );
        assert_eq!(assert_complete("riff", &webp).as_deref(), Some("webp"));
        let mut avi = riff(
            b"AVI ",
            &[(b"LIST", b"hdrlavih"), (b"LIST", b"movi"), (b"idx1", b"")],
        );
        assert_eq!(assert_complete("riff", &avi).as_deref(), Some("avi"));
        // OpenDML continuation.
        let mut avix = b"RIFF".to_vec();
        avix.extend_from_slice(&12u32.to_le_bytes());
        avix.extend_from_slice(b"AVIXLIST\x00\x00\x00\x00");
        avi.extend_from_slice(&avix);
        assert_complete("riff", &avi);
        assert_eq!(
            assert_complete("riff", &riff(b"RMID", &[(b"data", b"xy")])),
            None
        );
    }

    #[test]
    fn damaged() {
        let mut w = wav();
        let i = 12 + 8 + 16; // LIST chunk
        w[i] = 0x01;
        let v = run("riff", &w).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, i as u64));
        let mut w = wav();
        w[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("riff", &w).unwrap();
        assert_eq!(v.status, Status::Partial);
        assert!(run("riff", b"RIFF\x10\x00\x00\x00\x01\x02\x03\x04").is_none());
        assert!(run("riff", b"RIFF\x10\x00\x00\x00WEBPJUNK\x00\x00\x00\x00").is_none());
        let no_data = riff(b"WAVE", &[(b"fmt ", &[0; 16])]);
        assert_eq!(run("riff", &no_data).unwrap().status, Status::Partial);
        let v = run_at("riff", &wav(), 0, Limits { max_len: 30 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 30));
    }

    #[test]
    fn real_riffs() {
        let mut d = py_dirs("test/audiodata");
        d.extend(py_dirs("test/imghdrdata"));
        d.extend(py_dirs("test/sndhdrdata"));
        let d: Vec<&str> = d.iter().map(String::as_str).collect();
        check_real("riff", &real_files(&d, &[".wav", ".webp", ".avi"], 40));
    }
}
