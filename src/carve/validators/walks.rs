//! Flat walks (chunk after chunk, box after box) remembered across the
//! candidates of a carving.
//!
//! A walk whose next step depends only on the bytes where it stands (a RIFF
//! chunk's id and size, an MP4 box's size and type) takes the same steps
//! from an offset whichever header it started at. Headers packed in every
//! sector, each inside a chunk of the walks before it and followed by tiny
//! chunks, make every candidate walk the same far stretch: work quadratic
//! in the image. So walks note segments (from offset `X`, `steps` steps to
//! offset `to`, meeting `flags` and `count` things on the way, in the
//! walk's `state` at each end: Matroska's in a Cluster or not) every
//! [`STRIDE`] steps, and a
//! walk standing on a noted `X` jumps along the chain of segments from it
//! (which is then noted from `X` as one: path compression, so that chains
//! are followed in about constant time). Each stretch is walked about once;
//! a candidate walks about [`STRIDE`] steps before it meets the walks
//! before it. A segment is used only when its end lies in the walker's
//! bounds and its steps within its cap, so verdicts are those of walking.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Steps between the segments a walk notes.
pub const STRIDE: u32 = 32;
/// Segments kept per walk kind and reader (then all are forgotten: bounded
/// memory, never a wrong answer).
const ENTRIES: usize = 1 << 16;
/// Segments followed by one jump (a longer chain is followed by the next).
const HOPS: usize = 4096;
/// Bits of the filter of segment starts (512 KiB): a walk asks the memo at
/// every step, and most steps start no segment.
const FILTER_BITS: u32 = 22;

/// From an offset (in a state), `steps` steps of a walk end at `to` in
/// `state`, meeting `flags` (the walk's own meaning: chunks or boxes it
/// records having seen) and `count` things it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub to: u64,
    pub state: u32,
    pub steps: u32,
    pub flags: u32,
    pub count: u64,
}

/// Segments by reader and walk kind, by image offset and state of their
/// start.
#[derive(Debug)]
pub struct WalkMemo {
    /// Few walks and readers: looked up in turn.
    segs: Mutex<Vec<((usize, &'static str), Segments)>>,
    /// A bit per hash of a noted start: a step whose bit is clear asks no
    /// further (no lock taken). Made at the first segment noted.
    filter: OnceLock<Box<[AtomicU64]>>,
    hasher: Keyed,
}

impl Default for WalkMemo {
    fn default() -> Self {
        WalkMemo {
            segs: Mutex::new(Vec::new()),
            filter: OnceLock::new(),
            hasher: Keyed(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)),
        }
    }
}

/// One walk's segments in one reader, by offset and state of their start.
type Segments = HashMap<(u64, u32), Segment, Keyed>;

/// A multiply-and-fold hash with a key drawn per carving (offsets come
/// from the input; SipHash was a fifth of a walk of 2-byte elements).
#[derive(Clone, Copy, Debug)]
struct Keyed(u64);

/// [`Keyed`]'s state.
struct KeyedHasher(u64);

impl BuildHasher for Keyed {
    type Hasher = KeyedHasher;
    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher(self.0)
    }
}

