//! The validation stage: between the scan and the ordered carver, it runs
//! the validators of the header candidates (all but ZIP's, which the carver
//! decides) on every core, and hands the carver each batch of events with
//! its verdicts, in the scan's order.
//!
//! Workers are kept for the whole carving and take work from up to
//! [`DEPTH`] batches at once: a batch whose last large JPEG keeps one
//! worker busy does not hold the others idle until it is done (a barrier
//! per batch left about a quarter of the stage's core time idle on the
//! generated images). Within a batch, JPEG candidates (by far the costliest
//! verdicts) are handed out first and the rest a few at a time, so that the
//! large ones start early and the small ones fill in around them.
//!
//! Bounded: at most [`DEPTH`] batches are held here, each at most
//! `PREVALIDATE_EVENTS` events (the carving module's), and the verdicts
//! are pure functions of the image, so what the carver receives does not
//! depend on the timing. A worker that panics leaves its candidates without
//! a stage verdict (the carver validates them itself), as before.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, channel, sync_channel};

use super::ImageBytes;
use super::free::{FreeSpaceCounts, FreeSpaceFilter};
use super::{Event, Profile, Validated, fragments, geometry, validate_laid_out, validators};
use crate::catalogue::Catalogue;
use validators::{ByteReader, Limits};

/// Batches validated at once.
const DEPTH: usize = 3;

/// A candidate to validate: its event's index in the batch, its start, the
/// validator and the window's length.
type Job<'v> = (usize, u64, &'v str, u64);

/// A job's verdict, with the validator and the seconds it took.
/// A job's verdict, validator, CPU seconds and bytes read from the image.
type Timed<'v> = (usize, Option<validators::Verdict>, &'v str, f64, u64);

/// What the stage's collector hears: a batch from the scan (through the
/// forwarder), the verdicts of a piece of one (by its sequence number), or
/// the end of the scan.
enum Msg<'v> {
    Batch(Vec<Event>),
    Done(u64, Vec<Timed<'v>>),
    End,
}

/// A batch being validated.
struct InFlight {
    batch: Vec<Event>,
    verdicts: Vec<Option<Option<validators::Verdict>>>,
    /// Pieces not answered yet.
    left: usize,
    /// Per validator: candidates, CPU seconds, bytes read (made a
    /// [`Profile`] once, when the batch is sent: a piece holds a few
    /// candidates, and a profile entry per piece and type cost more than
    /// the validations of dense input).
    /// (Keyed by where the catalogue holds the name, `(address, length)`:
    /// integers compare cheaper than names, for every candidate.)
    tally: std::collections::BTreeMap<(usize, usize), (String, u64, f64, u64)>,
}

/// Where and how the stage validates.
pub(super) struct Context<'a> {
    pub catalogue: &'a Catalogue,
    pub bytes: ImageBytes<'a>,
    /// The part of the image this carving owns (candidates outside it are
    /// not validated).
    pub own: (u64, u64),
    pub workers: usize,
    pub known: &'a fragments::KnownJpegs,
    pub geo: &'a geometry::Geometry,
    /// The scan's log of signature positions (the PDF validator's markers).
    pub needles: std::sync::Arc<fragments::ScanNeedles>,
    /// With `--free-space-only`: where the filter's counts go once the
    /// scan's batches have ended ([`super::free`]).
    pub free_space: Option<&'a Mutex<Option<FreeSpaceCounts>>>,
}

