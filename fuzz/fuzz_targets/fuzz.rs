//! The libFuzzer entry point: one binary, the target named by
//! `GPUCARVE_FUZZ_TARGET` (see `fuzz/README.md`, `fuzz/run.sh`).
#![no_main]

#[path = "../targets.rs"]
mod targets;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::OnceLock;

/// Any single allocation above this is a finding (allocation without bound).
const MAX_ALLOC: usize = 256 << 20;

/// The system allocator, aborting with a message on an allocation over
/// [`MAX_ALLOC`] (libFuzzer's own `-malloc_limit_mb` needs a sanitizer).
struct Capped;

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
        // libFuzzer reports as a crash with the input saved.
        let msg = b"gpucarve-fuzz: single allocation over 256 MiB\n";
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

static TARGET: OnceLock<&'static targets::Target> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let t = TARGET.get_or_init(|| {
        let name = std::env::var("GPUCARVE_FUZZ_TARGET").unwrap_or_default();
        match targets::find(&name) {
            Some(t) => {
                let_guarded_panics_unwind();
                t
            }
            None => {
                eprintln!(
                    "GPUCARVE_FUZZ_TARGET={name:?}: not a target; one of: {}",
                    targets::names().join(" ")
                );
                std::process::exit(2)
            }
        }
    });
    (t.run)(data);
});

/// Panics raised inside the ewf crate (E01 reading) unwind, as they do in
/// gpucarve itself, where `guarded` (`src/source/ewf.rs`) catches them at
/// every call into the crate and reads the chunk as damage; every other
/// panic still goes to libFuzzer's hook, which aborts: a finding. Without
/// this the build stopped `source_open` at each hit of the crate's known
/// chunk-table panics (which are not gpucarve's bugs). A panic in the crate
/// that no guard catches still ends as a crash: libfuzzer-sys aborts on any
/// panic leaving the target.
fn let_guarded_panics_unwind() {
    let libfuzzer_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_ewf = info
            .location()
            .is_some_and(|l| l.file().replace('\\', "/").contains("/ewf-"));
        if !in_ewf {
            libfuzzer_hook(info);
        }
    }));
}
