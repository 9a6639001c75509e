//! Reading an image as a sequence of overlapping blocks.
//!
//! An [`Image`] is opened read-only (it is evidence: never written, never
//! truncated, never locked). A [`BlockPlan`] cuts it into blocks: block `i`
//! *owns* the bytes `[offset, offset + owned_len)` and carries `overlap`
//! bytes more after them (the longest pattern minus one), so a match that
//! starts in the owned part is always seen whole. Which matches a block
//! reports is decided in `scan.rs`, not here.
//!
//! Bytes land in a [`BufferPool`]: a fixed set of page-aligned buffers
//! allocated once and reused, so memory is bounded by the pool whatever the
//! image size. A reader blocks when every buffer is in use (back-pressure).
//! The buffers come from a [`BufferProvider`]: the heap by default, or memory
//! an engine searches where it lies (the GPU engine's staging buffers, see
//! `engine::gpu`), so that a block read with `O_DIRECT` goes from the disk to
//! the device without one copy by the CPU. This module never knows whose
//! memory it reads into: it sees [`BlockMemory`], aligned bytes owned by one
//! block at a time.
//!
//! Backends ([`IoMode`]), one file each, behind [`BlockReader`]:
//! * `buffered`: `pread` through the page cache;
//! * `mmap`: memmap2 with sequential advice; blocks borrow the mapping (no copy);
//! * `direct`: `O_DIRECT` into aligned buffers, falling back to `buffered` with a warning where the filesystem refuses it;
//! * `uring`: io_uring with `O_DIRECT` and several reads in flight, falling back to `direct` where io_uring is unavailable.

mod aligned;
pub mod any;
pub mod buffered;
pub mod cache;
pub mod direct;
pub mod evidence;
pub mod ewf;
pub mod guarded;
pub mod gzip;
pub mod mmap;
pub mod split;
pub mod spool;
pub mod stdin;
pub mod uring;

use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

pub use aligned::AlignedBuf;
pub use any::{InputMode, open_any, open_any_with, open_input};

/// Alignment of buffers, offsets and lengths for `O_DIRECT` (covers 512-byte and 4 KiB sectors).
pub const DIRECT_ALIGN: usize = 4096;

/// Why an image could not be read. Displayed as one line.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{path}: no such file")]
    NotFound { path: PathBuf },
    #[error("{path}: permission denied")]
    PermissionDenied { path: PathBuf },
    #[error("{path}: not a regular file or block device ({kind})")]
    NotAnImage { path: PathBuf, kind: &'static str },
    #[error("{path}: the image is empty (0 bytes)")]
    Empty { path: PathBuf },
    #[error("{path}: cannot open: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: read error at byte offset {offset}: {source}")]
    Read {
        path: PathBuf,
        offset: u64,
        source: std::io::Error,
    },
    #[error(
        "{path}: the image shrank while being read (expected {expected} bytes, got {got} at offset {offset})"
    )]
    Truncated {
        path: PathBuf,
        offset: u64,
        expected: usize,
        got: usize,
    },
    #[error("{path}: {what}")]
    Container { path: PathBuf, what: String },
    #[error("invalid block settings: {0}")]
    Settings(String),
}

/// What kind of object the image is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    RegularFile,
    BlockDevice,
    /// A container or a set of files presenting one logical medium (split raw, E01, gzip, standard input).
    Container,
}

/// The logical medium behind an image: random access to its bytes.
///
/// Offsets are offsets in the logical medium, whatever the container.
pub trait Media: Send + Sync + fmt::Debug {
    /// Length of the logical medium in bytes.
    fn len(&self) -> u64;
    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the end of the medium.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize>;
    /// The one plain file behind the medium, when there is one: enables the
    /// mmap, O_DIRECT and io_uring backends.
    fn raw_file(&self) -> Option<&File> {
        None
    }
    /// One line for reports: what the container is.
    fn describe(&self) -> String;
    /// True for a medium of no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Ranges of the medium its container could not deliver (they read as
    /// zeros), known so far; reports list them. Plain media have none.
    fn damage(&self) -> Vec<Damage> {
        Vec::new()
    }
    /// Copies `buf.len()` bytes at `offset` out of a memory map of the
    /// medium ([`guarded::GuardedMap`]) without a system call; false when
    /// the medium has none or cannot give them that way (the caller uses
    /// [`Media::read_at`]). The bytes are those `read_at` would return.
    fn read_mapped(&self, _offset: u64, _buf: &mut [u8]) -> bool {
        false
    }
    /// Unreadable pages the memory map of [`Media::read_mapped`] met (after
    /// the first, the medium is read the ordinary way); 0 without a map.
    fn mapped_faults(&self) -> u64 {
        0
    }
    /// True while [`Media::read_mapped`] serves reads (a map, and no
    /// unreadable page met in it).
    fn reads_mapped(&self) -> bool {
        false
    }
    /// Asks a medium whose reads decode (a compressed container) to keep
    /// about `bytes` of what it decoded, for a reader that comes back to the
    /// bytes it read (the carving); plain media keep nothing.
    fn keep_decoded(&self, _bytes: u64) {}
    /// The threads a medium whose reads decode may use for one long read
    /// (the scan's `--threads`; 0: every core).
    fn use_threads(&self, _threads: usize) {}
}

