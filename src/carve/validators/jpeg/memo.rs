//! The memo shared between copies of a picture: an entropy-coded scan decoded
//! once is remembered by its tables and first bytes ([`ScanMemo`]), so another
//! copy of the same picture (or the same picture shifted by a fragment)
//! resumes from the memo instead of decoding again ([`Shifted`]).

use super::bits::{Bits, Mark};
use super::frame::{Frame, History, MemoHistory, Scan};
use super::tables::Tables;
use super::trail::TrailSpec;
use super::trail::{CHEAP_STICKY, TRAIL_STICKY, block_map_splits};

use crate::carve::validators::ByteReader as _;
use crate::carve::validators::read::{RunsView, Src};

/// Scans decoded once per carving: a picture stored several
/// times (copies in several folders, caches, backups) has the same
/// entropy-coded data in every copy, and decoding it again gives the same
/// answer. Each decode's outcome is kept with where its bytes lie; a later
/// scan with the same frame, tables, restart interval and scan header
/// (compared as a SHA-256 of all of them) whose bytes, read again, equal
/// every byte the earlier decode depended on gets that outcome without
/// decoding. Exact: the decode is a function of those and nothing else (the
/// blocks budget is checked and charged the same way), and the bytes are
/// compared, not hashed. Only for the validation stage's validations
/// ([`crate::carve::validators::Context::jpeg_memo`]) of the image's bytes, read directly or through a view
/// of them (a file system's layout of a file): an entry keeps where in the
/// image its bytes lie, as runs. A progressive scan also depends on
/// what the scans before it left (which coefficients are non-zero): its
/// outcome is kept with that history before it and after it, and taken only
/// when the history is equal too.
///
/// A copy that repeats a sequential scan only up to some byte (a copy the
/// image holds in fragments, read contiguously; a copy cut short) is not
/// decoded from its start either: a decode leaves marks of its state every
/// 32 KiB or so (`Mark`, as a fragment search's snapshots), and the copy
/// resumes from the last mark its bytes repeat to (far enough before the
/// first differing byte that a [`Trail`] being left still gets every
/// snapshot near where the decode stops; below the mark the trail answers
/// nothing, and the fragment search decodes for itself).
///
/// Two validations of copies running at once: the second waits for the
/// first's outcome (a scan being decoded claims its key), then takes it.
///
/// Bounded: at most 16 Ki outcomes (forgotten all at once when full), each
/// over at most 64 runs of the image and with at most 256 marks; a lookup
/// of a scan never seen costs a 4 KiB checksum.
#[derive(Default)]
pub struct ScanMemo {
    pub(super) state: std::sync::Mutex<MemoState>,
    /// A claim was given up ([`Claim`]).
    pub(super) freed: std::sync::Condvar,
    /// Scans answered from the memo, and their bytes.
    pub(super) hits: std::sync::atomic::AtomicU64,
    pub(super) hit_bytes: std::sync::atomic::AtomicU64,
    /// Scans resumed from a mark, and the bytes not decoded again.
    pub(super) resumes: std::sync::atomic::AtomicU64,
    pub(super) resumed_bytes: std::sync::atomic::AtomicU64,
    /// Decodes that went on from a kept decode's mark found by [`Shifted`].
    pub(super) shifts: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for ScanMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanMemo")
            .field("hits", &self.hits())
            .field("resumes", &self.resumes())
            .finish()
    }
}

#[derive(Default)]
pub(super) struct MemoState {
    pub(super) map: MemoMap,
    /// Bytes of history and marks held by the entries.
    pub(super) held: usize,
    /// Keys of the scans being decoded now (by [`ScanMemo::lookup`]'s callers).
    pub(super) pending: std::collections::HashSet<MemoKey>,
}

/// Checksum of the first 4 KiB of entropy-coded data, digest of the
/// decoding parameters.
pub(super) type MemoKey = (u32, [u8; 32]);

/// Key → outcomes.
pub(super) type MemoMap = std::collections::HashMap<MemoKey, Vec<MemoEntry>>;