impl Hasher for KeyedHasher {
    fn finish(&self) -> u64 {
        let x = self.0 ^ (self.0 >> 29);
        x.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (x >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(27);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

impl WalkMemo {
    /// The filter's word and bit for a start.
    fn bit(&self, reader: usize, key: (u64, u32)) -> Option<(&AtomicU64, u64)> {
        let h = self.hasher.hash_one((reader as u64, key));
        let i = (h >> (64 - FILTER_BITS)) as usize;
        let words = self.filter.get()?;
        Some((words.get(i / 64)?, 1 << (i % 64)))
    }

    /// Whether a segment may start at `key` (false: none does).
    fn may_start(&self, reader: usize, key: (u64, u32)) -> bool {
        self.bit(reader, key)
            .is_some_and(|(w, b)| w.load(Ordering::Relaxed) & b != 0)
    }

    fn mark(&self, reader: usize, key: (u64, u32)) {
        self.filter.get_or_init(|| {
            (0..1usize << (FILTER_BITS - 6))
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        if let Some((w, b)) = self.bit(reader, key) {
            w.fetch_or(b, Ordering::Relaxed);
        }
    }
}

impl WalkMemo {
    /// The chain of segments from image offset `at` (in `state`) of the walk `kind`,
    /// followed while each ends at or below `below`, the steps add up to at
    /// most `max_steps` and `ok` accepts its flags: summed. `None` when no
    /// segment from `at` fits.
    pub fn jump(
        &self,
        (reader, kind): (usize, &'static str),
        (at, state): (u64, u32),
        (below, max_steps): (u64, u32),
        ok: impl Fn(u32) -> bool,
    ) -> Option<Segment> {
        if !self.may_start(reader, (at, state)) {
            return None;
        }
        let mut map = self.segs.lock().unwrap_or_else(|e| e.into_inner());
        let (_, per) = map.iter_mut().find(|(k, _)| *k == (reader, kind))?;
        let mut path: Vec<((u64, u32), Segment)> = Vec::new();
        let (mut to, mut state) = (at, state);
        let mut steps = 0u32;
        while path.len() < HOPS {
            let Some(&s) = per.get(&(to, state)) else {
                break;
            };
            let Some(sum) = steps.checked_add(s.steps) else {
                break;
            };
            if s.to <= to || s.to > below || sum > max_steps || !ok(s.flags) {
                break;
            }
            path.push(((to, state), s));
            (to, state, steps) = (s.to, s.state, sum);
        }
        let (&(_, last), _) = path.split_last()?;
        // Each node of the path now reaches the path's end at once.
        let mut tail = Segment {
            steps: 0,
            flags: 0,
            count: 0,
            ..last
        };
        for &(from, s) in path.iter().rev() {
            tail.steps += s.steps;
            tail.flags |= s.flags;
            tail.count = tail.count.saturating_add(s.count);
            per.insert(from, tail);
        }
        Some(tail)
    }

    /// Notes that from image offset `from` (in a state) the walk `kind`
    /// took `seg`.
    pub fn note(&self, (reader, kind): (usize, &'static str), from: (u64, u32), seg: Segment) {
        if seg.to <= from.0 || seg.steps == 0 {
            return;
        }
        self.mark(reader, from);
        let mut map = self.segs.lock().unwrap_or_else(|e| e.into_inner());
        let i = match map.iter().position(|(k, _)| *k == (reader, kind)) {
            Some(i) => i,
            None => {
                map.push(((reader, kind), HashMap::with_hasher(self.hasher)));
                map.len() - 1
            }
        };
        let Some((_, per)) = map.get_mut(i) else {
            return;
        };
        if per.len() >= ENTRIES {
            per.clear();
        }
        let e = per.entry(from).or_insert(seg);
        if seg.to > e.to {
            *e = seg;
        }
    }
}

/// The segment a walk is noting: from `from` (a window offset and state),
/// the steps taken since.
pub struct Noting {
    kind: &'static str,
    from: Option<(u64, u32)>,
    steps: u32,
    flags: u32,
    count: u64,
}

/// What a walk went through since the last [`Noting::took`]: `steps`
/// steps, meeting `flags` and `count` things.
#[derive(Clone, Copy, Default)]
pub struct Took {
    pub steps: u32,
    pub flags: u32,
    pub count: u64,
}

/// What a jump went through.
pub fn took(s: Segment) -> Took {
    Took {
        steps: s.steps,
        flags: s.flags,
        count: s.count,
    }
}

impl Noting {
    pub fn new(kind: &'static str) -> Self {
        Noting {
            kind,
            from: None,
            steps: 0,
            flags: 0,
            count: 0,
        }
    }

    /// Starts a segment at `at` (window offset, state), dropping the one
    /// open.
    pub fn start(&mut self, at: (u64, u32)) {
        (self.from, self.steps, self.flags, self.count) = (Some(at), 0, 0, 0);
    }

    /// Stops noting until the next [`Noting::start`] (a step that depends
    /// on more than the bytes where it stood).
    pub fn stop(&mut self) {
        self.from = None;
    }

    /// The walk's kind.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The walk went through `t` and now stands at `at` (window offset,
    /// state): the segment to note (from where, and the segment) once it
    /// is [`STRIDE`] steps long (`Src::walk_took` notes it).
    pub fn took(&mut self, t: Took, at: (u64, u32)) -> Option<((u64, u32), Segment)> {
        let Some(from) = self.from else {
            self.start(at);
            return None;
        };
        self.steps = self.steps.saturating_add(t.steps);
        self.flags |= t.flags;
        self.count = self.count.saturating_add(t.count);
        if self.steps < STRIDE {
            return None;
        }
        let seg = Segment {
            to: at.0,
            state: at.1,
            steps: self.steps,
            flags: self.flags,
            count: self.count,
        };
        self.start(at);
        Some((from, seg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(to: u64, steps: u32, flags: u32) -> Segment {
        Segment {
            to,
            state: 0,
            steps,
            flags,
            count: u64::from(steps),
        }
    }

    #[test]
    fn chains_are_followed_within_bounds_and_compressed() {
        let m = WalkMemo::default();
        let k = (1, "t");
        let all = (u64::MAX, u32::MAX);
        m.note(k, (0, 0), seg(100, 32, 0));
        m.note(k, (100, 0), seg(200, 32, 1));
        m.note(k, (200, 0), seg(300, 32, 0));
        assert_eq!(m.jump(k, (50, 0), all, |_| true), None);
        assert_eq!(m.jump(k, (0, 1), all, |_| true), None);
        assert_eq!(m.jump(k, (0, 0), all, |_| true), Some(seg(300, 96, 1)));
        // Compressed: one hop now, and each node reaches the end.
        assert_eq!(m.jump(k, (100, 0), all, |_| true), Some(seg(300, 64, 1)));
        // Bounds: the end, the steps, the flags.
        assert_eq!(m.jump(k, (0, 0), (299, u32::MAX), |_| true), None);
        assert_eq!(m.jump(k, (0, 0), (u64::MAX, 95), |_| true), None);
        assert_eq!(m.jump(k, (200, 0), all, |f| f == 0), Some(seg(300, 32, 0)));
        assert_eq!(m.jump(k, (100, 0), all, |f| f == 0), None);
        // Other readers and kinds know nothing of it.
        assert_eq!(m.jump((2, "t"), (0, 0), all, |_| true), None);
        assert_eq!(m.jump((1, "u"), (0, 0), all, |_| true), None);
    }

    #[test]
    fn a_chain_changes_state_where_its_segments_do() {
        let m = WalkMemo::default();
        let k = (1, "t");
        let all = (u64::MAX, u32::MAX);
        m.note(
            k,
            (0, 0),
            Segment {
                state: 1,
                ..seg(100, 32, 0)
            },
        );
        m.note(k, (100, 0), seg(200, 32, 0));
        m.note(k, (100, 1), seg(300, 32, 0));
        let j = m.jump(k, (0, 0), all, |_| true).map(|s| (s.to, s.state));
        assert_eq!(j, Some((300, 0)));
    }

    /// `n` sectors, each one chunk or box of the walks before it (`outer`,
    /// 512 bytes) holding a header at `head.len()` bytes after `outer`,
    /// then `inner` things (each the next one of `pieces`) to its end.
    fn sectors(
        n: usize,
        outer: &[u8],
        head: &[u8],
        pieces: &dyn Fn(usize, usize) -> Vec<u8>,
    ) -> Vec<u8> {
        let mut d = Vec::new();
        for k in 0..n {
            let mut sec = outer.to_vec();
            sec.extend_from_slice(head);
            let mut i = 0;
            while sec.len() < 512 {
                sec.extend(pieces(k, i));
                i += 1;
            }
            assert_eq!(sec.len(), 512, "sector {k}");
            d.extend(sec);
        }
        d
    }

    /// RIFF, MP4 and Matroska headers in every sector of tiny chunks, each
    /// inside a chunk of the walks before: validated in turn through the
    /// carving's memo, every header gets the verdict it gets alone, and the
    /// walks read a small part of what they read alone.
    #[test]
    fn walks_through_the_memo_get_what_they_get_alone_reading_less() {
        use super::super::read::{MemoOnly, SignatureLog};
        use super::super::testutil::{NO_LIMIT, Slice};
        use super::super::{ByteReader, Context, NO_CONTEXT, validate};
        use std::sync::atomic::{AtomicU64, Ordering};
        struct Counted<'a>(Slice<'a>, AtomicU64);
        impl ByteReader for Counted<'_> {
            fn len(&self) -> u64 {
                self.0.len()
            }
            fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
                let n = self.0.read_at(offset, buf);
                self.1.fetch_add(n as u64, Ordering::Relaxed);
                n
            }
        }
        const N: usize = 1024;
        let be = |v: u32| v.to_be_bytes();
        let le = |v: u32| v.to_le_bytes();
        let mp4 = sectors(
            N,
            &[&be(512)[..], b"free"].concat(),
            &[&be(24)[..], b"ftypisom\0\0\0\0isommp41"].concat(),
            &|k, i| {
                [
                    &be(8)[..],
                    if i == 0 && k % 7 == 3 {
                        b"moov"
                    } else {
                        b"free"
                    },
                ]
                .concat()
            },
        );
        let riff = sectors(
            N,
            &[&b"JUNK"[..], &le(504)].concat(),
            &[&b"RIFF"[..], &le(0xFFFF_FFF0), b"WAVEJUNK", &le(4), &[0; 4]].concat(),
            &|k, i| {
                let id = match (i, k % 7, k % 11) {
                    (0, 3, _) => b"data",
                    (1, _, 5) => b"fmt ",
                    _ => b"JUNK",
                };
                [&id[..], &le(0)].concat()
            },
        );
        let ebml = [
            0x1A, 0x45, 0xDF, 0xA3, 0x87, 0x42, 0x82, 0x84, b'w', b'e', b'b', b'm',
        ];
        let segment = [
            0x18, 0x53, 0x80, 0x67, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        ];
        let mkv = sectors(
            N,
            &[0xEC, 0x41, 0xFD],
            &[&ebml[..], &segment].concat(),
            &|k, i| match (i, k % 5) {
                (0, 1) => vec![0x15, 0x49, 0xA9, 0x66, 0x80, 0x16, 0x54, 0xAE, 0x6B, 0x80],
                (0, 2) => vec![
                    0x1F, 0x43, 0xB6, 0x75, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                ],
                (1, _) => vec![0xEC, 0x81, 0x00],
                _ => vec![0xEC, 0x80],
            },
        );
        for (name, d, at) in [("mp4", &mp4, 8), ("riff", &riff, 8), ("mkv", &mkv, 3)] {
            let image = Counted(Slice(d), AtomicU64::new(0));
            let log: std::sync::Arc<dyn SignatureLog> = std::sync::Arc::new(MemoOnly::default());
            let cx = Context::NONE.with_log(log.clone(), &image);
            let (mut alone_read, mut memo_read) = (0, 0);
            for k in 0..N as u64 {
                let start = k * 512 + at;
                let alone = validate(name, &image, start, NO_LIMIT, &NO_CONTEXT);
                alone_read += image.1.swap(0, Ordering::Relaxed);
                let memo = validate(name, &image, start, NO_LIMIT, &cx);
                memo_read += image.1.swap(0, Ordering::Relaxed);
                assert!(alone.is_some(), "{name} at {start}");
                assert_eq!(memo, alone, "{name} at {start}");
            }
            // About a sector's worth of steps and STRIDE more per header,
            // against the rest of the image per header alone.
            assert!(
                memo_read < N as u64 * 2048,
                "{name}: {memo_read} bytes read"
            );
            assert!(
                memo_read * 3 < alone_read,
                "{name}: {memo_read} bytes read through the memo, {alone_read} alone"
            );
        }
    }
}
