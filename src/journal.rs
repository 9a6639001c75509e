//! The resume journal: `journal.jsonl` in an image's output folder.
//!
//! Append-only, one JSON object a line:
//! * `{"file": {...}}`: a file entry as written to the reports;
//! * `{"checkpoint": {...}}`: every candidate before `frontier` is decided and
//!   every entry before this line is journalled (see [`Checkpoint`]);
//! * `{"unreadable": {...}}`: a range of the image that could not be read
//!   (written before the checkpoint after which it was known), so that a
//!   resumed run still lists the damage met before its checkpoint.
//!
//! The journal is fsync'd at checkpoints (at most every [`SYNC_EVERY`]) and at
//! the end. After a crash or `kill -9`, `--resume` keeps the entries up to the
//! last complete checkpoint line, drops the rest (a torn last line included),
//! rewrites the reports from them and carries on carving from the
//! checkpoint's frontier with the same ids, so the reports end identical to an
//! uninterrupted run's (timing fields aside).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::carve::{CarvedFile, Checkpoint};
use crate::report::CarveReport;
use crate::source::{Damage, Media};

pub const JOURNAL: &str = "journal.jsonl";
/// Longest time between two fsyncs of the journal.
pub const SYNC_EVERY: Duration = Duration::from_secs(1);

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Line {
    File(Box<CarvedFile>),
    Checkpoint(Checkpoint),
    Unreadable(Damage),
}

/// Writes the journal.
pub struct Journal {
    out: BufWriter<File>,
    last_sync: Instant,
    /// The medium whose unreadable ranges are journalled at checkpoints.
    media: Option<Arc<dyn Media>>,
    journalled: Vec<Damage>,
}

impl Journal {
    /// Creates (or truncates) the journal in `dir`.
    pub fn create(dir: &Path) -> std::io::Result<Journal> {
        let f = File::create(dir.join(JOURNAL))?;
        Ok(Journal {
            out: BufWriter::new(f),
            last_sync: Instant::now(),
            media: None,
            journalled: Vec::new(),
        })
    }

    /// Rewrites the journal in `dir` to hold exactly `files`, the unreadable
    /// ranges `damage`, then `cp`, and opens it for appending.
    pub fn rewrite(
        dir: &Path,
        files: &[CarvedFile],
        damage: &[Damage],
        cp: &Checkpoint,
    ) -> std::io::Result<Journal> {
        let tmp = dir.join(format!("{JOURNAL}.tmp"));
        {
            let mut w = BufWriter::new(File::create(&tmp)?);
            for f in files {
                write_line(&mut w, &Line::File(Box::new(f.clone())))?;
            }
            for d in damage {
                write_line(&mut w, &Line::Unreadable(d.clone()))?;
            }
            write_line(&mut w, &Line::Checkpoint(cp.clone()))?;
            w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        }
        std::fs::rename(&tmp, dir.join(JOURNAL))?;
        let f = OpenOptions::new().append(true).open(dir.join(JOURNAL))?;
        Ok(Journal {
            out: BufWriter::new(f),
            last_sync: Instant::now(),
            media: None,
            journalled: Vec::new(),
        })
    }

    /// Journals the unreadable ranges of `media` at each checkpoint (those
    /// in `already` are in the journal).
    pub fn watch(&mut self, media: Arc<dyn Media>, already: &[Damage]) {
        self.media = Some(media);
        self.journalled = already.to_vec();
    }

    /// Flushes and makes durable: first every carved file written so far
    /// (syncfs on the journal's file system: carved files are not synced one
    /// by one), then the journal, so a journalled file is always on disk.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        use std::os::unix::io::AsRawFd;
        // SAFETY: the descriptor belongs to the open journal file for the whole call.
        if unsafe { libc::syncfs(self.out.get_ref().as_raw_fd()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.out.get_ref().sync_data()?;
        self.last_sync = Instant::now();
        Ok(())
    }
}

fn write_line(w: &mut impl Write, l: &Line) -> std::io::Result<()> {
    serde_json::to_writer(&mut *w, l)?;
    w.write_all(b"\n")
}

impl CarveReport for Journal {
    fn file(&mut self, f: &CarvedFile) -> std::io::Result<()> {
        write_line(&mut self.out, &Line::File(Box::new(f.clone())))
    }
    fn checkpoint(&mut self, cp: &Checkpoint) -> std::io::Result<()> {
        if let Some(m) = &self.media {
            for d in m.damage() {
                if !self.journalled.contains(&d) {
                    write_line(&mut self.out, &Line::Unreadable(d.clone()))?;
                    self.journalled.push(d);
                }
            }
        }
        write_line(&mut self.out, &Line::Checkpoint(cp.clone()))?;
        if self.last_sync.elapsed() >= SYNC_EVERY {
            self.sync()?;
        } else {
            // Into the page cache at least: survives kill -9, not a power cut.
            self.out.flush()?;
        }
        Ok(())
    }
}

/// What a journal says: the entries up to its last complete checkpoint, and that checkpoint.
pub fn read(dir: &Path) -> Result<(Vec<CarvedFile>, Option<Checkpoint>), String> {
    read_all(dir).map(|(f, _, c)| (f, c))
}

/// [`read`], and the unreadable ranges journalled up to the last checkpoint
/// (sorted, duplicates removed).
#[allow(clippy::type_complexity)]
pub fn read_all(dir: &Path) -> Result<(Vec<CarvedFile>, Vec<Damage>, Option<Checkpoint>), String> {
    let path = dir.join(JOURNAL);
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut files = Vec::new();
    let mut kept = 0usize;
    let mut damage = Vec::new();
    let mut damage_kept = 0usize;
    let mut cp = None;
    for line in text.split(|&b| b == b'\n') {
        let Ok(l) = serde_json::from_slice::<Line>(line) else {
            break; // a torn last line (or garbage): stop at the last good checkpoint
        };
        match l {
            Line::File(f) => files.push(*f),
            Line::Unreadable(d) => damage.push(d),
            Line::Checkpoint(c) => {
                kept = files.len();
                damage_kept = damage.len();
                cp = Some(c);
            }
        }
    }
    files.truncate(kept);
    damage.truncate(damage_kept);
    damage.sort_by_key(|d| (d.offset, d.len));
    damage.dedup();
    if let Some(c) = &cp
        && c.files != files.len() as u64
    {
        return Err(format!(
            "{}: checkpoint says {} files but {} are journalled; carve again without --resume",
            path.display(),
            c.files,
            files.len()
        ));
    }
    Ok((files, damage, cp))
}