/// Longest a lookup waits for another thread's decode of the same key (a
/// safety net: the decode holding it never waits for anything).
pub(super) const MAX_CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What a [`ScanMemo`] knows of a scan.
pub(super) enum Lookup {
    /// Its bytes repeat a kept decode's: that outcome.
    Whole(MemoEntry),
    /// Its bytes repeat a kept decode's up to a mark: the marks up to it
    /// (relative to the scan's start), the last one to resume from.
    From(Vec<Mark>),
    Miss,
}

/// A scan's key claimed while it is decoded: lookups of the same key wait
/// for its outcome.
pub(super) struct Claim<'m> {
    pub(super) memo: &'m ScanMemo,
    pub(super) key: MemoKey,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut st = self.memo.state.lock().unwrap_or_else(|e| e.into_inner());
        st.pending.remove(&self.key);
        drop(st);
        self.memo.freed.notify_all();
    }
}

/// Most outcomes a [`ScanMemo`] keeps.
pub(super) const MEMO_ENTRIES: usize = 1 << 14;
/// Most runs of the image an outcome's bytes may lie in to be kept (a
/// file listed in many extents would make an entry as large as its list).
pub(super) const MEMO_MAX_RUNS: usize = 64;

/// Bytes of entropy-coded data the memo's checksum covers.
pub(super) const MEMO_PREFIX: usize = 4096;

/// Bytes past the decoder's stopping point included in what a failed
/// decode depends on (the reader may have looked at one byte past what it
/// consumed; a scan that ended consumed its marker and looked no further).
pub(super) const MEMO_SLACK: u64 = 2;

#[derive(Clone)]
pub(super) struct MemoEntry {
    /// Where in the image the bytes the outcome depends on lie (runs of
    /// `(offset, length)`: one, unless the scan was decoded through a view
    /// such as a file system's layout of the file).
    pub(super) runs: Vec<(u64, u64)>,
    /// Bytes from there that the outcome depends on.
    pub(super) depends: u64,
    /// The scan's outcome, offsets from its first byte: the marker that ends
    /// it, or the error with where good data ended and where the decoder
    /// stopped.
    pub(super) outcome: Result<u64, (&'static str, u64, u64)>,
    /// A progressive scan's coefficient history before it (which the
    /// outcome also depends on) and after it (what it leaves).
    pub(super) history: Option<std::sync::Arc<(MemoHistory, MemoHistory)>>,
    /// A sequential scan's marks ([`MarkRec`]): `at` and `good` relative to
    /// the scan's first byte, ascending.
    pub(super) marks: std::sync::Arc<[Mark]>,
}

/// `h` as a [`MemoHistory`], each component equal to `like`'s taken from
/// it (not copied).
pub(super) fn memo_history(h: &History, like: &MemoHistory) -> MemoHistory {
    let like = like.as_deref().unwrap_or_default();
    Some(
        h.as_ref()?
            .iter()
            .enumerate()
            .map(|(ci, c)| match like.get(ci) {
                Some(a) if **a == *c => a.clone(),
                _ => std::sync::Arc::new(c.clone()),
            })
            .collect(),
    )
}

/// True when `m` holds the history `h`; `last`, when given, is a
/// [`MemoHistory`] that `h` equals (its components shared with `m` are
/// equal without being compared).
pub(super) fn memo_history_is(m: &MemoHistory, h: &History, last: Option<&MemoHistory>) -> bool {
    let last = last.and_then(Option::as_deref).unwrap_or_default();
    match (m, h) {
        (None, None) => true,
        (Some(m), Some(h)) => {
            m.len() == h.len()
                && m.iter().zip(h).enumerate().all(|(ci, (a, b))| {
                    last.get(ci).is_some_and(|l| std::sync::Arc::ptr_eq(a, l)) || **a == *b
                })
        }
        _ => false,
    }
}

/// Sets `h` to the history `m` holds; `last`, when given, is a
/// [`MemoHistory`] that `h` equals (its components shared with `m` are
/// not copied again).
pub(super) fn memo_history_restore(h: &mut History, m: &MemoHistory, last: Option<&MemoHistory>) {
    let last = last.and_then(Option::as_deref).unwrap_or_default();
    match m {
        None => *h = None,
        Some(m) => {
            let h = h.get_or_insert_with(Vec::new);
            let same_shape = h.len() == m.len();
            h.truncate(m.len());
            h.resize_with(m.len(), Vec::new);
            for (ci, (d, s)) in h.iter_mut().zip(m).enumerate() {
                if same_shape && last.get(ci).is_some_and(|l| std::sync::Arc::ptr_eq(s, l)) {
                    continue;
                }
                d.clone_from(s);
            }
        }
    }
}

/// Most bytes of coefficient history and marks a [`ScanMemo`] keeps.
pub(super) const MEMO_HELD_BYTES: usize = 64 << 20;

/// The decoding parameters of a sequential scan, as a SHA-256 digest.
pub(super) fn memo_params(t: &Tables, f: &Frame, s: &Scan) -> Option<[u8; 32]> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update([f.precision]);
    h.update(f.width.to_le_bytes());
    h.update(f.height.to_le_bytes());
    h.update(t.restart.to_le_bytes());
    for &(id, hh, vv) in &f.comps {
        h.update([id]);
        h.update(hh.to_le_bytes());
        h.update(vv.to_le_bytes());
    }
    h.update([0xFF, s.ss, s.se, s.ah]);
    for &(ci, td, ta) in &s.comps {
        h.update((ci as u32).to_le_bytes());
        for table in [t.dc.get(td)?.as_deref()?, t.ac.get(ta)?.as_deref()?] {
            for v in table
                .maxcode
                .iter()
                .chain(&table.valptr)
                .chain(&table.mincode)
            {
                h.update(v.to_le_bytes());
            }
            h.update(table.vals);
        }
    }
    Some(h.finalize().into())
}

