//! Batch carving: many images (and folders of them) into one case folder.
//!
//! * [`discover`] walks folders (several threads, symlinks not followed) and
//!   keeps evidence files by content: E01 first segments, split-raw first
//!   segments, gzip, and raw images by extension (`.dd .raw .img .bin .iso`)
//!   or, for files without an extension, by size (≥ 1 MiB, a multiple of 512).
//!   Later segments (`.E02`, `.002`, `.ab`) are skipped: they belong to their
//!   first segment's image.
//! * [`run`] carves each image into its own folder under the case folder
//!   (named after the image, made unique), `jobs` at a time; one failure does
//!   not stop the others. `case.jsonl` gets one line per image and `case.txt`
//!   a table.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::job::{CarveJob, JobOutcome};
use crate::source::any::{InputKind, sniff};

/// Extensions taken as raw images without looking further.
pub const RAW_EXTENSIONS: [&str; 5] = ["dd", "raw", "img", "bin", "iso"];

/// Is `path` (a regular file met while walking a folder) evidence to carve?
pub fn is_evidence(path: &Path) -> bool {
    let Ok(kind) = sniff(path) else { return false };
    match kind {
        InputKind::Ewf | InputKind::Split | InputKind::Gzip | InputKind::BlockDevice => true,
        InputKind::EwfLaterSegment(_) | InputKind::SplitLaterSegment => false,
        InputKind::Raw => match path.extension().and_then(|e| e.to_str()) {
            Some(e) => RAW_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()),
            None => std::fs::metadata(path)
                .is_ok_and(|m| m.len() >= 1 << 20 && m.len().is_multiple_of(512)),
        },
    }
}

/// Expands the command line's inputs: files as given, folders walked (in
/// `threads` threads). `skip` (the case folder) is never entered. Sorted, unique.
pub fn discover(inputs: &[PathBuf], skip: &Path, threads: usize) -> (Vec<PathBuf>, Vec<String>) {
    let skip = std::fs::canonicalize(skip).ok();
    let mut found = BTreeSet::new();
    let mut errors = Vec::new();
    let queue: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    for p in inputs {
        if p.is_dir() {
            queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(p.clone());
        } else {
            found.insert(p.clone()); // given explicitly: carve it (or report why not)
        }
    }
    let busy = AtomicUsize::new(0);
    let results: Mutex<(BTreeSet<PathBuf>, Vec<String>)> =
        Mutex::new((BTreeSet::new(), Vec::new()));
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let dir = {
                        let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                        match q.pop() {
                            Some(d) => {
                                busy.fetch_add(1, Ordering::SeqCst);
                                d
                            }
                            None if busy.load(Ordering::SeqCst) == 0 => break,
                            None => {
                                drop(q);
                                std::thread::sleep(std::time::Duration::from_millis(2));
                                continue;
                            }
                        }
                    };
                    if skip.is_some() && std::fs::canonicalize(&dir).ok() == skip {
                        busy.fetch_sub(1, Ordering::SeqCst);
                        continue;
                    }
                    match std::fs::read_dir(&dir) {
                        Ok(entries) => {
                            for e in entries.flatten() {
                                let Ok(ft) = e.file_type() else { continue };
                                let path = e.path();
                                if ft.is_dir() {
                                    queue.lock().unwrap_or_else(|e| e.into_inner()).push(path);
                                } else if ft.is_file() && is_evidence(&path) {
                                    results
                                        .lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .0
                                        .insert(path);
                                }
                            }
                        }
                        Err(e) => results
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .1
                            .push(format!("{}: {e}", dir.display())),
                    }
                    busy.fetch_sub(1, Ordering::SeqCst);
                }
            });
        }
    });
    let (walked, errs) = results.into_inner().unwrap_or_else(|e| e.into_inner());
    found.extend(walked);
    errors.extend(errs);
    (found.into_iter().collect(), errors)
}

/// A folder name for `image` under the case folder, unique among `taken`.
pub fn output_name(image: &Path, taken: &mut BTreeSet<String>) -> String {
    let base: String = image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into())
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = if base.starts_with('.') || base.is_empty() {
        format!("image{base}")
    } else {
        base
    };
    let mut name = base.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// One line of `case.jsonl`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CaseLine {
    pub image: String,
    pub output: String,
    pub container: String,
    pub size: u64,
    pub seconds: f64,
    pub mb_s: f64,
    pub files_found: u64,
    pub files_written: u64,
    /// type → status → count
    pub files: BTreeMap<String, BTreeMap<String, u64>>,
    pub damaged: Vec<crate::source::Damage>,
    pub error: Option<String>,
}

