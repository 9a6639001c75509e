//! The carver's side of the fragment searches ([`Fragments`]): the cluster
//! size for a candidate, the claims and what the searches remember, the
//! image's budget, the searches asked ahead and taken back, and the hook the
//! carver calls after each validation ([`Fragments::after_validate`]).

use std::sync::Arc;
use std::time::Instant;

use super::ahead::{AheadDone, AheadJob, AheadQueue, MAX_AHEAD_CLAIMS, ahead_name};
use super::budget::{FragLimits, image_budget};
use super::claims::Claims;
use super::known::{KnownJpegs, owner_length};
use super::memory::SearchMemory;
use super::needles::ScanNeedles;
use super::{Attempt, recover_given, supported};
use crate::carve::geometry;
use crate::carve::geometry::alloc::AllocBits;
use crate::carve::validators::{ByteReader, Status, Verdict};

/// Carver-side state: the cluster-size estimate and the limits.
pub struct Fragments {
    pub cluster_size: Option<u64>,
    /// The image's file systems, when they are recognised: their cluster
    /// sizes come before the estimate.
    pub geometry: geometry::Geometry,
    pub limits: FragLimits,
    /// Ranges already carved (complete files, proven joins).
    pub claims: Claims,
    /// What the searches remember (next to the claims, never in them).
    pub(super) memory: SearchMemory,
    starts: Vec<u64>,
    /// End of the furthest complete file (starts inside it are embedded files, not counted).
    complete_end: u64,
    /// Searches run so far (for the carving's stage profile).
    pub searches: u64,
    /// Candidates tried and bytes read by all searches so far, against
    /// [`image_budget`].
    image_spent: (u64, u64),
    /// Searches run ahead of the carver on threads of their own ([`run_ahead`]).
    ahead: Option<AheadQueue>,
    /// What the carver is expected to claim before it reaches the searches
    /// asked ahead (complete files the validation stage found between the
    /// carver and them): start → end. A search run ahead takes them as
    /// claims; a wrong guess only makes the carver search again
    /// ([`Attempt::asked`]).
    predicted: std::collections::BTreeMap<u64, u64>,
    /// Start of the last candidate the carver decided.
    carver_at: u64,
    /// Seconds the searches that ran ahead took, and the carver waited for
    /// them (for the stage profile): `(validator, ahead, waited, used)`.
    pub ahead_profile: Vec<(&'static str, f64, f64, bool, u64)>,
}

/// Most complete-file starts remembered for the estimate.
const MAX_STARTS: usize = 1 << 16;

impl Fragments {
    pub fn new(cluster_size: Option<u64>) -> Self {
        Fragments {
            cluster_size: cluster_size.filter(|&c| c > 0),
            geometry: Default::default(),
            limits: FragLimits::default(),
            claims: Claims::default(),
            memory: SearchMemory::default(),
            starts: Vec::new(),
            complete_end: 0,
            searches: 0,
            image_spent: (0, 0),
            ahead: None,
            predicted: Default::default(),
            carver_at: 0,
            ahead_profile: Vec::new(),
        }
    }

    /// Expects the carver to claim `[start, end)` when it gets there (a
    /// search asked ahead takes it as a claim); ignored once it is past
    /// `start`.
    pub fn predict_claim(&mut self, start: u64, end: u64) {
        if self.ahead.is_some()
            && start >= self.carver_at
            && self.predicted.len() < MAX_AHEAD_CLAIMS
        {
            let e = self.predicted.entry(start).or_insert(end);
            *e = (*e).max(end);
        }
    }

    /// Connects the carver to the [`run_ahead`] threads.
    pub fn attach_ahead(&mut self, jobs: std::sync::mpsc::Sender<AheadJob>) {
        self.ahead = Some(AheadQueue {
            jobs,
            pending: Default::default(),
        });
    }

    /// True when searches run ahead of the carver.
    pub fn asks_ahead(&self) -> bool {
        self.ahead.is_some()
    }