impl ScanMemo {
    /// Scans answered from the memo so far, and the bytes not decoded again.
    pub fn hits(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.hits.load(Relaxed), self.hit_bytes.load(Relaxed))
    }

    /// The key of the scan at window offset `start` (with a progressive
    /// scan's history before it).
    pub(super) fn key(
        src: &Src,
        start: u64,
        t: &Tables,
        f: &Frame,
        s: &Scan,
    ) -> Option<(u32, [u8; 32])> {
        let mut head = [0u8; MEMO_PREFIX];
        let n = src.read(start, &mut head).min(MEMO_PREFIX);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head[..n]);
        // (Native byte order: the key only has to agree within one run.)
        for comp in t.history.iter().flatten() {
            crc.update(bytemuck::cast_slice(comp));
        }
        Some((crc.finalize(), memo_params(t, f, s)?))
    }

    /// Decodes that went on from a kept decode's mark found in step with
    /// them from another offset (a wrong split joined to the picture's own
    /// data).
    pub fn shifts(&self) -> u64 {
        self.shifts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Scans resumed from a mark so far, and the bytes not decoded again.
    pub fn resumes(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.resumes.load(Relaxed), self.resumed_bytes.load(Relaxed))
    }

    /// What the memo knows of the scan at window offset `start` (with the
    /// history before it): a kept outcome whose bytes (and history) it
    /// repeats (a failure only when no `trail` is being left), or else the
    /// marks up to the last one at most `usable(common)` bytes into the
    /// scan, `common` being how many of its first bytes repeat a kept
    /// decode's. With `claim`, waits while another thread decodes a scan
    /// with the same key, and returns this thread's claim (held while it
    /// decodes, so that others wait for it).
    pub(super) fn lookup(
        &self,
        key: &MemoKey,
        (src, image, id): (&Src, &dyn crate::carve::validators::ByteReader, usize),
        (start, history, last): (u64, &History, Option<&MemoHistory>),
        (claim, trail, kin): (bool, bool, bool),
        usable: impl Fn(u64) -> u64,
    ) -> (Lookup, Option<Claim<'_>>, Vec<MemoEntry>) {
        // (Where this scan starts in the image: not answered by itself.)
        let Some(at) = src
            .image_runs(id, start, 1)
            .and_then(|r| r.first().map(|r| r.0))
        else {
            return (Lookup::Miss, None, Vec::new());
        };
        let t0 = std::time::Instant::now();
        let (found, claimed) = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            while claim && st.pending.contains(key) {
                let Some(left) = MAX_CLAIM_WAIT.checked_sub(t0.elapsed()) else {
                    break;
                };
                st = match self.freed.wait_timeout(st, left) {
                    Ok((g, _)) => g,
                    Err(e) => e.into_inner().0,
                };
            }
            let claimed = claim && st.pending.insert(*key);
            (st.map.get(key).cloned().unwrap_or_default(), claimed)
        };
        let claim = claimed.then(|| Claim {
            memo: self,
            key: *key,
        });
        // (Kept decodes of a sequential scan with these parameters and
        // first bytes, for [`Shifted`].)
        let kin = if kin {
            found
                .iter()
                .filter(|e| e.history.is_none() && e.marks.len() >= 2)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        // (Compared outside the lock: other threads go on meanwhile.)
        let mut best: Option<(u64, MemoEntry, usize)> = None;
        for e in found {
            if !e
                .history
                .as_ref()
                .map_or(history.is_none(), |h| memo_history_is(&h.0, history, last))
            {
                continue;
            }
            let common = src.common_prefix_runs(start, (image, id), &e.runs, e.depends);
            // (A failure answered whole leaves a trail nothing near it: with
            // one asked for, the decode resumes from a mark before it.)
            if common == e.depends
                && e.runs.first().is_some_and(|r| r.0 != at)
                && (e.outcome.is_ok() || !trail)
            {
                use std::sync::atomic::Ordering::Relaxed;
                self.hits.fetch_add(1, Relaxed);
                self.hit_bytes.fetch_add(e.depends, Relaxed);
                return (Lookup::Whole(e), claim, kin);
            }
            let upto = usable(common);
            let k = e.marks.partition_point(|m| m.at <= upto);
            if let Some(m) = k.checked_sub(1).and_then(|i| e.marks.get(i))
                && m.at > 0
                && best.as_ref().is_none_or(|b| m.at > b.0)
            {
                best = Some((m.at, e, k));
            }
        }
        match best {
            Some((_, e, k)) => (Lookup::From(e.marks[..k].to_vec()), claim, kin),
            None => (Lookup::Miss, claim, kin),
        }
    }

    pub(super) fn keep(&self, key: MemoKey, entry: MemoEntry) {
        // (Components shared with other entries counted in each.)
        let size = |h: &MemoHistory| h.iter().flatten().map(|c| c.len() * 8).sum::<usize>();
        let bytes = entry
            .history
            .as_ref()
            .map_or(0, |h| size(&h.0) + size(&h.1))
            + entry.marks.len() * std::mem::size_of::<Mark>();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        if st.map.values().map(Vec::len).sum::<usize>() >= MEMO_ENTRIES
            || st.held + bytes > MEMO_HELD_BYTES
        {
            st.map.clear();
            st.held = 0;
        }
        let list = st.map.entry(key).or_default();
        if list.len() < 8 && !list.iter().any(|e| e.runs.first() == entry.runs.first()) {
            list.push(entry);
            st.held += bytes;
        }
    }
}

