//! A carving job end to end: open the image, prepare the output folder, run
//! the carver with its reports, and write the audit — the unit a batch runs.
//!
//! Whatever happens after the output folder exists, the reports are closed
//! and `audit.txt` says what was done, including why the run stopped early.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::carve::validators::Status;
use crate::carve::{CarveOptions, CarveScope, CarveSummary, CarvedFile, OutputDir, carve_scoped};
use crate::catalogue::Catalogue;
use crate::engine::{EngineChoice, build_engines};
use crate::hashing::{Digests, HashChoice, Hasher};
use crate::journal::{self, Journal};
use crate::report::CarveReport;
use crate::report::dfxml::{DfxmlReport, VolumeHead};
use crate::report::hashdeep::{HASHES, HashdeepList};
use crate::report::jsonl::JsonlReport;
use crate::report::{Fanout, RunInfo, audit, rfc3339};
use crate::scan::ScanOptions;
use crate::source::{Damage, Image, open_any, open_input};
use crate::unread::UnreadGuard;

/// Everything a carving job needs.
#[derive(Clone, Debug)]
pub struct CarveJob {
    pub image: PathBuf,
    pub out_dir: PathBuf,
    pub catalogue: Catalogue,
    pub engine: EngineChoice,
    pub scan: ScanOptions,
    pub carve: CarveOptions,
    pub force: bool,
    pub hash_image: bool,
    pub command_line: String,
    /// Where a gzip image is decompressed (default: the output folder).
    pub spool_dir: Option<PathBuf>,
    /// By content, or raw whatever it looks like (`--input`).
    pub input: crate::source::InputMode,
    /// Carve only the headers starting in this slice `[start, end)` (a shard).
    pub range: Option<(u64, u64)>,
    /// Carry on an interrupted carving from its journal.
    pub resume: bool,
}

/// `run.json` in the output folder: what `--resume`, `gpucarve merge` and
/// `gpucarve extract` need to know.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RunMeta {
    /// The image's absolute path ([`absolute_image_path`]; carvings from
    /// before it recorded the path as typed).
    pub image: String,
    pub image_len: u64,
    pub container: String,
    /// The slice this carving owns, when a shard.
    pub range: Option<(u64, u64)>,
    pub command_line: String,
    pub start_time: String,
    pub keep: Vec<String>,
    pub write: bool,
    pub hash_unwritten: bool,
    pub keep_embedded: bool,
    /// `--free-space-only` (a resumed carving must be one too).
    #[serde(default)]
    pub free_space_only: bool,
    /// The `--hash` algorithms (sha256 and md5 for carvings from before the option).
    #[serde(default)]
    pub hashes: HashChoice,
    /// The whole image's digests, with `--hash-image` (recorded when the carving ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_hashes: Option<Digests>,
    /// The volumes found in the image, for `merge`'s report.xml (none in
    /// carvings from before they were recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeHead>,
}

pub const RUN_META: &str = "run.json";

impl RunMeta {
    /// Reads `dir/run.json`.
    pub fn read(dir: &Path) -> Result<RunMeta, String> {
        let p = dir.join(RUN_META);
        let t = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&t).map_err(|e| format!("{}: {e}", p.display()))
    }

    /// Writes `dir/run.json`.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let p = dir.join(RUN_META);
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    }
}

/// The image path the reports record: absolute, so that `extract` finds the
/// image from any folder (`-`, standard input, stays `-`). `..` is kept: with
/// symbolic links it is not the parent folder.
pub fn absolute_image_path(image: &Path) -> String {
    if image == Path::new("-") {
        return "-".into();
    }
    std::path::absolute(image)
        .unwrap_or_else(|_| image.to_path_buf())
        .display()
        .to_string()
}

/// The image a carving was of, as its output folder records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedImage {
    pub path: PathBuf,
    /// Its size in bytes (the logical media: decoded E01, joined split raw).
    pub len: Option<u64>,
    /// Its digests, when the carving hashed it (`--hash-image`).
    pub hashes: Option<Digests>,
}

