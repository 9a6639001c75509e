//! Original names: on ext4 and ext2 images (live directory entries only:
//! at least 90% of the allocated exact files named, with UTC inode times;
//! deleted files unnamed) and on FAT32 images built by `corpora/mkimage.py`, every
//! file recovered exactly (its report.jsonl sha256 the truth's, at the
//! truth's offset) whose directory entry survives (status `allocated`, or
//! `deleted`: `mdel` marks its entries `0xE5`) has `original_name`: the
//! truth's path for allocated files, and for deleted ones the same path
//! where a long name survives, else the 8.3 name with its first character
//! lost (compared without it, case-insensitively). No name is given to a
//! file unless a truth file (allocated or deleted) starts where it does
//! and has that name. On NTFS images (`mkntfs` + `ntfscp`, deleted by
//! clearing the MFT record's in-use flag) every allocated and ≥ 90% of
//! deleted exact files are named by their record's `$FILE_NAME`, with UTC
//! times. report.xml stays valid DFXML; audit.txt counts them.

mod common;

use std::path::Path;

use serde_json::Value;

use common::assert_valid_dfxml;

/// `gpucarve carve IMG -o OUT -q --engine cpu`, which must succeed.
fn carve(img: &Path, out: &Path) {
    common::carve_ok(img, out, &["--engine", "cpu"]);
}

/// The report's file records.
fn jsonl(out: &Path) -> Vec<Value> {
    common::report_records(out)
        .into_iter()
        .filter(|v| v.get("record").is_none())
        .collect()
}

/// The name `got` (a path) is the truth's `want` (a path from the root):
/// whole, or (deleted) all but the first character of its last component.
fn same(got: &str, want: &str, deleted: bool) -> bool {
    let got = got.strip_prefix('/').unwrap_or(got);
    if got == want {
        return true;
    }
    let (gd, gb) = got.rsplit_once('/').unwrap_or(("", got));
    let (wd, wb) = want.rsplit_once('/').unwrap_or(("", want));
    deleted
        && gd.eq_ignore_ascii_case(wd)
        && gb.len() == wb.len()
        && gb
            .get(1..)
            .zip(wb.get(1..))
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
}

/// (allocated named right, allocated exact, deleted named right, deleted exact)
fn check(seed: u32) -> Option<(usize, usize, usize, usize)> {
    check_fs("fat32", seed)
}

/// [`check`] on a `fs` volume (`fat32`, `ext2`, `ext4`). On ext2/3/4 only
/// live entries are read: at least 90% of the allocated exact files are
/// named (inode times in UTC), deleted ones never.
fn check_fs(fs: &str, seed: u32) -> Option<(usize, usize, usize, usize)> {
    let ext = matches!(fs, "ext2" | "ext4");
    let d = tempfile::tempdir().unwrap();
    let seed_s = seed.to_string();
    let (img, truth) = common::mkimage_with_truth(
        d.path(),
        "disk.img",
        &["--fs", fs, "--size", "64MiB", "--seed", &seed_s],
    )?;
    let out = d.path().join("out");
    carve(&img, &out);
    let files = jsonl(&out);
    let tfiles = truth["files"].as_array().expect("files");
    let mut n = [0usize; 4];
    let mut wrong = Vec::new();
    for t in tfiles {
        let start = t["fragments"][0][0].as_u64().expect("fragment");
        let Some(f) = files
            .iter()
            .find(|f| f["sha256"] == t["sha256"] && f["offset"].as_u64() == Some(start))
        else {
            continue;
        };
        let status = t["status"].as_str().expect("status");
        let want = t["name"].as_str().expect("name");
        let i = match status {
            "allocated" => 0,
            "deleted" => 2,
            _ => continue,
        };
        n[i + 1] += 1;
        let name = &f["original_name"];
        let ok = name["path"].as_str().is_some_and(|p| same(p, want, i == 2))
            && name["deleted"] == (i == 2)
            && name["size"] == t["size"];
        if ok {
            n[i] += 1;
        } else {
            wrong.push(format!("{want} ({status}): {name}"));
        }
    }
    // Every name given is a real entry's: a truth file in the file system
    // starts there and has that name.
    for f in files.iter().filter(|f| f.get("original_name").is_some()) {
        let name = &f["original_name"];
        let path = name["path"].as_str().expect("path");
        let t = tfiles.iter().find(|t| {
            t["fragments"][0][0] == f["offset"] && t["status"].as_str() != Some("unallocated")
        });
        let deleted = name["deleted"] == true;
        assert!(
            t.is_some_and(|t| same(path, t["name"].as_str().unwrap_or(""), deleted)),
            "seed {seed}: file {} at {} named {path}: no such entry in the truth",
            f["id"],
            f["offset"]
        );
    }
    eprintln!(
        "{fs} 64 MiB seed {seed}: {}/{} allocated and {}/{} deleted exact files named",
        n[0], n[1], n[2], n[3]
    );
    assert!(
        n[1] >= 10 && (ext || n[3] >= 3),
        "seed {seed}: too few exact files {n:?}"
    );
    if ext {
        ext_names_check(&files, &out, seed, n);
        return Some((n[0], n[1], n[2], n[3]));
    }
    assert_eq!(
        n[0], n[1],
        "seed {seed}: allocated files misnamed: {wrong:#?}"
    );
    assert!(
        n[2] * 10 >= n[3] * 9,
        "seed {seed}: deleted files misnamed: {wrong:#?}"
    );
    let audit = std::fs::read_to_string(out.join("audit.txt")).expect("audit");
    let named = files
        .iter()
        .filter(|f| f.get("original_name").is_some())
        .count();
    assert!(
        audit.contains(&format!(
            "original names (a directory entry points at the file's first cluster): {named} of {} files reported: {named} in the volume at offset 0\n",
            files.len()
        )),
        "{audit}"
    );
    let xml = std::fs::read_to_string(out.join("report.xml")).expect("report.xml");
    assert_eq!(xml.matches("<gc:original_name ").count(), named);
    if fs == "ntfs" {
        assert!(xml.contains("<mtime>") && xml.contains("Z</mtime>"));
    } else {
        assert!(xml.contains("<mtime prec='2'>"));
    }
    assert_valid_dfxml(&out.join("report.xml"));
    Some((n[0], n[1], n[2], n[3]))
}

