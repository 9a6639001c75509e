//! A heap buffer aligned to a page, as `O_DIRECT` requires.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::NonNull;

use super::DIRECT_ALIGN;

/// A zero-initialised, [`DIRECT_ALIGN`]-aligned byte buffer of fixed size.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Box<[u8]>); moving it
// between threads moves that ownership.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give out `&[u8]`, which is Sync.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    fn layout(len: usize) -> Layout {
        // DIRECT_ALIGN is a power of two and len is bounded by the pool's size,
        // so this cannot fail for the sizes the pool asks for.
        Layout::from_size_align(len.max(1), DIRECT_ALIGN)
            .unwrap_or_else(|_| handle_alloc_error(Layout::new::<u8>()))
    }

    /// Allocates `len` zeroed bytes.
    pub fn new(len: usize) -> AlignedBuf {
        let layout = Self::layout(len);
        // SAFETY: the layout has non-zero size (len.max(1)).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len }
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
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligned_and_zeroed() {
        let mut b = super::AlignedBuf::new(10_000);
        assert_eq!(b.as_slice().as_ptr() as usize % super::DIRECT_ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[9_999] = 7;
        assert_eq!(b.as_slice()[9_999], 7);
    }
}
