//! The scan's log of where it found the [`NEEDLES`] ([`ScanNeedles`]): the
//! signatures the fragment searches index (JPEG SOI, ZIP EOCD) and the PDF
//! validator looks ahead for (through [`crate::carve::validators::read::SignatureLog`], the validators' own
//! trait: they never name this module), and, for the JPEG searches'
//! prefilter, what the scan saw of every sector.
//!
//! It lives under `fragments` because it keeps the JPEG prefilter's
//! per-sector record ([`super::entropy::EntropySectors`]).

use super::entropy;

/// The signatures the scan's positions are logged of ([`ScanNeedles`]): the
/// JPEG SOI and the ZIP end-of-central-directory record, which the searches
/// index (`PosIndex`), and the PDF end and start markers, which the PDF
/// validator looks for ahead ([`crate::carve::validators::read::SignatureLog`]).
pub const NEEDLES: [&[u8]; 4] = [&[0xFF, 0xD8, 0xFF], b"PK\x05\x06", b"%%EOF", b"%PDF-"];

/// Most positions kept per signature by [`ScanNeedles`] (the lowest go
/// first; searches below what is kept read the image themselves).
const MAX_LOGGED: usize = 1 << 18;

/// Where the scan found the [`NEEDLES`], as it goes: the scan reports every
/// occurrence of every catalogue pattern, so when a pattern is exactly a
/// needle its matches are that needle's positions, and the searches' index
/// is filled from them instead of reading the image again (on a 256 MiB
/// ext4 image the searches re-read 430 MiB to find them). A stretch the
/// scan has not reached, or whose positions were dropped, is read as
/// before: the positions are the same either way.
///
/// It also keeps, for the JPEG searches' prefilter, what the scan saw of
/// every sector (`entropy::EntropySectors`: enough to decide the prefilter
/// over any window of whole sectors), when asked
/// ([`ScanNeedles::with_entropy_sectors`]): the scan shows it every block
/// ([`crate::scan::BlockObserver`]).
#[derive(Debug, Default)]
pub struct ScanNeedles {
    state: std::sync::Mutex<NeedleState>,
    pub(super) sectors: Option<entropy::EntropySectors>,
    /// The validators' forward searches past the log's frontier.
    memo: crate::carve::validators::read::SearchMemo,
}

#[derive(Debug, Default)]
struct NeedleState {
    /// Every occurrence starting in `[lo, through)` of an enabled needle is
    /// logged (above `kept_from`).
    lo: u64,
    through: u64,
    enabled: [bool; NEEDLES.len()],
    at: [std::collections::BTreeSet<u64>; NEEDLES.len()],
    kept_from: [u64; NEEDLES.len()],
}

impl ScanNeedles {
    /// A log for a scan starting at `lo`; `enabled[k]`: some pattern of the
    /// scan is exactly `NEEDLES[k]`.
    pub fn new(lo: u64, enabled: [bool; NEEDLES.len()]) -> Self {
        ScanNeedles {
            state: std::sync::Mutex::new(NeedleState {
                lo,
                through: lo,
                enabled,
                ..NeedleState::default()
            }),
            sectors: None,
            memo: Default::default(),
        }
    }

    /// Keeps what the scan saw of every sector for the JPEG prefilter too,
    /// for an image of `len` bytes.
    pub fn with_entropy_sectors(mut self, len: u64) -> Self {
        self.sectors = Some(entropy::EntropySectors::new(len));
        self
    }

    /// True when it keeps what the scan saw of each sector for the JPEG
    /// prefilter.
    pub fn observes(&self) -> bool {
        self.sectors.is_some()
    }

    /// Records the scan's matches of needle `k` (ascending, any number of
    /// calls) and that everything below `through` has been reported. A
    /// needle found more than once per [`DENSE_SPAN`] bytes on average over
    /// `[from, through)` is not logged there (a dense region: the log would
    /// cost a tree insertion per few bytes): the log then holds it only from
    /// `through` on, and a search below reads the image itself.
    pub fn record(&self, found: &[(usize, u64)], (from, through): (u64, u64)) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let most = through.saturating_sub(from) / DENSE_SPAN + 64;
        let mut counts = [0u64; NEEDLES.len()];
        for &(k, _) in found {
            if let Some(c) = counts.get_mut(k) {
                *c += 1;
            }
        }
        let mut dense = [false; NEEDLES.len()];
        for (k, d) in dense.iter_mut().enumerate() {
            *d = counts[k] > most;
            if *d {
                st.at[k].clear();
                st.kept_from[k] = st.kept_from[k].max(through);
            }
        }
        for &(k, pos) in found {
            if dense.get(k).copied().unwrap_or(true) {
                continue;
            }
            if let Some(set) = st.at.get_mut(k) {
                set.insert(pos);
                if set.len() > MAX_LOGGED
                    && let Some(low) = set.pop_first()
                {
                    st.kept_from[k] = st.kept_from[k].max(low + 1);
                }
            }
        }
        st.through = st.through.max(through);
    }

    /// The logged positions of `needle` in `[from, upto)`, with `upto` as
    /// far toward `to` as the log holds them all (the scan's frontier,
    /// while it goes); `None` when it holds none from `from` on.
    pub(super) fn positions_upto(
        &self,
        needle: &[u8],
        from: u64,
        to: u64,
    ) -> Option<(Vec<u64>, u64)> {
        let k = NEEDLES.iter().position(|n| *n == needle)?;
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let upto = to.min(st.through);
        let held = st.enabled[k] && st.lo <= from && st.kept_from[k] <= from && upto > from;
        held.then(|| (st.at[k].range(from..upto).copied().collect(), upto))
    }
}

impl ScanNeedles {
    /// The first (or `last`) logged start of `sig` in `[from, below)`.
    fn logged_in(&self, sig: &[u8], from: u64, below: u64, last: bool) -> Option<u64> {
        let k = NEEDLES
            .iter()
            .position(|n| *n == sig)
            .filter(|_| from < below)?;
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = st.at[k].range(from..below);
        if last { at.next_back() } else { at.next() }.copied()
    }
}

/// Bytes per logged occurrence of a needle, on average over a block, below
/// which the block is too dense to log ([`ScanNeedles::record`]).
const DENSE_SPAN: u64 = 128;

impl crate::scan::BlockObserver for ScanNeedles {
    fn observe(&self, offset: u64, owned: &[u8]) {
        if let Some(e) = &self.sectors {
            e.record(offset, owned);
        }
    }
}

impl crate::carve::validators::read::SignatureLog for ScanNeedles {
    fn logged_through(&self, sig: &[u8], from: u64) -> Option<u64> {
        let k = NEEDLES.iter().position(|n| *n == sig)?;
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.enabled[k] && st.lo <= from && st.kept_from[k] <= from).then_some(st.through)
    }
    fn first_in(&self, sig: &[u8], from: u64, below: u64) -> Option<u64> {
        self.logged_in(sig, from, below, false)
    }
    fn last_in(&self, sig: &[u8], from: u64, below: u64) -> Option<u64> {
        self.logged_in(sig, from, below, true)
    }
    fn memo(&self) -> Option<&crate::carve::validators::read::SearchMemo> {
        Some(&self.memo)
    }
}
