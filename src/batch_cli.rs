//! `gpucarve carve` with one or many inputs: argument checks, progress output,
//! and the hand-off to `gpucarve::batch` / `gpucarve::job`.

use std::collections::{BTreeSet, HashMap};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use gpucarve::batch;
use gpucarve::carve::validators::Status;
use gpucarve::catalogue::Catalogue;
use gpucarve::engine::EngineChoice;
use gpucarve::job::CarveJob;
use gpucarve::scan::ScanOptions;

pub struct CarveCli {
    pub images: Vec<PathBuf>,
    pub output: PathBuf,
    pub catalogue: Result<Catalogue, String>,
    pub engine: EngineChoice,
    pub scan: ScanOptions,
    pub keep: Vec<Status>,
    pub no_write: bool,
    pub keep_embedded: bool,
    pub hash_unwritten: bool,
    pub hashes: gpucarve::hashing::HashChoice,
    pub cluster_size: Option<u64>,
    pub free_space_only: bool,
    pub force: bool,
    pub hash_image: bool,
    pub spool_dir: Option<PathBuf>,
    pub input: gpucarve::source::InputMode,
    pub jobs: usize,
    pub resume: bool,
    pub range: Option<String>,
    pub shard: Option<String>,
    pub progress: String,
    pub quiet: bool,
}

/// Images at least this large are carved one at a time by default.
const LARGE: u64 = 1 << 30;

fn parse_range(s: &str, len: u64) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("--range {s}: expected START..END"))?;
    let a = if a.is_empty() {
        0
    } else {
        gpucarve::catalogue::parse_size(a)?
    };
    let b = if b.is_empty() {
        len
    } else {
        gpucarve::catalogue::parse_size(b)?
    };
    if a >= b || b > len {
        return Err(format!(
            "--range {s}: must be a non-empty slice of the image's {len} bytes"
        ));
    }
    Ok((a, b))
}

fn parse_shard(s: &str, len: u64) -> Result<(u64, u64), String> {
    let bad = || format!("--shard {s}: expected I/N with 1 <= I <= N");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (u64, u64) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if i == 0 || i > n {
        return Err(bad());
    }
    let cut = |k: u64| -> u64 {
        if k >= n {
            len
        } else {
            ((len as u128 * k as u128 / n as u128) as u64) / 4096 * 4096
        }
    };
    let (a, b) = (cut(i - 1), cut(i));
    if a >= b {
        return Err(format!(
            "--shard {s}: the image ({len} bytes) is too small for {n} shards"
        ));
    }
    Ok((a, b))
}

fn warn(msg: String) {
    eprintln!("gpucarve: warning: {msg}");
}

/// How a `carve` command ended (when it did not fail outright).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Every image carved, every byte read.
    Clean,
    /// Every image carved, but some byte ranges could not be read (bad
    /// sectors, damaged containers): listed in audit.txt and the reports.
    Unread,
    /// At least one image failed (the others were carved).
    Failed,
}

/// Runs the carve command: how it ended, or the error that stopped it.
pub fn run(c: CarveCli) -> Result<RunEnd, String> {
    let catalogue = c.catalogue.clone()?;
    let single = c.images.len() == 1 && !c.images[0].is_dir();
    let mut keep = vec![Status::Complete];
    keep.extend(c.keep.iter().copied().filter(|s| *s != Status::Complete));
    let jobs = JobTemplate {
        c: &c,
        catalogue,
        keep,
    };
    let json = JsonProgress {
        on: c.progress == "json",
        last: Mutex::new(HashMap::new()),
    };
    if single {
        return run_single(&c, &jobs, &json);
    }
    run_batch(&c, &jobs, &json)
}

/// What every job of the command shares: the options, the catalogue, the
/// statuses kept.
struct JobTemplate<'a> {
    c: &'a CarveCli,
    catalogue: Catalogue,
    keep: Vec<Status>,
}

impl JobTemplate<'_> {
    /// The job carving `image` (its `range`, if given) into `out`.
    fn job(
        &self,
        image: &Path,
        out: PathBuf,
        range: Option<(u64, u64)>,
        scan: ScanOptions,
    ) -> CarveJob {
        let c = self.c;
        CarveJob {
            image: image.to_path_buf(),
            out_dir: out,
            catalogue: self.catalogue.clone(),
            engine: c.engine.clone(),
            scan,
            carve: gpucarve::carve::CarveOptions {
                keep: self.keep.clone(),
                write: !c.no_write,
                hash_unwritten: c.hash_unwritten,
                keep_embedded: c.keep_embedded,
                hashes: c.hashes,
                cluster_size: c.cluster_size,
                free_space_only: c.free_space_only,
            },
            force: c.force,
            hash_image: c.hash_image,
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
            spool_dir: c.spool_dir.clone(),
            input: c.input,
            range,
            resume: c.resume,
        }
    }
}

/// `--progress json`: one line per image at most every 250 ms (and a last
/// one when forced).
struct JsonProgress {
    on: bool,
    last: Mutex<HashMap<PathBuf, Instant>>,
}

impl JsonProgress {
    /// Prints a progress line for `image`, unless its last was under 250 ms
    /// ago and `force` is not set.
    fn emit(&self, image: &Path, done: u64, total: u64, files: u64, secs: f64, force: bool) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if !force
            && last
                .get(image)
                .is_some_and(|t| now.duration_since(*t).as_millis() < 250)
        {
            return;
        }
        last.insert(image.to_path_buf(), now);
        let line = serde_json::json!({
            "image": image.display().to_string(),
            "bytes_done": done,
            "bytes_total": total,
            "files": files,
            "mb_s": if secs > 0.0 { done as f64 / secs / 1e6 } else { 0.0 },
        });
        eprintln!("{line}");
    }
}

