//! Replays every committed fuzz input (fuzz/corpus/TARGET/*, the minimised
//! corpora, and fuzz/regressions/TARGET/*, the inputs that once crashed,
//! hung or allocated without bound) through the same target functions the
//! fuzzer runs (`fuzz/targets.rs`), on stable Rust, in `cargo test`. No
//! fuzzing: a fast check that no parser regressed on any input the fuzzer
//! ever kept. Fails on a panic, on an input slower than the time limit, and
//! (through the allocator of `fuzz/capped.rs`) aborts on any single allocation over
//! 256 MiB.

#[path = "../fuzz/targets.rs"]
mod targets;

/// The fuzzer's global allocator: aborts on any single allocation over 256 MiB.
#[path = "../fuzz/capped.rs"]
mod capped;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The fuzzer's hang limit is 1 s (release build, one core); here the
/// machine may be loaded by other tests, so an input must stay under 20 s.
const SLOW: Duration = Duration::from_secs(20);

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn every_target_has_a_corpus_and_every_corpus_a_target() {
    let names = targets::names();
    for n in &names {
        let c = inputs(&fuzz_dir().join("corpus").join(n));
        assert!(!c.is_empty(), "fuzz/corpus/{n} is empty or missing");
    }
    for sub in ["corpus", "regressions"] {
        for e in std::fs::read_dir(fuzz_dir().join(sub)).unwrap().flatten() {
            if !e.path().is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                names.contains(&name.as_str()),
                "fuzz/{sub}/{name} is not a fuzz target"
            );
        }
    }
}

#[test]
fn committed_inputs_replay_cleanly() {
    let mut failures = Vec::new();
    let mut count = 0usize;
    for t in targets::all() {
        for sub in ["corpus", "regressions"] {
            for p in inputs(&fuzz_dir().join(sub).join(t.name)) {
                let data = std::fs::read(&p).unwrap();
                if std::env::var_os("FUZZ_REPLAY_VERBOSE").is_some() {
                    eprintln!("{}", p.display()); // which input, should one abort
                }
                let t0 = Instant::now();
                let r = std::panic::catch_unwind(|| (t.run)(&data));
                let took = t0.elapsed();
                count += 1;
                if r.is_err() {
                    failures.push(format!("{}: panicked", p.display()));
                } else if took > SLOW {
                    failures.push(format!("{}: took {took:?}", p.display()));
                }
            }
        }
    }
    assert!(count >= targets::names().len(), "only {count} inputs");
    assert!(
        failures.is_empty(),
        "{} of {count} inputs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("replayed {count} fuzz inputs");
}
