//! The entropy decoder: one scan's MCUs, block by block (sequential,
//! progressive first and refinement passes), with restart markers, checked
//! against the frame's geometry; [`Mark`]s where decoding may resume.

use super::bits::{Bits, Buffered, FIRST_PIECE, Mark, RESUME_PIECE, ScanErr};
use super::frame::{
    Frame, FrameKind, History, MAX_DIRTY, MemoHistory, Scan, scan_blocks, scan_geometry,
};
use super::huffman::{FAST_EOB, FAST_ZRL, Huff, MULTI_EOB, NO_FAST, NO_MULTI, ahead};
use super::memo::ScanMemo;
use super::memo::{
    Lookup, MEMO_MAX_RUNS, MEMO_SLACK, MemoEntry, MemoKey, SHIFT_AFTER, Shifted, Step,
    memo_history, memo_history_restore, memo_resume_limit,
};
use super::tables::Tables;
use super::trail::Snap;
use super::trail::{MarkRec, Undo};

use crate::carve::validators::ByteReader;
use crate::carve::validators::read::Cursor;

/// Blocks of a sequential scan from which building [`Huff::multi`] pays.
pub(super) const MULTI_MIN_BLOCKS: u64 = 256;

/// Where a scan's decode resumes: `(mcu, eobrun, rst, good)`.
type Resume = Option<(u64, u32, u8, u64)>;

/// The memo a scan may use: its key, the memo, and the image reader (or
/// view) it is keyed by with that reader's id.
type MemoUse<'a> = (MemoKey, std::sync::Arc<ScanMemo>, &'a dyn ByteReader, usize);

/// Decodes one scan starting at the cursor; on success the cursor is at the
/// marker that ends the scan. Errors carry the offset where good data ends
/// (the start of the failing MCU row or restart interval) and the offset
/// the decoder had reached when it failed (plus the bytes it may hold).
pub(super) fn decode_scan(
    c: &mut Cursor,
    buf: &mut Vec<u8>,
    kept: &mut Buffered,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
) -> Result<(), (ScanErr, u64, u64)> {
    let start = c.pos();
    let resume = t
        .snap
        .resume
        .take_if(|r| r.m.scan == t.snap.scan && r.m.at >= start);
    if t.resume_ready && resume.is_none() {
        restart_history(t);
    }
    let progressive = f.kind == FrameKind::Progressive;
    let sequential = f.kind == FrameKind::Sequential;
    let blocks = scan_blocks(f, s);
    let fresh = resume.is_none();
    let memo = memo_use(c, t, f, s, fresh, blocks);
    let mut from = None;
    let mut _claim = None;
    let mut shifted = None;
    if let Some((key, m, image, id)) = &memo {
        let trail = t
            .snap
            .trail
            .as_ref()
            .filter(|tr| tr.valid)
            .map(|tr| tr.spec);
        // (A decode resumed from a snapshot leaves no snapshot below it.)
        let below = resume.as_ref().map_or(0, |r| r.m.at);
        let usable = |common: u64| memo_resume_limit(start, common, trail, below);
        // (A resumed sequential decode that goes on for long may be
        // decoding a kept decode's bytes from elsewhere: [`Shifted`].)
        let shifts = !fresh && sequential && t.restart == 0 && t.snap.wants.is_empty();
        let (found, claim, kin) = m.lookup(
            key,
            (&c.src(), *image, *id),
            (start, &t.history, t.memo_sync.then_some(&t.memo_last)),
            (fresh, trail.is_some(), shifts),
            usable,
        );
        if !kin.is_empty() {
            shifted = Some(Shifted::new(kin, (*image, *id), trail, below));
        }
        match found {
            Lookup::Whole(e) => {
                charge(t, resume.as_ref(), blocks);
                return answered(c, t, start, e);
            }
            // (A snapshot at or past the mark: resumed from there.)
            Lookup::From(marks)
                if resume
                    .as_ref()
                    .is_none_or(|r| marks.last().is_some_and(|m| start + m.at > r.m.at)) =>
            {
                use std::sync::atomic::Ordering::Relaxed;
                let skipped = marks.last().map_or(0, |m| m.at);
                m.resumes.fetch_add(1, Relaxed);
                m.resumed_bytes.fetch_add(skipped, Relaxed);
                from = Some(marks);
            }
            Lookup::From(_) | Lookup::Miss => {}
        }
        _claim = claim;
    }
    let mark = from.as_ref().and_then(|m| m.last());
    let mut b = match (&resume, mark) {
        (Some(r), None) => bits_from_snapshot(c, buf, t, r),
        (_, Some(m)) => {
            // A memo's mark: the state a decode of the same bytes had there
            // (a sequential scan: no history).
            let b = bits_at(c, buf, start + m.at, FIRST_PIECE, (m.acc, m.n, m.pad));
            charge(t, resume.as_ref(), blocks);
            if let Some(tr) = t.snap.trail.as_mut() {
                tr.resumed_at(start + m.at);
            }
            b
        }
        (None, None) => Bits::new(c.src(), start, buf, *kept),
    };
    let init: Resume = match (&resume, mark) {
        (_, Some(m)) => Some((m.mcu, m.eobrun, m.rst, start + m.good)),
        (Some(r), None) => Some((r.m.mcu, r.m.eobrun, r.m.rst, r.m.good)),
        (None, None) => None,
    };
    // (Outcomes and marks are kept from decodes of the whole scan.)
    let keeps = memo.as_ref().filter(|_| fresh);
    let before = (keeps.is_some() && progressive).then(|| {
        if t.memo_sync {
            t.memo_last.clone()
        } else {
            memo_history(&t.history, &t.memo_last)
        }
    });
    t.memo_sync = false;
    if keeps.is_some() && !progressive {
        t.snap.marks = Some(MarkRec::new(start, from.unwrap_or_default()));
    }
    t.hist_hi = 0;
    let shifts = memo.as_ref().map(|m| &m.1);
    let (r, init) = decode_pausing(&mut b, (start, t, f, s), init, shifted.as_mut(), shifts);
    if progressive && s.ss > 0 {
        note_changed_words(t, s, init);
    }
    let marks = t.snap.marks.take().map(|r| r.list);
    *kept = b.buffered();
    let fail = b.at();
    if let Some(memo) = keeps {
        keep_outcome(c, t, memo, (start, &r, fail), before, marks);
    }
    let at = r.map_err(|(e, good)| (e, good, fail))?;
    c.seek(at);
    Ok(())
}

