//! NTFS file records: where the file system keeps each live file's
//! clusters, as [`super::extfs`] reads ext inodes.
//!
//! Every in-use base record of `$MFT` whose unnamed `$DATA` attribute is
//! non-resident, starts at VCN 0 and maps the whole of its data size in
//! that one attribute (no attribute list, no sparse run; neither
//! compressed nor encrypted: those clusters do not hold the file's bytes as
//! they are) gives the file's runs in the image, cut to its size; so does a
//! deleted record (NTFS keeps its run list) whose clusters `$Bitmap` still
//! has all free ([`FileMap::deleted`]; a live file starting at the same
//! cluster wins). A file in
//! two or more runs goes to [`FileMap::files`] (the carver validates a
//! header found at its first cluster along those runs:
//! [`crate::carve::fragments::fs_layout_verdict`]); one in a single run to
//! [`FileMap::contiguous`] (its size ends the file:
//! [`crate::carve::fragments::fs_entry_verdict`]). Directories, named or
//! resident streams, and deleted records whose clusters another file has
//! taken since are left out.
//!
//! Bounded like the ext reading: records read up to
//! [`super::names::MAX_VOLUME_BYTES`] of `$MFT` (in batches), at most
//! [`extfs::MAX_FILES`] fragmented and [`extfs::MAX_CONTIGUOUS`]
//! contiguous files kept, [`ntfs::MAX_RUNS`] runs per file, every cluster
//! range-checked against the volume.

use super::extfs::{self, FileMap, FileRuns};
use super::ntfs::{self, DATA, Ntfs};
use super::{Volume, le16, le64, names};
use crate::carve::reader::ByteReader;

/// Attribute flags: compressed, encrypted, sparse.
const NOT_AS_IS: u64 = 0x0001 | 0x4000 | 0x8000;

/// The live files of NTFS volume `vol` by the image offset of their first
/// cluster (`None`: not an NTFS volume whose `$MFT` reads).
pub fn read(r: &dyn ByteReader, vol: &Volume) -> Option<FileMap> {
    let v = Ntfs::open(r, vol)?;
    let mut map = FileMap {
        source: "NTFS file record",
        ..FileMap::default()
    };
    let mut free = FreeCheck {
        bitmap: v.bitmap(r),
        read: 0,
    };
    map.inodes = v.each_record(r, names::MAX_VOLUME_BYTES, |_, rec| {
        let Some((f, deleted)) = file_runs(&v, rec) else {
            return;
        };
        if !deleted || free.all_free(r, &v, &f.runs) {
            add(&mut map, f, deleted);
        }
    });
    Some(map)
}

/// Keeps `f` (a live file over a deleted one starting at the same cluster).
fn add(map: &mut FileMap, f: FileRuns, deleted: bool) {
    let at = f.runs[0].0;
    let known = map.files.contains_key(&at) || map.contiguous.contains_key(&at);
    if known && (deleted || !map.deleted.contains(&at)) {
        return;
    }
    map.files.remove(&at);
    map.contiguous.remove(&at);
    map.deleted.remove(&at);
    if f.runs.len() >= 2 {
        if map.files.len() >= extfs::MAX_FILES {
            return;
        }
        map.files.insert(at, f);
    } else if map.contiguous.len() < extfs::MAX_CONTIGUOUS {
        map.contiguous.insert(at, f.size);
    } else {
        return;
    }
    if deleted {
        map.deleted.insert(at);
    }
}

/// Whether a deleted file's clusters are all still free in `$Bitmap`,
/// within [`MAX_BITMAP_READ`] bytes of it read per volume.
struct FreeCheck {
    bitmap: Option<(Vec<ntfs::Extent>, u64)>,
    read: u64,
}

/// Most bytes of `$Bitmap` read to check deleted files per volume.
const MAX_BITMAP_READ: u64 = 16 << 20;

