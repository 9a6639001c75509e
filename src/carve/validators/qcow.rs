//! QEMU copy-on-write disk images: qcow (version 1) and qcow2 (versions 2
//! and 3).
//!
//! Structure (QEMU `docs/interop/qcow2.txt`; `block/qcow.c` for version 1),
//! big-endian throughout. Version 1: magic `QFI\xfb`, version, backing file
//! offset and size, mtime, virtual size, `cluster_bits`, `l2_bits`,
//! `crypt_method`, L1 table offset; the L1 table points at L2 tables of
//! `8 << l2_bits` bytes whose entries point at data clusters (bit 63: a
//! compressed cluster, its byte size in the bits below it). Versions 2/3:
//! magic, version, backing file, `cluster_bits`, virtual size,
//! `crypt_method`, `l1_size`, L1 offset, refcount table offset and clusters,
//! snapshot count and offset; version 3 adds feature bits, `refcount_order`
//! and `header_length`, then header extensions. Every cluster in use has a
//! nonzero refcount in the refcount blocks the refcount table points at.
//!
//! There is no end marker. Version 1: the file ends at the furthest
//! structure (the L1 table, written in whole 512-byte sectors, L2 tables,
//! data clusters, compressed data). Versions 2/3: the last cluster in use is
//! the last one with a nonzero refcount (or a structure past it, when a
//! lazy-refcount image was not closed cleanly); the file ends inside it, at
//! the furthest end of the structures that may end inside a cluster (the L1
//! table, the snapshot table (its last entry unpadded), each snapshot's L1
//! table, compressed data, a data cluster of subclusters (extended L2: up to
//! its last allocated subcluster), the bitmap directory and bitmap tables),
//! or at the cluster's end when none ends there (data clusters, L2 tables,
//! refcount blocks are whole clusters). Measured on qemu-img 10.0's images:
//! every one of the 17 variants in `corpora/wild/exec` ends there, and so do
//! imago's. A version 3 image with no feature name table (qcow2-rs, which
//! writes its tables in whole 512-byte blocks) ends at the end of that
//! 512-byte block when the bytes up to it are zero.
//!
//! Checked: magic and version, cluster size 512 B to 2 MiB, a known
//! encryption method, only known incompatible feature bits, `refcount_order`
//! at most 6, L1, refcount table and L2 offsets cluster-aligned with no
//! reserved bits set, every table inside the window.
//!
//! * `None`: a header check fails.
//! * `Complete`: the extent lies inside the window; length = extent.
//! * `Partial`: a table or the extent runs past the window (length =
//!   window).
//!
//! Work: the L1 table and the tables it points at are read once each up to
//! a budget of the window's length and at most [`MAX_TABLE_BYTES`] (a valid
//! image never reads more than its own bytes), the refcount table and its
//! blocks only over the clusters the window holds, and at most
//! [`MAX_SNAPSHOTS`] snapshot and [`MAX_BITMAPS`] bitmap entries.

use super::Verdict;
use super::read::Src;

/// Snapshot table entries read at most.
pub const MAX_SNAPSHOTS: u32 = 65_536;
/// Bitmap directory entries read at most.
pub const MAX_BITMAPS: u32 = 65_535;
/// L1 and L2 table bytes read at most (a 4 GiB image of 512-byte clusters
/// has 64 MiB of L2 tables).
pub const MAX_TABLE_BYTES: u64 = 64 << 20;
/// Bits 9..55 of an L1/L2/refcount table entry: the offset.
const OFFSET_MASK: u64 = 0x00FF_FFFF_FFFF_FE00;

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"QFI\xFB") {
        return None;
    }
    match src.u32be(4)? {
        1 => v1(src),
        2 | 3 => v2(src),
        _ => None,
    }
}

fn cut(src: &Src) -> Option<Verdict> {
    Some(Verdict::partial(src.len(), src.cut_note()))
}