/// Reads the image record of the carving in `dir`: `run.json`, or for
/// carvings without one the `image:` and `image size:` lines of `audit.txt`.
pub fn recorded_image(dir: &Path) -> Option<RecordedImage> {
    if let Ok(m) = RunMeta::read(dir) {
        return Some(RecordedImage {
            path: PathBuf::from(m.image),
            len: Some(m.image_len),
            hashes: m.image_hashes,
        });
    }
    let audit = std::fs::read_to_string(dir.join("audit.txt")).ok()?;
    let field = |name: &str| {
        audit
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    Some(RecordedImage {
        path: PathBuf::from(field("image:")?),
        len: field("image size:").and_then(|v| v.trim_end_matches(" bytes").parse().ok()),
        hashes: None,
    })
}

/// Opens the image the carving in `dir` was of, for `gpucarve extract`:
/// `given` (`--image`) or the recorded path. An image whose size differs from
/// the recorded one is refused; a recorded image that is not there is named,
/// with the hint that `--image` points elsewhere.
pub fn open_carved_image(dir: &Path, given: Option<&Path>) -> Result<(Image, PathBuf), String> {
    let rec = recorded_image(dir);
    let describe = |r: &RecordedImage| match r.len {
        Some(n) => format!("{} ({n} bytes)", r.path.display()),
        None => r.path.display().to_string(),
    };
    let (path, img) = match (given, &rec) {
        (Some(p), _) => (p.to_path_buf(), open_any(p).map_err(|e| e.to_string())?),
        (None, Some(r)) => {
            let img = open_any(&r.path).map_err(|e| {
                format!(
                    "{}: the carving was of {}, which cannot be opened ({e}); give --image PATH if the image is elsewhere",
                    dir.display(),
                    describe(r)
                )
            })?;
            (r.path.clone(), img)
        }
        (None, None) => {
            return Err(format!(
                "{}: no run.json or audit.txt naming the image beside the report; give --image",
                dir.display()
            ));
        }
    };
    if let Some(r) = &rec
        && let Some(want) = r.len
        && img.len() != want
    {
        return Err(format!(
            "{}: {} bytes, but the carving was of {}: not the same image, refusing to extract from it",
            path.display(),
            img.len(),
            describe(r)
        ));
    }
    Ok((img, path))
}

/// Everything a batch wants to know about one job, failed or not.
#[derive(Clone, Debug, Default)]
pub struct JobOutcome {
    pub summary: Option<CarveSummary>,
    pub error: Option<String>,
    pub image_len: u64,
    pub container: String,
    pub damage: Vec<Damage>,
}

/// Adds already-reported files (resumed from a journal) to a summary's counts.
fn count_files(summary: &mut CarveSummary, files: &[CarvedFile]) {
    for f in files {
        summary.files_found = summary.files_found.max(f.id);
        if f.path.is_some() {
            summary.files_written += 1;
            summary.bytes_written += f.length;
        }
        if f.parent.is_some() {
            summary.embedded += 1;
        }
        let e = summary
            .counts
            .entry((f.file_type.clone(), f.status.clone()))
            .or_insert((0, 0));
        e.0 += 1;
        e.1 += f.length;
        let status = f.alloc.map_or("not known", |a| a.as_str());
        *summary.alloc.entry(status.to_string()).or_insert(0) += 1;
        if let Some(n) = &f.original_name {
            *summary.names.entry(n.volume).or_insert(0) += 1;
        }
    }
}

/// The chosen digests of the whole image, read sequentially (run beside the scan).
fn hash_image(image: &Image, hashes: HashChoice) -> Result<Digests, String> {
    let mut hasher = Hasher::new(hashes);
    let mut buf = vec![0u8; 4 << 20];
    let mut off = 0u64;
    while off < image.len() {
        let n = image.read_at(off, &mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("image ended early at byte {off} while hashing"));
        }
        hasher.update(&buf[..n]);
        off += n as u64;
    }
    Ok(hasher.finish())
}

/// Bytes reserved for `audit.txt` at the start of a job.
const AUDIT_RESERVE: i64 = 256 << 10;

/// Allocates `len` bytes for `file` (best effort: file systems without
/// fallocate simply do not reserve).
fn reserve(file: &std::fs::File, len: i64) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: the descriptor is valid for the duration of the call; mode 0
    // allocates blocks and extends the file, which we truncate when writing.
    let _ = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
}