/// A range of the logical medium that could not be read: its container
/// could not deliver it (a bad E01 chunk, a corrupt gzip member) or the
/// device failed to read it (`EIO`). It reads as zeros.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Damage {
    pub offset: u64,
    pub len: u64,
    pub reason: String,
}

/// Adds `d` to `log` (sorted by offset, ranges of one reason that touch or
/// overlap merged): nothing when the entry before it by offset holds it
/// whole; else inserted in place, and merged with the entries around it
/// that it touches. O(log n) to find its place, plus the entries it merges
/// and the shift of the insertion (none when bad sectors come in
/// increasing order, as a scan finds them). Sorting and merging the whole
/// log for each made a failing disk's scattered bad sectors (entries that
/// do not merge) O(n² log n): 20 000 of them in random order took 1.5 s,
/// now 88 ms (the shifts).
fn merge_damage(log: &mut Vec<Damage>, d: Damage) {
    let i = log.partition_point(|x| x.offset <= d.offset);
    let end = d.offset.saturating_add(d.len);
    if i > 0 && log[i - 1].offset.saturating_add(log[i - 1].len) >= end {
        return;
    }
    log.insert(i, d);
    // (The log is already swept: only the new entry's neighbours can join.)
    let joins =
        |a: &Damage, b: &Damage| b.offset <= a.offset.saturating_add(a.len) && a.reason == b.reason;
    let k = if i > 0 && joins(&log[i - 1], &log[i]) {
        i - 1
    } else {
        i
    };
    let mut end = log[k].offset.saturating_add(log[k].len);
    let mut j = k + 1;
    while j < log.len() && joins(&log[k], &log[j]) {
        end = end.max(log[j].offset.saturating_add(log[j].len));
        log[k].len = end - log[k].offset;
        j += 1;
    }
    log.drain(k + 1..j);
}

/// A plain raw file or block device.
///
/// Unreadable sectors (the read fails with `EIO`, as a failing disk's bad
/// sectors do) do not stop the reading: the read is retried sector by
/// sector ([`SECTOR`] bytes), the sectors that still fail read as zeros and
/// are recorded, and [`Media::damage`] lists them. Every backend goes through
/// here for a block it could not read ([`unreadable`]), so the list is
/// complete whichever backend ran. Other errors are returned as they are.
#[derive(Debug)]
struct RawMedia {
    file: File,
    len: u64,
    unread: BadSectors,
    /// Mapped on the first mapped read.
    map: guarded::LazyMap,
}

/// Granularity of the retry after a read error.
pub const SECTOR: u64 = 512;

/// True for a read error that means "these sectors cannot be read" (the
/// medium is damaged), as opposed to a bad call or a vanished file.
pub fn unreadable(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EIO)
}

/// The sectors of a medium's files that could not be read, found by
/// re-reading sector by sector after a read error ([`unreadable`]): they
/// read as zeros and are listed in the medium's coordinates. Shared by the
/// plain raw file and the segments of a split set.
#[derive(Debug, Default)]
pub(crate) struct BadSectors {
    log: Mutex<Vec<Damage>>,
}

impl BadSectors {
    /// Reads `buf` from `file` at `at` sector by sector (sectors of the
    /// file): unreadable ones read as zeros and are recorded at `medium`
    /// (where `at` lies in the medium) onwards. Returns the bytes delivered.
    pub(crate) fn read_around(
        &self,
        file: &File,
        at: u64,
        medium: u64,
        buf: &mut [u8],
    ) -> std::io::Result<usize> {
        let mut done = 0usize;
        while done < buf.len() {
            let pos = at + done as u64;
            let step = ((pos / SECTOR + 1) * SECTOR - pos).min((buf.len() - done) as u64) as usize;
            let piece = &mut buf[done..done + step];
            match buffered::pread_full(file, pos, piece) {
                Ok(k) if k == step => {}
                Ok(k) => return Ok(done + k), // the end of the file
                Err(e) if unreadable(&e) => {
                    piece.fill(0);
                    self.note(medium + done as u64, step as u64, &e);
                }
                Err(e) => return Err(e),
            }
            done += step;
        }
        Ok(done)
    }

    /// Records `[offset, offset + len)` as unreadable, merged with its neighbours.
    fn note(&self, offset: u64, len: u64, e: &std::io::Error) {
        let reason = format!("unreadable: {e}");
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        merge_damage(
            &mut log,
            Damage {
                offset,
                len,
                reason,
            },
        );
    }

