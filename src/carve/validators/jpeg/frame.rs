//! What the walk learns from the headers: the frame (SOF), each scan (SOS),
//! the Huffman tables in force, and the progressive coefficient history.

/// Blocks whose non-zero-coefficient history is kept for progressive
/// refinement scans (8 bytes each).
pub const MAX_HISTORY_BLOCKS: u64 = 1 << 20;

/// The frame header (SOF) as far as decoding needs it.
#[derive(Clone)]
pub(super) struct Frame {
    /// Huffman sequential (SOF0/1) or progressive (SOF2); others are not decoded.
    pub(super) kind: FrameKind,
    pub(super) precision: u8,
    pub(super) width: u32,
    pub(super) height: u32,
    /// (component id, H, V)
    pub(super) comps: Vec<(u8, u32, u32)>,
    pub(super) hmax: u32,
    pub(super) vmax: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum FrameKind {
    Sequential,
    Progressive,
    Other,
}

impl Frame {
    /// Blocks across and down of component `i` (non-interleaved order).
    pub(super) fn blocks(&self, i: usize) -> (u64, u64) {
        let (_, h, v) = self.comps[i];
        let w = (u64::from(self.width) * u64::from(h)).div_ceil(u64::from(self.hmax));
        let hh = (u64::from(self.height) * u64::from(v)).div_ceil(u64::from(self.vmax));
        (w.div_ceil(8), hh.div_ceil(8))
    }
}

/// A scan header (SOS).
pub(super) struct Scan {
    /// (frame component index, DC table, AC table)
    pub(super) comps: Vec<(usize, usize, usize)>,
    pub(super) ss: u8,
    pub(super) se: u8,
    pub(super) ah: u8,
}

/// A history restored from a snapshot's: the snapshot's, and the words
/// that may differ from it since (per component, blocks `[lo, hi)`;
/// `None`: any).
pub(super) struct Restored {
    pub(super) from: std::sync::Arc<Vec<Vec<u64>>>,
    pub(super) dirty: Option<Vec<(usize, u64, u64)>>,
}

/// Ranges [`Restored`] lists before it calls the whole history changed.
pub(super) const MAX_DIRTY: usize = 64;

thread_local! {
    /// The last history restored from a snapshot on this thread, given
    /// back when its decode ended. A fragment search resumes thousands of
    /// probes from the same few snapshots, each failing a few bytes on:
    /// copying a progressive file's whole history (up to 8 MiB) for each,
    /// after zeroing a fresh one where the frame was read, took most of
    /// such a probe's time (50-400 µs against a few for its decode). One
    /// history and the snapshot's it came from per thread (16 MiB at
    /// most), until the thread ends.
    pub(super) static RESTORED: std::cell::RefCell<Option<(Vec<Vec<u64>>, Restored)>> =
        const { std::cell::RefCell::new(None) };
}

/// The history `from`, in the buffer the last decode on this thread
/// restored (only the words that decode may have changed copied again
/// when it was restored from `from` too), else a copy.
pub(super) fn restore_history(from: &std::sync::Arc<Vec<Vec<u64>>>) -> Vec<Vec<u64>> {
    let kept = RESTORED.try_with(|k| k.borrow_mut().take()).ok().flatten();
    match kept {
        Some((mut buf, r)) if std::sync::Arc::ptr_eq(&r.from, from) && r.dirty.is_some() => {
            for (ci, lo, hi) in r.dirty.unwrap_or_default() {
                if let (Some(dst), Some(src)) = (buf.get_mut(ci), from.get(ci)) {
                    let hi = usize::try_from(hi)
                        .unwrap_or(usize::MAX)
                        .min(dst.len())
                        .min(src.len());
                    let lo = usize::try_from(lo).unwrap_or(usize::MAX).min(hi);
                    dst[lo..hi].copy_from_slice(&src[lo..hi]);
                }
            }
            buf
        }
        Some((mut buf, _)) => {
            buf.clone_from(&**from);
            buf
        }
        None => (**from).clone(),
    }
}

/// Blocks a scan decodes (what [`scan_body`] charges the budget).
pub(super) fn scan_blocks(f: &Frame, s: &Scan) -> u64 {
    let (mcux, mcuy, per_mcu) = scan_geometry(f, s);
    mcux * mcuy * per_mcu
}

/// MCUs across and down of a scan, and blocks per MCU.
pub(super) fn scan_geometry(f: &Frame, s: &Scan) -> (u64, u64, u64) {
    let interleaved = s.comps.len() > 1;
    let (mcux, mcuy) = if interleaved {
        (
            u64::from(f.width).div_ceil(8 * u64::from(f.hmax)),
            u64::from(f.height).div_ceil(8 * u64::from(f.vmax)),
        )
    } else {
        f.blocks(s.comps[0].0)
    };
    let per_mcu: u64 = if interleaved {
        s.comps
            .iter()
            .map(|&(ci, _, _)| u64::from(f.comps[ci].1 * f.comps[ci].2))
            .sum()
    } else {
        1
    };
    (mcux, mcuy, per_mcu)
}

/// [`Tables::history`].
pub(super) type History = Option<Vec<Vec<u64>>>;

/// A [`History`] as a [`ScanMemo`] keeps it: each component shared with
/// the history kept before it where equal (a progressive scan changes one
/// component, or the DC bits of all; the history after one scan is the
/// history before the next). A first decode of a progressive file under
/// the memo copied the whole history twice per scan: 1.9x the decode's
/// time on `d-debian.jpg` (800 x 600, ten scans in 160 KB).
pub(super) type MemoHistory = Option<Vec<std::sync::Arc<Vec<u64>>>>;