impl CarveJob {
    /// Runs the job. `progress(bytes_done, files_found)`; `warn` gets one-line warnings.
    pub fn run(
        &self,
        progress: &mut dyn FnMut(u64, u64),
        warn: &mut dyn FnMut(String),
    ) -> Result<CarveSummary, String> {
        let o = self.run_detailed(progress, warn);
        match (o.summary, o.error) {
            (Some(s), None) => Ok(s),
            (_, Some(e)) => Err(e),
            (None, None) => Err("internal error: no summary".into()),
        }
    }

    /// Runs the job and says everything about it, failed or not.
    pub fn run_detailed(
        &self,
        progress: &mut dyn FnMut(u64, u64),
        warn: &mut dyn FnMut(String),
    ) -> JobOutcome {
        let mut outcome = JobOutcome::default();
        let r = self.run_inner(progress, warn, &mut outcome);
        match r {
            Ok(s) => outcome.summary = Some(s),
            Err(e) => outcome.error = Some(e),
        }
        outcome
    }

    fn run_inner(
        &self,
        progress: &mut dyn FnMut(u64, u64),
        warn: &mut dyn FnMut(String),
        outcome: &mut JobOutcome,
    ) -> Result<CarveSummary, String> {
        if let Some(why) = crate::source::evidence::refuse_output(&self.out_dir, &self.image) {
            return Err(why);
        }
        // Resuming: what the interrupted run had finished.
        let resumed = self.read_resumed()?;
        let spool = self.spool_dir.as_deref().unwrap_or(&self.out_dir);
        let image = open_input(&self.image, spool, self.input).map_err(|e| e.to_string())?;
        outcome.image_len = image.len();
        outcome.container = image.media().describe();
        if let Some((meta, _, _, _)) = &resumed {
            self.check_same_image(meta, &image)?;
        }
        let set = self.catalogue.compile();
        let engines = build_engines(
            &set.patterns,
            &self.engine,
            crate::scan::haystack_len(self.scan.block_size, set.max_len().saturating_sub(1)),
            self.range.map_or(image.len(), |(a, b)| b.saturating_sub(a)),
        )
        .map_err(|e| e.to_string())?;
        let out = OutputDir::create(&self.out_dir, self.force || self.resume, image.len())
            .map_err(|e| e.to_string())?;
        let started = SystemTime::now();
        let info = self.run_info(&image, resumed.as_ref(), started);
        // The volumes, for report.xml's head and run.json (a few small
        // reads; the carving reads them again with the rest of the file
        // systems).
        let volumes: Vec<VolumeHead> =
            crate::carve::geometry::detect(&crate::carve::ImageBytes::new(&image))
                .volumes
                .iter()
                .map(VolumeHead::from)
                .collect();
        let mut meta = match &resumed {
            Some((m, _, _, _)) => m.clone(),
            None => RunMeta {
                volumes: volumes.clone(),
                ..self.new_meta(&info, &image, &outcome.container)
            },
        };
        if resumed.is_none() {
            meta.write(&self.out_dir)?;
        }
        let mut reports = Reports::open(&out, &info, &self.out_dir, &volumes)?;
        let audit_file = out.create_report("audit.txt").map_err(|e| e.to_string())?;
        // Reserve room for the audit now, so that it can still be written if
        // the output file system fills up during the carving.
        reserve(&audit_file, AUDIT_RESERVE);
        let mut scope = CarveScope {
            own_start: self.range.map_or(0, |r| r.0),
            own_end: self.range.map(|r| r.1),
            resume: None,
            prior_complete: Vec::new(),
        };
        let (mut journal, earlier, prior_damage) =
            self.open_journal(resumed, &mut reports, &mut scope, warn)?;
        journal.watch(image.media(), &prior_damage);

        let mut demoted = 0;
        let (result, image_hash) = std::thread::scope(|s| {
            let hasher = self
                .hash_image
                .then(|| s.spawn(|| hash_image(&image, self.carve.hashes)));
            let mut fanout = Fanout {
                reports: vec![
                    &mut reports.jsonl,
                    &mut reports.dfxml,
                    &mut reports.hashlist,
                    &mut journal,
                ],
            };
            // A complete file that crosses an unreadable range is not complete.
            let mut fan = UnreadGuard::new(
                image.media(),
                &self.out_dir,
                self.carve.keep.contains(&Status::Partial),
                &mut fanout,
            );
            let r = carve_scoped(
                &image,
                &self.catalogue,
                &set,
                &engines,
                &self.scan,
                &self.carve,
                &scope,
                &out,
                &mut fan,
                progress,
                warn,
            );
            demoted = fan.demoted;
            let h = hasher.map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("hashing thread panicked".into()))
            });
            (r, h)
        });
        let error = result.as_ref().err().map(|e| e.to_string());
        let mut summary = match &result {
            Ok(s) => s.clone(),
            Err(_) => CarveSummary {
                started: Some(started),
                finished: Some(SystemTime::now()),
                ..CarveSummary::default()
            },
        };
        summary.started = Some(started);
        count_files(&mut summary, &earlier);
        let image_hashes = match image_hash {
            Some(Ok(h)) => Some(h),
            Some(Err(e)) => {
                warn(format!("image hash: {e}"));
                None
            }
            None => None,
        };
        // Damage met before a resumed run's checkpoint, and since.
        outcome.damage = all_damage(prior_damage, &image);
        self.warn_damage(&outcome.damage, warn);
        reports.unreadable(&outcome.damage, warn);
        let clock = summary.scan.wall.as_secs_f64();
        // Close every report even if one fails (disk full): the audit, written
        // last into its reserved space, says what happened.
        let [jsonl_closed, dfxml_closed, hashlist_closed] = reports.finish(clock, error.as_deref());
        let closing = [
            jsonl_closed,
            dfxml_closed,
            hashlist_closed,
            journal.sync().map_err(journal_err),
            match &image_hashes {
                Some(h) => {
                    meta.image_hashes = Some(h.clone());
                    meta.write(&self.out_dir)
                }
                None => Ok(()),
            },
        ];
        let error = match (error, closing.iter().find_map(|r| r.as_ref().err())) {
            (Some(e), _) => Some(e),
            (None, Some(e)) => Some(e.clone()),
            (None, None) => None,
        };
        let mut text = audit::render(&info, image_hashes.as_ref(), &summary, error.as_deref());
        text.push_str(&self.audit_notes(outcome, image.media().mapped_faults(), demoted));
        write_audit(audit_file, &text)?;
        result.map_err(|e| e.to_string())?;
        if let Some(e) = closing.into_iter().find_map(Result::err) {
            return Err(e);
        }
        Ok(summary)
    }

    /// With `--resume`: the interrupted run's `run.json` and journal (its
    /// files, damage and last checkpoint), refused if it hashed otherwise.
    fn read_resumed(&self) -> Result<Option<Resumed>, String> {
        if !self.resume {
            return Ok(None);
        }
        let meta = RunMeta::read(&self.out_dir).map_err(|e| format!("{e} (nothing to resume)"))?;
        if meta.hashes != self.carve.hashes {
            return Err(format!(
                "{}: the interrupted carving hashed with --hash {}; this one asks for {}: not resuming",
                self.out_dir.display(),
                meta.hashes,
                self.carve.hashes
            ));
        }
        if meta.free_space_only != self.carve.free_space_only {
            let (was, is) = if meta.free_space_only {
                ("carved free space only", "the whole image")
            } else {
                ("carved the whole image", "free space only")
            };
            return Err(format!(
                "{}: the interrupted carving {was}; this one asks for {is} (--free-space-only): not resuming",
                self.out_dir.display()
            ));
        }
        let (files, damage, cp) = journal::read_all(&self.out_dir)?;
        Ok(Some((meta, files, damage, cp)))
    }

    /// A resumed run carves the image (and range) the interrupted one did.
    fn check_same_image(&self, meta: &RunMeta, image: &Image) -> Result<(), String> {
        if meta.image_len != image.len() || meta.range != self.range {
            return Err(format!(
                "{}: the interrupted carving was of {} bytes{}; this one is of {} bytes{}: not resuming",
                self.out_dir.display(),
                meta.image_len,
                meta.range
                    .map(|(a, b)| format!(" range {a}..{b}"))
                    .unwrap_or_default(),
                image.len(),
                self.range
                    .map(|(a, b)| format!(" range {a}..{b}"))
                    .unwrap_or_default(),
            ));
        }
        Ok(())
    }

    /// What the reports say of the run (a resumed run keeps the interrupted
    /// one's command line and start time).
    fn run_info(&self, image: &Image, resumed: Option<&Resumed>, started: SystemTime) -> RunInfo {
        RunInfo {
            image: absolute_image_path(&self.image),
            image_len: image.len(),
            command_line: resumed
                .map_or_else(|| self.command_line.clone(), |r| r.0.command_line.clone()),
            version: env!("CARGO_PKG_VERSION").to_string(),
            start_time: resumed.map_or_else(|| rfc3339(started), |r| r.0.start_time.clone()),
            sector_size: 512,
            hashes: self.carve.hashes,
        }
    }

    /// A new run's `run.json`.
    fn new_meta(&self, info: &RunInfo, image: &Image, container: &str) -> RunMeta {
        RunMeta {
            image: info.image.clone(),
            image_len: image.len(),
            container: container.to_string(),
            range: self.range,
            command_line: info.command_line.clone(),
            start_time: info.start_time.clone(),
            keep: self
                .carve
                .keep
                .iter()
                .map(|s| s.as_str().to_string())
                .collect(),
            write: self.carve.write,
            hash_unwritten: self.carve.hash_unwritten,
            keep_embedded: self.carve.keep_embedded,
            free_space_only: self.carve.free_space_only,
            hashes: self.carve.hashes,
            image_hashes: None,
            volumes: Vec::new(),
        }
    }

    /// The journal: a new one, or, resuming from a checkpoint, the
    /// interrupted run's rewritten after its files are reported again (and
    /// the scope set to carry on from the checkpoint). Also the files
    /// reported before and the damage met before.
    fn open_journal(
        &self,
        resumed: Option<Resumed>,
        reports: &mut Reports,
        scope: &mut CarveScope,
        warn: &mut dyn FnMut(String),
    ) -> Result<(Journal, Vec<CarvedFile>, Vec<Damage>), String> {
        let Some((_, files, damage, Some(cp))) = resumed else {
            let j = Journal::create(&self.out_dir).map_err(journal_err)?;
            return Ok((j, Vec::new(), Vec::new()));
        };
        for f in &files {
            reports.file(f)?;
        }
        let j = Journal::rewrite(&self.out_dir, &files, &damage, &cp).map_err(journal_err)?;
        let prior_damage = damage;
        warn(format!(
            "resuming {} at byte {} after {} files",
            self.image.display(),
            cp.frontier,
            cp.files
        ));
        scope.resume = Some(cp);
        scope.prior_complete = files
            .iter()
            .filter(|f| {
                f.status == "complete"
                    && f.parent.is_none()
                    && f.validator.is_some()
                    && f.byte_runs.len() == 1
            })
            .map(|f| (f.offset, f.length))
            .collect();
        Ok((j, files, prior_damage))
    }

    /// One warning per damaged range.
    fn warn_damage(&self, damage: &[Damage], warn: &mut dyn FnMut(String)) {
        for d in damage {
            warn(format!(
                "{}: damaged range {}..{} ({} bytes): {}",
                self.image.display(),
                d.offset,
                d.offset + d.len,
                d.len,
                d.reason
            ));
        }
    }

    /// What the audit adds to the summary: the container, the owned range,
    /// the damage, the mapped reads' faults, the files demoted.
    fn audit_notes(&self, outcome: &JobOutcome, faults: u64, demoted: u64) -> String {
        let mut text = String::new();
        text.push_str(&format!("container: {}\n", outcome.container));
        if let Some((a, b)) = self.range {
            text.push_str(&format!("owned range: {a}..{b}\n"));
        }
        audit::damage_lines(&mut text, &outcome.damage);
        if faults > 0 {
            text.push_str(&format!(
                "mapped reads: stopped at an unreadable page ({faults} SIGBUS handled); the image was read with pread from then on\n"
            ));
        }
        if demoted > 0 {
            text.push_str(&format!(
                "demoted: {demoted} files would be complete but cross a damaged range: reported partial\n"
            ));
        }
        text
    }
}