/// A scan decoded before the one resumed from: from the history the frame
/// starts with, as without the snapshot's restored early.
fn restart_history(t: &mut Tables) {
    t.resume_ready = false;
    t.memo_sync = false;
    for c in t.history.iter_mut().flatten() {
        c.fill(0);
    }
    t.all_dirty();
}

/// The memo this scan consults, if any: a scan decoded before in this
/// carving (same parameters, same bytes) gives its outcome, charged as a
/// decode; or (a sequential scan whose bytes repeat only up to some point)
/// the last of its marks before there. A decode resumed from a snapshot (a
/// fragment search's) asks too, for a sequential scan: the scan's outcome
/// does not depend on where its decode resumed, and a mark past the
/// snapshot is nearer the end.
fn memo_use<'a>(
    c: &Cursor<'a>,
    t: &Tables,
    f: &Frame,
    s: &Scan,
    fresh: bool,
    blocks: u64,
) -> Option<MemoUse<'a>> {
    let progressive = f.kind == FrameKind::Progressive;
    let sequential = f.kind == FrameKind::Sequential;
    let asks = t.snap.wants.is_empty()
        && if fresh {
            (progressive || sequential) && t.budget >= blocks
        } else {
            sequential
        };
    asks.then(|| c.src().context().jpeg_memo.clone())
        .flatten()
        .and_then(|(m, id)| {
            // The image's reader, or a view of it (a file system's layout).
            let image = c.src().image_reader(id)?;
            Some((ScanMemo::key(&c.src(), c.pos(), t, f, s)?, m, image, id))
        })
}

/// The scan's blocks: charged at its start, or in the snapshot's budget.
fn charge(t: &mut Tables, resume: Option<&Snap>, blocks: u64) {
    match resume {
        Some(r) => t.budget = r.m.budget,
        None => t.budget -= blocks,
    }
}