    /// The ranges recorded so far.
    pub(crate) fn list(&self) -> Vec<Damage> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Media for RawMedia {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.len.saturating_sub(offset)).min(buf.len() as u64) as usize;
        match buffered::pread_full(&self.file, offset, &mut buf[..n]) {
            Err(e) if unreadable(&e) => {
                self.unread
                    .read_around(&self.file, offset, offset, &mut buf[..n])
            }
            r => r,
        }
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
        "raw".into()
    }
    fn damage(&self) -> Vec<Damage> {
        self.unread.list()
    }
}

/// An image opened read-only: a path and the logical medium behind it.
#[derive(Debug, Clone)]
pub struct Image {
    path: PathBuf,
    media: Arc<dyn Media>,
    kind: ImageKind,
}

impl Image {
    /// Opens `path` read-only after checking it is a non-empty regular file or block device.
    pub fn open(path: &Path) -> Result<Image, SourceError> {
        let p = path.to_path_buf();
        let meta = std::fs::metadata(path).map_err(|e| io_open_error(&p, e))?;
        let ft = meta.file_type();
        let kind = if ft.is_file() {
            ImageKind::RegularFile
        } else if ft.is_block_device() {
            ImageKind::BlockDevice
        } else {
            let what = if ft.is_dir() {
                "a directory"
            } else if ft.is_char_device() {
                "a character device"
            } else if ft.is_fifo() {
                "a pipe"
            } else if ft.is_socket() {
                "a socket"
            } else {
                "unknown type"
            };
            return Err(SourceError::NotAnImage {
                path: p,
                kind: what,
            });
        };
        let file = File::open(path).map_err(|e| io_open_error(&p, e))?;
        let len = match kind {
            ImageKind::BlockDevice => device_len(&file).map_err(|e| io_open_error(&p, e))?,
            _ => meta.len(),
        };
        if len == 0 {
            return Err(SourceError::Empty { path: p });
        }
        Ok(Image {
            path: p,
            media: Arc::new(RawMedia {
                file,
                len,
                unread: BadSectors::default(),
                map: Default::default(),
            }),
            kind,
        })
    }