/// Reads `n` big-endian u64 entries at `off` in pieces, calling `f` with
/// each (index, value); false when they are not all in the window.
fn each_u64(src: &Src, off: u64, n: u64, mut f: impl FnMut(u64, u64)) -> bool {
    let Some(len) = n.checked_mul(8) else {
        return false;
    };
    if !src.has(off, len) {
        return false;
    }
    let mut buf = [0u8; 4096];
    let mut i = 0u64;
    while i < n {
        let k = (n - i).min(512);
        let b = &mut buf[..(k * 8) as usize];
        if !src.read_exact(off + i * 8, b) {
            return false;
        }
        for (j, c) in b.chunks_exact(8).enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            f(i + j as u64, u64::from_be_bytes(a));
        }
        i += k;
    }
    true
}

fn v1(src: Src) -> Option<Verdict> {
    if !src.has(0, 48) {
        return cut(&src);
    }
    let backing_off = src.u64be(8)?;
    let backing_len = u64::from(src.u32be(16)?);
    let size = src.u64be(24)?;
    let cluster_bits = u32::from(src.u8(32)?);
    let l2_bits = u32::from(src.u8(33)?);
    let crypt = src.u32be(36)?;
    let l1_off = src.u64be(40)?;
    if !(9..=16).contains(&cluster_bits)
        || !(6..=16).contains(&l2_bits)
        || crypt > 1
        || l1_off < 48
        || l1_off % 8 != 0
        || backing_len > 1023
    {
        return None;
    }
    let shift = cluster_bits + l2_bits;
    let l1_size = size.div_ceil(1u64 << shift);
    let cluster = 1u64 << cluster_bits;
    let l2_len = 8u64 << l2_bits;
    let mut end = 48u64;
    if backing_len > 0 {
        end = end.max(backing_off.checked_add(backing_len)?);
    }
    // The L1 table is written in whole sectors.
    end = end.max(l1_off.checked_add(l1_size.checked_mul(8)?.next_multiple_of(512))?);
    let mut l2s = Vec::new();
    let mut bad = false;
    if !each_u64(&src, l1_off, l1_size, |_, e| {
        if e != 0 {
            if e % 512 != 0 {
                bad = true;
            }
            l2s.push(e);
        }
    }) {
        return if src.has(0, l1_off) { cut(&src) } else { None };
    }
    if bad {
        return None;
    }
    let mut budget = src.len().min(MAX_TABLE_BYTES);
    let csize_shift = 63 - cluster_bits;
    for l2 in l2s {
        end = end.max(l2.checked_add(l2_len)?);
        if budget < l2_len {
            return None;
        }
        budget -= l2_len;
        let mut ok = true;
        if !each_u64(&src, l2, l2_len / 8, |_, e| {
            if e == 0 {
                return;
            }
            let e_end = if e >> 63 == 1 {
                let off = e & ((1u64 << csize_shift) - 1);
                let csize = (e >> csize_shift) & (cluster - 1);
                off.checked_add(csize)
            } else if e % 512 != 0 {
                None
            } else {
                e.checked_add(cluster)
            };
            match e_end {
                Some(x) => end = end.max(x),
                None => ok = false,
            }
        }) {
            return cut(&src);
        }
        if !ok {
            return None;
        }
    }
    if end > src.len() {
        return cut(&src);
    }
    let mut v = Verdict::complete(end);
    v.subtype = Some("qcow".to_string());
    Some(v)
}

/// The structures of a version 2/3 image that may end inside a cluster.
struct Ends {
    /// The furthest end of a structure that can end inside a cluster.
    partial: u64,
    /// The furthest end of a whole-cluster structure.
    whole: u64,
}

