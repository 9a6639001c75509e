//! Carving: from the ordered match stream to recovered files an examiner can trust.
//!
//! ```text
//! scan merger ──(header candidates, footers; bounded queue)──▶ carver thread
//!                                                               ├─ extent: validator, or footer / max-size rule
//!                                                               ├─ nesting: inside a complete file → child, not written
//!                                                               └─ writer: OUTDIR/<type>/<offset>.<ext>, --hash digests
//!                                                                  └─▶ report sinks (JSONL, DFXML, audit counts)
//! ```
//!
//! * A header whose type has a structure validator is carved only if the
//!   validator accepts it; its verdict decides the length and the status
//!   (`complete`, `partial`). A type without a validator ends at its footer
//!   (first, last or next, as the catalogue says) or at its maximum size, and
//!   is `unvalidated`.
//! * A candidate that starts inside a *complete* file carved earlier (a JPEG
//!   thumbnail inside a JPEG, an image stored in a ZIP) is recorded with its
//!   parent's id and not written.
//! * By default only `complete` files are written; `--keep` adds `partial`
//!   and/or `unvalidated` files under their own folders.
//!
//! Memory is bounded: candidates travel through bounded queues (pieces of at
//! most 16 Ki events, 16 pieces between scan and validation, 12 validated
//! pieces between validation and the carver), footer-rule candidates wait at most until the
//! scan passes their maximum size, and file bytes are streamed through fixed
//! buffers.
//!
//! **Work.** The scan is O(image bytes). Per header match the carver does
//! O(log n) bookkeeping (nesting and coverage queries, `Coverage`), one
//! validation and, for a `Partial` PNG/ZIP/JPEG starting on a cluster
//! boundary, one fragment search. Reporting and hashing are proportional to
//! what is written (unvalidated guesses that are not kept are counted, not
//! reported or hashed). A validation reads only the structure it walks (first
//! reads of 256 bytes, doubling, not the candidate's maximum size), and each search is
//! capped by [`fragments::FragLimits`]; signature positions the searches need
//! (ZIP EOCDs, JPEG SOIs) are indexed once per carving and the entropy test of
//! a cluster is memoised, so overlapping searches do not re-read the image
//! (and answered from what the scan saw of each sector,
//! [`fragments::ScanNeedles`], without reading the cluster);
//! all the searches of one carving share one budget, linear in the image
//! ([`fragments::image_budget`]). A JPEG scan already decoded in the
//! carving (a copy of the same picture) is not decoded again, and one that
//! repeats it only in part is decoded from where they differ
//! ([`validators::jpeg::ScanMemo`]: its bytes are compared instead; the
//! validation stage and the searches' proofs of joins share it).
//! What is *not* yet a small constant: a validator that walks a long valid
//! structure which many later headers also start inside (nested thumbnails)
//! reads it once per header. `tests/carve_e2e.rs` holds dense-header images
//! (a header every few bytes of every type) to a time budget; BENCHMARKS.md
//! has 64 and 128 MiB of them (2.2 s and 4.2 s).

pub mod bound;
pub mod density;
pub mod extent;
pub mod fragments;
pub mod free;
pub mod geometry;
pub mod output;
pub mod reader;
pub mod sink;
mod stage;
pub mod validators;
pub mod view;

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::SystemTime;

use crate::catalogue::{Catalogue, CompiledSet, Role};
use crate::engine::EngineSet;
use crate::scan::{Engines, Match, ScanError, ScanOptions, ScanStats, scan_range};
use crate::source::{BlockSpec, DIRECT_ALIGN, Image};
use extent::{Candidate, FooterRules};
pub use output::{OutputDir, OutputError};
pub use sink::CarveReport;
use validators::{Limits, Status};
pub use view::ImageBytes;

/// With `--free-space-only`: the clusters the file systems allocate, read
/// once and shared by the fragment searches ([`geometry::alloc::AllocBits`]).
type AllocShared = Option<std::sync::Arc<geometry::alloc::AllocBits>>;

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Complete => "complete",
            Status::Partial => "partial",
            Status::Unvalidated => "unvalidated",
        }
    }
}

impl std::str::FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Status, String> {
        match s {
            "complete" => Ok(Status::Complete),
            "partial" => Ok(Status::Partial),
            "unvalidated" => Ok(Status::Unvalidated),
            _ => Err(format!(
                "unknown status `{s}` (complete, partial, unvalidated)"
            )),
        }
    }
}

/// One contiguous piece of a carved file in the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ByteRun {
    /// Offset within the carved file.
    pub file_offset: u64,
    /// Absolute offset in the image.
    pub img_offset: u64,
    pub len: u64,
}

/// A file found in the image (written or not).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CarvedFile {
    /// 1, 2, 3... in offset order.
    pub id: u64,
    /// Most precise type known (`docx` for a ZIP holding a Word document).
    #[serde(rename = "type")]
    pub file_type: String,
    /// The catalogue type whose header matched (`zip`).
    pub family: String,
    pub status: String,
    /// Whether the file system still allocates the clusters its bytes lie
    /// in ([`geometry::alloc`]); absent when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc: Option<geometry::alloc::Alloc>,
    /// The name and path of the directory entry that points at the file's
    /// first cluster ([`geometry::names`]); absent when none does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_name: Option<geometry::names::OriginalName>,
    pub offset: u64,
    pub length: u64,
    pub byte_runs: Vec<ByteRun>,
    pub sha256: Option<String>,
    pub md5: Option<String>,
    /// With `--hash ...,sha1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    /// The file inside which this one was found.
    pub parent: Option<u64>,
    /// Path of the written file relative to the output folder.
    pub path: Option<String>,
    pub validator: Option<String>,
    pub notes: Vec<String>,
}

impl CarvedFile {
    /// The digests this file carries.
    pub fn digests(&self) -> crate::hashing::Digests {
        crate::hashing::Digests {
            sha256: self.sha256.clone(),
            md5: self.md5.clone(),
            sha1: self.sha1.clone(),
        }
    }

    pub fn set_digests(&mut self, d: crate::hashing::Digests) {
        self.sha256 = d.sha256;
        self.md5 = d.md5;
        self.sha1 = d.sha1;
    }
}

/// Partial and unvalidated files that are not written are hashed only up to
/// this length: their extent is a guess (often a maximum size), and hashing
/// hundreds of MiB of it per candidate would dominate the run.
pub const MAX_UNWRITTEN_HASH: u64 = 16 << 20;

/// What to do with what was found.
#[derive(Clone, Debug)]
pub struct CarveOptions {
    /// Statuses whose files are written.
    pub keep: Vec<Status>,
    /// Write files at all (`--no-write` writes only the reports).
    pub write: bool,
    /// Hash files that are neither written nor kept too, each up to
    /// [`MAX_UNWRITTEN_HASH`] bytes (`--hash-unwritten`). Written files, and
    /// with `--no-write` the files that would be written, are always hashed.
    pub hash_unwritten: bool,
    /// Write files found inside complete files as well.
    pub keep_embedded: bool,
    /// The hashes computed for what is written (or, with `--no-write`, kept).
    pub hashes: crate::hashing::HashChoice,
    /// Cluster size for bifragment recovery (`None`: estimated; see [`fragments`]).
    pub cluster_size: Option<u64>,
    /// Carve only headers in unallocated clusters (`--free-space-only`:
    /// [`free`]).
    pub free_space_only: bool,
}

impl Default for CarveOptions {
    fn default() -> Self {
        CarveOptions {
            keep: vec![Status::Complete],
            write: true,
            hash_unwritten: false,
            keep_embedded: false,
            hashes: crate::hashing::HashChoice::DEFAULT,
            cluster_size: None,
            free_space_only: false,
        }
    }
}

/// Counts for the audit.
#[derive(Clone, Debug, Default)]
pub struct CarveSummary {
    pub scan: ScanStats,
    /// (type, status) → (files, bytes)
    pub counts: BTreeMap<(String, String), (u64, u64)>,
    pub files_found: u64,
    pub files_written: u64,
    pub bytes_written: u64,
    pub embedded: u64,
    pub rejected_headers: u64,
    /// Unvalidated candidates not kept, hence not reported (see `hold`).
    pub unreported_unvalidated: u64,
    /// Candidates counted instead of listed, per type: header only, suffix
    /// of an earlier file, over the output bound ([`bound`]).
    pub held_back: bound::HeldCounts,
    /// Where the carving's time went.
    pub profile: Profile,
    /// The file systems whose cluster size the fragment search used
    /// ([`geometry::Geometry::describe`]; empty: estimated or given).
    pub file_systems: Vec<String>,
    /// Every volume found ([`geometry::Geometry::describe`]), whatever
    /// cluster size was used.
    pub volumes: Vec<String>,
    /// Files reported per allocation status (`allocated`, `unallocated`,
    /// `partly`, `not known`).
    pub alloc: BTreeMap<String, u64>,
    /// With `--free-space-only`: what the filter dropped and kept ([`free`]).
    pub free_space: Option<free::FreeSpaceCounts>,
    /// Files given an original name, per volume (its image offset).
    pub names: BTreeMap<u64, u64>,
    pub started: Option<SystemTime>,
    pub finished: Option<SystemTime>,
}

/// What travels from the scan merger to the carver thread.
#[derive(Clone, Copy)]
enum Event {
    Header(Candidate),
    Footer {
        type_index: usize,
        offset: u64,
        end: u64,
    },
    /// The scan has passed this offset.
    Progress(u64),
}

/// Which part of the image a carving owns, and where it picks up after an interruption.
#[derive(Clone, Debug, Default)]
pub struct CarveScope {
    /// Header candidates starting in `[own_start, own_end)` are this carving's
    /// (a shard); the others are left to the neighbouring shards. Footers and
    /// validators still see bytes past `own_end`.
    pub own_start: u64,
    pub own_end: Option<u64>,
    /// Resume after this checkpoint: candidates before its frontier are done.
    pub resume: Option<Checkpoint>,
    /// Complete top-level single-run files reported before the checkpoint,
    /// as (offset, length): the fragment search re-learns the cluster size from them.
    pub prior_complete: Vec<(u64, u64)>,
}

