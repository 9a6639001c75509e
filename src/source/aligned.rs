//! A heap buffer aligned to a page, as `O_DIRECT` requires.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::NonNull;

use super::DIRECT_ALIGN;

/// A zero-initialised, page-aligned byte buffer of fixed size.
///
/// Large buffers (1 MiB or more, aligned to a page) are anonymous mappings:
/// the kernel hands out zeroed pages as they are first touched, instead of
/// the allocator zeroing every byte up front (the scan's block buffers: 25
/// ms of every carving's start, tens of MiB memset even when the image is a
/// few KiB). Huge pages were tried: half the faults, but more time zeroing
/// them.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
    /// The mapping that holds the bytes, for a large buffer.
    map: Option<memmap2::MmapMut>,
}

/// Buffers of this many bytes or more are anonymous mappings.
pub const MAPPED_FROM: usize = 1 << 20;

// SAFETY: AlignedBuf owns its allocation exclusively (like Box<[u8]>); moving it
// between threads moves that ownership.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give out `&[u8]`, which is Sync.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes aligned to [`DIRECT_ALIGN`].
    pub fn new(len: usize) -> AlignedBuf {
        match AlignedBuf::with_alignment(len, DIRECT_ALIGN) {
            Some(b) => b,
            // DIRECT_ALIGN is a power of two; only an absurd `len` (past
            // isize::MAX) gets here, which no allocator could serve anyway.
            None => handle_alloc_error(Layout::new::<u8>()),
        }
    }

    /// Allocates `len` zeroed bytes aligned to `align` (a power of two of at
    /// least [`DIRECT_ALIGN`]); `None` for an impossible alignment or size.
    pub fn with_alignment(len: usize, align: usize) -> Option<AlignedBuf> {
        if align < DIRECT_ALIGN {
            return None;
        }
        let layout = Layout::from_size_align(len.max(1), align).ok()?;
        if len >= MAPPED_FROM
            && align == DIRECT_ALIGN
            && let Ok(mut map) = memmap2::MmapMut::map_anon(len)
            && let Some(ptr) = NonNull::new(map.as_mut_ptr())
            && (ptr.as_ptr() as usize).is_multiple_of(align)
        {
            return Some(AlignedBuf {
                ptr,
                len,
                align,
                map: Some(map),
            });
        }
        // SAFETY: the layout has non-zero size (len.max(1)).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        Some(AlignedBuf {
            ptr,
            len,
            align,
            map: None,
        })
    }

    fn layout(&self) -> Layout {
        // Checked when the buffer was allocated.
        Layout::from_size_align(self.len.max(1), self.align)
            .unwrap_or_else(|_| handle_alloc_error(Layout::new::<u8>()))
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes for our
        // lifetime (the allocation, or the mapping `map` holds: moving the
        // MmapMut does not move its pages).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.map.is_some() {
            // The mapping unmaps itself.
            return;
        }
        // SAFETY: allocated in `with_alignment` with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout()) }
    }
}

impl super::BlockMemory for AlignedBuf {
    fn as_slice(&self) -> &[u8] {
        AlignedBuf::as_slice(self)
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        AlignedBuf::as_mut_slice(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let mut b = AlignedBuf::new(10_000);
        assert_eq!(b.as_slice().as_ptr() as usize % DIRECT_ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[9_999] = 7;
        assert_eq!(b.as_slice()[9_999], 7);
        let big = AlignedBuf::with_alignment(5, 1 << 16).unwrap();
        assert_eq!(big.as_slice().as_ptr() as usize % (1 << 16), 0);
        assert_eq!(big.len(), 5);
        assert!(AlignedBuf::with_alignment(5, 512).is_none());
        assert!(AlignedBuf::with_alignment(5, 3 * DIRECT_ALIGN).is_none());
    }

    #[test]
    fn large_buffers_are_mapped_aligned_and_zeroed() {
        let mut b = AlignedBuf::new(MAPPED_FROM + 4096);
        assert!(b.map.is_some());
        assert_eq!(b.as_slice().as_ptr() as usize % DIRECT_ALIGN, 0);
        assert_eq!(b.len(), MAPPED_FROM + 4096);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[MAPPED_FROM + 4095] = 9;
        let moved = b;
        assert_eq!(moved.as_slice()[MAPPED_FROM + 4095], 9);
        // A stricter alignment than a page stays on the heap.
        let strict = AlignedBuf::with_alignment(MAPPED_FROM, 1 << 16).unwrap();
        assert!(strict.map.is_none());
        assert_eq!(strict.as_slice().as_ptr() as usize % (1 << 16), 0);
    }
}