/// A memo's whole outcome for this scan, taken as if decoded here.
fn answered(
    c: &mut Cursor,
    t: &mut Tables,
    start: u64,
    e: MemoEntry,
) -> Result<(), (ScanErr, u64, u64)> {
    if let Some(tr) = t.snap.trail.as_mut() {
        // (Not decoded here: no snapshots in this scan. A
        // failure here leaves none near it.)
        match e.outcome {
            Ok(end) => tr.resumed_at(start + end),
            Err(_) => tr.valid = false,
        }
    }
    if let Some(h) = &e.history {
        t.all_dirty();
        let last = t.memo_sync.then_some(&t.memo_last);
        memo_history_restore(&mut t.history, &h.1, last);
        t.memo_last = h.1.clone();
        t.memo_sync = true;
    }
    match e.outcome {
        Ok(end) => {
            c.seek(start + end);
            Ok(())
        }
        Err((why, good, fail)) => Err((ScanErr::Bad(why), start + good, start + fail)),
    }
}

/// A bit reader at `at` in the state `(acc, n, pad)` a decode had there.
fn bits_at<'s, 'b>(
    c: &Cursor<'s>,
    buf: &'b mut Vec<u8>,
    at: u64,
    piece: usize,
    (acc, n, pad): (u64, u32, u32),
) -> Bits<'s, 'b> {
    let first = Buffered {
        off: at,
        len: 0,
        piece,
    };
    let mut b = Bits::new(c.src(), at, buf, first);
    b.acc = acc;
    b.n = n;
    b.pad = pad;
    b
}

/// A decode resumed from a snapshot: its bit reader, history and budget.
fn bits_from_snapshot<'s, 'b>(
    c: &Cursor<'s>,
    buf: &'b mut Vec<u8>,
    t: &mut Tables,
    r: &Snap,
) -> Bits<'s, 'b> {
    // (A resumed decode is often a probe of a few KiB past a split:
    // its first read is small, and pieces double from there.)
    let b = bits_at(c, buf, r.m.at, RESUME_PIECE, (r.m.acc, r.m.n, r.m.pad));
    if !std::mem::take(&mut t.resume_ready) {
        t.all_dirty();
        t.memo_sync = false;
        match (t.history.as_mut(), r.history.as_deref()) {
            (Some(h), Some(from)) => h.clone_from(from),
            (_, from) => t.history = from.cloned(),
        }
    }
    t.budget = r.m.budget;
    b
}

/// Decodes the scan's body; where it pauses (a long resumed sequential
/// decode, [`Shifted`]), it goes on or jumps to a kept decode's mark.
/// Returns the outcome and where the decode last (re)started.
fn decode_pausing(
    b: &mut Bits,
    (start, t, f, s): (u64, &mut Tables, &Frame, &Scan),
    mut init: Resume,
    mut shifted: Option<&mut Shifted>,
    memo: Option<&std::sync::Arc<ScanMemo>>,
) -> (Result<u64, (ScanErr, u64)>, Resume) {
    if shifted.is_some() {
        t.pause_at = b.at().saturating_add(SHIFT_AFTER);
    }
    let r = loop {
        let r = scan_body_best(b, start, t, f, s, init);
        let Some(p) = t.paused.take() else {
            break r;
        };
        init = Some(p);
        let Some(sh) = shifted.as_deref_mut() else {
            continue;
        };
        let (mcux, mcuy, _) = scan_geometry(f, s);
        match sh.paused(b, p, (mcux, mcux * mcuy)) {
            Step::Pause(at) => t.pause_at = at,
            Step::Go => {}
            Step::Jump(at, mcu) => {
                init = Some((mcu, 0, p.2, p.3));
                if let Some(tr) = t.snap.trail.as_mut() {
                    tr.resumed_at(at);
                }
                if let Some(m) = memo {
                    use std::sync::atomic::Ordering::Relaxed;
                    m.shifts.fetch_add(1, Relaxed);
                }
            }
        }
    };
    t.pause_at = u64::MAX;
    t.paused = None;
    (r, init)
}

/// The history words an AC scan of a restored history may have changed:
/// blocks from where it started to the last it asked for.
fn note_changed_words(t: &mut Tables, s: &Scan, init: Resume) {
    let hist_hi = t.hist_hi;
    let Some(d) = t.restored.as_mut().and_then(|r| r.dirty.as_mut()) else {
        return;
    };
    let lo = init.map_or(0, |i| i.0);
    for &(ci, _, _) in &s.comps {
        d.push((ci, lo, hist_hi));
    }
    if d.len() > MAX_DIRTY {
        t.all_dirty();
    }
}

