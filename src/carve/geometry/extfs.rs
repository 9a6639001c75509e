//! ext2/3/4 inode tables: where the file system keeps each file's blocks.
//!
//! A carver starts from a header and must guess where a fragmented file
//! goes on. On ext2/3/4 the inode of every file that still has one says it:
//! block maps (12 direct pointers, then indirect, double- and
//! triple-indirect blocks) on ext2/3, extent trees on ext4. This module
//! reads every inode table once per carving and keeps, for each regular
//! file whose blocks are not contiguous, its runs in the image and its size,
//! keyed by the image offset of its first block. The carver then validates a
//! header found there along those runs ([`crate::carve::fragments::fs_layout_verdict`]):
//! the validator must call the file complete with exactly the inode's size.
//!
//! Deleted files keep their inode only as far as the file system left it:
//! Linux clears an ext2 inode's size and pointers and an ext4 inode's
//! extents on deletion, so in practice this covers the files still
//! allocated (and ext2 volumes deleted by older kernels or other drivers).
//!
//! Bounded whatever the image holds: at most [`MAX_INODES`] inodes read (in
//! pieces of at most 1 MiB), [`MAX_FILES`] files kept, [`MAX_RUNS`] runs and
//! [`MAX_BLOCKS`] blocks per file, [`MAX_NODES`] extent-tree nodes per file,
//! [`MAX_META_READS`] indirect blocks and tree nodes per volume;
//! every block number must lie inside the volume. A field out of range ends
//! that file (or the whole reading, for the superblock and group descriptors).

use std::collections::BTreeMap;

use super::Volume;
use crate::carve::reader::{ByteReader, le16, le32};

/// Most inodes read per volume.
pub const MAX_INODES: u64 = 1 << 22;
/// Most fragmented files kept per volume.
pub const MAX_FILES: usize = 1 << 16;
/// Most contiguous files' sizes kept per volume.
pub const MAX_CONTIGUOUS: usize = 1 << 18;
/// Most runs per file.
pub const MAX_RUNS: usize = 4096;
/// Most blocks per file (4 GiB of 4 KiB blocks).
pub const MAX_BLOCKS: u64 = 1 << 20;
/// Most extent-tree nodes read per file.
pub const MAX_NODES: usize = 1024;
/// Bytes of inode table read at a time.
const PIECE: u64 = 1 << 20;
/// Most indirect blocks and extent-tree nodes read per volume (256 MiB of
/// 4 KiB blocks): past it, the reading stops (the files found so far stay).
pub const MAX_META_READS: u64 = 1 << 16;

/// One file's layout: its runs in the image `(offset, length)`, adding up to
/// its size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRuns {
    pub runs: Vec<(u64, u64)>,
    pub size: u64,
}

/// The fragmented files of one ext2/3/4 volume, by image offset of their
/// first block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileMap {
    /// What lists the files, for the verdicts' notes ("ext inode", "NTFS
    /// file record").
    pub source: &'static str,
    pub files: BTreeMap<u64, FileRuns>,
    /// The size of every regular file stored in one run, by the image
    /// offset of its first block (at most [`MAX_CONTIGUOUS`]).
    pub contiguous: BTreeMap<u64, u64>,
    /// Inodes read, for the audit.
    pub inodes: u64,
    /// The files (in `files` or `contiguous`) listed by a deleted entry
    /// whose clusters are all still free (NTFS records), by first cluster.
    pub deleted: std::collections::BTreeSet<u64>,
}

/// What the superblock says.
pub(super) struct Super {
    pub(super) bs: u64,
    pub(super) blocks: u64,
    pub(super) first_data_block: u64,
    pub(super) blocks_per_group: u64,
    pub(super) inodes_per_group: u64,
    pub(super) inode_size: u64,
    pub(super) desc_size: u64,
    pub(super) bit64: bool,
}

/// The superblock of the ext2/3/4 volume `vol`, when plausible.
pub(super) fn superblock(r: &dyn ByteReader, vol: &Volume) -> Option<Super> {
    let mut sb = [0u8; 1024];
    if r.read_at(vol.start.checked_add(1024)?, &mut sb) != sb.len() || le16(&sb, 0x38) != 0xEF53 {
        return None;
    }
    let log = le32(&sb, 0x18);
    if log > 6 {
        return None;
    }
    let bs = 1024u64 << log;
    let incompat = le32(&sb, 0x60);
    let bit64 = incompat & 0x80 != 0;
    let blocks = le32(&sb, 0x04) | if bit64 { le32(&sb, 0x150) << 32 } else { 0 };
    let rev = le32(&sb, 0x4C);
    let inode_size = if rev == 0 { 128 } else { le16(&sb, 0x58) };
    let desc_size = if bit64 { le16(&sb, 0xFE).max(32) } else { 32 };
    let s = Super {
        bs,
        blocks,
        first_data_block: le32(&sb, 0x14),
        blocks_per_group: le32(&sb, 0x20),
        inodes_per_group: le32(&sb, 0x28),
        inode_size,
        desc_size,
        bit64,
    };
    let sane = s.blocks_per_group > 0
        && s.inodes_per_group > 0
        && (128..=bs).contains(&s.inode_size)
        && s.inode_size.is_power_of_two()
        && s.desc_size <= 1024
        && s.blocks > 0
        && s.blocks
            .checked_mul(bs)
            .is_some_and(|b| b <= vol.end - vol.start);
    sane.then_some(s)
}

