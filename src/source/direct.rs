//! `O_DIRECT`: reads bypass the page cache, straight into aligned buffers.
//!
//! Offsets, lengths and buffer addresses must be multiples of the logical
//! sector size; we align everything to [`DIRECT_ALIGN`] (4 KiB). Block offsets
//! are multiples of the block size (itself a multiple of 4 KiB); each read is
//! rounded *up* to 4 KiB, and the kernel returns a short read at the end of
//! the image, so a final partial block whose size is not a multiple of the
//! sector size is read correctly. Where the filesystem refuses `O_DIRECT`
//! (tmpfs, some FUSE and network filesystems), [`open`] warns and falls back
//! to the buffered backend.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::buffered::{BufferedReader, fill_block, pread_full};
use super::{
    AlignedBuf, Block, BlockPlan, BlockReader, BufferPool, DIRECT_ALIGN, Delivery, Image,
    SourceError,
};

/// Opens `image` again with `O_DIRECT`, and checks that an aligned read works.
pub(crate) fn open_direct(image: &Image) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(image.path())?;
    let mut probe = AlignedBuf::new(DIRECT_ALIGN);
    pread_full(&file, 0, probe.as_mut_slice())?;
    Ok(file)
}

/// The `direct` backend, or `buffered` with a warning where `O_DIRECT` is refused.
pub fn open(
    image: &Image,
    warn: &mut dyn FnMut(String),
) -> Result<Box<dyn BlockReader>, SourceError> {
    match open_direct(image) {
        Ok(file) => Ok(Box::new(DirectReader {
            file,
            media: image.media(),
            path: image.path().to_path_buf(),
        })),
        Err(e) => {
            warn(format!(
                "{}: O_DIRECT refused ({e}); falling back to buffered reads",
                image.path().display()
            ));
            Ok(Box::new(BufferedReader::new(image)))
        }
    }
}

/// The `direct` backend.
pub struct DirectReader {
    file: File,
    /// Reads a block again, sector by sector, when the device cannot read it.
    media: std::sync::Arc<dyn super::Media>,
    path: PathBuf,
}

impl BlockReader for DirectReader {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn delivery(&self) -> Delivery {
        Delivery::Direct
    }

    fn read_blocks(
        &mut self,
        plan: &BlockPlan,
        pool: &BufferPool,
        deliver: &mut dyn FnMut(Block) -> bool,
    ) -> Result<(), SourceError> {
        pool.check_fits(plan)?;
        for spec in plan.blocks() {
            let read_len = spec.data_len.next_multiple_of(DIRECT_ALIGN);
            let (file, media) = (&self.file, &self.media);
            let block = fill_block(&self.path, spec, pool, read_len, &mut |b| {
                match pread_full(file, spec.offset, b) {
                    // Bad sectors: through the page cache, sector by
                    // sector; what stays unreadable is zeros, and recorded.
                    Err(e) if super::unreadable(&e) => {
                        media.read_at(spec.offset, &mut b[..spec.data_len])
                    }
                    r => r,
                }
            })?;
            if !deliver(block) {
                break;
            }
        }
        Ok(())
    }
}
