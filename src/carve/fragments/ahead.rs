//! The searches that run ahead of the carver, on threads of their own: the
//! jobs the carver asks for ([`AheadJob`]), their answers ([`AheadDone`]),
//! the joins they share ([`AheadJoins`]) and the searching thread's loop
//! ([`run_ahead`]). The carver's end of the queue is [`super::Fragments`]'s.

use super::budget::FragLimits;
use super::claims::Claims;
use super::memory::{SearchMemory, Shared};
use super::{Attempt, recover_given};
use crate::carve::validators::{ByteReader, Verdict};

/// The carver's end of the searches run ahead: jobs in submission (offset)
/// order, each answered on its own channel (in whatever order the
/// searching threads finish).
pub(super) struct AheadQueue {
    pub(super) jobs: std::sync::mpsc::Sender<AheadJob>,
    /// The searches asked for, in offset order, each with where its answer
    /// comes.
    pub(super) pending:
        std::collections::VecDeque<(u64, &'static str, std::sync::mpsc::Receiver<AheadDone>)>,
}

/// A fragment search asked for before the carver reaches its file.
pub struct AheadJob {
    pub(super) validator: &'static str,
    pub(super) start: u64,
    pub(super) max_len: u64,
    pub(super) cluster: u64,
    /// [`Fragments::block_map_for`].
    pub(super) block_map: Option<u64>,
    /// The candidate's verdict (the JPEG search waits for the validation
    /// stage to pass its end by a gap, as the carver's own search does, and
    /// starts from where its decode broke).
    pub(super) verdict: Verdict,
    pub(super) limits: FragLimits,
    /// The carver's claims around the file when it was asked (and those
    /// it is expected to make before it gets there).
    pub(super) claims: Claims,
    /// Where the answer goes.
    pub(super) reply: std::sync::mpsc::Sender<AheadDone>,
}

/// A search run ahead, and how long it took.
pub struct AheadDone {
    pub(super) attempt: Attempt,
    pub(super) secs: f64,
    /// Bytes the search read from the image.
    pub(super) read: u64,
}

/// Most claimed ranges copied into one job (dense input: the search is left
/// to the carver).
pub(super) const MAX_AHEAD_CLAIMS: usize = 4096;

/// What the searching threads share: the joins found by the searches run
/// ahead (header → runs).
#[derive(Default)]
pub struct AheadJoins {
    found: std::sync::Mutex<std::collections::BTreeMap<u64, Vec<(u64, u64)>>>,
}

impl AheadJoins {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<u64, Vec<(u64, u64)>>> {
        self.found.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A searching thread (one of several): takes the jobs in turn and runs
/// each with the claims it carries, plus the joins the searches run ahead
/// have found before it (the carver claims each when it takes that answer,
/// before it reaches later files), and its own caches (pure functions of
/// the image); until the carver hangs up. A search run beside an earlier
/// one still running within its reach (twice the largest gap before it)
/// may ask about clusters that one's join then claims, and the carver,
/// which checks every answer ([`Attempt::asked`]), searches again (3-6 of
/// 16 JPEG searches ahead on the ext2 image (BENCHMARKS.md of session 15, in git history);
/// cheap then: the memo of checks answers most of its decodes). Such a
/// search waited for the earlier ones on fewer than 4 cores until session
/// 17; it no longer does (see `search_ahead` in the carver).
pub fn run_ahead(
    r: &dyn ByteReader,
    shared: Shared,
    jobs: &std::sync::Mutex<std::sync::mpsc::Receiver<AheadJob>>,
    joins: &AheadJoins,
) {
    let mut memory = SearchMemory::sharing(shared);
    loop {
        let Ok(job) = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv() else {
            return;
        };
        let behind = job
            .start
            .saturating_sub(job.limits.max_gap.saturating_mul(2));
        memory.prune(behind);
        let mut claims = job.claims;
        {
            let mut found = joins.lock();
            // Every join found before this file, by where its runs lie (a
            // ZIP's central directory can place its second fragment far
            // from its header): those ending far enough behind that no job
            // still to start looks there are let go.
            let gone = behind.saturating_sub(job.limits.max_gap.saturating_mul(2));
            found.retain(|_, runs| runs.iter().any(|&(o, l)| o.saturating_add(l) > gone));
            for runs in found.range(..job.start).map(|(_, r)| r) {
                for &(off, len) in runs {
                    if off.saturating_add(len) > behind {
                        claims.claim(off, off.saturating_add(len));
                    }
                }
            }
        }
        let t0 = crate::carve::CpuClock::start();
        let r0 = crate::carve::view::bytes_read_here();
        let attempt = recover_given(
            job.validator,
            r,
            job.start,
            job.max_len,
            (job.cluster, job.block_map),
            &job.limits,
            &claims,
            (&mut memory, true),
            Some(&job.verdict),
        );
        let secs = t0.secs();
        if let Some(j) = &attempt.joined {
            joins.lock().insert(job.start, j.runs.clone());
        }
        // (The carver may have passed the file by: no one waits then.)
        let read = crate::carve::view::bytes_read_here() - r0;
        let _ = job.reply.send(AheadDone {
            attempt,
            secs,
            read,
        });
    }
}

/// The name of a validator whose searches may run ahead of the carver
/// (given its verdict: the validation stage's, or for ZIP the carver's
/// own, taken when it asks).
pub(super) fn ahead_name(validator: &str) -> Option<&'static str> {
    match validator {
        "png" => Some("png"),
        "jpeg" => Some("jpeg"),
        "zip" => Some("zip"),
        _ => None,
    }
}
