//! NTFS original names: every record of `$MFT` read in order, deleted ones
//! (in-use flag clear) included.
//!
//! A base record (not an extension record) whose unnamed `$DATA` is
//! non-resident and starts with a cluster (not a sparse run) names the
//! image offset of that cluster: its `$FILE_NAME` (a Win32 name preferred
//! to a POSIX one, either to the DOS 8.3 one), the data size, and the
//! times of `$STANDARD_INFORMATION` (else of the `$FILE_NAME`), UTC. The
//! path is built from the parent references up to the root (record 5):
//! a parent is taken only when it is a directory record whose sequence
//! number is the reference's (or one more, when the parent is deleted:
//! NTFS counts a deletion into it); a missing or reused parent, a chain
//! deeper than [`MAX_DEPTH`] or one that loops puts the rest of the path
//! under `/$OrphanFiles` (as The Sleuth Kit does). A file in a deleted
//! directory is deleted.
//!
//! Bounded like the FAT walk: at most [`MAX_VOLUME_BYTES`] of `$MFT` read
//! (and the records it maps), [`MAX_ENTRIES`] files and [`MAX_DIRS`]
//! directories kept; each directory is resolved once (later chains stop at
//! it), so the paths cost a constant per record.

use std::collections::HashMap;

use super::super::ntfs::{self, DATA, FILE_NAME, Ntfs, STANDARD_INFORMATION};
use super::super::{Volume, le16, le64};
use super::{Dir, Entry, ExtMeta, MAX_DIRS, MAX_ENTRIES, MAX_VOLUME_BYTES, Meta, VolNames, clean};
use crate::carve::reader::ByteReader;

/// The root directory's record.
const ROOT: u64 = 5;
/// Most parents followed from one file.
pub const MAX_DEPTH: usize = 256;

/// A directory record: its parent reference, name, sequence number,
/// whether in use.
struct DirRec {
    parent: u64,
    parent_seq: u16,
    name: String,
    seq: u16,
    in_use: bool,
}

/// What one base record says.
struct Rec {
    in_use: bool,
    is_dir: bool,
    seq: u16,
    name: Option<ntfs::FileName>,
    /// Image offset of the first cluster of its data, and the data size.
    data: Option<(u64, u64)>,
    meta: ExtMeta,
}

/// Reads one fixed-up record (`None`: an extension record or no name).
fn parse(v: &Ntfs, rec: &[u8]) -> Option<Rec> {
    if le64(rec, 0x20) & 0xFFFF_FFFF_FFFF != 0 {
        return None;
    }
    let flags = le16(rec, 0x16);
    let mut best: Option<(u8, ntfs::FileName)> = None;
    let mut si = None;
    let mut fn_times = None;
    let mut data = None;
    for a in ntfs::attrs(rec) {
        match a.kind {
            STANDARD_INFORMATION => si = si.or(a.value().filter(|b| b.len() >= 0x20)),
            FILE_NAME => {
                let Some(val) = a.value() else { continue };
                let Some(f) = ntfs::file_name(val) else {
                    continue;
                };
                let rank = match f.namespace {
                    1 | 3 => 3,
                    0 => 2,
                    _ => 1,
                };
                if best.as_ref().is_none_or(|(r, _)| rank > *r) {
                    fn_times = Some(val);
                    best = Some((rank, f));
                }
            }
            DATA if a.name_len() == 0
                && a.non_resident()
                && a.first_vcn() == 0
                && data.is_none() =>
            {
                let first = a.runs().and_then(first_run);
                if let Some((Some(lcn), _)) = first.and_then(|r| r.first().copied())
                    && lcn < v.clusters
                {
                    data = Some((v.start + lcn * v.cluster, a.data_size()));
                }
            }
            _ => {}
        }
    }
    let name = best.map(|(_, f)| f);
    let times = si.or(fn_times.map(|b| &b[8..]));
    let t = |at: usize| times.and_then(|b| ntfs::unix_secs(le64(b, at)));
    Some(Rec {
        in_use: flags & 1 != 0,
        is_dir: flags & 2 != 0,
        seq: le16(rec, 0x10) as u16,
        name,
        data,
        meta: ExtMeta {
            size: data.map_or(0, |d| d.1),
            crtime: t(0),
            mtime: t(8),
            atime: t(0x18),
        },
    })
}