/// Keeps a whole scan's outcome (and marks, and history change) in the
/// memo, unless it may have seen the window's end or its bytes lie in too
/// many runs.
fn keep_outcome(
    c: &Cursor,
    t: &mut Tables,
    (key, m, _, id): &MemoUse,
    (start, r, fail): (u64, &Result<u64, (ScanErr, u64)>, u64),
    before: Option<MemoHistory>,
    marks: Option<Vec<Mark>>,
) {
    let outcome = match r {
        Ok(end) => Some(Ok(end - start)),
        Err((ScanErr::Bad(why), good)) => Some(Err((*why, good - start, fail - start))),
        // (Cut by the window: depends on where the window ends.)
        Err((ScanErr::Cut, _)) => None,
    };
    // (An outcome that may have seen the window's end is not kept.)
    let slack = if r.is_ok() { 0 } else { MEMO_SLACK };
    let depends = fail.saturating_add(slack).saturating_sub(start);
    if let Some(outcome) = outcome
        && start.saturating_add(depends) <= c.src().len()
        && let Some(runs) = c.src().image_runs(*id, start, depends)
        && runs.len() <= MEMO_MAX_RUNS
    {
        m.keep(
            *key,
            MemoEntry {
                runs,
                depends,
                outcome,
                history: before.map(|h| {
                    let after = memo_history(&t.history, &h);
                    t.memo_last = after.clone();
                    t.memo_sync = true;
                    std::sync::Arc::new((h, after))
                }),
                marks: marks.unwrap_or_default().into(),
            },
        );
    }
}

/// [`scan_body`], compiled for the CPU's bit-counting instructions when it
/// has them: on x86-64 without them (the baseline target) every
/// `count_ones` of the progressive refinement's masks is a dozen
/// instructions, and `trailing_zeros` a branch (measured: progressive files
/// decode about 16% faster with them). The same integer operations either
/// way: the verdicts are identical.
pub(super) fn scan_body_best(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("lzcnt")
    {
        if std::arch::is_x86_feature_detected!("bmi2") {
            // SAFETY: scan_body_shifts needs POPCNT, BMI1, LZCNT and BMI2,
            // and this CPU has all four (checked just above).
            return unsafe { scan_body_shifts(b, start, t, f, s, init) };
        }
        // SAFETY: scan_body_bits needs POPCNT, BMI1 and LZCNT, and this CPU
        // has all three (checked just above).
        return unsafe { scan_body_bits(b, start, t, f, s, init) };
    }
    scan_body(b, start, t, f, s, init)
}

/// [`scan_body_bits`] with BMI2 too: shifts by a register amount
/// (`SHLX`/`SHRX`) without the flags dependency of `SHL`, on the decoder's
/// critical path (measured 2-6% faster than without).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,lzcnt,bmi2")]
pub(super) fn scan_body_shifts(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    scan_body(b, start, t, f, s, init)
}

/// [`scan_body`] with POPCNT, BMI1 (TZCNT) and LZCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,lzcnt")]
pub(super) fn scan_body_bits(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    scan_body(b, start, t, f, s, init)
}