/// Runs the stage until the scan's batches end or the carver stops taking
/// them. True when every batch the scan sent has been passed on.
pub(super) fn run(cx: &Context<'_>, rx: Receiver<Vec<Event>>, vtx: SyncSender<Validated>) -> bool {
    let workers = cx.workers.max(1);
    let (msg_tx, msg_rx) = channel::<Msg>();
    // One token per batch held here: the forwarder takes one before it
    // passes a batch on, the collector gives it back once the batch is sent.
    let (tok_tx, tok_rx) = sync_channel::<()>(DEPTH);
    for _ in 0..DEPTH {
        if tok_tx.send(()).is_err() {
            return false;
        }
    }
    let (job_tx, job_rx) = channel::<(u64, Vec<Job>)>();
    let job_rx = Mutex::new(job_rx);
    std::thread::scope(|s| {
        let forward = msg_tx.clone();
        s.spawn(move || {
            // Headers in allocated clusters go no further.
            let mut free = cx
                .free_space
                .map(|_| FreeSpaceFilter::new(cx.geo, &cx.bytes));
            for mut batch in rx {
                if let Some(f) = free.as_mut() {
                    batch.retain(|e| match e {
                        Event::Header(c) => f.keep(&cx.bytes, c.start),
                        _ => true,
                    });
                }
                if tok_rx.recv().is_err() || forward.send(Msg::Batch(batch)).is_err() {
                    return;
                }
            }
            if let (Some(f), Some(slot)) = (free, cx.free_space) {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(f.finish(&cx.bytes));
            }
            let _ = forward.send(Msg::End);
        });
        for _ in 0..workers {
            let answer = msg_tx.clone();
            let job_rx = &job_rx;
            s.spawn(move || {
                loop {
                    let next = job_rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok((seq, part)) = next else {
                        return;
                    };
                    // A panic in a validator leaves the piece without verdicts.
                    let done = catch_unwind(AssertUnwindSafe(|| {
                        let t0 = super::CpuClock::start();
                        let shared = shared(cx);
                        let mut done = part
                            .iter()
                            .map(|&job| timed(cx, &shared, job))
                            .collect::<Vec<_>>();
                        share_time(&mut done, t0.secs());
                        done
                    }))
                    .unwrap_or_default();
                    if answer.send(Msg::Done(seq, done)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(msg_tx);
        let complete = collect(cx, &msg_rx, &job_tx, &tok_tx, &vtx, workers);
        // Workers, forwarder: their channels close with these.
        drop(job_tx);
        drop(tok_tx);
        drop(msg_rx);
        complete
    })
}

/// The collector: hands out each batch's jobs, gathers the verdicts and
/// sends the batches on in order. True when the scan's batches have ended
/// and all were sent.
fn collect<'v>(
    cx: &Context<'v>,
    msgs: &Receiver<Msg<'v>>,
    jobs: &std::sync::mpsc::Sender<(u64, Vec<Job<'v>>)>,
    tokens: &SyncSender<()>,
    vtx: &SyncSender<Validated>,
    workers: usize,
) -> bool {
    let mut flight: VecDeque<InFlight> = VecDeque::new();
    // Sequence number of flight[0].
    let mut first = 0u64;
    let mut ended = false;
    while !(ended && flight.is_empty()) {
        let Ok(msg) = msgs.recv() else {
            return false;
        };
        match msg {
            Msg::Batch(batch) => {
                let seq = first + flight.len() as u64;
                let mut list = job_list(cx, &batch);
                // JPEGs first (stable: otherwise in the scan's order).
                list.sort_by_key(|j| j.2 != "jpeg");
                let take = (list.len() / (workers * 8)).clamp(1, 64);
                let mut left = 0;
                for part in list.chunks(take) {
                    if jobs.send((seq, part.to_vec())).is_err() {
                        return false;
                    }
                    left += 1;
                }
                let mut verdicts = Vec::new();
                verdicts.resize_with(batch.len(), || None);
                flight.push_back(InFlight {
                    batch,
                    verdicts,
                    left,
                    tally: Default::default(),
                });
            }
            Msg::Done(seq, done) => {
                let Some(f) = seq
                    .checked_sub(first)
                    .and_then(|i| flight.get_mut(usize::try_from(i).ok()?))
                else {
                    continue;
                };
                f.left = f.left.saturating_sub(1);
                record(f, done);
            }
            Msg::End => ended = true,
        }
        while flight.front().is_some_and(|f| f.left == 0) {
            let Some(f) = flight.pop_front() else {
                break;
            };
            first += 1;
            if !send_on(cx, vtx, f) {
                return false;
            }
            // (The forwarder is gone once the scan has ended: no one needs
            // the token then.)
            let _ = tokens.send(());
        }
    }
    true
}

/// The non-ZIP header candidates of `batch` inside the part owned.
fn job_list<'v>(cx: &Context<'v>, batch: &[Event]) -> Vec<Job<'v>> {
    let (own_start, own_end) = cx.own;
    batch
        .iter()
        .enumerate()
        .filter_map(|(i, ev)| match ev {
            Event::Header(c) if c.start >= own_start && c.start < own_end => {
                let t = &cx.catalogue.types[c.type_index];
                let v = t.validator.as_deref().filter(|v| *v != "zip")?;
                Some((
                    i,
                    c.start,
                    v,
                    t.max_size.min(cx.bytes.len().saturating_sub(c.start)),
                ))
            }
            _ => None,
        })
        .collect()
}

/// What the validations of a part's candidates share: the scan's signature
/// log and the carving's memos answer the forward searches and JPEG scans of
/// this image's bytes (those of each header's own validation, and of the
/// file system's layout of a file: a view of the image's bytes). Made once
/// per part, not per candidate (dense input validates millions).
fn shared(cx: &Context<'_>) -> validators::Context {
    validators::Context::NONE
        .with_log(cx.needles.clone(), &cx.bytes)
        .with_jpeg_memo(&cx.known.scan_memo, &cx.bytes)
}

/// Bytes a candidate counts as having read for [`share_time`] besides its
/// reads (its header, verdict and bookkeeping).
const TASK_BYTES: f64 = 64.0;

/// Shares a piece's CPU seconds among its candidates by the bytes each
/// read (plus [`TASK_BYTES`]): the clock is read once per piece, not twice
/// per candidate (dense input validates millions: the clock reads were a
/// tenth of the carving of `synth --shape mixed`).
fn share_time(done: &mut [Timed<'_>], secs: f64) {
    let weight = |read: u64| read as f64 + TASK_BYTES;
    let total: f64 = done.iter().map(|t| weight(t.4)).sum();
    if total > 0.0 {
        for t in done.iter_mut() {
            t.3 = secs * weight(t.4) / total;
        }
    }
}

/// One candidate's verdict, with what its part's validations share, and
/// the bytes it read (its seconds are given by [`share_time`]).
fn timed<'v>(
    cx: &Context<'_>,
    shared: &validators::Context,
    (i, start, v, max_len): Job<'v>,
) -> Timed<'v> {
    let r0 = super::view::bytes_read_here();
    // A JPEG that breaks leaves the decoder's snapshots near where it broke
    // for the fragment search (on the grid of its volume's clusters, or of
    // 512 bytes where no file system says).
    let trail = match cx.geo.at(start) {
        Some(vol) => {
            fragments::jpeg_trail_spec(vol.cluster, vol.block_map().filter(|&bs| bs == vol.cluster))
        }
        None => fragments::jpeg_trail_spec(512, None),
    };
    // (A file an inode lists in several runs that prove it is not
    // validated contiguously: a fragment search asking whether its header
    // owns a candidate decodes it itself, as it would before the stage got
    // there.)
    let verdict = validate_laid_out(v, &cx.bytes, cx.geo, (start, max_len), shared, || {
        if v != "jpeg" {
            // (The trail is asked of the JPEG at `start` only: a JPEG
            // nested in another format starts elsewhere.)
            return validators::validate(v, &cx.bytes, start, Limits { max_len }, shared);
        }
        let asked = shared
            .clone()
            .with_jpeg_trail(trail, (&cx.bytes, start), &cx.known.trails);
        let verdict = validators::validate(v, &cx.bytes, start, Limits { max_len }, &asked);
        // (The contiguous verdict: what a fragment search's own validation
        // of this header would give.)
        cx.known.note(start, max_len, verdict.as_ref());
        verdict
    });
    (i, verdict, v, 0.0, super::view::bytes_read_here() - r0)
}

/// Files a piece's verdicts and times in its batch.
fn record(f: &mut InFlight, done: Vec<Timed<'_>>) {
    for (i, v, name, secs, read) in done {
        if let Some(slot) = f.verdicts.get_mut(i) {
            *slot = Some(v);
        }
        let e = f
            .tally
            .entry((name.as_ptr() as usize, name.len()))
            .or_insert_with(|| (name.to_string(), 0, 0.0, 0));
        e.1 += 1;
        e.2 += secs;
        e.3 += read;
    }
}

/// Sends a validated batch to the carver, telling the fragment searches
/// how far the stage has got and when it waits for the carver. False when
/// the carver has stopped.
fn send_on(cx: &Context<'_>, vtx: &SyncSender<Validated>, f: InFlight) -> bool {
    let through = f.batch.iter().rev().find_map(|e| match e {
        Event::Progress(pos) => Some(*pos),
        _ => None,
    });
    if let Some(pos) = through {
        cx.known.stage_through(pos);
    }
    let mut profile = Profile::default();
    for (name, n, secs, read) in f.tally.values() {
        profile.add("validate", name, *n, *secs);
        profile.add_read("validate", name, *read);
    }
    match vtx.try_send((f.batch, f.verdicts, profile)) {
        Ok(()) => true,
        Err(TrySendError::Full(v)) => {
            // A search waiting for this stage must not wait now.
            cx.known.stage_blocked(true);
            let sent = vtx.send(v).is_ok();
            cx.known.stage_blocked(false);
            sent
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A piece's seconds go to its candidates by the bytes each read (plus
    /// a task's share), and add up to the piece's.
    #[test]
    fn a_pieces_time_is_shared_by_bytes_read() {
        let mut done: Vec<Timed<'_>> = vec![
            (0, None, "jpeg", 0.0, 64 * 1024 - 64),
            (1, None, "gif", 0.0, 0),
            (2, None, "png", 0.0, 64),
        ];
        share_time(&mut done, 2.0);
        let total: f64 = done.iter().map(|t| t.3).sum();
        assert!((total - 2.0).abs() < 1e-9, "{total}");
        assert!((done[0].3 / done[1].3 - 1024.0).abs() < 1e-6);
        assert!((done[2].3 / done[1].3 - 2.0).abs() < 1e-9);
    }
}
