//! Sun / NeXT audio (`.au`, `.snd`).
//!
//! Structure (Sun `audio_filehdr.h`; NeXT `soundstruct.h`; all u32 BE):
//! `".snd" | data offset (header size, at least 24) | data size
//! (0xFFFFFFFF: unknown) | encoding | sample rate | channels`, an
//! annotation up to the data offset, then the samples. The file is
//! `offset + size` bytes.
//!
//! Checked: offset 24 to 64 KiB; encoding one of the defined ones (1-7, 8,
//! 10-13, 18-27); 1-64 channels; a sample rate of 1 Hz to 1 MHz; for the
//! fixed-size encodings, a data size of whole sample frames.
//!
//! * `None`: a header failing those checks;
//! * `Complete`: the data fits in the window; length = offset + size;
//! * `Partial`: it runs past the window (length = window);
//! * `Unvalidated`: the size is unknown (a writer that could not seek
//!   back): length = the window.

use super::Verdict;
use super::read::Src;

/// Bytes per sample of the fixed-size encodings (0: variable, e.g. G.72x).
fn sample_bytes(encoding: u32) -> Option<u64> {
    Some(match encoding {
        1 | 2 | 27 => 1,
        3 => 2,
        4 => 3,
        5 | 6 => 4,
        7 => 8,
        8 | 10..=13 | 18..=26 => 0,
        _ => return None,
    })
}

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<24>(0)?;
    let u32at = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let (offset, size, encoding) = (u64::from(u32at(4)), u32at(8), u32at(12));
    let (rate, channels) = (u32at(16), u64::from(u32at(20)));
    let bytes = sample_bytes(encoding)?;
    if &h[..4] != b".snd"
        || !(24..=65_536).contains(&offset)
        || !(1..=1_000_000).contains(&rate)
        || !(1..=64).contains(&channels)
    {
        return None;
    }
    if size == u32::MAX {
        return Some(Verdict::unvalidated(src.len(), "data size unknown"));
    }
    let size = u64::from(size);
    if bytes > 0 && size % (bytes * channels) != 0 {
        return None;
    }
    let end = offset + size;
    if end > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(Verdict::complete(end).with_note(format!("encoding {encoding}, {channels} channels")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// An AU of `frames` 16-bit frames of `ch` channels, annotation `note`.
    pub fn make(frames: u32, ch: u32, note: &[u8]) -> Vec<u8> {
        let offset = 24 + note.len() as u32;
        let size = frames * 2 * ch;
        let mut f = b".snd".to_vec();
        for v in [offset, size, 3, 8000, ch] {
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(note);
        f.extend((0..size).map(|i| (i * 3) as u8));
        f
    }

    pub fn seed() -> Vec<u8> {
        make(50, 2, b"made here\0\0\0")
    }

    #[test]
    fn sizes() {
        for f in [seed(), make(0, 1, b"\0\0\0\0"), make(7, 1, b"")] {
            assert_complete("au", &f);
            assert_prefixes("au", &f);
        }
        let mut u = seed();
        u[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(run("au", &u).unwrap().status, Status::Unvalidated);
    }

    #[test]
    fn hostile_and_chance() {
        let mut f = make(10, 1, b"");
        f[8..12].copy_from_slice(&0xFFFF_FFF0u32.to_be_bytes());
        let v = run("au", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        // Half a sample frame: not an AU header.
        let mut g = make(10, 2, b"");
        g[11] = 3;
        assert!(run("au", &g).is_none());
        let mut h = b".snd\x00\x00".to_vec();
        h.extend((0..100u32).map(|i| (i * 41 + 9) as u8));
        assert!(run("au", &h).is_none());
    }
}