    /// An image over any medium (containers, segment sets).
    pub fn from_media(path: &Path, media: Arc<dyn Media>) -> Result<Image, SourceError> {
        if media.is_empty() {
            return Err(SourceError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(Image {
            path: path.to_path_buf(),
            media,
            kind: ImageKind::Container,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn len(&self) -> u64 {
        self.media.len()
    }
    /// Always false for an opened image (empty images are refused); for clippy.
    pub fn is_empty(&self) -> bool {
        self.media.is_empty()
    }
    pub fn kind(&self) -> ImageKind {
        self.kind
    }
    /// The plain file behind the image, when it is one.
    pub fn raw_file(&self) -> Option<&File> {
        self.media.raw_file()
    }
    /// The medium, shared.
    pub fn media(&self) -> Arc<dyn Media> {
        Arc::clone(&self.media)
    }

    /// Copies `buf.len()` bytes at `offset` out of a memory map of the
    /// image, when it is a plain file or device that could be mapped and the
    /// map could give them ([`Media::read_mapped`]); false otherwise, for
    /// [`Image::read_at`].
    pub fn read_mapped(&self, offset: u64, buf: &mut [u8]) -> bool {
        self.media.read_mapped(offset, buf)
    }

    /// True while [`Image::read_mapped`] serves reads.
    pub fn reads_mapped(&self) -> bool {
        self.media.reads_mapped()
    }

    /// Reads `buf.len()` bytes at `offset` (fewer only at the end of the image).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        self.media
            .read_at(offset, buf)
            .map_err(|source| SourceError::Read {
                path: self.path.clone(),
                offset,
                source,
            })
    }
}

/// True when `a` and `b` name the same existing file (same device and inode):
/// used to refuse writing any output over the evidence.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

fn io_open_error(path: &Path, e: std::io::Error) -> SourceError {
    match e.kind() {
        std::io::ErrorKind::NotFound => SourceError::NotFound {
            path: path.to_path_buf(),
        },
        std::io::ErrorKind::PermissionDenied => SourceError::PermissionDenied {
            path: path.to_path_buf(),
        },
        _ => SourceError::Open {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

fn device_len(file: &File) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    let end = f.seek(SeekFrom::End(0))?;
    f.seek(SeekFrom::Start(0))?;
    Ok(end)
}

/// One block of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSpec {
    /// Position in the plan (0, 1, 2...).
    pub index: u64,
    /// Absolute offset of the block's first byte in the image.
    pub offset: u64,
    /// Bytes this block owns: matches starting in `[offset, offset + owned_len)` are its to report.
    pub owned_len: usize,
    /// Bytes delivered: `owned_len` plus the overlap, clipped at the end of the image.
    pub data_len: usize,
}

/// How an image (or the slice `[start, end)` of it) is cut into blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPlan {
    pub image_len: u64,
    pub block_size: usize,
    pub overlap: usize,
    /// First byte of the first block (0 for a whole image).
    pub start: u64,
    /// End of the owned bytes of the last block (`image_len` for a whole image);
    /// its overlap may still read past it, up to `image_len`.
    pub end: u64,
}

impl BlockPlan {
    /// `block_size` must be a positive multiple of [`DIRECT_ALIGN`] and larger than `overlap`.
    pub fn new(
        image_len: u64,
        block_size: usize,
        overlap: usize,
    ) -> Result<BlockPlan, SourceError> {
        if block_size == 0 || !block_size.is_multiple_of(DIRECT_ALIGN) {
            return Err(SourceError::Settings(format!(
                "block size {block_size} must be a positive multiple of {DIRECT_ALIGN} bytes"
            )));
        }
        if overlap >= block_size {
            return Err(SourceError::Settings(format!(
                "block size {block_size} must exceed the block overlap ({overlap} bytes = longest pattern - 1)"
            )));
        }
        Ok(BlockPlan {
            image_len,
            block_size,
            overlap,
            start: 0,
            end: image_len,
        })
    }

    /// A plan over the slice `[start, end)` only: its blocks own those bytes,
    /// and the last one still carries its overlap past `end` (clipped at the
    /// image's end), exactly as at any block seam. `start` must be aligned to
    /// [`DIRECT_ALIGN`].
    pub fn range(
        image_len: u64,
        block_size: usize,
        overlap: usize,
        start: u64,
        end: u64,
    ) -> Result<BlockPlan, SourceError> {
        let mut plan = BlockPlan::new(image_len, block_size, overlap)?;
        if start > end || end > image_len || !start.is_multiple_of(DIRECT_ALIGN as u64) {
            return Err(SourceError::Settings(format!(
                "range {start}..{end} must lie within the image (0..{image_len}) and start at a multiple of {DIRECT_ALIGN}"
            )));
        }
        plan.start = start;
        plan.end = end;
        Ok(plan)
    }

    /// Number of blocks.
    pub fn len(&self) -> u64 {
        (self.end - self.start).div_ceil(self.block_size as u64)
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// Capacity a buffer needs for any block of this plan, rounded up for `O_DIRECT`.
    pub fn buffer_capacity(&self) -> usize {
        (self.block_size + self.overlap).next_multiple_of(DIRECT_ALIGN)
    }

    /// The `index`-th block, if any.
    pub fn block(&self, index: u64) -> Option<BlockSpec> {
        let offset = index
            .checked_mul(self.block_size as u64)?
            .checked_add(self.start)?;
        if offset >= self.end {
            return None;
        }
        let owned_len = (self.end - offset).min(self.block_size as u64) as usize;
        let data_len = (self.image_len - offset).min((owned_len + self.overlap) as u64) as usize;
        Some(BlockSpec {
            index,
            offset,
            owned_len,
            data_len,
        })
    }

    /// All blocks in order.
    pub fn blocks(&self) -> impl Iterator<Item = BlockSpec> + '_ {
        (0..self.len()).filter_map(|i| self.block(i))
    }
}

/// Memory one block is read into: a fixed-size byte buffer starting at an
/// address aligned to [`DIRECT_ALIGN`], owned by whoever holds it.
///
/// Implementations must hand out the same memory every time (readers keep
/// its address while the kernel fills it). [`BufferPool`] checks the length
/// and the alignment of every buffer a provider allocates.
pub trait BlockMemory: Send + Sync {
    fn as_slice(&self) -> &[u8];
    fn as_mut_slice(&mut self) -> &mut [u8];
}

/// Where the buffers of a [`BufferPool`] come from.
///
/// The pipeline asks its engine for one (`Engine::buffer_provider`): an
/// engine that can search memory of its own without copying it (the GPU
/// engine's staging buffers) offers it, and blocks are read straight into it.
pub trait BufferProvider: Send + Sync {
    /// One line for reports: what the memory is.
    fn describe(&self) -> String;
    /// A buffer of at least `capacity` bytes (a multiple of [`DIRECT_ALIGN`]),
    /// aligned to [`DIRECT_ALIGN`].
    fn allocate(&self, capacity: usize) -> Result<Box<dyn BlockMemory>, String>;
    /// Whether the pool should replace `buf`, coming back to it, with a
    /// fresh buffer from [`allocate`](Self::allocate): true for a buffer
    /// this provider would not hand out now (`--engine auto`'s heap buffers
    /// once the GPU's staging memory exists). Default: never.
    fn replaces(&self, _buf: &dyn BlockMemory) -> bool {
        false
    }
}

/// Whether `buf` holds `capacity` bytes at an address aligned to [`DIRECT_ALIGN`].
fn fits(buf: &dyn BlockMemory, capacity: usize) -> bool {
    let s = buf.as_slice();
    s.len() >= capacity && (s.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN)
}

/// The default provider: page-aligned heap buffers.
#[derive(Debug, Default)]
pub struct HeapBuffers;

impl BufferProvider for HeapBuffers {
    fn describe(&self) -> String {
        "heap".into()
    }
    fn allocate(&self, capacity: usize) -> Result<Box<dyn BlockMemory>, String> {
        Ok(Box::new(AlignedBuf::new(capacity)))
    }
}

struct PoolInner {
    free: Mutex<Vec<Box<dyn BlockMemory>>>,
    returned: Condvar,
    /// Asked, as each buffer comes back, whether to replace it.
    provider: Option<Arc<dyn BufferProvider>>,
    capacity: usize,
}

/// A fixed set of page-aligned buffers, allocated once.
#[derive(Clone)]
pub struct BufferPool {
    inner: Arc<PoolInner>,
    capacity: usize,
    count: usize,
    memory: String,
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BufferPool({} x {} bytes, {})",
            self.count, self.capacity, self.memory
        )
    }
}

impl BufferPool {
    /// Allocates `count` heap buffers of `capacity` bytes (rounded up to the alignment).
    pub fn new(count: usize, capacity: usize) -> BufferPool {
        let capacity = capacity.max(1).next_multiple_of(DIRECT_ALIGN);
        let free = (0..count.max(1))
            .map(|_| Box::new(AlignedBuf::new(capacity)) as Box<dyn BlockMemory>)
            .collect();
        BufferPool::from_buffers(free, capacity, HeapBuffers.describe(), None)
    }

    /// Allocates `count` buffers of `capacity` bytes (rounded up to the
    /// alignment) from `provider`. Errs when the provider fails or hands out
    /// a buffer that is too short or not aligned.
    ///
    /// As each buffer comes back to the pool, the provider may have it
    /// replaced ([`BufferProvider::replaces`]); a replacement that cannot be
    /// allocated leaves the old buffer in place.
    pub fn with_provider(
        count: usize,
        capacity: usize,
        provider: Arc<dyn BufferProvider>,
    ) -> Result<BufferPool, SourceError> {
        let capacity = capacity.max(1).next_multiple_of(DIRECT_ALIGN);
        let mut free = Vec::with_capacity(count.max(1));
        for _ in 0..count.max(1) {
            let buf = provider
                .allocate(capacity)
                .map_err(|e| SourceError::Settings(format!("{}: {e}", provider.describe())))?;
            if !fits(buf.as_ref(), capacity) {
                let s = buf.as_slice();
                return Err(SourceError::Settings(format!(
                    "{}: a buffer of {} bytes at {:p} does not hold {capacity} bytes aligned to {DIRECT_ALIGN}",
                    provider.describe(),
                    s.len(),
                    s.as_ptr()
                )));
            }
            free.push(buf);
        }
        let memory = provider.describe();
        Ok(BufferPool::from_buffers(
            free,
            capacity,
            memory,
            Some(provider),
        ))
    }

    fn from_buffers(
        free: Vec<Box<dyn BlockMemory>>,
        capacity: usize,
        memory: String,
        provider: Option<Arc<dyn BufferProvider>>,
    ) -> Self {
        let count = free.len();
        BufferPool {
            inner: Arc::new(PoolInner {
                free: Mutex::new(free),
                returned: Condvar::new(),
                provider,
                capacity,
            }),
            capacity,
            count,
            memory,
        }
    }

    /// Bytes per buffer.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of buffers.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Total bytes held by the pool: the reader's memory bound.
    pub fn bytes(&self) -> usize {
        self.capacity * self.count
    }

    /// What the buffers are (the provider's description, `heap` by default).
    pub fn memory(&self) -> &str {
        &self.memory
    }

    /// Errs when a buffer cannot hold the largest block of `plan` (plus O_DIRECT rounding).
    pub fn check_fits(&self, plan: &BlockPlan) -> Result<(), SourceError> {
        if self.capacity < plan.buffer_capacity() {
            return Err(SourceError::Settings(format!(
                "buffer pool of {} bytes per buffer is smaller than the block plan's {}",
                self.capacity,
                plan.buffer_capacity()
            )));
        }
        Ok(())
    }

    /// Takes a buffer, waiting until one is returned if all are in use.
    pub fn take(&self) -> PooledBuf {
        let mut free = self.inner.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(buf) = free.pop() {
                return PooledBuf {
                    buf: Some(buf),
                    pool: Arc::clone(&self.inner),
                };
            }
            free = self
                .inner
                .returned
                .wait(free)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl BufferPool {
    /// Takes a buffer if one is free now.
    pub fn try_take(&self) -> Option<PooledBuf> {
        let mut free = self.inner.free.lock().unwrap_or_else(|p| p.into_inner());
        free.pop().map(|buf| PooledBuf {
            buf: Some(buf),
            pool: Arc::clone(&self.inner),
        })
    }
}

/// A buffer on loan from a [`BufferPool`]; it goes back when dropped.
pub struct PooledBuf {
    buf: Option<Box<dyn BlockMemory>>,
    pool: Arc<PoolInner>,
}

impl PooledBuf {
    pub fn as_slice(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], |b| b.as_slice())
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.buf.as_mut().map_or(&mut [], |b| b.as_mut_slice())
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(mut b) = self.buf.take() {
            if let Some(p) = &self.pool.provider
                && p.replaces(b.as_ref())
                && let Ok(fresh) = p.allocate(self.pool.capacity)
                && fits(fresh.as_ref(), self.pool.capacity)
            {
                b = fresh;
            }
            let mut free = self.pool.free.lock().unwrap_or_else(|p| p.into_inner());
            free.push(b);
            self.pool.returned.notify_one();
        }
    }
}

enum BlockData {
    Pooled(PooledBuf),
    Mapped(Arc<memmap2::Mmap>),
}

/// A block's bytes, ready for an engine.
pub struct Block {
    pub spec: BlockSpec,
    data: BlockData,
    read: Option<(Instant, Instant)>,
}

impl Block {
    /// A block read into `buf` from `started` to `done` (for io_uring: from
    /// submission to the reader seeing the completion).
    pub(crate) fn pooled(
        spec: BlockSpec,
        buf: PooledBuf,
        started: Instant,
        done: Instant,
    ) -> Block {
        Block {
            spec,
            data: BlockData::Pooled(buf),
            read: Some((started, done)),
        }
    }

    pub(crate) fn mapped(spec: BlockSpec, map: Arc<memmap2::Mmap>) -> Block {
        Block {
            spec,
            data: BlockData::Mapped(map),
            read: None,
        }
    }

    /// When the block was read (`None` for a mapped block: its pages are
    /// read when first touched).
    pub fn read_interval(&self) -> Option<(Instant, Instant)> {
        self.read
    }

    /// The block's `data_len` bytes, starting at `spec.offset` in the image.
    pub fn bytes(&self) -> &[u8] {
        let (start, len) = (self.spec.offset as usize, self.spec.data_len);
        match &self.data {
            BlockData::Pooled(b) => &b.as_slice()[..len],
            BlockData::Mapped(m) => &m[start..start + len],
        }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let BlockData::Mapped(map) = &self.data {
            // Release this block's owned pages from our mapping so resident
            // memory stays bounded on huge images.
            // SAFETY: the mapping is a read-only, file-backed, private mapping that
            // is never written; MADV_DONTNEED only drops the pages from this
            // process, and any later access (e.g. the neighbouring block's
            // overlap) faults them in again from the file with the same bytes.
            let _ = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    self.spec.offset as usize,
                    self.spec.owned_len,
                )
            };
        }
    }
}

