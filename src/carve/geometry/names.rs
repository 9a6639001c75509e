//! What the file system's directories still say of a carved file: the name
//! and path of the directory entry that points at its first cluster.
//!
//! FAT16/32: the root directory (FAT32: the cluster chain from the boot
//! sector's root cluster; FAT16: the fixed region after the tables) and
//! every subdirectory are read, breadth first, as 32-byte entries:
//!
//! * short (8.3) names, lower-cased where the entry's case bits say so;
//!   bytes above `0x7F` read as Latin-1. A deleted entry (`0xE5`) has lost
//!   its name's first character: it is shown as `_`;
//! * long names (`0x0F` entries before the short one), kept only when their
//!   sequence is whole and their checksum is the short name's. A deleted
//!   sequence has lost its ordinals and the short name its first byte:
//!   the parts are taken in directory order, and the checksum is checked
//!   with the long name's first character (upper-cased) in place of the
//!   lost byte; then the long name is whole, first character included;
//! * volume labels, `.` and `..` are skipped; directories are followed,
//!   deleted ones (their chain freed) only through their first cluster and
//!   only when it still starts with a `.`/`..` pair; an entry in a deleted
//!   directory is deleted;
//! * the timestamps are FAT's: local time, no zone (written without one):
//!   modification (2 s), creation (10 ms), access (a date).
//!
//! ext2/3/4 ([`ext`]): the live directory tree from the root inode, each
//! regular file named by the first entry found for its inode, with the
//! inode's size and times (UTC, written with `Z`); deleted names are not
//! read.
//!
//! NTFS ([`ntfs`]): every `$MFT` record, deleted ones included, whose
//! `$DATA` is non-resident, named by its `$FILE_NAME` (Win32 before DOS)
//! under the path its parent references give, with its
//! `$STANDARD_INFORMATION` times (UTC, written with `Z`).
//!
//! A file's entry is found by the image offset of its first cluster; a
//! live entry wins over a deleted one for the same cluster (the cluster was
//! reused). Bounded whatever the volume says: at most [`MAX_DIRS`]
//! directories and [`MAX_ENTRIES`] named files per volume, at most
//! [`MAX_DIR_BYTES`] of one directory and [`MAX_VOLUME_BYTES`] of all of a
//! volume's read, every cluster number range-checked and each cluster
//! read once (a chain that loops or joins another ends there). Read once per
//! carving, when the first file in the volume is reported.

mod ext;
mod ntfs;

use std::collections::{HashMap, HashSet, VecDeque};

use super::{Geometry, Volume, le16, le32};
use crate::carve::reader::ByteReader;

/// Most directories followed per volume.
pub const MAX_DIRS: usize = 65_536;
/// Most files named per volume.
pub const MAX_ENTRIES: usize = 1 << 20;
/// Most bytes of one directory read (FAT's limit: 65 536 entries).
pub const MAX_DIR_BYTES: u64 = 2 << 20;
/// Most bytes of directories read per volume.
pub const MAX_VOLUME_BYTES: u64 = 256 << 20;
/// Most long-name parts (255 characters, 13 a part).
const MAX_LFN_PARTS: usize = 20;

/// A carved file's name as a directory entry gives it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OriginalName {
    /// `/DIR/NAME`, from the volume's root.
    pub path: String,
    /// The entry (or a directory above it) is deleted.
    pub deleted: bool,
    /// The entry's file size.
    pub size: u64,
    /// FAT: local times, no zone: `YYYY-MM-DDTHH:MM:SS`; ext2/3/4 and
    /// NTFS: UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// FAT: a date, `YYYY-MM-DD`; ext2/3/4 and NTFS: a UTC time as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessed: Option<String>,
    /// Image offset of the volume.
    pub volume: u64,
}

/// One directory found: its parent's index, its name, whether deleted.
pub(super) struct Dir {
    pub(super) parent: u32,
    pub(super) name: String,
    pub(super) deleted: bool,
}

/// One file's entry: its directory, name, what the file system keeps of
/// it, whether deleted.
pub(super) struct Entry {
    pub(super) dir: u32,
    pub(super) name: String,
    pub(super) meta: Meta,
    pub(super) deleted: bool,
}

/// A file's size and times as its file system keeps them.
pub(super) enum Meta {
    /// FAT: the raw 32-byte directory entry.
    Fat([u8; 32]),
    /// ext2/3/4: the inode's; NTFS: the record's.
    Ext(ExtMeta),
}