/// The carver's state at a point where every candidate starting before
/// `frontier` has been decided and reported, and none after it has: enough to
/// carry on from `frontier` with the same ids, nesting and counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    pub frontier: u64,
    /// Files reported so far (the last id).
    pub files: u64,
    /// Complete files that may still contain later ones: (start, end, id).
    pub parents: Vec<(u64, u64, u64)>,
    /// Ids of those parents whose payload their validator did not check.
    #[serde(default)]
    pub opaque_parents: Vec<u64>,
    pub rejected: u64,
    /// Unvalidated candidates counted but not reported.
    #[serde(default)]
    pub unreported: u64,
    /// Bytes of the output bound spent ([`bound::OutputBound::spent`]).
    #[serde(default)]
    pub output_spent: u64,
    /// Candidates held back by the output rules, per type ([`bound`]).
    #[serde(default)]
    pub held_back: bound::HeldCounts,
}

/// Carves `image`: scan with `engines`, validate, write into `out`, report to `report`.
#[allow(clippy::too_many_arguments)]
pub fn carve(
    image: &Image,
    catalogue: &Catalogue,
    set: &CompiledSet,
    engines: &EngineSet,
    scan_opts: &ScanOptions,
    opts: &CarveOptions,
    out: &OutputDir,
    report: &mut (dyn CarveReport + Send),
    progress: &mut dyn FnMut(u64, u64),
    warn: &mut dyn FnMut(String),
) -> Result<CarveSummary, CarveError> {
    carve_scoped(
        image,
        catalogue,
        set,
        engines,
        scan_opts,
        opts,
        &CarveScope::default(),
        out,
        report,
        progress,
        warn,
    )
}

/// [`carve`] of the part of the image `scope` owns, possibly resuming.
/// `progress` gets bytes done counted from the start of the image.
#[allow(clippy::too_many_arguments)]
pub fn carve_scoped(
    image: &Image,
    catalogue: &Catalogue,
    set: &CompiledSet,
    engines: &EngineSet,
    scan_opts: &ScanOptions,
    opts: &CarveOptions,
    scope: &CarveScope,
    out: &OutputDir,
    report: &mut (dyn CarveReport + Send),
    progress: &mut dyn FnMut(u64, u64),
    warn: &mut dyn FnMut(String),
) -> Result<CarveSummary, CarveError> {
    validators::check_names(catalogue).map_err(CarveError::Catalogue)?;
    let summary = CarveSummary {
        started: Some(SystemTime::now()),
        ..CarveSummary::default()
    };
    let overlap = set.max_len().saturating_sub(1);
    image.media().keep_decoded(KEEP_DECODED);
    // Pieces of the match stream (one scan block, or PREVALIDATE_EVENTS
    // events of a dense one) queued between the stages: enough that the scan
    // and the validation stage run a fragment search's gap ahead of the
    // carver (their JPEG verdicts spare the search its owner decodes), few
    // enough that what waits stays bounded whatever the image.
    let (tx, rx) = sync_channel::<Vec<Event>>(16);
    let found = std::sync::atomic::AtomicU64::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    let carved_to = std::sync::atomic::AtomicU64::new(0);
    let from = scope
        .resume
        .as_ref()
        .map_or(scope.own_start, |c| c.frontier.max(scope.own_start));
    let scan_start = from.min(image.len()) / DIRECT_ALIGN as u64 * DIRECT_ALIGN as u64;
    let max_header_offset = max_header_offset(set, catalogue);

    // scan ─▶ validation stage (every core) ─▶ ordered carver: validation of
    // later pieces overlaps the carver's fragment search and emission.
    let (vtx, vrx) = sync_channel::<Validated>(12);
    let own = (from, scope.own_end.unwrap_or(u64::MAX));
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let known = std::sync::Arc::new(fragments::KnownJpegs::default());
    let (needle_of, needles) = scan_needles(set, image, scan_start);
    let mut scan_opts = scan_opts.clone();
    scan_opts.read_again = true;
    if needles.observes() {
        scan_opts.observer = Some(needles.clone());
    }
    let scan_opts = &scan_opts;
    let mut density = density::Density::new(catalogue.types.len());
    let free_counts = std::sync::Mutex::new(None);
    let free_space = opts.free_space_only.then_some(&free_counts);
    let result = std::thread::scope(|s| {
        let known_by_stage = known.clone();
        let needles_by_stage = needles.clone();
        // The file systems (cluster sizes, FAT chains, ext inode tables) are
        // read once, for the validation stage and the carver, on the stage's
        // thread while the scan starts (the scan does not need them; its
        // first pieces wait in the queue meanwhile).
        let (geo_tx, geo_rx) = sync_channel::<(std::sync::Arc<geometry::Geometry>, AllocShared)>(1);
        let stage = s.spawn(move || {
            let known = known_by_stage;
            // However the stage ends (a panic included), no search waits for it.
            struct Finished<'k>(&'k fragments::KnownJpegs);
            impl Drop for Finished<'_> {
                fn drop(&mut self) {
                    self.0.stage_finished();
                }
            }
            let _finished = Finished(&known);
            let geo = std::sync::Arc::new(geometry::detect_with_files(&ImageBytes::new(image)));
            // (A carver that has stopped does not need it.)
            // With --free-space-only, the searches keep out of allocated
            // clusters: the maps read in full, once (None past their budget).
            let allocated = free_space
                .and_then(|_| geometry::alloc::AllocMaps::new(&geo).bits(&ImageBytes::new(image)))
                .map(std::sync::Arc::new);
            let _ = geo_tx.send((geo.clone(), allocated));
            let cx = stage::Context {
                catalogue,
                bytes: ImageBytes::new(image),
                own,
                workers,
                known: &known,
                geo: &geo,
                needles: needles_by_stage,
                free_space,
            };
            stage::run(&cx, rx, vtx)
        });
        let carver = s.spawn(|| {
            // (Moved in: a receiver is not shared between threads.)
            let geo_rx = geo_rx;
            let Ok((geo, allocated)) = geo_rx.recv() else {
                return Err(CarveError::Internal(
                    "the validation stage stopped before reading the file systems".into(),
                ));
            };
            carve_events(
                vrx,
                image,
                catalogue,
                opts,
                scope,
                max_header_offset,
                out,
                report,
                &found,
                &done,
                &carved_to,
                (known.clone(), needles.clone(), &geo, allocated),
            )
        });
        let mut to_events = MatchesToEvents {
            set,
            catalogue,
            density: &mut density,
            done: &done,
            tx: &tx,
            needle_of: &needle_of,
            needles: &needles,
        };
        let mut sink = |b: &BlockSpec, matches: &[Match]| to_events.block(b, matches);
        let scanned = scan_range(
            image,
            Engines {
                primary: engines.primary.as_ref(),
                fallback: engines.fallback.as_deref(),
            },
            overlap,
            scan_opts,
            scan_start..image.len(),
            &mut sink,
            // Progress is what the carver has decided, not what the scan has
            // read: validation, fragment search and writing are the work.
            &mut |d| {
                let carved = carved_to.load(std::sync::atomic::Ordering::Relaxed);
                progress(
                    carved.clamp(scan_start, scan_start + d),
                    found.load(std::sync::atomic::Ordering::Relaxed),
                )
            },
            warn,
        );
        drop(tx);
        let carved = carver
            .join()
            .map_err(|_| CarveError::Internal("carver thread panicked".into()))?;
        // A carver error (disk full) explains a scan stopped by "the carver stopped".
        let carved = carved?;
        let scanned = scanned?;
        // The carver ends when the validation stage does: had the stage
        // stopped (or panicked) before passing on every batch, the carving
        // would be silently short. (Unless the carver itself stopped early:
        // past the end of its shard.)
        let stage_complete = stage.join().unwrap_or(false);
        if !stage_complete && !done.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(CarveError::Internal(
                "the validation stage stopped before the end of the scan".into(),
            ));
        }
        Ok::<_, CarveError>((scanned, carved))
    });
    let (scan_stats, carved) = result?;
    let mut summary = summarize(summary, scan_stats, carved, &density, catalogue);
    summary.free_space = free_counts.into_inner().unwrap_or_else(|e| e.into_inner());
    if summary.free_space.as_ref().is_some_and(|c| !c.mapped) {
        warn(free::NO_MAP.to_string());
    }
    Ok(summary)
}

/// The furthest a header signature lies from the start of its file.
fn max_header_offset(set: &CompiledSet, catalogue: &Catalogue) -> u64 {
    set.origins
        .iter()
        .filter(|o| o.role == Role::Header)
        .map(|o| catalogue.signature(*o).offset)
        .max()
        .unwrap_or(0)
}

/// The scan's positions of the signatures the fragment searches index: for
/// each compiled pattern, the needle it is exactly (if any), and where the
/// scan records what it saw of them.
fn scan_needles(
    set: &CompiledSet,
    image: &Image,
    scan_start: u64,
) -> (Vec<Option<usize>>, std::sync::Arc<fragments::ScanNeedles>) {
    let needle_of: Vec<Option<usize>> = set
        .patterns
        .iter()
        .map(|p| {
            fragments::NEEDLES
                .iter()
                .position(|n| crate::pattern::Pattern::literal(n).as_ref() == Some(p))
        })
        .collect();
    let mut enabled = [false; fragments::NEEDLES.len()];
    for k in needle_of.iter().flatten() {
        enabled[*k] = true;
    }
    let mut needles = fragments::ScanNeedles::new(scan_start, enabled);
    // The JPEG searches' prefilter is decided from what the scan saw of
    // each sector when JPEG is carved (`NEEDLES[0]`, its SOI, is scanned
    // for).
    if enabled[0] {
        needles = needles.with_entropy_sectors(image.len());
    }
    (needle_of, std::sync::Arc::new(needles))
}

/// The scan's sink: turns each block's signature matches into the events
/// the validation stage and the carver take (headers admitted by alignment
/// and density, footers, the block's progress), and records the fragment
/// searches' needles.
struct MatchesToEvents<'a> {
    set: &'a CompiledSet,
    catalogue: &'a Catalogue,
    density: &'a mut density::Density,
    /// Set when the carver has stopped: the scan stops too.
    done: &'a std::sync::atomic::AtomicBool,
    tx: &'a std::sync::mpsc::SyncSender<Vec<Event>>,
    needle_of: &'a [Option<usize>],
    needles: &'a fragments::ScanNeedles,
}