/// Reads every inode table of the ext2/3/4 volume `vol`; `None` when it is
/// not one or its superblock is implausible.
pub fn read(r: &dyn ByteReader, vol: &Volume) -> Option<FileMap> {
    if !matches!(vol.fs, "ext2/3" | "ext4") {
        return None;
    }
    let s = superblock(r, vol)?;
    let mut files = BTreeMap::new();
    let mut contiguous = BTreeMap::new();
    let mut reads = 0u64;
    let inodes = each_inode(r, vol, &s, |_, inode| {
        if files.len() >= MAX_FILES || reads > MAX_META_READS {
            return false;
        }
        match file_runs(r, vol, &s, inode, &mut reads) {
            Some(f) if f.runs.len() >= 2 => {
                files.entry(f.runs[0].0).or_insert(f);
            }
            Some(f) if contiguous.len() < MAX_CONTIGUOUS && f.size > 0 => {
                contiguous.entry(f.runs[0].0).or_insert(f.size);
            }
            _ => {}
        }
        true
    });
    Some(FileMap {
        source: "ext inode",
        files,
        contiguous,
        inodes,
        deleted: Default::default(),
    })
}

/// Calls `f(inode number, inode)` for every inode of the volume's tables (at
/// most [`MAX_INODES`], read in pieces of at most 1 MiB) until it returns
/// `false`; returns the number of inodes visited.
pub(super) fn each_inode(
    r: &dyn ByteReader,
    vol: &Volume,
    s: &Super,
    mut f: impl FnMut(u64, &[u8]) -> bool,
) -> u64 {
    let groups = s.blocks.div_ceil(s.blocks_per_group);
    let desc_at = vol.start + (s.first_data_block + 1) * s.bs;
    let mut count = 0u64;
    let mut table = Vec::new();
    let mut desc = vec![0u8; s.desc_size as usize];
    for g in 0..groups {
        if count >= MAX_INODES {
            break;
        }
        if r.read_at(desc_at + g * s.desc_size, &mut desc) != desc.len() {
            break;
        }
        let mut itable = le32(&desc, 8);
        if s.bit64 && s.desc_size >= 64 {
            itable |= le32(&desc, 0x28) << 32;
        }
        if itable == 0 || itable >= s.blocks {
            continue;
        }
        let bytes = s.inodes_per_group * s.inode_size;
        let mut done = 0;
        while done < bytes && count < MAX_INODES {
            let n = (bytes - done).min(PIECE);
            table.resize(n as usize, 0);
            let at = vol.start + itable * s.bs + done;
            if r.read_at(at, &mut table) != table.len() {
                break;
            }
            let first = g * s.inodes_per_group + done / s.inode_size + 1;
            for (i, inode) in table.chunks_exact(s.inode_size as usize).enumerate() {
                count += 1;
                if !f(first + i as u64, inode) {
                    break;
                }
            }
            done += n;
        }
    }
    count
}

/// The image runs `(offset, length)` of the first `size` bytes of an
/// inode's data (block map or extent tree), when every block is found;
/// metadata reads counted in `reads` against [`MAX_META_READS`].
pub(super) fn image_runs(
    r: &dyn ByteReader,
    vol: &Volume,
    s: &Super,
    inode: &[u8],
    size: u64,
    reads: &mut u64,
) -> Option<Vec<(u64, u64)>> {
    let nblocks = size.div_ceil(s.bs);
    if size == 0 || nblocks > MAX_BLOCKS {
        return None;
    }
    let iblock = inode.get(0x28..0x28 + 60)?;
    let mut blocks = Blocks::new(s, nblocks, reads);
    if le32(inode, 0x20) & 0x80000 != 0 {
        extents(r, vol, s, iblock, &mut blocks, 0, &mut 0)?;
    } else {
        block_map(r, vol, s, iblock, &mut blocks)?;
    }
    blocks.finish(vol, s, size)
}

/// The runs of a regular file's inode.
fn file_runs(
    r: &dyn ByteReader,
    vol: &Volume,
    s: &Super,
    inode: &[u8],
    reads: &mut u64,
) -> Option<FileRuns> {
    if le16(inode, 0) & 0xF000 != 0x8000 {
        return None;
    }
    let size = le32(inode, 0x04) | (le32(inode, 0x6C) << 32);
    let runs = image_runs(r, vol, s, inode, size, reads)?;
    (!runs.is_empty()).then_some(FileRuns { runs, size })
}

/// A file's blocks in logical order, merged into runs of physical blocks.
struct Blocks<'m> {
    want: u64,
    got: u64,
    max_block: u64,
    /// Metadata blocks read in the volume so far.
    reads: &'m mut u64,
    /// (first physical block, count)
    runs: Vec<(u64, u64)>,
}

