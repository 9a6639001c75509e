//! How many header hits of one type one sector may bring as candidates.
//!
//! Files start where file systems put them: at cluster (hence sector)
//! boundaries. Objects inside files (an EXIF thumbnail, an archive's
//! members) are found through their container, and they too are a few per
//! sector at most. A 512-byte sector holding more than [`MAX_PER_SECTOR`]
//! header hits of one type is data made of headers (a dense region: swap,
//! caches, a hostile image), not that many files: the hits past the first
//! few are counted per type in `audit.txt`, not validated. PhotoRec goes
//! further and looks at sector starts only.
//!
//! This keeps the carving's per-candidate work (validation, ordering,
//! bookkeeping: about a microsecond each) in proportion to the image:
//! headers back to back every 3 bytes would otherwise be 170 candidates
//! per sector. The decision depends on the match stream alone (ascending
//! offsets), so it is the same with every engine and thread count.

/// Sector size the rule counts in.
pub const SECTOR: u64 = 512;

/// Header hits of one type validated per sector at most.
pub const MAX_PER_SECTOR: u32 = 4;

/// The per-type count of header hits in the sector the match stream is in.
#[derive(Debug, Default)]
pub struct Density {
    /// Per type: (sector, hits seen in it).
    last: Vec<(u64, u32)>,
    /// Per type: hits not validated.
    skipped: Vec<u64>,
}

impl Density {
    pub fn new(types: usize) -> Self {
        Density {
            last: vec![(u64::MAX, 0); types],
            skipped: vec![0; types],
        }
    }

    /// True when the header hit of type `t` starting at `start` is a
    /// candidate; false when its sector already brought
    /// [`MAX_PER_SECTOR`] of its type (it is counted).
    pub fn admit(&mut self, t: usize, start: u64) -> bool {
        let (Some(last), Some(skipped)) = (self.last.get_mut(t), self.skipped.get_mut(t)) else {
            return true;
        };
        let sector = start / SECTOR;
        if last.0 != sector {
            *last = (sector, 0);
        }
        last.1 += 1;
        if last.1 > MAX_PER_SECTOR {
            *skipped += 1;
            return false;
        }
        true
    }

    /// Hits not validated, per type index.
    pub fn skipped(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.skipped
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, n)| n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_hits_per_sector_and_type_are_candidates() {
        let mut d = Density::new(2);
        let admitted: Vec<bool> = (0..10).map(|i| d.admit(0, i * 3)).collect();
        assert_eq!(
            admitted.iter().filter(|&&a| a).count(),
            MAX_PER_SECTOR as usize
        );
        assert!(admitted[..MAX_PER_SECTOR as usize].iter().all(|&a| a));
        // Another type, and the next sector, count afresh.
        assert!(d.admit(1, 9));
        assert!(d.admit(0, SECTOR));
        assert_eq!(
            d.skipped().collect::<Vec<_>>(),
            vec![(0, 10 - MAX_PER_SECTOR as u64)]
        );
        // A type index the catalogue lacks is let through.
        assert!(d.admit(7, 0));
    }
}