impl MatchesToEvents<'_> {
    /// Sends one scanned block's events (in pieces when it is dense).
    fn block(&mut self, b: &BlockSpec, matches: &[Match]) -> Result<(), String> {
        let (set, catalogue, tx) = (self.set, self.catalogue, self.tx);
        let density = &mut *self.density;
        if self.done.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(crate::scan::STOP_SCAN.to_string());
        }
        let mut events = Vec::new();
        for m in matches {
            // Dense blocks travel in pieces: what waits in the queue stays small.
            if events.len() >= PREVALIDATE_EVENTS {
                tx.send(std::mem::take(&mut events))
                    .map_err(|_| "the carver stopped".to_string())?;
            }
            let o = set.origins[m.pattern as usize];
            let sig = catalogue.signature(o);
            match o.role {
                Role::Header => {
                    let Some(start) = m.offset.checked_sub(sig.offset) else {
                        continue;
                    };
                    // (A power of two: a mask, not a division per match.)
                    if start & (catalogue.types[o.type_index].align - 1) != 0 {
                        continue;
                    }
                    if !density.admit(o.type_index, start) {
                        continue;
                    }
                    events.push(Event::Header(Candidate {
                        type_index: o.type_index,
                        start,
                        header_len: sig.pattern.len() as u64 + sig.offset,
                    }));
                }
                Role::Footer => events.push(Event::Footer {
                    type_index: o.type_index,
                    offset: m.offset,
                    end: m.offset + sig.pattern.len() as u64,
                }),
                // (A keyword list is searched by `scan`, never carved.)
                Role::Keyword => {}
            }
        }
        let through = b.offset + b.owned_len as u64;
        let found: Vec<(usize, u64)> = matches
            .iter()
            .filter_map(|m| Some((self.needle_of.get(m.pattern as usize).copied()??, m.offset)))
            .collect();
        self.needles.record(&found, (b.offset, through));
        events.push(Event::Progress(through));
        tx.send(events)
            .map_err(|_| "the carver stopped".to_string())
    }
}

/// The carving's summary: the scan's statistics, the carver's totals, the
/// candidates the density limit held back; finished now.
fn summarize(
    mut summary: CarveSummary,
    scan_stats: ScanStats,
    carved: CarverTotals,
    density: &density::Density,
    catalogue: &Catalogue,
) -> CarveSummary {
    summary.scan = scan_stats;
    summary.counts = carved.counts;
    summary.files_found = carved.found;
    summary.files_written = carved.written;
    summary.bytes_written = carved.bytes_written;
    summary.embedded = carved.embedded;
    summary.rejected_headers = carved.rejected;
    summary.unreported_unvalidated = carved.unreported;
    summary.held_back = carved.bound.held().clone();
    for (t, n) in density.skipped() {
        let name = catalogue.types[t].name.clone();
        summary.held_back.entry(name).or_default()[3] += n;
    }
    summary.profile = carved.profile;
    summary.file_systems = carved.file_systems;
    summary.volumes = carved.volumes;
    summary.alloc = carved.alloc;
    summary.names = carved.names;
    summary.finished = Some(SystemTime::now());
    summary
}

/// Decoded bytes a compressed image (E01) keeps while it is carved: the
/// scan runs up to about 32 blocks ahead of the carver (the queues between
/// them: 128 MiB with the CPU's 4 MiB blocks), and the validators, the
/// fragment searches and the writer read around each header behind it. With
/// this much kept, each chunk of a 512 MiB E01 is decoded about once instead
/// of 3.8 times (16 MiB kept).
pub const KEEP_DECODED: u64 = 256 << 20;

/// Why carving stopped.
#[derive(Debug, thiserror::Error)]
pub enum CarveError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("writing the report: {0}")]
    Report(std::io::Error),
    /// The catalogue cannot be carved with (a validator it names does not exist).
    #[error("catalogue: {0}")]
    Catalogue(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The work meter's bound ([`work_limit`]): a carving's validations and
/// fragment searches read at most this many times the image...
pub const WORK_PER_BYTE: u64 = 16;
/// ...plus this many bytes per header hit (a candidate's first reads: a
/// header every few bytes costs that many first reads)...
pub const WORK_PER_HIT: u64 = 512;
/// ...plus this many bytes (the fragment searches' fixed share,
/// [`fragments::image_budget`], and small images).
pub const WORK_FIXED: u64 = 320 << 20;

/// The most bytes the validations and fragment searches of a carving of
/// `image_len` bytes with `hits` signature matches may read
/// ([`Profile::total_read`], in `audit.txt`): linear in the image and its
/// matches. `tests/linear.rs` holds every hostile shape of every type to it.
pub fn work_limit(image_len: u64, hits: u64) -> u64 {
    image_len
        .saturating_mul(WORK_PER_BYTE)
        .saturating_add(hits.saturating_mul(WORK_PER_HIT))
        .saturating_add(WORK_FIXED)
}

/// Time per carving stage, for the audit: `(stage, what) → (count, seconds)`,
/// the CPU seconds of the threads that did the work (their tasks' wall times
/// times their CPU share while busy, read from the thread CPU clock), summed
/// (so on several cores the stages add up to more than the wall time);
/// `write+hash (wall)` is the emitter's wall time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    pub stages: BTreeMap<(String, String), (u64, f64)>,
    /// Bytes read from the image per `(stage, type)`: the work meter
    /// ([`view::bytes_read_here`]).
    pub read: BTreeMap<(String, String), u64>,
}

/// A task's CPU time, for the stage profile: its wall time times its
/// thread's CPU share while busy. The carving runs more threads than cores
/// (scan, stage, carver, searches, writers), so a task's wall time counts
/// the others' work too (session 15, two cores: the stage's JPEG validations
/// summed to 0.19-0.31 s of wall time in runs of equal CPU time, 0.11 s of
/// CPU). Reading a thread's CPU clock is a system call (0.5 µs on this VM;
/// dense input validates millions of candidates: 8 s of system time when
/// every task read it twice), so each thread reads it at most every
/// [`CPU_SAMPLE`]: the CPU it used since, over the wall time of its tasks
/// since (its waits between tasks use no CPU), is the share applied to its
/// tasks until the next reading. A task longer than that is measured alone.
/// What a thread does between its tasks counts towards the share too (the
/// carver decides files between its validations and searches), and the
/// share is at most 1: such a thread's tasks count at most their wall time.
/// Clocks do not nest (no timed task runs inside another on one thread).
pub(crate) struct CpuClock(std::time::Instant);

/// Least wall time between two readings of a thread's CPU clock.
const CPU_SAMPLE: std::time::Duration = std::time::Duration::from_millis(5);

/// A thread's last CPU clock reading, the wall time of its tasks since, and
/// the CPU share found at that reading.
struct CpuMeter {
    read_at: std::time::Instant,
    cpu: std::time::Duration,
    busy: f64,
    share: f64,
}

thread_local! {
    static CPU_METER: std::cell::RefCell<Option<CpuMeter>> = const { std::cell::RefCell::new(None) };
}

impl CpuClock {
    pub(crate) fn start() -> CpuClock {
        CPU_METER.with(|m| {
            m.borrow_mut().get_or_insert_with(|| CpuMeter {
                read_at: std::time::Instant::now(),
                cpu: thread_cpu_time(),
                busy: 0.0,
                share: 1.0,
            });
        });
        CpuClock(std::time::Instant::now())
    }

    /// The task's CPU seconds, once it has ended (call once per task).
    pub(crate) fn secs(&self) -> f64 {
        let now = std::time::Instant::now();
        let wall = now.saturating_duration_since(self.0).as_secs_f64();
        CPU_METER.with(|m| {
            let mut m = m.borrow_mut();
            let Some(m) = m.as_mut() else {
                return wall;
            };
            m.busy += wall;
            if now.saturating_duration_since(m.read_at) >= CPU_SAMPLE && m.busy > 0.0 {
                let cpu = thread_cpu_time();
                m.share = (cpu.saturating_sub(m.cpu).as_secs_f64() / m.busy).min(1.0);
                (m.read_at, m.cpu, m.busy) = (now, cpu, 0.0);
            }
            wall * m.share
        })
    }
}

/// This thread's CPU time (zero where the clock cannot be read).
fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

impl Profile {
    pub fn add(&mut self, stage: &str, what: &str, count: u64, secs: f64) {
        let e = self
            .stages
            .entry((stage.to_string(), what.to_string()))
            .or_insert((0, 0.0));
        e.0 += count;
        e.1 += secs;
    }

    /// Adds `bytes` read from the image to `(stage, what)`.
    pub fn add_read(&mut self, stage: &str, what: &str, bytes: u64) {
        if bytes > 0 {
            *self
                .read
                .entry((stage.to_string(), what.to_string()))
                .or_insert(0) += bytes;
        }
    }

    /// Bytes read from the image by every stage.
    pub fn total_read(&self) -> u64 {
        self.read.values().sum()
    }

    pub fn merge(&mut self, other: &Profile) {
        for ((st, w), (n, t)) in &other.stages {
            self.add(st, w, *n, *t);
        }
        for ((st, w), b) in &other.read {
            self.add_read(st, w, *b);
        }
    }
}

#[derive(Default)]
struct CarverTotals {
    profile: Profile,
    file_systems: Vec<String>,
    volumes: Vec<String>,
    /// Files reported per allocation status.
    alloc: BTreeMap<String, u64>,
    /// Files given an original name, per volume.
    names: BTreeMap<u64, u64>,
    counts: BTreeMap<(String, String), (u64, u64)>,
    found: u64,
    written: u64,
    bytes_written: u64,
    embedded: u64,
    rejected: u64,
    unreported: u64,
    /// What the carving may still list and write ([`bound`]).
    bound: bound::OutputBound,
}

/// A piece of the match stream with its verdicts (see [`prevalidate`]) and
/// the time they took.
type Validated = (
    Vec<Event>,
    Vec<Option<Option<validators::Verdict>>>,
    Profile,
);

/// Validated batches the carver takes ahead of their turn (their fragment
/// searches run meanwhile on the searching threads): at most this many,
/// holding at most [`LOOKAHEAD_EVENTS`] events (a sparse image's batches
/// hold a few events each, a dense one's a full piece). 32 rather than 8:
/// when the validation stage ends, the searches of the image's last
/// stretch are asked for at once (ext4 464 → 412 ms).
const LOOKAHEAD_BATCHES: usize = 32;

