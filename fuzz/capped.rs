//! The capped global allocator: the system allocator, aborting with a
//! message on any single allocation over [`MAX_ALLOC`] (libFuzzer's own
//! `-malloc_limit_mb` needs a sanitizer). Included by path, like
//! `targets.rs`, into the libFuzzer binary (`fuzz/fuzz_targets/fuzz.rs`) and
//! the replay test (`tests/fuzz_replay.rs`), each of which it becomes the
//! global allocator of: an allocation without bound is a finding in both.

use std::alloc::{GlobalAlloc, Layout, System};

/// Any single allocation above this is a finding (allocation without bound).
pub const MAX_ALLOC: usize = 256 << 20;

/// The system allocator with the size check.
pub struct Capped;

// SAFETY: every call is forwarded unchanged to the system allocator; the
// only addition is the size check, which aborts before allocating.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        check(l.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `System` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        check(l.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        check(new);
        // SAFETY: `p` came from `System` with layout `l`.
        unsafe { System.realloc(p, l, new) }
    }
}

fn check(size: usize) {
    if size > MAX_ALLOC {
        // No allocation here: write(2) a fixed message and abort, which
        // libFuzzer reports as a crash with the input saved, and which ends
        // the replay test's binary (CI fails).
        let msg = b"capped allocator: single allocation over 256 MiB\n";
        // SAFETY: writing a static buffer to stderr.
        unsafe { libc_write(2, msg.as_ptr(), msg.len()) };
        std::process::abort();
    }
}

unsafe extern "C" {
    #[link_name = "write"]
    fn libc_write(fd: i32, buf: *const u8, n: usize) -> isize;
}

#[global_allocator]
static ALLOC: Capped = Capped;
