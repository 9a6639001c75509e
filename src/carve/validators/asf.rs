//! Advanced Systems Format: WMA, WMV, ASF.
//!
//! Structure (Microsoft ASF Specification 1.20.03, §3-§6): top-level
//! objects `GUID (16) | size (u64 LE, header included) | body`: the Header
//! Object (`75B22630-668E-11CF-A6D9-00AA0062CE6C`: number of header objects
//! u32, two reserved bytes `01 02`, then its children), the Data Object
//! (`75B22636-...`: file ID, total data packets u64, reserved `01 01`, then
//! the packets) and any index objects (Simple Index, Index, Media Object
//! Index, Timecode Index).
//!
//! Checked: the header's children, as many as it says, add up to exactly its
//! size and include the File Properties Object; the Data Object follows
//! (taggers that shrink the header in place leave the old header's tail
//! before it: it is searched for in the 64 KiB after the header, up to the
//! next Header Object, and a note says so); when the File Properties give a fixed packet size, the Data
//! Object's size is 50 + packets × that size and every packet starts with
//! the same error-correction byte as the first (a broadcast file, written
//! as a stream, may leave the Data Object at its bare 50 bytes and no
//! packet count: its packets are then walked while they start with the
//! first one's two bytes); then the index objects are walked by their
//! sizes.
//!
//! * `None`: no Header Object of sane size, or its children do not add up.
//! * `Complete`: header, Data Object and index objects as above; length =
//!   the end of the last of them.
//! * `Partial`: an object runs past the window (length = window), or no
//!   Data Object, or its size or packets disagree with the File Properties
//!   (length = end of the last good object).
//!
//! Subtype: `asf` (audio-only files are not told from video ones). Not
//! checked: the payloads inside the packets.

use super::Verdict;
use super::read::Src;

const HEADER: [u8; 16] = guid(
    0x75B2_2630,
    0x668E,
    0x11CF,
    [0xA6, 0xD9, 0, 0xAA, 0, 0x62, 0xCE, 0x6C],
);
const DATA: [u8; 16] = guid(
    0x75B2_2636,
    0x668E,
    0x11CF,
    [0xA6, 0xD9, 0, 0xAA, 0, 0x62, 0xCE, 0x6C],
);
const FILE_PROPERTIES: [u8; 16] = guid(
    0x8CAB_DCA1,
    0xA947,
    0x11CF,
    [0x8E, 0xE4, 0x00, 0xC0, 0x0C, 0x20, 0x53, 0x65],
);
const INDEXES: [[u8; 16]; 4] = [
    // Simple Index
    guid(
        0x3300_0890,
        0xE5B1,
        0x11CF,
        [0x89, 0xF4, 0x00, 0xA0, 0xC9, 0x03, 0x49, 0xCB],
    ),
    // Index
    guid(
        0xD6E2_29D3,
        0x35DA,
        0x11D1,
        [0x90, 0x34, 0x00, 0xA0, 0xC9, 0x03, 0x49, 0xBE],
    ),
    // Media Object Index
    guid(
        0xFEB1_03F8,
        0x12AD,
        0x4C64,
        [0x84, 0x0F, 0x2A, 0x1D, 0x2F, 0x7A, 0xD4, 0x8C],
    ),
    // Timecode Index
    guid(
        0x3CB7_3FD0,
        0x0C4A,
        0x4803,
        [0x95, 0x3D, 0xED, 0xF7, 0xB6, 0x22, 0x8F, 0x0C],
    ),
];

/// How far past the Header Object the Data Object is looked for.
const DATA_SEARCH: u64 = 64 << 10;
/// Header children and index objects walked at most (real headers have
/// a few dozen children, files a handful of indexes).
const MAX_OBJECTS: u32 = 1024;

/// A GUID as stored: the first three fields little-endian.
const fn guid(a: u32, b: u16, c: u16, d: [u8; 8]) -> [u8; 16] {
    let a = a.to_le_bytes();
    let b = b.to_le_bytes();
    let c = c.to_le_bytes();
    [
        a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6],
        d[7],
    ]
}

/// The object at `pos`: (GUID, size).
fn object(src: &Src, pos: u64) -> Option<([u8; 16], u64)> {
    Some((src.bytes::<16>(pos)?, src.u64le(pos + 16)?))
}

/// The packets of `size` bytes from `from` that start with the first one's
/// two bytes (its error correction or length type flags and the byte after
/// them), walked to the first that does not (at least the first is
/// counted); `Err` when the window ends inside one. Bounded by the window:
/// each step moves `size` >= 32 bytes.
fn broadcast_packets(src: &Src, from: u64, size: u64) -> Result<u64, ()> {
    let Some(first) = src.bytes::<2>(from) else {
        return Err(());
    };
    let (mut at, mut n) = (from, 0u64);
    while src.bytes::<2>(at) == Some(first) {
        if at + size > src.len() {
            return Err(());
        }
        at += size;
        n += 1;
    }
    Ok(n)
}

