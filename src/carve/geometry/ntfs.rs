//! NTFS: the few records gpucarve reads, for allocation ([`super::alloc`])
//! and original names ([`super::names`]).
//!
//! * the boot sector: bytes per sector, sectors per cluster, the volume's
//!   sector count, the first cluster of `$MFT` and the size of a file
//!   record (a power of two from 512 bytes to [`MAX_RECORD`]);
//! * `$MFT` (record 0): the run list of its unnamed `$DATA` attribute (the
//!   one starting at VCN 0; an MFT so fragmented that it continues in an
//!   attribute list is read as far as record 0 maps it);
//! * `$Bitmap` (record 6, its `$FILE_NAME` checked): the run list of its
//!   `$DATA`, one bit per cluster, least significant bit first;
//! * any record ([`Ntfs::record`]): its update sequence applied (the last
//!   two bytes of every 512-byte stride must hold the update sequence
//!   number; else the record is torn and not read).
//!
//! Bounded whatever the volume says: a record's attributes are walked
//! inside the record (each at least 16 bytes, 8-aligned), a run list inside
//! its attribute and to at most [`MAX_RUNS`] runs, every cluster number
//! range-checked against the volume, and no length field sizes an
//! allocation beyond a record.

use super::{Volume, le16, le32, le64};
use crate::carve::reader::ByteReader;

/// Largest file record read.
pub const MAX_RECORD: u64 = 64 << 10;
/// Most runs of a run list decoded.
pub const MAX_RUNS: usize = 4096;
/// The update sequence's stride.
const STRIDE: usize = 512;
/// Records read at a time ([`Ntfs::each_record`]).
const BATCH: u64 = 64;

/// Attribute types read.
pub const STANDARD_INFORMATION: u32 = 0x10;
pub const FILE_NAME: u32 = 0x30;
pub const DATA: u32 = 0x80;

/// A piece of an attribute's data: `len` bytes at `file` in the data, at
/// `image` in the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub file: u64,
    pub image: u64,
    pub len: u64,
}

/// An NTFS volume's `$MFT`, as its boot sector and record 0 place it.
#[derive(Clone, Debug)]
pub struct Ntfs {
    /// Image offset of the volume.
    pub start: u64,
    pub cluster: u64,
    /// Clusters the volume holds (the boot sector's count, within the
    /// volume's bytes).
    pub clusters: u64,
    /// Bytes per file record.
    pub record: u64,
    /// Where `$MFT`'s data lies, and how many bytes of it are mapped.
    pub mft: Vec<Extent>,
    pub mft_len: u64,
}

impl Ntfs {
    /// Reads `vol`'s boot sector and `$MFT` record (`None`: not an NTFS
    /// volume whose boot sector and record 0 read and agree).
    pub fn open(r: &dyn ByteReader, vol: &Volume) -> Option<Ntfs> {
        if vol.fs != "NTFS" {
            return None;
        }
        let mut b = [0u8; 512];
        if r.read_at(vol.start, &mut b) != b.len() || &b[3..11] != b"NTFS    " {
            return None;
        }
        let bps = le16(&b, 11);
        let cluster = vol.cluster;
        let record = match b[0x40] {
            n @ 1..=0x7F => u64::from(n).checked_mul(cluster)?,
            n => 1u64.checked_shl(256 - u32::from(n))?,
        };
        if !record.is_power_of_two() || !(512..=MAX_RECORD).contains(&record) {
            return None;
        }
        let bytes = le64(&b, 0x28)
            .checked_mul(bps)?
            .min(vol.end.checked_sub(vol.start)?);
        let clusters = bytes / cluster;
        let mft_lcn = le64(&b, 0x30);
        if mft_lcn >= clusters {
            return None;
        }
        let mut v = Ntfs {
            start: vol.start,
            cluster,
            clusters,
            record,
            mft: vec![Extent {
                file: 0,
                image: vol.start.checked_add(mft_lcn.checked_mul(cluster)?)?,
                len: record,
            }],
            mft_len: record,
        };
        let rec0 = v.record(r, 0)?;
        let (mft, len) = v.data_runs(&rec0)?;
        if len < record {
            return None;
        }
        v.mft = mft;
        v.mft_len = len;
        Some(v)
    }

