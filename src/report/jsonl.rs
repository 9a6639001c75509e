//! `report.jsonl`: one JSON object per carved or detected file, in offset order.
//!
//! Fields: `id`, `type`, `family`, `status`, `offset`, `length`,
//! `byte_runs` (`file_offset`, `img_offset`, `len`), `sha256`, `md5`,
//! `parent`, `path` (relative to the output folder; null when not written),
//! `validator`, `notes`.

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

/// Reads a `report.jsonl` back (for `extract` and tests). Errors name the line.
pub fn read(text: &str) -> Result<Vec<CarvedFile>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}