/// An ext2/3/4 inode's (an NTFS record's) size and times (seconds since
/// 1970, UTC).
#[derive(Clone, Copy)]
pub(super) struct ExtMeta {
    pub(super) size: u64,
    pub(super) mtime: Option<i64>,
    pub(super) atime: Option<i64>,
    pub(super) crtime: Option<i64>,
}

/// A volume's names by the image offset of their first cluster.
#[derive(Default)]
pub(super) struct VolNames {
    pub(super) dirs: Vec<Dir>,
    pub(super) files: HashMap<u64, Entry>,
}

/// The directory trees of an image's FAT16/32, ext2/3/4 and NTFS volumes,
/// read on demand.
#[derive(Default)]
pub struct NameMaps {
    volumes: Vec<(Volume, Option<Option<VolNames>>)>,
}

impl NameMaps {
    pub fn new(geo: &Geometry) -> Self {
        NameMaps {
            volumes: geo
                .volumes
                .iter()
                .filter(|v| v.fat.is_some() || is_ext(v) || v.fs == "NTFS")
                .map(|v| (v.clone(), None))
                .collect(),
        }
    }

    /// No FAT16/32, ext2/3/4 or NTFS volume: no names.
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty()
    }

    /// The entry whose first cluster starts at image offset `at`.
    pub fn lookup(&mut self, r: &dyn ByteReader, at: u64) -> Option<OriginalName> {
        let (vol, names) = self
            .volumes
            .iter_mut()
            .find(|(v, _)| v.start <= at && at < v.end)?;
        let names = names
            .get_or_insert_with(|| {
                if is_ext(vol) {
                    ext::walk(r, vol)
                } else if vol.fs == "NTFS" {
                    ntfs::walk(r, vol)
                } else {
                    walk(r, vol)
                }
            })
            .as_ref()?;
        let e = names.files.get(&at)?;
        let mut parts = vec![e.name.as_str()];
        let mut deleted = e.deleted;
        let mut d = e.dir as usize;
        // Parents come before their children: at most `dirs` steps.
        while d != 0 {
            let dir = names.dirs.get(d)?;
            parts.push(&dir.name);
            deleted |= dir.deleted;
            d = dir.parent as usize;
        }
        parts.reverse();
        let path = format!("/{}", parts.join("/"));
        let raw = match &e.meta {
            Meta::Fat(raw) => raw,
            Meta::Ext(m) => {
                return Some(OriginalName {
                    path,
                    deleted,
                    size: m.size,
                    modified: m.mtime.map(rfc3339_secs),
                    created: m.crtime.map(rfc3339_secs),
                    accessed: m.atime.map(rfc3339_secs),
                    volume: vol.start,
                });
            }
        };
        Some(OriginalName {
            path,
            deleted,
            size: le32(raw, 28),
            modified: date(le16(raw, 24))
                .zip(time(le16(raw, 22), 0))
                .map(|(d, t)| d + "T" + &t),
            created: date(le16(raw, 16))
                .zip(time(le16(raw, 14), raw[13]))
                .map(|(d, t)| d + "T" + &t),
            accessed: date(le16(raw, 18)),
            volume: vol.start,
        })
    }
}

/// What a FAT16/32 volume's directory entries say of the files that start
/// at a cluster: size and whether the entry (or a directory above it) is
/// deleted, by the image offset of the first cluster (a live entry wins
/// over a deleted one). Entries of size 0 are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FatFiles {
    pub files: std::collections::BTreeMap<u64, FatFile>,
}

/// One FAT directory entry's file: its size, and whether it is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FatFile {
    pub size: u64,
    pub deleted: bool,
}

/// The sizes of the files `vol`'s directories name (`None`: not a FAT16/32
/// volume whose boot sector reads). Bounded as the names are.
pub fn fat_files(r: &dyn ByteReader, vol: &Volume) -> Option<FatFiles> {
    let names = walk(r, vol)?;
    let files = names
        .files
        .iter()
        .filter_map(|(&at, e)| {
            let Meta::Fat(raw) = &e.meta else { return None };
            let mut deleted = e.deleted;
            let mut d = e.dir as usize;
            // Parents come before their children: at most `dirs` steps.
            while d != 0 {
                let dir = names.dirs.get(d)?;
                deleted |= dir.deleted;
                d = dir.parent as usize;
            }
            let size = le32(raw, 28);
            (size > 0).then_some((at, FatFile { size, deleted }))
        })
        .collect();
    Some(FatFiles { files })
}

/// An ext2/3/4 volume.
fn is_ext(v: &Volume) -> bool {
    matches!(v.fs, "ext2/3" | "ext4")
}