impl FreeCheck {
    fn all_free(&mut self, r: &dyn ByteReader, v: &Ntfs, runs: &[(u64, u64)]) -> bool {
        let Some((ext, _)) = &self.bitmap else {
            return false;
        };
        for &(at, len) in runs {
            let first = (at - v.start) / v.cluster;
            let last = (at + len - 1 - v.start) / v.cluster;
            let (b0, b1) = (first / 8, last / 8);
            let n = b1 - b0 + 1;
            if self.read + n > MAX_BITMAP_READ {
                return false;
            }
            self.read += n;
            let mut bits = vec![0u8; n as usize];
            if ntfs::read_mapped(r, ext, b0, &mut bits) != bits.len() {
                return false;
            }
            let set = (first..=last).any(|c| bits[(c / 8 - b0) as usize] >> (c % 8) & 1 == 1);
            if set {
                return false;
            }
        }
        true
    }
}

/// The runs of a file's data, cut to its size, and whether its record is
/// deleted (`None`: not such a file, see the module's text).
fn file_runs(v: &Ntfs, rec: &[u8]) -> Option<(FileRuns, bool)> {
    let flags = le16(rec, 0x16);
    // Not a directory, a base record.
    if flags & 2 != 0 || le64(rec, 0x20) & 0xFFFF_FFFF_FFFF != 0 {
        return None;
    }
    let a = ntfs::attrs(rec).find(|a| a.kind == DATA && a.name_len() == 0)?;
    let compression_unit = a.bytes.get(0x22).copied().unwrap_or(0);
    if !a.non_resident()
        || a.first_vcn() != 0
        || le16(a.bytes, 0x0C) & NOT_AS_IS != 0
        || compression_unit != 0
    {
        return None;
    }
    let size = a.data_size();
    let mut left = size;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for run in v.image_runs(a.runs()?)? {
        if left == 0 {
            break;
        }
        let (at, bytes) = run?;
        let bytes = bytes.min(left);
        left -= bytes;
        match runs.last_mut() {
            // (Adjacent runs are one stretch of the image.)
            Some((o, n)) if *o + *n == at => *n += bytes,
            _ => runs.push((at, bytes)),
        }
    }
    (size > 0 && left == 0).then_some((FileRuns { runs, size }, flags & 1 == 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carve::geometry::ntfs::with_boot_sector;

    /// A record `FILE` with one non-resident unnamed `$DATA` attribute of
    /// `size` bytes over the run list `runs` (flags: `flags`).
    fn record(flags: u16, size: u64, runs: &[u8], attr_flags: u16) -> Vec<u8> {
        let mut rec = vec![0u8; 1024];
        rec[..4].copy_from_slice(b"FILE");
        rec[4..6].copy_from_slice(&0x30u16.to_le_bytes()); // update sequence at 0x30
        rec[6..8].copy_from_slice(&3u16.to_le_bytes()); // 1 + 2 strides
        rec[0x14..0x16].copy_from_slice(&0x38u16.to_le_bytes()); // first attribute
        rec[0x16..0x18].copy_from_slice(&flags.to_le_bytes());
        let a = 0x38;
        let len = (0x40 + runs.len() + 1).div_ceil(8) * 8;
        rec[a..a + 4].copy_from_slice(&DATA.to_le_bytes());
        rec[a + 4..a + 8].copy_from_slice(&(len as u32).to_le_bytes());
        rec[a + 8] = 1; // non-resident
        rec[a + 0x0C..a + 0x0E].copy_from_slice(&attr_flags.to_le_bytes());
        rec[a + 0x20..a + 0x22].copy_from_slice(&0x40u16.to_le_bytes());
        rec[a + 0x30..a + 0x38].copy_from_slice(&size.to_le_bytes());
        rec[a + 0x40..a + 0x40 + runs.len()].copy_from_slice(runs);
        let end = a + len;
        rec[end..end + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        rec[0x18..0x1C].copy_from_slice(&((end + 8) as u32).to_le_bytes());
        // The update sequence: number 1, each stride's last two bytes.
        rec[0x30..0x32].copy_from_slice(&1u16.to_le_bytes());
        for s in 0..2 {
            let at = 0x32 + 2 * s;
            let tail = 512 * (s + 1) - 2;
            rec.copy_within(tail..tail + 2, at);
            rec[tail..tail + 2].copy_from_slice(&1u16.to_le_bytes());
        }
        rec
    }

    #[test]
    fn live_files_give_their_runs_cut_to_their_size() {
        // 512-byte clusters; $MFT (record 0) in 16 clusters from cluster 2.
        // Runs: 3 clusters at 100, 2 at 300 (delta +200), 1 at 250 (-50).
        let list = [0x11, 3, 100, 0x21, 2, 200, 0, 0x11, 1, 0xCE, 0];
        let size = 5 * 512 + 10;
        let mut mft = [
            record(1, 8 * 1024, &[0x11, 16, 2, 0], 0),
            record(1, size, &list, 0),
            // Deleted, a directory, compressed, its size past its runs,
            // a run out of the volume: none kept.
            record(0, size, &list, 0),
            record(3, size, &list, 0),
            record(1, size, &list, 1),
            record(1, 7 * 512, &list, 0),
            record(1, 512, &[0x21, 3, 0xFF, 0x7F, 0], 0),
            // One run: a contiguous file.
            record(1, 300, &[0x11, 1, 50, 0], 0),
        ]
        .concat();
        mft.resize(400 * 512, 0);
        let img = with_boot_sector(&mft);
        let g = crate::carve::geometry::detect(&img);
        let vol = &g.volumes[0];
        assert_eq!(vol.fs, "NTFS");
        let map = read(&img, vol).expect("NTFS");
        let c = |n: u64| vol.start + n * 512;
        assert_eq!(map.source, "NTFS file record");
        let f = map.files.get(&c(100)).expect("the fragmented file");
        assert_eq!(
            f.runs,
            vec![(c(100), 3 * 512), (c(300), 2 * 512), (c(250), 10)]
        );
        assert_eq!(f.size, size);
        assert_eq!(map.files.len(), 1, "{map:?}");
        // The contiguous file, and $MFT itself.
        assert_eq!(map.contiguous.get(&c(50)), Some(&300));
        assert_eq!(map.contiguous.get(&c(2)), Some(&(8 * 1024)));
        assert_eq!(map.contiguous.len(), 2, "{map:?}");
        assert_eq!(map.inodes, 8);
    }

    /// `fuzz/seeds/ntfs_synthetic.py`'s volume: 512-byte clusters,
    /// `$Bitmap` at cluster 26, /a.jpg (live, 1000 bytes) at 27..=28,
    /// /D/b.png (deleted, its cluster free) at 29.
    #[test]
    fn a_deleted_record_counts_while_its_clusters_are_free() {
        let synthetic: &[u8] = include_bytes!("../../../fuzz/seeds/ntfs_synthetic.bin");
        let mut img = with_boot_sector(synthetic);
        let cl = |n: u64| n * 512;
        let g = crate::carve::geometry::detect(&img);
        let map = read(&img, &g.volumes[0]).expect("NTFS");
        assert_eq!(map.contiguous.get(&cl(27)), Some(&1000));
        assert!(!map.deleted.contains(&cl(27)));
        assert!(map.contiguous.contains_key(&cl(29)), "{map:?}");
        assert!(map.deleted.contains(&cl(29)));
        // Cluster 29 taken again ($Bitmap's bit set): the record says no
        // more where that file lies.
        img[26 * 512 + 29 / 8] |= 1 << (29 % 8);
        let map = read(&img, &g.volumes[0]).expect("NTFS");
        assert!(!map.contiguous.contains_key(&cl(29)), "{map:?}");
        assert!(map.deleted.is_empty());
        assert!(map.contiguous.contains_key(&cl(27)));
    }

    #[test]
    fn a_live_file_wins_over_a_deleted_one_at_the_same_cluster() {
        let f = |runs: Vec<(u64, u64)>| FileRuns {
            size: runs.iter().map(|r| r.1).sum(),
            runs,
        };
        let mut m = FileMap::default();
        add(&mut m, f(vec![(4096, 100), (0, 10)]), true);
        assert!(m.files.contains_key(&4096) && m.deleted.contains(&4096));
        add(&mut m, f(vec![(4096, 50)]), true);
        assert_eq!(m.files[&4096].size, 110);
        add(&mut m, f(vec![(4096, 70)]), false);
        assert!(!m.files.contains_key(&4096) && m.deleted.is_empty());
        assert_eq!(m.contiguous.get(&4096), Some(&70));
        add(&mut m, f(vec![(4096, 90), (0, 1)]), true);
        add(&mut m, f(vec![(4096, 90), (0, 1)]), false);
        assert_eq!(m.contiguous.get(&4096), Some(&70));
        assert!(m.files.is_empty() && m.deleted.is_empty());
    }
}
