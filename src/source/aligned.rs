//! A heap buffer aligned to a page, as `O_DIRECT` requires.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::NonNull;

use super::DIRECT_ALIGN;

/// A zero-initialised, page-aligned byte buffer of fixed size.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

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
        // SAFETY: the layout has non-zero size (len.max(1)).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        Some(AlignedBuf { ptr, len, align })
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
        // SAFETY: ptr is valid for len initialised (zeroed) bytes for our lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
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
}
