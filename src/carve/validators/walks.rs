//! Flat walks (chunk after chunk, box after box) remembered across the
//! candidates of a carving.
//!
//! A walk whose next step depends only on the bytes where it stands (a RIFF
//! chunk's id and size, an MP4 box's size and type) takes the same steps
//! from an offset whichever header it started at. Headers packed in every
//! sector, each inside a chunk of the walks before it and followed by tiny
//! chunks, make every candidate walk the same far stretch: work quadratic
//! in the image. So walks note segments (from offset `X`, `steps` steps to
//! offset `to`, meeting `flags` on the way) every [`STRIDE`] steps, and a
//! walk standing on a noted `X` jumps along the chain of segments from it
//! (which is then noted from `X` as one: path compression, so that chains
//! are followed in about constant time). Each stretch is walked about once;
//! a candidate walks about [`STRIDE`] steps before it meets the walks
//! before it. A segment is used only when its end lies in the walker's
//! bounds and its steps within its cap, so verdicts are those of walking.

use std::collections::HashMap;
use std::sync::Mutex;

/// Steps between the segments a walk notes.
pub const STRIDE: u32 = 32;
/// Segments kept per walk kind and reader (then all are forgotten: bounded
/// memory, never a wrong answer).
const ENTRIES: usize = 1 << 16;
/// Segments followed by one jump (a longer chain is followed by the next).
const HOPS: usize = 4096;

/// From an offset, `steps` steps of a walk end at `to`, meeting `flags`
/// (the walk's own meaning: chunks or boxes it records having seen).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub to: u64,
    pub steps: u32,
    pub flags: u32,
}

/// Segments by reader and walk kind, by image offset of their start.
#[derive(Debug, Default)]
pub struct WalkMemo {
    segs: Mutex<HashMap<(usize, &'static str), HashMap<u64, Segment>>>,
}

impl WalkMemo {
    /// The chain of segments from image offset `at` of the walk `kind`,
    /// followed while each ends at or below `below`, the steps add up to at
    /// most `max_steps` and `ok` accepts its flags: summed. `None` when no
    /// segment from `at` fits.
    pub fn jump(
        &self,
        (reader, kind): (usize, &'static str),
        at: u64,
        (below, max_steps): (u64, u32),
        ok: impl Fn(u32) -> bool,
    ) -> Option<Segment> {
        let mut map = self.segs.lock().unwrap_or_else(|e| e.into_inner());
        let per = map.get_mut(&(reader, kind))?;
        let mut path: Vec<(u64, Segment)> = Vec::new();
        let mut to = at;
        let mut steps = 0u32;
        while path.len() < HOPS {
            let Some(&s) = per.get(&to) else {
                break;
            };
            let Some(sum) = steps.checked_add(s.steps) else {
                break;
            };
            if s.to <= to || s.to > below || sum > max_steps || !ok(s.flags) {
                break;
            }
            path.push((to, s));
            (to, steps) = (s.to, sum);
        }
        let (&(_, last), _) = path.split_last()?;
        // Each node of the path now reaches the path's end at once.
        let mut tail = Segment {
            to: last.to,
            steps: 0,
            flags: 0,
        };
        for &(from, s) in path.iter().rev() {
            tail.steps += s.steps;
            tail.flags |= s.flags;
            per.insert(from, tail);
        }
        Some(tail)
    }

    /// Notes that from image offset `from` the walk `kind` took `seg`.
    pub fn note(&self, (reader, kind): (usize, &'static str), from: u64, seg: Segment) {
        if seg.to <= from || seg.steps == 0 {
            return;
        }
        let mut map = self.segs.lock().unwrap_or_else(|e| e.into_inner());
        let per = map.entry((reader, kind)).or_default();
        if per.len() >= ENTRIES {
            per.clear();
        }
        let e = per.entry(from).or_insert(seg);
        if seg.to > e.to {
            *e = seg;
        }
    }
}

/// The segment a walk is noting: from `from`, the steps taken since.
pub struct Noting {
    kind: &'static str,
    from: Option<u64>,
    steps: u32,
    flags: u32,
}

impl Noting {
    pub fn new(kind: &'static str) -> Self {
        Noting {
            kind,
            from: None,
            steps: 0,
            flags: 0,
        }
    }

    /// Starts a segment at `at` (window offset), dropping the one open.
    pub fn start(&mut self, at: u64) {
        (self.from, self.steps, self.flags) = (Some(at), 0, 0);
    }

    /// Stops noting until the next [`Noting::start`] (a step that depends
    /// on more than the bytes where it stood).
    pub fn stop(&mut self) {
        self.from = None;
    }

    /// The walk took `steps` steps meeting `flags` and now stands at `at`;
    /// the segment is noted once it is [`STRIDE`] steps long.
    pub fn took(&mut self, src: &super::read::Src, steps: u32, flags: u32, at: u64) {
        let Some(from) = self.from else {
            self.start(at);
            return;
        };
        self.steps = self.steps.saturating_add(steps);
        self.flags |= flags;
        if self.steps >= STRIDE {
            src.walk_note(
                self.kind,
                from,
                Segment {
                    to: at,
                    steps: self.steps,
                    flags: self.flags,
                },
            );
            self.start(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(to: u64, steps: u32, flags: u32) -> Segment {
        Segment { to, steps, flags }
    }

    #[test]
    fn chains_are_followed_within_bounds_and_compressed() {
        let m = WalkMemo::default();
        let k = (1, "t");
        m.note(k, 0, seg(100, 32, 0));
        m.note(k, 100, seg(200, 32, 1));
        m.note(k, 200, seg(300, 32, 0));
        assert_eq!(m.jump(k, 50, (u64::MAX, u32::MAX), |_| true), None);
        assert_eq!(
            m.jump(k, 0, (u64::MAX, u32::MAX), |_| true),
            Some(seg(300, 96, 1))
        );
        // Compressed: one hop now, and each node reaches the end.
        assert_eq!(
            m.jump(k, 100, (u64::MAX, u32::MAX), |_| true),
            Some(seg(300, 64, 1))
        );
        // Bounds: the end, the steps, the flags.
        assert_eq!(m.jump(k, 0, (299, u32::MAX), |_| true), None);
        assert_eq!(m.jump(k, 0, (u64::MAX, 95), |_| true), None);
        assert_eq!(
            m.jump(k, 200, (u64::MAX, u32::MAX), |f| f == 0),
            Some(seg(300, 32, 0))
        );
        assert_eq!(m.jump(k, 100, (u64::MAX, u32::MAX), |f| f == 0), None);
        // Other readers and kinds know nothing of it.
        assert_eq!(m.jump((2, "t"), 0, (u64::MAX, u32::MAX), |_| true), None);
        assert_eq!(m.jump((1, "u"), 0, (u64::MAX, u32::MAX), |_| true), None);
    }
}
