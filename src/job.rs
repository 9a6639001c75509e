//! A carving job end to end: open the image, prepare the output folder, run
//! the carver with its reports, and write the audit — the unit a batch runs.
//!
//! Whatever happens after the output folder exists, the reports are closed
//! and `audit.txt` says what was done, including why the run stopped early.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::carve::{CarveOptions, CarveSummary, OutputDir, carve};
use crate::catalogue::Catalogue;
use crate::engine::{EngineChoice, build_engines};
use crate::report::dfxml::DfxmlReport;
use crate::report::jsonl::JsonlReport;
use crate::report::{Fanout, RunInfo, audit, rfc3339};
use crate::scan::ScanOptions;
use crate::source::Image;

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
}

/// sha256 of the whole image, read sequentially (run beside the scan).
fn hash_image(image: &Image) -> Result<String, String> {
    let mut sha = Sha256::new();
    let mut buf = vec![0u8; 4 << 20];
    let mut off = 0u64;
    while off < image.len() {
        let n = image.read_at(off, &mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("image ended early at byte {off} while hashing"));
        }
        sha.update(&buf[..n]);
        off += n as u64;
    }
    Ok(sha.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

impl CarveJob {
    /// Runs the job. `progress(bytes_done, files_found)`; `warn` gets one-line warnings.
    pub fn run(
        &self,
        progress: &mut dyn FnMut(u64, u64),
        warn: &mut dyn FnMut(String),
    ) -> Result<CarveSummary, String> {
        let image = Image::open(&self.image).map_err(|e| e.to_string())?;
        refuse_output_on_image(&self.out_dir, &self.image)?;
        let set = self.catalogue.compile();
        let engines = build_engines(
            &set.patterns,
            &self.engine,
            self.scan.block_size + set.max_len().saturating_sub(1),
            warn,
        )
        .map_err(|e| e.to_string())?;
        let mut out =
            OutputDir::create(&self.out_dir, self.force, image.len()).map_err(|e| e.to_string())?;
        let started = SystemTime::now();
        let info = RunInfo {
            image: self.image.display().to_string(),
            image_len: image.len(),
            command_line: self.command_line.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            start_time: rfc3339(started),
            sector_size: 512,
        };
        let open = |name: &str| -> Result<BufWriter<File>, String> {
            out.create_report(name)
                .map(BufWriter::new)
                .map_err(|e| e.to_string())
        };
        let mut jsonl = JsonlReport::new(open("report.jsonl")?);
        let mut dfxml =
            DfxmlReport::new(open("report.xml")?, &info).map_err(|e| format!("report.xml: {e}"))?;
        let audit_file = out.create_report("audit.txt").map_err(|e| e.to_string())?;

        let (result, image_hash) = std::thread::scope(|s| {
            let hasher = self.hash_image.then(|| s.spawn(|| hash_image(&image)));
            let mut fan = Fanout {
                reports: vec![&mut jsonl, &mut dfxml],
            };
            let r = carve(
                &image,
                &self.catalogue,
                &set,
                &engines,
                &self.scan,
                &self.carve,
                &mut out,
                &mut fan,
                progress,
                warn,
            );
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
        let image_sha = match image_hash {
            Some(Ok(h)) => Some(h),
            Some(Err(e)) => {
                warn(format!("image hash: {e}"));
                None
            }
            None => None,
        };
        let clock = summary.scan.wall.as_secs_f64();
        jsonl.finish().map_err(|e| format!("report.jsonl: {e}"))?;
        dfxml
            .finish(clock, error.as_deref())
            .map_err(|e| format!("report.xml: {e}"))?;
        let text = audit::render(&info, image_sha.as_deref(), &summary, error.as_deref());
        std::io::Write::write_all(&mut BufWriter::new(audit_file), text.as_bytes())
            .map_err(|e| format!("audit.txt: {e}"))?;
        result.map_err(|e| e.to_string())
    }
}

/// The output folder must not be the image, nor contain it as a file we could overwrite.
fn refuse_output_on_image(out: &Path, image: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(a), Ok(b)) = (std::fs::metadata(out), std::fs::metadata(image))
        && a.dev() == b.dev()
        && a.ino() == b.ino()
    {
        return Err(format!(
            "{}: the output folder is the image itself",
            out.display()
        ));
    }
    Ok(())
}