/// Seconds since 1970 as an RFC 3339 UTC time, `YYYY-MM-DDTHH:MM:SSZ`
/// (civil-from-days, Howard Hinnant's algorithm).
pub fn rfc3339_secs(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A FAT date: `YYYY-MM-DD` (none when zero or out of range).
fn date(d: u64) -> Option<String> {
    let (y, m, day) = (1980 + (d >> 9), (d >> 5) & 15, d & 31);
    ((1..=12).contains(&m) && day >= 1).then(|| format!("{y:04}-{m:02}-{day:02}"))
}

/// A FAT time, with the creation time's 10 ms units (0..=199).
fn time(t: u64, centis: u8) -> Option<String> {
    let (h, m, s) = (t >> 11, (t >> 5) & 63, (t & 31) * 2);
    if h >= 24 || m >= 60 || s >= 60 || centis >= 200 {
        return None;
    }
    let s = s + u64::from(centis / 100);
    Some(match centis % 100 {
        0 => format!("{h:02}:{m:02}:{s:02}"),
        c => format!("{h:02}:{m:02}:{s:02}.{c:02}"),
    })
}

/// How a volume's directories are read.
struct Walker<'a> {
    r: &'a dyn ByteReader,
    fat: super::Fat,
    cl: u64,
    names: VolNames,
    /// Directory clusters read (each once).
    seen: HashSet<u64>,
    read: u64,
    /// (directory index, first cluster, deleted)
    queue: VecDeque<(u32, u64, bool)>,
}

/// Reads `vol`'s directory tree (`None`: not a FAT16/32 volume whose boot
/// sector reads).
fn walk(r: &dyn ByteReader, vol: &Volume) -> Option<VolNames> {
    let fat = vol.fat?;
    let mut boot = [0u8; 512];
    if r.read_at(vol.start, &mut boot) != boot.len() {
        return None;
    }
    let mut w = Walker {
        r,
        fat,
        cl: vol.cluster,
        names: VolNames::default(),
        seen: HashSet::new(),
        read: 0,
        queue: VecDeque::new(),
    };
    w.names.dirs.push(Dir {
        parent: 0,
        name: String::new(),
        deleted: false,
    });
    if vol.fs == "FAT32" {
        w.queue.push_back((0, le32(&boot, 44), false));
    } else {
        // The fixed root region, just before the data area.
        let len = (le16(&boot, 17) * 32).min(MAX_DIR_BYTES);
        let at = fat
            .data
            .checked_sub(len.next_multiple_of(le16(&boot, 11).max(1)))?;
        let mut b = vec![0u8; len as usize];
        let got = r.read_at(at, &mut b);
        b.truncate(got);
        w.read += len;
        w.entries(0, &b, false);
    }
    while let Some((d, c, deleted)) = w.queue.pop_front() {
        let b = w.directory(c, deleted);
        w.entries(d, &b, deleted);
    }
    Some(w.names)
}

impl Walker<'_> {
    /// The image offset of cluster `n` (`None`: not one of the volume's).
    fn cluster_at(&self, n: u64) -> Option<u64> {
        (2..self.fat.entries)
            .contains(&n)
            .then(|| self.fat.data + (n - 2) * self.cl)
    }

    /// The FAT entry of cluster `n`.
    fn next(&self, n: u64) -> Option<u64> {
        let w = u64::from(self.fat.width / 8);
        let mut b = [0u8; 4];
        let b = &mut b[..w as usize];
        let at = self.fat.table.checked_add(n.checked_mul(w)?)?;
        if self.r.read_at(at, b) != b.len() {
            return None;
        }
        Some(if w == 2 {
            le16(b, 0)
        } else {
            le32(b, 0) & 0x0FFF_FFFF
        })
    }

    /// The bytes of the directory whose first cluster is `first`: its
    /// chain, or (deleted: the chain is freed) its first cluster when that
    /// starts with `.` and `..`.
    fn directory(&mut self, first: u64, deleted: bool) -> Vec<u8> {
        let eoc = if self.fat.width == 16 {
            0xFFF8
        } else {
            0x0FFF_FFF8
        };
        let mut out = Vec::new();
        let mut n = first;
        while (out.len() as u64) < MAX_DIR_BYTES && self.read < MAX_VOLUME_BYTES {
            let Some(at) = self.cluster_at(n) else { break };
            if !self.seen.insert(n) {
                break;
            }
            let mut b = vec![0u8; self.cl as usize];
            let got = self.r.read_at(at, &mut b);
            b.truncate(got);
            self.read += self.cl;
            if deleted && !dot_pair(&b) {
                break;
            }
            out.extend_from_slice(&b);
            if deleted {
                break;
            }
            match self.next(n) {
                Some(m) if m < eoc => n = m,
                _ => break,
            }
        }
        out
    }

    /// Reads one directory's entries (`d`: its index).
    fn entries(&mut self, d: u32, b: &[u8], in_deleted: bool) {
        let mut lfn = Lfn::default();
        for e in b.chunks_exact(32) {
            if e[0] == 0 {
                break;
            }
            let attr = e[11];
            if attr & 0x3F == 0x0F {
                lfn.part(e);
                continue;
            }
            let long = lfn.take(e);
            if e[0] == b'.' || attr & 0x08 != 0 {
                continue;
            }
            let deleted = e[0] == 0xE5 || in_deleted;
            let name = long.unwrap_or_else(|| short_name(e));
            let mut c = le16(e, 26);
            if self.fat.width == 32 {
                c |= le16(e, 20) << 16;
            }
            let Some(at) = self.cluster_at(c) else {
                continue;
            };
            if attr & 0x10 != 0 {
                if self.names.dirs.len() < MAX_DIRS {
                    self.queue
                        .push_back((self.names.dirs.len() as u32, c, deleted));
                    self.names.dirs.push(Dir {
                        parent: d,
                        name,
                        deleted,
                    });
                }
                continue;
            }
            let mut raw = [0u8; 32];
            raw.copy_from_slice(e);
            let entry = Entry {
                dir: d,
                name,
                meta: Meta::Fat(raw),
                deleted,
            };
            let full = self.names.files.len() >= MAX_ENTRIES;
            match self.names.files.get_mut(&at) {
                Some(old) if old.deleted && !deleted => *old = entry,
                Some(_) => {}
                None if !full => {
                    self.names.files.insert(at, entry);
                }
                None => {}
            }
        }
    }
}

