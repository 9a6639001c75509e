//! ext2/3/4 original names: the directory tree from the root inode (2) down.
//!
//! The inode tables are read once ([`extfs::each_inode`]): for each regular
//! file in use (links > 0, not inline data) the image offset of its first
//! data block, its size and times (mtime, atime, and crtime where the inode
//! is large enough to hold it; seconds since 1970 with the `_extra` fields'
//! epoch bits); for each directory its inode. Directories are then read
//! breadth first from the root along their block maps or extent trees as
//! `ext4_dir_entry_2` records (inode, `rec_len` ≥ 8, 4-aligned and inside
//! the block, name length, file type, name); an htree's index blocks look
//! like one inode-0 record spanning the block and are skipped like every
//! inode-0 record (and `.`, `..`). A file is named by the first live
//! directory entry found for its inode; deleted ext names are not read
//! (ext4 zeroes a deleted inode's extents).
//!
//! Bounded like the FAT walk: [`MAX_DIRS`] directories (each visited once),
//! [`MAX_ENTRIES`] files, [`MAX_DIR_BYTES`] of one directory and
//! [`MAX_VOLUME_BYTES`] of all directories read per volume, and the
//! extent-tree and indirect-block reads of [`extfs::MAX_META_READS`].

use std::collections::{HashMap, HashSet, VecDeque};

use super::super::extfs::{self, Super};
use super::super::{Volume, le16, le32};
use super::{
    Dir, Entry, ExtMeta, MAX_DIR_BYTES, MAX_DIRS, MAX_ENTRIES, MAX_VOLUME_BYTES, Meta, VolNames,
    clean,
};
use crate::carve::reader::ByteReader;

/// The root directory's inode.
const ROOT: u64 = 2;

/// What the inode tables say: regular files by inode (first block's image
/// offset, size and times) and directories' inodes.
#[derive(Default)]
struct Inodes {
    files: HashMap<u64, (u64, ExtMeta)>,
    dirs: HashMap<u64, Vec<u8>>,
}

/// Reads `vol`'s directory tree (`None`: not an ext2/3/4 volume whose
/// superblock is plausible).
pub(super) fn walk(r: &dyn ByteReader, vol: &Volume) -> Option<VolNames> {
    let s = extfs::superblock(r, vol)?;
    let inodes = read_inodes(r, vol, &s);
    let mut names = VolNames::default();
    names.dirs.push(Dir {
        parent: 0,
        name: String::new(),
        deleted: false,
    });
    let mut queue = VecDeque::from([(0u32, ROOT)]);
    let mut seen = HashSet::from([ROOT]);
    let (mut read, mut reads) = (0u64, 0u64);
    while let Some((d, ino)) = queue.pop_front() {
        let Some(inode) = inodes.dirs.get(&ino) else {
            continue;
        };
        let size = le32(inode, 4);
        if read + size > MAX_VOLUME_BYTES {
            break;
        }
        let Some(runs) = extfs::image_runs(r, vol, &s, inode, size, &mut reads) else {
            continue;
        };
        read += size;
        let mut buf = Vec::new();
        for (at, len) in runs {
            let mut b = vec![0u8; len as usize];
            let got = r.read_at(at, &mut b);
            b.truncate(got);
            buf.extend_from_slice(&b);
        }
        for block in buf.chunks(s.bs as usize) {
            records(block, |child, ft, name| {
                let name = clean(&String::from_utf8_lossy(name));
                let is_dir = ft == 2 || (ft == 0 && inodes.dirs.contains_key(&child));
                if is_dir {
                    if names.dirs.len() < MAX_DIRS && seen.insert(child) {
                        queue.push_back((names.dirs.len() as u32, child));
                        names.dirs.push(Dir {
                            parent: d,
                            name,
                            deleted: false,
                        });
                    }
                } else if matches!(ft, 0 | 1)
                    && let Some(&(at, meta)) = inodes.files.get(&child)
                    && names.files.len() < MAX_ENTRIES
                {
                    names.files.entry(at).or_insert(Entry {
                        dir: d,
                        name,
                        meta: Meta::Ext(meta),
                        deleted: false,
                    });
                }
            });
        }
    }
    Some(names)
}

/// The regular files and directories in use in the inode tables.
fn read_inodes(r: &dyn ByteReader, vol: &Volume, s: &Super) -> Inodes {
    let mut out = Inodes::default();
    let mut reads = 0u64;
    extfs::each_inode(r, vol, s, |ino, inode| {
        let mode = le16(inode, 0) & 0xF000;
        // Unused, or inline data (no blocks to point at).
        if le16(inode, 0x1A) == 0 || le32(inode, 0x20) & 0x1000_0000 != 0 {
            return true;
        }
        if mode == 0x4000 {
            let size = le32(inode, 4);
            if size > 0 && size <= MAX_DIR_BYTES && out.dirs.len() < MAX_DIRS {
                out.dirs.insert(ino, inode.to_vec());
            }
        } else if mode == 0x8000 && out.files.len() < MAX_ENTRIES {
            let size = le32(inode, 0x04) | (le32(inode, 0x6C) << 32);
            let first = extfs::image_runs(r, vol, s, inode, size.min(s.bs), &mut reads);
            if let Some(&(at, _)) = first.as_deref().and_then(|f| f.first()) {
                out.files.insert(ino, (at, meta(inode, size)));
            }
        }
        true
    });
    out
}