    /// Records `$MFT` holds (as far as it is mapped).
    pub fn records(&self) -> u64 {
        self.mft_len / self.record
    }

    /// Calls `f(record number, record)` for every record of `$MFT` in
    /// its first `max_bytes`, its update sequence applied (torn ones and
    /// those that are not `FILE` records skipped), read [`BATCH`] at a
    /// time; the records read.
    pub fn each_record(
        &self,
        r: &dyn ByteReader,
        max_bytes: u64,
        mut f: impl FnMut(u64, &[u8]),
    ) -> u64 {
        let total = self.records().min(max_bytes / self.record);
        let mut buf = vec![0u8; (BATCH * self.record) as usize];
        let mut n = 0u64;
        while n < total {
            let k = BATCH.min(total - n);
            let b = &mut buf[..(k * self.record) as usize];
            let got = read_mapped(r, &self.mft, n * self.record, b);
            for (i, rec) in b[..got].chunks_exact_mut(self.record as usize).enumerate() {
                if fixup(rec) {
                    f(n + i as u64, rec);
                }
            }
            if got < b.len() {
                return n + (got as u64) / self.record;
            }
            n += k;
        }
        n
    }

    /// Record `n`, its update sequence applied (`None`: outside `$MFT`,
    /// unreadable, not a `FILE` record, or torn).
    pub fn record(&self, r: &dyn ByteReader, n: u64) -> Option<Vec<u8>> {
        let at = n.checked_mul(self.record)?;
        if at.checked_add(self.record)? > self.mft_len {
            return None;
        }
        let mut b = vec![0u8; self.record as usize];
        if read_mapped(r, &self.mft, at, &mut b) != b.len() {
            return None;
        }
        fixup(&mut b).then_some(b)
    }

    /// The extents of the unnamed `$DATA` attribute (from VCN 0) of
    /// record `rec`, and its data size within them.
    pub fn data_runs(&self, rec: &[u8]) -> Option<(Vec<Extent>, u64)> {
        let a = attrs(rec).find(|a| a.kind == DATA && a.name_len() == 0)?;
        if !a.non_resident() || le64(a.bytes, 0x10) != 0 {
            return None;
        }
        let mut out = Vec::new();
        let mut file = 0u64;
        for run in self.image_runs(a.runs()?)? {
            let (image, bytes) = run?;
            out.push(Extent {
                file,
                image,
                len: bytes,
            });
            file = file.checked_add(bytes)?;
        }
        Some((out, le64(a.bytes, 0x30).min(file)))
    }

    /// The runs of run list `list` in the image, `(offset, bytes)`, in
    /// order: an item is `None` where its run is sparse or leaves the
    /// volume (`None` for a malformed list, [`runs`]).
    pub fn image_runs(&self, list: &[u8]) -> Option<impl Iterator<Item = Option<(u64, u64)>> + '_> {
        Some(runs(list, MAX_RUNS)?.into_iter().map(|(lcn, len)| {
            let lcn = lcn?;
            if lcn.checked_add(len)? > self.clusters {
                return None;
            }
            let image = self.start.checked_add(lcn.checked_mul(self.cluster)?)?;
            Some((image, len.checked_mul(self.cluster)?))
        }))
    }

    /// `$Bitmap`'s extents and its length in bytes (`None`: record 6 is
    /// not `$Bitmap`, or its data does not cover the volume's clusters).
    pub fn bitmap(&self, r: &dyn ByteReader) -> Option<(Vec<Extent>, u64)> {
        let rec = self.record(r, 6)?;
        let named = attrs(&rec)
            .filter(|a| a.kind == FILE_NAME)
            .filter_map(|a| file_name(a.value()?))
            .any(|f| f.name == "$Bitmap");
        if !named {
            return None;
        }
        let (ext, len) = self.data_runs(&rec)?;
        (len >= self.clusters.div_ceil(8)).then_some((ext, len))
    }
}

/// Reads `buf.len()` bytes at `at` of the data `ext` maps (fewer: the
/// extents or the image end first).
pub fn read_mapped(r: &dyn ByteReader, ext: &[Extent], at: u64, buf: &mut [u8]) -> usize {
    let mut done = 0usize;
    while done < buf.len() {
        let pos = at + done as u64;
        // Extents come in file order: the last one starting at or before `pos`.
        let i = ext.partition_point(|e| e.file <= pos);
        let Some(e) = i.checked_sub(1).and_then(|i| ext.get(i)) else {
            break;
        };
        if pos - e.file >= e.len {
            break;
        }
        let n = ((e.len - (pos - e.file)) as usize).min(buf.len() - done);
        let got = r.read_at(e.image + (pos - e.file), &mut buf[done..done + n]);
        done += got;
        if got < n {
            break;
        }
    }
    done
}

