//! Where the file systems of an image keep their clusters.
//!
//! A file system stores files in clusters (blocks) of one size, at positions
//! a multiple of that size from its data area. The fragment search
//! ([`super::fragments`]) and the rule that a file standing alone inside a
//! container starts on a cluster boundary both need that size. Guessed from
//! the starts of the files carved so far, it is 512 bytes until a few files
//! are known, and a 512-byte search near the start of the image tries eight
//! times the candidates of a 4 KiB one. The file system itself says it:
//!
//! * ext2/3/4 (superblock at 1024: magic `EF53`, block size `1024 << log`;
//!   ext2/3 when the extents feature is off: files mapped by block maps),
//!   HFS+ (volume header at 1024), XFS (`XFSB`), btrfs (superblock at
//!   64 KiB): blocks counted from the start of the volume;
//! * FAT12/16/32 (boot sector: bytes per sector × sectors per cluster; the
//!   data area after the reserved sectors, the FATs and the FAT12/16 root
//!   directory, which need not be a cluster multiple), exFAT (cluster heap
//!   offset) and NTFS;
//! * volumes behind an MBR (four primary entries, and the logical
//!   partitions of an extended one: its chain of extended boot records,
//!   at most [`MAX_LOGICAL`], each inside the extended partition and read
//!   once, so a chain that loops ends) or a GPT (at most
//!   [`MAX_GPT_ENTRIES`] entries, 512-byte sectors).
//!
//! Only the first sectors of each volume are read (a bounded number of small
//! reads whatever the image). Every field is range-checked: a cluster size is
//! a power of two from 512 bytes to 32 MiB, a volume lies inside the image;
//! anything else is not a file system and the estimate is used.

pub mod alloc;
pub mod extfs;
pub mod names;
pub mod ntfs;
pub mod ntfs_files;

use crate::carve::reader::{ByteReader, le16, le32};

/// Most GPT partition entries read.
pub const MAX_GPT_ENTRIES: u64 = 128;
/// Most extended boot records read from one extended partition.
pub const MAX_LOGICAL: usize = 128;
const SECTOR: u64 = 512;
const MIN_CLUSTER: u64 = 512;
const MAX_CLUSTER: u64 = 32 << 20;

/// One volume: its clusters are `cluster` bytes at offsets `≡ phase (mod cluster)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Volume {
    /// Where the volume starts and ends in the image.
    pub start: u64,
    pub end: u64,
    pub cluster: u64,
    /// Absolute offset of any cluster, modulo `cluster`.
    pub phase: u64,
    /// The file system, as the report names it.
    pub fs: &'static str,
    /// FAT16/FAT32: where the allocation table lies.
    pub fat: Option<Fat>,
    /// ext2/3/4 and NTFS: the live files its inodes (file records) list,
    /// with their runs ([`extfs`], [`ntfs_files`]; read by
    /// [`detect_with_files`]).
    pub inode_files: Option<std::sync::Arc<extfs::FileMap>>,
    /// FAT16/32: the size of every file a directory entry (live or
    /// deleted) starts at a cluster ([`names::fat_files`], read by
    /// [`detect_with_files`]).
    pub fat_files: Option<std::sync::Arc<names::FatFiles>>,
}

/// A FAT16 or FAT32 volume's first allocation table: cluster `n` (from 2)
/// lies at `data + (n − 2) × cluster`, and entry `n` of the table names the
/// cluster after it in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fat {
    /// Image offset of the first table.
    pub table: u64,
    /// Bits per entry: 16 or 32 (FAT12 is not followed).
    pub width: u32,
    /// Image offset of cluster 2.
    pub data: u64,
    /// Entries the table holds (clusters + 2, bounded by its size).
    pub entries: u64,
}

impl Volume {
    /// The block size, when the volume maps files by ext2/3 block maps: a
    /// file's 13th data block comes after an indirect block, its
    /// `13 + bs/4`th after two, and every `bs/4` data blocks after that
    /// after one more ([`block_map_boundaries`]).
    pub fn block_map(&self) -> Option<u64> {
        (self.fs == "ext2/3").then_some(self.cluster)
    }

    /// True when `pos` (an image offset inside the volume) is a cluster start.
    pub fn on_boundary(&self, pos: u64) -> bool {
        pos % self.cluster == self.phase
    }

    /// True when a file system entry (a FAT directory entry, live or
    /// deleted; an ext inode) says a file starts at `pos`.
    pub fn entry_starts(&self, pos: u64) -> bool {
        self.fat_files
            .as_ref()
            .is_some_and(|m| m.files.contains_key(&pos))
            || self
                .inode_files
                .as_ref()
                .is_some_and(|m| m.files.contains_key(&pos) || m.contiguous.contains_key(&pos))
    }
}

/// The volumes found in an image (none: no file system recognised).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Geometry {
    pub volumes: Vec<Volume>,
    /// `[start, end)` of every partition an MBR or GPT lists (extended
    /// partitions included), whatever its file system: empty when the image
    /// has no partition table.
    pub partitions: Vec<(u64, u64)>,
}

impl Geometry {
    /// The volume holding image offset `pos`.
    pub fn at(&self, pos: u64) -> Option<&Volume> {
        self.volumes.iter().find(|v| v.start <= pos && pos < v.end)
    }

