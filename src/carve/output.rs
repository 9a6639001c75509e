//! The output folder: carved files, streamed from the image and hashed on the way.
//!
//! Layout: `OUTDIR/<type>/<offset>.<ext>` for complete files,
//! `OUTDIR/partial/<type>/...` and `OUTDIR/unvalidated/<type>/...` for the
//! others when kept. Offsets are zero-padded so that names sort in image
//! order. A folder that already holds a carving is refused unless `--force`;
//! no file is ever overwritten silently.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::reader::ByteReader;
use super::{ByteRun, CarvedFile, status_folder};
use crate::hashing::{Digests, HashChoice, Hasher};

/// Chunk size for copying and hashing.
const CHUNK: usize = 1 << 20;

/// Why output could not be written. One line each.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "{path}: already holds a carving (report.jsonl or audit.txt); use --force to carve into it anyway"
    )]
    NotEmpty { path: PathBuf },
    #[error("{path}: cannot create output folder: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: refusing to overwrite an existing file")]
    Exists { path: PathBuf },
    #[error(
        "{path}: write failed after {written} bytes: {source}; the incomplete file was removed"
    )]
    Write {
        path: PathBuf,
        written: u64,
        source: std::io::Error,
    },
    #[error("image read failed at byte offset {offset} (short read)")]
    Read { offset: u64 },
}

/// What [`OutputDir::write_file`] produced.
pub struct Written {
    /// Relative to the output folder.
    pub path: String,
    pub digests: Digests,
}

/// An output folder being filled.
pub struct OutputDir {
    root: PathBuf,
    overwrite: bool,
    pad: usize,
}

