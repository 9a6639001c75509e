//! The libFuzzer entry point: one binary, the target named by
//! `GPUCARVE_FUZZ_TARGET` (see `fuzz/README.md`, `fuzz/run.sh`).
#![no_main]

#[path = "../targets.rs"]
mod targets;

/// The global allocator: aborts on any single allocation over 256 MiB.
#[path = "../capped.rs"]
mod capped;

use std::sync::OnceLock;

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