pub fn validate(src: Src) -> Option<Verdict> {
    let (g, hsize) = object(&src, 0)?;
    if g != HEADER || !(30..=64 << 20).contains(&hsize) || src.bytes::<2>(28)? != [1, 2] {
        return None;
    }
    let count = src.u32le(24)?;
    if count == 0 || u64::from(count) > (hsize - 30) / 24 || count > MAX_OBJECTS {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()).with_subtype(Some("asf")));
    // The header's children.
    let mut pos = 30u64;
    let mut packet = None;
    let mut broadcast = true;
    for _ in 0..count {
        let Some((g, size)) = object(&src, pos) else {
            return if pos + 24 > src.len() { cut() } else { None };
        };
        let end = pos.checked_add(size)?;
        if size < 24 || end > hsize {
            return None;
        }
        if g == FILE_PROPERTIES && size >= 104 {
            let flags = src.u32le(pos + 88)?;
            let min = src.u32le(pos + 92)?;
            let max = src.u32le(pos + 96)?;
            broadcast = flags & 1 != 0;
            if min == max && min >= 32 {
                packet = Some(u64::from(min));
            }
        }
        pos = end;
    }
    if pos != hsize {
        return None;
    }
    // The Data Object, right after the header or after a stale tail.
    let mut notes = Vec::new();
    let data_at = if src.bytes::<16>(hsize) == Some(DATA) {
        hsize
    } else {
        let mut scratch = Vec::new();
        let mut to = hsize.saturating_add(DATA_SEARCH).min(src.len());
        // Not past another Header Object: each stretch searched then lies
        // between one header and the next, so the searches of all the
        // candidates read each byte at most once.
        if let Some(next) = src.find(&HEADER, hsize, to, &mut scratch) {
            to = next;
        }
        match src.find(&DATA, hsize, to, &mut scratch) {
            Some(at) => {
                notes.push(format!(
                    "{} bytes between header and data objects",
                    at - hsize
                ));
                at
            }
            None if to == src.len() && to < hsize.saturating_add(DATA_SEARCH) => return cut(),
            None => {
                return Some(Verdict::partial(hsize, "no data object").with_subtype(Some("asf")));
            }
        }
    };
    let Some((_, dsize)) = object(&src, data_at) else {
        return cut();
    };
    let packets = match src.u64le(data_at + 40) {
        Some(p) => p,
        None => return cut(),
    };
    let bad =
        |why: &str| Some(Verdict::partial(data_at, why.to_string()).with_subtype(Some("asf")));
    // A broadcast writer (streaming, no seek back) leaves the Data Object at
    // its bare 50 bytes and no packet count: its packets are walked.
    let dsize = match packet {
        Some(p) if broadcast && packets == 0 && dsize == 50 => {
            match broadcast_packets(&src, data_at + 50, p) {
                Ok(n) => {
                    notes.push(format!("broadcast: {n} packets walked"));
                    50 + n * p
                }
                Err(()) => return cut(),
            }
        }
        _ => dsize,
    };
    let data_end = data_at.checked_add(dsize);
    let Some(data_end) = data_end.filter(|_| dsize >= 50) else {
        return bad("data object of impossible size");
    };
    if let (Some(p), false) = (packet, broadcast)
        && packets.checked_mul(p).and_then(|n| n.checked_add(50)) != Some(dsize)
    {
        return bad("data object size disagrees with its packets");
    }
    if data_end > src.len() {
        return cut();
    }
    // Every packet starts like the first (error correction flags and length).
    if let Some(p) = packet {
        let first = src.u8(data_at + 50);
        if first.is_some_and(|b| b & 0x80 != 0) {
            let mut at = data_at + 50;
            while at < data_end {
                if src.u8(at) != first {
                    return bad("a packet does not start like the first");
                }
                at += p;
            }
        }
    }
    // Index objects.
    let mut pos = data_end;
    let mut n = 0;
    while n < MAX_OBJECTS {
        let Some((g, size)) = object(&src, pos) else {
            break;
        };
        if !INDEXES.contains(&g) || size < 24 {
            break;
        }
        let Some(end) = pos.checked_add(size) else {
            break;
        };
        if end > src.len() {
            return cut();
        }
        pos = end;
        n += 1;
    }
    notes.push(format!("{packets} packets, {n} index objects"));
    let mut v = Verdict::complete(pos);
    for note in notes {
        v = v.with_note(note);
    }
    Some(v.with_subtype(Some("asf")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};
    use super::*;

    fn obj(out: &mut Vec<u8>, g: &[u8; 16], body: &[u8]) {
        out.extend_from_slice(g);
        out.extend_from_slice(&(body.len() as u64 + 24).to_le_bytes());
        out.extend_from_slice(body);
    }

    fn sample(gap: usize, index: bool) -> Vec<u8> {
        let psize = 64u32;
        let mut props = vec![0u8; 80];
        props[64..68].copy_from_slice(&2u32.to_le_bytes()); // flags: seekable
        props[68..72].copy_from_slice(&psize.to_le_bytes());
        props[72..76].copy_from_slice(&psize.to_le_bytes());
        let mut kids = Vec::new();
        obj(&mut kids, &FILE_PROPERTIES, &props);
        obj(&mut kids, &[7; 16], b"a stream properties object");
        let mut v = HEADER.to_vec();
        v.extend_from_slice(&(30 + kids.len() as u64).to_le_bytes());
        v.extend_from_slice(&2u32.to_le_bytes());
        v.extend_from_slice(&[1, 2]);
        v.extend_from_slice(&kids);
        v.extend(std::iter::repeat_n(b'x', gap));
        let mut data = vec![0x11; 16];
        data.extend_from_slice(&3u64.to_le_bytes());
        data.extend_from_slice(&[1, 1]);
        for i in 0..3u8 {
            let mut p = vec![i; psize as usize];
            p[0] = 0x82;
            data.extend_from_slice(&p);
        }
        obj(&mut v, &DATA, &data);
        if index {
            obj(&mut v, &INDEXES[0], &[5; 40]);
        }
        v
    }

    /// A valid file, the seed for the mutation property test (no index:
    /// a file cut right after its Data Object is a whole file).
    pub fn seed() -> Vec<u8> {
        sample(0, false)
    }

    #[test]
    fn complete_with_and_without_a_gap() {
        let f = seed();
        assert_eq!(assert_complete("asf", &f).as_deref(), Some("asf"));
        assert_prefixes("asf", &f);
        let g = sample(100, true);
        assert_eq!(assert_complete("asf", &g).as_deref(), Some("asf"));
        let v = run("asf", &g).unwrap();
        assert!(v.notes.iter().any(|n| n.contains("100 bytes between")));
        assert!(v.notes.iter().any(|n| n.contains("1 index objects")));
    }

    fn hsize_of(f: &[u8]) -> u64 {
        u64::from_le_bytes(f[16..24].try_into().unwrap())
    }

    #[test]
    fn refused_and_partial() {
        // Header children that do not add up.
        let mut f = seed();
        f[24] = 3;
        assert!(run("asf", &f).is_none());
        // A packet that does not start like the first (someone else's data).
        let mut f = seed();
        let d = f.windows(16).position(|w| w == DATA).unwrap();
        f[d + 50 + 64] = 0;
        let v = run("asf", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d as u64));
        // The Data Object is not looked for past another Header Object.
        let mut f = sample(100, false);
        let at = hsize_of(&f) as usize + 10;
        f[at..at + 16].copy_from_slice(&HEADER);
        let v = run("asf", &f).unwrap();
        assert_eq!(v.status, Status::Partial);
        assert_eq!(v.length, hsize_of(&f));
        let f = seed();
        let v = run_at(
            "asf",
            &f,
            0,
            Limits {
                max_len: f.len() as u64 - 1,
            },
        )
        .unwrap();
        assert_eq!(v.status, Status::Partial);
    }

    /// `sample` as a broadcast writer leaves it: the Broadcast flag set, a
    /// bare 50-byte Data Object and no packet count, packets after it.
    fn broadcast(f: &[u8]) -> Vec<u8> {
        let mut f = f.to_vec();
        let props = f.windows(16).position(|w| w == FILE_PROPERTIES).unwrap();
        f[props + 88] |= 1;
        let d = f.windows(16).position(|w| w == DATA).unwrap();
        f[d + 16..d + 24].copy_from_slice(&50u64.to_le_bytes());
        f[d + 40..d + 48].copy_from_slice(&0u64.to_le_bytes());
        // Error correction data as writers leave it: zero in every packet.
        for k in 0..3 {
            f[d + 51 + k * 64] = 0;
        }
        f
    }

    #[test]
    fn broadcast_packets_are_walked() {
        let f = broadcast(&seed());
        let d = f.windows(16).position(|w| w == DATA).unwrap();
        let mut img = f.clone();
        img.extend_from_slice(&[0x55; 200]);
        let v = run("asf", &img).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
        assert!(v.notes.iter().any(|n| n.contains("3 packets walked")));
        // Packets without error correction data: the first two bytes are
        // the length type and property flags.
        let mut g = f.clone();
        for k in 0..3 {
            g[d + 50 + k * 64..][..2].copy_from_slice(&[0x51, 0x5d]);
        }
        g.extend_from_slice(&[0x51, 0x00, 0x5d]);
        let v = run("asf", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
        // A last packet cut by the window; no packet at all.
        let mut cut = f.clone();
        cut.extend_from_slice(&[0x82, 0]);
        assert_eq!(run("asf", &cut).unwrap().status, Status::Partial);
        let v = run("asf", &f[..d + 51]).unwrap();
        assert_eq!(v.status, Status::Partial);
        // A packet unlike the first ends the walk.
        let mut two = f.clone();
        two[d + 50 + 2 * 64] = 0x11;
        let v = run("asf", &two).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Complete, (d + 50 + 128) as u64)
        );
        // Without the Broadcast flag, the sizes are taken as written: a Data
        // Object of no packet, the packets after it not walked.
        let props = f.windows(16).position(|w| w == FILE_PROPERTIES).unwrap();
        let mut plain = f.clone();
        plain[props + 88] &= !1;
        let v = run("asf", &plain).unwrap();
        assert_eq!(v.length, (d + 50) as u64);
    }
}
