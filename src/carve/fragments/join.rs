//! What every format's search shares to find and prove a join: the
//! candidate walk, nearest first ([`nearest_first`]), reading a stretch
//! against the budget ([`for_each_piece`]), the copy check
//! ([`tail_of_copy`]), and the proven result ([`joined`],
//! [`validate_join`]).

use super::Joined;
use super::budget::Budget;
use super::cache::read_exact;
use super::runs::TwoRuns;
use crate::carve::validators::{self, ByteReader, Limits, Verdict};

/// Candidate starts of the next fragment of `head` cut at `split`, nearest
/// first: `p + g·cl` where `p` is the image offset at which `head` would
/// continue contiguously (in order) and `q − g·cl` where `q` is where its
/// last run starts (out of order; for a single run, the header), `g = 1, 2,
/// …`, within `max_gap` and the image.
pub(super) fn second_starts(
    head: &TwoRuns,
    split: u64,
    cl: u64,
    max_gap: u64,
    g: u64,
) -> [Option<u64>; 2] {
    let gap = g.saturating_mul(cl);
    if gap > max_gap {
        return [None, None];
    }
    let fwd = head
        .map(split)
        .checked_add(gap)
        .filter(|&s| s < head.r.len());
    let back = head.b().checked_sub(gap);
    [fwd, back]
}

/// Walks the (split, next start) candidates of `head` nearest first (gap
/// `g = 1, 2, …` clusters; for each, every split, in order then out of
/// order), calling `f(i, s2, b)` for split `splits[i]` until it returns an
/// answer, the gaps run out or the budget ends. A start inside the part of
/// `head` kept before the split is skipped: no cluster is taken twice; so
/// is one in a cluster the file system allocates, when the carving is of
/// free space only ([`super::SearchMemory::in_allocated`]): a deleted
/// file's fragments lie in free space, or are overwritten.
pub(super) fn nearest_first<T>(
    head: &TwoRuns,
    splits: &[u64],
    cl: u64,
    b: &mut Budget,
    mut f: impl FnMut(usize, u64, &mut Budget) -> Option<T>,
) -> Option<T> {
    let mut g = 1u64;
    while b.ok() {
        let mut any = false;
        for (i, &split) in splits.iter().enumerate() {
            for s2 in second_starts(head, split, cl, b.lim.max_gap, g)
                .into_iter()
                .flatten()
            {
                any = true;
                if (head.count() > 1 && head.holds(s2, split)) || b.memory.in_allocated(s2) {
                    continue;
                }
                if !b.cand() {
                    return None;
                }
                if let Some(t) = f(i, s2, b) {
                    return Some(t);
                }
            }
        }
        if !any {
            break;
        }
        g += 1;
    }
    None
}

/// Feeds `[off, off + n)` of `r` to `f` in 64 KiB pieces; false if short.
pub(super) fn for_each_piece(
    r: &dyn ByteReader,
    off: u64,
    n: u64,
    b: &mut Budget,
    mut f: impl FnMut(&[u8]) -> bool,
) -> bool {
    let mut buf = vec![0u8; n.min(64 * 1024) as usize];
    let mut done = 0u64;
    while done < n {
        let want = (n - done).min(buf.len() as u64) as usize;
        if !b.bytes(want as u64) {
            return false;
        }
        if !read_exact(r, off + done, &mut buf[..want]) {
            return false;
        }
        if !f(&buf[..want]) {
            return false;
        }
        done += want as u64;
    }
    true
}

/// True when the second fragment is the tail of another copy of the file:
/// the signature `sig` sits exactly `split` bytes before it (a contiguous
/// copy starting there), so the join would only graft that copy's body onto
/// this header.
pub(super) fn tail_of_copy(r: &dyn ByteReader, j: &TwoRuns, sig: &[u8]) -> bool {
    let Some(copy) = j.b().checked_sub(j.split()) else {
        return false;
    };
    let mut buf = [0u8; 8];
    let Some(dst) = buf.get_mut(..sig.len()) else {
        return false;
    };
    copy != j.a() && read_exact(r, copy, dst) && dst == sig
}

/// The proven join `j`, `length` bytes long; `None` when two of its runs
/// overlap in the image (an out-of-order fragment running into the header's
/// cluster or into another fragment).
pub(super) fn joined(
    j: &TwoRuns,
    length: u64,
    subtype: Option<String>,
    note: String,
) -> Option<Joined> {
    let runs = j.runs(length);
    let overlap = runs.iter().enumerate().any(|(i, &(a, n))| {
        runs[..i]
            .iter()
            .any(|&(c, m)| a < c.saturating_add(m) && c < a.saturating_add(n))
    });
    if overlap {
        return None;
    }
    Some(Joined {
        runs,
        length,
        subtype,
        notes: vec![note],
    })
}

/// Runs the registered validator over a join; `Complete` past the split → the file's length.
pub(super) fn validate_join(name: &str, j: &TwoRuns, b: &mut Budget) -> Option<Verdict> {
    if !b.bytes(j.len.min(64 << 20)) {
        return None;
    }
    validators::validate(
        name,
        j,
        0,
        Limits { max_len: j.len },
        &validators::NO_CONTEXT,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carve::fragments::{Claims, FragLimits, SearchMemory};
    use crate::carve::geometry::{alloc::AllocMaps, detect, tests::fat32};

    /// The next starts a search walks, with the memory's allocated clusters.
    #[allow(clippy::ptr_arg)]
    fn walked(img: &Vec<u8>, memory: &mut SearchMemory, head_at: u64) -> Vec<u64> {
        let lim = FragLimits {
            max_gap: 64 * 512,
            ..FragLimits::default()
        };
        let claims = Claims::default();
        let mut b = Budget::new(lim, &claims, (memory, false));
        let head = TwoRuns::one(img, head_at, 1 << 16);
        let mut seen = Vec::new();
        nearest_first(&head, &[1024], 512, &mut b, |_, s2, _| {
            seen.push(s2);
            None::<()>
        });
        seen.sort_unstable();
        seen
    }

    #[test]
    fn a_free_space_search_keeps_out_of_allocated_clusters() {
        // FAT32, 512-byte clusters; clusters 100..140 allocated.
        let mut img = vec![0u8; 1 << 20];
        fat32(&mut img, 0, 1, 32, 100);
        img[32..36].copy_from_slice(&200_000u32.to_le_bytes());
        let g = detect(&img);
        let fat = g.volumes[0].fat.expect("FAT32");
        for n in 100..140u64 {
            let at = (fat.table + 4 * n) as usize;
            img[at..at + 4].copy_from_slice(&0x0FFF_FFFFu32.to_le_bytes());
        }
        let cluster = |n: u64| fat.data + (n - 2) * 512;
        let bits = AllocMaps::new(&g).bits(&img).expect("the FAT read");
        // A head at cluster 120 (allocated itself: searched all the same).
        let all = walked(&img, &mut SearchMemory::default(), cluster(120));
        let mut free_only = SearchMemory::default();
        free_only.allocated = Some(std::sync::Arc::new(bits));
        let kept = walked(&img, &mut free_only, cluster(120));
        let allocated = |p: &u64| (cluster(100)..cluster(140)).contains(p);
        assert!(all.iter().any(allocated), "{all:?}");
        assert!(!kept.iter().any(allocated), "{kept:?}");
        // Every free start is still walked.
        let free: Vec<u64> = all.iter().copied().filter(|p| !allocated(p)).collect();
        assert_eq!(kept, free);
        assert!(!kept.is_empty());
    }
}
