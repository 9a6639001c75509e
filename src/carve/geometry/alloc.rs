//! What the file system still knows of a carved file's bytes: whether the
//! clusters (blocks) they lie in are allocated.
//!
//! * FAT16/32: a cluster is allocated iff its entry in the first table is
//!   not zero (free);
//! * ext2/3/4: iff its bit is set in its block group's block bitmap (a group
//!   whose bitmap was never initialised, `BLOCK_UNINIT`, has its data blocks
//!   free);
//! * exFAT: iff its bit is set in the allocation bitmap (the root
//!   directory's bitmap entry, type `0x81`, says where it lies);
//! * NTFS: iff its bit is set in `$Bitmap` (record 6 of `$MFT`, whose run
//!   list places it; [`super::ntfs`]); the boot sector, `$MFT` and the
//!   other metadata files are clusters it allocates like any file's;
//! * outside every volume and every partition of an image that has a
//!   partition table and a recognised file system: unallocated space;
//! * anywhere else (HFS+, XFS, btrfs, FAT12, a partition whose file
//!   system is not recognised, an image without one): not known.
//!
//! Maps are read lazily, when a file is reported, and bounded whatever the
//! image says: only the pieces of a table ([`PIECE`] bytes of a FAT, one
//! block of a bitmap) that hold the clusters of reported files are read,
//! at most [`MAX_CACHED`] are kept (the cache is emptied when full), and at
//! most [`MAX_MAP_BYTES`] are read per carving (past it, statuses are not
//! known). Every cluster and block number is range-checked; no length
//! field sizes an allocation.

use std::collections::HashMap;

use std::sync::Arc;

use super::{Fat, Geometry, Volume, extfs, le16, le32, ntfs};
use crate::carve::reader::ByteReader;

/// A carved file's allocation status.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Alloc {
    /// Every cluster it lies in is allocated.
    Allocated,
    /// None is (deleted files, unallocated space).
    Unallocated,
    /// Some are.
    Partly,
}

impl Alloc {
    pub fn as_str(self) -> &'static str {
        match self {
            Alloc::Allocated => "allocated",
            Alloc::Unallocated => "unallocated",
            Alloc::Partly => "partly",
        }
    }
}

/// Bytes of a FAT read at a time.
pub const PIECE: u64 = 4096;
/// Most table pieces and bitmap blocks kept (16 MiB of 64 KiB blocks).
pub const MAX_CACHED: usize = 256;
/// Most bytes of allocation maps read per carving.
pub const MAX_MAP_BYTES: u64 = 256 << 20;

/// How one volume tells allocation.
#[derive(Clone, Debug)]
enum Map {
    /// Not read yet.
    Pending,
    /// FAT16/32: the first table.
    Fat(Fat, u64),
    /// ext2/3/4: the superblock's facts.
    Ext(ExtMap),
    /// exFAT: the allocation bitmap's image offset and length in bytes,
    /// cluster 2's offset, the cluster size and count.
    ExFat(ExFatMap),
    /// NTFS: `$Bitmap`.
    Ntfs(NtfsMap),
    /// No allocation map known.
    None,
}

#[derive(Clone, Copy, Debug)]
struct ExtMap {
    start: u64,
    bs: u64,
    blocks: u64,
    first_data_block: u64,
    blocks_per_group: u64,
    desc_at: u64,
    desc_size: u64,
    bit64: bool,
}

#[derive(Clone, Copy, Debug)]
struct ExFatMap {
    bitmap: u64,
    bitmap_len: u64,
    heap: u64,
    cluster: u64,
    clusters: u64,
}

/// An NTFS volume's `$Bitmap`: where its data lies, its length in bytes,
/// the volume's start, cluster size and cluster count.
#[derive(Clone, Debug)]
struct NtfsMap {
    bitmap: Arc<[ntfs::Extent]>,
    bitmap_len: u64,
    start: u64,
    cluster: u64,
    clusters: u64,
}

/// The allocation maps of an image's volumes, read on demand.
#[derive(Debug, Default)]
pub struct AllocMaps {
    volumes: Vec<(Volume, Map)>,
    /// Partitions (containers included) without a recognised file system.
    others: Vec<(u64, u64)>,
    /// Bytes outside every volume and partition are unallocated space.
    outside_known: bool,
    /// (volume, piece or group) → its bytes (`None`: not readable).
    cache: HashMap<(usize, u64), Option<Vec<u8>>>,
    /// Bytes read so far.
    read: u64,
}

