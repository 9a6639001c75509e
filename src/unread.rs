//! Files that cross bytes the image could not deliver.
//!
//! A range the medium could not read (a bad sector: `EIO`; a bad E01 chunk,
//! a corrupt gzip member) reads as zeros, and is listed by
//! [`Media::damage`]. A file whose extent
//! crosses such a range is not what was on the disk, whatever its
//! structure says, so it is never reported `complete`: [`UnreadGuard`] sits
//! in front of the reports and turns such a file into a `partial` one (moved
//! to `partial/` when partial files are kept, removed otherwise), with a note
//! naming the range.
//!
//! It works at report time because every complete file's bytes have all
//! been read by then (validated, written or hashed), so every unreadable
//! range inside it is already known.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::carve::{ByteRun, CarvedFile, Checkpoint};
use crate::report::CarveReport;
use crate::source::{Damage, Media};

/// The first unreadable range that `runs` cross, if any.
pub fn crossing<'a>(runs: &[ByteRun], damage: &'a [Damage]) -> Option<&'a Damage> {
    damage.iter().find(|d| {
        runs.iter().any(|r| {
            let (a, b) = (r.img_offset, r.img_offset.saturating_add(r.len));
            a < d.offset.saturating_add(d.len) && d.offset < b
        })
    })
}

/// Passes files on to `inner`, demoting complete files that cross an
/// unreadable range (see the module documentation).
pub struct UnreadGuard<'a> {
    media: Arc<dyn Media>,
    root: PathBuf,
    keep_partial: bool,
    inner: &'a mut (dyn CarveReport + Send),
    /// Files demoted so far.
    pub demoted: u64,
}

impl<'a> UnreadGuard<'a> {
    /// `root`: the output folder; `keep_partial`: partial files are written.
    pub fn new(
        media: Arc<dyn Media>,
        root: &Path,
        keep_partial: bool,
        inner: &'a mut (dyn CarveReport + Send),
    ) -> Self {
        UnreadGuard {
            media,
            root: root.to_path_buf(),
            keep_partial,
            inner,
            demoted: 0,
        }
    }

    fn demote(&self, f: &CarvedFile, d: &Damage) -> std::io::Result<CarvedFile> {
        let mut g = f.clone();
        g.status = "partial".into();
        g.notes.push(format!(
            "crosses the unreadable range {}..{} (read as zeros: {}); not complete",
            d.offset,
            d.offset + d.len,
            d.reason
        ));
        if let Some(rel) = &f.path {
            let from = self.root.join(rel);
            if self.keep_partial {
                let to_rel = format!("partial/{rel}");
                let to = self.root.join(&to_rel);
                if let Some(dir) = to.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::rename(&from, &to)?;
                g.path = Some(to_rel);
            } else {
                std::fs::remove_file(&from)?;
                g.path = None;
                g.notes
                    .push("not written (partial files are not kept)".into());
            }
        }
        Ok(g)
    }
}

impl CarveReport for UnreadGuard<'_> {
    fn file(&mut self, f: &CarvedFile) -> std::io::Result<()> {
        if f.status == "complete" {
            let damage = self.media.damage();
            if let Some(d) = crossing(&f.byte_runs, &damage) {
                let g = self.demote(f, d)?;
                self.demoted += 1;
                return self.inner.file(&g);
            }
        }
        self.inner.file(f)
    }
    fn checkpoint(&mut self, cp: &Checkpoint) -> std::io::Result<()> {
        self.inner.checkpoint(cp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(img_offset: u64, len: u64) -> ByteRun {
        ByteRun {
            file_offset: 0,
            img_offset,
            len,
        }
    }

    #[test]
    fn crossing_is_any_overlap() {
        let d = vec![Damage {
            offset: 1000,
            len: 512,
            reason: "unreadable".into(),
        }];
        assert!(crossing(&[run(0, 1000)], &d).is_none());
        assert!(crossing(&[run(1512, 10)], &d).is_none());
        assert!(crossing(&[run(0, 1001)], &d).is_some());
        assert!(crossing(&[run(1511, 1)], &d).is_some());
        assert!(crossing(&[run(0, 10), run(1100, 1)], &d).is_some());
        assert!(crossing(&[run(u64::MAX - 1, 5)], &d).is_none());
    }
}