/// Most events held in the carver's look-ahead (four full pieces).
const LOOKAHEAD_EVENTS: usize = 4 * PREVALIDATE_EVENTS;

/// Decided files held behind a candidate that waits for its footer, at most.
const MAX_HELD: usize = 1 << 16;

/// Header events validated together: bounds the verdicts held at once
/// whatever the density of headers in a block.
const PREVALIDATE_EVENTS: usize = 1 << 14;

/// The carver's own validation of a candidate the stage left to it (ZIP's,
/// or one whose stage verdict is missing), as the stage's
/// ([`validate_laid_out`]); timed into `profile`.
fn validate_here(
    v: &str,
    bytes: &ImageBytes<'_>,
    geo: &geometry::Geometry,
    (start, max_len): (u64, u64),
    profile: &mut Profile,
) -> Option<validators::Verdict> {
    let t0 = CpuClock::start();
    let r0 = view::bytes_read_here();
    let alone = &validators::NO_CONTEXT;
    let verdict = validate_laid_out(v, bytes, geo, (start, max_len), alone, || {
        validators::validate(v, bytes, start, Limits { max_len }, alone)
    });
    profile.add("validate", v, 1, t0.secs());
    profile.add_read("validate", v, view::bytes_read_here() - r0);
    verdict
}

/// The verdict of `validator` for the file at `start`, given `contiguous`,
/// its validation over the contiguous bytes:
///
/// * a file an ext inode lists in several runs: the verdict along them when
///   they prove it, and then its contiguous bytes are not validated at all
///   (on the ext2 image 14 JPEGs whose contiguous decode ran on through the
///   indirect block); else the contiguous verdict;
/// * otherwise the contiguous verdict, or the verdict over the file as its
///   file system lays it out (an ext2/3 block map, a FAT cluster chain)
///   when that one proves the file ([`fragments::fs_layout_verdict`]),
///   validated with what `shared` holds.
fn validate_laid_out(
    validator: &str,
    bytes: &ImageBytes<'_>,
    geo: &geometry::Geometry,
    (start, max_len): (u64, u64),
    shared: &validators::Context,
    contiguous: impl FnOnce() -> Option<validators::Verdict>,
) -> Option<validators::Verdict> {
    let Some(vol) = geo
        .at(start)
        .filter(|v| v.block_map().is_some() || v.fat.is_some() || v.inode_files.is_some())
    else {
        return contiguous();
    };
    // A file system's entry starts a file here: its size decides, when the
    // validator proves that much.
    if let Some(v) = fragments::fs_entry_verdict(validator, bytes, vol, (start, max_len), shared) {
        return Some(v);
    }
    let listed = vol
        .inode_files
        .as_ref()
        .is_some_and(|m| m.files.contains_key(&start));
    if listed {
        // (The inode's runs decide; the contiguous verdict does not enter.)
        return fragments::fs_layout_verdict(validator, bytes, vol, (start, max_len), None, shared)
            .or_else(contiguous);
    }
    let verdict = contiguous();
    fragments::fs_layout_verdict(
        validator,
        bytes,
        vol,
        (start, max_len),
        verdict.as_ref(),
        shared,
    )
    .or(verdict)
}

/// Ranges `[start, end)` of structures validators walked, for asking in
/// O(log n) whether a start lies strictly inside one of them.
///
/// Kept as the ranges no other range contains on the left: sorted by start,
/// with ends increasing, so the last range starting before a point has the
/// furthest end of all of them. A range inside an earlier one adds nothing and
/// is not stored; ranges behind the carving are dropped. Each range is inserted
/// and removed at most once: dense input (a header every few bytes, each with a
/// long partial verdict) stays linear.
#[derive(Default)]
struct Coverage {
    ranges: std::collections::VecDeque<(u64, u64)>,
}

impl Coverage {
    fn insert(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let pos = self.ranges.partition_point(|&(s, _)| s <= start);
        if pos > 0 && self.ranges[pos - 1].1 >= end {
            return;
        }
        // Later-starting ranges that end no further are inside the new one.
        let mut stop = pos;
        while stop < self.ranges.len() && self.ranges[stop].1 <= end {
            stop += 1;
        }
        self.ranges.drain(pos..stop);
        self.ranges.insert(pos, (start, end));
    }

    /// True when some range has `start < at < end`.
    fn strictly_covers(&self, at: u64) -> bool {
        let pos = self.ranges.partition_point(|&(s, _)| s < at);
        pos > 0 && self.ranges[pos - 1].1 > at
    }

    /// Forgets ranges ending at or before `at` (the carving is past them).
    fn forget_before(&mut self, at: u64) {
        while self.ranges.front().is_some_and(|&(_, e)| e <= at) {
            self.ranges.pop_front();
        }
    }
}

/// A complete file that may contain others: (end, id).
struct Parent {
    start: u64,
    end: u64,
    id: u64,
    /// Its validator checked structure only ([`validators::proves_content`]).
    opaque: bool,
}

/// What the ordered carver hands to the emitter thread, in order.
enum Emit {
    /// Numbered files: write or hash them, then report them.
    Files(Vec<Planned>),
    /// Everything before the frontier is reported (the resume journal).
    Checkpoint(Checkpoint),
}

/// The ordered carver ([`carve_ordered`]) with its emitter: files are
/// written, hashed and reported on another thread (itself using every core),
/// so that the carver goes on deciding the next ones meanwhile. Reports
/// and checkpoints keep the carver's order; the first failed write (disk
/// full) stops the emission there, and its error is the one returned.
#[allow(clippy::too_many_arguments)]
fn carve_events(
    rx: Receiver<Validated>,
    image: &Image,
    catalogue: &Catalogue,
    opts: &CarveOptions,
    scope: &CarveScope,
    max_header_offset: u64,
    out: &OutputDir,
    report: &mut (dyn CarveReport + Send),
    found: &std::sync::atomic::AtomicU64,
    done: &std::sync::atomic::AtomicBool,
    carved_to: &std::sync::atomic::AtomicU64,
    (known, needles, geo, allocated): (
        std::sync::Arc<fragments::KnownJpegs>,
        std::sync::Arc<fragments::ScanNeedles>,
        &geometry::Geometry,
        AllocShared,
    ),
) -> Result<CarverTotals, CarveError> {
    let (etx, erx) = sync_channel::<Emit>(8);
    // Fragment searches run ahead of the carver on threads of their own
    // (the carver checks that each answer is the one it would have found).
    let (jobs_tx, jobs_rx) = std::sync::mpsc::channel();
    let jobs_rx = std::sync::Mutex::new(jobs_rx);
    let searchers = search_ahead();
    let joins = fragments::AheadJoins::default();
    std::thread::scope(|s| {
        let emitter = s.spawn(move || emit_loop(erx, image, geo, out, opts.hashes, report));
        for _ in 0..searchers {
            let known_ahead = (
                Some(known.clone()),
                Some(needles.clone()),
                allocated.clone(),
            );
            let (jobs_rx, joins) = (&jobs_rx, &joins);
            s.spawn(move || {
                fragments::run_ahead(&ImageBytes::new(image), known_ahead, jobs_rx, joins)
            });
        }
        // With no searching thread, the carver asks for none.
        let jobs_tx = (searchers > 0).then_some(jobs_tx);
        let carved = carve_ordered(
            rx,
            image,
            catalogue,
            opts,
            scope,
            max_header_offset,
            &etx,
            found,
            done,
            carved_to,
            (known, needles, geo, allocated),
            jobs_tx,
        );
        drop(etx);
        let emitted = emitter
            .join()
            .map_err(|_| CarveError::Internal("emitter thread panicked".into()))?;
        // An emission error (disk full) is why the carver stopped.
        let emitted = emitted?;
        let mut totals = carved?;
        totals.written = emitted.written;
        totals.bytes_written = emitted.bytes_written;
        totals.counts = emitted.counts;
        totals.alloc = emitted.alloc;
        totals.names = emitted.names;
        totals.volumes = geo.describe();
        totals.profile.merge(&emitted.profile);
        Ok(totals)
    })
}

/// How many threads search fragments ahead of the carver: one per core,
/// asked for as soon as their verdicts reach the carver; none on one core.
/// (On fewer than 4 cores they were asked for only once the validation
/// stage was idle, and a search waited for the earlier ones in its reach;
/// asking all along is faster there too, the end of a carving being less
/// idle: ext2 417 -> 390 ms, ext4 410 -> 395 ms, the 128 MiB ext2 482 ->
/// 382 ms, FAT32 the same, on the 2-core VM (BENCHMARKS.md of session 17, in git history);
/// the session's first binary gained as much, 419 -> 389 ms.) `GPUCARVE_SEARCH_AHEAD=N` asks for N
/// threads (the tests run with 0 and more and compare).
fn search_ahead() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match std::env::var("GPUCARVE_SEARCH_AHEAD")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(n) => n.min(64),
        None if cores >= 2 => cores,
        None => 0,
    }
}