/// A resumed sequential decode (a fragment search's, past its split) that
/// has gone on for [`SHIFT_AFTER`] bytes may be decoding a kept decode's
/// bytes from another offset: a wrong split joined to the picture's own
/// later data (a copy's fragment, or the file's own next fragment joined
/// one split too early) decodes in step with that picture's decode until
/// the MCU count runs out or the data ends, megabytes on. Once the decode
/// is at a boundary of the kept decode's marks in the very state the mark
/// holds (same bytes ahead, verified), everything up to a later mark
/// decodes as the kept decode did, only numbered `δ` MCUs apart: the decode
/// goes on from that mark with its own MCU count. The mark is chosen so
/// that the decode reads at least an MCU row after it before it can stop
/// (the kept decode went on past it for a row, and the count leaves a row),
/// so the row start it reports as good data is its own; with a trail, no
/// later than the trail's snapshots near where it can first stop and at
/// its block-map boundaries ([`memo_resume_limit`]). The verdict is the
/// same either way (a test decodes both ways).
pub(super) struct Shifted<'i> {
    pub(super) kin: Vec<MemoEntry>,
    /// The image the kept decodes' runs lie in, and its identity.
    pub(super) image: &'i dyn crate::carve::validators::ByteReader,
    pub(super) id: usize,
    pub(super) trail: Option<TrailSpec>,
    pub(super) below: u64,
    /// The entry the bytes were found in, its offsets minus the window's,
    /// and the mark checked next.
    pub(super) found: Option<(usize, i128, usize)>,
    pub(super) tries: u32,
}

