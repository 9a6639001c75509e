//! What a carving lists and writes, bounded by the evidence.
//!
//! Whatever the image holds, files plus reports stay within
//! [`output_limit`]: twice the image plus 16 MiB. Three rules, applied in
//! the carver's order (so the same image always gives the same reports):
//!
//! 1. **A header hit is not a file.** A `partial` verdict shorter than one
//!    sector ([`MIN_PARTIAL`]) holds nothing beyond its header's first
//!    structures: it is counted per type in `audit.txt`, not listed.
//! 2. **A suffix is not a file.** A `partial` or `unvalidated` candidate
//!    that starts inside an earlier listed one of the same type and ends
//!    where it ends or further (scripts back to back, each text run reaching
//!    the same non-text byte or its own window's end; PDF headers with no
//!    `%%EOF`, each reaching the image's end) repeats that file's end and
//!    guesses on from it: counted, not listed. Not a candidate on a sector
//!    boundary, where file systems start files: the earlier guess may be a
//!    false header whose claim runs over a real file (a 52-byte ELF header
//!    in noise claiming to the image's end, over a deleted executable).
//! 3. **A hard meter.** Every listed file costs [`ENTRY_COST`] bytes of
//!    reports and, when written, its length. A file whose bytes no longer
//!    fit is listed but not written (its note says why); once the reports
//!    themselves no longer fit, later files are counted, not listed. What
//!    fits grows with the evidence carved so far: a file ending at image
//!    offset `e` (or after one that ended there) may bring the total to
//!    `output_limit(e)`, so a hostile
//!    stretch spends the allowance of its own bytes, not the rest of the
//!    image's (a file after it, of `n` bytes, has `2 n` of fresh allowance).
//!
//! Rules 1 and 2 keep ordinary and hostile images well inside the meter;
//! the meter is what makes the bound hold by construction (many valid tiny
//! files back to back, every one complete, would otherwise list a report
//! entry per few bytes of image).
//!
//! Never: drop a `complete` file below the meter, or decide by timing.

use std::collections::{BTreeMap, HashMap};

use super::extent::{Candidate, Extent};
use super::validators::Status;

/// Shortest `partial` file listed: one sector.
pub const MIN_PARTIAL: u64 = 512;

/// Bytes of reports one listed file costs at most, counted against the
/// bound: its `report.jsonl` line (~350 bytes), `report.xml` element (~500),
/// `journal.jsonl` line (~350) and `hashes.txt` line (~200), measured on
/// entries with three notes; long notes and paths are rare.
pub const ENTRY_COST: u64 = 2048;

/// Reports written once per carving (audit.txt, run.json, the DFXML head
/// and tail), kept out of the bound's share for files.
const FIXED_REPORTS: u64 = 1 << 20;

/// Most bytes of files plus reports a carving of `image_len` bytes writes.
pub fn output_limit(image_len: u64) -> u64 {
    image_len.saturating_mul(2).saturating_add(16 << 20)
}

/// Why a candidate was counted instead of listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldBack {
    /// A `partial` verdict shorter than [`MIN_PARTIAL`].
    HeaderOnly,
    /// The end of an earlier listed file of its type, from a later start.
    Suffix,
    /// The output bound was reached.
    OverBound,
}

/// What the meter allows a listed file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Listed, and written if the carving writes it.
    Full,
    /// Listed; its bytes are not written (the bound would be passed).
    ListOnly,
}

/// Counts per type of candidates held back: header only, suffix, over the
/// bound, and (filled in by the carving, not here) header hits past
/// [`super::density::MAX_PER_SECTOR`] in one sector.
pub type HeldCounts = BTreeMap<String, [u64; 4]>;

/// The carving's output meter and the rules it applies (`Default`: for an
/// empty image; a carving makes its own with [`OutputBound::new`]).
#[derive(Debug, Default)]
pub struct OutputBound {
    /// Bytes of files plus reports spent.
    spent: u64,
    image_len: u64,
    /// The furthest end of a file listed so far: the evidence carved.
    reach: u64,
    /// Per type: the last listed `partial`/`unvalidated` file `(start, end)`.
    last: HashMap<usize, (u64, u64)>,
    held: HeldCounts,
}

impl OutputBound {
    /// The meter of a carving of `image_len` bytes that has already spent
    /// `spent` (a resumed carving) and held back `held`.
    pub fn new(image_len: u64, spent: u64, held: HeldCounts) -> Self {
        OutputBound {
            spent,
            image_len,
            reach: 0,
            last: HashMap::new(),
            held,
        }
    }

    /// Bytes spent so far (for checkpoints).
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// What files and reports may add up to once the carving has listed a
    /// file ending at image offset `end` (or an earlier one ending further).
    fn cap(&self, end: u64) -> u64 {
        output_limit(end.max(self.reach).min(self.image_len)).saturating_sub(FIXED_REPORTS)
    }

    /// Candidates held back so far, per type.
    pub fn held(&self) -> &HeldCounts {
        &self.held
    }

    /// Rules 1 and 2 for the next candidate in the carver's order (`joined`:
    /// its bytes are runs a fragment search or the file system proved, not
    /// one contiguous guess). `Err` when it is counted, not listed.
    pub fn screen(
        &mut self,
        c: &Candidate,
        ext: &Extent,
        joined: bool,
        type_name: &str,
    ) -> Result<(), HeldBack> {
        let guess = matches!(ext.status, Status::Partial | Status::Unvalidated) && !joined;
        let why = if ext.status == Status::Partial && !joined && ext.length < MIN_PARTIAL {
            Some(HeldBack::HeaderOnly)
        } else if guess {
            let end = c.start.saturating_add(ext.length);
            match self.last.get(&c.type_index) {
                Some(&(s, e))
                    if s < c.start
                        && c.start < e
                        && end >= e
                        && !c.start.is_multiple_of(MIN_PARTIAL) =>
                {
                    Some(HeldBack::Suffix)
                }
                _ => {
                    self.last.insert(c.type_index, (c.start, end));
                    None
                }
            }
        } else {
            None
        };
        match why {
            Some(w) => {
                self.count(type_name, w);
                Err(w)
            }
            None => Ok(()),
        }
    }