    /// Asks for the search [`Fragments::after_validate`] would run for this
    /// candidate, to run now on a searching thread: only for PNG, JPEG and
    /// ZIP verdicts that would be searched, whose cluster size does not depend
    /// on what the carver has seen by then (`--cluster-size` or the file
    /// system's).
    pub fn ask_ahead(&mut self, validator: &str, start: u64, max_len: u64, verdict: &Verdict) {
        let Some(name) = ahead_name(validator) else {
            return;
        };
        if verdict.status != Status::Partial
            || (self.cluster_size.is_none() && self.geometry.at(start).is_none())
            || !self.on_cluster_boundary(start)
        {
            return;
        }
        let Some(q) = &self.ahead else {
            return;
        };
        let (reply, answer) = std::sync::mpsc::channel();
        let gap = self.limits.max_gap;
        let (lo, hi) = (
            start.saturating_sub(gap),
            start.saturating_add(max_len).saturating_add(gap),
        );
        let Some(mut claims) = self.claims.window(lo, hi, MAX_AHEAD_CLAIMS) else {
            return;
        };
        for (&a, &b) in self.predicted.range(self.carver_at..start) {
            if b > lo && a < hi {
                claims.claim(a, b);
            }
        }
        let job = AheadJob {
            validator: name,
            start,
            max_len,
            cluster: self.cluster_for(start),
            block_map: self.block_map_for(start),
            verdict: verdict.clone(),
            limits: self.limits,
            claims,
            reply,
        };
        if q.jobs.send(job).is_ok()
            && let Some(q) = &mut self.ahead
        {
            q.pending.push_back((start, name, answer));
        }
    }

    /// The answer of the search run ahead for this candidate, if one was
    /// asked for (answers to candidates the carver passed by are dropped).
    fn take_ahead(&mut self, validator: &str, start: u64) -> Option<(AheadDone, f64)> {
        let q = self.ahead.as_mut()?;
        while let Some(&(s, v, _)) = q.pending.front() {
            if s > start || (s == start && v != validator) {
                return None;
            }
            let (_, _, answer) = q.pending.pop_front()?;
            if s < start {
                // Passed by: not waited for.
                continue;
            }
            let t0 = Instant::now();
            let done = answer.recv().ok()?;
            return Some((done, t0.elapsed().as_secs_f64()));
        }
        None
    }

    /// Records the start of a complete file (for the cluster-size estimate).
    pub fn note_complete(&mut self, start: u64) {
        if self.starts.len() < MAX_STARTS {
            self.starts.push(start);
        }
    }

    /// Re-learns from files carved before a resume checkpoint: complete,
    /// top-level, single-run files (what `after_validate` noted the first time).
    pub fn seed(&mut self, start: u64, length: u64) {
        if start >= self.complete_end {
            self.note_complete(start);
        }
        self.claims.claim(start, start.saturating_add(length));
        self.complete_end = self.complete_end.max(start.saturating_add(length));
    }

    /// The cluster size to use for a candidate at `start`: `--cluster-size`,
    /// else the file system's holding `start`, else the estimate.
    /// The block size when the file at `start` lies in an ext2/3 volume
    /// (block maps) whose block is the cluster the search uses.
    pub fn block_map_for(&self, start: u64) -> Option<u64> {
        self.geometry
            .at(start)
            .and_then(geometry::Volume::block_map)
            .filter(|&bs| bs == self.cluster_for(start))
    }

    pub fn cluster_for(&self, start: u64) -> u64 {
        if let Some(c) = self.cluster_size {
            return c;
        }
        if let Some(v) = self.geometry.at(start) {
            return v.cluster;
        }
        estimate_cluster(&self.starts, start)
    }

    /// True when a file system could start a file at `start`: a cluster
    /// boundary of its volume (whose data area need not be a cluster
    /// multiple from the image's start), else a multiple of the cluster
    /// size (at least 512).
    pub fn on_cluster_boundary(&self, start: u64) -> bool {
        match (self.cluster_size, self.geometry.at(start)) {
            (None, Some(v)) => v.on_boundary(start),
            // Estimated: the size is that of the grid most complete files
            // share with `start`'s own phase ([`estimate_cluster`]), which
            // need not be 0.
            (None, None) => start.is_multiple_of(512),
            _ => start.is_multiple_of(self.cluster_for(start).max(512)),
        }
    }

