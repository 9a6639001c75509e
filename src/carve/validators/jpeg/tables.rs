//! The decoder's state while a picture is walked: the Huffman tables in
//! force, the restart interval, the progressive coefficient history, the
//! snapshot control of a fragment search, the memo's sync and the budget.

use super::frame::{MemoHistory, RESTORED, Restored};
use super::huffman::Huff;
use super::trail::SnapCtl;

pub(super) struct Tables {
    pub(super) dc: [Option<std::sync::Arc<Huff>>; 4],
    pub(super) ac: [Option<std::sync::Arc<Huff>>; 4],
    pub(super) restart: u32,
    /// Progressive: per component, one bit per coefficient per block.
    pub(super) history: Option<Vec<Vec<u64>>>,
    /// The history after the last scan a [`ScanMemo`] kept or answered
    /// (shared by the next scan's entry where equal).
    pub(super) memo_last: MemoHistory,
    /// `history` equals `memo_last` (nothing decoded since it was set):
    /// a copy of a picture decoded before, answered scan by scan, then
    /// compares and restores only the components a scan changed, known
    /// by the memo's shared components ([`memo_history`]).
    pub(super) memo_sync: bool,
    /// Blocks that may still be decoded (a bound on time: end-of-band runs
    /// decode many blocks from few bits).
    pub(super) budget: u64,
    pub(super) snap: SnapCtl,
    /// Validating an image that an MPF index of another one lists: its own
    /// MPF segment is not followed again.
    pub(super) inner: bool,
    /// `history` was restored from the snapshot resumed from, and what
    /// may have changed in it since ([`restore_history`]).
    pub(super) restored: Option<Restored>,
    /// `history` is the snapshot's, which the scan resumed from has not
    /// taken yet (it was restored where the frame was read).
    pub(super) resume_ready: bool,
    /// One past the last block whose history word a progressive AC scan's
    /// decode asked for.
    pub(super) hist_hi: u64,
    /// A scan's decode stops at its first MCU boundary with the reader at
    /// or past this window offset ([`Shifted`]), leaving its state in
    /// `paused`.
    pub(super) pause_at: u64,
    pub(super) paused: Option<(u64, u32, u8, u64)>,
    /// A walk that passes foreign bytes before a marker as libjpeg does,
    /// within bounds ([`super::walk`]): the retry of a strict walk that
    /// met them ([`super::validate`]).
    pub(super) lenient: bool,
}

impl Tables {
    pub(super) fn new(budget: u64, snap: SnapCtl, inner: bool) -> Self {
        Tables {
            dc: Default::default(),
            ac: Default::default(),
            restart: 0,
            history: None,
            memo_last: None,
            memo_sync: false,
            budget,
            snap,
            inner,
            restored: None,
            resume_ready: false,
            hist_hi: 0,
            pause_at: u64::MAX,
            paused: None,
            lenient: false,
        }
    }

    /// A lenient walk's tables ([`Tables::lenient`]).
    pub(super) fn new_lenient(budget: u64) -> Self {
        let mut t = Tables::new(budget, SnapCtl::default(), false);
        t.lenient = true;
        t
    }

    /// Every word of the history may differ from the snapshot's.
    pub(super) fn all_dirty(&mut self) {
        if let Some(r) = self.restored.as_mut() {
            r.dirty = None;
        }
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        // (Given back for the next decode on this thread resumed from the
        // same snapshot.)
        if let (Some(r), Some(h)) = (self.restored.take(), self.history.take()) {
            let _ = RESTORED.try_with(|k| *k.borrow_mut() = Some((h, r)));
        }
    }
}
