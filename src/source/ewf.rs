//! Expert Witness Format images (EnCase `.E01`/`.Ex01`), through the pure-Rust
//! [`ewf`] crate: segment discovery (`.E01, .E02, …`), zlib chunks, an LRU
//! of decompressed chunks, and (for v1) a lazily paged chunk table so memory
//! stays bounded whatever the image size.
//!
//! A chunk that cannot be decoded (bad zlib stream or checksum, truncated
//! segment) does not stop the carving: it reads as zeros, and its logical
//! range is recorded with the reason ([`Media::damage`]) for the reports.
//! Plain I/O errors on the segment files are errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Damage, Media, SourceError};

/// EWF v1 signature (`EVF\t\r\n\xff\0`); logical images use `LVF`.
pub const EVF1: [u8; 8] = *b"EVF\x09\x0d\x0a\xff\x00";
/// EWF v2 signature (`EVF2\r\n\x81\0`).
pub const EVF2: [u8; 8] = *b"EVF2\x0d\x0a\x81\x00";

/// What the first bytes of a file say about EWF: `Some(segment number)` when it is an EWF segment.
pub fn segment_number(head: &[u8]) -> Option<u32> {
    if head.len() >= 13 && head[..8] == EVF1 {
        Some(u32::from(u16::from_le_bytes([head[9], head[10]])))
    } else if head.len() >= 16 && head[..8] == EVF2 {
        Some(u32::from_le_bytes([head[12], head[13], head[14], head[15]]))
    } else {
        None
    }
}

/// Largest chunk size accepted (a chunk is decompressed into a buffer this large).
pub const MAX_CHUNK: u64 = 64 << 20;

/// An EWF image opened from its first segment.
pub struct EwfMedia {
    reader: ewf::EwfReader,
    path: PathBuf,
    chunk: u64,
    /// The logical size the chunk tables back (see [`EwfMedia::open`]).
    len: u64,
    damage: Mutex<BTreeMap<u64, Damage>>,
}

impl std::fmt::Debug for EwfMedia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EwfMedia({})", self.path.display())
    }
}

impl EwfMedia {
    pub fn open(path: &Path) -> Result<EwfMedia, SourceError> {
        let reader = ewf::EwfReader::open_lazy(path).map_err(|e| SourceError::Open {
            path: path.to_path_buf(),
            source: std::io::Error::other(format!("EWF (E01) container: {e}")),
        })?;
        let chunk = reader.chunk_size().max(1);
        // Each chunk is decompressed into a buffer of this size: a header
        // field, so bounded (32 KiB is the usual size; 64 MiB is far above it).
        // (The fuzzer found the stored-size twin of this: see `oversized`.)
        if chunk > MAX_CHUNK {
            return Err(SourceError::Container {
                path: path.to_path_buf(),
                what: format!(
                    "EWF (E01) container: implausible chunk size of {chunk} bytes (at most {MAX_CHUNK})"
                ),
            });
        }
        // The media size is a header field; the chunk tables say what the
        // segments hold. A size beyond the tables is not evidence (a 4 KiB
        // file claimed 4 TiB, which took hours to scan as zeros and
        // gigabytes to list chunk by chunk): the medium ends where the
        // tables end, and the rest is listed as missing.
        let claimed = reader.total_size();
        let backed = (reader.chunk_count() as u64).saturating_mul(chunk);
        let len = claimed.min(backed);
        if len == 0 && claimed > 0 {
            return Err(SourceError::Container {
                path: path.to_path_buf(),
                what: format!(
                    "EWF (E01) container: the media size is {claimed} bytes but no chunk table holds any chunk (truncated or damaged set)"
                ),
            });
        }
        let mut damage = BTreeMap::new();
        if len < claimed {
            damage.insert(
                len,
                Damage {
                    offset: len,
                    len: claimed - len,
                    reason: format!(
                        "EWF media size is {claimed} bytes but the chunk tables end at byte {len}: the rest is missing (truncated or damaged set) and was not read"
                    ),
                },
            );
        }
        Ok(EwfMedia {
            reader,
            path: path.to_path_buf(),
            chunk,
            len,
            damage: Mutex::new(damage),
        })
    }