/// One unit's state as far as a segment goes: (any allocated, any free).
type Seen = (bool, bool);

impl AllocMaps {
    pub fn new(geo: &Geometry) -> Self {
        let others = geo
            .partitions
            .iter()
            .copied()
            .filter(|&(s, e)| !geo.volumes.iter().any(|v| v.start == s && v.end <= e))
            .collect();
        AllocMaps {
            volumes: geo
                .volumes
                .iter()
                .map(|v| (v.clone(), Map::Pending))
                .collect(),
            others,
            outside_known: !geo.partitions.is_empty() && !geo.volumes.is_empty(),
            cache: HashMap::new(),
            read: 0,
        }
    }

    /// Bytes of allocation maps read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// True when some volume has an allocation map that can be read (its
    /// superblock or boot sector read now).
    pub fn any_map(&mut self, r: &dyn ByteReader) -> bool {
        (0..self.volumes.len()).any(|i| {
            if matches!(self.volumes[i].1, Map::Pending) {
                self.volumes[i].1 = load(r, &self.volumes[i].0);
            }
            !matches!(self.volumes[i].1, Map::None)
        })
    }

    /// Bytes the volumes with an allocation map allocate: their allocated
    /// clusters (blocks) and the file system's own areas before them (boot
    /// sectors, tables). `None` when a map cannot be read in full within
    /// the carving's budget ([`MAX_MAP_BYTES`]).
    pub fn allocated_bytes(&mut self, r: &dyn ByteReader) -> Option<u64> {
        self.any_map(r);
        let mut total = 0u64;
        for i in 0..self.volumes.len() {
            let Some(u) = units(&self.volumes[i].1, &self.volumes[i].0) else {
                continue;
            };
            let mut used = u.first;
            if u.first < u.count {
                self.visit(r, i, (u.first, u.count - 1), &mut |_, a| {
                    used += u64::from(a)
                })?;
            }
            let own = u.base.saturating_sub(self.volumes[i].0.start);
            total = total.checked_add(own.checked_add(used.checked_mul(u.size)?)?)?;
        }
        Some(total)
    }

    /// Every volume's allocation map as a bitmap in memory
    /// ([`AllocBits`]), shareable between threads; `None` when a map
    /// cannot be read in full within the budget ([`MAX_MAP_BYTES`]) or
    /// the maps hold more than [`MAX_BITS`] units together.
    pub fn bits(&mut self, r: &dyn ByteReader) -> Option<AllocBits> {
        self.any_map(r);
        let mut vols = Vec::new();
        let mut total = 0u64;
        for i in 0..self.volumes.len() {
            let Some(u) = units(&self.volumes[i].1, &self.volumes[i].0) else {
                continue;
            };
            total = total.checked_add(u.count)?;
            // (Known too large before a byte is read.)
            let map_bytes = match &self.volumes[i].1 {
                Map::Fat(fat, _) => u.count.saturating_mul(u64::from(fat.width / 8)),
                Map::Ext(m) => (u.count / m.blocks_per_group.max(1) + 1).saturating_mul(m.bs),
                _ => u.count / 8,
            };
            if total > MAX_BITS || self.read.saturating_add(map_bytes) > MAX_MAP_BYTES {
                return None;
            }
            let mut bits = vec![0u64; u.count.div_ceil(64) as usize];
            for n in 0..u.first.min(u.count) {
                bits[(n / 64) as usize] |= 1 << (n % 64);
            }
            if u.first < u.count {
                self.visit(r, i, (u.first, u.count - 1), &mut |n, a| {
                    if a {
                        bits[(n / 64) as usize] |= 1 << (n % 64);
                    }
                })?;
            }
            let v = &self.volumes[i].0;
            vols.push((v.start, v.end, u, bits));
        }
        Some(AllocBits { vols })
    }

    /// The status of the bytes `runs` (`(image offset, length)`): `None`
    /// when not known for every one of them.
    pub fn status(
        &mut self,
        r: &dyn ByteReader,
        runs: impl IntoIterator<Item = (u64, u64)>,
    ) -> Option<Alloc> {
        let (mut alloc, mut free) = (false, false);
        for (off, len) in runs {
            let end = off.checked_add(len)?;
            let mut pos = off;
            while pos < end {
                let (seg_end, (a, f)) = self.segment(r, pos, end)?;
                alloc |= a;
                free |= f;
                pos = seg_end;
            }
        }
        match (alloc, free) {
            (true, false) => Some(Alloc::Allocated),
            (false, true) => Some(Alloc::Unallocated),
            (true, true) => Some(Alloc::Partly),
            (false, false) => None,
        }
    }