    /// Tells the search what the carver's own JPEG validation found at
    /// `start` (`length` 0: not a JPEG), so that the search does not decode it
    /// again to see whether it owns a candidate second fragment. Verdicts cut
    /// by the window (`max_len`) or shortened by the ext2/3 indirect-block
    /// check are not the search's own kind of answer and are left out, and
    /// so are verdicts over a file system's layout of the file (its runs):
    /// a search validates the header's contiguous bytes, as the validation
    /// stage's shared verdicts ([`KnownJpegs`]) are, and what it finds must
    /// not depend on whether the carver had passed the header when the
    /// search was asked.
    pub fn note_jpeg(&mut self, start: u64, max_len: u64, verdict: Option<&Verdict>) {
        if verdict.is_some_and(|v| v.runs.is_some()) {
            return;
        }
        if let Some(length) = owner_length(max_len, verdict) {
            self.memory.note_jpeg_head(start, length);
        }
    }

    /// Verdicts of JPEG headers validated ahead of the carver (by the
    /// validation stage), consulted before a search decodes a JPEG itself.
    pub fn share_jpegs(&mut self, known: Arc<KnownJpegs>) {
        self.memory.known = Some(known);
    }

    /// How many owner checks waited for the validation stage, and how long.
    pub fn stage_waits(&self) -> (u64, f64) {
        self.memory.known.as_ref().map_or((0, 0.0), |k| k.waited())
    }

    /// Connects the searches to the scan's log of the indexed signatures.
    pub fn share_needles(&mut self, needles: Arc<ScanNeedles>) {
        self.memory.needles = Some(needles);
    }

    /// Keeps every search out of the clusters in `allocated`
    /// (`--free-space-only`).
    pub fn share_allocated(&mut self, allocated: Option<Arc<AllocBits>>) {
        self.memory.allocated = allocated;
    }

    /// The carver's hook: given the validator's verdict for a candidate,
    /// tries a bifragment recovery when it is a `Partial` PNG/ZIP/JPEG (or a ZIP
    /// the validator rejected). Returns the verdict to use and, for a proven
    /// join, its byte runs.
    pub fn after_validate(
        &mut self,
        validator: &str,
        r: &dyn ByteReader,
        start: u64,
        max_len: u64,
        verdict: Option<Verdict>,
    ) -> (Option<Verdict>, Option<Vec<(u64, u64)>>) {
        let behind = start.saturating_sub(self.limits.max_gap.saturating_mul(2));
        self.claims.prune(behind);
        self.memory.prune(behind);
        if let Some(k) = &self.memory.known {
            k.forget_entropy(behind);
        }
        self.carver_at = self.carver_at.max(start);
        if !self.predicted.is_empty() {
            self.predicted = self.predicted.split_off(&self.carver_at);
        }
        // Laid out by the file system's block map (the validation stage
        // found it): a proven multi-run file.
        if let Some(v) = &verdict
            && v.status == Status::Complete
            && let Some(runs) = v.runs.clone()
        {
            for &(off, len) in &runs {
                self.claims.claim(off, off.saturating_add(len));
            }
            return (verdict, Some(runs));
        }
        let try_it = match &verdict {
            Some(v) if v.status == Status::Complete => {
                if start >= self.complete_end {
                    self.note_complete(start);
                }
                self.claims.claim(start, start.saturating_add(v.length));
                self.complete_end = self.complete_end.max(start.saturating_add(v.length));
                false
            }
            Some(v) => v.status == Status::Partial && supported(validator),
            None => false,
        };
        if !try_it {
            return (verdict, None);
        }
        let cl = self.cluster_for(start);
        // A file system starts files at cluster boundaries: a header elsewhere
        // is an object inside something else or a remnant, not a fragment's head.
        if !self.on_cluster_boundary(start) {
            return (verdict, None);
        }
        self.searches += 1;
        // What is left of the image's budget bounds this search.
        let (cands, bytes) = image_budget(r.len());
        let left = (
            cands.saturating_sub(self.image_spent.0),
            bytes.saturating_sub(self.image_spent.1),
        );
        // (An answer run ahead is taken off the queue even when not used.)
        let ahead = self.take_ahead(validator, start);
        if left.0 == 0 || left.1 == 0 {
            let note = format!(
                "fragment search ({validator}) not run: the searches of this carving have spent their budget ({cands} candidates, {bytes} bytes for this image)"
            );
            return self.conclude(
                verdict,
                Attempt {
                    joined: None,
                    note,
                    reusable: true,
                    asked: Some(Vec::new()),
                    seen: None,
                    spent: (0, 0),
                },
            );
        }
        let mut limits = self.limits;
        limits.max_candidates = limits.max_candidates.min(left.0);
        limits.max_bytes = limits.max_bytes.min(left.1);
        if let Some((done, waited)) = ahead {
            // Run with the image's whole allowance: the carver's own search,
            // limited to what is left, finds the same only if it never
            // needed more than that.
            let used = done.attempt.spent.0 <= left.0
                && done.attempt.spent.1 <= left.1
                && done.attempt.reusable
                && done.attempt.asked.as_deref().is_some_and(|q| {
                    done.attempt
                        .seen
                        .as_ref()
                        .is_some_and(|s| self.claims.agrees(s))
                        || self.claims.answers(q)
                });
            self.ahead_profile.push((
                ahead_name(validator).unwrap_or(""),
                done.secs,
                waited,
                used,
                done.read,
            ));
            if used {
                self.charge(done.attempt.spent);
                return self.conclude(verdict, done.attempt);
            }
        }
        let a = recover_given(
            validator,
            r,
            start,
            max_len,
            (cl, self.block_map_for(start)),
            &limits,
            &self.claims,
            (&mut self.memory, false),
            verdict.as_ref(),
        );
        self.charge(a.spent);
        self.conclude(verdict, a)
    }

