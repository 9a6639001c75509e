//! An unlinked spool file holding a medium that has no random access of its
//! own (a gzip stream, standard input): written once, sequentially, then read
//! like a raw image (the mmap, O_DIRECT and io_uring backends work on it).
//! It is unlinked as soon as it is created, so it disappears when the process
//! ends, even on `kill -9`. The cost is disk space equal to the medium.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Damage, Media, buffered::pread_full};

static SPOOL_SEQ: AtomicU64 = AtomicU64::new(0);

/// Creates a new spool file in `dir` (the caller unlinks it at once).
pub(super) fn spool_file(dir: &Path) -> std::io::Result<(File, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    loop {
        let p = dir.join(format!(
            ".gpucarve-spool-{}-{}",
            std::process::id(),
            SPOOL_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => return Ok((f, p)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A medium spooled to an unlinked file.
#[derive(Debug)]
pub struct Spooled {
    pub(super) file: File,
    pub(super) len: u64,
    /// What it was, for reports.
    pub(super) what: String,
    pub(super) damage: Vec<Damage>,
    /// Mapped on the first mapped read (the spool is complete by then).
    pub(super) map: super::guarded::LazyMap,
}

impl Media for Spooled {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.len.saturating_sub(offset)).min(buf.len() as u64) as usize;
        pread_full(&self.file, offset, &mut buf[..n])
    }
    fn raw_file(&self) -> Option<&File> {
        Some(&self.file)
    }
    fn read_mapped(&self, offset: u64, buf: &mut [u8]) -> bool {
        let map = self.map.get(&self.file, self.len);
        map.is_some_and(|m| m.read(offset, buf))
    }
    fn reads_mapped(&self) -> bool {
        let map = self.map.get(&self.file, self.len);
        map.is_some_and(|m| m.faults() == 0)
    }
    fn mapped_faults(&self) -> u64 {
        self.map.faults()
    }
    fn describe(&self) -> String {
        self.what.clone()
    }
    fn damage(&self) -> Vec<Damage> {
        self.damage.clone()
    }
}