    /// What `[pos, end)` holds up to the end of the volume (or the gap
    /// between volumes) that `pos` lies in: that end and what was seen.
    fn segment(&mut self, r: &dyn ByteReader, pos: u64, end: u64) -> Option<(u64, Seen)> {
        if let Some(i) = self
            .volumes
            .iter()
            .position(|(v, _)| v.start <= pos && pos < v.end)
        {
            let seg_end = end.min(self.volumes[i].0.end);
            return Some((seg_end, self.in_volume(r, i, pos, seg_end)?));
        }
        if self.others.iter().any(|&(s, e)| s <= pos && pos < e) || !self.outside_known {
            return None;
        }
        // Unallocated space up to the next volume or partition.
        let next = self
            .volumes
            .iter()
            .map(|(v, _)| v.start)
            .chain(self.others.iter().map(|o| o.0))
            .filter(|&s| s > pos)
            .min()
            .unwrap_or(u64::MAX);
        Some((end.min(next), (false, true)))
    }

    /// What `[pos, end)` of volume `i` holds: bytes before its first unit
    /// and units before [`Units::first`] are the file system's own
    /// (allocated), units past the map's last are no file's (free).
    fn in_volume(&mut self, r: &dyn ByteReader, i: usize, pos: u64, end: u64) -> Option<Seen> {
        if matches!(self.volumes[i].1, Map::Pending) {
            let m = load(r, &self.volumes[i].0);
            self.volumes[i].1 = m;
        }
        let u = units(&self.volumes[i].1, &self.volumes[i].0)?;
        let mut seen = (pos < u.base, false);
        let from = pos.max(u.base);
        if from >= end {
            return Some(seen);
        }
        let first = (from - u.base) / u.size;
        let last = (end - 1 - u.base) / u.size;
        seen.0 |= first < u.first;
        seen.1 |= last >= u.count;
        let (a, b) = (first.max(u.first), last.min(u.count.saturating_sub(1)));
        if a <= b && a < u.count {
            self.visit(r, i, (a, b), &mut |_, x| {
                if x {
                    seen.0 = true;
                } else {
                    seen.1 = true;
                }
            })?;
        }
        Some(seen)
    }

    /// A cached unit: FAT piece, bitmap block (`None`: unreadable, or past
    /// the carving's budget).
    fn unit(
        &mut self,
        key: (usize, u64),
        load: impl FnOnce(&mut u64) -> Option<Vec<u8>>,
    ) -> Option<&[u8]> {
        if !self.cache.contains_key(&key) {
            if self.read >= MAX_MAP_BYTES {
                return None;
            }
            if self.cache.len() >= MAX_CACHED {
                self.cache.clear();
            }
            let got = load(&mut self.read);
            self.cache.insert(key, got);
        }
        self.cache.get(&key)?.as_deref()
    }

    /// Calls `f(n, allocated)` for units `first..=stop` of volume `i`
    /// (within [`Units::first`] and [`Units::count`]), reading its map
    /// through the cache.
    fn visit(
        &mut self,
        r: &dyn ByteReader,
        i: usize,
        (first, stop): (u64, u64),
        f: &mut dyn FnMut(u64, bool),
    ) -> Option<()> {
        match self.volumes[i].1.clone() {
            Map::Fat(fat, _) => self.fat(r, i, fat, (first, stop), f),
            Map::Ext(m) => self.ext(r, i, m, (first, stop), f),
            Map::ExFat(m) => {
                self.bitmap_bits(i, (first, stop), f, |k, read| exfat_piece(r, &m, k, read))
            }
            Map::Ntfs(m) => {
                self.bitmap_bits(i, (first, stop), f, |k, read| ntfs_piece(r, &m, k, read))
            }
            Map::Pending | Map::None => None,
        }
    }

    /// FAT16/32: unit `n` is cluster `n + 2`, allocated iff its entry is
    /// not zero.
    fn fat(
        &mut self,
        r: &dyn ByteReader,
        i: usize,
        fat: Fat,
        (first, stop): (u64, u64),
        f: &mut dyn FnMut(u64, bool),
    ) -> Option<()> {
        let w = u64::from(fat.width / 8);
        let mask = if w == 2 { 0xFFFF } else { 0x0FFF_FFFF };
        let per = PIECE / w;
        let (mut n, stop) = (first + 2, stop + 2);
        while n <= stop {
            let k = n / per;
            let upto = stop.min((k + 1) * per - 1);
            let piece = self.unit((i, k), |read| fat_piece(r, fat.table, k, read))?;
            for m in n..=upto {
                let at = ((m - k * per) * w) as usize;
                let e = if w == 2 {
                    le16(piece.get(at..at + 2)?, 0)
                } else {
                    le32(piece.get(at..at + 4)?, 0)
                } & mask;
                f(m - 2, e != 0);
            }
            n = upto + 1;
        }
        Some(())
    }

