//! What a search may spend: the per-file limits ([`FragLimits`]), the whole
//! carving's allowance ([`image_budget`]), and the running count of
//! candidates, bytes and time a search charges ([`Budget`]), which also
//! records the questions it asks the claims.

use std::time::{Duration, Instant};

use super::claims::{Asked, Claims, MAX_ASKED};
use super::memory::SearchMemory;

/// Per-file bounds of the search.
#[derive(Clone, Copy, Debug)]
pub struct FragLimits {
    /// Largest gap searched (bytes), after the first fragment and before the
    /// header: 16 MiB. On the generated FAT32, ext4 and ext2 images every
    /// fragment gap a join can prove lies within 3 MiB (the others are
    /// hundreds of MiB away); 64 MiB found one join fewer per image (a wider
    /// search exhausts its candidate budget first) at 1.3× the carving time.
    pub max_gap: u64,
    /// Most split points tried.
    pub max_splits: u64,
    /// Most (split, second start) candidates tried.
    pub max_candidates: u64,
    /// Most bytes read for checksums, inflation and full validation.
    pub max_bytes: u64,
    /// Wall-time cap per file: a safety net only. The byte and candidate caps
    /// bound the work (and keep reports reproducible); this one should never
    /// be what stops a search.
    pub max_time: Duration,
}

impl Default for FragLimits {
    fn default() -> Self {
        FragLimits {
            max_gap: 16 << 20,
            max_splits: 4096,
            max_candidates: 4_000_000,
            max_bytes: 512 << 20,
            max_time: Duration::from_secs(30),
        }
    }
}

/// What all the fragment searches of one carving may spend together:
/// `(candidates, bytes)` for an image of `len` bytes. Each search has its
/// own limits ([`FragLimits`]), but an image can hold a header every
/// cluster: hostile PNGs claiming a 1 MiB chunk, one every 4 KiB, made each
/// search CRC hundreds of MiB (2 MiB of them took 7.9 s; a GiB would take
/// hours). The whole carving's search work is therefore linear in the
/// image: 4 M candidates plus 64 per 4 KiB of image, and 256 MiB read plus
/// 8 bytes per byte of image. A search that would go past it is limited to
/// what is left; once it is spent, the searches left are not run, and say
/// so.
pub fn image_budget(len: u64) -> (u64, u64) {
    (
        (4 << 20) + 64 * (len / 4096),
        (256 << 20) + len.saturating_mul(8),
    )
}

/// Counts candidates, bytes and time against the limits; holds the claims
/// (asked through it, so that the questions can be recorded) and what the
/// searches remember.
pub(super) struct Budget<'c> {
    pub(super) lim: FragLimits,
    pub(super) claims: &'c Claims,
    pub(super) memory: &'c mut SearchMemory,
    pub(super) cands: u64,
    pub(super) bytes: u64,
    t0: Instant,
    pub(super) exhausted: bool,
    /// The wall-time cap was reached (a result that depends on the machine).
    pub(super) timed_out: bool,
    /// The claims' questions and answers, when recorded ([`Attempt::asked`]).
    pub(super) asked: Option<Vec<Asked>>,
    /// The lowest and highest position asked about.
    pub(super) asked_span: Option<(u64, u64)>,
}

impl<'c> Budget<'c> {
    /// A budget of `lim` over `claims` and `memory`; `log`: record the
    /// questions asked of the claims ([`super::Attempt::asked`]: a search
    /// run ahead of the carver).
    pub(super) fn new(
        lim: FragLimits,
        claims: &'c Claims,
        (memory, log): (&'c mut SearchMemory, bool),
    ) -> Self {
        Budget {
            lim,
            claims,
            memory,
            cands: 0,
            bytes: 0,
            t0: Instant::now(),
            exhausted: false,
            timed_out: false,
            asked: log.then(Vec::new),
            asked_span: None,
        }
    }

    /// [`Claims::covers`], recorded when the questions are.
    pub(super) fn covers(&mut self, pos: u64) -> bool {
        let a = self.claims.covers(pos);
        self.ask(Asked::Covers(pos, a));
        a
    }

    /// [`Claims::starts_within`], recorded when the questions are.
    pub(super) fn starts_within(&mut self, x: u64, y: u64) -> bool {
        let a = self.claims.starts_within(x, y);
        self.ask(Asked::StartsWithin(x, y, a));
        a
    }

    pub(super) fn ask(&mut self, q: Asked) {
        if self.asked.is_some() {
            let (a, b) = match q {
                Asked::Covers(p, _) => (p, p),
                Asked::StartsWithin(x, y, _) => (x.min(y), x.max(y)),
            };
            let (lo, hi) = self.asked_span.unwrap_or((a, b));
            self.asked_span = Some((lo.min(a), hi.max(b)));
        }
        if let Some(log) = &mut self.asked {
            // (The same question for every candidate of one split: once.)
            if log.last() == Some(&q) {
                return;
            }
            if log.len() >= MAX_ASKED {
                self.asked = None;
                return;
            }
            log.push(q);
        }
    }
    pub(super) fn out_of_time(&mut self) -> bool {
        if self.t0.elapsed() > self.lim.max_time {
            self.timed_out = true;
        }
        self.timed_out
    }
    /// Counts one candidate; false when a limit is reached.
    pub(super) fn cand(&mut self) -> bool {
        self.cands += 1;
        if self.cands > self.lim.max_candidates
            || (self.cands.is_multiple_of(512) && self.out_of_time())
        {
            self.exhausted = true;
        }
        !self.exhausted
    }
    /// Counts `n` bytes read; false when a limit is reached.
    pub(super) fn bytes(&mut self, n: u64) -> bool {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.lim.max_bytes || self.out_of_time() {
            self.exhausted = true;
        }
        !self.exhausted
    }
    pub(super) fn ok(&self) -> bool {
        !self.exhausted
    }
}