/// Applies a `FILE` record's update sequence in place: false when the
/// header is not one, or a stride's last two bytes are not the sequence
/// number (a torn write).
pub fn fixup(rec: &mut [u8]) -> bool {
    if rec.len() < STRIDE || !rec.len().is_multiple_of(STRIDE) || rec.get(..4) != Some(b"FILE") {
        return false;
    }
    let (off, count) = (le16(rec, 4) as usize, le16(rec, 6) as usize);
    if count != rec.len() / STRIDE + 1 || !off.is_multiple_of(2) || off + 2 * count > rec.len() {
        return false;
    }
    let usn = [rec[off], rec[off + 1]];
    for i in 1..count {
        let end = i * STRIDE;
        if rec[end - 2..end] != usn {
            return false;
        }
        rec[end - 2] = rec[off + 2 * i];
        rec[end - 1] = rec[off + 2 * i + 1];
    }
    true
}

/// One attribute of a record: its type and its bytes (header included).
#[derive(Clone, Copy)]
pub struct Attr<'a> {
    pub kind: u32,
    pub bytes: &'a [u8],
}

impl<'a> Attr<'a> {
    pub fn non_resident(&self) -> bool {
        self.bytes[8] != 0
    }

    pub fn name_len(&self) -> u8 {
        self.bytes[9]
    }

    /// A resident attribute's value.
    pub fn value(&self) -> Option<&'a [u8]> {
        if self.non_resident() {
            return None;
        }
        let (len, off) = (le32(self.bytes, 0x10), le16(self.bytes, 0x14));
        self.bytes
            .get(usize::try_from(off).ok()?..usize::try_from(off.checked_add(len)?).ok()?)
    }

    /// A non-resident attribute's run list bytes.
    pub fn runs(&self) -> Option<&'a [u8]> {
        if !self.non_resident() || self.bytes.len() < 0x40 {
            return None;
        }
        self.bytes.get(le16(self.bytes, 0x20) as usize..)
    }

    /// A non-resident attribute's first VCN and data size.
    pub fn first_vcn(&self) -> u64 {
        le64(self.bytes, 0x10)
    }

    pub fn data_size(&self) -> u64 {
        le64(self.bytes, 0x30)
    }
}

/// The attributes of a record (fixed up), in order, up to the end marker,
/// the record's used bytes or the first that does not fit.
pub fn attrs(rec: &[u8]) -> impl Iterator<Item = Attr<'_>> {
    let end = (le32(rec, 0x18) as usize).min(rec.len());
    let mut pos = le16(rec, 0x14) as usize;
    std::iter::from_fn(move || {
        if pos.checked_add(16)? > end {
            return None;
        }
        let kind = le32(rec, pos) as u32;
        let len = le32(rec, pos + 4) as usize;
        if kind == 0xFFFF_FFFF || len < 16 || !len.is_multiple_of(8) || len > end - pos {
            return None;
        }
        let a = Attr {
            kind,
            bytes: &rec[pos..pos + len],
        };
        pos += len;
        Some(a)
    })
}

/// A run list's runs: (first cluster, or `None` for a sparse run; length
/// in clusters). `None`: malformed (a field wider than 8 bytes, a zero
/// length, a cluster number below 0), longer than `max` runs, or cut short.
pub fn runs(b: &[u8], max: usize) -> Option<Vec<(Option<u64>, u64)>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut lcn = 0i64;
    loop {
        let h = *b.get(pos)?;
        if h == 0 {
            return Some(out);
        }
        let (ls, os) = (usize::from(h & 15), usize::from(h >> 4));
        if ls == 0 || ls > 8 || os > 8 || out.len() >= max {
            return None;
        }
        let field = b.get(pos + 1..pos + 1 + ls + os)?;
        let len = le_n(&field[..ls]);
        if len == 0 || len > 1 << 48 {
            return None;
        }
        if os == 0 {
            out.push((None, len));
        } else {
            let mut delta = le_n(&field[ls..]) as i64;
            if os < 8 && field[ls + os - 1] & 0x80 != 0 {
                delta |= -1i64 << (8 * os);
            }
            lcn = lcn.checked_add(delta)?;
            out.push((Some(u64::try_from(lcn).ok()?), len));
        }
        pos += 1 + ls + os;
    }
}