/// A cluster that starts with a directory's `.` and `..` entries.
fn dot_pair(b: &[u8]) -> bool {
    b.len() >= 64
        && &b[0..11] == b".          "
        && &b[32..43] == b"..         "
        && b[11] & 0x10 != 0
        && b[43] & 0x10 != 0
}

/// An 8.3 name as its entry writes it.
fn short_name(e: &[u8]) -> String {
    let text = |b: &[u8], lower: bool| -> String {
        let s: String = b
            .iter()
            .map(|&c| char::from(c))
            .collect::<String>()
            .trim_end_matches(' ')
            .to_string();
        if lower { s.to_lowercase() } else { s }
    };
    let mut base = e[..8].to_vec();
    base[0] = match base[0] {
        0x05 => 0xE5,
        0xE5 => b'_',
        c => c,
    };
    let base = text(&base, e[12] & 0x08 != 0);
    let ext = text(&e[8..11], e[12] & 0x10 != 0);
    clean(&if ext.is_empty() {
        base
    } else {
        format!("{base}.{ext}")
    })
}

/// A name fit for a path: `/` and control characters replaced.
pub(super) fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c == '/' || c.is_control() { '_' } else { c })
        .collect()
}

/// The 8.3 name's checksum that long-name parts carry.
fn checksum(name: &[u8]) -> u8 {
    name.iter()
        .fold(0u8, |s, &c| s.rotate_right(1).wrapping_add(c))
}

/// A long name being assembled.
#[derive(Default)]
struct Lfn {
    /// Parts in directory order (last part first).
    parts: Vec<[u16; 13]>,
    sum: u8,
    /// The ordinal expected next (live sequences; 0: whole).
    next: u8,
    deleted: bool,
    ok: bool,
}

impl Lfn {
    fn part(&mut self, e: &[u8]) {
        let mut chars = [0u16; 13];
        for (i, at) in [1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30]
            .into_iter()
            .enumerate()
        {
            chars[i] = le16(e, at) as u16;
        }
        let (ord, sum) = (e[0], e[13]);
        if ord == 0xE5 {
            if !(self.ok && self.deleted && self.sum == sum) {
                *self = Lfn {
                    deleted: true,
                    sum,
                    ok: true,
                    ..Lfn::default()
                };
            }
        } else if ord & 0x40 != 0 {
            let n = ord & 0x1F;
            *self = Lfn {
                sum,
                next: n.wrapping_sub(1),
                ok: (1..=MAX_LFN_PARTS as u8).contains(&n),
                ..Lfn::default()
            };
        } else if self.ok && !self.deleted && ord == self.next && self.next > 0 && sum == self.sum {
            self.next -= 1;
        } else {
            self.ok = false;
        }
        if self.ok && self.parts.len() < MAX_LFN_PARTS {
            self.parts.push(chars);
        } else {
            self.ok = false;
        }
    }

