//! A file laid out by its file system ([`fs_layout_verdict`]): the runs an
//! ext inode, an ext2/3 block map or a FAT chain gives a file, proven by the
//! file's validator over them (no search).

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
    // An ext2/3/4 inode lists this file's blocks: the whole layout, and the
    // exact size.
    if let Some(f) = vol.ext_files.as_ref().and_then(|m| m.files.get(&start)) {
        let view = RunsView::new(r, &f.runs);
        let mut v = validators::validate(
            validator,
            &view,
            0,
            Limits {
                max_len: view.len(),
            },
            cx,
        )?;
        if v.status != Status::Complete || v.length != f.size || v.length > max_len {
            return None;
        }
        v.notes.push(format!(
            "ext inode: the file system lists this file's blocks ({} runs, {} bytes); carved along them",
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