    /// Rule 3: charges a listed file ending at image offset `end` (`bytes`:
    /// its length when it would be written). `Err` when not even its report
    /// entry fits.
    pub fn admit(
        &mut self,
        end: u64,
        bytes: Option<u64>,
        type_name: &str,
    ) -> Result<Admit, HeldBack> {
        let cap = self.cap(end);
        if self.spent.saturating_add(ENTRY_COST) > cap {
            self.count(type_name, HeldBack::OverBound);
            return Err(HeldBack::OverBound);
        }
        self.spent += ENTRY_COST;
        self.reach = self.reach.max(end);
        match bytes {
            Some(n) if self.spent.saturating_add(n) <= cap => {
                self.spent += n;
                Ok(Admit::Full)
            }
            Some(_) => Ok(Admit::ListOnly),
            None => Ok(Admit::Full),
        }
    }

    fn count(&mut self, type_name: &str, why: HeldBack) {
        let k = match why {
            HeldBack::HeaderOnly => 0,
            HeldBack::Suffix => 1,
            HeldBack::OverBound => 2,
        };
        self.held.entry(type_name.to_string()).or_default()[k] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(start: u64) -> Candidate {
        Candidate {
            type_index: 0,
            start,
            header_len: 5,
        }
    }

    fn ext(status: Status, length: u64) -> Extent {
        Extent {
            status,
            length,
            subtype: None,
            notes: Vec::new(),
            standalone: false,
        }
    }

    #[test]
    fn header_only_partials_and_suffixes_are_counted_not_listed() {
        let mut b = OutputBound::new(1 << 20, 0, HeldCounts::new());
        assert_eq!(
            b.screen(&cand(0), &ext(Status::Partial, 100), false, "pdf"),
            Err(HeldBack::HeaderOnly)
        );
        // A joined partial is proven runs, not a guess.
        assert_eq!(
            b.screen(&cand(0), &ext(Status::Partial, 100), true, "pdf"),
            Ok(())
        );
        assert_eq!(
            b.screen(&cand(0), &ext(Status::Partial, 4096), false, "pdf"),
            Ok(())
        );
        // Same end from inside: a suffix. A different end: a file.
        assert_eq!(
            b.screen(&cand(14), &ext(Status::Partial, 4082), false, "pdf"),
            Err(HeldBack::Suffix)
        );
        // Ending further from inside: the same guess, carried on.
        assert_eq!(
            b.screen(&cand(20), &ext(Status::Unvalidated, 9000), false, "pdf"),
            Err(HeldBack::Suffix)
        );
        // On a sector boundary: where a real file may start under the guess.
        assert_eq!(
            b.screen(&cand(512), &ext(Status::Partial, 3584), false, "pdf"),
            Ok(())
        );
        assert_eq!(
            b.screen(&cand(28), &ext(Status::Partial, 1000), false, "pdf"),
            Ok(())
        );
        // Complete files are never screened.
        assert_eq!(
            b.screen(&cand(30), &ext(Status::Complete, 10), false, "pdf"),
            Ok(())
        );
        assert_eq!(b.held()["pdf"], [1, 2, 0, 0]);
    }

    #[test]
    fn the_meter_lists_without_writing_then_stops_listing() {
        let image = 1 << 20;
        let mut b = OutputBound::new(image, 0, HeldCounts::new());
        let total = output_limit(image) - FIXED_REPORTS;
        assert_eq!(
            b.admit(image, Some(total - 2 * ENTRY_COST), "jpeg"),
            Ok(Admit::Full)
        );
        assert_eq!(b.admit(image, Some(10), "jpeg"), Ok(Admit::ListOnly));
        assert_eq!(b.admit(image, None, "jpeg"), Err(HeldBack::OverBound));
        assert_eq!(b.spent(), total);
        assert_eq!(b.held()["jpeg"], [0, 0, 1, 0]);
        // A resumed carving goes on from what was spent.
        let r = OutputBound::new(image, total - ENTRY_COST, HeldCounts::new());
        assert_eq!(r.spent(), total - ENTRY_COST);
    }

    #[test]
    fn a_hostile_stretch_spends_its_own_allowance_not_the_rest_s() {
        let image = 1 << 30;
        let mut b = OutputBound::new(image, 0, HeldCounts::new());
        // Tiny files every 35 bytes of the first 64 MiB: listed until their
        // own allowance (2 x 64 MiB + 16 MiB, less the fixed share) is spent.
        let mut listed = 0u64;
        let mut end = 0;
        while end < 64 << 20 {
            end += 35;
            listed += u64::from(b.admit(end, Some(35), "gif").is_ok());
        }
        let bound = (output_limit(64 << 20) - FIXED_REPORTS) / ENTRY_COST;
        assert!(
            listed <= bound && listed >= bound / 2,
            "{listed} of {bound}"
        );
        // A 100 MiB file right after it is written whole.
        let start: u64 = 64 << 20;
        assert_eq!(
            b.admit(start + (100 << 20), Some(100 << 20), "mp4"),
            Ok(Admit::Full)
        );
    }
}