    /// Adds a search's spending to the image's.
    fn charge(&mut self, (cands, bytes): (u64, u64)) {
        self.image_spent.0 = self.image_spent.0.saturating_add(cands);
        self.image_spent.1 = self.image_spent.1.saturating_add(bytes);
    }

    /// The verdict and runs a search's answer gives (a join is claimed).
    fn conclude(
        &mut self,
        verdict: Option<Verdict>,
        a: Attempt,
    ) -> (Option<Verdict>, Option<Vec<(u64, u64)>>) {
        match (a.joined, verdict) {
            (Some(j), _) => {
                for &(off, len) in &j.runs {
                    self.claims.claim(off, off.saturating_add(len));
                }
                let mut v = Verdict::complete(j.length);
                v.subtype = j.subtype;
                v.notes = j.notes;
                v.notes.push(a.note);
                (Some(v), Some(j.runs))
            }
            (None, Some(mut v)) => {
                v.notes.push(a.note);
                (Some(v), None)
            }
            (None, None) => (None, None),
        }
    }
}

/// Largest power of two in 512..=1 MiB modulo which at least 75% of `starts`
/// share `start`'s phase, each doubling keeping 90% of those the half size
/// kept; 512 with fewer than 4 starts.
pub fn estimate_cluster(starts: &[u64], start: u64) -> u64 {
    if starts.len() < 4 {
        return 512;
    }
    let mut best = 512;
    let mut p = 512u64;
    let mut before = None;
    while p <= 1 << 20 {
        let same = starts.iter().filter(|&&s| s % p == start % p).count();
        // Doubling a true cluster size keeps about half the starts in
        // phase; a few starts share one by chance (9 of 12 complete files
        // 8192-aligned on a 4096-cluster image took a JPEG's search away):
        // a size counts only while it keeps 90% of the starts the half
        // size kept.
        if same * 4 < starts.len() * 3 || before.is_some_and(|b| same * 10 < b * 9) {
            break;
        }
        best = p;
        before = Some(same);
        p <<= 1;
    }
    best
}
