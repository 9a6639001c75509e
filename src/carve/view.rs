//! The image as validators, the fragment search and the writer see it.
//!
//! Validators, the bifragment search and the writer make many small reads
//! (header fields, 4 KiB windows, segment tables), often of the same bytes
//! again. Each [`Image::read_at`] is one `pread`: a syscall and a copy out of
//! the page cache however few bytes are asked for. A plain raw file or
//! device (and the spool of a gzip image or of standard input) is therefore
//! read through a memory map of it
//! ([`Image::read_mapped`]: no system call, one copy, and a bad sector is
//! a refused mapped read, never a SIGBUS; see `source::guarded`): on a
//! 256 MiB ext2 image the carving's CPU time fell 8% (the `pread` copies and
//! this cache's page faults). Other images (containers, segment sets), and a
//! raw one whose map has met an unreadable page, are read as follows:
//! [`ImageBytes`] serves reads shorter than [`BLOCK_SIZE`] from a small cache
//! of aligned blocks, each filled by one read of the whole block; reads of
//! [`BLOCK_SIZE`] bytes or more go straight to [`Image::read_at`] into the
//! caller's buffer. A read across block boundaries is served from each of the
//! blocks it touches.
//!
//! # Memory bound
//!
//! The cache belongs to its [`ImageBytes`] (so two images carved at once,
//! each through its own view, can never see each other's bytes) and is split
//! into [`SHARDS`] shards of [`SLOTS_PER_SHARD`] blocks, each shard behind
//! its own lock; a block goes to the shard of its index. At most
//! `SHARDS * SLOTS_PER_SHARD * BLOCK_SIZE` bytes (32 × 4 × 64 KiB = 8 MiB)
//! per view, whatever the image size and however many threads read it;
//! a slot's buffer is only allocated when first filled, and all of it is
//! freed with the view. Each shard evicts its least recently used block.
//! A carve makes one view (so 8 MiB per image being carved). A raw image
//! read through its memory map uses none of it; the map's resident pages
//! have their own bound (`source::guarded::RELEASE_EVERY`).
//!
//! One cache shared by the view's readers rather than one per thread: the
//! validator and writer threads are scoped threads started anew for every
//! batch, so per-thread caches would start cold each time, and the carver
//! thread, the validators and the writer read the same headers in turn.
//! Measured on a 512 MiB FAT image, per-thread caches (16 blocks a thread,
//! keyed by view) made slightly more fills than this one.
//!
//! # Errors
//!
//! The image is only ever read. A block is cached only when its fill read
//! every byte it asked for; a failed or short fill is never kept, and the
//! caller's read is then done exactly as without the cache (one
//! [`Image::read_at`] of the bytes asked for), so an I/O error is still a
//! short read of the same length as before. A mapped read that met an
//! unreadable page is not used either: it is done again that way.

use super::reader::ByteReader;
use crate::source::Image;
use crate::source::cache::BlockCache;

/// Bytes per cached block; reads this long or longer bypass the cache.
pub const BLOCK_SIZE: usize = 64 * 1024;
/// Number of independently locked shards of a view's cache.
pub const SHARDS: usize = 32;
/// Blocks kept per shard.
pub const SLOTS_PER_SHARD: usize = 4;

/// Random read access to an image for validators and the writer, with a
/// bounded cache for small reads (see the module docs).
pub struct ImageBytes<'a> {
    image: &'a Image,
    cache: BlockCache,
}

impl<'a> ImageBytes<'a> {
    pub fn new(image: &'a Image) -> Self {
        ImageBytes {
            image,
            cache: BlockCache::new(BLOCK_SIZE, SHARDS, SLOTS_PER_SHARD),
        }
    }

    /// One uncached read, as without the cache: errors are a short read of 0.
    fn direct(&self, offset: u64, buf: &mut [u8]) -> usize {
        self.image.read_at(offset, buf).unwrap_or(0)
    }

    /// Copies `buf.len()` bytes at `offset` (all inside the image) out of
    /// cached blocks; false when a block could not be read whole.
    fn cached(&self, offset: u64, buf: &mut [u8]) -> bool {
        self.cache
            .read(offset, buf, self.image.len(), &|start, dst| {
                self.image
                    .read_at(start, dst)
                    .is_ok_and(|got| got == dst.len())
            })
    }
}

