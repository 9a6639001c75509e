//! `--free-space-only` on images built by `corpora/mkimage.py`: every file
//! the whole-image carving recovers exactly whose truth status is deleted
//! or unallocated is recovered exactly by the free-space carving too; no
//! file the file system still allocates is written; audit.txt counts the
//! header hits skipped and the bytes allocated; run.json records the option
//! (a resume must ask for it too). An image without a file system is carved
//! whole, with a warning.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

fn files(out: &Path) -> Vec<Value> {
    common::report_records(out)
        .into_iter()
        .filter(|v| v.get("record").is_none())
        .collect()
}

fn truth(img: &Path) -> Vec<Value> {
    let p = img.with_extension("img.truth.json");
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("truth")).expect("json");
    t["files"].as_array().expect("files").clone()
}

/// The truth file `t` recovered exactly (its sha256 at its first offset) in `files`.
fn exact<'a>(files: &'a [Value], t: &Value) -> Option<&'a Value> {
    let start = t["fragments"][0][0].as_u64()?;
    files
        .iter()
        .find(|f| f["sha256"] == t["sha256"] && f["offset"].as_u64() == Some(start))
}

fn check(fs: &str, seed: u32) {
    let d = tempfile::tempdir().unwrap();
    let seed_s = seed.to_string();
    let Some(img) = common::mkimage(
        d.path(),
        "disk.img",
        &["--fs", fs, "--size", "64MiB", "--seed", &seed_s],
    ) else {
        return;
    };
    let (whole_dir, free_dir) = (d.path().join("whole"), d.path().join("free"));
    let whole = common::carve_report(&img, &whole_dir, &["--engine", "cpu"]);
    let o = common::carve_ok(&img, &free_dir, &["--engine", "cpu", "--free-space-only"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !stderr.contains("no file system with an allocation map"),
        "{stderr}"
    );
    let free = files(&free_dir);
    let truth = truth(&img);

    // (a) Deleted and unallocated files: the free-space run recovers what the whole run does.
    let (mut kept, mut lost) = (0, Vec::new());
    for t in truth.iter().filter(|t| t["status"] != "allocated") {
        if exact(&whole, t).is_some() {
            match exact(&free, t) {
                Some(_) => kept += 1,
                None => lost.push(t["name"].clone()),
            }
        }
    }
    assert!(lost.is_empty(), "{fs} seed {seed}: lost {lost:?}");
    assert!(
        kept >= 5,
        "{fs} seed {seed}: only {kept} free files checked"
    );

    // (b) No allocated file written (by offset, or by content unless a
    // free file has the same content).
    let free_shas: BTreeSet<String> = truth
        .iter()
        .filter(|t| t["status"] != "allocated")
        .map(|t| t["sha256"].to_string())
        .collect();
    let written: Vec<&Value> = free.iter().filter(|f| f["path"].is_string()).collect();
    let mut allocated_checked = 0;
    for t in truth.iter().filter(|t| t["status"] == "allocated") {
        let start = t["fragments"][0][0].as_u64().expect("fragment");
        allocated_checked += usize::from(exact(&whole, t).is_some());
        let hit = written.iter().find(|f| {
            f["offset"].as_u64() == Some(start)
                || (f["sha256"] == t["sha256"] && !free_shas.contains(&t["sha256"].to_string()))
        });
        assert!(
            hit.is_none(),
            "{fs} seed {seed}: allocated {} written: {hit:?}",
            t["name"]
        );
    }
    assert!(
        allocated_checked >= 5,
        "{fs}: only {allocated_checked} allocated files"
    );
    assert!(free.iter().all(|f| f["alloc"] != "allocated"));
    assert!(
        free.len() < whole.len(),
        "{} vs {}",
        free.len(),
        whole.len()
    );

    // (c) The audit's line; run.json's option.
    let audit = std::fs::read_to_string(free_dir.join("audit.txt")).expect("audit");
    let line = audit
        .lines()
        .find(|l| l.starts_with("free space only: "))
        .unwrap_or_else(|| panic!("no free-space line:\n{audit}"));
    assert!(
        line.contains("header hits in allocated clusters skipped, ")
            && line.contains(" bytes of the image allocated (")
            && !line.starts_with("free space only: 0 "),
        "{line}"
    );
    let whole_audit = std::fs::read_to_string(whole_dir.join("audit.txt")).expect("audit");
    assert!(!whole_audit.contains("free space only"));
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(free_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["free_space_only"], true);
    // Resuming the free-space carving as a whole-image one is refused.
    let o = common::carve_cmd(&img, &free_dir)
        .args(["--engine", "cpu", "--resume"])
        .output()
        .expect("gpucarve");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--free-space-only"));
    eprintln!("{fs} seed {seed}: {kept} free files kept, {line}");
}

#[test]
fn fat32_free_space_only() {
    check("fat32", 3);
}

#[test]
fn ext4_free_space_only() {
    check("ext4", 4);
}

#[test]
fn ntfs_free_space_only() {
    check("ntfs", 5);
}

#[test]
fn without_a_file_system_the_whole_image_is_carved() {
    let d = tempfile::tempdir().unwrap();
    let Some(img) = common::raw_image(d.path(), "raw.img", "16MiB", 5) else {
        return;
    };
    let (whole_dir, free_dir) = (d.path().join("whole"), d.path().join("free"));
    let whole = common::carve_report(&img, &whole_dir, &["--engine", "cpu"]);
    let o = common::carve_ok(&img, &free_dir, &["--engine", "cpu", "--free-space-only"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        stderr
            .matches("--free-space-only: no file system with an allocation map found; the whole image is carved")
            .count(),
        1,
        "{stderr}"
    );
    let key = |v: &Vec<Value>| -> Vec<String> {
        v.iter()
            .filter(|f| f.get("record").is_none())
            .map(|f| {
                format!(
                    "{} {} {} {}",
                    f["offset"], f["status"], f["sha256"], f["path"]
                )
            })
            .collect()
    };
    assert_eq!(key(&whole), key(&files(&free_dir)));
    assert!(!whole.is_empty());
    let audit = std::fs::read_to_string(free_dir.join("audit.txt")).expect("audit");
    assert!(
        audit.contains("free space only: no file system with an allocation map found"),
        "{audit}"
    );
}