/// [`decode_scan`] on a reader at `start`; returns the offset of the marker
/// that ends the scan.
#[inline(always)]
pub(super) fn scan_body(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    let interleaved = s.comps.len() > 1;
    let (mcux, mcuy, per_mcu) = scan_geometry(f, s);
    let total = mcux * mcuy;
    if init.is_none() {
        match t.budget.checked_sub(total * per_mcu) {
            Some(left) => t.budget = left,
            None => return Err((ScanErr::Bad("too many blocks to decode"), start)),
        }
    }
    let (max_dc, max_ac) = if f.precision > 8 { (15, 14) } else { (11, 10) };
    let progressive = f.kind == FrameKind::Progressive;
    if !progressive && total * per_mcu >= MULTI_MIN_BLOCKS {
        for &(_, _, ta) in &s.comps {
            if let Some(h) = &t.ac[ta] {
                h.build_multi();
            }
        }
    }
    let (mcu0, mut eobrun, mut rst, mut good) = init.unwrap_or((0, 0, 0, start));
    let restart = u64::from(t.restart);
    // `mcu % mcux` and `mcu % restart`, counted rather than divided.
    let mut col = mcu0.checked_rem(mcux).unwrap_or(0);
    let mut in_interval = mcu0.checked_rem(restart).unwrap_or(0);
    // An end-of-band run of a first AC scan may be counted off at once: a
    // block in it reads nothing (see the end of the loop).
    // (Not while snapshots are captured: they need every boundary. A
    // trail needs only the last boundary of a run, where the decode goes
    // on reading: every boundary of a run lies at the same bit, each
    // replaces the one before it, and the first to follow the run is where
    // the grid points before that bit are settled.)
    let runs = progressive && s.ss > 0 && s.ah == 0 && !interleaved && t.snap.wants.is_empty();
    let trailing = t.snap.trail.is_some();
    let mut mcu = mcu0;
    while mcu < total {
        if init.is_some() && mcu == mcu0 {
            // Resumed: this boundary was handled before the snapshot.
        } else if restart > 0 && mcu > 0 && in_interval == 0 {
            match b.finish(0) {
                Ok((m, _)) if m == 0xD0 + rst => {}
                Ok(_) => {
                    return Err((
                        ScanErr::Bad("restart marker missing or out of sequence"),
                        good,
                    ));
                }
                Err(e) => return Err((e, good)),
            }
            rst = (rst + 1) % 8;
            eobrun = 0;
            good = b.at();
        } else if col == 0 {
            good = b.pos().max(good);
        }
        col += 1;
        if col == mcux {
            col = 0;
        }
        in_interval += 1;
        if in_interval == restart {
            in_interval = 0;
        }
        if b.at() >= t.pause_at && !b.marker && !b.cut {
            // (Resumed with `init` at this boundary: handled above, and the
            // counters counted again from `mcu`.)
            t.pause_at = u64::MAX;
            t.paused = Some((mcu, eobrun, rst, good));
            return Err((ScanErr::Cut, good));
        }
        boundary(b, t, (s, progressive), (mcu, eobrun, rst, good))?;
        decode_mcu(b, t, (f, s), mcu, &mut eobrun, (max_dc, max_ac)).map_err(|e| (e, good))?;
        mcu += 1;
        if runs && eobrun > 0 {
            // The next blocks up to the run's end, the scan's end or the
            // next restart: each would only take one off the run (and mark
            // a row start at the unchanged position).
            let mut limit = total - mcu;
            if restart > 0 {
                limit = if in_interval == 0 {
                    0
                } else {
                    limit.min(restart - in_interval)
                };
            }
            let mut skip = u64::from(eobrun).min(limit);
            // (A trail's last boundary at this bit: not skipped where the
            // scan or the restart interval ends with the run.)
            if trailing && skip == limit {
                skip = skip.saturating_sub(1);
            }
            if skip > 0 {
                if col == 0 || col + skip > mcux {
                    good = b.pos().max(good);
                }
                eobrun -= skip as u32;
                mcu += skip;
                col = (col + skip) % mcux;
                in_interval = in_interval.wrapping_add(skip);
                if restart > 0 {
                    in_interval %= restart;
                }
            }
        }
    }
    match b.finish(0) {
        Ok((m, at)) if !matches!(m, 0x00 | 0xD0..=0xD7) => Ok(at),
        Ok(_) => Err((ScanErr::Bad("restart marker after the last MCU"), good)),
        Err(e) => Err((e, good)),
    }
}

