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
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;

use super::buffered::{BufferedReader, fill_block, pread_full};
use super::{
    AlignedBuf, Block, BlockPlan, BlockReader, BufferPool, DIRECT_ALIGN, Delivery, Image,
    SourceError,
};

/// Opens the plain file behind `image` again with `O_DIRECT`, and checks
/// that an aligned read works. A container whose bytes are decoded (E01,
/// split raw) has no such file: an error, so the caller reads buffered.
pub(crate) fn open_direct(image: &Image) -> std::io::Result<File> {
    let file = reopen(image, libc::O_DIRECT)?;
    let mut probe = AlignedBuf::new(DIRECT_ALIGN);
    pread_full(&file, 0, probe.as_mut_slice())?;
    Ok(file)
}

/// A new open file description of the one plain file behind `image` (a raw
/// file or device, or the unlinked spool of a gzip image or of standard
/// input), with `flags`: through `/proc/self/fd`, so the spool is reached
/// too, never the container's own bytes.
pub(crate) fn reopen(image: &Image, flags: i32) -> std::io::Result<File> {
    let Some(file) = image.raw_file() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!(
                "{} is decoded, not read as it lies on the disk",
                image.media().describe()
            ),
        ));
    };
    OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// The `direct` backend, or `buffered` with a warning where `O_DIRECT` is refused.
pub fn open(
    image: &Image,
    warn: &mut dyn FnMut(String),
) -> Result<Box<dyn BlockReader>, SourceError> {
    if image.raw_file().is_none() {
        warn(format!(
            "{}: O_DIRECT reads a plain file; this image ({}) is decoded: buffered reads",
            image.path().display(),
            image.media().describe()
        ));
        return Ok(Box::new(BufferedReader::new(image)));
    }
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
