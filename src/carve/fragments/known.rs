//! What the JPEG searches share across a carving: the validation stage's
//! JPEG verdicts and how far it has got ([`KnownJpegs`]), the prefilter's
//! verdicts, and the decodes of candidate joins ([`CheckMemo`]). Verdicts
//! are pure functions of the image: only who decodes depends on timing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::runs::MAX_RUNS;
use crate::carve::validators::Verdict;
use crate::carve::validators::jpeg::{self as vj, Damage};

/// What a decode of a candidate join gave, kept for the other searches of
/// the carving ([`KnownJpegs`]): a pure function of the join's runs, the
/// snapshot it resumed from (which the head's bytes decide), whether it is
/// charged as a whole decode and the trail asked for. Only decodes of at
/// least [`CHECK_MEMO_MIN`] bytes are kept; at most [`CHECK_MEMO_ENTRIES`]
/// of them and [`CHECK_MEMO_BYTES`] of trails (forgotten all at once).
#[derive(Debug, Default)]
pub struct CheckMemo {
    pub(super) map: HashMap<CheckKey, CheckOutcome>,
    /// Bytes of the trails held.
    pub(super) held: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct CheckKey {
    pub(super) runs: [(u64, u64); MAX_RUNS],
    pub(super) n: usize,
    pub(super) len: u64,
    pub(super) resume: Option<(u64, u64)>,
    pub(super) whole: bool,
    pub(super) trail: Option<vj::TrailSpec>,
}

/// The verdict, the damage and the bytes charged.
pub(super) type CheckOutcome = (Option<Verdict>, Damage, u64);

/// Least bytes decoded for a check to be kept.
pub(super) const CHECK_MEMO_MIN: u64 = 16 << 10;
pub(super) const CHECK_MEMO_ENTRIES: usize = 4096;
pub(super) const CHECK_MEMO_BYTES: u64 = 64 << 20;

impl CheckMemo {
    pub(super) fn get(&self, k: &CheckKey) -> Option<CheckOutcome> {
        self.map.get(k).cloned()
    }

    pub(super) fn keep(&mut self, k: CheckKey, o: CheckOutcome) {
        let bytes =
            o.0.as_ref()
                .and_then(|v| v.trail())
                .map_or(0, |t| t.0.bytes());
        if self.map.len() >= CHECK_MEMO_ENTRIES
            || self.held.saturating_add(bytes) > CHECK_MEMO_BYTES
        {
            self.map.clear();
            self.held = 0;
        }
        if bytes <= CHECK_MEMO_BYTES / 4 {
            self.held += bytes;
            self.map.insert(k, o);
        }
    }
}

/// What the search would learn by validating the JPEG header itself: the
/// validated length (0: not a JPEG), or `None` for a verdict that is not that
/// kind of answer (cut by the window `max_len`, or shortened by the ext2/3
/// indirect-block check).
pub(super) fn owner_length(max_len: u64, verdict: Option<&Verdict>) -> Option<u64> {
    match verdict {
        None => Some(0),
        Some(v)
            if v.length < max_len
                && !v
                    .notes
                    .iter()
                    .any(|n| n.starts_with("ext2/3 indirect block")) =>
        {
            Some(v.length)
        }
        Some(_) => None,
    }
}

/// JPEG verdicts shared between the validation stage, which runs ahead of
/// the carver on every core, and the fragment searches, which ask whether a
/// JPEG stored contiguously owns a candidate second fragment: a header the
/// stage has validated is not decoded again. Verdicts are pure functions of
/// the image, so what a search finds here equals what it would compute.
/// Bounded: past [`MAX_KNOWN`] entries the lowest offsets are dropped.
///
/// The stage also says how far it has got ([`KnownJpegs::stage_through`]),
/// so that a search can wait for verdicts instead of decoding the same JPEGs
/// on the carver's thread ([`KnownJpegs::wait_for`]). Only who decodes
/// depends on timing, never what a search finds.
#[derive(Debug, Default)]
pub struct KnownJpegs {
    pub(super) lengths: std::sync::Mutex<std::collections::BTreeMap<u64, u64>>,
    /// The JPEG searches' prefilter verdicts ([`Claims::entropy`]), shared by
    /// the carver's searches and those run ahead: each cluster is read and
    /// examined once per carving, whichever thread asks first (a verdict is
    /// a function of the image's bytes there, so who computed it does not
    /// matter). At most `MAX_KNOWN * 4`; the carver forgets those behind it.
    pub(super) entropy: std::sync::Mutex<std::collections::BTreeMap<(u64, u64), bool>>,
    /// The JPEG searches' costlier decodes of candidate joins
    /// ([`CheckMemo`]), shared like the prefilter's verdicts: a search
    /// the carver runs again (its answer run ahead was not usable) or one
    /// whose window another search covered does not decode them again.
    pub(super) checks: std::sync::Mutex<CheckMemo>,
    /// The JPEG scans decoded in this carving
    /// ([`crate::carve::validators::jpeg::ScanMemo`]): the validation
    /// stage's, and the searches' proofs of joins, which a copy of a picture
    /// validated before answers.
    pub scan_memo: Arc<crate::carve::validators::jpeg::ScanMemo>,
    /// The bytes the trails of this carving's verdicts hold, bounded.
    pub trails: Arc<crate::carve::validators::jpeg::TrailBudget>,
    pub(super) stage: std::sync::Mutex<Stage>,
    pub(super) moved: std::sync::Condvar,
    /// Waits that found the stage behind, and their nanoseconds (for the
    /// stage profile).
    pub(super) waits: std::sync::atomic::AtomicU64,
    pub(super) waited_ns: std::sync::atomic::AtomicU64,
}

/// Where the validation stage stands.
#[derive(Debug, Default)]
pub(super) struct Stage {
    /// Every header candidate below this offset has been validated.
    pub(super) through: u64,
    /// The stage waits for the carver (its output queue is full).
    pub(super) blocked: bool,
    /// The stage has ended.
    pub(super) finished: bool,
}

/// Most JPEG verdicts kept (and four times as many prefilter verdicts).
pub(super) const MAX_KNOWN: usize = 1 << 18;

/// Longest a search waits for the validation stage (a safety net: the stage
/// is never waiting for the carver then, so it always gets there).
pub(super) const MAX_STAGE_WAIT: Duration = Duration::from_secs(60);

impl KnownJpegs {
    pub(super) fn update(&self, f: impl FnOnce(&mut Stage)) {
        let mut st = self.stage.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut st);
        self.moved.notify_all();
    }

