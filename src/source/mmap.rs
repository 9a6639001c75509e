//! memmap2 with sequential advice: blocks borrow the mapping, no copy at all.
//!
//! A read error under a mapping arrives as SIGBUS rather than an error
//! value, and would kill the process. So each block's pages are faulted in
//! first with `MADV_POPULATE_READ` (Linux 5.14+), which reports an
//! unreadable page as an error instead; such a block is read through the
//! medium instead (sector by sector, bad sectors zero-filled and recorded,
//! as the other backends do). Residual risk: a page evicted between that
//! check and the engine's read, and unreadable by then, still raises SIGBUS.

use std::sync::Arc;

use memmap2::{Advice, Mmap, MmapOptions};

use super::{Block, BlockPlan, BlockReader, BufferPool, Delivery, Image, SourceError};

/// The `mmap` backend.
pub struct MmapReader {
    map: Arc<Mmap>,
    media: Arc<dyn super::Media>,
    path: std::path::PathBuf,
}

impl MmapReader {
    pub fn new(image: &Image) -> Result<MmapReader, SourceError> {
        let len = usize::try_from(image.len())
            .map_err(|_| SourceError::Settings("image too large to map on this platform".into()))?;
        // SAFETY: the mapping is read-only and private to this process. If another
        // process truncates the image while it is mapped, reads past the new end
        // fault (SIGBUS); evidence images are not modified during an examination,
        // and the other backends exist for media where that cannot be guaranteed.
        let file = image
            .raw_file()
            .ok_or_else(|| SourceError::Settings("mmap needs a plain raw file".into()))?;
        let map = unsafe { MmapOptions::new().len(len).map(file) }.map_err(|source| {
            SourceError::Open {
                path: image.path().to_path_buf(),
                source,
            }
        })?;
        // Advice is only a hint; failing to give it changes nothing.
        let _ = map.advise(Advice::Sequential);
        Ok(MmapReader {
            map: Arc::new(map),
            media: image.media(),
            path: image.path().to_path_buf(),
        })
    }
}

impl BlockReader for MmapReader {
    fn name(&self) -> &'static str {
        "mmap"
    }

    fn delivery(&self) -> Delivery {
        Delivery::Mapped
    }

    fn read_blocks(
        &mut self,
        plan: &BlockPlan,
        pool: &BufferPool,
        deliver: &mut dyn FnMut(Block) -> bool,
    ) -> Result<(), SourceError> {
        // Mapped blocks need no buffer from the pool: the bound on blocks in
        // flight comes from the pipeline's bounded queue, and each block drops
        // its pages from the mapping when done (see `Block`'s Drop), so resident
        // memory does not grow with the image.
        for spec in plan.blocks() {
            if (spec.offset as usize).saturating_add(spec.data_len) > self.map.len() {
                return Err(SourceError::Settings(
                    "block beyond the mapped image".into(),
                ));
            }
            let populated =
                self.map
                    .advise_range(Advice::PopulateRead, spec.offset as usize, spec.data_len);
            let block = match populated {
                // A page that cannot be read (EFAULT, EIO, EHWPOISON), or no
                // memory to fault it in now: touching it could raise SIGBUS.
                Err(e) if e.raw_os_error() != Some(libc::EINVAL) => {
                    let media = &self.media;
                    super::buffered::fill_block(&self.path, spec, pool, spec.data_len, &mut |b| {
                        media.read_at(spec.offset, b)
                    })?
                }
                // Older kernels (EINVAL): no check; the mapping as before.
                _ => Block::mapped(spec, Arc::clone(&self.map)),
            };
            if !deliver(block) {
                break;
            }
        }
        Ok(())
    }
}