/// What `--resume` reads of the interrupted run: its `run.json`, and its
/// journal's files, damage and last checkpoint.
type Resumed = (
    RunMeta,
    Vec<CarvedFile>,
    Vec<Damage>,
    Option<crate::carve::Checkpoint>,
);

/// A journal error, named.
fn journal_err(e: std::io::Error) -> String {
    format!("{}: {e}", journal::JOURNAL)
}

/// The damage met before a resumed run's checkpoint, and since, by offset.
fn all_damage(prior_damage: Vec<Damage>, image: &Image) -> Vec<Damage> {
    let mut damage = prior_damage;
    for d in image.media().damage() {
        if !damage.contains(&d) {
            damage.push(d);
        }
    }
    damage.sort_by_key(|d| (d.offset, d.len));
    damage
}

/// Writes the audit into its reserved space, cut to its length.
fn write_audit(mut audit_file: File, text: &str) -> Result<(), String> {
    std::io::Write::write_all(&mut audit_file, text.as_bytes())
        .map_err(|e| format!("audit.txt: {e}"))?;
    audit_file
        .set_len(text.len() as u64)
        .map_err(|e| format!("audit.txt: {e}"))?;
    Ok(())
}

/// The job's three reports: `report.jsonl`, `report.xml` and the hash list.
struct Reports {
    jsonl: JsonlReport<BufWriter<File>>,
    dfxml: DfxmlReport<BufWriter<File>>,
    hashlist: HashdeepList<BufWriter<File>>,
}