    /// ext2/3/4: unit `n` is block `n`, allocated iff its bit is set in its
    /// group's block bitmap (an uninitialised group's bitmap: empty, its
    /// data blocks free).
    fn ext(
        &mut self,
        r: &dyn ByteReader,
        i: usize,
        m: ExtMap,
        (first, stop): (u64, u64),
        f: &mut dyn FnMut(u64, bool),
    ) -> Option<()> {
        let mut b = first;
        while b <= stop {
            let g = (b - m.first_data_block) / m.blocks_per_group;
            let g_first = m.first_data_block + g * m.blocks_per_group;
            let upto = stop.min(g_first + m.blocks_per_group - 1);
            let bitmap = self.unit((i, g), |read| ext_bitmap(r, &m, g, read))?;
            for blk in b..=upto {
                let bit = blk - g_first;
                let set = bitmap
                    .get((bit / 8) as usize)
                    .is_some_and(|x| x & (1 << (bit % 8)) != 0);
                f(blk, set);
            }
            b = upto + 1;
        }
        Some(())
    }

    /// exFAT's bitmap, NTFS's `$Bitmap`: unit `n` is the volume's cluster
    /// `n` (exFAT: of its heap), allocated iff its bit is set; read a
    /// [`PIECE`] at a time through the cache (`load(k, read)`: piece `k`).
    fn bitmap_bits(
        &mut self,
        i: usize,
        (first, stop): (u64, u64),
        f: &mut dyn FnMut(u64, bool),
        load: impl Fn(u64, &mut u64) -> Option<Vec<u8>>,
    ) -> Option<()> {
        let bits = PIECE * 8;
        let mut c = first;
        while c <= stop {
            let k = c / bits;
            let upto = stop.min((k + 1) * bits - 1);
            let piece = self.unit((i, k), |read| load(k, read))?;
            for n in c..=upto {
                let bit = n - k * bits;
                let x = piece.get((bit / 8) as usize)?;
                f(n, x & (1 << (bit % 8)) != 0);
            }
            c = upto + 1;
        }
        Some(())
    }
}

/// How a volume's allocation units (clusters, blocks) lie in the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Units {
    /// Image offset of unit 0 (bytes of the volume before it are the file
    /// system's own: boot sectors, tables).
    base: u64,
    /// Bytes per unit (> 0).
    size: u64,
    /// Units before it are the file system's own too (ext's boot block).
    first: u64,
    /// Units the map holds: past them, no file's.
    count: u64,
}

/// How `map` places volume `vol`'s units (`None`: no map).
fn units(map: &Map, vol: &Volume) -> Option<Units> {
    let u = match *map {
        Map::Fat(fat, cl) => Units {
            base: fat.data,
            size: cl,
            first: 0,
            // Clusters the volume holds, however many entries the table has.
            count: fat
                .entries
                .min(vol.end.saturating_sub(fat.data) / cl.max(1) + 2)
                .saturating_sub(2),
        },
        Map::Ext(m) => Units {
            base: m.start,
            size: m.bs,
            first: m.first_data_block,
            count: m.blocks,
        },
        Map::ExFat(m) => Units {
            base: m.heap,
            size: m.cluster,
            first: 0,
            count: m.clusters,
        },
        Map::Ntfs(ref m) => Units {
            base: m.start,
            size: m.cluster,
            first: 0,
            count: m.clusters,
        },
        Map::Pending | Map::None => return None,
    };
    (u.size > 0).then_some(u)
}

/// Most units [`AllocMaps::bits`] holds in memory (32 MiB of bits: a
/// 256 GiB volume of 512-byte clusters, 1 TiB of 4 KiB ones).
pub const MAX_BITS: u64 = 1 << 28;

/// The volumes' allocation maps read in full into memory (one bit per
/// cluster or block), for questions asked many times from many threads:
/// is this position in a cluster the file system allocates?
#[derive(Debug, Default)]
pub struct AllocBits {
    /// (volume start, volume end, its units, one bit per unit: allocated).
    vols: Vec<(u64, u64, Units, Vec<u64>)>,
}