/// The emitter: runs the files' actions (writing, hashing) on a pool of
/// one thread per core, and reports the files and checkpoints in order
/// once their actions have ended. Actions of consecutive batches overlap:
/// a batch waits for no other batch's files (the carver's last batches are
/// often one large file each, and a barrier per batch left a core idle for
/// the carving's last tens of milliseconds). The reports are written only
/// while no action runs, as when each batch was written and then reported:
/// on a full disk the write that fails is a carved file's, whose error says
/// so, not a report line's, and the reports hold every file before it
/// (reports written between a pool's writes failed instead, now and then).
/// Stops at the first failure in the files' order (no action is started
/// after a failure is seen; the files before it are reported).
///
/// Memory: at most [`EMIT_AHEAD`] files are between being planned and
/// being reported (each its report entry, not its bytes; past it the pool
/// drains and the reports catch up), and the pool's queue holds two per
/// thread.
fn emit_loop(
    rx: Receiver<Emit>,
    image: &Image,
    geo: &geometry::Geometry,
    out: &OutputDir,
    hashes: crate::hashing::HashChoice,
    report: &mut (dyn CarveReport + Send),
) -> Result<CarverTotals, CarveError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let bytes = ImageBytes::new(image);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The first file whose action failed (none: `u64::MAX`).
    let failed = AtomicU64::new(u64::MAX);
    let (work_tx, work_rx) = sync_channel::<(u64, Planned)>(workers * 2);
    let work_rx = std::sync::Mutex::new(work_rx);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<(u64, Planned, Outcome)>();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let (work_rx, done_tx, bytes, failed) = (&work_rx, done_tx.clone(), &bytes, &failed);
            s.spawn(move || {
                loop {
                    let job = work_rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok((seq, p)) = job else { break };
                    // (Nothing after a failure is written: it would not be
                    // reported.)
                    let o = if seq > failed.load(Ordering::Relaxed) {
                        Outcome::Nothing
                    } else {
                        // (A panic is a failure the emitter reports, not a
                        // thread it would wait for forever.)
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            run_action(&p, bytes, out, hashes)
                        }))
                        .unwrap_or(Outcome::Panicked)
                    };
                    if matches!(o, Outcome::Failed(_) | Outcome::Panicked) {
                        failed.fetch_min(seq, Ordering::Relaxed);
                    }
                    if done_tx.send((seq, p, o)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let mut order = InOrder::default();
        // What the file systems say of each file's clusters, read as files
        // are reported (bounded: [`geometry::alloc`]).
        let mut alloc = geometry::alloc::AllocMaps::new(geo);
        let mut alloc_clock = (0u64, 0.0f64);
        // The directory entries pointing at each file's first cluster
        // (bounded: [`geometry::names`]).
        let mut names = geometry::names::NameMaps::new(geo);
        let mut names_clock = (0u64, 0.0f64);
        let r = (|| {
            for msg in rx {
                match msg {
                    Emit::Files(planned) => {
                        for mut p in planned {
                            let t0 = CpuClock::start();
                            let runs = p.file.byte_runs.iter().map(|r| (r.img_offset, r.len));
                            p.file.alloc = alloc.status(&bytes, runs);
                            alloc_clock.0 += 1;
                            alloc_clock.1 += t0.secs();
                            if p.file.parent.is_none() && !names.is_empty() {
                                let t0 = CpuClock::start();
                                let first = p.file.byte_runs.first();
                                let at = first.map_or(p.file.offset, |r| r.img_offset);
                                p.file.original_name = names.lookup(&bytes, at);
                                names_clock.0 += 1;
                                names_clock.1 += t0.secs();
                            }
                            // (A bounded number of files in flight.)
                            while order.waiting() >= EMIT_AHEAD {
                                let Ok(d) = done_rx.recv() else { break };
                                order.done(d, report)?;
                            }
                            let seq = order.planned();
                            if matches!(p.action, Action::Nothing) {
                                order.done((seq, p, Outcome::Nothing), report)?;
                            } else {
                                order.started();
                                if work_tx.send((seq, p)).is_err() {
                                    return Err(CarveError::Internal(
                                        "the output threads stopped".into(),
                                    ));
                                }
                            }
                        }
                    }
                    Emit::Checkpoint(cp) => order.checkpoint(cp, report)?,
                }
                while let Ok(d) = done_rx.try_recv() {
                    order.done(d, report)?;
                }
            }
            Ok(())
        })();
        // No more work: the threads end once the queue is empty (at once
        // after a failure).
        if r.is_err() {
            failed.store(0, Ordering::Relaxed);
        }
        drop(work_tx);
        r?;
        for d in done_rx.iter() {
            if let Err(e) = order.done(d, report) {
                failed.store(0, Ordering::Relaxed);
                return Err(e);
            }
        }
        if order.waiting() > 0 {
            return Err(CarveError::Internal("an output thread stopped".into()));
        }
        let mut totals = order.totals;
        if alloc_clock.0 > 0 {
            let stage = "allocation status";
            totals.profile.add(stage, "", alloc_clock.0, alloc_clock.1);
        }
        if names_clock.0 > 0 {
            let stage = "original names";
            totals.profile.add(stage, "", names_clock.0, names_clock.1);
        }
        Ok(totals)
    })
}

/// Most files between being planned and being reported ([`emit_loop`]).
const EMIT_AHEAD: u64 = 1024;

/// [`emit_loop`]'s reporting in the files' order.
#[derive(Default)]
struct InOrder {
    totals: CarverTotals,
    /// Sequence number of the next file planned, and of the next reported.
    next: u64,
    reported: u64,
    /// Files done and waiting for those before them.
    ready: std::collections::BTreeMap<u64, (Planned, Outcome)>,
    /// Checkpoints, each with the number of files planned before it.
    checkpoints: std::collections::VecDeque<(u64, Checkpoint)>,
    /// Actions running, and since when some have been (the pool's busy
    /// time: "write+hash (wall)").
    running: u64,
    busy_since: Option<std::time::Instant>,
    actions: u64,
}

impl InOrder {
    fn planned(&mut self) -> u64 {
        self.next += 1;
        self.next - 1
    }

    fn waiting(&self) -> u64 {
        self.next - self.reported
    }

    fn started(&mut self) {
        self.running += 1;
        self.busy_since.get_or_insert_with(std::time::Instant::now);
    }

    fn checkpoint(
        &mut self,
        cp: Checkpoint,
        report: &mut (dyn CarveReport + Send),
    ) -> Result<(), CarveError> {
        self.checkpoints.push_back((self.next, cp));
        self.flush(report)
    }

    /// A file's action has ended: reports what is now in order.
    fn done(
        &mut self,
        (seq, p, o): (u64, Planned, Outcome),
        report: &mut (dyn CarveReport + Send),
    ) -> Result<(), CarveError> {
        if !matches!(p.action, Action::Nothing) {
            self.running = self.running.saturating_sub(1);
            self.actions += 1;
            if self.running == 0
                && let Some(t0) = self.busy_since.take()
            {
                let secs = t0.elapsed().as_secs_f64();
                let n = std::mem::take(&mut self.actions);
                self.totals.profile.add("write+hash (wall)", "", n, secs);
            }
        }
        self.ready.insert(seq, (p, o));
        self.flush(report)
    }

    /// Reports what is in order, when no action runs.
    fn flush(&mut self, report: &mut (dyn CarveReport + Send)) -> Result<(), CarveError> {
        if self.running > 0 {
            return Ok(());
        }
        let t0 = CpuClock::start();
        let mut n = 0;
        loop {
            // (A checkpoint goes before the files planned after it.)
            if self
                .checkpoints
                .front()
                .is_some_and(|(before, _)| *before <= self.reported)
            {
                if let Some((_, cp)) = self.checkpoints.pop_front() {
                    report.checkpoint(&cp).map_err(CarveError::Report)?;
                }
            } else if let Some((p, o)) = self.ready.remove(&self.reported) {
                self.reported += 1;
                n += 1;
                self.file(p, o, report)?;
            } else {
                break;
            }
        }
        if n > 0 {
            self.totals.profile.add("reports", "", n, t0.secs());
        }
        Ok(())
    }

    fn file(
        &mut self,
        mut p: Planned,
        o: Outcome,
        report: &mut (dyn CarveReport + Send),
    ) -> Result<(), CarveError> {
        let totals = &mut self.totals;
        match o {
            Outcome::Written(w) => {
                p.file.path = Some(w.path);
                p.file.set_digests(w.digests);
                totals.written += 1;
                totals.bytes_written += p.file.length;
            }
            Outcome::Hashed(digests) => p.file.set_digests(digests),
            Outcome::Nothing => {}
            Outcome::Failed(e) => return Err(CarveError::Output(e)),
            Outcome::Panicked => {
                return Err(CarveError::Internal("an output thread panicked".into()));
            }
        }
        let e = totals
            .counts
            .entry((p.file.file_type.clone(), p.file.status.clone()))
            .or_insert((0, 0));
        e.0 += 1;
        e.1 += p.file.length;
        let status = p.file.alloc.map_or("not known", |a| a.as_str());
        *totals.alloc.entry(status.to_string()).or_insert(0) += 1;
        if let Some(n) = &p.file.original_name {
            *totals.names.entry(n.volume).or_insert(0) += 1;
        }
        report.file(&p.file).map_err(CarveError::Report)
    }
}

/// The emitter has stopped (its error is returned instead of this one).
fn emitter_gone<T>(_: T) -> CarveError {
    CarveError::Internal("the emitter stopped".into())
}

#[allow(clippy::too_many_arguments)]
fn carve_ordered(
    rx: Receiver<Validated>,
    image: &Image,
    catalogue: &Catalogue,
    opts: &CarveOptions,
    scope: &CarveScope,
    max_header_offset: u64,
    emit: &std::sync::mpsc::SyncSender<Emit>,
    found: &std::sync::atomic::AtomicU64,
    done: &std::sync::atomic::AtomicBool,
    carved_to: &std::sync::atomic::AtomicU64,
    (known, needles, geo, allocated): (
        std::sync::Arc<fragments::KnownJpegs>,
        std::sync::Arc<fragments::ScanNeedles>,
        &geometry::Geometry,
        AllocShared,
    ),
    ahead_jobs: Option<std::sync::mpsc::Sender<fragments::AheadJob>>,
) -> Result<CarverTotals, CarveError> {
    let mut carver = OrderedCarver {
        image,
        bytes: ImageBytes::new(image),
        catalogue,
        opts,
        geo,
        emit,
        found,
        done,
        carved_to,
        max_header_offset,
        totals: CarverTotals {
            bound: bound::OutputBound::new(image.len(), 0, Default::default()),
            ..Default::default()
        },
        rules: FooterRules::new(catalogue),
        parents: Vec::new(),
        seen_starts: Default::default(),
        seen_since: 0,
        uniform: uniform_header_offsets(catalogue),
        last_start: vec![u64::MAX; catalogue.types.len()],
        resolved: Vec::new(),
        frags: fragments::Fragments::new(opts.cluster_size),
        joined_runs: BTreeMap::new(),
        held: BTreeMap::new(),
        own_start: scope.own_start,
        own_end: scope.own_end.unwrap_or(u64::MAX),
        frontier: 0,
        zip_cover: Coverage::default(),
        complete_cover: Coverage::default(),
        predicted_cover: Coverage::default(),
        predicted_zips: Coverage::default(),
    };
    carver.attach_searches(known, needles, allocated, ahead_jobs);
    carver.resume(scope);
    carver.take_batches(&rx)?;
    carver.finish()
}

/// For each type: whether its header signatures all lie at one distance
/// from the file's start. Such a type sees a start's duplicates together
/// (matches come by offset): its last start is enough to drop them.
fn uniform_header_offsets(catalogue: &Catalogue) -> Vec<bool> {
    catalogue
        .types
        .iter()
        .map(|t| t.headers.windows(2).all(|w| w[0].offset == w[1].offset))
        .collect()
}