    /// One line per volume for the audit.
    pub fn describe(&self) -> Vec<String> {
        self.volumes
            .iter()
            .map(|v| {
                format!(
                    "{} at offset {} ({} bytes): clusters of {} bytes, data area at {} mod {}",
                    v.fs,
                    v.start,
                    v.end - v.start,
                    v.cluster,
                    v.phase,
                    v.cluster
                )
            })
            .collect()
    }
}

/// File offsets, in a file of an ext2/3 volume with blocks of `bs` bytes,
/// after which its next data block follows one or more indirect blocks
/// (when the file was written into free space in one go, as most are):
/// 12 direct blocks, then the indirect block's `bs/4`, then runs of `bs/4`
/// under the double-indirect block. Ascending, below `below`.
pub fn block_map_boundaries(bs: u64, below: u64) -> impl Iterator<Item = u64> {
    let per = (bs / 4).max(1);
    let first = 12u64.saturating_mul(bs);
    (0u64..)
        .map(move |k| first.saturating_add(k.saturating_mul(per).saturating_mul(bs)))
        .take_while(move |&o| o < below && o < u64::MAX / 2)
}

/// `(file offset, image offset)` of the runs after the first, and the
/// file's length in blocks when known ([`ext_block_map`]).
pub type BlockMap = (Vec<(u64, u64)>, Option<u64>);

/// The runs of a file of an ext2/3 volume that starts at `start` (a block
/// boundary), when its block map lies the way the allocator lays it out
/// for a file written in one go into free space: 12 data blocks, the
/// indirect block, the data blocks it lists, then (past `12 + bs/4`
/// blocks) the double-indirect block, the next indirect block and its data
/// blocks, and so on. Each indirect block must list exactly the blocks
/// that follow it (consecutive numbers from the next block on, then only
/// zeros); a double-indirect block must point at the block after it. Such
/// a block does not happen by chance: it is the file system saying where
/// the file goes on.
///
/// Returns `(file offset, image offset)` of each run after the first
/// (which is `(0, start)`), at most `max_runs − 1` of them, and the file's
/// length in blocks when the last indirect block read lists fewer blocks
/// than it holds (the file ends in them). `None`: no such block map.
pub fn ext_block_map(
    r: &dyn ByteReader,
    vol: &Volume,
    start: u64,
    max_runs: usize,
) -> Option<BlockMap> {
    let bs = vol.block_map()?;
    let per = bs / 4;
    if start < vol.start || !(start - vol.start).is_multiple_of(bs) || per == 0 {
        return None;
    }
    let block_no = |off: u64| (off - vol.start) / bs;
    let mut buf = vec![0u8; usize::try_from(bs).ok()?];
    let read_block = |off: u64, buf: &mut [u8]| -> bool {
        off.checked_add(bs).is_some_and(|e| e <= vol.end) && r.read_at(off, buf) == buf.len()
    };
    let mut runs = Vec::new();
    let mut file_off = 12 * bs;
    let mut pos = start.checked_add(file_off)?;
    for k in 0.. {
        if runs.len() + 1 >= max_runs {
            break;
        }
        if k == 1 {
            // The double-indirect block, then the first indirect block under it.
            if !read_block(pos, &mut buf) || le32(&buf, 0) != block_no(pos + bs) {
                break;
            }
            pos += bs;
        }
        if !read_block(pos, &mut buf) {
            break;
        }
        let first = le32(&buf, 0);
        if first != block_no(pos + bs) {
            break;
        }
        let listed = (0..per)
            .take_while(|&i| le32(&buf, (4 * i) as usize) == first + i)
            .count() as u64;
        if (listed..per).any(|i| le32(&buf, (4 * i) as usize) != 0) {
            break;
        }
        runs.push((file_off, pos + bs));
        file_off += listed * bs;
        if listed < per {
            return Some((runs, Some(file_off / bs)));
        }
        pos += bs + listed * bs;
    }
    (!runs.is_empty()).then_some((runs, None))
}

/// Reads the file systems of `r`: one at offset 0, else those of the
/// partitions an MBR or GPT lists.
pub fn detect(r: &dyn ByteReader) -> Geometry {
    let len = r.len();
    if let Some(v) = volume(r, 0, len) {
        return Geometry {
            volumes: vec![v],
            partitions: Vec::new(),
        };
    }
    let listed = partitions(r);
    let volumes = listed
        .iter()
        .filter(|p| !p.2)
        .filter_map(|&(s, e, _)| volume(r, s, e.min(len)))
        .collect();
    Geometry {
        volumes,
        partitions: listed.into_iter().map(|(s, e, _)| (s, e)).collect(),
    }
}

/// [`detect`], and the inode tables of its ext2/3/4 volumes read
/// ([`extfs::read`]; once per carving: on a large volume this reads
/// its inode tables, bounded by [`extfs::MAX_INODES`]).
pub fn detect_with_files(r: &dyn ByteReader) -> Geometry {
    let mut g = detect(r);
    for v in &mut g.volumes {
        v.inode_files = extfs::read(r, v)
            .or_else(|| ntfs_files::read(r, v))
            .map(std::sync::Arc::new);
        v.fat_files = names::fat_files(r, v).map(std::sync::Arc::new);
    }
    g
}