/// The last cluster a version 2/3 image's refcount table counts as used
/// (reading only the refcount blocks that count clusters of the window),
/// with the table and its blocks added to `ends`; `Err(verdict)` where the
/// table ends the answer (cut short, or refused).
fn last_used_cluster(
    src: &Src,
    (rt_off, rt_clusters): (u64, u64),
    cs: u64,
    refcount_order: u32,
    ends: &mut Ends,
) -> Result<u64, Option<Verdict>> {
    let rt_len = rt_clusters.checked_mul(cs).ok_or(None)?;
    ends.whole = ends.whole.max(rt_off.checked_add(rt_len).ok_or(None)?);
    if !src.has(rt_off, rt_len) {
        return Err(if src.len() <= rt_off { cut(src) } else { None });
    }
    let refbits = 1u64 << refcount_order;
    let per_block = cs * 8 / refbits;
    let window_clusters = src.len().div_ceil(cs);
    // Only the entries whose blocks count clusters the window holds, and
    // one more (nonzero: the image goes on past the window).
    let rt_read = (rt_len / 8).min(window_clusters.div_ceil(per_block) + 1);
    let mut blocks = Vec::new();
    let mut bad = false;
    each_u64(src, rt_off, rt_read, |i, e| {
        if e != 0 {
            if e & !OFFSET_MASK != 0 || e % cs != 0 {
                bad = true;
            }
            blocks.push((i, e & OFFSET_MASK));
        }
    });
    if bad || blocks.is_empty() {
        return Err(None);
    }
    let mut last_used: Option<u64> = None;
    for &(i, off) in blocks.iter().rev() {
        ends.whole = ends.whole.max(off.checked_add(cs).ok_or(None)?);
        let first = i.checked_mul(per_block).ok_or(None)?;
        if first >= window_clusters {
            // Refcounts of clusters past the window: the image is cut here.
            return Err(cut(src));
        }
        if last_used.is_some() {
            continue;
        }
        if !src.has(off, cs) {
            return Err(cut(src));
        }
        // The last nonzero refcount of this block, from its end.
        let mut k = cs;
        while k > 0 && last_used.is_none() {
            let n = k.min(4096);
            let mut buf = [0u8; 4096];
            let b = &mut buf[..n as usize];
            if !src.read_exact(off + k - n, b) {
                return Err(cut(src));
            }
            if let Some(p) = b.iter().rposition(|&x| x != 0) {
                let bit = (k - n + p as u64) * 8;
                last_used = Some(first + bit / refbits);
            }
            k -= n;
        }
    }
    last_used.ok_or(None)
}