/// An unsigned little-endian number of up to 8 bytes.
fn le_n(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |n, &x| (n << 8) | u64::from(x))
}

/// A `$FILE_NAME` value's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileName {
    /// The parent directory's record number and sequence number.
    pub parent: u64,
    pub parent_seq: u16,
    /// 0 POSIX, 1 Win32, 2 DOS (8.3), 3 Win32 and DOS.
    pub namespace: u8,
    pub name: String,
}

/// Reads a `$FILE_NAME` value (`None`: shorter than its name says).
pub fn file_name(v: &[u8]) -> Option<FileName> {
    let n = usize::from(*v.get(0x40)?);
    let units: Vec<u16> = v
        .get(0x42..0x42 + 2 * n)?
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    Some(FileName {
        parent: le64(v, 0) & 0xFFFF_FFFF_FFFF,
        parent_seq: le16(v, 6) as u16,
        namespace: v[0x41],
        name: String::from_utf16_lossy(&units),
    })
}

/// An NTFS time (100 ns units since 1601) as seconds since 1970 (`None`:
/// zero).
pub fn unix_secs(t: u64) -> Option<i64> {
    (t != 0).then(|| (t / 10_000_000) as i64 - 11_644_473_600)
}

/// A volume around `mft` for tests and the `fs_ntfs` fuzz target: a boot
/// sector (512-byte sectors and clusters, 1 KiB records, `$MFT` at cluster
/// 2), a blank sector, then `mft` from cluster 2 on. An input that starts
/// with an NTFS boot sector of its own is the volume itself.
pub fn with_boot_sector(mft: &[u8]) -> Vec<u8> {
    if mft.get(3..11) == Some(b"NTFS    ") {
        return mft.to_vec();
    }
    let mut img = vec![0u8; 1024];
    img[..11].copy_from_slice(b"\xEB\x52\x90NTFS    ");
    img[11..13].copy_from_slice(&512u16.to_le_bytes());
    img[13] = 1;
    let sectors = (1024 + mft.len() as u64).div_ceil(512);
    img[0x28..0x30].copy_from_slice(&sectors.to_le_bytes());
    img[0x30..0x38].copy_from_slice(&2u64.to_le_bytes());
    img[0x40] = 0xF6;
    img[510..512].copy_from_slice(&[0x55, 0xAA]);
    img.extend_from_slice(mft);
    img
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::alloc::{Alloc, AllocMaps};
    use super::super::{detect, names::NameMaps};
    use super::*;

    /// `fuzz/seeds/ntfs_synthetic.py`'s volume: 12 records, `$Bitmap` at
    /// cluster 26, /a.jpg at 27..=28, /D/b.png (deleted) at 29, c in a
    /// directory that is its own parent at 30.
    const SYNTHETIC: &[u8] = include_bytes!("../../../fuzz/seeds/ntfs_synthetic.bin");

    #[test]
    fn a_synthetic_volume_allocation_and_names() {
        let img = with_boot_sector(SYNTHETIC);
        let g = detect(&img);
        assert_eq!((g.volumes.len(), g.volumes[0].fs), (1, "NTFS"));
        let cl = |n: u64| n * 512;
        let mut m = AllocMaps::new(&g);
        assert_eq!(m.status(&img, [(cl(27), 1024)]), Some(Alloc::Allocated));
        assert_eq!(m.status(&img, [(cl(29), 300)]), Some(Alloc::Unallocated));
        assert_eq!(m.status(&img, [(cl(28), 1024)]), Some(Alloc::Partly));
        assert_eq!(m.allocated_bytes(&img), Some(30 * 512));
        let mut n = NameMaps::new(&g);
        let a = n.lookup(&img, cl(27)).expect("a.jpg");
        assert_eq!(
            (a.path.as_str(), a.deleted, a.size),
            ("/a.jpg", false, 1000)
        );
        assert_eq!(a.created.as_deref(), Some("2019-04-17T18:40:00Z"));
        assert_eq!(a.modified.as_deref(), Some("2019-04-17T18:40:01Z"));
        assert_eq!(a.accessed.as_deref(), Some("2019-04-17T18:40:02Z"));
        let b = n.lookup(&img, cl(29)).expect("b.png");
        assert_eq!((b.path.as_str(), b.deleted), ("/D/b.png", true));
        let c = n.lookup(&img, cl(30)).expect("c");
        assert_eq!(c.path, "/$OrphanFiles/L/c");
        assert_eq!(n.lookup(&img, cl(2)).map(|x| x.path), Some("/$MFT".into()));
        assert_eq!(n.lookup(&img, cl(28)), None);
        // A torn record (a stride's last bytes not the sequence number) is
        // not read: a.jpg loses its name, not its allocation.
        let mut torn = img.clone();
        torn[1024 + 8 * 1024 + 510] ^= 1;
        assert_eq!(NameMaps::new(&detect(&torn)).lookup(&torn, cl(27)), None);
        // $Bitmap's run past the volume: allocation not known.
        let mut far = img.clone();
        let rec6 = 1024 + 6 * 1024;
        let at = rec6
            + far[rec6..rec6 + 1024]
                .windows(4)
                .position(|w| w == [0x11, 1, 26, 0])
                .expect("run list");
        far[at + 2] = 200;
        assert_eq!(
            AllocMaps::new(&detect(&far)).status(&far, [(cl(27), 512)]),
            None
        );
    }

    #[test]
    fn run_lists() {
        // 5 clusters at 0xA00, 3 sparse, 2 at 0xA00 - 0x10.
        let b = [0x21, 5, 0x00, 0x0A, 0x01, 3, 0x11, 2, 0xF0, 0];
        assert_eq!(
            runs(&b, 10),
            Some(vec![(Some(0xA00), 5), (None, 3), (Some(0x9F0), 2)])
        );
        assert_eq!(runs(&b, 2), None);
        // Cut short, a zero length, a 9-byte field, a cluster below 0.
        assert_eq!(runs(&b[..8], 10), None);
        assert_eq!(runs(&[0x11, 0, 1, 0], 10), None);
        assert_eq!(runs(&[0x19, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0], 10), None);
        assert_eq!(runs(&[0x11, 1, 0xFF, 0], 10), None);
    }

    #[test]
    fn update_sequences() {
        let mut rec = vec![0u8; 1024];
        rec[..4].copy_from_slice(b"FILE");
        rec[4..6].copy_from_slice(&48u16.to_le_bytes());
        rec[6..8].copy_from_slice(&3u16.to_le_bytes());
        rec[48..54].copy_from_slice(&[7, 0, 0xAA, 0xBB, 0xCC, 0xDD]);
        rec[510..512].copy_from_slice(&[7, 0]);
        rec[1022..1024].copy_from_slice(&[7, 0]);
        let mut ok = rec.clone();
        assert!(fixup(&mut ok));
        assert_eq!(
            (&ok[510..512], &ok[1022..1024]),
            (&[0xAA, 0xBB][..], &[0xCC, 0xDD][..])
        );
        // A torn stride, a count that does not fit the record.
        rec[1022] = 8;
        assert!(!fixup(&mut rec.clone()));
        rec[1022] = 7;
        rec[6] = 200;
        assert!(!fixup(&mut rec));
    }

    #[test]
    fn attribute_walk_stays_in_the_record() {
        let mut rec = vec![0u8; 1024];
        rec[0x14] = 0x38;
        rec[0x18..0x1C].copy_from_slice(&1024u32.to_le_bytes());
        rec[0x38..0x3C].copy_from_slice(&0x10u32.to_le_bytes());
        rec[0x3C..0x40].copy_from_slice(&24u32.to_le_bytes());
        // The next claims more than the record holds.
        rec[0x50..0x54].copy_from_slice(&0x30u32.to_le_bytes());
        rec[0x54..0x58].copy_from_slice(&4096u32.to_le_bytes());
        let kinds: Vec<u32> = attrs(&rec).map(|a| a.kind).collect();
        assert_eq!(kinds, [0x10]);
        assert_eq!(unix_secs(116_444_736_000_000_000), Some(0));
    }
}
