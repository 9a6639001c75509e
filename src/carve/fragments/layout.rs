//! A file laid out by its file system ([`fs_layout_verdict`]): the runs an
//! ext inode, an ext2/3 block map or a FAT chain gives a file, proven by the
//! file's validator over them (no search); and a file ended where its file
//! system's entry says ([`fs_entry_verdict`]).

use super::runs::{MAX_RUNS, TwoRuns};
use crate::carve::geometry;
use crate::carve::validators::read::RunsView;
use crate::carve::validators::{self, ByteReader, Limits, Status, Verdict};

/// The verdict of `validator` over the file at `start` as its file system
/// lays it out, when the file system says so and the validator proves it:
///
/// * ext2/3 block maps ([`geometry::ext_block_map`]: the indirect
///   blocks list the blocks that follow them);
/// * FAT16/32 cluster chains ([`geometry::fat_chain`]: an allocated
///   file's chain in the allocation table).
///
/// Asked when the contiguous verdict `contiguous` reaches past the first
/// run, is not `Complete` or is none (a structure read from past the first
/// run: a TIFF's IFD). The validator must call the laid-out file `Complete`,
/// with a length that ends in the last cluster the file system gives it
/// (when it says where the file ends). The verdict carries the runs. The
/// validator runs with what `cx` shares.
pub fn fs_layout_verdict(
    validator: &str,
    r: &dyn ByteReader,
    vol: &geometry::Volume,
    (start, max_len): (u64, u64),
    contiguous: Option<&Verdict>,
    cx: &validators::Context,
) -> Option<Verdict> {
    let cl = vol.cluster;
    // An ext2/3/4 inode or an NTFS file record lists this file's blocks:
    // the whole layout, and the exact size.
    if let Some(m) = &vol.inode_files
        && let Some(f) = m.files.get(&start)
    {
        let deleted = m.deleted.contains(&start);
        let view = RunsView::new(r, &f.runs);
        let mut v = validators::validate(
            validator,
            &view,
            0,
            Limits {
                max_len: view.len().min(f.size),
            },
            cx,
        )?;
        if v.status != Status::Complete || v.length > f.size || f.size > max_len || v.length == 0 {
            return None;
        }
        // (A deleted record's last cluster only: its others could be
        // another file's since.)
        if deleted && v.length.div_ceil(cl) != f.size.div_ceil(cl) {
            return None;
        }
        if v.length < f.size {
            // (What follows the structure up to the size is the file's too.)
            v.notes.push(format!(
                "the structure ends at {}, the {} bytes after it up to the inode's size are the file's",
                v.length,
                f.size - v.length
            ));
            v.length = f.size;
        }
        v.notes.push(format!(
            "{}{}: the file system lists this file's blocks ({} runs, {} bytes); carved along them",
            if deleted { "deleted " } else { "" },
            m.source,
            f.runs.len(),
            f.size
        ));
        v.forget_break();
        v.runs = Some(f.runs.clone());
        return Some(v);
    }
    // `(file offset, image offset)` of the runs after the first, the first
    // run's length, clusters of the file when known, and how to name it.
    let (splits, first, clusters, what) = if let Some(bs) = vol.block_map() {
        let (splits, blocks) = geometry::ext_block_map(r, vol, start, MAX_RUNS)?;
        (
            splits,
            12 * bs,
            blocks,
            "ext2/3 block map: the file goes on after its indirect block(s)",
        )
    } else if vol.fat.is_some() {
        let runs = geometry::fat_chain(r, vol, start, max_len, MAX_RUNS)?;
        let mut at = 0;
        let splits: Vec<(u64, u64)> = runs
            .iter()
            .map(|&(off, len)| {
                let s = (at, off);
                at += len;
                s
            })
            .skip(1)
            .collect();
        let total = runs.iter().map(|r| r.1).sum::<u64>() / cl;
        (
            splits,
            runs[0].1,
            Some(total),
            "FAT cluster chain: the allocation table links the file's clusters",
        )
    } else {
        return None;
    };
    if contiguous.is_some_and(|c| c.status == Status::Complete && c.length <= first) {
        return None;
    }
    let mut view = TwoRuns::one(r, start, max_len);
    for &(split, at) in &splits {
        view = view.then(split, at, max_len)?;
    }
    let mut v = validators::validate(validator, &view, 0, Limits { max_len: view.len }, cx)?;
    if v.status != Status::Complete
        || v.length <= first
        || clusters.is_some_and(|n| v.length.div_ceil(cl) != n)
    {
        return None;
    }
    let runs = view.runs(v.length);
    let at: Vec<String> = runs.iter().map(|&(o, n)| format!("{o}+{n}")).collect();
    v.notes.push(format!(
        "{what}; carved in {} runs ({})",
        runs.len(),
        at.join(", ")
    ));
    v.forget_break();
    v.runs = Some(runs);
    Some(v)
}

