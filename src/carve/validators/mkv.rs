//! Matroska and WebM (EBML).
//!
//! Structure (RFC 8794 EBML; RFC 9559 Matroska): elements
//! `ID (vint, 1-4 bytes, marker kept) | size (vint, 1-8 bytes) | body`; a
//! size whose value bits are all ones is "unknown" (the element runs until
//! an element that cannot be its child). A file is an EBML header element
//! (`1A45DFA3`, whose body holds the `DocType` `4282`) followed by one
//! Segment (`18538067`) holding the top-level elements: SeekHead, Info,
//! Tracks, Cluster, Cues, Attachments, Chapters, Tags, Void, CRC-32.
//!
//! Checked: the EBML header's children are well-formed EBML elements that
//! end exactly at its end, with a DocType `matroska` or `webm`; the
//! Segment's children are known top-level elements walked by their sizes to
//! exactly the Segment's end (a Cluster of unknown size is walked through
//! its children: Timestamp, Position, PrevSize, SimpleBlock, BlockGroup,
//! EncryptedBlock, SilentTracks, Void, CRC-32), and Info and Tracks are
//! among them.
//!
//! * `None`: no EBML header of sane size, or a DocType that is neither.
//! * `Complete`: the Segment's children add up to its declared size, or,
//!   for a Segment of unknown size, the walk ends at the first element that
//!   is not a top-level one, after Info, Tracks and a Cluster; length = the
//!   Segment's end.
//! * `Partial`: the Segment runs past the window (length = window), or a
//!   child is damaged or unknown (length = end of the last good child), or
//!   Info or Tracks is missing.
//!
//! Subtype: the DocType (`webm`, or `mkv` for `matroska`). Not checked: the
//! insides of Info, Tracks, blocks and cues.

use super::Verdict;
use super::read::Src;
use super::walks::{Noting, Took, took};

/// Elements walked at most (each is at least 2 bytes, so the walk is also
/// bounded by the window).
const MAX_ELEMENTS: u32 = 4_000_000;

const EBML: u32 = 0x1A45_DFA3;
const SEGMENT: u32 = 0x1853_8067;
const CLUSTER: u32 = 0x1F43_B675;
const INFO: u32 = 0x1549_A966;
const TRACKS: u32 = 0x1654_AE6B;
const VOID: u32 = 0xEC;
/// Flags of the walk's segments: an Info, a Tracks element.
const SEEN_INFO: u32 = 1;
const SEEN_TRACKS: u32 = 2;
const CRC32: u32 = 0xBF;

/// The Segment's children (RFC 9559 §5.1).
const TOP_LEVEL: &[u32] = &[
    0x114D_9B74, // SeekHead
    INFO,
    TRACKS,
    CLUSTER,
    0x1C53_BB6B, // Cues
    0x1941_A469, // Attachments
    0x1043_A770, // Chapters
    0x1254_C367, // Tags
    VOID,
    CRC32,
];

/// A Cluster's children.
const CLUSTER_CHILDREN: &[u32] = &[
    0xE7,   // Timestamp
    0xA7,   // Position
    0xAB,   // PrevSize
    0xA3,   // SimpleBlock
    0xA0,   // BlockGroup
    0xAF,   // EncryptedBlock
    0x5854, // SilentTracks
    VOID, CRC32,
];

/// An element header: (id, body size or `None` for unknown, header length).
type Head = (u32, Option<u64>, u64);

/// The element header at `pos`: `Err(true)` when the window ends inside it,
/// `Err(false)` when it is not a well-formed EBML element header.
fn head(src: &Src, pos: u64) -> Result<Head, bool> {
    // The ID's first byte and the next, in one read: a one-byte ID's size
    // byte (small elements are the walk's whole cost on dense input).
    let mut b = [0u8; 12];
    let n = src.read(pos, &mut b[..2]);
    let b0 = *b.first().filter(|_| n > 0).ok_or(true)?;
    let idlen = b0.leading_zeros() as usize + 1;
    if idlen > 4 {
        return Err(false);
    }
    if idlen > 1 || n < 2 {
        // The rest of the ID and the size's first byte.
        if !src.read_exact(pos + 1, &mut b[1..=idlen]) {
            return Err(true);
        }
    }
    let id = b[..idlen]
        .iter()
        .fold(0u32, |id, &x| (id << 8) | u32::from(x));
    let s0 = b[idlen];
    let slen = s0.leading_zeros() as usize + 1;
    if slen > 8 {
        return Err(false);
    }
    let rest = &mut b[idlen + 1..idlen + slen];
    if !src.read_exact(pos + idlen as u64 + 1, rest) {
        return Err(true);
    }
    let first = u64::from(s0) & (0xFF >> slen);
    let all_ones = first == 0xFF >> slen && rest.iter().all(|&x| x == 0xFF);
    let size = rest.iter().fold(first, |v, &x| (v << 8) | u64::from(x));
    Ok((id, (!all_ones).then_some(size), (idlen + slen) as u64))
}

