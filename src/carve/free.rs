//! `--free-space-only`: header candidates whose first cluster the file
//! system still allocates are dropped before validation, so that neither
//! they nor the files nested in them are validated, searched or written.
//!
//! Kept: candidates in clusters the allocation map says are free (deleted
//! files, whose chains the file system may still hold, and unallocated
//! space), space outside every volume of a partitioned image, and every
//! candidate whose allocation is not known (no evidence is lost silently:
//! the audit counts them). An image without any volume whose allocation
//! map can be read is carved whole, with a warning.

use super::geometry::{
    Geometry,
    alloc::{Alloc, AllocMaps},
};
use super::reader::ByteReader;

/// What the free-space filter did, for the audit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FreeSpaceCounts {
    /// Some volume has an allocation map (else the whole image was carved).
    pub mapped: bool,
    /// Header candidates dropped: their first cluster allocated.
    pub skipped: u64,
    /// Header candidates kept because their allocation is not known.
    pub unknown: u64,
    /// Bytes the volumes' allocation maps allocate (`None`: not read in full).
    pub allocated_bytes: Option<u64>,
}

/// The warning (and audit line) when no volume has an allocation map.
pub const NO_MAP: &str =
    "--free-space-only: no file system with an allocation map found; the whole image is carved";

/// The filter, run on the validation stage's forwarder thread.
pub(super) struct FreeSpaceFilter {
    maps: AllocMaps,
    counts: FreeSpaceCounts,
}

impl FreeSpaceFilter {
    pub(super) fn new(geo: &Geometry, r: &dyn ByteReader) -> Self {
        let mut maps = AllocMaps::new(geo);
        let mapped = maps.any_map(r);
        FreeSpaceFilter {
            maps,
            counts: FreeSpaceCounts {
                mapped,
                ..FreeSpaceCounts::default()
            },
        }
    }

    /// Whether the candidate starting at `start` is carved.
    pub(super) fn keep(&mut self, r: &dyn ByteReader, start: u64) -> bool {
        if !self.counts.mapped {
            return true;
        }
        match self.maps.status(r, [(start, 1)]) {
            Some(Alloc::Allocated) => {
                self.counts.skipped += 1;
                false
            }
            Some(_) => true,
            None => {
                self.counts.unknown += 1;
                true
            }
        }
    }

    /// The counts, with the allocated bytes (the maps read in full, within
    /// their budget).
    pub(super) fn finish(mut self, r: &dyn ByteReader) -> FreeSpaceCounts {
        if self.counts.mapped {
            self.counts.allocated_bytes = self.maps.allocated_bytes(r);
        }
        self.counts
    }
}

/// The audit's line.
pub fn audit_line(c: &FreeSpaceCounts, image_len: u64) -> String {
    if !c.mapped {
        return format!(
            "free space only: {}",
            NO_MAP.trim_start_matches("--free-space-only: ")
        );
    }
    let mut s = format!(
        "free space only: {} header hits in allocated clusters skipped",
        c.skipped
    );
    if let Some(m) = c.allocated_bytes {
        let pct = if image_len > 0 {
            m as f64 * 100.0 / image_len as f64
        } else {
            0.0
        };
        s.push_str(&format!(", {m} bytes of the image allocated ({pct:.1}%)"));
    }
    s.push_str(&format!(
        "; {} header hits kept because their allocation is not known",
        c.unknown
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_line() {
        let c = FreeSpaceCounts {
            mapped: true,
            skipped: 7,
            unknown: 2,
            allocated_bytes: Some(512),
        };
        assert_eq!(
            audit_line(&c, 1024),
            "free space only: 7 header hits in allocated clusters skipped, 512 bytes of the image allocated (50.0%); 2 header hits kept because their allocation is not known"
        );
        assert_eq!(
            audit_line(&FreeSpaceCounts::default(), 1024),
            "free space only: no file system with an allocation map found; the whole image is carved"
        );
    }
}