/// How a backend's bytes reach a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Into a pool buffer by a copy on the CPU (`pread` out of the page
    /// cache, decompression of a container).
    Copied,
    /// Into a pool buffer by the device's DMA (`O_DIRECT`): no CPU copy.
    Direct,
    /// Borrowed from a memory mapping: no pool buffer, no copy by the reader.
    Mapped,
}

/// A way of reading an image's blocks, in plan order.
pub trait BlockReader: Send {
    /// The backend actually in use (after any fallback).
    fn name(&self) -> &'static str;

    /// How the bytes reach the blocks (after any fallback).
    fn delivery(&self) -> Delivery;

    /// Reads every block of `plan` in order and hands each to `deliver`;
    /// stops early, without error, when `deliver` returns false.
    fn read_blocks(
        &mut self,
        plan: &BlockPlan,
        pool: &BufferPool,
        deliver: &mut dyn FnMut(Block) -> bool,
    ) -> Result<(), SourceError>;
}

/// I/O backend choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoMode {
    Buffered,
    Mmap,
    Direct,
    Uring,
}

impl IoMode {
    pub const ALL: [IoMode; 4] = [
        IoMode::Buffered,
        IoMode::Mmap,
        IoMode::Direct,
        IoMode::Uring,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IoMode::Buffered => "buffered",
            IoMode::Mmap => "mmap",
            IoMode::Direct => "direct",
            IoMode::Uring => "uring",
        }
    }
}

