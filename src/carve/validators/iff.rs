//! IFF-style audio: AIFF / AIFF-C and DSDIFF (DFF).
//!
//! Structure: AIFF (Apple "Audio Interchange File Format" 1.3, 1989) and
//! AIFF-C (Apple "AIFF-C" draft, 1991) are an EA IFF 85 `FORM` chunk:
//! `FORM | size (u32 BE) | "AIFF" or "AIFC"` followed by local chunks
//! `id (4 chars) | size (u32 BE) | data | pad byte to even`; the file is
//! `size + 8` bytes. `COMM` (18 bytes in AIFF, at least 22 in AIFF-C:
//! channels, sample frames, bits, 80-bit rate, compression type) is
//! required, and `SSND` when there are sample frames. DSDIFF (Philips
//! "Direct Stream Digital Interchange File Format" 1.5) is the same with
//! 64-bit sizes: `FRM8 | size (u64 BE) | "DSD "`, then `FVER` (first),
//! `PROP` (`SND `), and the sound data `DSD ` or `DST `; the file is
//! `size + 12` bytes.
//!
//! Checked: chunk ids printable ASCII; the chunk walk ends exactly at the
//! form's end (a missing pad byte after an odd last chunk is tolerated);
//! the required chunks are present and `COMM` fields are sane (1-64
//! channels, 1-32 bits, a normal positive exponent).
//!
//! * `None`: a form type or first chunk that is not plausible;
//! * `Complete`: the walk adds up and the required chunks are there;
//!   length = the form's end plus the tags taggers append after it
//!   (ID3v1, APEv2);
//! * `Partial`: the form runs past the window (length = window), a chunk is
//!   damaged (length = end of the last good chunk), or required chunks are
//!   missing (length = the form's end).
//!
//! Subtype: `aifc` for AIFF-C; otherwise none. Reads 8 or 12 bytes per
//! chunk (each at least that long), at most 2^20 chunks, and jumps the
//! stretches other candidates walked ([`super::walks`]): linear in the
//! image.

use super::Verdict;
use super::mp3::complete_with_tags;
use super::read::Src;
use super::walks::{Noting, Took, took};

/// How a chunk walk ended.
enum Walk {
    /// At the form's end (or one byte short of it: a missing pad).
    End,
    /// The window ends inside a chunk.
    Cut,
    /// A chunk that is not one at this offset.
    Bad(u64),
}

/// Chunks walked at most per form.
const MAX_CHUNKS: u32 = 1 << 20;

