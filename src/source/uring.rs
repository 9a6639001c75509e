//! io_uring with `O_DIRECT`: several block reads in flight at once.
//!
//! Up to `depth` reads are queued ahead of the consumer, each into its own
//! pooled buffer; completions may arrive in any order and are delivered in
//! plan order. While reads are in flight the reader waits for them, not for
//! a free buffer, so each block is delivered (and its read timed) as soon as
//! its completion arrives. A short completion that is not at the end of the image is
//! finished with plain `pread`. Where io_uring is unavailable (old kernel,
//! seccomp in containers) or `O_DIRECT` is refused, [`open`] warns and falls
//! back to `direct` (and that, in turn, to `buffered`).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::time::Instant;

use io_uring::{IoUring, opcode, types};

use super::buffered::pread_full;
use super::{
    Block, BlockPlan, BlockReader, BlockSpec, BufferPool, DIRECT_ALIGN, Delivery, Image, PooledBuf,
    SourceError,
};

/// Reads kept in flight.
const DEPTH: u32 = 8;

/// The `uring` backend, or a fallback with a warning. With `cached`, it
/// reads through the page cache (no `O_DIRECT`): for a carving, which reads
/// the image again after the scan and finds the bytes there.
pub fn open(
    image: &Image,
    cached: bool,
    warn: &mut dyn FnMut(String),
) -> Result<Box<dyn BlockReader>, SourceError> {
    if image.raw_file().is_none() {
        warn(format!(
            "{}: io_uring reads a plain file; this image ({}) is decoded: buffered reads",
            image.path().display(),
            image.media().describe()
        ));
        return Ok(Box::new(super::buffered::BufferedReader::new(image)));
    }
    let ring = match IoUring::new(DEPTH) {
        Ok(r) => r,
        Err(e) => {
            warn(format!(
                "io_uring unavailable ({e}); falling back to {} reads",
                if cached { "buffered" } else { "O_DIRECT" }
            ));
            return if cached {
                Ok(Box::new(super::buffered::BufferedReader::new(image)))
            } else {
                super::direct::open(image, warn)
            };
        }
    };
    let file = if cached {
        super::direct::reopen(image, 0)
    } else {
        super::direct::open_direct(image)
    };
    match file {
        Ok(file) => Ok(Box::new(UringReader {
            ring,
            file,
            cached,
            media: image.media(),
            path: image.path().to_path_buf(),
        })),
        Err(e) => {
            warn(format!(
                "{}: {} refused ({e}); io_uring falls back to buffered reads",
                image.path().display(),
                if cached { "reopening" } else { "O_DIRECT" }
            ));
            Ok(Box::new(super::buffered::BufferedReader::new(image)))
        }
    }
}

/// The `uring` backend.
pub struct UringReader {
    ring: IoUring,
    file: File,
    /// Through the page cache (no `O_DIRECT`).
    cached: bool,
    /// Reads a block again, sector by sector, when the device cannot read it.
    media: std::sync::Arc<dyn super::Media>,
    path: PathBuf,
}

struct InFlight {
    spec: BlockSpec,
    buf: PooledBuf,
    read_len: usize,
    /// When the read was queued.
    since: Instant,
}

/// Completed reads by block index: the read, bytes read, and when it ended
/// (as far as the reader can tell).
type Completed = BTreeMap<u64, (InFlight, usize, Instant)>;

impl UringReader {
    fn read_error(&self, offset: u64, source: std::io::Error) -> SourceError {
        SourceError::Read {
            path: self.path.clone(),
            offset,
            source,
        }
    }
}

impl BlockReader for UringReader {
    fn name(&self) -> &'static str {
        if self.cached {
            "uring (through the page cache: the carving reads the image again)"
        } else {
            "uring"
        }
    }

    fn delivery(&self) -> Delivery {
        if self.cached {
            Delivery::Copied
        } else {
            Delivery::Direct
        }
    }

    fn read_blocks(
        &mut self,
        plan: &BlockPlan,
        pool: &BufferPool,
        deliver: &mut dyn FnMut(Block) -> bool,
    ) -> Result<(), SourceError> {
        pool.check_fits(plan)?;
        let mut in_flight: BTreeMap<u64, InFlight> = BTreeMap::new();
        let result = self.run(plan, pool, deliver, &mut in_flight);
        // Whatever happened, the kernel must be done with every buffer before it
        // goes back to the pool.
        let drained = self.drain(in_flight);
        result.and(drained)
    }
}