/// Walks the EBML header's body `[from, end)`: returns the DocType (up to 16
/// bytes) if the children end exactly at `end`.
fn doc_type(src: &Src, from: u64, end: u64) -> Option<Vec<u8>> {
    let mut pos = from;
    let mut doc = None;
    while pos < end {
        let (id, size, hl) = head(src, pos).ok()?;
        let size = size?;
        let body = pos.checked_add(hl)?;
        let next = body.checked_add(size)?;
        if next > end {
            return None;
        }
        if id == 0x4282 {
            let n = size.min(16) as usize;
            let mut buf = vec![0u8; n];
            if !src.read_exact(body, &mut buf) {
                return None;
            }
            // A DocType may be padded with zeros.
            while buf.last() == Some(&0) {
                buf.pop();
            }
            doc = Some(buf);
        }
        pos = next;
    }
    doc
}

pub fn validate(src: Src) -> Option<Verdict> {
    let (id, size, hl) = head(&src, 0).ok()?;
    let size = size?;
    if id != EBML || size > 4096 {
        return None;
    }
    let hend = hl + size;
    let doc = doc_type(&src, hl, hend)?;
    let subtype = match doc.as_slice() {
        b"matroska" => "mkv",
        b"webm" => "webm",
        _ => return None,
    };
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()).with_subtype(Some(subtype)));
    // Void elements may stand between the header and the Segment.
    let mut pos = hend;
    let (seg_body, seg_end) = loop {
        let (id, size, hl) = match head(&src, pos) {
            Ok(h) => h,
            Err(true) => return cut(),
            Err(false) => return None,
        };
        let body = pos + hl;
        match (id, size) {
            (SEGMENT, Some(s)) => break (body, body.checked_add(s)),
            (SEGMENT, None) => break (body, None),
            (VOID, Some(s)) if s < 1 << 20 => pos = body + s,
            _ => return None,
        }
    };
    let stop = seg_end.unwrap_or(u64::MAX);
    let mut pos = seg_body;
    let (mut info, mut tracks, mut clusters) = (false, false, 0u64);
    let mut n = 0u32;
    // In a Cluster of unknown size: the walk is among its children.
    let mut in_cluster = false;
    let mut damaged = false;
    // A step depends on the element's bytes and whether the walk is in a
    // Cluster alone (and the Segment's end, which bounds the jumps): the
    // stretches other candidates walked are jumped ([`super::walks`]).
    let mut noting = Noting::new("mkv");
    while pos < stop {
        if let Some(j) = src.walk_jump(
            "mkv",
            (pos, u32::from(in_cluster)),
            (stop, MAX_ELEMENTS - n),
            |_| true,
        ) {
            info |= j.flags & SEEN_INFO != 0;
            tracks |= j.flags & SEEN_TRACKS != 0;
            clusters += j.count;
            (pos, n, in_cluster) = (j.to, n + j.steps, j.state == 1);
            src.walk_took(&mut noting, took(j), (pos, j.state));
            continue;
        }
        n += 1;
        if n > MAX_ELEMENTS {
            damaged = true;
            break;
        }
        let (id, size, hl) = match head(&src, pos) {
            Ok(h) => h,
            Err(true) => return cut(),
            Err(false) => {
                damaged = seg_end.is_some();
                break;
            }
        };
        let top = TOP_LEVEL.contains(&id);
        if in_cluster && !top {
            if !CLUSTER_CHILDREN.contains(&id) {
                damaged = seg_end.is_some();
                break;
            }
        } else if !top {
            damaged = seg_end.is_some();
            break;
        } else {
            in_cluster = false;
        }
        info |= id == INFO;
        tracks |= id == TRACKS;
        let body = pos + hl;
        match size {
            Some(s) => {
                let Some(next) = body.checked_add(s) else {
                    damaged = true;
                    break;
                };
                if next > stop {
                    damaged = true;
                    break;
                }
                if next > src.len() {
                    return cut();
                }
                clusters += u64::from(id == CLUSTER);
                pos = next;
            }
            None if id == CLUSTER => {
                clusters += 1;
                in_cluster = true;
                pos = body;
            }
            None => {
                damaged = true;
                break;
            }
        }
        let t = Took {
            steps: 1,
            flags: match id {
                INFO => SEEN_INFO,
                TRACKS => SEEN_TRACKS,
                _ => 0,
            },
            count: u64::from(id == CLUSTER),
        };
        src.walk_took(&mut noting, t, (pos, u32::from(in_cluster)));
    }
    let v = if damaged {
        Verdict::partial(pos, format!("damaged or unknown element at {pos}"))
    } else if !(info && tracks) {
        Verdict::partial(pos, "no Info or no Tracks")
    } else if seg_end.is_none() && clusters == 0 {
        Verdict::partial(pos, "segment of unknown size with no cluster")
    } else {
        let v = Verdict::complete(pos);
        if seg_end.is_none() {
            v.with_note("segment of unknown size")
        } else {
            v
        }
    };
    Some(
        v.with_note(format!("{n} elements, {clusters} clusters"))
            .with_subtype(Some(subtype)),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    fn el(out: &mut Vec<u8>, id: &[u8], body: &[u8]) {
        out.extend_from_slice(id);
        // 8-byte size vint.
        let mut s = (body.len() as u64).to_be_bytes();
        s[0] = 0x01;
        out.extend_from_slice(&s);
        out.extend_from_slice(body);
    }

    fn header(doc: &[u8]) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&[0x42, 0x86, 0x81, 0x01]); // EBMLVersion 1
        h.extend_from_slice(&[0x42, 0x82, 0x80 | doc.len() as u8]);
        h.extend_from_slice(doc);
        let mut v = Vec::new();
        el(&mut v, &[0x1A, 0x45, 0xDF, 0xA3], &h);
        v
    }

    fn children(cluster_unknown: bool) -> Vec<u8> {
        let mut s = Vec::new();
        el(
            &mut s,
            &[0x15, 0x49, 0xA9, 0x66],
            &[0x2A, 0xD7, 0xB1, 0x83, 0x0F, 0x42, 0x40],
        );
        el(&mut s, &[0x16, 0x54, 0xAE, 0x6B], &[0xAE, 0x80]);
        let mut c = vec![0xE7, 0x81, 0x00];
        c.extend_from_slice(&[0xA3, 0x85, 0x81, 0x00, 0x00, 0x80, 0x55]);
        if cluster_unknown {
            s.extend_from_slice(&[
                0x1F, 0x43, 0xB6, 0x75, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            ]);
            s.extend_from_slice(&c);
        } else {
            el(&mut s, &[0x1F, 0x43, 0xB6, 0x75], &c);
        }
        el(&mut s, &[0xEC], &[0; 5]);
        s
    }

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        let mut v = header(b"webm");
        el(&mut v, &[0x18, 0x53, 0x80, 0x67], &children(true));
        v
    }

    #[test]
    fn known_and_unknown_sizes() {
        let f = seed();
        assert_eq!(assert_complete("mkv", &f).as_deref(), Some("webm"));
        assert_prefixes("mkv", &f);
        let mut g = header(b"matroska");
        el(&mut g, &[0x18, 0x53, 0x80, 0x67], &children(false));
        assert_eq!(assert_complete("mkv", &g).as_deref(), Some("mkv"));
        // A Segment of unknown size ends where its children end.
        let mut u = header(b"matroska");
        u.extend_from_slice(&[0x18, 0x53, 0x80, 0x67, 0xFF]);
        u.extend_from_slice(&children(true));
        let end = u.len() as u64;
        u.extend_from_slice(b"\x00\x00\x00 not matroska");
        let v = run("mkv", &u).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, end));
    }

    #[test]
    fn refused_and_damaged() {
        assert!(run("mkv", &header(b"foo")).is_none());
        assert!(run("mkv", b"\x1a\x45\xdf\xa3\x80").is_none());
        // A child size that runs past the Segment.
        let mut f = seed();
        let i = f
            .windows(4)
            .position(|w| w == [0x16, 0x54, 0xAE, 0x6B])
            .unwrap();
        f[i + 11] = 0x7F;
        let v = run("mkv", &f).unwrap();
        assert_eq!(v.status, Status::Partial);
        assert_eq!(v.length, i as u64);
        // A window that ends inside the Segment.
        let f = seed();
        let v = run_at(
            "mkv",
            &f,
            0,
            Limits {
                max_len: f.len() as u64 - 3,
            },
        )
        .unwrap();
        assert_eq!(v.status, Status::Partial);
    }
}
