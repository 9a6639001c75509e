//! Expert Witness Format images (EnCase `.E01`/`.Ex01`). The pure-Rust
//! [`ewf`] crate reads the container (headers, segment order, and for v1 a
//! lazily paged chunk table, so memory stays bounded whatever the image
//! size); the chunks of a v1 set are decoded here, from the segment files:
//!
//! * **Checked.** A zlib chunk must end its stream (Adler-32 checked) having
//!   given the whole chunk; a stored chunk's Adler-32 must match. (The
//!   crate's reader stops inflating once a chunk is full, so a corrupt
//!   stream that still fills it read as garbage, unreported.)
//! * **On every core.** A read of 1 MiB or more (a scan block) is split at
//!   chunk boundaries into pieces that the machine's cores decode at once.
//! * **Once.** Decoded chunks are kept (16 MiB, least recently used
//!   evicted; the carving asks for 256 MiB, [`Media::keep_decoded`]): the
//!   validators, fragment searches and the writer read the bytes around
//!   each header after the scan decoded them.
//!
//! EWF2 (`.Ex01`) sets are read through the crate's reader, as before.
//!
//! A chunk that cannot be decoded (bad zlib stream or checksum, truncated
//! segment) does not stop the carving: it reads as zeros, and its logical
//! range is recorded with the reason ([`Media::damage`]) for the reports.
//! Plain I/O errors on the segment files are errors.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::cache::BlockCache;
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

/// Reads at least this long are decoded on every core (a scan block, a
/// validator's bulk read); shorter ones on the caller's thread, through the
/// cache of decoded chunks.
const PARALLEL_MIN: usize = 1 << 20;
/// Decoded chunks kept (least recently used evicted) unless a reader asks
/// for more ([`Media::keep_decoded`]: the carving does).
const DECODED_CACHE: u64 = 16 << 20;
/// Chunks a decoding thread takes at a time.
const PIECE_CHUNKS: u64 = 8;

/// The machine's cores: the threads that decode one long read unless
/// [`Media::use_threads`] says otherwise.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
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
    /// Decoded chunks ([`DECODED_CACHE`] bytes, or what [`Media::keep_decoded`] asked).
    decoded: BlockCache,
    /// Threads for one long read ([`Media::use_threads`]; 0: every core).
    threads: std::sync::atomic::AtomicUsize,
    /// The segment files in segment-number order (the chunk table's
    /// segment index), for the chunks decoded here; empty for EWF2
    /// (`.Ex01`), whose chunks the ewf crate decodes.
    segments: Vec<Arc<File>>,
}

/// What became of one chunk.
enum Chunk {
    Good,
    /// Its bytes read as zeros, for this reason.
    Damaged(String),
}

impl std::fmt::Debug for EwfMedia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EwfMedia({})", self.path.display())
    }
}