/// An inode's size and times: `i_mtime` (0x10), `i_atime` (0x08) and, in a
/// large inode whose extra part holds it, `i_crtime` (0x90); each widened by
/// its `_extra` field's epoch bits where present. Zero: none.
fn meta(inode: &[u8], size: u64) -> ExtMeta {
    let extra = if inode.len() > 128 {
        le16(inode, 0x80) as usize
    } else {
        0
    };
    let has = |off: usize| off >= 0x80 && 0x80 + extra >= off + 4 && inode.len() >= off + 4;
    let time = |at: usize, ext: usize| -> Option<i64> {
        if at >= 0x80 && !has(at) {
            return None;
        }
        let mut t = i64::from(le32(inode, at) as u32 as i32);
        if has(ext) {
            t += ((le32(inode, ext) & 3) as i64) << 32;
        }
        (t != 0).then_some(t)
    };
    ExtMeta {
        size,
        mtime: time(0x10, 0x88),
        atime: time(0x08, 0x8C),
        crtime: time(0x90, 0x94),
    }
}

/// The `ext4_dir_entry_2` records of one directory block: `f(inode, file
/// type, name)` for each with an inode, except `.` and `..`. A record
/// whose length is under 8, not 4-aligned or past the block ends it.
fn records(b: &[u8], mut f: impl FnMut(u64, u8, &[u8])) {
    let mut at = 0usize;
    while at + 8 <= b.len() {
        let ino = le32(b, at);
        let rec = le16(b, at + 4) as usize;
        let (len, ft) = (usize::from(b[at + 6]), b[at + 7]);
        if rec < 8 || !rec.is_multiple_of(4) || rec > b.len() - at {
            break;
        }
        let name = &b[at + 8..at + 8 + len.min(rec - 8)];
        if ino != 0 && len > 0 && 8 + len <= rec && name != b"." && name != b".." {
            f(ino, ft, name);
        }
        at += rec;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_records() {
        let mut b = vec![0u8; 72];
        let mut put = |at: usize, ino: u32, rec: u16, ft: u8, name: &[u8]| {
            b[at..at + 4].copy_from_slice(&ino.to_le_bytes());
            b[at + 4..at + 6].copy_from_slice(&rec.to_le_bytes());
            b[at + 6] = name.len() as u8;
            b[at + 7] = ft;
            b[at + 8..at + 8 + name.len()].copy_from_slice(name);
        };
        put(0, 2, 12, 2, b".");
        put(12, 2, 12, 2, b"..");
        put(24, 0, 12, 1, b"gone");
        put(36, 12, 20, 1, b"a.jpg");
        put(56, 13, 200, 1, b"x");
        let mut got = Vec::new();
        records(&b, |i, ft, n| got.push((i, ft, n.to_vec())));
        assert_eq!(got, vec![(12, 1, b"a.jpg".to_vec())]);
    }

    /// A 128 KiB ext4 volume (mke2fs -d, 1 KiB blocks, no journal):
    /// `/DCIM/Sub/IMG_0001.JPG`, `/short.txt`, `/docs/note_with_a_longer_name_N.txt`.
    #[test]
    fn ext4_tree() {
        use super::super::NameMaps;
        let img: &[u8] = include_bytes!("../../../../fuzz/corpus/fs_names/ext4-dirs");
        let r = img.to_vec();
        let g = super::super::super::detect(&r);
        assert_eq!(g.volumes.len(), 1);
        let mut m = NameMaps::new(&g);
        let name = |m: &mut NameMaps, at| m.lookup(&r, at).map(|n| (n.path, n.deleted, n.size));
        let s = |p: &str| p.to_string();
        assert_eq!(
            name(&mut m, 20 * 1024),
            Some((s("/DCIM/Sub/IMG_0001.JPG"), false, 3000))
        );
        assert_eq!(name(&mut m, 61 * 1024), Some((s("/short.txt"), false, 3)));
        assert_eq!(
            name(&mut m, 58 * 1024).map(|n| n.0),
            Some(s("/docs/note_with_a_longer_name_7.txt"))
        );
        assert_eq!(name(&mut m, 21 * 1024), None);
        assert_eq!(name(&mut m, 28 * 1024), None);
        let n = m.lookup(&r, 61 * 1024).expect("short.txt");
        assert!(n.modified.is_some_and(|t| t.ends_with('Z')));
    }

    #[test]
    fn inode_times() {
        let mut i = vec![0u8; 256];
        i[0x10..0x14].copy_from_slice(&1_600_000_000u32.to_le_bytes());
        i[0x80..0x82].copy_from_slice(&32u16.to_le_bytes());
        i[0x90..0x94].copy_from_slice(&1_500_000_000u32.to_le_bytes());
        let m = meta(&i, 5);
        assert_eq!(m.mtime, Some(1_600_000_000));
        assert_eq!(m.atime, None);
        assert_eq!(m.crtime, Some(1_500_000_000));
        assert_eq!(
            super::super::rfc3339_secs(1_600_000_000),
            "2020-09-13T12:26:40Z"
        );
        assert_eq!(meta(&i[..128], 5).crtime, None);
    }
}