fn read<const N: usize>(r: &dyn ByteReader, off: u64) -> Option<[u8; N]> {
    let mut b = [0u8; N];
    (r.read_at(off, &mut b) == N).then_some(b)
}

fn be32(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 4).map_or(0, |s| {
        u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    })
}

fn le64(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 8).map_or(0, |s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_le_bytes(a)
    })
}

/// The file system of the volume `[start, end)`, if one is recognised.
fn volume(r: &dyn ByteReader, start: u64, end: u64) -> Option<Volume> {
    if end <= start {
        return None;
    }
    let ((fs, cluster, data), fat) = boot_sector(r, start)
        .or_else(|| superblock(r, start).map(|v| (v, None)))
        .filter(|&((_, c, d), _)| {
            c.is_power_of_two() && (MIN_CLUSTER..=MAX_CLUSTER).contains(&c) && d < end - start
        })?;
    let fat = fat.and_then(|(table, width, entries): (u64, u32, u64)| {
        Some(Fat {
            table: start.checked_add(table)?,
            width,
            data: start.checked_add(data)?,
            entries,
        })
    });
    Some(Volume {
        start,
        end,
        cluster,
        phase: start.checked_add(data)? % cluster,
        fs,
        fat,
        inode_files: None,
        fat_files: None,
    })
}

/// `(table offset in the volume, bits per entry, entries)` of a FAT16/32 table.
type FatTable = (u64, u32, u64);

/// `(name, cluster size, data area offset in the volume)`.
type FsShape = (&'static str, u64, u64);

/// FAT, exFAT and NTFS: (name, cluster size, data area offset in the volume),
/// and a FAT16/32 volume's table.
fn boot_sector(r: &dyn ByteReader, start: u64) -> Option<(FsShape, Option<FatTable>)> {
    let b: [u8; 512] = read(r, start)?;
    if b[510..512] != [0x55, 0xAA] {
        return None;
    }
    if &b[3..11] == b"EXFAT   " {
        let (bps, spc) = (b[108], b[109]);
        if !(9..=12).contains(&bps) || u32::from(bps) + u32::from(spc) > 25 {
            return None;
        }
        return Some((("exFAT", 1 << (bps + spc), le32(&b, 88) << bps), None));
    }
    let bps = le16(&b, 11);
    if !matches!(bps, 512 | 1024 | 2048 | 4096) {
        return None;
    }
    if &b[3..11] == b"NTFS    " {
        // Sectors per cluster; above 0x80 it is a negative power of two.
        let spc = match b[13] {
            n @ 1..=0x80 => u64::from(n),
            n => 1u64.checked_shl(256 - u32::from(n))?,
        };
        return Some((("NTFS", bps.checked_mul(spc)?, 0), None));
    }
    if !matches!(b[0], 0xEB | 0xE9) {
        return None;
    }
    let spc = u64::from(b[13]);
    let (reserved, fats, root_entries) = (le16(&b, 14), u64::from(b[16]), le16(&b, 17));
    let fat_size = match le16(&b, 22) {
        0 => le32(&b, 36),
        n => n,
    };
    if !spc.is_power_of_two() || reserved == 0 || !(1..=4).contains(&fats) || fat_size == 0 {
        return None;
    }
    let root = (root_entries * 32).div_ceil(bps);
    let name = if root_entries == 0 {
        "FAT32"
    } else {
        "FAT12/16"
    };
    let first_data = reserved + fats * fat_size + root;
    // The FAT type is the cluster count's (Microsoft's FAT specification).
    let sectors = match le16(&b, 19) {
        0 => le32(&b, 32),
        n => n,
    };
    let clusters = sectors.saturating_sub(first_data) / spc;
    let width = match clusters {
        0..4085 => None,
        4085..65525 => Some(16),
        _ => Some(32),
    };
    let table = width.map(|w| {
        let in_table = fat_size * bps * 8 / u64::from(w);
        (reserved * bps, w, in_table.min(clusters + 2))
    });
    Some(((name, bps * spc, first_data * bps), table))
}

/// Bytes of a FAT read at a time by [`fat_chain`].
const FAT_PIECE: u64 = 4096;
/// Most links [`fat_chain`] follows (32 MiB of 4 KiB clusters, 4 MiB of
/// 512-byte ones): the walk is a constant per candidate, so a region of
/// headers at every cluster of one long chain costs linear time.
const MAX_FAT_LINKS: u64 = 1 << 13;

/// The clusters of the file whose first cluster starts at image offset
/// `start`, as a FAT16/32 volume's table chains them, merged into runs
/// `(image offset, length)` of whole clusters: `None` unless the chain ends
/// (end-of-chain mark) within `max_len` bytes, every link is a cluster of
/// the volume, and it makes 2 to `max_runs` runs. A free entry (a deleted
/// file: its chain is cleared), a bad-cluster mark or a link out of range
/// ends the answer; so does a loop (more links than `max_len` allows).
pub fn fat_chain(
    r: &dyn ByteReader,
    vol: &Volume,
    start: u64,
    max_len: u64,
    max_runs: usize,
) -> Option<Vec<(u64, u64)>> {
    fat_chain_runs(r, vol, start, max_len, max_runs).filter(|runs| runs.len() >= 2)
}

/// Reads FAT entries `n` of `fat` (`width` 16 or 32 bits, masked), a piece
/// of the table at a time: a chain's links are mostly consecutive entries.
struct FatEntries<'a> {
    r: &'a dyn ByteReader,
    fat: Fat,
    piece: Vec<u8>,
    piece_at: u64,
}