impl AllocBits {
    /// True when `pos` lies in a volume and in a cluster (block) its file
    /// system allocates or keeps for itself; false in free clusters,
    /// outside every mapped volume, and where not known.
    pub fn allocated(&self, pos: u64) -> bool {
        let Some((_, _, u, bits)) = self.vols.iter().find(|v| v.0 <= pos && pos < v.1) else {
            return false;
        };
        if pos < u.base {
            return true;
        }
        let n = (pos - u.base) / u.size;
        n < u.count
            && bits
                .get((n / 64) as usize)
                .is_some_and(|w| w >> (n % 64) & 1 == 1)
    }
}

/// Piece `k` of an NTFS `$Bitmap`.
fn ntfs_piece(r: &dyn ByteReader, m: &NtfsMap, k: u64, read: &mut u64) -> Option<Vec<u8>> {
    let at = k.checked_mul(PIECE)?;
    let len = m.bitmap_len.checked_sub(at)?.min(PIECE);
    let mut b = vec![0u8; len as usize];
    let got = ntfs::read_mapped(r, &m.bitmap, at, &mut b);
    *read += PIECE;
    b.truncate(got);
    Some(b)
}

/// Piece `k` of the FAT at `table`.
fn fat_piece(r: &dyn ByteReader, table: u64, k: u64, read: &mut u64) -> Option<Vec<u8>> {
    let mut b = vec![0u8; PIECE as usize];
    let got = r.read_at(table.checked_add(k.checked_mul(PIECE)?)?, &mut b);
    *read += PIECE;
    b.truncate(got);
    Some(b)
}

/// Piece `k` of an exFAT allocation bitmap.
fn exfat_piece(r: &dyn ByteReader, m: &ExFatMap, k: u64, read: &mut u64) -> Option<Vec<u8>> {
    let at = k.checked_mul(PIECE)?;
    let len = m.bitmap_len.checked_sub(at)?.min(PIECE);
    let mut b = vec![0u8; len as usize];
    let got = r.read_at(m.bitmap.checked_add(at)?, &mut b);
    *read += PIECE;
    b.truncate(got);
    Some(b)
}

/// The block bitmap of group `g` (empty for an uninitialised group).
fn ext_bitmap(r: &dyn ByteReader, m: &ExtMap, g: u64, read: &mut u64) -> Option<Vec<u8>> {
    let mut desc = [0u8; 64];
    let d = &mut desc[..m.desc_size.min(64) as usize];
    *read += m.bs;
    if r.read_at(m.desc_at.checked_add(g.checked_mul(m.desc_size)?)?, d) != d.len() {
        return None;
    }
    // BLOCK_UNINIT
    if le16(d, 0x12) & 0x2 != 0 {
        return Some(Vec::new());
    }
    let mut block = le32(d, 0);
    if m.bit64 && m.desc_size >= 64 {
        block |= le32(d, 0x20) << 32;
    }
    if block == 0 || block >= m.blocks {
        return None;
    }
    let mut b = vec![0u8; m.bs as usize];
    let at = m.start.checked_add(block.checked_mul(m.bs)?)?;
    (r.read_at(at, &mut b) == b.len()).then_some(b)
}

/// How `vol` tells allocation (its superblock or boot sector read again).
fn load(r: &dyn ByteReader, vol: &Volume) -> Map {
    match vol.fs {
        "FAT32" | "FAT12/16" => vol.fat.map_or(Map::None, |f| Map::Fat(f, vol.cluster)),
        "ext2/3" | "ext4" => ext_map(r, vol).map_or(Map::None, Map::Ext),
        "exFAT" => exfat_map(r, vol).map_or(Map::None, Map::ExFat),
        "NTFS" => ntfs_map(r, vol).map_or(Map::None, Map::Ntfs),
        _ => Map::None,
    }
}

/// NTFS: `$Bitmap`, as `$MFT` places it.
fn ntfs_map(r: &dyn ByteReader, vol: &Volume) -> Option<NtfsMap> {
    let v = ntfs::Ntfs::open(r, vol)?;
    let (bitmap, bitmap_len) = v.bitmap(r)?;
    Some(NtfsMap {
        bitmap: bitmap.into(),
        bitmap_len,
        start: v.start,
        cluster: v.cluster,
        clusters: v.clusters,
    })
}