/// The range `--range` or `--shard` gives of a single image of `len` bytes.
fn single_range(c: &CarveCli, image: &Path, len: u64) -> Result<Option<(u64, u64)>, String> {
    Ok(match (&c.range, &c.shard) {
        (Some(r), _) => Some(parse_range(r, len)?),
        (None, Some(s)) if len == 0 => {
            return Err(format!(
                "{}: --shard needs the image size in advance; decompress a gzip image first ({s})",
                image.display()
            ));
        }
        (None, Some(s)) => Some(parse_shard(s, len)?),
        (None, None) => None,
    })
}

/// The progress bar of a single image (hidden unless `--progress bar` on a terminal).
fn progress_bar(c: &CarveCli, len: u64) -> indicatif::ProgressBar {
    if c.progress == "bar" && std::io::stderr().is_terminal() {
        let pb = indicatif::ProgressBar::new(len);
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb
    } else {
        indicatif::ProgressBar::hidden()
    }
}

/// Carves one image into the output folder itself.
fn run_single(c: &CarveCli, jobs: &JobTemplate, json: &JsonProgress) -> Result<RunEnd, String> {
    let image = &c.images[0];
    let len = batch::logical_len_hint(image);
    let range = single_range(c, image, len)?;
    let job = jobs.job(image, c.output.clone(), range, c.scan.clone());
    let pb = progress_bar(c, len);
    let t = Instant::now();
    let outcome = job.run_detailed(
        &mut |done, files| {
            pb.set_position(done);
            pb.set_message(format!("{files} files"));
            if json.on {
                json.emit(image, done, len, files, t.elapsed().as_secs_f64(), false);
            }
        },
        &mut |m| pb.suspend(|| warn(m)),
    );
    pb.finish_and_clear();
    let s = match (outcome.summary, outcome.error) {
        (Some(s), None) => s,
        (_, Some(e)) => return Err(e),
        (None, None) => return Err("internal error: no summary".into()),
    };
    if json.on {
        json.emit(
            image,
            s.scan.bytes,
            len,
            s.files_found,
            t.elapsed().as_secs_f64(),
            true,
        );
    }
    if !c.quiet {
        let secs = s.scan.wall.as_secs_f64().max(1e-9);
        eprintln!(
            "gpucarve: {} files found, {} written to {} ({:.1} MiB/s over {} bytes); see {}/audit.txt",
            s.files_found,
            s.files_written,
            c.output.display(),
            s.scan.bytes as f64 / secs / (1 << 20) as f64,
            s.scan.bytes,
            c.output.display()
        );
    }
    if !outcome.damage.is_empty() {
        warn(format!(
            "{} ranges of {} could not be read (read as zeros); see {}/audit.txt",
            outcome.damage.len(),
            image.display(),
            c.output.display()
        ));
        return Ok(RunEnd::Unread);
    }
    Ok(RunEnd::Clean)
}

/// Carves every image found in the inputs, each into a folder of its own.
fn run_batch(c: &CarveCli, jobs: &JobTemplate, json: &JsonProgress) -> Result<RunEnd, String> {
    if c.range.is_some() || c.shard.is_some() {
        return Err("--range and --shard take exactly one image".into());
    }
    let (images, errors) = batch::discover(&c.images, &c.output, 4);
    for e in errors {
        warn(e);
    }
    if images.is_empty() {
        return Err("no images found in the inputs given".into());
    }
    let lens: HashMap<PathBuf, u64> = images
        .iter()
        .map(|p| (p.clone(), batch::logical_len_hint(p)))
        .collect();
    let concurrency = if c.jobs > 0 {
        c.jobs
    } else if lens.values().any(|&l| l >= LARGE) {
        1
    } else {
        2
    }
    .min(images.len());
    let mut scan = c.scan.clone();
    if scan.threads == 0 && concurrency > 1 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        scan.threads = (cores / concurrency).max(1);
    }
    let mut taken = BTreeSet::new();
    let jobs: Vec<CarveJob> = images
        .iter()
        .map(|p| {
            let name = batch::output_name(p, &mut taken);
            jobs.job(p, c.output.join(name), None, scan.clone())
        })
        .collect();
    let n = jobs.len();
    let lines = batch::run(
        &jobs,
        concurrency,
        &c.output,
        &|image, done, _total, files, secs| {
            let total = lens.get(image).copied().unwrap_or(0);
            if json.on {
                json.emit(image, done, total, files, secs, done >= total && total > 0);
            }
        },
        &|m| warn(m),
    )?;
    report_batch(c.quiet, &c.output, &lines, n);
    Ok(if lines.iter().any(|l| l.error.is_some()) {
        RunEnd::Failed
    } else if lines.iter().any(|l| !l.damaged.is_empty()) {
        RunEnd::Unread
    } else {
        RunEnd::Clean
    })
}

/// One line per image carved (`[k/n]`, of the `n` jobs), and where the
/// case summary is.
fn report_batch(quiet: bool, output: &Path, lines: &[batch::CaseLine], n: usize) {
    let done_count = std::sync::atomic::AtomicUsize::new(0);
    for l in lines {
        let k = done_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if !quiet {
            match &l.error {
                None => eprintln!(
                    "gpucarve: [{k}/{n}] {}: {} files found, {} written ({:.1} MB/s) -> {}",
                    l.image, l.files_found, l.files_written, l.mb_s, l.output
                ),
                Some(e) => eprintln!("gpucarve: [{k}/{n}] {}: FAILED: {e}", l.image),
            }
        }
    }
    if !quiet {
        eprintln!("gpucarve: see {}/case.txt", output.display());
    }
}