impl<'a> FatEntries<'a> {
    fn new(r: &'a dyn ByteReader, fat: Fat) -> Self {
        FatEntries {
            r,
            fat,
            piece: vec![0u8; FAT_PIECE as usize],
            piece_at: u64::MAX,
        }
    }

    /// Entry `n` (masked to 28 bits on FAT32), or `None` past the table's
    /// readable bytes.
    fn get(&mut self, n: u64) -> Option<u64> {
        let w = u64::from(self.fat.width / 8);
        let at = self.fat.table.checked_add(n.checked_mul(w)?)?;
        let base = at - at % FAT_PIECE;
        if base != self.piece_at {
            self.piece.resize(FAT_PIECE as usize, 0);
            let got = self.r.read_at(base, &mut self.piece);
            self.piece.truncate(got);
            self.piece_at = base;
        }
        let i = (at - base) as usize;
        let b = self.piece.get(i..i + w as usize)?;
        Some(match w {
            2 => u64::from(u16::from_le_bytes([b[0], b[1]])),
            _ => le32(b, 0) & 0x0FFF_FFFF,
        })
    }
}

/// True when every cluster of `[start, start + len)` (image offsets, `start`
/// a cluster start of FAT volume `vol`, at most [`MAX_FAT_LINKS`]
/// clusters) lies in the volume and is free in its table: where a deleted
/// file's clusters are, when nothing has taken them since.
pub fn fat_free(r: &dyn ByteReader, vol: &Volume, start: u64, len: u64) -> bool {
    let Some(fat) = vol.fat else { return false };
    let cl = vol.cluster;
    if start < fat.data || !(start - fat.data).is_multiple_of(cl) || len == 0 {
        return false;
    }
    let first = (start - fat.data) / cl + 2;
    let n = len.div_ceil(cl);
    if n > MAX_FAT_LINKS || first + n > fat.entries || start.saturating_add(len) > vol.end {
        return false;
    }
    let mut entries = FatEntries::new(r, fat);
    (first..first + n).all(|c| entries.get(c) == Some(0))
}

/// [`fat_chain`] of any number of runs (one: a contiguous file).
pub fn fat_chain_runs(
    r: &dyn ByteReader,
    vol: &Volume,
    start: u64,
    max_len: u64,
    max_runs: usize,
) -> Option<Vec<(u64, u64)>> {
    let fat = vol.fat?;
    let cl = vol.cluster;
    if start < fat.data || !(start - fat.data).is_multiple_of(cl) {
        return None;
    }
    let first = (start - fat.data) / cl + 2;
    let eoc = match fat.width {
        16 => 0xFFF8,
        _ => 0x0FFF_FFF8,
    };
    let mut entries = FatEntries::new(r, fat);
    // Bounded whatever the table holds: a constant per candidate.
    let most = max_len.div_ceil(cl).clamp(1, MAX_FAT_LINKS);
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut n = first;
    for _ in 0..most {
        if n < 2 || n >= fat.entries {
            return None;
        }
        let off = fat.data + (n - 2) * cl;
        match runs.last_mut() {
            Some((o, len)) if *o + *len == off => *len += cl,
            _ => {
                if runs.len() == max_runs {
                    return None;
                }
                runs.push((off, cl));
            }
        }
        let next = entries.get(n)?;
        if next >= eoc {
            return Some(runs);
        }
        if next < 2 || next == eoc - 1 {
            return None;
        }
        n = next;
    }
    None
}

/// ext2/3/4, HFS+, XFS and btrfs: (name, block size, 0).
fn superblock(r: &dyn ByteReader, start: u64) -> Option<(&'static str, u64, u64)> {
    let sb: [u8; 128] = read(r, start.checked_add(1024)?)?;
    if le16(&sb, 56) == 0xEF53 && le32(&sb, 24) <= 6 {
        // INCOMPAT_EXTENTS: files are mapped by extents, else by block maps.
        let fs = if le32(&sb, 0x60) & 0x40 != 0 {
            "ext4"
        } else {
            "ext2/3"
        };
        return Some((fs, 1024 << le32(&sb, 24), 0));
    }
    if matches!(&sb[0..2], b"H+" | b"HX") {
        return Some(("HFS+", be32(&sb, 40), 0));
    }
    let head: [u8; 8] = read(r, start)?;
    if &head[0..4] == b"XFSB" {
        return Some(("XFS", be32(&head, 4), 0));
    }
    let btrfs: [u8; 0x98] = read(r, start.checked_add(0x10000)?)?;
    if &btrfs[0x40..0x48] == b"_BHRfS_M" {
        return Some(("btrfs", le32(&btrfs, 0x90), 0));
    }
    None
}