/// What a file system's entry says of the file starting at a cluster.
struct EntryLayout {
    /// Image runs `(offset, length)`, adding up to `size`.
    runs: Vec<(u64, u64)>,
    size: u64,
    deleted: bool,
    /// The runs are a guess (a deleted FAT entry: its chain is freed, its
    /// clusters taken as contiguous from the first), not the file system's.
    guessed: bool,
    /// What says so, for the verdict's note.
    what: &'static str,
}

/// Where the file system says the file at `start` lies, when an entry
/// starts there.
///
/// * ext2/3/4: a live inode whose blocks are one run (the fragmented ones
///   are [`fs_layout_verdict`]'s);
/// * FAT16/32, a live directory entry: its cluster chain, cut to the size
///   (the chain must hold exactly the clusters the size needs);
/// * FAT16/32, a deleted entry: its chain is freed, so the clusters from
///   its first, contiguous, when every one of them is still free.
fn entry_layout(r: &dyn ByteReader, vol: &geometry::Volume, start: u64) -> Option<EntryLayout> {
    if let Some(m) = &vol.inode_files
        && let Some(&size) = m.contiguous.get(&start)
    {
        let deleted = m.deleted.contains(&start);
        return Some(EntryLayout {
            runs: vec![(start, size)],
            size,
            deleted,
            guessed: false,
            what: if deleted {
                "deleted NTFS file record (its clusters still free)"
            } else {
                m.source
            },
        });
    }
    let f = *vol.fat_files.as_ref()?.files.get(&start)?;
    let cl = vol.cluster;
    if f.deleted {
        return geometry::fat_free(r, vol, start, f.size).then(|| EntryLayout {
            runs: vec![(start, f.size)],
            size: f.size,
            deleted: true,
            guessed: true,
            what: "deleted FAT directory entry (its clusters still free)",
        });
    }
    let chain = geometry::fat_chain_runs(r, vol, start, f.size, MAX_RUNS)?;
    let total: u64 = chain.iter().map(|r| r.1).sum();
    if total.div_ceil(cl) != f.size.div_ceil(cl) || total < f.size {
        return None;
    }
    let mut left = f.size;
    let runs = chain
        .into_iter()
        .map(|(o, n)| {
            let len = n.min(left);
            left -= len;
            (o, len)
        })
        .filter(|r| r.1 > 0)
        .collect();
    Some(EntryLayout {
        runs,
        size: f.size,
        deleted: false,
        guessed: false,
        what: "FAT directory entry and cluster chain",
    })
}

/// Whether the structure at `start`, read on contiguously, stops (ends or
/// breaks) after `size` bytes but within the cluster after the one that
/// holds its last byte: what a deleted FAT entry's guessed layout needs
/// before its size ends a structure that would go on. A deleted file that
/// was fragmented, read on through its first run, breaks before its size or
/// runs on through other files' clusters (a PDF to the next one's header, a
/// gzip member to a trailer far off); one that was contiguous stops in its
/// last cluster's slack or at the next cluster's start (text running into
/// non-text bytes, a tar without end blocks at the next file). Reads at
/// most the entry's clusters and one more.
fn stops_after(
    validator: &str,
    r: &dyn ByteReader,
    (start, size): (u64, u64),
    cl: u64,
    cx: &validators::Context,
) -> bool {
    let reach = size.div_ceil(cl).saturating_add(1).saturating_mul(cl);
    validators::validate(validator, r, start, Limits { max_len: reach }, cx)
        .is_some_and(|w| w.length >= size && w.length < reach)
}