impl<'m> Blocks<'m> {
    fn new(s: &Super, want: u64, reads: &'m mut u64) -> Self {
        Blocks {
            want,
            got: 0,
            max_block: s.blocks,
            reads,
            runs: Vec::new(),
        }
    }

    /// Counts one metadata block read; `None` past the volume's budget.
    fn read_meta(&mut self) -> Option<()> {
        *self.reads += 1;
        (*self.reads <= MAX_META_READS).then_some(())
    }

    fn full(&self) -> bool {
        self.got >= self.want
    }

    /// Appends `count` physical blocks from `first`; `None` when out of the
    /// volume or past the run limit.
    fn push(&mut self, first: u64, count: u64) -> Option<()> {
        let count = count.min(self.want - self.got);
        if count == 0 {
            return Some(());
        }
        if first == 0 || first.checked_add(count)? > self.max_block {
            return None;
        }
        match self.runs.last_mut() {
            Some((f, n)) if *f + *n == first => *n += count,
            _ => {
                if self.runs.len() >= MAX_RUNS {
                    return None;
                }
                self.runs.push((first, count));
            }
        }
        self.got += count;
        Some(())
    }

    /// Image runs of exactly `size` bytes, when every block was found.
    fn finish(self, vol: &Volume, s: &Super, size: u64) -> Option<Vec<(u64, u64)>> {
        if !self.full() {
            return None;
        }
        let mut left = size;
        let runs = self
            .runs
            .iter()
            .map(|&(f, n)| {
                let len = (n * s.bs).min(left);
                left -= len;
                (vol.start + f * s.bs, len)
            })
            .collect();
        Some(runs)
    }
}

/// ext2/3: 12 direct pointers, then the indirect, double- and
/// triple-indirect blocks. A zero pointer (a hole) ends the file: `None`.
fn block_map(
    r: &dyn ByteReader,
    vol: &Volume,
    s: &Super,
    iblock: &[u8],
    b: &mut Blocks,
) -> Option<()> {
    for i in 0..12 {
        if b.full() {
            return Some(());
        }
        b.push(le32(iblock, 4 * i), 1)?;
    }
    for (i, depth) in [(12, 1), (13, 2), (14, 3)] {
        if b.full() {
            return Some(());
        }
        indirect(r, vol, s, le32(iblock, 4 * i), depth, b)?;
    }
    b.full().then_some(())
}

fn indirect(
    r: &dyn ByteReader,
    vol: &Volume,
    s: &Super,
    block: u64,
    depth: u32,
    b: &mut Blocks,
) -> Option<()> {
    let buf = meta_block(r, vol, s, block, b)?;
    for i in 0..(s.bs / 4) as usize {
        if b.full() {
            break;
        }
        let p = le32(&buf, 4 * i);
        if depth == 1 {
            b.push(p, 1)?;
        } else {
            indirect(r, vol, s, p, depth - 1, b)?;
        }
    }
    Some(())
}

/// Metadata block `block` of the volume (an indirect block, an extent-tree
/// node), counted against the volume's budget; `None` when out of the
/// volume, over budget or unreadable.
fn meta_block(
    r: &dyn ByteReader,
    vol: &Volume,
    s: &Super,
    block: u64,
    b: &mut Blocks,
) -> Option<Vec<u8>> {
    if block == 0 || block >= s.blocks {
        return None;
    }
    b.read_meta()?;
    let mut buf = vec![0u8; s.bs as usize];
    (r.read_at(vol.start + block * s.bs, &mut buf) == buf.len()).then_some(buf)
}

/// ext4 extent tree: a header (`F30A`, entries, max, depth) and 12-byte
/// entries; leaves map logical to physical blocks, index nodes point at
/// child nodes. The leaves must cover the file's blocks in order, from
/// logical block 0, with no hole and no uninitialised extent.
fn extents(
    r: &dyn ByteReader,
    vol: &Volume,
    s: &Super,
    node: &[u8],
    b: &mut Blocks,
    level: u32,
    nodes: &mut usize,
) -> Option<()> {
    *nodes += 1;
    if *nodes > MAX_NODES || level > 5 || le16(node, 0) != 0xF30A {
        return None;
    }
    let entries = le16(node, 2) as usize;
    let depth = le16(node, 6);
    if 12 + 12 * entries > node.len() {
        return None;
    }
    for e in 0..entries {
        if b.full() {
            break;
        }
        let x = 12 + 12 * e;
        if depth == 0 {
            let logical = le32(node, x);
            let len = le16(node, x + 4);
            let start = (le16(node, x + 6) << 32) | le32(node, x + 8);
            if logical != b.got || len == 0 || len > 32768 {
                return None;
            }
            b.push(start, len)?;
        } else {
            let child = (le16(node, x + 8) << 32) | le32(node, x + 4);
            let buf = meta_block(r, vol, s, child, b)?;
            extents(r, vol, s, &buf, b, level + 1, nodes)?;
        }
    }
    Some(())
}