/// The ext2/3/4 half of [`check_fs`]: ≥ 90% of allocated exact files
/// named, no deleted one, times in UTC, report.xml valid.
fn ext_names_check(files: &[Value], out: &Path, seed: u32, n: [usize; 4]) {
    assert!(n[0] * 10 >= n[1] * 9, "seed {seed}: too few named {n:?}");
    assert_eq!(n[2], 0, "seed {seed}: a deleted ext file named {n:?}");
    let named: Vec<&Value> = files
        .iter()
        .filter(|f| f.get("original_name").is_some())
        .collect();
    for f in &named {
        let name = &f["original_name"];
        assert_eq!(name["deleted"], false, "{name}");
        let t = name["modified"].as_str().expect("mtime");
        assert!(t.len() == 20 && t.ends_with('Z'), "{name}");
    }
    let audit = std::fs::read_to_string(out.join("audit.txt")).expect("audit");
    assert!(
        audit.contains(&format!(
            "original names (a directory entry points at the file's first cluster): {} of {} files reported: {} in the volume at offset 0\n",
            named.len(),
            files.len(),
            named.len()
        )),
        "{audit}"
    );
    let xml = std::fs::read_to_string(out.join("report.xml")).expect("report.xml");
    assert_eq!(xml.matches("<gc:original_name ").count(), named.len());
    assert!(xml.contains("<mtime>") && xml.contains("Z</mtime>"));
    assert_valid_dfxml(&out.join("report.xml"));
}

#[test]
fn fat32_seed_3_names() {
    check(3);
}

#[test]
fn fat32_seed_7_names() {
    check(7);
}

#[test]
fn ext4_seed_3_names() {
    check_fs("ext4", 3);
}

#[test]
fn ext2_seed_5_names() {
    check_fs("ext2", 5);
}

#[test]
fn ntfs_seed_3_names() {
    check_fs("ntfs", 3);
}

#[test]
fn no_file_system_no_names() {
    let d = tempfile::tempdir().unwrap();
    let Some(img) = common::raw_image(d.path(), "disk.img", "16MiB", 7) else {
        return;
    };
    let out = d.path().join("out");
    carve(&img, &out);
    let files = jsonl(&out);
    assert!(files.iter().all(|f| f.get("original_name").is_none()));
    let audit = std::fs::read_to_string(out.join("audit.txt")).expect("audit");
    assert!(!audit.contains("original names ("), "{audit}");
}

/// A held-out NTFS image (Debian's forensics-samples `fs.ntfs`: a volume at
/// 1 MiB with live files in `pic1/`, `text1/`... and deleted ones in
/// `pic2/`, `text2/`...): of the top-level files recovered byte for byte
/// (their sha256 an original's), at least 90% are named, each with the
/// original's file name (case aside), and each named one's `alloc` is its
/// entry's: `unallocated` when deleted; `allocated` when live, or `partly`
/// for a sparse file (`movie1/VID_20191220_170832.mp4` has a hole of 92
/// clusters that NTFS never allocated: carved contiguously, its zeros are
/// read from those free clusters, and the file is exact all the same).
#[test]
fn ntfs_sample_image_names_and_allocation() {
    let d = tempfile::tempdir().unwrap();
    let Some(img) = common::forensic_sample_image(d.path(), "fs.ntfs") else {
        return;
    };
    let originals: std::collections::BTreeMap<String, String> = common::forensic_sample_originals()
        .into_iter()
        .filter_map(|p| {
            let data = std::fs::read(&p).ok()?;
            Some((
                common::sha256(&data),
                p.file_name()?.to_string_lossy().into_owned(),
            ))
        })
        .collect();
    let out = d.path().join("out");
    carve(&img, &out);
    let (mut exact, mut named, mut deleted, mut partly) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for f in jsonl(&out).iter().filter(|f| f["parent"].is_null()) {
        let Some(orig) = f["sha256"].as_str().and_then(|s| originals.get(s)) else {
            continue;
        };
        exact += 1;
        let name = &f["original_name"];
        let Some(path) = name["path"].as_str() else {
            continue;
        };
        named += 1;
        let is_deleted = name["deleted"] == true;
        deleted += usize::from(is_deleted);
        let want = if is_deleted {
            "unallocated"
        } else {
            "allocated"
        };
        let base = path.rsplit('/').next().unwrap_or("");
        let sparse = !is_deleted && f["alloc"] == "partly";
        partly += usize::from(sparse);
        if !base.eq_ignore_ascii_case(orig) || (f["alloc"] != want && !sparse) {
            wrong.push(format!("{orig}: {path} {}", f["alloc"]));
        }
    }
    eprintln!(
        "fs.ntfs: {named} of {exact} exact files named ({deleted} deleted, {partly} live partly allocated)"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(exact >= 20 && named * 10 >= exact * 9, "{named} of {exact}");
    assert!(deleted >= 5, "only {deleted} deleted files named");
    assert_valid_dfxml(&out.join("report.xml"));
}