impl std::str::FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<IoMode, String> {
        IoMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown I/O backend `{s}` (buffered, mmap, direct, uring)"))
    }
}

impl fmt::Display for IoMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Opens the backend for `mode` over `image`. Warnings about fallbacks go to `warn`.
///
/// With `read_again` (a carving: the validators, fragment searches and the
/// writer read the image after the scan), `direct` and `uring` read through
/// the page cache with io_uring, where those later reads find the bytes:
/// past it they went to the device a second time (a cold 512 MiB image
/// carved in 0.83-0.92 s with O_DIRECT, 0.44-0.46 s through the cache).
pub fn open_reader(
    image: &Image,
    mode: IoMode,
    read_again: bool,
    warn: &mut dyn FnMut(String),
) -> Result<Box<dyn BlockReader>, SourceError> {
    Ok(match mode {
        IoMode::Buffered => Box::new(buffered::BufferedReader::new(image)),
        IoMode::Mmap => Box::new(mmap::MmapReader::new(image)?),
        IoMode::Direct | IoMode::Uring if read_again => uring::open(image, true, warn)?,
        IoMode::Direct => direct::open(image, warn)?,
        IoMode::Uring => uring::open(image, false, warn)?,
    })
}

/// A buffer provider for tests: heap buffers, counted as "better" ones (the
/// staging memory of `--engine auto`) once `better` is set, when it
/// records their addresses and has every other buffer replaced; with
/// `refuse`, it hands out none at all.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Upgrading {
    pub better: std::sync::atomic::AtomicBool,
    pub refuse: bool,
    pub made: Mutex<Vec<usize>>,
}