/// What an MCU boundary leaves for later: the snapshots asked for (the
/// latest boundary at or before each split), the fragment search's trail,
/// the memo's marks. Fails once every snapshot asked for is taken.
#[inline(always)]
fn boundary(
    b: &Bits,
    t: &mut Tables,
    (s, progressive): (&Scan, bool),
    (mcu, eobrun, rst, good): (u64, u32, u8, u64),
) -> Result<(), (ScanErr, u64)> {
    // Capture: the latest boundary at or before each split. This
    // boundary replaces the latest one for the splits it lies before;
    // for the others the latest one is final.
    if !t.snap.wants.is_empty() {
        let ok = !b.marker && !b.cut;
        let k = if ok {
            t.snap.wants.partition_point(|&w| w < b.at())
        } else {
            t.snap.wants.len()
        };
        if t.snap.latest.is_some() {
            t.snap.finalize_upto(k, &t.history);
        }
        // Past every split: no later boundary changes a snapshot (a
        // split's is final once a boundary past it is seen).
        if ok && k == t.snap.wants.len() && t.snap.stop {
            return Err((ScanErr::Bad("every snapshot taken"), good));
        }
        if ok && k < t.snap.wants.len() {
            let undo = changed_word(t, s, progressive, mcu);
            let snap =
                Mark::here(b, t, (mcu, eobrun, rst, good)).snap(t.snap.wants[k], Vec::new(), None);
            t.snap.latest = Some((snap, undo));
            t.snap.k = k;
        }
    } else if t.snap.trail.as_ref().is_some_and(|tr| tr.valid) {
        let undo = changed_word(t, s, progressive, mcu);
        let mark = (!b.marker && !b.cut).then(|| Mark::here(b, t, (mcu, eobrun, rst, good)));
        if let Some(tr) = t.snap.trail.as_mut() {
            // The word the last MCU may have changed is logged if it
            // did; this MCU's, at the next boundary.
            tr.flush(&t.history);
            tr.pending = undo;
            if let Some(m) = mark {
                tr.boundary(m, &t.snap.scan_ends, &t.history);
            }
        }
    }
    if t.snap.marks.as_ref().is_some_and(|r| b.at() >= r.next) && !b.marker && !b.cut {
        let mark = Mark::here(b, t, (mcu, eobrun, rst, good));
        if let Some(r) = t.snap.marks.as_mut() {
            r.push(mark);
        }
    }
    Ok(())
}

/// Decodes the blocks of MCU `mcu`: each component's blocks in it, by
/// the scan's kind (sequential, progressive DC first or refinement, AC
/// first or refinement against the coefficient history).
#[inline(always)]
fn decode_mcu(
    b: &mut Bits,
    t: &mut Tables,
    (f, s): (&Frame, &Scan),
    mcu: u64,
    eobrun: &mut u32,
    (max_dc, max_ac): (u8, u8),
) -> Result<(), ScanErr> {
    let interleaved = s.comps.len() > 1;
    let progressive = f.kind == FrameKind::Progressive;
    for &(ci, td, ta) in &s.comps {
        let (_, h, v) = f.comps[ci];
        let nblocks = if interleaved { h * v } else { 1 };
        for _ in 0..nblocks {
            let r = if !progressive {
                let (Some(dc), Some(ac)) = (&t.dc[td], &t.ac[ta]) else {
                    return Err(ScanErr::Bad("missing table"));
                };
                block_sequential(b, dc, ac, max_dc, max_ac)
            } else if s.ss == 0 {
                if s.ah == 0 {
                    match &t.dc[td] {
                        Some(dc) => b.dc(dc, max_dc),
                        None => Err(ScanErr::Bad("missing table")),
                    }
                } else {
                    b.skip(1)
                }
            } else {
                let Some(ac) = &t.ac[ta] else {
                    return Err(ScanErr::Bad("missing table"));
                };
                t.hist_hi = mcu + 1;
                let hist = t
                    .history
                    .as_mut()
                    .and_then(|hh| hh.get_mut(ci))
                    .and_then(|hc| hc.get_mut(mcu as usize));
                if s.ah == 0 {
                    block_ac_first(b, ac, s, eobrun, max_ac, hist)
                } else {
                    match hist {
                        Some(hb) => block_ac_refine(b, ac, s, eobrun, hb),
                        None => Err(ScanErr::Bad("no history")),
                    }
                }
            };
            r?;
        }
    }
    Ok(())
}

