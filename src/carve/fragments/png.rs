//! PNG: the chunk whose CRC breaks spans the join.

use super::Joined;
use super::budget::Budget;
use super::cache::{Cache, read_exact};
use super::join::{for_each_piece, joined, nearest_first, tail_of_copy, validate_join};
use super::runs::{MAX_RUNS, TwoRuns};
use crate::carve::validators::{ByteReader, Status};

const SIG: &[u8; 8] = b"\x89PNG\r\n\x1a\n";

fn plausible(h: &[u8; 8]) -> Option<(u64, [u8; 4])> {
    let len = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    let ty = [h[4], h[5], h[6], h[7]];
    (len <= 0x7fff_ffff && ty.iter().all(u8::is_ascii_alphabetic)).then_some((u64::from(len), ty))
}

/// Walks the chunks of the virtual file `r`; returns the offset of the
/// first chunk that fails (bad header, bad CRC, or past its end), or
/// `None` for an intact PNG or no PNG.
fn break_at(r: &TwoRuns, b: &mut Budget) -> Option<u64> {
    let max_len = r.len();
    let mut sig = [0u8; 8];
    if !read_exact(r, 0, &mut sig) || &sig != SIG {
        return None;
    }
    let mut pos = 8u64;
    for _ in 0..1_000_000 {
        let mut h = [0u8; 8];
        if pos + 8 > max_len || !read_exact(r, pos, &mut h) {
            return Some(pos);
        }
        let Some((len, ty)) = plausible(&h) else {
            return Some(pos);
        };
        let end = pos + 12 + len;
        if end > max_len {
            return Some(pos);
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&ty);
        if !for_each_piece(r, pos + 8, len, b, |d| {
            crc.update(d);
            true
        }) {
            return None;
        }
        let mut stored = [0u8; 4];
        if !read_exact(r, pos + 8 + len, &mut stored)
            || crc.finalize() != u32::from_be_bytes(stored)
        {
            return Some(pos);
        }
        if &ty == b"IEND" {
            return None;
        }
        pos = end;
    }
    None
}

/// Recovers the PNG whose proven part is `head` (from its header; the
/// last run open-ended): finds where its chunk chain breaks and the next
/// fragment, recursively while runs are left. `max_len`: the file's bound
/// (`head` may be shorter: a run placed before an earlier one ends where
/// that one starts, and the next run goes on elsewhere).
pub(super) fn recover(head: &TwoRuns, max_len: u64, cl: u64, b: &mut Budget) -> Option<Joined> {
    let have = head.len();
    let pos = break_at(head, b)?;
    if pos < 33 {
        return None;
    }
    let mut h = [0u8; 8];
    let hdr = if read_exact(head, pos, &mut h) {
        plausible(&h)
    } else {
        None
    };
    let hi = match hdr {
        Some((len, _)) => (pos + 12 + len).min(have),
        None => (pos + 9).min(have),
    };
    // A breaking chunk that claims more than max_len allows cannot end in
    // any join whose split leaves its header in fragment 1: only splits
    // inside the header remain (without this, a hostile image of PNGs
    // claiming 2 GiB chunks cost max_candidates tries per PNG).
    let fits = hdr.is_some_and(|(len, _)| pos + 12 + len <= max_len);
    // Splits: cluster multiples in [pos, hi), with the CRC state of the
    // breaking chunk's bytes before each (when its header is in fragment 1).
    let mut splits: Vec<(u64, Option<crc32fast::Hasher>)> = Vec::new();
    let first = pos.div_ceil(cl) * cl;
    let mut crc = crc32fast::Hasher::new();
    let mut crc_pos = pos + 4; // bytes [pos + 4, crc_pos) are in `crc`
    let mut s = first;
    while s < hi && (splits.len() as u64) < b.lim.max_splits {
        if s <= head.split() {
            s += cl;
            continue;
        }
        let state = if s >= pos + 8 {
            if !fits {
                break;
            }
            let n = s - crc_pos;
            let ok = for_each_piece(head, crc_pos, n, b, |d| {
                crc.update(d);
                true
            });
            if !ok {
                return None;
            }
            crc_pos = s;
            Some(crc.clone())
        } else {
            None
        };
        splits.push((s, state));
        s += cl;
    }
    if splits.is_empty() {
        return None;
    }
    let mut cache = Cache::new(head.r);
    let at: Vec<u64> = splits.iter().map(|(s, _)| *s).collect();
    nearest_first(head, &at, cl, b, |i, s2, b| {
        let (split, state) = &splits[i];
        let j = head.then(*split, s2, max_len)?;
        match try_join(&j, pos, state.as_ref(), &mut cache, b)? {
            Ok(found) => Some(Some(found)),
            // The chunk across this join is proven; the file breaks
            // again further on: that search decides for the file.
            Err(note) => Some(recover(&j, max_len, cl, b).map(|mut f| {
                f.notes.insert(0, note);
                f
            })),
        }
    })
    .flatten()
}

/// `Ok`: the join proves the whole file; `Err(note)`: the chunk across
/// the join is proven by its CRC but the file breaks again later (and
/// `j` may take one more run).
fn try_join(
    j: &TwoRuns,
    pos: u64,
    state: Option<&crc32fast::Hasher>,
    cache: &mut Cache,
    b: &mut Budget,
) -> Option<Result<Joined, String>> {
    let mut h = [0u8; 8];
    if !cache.read_joined(j, pos, &mut h) {
        return None;
    }
    let (len, ty) = plausible(&h)?;
    let end = pos + 12 + len;
    if &ty != b"IEND" && !cache.read_joined(j, end, &mut h) {
        return None;
    }
    if &ty != b"IEND" {
        plausible(&h)?;
    }
    // CRC of the chunk across the join.
    let mut stored = [0u8; 4];
    if !cache.read_joined(j, pos + 8 + len, &mut stored) {
        return None;
    }
    let data_end = pos + 8 + len;
    let crc = match state {
        Some(st) if j.split() <= data_end => {
            let mut c = st.clone();
            let ok = for_each_piece(j.r, j.b(), data_end - j.split(), b, |d| {
                c.update(d);
                true
            });
            ok.then(|| c.finalize())?
        }
        _ => {
            let mut c = crc32fast::Hasher::new();
            let ok = for_each_piece(j, pos + 4, len + 4, b, |d| {
                c.update(d);
                true
            });
            ok.then(|| c.finalize())?
        }
    };
    if crc != u32::from_be_bytes(stored) || tail_of_copy(j.r, j, SIG) {
        return None;
    }
    let v = validate_join("png", j, b)?;
    if v.status != Status::Complete || v.length <= j.split() {
        return (j.count() < MAX_RUNS).then(|| {
            Err(format!(
                "fragment {} proven by the CRC of the PNG chunk at {pos} across its start; split at {}, fragment at {}",
                j.count(),
                j.split(),
                j.b()
            ))
        });
    }
    let kind = if j.count() == 2 {
        "bifragment"
    } else {
        "multi-fragment"
    };
    let note = format!(
        "{kind} join proven by PNG chunk CRCs (chunk at {pos} spans the join) and a complete chunk walk; split at {}, second fragment at {}",
        j.split(),
        j.b()
    );
    joined(j, v.length, v.subtype, note).map(Ok)
}