fn v2(src: Src) -> Option<Verdict> {
    let version = src.u32be(4)?;
    if !src.has(0, 72) {
        return cut(&src);
    }
    let backing_off = src.u64be(8)?;
    let backing_len = u64::from(src.u32be(16)?);
    let cluster_bits = src.u32be(20)?;
    let crypt = src.u32be(32)?;
    let l1_size = u64::from(src.u32be(36)?);
    let l1_off = src.u64be(40)?;
    let rt_off = src.u64be(48)?;
    let rt_clusters = u64::from(src.u32be(56)?);
    let nb_snapshots = src.u32be(60)?;
    let snap_off = src.u64be(64)?;
    if !(9..=21).contains(&cluster_bits) || crypt > 2 || backing_len > 1023 {
        return None;
    }
    let cs = 1u64 << cluster_bits;
    let (refcount_order, header_len, incompatible) = if version == 3 {
        if !src.has(0, 104) {
            return cut(&src);
        }
        (src.u32be(96)?, u64::from(src.u32be(100)?), src.u64be(72)?)
    } else {
        (4, 72, 0)
    };
    // Known incompatible bits: dirty, corrupt, external data file,
    // compression type, extended L2.
    if refcount_order > 6
        || incompatible & !0x1F != 0
        || (version == 3 && (header_len < 104 || header_len % 8 != 0 || header_len > cs))
        || l1_off == 0
        || l1_off % cs != 0
        || rt_off == 0
        || rt_off % cs != 0
        || rt_clusters == 0
        || snap_off % cs != 0
        || nb_snapshots > MAX_SNAPSHOTS
    {
        return None;
    }
    let extended_l2 = incompatible & 0x10 != 0;
    let external_data = incompatible & 0x4 != 0;
    let mut ends = Ends {
        partial: header_len,
        whole: cs,
    };
    if backing_len > 0 {
        ends.partial = ends.partial.max(backing_off.checked_add(backing_len)?);
    }
    // Header extensions (version 3, and version 2 images may carry them):
    // the bitmaps extension is the one that points at more structures.
    let (bitmaps, feature_table) = match extensions(&src, header_len, cs) {
        Ok(e) => e,
        Err(v) => return v,
    };
    // The refcount table and the last cluster in use.
    let last_used =
        match last_used_cluster(&src, (rt_off, rt_clusters), cs, refcount_order, &mut ends) {
            Ok(n) => n,
            Err(v) => return v,
        };
    // The active L1 table, its L2 tables and compressed clusters.
    ends.partial = ends
        .partial
        .max(l1_off.checked_add(l1_size.checked_mul(8)?)?);
    let mut budget = src.len().min(MAX_TABLE_BYTES);
    if !l1_walk(
        &src,
        l1_off,
        l1_size,
        cs,
        extended_l2,
        external_data,
        &mut budget,
        &mut ends,
    )? {
        return cut(&src);
    }
    // Snapshots: the table (entries of variable size) and their L1 tables.
    if nb_snapshots > 0 {
        let mut p = snap_off;
        for _ in 0..nb_snapshots {
            if !src.has(p, 40) {
                return cut(&src);
            }
            let sl1_off = src.u64be(p)?;
            let sl1_size = u64::from(src.u32be(p + 8)?);
            let id_len = u64::from(src.u16be(p + 12)?);
            let name_len = u64::from(src.u16be(p + 14)?);
            let extra = u64::from(src.u32be(p + 36)?);
            if sl1_off % cs != 0 || extra > 1 << 16 {
                return None;
            }
            ends.partial = ends
                .partial
                .max(sl1_off.checked_add(sl1_size.checked_mul(8)?)?);
            // The last entry's padding to 8 bytes is not written.
            let entry_end = p + 40 + extra + id_len + name_len;
            ends.partial = ends.partial.max(entry_end);
            p = entry_end.next_multiple_of(8);
        }
    }
    if let Some((n, dir_len, dir_off)) = bitmaps {
        if n > MAX_BITMAPS || dir_off % cs != 0 || dir_len > 64 << 20 {
            return None;
        }
        ends.partial = ends.partial.max(dir_off.checked_add(dir_len)?);
        let dir_end = dir_off + dir_len;
        let mut p = dir_off;
        for _ in 0..n {
            if p + 24 > dir_end {
                return None;
            }
            if !src.has(p, 24) {
                return cut(&src);
            }
            let bt_off = src.u64be(p)?;
            let bt_size = u64::from(src.u32be(p + 8)?);
            let name_len = u64::from(src.u16be(p + 18)?);
            let extra = u64::from(src.u32be(p + 20)?);
            if bt_off % cs != 0 {
                return None;
            }
            ends.partial = ends.partial.max(bt_off.checked_add(bt_size * 8)?);
            p = (p + 24 + extra + name_len).next_multiple_of(8);
        }
    }
    let last_cluster_start = last_used.checked_mul(cs)?;
    let mut end = if ends.partial > last_cluster_start {
        ends.partial
    } else {
        last_cluster_start.checked_add(cs)?
    };
    // A structure past the refcounts (a lazy-refcount image left dirty).
    if ends.whole > end {
        end = ends.whole;
    }
    if end > src.len() {
        return cut(&src);
    }
    if version == 3 && !feature_table {
        end = block_padded(&src, end);
    }
    let mut v = Verdict::complete(end);
    v.subtype = Some("qcow2".to_string());
    Some(v)
}

/// A bitmaps extension's (count, directory size, directory offset).
type Bitmaps = Option<(u32, u64, u64)>;

/// The header extensions from `header_len` to the end marker (inside the
/// first cluster): the bitmaps extension's (count, directory size, offset)
/// and whether a feature name table is among them; `Err` with the verdict
/// when the window ends inside them or an entry is unreadable.
fn extensions(src: &Src, header_len: u64, cs: u64) -> Result<(Bitmaps, bool), Option<Verdict>> {
    let mut bitmaps = None;
    let mut feature_table = false;
    let mut at = header_len;
    while at + 8 <= cs {
        if !src.has(at, 8) {
            return Err(cut(src));
        }
        let (Some(ty), Some(len)) = (src.u32be(at), src.u32be(at + 4)) else {
            return Err(None);
        };
        if ty == 0 {
            break;
        }
        feature_table |= ty == 0x6803_F857;
        if ty == 0x2385_2875 && len >= 24 {
            let (Some(n), Some(size), Some(off)) =
                (src.u32be(at + 8), src.u64be(at + 16), src.u64be(at + 24))
            else {
                return Err(None);
            };
            bitmaps = Some((n, size, off));
        }
        at = at + 8 + u64::from(len).next_multiple_of(8);
    }
    Ok((bitmaps, feature_table))
}