/// The verdict of `validator` over the file at `start` as long as the file
/// system's entry for it says ([`entry_layout`]), when the validator calls
/// that much of it `Complete`:
///
/// * ending exactly at the entry's size: the file as the file system has it
///   (a structure that would go on, an MP3 whose next file's frames follow
///   in the next cluster, ends where the entry ends);
/// * ending before it: what follows the structure up to the entry's size is
///   the file's too (padding after a JPEG's EOI, free sectors after an OLE2
///   file's last used one, a second image): carved to the entry's size; a
///   deleted entry only when that tail lies in the same last cluster (its
///   other clusters could be another file's since);
/// * an entry whose every byte checks out but whose structure would go on
///   past its size (`Partial` at exactly the size) or does not record its
///   end (`Unvalidated` over exactly the size: KDBX 3, RAR with encrypted
///   headers): the file as its file system holds it; a deleted entry too,
///   its clusters all still free, and for a deleted FAT entry when the
///   structure read on stops soon after its size ([`stops_after`]: text in
///   a cluster's slack, Go's tars without end blocks).
///
/// Anything else: `None` (the carver goes on as without the entry).
pub fn fs_entry_verdict(
    validator: &str,
    r: &dyn ByteReader,
    vol: &geometry::Volume,
    (start, max_len): (u64, u64),
    cx: &validators::Context,
) -> Option<Verdict> {
    let EntryLayout {
        runs,
        size,
        deleted,
        guessed,
        what,
    } = entry_layout(r, vol, start)?;
    if size > max_len {
        return None;
    }
    let view = RunsView::new(r, &runs);
    let mut v = validators::validate(validator, &view, 0, Limits { max_len: size }, cx)?;
    if v.status != Status::Complete
        && v.length == size
        && (!guessed || stops_after(validator, r, (start, size), vol.cluster, cx))
    {
        // Every byte the entry gives checks out, and the structure would
        // go on past them (a TIFF whose strip counts overstate its strips,
        // text or a tar without an end mark) or does not record its end
        // (a KDBX 3 payload, RAR's encrypted headers): the file is what its
        // file system holds. A deleted FAT entry's clusters are all still
        // free ([`entry_layout`]), but contiguous only by guess: the
        // structure must stop soon after them ([`stops_after`]). (The
        // validator's note that its window ended, the entry's end here, is
        // not the file's: it is whole.)
        v.notes.retain(|n| !n.starts_with("truncated: "));
        v.notes.push(format!(
            "{what}: {size} bytes, all of which check out; {} (the file as its file system holds it)",
            if v.status == Status::Partial {
                "the structure goes on past them"
            } else {
                "the format does not record its end"
            }
        ));
        v.status = Status::Complete;
        v.forget_break();
        v.runs = (runs.len() >= 2).then_some(runs);
        return Some(v);
    }
    if v.status != Status::Complete || v.length > size || v.length == 0 {
        return None;
    }
    if v.length < size {
        let cl = vol.cluster;
        if deleted && v.length.div_ceil(cl) != size.div_ceil(cl) {
            return None;
        }
        v.notes.push(format!(
            "{what}: {size} bytes; the structure ends at {}, the {} bytes after it are the file's",
            v.length,
            size - v.length
        ));
        v.length = size;
    } else {
        v.notes
            .push(format!("{what}: {size} bytes, where the structure ends"));
    }
    v.forget_break();
    v.runs = (runs.len() >= 2).then_some(runs);
    Some(v)
}
