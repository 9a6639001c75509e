//! Flash Video (FLV).
//!
//! Structure (Adobe Flash Video File Format Specification 10.1, Annex E):
//! `'FLV' | version (1) | flags (bit 0 video, bit 2 audio, the others 0) |
//! DataOffset (u32 BE, 9)`, then `PreviousTagSize0 (u32, 0)` and tags
//! `TagType (8 audio, 9 video, 18 script; the filter bit 0x20 allowed) |
//! DataSize (u24 BE) | Timestamp (u24 + u8) | StreamID (u24, 0) | data |
//! PreviousTagSize (u32 BE = 11 + DataSize)`. Nothing marks the last tag:
//! the file ends after the last tag whose PreviousTagSize matches and that
//! something not a tag follows (as PhotoRec's file_flv.c walks it).
//!
//! Checked: the header, PreviousTagSize0, and for every tag its type, its
//! zero stream id, a script tag's AMF0 string name first (0x02), and its
//! PreviousTagSize.
//!
//! * `None`: a header that is a chance match, or one no tag follows.
//! * `Complete`: at least one tag, each PreviousTagSize matching, and a tag
//!   ends at `filesize`, or (without one) what follows the last tag is not a
//!   tag header or the window's end; length = the end of the last tag's
//!   PreviousTagSize.
//! * `Partial`: a tag or its PreviousTagSize past the window, or the window
//!   ending right after a tag before `filesize` (length = window); a tag
//!   header whose PreviousTagSize does not match (length = the last good
//!   tag's end).
//!
//! Work: a tag is 15 bytes read; at most [`MAX_TAGS`] tags per candidate.
//! Two candidates' tag chains never share a tag (a tag's place is fixed by
//! the PreviousTagSize before it, back to a header's PreviousTagSize0 of 0,
//! which no tag's PreviousTagSize is), so all candidates together read each
//! tag once: linear in the image.

use super::Verdict;
use super::read::Src;

/// Tags walked at most (a two-hour video at 25 fps with audio has some
/// 400 000).
pub const MAX_TAGS: u32 = 1 << 22;

/// Header (9) + PreviousTagSize0 (4).
const FIRST_TAG: u64 = 13;
/// Bytes of the first script tag searched for `filesize`.
const META_SEARCH: usize = 1024;

/// What stands at a tag boundary.
enum Next {
    /// A tag header whose data is this long.
    Tag(u64),
    /// Not a tag: the file ended before it.
    Not,
    /// The window ends inside what could be a tag header.
    Cut,
}

/// The tag header at `pos`, if it is one.
fn tag_at(src: &Src, pos: u64) -> Next {
    let mut h = [0u8; 12];
    let got = src.read(pos, &mut h);
    let kind = h[0];
    if got >= 1 && !matches!(kind & !0x20, 8 | 9 | 18) {
        return Next::Not;
    }
    // Stream id, then (script tags) the AMF0 string type of the name.
    if got >= 9 && h[8] != 0 || got >= 10 && h[9] != 0 || got >= 11 && h[10] != 0 {
        return Next::Not;
    }
    if got >= 12 && kind & !0x20 == 18 && kind & 0x20 == 0 && h[11] != 2 {
        return Next::Not;
    }
    if got < 12 {
        return Next::Cut;
    }
    Next::Tag(u64::from(u32::from_be_bytes([0, h[1], h[2], h[3]])))
}

/// The `filesize` of the first tag's `onMetaData`, when it is a whole
/// number of bytes past the header.
fn filesize(src: &Src) -> Option<u64> {
    let mut buf = [0u8; META_SEARCH];
    let n = src.read(FIRST_TAG, &mut buf);
    let data = buf.get(..n)?;
    if data.first() != Some(&18) || data.get(11..24) != Some(b"\x02\x00\x0AonMetaData") {
        return None;
    }
    let key = b"\x00\x08filesize\x00";
    let at = data.windows(key.len()).position(|w| w == key)? + key.len();
    let v = f64::from_be_bytes(data.get(at..at + 8)?.try_into().ok()?);
    (v.fract() == 0.0 && v > FIRST_TAG as f64 && v < 2f64.powi(53)).then_some(v as u64)
}