#[cfg(test)]
impl BufferProvider for Upgrading {
    fn describe(&self) -> String {
        "upgrading".into()
    }
    fn allocate(&self, capacity: usize) -> Result<Box<dyn BlockMemory>, String> {
        if self.refuse {
            return Err("refused".into());
        }
        let b = AlignedBuf::new(capacity);
        if self.better.load(std::sync::atomic::Ordering::Relaxed) {
            self.made
                .lock()
                .unwrap()
                .push(b.as_slice().as_ptr() as usize);
        }
        Ok(Box::new(b))
    }
    fn replaces(&self, buf: &dyn BlockMemory) -> bool {
        self.better.load(std::sync::atomic::Ordering::Relaxed)
            && !self
                .made
                .lock()
                .unwrap()
                .contains(&(buf.as_slice().as_ptr() as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log as `note` kept it before: pushed, sorted, swept whole.
    fn merge_damage_brute(log: &mut Vec<Damage>, d: Damage) {
        let end = d.offset + d.len;
        if log
            .iter()
            .any(|x| x.offset <= d.offset && end <= x.offset + x.len)
        {
            return;
        }
        log.push(d);
        log.sort_by_key(|x| x.offset);
        let mut merged: Vec<Damage> = Vec::with_capacity(log.len());
        for x in log.drain(..) {
            match merged.last_mut() {
                Some(m) if x.offset <= m.offset + m.len && m.reason == x.reason => {
                    m.len = m.len.max(x.offset + x.len - m.offset);
                }
                _ => merged.push(x),
            }
        }
        *log = merged;
    }

    proptest::proptest! {
        /// Bad sectors recorded in any order (single ones, runs, repeats,
        /// neighbours) give the log the whole-log sweep gives, after every one.
        #[test]
        fn bad_sectors_merge_as_a_sweep_of_the_whole_log(
            notes in proptest::collection::vec((0u64..200, 1u64..6), 1..120)
        ) {
            let (mut fast, mut brute) = (Vec::new(), Vec::new());
            for (sector, n) in notes {
                let d = Damage { offset: sector * SECTOR, len: n * SECTOR, reason: "unreadable: EIO".into() };
                merge_damage(&mut fast, d.clone());
                merge_damage_brute(&mut brute, d);
                proptest::prop_assert_eq!(&fast, &brute);
            }
        }
    }

    /// Ranges of other reasons are not merged with each other, and a range
    /// recorded already (for any reason) is not recorded again.
    #[test]
    fn damage_of_another_reason_stays_apart() {
        let d = |offset, len, reason: &str| Damage {
            offset,
            len,
            reason: reason.into(),
        };
        let mut log = Vec::new();
        merge_damage(&mut log, d(0, 512, "a"));
        merge_damage(&mut log, d(1024, 512, "a"));
        merge_damage(&mut log, d(512, 512, "b"));
        merge_damage(&mut log, d(512, 512, "a"));
        assert_eq!(
            log,
            vec![d(0, 512, "a"), d(512, 512, "b"), d(1024, 512, "a")]
        );
        merge_damage(&mut log, d(1536, 512, "a"));
        merge_damage(&mut log, d(256, 512, "a"));
        assert_eq!(
            log,
            vec![d(0, 768, "a"), d(512, 512, "b"), d(1024, 1024, "a")]
        );
    }

    #[test]
    fn plan_covers_the_image_once() {
        for (len, bs, ov) in [
            (1u64, 4096, 0),
            (4096, 4096, 3),
            (4097, 4096, 7),
            (100_000, 8192, 100),
            (8192 * 3, 8192, 4095),
        ] {
            let plan = BlockPlan::new(len, bs, ov).unwrap();
            let blocks: Vec<_> = plan.blocks().collect();
            assert_eq!(blocks.len() as u64, plan.len());
            let mut next = 0;
            for b in &blocks {
                assert_eq!(b.offset, next);
                assert!(b.data_len >= b.owned_len && b.data_len <= plan.buffer_capacity());
                assert!(b.offset + b.data_len as u64 <= len);
                assert!(b.data_len == b.owned_len + ov || b.offset + b.data_len as u64 == len);
                next += b.owned_len as u64;
            }
            assert_eq!(next, len);
        }
        let plan = BlockPlan::range(100_000, 8192, 100, 4096, 30_000).unwrap();
        let blocks: Vec<_> = plan.blocks().collect();
        assert_eq!(blocks.first().map(|b| b.offset), Some(4096));
        let last = blocks.last().unwrap();
        assert_eq!(last.offset + last.owned_len as u64, 30_000);
        assert_eq!(last.data_len, last.owned_len + 100);
        assert!(BlockPlan::range(100, 4096, 0, 4000, 50).is_err());
        assert!(BlockPlan::new(10, 4000, 0).is_err());
        assert!(BlockPlan::new(10, 4096, 4096).is_err());
    }

    #[test]
    fn pool_is_bounded_and_reuses() {
        let pool = BufferPool::new(2, 5000);
        assert_eq!(pool.capacity(), 8192);
        let a = pool.take();
        let b = pool.take();
        let p2 = pool.clone();
        let t = std::thread::spawn(move || p2.take().as_slice().len());
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(a);
        assert_eq!(t.join().unwrap(), 8192);
        drop(b);
        assert_eq!(pool.inner.free.lock().unwrap().len(), 2);
    }

    /// Hands out buffers `short` bytes too short, `skew` bytes off alignment.
    struct Odd {
        short: usize,
        skew: usize,
        given: std::sync::atomic::AtomicUsize,
    }

    struct Skewed(AlignedBuf, usize, usize);

    impl BlockMemory for Skewed {
        fn as_slice(&self) -> &[u8] {
            &self.0.as_slice()[self.1..self.0.len() - self.2]
        }
        fn as_mut_slice(&mut self) -> &mut [u8] {
            let n = self.0.len() - self.2;
            &mut self.0.as_mut_slice()[self.1..n]
        }
    }

    impl BufferProvider for Odd {
        fn describe(&self) -> String {
            "odd memory".into()
        }
        fn allocate(&self, capacity: usize) -> Result<Box<dyn BlockMemory>, String> {
            self.given
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let b = AlignedBuf::new(capacity + self.skew);
            Ok(Box::new(Skewed(b, self.skew, self.short)))
        }
    }

    #[test]
    fn pools_take_buffers_from_a_provider_and_check_them() {
        let good = Odd {
            short: 0,
            skew: 0,
            given: Default::default(),
        };
        let good = Arc::new(good);
        let pool = BufferPool::with_provider(3, 5000, good.clone()).unwrap();
        assert_eq!(good.given.load(std::sync::atomic::Ordering::Relaxed), 3);
        assert_eq!((pool.count(), pool.capacity()), (3, 8192));
        assert_eq!(pool.memory(), "odd memory");
        assert_eq!(BufferPool::new(1, 1).memory(), "heap");
        let mut b = pool.take();
        assert_eq!(b.as_slice().len(), 8192);
        b.as_mut_slice()[8191] = 9;
        assert_eq!(b.as_slice()[8191], 9);
        for (short, skew) in [(1, 0), (0, 512)] {
            let bad = Odd {
                short,
                skew,
                given: Default::default(),
            };
            let e = BufferPool::with_provider(2, 8192, Arc::new(bad)).unwrap_err();
            assert!(e.to_string().contains("odd memory"), "{e}");
        }
    }

    #[test]
    fn a_provider_replaces_buffers_as_they_come_back() {
        let up = Arc::new(Upgrading::default());
        let pool = BufferPool::with_provider(2, 4096, up.clone()).unwrap();
        let (a, b) = (pool.take(), pool.take());
        drop(a);
        assert!(up.made.lock().unwrap().is_empty(), "nothing better yet");
        up.better.store(true, std::sync::atomic::Ordering::Relaxed);
        drop(b);
        let c = pool.take();
        let d = pool.take();
        let made = up.made.lock().unwrap().clone();
        assert_eq!(
            made.len(),
            1,
            "the buffer back after the change was replaced"
        );
        let addrs = [
            c.as_slice().as_ptr() as usize,
            d.as_slice().as_ptr() as usize,
        ];
        assert!(addrs.contains(&made[0]));
        drop((c, d));
        assert_eq!(up.made.lock().unwrap().len(), 2, "then the other one");
        let (e, f) = (pool.take(), pool.take());
        drop((e, f));
        assert_eq!(up.made.lock().unwrap().len(), 2, "better ones stay");
        assert_eq!((pool.count(), pool.capacity()), (2, 4096));
    }

    #[test]
    fn try_take_does_not_wait() {
        let pool = BufferPool::new(1, 4096);
        let a = pool.try_take();
        assert!(a.is_some());
        assert!(pool.try_take().is_none());
        drop(a);
        assert!(pool.try_take().is_some());
    }

    #[test]
    fn open_errors_are_clear() {
        let dir = std::env::temp_dir();
        assert!(matches!(
            Image::open(Path::new("/nonexistent/x.dd")),
            Err(SourceError::NotFound { .. })
        ));
        assert!(matches!(
            Image::open(&dir),
            Err(SourceError::NotAnImage { .. })
        ));
        let empty = dir.join(format!("gpucarve-empty-{}", std::process::id()));
        std::fs::write(&empty, b"").unwrap();
        let e = Image::open(&empty).unwrap_err();
        assert!(e.to_string().contains("empty"));
        std::fs::remove_file(&empty).unwrap();
    }
}
