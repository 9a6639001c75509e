//! Helpers shared by the end-to-end tests.

#![allow(dead_code)]

pub mod badfs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `gpucarve` binary built for these tests.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpucarve"))
}

/// Runs gpucarve with `args`, returning its output.
pub fn run(args: &[&str]) -> Output {
    bin()
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run gpucarve: {e}"))
}

/// True when CI demands that optional inputs (sample images, a Vulkan device) exist.
pub fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// The real third-party drive images from Debian's forensics-samples packages,
/// decompressed into `dir`. Empty when the packages are absent; panics when
/// `GPUCARVE_REQUIRE_SAMPLES=1` and they are absent.
pub fn forensic_sample_images(dir: &Path) -> Vec<PathBuf> {
    let src = Path::new("/usr/share/forensics-samples");
    let mut out = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(src)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "xz"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for xz in names {
        let name = xz
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dest = dir.join(&name);
        let data = Command::new("xz")
            .arg("-dc")
            .arg(&xz)
            .output()
            .unwrap_or_else(|e| panic!("xz: {e}"));
        assert!(data.status.success(), "xz -dc {} failed", xz.display());
        std::fs::write(&dest, &data.stdout).unwrap_or_else(|e| panic!("{e}"));
        out.push(dest);
    }
    if out.is_empty() {
        assert!(
            !required("GPUCARVE_REQUIRE_SAMPLES"),
            "GPUCARVE_REQUIRE_SAMPLES=1 but /usr/share/forensics-samples/*.xz is missing (apt-get install forensics-samples-all)"
        );
        eprintln!("note: forensics-samples-* not installed; real-image checks not run");
    }
    out
}

/// The original files behind the forensics-samples images (for exact-recovery checks).
pub fn forensic_sample_originals() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::from("/usr/share/forensics-samples/original-files")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Lowercase hex sha256 of bytes.
pub fn sha256(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