impl UringReader {
    fn run(
        &mut self,
        plan: &BlockPlan,
        pool: &BufferPool,
        deliver: &mut dyn FnMut(Block) -> bool,
        in_flight: &mut BTreeMap<u64, InFlight>,
    ) -> Result<(), SourceError> {
        // Reads in flight never exceed the pool (minus one buffer for the consumer side).
        let depth = (DEPTH as usize).min(pool.count().saturating_sub(1)).max(1);
        let mut next_submit = 0u64;
        let mut next_deliver = 0u64;
        let total = plan.len();
        let mut done = Completed::new();
        let mut queued = false;
        let fd = types::Fd(self.file.as_raw_fd());

        while next_deliver < total {
            // Keep the queue full.
            while next_submit < total && in_flight.len() + done.len() < depth {
                let Some(spec) = plan.block(next_submit) else {
                    break;
                };
                // With reads in flight, wait for them rather than for a free
                // buffer: completions are seen (and delivered) as they come.
                let mut buf = if in_flight.is_empty() {
                    pool.take()
                } else {
                    match pool.try_take() {
                        Some(b) => b,
                        None => break,
                    }
                };
                let read_len = spec.data_len.next_multiple_of(DIRECT_ALIGN);
                let ptr = buf.as_mut_slice().as_mut_ptr();
                let entry = opcode::Read::new(fd, ptr, read_len as u32)
                    .offset(spec.offset)
                    .build()
                    .user_data(next_submit);
                in_flight.insert(
                    next_submit,
                    InFlight {
                        spec,
                        buf,
                        read_len,
                        since: Instant::now(),
                    },
                );
                // SAFETY: the buffer behind `ptr` is owned by the InFlight entry kept in
                // `in_flight` until its completion is reaped below, so it outlives the
                // kernel's use of it; `read_len` never exceeds its capacity (checked above).
                let pushed = unsafe { self.ring.submission().push(&entry) };
                if pushed.is_err() {
                    // Queue full: submit what we have first.
                    self.ring
                        .submit()
                        .map_err(|e| self.read_error(spec.offset, e))?;
                    // SAFETY: as above.
                    unsafe { self.ring.submission().push(&entry) }.map_err(|_| {
                        self.read_error(
                            spec.offset,
                            std::io::Error::other("io_uring submission queue full"),
                        )
                    })?;
                }
                next_submit += 1;
                queued = true;
            }
            // Start what was queued (reads must not wait for the next wait).
            if queued {
                self.ring.submit().map_err(|e| self.read_error(0, e))?;
                queued = false;
            }
            // Wait for at least one completion unless the next block is already done.
            if !done.contains_key(&next_deliver) {
                self.ring
                    .submit_and_wait(1)
                    .map_err(|e| self.read_error(0, e))?;
            }
            self.reap(in_flight, &mut done, None)?;
            // Deliver in order.
            while let Some((mut f, got, mut seen)) = done.remove(&next_deliver) {
                let mut got = got;
                if got < f.spec.data_len && got < f.read_len {
                    // Short read not explained by the end of the image: finish it synchronously.
                    let at = f.spec.offset + got as u64;
                    let more = match pread_full(
                        &self.file,
                        at,
                        &mut f.buf.as_mut_slice()[got..f.read_len],
                    ) {
                        Err(e) if super::unreadable(&e) => self
                            .media
                            .read_at(at, &mut f.buf.as_mut_slice()[got..f.spec.data_len]),
                        r => r,
                    }
                    .map_err(|e| self.read_error(at, e))?;
                    got += more;
                    seen = Instant::now();
                }
                if got < f.spec.data_len {
                    return Err(SourceError::Truncated {
                        path: self.path.clone(),
                        offset: f.spec.offset,
                        expected: f.spec.data_len,
                        got,
                    });
                }
                next_deliver += 1;
                let handing_over = Instant::now();
                if !deliver(Block::pooled(f.spec, f.buf, f.since, seen)) {
                    return Ok(());
                }
                // Reads that completed while the consumer held us up are
                // timed as ending when that began (a lower bound): the
                // reader could not see them sooner.
                self.reap(in_flight, &mut done, Some(handing_over))?;
            }
        }
        Ok(())
    }

    /// Moves the completions already posted from `in_flight` to `done`,
    /// timed now, or at `at_most` (but not before their submission).
    fn reap(
        &mut self,
        in_flight: &mut BTreeMap<u64, InFlight>,
        done: &mut Completed,
        at_most: Option<Instant>,
    ) -> Result<(), SourceError> {
        let completions: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        let now = Instant::now();
        for (idx, res) in completions {
            let Some(f) = in_flight.remove(&idx) else {
                continue;
            };
            let seen = at_most.map_or(now, |t| t.clamp(f.since, now));
            if res < 0 {
                let e = std::io::Error::from_raw_os_error(-res);
                if !super::unreadable(&e) {
                    return Err(self.read_error(f.spec.offset, e));
                }
                // Bad sectors: read the block again through the medium,
                // which zero-fills and records them.
                let mut f = f;
                let n = f.spec.data_len;
                let got = self
                    .media
                    .read_at(f.spec.offset, &mut f.buf.as_mut_slice()[..n])
                    .map_err(|e| self.read_error(f.spec.offset, e))?;
                done.insert(idx, (f, got, seen));
                continue;
            }
            done.insert(idx, (f, res as usize, seen));
        }
        Ok(())
    }

    /// Waits for outstanding reads before their buffers can be released.
    fn drain(&mut self, mut in_flight: BTreeMap<u64, InFlight>) -> Result<(), SourceError> {
        while !in_flight.is_empty() {
            self.ring
                .submit_and_wait(1)
                .map_err(|e| self.read_error(0, e))?;
            let ids: Vec<u64> = self.ring.completion().map(|c| c.user_data()).collect();
            for id in ids {
                in_flight.remove(&id);
            }
        }
        Ok(())
    }
}