/// One block of a sequential scan. Every step keeps the reader's state
/// (bits held, fills, errors) exactly that of decoding code by code with
/// [`Bits::decode`] and [`Bits::skip`]: a fill where a code is next and
/// fewer than 16 bits are held, a code and its extra bits dropped in one
/// step when the lookup has them and the real bits suffice (no fill falls
/// between them then), anything else the long way.
#[inline(always)]
pub(super) fn block_sequential(
    b: &mut Bits,
    dc: &Huff,
    ac: &Huff,
    max_dc: u8,
    max_ac: u8,
) -> Result<(), ScanErr> {
    b.dc(dc, max_dc)?;
    let multi = ac.multi().unwrap_or(&NO_MULTI);
    let fast = ac.fast.as_deref().unwrap_or(&NO_FAST);
    let mut k = 1u32;
    // The accumulator in registers between fills and long-way symbols.
    let (mut acc, mut n, mut pad) = (b.acc, b.n, b.pad);
    loop {
        if n < 16 {
            b.acc = acc;
            b.n = n;
            b.fill();
            (acc, n, pad) = (b.acc, b.n, b.pad);
        }
        let idx = ahead(acc);
        // Several symbols at once when no fill falls before the last code
        // (at least 16 bits held there) and the real bits suffice.
        let e = multi[idx];
        let t = e & 0xFF;
        if e != 0 && t + pad <= n && (e >> 24) + 16 <= n {
            let next = k + (e >> 8 & 0x7F);
            if e & MULTI_EOB != 0 {
                // The symbols before the EOB stay inside the block.
                if next < 64 {
                    b.acc = acc << t;
                    b.n = n - t;
                    return Ok(());
                }
            } else if next <= 64 {
                acc <<= t;
                n -= t;
                k = next;
                if k == 64 {
                    b.acc = acc;
                    b.n = n;
                    return Ok(());
                }
                continue;
            }
        }
        let e = fast[idx];
        // Code length + extra bits: at most 11 + 10.
        let t = u32::from(e & 0xFF);
        if e != 0 && t + pad <= n {
            if e & FAST_EOB != 0 {
                b.acc = acc << t;
                b.n = n - t;
                return Ok(());
            }
            // Run + 1 (16 for ZRL): the index after the coefficient.
            let next = k + u32::from(e >> 8 & 0x3F);
            if next <= 64 {
                acc <<= t;
                n -= t;
                k = next;
                if k == 64 {
                    b.acc = acc;
                    b.n = n;
                    return Ok(());
                }
                continue;
            }
        }
        // The long way (at least 16 bits are held: no fill before the code).
        b.acc = acc;
        b.n = n;
        let rs = b.decode(ac)?;
        let (r, sz) = (u32::from(rs >> 4), rs & 15);
        if sz == 0 {
            if r != 15 {
                return Ok(());
            }
            k += 16;
            if k > 64 {
                return Err(ScanErr::Bad("zero run past the block"));
            }
        } else {
            k += r;
            if k > 63 || sz > max_ac {
                return Err(ScanErr::Bad("coefficient past the block"));
            }
            b.skip(u32::from(sz))?;
            k += 1;
        }
        if k >= 64 {
            return Ok(());
        }
        (acc, n, pad) = (b.acc, b.n, b.pad);
    }
}

/// One block of a progressive first AC scan (T.81 G.1.2.2), with the
/// one-lookup step of [`block_sequential`] for coefficients and ZRL.
#[inline(always)]
pub(super) fn block_ac_first(
    b: &mut Bits,
    ac: &Huff,
    s: &Scan,
    eobrun: &mut u32,
    max_ac: u8,
    mut hist: Option<&mut u64>,
) -> Result<(), ScanErr> {
    if *eobrun > 0 {
        *eobrun -= 1;
        return Ok(());
    }
    let se = u32::from(s.se);
    let mut k = u32::from(s.ss);
    let fast = ac.fast.as_deref().unwrap_or(&NO_FAST);
    while k <= se {
        if b.n < 16 {
            b.fill();
        }
        let e = fast[ahead(b.acc)];
        let t = u32::from(e & 0xFF);
        if e != 0 && e & FAST_EOB == 0 && t + b.pad <= b.n {
            if e & FAST_ZRL != 0 {
                b.acc <<= t;
                b.n -= t;
                k += 16;
                continue;
            }
            // After the coefficient at k + run.
            let next = k + u32::from(e >> 8 & 0x3F);
            if next <= se + 1 {
                b.acc <<= t;
                b.n -= t;
                k = next;
                if let Some(h) = hist.as_deref_mut() {
                    *h |= 1 << (k - 1);
                }
                continue;
            }
        }
        // The long way (at least 16 bits are held: no fill before the code).
        let rs = b.decode(ac)?;
        let (r, sz) = (u32::from(rs >> 4), rs & 15);
        if sz == 0 {
            if r < 15 {
                *eobrun = (1 << r) - 1;
                if r > 0 {
                    *eobrun += b.bits(r)?;
                }
                break;
            }
            k += 16;
            continue;
        }
        k += r;
        if k > se || sz > max_ac {
            return Err(ScanErr::Bad("coefficient past the spectral band"));
        }
        b.skip(u32::from(sz))?;
        if let Some(h) = hist.as_deref_mut() {
            *h |= 1 << k;
        }
        k += 1;
    }
    if k > se + 1 {
        return Err(ScanErr::Bad("zero run past the spectral band"));
    }
    Ok(())
}