    /// The long name for short entry `e`, if the parts before it make one.
    fn take(&mut self, e: &[u8]) -> Option<String> {
        let lfn = std::mem::take(self);
        if !lfn.ok || lfn.parts.is_empty() {
            return None;
        }
        let units: Vec<u16> = lfn
            .parts
            .iter()
            .rev()
            .flatten()
            .copied()
            .take_while(|&u| u != 0)
            .collect();
        let name = clean(&String::from_utf16_lossy(&units));
        let mut short = [0u8; 11];
        short.copy_from_slice(&e[..11]);
        if lfn.deleted {
            if e[0] != 0xE5 {
                return None;
            }
            // The lost first byte: the long name's first character's, as
            // the short name was made from it.
            let first = name.trim_start_matches(['.', ' ']).chars().next()?;
            if !first.is_ascii() {
                return None;
            }
            short[0] = first.to_ascii_uppercase() as u8;
        } else if lfn.next != 0 {
            return None;
        }
        (checksum(&short) == lfn.sum && !name.is_empty()).then_some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_and_times() {
        // "README  TXT" — a known checksum computed by hand-rolled loop.
        let mut s = 0u8;
        for &c in b"README  TXT" {
            s = (if s & 1 != 0 { 0x80u8 } else { 0 })
                .wrapping_add(s >> 1)
                .wrapping_add(c);
        }
        assert_eq!(checksum(b"README  TXT"), s);
        // 2021-03-04 05:06:08
        let d = ((2021 - 1980) << 9) | (3 << 5) | 4;
        let t = (5 << 11) | (6 << 5) | 4;
        assert_eq!(date(d).as_deref(), Some("2021-03-04"));
        assert_eq!(time(t, 0).as_deref(), Some("05:06:08"));
        assert_eq!(time(t, 150).as_deref(), Some("05:06:09.50"));
        assert_eq!(date(0), None);
        assert_eq!(time(25 << 11, 0), None);
    }

    #[test]
    fn short_names() {
        let mut e = [b' '; 32];
        e[..11].copy_from_slice(b"IMG_0001JPG");
        e[12] = 0;
        assert_eq!(short_name(&e), "IMG_0001.JPG");
        e[0] = 0xE5;
        assert_eq!(short_name(&e), "_MG_0001.JPG");
        e[0] = b'I';
        e[12] = 0x18;
        assert_eq!(short_name(&e), "img_0001.jpg");
    }

    /// A FAT16 volume (mkfs.vfat, mtools) cut after its first clusters:
    /// `/DCIM/Sub/IMG_0001.JPG`, `/short.txt`, `/DCIM/Long_File_Name_Here.txt`
    /// (`mdel`) and `/gone/deleted long name.bin` (`mdeltree`).
    #[test]
    fn fat16_tree() {
        let img: &[u8] = include_bytes!("../../../fuzz/corpus/fs_names/fat16-dirs");
        let r = img.to_vec();
        let g = super::super::detect(&r);
        assert_eq!(g.volumes.len(), 1);
        let mut m = NameMaps::new(&g);
        let name = |m: &mut NameMaps, at| m.lookup(&r, at).map(|n| (n.path, n.deleted, n.size));
        let s = |p: &str| p.to_string();
        assert_eq!(
            name(&mut m, 43520),
            Some((s("/DCIM/Sub/IMG_0001.JPG"), false, 3000))
        );
        assert_eq!(name(&mut m, 46592), Some((s("/short.txt"), false, 6)));
        assert_eq!(
            name(&mut m, 43008),
            Some((s("/DCIM/Long_File_Name_Here.txt"), true, 6))
        );
        assert_eq!(
            name(&mut m, 47104),
            Some((s("/_one/deleted long name.bin"), true, 3000))
        );
        assert_eq!(name(&mut m, 43521), None);
        assert_eq!(name(&mut m, 41472), None);
        let n = m.lookup(&r, 46592).unwrap();
        assert!(
            n.modified.as_deref().is_some_and(|t| t.len() == 19),
            "{n:?}"
        );
        // The sizes the carver ends files with: the same entries, a file in
        // a deleted directory deleted.
        let f = fat_files(&r, &g.volumes[0]).unwrap();
        let got = |at: u64| f.files.get(&at).map(|f| (f.size, f.deleted));
        assert_eq!(got(43520), Some((3000, false)));
        assert_eq!(got(46592), Some((6, false)));
        assert_eq!(got(43008), Some((6, true)));
        assert_eq!(got(47104), Some((3000, true)));
        assert_eq!(got(43521), None);
    }
}