impl OutputDir {
    /// Prepares `root` (created if missing). `image_len` sets the offset padding.
    pub fn create(root: &Path, force: bool, image_len: u64) -> Result<OutputDir, OutputError> {
        if !force && (root.join("report.jsonl").exists() || root.join("audit.txt").exists()) {
            return Err(OutputError::NotEmpty {
                path: root.to_path_buf(),
            });
        }
        std::fs::create_dir_all(root).map_err(|source| OutputError::CreateDir {
            path: root.to_path_buf(),
            source,
        })?;
        Ok(OutputDir {
            root: root.to_path_buf(),
            overwrite: force,
            pad: image_len.to_string().len().max(12),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates a report file in the folder (overwriting only with `--force`).
    pub fn create_report(&self, name: &str) -> Result<File, OutputError> {
        self.open_new(&self.root.join(name))
    }

    fn open_new(&self, path: &Path) -> Result<File, OutputError> {
        let mut o = OpenOptions::new();
        o.write(true);
        if self.overwrite {
            o.create(true).truncate(true);
        } else {
            o.create_new(true);
        }
        o.open(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                OutputError::Exists {
                    path: path.to_path_buf(),
                }
            } else {
                OutputError::Write {
                    path: path.to_path_buf(),
                    written: 0,
                    source,
                }
            }
        })
    }

    /// Relative path for a carved file.
    pub fn relative_path(&self, file: &CarvedFile, extension: &str) -> PathBuf {
        let mut p = PathBuf::new();
        if let Some(f) = status_folder(&file.status) {
            p.push(f);
        }
        p.push(&file.file_type);
        let name = if extension.is_empty() {
            format!("{:0w$}", file.offset, w = self.pad)
        } else {
            format!("{:0w$}.{extension}", file.offset, w = self.pad)
        };
        p.push(name);
        p
    }

    /// Writes `file`'s byte runs from `image`, hashing them with `hashes`; returns the path and digests.
    pub fn write_file(
        &self,
        image: &dyn ByteReader,
        file: &CarvedFile,
        extension: &str,
        hashes: HashChoice,
    ) -> Result<Written, OutputError> {
        let rel = self.relative_path(file, extension);
        let path = self.root.join(&rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| OutputError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let f = self.open_new(&path)?;
        let mut w = BufWriter::with_capacity(CHUNK, f);
        let mut written = 0u64;
        let fail = |written: u64, source: std::io::Error| {
            let _ = std::fs::remove_file(&path);
            OutputError::Write {
                path: path.clone(),
                written,
                source,
            }
        };
        let streamed = stream_runs(image, &file.byte_runs, hashes, &mut |chunk| {
            w.write_all(chunk)?;
            written += chunk.len() as u64;
            Ok(())
        });
        let digests = match streamed {
            Ok(h) => h,
            Err(StreamError::Read(offset)) => {
                let _ = std::fs::remove_file(&path);
                return Err(OutputError::Read { offset });
            }
            Err(StreamError::Write(e)) => return Err(fail(written, e)),
        };
        // Not synced file by file (that cost more than the rest of carving);
        // the resume journal syncs the file system before it records files.
        let f = w.into_inner().map_err(|e| fail(written, e.into_error()))?;
        // Its writing to disk starts now, without waiting: that sync then
        // finds little left to write. Only a hint; a failure changes nothing.
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: `f` is open for the whole call, which only starts
            // writeback of its pages.
            unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
        }
        Ok(Written {
            path: rel.to_string_lossy().into_owned(),
            digests,
        })
    }
}

enum StreamError {
    Read(u64),
    Write(std::io::Error),
}

/// Reads the runs in order through a fixed buffer, feeding `sink` and the chosen hashes.
fn stream_runs(
    image: &dyn ByteReader,
    runs: &[ByteRun],
    hashes: HashChoice,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> Result<Digests, StreamError> {
    thread_local! {
        /// The chunk buffer, kept between files (a fresh zeroed MiB per
        /// file cost a memset and 256 page faults).
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut buf = BUF.with(|b| std::mem::take(&mut *b.borrow_mut()));
    buf.resize(CHUNK, 0);
    let r = stream_runs_with(image, runs, hashes, sink, &mut buf);
    BUF.with(|b| *b.borrow_mut() = buf);
    r
}

fn stream_runs_with(
    image: &dyn ByteReader,
    runs: &[ByteRun],
    hashes: HashChoice,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    buf: &mut [u8],
) -> Result<Digests, StreamError> {
    let mut hasher = Hasher::new(hashes);
    for run in runs {
        let mut done = 0u64;
        while done < run.len {
            let want = (run.len - done).min(CHUNK as u64) as usize;
            let at = run.img_offset + done;
            let got = image.read_at(at, &mut buf[..want]);
            if got < want {
                return Err(StreamError::Read(at + got as u64));
            }
            hasher.update(&buf[..got]);
            sink(&buf[..got]).map_err(StreamError::Write)?;
            done += got as u64;
        }
    }
    Ok(hasher.finish())
}

/// The chosen digests of a file's byte runs, without writing it.
pub fn hash_runs(
    image: &dyn ByteReader,
    runs: &[ByteRun],
    hashes: HashChoice,
) -> Result<Digests, OutputError> {
    stream_runs(image, runs, hashes, &mut |_| Ok(())).map_err(|e| match e {
        StreamError::Read(offset) => OutputError::Read { offset },
        StreamError::Write(source) => OutputError::Write {
            path: PathBuf::new(),
            written: 0,
            source,
        },
    })
}

/// Writes `file` from `image` to `dest` (used by `gpucarve extract`); returns its digests.
pub fn extract_to(
    image: &dyn ByteReader,
    runs: &[ByteRun],
    dest: &Path,
    hashes: HashChoice,
) -> Result<Digests, OutputError> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                OutputError::Exists {
                    path: dest.to_path_buf(),
                }
            } else {
                OutputError::Write {
                    path: dest.to_path_buf(),
                    written: 0,
                    source,
                }
            }
        })?;
    let mut w = BufWriter::with_capacity(CHUNK, f);
    let mut written = 0u64;
    let r = stream_runs(image, runs, hashes, &mut |c| {
        w.write_all(c)?;
        written += c.len() as u64;
        Ok(())
    });
    let fail = |written, source| {
        let _ = std::fs::remove_file(dest);
        OutputError::Write {
            path: dest.to_path_buf(),
            written,
            source,
        }
    };
    match r {
        Ok(digests) => {
            w.flush().map_err(|e| fail(written, e))?;
            Ok(digests)
        }
        Err(StreamError::Read(offset)) => {
            let _ = std::fs::remove_file(dest);
            Err(OutputError::Read { offset })
        }
        Err(StreamError::Write(e)) => Err(fail(written, e)),
    }
}