/// What a paused decode does next ([`Shifted::paused`]).
pub(super) enum Step {
    /// Goes on, to pause again at this window offset.
    Pause(u64),
    /// Goes on to the scan's end.
    Go,
    /// Goes on from window offset `.0` (the reader is there), MCU `.1`.
    Jump(u64, u64),
}

/// Bytes a resumed decode goes on for before [`Shifted`] looks.
pub(super) const SHIFT_AFTER: u64 = 128 << 10;
/// Bytes looked for in the kept decodes.
pub(super) const SHIFT_NEEDLE: usize = 64;
/// Marks tried for the decode in step with one.
pub(super) const SHIFT_TRIES: u32 = 8;
/// Fewest bytes worth skipping.
pub(super) const SHIFT_MIN_JUMP: u64 = 64 << 10;
/// Most bytes of the kept decodes searched, in all (a decode pauses to
/// search once, after decoding [`SHIFT_AFTER`] bytes, at ~8 ns a byte;
/// searching costs well under 1 ns a byte).
pub(super) const SHIFT_MAX_SEARCH: u64 = 16 << 20;

impl<'i> Shifted<'i> {
    pub(super) fn new(
        kin: Vec<MemoEntry>,
        (image, id): (&'i dyn crate::carve::validators::ByteReader, usize),
        trail: Option<TrailSpec>,
        below: u64,
    ) -> Self {
        Shifted {
            kin,
            image,
            id,
            trail,
            below,
            found: None,
            tries: 0,
        }
    }

    /// Where the mark checked next lies in the window.
    pub(super) fn next_pause(&self, now: u64) -> Step {
        let Some((e, shift, k)) = self.found else {
            return Step::Go;
        };
        let at = self.kin[e]
            .marks
            .get(k)
            .and_then(|m| u64::try_from(i128::from(m.at) - shift).ok());
        match at {
            Some(at) if at > now && self.tries < SHIFT_TRIES => Step::Pause(at),
            _ => Step::Go,
        }
    }

    /// The decode paused at an MCU boundary (`b` there, `(mcu, eobrun, rst,
    /// good)` its state; the scan `(mcux, total)` MCUs across and in all).
    pub(super) fn paused(
        &mut self,
        b: &mut Bits,
        p: (u64, u32, u8, u64),
        (mcux, total): (u64, u64),
    ) -> Step {
        let at = b.at();
        let Some((e, shift, k)) = self.found else {
            // Where do the next bytes lie in a kept decode?
            let mut needle = [0u8; SHIFT_NEEDLE];
            if b.src.read(at, &mut needle) < SHIFT_NEEDLE {
                return Step::Go;
            }
            let mut left = SHIFT_MAX_SEARCH;
            let hit = self.kin.iter().enumerate().find_map(|(i, entry)| {
                let y = find_in_runs(self.image, &entry.runs, &needle, &mut left)?;
                let k = entry.marks.partition_point(|m| m.at <= y);
                Some((i, i128::from(y) - i128::from(at), k))
            });
            self.found = hit;
            return self.next_pause(at);
        };
        let entry = &self.kin[e];
        let (Some(m), Some(last)) = (entry.marks.get(k), entry.marks.last()) else {
            return Step::Go;
        };
        let in_step = i128::from(at) == i128::from(m.at) - shift
            && (b.acc, b.n, b.pad, p.1, b.marker, b.cut)
                == (m.acc, m.n, m.pad, m.eobrun, false, false);
        if !in_step {
            self.found = Some((e, shift, k + 1));
            self.tries += 1;
            return self.next_pause(at);
        }
        self.tries = SHIFT_TRIES;
        // How far the window's bytes from here are the kept decode's: the
        // decode goes as it did through the marks before there.
        let Ok(upto) = u64::try_from(i128::from(last.at) - shift) else {
            return Step::Go;
        };
        // (Where the kept decode's bytes from the mark on lie in the image.)
        let view = RunsView::new(self.image, &entry.runs);
        let len = upto.saturating_sub(at).min(view.len().saturating_sub(m.at));
        let common = view.lies_in(m.at, len).map_or(0, |(_, runs)| {
            b.src
                .common_prefix_runs(at, (self.image, self.id), &runs, len)
        });
        let covered = |j: &&Mark| {
            u64::try_from(i128::from(j.at) - shift)
                .is_ok_and(|x| x.saturating_add(MEMO_SLACK) <= at.saturating_add(common))
        };
        let Some(lastc) = entry.marks[k..].iter().rev().find(covered) else {
            return Step::Go;
        };
        let delta = i128::from(p.0) - i128::from(m.mcu);
        let (mcux, total) = (i128::from(mcux), i128::from(total));
        // Where the decode can first stop: past the last mark it decodes
        // through as the kept decode did, or where its own count runs out.
        let ends = entry.marks[k..]
            .iter()
            .rev()
            .filter(covered)
            .find(|j| i128::from(j.mcu) + delta <= total)
            .and_then(|j| u64::try_from(i128::from(j.at) - shift).ok());
        let Some(ends) = ends else {
            return Step::Go;
        };
        let limit = match self.trail {
            Some(_) => memo_resume_limit(0, ends, self.trail, self.below),
            None => ends,
        };
        let Some((j, to)) = entry.marks[k..].iter().rev().find_map(|j| {
            let mcu = i128::from(j.mcu);
            let to = u64::try_from(i128::from(j.at) - shift).ok()?;
            (mcu + mcux <= i128::from(lastc.mcu)
                && mcu + delta >= 0
                && mcu + delta + mcux < total
                && to <= limit
                && to >= at.saturating_add(SHIFT_MIN_JUMP))
            .then_some((j, to))
        }) else {
            return Step::Go;
        };
        let Ok(mcu) = u64::try_from(i128::from(j.mcu) + delta) else {
            return Step::Go;
        };
        b.reposition(to, j);
        Step::Jump(to, mcu)
    }
}

/// The first offset, in the file `runs` of `image` make (at most `left`
/// of its bytes read, counted off), of `needle`.
pub(super) fn find_in_runs(
    image: &dyn crate::carve::validators::ByteReader,
    runs: &[(u64, u64)],
    needle: &[u8],
    left: &mut u64,
) -> Option<u64> {
    let view = RunsView::new(image, runs);
    let finder = memchr::memmem::Finder::new(needle);
    let total = view.len().min(*left);
    *left -= total;
    let mut buf = vec![0u8; usize::try_from(total.min(1 << 20)).ok()? + needle.len()];
    let mut pos = 0u64;
    while pos < total {
        let want = usize::try_from((total - pos).min(buf.len() as u64)).ok()?;
        let got = view.read_at(pos, &mut buf[..want]);
        if let Some(i) = buf.get(..got).and_then(|b| finder.find(b)) {
            return Some(pos + i as u64);
        }
        if got < want || got <= needle.len() {
            return None;
        }
        pos += (got - needle.len() + 1) as u64;
    }
    None
}

/// How far into a scan at window offset `start` the mark it resumes from
/// may lie, when its first `common` bytes repeat a kept decode's: before
/// the first differing byte (by the slack the reader may look ahead), and,
/// when the decode leaves a [`Trail`], before the grid points within the
/// trail's span of there and the block-map boundaries it keeps (the decode
/// stops at or past the first differing byte, and the trail's snapshots
/// there must all be taken; those below `below`, where the decode resumed
/// from a snapshot, it never takes).
pub(super) fn memo_resume_limit(
    start: u64,
    common: u64,
    trail: Option<TrailSpec>,
    below: u64,
) -> u64 {
    let differs = start.saturating_add(common);
    let mut limit = differs.saturating_sub(MEMO_SLACK);
    if let Some(spec) = trail {
        let grid = spec.grid.max(1);
        limit = limit.min(differs.saturating_sub(spec.span.saturating_add(grid)));
        if let Some(bs) = spec.block_map {
            // The latest TRAIL_STICKY of them are kept: those within
            // CHEAP_STICKY of the file's start are captured afterwards
            // ([`Trail::fill_sticky`]), the decode goes through the others.
            let points: Vec<u64> = block_map_splits(bs, grid, differs.saturating_add(grid))
                .filter(|&g| g >= below)
                .collect();
            let kept = &points[points.len().saturating_sub(TRAIL_STICKY)..];
            if let Some(&p) = kept.iter().find(|&&p| p > CHEAP_STICKY) {
                limit = limit.min(p);
            }
        }
    }
    limit.saturating_sub(start)
}