fn ext_map(r: &dyn ByteReader, vol: &Volume) -> Option<ExtMap> {
    let s = extfs::superblock(r, vol)?;
    // One bitmap block per group.
    if s.blocks_per_group > s.bs * 8 {
        return None;
    }
    Some(ExtMap {
        start: vol.start,
        bs: s.bs,
        blocks: s.blocks,
        first_data_block: s.first_data_block,
        blocks_per_group: s.blocks_per_group,
        desc_at: vol
            .start
            .checked_add(s.first_data_block.checked_add(1)?.checked_mul(s.bs)?)?,
        desc_size: s.desc_size,
        bit64: s.bit64,
    })
}

/// Most bytes of an exFAT root directory searched for the bitmap entry.
const MAX_ROOT_SCAN: u64 = 64 << 10;

/// exFAT: the allocation bitmap, as the root directory's entry `0x81`
/// places it (its clusters contiguous from the first, as a freshly
/// formatted volume lays it out: the entry's cluster chain is checked).
fn exfat_map(r: &dyn ByteReader, vol: &Volume) -> Option<ExFatMap> {
    let mut b = [0u8; 512];
    if r.read_at(vol.start, &mut b) != b.len() || &b[3..11] != b"EXFAT   " {
        return None;
    }
    let bps = u32::from(b[108]);
    let cluster = vol.cluster;
    let fat = vol.start.checked_add(le32(&b, 80).checked_shl(bps)?)?;
    let heap = vol.start.checked_add(le32(&b, 88).checked_shl(bps)?)?;
    let clusters = le32(&b, 92);
    let root = le32(&b, 96);
    let at = |c: u64| -> Option<u64> {
        (2..clusters.checked_add(2)?)
            .contains(&c)
            .then(|| heap.checked_add((c - 2).checked_mul(cluster)?))?
    };
    let mut dir = vec![0u8; cluster.min(MAX_ROOT_SCAN) as usize];
    let got = r.read_at(at(root)?, &mut dir);
    dir.truncate(got);
    let e = dir
        .chunks_exact(32)
        .take_while(|e| e[0] != 0)
        .find(|e| e[0] == 0x81 && e[1] & 1 == 0)?;
    let (first, len) = (le32(e, 20), le32(e, 24) | (le32(e, 28) << 32));
    if len < clusters.div_ceil(8) || len > clusters.div_ceil(8) + 8 {
        return None;
    }
    // The bitmap's clusters must follow one another in the FAT.
    let n = len.div_ceil(cluster);
    for k in 0..n.min(1024) {
        let mut x = [0u8; 4];
        let c = first.checked_add(k)?;
        if r.read_at(fat.checked_add(c.checked_mul(4)?)?, &mut x) != 4 {
            return None;
        }
        let next = u64::from(u32::from_le_bytes(x));
        let fine = if k + 1 == n {
            next >= 0xFFFF_FFF8 || next == 0
        } else {
            next == c + 1 || next == 0
        };
        if !fine {
            return None;
        }
    }
    Some(ExFatMap {
        bitmap: at(first)?,
        bitmap_len: len,
        heap,
        cluster,
        clusters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carve::geometry::detect;

    /// [`AllocBits`] says allocated exactly where [`AllocMaps::status`] of
    /// one byte does, at every sector of `img`.
    #[allow(clippy::ptr_arg)]
    fn bits_agree(img: &Vec<u8>) {
        let g = detect(img);
        let bits = AllocMaps::new(&g).bits(img).expect("maps read in full");
        let mut m = AllocMaps::new(&g);
        let mut allocated = 0;
        for pos in (0..img.len() as u64).step_by(512) {
            let s = m.status(img, [(pos, 1)]);
            assert_eq!(
                bits.allocated(pos),
                s == Some(Alloc::Allocated),
                "at {pos}: {s:?}"
            );
            allocated += usize::from(bits.allocated(pos));
        }
        assert!(allocated > 0);
    }

    #[test]
    fn fat32_entries_tell_allocation() {
        // FAT32: 512-byte clusters, 32 reserved sectors, 100-sector tables.
        let mut img = vec![0u8; 1 << 20];
        super::super::tests::fat32(&mut img, 0, 1, 32, 100);
        img[32..36].copy_from_slice(&200_000u32.to_le_bytes());
        let g = detect(&img);
        let fat = g.volumes[0].fat.unwrap();
        let set = |img: &mut [u8], n: u64, v: u32| {
            let at = (fat.table + 4 * n) as usize;
            img[at..at + 4].copy_from_slice(&v.to_le_bytes());
        };
        for n in 10..20 {
            set(&mut img, n, 0x0FFF_FFFF);
        }
        let off = |n: u64| fat.data + (n - 2) * 512;
        let mut m = AllocMaps::new(&g);
        assert_eq!(
            m.status(&img, [(off(10), 10 * 512)]),
            Some(Alloc::Allocated)
        );
        assert_eq!(m.status(&img, [(off(20), 512)]), Some(Alloc::Unallocated));
        assert_eq!(m.status(&img, [(off(19), 1024)]), Some(Alloc::Partly));
        assert_eq!(
            m.status(&img, [(off(10), 100), (off(30), 100)]),
            Some(Alloc::Partly)
        );
        // One byte of a cluster is the cluster.
        assert_eq!(m.status(&img, [(off(19) + 511, 1)]), Some(Alloc::Allocated));
        assert_eq!(m.status(&img, []), None);
        assert!(m.bytes_read() <= 2 * PIECE);
        // Clusters 10..20 and the area before cluster 2 (the table is read
        // in full, within the volume's clusters).
        assert!(m.any_map(&img));
        let before = fat.data;
        assert_eq!(m.allocated_bytes(&img), Some(before + 10 * 512));
        bits_agree(&img);
        // No file system: not known.
        let raw = vec![0u8; 1 << 16];
        let mut m = AllocMaps::new(&detect(&raw));
        assert_eq!(m.status(&raw, [(0, 4096)]), None);
        assert!(!m.any_map(&raw));
        assert_eq!(m.allocated_bytes(&raw), Some(0));
    }

    #[test]
    fn a_hostile_fat_costs_what_the_files_cover() {
        // A cluster count of 2^32 declared: only the pieces holding the
        // clusters asked for are read.
        let mut img = vec![0u8; 1 << 20];
        super::super::tests::fat32(&mut img, 0, 1, 32, 1000);
        img[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        let g = detect(&img);
        let fat = g.volumes[0].fat.unwrap();
        assert_eq!(fat.entries, 1000 * 512 / 4);
        let mut m = AllocMaps::new(&g);
        let data = fat.data;
        assert_eq!(m.status(&img, [(data, 4096)]), Some(Alloc::Unallocated));
        assert_eq!(m.bytes_read(), PIECE);
        // Past the image: not known (no partition table).
        assert_eq!(m.status(&img, [(u64::MAX - 10, 5), (data, 10)]), None);
        assert_eq!(m.status(&img, [(u64::MAX - 10, 50)]), None);
    }

    #[test]
    fn ext_bitmaps_tell_allocation() {
        // ext2, 1 KiB blocks, one group of 1024 blocks; group descriptors at
        // block 2, the block bitmap at block 5.
        let mut img = crate::carve::geometry::tests::ext2_volume(1024, 1 << 20);
        let sb = 1024;
        img[sb + 4..sb + 8].copy_from_slice(&1000u32.to_le_bytes()); // blocks
        img[sb + 0x14..sb + 0x18].copy_from_slice(&1u32.to_le_bytes()); // first data block
        img[sb + 0x20..sb + 0x24].copy_from_slice(&8192u32.to_le_bytes()); // per group
        img[sb + 0x28..sb + 0x2C].copy_from_slice(&128u32.to_le_bytes()); // inodes per group
        img[2048..2052].copy_from_slice(&5u32.to_le_bytes());
        // Blocks 1..=99 allocated (bits 0..=98).
        for bit in 0..99usize {
            img[5 * 1024 + bit / 8] |= 1 << (bit % 8);
        }
        let g = detect(&img);
        let mut m = AllocMaps::new(&g);
        assert_eq!(m.status(&img, [(50 * 1024, 4096)]), Some(Alloc::Allocated));
        assert_eq!(
            m.status(&img, [(200 * 1024, 4096)]),
            Some(Alloc::Unallocated)
        );
        assert_eq!(m.status(&img, [(98 * 1024, 4096)]), Some(Alloc::Partly));
        // Block 0 (before the first group) and blocks 1..=99.
        assert_eq!(m.allocated_bytes(&img), Some(100 * 1024));
        bits_agree(&img);
        // Past the volume's blocks: no file's.
        assert_eq!(
            m.status(&img, [(1000 * 1024, 24 * 1024)]),
            Some(Alloc::Unallocated)
        );
        // An uninitialised group: its data blocks free.
        img[2048 + 0x12] = 2;
        let mut m = AllocMaps::new(&detect(&img));
        assert_eq!(
            m.status(&img, [(50 * 1024, 4096)]),
            Some(Alloc::Unallocated)
        );
        // A bitmap block out of the volume: not known.
        img[2048 + 0x12] = 0;
        img[2048..2052].copy_from_slice(&5000u32.to_le_bytes());
        let mut m = AllocMaps::new(&detect(&img));
        assert_eq!(m.status(&img, [(50 * 1024, 4096)]), None);
    }

    #[test]
    fn the_exfat_bitmap_tells_allocation() {
        // 512-byte sectors and clusters, the FAT at sector 24, the cluster
        // heap at sector 64, 100 clusters, the root directory at cluster 4,
        // the bitmap (13 bytes) at cluster 2.
        let mut img = vec![0u8; 1 << 20];
        img[3..11].copy_from_slice(b"EXFAT   ");
        img[80..84].copy_from_slice(&24u32.to_le_bytes());
        img[88..92].copy_from_slice(&64u32.to_le_bytes());
        img[92..96].copy_from_slice(&100u32.to_le_bytes());
        img[96..100].copy_from_slice(&4u32.to_le_bytes());
        img[108] = 9;
        img[510] = 0x55;
        img[511] = 0xAA;
        let (fat, heap) = (24 * 512, 64 * 512);
        let cl = |n: usize| heap + (n - 2) * 512;
        img[fat + 8..fat + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = cl(4);
        img[e] = 0x81;
        img[e + 20..e + 24].copy_from_slice(&2u32.to_le_bytes());
        img[e + 24..e + 32].copy_from_slice(&13u64.to_le_bytes());
        img[cl(2)] = 0xFF; // clusters 2..=9
        let g = detect(&img);
        assert_eq!(g.volumes[0].fs, "exFAT");
        let mut m = AllocMaps::new(&g);
        let at = |n: usize| cl(n) as u64;
        assert_eq!(m.status(&img, [(at(5), 1024)]), Some(Alloc::Allocated));
        assert_eq!(m.status(&img, [(at(20), 4096)]), Some(Alloc::Unallocated));
        assert_eq!(m.status(&img, [(at(9), 1024)]), Some(Alloc::Partly));
        assert_eq!(m.allocated_bytes(&img), Some(heap as u64 + 8 * 512));
        bits_agree(&img);
        // The bitmap's length must fit the cluster count: else not known.
        img[e + 24..e + 32].copy_from_slice(&1000u64.to_le_bytes());
        let mut m = AllocMaps::new(&detect(&img));
        assert_eq!(m.status(&img, [(at(5), 1024)]), None);
    }

    #[test]
    fn outside_the_volumes_of_a_partitioned_image() {
        // MBR: one FAT32 partition at sector 2048 (1 MiB), 2 MiB long.
        let mut img = vec![0u8; 4 << 20];
        img[510] = 0x55;
        img[511] = 0xAA;
        img[446 + 4] = 0x0C;
        img[446 + 8..446 + 12].copy_from_slice(&2048u32.to_le_bytes());
        img[446 + 12..446 + 16].copy_from_slice(&4096u32.to_le_bytes());
        super::super::tests::fat32(&mut img, 1 << 20, 1, 32, 100);
        img[(1 << 20) + 32..(1 << 20) + 36].copy_from_slice(&200_000u32.to_le_bytes());
        let g = detect(&img);
        assert_eq!(g.volumes.len(), 1);
        let mut m = AllocMaps::new(&g);
        assert_eq!(m.status(&img, [(3 << 20, 4096)]), Some(Alloc::Unallocated));
        assert_eq!(m.status(&img, [(4096, 4096)]), Some(Alloc::Unallocated));
        // Across the partition's start: its first sectors are the file system's.
        assert_eq!(
            m.status(&img, [((1 << 20) - 512, 1024)]),
            Some(Alloc::Partly)
        );
        bits_agree(&img);
        // A second partition whose file system is not recognised: not known.
        img[446 + 16 + 4] = 0x83;
        img[446 + 16 + 8..446 + 16 + 12].copy_from_slice(&6144u32.to_le_bytes());
        img[446 + 16 + 12..446 + 16 + 16].copy_from_slice(&1024u32.to_le_bytes());
        let mut m = AllocMaps::new(&detect(&img));
        assert_eq!(m.status(&img, [(3 << 20, 4096)]), None);
        assert_eq!(m.status(&img, [(4096, 4096)]), Some(Alloc::Unallocated));
    }
}