/// `end` (inside the window) moved to the end of its 512-byte block when the
/// bytes up to it are all zero. For version 3 images with no feature name
/// table: QEMU (since 1.1) and imago write one and end the file at the
/// table that ends last, while qcow2-rs writes none and writes its tables
/// (the L1 table of an image too small for a whole cluster of L1 entries)
/// in whole 512-byte blocks.
fn block_padded(src: &Src, end: u64) -> u64 {
    let block = end.next_multiple_of(512);
    let mut pad = [0xFFu8; 512];
    let n = (block - end) as usize;
    if n > 0 && src.read_exact(end, &mut pad[..n]) && pad[..n].iter().all(|&b| b == 0) {
        block
    } else {
        end
    }
}

/// Walks the L1 table at `l1_off` and its L2 tables; Some(false) when one
/// runs past the window, None when an entry is invalid or the budget runs
/// out.
#[allow(clippy::too_many_arguments)]
fn l1_walk(
    src: &Src,
    l1_off: u64,
    l1_size: u64,
    cs: u64,
    extended_l2: bool,
    external_data: bool,
    budget: &mut u64,
    ends: &mut Ends,
) -> Option<bool> {
    let l1_len = l1_size.checked_mul(8)?;
    if *budget < l1_len {
        return None;
    }
    *budget -= l1_len;
    let mut l2s = Vec::new();
    let mut bad = false;
    if !each_u64(src, l1_off, l1_size, |_, e| {
        if e & !(OFFSET_MASK | 1 << 63) != 0 {
            bad = true;
        }
        let off = e & OFFSET_MASK;
        if off != 0 {
            if !off.is_multiple_of(cs) {
                bad = true;
            }
            l2s.push(off);
        }
    }) {
        return Some(false);
    }
    if bad {
        return None;
    }
    let step = if extended_l2 { 2 } else { 1 };
    let cluster_bits = cs.trailing_zeros() as u64;
    for l2 in l2s {
        ends.whole = ends.whole.max(l2.checked_add(cs)?);
        if *budget < cs {
            return None;
        }
        *budget -= cs;
        let mut ok = true;
        let mut prev = 0u64;
        if !each_u64(src, l2, cs / 8, |i, e| {
            if extended_l2 && i % 2 == 1 {
                // The subcluster bitmap of the entry before: its data
                // cluster ends at the last allocated subcluster (qemu
                // writes only those).
                let alloc = e & 0xFFFF_FFFF;
                let off = prev & OFFSET_MASK;
                if prev & (1 << 62) == 0 && off != 0 && alloc != 0 && !external_data {
                    let sub = cs / 32 * u64::from(32 - (alloc as u32).leading_zeros());
                    ends.partial = ends.partial.max(off + sub);
                }
                return;
            }
            prev = e;
            if i % step != 0 || e == 0 {
                return;
            }
            if e & (1 << 62) != 0 {
                // Compressed: offset in bits 0..x-1, additional 512-byte
                // sectors in bits x..61, x = 62 - (cluster_bits - 8).
                let x = 62 - (cluster_bits - 8);
                let off = e & ((1u64 << x) - 1);
                let sectors = ((e >> x) & ((1u64 << (62 - x)) - 1)) + 1;
                let len = sectors * 512 - (off & 511);
                match off.checked_add(len) {
                    Some(end) => ends.partial = ends.partial.max(end),
                    None => ok = false,
                }
            } else {
                let off = e & OFFSET_MASK;
                if !off.is_multiple_of(cs) && off != 0 {
                    ok = false;
                }
                if off != 0 && !external_data && !extended_l2 {
                    ends.whole = ends.whole.max(off + cs);
                }
            }
        }) {
            return Some(false);
        }
        if !ok {
            return None;
        }
    }
    Some(true)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        qcow2(true)
    }

    /// A qcow2 version 3 header: clusters of 2^`bits` bytes, a virtual size,
    /// an L1 table of 2 entries at cluster 3, the refcount table at cluster
    /// 1 (one cluster), refcount order 4, header length 112.
    fn v3_header(v: &mut [u8], bits: u32, size: u64) {
        let cs = 1u64 << bits;
        v[..4].copy_from_slice(b"QFI\xFB");
        v[4..8].copy_from_slice(&3u32.to_be_bytes());
        v[20..24].copy_from_slice(&bits.to_be_bytes());
        v[24..32].copy_from_slice(&size.to_be_bytes());
        v[36..40].copy_from_slice(&2u32.to_be_bytes());
        v[40..48].copy_from_slice(&(3 * cs).to_be_bytes());
        v[48..56].copy_from_slice(&cs.to_be_bytes());
        v[56..60].copy_from_slice(&1u32.to_be_bytes());
        v[96..100].copy_from_slice(&4u32.to_be_bytes());
        v[100..104].copy_from_slice(&112u32.to_be_bytes());
    }

    /// A version 3 image with 512-byte clusters: header (cluster 0),
    /// refcount table (1), refcount block (2), L1 table (3, 2 entries),
    /// L2 table (4), one data cluster (5); with `compressed`, a compressed
    /// cluster of 100 bytes at 6 * 512 + 16 too (the file ends inside
    /// cluster 6).
    pub fn qcow2(compressed: bool) -> Vec<u8> {
        let cs = 512usize;
        let mut v = vec![0u8; cs * 7];
        v3_header(&mut v, 9, 1 << 20);
        // refcount table -> block at cluster 2
        v[cs..cs + 8].copy_from_slice(&(2 * cs as u64).to_be_bytes());
        let used = if compressed { 7 } else { 6 };
        for c in 0..used {
            v[2 * cs + 2 * c..2 * cs + 2 * c + 2].copy_from_slice(&1u16.to_be_bytes());
        }
        // L1 -> L2 at cluster 4 (copied flag set)
        v[3 * cs..3 * cs + 8].copy_from_slice(&((4 * cs) as u64 | 1 << 63).to_be_bytes());
        v[4 * cs..4 * cs + 8].copy_from_slice(&((5 * cs) as u64 | 1 << 63).to_be_bytes());
        v[5 * cs..6 * cs].fill(0xA5);
        if compressed {
            // x = 62 - (9 - 8) = 61; no additional sectors
            let off = (6 * cs + 16) as u64;
            v[4 * cs + 8..4 * cs + 16].copy_from_slice(&(off | 1 << 62).to_be_bytes());
            v[6 * cs + 16..7 * cs].fill(0x5A);
            v
        } else {
            v.truncate(6 * cs);
            v
        }
    }

    /// A version 1 image: header, L1 (one sector), one L2 table of 64
    /// entries (l2_bits 6) and one 512-byte data cluster, each at the next
    /// cluster boundary (as qemu allocates them).
    fn qcow1() -> Vec<u8> {
        let mut v = vec![0u8; 2048];
        v[..4].copy_from_slice(b"QFI\xFB");
        v[4..8].copy_from_slice(&1u32.to_be_bytes());
        v[24..32].copy_from_slice(&(64u64 * 512).to_be_bytes());
        v[32] = 9;
        v[33] = 6;
        v[40..48].copy_from_slice(&48u64.to_be_bytes());
        v[48..56].copy_from_slice(&1024u64.to_be_bytes());
        v[1024..1032].copy_from_slice(&1536u64.to_be_bytes());
        v[1536..].fill(0x33);
        v
    }

    #[test]
    fn valid_images() {
        assert_eq!(
            assert_complete("qcow", &qcow2(false)).as_deref(),
            Some("qcow2")
        );
        assert_eq!(
            assert_complete("qcow", &qcow2(true)).as_deref(),
            Some("qcow2")
        );
        assert_eq!(assert_complete("qcow", &qcow1()).as_deref(), Some("qcow"));
        assert_prefixes_step("qcow", &qcow2(true), 7);
        assert_prefixes_step("qcow", &qcow1(), 5);
    }

    #[test]
    fn rejects_and_hostile() {
        assert!(run("qcow", b"QFI\xFB\x00\x00\x00\x07garbage garbage").is_none());
        let mut f = qcow2(false);
        f[20..24].copy_from_slice(&40u32.to_be_bytes());
        assert!(run("qcow", &f).is_none());
        // An unknown incompatible feature.
        let mut f = qcow2(false);
        f[72..80].copy_from_slice(&(1u64 << 40).to_be_bytes());
        assert!(run("qcow", &f).is_none());
        // A cut image: Partial at the window, never Complete.
        let f = qcow2(true);
        let v = run("qcow", &f[..f.len() - 10]).unwrap();
        assert_eq!(v.status, Status::Partial);
        let lim = Limits {
            max_len: f.len() as u64 - 1,
        };
        assert_ne!(
            run_at("qcow", &f, 0, lim).map(|v| v.status),
            Some(Status::Complete)
        );
        // A hostile L1 size: every entry pointing at the same L2 table is
        // cut off by the budget, not read 2^32 times.
        let mut f = qcow2(false);
        f[36..40].copy_from_slice(&u32::MAX.to_be_bytes());
        let v = run("qcow", &f);
        assert!(v.is_none_or(|v| v.status != Status::Complete));
        let mut f = qcow2(false);
        f.resize(64 << 10, 0);
        for i in 0..64 {
            let at = 3 * 512 + 8 * i;
            f[at..at + 8].copy_from_slice(&(4u64 * 512).to_be_bytes());
        }
        f[36..40].copy_from_slice(&64u32.to_be_bytes());
        let t = std::time::Instant::now();
        let _ = run("qcow", &f);
        assert!(t.elapsed().as_secs() < 2);
        // A hostile refcount table size: bounded by the window.
        let mut f = qcow2(false);
        f[56..60].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(run("qcow", &f).is_none_or(|v| v.status != Status::Complete));
    }

    /// A version 3 image of 4 KiB clusters with nothing allocated: header,
    /// refcount table, refcount block, then an L1 table of two entries that
    /// ends 16 bytes into cluster 3; with `feature_table`, the header
    /// carries a feature name table (as QEMU and imago write it). Zeros
    /// follow, to 8 KiB past the L1 table.
    fn empty_4k(feature_table: bool) -> Vec<u8> {
        let cs = 4096usize;
        let mut v = vec![0u8; 3 * cs + 16 + 8192];
        v3_header(&mut v, 12, 4 << 20);
        if feature_table {
            v[112..116].copy_from_slice(&0x6803_F857u32.to_be_bytes());
            v[116..120].copy_from_slice(&48u32.to_be_bytes());
            v[122..131].copy_from_slice(b"dirty bit");
        }
        v[cs..cs + 8].copy_from_slice(&(2 * cs as u64).to_be_bytes());
        for c in 0..4 {
            v[2 * cs + 2 * c..2 * cs + 2 * c + 2].copy_from_slice(&1u16.to_be_bytes());
        }
        v
    }

    #[test]
    fn l1_in_whole_blocks_without_a_feature_table() {
        let l1_end = 3 * 4096 + 16;
        // qcow2-rs: no feature name table, the L1 table written in a whole
        // 512-byte block.
        let v = run("qcow", &empty_4k(false)).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, 3 * 4096 + 512));
        // QEMU and imago: the file ends at the L1 table's last entry.
        let v = run("qcow", &empty_4k(true)).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, l1_end));
        // Not zeros up to the block's end: not padding.
        let mut f = empty_4k(false);
        f[3 * 4096 + 300] = 7;
        let v = run("qcow", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, l1_end));
        // The window ends inside the block: the L1 table's end stands.
        let f = empty_4k(false);
        let v = run_at(
            "qcow",
            &f,
            0,
            Limits {
                max_len: l1_end + 100,
            },
        )
        .unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, l1_end));
    }
}
