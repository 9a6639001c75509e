//! Standard MIDI File (`.mid`, SMF).
//!
//! Structure (MIDI Manufacturers Association, "Standard MIDI Files 1.0",
//! 1988/1996): a header chunk `"MThd" | length u32 BE (6) | format u16 |
//! ntrks u16 | division u16`, then `ntrks` track chunks `"MTrk" | length
//! u32 BE | events`; chunks of other types ("alien" chunks) may appear
//! between and are skipped. Every track ends with the End of Track meta
//! event `FF 2F 00`.
//!
//! Checked: format 0, 1 or 2 (format 0: one track); 1 to 65,535 tracks;
//! chunk types printable ASCII; every track's last three bytes are
//! `FF 2F 00` (a track of someone else's data does not end so).
//!
//! * `None`: a header failing those checks, or a first chunk after it that
//!   is not one;
//! * `Complete`: `ntrks` tracks, each ending with End of Track; length =
//!   the end of the last track;
//! * `Partial`: the window ends inside a chunk (length = window), or a
//!   chunk is damaged or a track does not end with End of Track (length =
//!   the end of the last good track).
//!
//! Reads 8 bytes per chunk, 3 per track, at most 65,535 tracks and as
//! many alien chunks, and jumps the stretches other candidates walked
//! ([`super::walks`]): linear in the image.

use super::Verdict;
use super::read::Src;
use super::walks::{Noting, Took, took};

/// Chunks of other types walked at most.
const MAX_ALIENS: u32 = 65_535;

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<14>(0)?;
    if &h[..8] != b"MThd\x00\x00\x00\x06" {
        return None;
    }
    let format = u16::from_be_bytes([h[8], h[9]]);
    let tracks = u16::from_be_bytes([h[10], h[11]]);
    if format > 2 || tracks == 0 || (format == 0 && tracks != 1) {
        return None;
    }
    let (mut p, mut found, mut aliens) = (14u64, 0u16, 0u32);
    // A step depends on the chunk's bytes alone: the stretches other
    // candidates walked are jumped ([`super::walks`]), at most as many steps
    // as tracks and other chunks are still allowed (so the verdict is the
    // walk's).
    let mut noting = Noting::new("midi");
    while found < tracks {
        let most = u32::from(tracks - found).min(MAX_ALIENS - aliens);
        if p > 14
            && most > 0
            && let Some(j) = src.walk_jump("midi", (p, 0), (src.len(), most), |_| true)
        {
            let t = u16::try_from(j.count)
                .unwrap_or(u16::MAX)
                .min(tracks - found);
            found += t;
            aliens += j.steps - u32::from(t);
            p = j.to;
            src.walk_took(&mut noting, took(j), (p, 0));
            continue;
        }
        let Some(c) = src.bytes::<8>(p) else {
            return cut_or_bad(&src, p, found);
        };
        let size = u64::from(u32::from_be_bytes([c[4], c[5], c[6], c[7]]));
        let next = p + 8 + size;
        let count = if &c[..4] == b"MTrk" {
            if next > src.len() {
                return Some(Verdict::partial(src.len(), src.cut_note()));
            }
            if size < 3 || src.bytes::<3>(next - 3) != Some([0xFF, 0x2F, 0x00]) {
                return Some(Verdict::partial(
                    p,
                    format!("track {} does not end with End of Track", found + 1),
                ));
            }
            found += 1;
            1
        } else if c[..4].iter().all(|b| b.is_ascii_graphic()) && aliens < MAX_ALIENS {
            aliens += 1;
            0
        } else {
            return (p > 14).then(|| Verdict::partial(p, format!("no track chunk at {p}")));
        };
        p = next;
        if next > src.len() {
            noting.stop();
        } else {
            let t = Took {
                steps: 1,
                flags: 0,
                count,
            };
            src.walk_took(&mut noting, t, (p, 0));
        }
    }
    let mut v = Verdict::complete(p).with_note(format!("format {format}, {tracks} tracks"));
    if aliens > 0 {
        v = v.with_note(format!("{aliens} other chunks"));
    }
    Some(v)
}

/// The window ends at `p` before every track was read.
fn cut_or_bad(src: &Src, p: u64, found: u16) -> Option<Verdict> {
    if p >= src.len() || !src.has(p, 8) {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(Verdict::partial(p, format!("{found} tracks")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A format-`format` file of `tracks` tracks of a few notes.
    pub fn make(format: u16, tracks: u16) -> Vec<u8> {
        let mut f = b"MThd\x00\x00\x00\x06".to_vec();
        f.extend_from_slice(&format.to_be_bytes());
        f.extend_from_slice(&tracks.to_be_bytes());
        f.extend_from_slice(&96u16.to_be_bytes());
        for t in 0..tracks {
            let mut ev = vec![0x00, 0x90, 60 + t as u8, 100, 0x60, 0x80, 60 + t as u8, 0];
            ev.extend_from_slice(&[0x00, 0xFF, 0x2F, 0x00]);
            f.extend_from_slice(b"MTrk");
            f.extend_from_slice(&(ev.len() as u32).to_be_bytes());
            f.extend(ev);
        }
        f
    }

    pub fn seed() -> Vec<u8> {
        make(1, 3)
    }

    #[test]
    fn tracks_counted_and_ended() {
        for f in [make(0, 1), make(1, 3), make(2, 2)] {
            assert_complete("midi", &f);
            assert_prefixes("midi", &f);
        }
        // An alien chunk between the tracks is the file's.
        let mut a = make(1, 1);
        a.extend_from_slice(b"XFIH\x00\x00\x00\x02ab");
        let t = make(0, 1);
        a.extend_from_slice(&t[14..]);
        a[11] = 2;
        assert_complete("midi", &a);
        // Format 0 with two tracks: not a MIDI header.
        assert!(run("midi", &make(0, 2)[..]).map(|v| v.status) != Some(Status::Complete));
    }

    #[test]
    fn damaged_and_hostile() {
        let mut f = make(1, 3);
        let n = f.len();
        f[n - 2] = 0x30; // the last track's End of Track
        let v = run("midi", &f).unwrap();
        assert_eq!(v.status, Status::Partial);
        let mut g = make(1, 2);
        g[18..22].copy_from_slice(&u32::MAX.to_be_bytes());
        let v = run("midi", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, g.len() as u64));
        let mut h = b"MThd\x00\x00\x00\x06\x00\x01\x00\x02\x00\x60".to_vec();
        h.extend((0..100u32).map(|i| (i * 7 + 200) as u8));
        assert!(run("midi", &h).is_none());
    }
}
