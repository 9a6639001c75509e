//! The joined view: a virtual file made of up to [`MAX_RUNS`] byte runs of
//! the image ([`TwoRuns`]), which the searches extend one run at a time and
//! the validators read as one file.

use crate::carve::validators::{self, ByteReader};

/// Most fragments a recovered file may have.
pub const MAX_RUNS: usize = 5;

/// A virtual file made of up to [`MAX_RUNS`] runs of the image: run `i`
/// holds virtual offsets `[v_i, v_{i+1})` (the last one up to `len`) and
/// reads them from the image at `img_i + (off − v_i)`. Two runs are a
/// bifragment join; the search extends a proven join by one run at a time.
#[derive(Clone, Copy)]
pub struct TwoRuns<'a> {
    pub(super) r: &'a dyn ByteReader,
    /// `(virtual start, image offset)` of each run; `at[0].0 == 0`.
    pub(super) at: [(u64, u64); MAX_RUNS],
    pub(super) n: usize,
    pub(super) len: u64,
}

impl<'a> TwoRuns<'a> {
    /// The join of `[a, a + split)` and `[b, …)`; its length is bounded by the
    /// image, by `max_len` and, out of order (`b < a`), by the header.
    pub fn new(r: &'a dyn ByteReader, a: u64, split: u64, b: u64, max_len: u64) -> Self {
        let second = if b < a {
            a - b
        } else {
            r.len().saturating_sub(b)
        };
        let mut at = [(0, 0); MAX_RUNS];
        at[0] = (0, a);
        at[1] = (split, b);
        TwoRuns {
            r,
            at,
            n: 2,
            len: split.saturating_add(second).min(max_len),
        }
    }
    /// The image from `a` on as one run, at most `max_len` bytes.
    pub fn one(r: &'a dyn ByteReader, a: u64, max_len: u64) -> Self {
        let mut at = [(0, 0); MAX_RUNS];
        at[0] = (0, a);
        TwoRuns {
            r,
            at,
            n: 1,
            len: r.len().saturating_sub(a).min(max_len),
        }
    }
    /// This file cut at virtual `split` (inside its last run) and continued
    /// with the image from `b` on: bounded by `max_len`, the image and the
    /// nearest run of this file that starts after `b` in the image. `None`
    /// when the runs are all used or `split` is not inside the last run.
    pub fn then(&self, split: u64, b: u64, max_len: u64) -> Option<Self> {
        if self.n >= MAX_RUNS || split <= self.split() || split > self.len {
            return None;
        }
        let stop = self.at[..self.n]
            .iter()
            .map(|&(_, img)| img)
            .filter(|&img| img > b)
            .min()
            .unwrap_or(self.r.len());
        let mut j = *self;
        j.at[j.n] = (split, b);
        j.n += 1;
        j.len = split.saturating_add(stop.saturating_sub(b)).min(max_len);
        Some(j)
    }
    /// Image offset of the first run (the header).
    pub fn a(&self) -> u64 {
        self.at[0].1
    }
    /// Virtual offset where the last run starts.
    pub fn split(&self) -> u64 {
        self.at[self.n - 1].0
    }
    /// Image offset of the last run.
    pub fn b(&self) -> u64 {
        self.at[self.n - 1].1
    }
    /// Runs used.
    pub fn count(&self) -> usize {
        self.n
    }
    /// This file with the start of run `i` (≥ 1) moved by `dv` bytes in the
    /// file and `dimg` in the image; `None` when a run would become empty.
    pub(super) fn shifted(&self, i: usize, dv: i64, dimg: i64) -> Option<Self> {
        if i == 0 || i >= self.n {
            return None;
        }
        let (v, img) = self.at[i];
        let next = if i + 1 < self.n {
            self.at[i + 1].0
        } else {
            self.len
        };
        let moved = (v.checked_add_signed(dv)?, img.checked_add_signed(dimg)?);
        if moved.0 <= self.at[i - 1].0 || moved.0 >= next {
            return None;
        }
        let mut j = *self;
        j.at[i] = moved;
        Some(j)
    }
    /// This file with the start of run `i` (≥ 1) moved by one cluster `cl`,
    /// earlier (`back`) or later, in both the file and the image; `None` when
    /// a run would become empty.
    pub(super) fn nudged(&self, i: usize, back: bool, cl: u64) -> Option<Self> {
        let d = i64::try_from(cl).ok()?;
        let d = if back { -d } else { d };
        self.shifted(i, d, d)
    }
    /// This file's first `length` bytes with its runs in the order
    /// `order` (a permutation of `0..count()` that keeps the header run
    /// first): the same bytes in another order. `None` when `order` is no
    /// such permutation.
    pub(super) fn reordered(&self, order: &[usize], length: u64) -> Option<Self> {
        let mut seen = [false; MAX_RUNS];
        if order.len() != self.n || order.first() != Some(&0) {
            return None;
        }
        for &k in order {
            if std::mem::replace(seen.get_mut(k)?, true) {
                return None;
            }
        }
        let runs = self.runs(length);
        let mut j = *self;
        let mut v = 0u64;
        for (slot, &k) in order.iter().enumerate() {
            let (img, n) = runs[k];
            j.at[slot] = (v, img);
            v = v.saturating_add(n);
        }
        j.len = v;
        Some(j)
    }
    /// The run holding virtual offset `off`: (virtual start, image offset, virtual end).
    pub(super) fn run_of(&self, off: u64) -> (u64, u64, u64) {
        let i = self.at[..self.n]
            .iter()
            .rposition(|&(v, _)| v <= off)
            .unwrap_or(0);
        let end = if i + 1 < self.n {
            self.at[i + 1].0
        } else {
            self.len.max(self.at[i].0)
        };
        (self.at[i].0, self.at[i].1, end)
    }
    /// Image offset of virtual offset `off`.
    pub(super) fn map(&self, off: u64) -> u64 {
        let (v, img, _) = self.run_of(off);
        img + (off - v)
    }
    /// Virtual offset where the run holding `off` ends.
    pub(super) fn piece_end(&self, off: u64) -> u64 {
        self.run_of(off).2
    }
    /// The byte runs of the first `length` bytes.
    pub(super) fn runs(&self, length: u64) -> Vec<(u64, u64)> {
        (0..self.n)
            .map(|i| {
                let (v, img) = self.at[i];
                let end = if i + 1 < self.n {
                    self.at[i + 1].0
                } else {
                    u64::MAX
                };
                (img, end.min(length).saturating_sub(v))
            })
            .collect()
    }
    /// True when image offset `pos` lies in the first `upto` virtual bytes
    /// of this file: a fragment is never taken twice.
    pub(super) fn holds(&self, pos: u64, upto: u64) -> bool {
        self.runs(upto)
            .iter()
            .any(|&(img, len)| img <= pos && pos < img.saturating_add(len))
    }
}

impl ByteReader for TwoRuns<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn cheap_small_reads(&self) -> bool {
        self.r.cheap_small_reads()
    }
    fn lies_in(&self, offset: u64, len: u64) -> Option<validators::LiesIn<'_>> {
        let end = offset.checked_add(len).filter(|&e| e <= self.len)?;
        let mut runs = Vec::new();
        let mut off = offset;
        while off < end {
            let piece = self.piece_end(off).min(end);
            if piece <= off {
                return None;
            }
            runs.push((self.map(off), piece - off));
            off = piece;
        }
        Some((self.r, runs))
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let mut done = 0usize;
        while done < buf.len() {
            let off = offset + done as u64;
            if off >= self.len {
                break;
            }
            let piece_end = self.piece_end(off);
            let want = usize::try_from(piece_end.min(self.len) - off)
                .map_or(buf.len() - done, |w| w.min(buf.len() - done));
            if want == 0 {
                break;
            }
            let got = self.r.read_at(self.map(off), &mut buf[done..done + want]);
            if got == 0 {
                break;
            }
            done += got.min(want);
        }
        done
    }
}