    /// MD5 stored by the acquisition tool, hex, when present.
    pub fn stored_md5(&self) -> Option<String> {
        self.reader
            .stored_hashes()
            .md5
            .map(|h| h.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The stored size of chunk `i` when it is implausible (more than twice
    /// the chunk size: zlib never grows data that much).
    fn oversized(&self, i: u64) -> Option<u64> {
        let i = usize::try_from(i).ok()?;
        match guarded(|| self.reader.debug_chunk(i)) {
            Ok((_, size, _, _)) if size > self.chunk.saturating_mul(2).max(1 << 16) => Some(size),
            _ => None,
        }
    }

    /// Records a damaged range; a range that continues the one before it
    /// extends it (one entry per damaged run, not per chunk: memory stays
    /// proportional to the runs, not to the size the header claims).
    fn record(&self, offset: u64, len: u64, reason: String) {
        const MORE: &str = " (and the chunks after it in this range)";
        let mut d = self.damage.lock().unwrap_or_else(|p| p.into_inner());
        if d.contains_key(&offset) {
            return;
        }
        if let Some((_, prev)) = d.range_mut(..offset).next_back()
            && prev.offset + prev.len == offset
        {
            prev.len += len;
            if !prev.reason.ends_with(MORE) {
                prev.reason.push_str(MORE);
            }
            return;
        }
        d.insert(
            offset,
            Damage {
                offset,
                len,
                reason,
            },
        );
    }
}

/// Runs a call into the ewf crate, turning a panic inside it (found by the
/// fuzzer: an index out of bounds in its lazy chunk table on a hostile
/// table) into a content error, so the chunk is damage, not a crash.
fn guarded<T>(f: impl FnOnce() -> ewf::Result<T>) -> ewf::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(ewf::EwfError::Parse(
            "the ewf reader failed on this chunk (malformed chunk table)".into(),
        ))
    })
}

/// Errors that mean the container's content is bad (as opposed to the disk failing).
fn is_content_error(e: &ewf::EwfError) -> bool {
    match e {
        ewf::EwfError::Io(io) => io.kind() == std::io::ErrorKind::UnexpectedEof,
        _ => true,
    }
}

impl Media for EwfMedia {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let len = self.len();
        let n = (len.saturating_sub(offset)).min(buf.len() as u64) as usize;
        let buf = &mut buf[..n];
        if n == 0 {
            return Ok(0);
        }
        // The ewf crate allocates a chunk's stored size as the table says:
        // an implausible size (found by the fuzzer: gigabytes) is damage,
        // never handed to it.
        let (first, last) = (offset / self.chunk, (offset + n as u64 - 1) / self.chunk);
        let any_oversized = (first..=last).any(|i| self.oversized(i).is_some());
        if !any_oversized {
            match guarded(|| self.reader.read_at(buf, offset)) {
                Ok(got) => return Ok(got),
                Err(e) if !is_content_error(&e) => {
                    return Err(std::io::Error::other(e.to_string()));
                }
                Err(_) => {}
            }
        }
        // Chunk by chunk: keep the good ones, zero and record the bad ones.
        let mut done = 0usize;
        while done < n {
            let off = offset + done as u64;
            let chunk_start = off / self.chunk * self.chunk;
            let want = ((chunk_start + self.chunk - off) as usize).min(n - done);
            let piece = &mut buf[done..done + want];
            if let Some(size) = self.oversized(chunk_start / self.chunk) {
                piece.fill(0);
                self.record(
                    chunk_start,
                    self.chunk.min(len - chunk_start),
                    format!(
                        "EWF chunk {} stored as {size} bytes, implausible for a chunk of {} bytes",
                        chunk_start / self.chunk,
                        self.chunk
                    ),
                );
                done += want;
                continue;
            }
            match guarded(|| self.reader.read_at(piece, off)) {
                Ok(got) if got == want => {}
                Ok(got) => {
                    piece[got..].fill(0);
                    self.record(
                        chunk_start,
                        self.chunk.min(len - chunk_start),
                        "EWF chunk shorter than expected".into(),
                    );
                }
                Err(e) if is_content_error(&e) => {
                    piece.fill(0);
                    self.record(
                        chunk_start,
                        self.chunk.min(len - chunk_start),
                        format!("EWF chunk {} unreadable: {e}", chunk_start / self.chunk),
                    );
                }
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
            done += want;
        }
        Ok(n)
    }

    fn describe(&self) -> String {
        format!("EWF (E01), chunk {} bytes", self.chunk)
    }

    fn damage(&self) -> Vec<Damage> {
        self.damage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }
}