fn case_line(job: &CarveJob, o: &JobOutcome, secs: f64) -> CaseLine {
    let mut files: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let (mut found, mut written) = (0, 0);
    if let Some(s) = &o.summary {
        for ((t, st), (n, _)) in &s.counts {
            *files
                .entry(t.clone())
                .or_default()
                .entry(st.clone())
                .or_default() += n;
        }
        found = s.files_found;
        written = s.files_written;
    }
    CaseLine {
        image: job.image.display().to_string(),
        output: job.out_dir.display().to_string(),
        container: o.container.clone(),
        size: o.image_len,
        seconds: secs,
        mb_s: if secs > 0.0 {
            o.image_len as f64 / secs / 1e6
        } else {
            0.0
        },
        files_found: found,
        files_written: written,
        files,
        damaged: o.damage.clone(),
        error: o.error.clone(),
    }
}

/// Progress of one image: (image, bytes_done, bytes_total, files, seconds since start).
pub type ProgressFn<'a> = dyn Fn(&Path, u64, u64, u64, f64) + Sync + 'a;

/// Runs `jobs` (`concurrency` at a time); writes `case.jsonl` and `case.txt`
/// into `case_dir`. Returns the lines, in job order.
pub fn run(
    jobs: &[CarveJob],
    concurrency: usize,
    case_dir: &Path,
    progress: &ProgressFn<'_>,
    warn: &(dyn Fn(String) + Sync),
) -> Result<Vec<CaseLine>, String> {
    std::fs::create_dir_all(case_dir).map_err(|e| format!("{}: {e}", case_dir.display()))?;
    let case_path = case_dir.join("case.jsonl");
    let case_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&case_path)
        .map_err(|e| format!("{}: {e}", case_path.display()))?;
    let case_file = Mutex::new(case_file);
    let next = AtomicUsize::new(0);
    let lines: Mutex<Vec<Option<CaseLine>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|s| {
        for _ in 0..concurrency.max(1).min(jobs.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
                    let t = Instant::now();
                    let total = std::cell::Cell::new(0u64);
                    let o = job.run_detailed(
                        &mut |done, files| {
                            progress(
                                &job.image,
                                done,
                                total.get(),
                                files,
                                t.elapsed().as_secs_f64(),
                            )
                        },
                        &mut |m| warn(m),
                    );
                    total.set(o.image_len);
                    progress(
                        &job.image,
                        o.image_len,
                        o.image_len,
                        o.summary.as_ref().map_or(0, |s| s.files_found),
                        t.elapsed().as_secs_f64(),
                    );
                    let line = case_line(job, &o, t.elapsed().as_secs_f64());
                    if let Ok(text) = serde_json::to_string(&line) {
                        let mut f = case_file.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = writeln!(f, "{text}");
                        let _ = f.sync_data();
                    }
                    if let Some(e) = &line.error {
                        warn(format!("{}: {e}", job.image.display()));
                    }
                    lines.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(line);
                }
            });
        }
    });
    let lines: Vec<CaseLine> = lines
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect();
    let table = case_table(&lines);
    std::fs::write(case_dir.join("case.txt"), table)
        .map_err(|e| format!("{}: {e}", case_dir.join("case.txt").display()))?;
    Ok(lines)
}

/// The human table of `case.txt`.
pub fn case_table(lines: &[CaseLine]) -> String {
    let mut s = format!(
        "{:<40} {:>14} {:>9} {:>9} {:>7} {:>7}  {}\n",
        "image", "bytes", "seconds", "MB/s", "found", "written", "result"
    );
    for l in lines {
        let result = match &l.error {
            Some(e) => format!("FAILED: {e}"),
            None if !l.damaged.is_empty() => format!("ok, {} damaged ranges", l.damaged.len()),
            None => "ok".into(),
        };
        s.push_str(&format!(
            "{:<40} {:>14} {:>9.2} {:>9.1} {:>7} {:>7}  {}\n",
            l.image, l.size, l.seconds, l.mb_s, l.files_found, l.files_written, result
        ));
    }
    let failed = lines.iter().filter(|l| l.error.is_some()).count();
    s.push_str(&format!("\n{} images, {} failed\n", lines.len(), failed));
    s
}

/// The logical size of an input, when it can be known without decompressing
/// it (0 for gzip or on error).
pub fn logical_len_hint(path: &Path) -> u64 {
    use crate::source::Media;
    match sniff(path) {
        Ok(InputKind::Raw | InputKind::BlockDevice) => {
            crate::source::Image::open(path).map_or(0, |i| i.len())
        }
        Ok(InputKind::Split) => crate::source::split::SplitMedia::open(path).map_or(0, |m| m.len()),
        Ok(InputKind::Ewf) => crate::source::ewf::EwfMedia::open(path).map_or(0, |m| m.len()),
        _ => 0,
    }
}