    /// The stage has validated every header candidate below `pos`.
    pub fn stage_through(&self, pos: u64) {
        self.update(|st| st.through = st.through.max(pos));
    }

    /// The stage is (or no longer is) waiting for the carver.
    pub fn stage_blocked(&self, blocked: bool) {
        self.update(|st| st.blocked = blocked);
    }

    /// The stage has ended (its verdicts are all in).
    pub fn stage_finished(&self) {
        self.update(|st| st.finished = true);
    }

    /// Waits until the stage has validated the candidates below `pos`, or
    /// waits for the carver itself (it will not get further), or has ended.
    pub fn wait_for(&self, pos: u64) {
        let t0 = Instant::now();
        let mut st = self.stage.lock().unwrap_or_else(|e| e.into_inner());
        let behind = st.through < pos && !st.blocked && !st.finished;
        while st.through < pos && !st.blocked && !st.finished {
            let Some(left) = MAX_STAGE_WAIT.checked_sub(t0.elapsed()) else {
                break;
            };
            st = match self.moved.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        drop(st);
        if behind {
            use std::sync::atomic::Ordering::Relaxed;
            self.waits.fetch_add(1, Relaxed);
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.waited_ns.fetch_add(ns, Relaxed);
        }
    }

    /// The prefilter verdict of the `n` bytes at `pos`: known, or computed
    /// by `f` (outside the lock) and kept.
    pub(super) fn entropy(&self, (pos, n): (u64, u64), f: impl FnOnce() -> bool) -> bool {
        let lock = || self.entropy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&v) = lock().get(&(pos, n)) {
            return v;
        }
        let v = f();
        let mut m = lock();
        if m.len() >= MAX_KNOWN * 4 {
            m.pop_first();
        }
        m.insert((pos, n), v);
        v
    }

    /// Forgets the prefilter verdicts below `before` (the carver's searches
    /// look no further back; those run ahead look further on).
    pub(super) fn forget_entropy(&self, before: u64) {
        let mut m = self.entropy.lock().unwrap_or_else(|e| e.into_inner());
        while m.first_key_value().is_some_and(|(&(p, _), _)| p < before) {
            m.pop_first();
        }
    }

    /// How many waits found the stage behind, and the seconds they took.
    pub fn waited(&self) -> (u64, f64) {
        use std::sync::atomic::Ordering::Relaxed;
        let ns = self.waited_ns.load(Relaxed);
        (self.waits.load(Relaxed), ns as f64 / 1e9)
    }

    /// Records the validation stage's verdict for the JPEG header at `start`.
    pub fn note(&self, start: u64, max_len: u64, verdict: Option<&Verdict>) {
        let Some(length) = owner_length(max_len, verdict) else {
            return;
        };
        let mut m = self.lengths.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(start, length);
        if m.len() > MAX_KNOWN {
            m.pop_first();
        }
    }

    pub(super) fn get(&self, start: u64) -> Option<u64> {
        let m = self.lengths.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&start).copied()
    }
}