/// `[start, end)` of the partitions an MBR (primary entries) or a GPT
/// lists, each with whether it is an extended partition (a container of
/// logical ones, not read).
fn partitions(r: &dyn ByteReader) -> Vec<(u64, u64, bool)> {
    let Some(mbr) = read::<512>(r, 0) else {
        return Vec::new();
    };
    if mbr[510..512] != [0x55, 0xAA] {
        return Vec::new();
    }
    let entries: Vec<&[u8]> = mbr[446..510].chunks_exact(16).collect();
    if entries.iter().any(|e| e[4] == 0xEE) {
        return gpt(r);
    }
    let mut out: Vec<(u64, u64, bool)> = entries
        .iter()
        .filter(|e| e[4] != 0x00)
        .filter_map(|e| {
            let (lba, n) = (le32(e, 8), le32(e, 12));
            let extended = matches!(e[4], 0x05 | 0x0F | 0x85);
            (lba > 0 && n > 0).then(|| (lba * SECTOR, (lba + n) * SECTOR, extended))
        })
        .collect();
    let extended: Vec<(u64, u64)> = out.iter().filter(|p| p.2).map(|p| (p.0, p.1)).collect();
    for (s, e) in extended {
        out.extend(logical(r, s / SECTOR, e / SECTOR));
    }
    out
}

/// The logical partitions of the extended partition of sectors
/// `[base, end)`: each extended boot record's first entry is one (its
/// start relative to that record), its second the next record (relative
/// to `base`). A record outside the partition, read before, or past
/// [`MAX_LOGICAL`] ends the chain; a logical partition must fit inside.
fn logical(r: &dyn ByteReader, base: u64, end: u64) -> Vec<(u64, u64, bool)> {
    let mut out = Vec::new();
    let mut seen: Vec<u64> = Vec::new();
    let mut ebr = base;
    while seen.len() < MAX_LOGICAL && !seen.contains(&ebr) {
        seen.push(ebr);
        let Some(b) = read::<512>(r, ebr * SECTOR) else {
            break;
        };
        if b[510..512] != [0x55, 0xAA] {
            break;
        }
        let (one, next) = (&b[446..462], &b[462..478]);
        let (lba, n) = (le32(one, 8), le32(one, 12));
        if one[4] != 0 && lba > 0 && n > 0 && ebr + lba + n <= end {
            out.push(((ebr + lba) * SECTOR, (ebr + lba + n) * SECTOR, false));
        }
        let link = le32(next, 8);
        if !matches!(next[4], 0x05 | 0x0F | 0x85) || link == 0 || base + link >= end {
            break;
        }
        ebr = base + link;
    }
    out
}