/// The ordered carver's inputs and state ([`carve_ordered`]): it takes the
/// validated batches in scan order, decides each candidate (its verdict,
/// its fragment search, the output rules) and sends the decided files, in
/// offset order, to the emitter.
struct OrderedCarver<'a> {
    image: &'a Image,
    bytes: ImageBytes<'a>,
    catalogue: &'a Catalogue,
    opts: &'a CarveOptions,
    geo: &'a geometry::Geometry,
    emit: &'a std::sync::mpsc::SyncSender<Emit>,
    /// Files found so far, for the progress line.
    found: &'a std::sync::atomic::AtomicU64,
    /// Set when everything this carving owns is decided: the scan may stop.
    done: &'a std::sync::atomic::AtomicBool,
    /// How far the carving has decided, for the progress line.
    carved_to: &'a std::sync::atomic::AtomicU64,
    max_header_offset: u64,
    totals: CarverTotals,
    rules: FooterRules,
    parents: Vec<Parent>,
    /// (start, type) of the header events taken: those of the last 1-2 MiB
    /// of the scan, in two generations (a set is cleared whole when the scan
    /// is 1 MiB past its generation: no deletions one by one).
    seen_starts: [std::collections::HashSet<(u64, usize)>; 2],
    seen_since: u64,
    /// Per type: its duplicates come together, its last start is enough
    /// ([`uniform_header_offsets`]); the sets serve the others.
    uniform: Vec<bool>,
    last_start: Vec<u64>,
    resolved: Vec<(Candidate, extent::Extent)>,
    /// Bifragment recovery (fragments.rs): its state.
    frags: fragments::Fragments,
    /// The runs of proven joins.
    joined_runs: BTreeMap<(u64, usize), Vec<ByteRun>>,
    /// Decided candidates wait here until no earlier one can still come, so
    /// files are reported (and numbered) in offset order whatever decides them.
    held: BTreeMap<(u64, usize), (Candidate, extent::Extent)>,
    own_start: u64,
    own_end: u64,
    frontier: u64,
    /// Structures validated so far that may still hold later candidates: ZIP
    /// walks (complete or not) and complete files of every validated type.
    zip_cover: Coverage,
    complete_cover: Coverage,
    /// What the carver will claim before each search asked ahead, as far as
    /// the verdicts tell: complete files not inside another one. ZIP
    /// candidates (which the stage leaves to the carver) are validated here,
    /// once, when searches run ahead: their verdicts go with the batch, as
    /// the stage's do (validators are pure functions of the image).
    predicted_cover: Coverage,
    predicted_zips: Coverage,
}