/// Walks the chunks from `p` to `end` (`wide`: 64-bit sizes), with `flag`
/// giving each chunk's flags (from its id, offset and size) and returning
/// their union. After the first chunk a step depends on the chunk's bytes
/// alone (and the form's end, which bounds the jumps), so stretches other
/// candidates of the walk `kind` walked are jumped ([`super::walks`]):
/// headers packed in every sector inside tiny chunks would otherwise make
/// each candidate walk the same far stretch.
fn walk(
    src: &Src,
    (kind, mut p, end, wide): (&'static str, u64, u64, bool),
    mut flag: impl FnMut(&[u8; 4], u64, u64) -> u32,
) -> (Walk, u32) {
    let head = if wide { 12 } else { 8 };
    let (mut flags, mut chunks) = (0u32, 0u32);
    let mut noting = Noting::new(kind);
    while p + head <= end && chunks < MAX_CHUNKS {
        if chunks > 0
            && let Some(j) = src.walk_jump(kind, (p, 0), (end, MAX_CHUNKS - chunks), |_| true)
        {
            flags |= j.flags;
            (p, chunks) = (j.to, chunks + j.steps);
            src.walk_took(&mut noting, took(j), (p, 0));
            continue;
        }
        let Some(id) = src.bytes::<4>(p) else {
            return (Walk::Cut, flags);
        };
        let size = if wide {
            src.u64be(p + 4)
        } else {
            src.u32be(p + 4).map(u64::from)
        };
        let Some(size) = size else {
            return (Walk::Cut, flags);
        };
        if !super::read::printable(&id) || id[0] == b' ' {
            return (Walk::Bad(p), flags);
        }
        let next = p.saturating_add(head).saturating_add(size);
        if next > end {
            return (Walk::Bad(p), flags);
        }
        let f = flag(&id, p, size);
        flags |= f;
        p = next + (size & 1);
        chunks += 1;
        if p > end {
            // A pad byte the form's end cut short: another's would not be.
            noting.stop();
        } else {
            let t = Took {
                steps: 1,
                flags: f,
                count: 0,
            };
            src.walk_took(&mut noting, t, (p, 0));
        }
    }
    let r = if end > src.len() {
        Walk::Cut
    } else if p == end || p == end + 1 {
        Walk::End
    } else {
        Walk::Bad(p)
    };
    (r, flags)
}

/// Flags of the AIFF walk: a valid `COMM` chunk, one declaring sample
/// frames, an invalid one, an `SSND` chunk.
const COMM: u32 = 1;
const FRAMES: u32 = 2;
const BAD_COMM: u32 = 4;
const SSND: u32 = 8;
/// Flags of the DSDIFF walk: a `PROP` chunk of `SND ` properties, sound data.
const PROP: u32 = 1;
const SOUND: u32 = 2;

/// An AIFF or AIFF-C file (`FORM`).
pub fn validate_aiff(src: Src) -> Option<Verdict> {
    let h = src.bytes::<20>(0)?;
    let aifc = match &h[8..12] {
        b"AIFF" => false,
        b"AIFC" => true,
        _ => return None,
    };
    if &h[..4] != b"FORM" {
        return None;
    }
    let size = u64::from(u32::from_be_bytes([h[4], h[5], h[6], h[7]]));
    let end = size + 8;
    if size < 4 + 8 + 18 || !h[12..16].iter().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    // (AIFF-C's COMM is longer: its walks are their own kind.)
    let kind = if aifc { "aifc" } else { "aiff" };
    let (r, flags) = walk(&src, (kind, 12, end, false), |id, at, n| match id {
        b"COMM" => {
            let c = src.bytes::<18>(at + 8);
            let ok = n >= if aifc { 22 } else { 18 }
                && c.is_some_and(|c| {
                    let ch = u16::from_be_bytes([c[0], c[1]]);
                    let bits = u16::from_be_bytes([c[6], c[7]]);
                    let exp = u16::from_be_bytes([c[8], c[9]]);
                    (1..=64).contains(&ch)
                        && (1..=32).contains(&bits)
                        && (0x3FFF..0x4020).contains(&exp)
                });
            let frames = c.is_some_and(|c| c[2..6] != [0; 4]);
            match (ok, frames) {
                (false, _) => BAD_COMM,
                (true, true) => COMM | FRAMES,
                (true, false) => COMM,
            }
        }
        b"SSND" => SSND,
        _ => 0,
    });
    let subtype = aifc.then_some("aifc");
    if let Err(v) = ended(&src, r, 12, "AIFF") {
        return v.map(|v| v.with_subtype(subtype));
    }
    let v = if flags & COMM == 0 || flags & BAD_COMM != 0 {
        Verdict::partial(end, "no valid COMM chunk")
    } else if flags & FRAMES != 0 && flags & SSND == 0 {
        Verdict::partial(end, "sample frames but no SSND chunk")
    } else {
        complete_with_tags(&src, end, "AIFF chunks add up".into())
    };
    Some(v.with_subtype(subtype))
}

/// A DSDIFF file (`FRM8`, form type `DSD `).
pub fn validate_dff(src: Src) -> Option<Verdict> {
    let h = src.bytes::<28>(0)?;
    if &h[..4] != b"FRM8" || &h[12..16] != b"DSD " || &h[16..20] != b"FVER" {
        return None;
    }
    let size = u64::from_be_bytes([h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11]]);
    let fver = u64::from_be_bytes([h[20], h[21], h[22], h[23], h[24], h[25], h[26], h[27]]);
    if fver != 4 || !(4 + 16..u64::MAX / 2).contains(&size) {
        return None;
    }
    let end = size + 12;
    let (r, flags) = walk(&src, ("dff", 16, end, true), |id, at, _| match id {
        b"PROP" if src.starts_with_at(at + 12, b"SND ") => PROP,
        b"DSD " | b"DST " => SOUND,
        _ => 0,
    });
    if let Err(v) = ended(&src, r, 16, "DSDIFF") {
        return v;
    }
    Some(if flags & (PROP | SOUND) != PROP | SOUND {
        Verdict::partial(end, "no PROP/SND or sound data chunk")
    } else {
        complete_with_tags(&src, end, "DSDIFF chunks add up".into())
    })
}

