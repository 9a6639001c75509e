//! The corpus tools the figures rest on: `corpora/mkimage.py` builds the
//! same image twice from one seed, and `corpora/score.py` classifies a
//! made-up carver output (exact, partial, overlong, decoy, duplicate, junk;
//! `--broken` counting intact files apart) as it should. Their own self-test,
//! `corpora/selftest.py`, checks both; a score the tests and BENCHMARKS.md
//! quote is only as good as it.

use std::path::Path;
use std::process::Command;

#[test]
fn mkimage_and_score_pass_their_self_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("corpora/selftest.py"))
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "corpora/selftest.py failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(" passed, 0 failed"), "{text}");
}