impl OrderedCarver<'_> {
    /// Sets up the fragment searches: the file systems' block maps (whatever
    /// cluster size is used), the JPEGs and needles shared with the stage,
    /// the allocated clusters they keep out of, the searching threads' queue.
    fn attach_searches(
        &mut self,
        known: std::sync::Arc<fragments::KnownJpegs>,
        needles: std::sync::Arc<fragments::ScanNeedles>,
        allocated: AllocShared,
        ahead_jobs: Option<std::sync::mpsc::Sender<fragments::AheadJob>>,
    ) {
        // (Block maps are the file system's whatever cluster size is used.)
        if self.opts.cluster_size.is_none() {
            self.frags.geometry = self.geo.clone();
            self.totals.file_systems = self.frags.geometry.describe();
        }
        self.frags.share_jpegs(known);
        self.frags.share_needles(needles);
        self.frags.share_allocated(allocated);
        if let Some(jobs) = ahead_jobs {
            self.frags.attach_ahead(jobs);
        }
    }

    /// Carries on from the scope's checkpoint, if any (its counts, output
    /// spent and open parents), and seeds the fragment search with the
    /// complete files reported before it.
    fn resume(&mut self, scope: &CarveScope) {
        if let Some(cp) = &scope.resume {
            self.own_start = self.own_start.max(cp.frontier);
            self.frontier = cp.frontier;
            self.totals.found = cp.files;
            self.totals.rejected = cp.rejected;
            self.totals.unreported = cp.unreported;
            self.totals.bound =
                bound::OutputBound::new(self.image.len(), cp.output_spent, cp.held_back.clone());
            self.parents = cp
                .parents
                .iter()
                .map(|&(start, end, id)| Parent {
                    start,
                    end,
                    id,
                    opaque: cp.opaque_parents.contains(&id),
                })
                .collect();
        }
        for &(start, length) in &scope.prior_complete {
            self.frags.seed(start, length);
        }
    }

    /// Takes the validated batches in order until the stage ends, asking
    /// for their fragment searches ahead while they wait their turn.
    fn take_batches(&mut self, rx: &Receiver<Validated>) -> Result<(), CarveError> {
        // Batches taken from the validation stage before their turn: their
        // fragment searches start on the searches' thread at once.
        let mut lookahead: std::collections::VecDeque<Validated> = Default::default();
        // Batches of `lookahead` before this one have been asked about.
        let mut asked_upto = 0usize;
        loop {
            if lookahead.is_empty() {
                let Ok(batch) = rx.recv() else { break };
                lookahead.push_back(batch);
            }
            while lookahead.len() < LOOKAHEAD_BATCHES
                && lookahead.iter().map(|b| b.0.len()).sum::<usize>() < LOOKAHEAD_EVENTS
            {
                let Ok(batch) = rx.try_recv() else { break };
                lookahead.push_back(batch);
            }
            // Searches are asked for ahead once their verdicts are here.
            while let Some(batch) = lookahead.get_mut(asked_upto) {
                self.ask_ahead(batch);
                asked_upto += 1;
            }
            let Some(batch) = lookahead.pop_front() else {
                break;
            };
            asked_upto = asked_upto.saturating_sub(1);
            self.take_batch(batch)?;
        }
        Ok(())
    }

    /// Asks for the fragment searches a batch's verdicts call for, before
    /// the batch's turn (and validates its ZIP candidates for that).
    fn ask_ahead(&mut self, batch: &mut Validated) {
        if !self.frags.asks_ahead() {
            return;
        }
        let catalogue = self.catalogue;
        let (events, pre, profile) = batch;
        for (ev, pre) in events.iter().zip(pre.iter_mut()) {
            let Event::Header(c) = ev else { continue };
            if c.start < self.own_start || c.start >= self.own_end {
                continue;
            }
            let t = &catalogue.types[c.type_index];
            let Some(v) = &t.validator else { continue };
            let behind = c.start.saturating_sub(self.max_header_offset);
            self.predicted_cover.forget_before(behind);
            self.predicted_zips.forget_before(behind);
            let max_len = t.max_size.min(self.image.len().saturating_sub(c.start));
            if v == "zip" {
                // An entry of an archive walked before: not a file (the
                // carver's test, on the verdicts it is expected to have).
                if self.predicted_zips.strictly_covers(c.start) {
                    continue;
                }
                if pre.is_none() {
                    *pre = Some(validate_here(
                        v,
                        &self.bytes,
                        self.geo,
                        (c.start, max_len),
                        profile,
                    ));
                }
                if let Some(Some(z)) = pre.as_ref()
                    && z.length > 0
                {
                    self.predicted_zips
                        .insert(c.start, c.start.saturating_add(z.length));
                }
            }
            if let Some(Some(verdict)) = pre.as_ref() {
                if self.predicted_cover.strictly_covers(c.start) {
                    continue;
                }
                if verdict.status == Status::Complete && verdict.length > 0 {
                    let spans = verdict
                        .runs
                        .clone()
                        .unwrap_or_else(|| vec![(c.start, verdict.length)]);
                    for (a, n) in spans {
                        self.frags.predict_claim(a, a.saturating_add(n));
                        if validators::proves_content(v) {
                            self.predicted_cover.insert(a, a.saturating_add(n));
                        }
                    }
                } else {
                    self.frags.ask_ahead(v, c.start, max_len, verdict);
                }
            }
        }
    }

    /// Decides one batch's events in order.
    ///
    /// The candidates arrive validated (validators are pure functions, run
    /// on every core by the validation stage while this thread searches
    /// fragments and emits); the ordered pass only looks verdicts up. ZIP
    /// candidates are validated here: whether one is an entry of an archive
    /// already walked depends on the verdicts before it.
    fn take_batch(&mut self, (batch, mut pre, profile): Validated) -> Result<(), CarveError> {
        self.totals.profile.merge(&profile);
        let chunk = &batch[..];
        for (ev_index, &ev) in chunk.iter().enumerate() {
            // Decided candidates go through the output rules as they come
            // (dense input decides hundreds of thousands per block).
            if self.resolved.len() >= 4096 {
                hold(
                    &mut self.held,
                    &mut self.resolved,
                    (&mut self.joined_runs, self.catalogue),
                    self.opts,
                    &mut self.totals,
                );
            }
            match ev {
                Event::Header(c) => self.take_header(c, &mut pre, ev_index),
                Event::Footer {
                    type_index,
                    offset,
                    end,
                } => self
                    .rules
                    .add_footer(type_index, offset, end, &mut self.resolved),
                Event::Progress(pos) => self.advance(pos)?,
            }
        }
        Ok(())
    }

    /// Decides a header candidate: another shard's and repeats are skipped,
    /// a validated type's goes by its verdict ([`Self::take_validated`]), an
    /// unvalidated one waits for its footer (or is only counted).
    fn take_header(
        &mut self,
        c: Candidate,
        pre: &mut [Option<Option<validators::Verdict>>],
        ev_index: usize,
    ) {
        // Another shard's, or decided before the checkpoint we resume from.
        if c.start < self.own_start || c.start >= self.own_end {
            return;
        }
        if self.is_repeat(c) {
            return;
        }
        let t = &self.catalogue.types[c.type_index];
        match &t.validator {
            Some(v) => self.take_validated(c, t, v, pre, ev_index),
            // Guesses nobody keeps are counted, not decided.
            None if !self.opts.keep.contains(&Status::Unvalidated) => self.totals.unreported += 1,
            None => self
                .rules
                .add_candidate(c, self.image.len(), &mut self.resolved),
        }
    }

    /// Whether a candidate was taken already: one candidate per (start,
    /// type), as several headers of one type may match one file.
    fn is_repeat(&mut self, c: Candidate) -> bool {
        let key = (c.start, c.type_index);
        if self.uniform.get(c.type_index).copied().unwrap_or(false) {
            if self.last_start[c.type_index] == c.start {
                return true;
            }
            self.last_start[c.type_index] = c.start;
        } else if self.seen_starts[1].contains(&key) || !self.seen_starts[0].insert(key) {
            return true;
        }
        false
    }

    /// Decides a candidate of a validated type: its verdict (the stage's,
    /// or validated here), its fragment search, the structures it covers;
    /// resolved, or counted as rejected.
    fn take_validated(
        &mut self,
        c: Candidate,
        t: &crate::catalogue::FileType,
        v: &str,
        pre: &mut [Option<Option<validators::Verdict>>],
        ev_index: usize,
    ) {
        // Structures validated before, no longer covering anything to come.
        let behind = c.start.saturating_sub(self.max_header_offset);
        self.zip_cover.forget_before(behind);
        self.complete_cover.forget_before(behind);
        // A ZIP local header inside a ZIP already walked (complete or
        // not: a partial verdict ends where its structure broke) is
        // one of that archive's entries, not a file of its own.
        if v == "zip" && self.zip_cover.strictly_covers(c.start) {
            self.totals.rejected += 1;
            return;
        }
        let max_len = t.max_size.min(self.image.len().saturating_sub(c.start));
        let verdict = match pre.get_mut(ev_index).and_then(Option::take) {
            Some(v) => v,
            None => validate_here(
                v,
                &self.bytes,
                self.geo,
                (c.start, max_len),
                &mut self.totals.profile,
            ),
        };
        // >>> bifragment recovery: a Partial PNG/ZIP/JPEG may be two fragments.
        // Objects inside another structure are not searched: their
        // container explains where they end.
        // Only complete structures count: a partial verdict's length
        // may be a guess reaching far beyond its file.
        if v == "jpeg" {
            self.frags.note_jpeg(c.start, max_len, verdict.as_ref());
        }
        // A rejected header: counted (most of a dense region's). It
        // has nothing to search for: the searches' bookkeeping
        // waits for the next verdict.
        if verdict.is_none() {
            self.totals.rejected += 1;
            return;
        }
        let inside = self.complete_cover.strictly_covers(c.start);
        let (verdict, runs) = if inside {
            // (A layout the file system gave stays.)
            let runs = verdict.as_ref().and_then(|v| v.runs.clone());
            (verdict, runs)
        } else {
            self.search_fragments(v, c.start, max_len, verdict)
        };
        // What the file covers in the image: its runs, when
        // joined or laid out by the file system.
        let spans: Vec<(u64, u64)> = match (&runs, &verdict) {
            (Some(r), _) => r.iter().map(|&(o, n)| (o, o.saturating_add(n))).collect(),
            (None, Some(vd)) => {
                vec![(c.start, c.start.saturating_add(vd.length))]
            }
            (None, None) => Vec::new(),
        };
        if let Some(runs) = runs {
            self.joined_runs
                .insert((c.start, c.type_index), to_byte_runs(&runs));
        }
        // <<< bifragment recovery
        if let Some(vd) = &verdict
            && vd.length > 0
        {
            self.cover(v, vd, &spans);
        }
        match verdict {
            Some(verdict) if verdict.length >= t.min_size.min(max_len) && verdict.length > 0 => {
                let mut ext = extent::Extent::from_verdict(verdict);
                // (A file its file system's entry starts here stands alone
                // whatever its type: the entry says it is a file.)
                let entry = self
                    .geo
                    .at(c.start)
                    .is_some_and(|g| g.entry_starts(c.start));
                ext.standalone = ext.status == Status::Complete
                    && (validators::stands_alone(v) || entry)
                    && self.frags.on_cluster_boundary(c.start);
                self.resolved.push((c, ext))
            }
            _ => self.totals.rejected += 1,
        }
    }

    /// The fragment search after a verdict (a partial file may be two
    /// fragments): the verdict and runs it gives, timed into the profile.
    fn search_fragments(
        &mut self,
        v: &str,
        start: u64,
        max_len: u64,
        verdict: Option<validators::Verdict>,
    ) -> (Option<validators::Verdict>, Option<Vec<(u64, u64)>>) {
        let t0 = CpuClock::start();
        let r0 = view::bytes_read_here();
        let searches = self.frags.searches;
        let r = self
            .frags
            .after_validate(v, &self.bytes, start, max_len, verdict);
        self.totals
            .profile
            .add_read("fragment search, carver", v, view::bytes_read_here() - r0);
        if self.frags.searches > searches {
            self.totals
                .profile
                .add("fragment search, carver", v, 1, t0.secs());
        }
        r
    }

    /// Records the spans a validated file covers: a ZIP's (its entries are
    /// not files), a complete file's whose validator proves its content.
    fn cover(&mut self, v: &str, vd: &validators::Verdict, spans: &[(u64, u64)]) {
        for &(a, end) in spans {
            if v == "zip" {
                self.zip_cover.insert(a, end);
            }
            // A container whose payload was not checked does not
            // explain what lies in it (a fragmented MP4's `mdat`
            // may hold other files' clusters).
            if vd.status == Status::Complete && validators::proves_content(v) {
                self.complete_cover.insert(a, end);
            }
        }
    }

    /// The scan has passed `pos`: decides what can be, emits the files no
    /// earlier candidate can still precede, checkpoints the new frontier.
    fn advance(&mut self, pos: u64) -> Result<(), CarveError> {
        self.rules.advance(pos, &mut self.resolved);
        // Forget dedup keys well behind the scan.
        let horizon = pos.saturating_sub(1 << 20);
        if horizon > self.seen_since {
            self.seen_starts.swap(0, 1);
            self.seen_starts[0].clear();
            self.seen_since = pos;
        }
        // Files decided behind a candidate still waiting for its
        // footer wait with it, up to a bound: then it is decided
        // now (memory stays bounded with --keep unvalidated).
        if self.held.len() + self.resolved.len() > MAX_HELD {
            self.rules.decide_all_now(&mut self.resolved);
        }
        // Candidates still to come start at or after `pos - max_header_offset`.
        let limit = self
            .rules
            .earliest_pending()
            .unwrap_or(u64::MAX)
            .min(pos.saturating_sub(self.max_header_offset))
            .max(self.frontier);
        self.emit_decided(limit)?;
        self.found
            .store(self.totals.found, std::sync::atomic::Ordering::Relaxed);
        self.carved_to
            .store(pos, std::sync::atomic::Ordering::Relaxed);
        if limit > self.frontier {
            self.frontier = limit;
            let frontier = self.frontier;
            self.parents.retain(|p| p.end > frontier);
            let cp = self.checkpoint();
            self.emit.send(Emit::Checkpoint(cp)).map_err(emitter_gone)?;
        }
        if self.frontier >= self.own_end || self.frontier >= self.image.len() {
            // Everything this carving owns is decided: the scan may stop.
            self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// The carver's state at its frontier.
    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            frontier: self.frontier.min(self.image.len()),
            files: self.totals.found,
            parents: self
                .parents
                .iter()
                .map(|p| (p.start, p.end, p.id))
                .collect(),
            opaque_parents: self
                .parents
                .iter()
                .filter(|p| p.opaque)
                .map(|p| p.id)
                .collect(),
            rejected: self.totals.rejected,
            unreported: self.totals.unreported,
            output_spent: self.totals.bound.spent(),
            held_back: self.totals.bound.held().clone(),
        }
    }

    /// Emits every decided candidate starting before `below` ([`emit_held`]).
    fn emit_decided(&mut self, below: u64) -> Result<(), CarveError> {
        emit_held(
            &mut self.held,
            &mut self.resolved,
            below,
            &mut self.joined_runs,
            self.catalogue,
            self.opts,
            self.emit,
            &mut self.parents,
            &mut self.totals,
        )
    }

    /// The searches run ahead, into the profile: their own time (on their
    /// thread), and those whose answer the carver could not use (it
    /// searched again itself); the owner checks' waits for the stage.
    fn profile_searches_ahead(&mut self) {
        for (v, secs, _waited, used, read) in self.frags.ahead_profile.drain(..) {
            self.totals.profile.add("fragment search ahead", v, 1, secs);
            self.totals
                .profile
                .add_read("fragment search ahead", v, read);
            if !used {
                self.totals
                    .profile
                    .add("fragment search ahead, not used", v, 1, secs);
            }
        }
        let (waits, waited) = self.frags.stage_waits();
        if waits > 0 {
            // Part of the JPEG search time above: owner checks waiting for the
            // validation stage to decode the JPEG they ask about.
            self.totals
                .profile
                .add("fragment search, waiting", "jpeg", waits, waited);
        }
    }

    /// The stage has ended: decides and emits everything left, and the
    /// final checkpoint (the whole image).
    fn finish(mut self) -> Result<CarverTotals, CarveError> {
        self.profile_searches_ahead();
        self.rules.finish(self.image.len(), &mut self.resolved);
        self.emit_decided(u64::MAX)?;
        self.found
            .store(self.totals.found, std::sync::atomic::Ordering::Relaxed);
        self.emit
            .send(Emit::Checkpoint(Checkpoint {
                frontier: self.image.len(),
                files: self.totals.found,
                parents: Vec::new(),
                opaque_parents: Vec::new(),
                rejected: self.totals.rejected,
                unreported: self.totals.unreported,
                output_spent: self.totals.bound.spent(),
                held_back: self.totals.bound.held().clone(),
            }))
            .map_err(emitter_gone)?;
        Ok(self.totals)
    }
}

