//! Files carved along the layout their file system records: ext2 block maps
//! and ext4 extent trees read from the inode tables, on volumes made by
//! e2fsprogs (`mkfs.ext2`, `mkfs.ext4`, `debugfs`) where a JPEG is
//! fragmented on purpose (small files written, every other one removed, the
//! JPEG written into the holes). The carved JPEG must equal the original
//! byte for byte, in several runs, with the note that says why.
//!
//! Needs e2fsprogs: skipped with a note without it, and FAILS when
//! `GPUCARVE_REQUIRE_TOOLS=1` (CI).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

fn have_e2fsprogs() -> bool {
    let ok = ["mkfs.ext2", "debugfs"].iter().all(|t| {
        Command::new(t)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    });
    if !ok {
        assert!(
            !common::required("GPUCARVE_REQUIRE_TOOLS"),
            "GPUCARVE_REQUIRE_TOOLS=1 but e2fsprogs is missing (apt-get install e2fsprogs)"
        );
        eprintln!("note: e2fsprogs not installed; test not run");
    }
    ok
}

/// A 16 MiB volume of `mkfs` (1 KiB blocks) holding `jpeg` as `big.jpg`,
/// fragmented: 40 files of 20 000 bytes written, every other one removed,
/// then the JPEG written.
fn fragmented_volume(dir: &Path, mkfs: &str, extra: &[&str], jpeg: &Path) -> std::path::PathBuf {
    let img = dir.join(format!("{mkfs}.img"));
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(16 << 20).unwrap();
    drop(f);
    let st = Command::new(mkfs)
        .args(["-q", "-F", "-b", "1024"])
        .args(extra)
        .arg(&img)
        .status()
        .unwrap();
    assert!(st.success(), "{mkfs} failed");
    let small = dir.join("small.bin");
    std::fs::write(
        &small,
        (0..20_000u32)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let mut script = String::new();
    for i in 1..=40 {
        script += &format!("write {} s{i}\n", small.display());
    }
    for i in (1..=40).step_by(2) {
        script += &format!("rm s{i}\n");
    }
    script += &format!("write {} big.jpg\n", jpeg.display());
    let mut child = Command::new("debugfs")
        .arg("-w")
        .arg(&img)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "debugfs failed");
    img
}

#[test]
fn ext_inodes_give_the_layout_of_fragmented_files() {
    if !have_e2fsprogs() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let jpeg = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples/d-debian.jpg");
    let original = std::fs::read(&jpeg).unwrap();
    // ext2: block map with an indirect block; ext4: an extent tree with an
    // index node (more than four extents).
    for (mkfs, extra) in [
        ("mkfs.ext2", &[][..]),
        ("mkfs.ext4", &["-O", "^has_journal"][..]),
    ] {
        let img = fragmented_volume(dir.path(), mkfs, extra, &jpeg);
        let out = dir.path().join(format!("{mkfs}-out"));
        let report = common::carve_report(&img, &out, &[]);
        let entry = report
            .iter()
            .find(|r| r["length"] == original.len() as u64 && r["type"] == "jpeg")
            .unwrap_or_else(|| panic!("{mkfs}: no JPEG of the original's size:\n{report:#?}"));
        assert_eq!(entry["status"], "complete", "{mkfs}: {entry}");
        assert!(
            entry["byte_runs"].as_array().unwrap().len() >= 3,
            "{mkfs}: not fragmented? {entry}"
        );
        assert!(
            entry["notes"].to_string().contains("ext inode"),
            "{mkfs}: {entry}"
        );
        let carved = std::fs::read(out.join(entry["path"].as_str().unwrap())).unwrap();
        assert!(
            carved == original,
            "{mkfs}: carved JPEG differs from the original"
        );
    }
}

/// NTFS file records: a small volume (`mkntfs`, 4 KiB clusters) filled by
/// `ntfscp` with the samples, largest first, until it is full: ntfs-3g
/// then splits the last files it writes over the holes left (measured:
/// three files in two runs). Every file carved in several runs is a
/// sample byte for byte, carved along its record's runs (the note says
/// so), and at least two are (0 before the records were read).
#[test]
fn ntfs_file_records_give_the_layout_of_fragmented_files() {
    let dir = tempfile::tempdir().unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    let made = common::sh(
        "truncate -s 8M v.img && mkntfs -F -Q -q -c 4096 -s 512 v.img >/dev/null 2>&1",
        dir.path(),
    );
    if !made {
        assert!(
            !common::required("GPUCARVE_REQUIRE_TOOLS"),
            "GPUCARVE_REQUIRE_TOOLS=1 but mkntfs failed (apt-get install ntfs-3g)"
        );
        eprintln!("note: ntfs-3g not installed; test not run");
        return;
    }
    let mut files: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&samples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "MANIFEST.tsv"))
        .map(|p| (std::fs::metadata(&p).unwrap().len(), p))
        .collect();
    files.sort();
    let mut planted = std::collections::HashMap::new();
    for (_, p) in files.iter().rev().take(24) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let copied = Command::new("ntfscp")
            .args(["-q", "v.img"])
            .arg(p)
            .arg(format!("/{name}"))
            .current_dir(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if copied {
            planted.insert(common::sha256(&std::fs::read(p).unwrap()), name);
        }
    }
    assert!(planted.len() > 10, "only {} files copied", planted.len());
    let out = dir.path().join("out");
    let report = common::carve_report(&dir.path().join("v.img"), &out, &["--engine", "cpu"]);
    let mut along = 0;
    for r in &report {
        let runs = r["byte_runs"].as_array().map_or(0, Vec::len);
        if r["status"] != "complete" || runs < 2 {
            continue;
        }
        let sha = r["sha256"].as_str().unwrap_or_default();
        assert!(planted.contains_key(sha), "not a planted file: {r}");
        along += usize::from(r["notes"].to_string().contains("NTFS file record"));
    }
    assert!(
        along >= 2,
        "{along} files carved along NTFS runs:\n{report:#?}"
    );
}