/// Coefficients `k..=se` of a block, as a mask (empty when `k > se`).
#[inline]
pub(super) fn band(k: u32, se: u32) -> u64 {
    let from = if k >= 64 { 0 } else { !0u64 << k };
    let to = if se >= 63 { !0 } else { (1u64 << (se + 1)) - 1 };
    from & to
}

/// AC successive-approximation refinement (T.81 G.1.2.3; libjpeg's
/// decode_mcu_AC_refine), reading one correction bit per already-non-zero
/// coefficient. The walk over the history is done with masks: the
/// correction bits before the next zero coefficient are counted and
/// dropped at once ([`Bits::skip_bits`], the same as one by one).
#[inline(always)]
pub(super) fn block_ac_refine(
    b: &mut Bits,
    ac: &Huff,
    s: &Scan,
    eobrun: &mut u32,
    hist: &mut u64,
) -> Result<(), ScanErr> {
    let se = u32::from(s.se);
    let mut k = u32::from(s.ss);
    if *eobrun == 0 {
        while k <= se {
            if b.n < 16 {
                b.fill();
            }
            let e = ac.look[ahead(b.acc)];
            let l = u32::from(e >> 8);
            let (r, sz);
            if e != 0 && e & 15 == 1 && l + 1 + b.pad <= b.n {
                // A new coefficient and its sign bit in one step (no fill
                // falls between them, the real bits suffice).
                b.acc <<= l + 1;
                b.n -= l + 1;
                (r, sz) = (u32::from(e >> 4 & 15), 1);
            } else {
                // No fill here: at least 16 bits are held.
                let rs = b.decode(ac)?;
                (r, sz) = (u32::from(rs >> 4), rs & 15);
                if sz != 0 {
                    if sz != 1 {
                        return Err(ScanErr::Bad("refinement coefficient size is not 1"));
                    }
                    b.skip(1)?;
                } else if r != 15 {
                    *eobrun = 1 << r;
                    if r > 0 {
                        *eobrun += b.bits(r)?;
                    }
                    break;
                }
            }
            // Skip r zero coefficients (with the correction bits of the
            // non-zero ones among them): stop at the (r + 1)-th zero one,
            // past the band when there is none.
            let rest = band(k, se);
            let mut zeros = !*hist & rest;
            for _ in 0..r {
                zeros &= zeros.wrapping_sub(1);
            }
            let stop = if zeros == 0 {
                se + 1
            } else {
                zeros.trailing_zeros()
            };
            b.skip_bits((*hist & rest & !band(stop, 63)).count_ones())?;
            k = stop;
            if sz != 0 {
                if k > se {
                    return Err(ScanErr::Bad("coefficient past the spectral band"));
                }
                *hist |= 1 << k;
            }
            k += 1;
        }
    }
    if *eobrun > 0 {
        b.skip_bits((*hist & band(k, se)).count_ones())?;
        *eobrun -= 1;
    }
    Ok(())
}

/// The history word the MCU `mcu` of a progressive AC scan may change
/// (component, block, word as it is before), which a snapshot taken before
/// it must see unchanged.
pub(super) fn changed_word(t: &Tables, s: &Scan, progressive: bool, mcu: u64) -> Option<Undo> {
    if !progressive || s.ss == 0 {
        return None;
    }
    let ci = s.comps.first()?.0;
    let w = *t.history.as_ref()?.get(ci)?.get(mcu as usize)?;
    Some((ci, mcu as usize, w))
}

impl Mark {
    /// The state of the decoder `b` over `t` at the boundary before MCU
    /// `mcu` (with the scan's end-of-band run, restart count and good end).
    pub(super) fn here(
        b: &Bits,
        t: &Tables,
        (mcu, eobrun, rst, good): (u64, u32, u8, u64),
    ) -> Mark {
        Mark {
            scan: t.snap.scan,
            mcu,
            eobrun,
            rst,
            good,
            acc: b.acc,
            n: b.n,
            pad: b.pad,
            at: b.at(),
            budget: t.budget,
        }
    }

    pub(super) fn snap(&self, split: u64, scan_ends: Vec<(u32, u64)>, history: History) -> Snap {
        Snap {
            split,
            scan_ends,
            history: history.map(std::sync::Arc::new),
            m: *self,
        }
    }
}