/// Moves decided candidates to the emission queue. Unvalidated candidates
/// that the carving does not keep are counted, not reported: their extent is
/// only a footer or max-size guess (`scan` lists every header hit), and on
/// dense input (a header every few bytes) reporting each would make the
/// reports hundreds of times the size of the evidence.
fn hold(
    held: &mut BTreeMap<(u64, usize), (Candidate, extent::Extent)>,
    resolved: &mut Vec<(Candidate, extent::Extent)>,
    (joined_runs, catalogue): (&mut BTreeMap<(u64, usize), Vec<ByteRun>>, &Catalogue),
    opts: &CarveOptions,
    totals: &mut CarverTotals,
) {
    let keep_unvalidated = opts.keep.contains(&Status::Unvalidated);
    for (c, e) in resolved.drain(..) {
        if e.status == Status::Unvalidated && !keep_unvalidated {
            totals.unreported += 1;
            continue;
        }
        // The output rules ([`bound`]) per type: each type's candidates are
        // resolved in offset order, so they hold the same whatever the
        // threads do; held back here, they are not held in memory.
        let joined = joined_runs.contains_key(&(c.start, c.type_index));
        if totals
            .bound
            .screen(&c, &e, joined, &catalogue.types[c.type_index].name)
            .is_err()
        {
            joined_runs.remove(&(c.start, c.type_index));
            continue;
        }
        held.insert((c.start, c.type_index), (c, e));
    }
}

/// Emits, in (offset, type) order, every decided candidate starting before
/// `below`, after moving the newly `resolved` ones into `held` ([`hold`]).
///
/// Each candidate is numbered, nested and given its action here, in order
/// (cheap); the batch goes to the emitter ([`emit_loop`]), which runs the
/// actions (write and hash in one pass, or hash only) on every core and
/// writes the reports in order. A failed action (disk full) stops the
/// emission there: the files before it are reported, the error is returned.
#[allow(clippy::too_many_arguments)]
fn emit_held(
    held: &mut BTreeMap<(u64, usize), (Candidate, extent::Extent)>,
    resolved: &mut Vec<(Candidate, extent::Extent)>,
    below: u64,
    joined_runs: &mut BTreeMap<(u64, usize), Vec<ByteRun>>,
    catalogue: &Catalogue,
    opts: &CarveOptions,
    emit: &std::sync::mpsc::SyncSender<Emit>,
    parents: &mut Vec<Parent>,
    totals: &mut CarverTotals,
) -> Result<(), CarveError> {
    hold(held, resolved, (joined_runs, catalogue), opts, totals);
    let mut planned = Vec::new();
    while let Some(entry) = held.first_entry() {
        if entry.key().0 >= below {
            break;
        }
        let (c, ext) = entry.remove();
        let runs = joined_runs.remove(&(c.start, c.type_index));
        planned.extend(plan(c, ext, runs, catalogue, opts, parents, totals));
    }
    if planned.is_empty() {
        return Ok(());
    }
    emit.send(Emit::Files(planned)).map_err(emitter_gone)
}

/// What is done with a reported file's bytes.
enum Action {
    /// Written (extension given) and hashed in the same pass.
    Write(String),
    /// Hashed without writing (`--hash-unwritten`, or reports-only carving).
    Hash,
    /// Neither: the report says why it carries no hash.
    Nothing,
}

/// A numbered file and what to do with its bytes.
struct Planned {
    file: CarvedFile,
    action: Action,
}

enum Outcome {
    Written(output::Written),
    Hashed(crate::hashing::Digests),
    Nothing,
    Failed(OutputError),
    /// The action panicked (a bug): the carving stops.
    Panicked,
}

/// Numbers `c`, finds its parent and decides its action: the ordered, cheap
/// part of emission. `None` when the output bound leaves no room to list it
/// ([`bound`]).
fn plan(
    c: Candidate,
    ext: extent::Extent,
    joined: Option<Vec<ByteRun>>,
    catalogue: &Catalogue,
    opts: &CarveOptions,
    parents: &mut Vec<Parent>,
    totals: &mut CarverTotals,
) -> Option<Planned> {
    let t = &catalogue.types[c.type_index];
    parents.retain(|p| p.end > c.start);
    let container = parents
        .iter()
        .rev()
        .find(|p| p.start <= c.start && c.start < p.end);
    // A file complete by its own checks, on a cluster boundary, inside a
    // container that only added up its structure: the container is the
    // suspect (fragmented, its payload someone else's clusters), not the file.
    let mut own_note = None;
    let parent = match container {
        Some(p) if p.opaque && ext.standalone => {
            own_note = Some(format!(
                "inside file {} whose validator checked its structure, not its payload; complete by its own checks and on a cluster boundary: carved as a file of its own",
                p.id
            ));
            None
        }
        Some(p) => Some(p.id),
        None => None,
    };
    // The files a carving keeps: written, or with --no-write hashed so that
    // `extract` can be checked against the report later.
    let mut kept = opts.keep.contains(&ext.status) && (parent.is_none() || opts.keep_embedded);
    let admitted = totals
        .bound
        .admit(
            c.start.saturating_add(ext.length),
            (kept && opts.write).then_some(ext.length),
            &t.name,
        )
        .ok()?;
    if admitted == bound::Admit::ListOnly {
        kept = false;
        own_note = Some(format!(
            "not written: the carving's output reached its bound (twice the image plus {} MiB); extract writes it",
            bound::output_limit(0) >> 20
        ));
    }
    totals.found += 1;
    let id = totals.found;
    let file_type = ext.subtype.clone().unwrap_or_else(|| t.name.clone());
    // A proven bifragment join brings its own runs; its first run is what
    // may hold embedded files.
    let runs = joined.unwrap_or_else(|| {
        vec![ByteRun {
            file_offset: 0,
            img_offset: c.start,
            len: ext.length,
        }]
    });
    let first_run_end = runs.first().map_or(c.start, |r| r.img_offset + r.len);
    let mut file = CarvedFile {
        id,
        file_type: file_type.clone(),
        family: t.name.clone(),
        status: ext.status.as_str().to_string(),
        alloc: None,
        original_name: None,
        offset: c.start,
        length: ext.length,
        byte_runs: runs,
        sha256: None,
        md5: None,
        sha1: None,
        parent,
        path: None,
        validator: t.validator.clone(),
        notes: ext.notes,
    };
    file.notes.extend(own_note);
    if parent.is_some() {
        totals.embedded += 1;
    }
    let action = if kept && opts.write {
        Action::Write(extension_for(&file_type, t))
    } else if kept || (opts.hash_unwritten && file.length <= MAX_UNWRITTEN_HASH) {
        Action::Hash
    } else {
        file.notes.push(if opts.hash_unwritten {
            format!(
                "not hashed: not written and longer than {} MiB (extract it to hash it)",
                MAX_UNWRITTEN_HASH >> 20
            )
        } else {
            "not hashed: not written (--hash-unwritten hashes it; extract writes it)".to_string()
        });
        Action::Nothing
    };
    if ext.status == Status::Complete && parent.is_none() {
        parents.push(Parent {
            start: c.start,
            end: first_run_end,
            id,
            opaque: !t
                .validator
                .as_deref()
                .is_some_and(validators::proves_content),
        });
    }
    Some(Planned { file, action })
}

/// Runs one file's action.
fn run_action(
    p: &Planned,
    bytes: &ImageBytes<'_>,
    out: &OutputDir,
    hashes: crate::hashing::HashChoice,
) -> Outcome {
    match &p.action {
        Action::Write(ext) => match out.write_file(bytes, &p.file, ext, hashes) {
            Ok(w) => Outcome::Written(w),
            Err(e) => Outcome::Failed(e),
        },
        Action::Hash => match output::hash_runs(bytes, &p.file.byte_runs, hashes) {
            Ok(digests) => Outcome::Hashed(digests),
            Err(e) => Outcome::Failed(e),
        },
        Action::Nothing => Outcome::Nothing,
    }
}

/// Byte runs of a proven join from `(image offset, length)` pairs.
fn to_byte_runs(runs: &[(u64, u64)]) -> Vec<ByteRun> {
    let mut file_offset = 0;
    runs.iter()
        .map(|&(img_offset, len)| {
            let r = ByteRun {
                file_offset,
                img_offset,
                len,
            };
            file_offset += len;
            r
        })
        .collect()
}

/// File extension for a carved file: the subtype's own name when it is one
/// (`docx`), else the catalogue's first extension.
fn extension_for(file_type: &str, t: &crate::catalogue::FileType) -> String {
    if file_type != t.name {
        file_type.to_string()
    } else {
        t.extension().to_string()
    }
}

/// Folder holding a carving's files for `status` (complete files at the top).
pub fn status_folder(status: &str) -> Option<&'static str> {
    match status {
        "partial" => Some("partial"),
        "unvalidated" => Some("unvalidated"),
        _ => None,
    }
}

#[cfg(test)]
mod coverage_tests {
    use super::Coverage;
    use proptest::prelude::*;

    proptest! {
        /// `strictly_covers` equals a brute-force scan of every range
        /// inserted (in mostly increasing start order, as the carver does),
        /// with `forget_before` dropping only ranges behind every later query.
        #[test]
        fn coverage_equals_brute_force(
            ops in proptest::collection::vec((0u64..2000, 0u64..600, 0u64..40), 1..200)
        ) {
            let mut cov = Coverage::default();
            let mut all: Vec<(u64, u64)> = Vec::new();
            let mut at = 0u64;
            for (step, len, probe) in ops {
                at += step % 50;
                let start = at.saturating_sub(step % 7); // a little out of order
                cov.insert(start, start + len);
                all.push((start, start + len));
                let q = at + probe;
                let brute = all.iter().any(|&(s, e)| s < q && q < e);
                prop_assert_eq!(cov.strictly_covers(q), brute, "query {}", q);
                cov.forget_before(at.saturating_sub(10));
            }
        }
    }
}

#[cfg(test)]
mod cpu_clock_tests {
    use super::CpuClock;
    use std::time::{Duration, Instant};

    /// The stage profile's clock counts a thread's work, not its waits:
    /// a sleep adds (almost) nothing, a busy loop what it spun, and a
    /// thread that timed many short tasks read its CPU clock only now and
    /// then.
    #[test]
    fn a_thread_clock_counts_work_not_waiting() {
        let c = CpuClock::start();
        std::thread::sleep(Duration::from_millis(200));
        let slept = c.secs();
        assert!(slept < 0.05, "a 200 ms sleep counted {slept} s of CPU");
        let c = CpuClock::start();
        let (cpu0, wall) = (super::thread_cpu_time(), Instant::now());
        let mut x = 1u64;
        while super::thread_cpu_time() - cpu0 < Duration::from_millis(30)
            && wall.elapsed() < Duration::from_secs(20)
        {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        let spun = c.secs();
        assert!(spun >= 0.025, "30 ms of spinning counted {spun} s of CPU");
        assert!(spun <= wall.elapsed().as_secs_f64() + 0.01);
    }
}
