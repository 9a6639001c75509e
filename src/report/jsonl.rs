//! `report.jsonl`: one JSON object per carved or detected file, in offset order.
//!
//! Fields: `id`, `type`, `family`, `status`, `offset`, `length`,
//! `byte_runs` (`file_offset`, `img_offset`, `len`), `sha256`, `md5`,
//! `parent`, `path` (relative to the output folder; null when not written),
//! `validator`, `notes`.
//!
//! After the files, one record per range of the image that could not be
//! read (bad sectors, bad E01 chunks; they read as zeros):
//! `{"record":"unreadable","offset":…,"length":…,"reason":"…"}`. Readers
//! of file records skip these ([`read`]); [`read_unreadable`] returns them.

use std::io::Write;

use super::CarveReport;
use crate::carve::CarvedFile;

/// Streams files as JSON Lines.
pub struct JsonlReport<W: Write> {
    out: W,
}

impl<W: Write> JsonlReport<W> {
    pub fn new(out: W) -> Self {
        JsonlReport { out }
    }
    /// One `unreadable` record (after the files).
    pub fn unreadable(&mut self, d: &crate::source::Damage) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, &Unreadable::from(d))?;
        self.out.write_all(b"\n")
    }
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> CarveReport for JsonlReport<W> {
    fn file(&mut self, f: &CarvedFile) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, f)?;
        self.out.write_all(b"\n")
    }
}

/// An `unreadable` record.
#[derive(serde::Serialize, serde::Deserialize)]
struct Unreadable {
    record: UnreadableTag,
    offset: u64,
    length: u64,
    reason: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum UnreadableTag {
    Unreadable,
}

impl From<&crate::source::Damage> for Unreadable {
    fn from(d: &crate::source::Damage) -> Self {
        Unreadable {
            record: UnreadableTag::Unreadable,
            offset: d.offset,
            length: d.len,
            reason: d.reason.clone(),
        }
    }
}

/// Reads the file records of a `report.jsonl` back (for `extract`, `merge`
/// and tests), skipping `unreadable` records. Errors name the line.
pub fn read(text: &str) -> Result<Vec<CarvedFile>, String> {
    let mut files = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(l) {
            Ok(f) => files.push(f),
            Err(_) if serde_json::from_str::<Unreadable>(l).is_ok() => {}
            Err(e) => return Err(format!("line {}: {e}", i + 1)),
        }
    }
    Ok(files)
}

/// The `unreadable` records of a `report.jsonl`, in file order.
pub fn read_unreadable(text: &str) -> Vec<crate::source::Damage> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Unreadable>(l).ok())
        .map(|u| crate::source::Damage {
            offset: u.offset,
            len: u.length,
            reason: u.reason,
        })
        .collect()
}