impl EwfMedia {
    pub fn open(path: &Path) -> Result<EwfMedia, SourceError> {
        let open_error = |e: ewf::EwfError| SourceError::Open {
            path: path.to_path_buf(),
            source: std::io::Error::other(format!("EWF (E01) container: {e}")),
        };
        let head = super::buffered::head(path).map_err(|e| super::io_open_error(path, e))?;
        let (reader, segments) = if head.starts_with(&EVF2) {
            (
                ewf::EwfReader::open_lazy(path).map_err(open_error)?,
                Vec::new(),
            )
        } else {
            let segments = segment_files(path).map_err(|e| super::io_open_error(path, e))?;
            let sources = segments
                .iter()
                .map(|(_, f, len)| ewf::SegmentSource::Sub {
                    file: Arc::clone(f),
                    base: 0,
                    len: *len,
                })
                .collect();
            let reader =
                guarded(|| ewf::EwfReader::open_lazy_from_sources(sources)).map_err(open_error)?;
            // The crate orders the segments by the number in their headers.
            (reader, segments.into_iter().map(|(_, f, _)| f).collect())
        };
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
        let chunks = (DECODED_CACHE / chunk).max(1) as usize;
        let shards = chunks.clamp(1, 32);
        Ok(EwfMedia {
            reader,
            path: path.to_path_buf(),
            chunk,
            len,
            damage: Mutex::new(damage),
            decoded: BlockCache::new(chunk as usize, shards, chunks / shards),
            threads: std::sync::atomic::AtomicUsize::new(0),
            segments,
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
            Ok((_, size, _, _)) if self.implausible(size) => Some(size),
            _ => None,
        }
    }

    /// A stored size zlib could not have made from one chunk.
    fn implausible(&self, size: u64) -> bool {
        size > self.chunk.saturating_mul(2).max(1 << 16)
    }

    /// Reads `buf` (inside the medium) at `offset` on the calling thread,
    /// out of the decoded chunks kept, decoding (and keeping) those missing.
    fn read_cached(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let fill = |start: u64, dst: &mut [u8]| {
            if self.segments.is_empty() {
                return self.read_span(start, dst).is_ok_and(|got| got == dst.len());
            }
            // A damaged chunk is not kept: read again below, it is recorded.
            matches!(self.decode_chunk(start / self.chunk, dst), Ok(Chunk::Good))
        };
        if self.decoded.read(offset, buf, self.len, &fill) {
            return Ok(buf.len());
        }
        self.read_span(offset, buf)
    }

    /// Reads `buf` (inside the medium) at `offset` on the calling thread,
    /// chunk by chunk: the good ones decoded, the bad ones zeroed and recorded.
    fn read_span(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.segments.is_empty() {
            return self.read_span_by_crate(offset, buf);
        }
        let n = buf.len();
        let mut scratch = Vec::new();
        let mut done = 0usize;
        while done < n {
            let off = offset + done as u64;
            let i = off / self.chunk;
            let chunk_start = i * self.chunk;
            let chunk_len = self.chunk.min(self.len - chunk_start) as usize;
            let within = (off - chunk_start) as usize;
            let want = (chunk_len - within).min(n - done);
            let piece = &mut buf[done..done + want];
            // A whole chunk is decoded in place; part of one through a scratch buffer.
            let verdict = if want == chunk_len {
                self.decode_chunk(i, piece)?
            } else {
                scratch.resize(chunk_len, 0);
                let v = self.decode_chunk(i, &mut scratch)?;
                piece.copy_from_slice(&scratch[within..within + want]);
                v
            };
            if let Chunk::Damaged(reason) = verdict {
                piece.fill(0);
                self.record(chunk_start, chunk_len as u64, reason);
            }
            done += want;
        }
        Ok(n)
    }

    /// Decodes chunk `i` into `dst` (its bytes in the medium): from its
    /// segment, checked (a zlib stream must end, with its checksum, having
    /// given every byte; a stored chunk's Adler-32 must match). The ewf
    /// crate's own reader was not used for this: it stops inflating when
    /// the chunk is full, so a corrupt stream that still fills it read as
    /// garbage without a word. Errors are I/O errors of the segment files.
    fn decode_chunk(&self, i: u64, dst: &mut [u8]) -> std::io::Result<Chunk> {
        let Ok(idx) = usize::try_from(i) else {
            return Ok(Chunk::Damaged(format!(
                "EWF chunk {i} beyond the chunk table"
            )));
        };
        let (at, size, compressed, segment) = match guarded(|| self.reader.debug_chunk(idx)) {
            Ok(c) => c,
            Err(e) if is_content_error(&e) => {
                return Ok(Chunk::Damaged(format!("EWF chunk {i} unreadable: {e}")));
            }
            Err(e) => return Err(std::io::Error::other(e.to_string())),
        };
        if self.implausible(size) {
            return Ok(Chunk::Damaged(format!(
                "EWF chunk {i} stored as {size} bytes, implausible for a chunk of {} bytes",
                self.chunk
            )));
        }
        let Some(file) = self.segments.get(segment) else {
            return Ok(Chunk::Damaged(format!(
                "EWF chunk {i} in segment {} of a set of {}",
                segment + 1,
                self.segments.len()
            )));
        };
        STORED.with_borrow_mut(|stored| -> std::io::Result<Chunk> {
            stored.resize(size as usize, 0);
            let got = super::buffered::pread_full(file, at, stored)?;
            let cut_short = || {
                Chunk::Damaged(format!(
                    "EWF chunk {i} cut short: {got} of its {size} stored bytes are in segment {}",
                    segment + 1
                ))
            };
            if !compressed {
                if got < stored.len() {
                    return Ok(cut_short());
                }
                return Ok(stored_chunk(i, stored, dst));
            }
            // A segment's last chunk may end before the size the table
            // implies (the end of the file): the stream says where it ends.
            if let Some(verdict) = inflate_chunk(i, &stored[..got], dst, self.chunk as usize) {
                return Ok(verdict);
            }
            if got < stored.len() {
                return Ok(cut_short());
            }
            // The stream wants more than the table's size. The size of a
            // segment's last chunk is not stored but taken from where its
            // section ends (SMART `.s01` sets made by ewfacquire came out
            // 11 bytes short): read on, up to twice a chunk, and let the
            // stream (its end and its checksum) say where it ends.
            let seg_len = file.metadata()?.len();
            let more = seg_len
                .saturating_sub(at)
                .min(self.chunk.saturating_mul(2) + 1024);
            if more > size {
                stored.resize(more as usize, 0);
                let got = super::buffered::pread_full(file, at, stored)?;
                if let Some(verdict) = inflate_chunk(i, &stored[..got], dst, self.chunk as usize) {
                    return Ok(verdict);
                }
            }
            Ok(unended(i))
        })
    }

    /// The ewf crate's reader, for EWF2 (`.Ex01`) sets: whole reads, or
    /// chunk by chunk when one fails.
    fn read_span_by_crate(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let len = self.len;
        let n = buf.len();
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

thread_local! {
    /// A chunk's stored bytes, read from its segment (one buffer a thread).
    static STORED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Inflates zlib chunk `i` into `dst`: good only when the stream ends (its
/// Adler-32 checked by the inflater) having given at least `dst.len()`
/// bytes, and no more than a chunk (`chunk`; the last chunk of a medium
/// may decode to a full chunk, of which `dst` takes its share). None when
/// the stream used all of `stored` and wants more.
fn inflate_chunk(i: u64, stored: &[u8], dst: &mut [u8], chunk: usize) -> Option<Chunk> {
    let mut z = flate2::Decompress::new(true);
    let status = if dst.len() == chunk {
        z.decompress(stored, dst, flate2::FlushDecompress::Finish)
    } else {
        let mut full = vec![0u8; chunk];
        let r = z.decompress(stored, &mut full, flate2::FlushDecompress::Finish);
        let k = dst.len().min(full.len());
        dst[..k].copy_from_slice(&full[..k]);
        r
    };
    let out = z.total_out();
    Some(match status {
        Ok(flate2::Status::StreamEnd) if out >= dst.len() as u64 => Chunk::Good,
        Ok(flate2::Status::StreamEnd) => Chunk::Damaged(format!(
            "EWF chunk {i} decodes to {out} bytes, not {}",
            dst.len()
        )),
        Ok(_) if z.total_in() == stored.len() as u64 && out < chunk as u64 => return None,
        Ok(_) => unended(i),
        Err(e) => Chunk::Damaged(format!("EWF chunk {i}: corrupt zlib stream ({e})")),
    })
}

/// Chunk `i`'s zlib stream did not end within what its segment holds for it.
fn unended(i: u64) -> Chunk {
    Chunk::Damaged(format!(
        "EWF chunk {i}: its zlib stream does not end where it should (corrupt or cut short)"
    ))
}

/// An uncompressed chunk `i`: its bytes, followed by their Adler-32 when
/// the table's size leaves room for it (EnCase and libewf write it).
fn stored_chunk(i: u64, stored: &[u8], dst: &mut [u8]) -> Chunk {
    let n = dst.len();
    let Some(data) = stored.get(..n) else {
        return Chunk::Damaged(format!(
            "EWF chunk {i} holds {} bytes, not {n}",
            stored.len()
        ));
    };
    dst.copy_from_slice(data);
    if stored.len() == n + 4 {
        let want = u32::from_le_bytes([stored[n], stored[n + 1], stored[n + 2], stored[n + 3]]);
        let mut sum = adler2::Adler32::new();
        sum.write_slice(data);
        if sum.checksum() != want {
            return Chunk::Damaged(format!("EWF chunk {i}: Adler-32 checksum mismatch"));
        }
    }
    Chunk::Good
}

/// The files of the EWF set whose first segment is `first`: the same name
/// with an extension of the same scheme (`E01`, `E02`…, `EAA`…), each
/// with its length, in segment-number order (files that are not EWF
/// segments last; the ewf crate refuses them).
fn segment_files(first: &Path) -> std::io::Result<Vec<(u32, Arc<File>, u64)>> {
    let (Some(stem), Some(ext)) = (
        first.file_stem().and_then(|s| s.to_str()),
        first.extension().and_then(|e| e.to_str()),
    ) else {
        let f = File::open(first)?;
        let len = f.metadata()?.len();
        return Ok(vec![(1, Arc::new(f), len)]);
    };
    let dir = match first.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = ext.chars().next().map(|c| c.to_ascii_uppercase());
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let p = entry?.path();
        let (Some(s), Some(e)) = (
            p.file_stem().and_then(|s| s.to_str()),
            p.extension().and_then(|e| e.to_str()),
        ) else {
            continue;
        };
        let same_scheme = e.len() == ext.len()
            && e.chars().next().map(|c| c.to_ascii_uppercase()) == prefix
            && e.chars().skip(1).all(|c| c.is_ascii_alphanumeric());
        if s != stem || !same_scheme || !p.is_file() {
            continue;
        }
        let f = File::open(&p)?;
        let len = f.metadata()?.len();
        let mut head = [0u8; 16];
        let got = super::buffered::pread_full(&f, 0, &mut head)?;
        let number = segment_number(&head[..got]).unwrap_or(u32::MAX);
        found.push((number, Arc::new(f), len));
    }
    found.sort_by_key(|(n, _, _)| *n);
    Ok(found)
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
        let n = (self.len.saturating_sub(offset)).min(buf.len() as u64) as usize;
        let buf = &mut buf[..n];
        let threads = match self.threads.load(std::sync::atomic::Ordering::Relaxed) {
            0 => cores(),
            n => n,
        };
        if n < PARALLEL_MIN || threads < 2 {
            return self.read_cached(offset, buf);
        }
        // Pieces end on chunk boundaries: no chunk is decoded by two threads.
        let piece = self.chunk.saturating_mul(PIECE_CHUNKS);
        let mut pieces = Vec::new();
        let (mut rest, mut at) = (&mut *buf, offset);
        while !rest.is_empty() {
            let end = (at / piece + 1).saturating_mul(piece);
            let take = usize::try_from(end - at).map_or(rest.len(), |t| t.min(rest.len()));
            let (head, tail) = rest.split_at_mut(take);
            pieces.push((at, head));
            at += take as u64;
            rest = tail;
        }
        let workers = threads.min(pieces.len());
        let queue = Mutex::new(pieces.into_iter());
        let work = || -> std::io::Result<()> {
            loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                let Some((at, piece)) = next else {
                    return Ok(());
                };
                self.read_cached(at, piece)?;
            }
        };
        std::thread::scope(|s| {
            let helpers: Vec<_> = (1..workers).map(|_| s.spawn(work)).collect();
            let mut result = work();
            for h in helpers {
                let r = h.join().unwrap_or_else(|_| {
                    Err(std::io::Error::other("an E01 decoding thread failed"))
                });
                result = result.and(r);
            }
            result
        })?;
        Ok(n)
    }

    fn describe(&self) -> String {
        format!("EWF (E01), chunk {} bytes", self.chunk)
    }

    fn keep_decoded(&self, bytes: u64) {
        self.decoded.set_capacity(bytes.max(DECODED_CACHE));
    }

    fn use_threads(&self, threads: usize) {
        self.threads
            .store(threads, std::sync::atomic::Ordering::Relaxed);
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