/// The first run of a run list.
fn first_run(b: &[u8]) -> Option<Vec<(Option<u64>, u64)>> {
    let h = *b.first()?;
    let n = 1 + usize::from(h & 15) + usize::from(h >> 4);
    let mut one = b.get(..n)?.to_vec();
    one.push(0);
    ntfs::runs(&one, 1)
}

/// Reads `vol`'s records (`None`: not an NTFS volume whose `$MFT` reads).
pub(super) fn walk(r: &dyn ByteReader, vol: &Volume) -> Option<VolNames> {
    let v = Ntfs::open(r, vol)?;
    let mut dirs: HashMap<u64, DirRec> = HashMap::new();
    let mut files: Vec<(u64, u64, u16, String, bool, ExtMeta)> = Vec::new();
    v.each_record(r, MAX_VOLUME_BYTES, |no, rec| {
        let Some(p) = parse(&v, rec) else { return };
        let Some(name) = p.name else { return };
        if p.is_dir {
            if no != ROOT && dirs.len() < MAX_DIRS {
                dirs.insert(
                    no,
                    DirRec {
                        parent: name.parent,
                        parent_seq: name.parent_seq,
                        name: clean(&name.name),
                        seq: p.seq,
                        in_use: p.in_use,
                    },
                );
            }
        } else if let Some((at, _)) = p.data
            && files.len() < MAX_ENTRIES
        {
            files.push((
                at,
                name.parent,
                name.parent_seq,
                clean(&name.name),
                !p.in_use,
                p.meta,
            ));
        }
    });
    let mut names = VolNames::default();
    names.dirs.push(Dir {
        parent: 0,
        name: String::new(),
        deleted: false,
    });
    let mut paths = Paths {
        dirs: &dirs,
        index: HashMap::new(),
        orphan: None,
    };
    for (at, parent, pseq, name, deleted, meta) in files {
        let dir = paths.resolve(&mut names, parent, pseq);
        let entry = Entry {
            dir,
            name,
            meta: Meta::Ext(meta),
            deleted,
        };
        match names.files.get_mut(&at) {
            Some(old) if old.deleted && !deleted => *old = entry,
            Some(_) => {}
            None => {
                names.files.insert(at, entry);
            }
        }
    }
    Some(names)
}

/// Directory records resolved into [`VolNames::dirs`] (each once).
struct Paths<'a> {
    dirs: &'a HashMap<u64, DirRec>,
    /// Record → its index in `dirs`.
    index: HashMap<u64, u32>,
    orphan: Option<u32>,
}

impl Paths<'_> {
    /// The index of the directory that reference `(rec, seq)` names, its
    /// ancestors added first (parents before children).
    fn resolve(&mut self, names: &mut VolNames, rec: u64, seq: u16) -> u32 {
        let mut chain: Vec<u64> = Vec::new();
        let (mut cur, mut cur_seq) = (rec, seq);
        let mut base = loop {
            if cur == ROOT {
                break Some(0);
            }
            let Some(d) = self.dirs.get(&cur) else {
                break None;
            };
            let same = d.seq == cur_seq || (!d.in_use && d.seq == cur_seq.wrapping_add(1));
            if !same {
                break None;
            }
            if let Some(&i) = self.index.get(&cur) {
                break Some(i);
            }
            if chain.len() >= MAX_DEPTH || chain.contains(&cur) {
                break None;
            }
            chain.push(cur);
            (cur, cur_seq) = (d.parent, d.parent_seq);
        }
        .unwrap_or_else(|| self.orphan(names));
        for &d in chain.iter().rev() {
            if names.dirs.len() >= MAX_DIRS {
                break;
            }
            let Some(dr) = self.dirs.get(&d) else { break };
            let i = names.dirs.len() as u32;
            names.dirs.push(Dir {
                parent: base,
                name: dr.name.clone(),
                deleted: !dr.in_use,
            });
            self.index.insert(d, i);
            base = i;
        }
        base
    }

    fn orphan(&mut self, names: &mut VolNames) -> u32 {
        *self.orphan.get_or_insert_with(|| {
            names.dirs.push(Dir {
                parent: 0,
                name: "$OrphanFiles".into(),
                deleted: false,
            });
            (names.dirs.len() - 1) as u32
        })
    }
}
