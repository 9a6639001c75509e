//! `pread` through the page cache: the simplest backend, and the fallback of the others.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::{Block, BlockPlan, BlockReader, BufferPool, Delivery, Image, SourceError};

/// Reads with positioned reads, retrying short reads and `EINTR`, until `buf`
/// is full or the end of the file is reached. Returns the bytes read.
pub fn pread_full(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Fills a pooled buffer for `spec` with `read` and checks that the image did not shrink.
pub(crate) fn fill_block(
    path: &std::path::Path,
    spec: super::BlockSpec,
    pool: &BufferPool,
    read_len: usize,
    read: &mut dyn FnMut(&mut [u8]) -> std::io::Result<usize>,
) -> Result<Block, SourceError> {
    let mut buf = pool.take();
    let started = std::time::Instant::now();
    let got = read(&mut buf.as_mut_slice()[..read_len]).map_err(|source| SourceError::Read {
        path: path.to_path_buf(),
        offset: spec.offset,
        source,
    })?;
    if got < spec.data_len {
        return Err(SourceError::Truncated {
            path: path.to_path_buf(),
            offset: spec.offset,
            expected: spec.data_len,
            got,
        });
    }
    Ok(Block::pooled(spec, buf, started, std::time::Instant::now()))
}

/// The `buffered` backend: positioned reads through the medium (any container).
pub struct BufferedReader {
    media: std::sync::Arc<dyn super::Media>,
    path: PathBuf,
}

impl BufferedReader {
    pub fn new(image: &Image) -> BufferedReader {
        BufferedReader {
            media: image.media(),
            path: image.path().to_path_buf(),
        }
    }
}

impl BlockReader for BufferedReader {
    fn name(&self) -> &'static str {
        "buffered"
    }

    fn delivery(&self) -> Delivery {
        Delivery::Copied
    }

    fn read_blocks(
        &mut self,
        plan: &BlockPlan,
        pool: &BufferPool,
        deliver: &mut dyn FnMut(Block) -> bool,
    ) -> Result<(), SourceError> {
        for spec in plan.blocks() {
            let media = &self.media;
            let block = fill_block(&self.path, spec, pool, spec.data_len, &mut |b| {
                media.read_at(spec.offset, b)
            })?;
            if !deliver(block) {
                break;
            }
        }
        Ok(())
    }
}

/// Reads the first bytes of a regular file (fewer if it is short).
pub fn head(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let mut b = vec![0u8; 64];
    let n = pread_full(&f, 0, &mut b)?;
    b.truncate(n);
    Ok(b)
}
