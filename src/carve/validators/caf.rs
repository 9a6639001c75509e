//! Apple Core Audio Format (`.caf`).
//!
//! Structure (Apple "Core Audio Format Specification" 1.0, `CAFFile.h`;
//! all BE): `"caff" | version u16 (1) | flags u16 (0)`, then chunks
//! `type (4 chars) | size i64 | data`. The first chunk is the audio
//! description `desc` (32 bytes: sample rate f64, format id, format
//! flags, bytes per packet, frames per packet, channels per frame, bits
//! per channel); the audio data chunk `data` may have size -1, meaning it
//! runs to the end of the file (only as the last chunk). Formats of
//! variable packet sizes need a packet table `pakt`. The file records no
//! length of its own: it ends after its last chunk.
//!
//! Checked: the `desc` chunk and its fields (a positive sample rate, a
//! printable format id, 1-64 channels); chunk types of the specification
//! (`desc data pakt chan kuki strg mark regn inst midi ovvw peak edct uuid
//! info umid ldsc free`); one `data` chunk; a `pakt` chunk when the format
//! has variable packets.
//!
//! * `None`: a header or `desc` failing those checks;
//! * `Complete`: after `desc` and `data` (and `pakt` where needed) the
//!   bytes that follow are not a chunk of the specification; length = the
//!   end of the last chunk;
//! * `Partial`: the window ends inside a chunk (length = window), or the
//!   chunks end without the data (length = the end of the last chunk);
//! * `Unvalidated`: a `data` chunk of size -1: length = the window.
//!
//! Reads 12 bytes per chunk (each at least that long), at most 2^20
//! chunks, and jumps the stretches other candidates walked
//! ([`super::walks`]): linear in the image.

use super::Verdict;
use super::read::Src;
use super::walks::{Noting, Took, took};

/// Chunks walked at most.
const MAX_CHUNKS: u32 = 1 << 20;
/// Flags of the walk: an audio data chunk, a packet table.
const DATA: u32 = 1;
const PAKT: u32 = 2;

/// The chunk types of the specification.
const TYPES: &[&[u8; 4]] = &[
    b"desc", b"data", b"pakt", b"chan", b"kuki", b"strg", b"mark", b"regn", b"inst", b"midi",
    b"ovvw", b"peak", b"edct", b"uuid", b"info", b"umid", b"ldsc", b"free",
];

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<52>(0)?;
    if &h[..8] != b"caff\x00\x01\x00\x00" || &h[8..12] != b"desc" {
        return None;
    }
    let u32at = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let desc_size = u64::from_be_bytes([h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]]);
    let rate = f64::from_bits(u64::from_be_bytes([
        h[20], h[21], h[22], h[23], h[24], h[25], h[26], h[27],
    ]));
    let format_ok = h[28..32].iter().all(|b| b.is_ascii_graphic() || *b == b' ');
    let variable = u32at(36) == 0 || u32at(40) == 0;
    let channels = u32at(44);
    if desc_size != 32
        || !(1.0..=1e7).contains(&rate)
        || !format_ok
        || !(1..=64).contains(&channels)
    {
        return None;
    }
    let (mut p, mut data, mut pakt, mut chunks) = (52u64, false, false, 0u32);
    // A step depends on the chunk's bytes alone (a second data chunk ends
    // the file: stretches holding one are jumped only before the first):
    // the stretches other candidates walked are jumped ([`super::walks`]).
    let mut noting = Noting::new("caf");
    while chunks < MAX_CHUNKS {
        if let Some(j) = src.walk_jump("caf", (p, 0), (src.len(), MAX_CHUNKS - chunks), |f| {
            !data || f & DATA == 0
        }) {
            data |= j.flags & DATA != 0;
            pakt |= j.flags & PAKT != 0;
            (p, chunks) = (j.to, chunks + j.steps);
            src.walk_took(&mut noting, took(j), (p, 0));
            continue;
        }
        let Some(c) = src.bytes::<12>(p) else {
            if p < src.len() {
                return Some(Verdict::partial(src.len(), src.cut_note()));
            }
            break;
        };
        let Some(t) = TYPES.iter().find(|t| c[..4] == t[..]) else {
            break;
        };
        let size = u64::from_be_bytes([c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11]]);
        let mut flags = 0;
        if *t == b"data" {
            if data {
                break;
            }
            data = true;
            flags = DATA;
            if size == u64::MAX {
                return Some(Verdict::unvalidated(
                    src.len(),
                    "data chunk runs to the end",
                ));
            }
        }
        if *t == b"pakt" {
            pakt = true;
            flags = PAKT;
        }
        if size > src.len() || p + 12 + size > src.len() {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        p += 12 + size;
        chunks += 1;
        let t = Took {
            steps: 1,
            flags,
            count: 0,
        };
        src.walk_took(&mut noting, t, (p, 0));
    }
    if !data || (variable && !pakt) {
        return Some(Verdict::partial(
            p,
            "no audio data chunk (or no packet table)",
        ));
    }
    Some(Verdict::complete(p).with_note("CAF chunks walked"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    fn chunk(t: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut c = t.to_vec();
        c.extend_from_slice(&(data.len() as u64).to_be_bytes());
        c.extend_from_slice(data);
        c
    }

    /// A CAF of `n` bytes of 16-bit mono PCM, with a `free` chunk after.
    pub fn make(n: usize, free_after: bool) -> Vec<u8> {
        let mut desc = 44100f64.to_be_bytes().to_vec();
        desc.extend_from_slice(b"lpcm");
        for v in [2u32, 2, 1, 1, 16] {
            desc.extend_from_slice(&v.to_be_bytes());
        }
        let mut f = b"caff\x00\x01\x00\x00".to_vec();
        f.extend(chunk(b"desc", &desc));
        f.extend(chunk(b"chan", &[0u8; 12]));
        let mut data = vec![0u8; 4];
        data.extend((0..n).map(|i| (i * 9) as u8));
        f.extend(chunk(b"data", &data));
        if free_after {
            f.extend(chunk(b"free", &[0u8; 20]));
        }
        f
    }

    pub fn seed() -> Vec<u8> {
        make(64, true)
    }

    #[test]
    fn chunks_walked() {
        assert_complete("caf", &make(64, true));
        // (A prefix that ends after the data chunk is a complete CAF.)
        let f = make(10, false);
        assert_complete("caf", &f);
        assert_prefixes("caf", &f);
    }

    #[test]
    fn hostile_unknown_and_missing() {
        let mut f = make(64, false);
        let at = f.len() - 68 - 12;
        f[at + 4..at + 12].copy_from_slice(&(u64::MAX - 1).to_be_bytes());
        let v = run("caf", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        f[at + 4..at + 12].copy_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(run("caf", &f).unwrap().status, Status::Unvalidated);
        let mut g = make(8, false);
        g.truncate(g.len() - 24);
        assert_ne!(run("caf", &g).unwrap().status, Status::Complete);
        let mut h = b"caff\x00\x01\x00\x00desc".to_vec();
        h.extend((0..80u32).map(|i| (i * 23 + 1) as u8));
        assert!(run("caf", &h).is_none());
    }
}