thread_local! {
    /// Bytes this thread has read from images through [`ImageBytes`].
    static READ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Bytes this thread has read from images through [`ImageBytes`] so far: the
/// work meter of the carving's stages (a validation, a fragment search)
/// reads it before and after each task. Every read of a validator or a
/// search reaches the image through an `ImageBytes` (directly, or through a
/// view of runs of it), so none is missed.
pub fn bytes_read_here() -> u64 {
    READ.with(|r| r.get())
}

impl ByteReader for ImageBytes<'_> {
    fn len(&self) -> u64 {
        self.image.len()
    }
    fn cheap_small_reads(&self) -> bool {
        self.image.reads_mapped()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        if offset >= self.image.len() {
            return 0;
        }
        let n = (self.image.len() - offset).min(buf.len() as u64) as usize;
        READ.with(|r| r.set(r.get() + n as u64));
        let buf = &mut buf[..n];
        if self.image.read_mapped(offset, buf) {
            return n;
        }
        if n >= BLOCK_SIZE {
            return self.direct(offset, buf);
        }
        if self.cached(offset, buf) {
            n
        } else {
            // Exactly the read done without a cache: same bytes, same count.
            self.direct(offset, buf)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Media;
    use crate::synth::XorShift;
    use std::io::Write;
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    fn image_file(len: usize, seed: u64) -> (tempfile::NamedTempFile, Vec<u8>) {
        let mut rng = XorShift(seed | 1);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        f.flush().unwrap();
        (f, bytes)
    }

    /// What a read must return: the bytes of the file there, clipped at its end.
    fn expected(file: &[u8], offset: u64, len: usize) -> &[u8] {
        let start = (offset as usize).min(file.len());
        let end = start.saturating_add(len).min(file.len());
        &file[start..end]
    }

    /// A random read: offsets anywhere (also at and past the end), lengths
    /// from 0 to a few blocks, often crossing block boundaries.
    fn random_read(rng: &mut XorShift, file_len: u64) -> (u64, usize) {
        let bs = BLOCK_SIZE as u64;
        let offset = match rng.below(6) {
            0 => rng.below(file_len + 3 * bs),
            1 => (rng.below(file_len / bs + 1) * bs).saturating_sub(rng.below(64)),
            2 => file_len.saturating_sub(rng.below(2 * bs)),
            3 => rng.below(4 * bs),
            _ => rng.below(file_len),
        };
        let len = match rng.below(5) {
            0 => rng.below(16),
            1 => rng.below(4096 + 1),
            2 => rng.below(bs + 1),
            3 => bs - 1 - rng.below(3),
            _ => rng.below(3 * bs + 1),
        } as usize;
        (offset, len)
    }

    fn check_reads(view: &ImageBytes<'_>, file: &[u8], seed: u64, reads: usize) {
        let mut rng = XorShift(seed | 1);
        for _ in 0..reads {
            let (offset, len) = random_read(&mut rng, file.len() as u64);
            let mut buf = vec![0xA5u8; len + 7];
            let got = view.read_at(offset, &mut buf[..len]);
            let want = expected(file, offset, len);
            assert_eq!(got, want.len(), "count at {offset}+{len}");
            assert_eq!(&buf[..got], want, "bytes at {offset}+{len}");
            assert!(
                buf[len..].iter().all(|&b| b == 0xA5),
                "wrote past the buffer"
            );
        }
    }

    #[test]
    fn random_reads_equal_the_file() {
        // Not a multiple of the block size: the last block is short.
        let len = 9 * BLOCK_SIZE + 12_345;
        let (f, file) = image_file(len, 7);
        let image = Image::open(f.path()).unwrap();
        let view = ImageBytes::new(&image);
        assert_eq!(view.len(), len as u64);
        check_reads(&view, &file, 11, 4000);
        // Whole-image and edge reads.
        let mut all = vec![0u8; len + 100];
        assert_eq!(view.read_at(0, &mut all), len);
        assert_eq!(&all[..len], &file[..]);
        let mut one = [0u8; 1];
        assert_eq!(view.read_at(len as u64 - 1, &mut one), 1);
        assert_eq!(one[0], file[len - 1]);
        assert_eq!(view.read_at(len as u64, &mut one), 0);
        assert_eq!(view.read_at(u64::MAX, &mut one), 0);
        assert_eq!(view.read_at(3, &mut []), 0);
    }

    #[test]
    fn a_tiny_image_smaller_than_a_block() {
        let (f, file) = image_file(1000, 3);
        let image = Image::open(f.path()).unwrap();
        let view = ImageBytes::new(&image);
        check_reads(&view, &file, 5, 500);
    }

    #[test]
    fn many_threads_read_at_once() {
        let len = 40 * BLOCK_SIZE + 999;
        let (f, file) = image_file(len, 21);
        let image = Image::open(f.path()).unwrap();
        let view = ImageBytes::new(&image);
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let (view, file) = (&view, &file);
                s.spawn(move || check_reads(view, file, 100 + t, 1500));
            }
        });
    }

    #[test]
    fn two_images_from_one_thread_never_mix() {
        // Same length, different bytes: the same offsets in each.
        let len = 5 * BLOCK_SIZE + 77;
        let (fa, a) = image_file(len, 31);
        let (fb, b) = image_file(len, 32);
        let (ia, ib) = (
            Image::open(fa.path()).unwrap(),
            Image::open(fb.path()).unwrap(),
        );
        // Two views of one image too: each is its own.
        let (va, vb, va2) = (
            ImageBytes::new(&ia),
            ImageBytes::new(&ib),
            ImageBytes::new(&ia),
        );
        let mut rng = XorShift(33);
        for _ in 0..3000 {
            let (offset, n) = random_read(&mut rng, len as u64);
            for (view, file) in [(&va, &a), (&vb, &b), (&va2, &a)] {
                let mut buf = vec![0u8; n];
                let got = view.read_at(offset, &mut buf);
                assert_eq!(&buf[..got], expected(file, offset, n));
            }
        }
        // And from several threads, each alternating.
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (va, vb, a, b) = (&va, &vb, &a, &b);
                s.spawn(move || {
                    let mut rng = XorShift(40 + t);
                    for _ in 0..1000 {
                        let (offset, n) = random_read(&mut rng, len as u64);
                        for (view, file) in [(va, a), (vb, b)] {
                            let mut buf = vec![0u8; n];
                            let got = view.read_at(offset, &mut buf);
                            assert_eq!(&buf[..got], expected(file, offset, n));
                        }
                    }
                });
            }
        });
    }

    /// A medium whose reads touching `[bad_from, bad_to)` fail while `failing` is set.
    #[derive(Debug)]
    struct Flaky {
        bytes: Vec<u8>,
        bad_from: u64,
        bad_to: u64,
        failing: AtomicBool,
        reads: AtomicU64,
    }

    impl Media for Flaky {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            let end = offset.saturating_add(buf.len() as u64);
            if self.failing.load(Ordering::Relaxed) && offset < self.bad_to && end > self.bad_from {
                return Err(std::io::Error::other("bad sector"));
            }
            let e = expected(&self.bytes, offset, buf.len());
            buf[..e.len()].copy_from_slice(e);
            Ok(e.len())
        }
        fn describe(&self) -> String {
            "flaky".into()
        }
    }

    #[test]
    fn failing_reads_are_short_and_never_cached() {
        let bs = BLOCK_SIZE as u64;
        let len = 6 * BLOCK_SIZE;
        let mut rng = XorShift(55);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        // One bad sector inside block 2.
        let (bad_from, bad_to) = (2 * bs + 1000, 2 * bs + 1512);
        let media = Arc::new(Flaky {
            bytes: bytes.clone(),
            bad_from,
            bad_to,
            failing: AtomicBool::new(true),
            reads: AtomicU64::new(0),
        });
        let image = Image::from_media(Path::new("flaky"), media.clone()).unwrap();
        let view = ImageBytes::new(&image);
        // Exactly as without a cache: a read touching the bad sector is a
        // short read of 0 (the medium's read of those bytes fails)...
        let mut buf = [0u8; 100];
        assert_eq!(view.read_at(bad_from + 10, &mut buf), 0);
        assert_eq!(view.read_at(bad_from - 50, &mut buf), 0);
        // ... a read elsewhere in the same block still gets its bytes ...
        assert_eq!(view.read_at(2 * bs + 10, &mut buf), 100);
        assert_eq!(
            &buf[..],
            &bytes[2 * bs as usize + 10..2 * bs as usize + 110]
        );
        // ... as does a read crossing into the block from the one before.
        let mut cross = [0u8; 200];
        assert_eq!(view.read_at(2 * bs - 100, &mut cross), 200);
        assert_eq!(
            &cross[..],
            &bytes[2 * bs as usize - 100..2 * bs as usize + 100]
        );
        // Large reads (no cache) over the bad sector fail as before.
        let mut big = vec![0u8; 2 * BLOCK_SIZE];
        assert_eq!(view.read_at(bs + 5, &mut big), 0);
        // Other blocks are cached: reading them again costs no medium read.
        let mut small = [0u8; 8];
        assert_eq!(view.read_at(4 * bs + 3, &mut small), 8);
        let before = media.reads.load(Ordering::Relaxed);
        assert_eq!(view.read_at(4 * bs + 30, &mut small), 8);
        assert_eq!(
            &small[..],
            &bytes[4 * bs as usize + 30..4 * bs as usize + 38]
        );
        assert_eq!(media.reads.load(Ordering::Relaxed), before);
        // The failed block was not kept as data: once the medium reads again,
        // the bad sector's true bytes come back.
        media.failing.store(false, Ordering::Relaxed);
        assert_eq!(view.read_at(bad_from + 10, &mut buf), 100);
        assert_eq!(
            &buf[..],
            &bytes[bad_from as usize + 10..bad_from as usize + 110]
        );
    }
}