fn gpt(r: &dyn ByteReader) -> Vec<(u64, u64, bool)> {
    let Some(h) = read::<92>(r, SECTOR) else {
        return Vec::new();
    };
    if &h[0..8] != b"EFI PART" {
        return Vec::new();
    }
    let (table, count, size) = (le64(&h, 72), le32(&h, 80), le32(&h, 84));
    if !(128..=4096).contains(&size) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in 0..count.min(MAX_GPT_ENTRIES) {
        let Some(at) = table
            .checked_mul(SECTOR)
            .and_then(|t| t.checked_add(i * size))
        else {
            break;
        };
        let Some(e) = read::<48>(r, at) else {
            break;
        };
        let (first, last) = (le64(&e, 32), le64(&e, 40));
        if e[..16].iter().any(|&x| x != 0)
            && first > 0
            && last >= first
            && let (Some(s), Some(t)) = (
                first.checked_mul(SECTOR),
                last.checked_add(1).and_then(|l| l.checked_mul(SECTOR)),
            )
        {
            out.push((s, t, false));
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn fat32(img: &mut [u8], at: usize, spc: u8, reserved: u16, fat_size: u32) {
        let b = &mut img[at..at + 512];
        b[0] = 0xEB;
        b[3..11].copy_from_slice(b"mkfs.fat");
        b[11..13].copy_from_slice(&512u16.to_le_bytes());
        b[13] = spc;
        b[14..16].copy_from_slice(&reserved.to_le_bytes());
        b[16] = 2;
        b[36..40].copy_from_slice(&fat_size.to_le_bytes());
        b[510] = 0x55;
        b[511] = 0xAA;
    }

    #[test]
    fn fat32_at_zero_with_an_unaligned_data_area() {
        let mut img = vec![0u8; 1 << 20];
        fat32(&mut img, 0, 8, 32, 1001);
        let g = detect(&img);
        let v = &g.volumes[0];
        let data = (32 + 2 * 1001) * 512;
        assert_eq!((v.fs, v.cluster, v.phase), ("FAT32", 4096, data % 4096));
        assert!(v.on_boundary(data + 3 * 4096));
        assert!(!v.on_boundary(data + 3 * 4096 + 512));
        assert_eq!(g.at(5000), Some(v));
    }

    #[test]
    fn fat_cluster_chains() {
        use super::fat_chain;
        // FAT32: 512-byte clusters, 32 reserved sectors, 100-sector tables;
        // 200 000 sectors declared (a FAT32 cluster count), 1 MiB present.
        let mut img = vec![0u8; 1 << 20];
        fat32(&mut img, 0, 1, 32, 100);
        img[32..36].copy_from_slice(&200_000u32.to_le_bytes());
        let vol = detect(&img).volumes[0].clone();
        let fat = vol.fat.unwrap();
        assert_eq!((fat.table, fat.width, fat.data), (32 * 512, 32, 232 * 512));
        let set = |img: &mut [u8], n: u64, v: u32| {
            let at = (fat.table + 4 * n) as usize;
            img[at..at + 4].copy_from_slice(&v.to_le_bytes());
        };
        let off = |n: u64| fat.data + (n - 2) * 512;
        // 10 → 11 → 12 → 40 → 41 → end.
        for (n, next) in [(10, 11), (11, 12), (12, 40), (40, 41), (41, 0x0FFF_FFFF)] {
            set(&mut img, n, next);
        }
        let runs = fat_chain(&img, &vol, off(10), 1 << 20, 4).unwrap();
        assert_eq!(runs, vec![(off(10), 3 * 512), (off(40), 2 * 512)]);
        // Fewer runs allowed, a shorter window, not a cluster start.
        assert_eq!(fat_chain(&img, &vol, off(10), 1 << 20, 1), None);
        assert_eq!(fat_chain(&img, &vol, off(10), 4 * 512, 4), None);
        assert_eq!(fat_chain(&img, &vol, off(10) + 100, 1 << 20, 4), None);
        // Contiguous (one run): nothing to add.
        assert_eq!(fat_chain(&img, &vol, off(40), 1 << 20, 4), None);
        // ... but its runs, for a file system entry's size.
        assert_eq!(
            super::fat_chain_runs(&img, &vol, off(40), 1 << 20, 4),
            Some(vec![(off(40), 2 * 512)])
        );
        // Free clusters (a deleted file's): 13 to 39 are, 12 is not; past
        // the volume's clusters or not on a cluster start: not free.
        assert!(super::fat_free(&img, &vol, off(13), 27 * 512));
        assert!(super::fat_free(&img, &vol, off(13), 26 * 512 + 1));
        assert!(!super::fat_free(&img, &vol, off(13), 27 * 512 + 1));
        assert!(!super::fat_free(&img, &vol, off(12), 512));
        assert!(!super::fat_free(&img, &vol, off(13) + 1, 512));
        assert!(!super::fat_free(&img, &vol, off(13), 0));
        assert!(!super::fat_free(&img, &vol, off(13), 1 << 40));
        // A free entry (deleted file), a bad cluster, a link out of range, a loop.
        for (n, v) in [(12u64, 0u32), (12, 0x0FFF_FFF7), (12, 1 << 20), (41, 10)] {
            let mut bad = img.clone();
            set(&mut bad, n, v);
            assert_eq!(
                fat_chain(&bad, &vol, off(10), 1 << 20, 4),
                None,
                "entry {n} = {v:#x}"
            );
        }
        // FAT16: 16-bit entries after a fixed root directory.
        let mut img = vec![0u8; 1 << 20];
        fat32(&mut img, 0, 1, 4, 0);
        img[17..19].copy_from_slice(&512u16.to_le_bytes());
        img[19..21].copy_from_slice(&20_000u16.to_le_bytes());
        img[22..24].copy_from_slice(&80u16.to_le_bytes());
        let vol = detect(&img).volumes[0].clone();
        let fat = vol.fat.unwrap();
        assert_eq!((fat.table, fat.width), (4 * 512, 16));
        assert_eq!(fat.data, (4 + 2 * 80 + 32) * 512);
        let set16 = |img: &mut [u8], n: u64, v: u16| {
            let at = (fat.table + 2 * n) as usize;
            img[at..at + 2].copy_from_slice(&v.to_le_bytes());
        };
        set16(&mut img, 5, 9);
        set16(&mut img, 9, 0xFFFF);
        let off16 = |n: u64| fat.data + (n - 2) * 512;
        assert_eq!(
            fat_chain(&img, &vol, off16(5), 1 << 20, 4),
            Some(vec![(off16(5), 512), (off16(9), 512)])
        );
        // FAT12 (few clusters): not followed.
        let mut img = vec![0u8; 1 << 20];
        fat32(&mut img, 0, 1, 4, 0);
        img[17..19].copy_from_slice(&512u16.to_le_bytes());
        img[19..21].copy_from_slice(&2_000u16.to_le_bytes());
        img[22..24].copy_from_slice(&8u16.to_le_bytes());
        assert_eq!(detect(&img).volumes[0].fat, None);
    }

    /// An ext2 volume (`bs`-byte blocks, no extents) in `len` bytes.
    pub(crate) fn ext2_volume(bs: u64, len: usize) -> Vec<u8> {
        let mut img = vec![0u8; len];
        img[1024 + 24] = (bs / 1024).trailing_zeros() as u8;
        img[1024 + 56..1024 + 58].copy_from_slice(&0xEF53u16.to_le_bytes());
        img
    }

    /// Lays `data` out at block `first` the way ext2 does for a file written
    /// in one go: 12 blocks, indirect block, its blocks, double-indirect
    /// block, indirect block, its blocks... Returns the image offsets of the
    /// metadata blocks.
    pub(crate) fn lay_out_ext2(img: &mut [u8], bs: usize, first: usize, data: &[u8]) -> Vec<usize> {
        let per = bs / 4;
        let mut meta = Vec::new();
        let mut pos = first * bs;
        let mut chunks = data.chunks(bs).peekable();
        let put = |img: &mut [u8], pos: &mut usize, c: &[u8]| {
            img[*pos..*pos + c.len()].copy_from_slice(c);
            *pos += bs;
        };
        for c in chunks.by_ref().take(12) {
            put(img, &mut pos, c);
        }
        let mut k = 0;
        while chunks.peek().is_some() {
            if k == 1 {
                let next = (pos / bs + 1) as u32;
                img[pos..pos + 4].copy_from_slice(&next.to_le_bytes());
                meta.push(pos);
                pos += bs;
            }
            let ind = pos;
            meta.push(ind);
            pos += bs;
            for (n, c) in chunks.by_ref().take(per).enumerate() {
                let b = (pos / bs) as u32;
                img[ind + 4 * n..ind + 4 * n + 4].copy_from_slice(&b.to_le_bytes());
                put(img, &mut pos, c);
            }
            k += 1;
        }
        meta
    }

    #[test]
    fn ext2_block_maps() {
        use super::ext_block_map;
        // 1 KiB blocks: 256 entries per indirect block.
        let bs = 1024usize;
        let data: Vec<u8> = (0..(12 + 256 + 10) * bs - 100)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let mut img = ext2_volume(1024, 1 << 20);
        let meta = lay_out_ext2(&mut img, bs, 100, &data);
        assert_eq!(meta.len(), 3, "indirect, double-indirect, indirect");
        let vol = detect(&img).volumes[0].clone();
        assert_eq!(vol.block_map(), Some(1024));
        let start = 100 * bs as u64;
        let (runs, blocks) = ext_block_map(&img, &vol, start, 4).unwrap();
        let b = bs as u64;
        assert_eq!(
            runs,
            vec![
                (12 * b, start + 13 * b),
                ((12 + 256) * b, start + (12 + 1 + 256 + 2) * b)
            ]
        );
        assert_eq!(blocks, Some(12 + 256 + 10));
        // Room for fewer runs: the map stops early, the length unknown.
        assert_eq!(
            ext_block_map(&img, &vol, start, 2),
            Some((runs[..1].to_vec(), None))
        );
        // Not on a block boundary, or no indirect block where the 13th block goes.
        assert_eq!(ext_block_map(&img, &vol, start + 512, 4), None);
        assert_eq!(ext_block_map(&img, &vol, start + b, 4), None);
        // An indirect block that does not list the block after it, lists
        // blocks out of order, or holds anything after its list.
        for (at, val) in [(0usize, 7u32), (8, 1), (4 * 255, 9)] {
            let mut bad = img.clone();
            let ind = meta[0];
            bad[ind + at..ind + at + 4].copy_from_slice(&val.to_le_bytes());
            assert_eq!(
                ext_block_map(&bad, &vol, start, 4),
                None,
                "entry at {at} = {val}"
            );
        }
        // ext4 (extents): no block maps.
        let mut ext4 = img.clone();
        ext4[1024 + 0x60] = 0x40;
        let vol4 = detect(&ext4).volumes[0].clone();
        assert_eq!(ext_block_map(&ext4, &vol4, start, 4), None);
    }

    #[test]
    fn ext_superblock_and_btrfs() {
        let mut img = vec![0u8; 1 << 20];
        img[1024 + 24] = 2;
        img[1024 + 56..1024 + 58].copy_from_slice(&0xEF53u16.to_le_bytes());
        let v = &detect(&img).volumes[0];
        assert_eq!((v.fs, v.cluster, v.phase), ("ext2/3", 4096, 0));
        assert_eq!(v.block_map(), Some(4096));
        img[1024 + 0x60] = 0x42; // INCOMPAT_EXTENTS | FILETYPE
        let v = &detect(&img).volumes[0];
        assert_eq!((v.fs, v.block_map()), ("ext4", None));
        assert_eq!(
            super::block_map_boundaries(4096, 10 << 20).collect::<Vec<_>>(),
            vec![12 * 4096, (12 + 1024) * 4096, (12 + 2048) * 4096]
        );
        assert_eq!(super::block_map_boundaries(1024, 12 * 1024).count(), 0);

        let mut img = vec![0u8; 1 << 20];
        img[0x10040..0x10048].copy_from_slice(b"_BHRfS_M");
        img[0x10090..0x10094].copy_from_slice(&4096u32.to_le_bytes());
        assert_eq!(detect(&img).volumes[0].fs, "btrfs");
    }

    #[test]
    fn logical_partitions_in_an_extended_one() {
        // An extended partition at sector 2048 (6144 sectors): logical
        // FAT32 volumes at 2048 + 64 and, from the second record at 2048 +
        // 3072, at 2048 + 3072 + 64; the second record links to itself.
        let mut img = vec![0u8; 4 << 20];
        // Entry `k` of the partition table in the sector at byte `sector`.
        let entry = |img: &mut [u8], sector: usize, k: usize, ty: u8, lba: u32, n: u32| {
            let at = sector + 446 + 16 * k;
            img[at + 4] = ty;
            img[at + 8..at + 12].copy_from_slice(&lba.to_le_bytes());
            img[at + 12..at + 16].copy_from_slice(&n.to_le_bytes());
            img[sector + 510..sector + 512].copy_from_slice(&[0x55, 0xAA]);
        };
        entry(&mut img, 0, 0, 0x0F, 2048, 6144);
        let (ebr1, ebr2) = (2048 * 512, (2048 + 3072) * 512);
        entry(&mut img, ebr1, 0, 0x0C, 64, 2048);
        entry(&mut img, ebr1, 1, 0x05, 3072, 3072);
        entry(&mut img, ebr2, 0, 0x0C, 64, 2048);
        entry(&mut img, ebr2, 1, 0x05, 3072, 3072);
        fat32(&mut img, ebr1 + 64 * 512, 4, 32, 31);
        fat32(&mut img, ebr2 + 64 * 512, 4, 32, 31);
        let g = detect(&img);
        let starts: Vec<u64> = g.volumes.iter().map(|v| v.start).collect();
        assert_eq!(starts, [ebr1 as u64 + 64 * 512, ebr2 as u64 + 64 * 512]);
        assert_eq!(g.partitions.len(), 3);
        // A link out of the extended partition ends the chain.
        let mut out = img.clone();
        entry(&mut out, ebr1, 1, 0x05, 7000, 3072);
        assert_eq!(detect(&out).volumes.len(), 1);
        // A logical partition past the extended one's end: not one.
        entry(&mut img, ebr2, 0, 0x0C, 64, 9000);
        assert_eq!(detect(&img).volumes.len(), 1);
    }

    #[test]
    fn volumes_behind_an_mbr_and_a_gpt() {
        // MBR: an ext4 volume at sector 2048 and a FAT32 one after it.
        let mut img = vec![0u8; 4 << 20];
        img[510] = 0x55;
        img[511] = 0xAA;
        for (i, (ty, lba, n)) in [(0x83u8, 2048u32, 2048u32), (0x0C, 4096, 4096)]
            .into_iter()
            .enumerate()
        {
            let e = 446 + 16 * i;
            img[e + 4] = ty;
            img[e + 8..e + 12].copy_from_slice(&lba.to_le_bytes());
            img[e + 12..e + 16].copy_from_slice(&n.to_le_bytes());
        }
        let ext = 2048 * 512 + 1024;
        img[ext + 24] = 0;
        img[ext + 56..ext + 58].copy_from_slice(&0xEF53u16.to_le_bytes());
        fat32(&mut img, 4096 * 512, 4, 32, 31);
        let g = detect(&img);
        assert_eq!(g.volumes.len(), 2);
        assert_eq!((g.volumes[0].start, g.volumes[0].cluster), (1 << 20, 1024));
        assert_eq!((g.volumes[1].start, g.volumes[1].cluster), (2 << 20, 2048));
        assert_eq!(g.at(100), None);

        // GPT: one entry.
        let mut img = vec![0u8; 4 << 20];
        img[510] = 0x55;
        img[511] = 0xAA;
        img[446 + 4] = 0xEE;
        img[512..520].copy_from_slice(b"EFI PART");
        img[512 + 72..512 + 80].copy_from_slice(&2u64.to_le_bytes());
        img[512 + 80..512 + 84].copy_from_slice(&128u32.to_le_bytes());
        img[512 + 84..512 + 88].copy_from_slice(&128u32.to_le_bytes());
        let e = 1024;
        img[e] = 1;
        img[e + 32..e + 40].copy_from_slice(&2048u64.to_le_bytes());
        img[e + 40..e + 48].copy_from_slice(&8191u64.to_le_bytes());
        let ext = 2048 * 512 + 1024;
        img[ext + 24] = 2;
        img[ext + 56..ext + 58].copy_from_slice(&0xEF53u16.to_le_bytes());
        let g = detect(&img);
        assert_eq!(g.volumes.len(), 1);
        assert_eq!((g.volumes[0].start, g.volumes[0].end), (1 << 20, 4 << 20));
    }

    #[test]
    fn hostile_fields_are_not_a_file_system() {
        let mut img = vec![0u8; 1 << 20];
        fat32(&mut img, 0, 3, 32, 1001); // 3 sectors per cluster
        assert!(detect(&img).volumes.is_empty());
        fat32(&mut img, 0, 8, 32, u32::MAX); // data area past the image
        assert!(detect(&img).volumes.is_empty());
        let mut img = vec![0u8; 1 << 20];
        img[1024 + 24] = 40; // block size 1024 << 40
        img[1024 + 56..1024 + 58].copy_from_slice(&0xEF53u16.to_le_bytes());
        assert!(detect(&img).volumes.is_empty());
        // An MBR whose entries point past the image; a GPT with a huge table.
        let mut img = vec![0u8; 8192];
        img[510] = 0x55;
        img[511] = 0xAA;
        img[446 + 4] = 0x83;
        img[446 + 8..446 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        img[446 + 12..446 + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(detect(&img).volumes.is_empty());
        img[446 + 4] = 0xEE;
        img[512..520].copy_from_slice(b"EFI PART");
        img[512 + 72..512 + 80].copy_from_slice(&u64::MAX.to_le_bytes());
        img[512 + 80..512 + 84].copy_from_slice(&u32::MAX.to_le_bytes());
        img[512 + 84..512 + 88].copy_from_slice(&128u32.to_le_bytes());
        assert!(detect(&img).volumes.is_empty());
        assert!(detect(&Vec::new()).volumes.is_empty());
    }
}
