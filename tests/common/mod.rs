//! Helpers shared by the end-to-end tests.

#![allow(dead_code)]

pub mod badfs;
pub mod source_tree;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `gpucarve` binary built for these tests.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpucarve"))
}

/// `gpucarve carve IMAGE -o OUT -q`, to add to.
pub fn carve_cmd(image: &Path, out: &Path) -> Command {
    let mut c = bin();
    c.args([
        "carve",
        image.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "-q",
    ]);
    c
}

/// `gpucarve carve IMAGE -o OUT -q EXTRA...`, which must succeed (the test
/// fails with its stderr otherwise): its output.
pub fn carve_ok(image: &Path, out: &Path, extra: &[&str]) -> Output {
    let o = carve_cmd(image, out)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run gpucarve: {e}"));
    assert!(
        o.status.success(),
        "carve {} {extra:?}: {}",
        image.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The records of `dir/report.jsonl`, one a line.
pub fn report_records(dir: &Path) -> Vec<serde_json::Value> {
    let path = dir.join("report.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// [`carve_ok`], then the carving's report records.
pub fn carve_report(image: &Path, out: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
    carve_ok(image, out, extra);
    report_records(out)
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
        out.push(unxz(&xz, dir.join(&name)));
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

/// One of the forensics-samples images (`fs.vfat`, `fs.ntfs`...),
/// decompressed into `dir`: `None` when the packages are absent; panics
/// when `GPUCARVE_REQUIRE_SAMPLES=1` and it is absent.
pub fn forensic_sample_image(dir: &Path, name: &str) -> Option<PathBuf> {
    let xz = Path::new("/usr/share/forensics-samples").join(format!("{name}.xz"));
    if !xz.exists() {
        assert!(
            !required("GPUCARVE_REQUIRE_SAMPLES"),
            "GPUCARVE_REQUIRE_SAMPLES=1 but {} is missing (apt-get install forensics-samples-all)",
            xz.display()
        );
        eprintln!("note: {} not installed; check not run", xz.display());
        return None;
    }
    Some(unxz(&xz, dir.join(name)))
}

/// Decompresses `xz` into `dest`.
fn unxz(xz: &Path, dest: PathBuf) -> PathBuf {
    let data = Command::new("xz")
        .arg("-dc")
        .arg(xz)
        .output()
        .unwrap_or_else(|e| panic!("xz: {e}"));
    assert!(data.status.success(), "xz -dc {} failed", xz.display());
    std::fs::write(&dest, &data.stdout).unwrap_or_else(|e| panic!("{e}"));
    dest
}

/// Every file under `dir` (recursively), sorted; unreadable folders are skipped.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
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

/// The original files behind the forensics-samples images (for exact-recovery checks).
pub fn forensic_sample_originals() -> Vec<PathBuf> {
    files_under(Path::new("/usr/share/forensics-samples/original-files"))
}

/// Lowercase hex sha256 of bytes.
pub fn sha256(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A raw drive image with known content (`corpora/mkimage.py --fs raw`) as
/// `dir/name`; None with a note where it cannot be built (python3 missing),
/// a failure under `GPUCARVE_REQUIRE_SAMPLES=1`.
pub fn raw_image(dir: &Path, name: &str, size: &str, seed: u32) -> Option<PathBuf> {
    let seed = seed.to_string();
    mkimage(dir, name, &["--fs", "raw", "--size", size, "--seed", &seed])
}

/// `corpora/mkimage.py ARGS --out dir/name --quiet`; None with a note where
/// it cannot be built (python3 or the mkfs tools missing), a failure under
/// `GPUCARVE_REQUIRE_SAMPLES=1`.
pub fn mkimage(dir: &Path, name: &str, args: &[&str]) -> Option<PathBuf> {
    let out = dir.join(name);
    let o = Command::new("python3")
        .arg("corpora/mkimage.py")
        .args(args)
        .arg("--quiet")
        .arg("--out")
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    match o {
        Ok(o) if o.status.success() => Some(out),
        other => {
            assert!(
                !required("GPUCARVE_REQUIRE_SAMPLES"),
                "corpora/mkimage.py {args:?} failed: {other:?}"
            );
            eprintln!("note: cannot build an image here ({other:?}); check not run");
            None
        }
    }
}

/// [`mkimage`], with the truth file it writes beside the image
/// (`NAME.truth.json`).
pub fn mkimage_with_truth(
    dir: &Path,
    name: &str,
    args: &[&str],
) -> Option<(PathBuf, serde_json::Value)> {
    let img = mkimage(dir, name, args)?;
    let text = std::fs::read_to_string(dir.join(format!("{name}.truth.json"))).expect("truth");
    Some((img, serde_json::from_str(&text).expect("truth json")))
}

/// report.xml without what differs between two runs of the same carving: the
/// resource usage (`rusage`), the command line and the start time.
pub fn dfxml_sans_run(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        text.contains("<rusage>") && text.contains("<clocktime>"),
        "{}: no rusage",
        path.display()
    );
    let mut out = Vec::new();
    let mut in_rusage = false;
    for l in text.lines() {
        in_rusage |= l.contains("<rusage>");
        if !in_rusage && !l.contains("<command_line>") && !l.contains("<start_time>") {
            out.push(l);
        }
        in_rusage &= !l.contains("</rusage>");
    }
    out.join("\n")
}

/// `sh -c CMD` in `dir`: true when it ran and exited 0.
pub fn sh(cmd: &str, dir: &Path) -> bool {
    Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .status()
        .is_ok_and(|s| s.success())
}

/// `ewfacquire ARGS` (Debian ewf-tools) in `dir`, quietly: true when it made
/// the set; false with a note where the tool is missing, a failure under
/// `GPUCARVE_REQUIRE_SAMPLES=1` (CI installs it).
pub fn ewfacquire(args: &str, dir: &Path) -> bool {
    if sh(
        &format!("ewfacquire {args} </dev/null >/dev/null 2>&1"),
        dir,
    ) {
        return true;
    }
    assert!(
        !required("GPUCARVE_REQUIRE_SAMPLES"),
        "ewfacquire {args} failed: ewf-tools is required in CI for the E01 checks"
    );
    eprintln!("SKIPPED (not run): ewfacquire unavailable or failed: {args}");
    false
}

/// report.xml (or any DFXML file) against the DFXML working group's schema,
/// when `xmllint` is installed (required with `GPUCARVE_REQUIRE_TOOLS=1`).
pub fn assert_valid_dfxml(file: &Path) {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dfxml_schema/dfxml.xsd");
    match Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&schema)
        .arg(file)
        .output()
    {
        Ok(o) => assert!(
            o.status.success(),
            "{} does not validate:\n{}",
            file.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            assert!(
                !required("GPUCARVE_REQUIRE_TOOLS"),
                "GPUCARVE_REQUIRE_TOOLS=1 but xmllint is missing: {e}"
            );
            eprintln!("note: xmllint is not installed; report.xml not validated");
        }
    }
}