/// `Ok` when the walk reached the form's end; else the verdict: `None`
/// when the first chunk (at `first`) is not one (a chance match),
/// `Partial` when the window ends inside the form or a later chunk is
/// damaged.
fn ended(src: &Src, r: Walk, first: u64, what: &str) -> Result<(), Option<Verdict>> {
    match r {
        Walk::End => Ok(()),
        Walk::Bad(at) if at == first => Err(None),
        Walk::Bad(at) => Err(Some(Verdict::partial(
            at,
            format!("{what} chunk at {at} is damaged or not contiguous"),
        ))),
        Walk::Cut => Err(Some(Verdict::partial(src.len(), src.cut_note()))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A chunk: id, BE size (32 or 64 bits), data, pad byte.
    fn chunk(id: &[u8; 4], data: &[u8], wide: bool) -> Vec<u8> {
        let mut c = id.to_vec();
        if wide {
            c.extend_from_slice(&(data.len() as u64).to_be_bytes());
        } else {
            c.extend_from_slice(&(data.len() as u32).to_be_bytes());
        }
        c.extend_from_slice(data);
        if data.len() % 2 == 1 {
            c.push(0);
        }
        c
    }

    /// An AIFF (or AIFF-C) of `frames` 16-bit mono frames at 8 kHz.
    pub fn aiff(aifc: bool, frames: u32) -> Vec<u8> {
        let mut comm = 1u16.to_be_bytes().to_vec();
        comm.extend_from_slice(&frames.to_be_bytes());
        comm.extend_from_slice(&16u16.to_be_bytes());
        comm.extend_from_slice(&[0x40, 0x0B, 0xFA, 0, 0, 0, 0, 0, 0, 0]);
        if aifc {
            comm.extend_from_slice(b"NONE\x0enot compressed");
        }
        let mut ssnd = vec![0u8; 8];
        ssnd.extend((0..frames * 2).map(|i| (i * 7) as u8));
        let mut body = if aifc {
            b"AIFC".to_vec()
        } else {
            b"AIFF".to_vec()
        };
        if aifc {
            body.extend(chunk(b"FVER", &0xA280_5140u32.to_be_bytes(), false));
        }
        body.extend(chunk(b"COMM", &comm, false));
        body.extend(chunk(b"NAME", b"odd", false));
        body.extend(chunk(b"SSND", &ssnd, false));
        let mut f = b"FORM".to_vec();
        f.extend_from_slice(&(body.len() as u32).to_be_bytes());
        f.extend(body);
        f
    }

    /// A DSDIFF file with `n` bytes of DSD data.
    pub fn dff(n: usize) -> Vec<u8> {
        let mut prop = b"SND ".to_vec();
        prop.extend(chunk(b"FS  ", &2_822_400u32.to_be_bytes(), true));
        prop.extend(chunk(b"CHNL", b"\x00\x01SLFT", true));
        let mut body = b"DSD ".to_vec();
        body.extend(chunk(b"FVER", &0x0105_0000u32.to_be_bytes(), true));
        body.extend(chunk(b"PROP", &prop, true));
        body.extend(chunk(b"DSD ", &vec![0x69u8; n], true));
        let mut f = b"FRM8".to_vec();
        f.extend_from_slice(&(body.len() as u64).to_be_bytes());
        f.extend(body);
        f
    }

    pub fn seed() -> Vec<u8> {
        aiff(false, 20)
    }

    #[test]
    fn aiff_aifc_dff_complete_and_cut() {
        for f in [aiff(false, 20), aiff(false, 0), aiff(true, 9)] {
            assert_complete("aiff", &f);
            assert_prefixes("aiff", &f);
        }
        assert_eq!(
            assert_complete("aiff", &aiff(true, 3)).as_deref(),
            Some("aifc")
        );
        let d = dff(33);
        assert_complete("dff", &d);
        assert_prefixes("dff", &d);
        // Tags appended after the form are the file's.
        let mut t = aiff(false, 5);
        t.extend_from_slice(b"TAG");
        t.extend_from_slice(&[b' '; 125]);
        assert_complete("aiff", &t);
    }

    #[test]
    fn damaged_missing_and_chance() {
        // No COMM chunk: Partial.
        let mut f = aiff(false, 4);
        let at = f.windows(4).position(|w| w == b"COMM").unwrap();
        f[at..at + 4].copy_from_slice(b"XXXX");
        assert_eq!(run("aiff", &f).unwrap().status, Status::Partial);
        // A damaged chunk after the first: Partial at it.
        let mut g = aiff(false, 4);
        let at = g.windows(4).position(|w| w == b"SSND").unwrap();
        g[at] = 0;
        let v = run("aiff", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, at as u64));
        // A FORM whose first chunk is not one: a chance match.
        let mut h = b"FORM\x00\x00\x01\x00AIFF".to_vec();
        h.extend((0..400u32).map(|i| (i * 31 + 1) as u8 | 0x80));
        assert!(run("aiff", &h).is_none());
        assert!(run("dff", &h).is_none());
    }

    #[test]
    fn hostile_sizes_are_bounded() {
        let mut f = aiff(false, 10);
        f[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let v = run("aiff", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        let mut d = dff(10);
        d[4..12].copy_from_slice(&(u64::MAX / 2 - 1).to_be_bytes());
        let v = run("dff", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d.len() as u64));
        // A chunk size past the form: damaged there.
        let mut g = dff(10);
        let at = g.len() - 10 - 12;
        g[at + 4..at + 12].copy_from_slice(&u64::MAX.to_be_bytes());
        let v = run("dff", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, at as u64));
    }
}