/// An FLV file.
pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<13>(0)?;
    let offset = u32::from_be_bytes([h[5], h[6], h[7], h[8]]);
    if &h[..4] != b"FLV\x01" || h[4] & 0xFA != 0 || offset != 9 || h[9..13] != [0; 4] {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    let filesize = filesize(&src);
    let mut pos = FIRST_TAG;
    let mut tags = 0u32;
    loop {
        let done = || Some(Verdict::complete(pos).with_note(format!("{tags} tag(s)")));
        if tags > 0 && filesize == Some(pos) {
            return done();
        }
        let size = match tag_at(&src, pos) {
            Next::Tag(size) => size,
            Next::Not if tags == 0 => return None,
            Next::Not => return done(),
            // The window ends after a tag: the file's end unless
            // `filesize` says it goes on.
            Next::Cut if pos == src.len() && tags > 0 && filesize.is_none_or(|f| f < pos) => {
                return done();
            }
            Next::Cut => return cut(),
        };
        if tags >= MAX_TAGS {
            return Some(Verdict::partial(
                pos,
                format!("more than {MAX_TAGS} tags: not followed"),
            ));
        }
        let pts_at = pos + 11 + size;
        let Some(pts) = src.u32be(pts_at) else {
            return cut();
        };
        if u64::from(pts) != 11 + size {
            return if tags == 0 {
                None
            } else {
                Some(Verdict::partial(
                    pos,
                    format!(
                        "tag {tags} at {pos}: PreviousTagSize {pts}, not {}",
                        11 + size
                    ),
                ))
            };
        }
        tags += 1;
        pos = pts_at + 4;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A tag of `kind` with `data`, its PreviousTagSize after it.
    pub fn tag(kind: u8, time: u32, data: &[u8]) -> Vec<u8> {
        let n = data.len() as u32;
        let mut t = vec![kind];
        t.extend_from_slice(&n.to_be_bytes()[1..]);
        t.extend_from_slice(&time.to_be_bytes()[1..]);
        t.push((time >> 24) as u8);
        t.extend_from_slice(&[0, 0, 0]);
        t.extend_from_slice(data);
        t.extend_from_slice(&(n + 11).to_be_bytes());
        t
    }

    /// An FLV file: a script tag, then video and audio tags.
    pub fn seed() -> Vec<u8> {
        let mut d = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00".to_vec();
        let mut meta = vec![2, 0, 10];
        meta.extend_from_slice(b"onMetaData");
        meta.extend_from_slice(&[8, 0, 0, 0, 1, 0, 8]);
        meta.extend_from_slice(b"filesize\x00");
        let at = 13 + 11 + meta.len();
        meta.extend_from_slice(&[0; 8]);
        meta.extend_from_slice(&[0, 0, 9]);
        d.extend(tag(18, 0, &meta));
        d.extend(tags());
        let size = (d.len() as f64).to_be_bytes();
        d[at..at + 8].copy_from_slice(&size);
        d
    }

    /// Video and audio tags.
    fn tags() -> Vec<u8> {
        let mut d = Vec::new();
        for i in 0..6u32 {
            let v: Vec<u8> = (0..40 + i * 7).map(|k| (k * 31 + i) as u8).collect();
            d.extend(tag(9, i * 40, &v));
            d.extend(tag(8, i * 40, &[0xAF, 1, i as u8, 0x21, 0x10]));
        }
        d
    }

    #[test]
    fn without_filesize_ends_where_tags_end() {
        let mut d = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00".to_vec();
        d.extend(tags());
        assert_eq!(assert_complete_opts("flv", &d, false), None);
    }

    #[test]
    fn complete_prefixes_and_damage() {
        let d = seed();
        assert_eq!(assert_complete("flv", &d), None);
        assert_prefixes("flv", &d);
        // A PreviousTagSize changed: the file ends at the tag before.
        let mut bad = d.clone();
        let first = 13 + tag(18, 0, &[0; 40]).len();
        let pts = first + 11 + 40;
        bad[pts + 3] ^= 1;
        let v = run("flv", &bad).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, first as u64));
        // A DataSize of 16 MiB: cut at the window.
        let mut big = d.clone();
        big[first + 1..first + 4].copy_from_slice(&[0xFF, 0xFF, 0xFF]);
        assert_eq!(run("flv", &big).unwrap().status, Status::Partial);
        // Chance matches: reserved flags, another DataOffset, no tag, a
        // first tag whose PreviousTagSize does not match.
        for (at, b) in [(4usize, 0x08u8), (8, 0x0A), (13, 0x00)] {
            let mut j = d.clone();
            j[at] = b;
            assert!(run("flv", &j).is_none(), "byte {at}");
        }
        let mut j = d.clone();
        j[first - 1] ^= 4;
        assert!(run("flv", &j).is_none());
    }

    #[test]
    fn tags_back_to_back_stop_at_the_cap() {
        // Empty tags (15 bytes each) past the seed's filesize: the file
        // ends there; with no filesize, at the last whole tag before the
        // window's end, never past it.
        let mut d = seed();
        let n = d.len() as u64;
        for _ in 0..1000 {
            d.extend(tag(8, 0, &[]));
        }
        let v = run("flv", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, n));
        let mut e = d[..13].to_vec();
        e[13 - 4..].copy_from_slice(&[0; 4]);
        for _ in 0..1000 {
            e.extend(tag(9, 0, &[]));
        }
        e.extend_from_slice(&[9, 0, 0]);
        let v = run("flv", &e).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, e.len() as u64));
    }
}