impl Reports {
    /// Creates the reports in the output folder, in that order.
    fn open(
        out: &OutputDir,
        info: &RunInfo,
        out_dir: &Path,
        volumes: &[VolumeHead],
    ) -> Result<Reports, String> {
        let open = |name: &str| -> Result<BufWriter<File>, String> {
            out.create_report(name)
                .map(BufWriter::new)
                .map_err(|e| e.to_string())
        };
        let jsonl = JsonlReport::new(open("report.jsonl")?, info.hashes);
        let mut dfxml =
            DfxmlReport::new(open("report.xml")?, info).map_err(|e| format!("report.xml: {e}"))?;
        dfxml
            .volumes(volumes)
            .map_err(|e| format!("report.xml: {e}"))?;
        let hashlist = HashdeepList::new(open(HASHES)?, out_dir, info.hashes, &info.command_line)
            .map_err(|e| format!("{HASHES}: {e}"))?;
        Ok(Reports {
            jsonl,
            dfxml,
            hashlist,
        })
    }

    /// Reports a file (one the interrupted run reported) in all three.
    fn file(&mut self, f: &CarvedFile) -> Result<(), String> {
        self.jsonl
            .file(f)
            .map_err(|e| format!("report.jsonl: {e}"))?;
        self.dfxml.file(f).map_err(|e| format!("report.xml: {e}"))?;
        self.hashlist
            .file(f)
            .map_err(|e| format!("{HASHES}: {e}"))?;
        Ok(())
    }

    /// Lists the damaged ranges in both reports too (records of their own,
    /// after the files); the first failure is a warning, and the last word.
    fn unreadable(&mut self, damage: &[Damage], warn: &mut dyn FnMut(String)) {
        for d in damage {
            let r = self
                .jsonl
                .unreadable(d)
                .map_err(|e| format!("report.jsonl: {e}"))
                .and_then(|()| {
                    self.dfxml
                        .unreadable(d)
                        .map_err(|e| format!("report.xml: {e}"))
                });
            if let Err(e) = r {
                warn(e);
                break;
            }
        }
    }

    /// Closes the three reports, each whatever the others' fate.
    fn finish(self, clock: f64, error: Option<&str>) -> [Result<(), String>; 3] {
        [
            self.jsonl
                .finish()
                .map(|_| ())
                .map_err(|e| format!("report.jsonl: {e}")),
            self.dfxml
                .finish(clock, error)
                .map(|_| ())
                .map_err(|e| format!("report.xml: {e}")),
            self.hashlist
                .finish()
                .map(|_| ())
                .map_err(|e| format!("{HASHES}: {e}")),
        ]
    }
}
