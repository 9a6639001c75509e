//! Allocation status per carved file: on images built by
//! `corpora/mkimage.py`, every file recovered exactly (its report.jsonl
//! sha256 the truth's, at the truth's offset) has the `alloc` the file
//! system's allocation map gives it: `allocated` for the files the file
//! system lists, `unallocated` for those deleted (mkimage frees their
//! clusters: `mdel` on FAT, `debugfs rm` on ext, the MFT record's in-use
//! flag and the `$Bitmap` bits cleared on NTFS) and those written into
//! free space. An image with no file system has no `alloc` anywhere.
//! report.xml stays valid DFXML (`xmllint`, when installed) and carries the
//! volumes; audit.txt lists them and counts the statuses.

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

/// Carves `mkimage.py --fs FS --size 64MiB --seed SEED` and checks every
/// exactly recovered file's `alloc`: (right, exact files).
fn check(fs: &str, seed: u32) -> Option<(usize, usize)> {
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
    let (mut exact, mut right) = (0, 0);
    let mut wrong = Vec::new();
    let mut by_status = std::collections::BTreeMap::new();
    for t in truth["files"].as_array().expect("files") {
        let start = t["fragments"][0][0].as_u64().expect("fragment");
        let Some(f) = files
            .iter()
            .find(|f| f["sha256"] == t["sha256"] && f["offset"].as_u64() == Some(start))
        else {
            continue;
        };
        exact += 1;
        let status = t["status"].as_str().expect("status");
        let want = if status == "allocated" {
            "allocated"
        } else {
            "unallocated"
        };
        *by_status.entry(status.to_string()).or_insert(0) += 1;
        if f["alloc"] == want {
            right += 1;
        } else {
            wrong.push(format!("{} ({status}): {}", t["name"], f["alloc"]));
        }
    }
    eprintln!("{fs} 64 MiB seed {seed}: {right}/{exact} exact files' alloc right {by_status:?}");
    assert!(
        wrong.is_empty(),
        "{fs} seed {seed}: {} of {exact} wrong: {wrong:#?}",
        wrong.len()
    );
    assert!(exact >= 10, "{fs} seed {seed}: only {exact} exact files");
    for s in ["allocated", "deleted", "unallocated"] {
        assert!(
            by_status.contains_key(s),
            "{fs} seed {seed}: no {s} file checked"
        );
    }
    let audit = std::fs::read_to_string(out.join("audit.txt")).expect("audit");
    assert!(audit.contains("volumes: 1\n"), "{audit}");
    assert!(
        audit.contains("allocation status of the files reported"),
        "{audit}"
    );
    let xml = std::fs::read_to_string(out.join("report.xml")).expect("report.xml");
    let ftype = match fs {
        "fat32" => "FAT32",
        "ntfs" => "NTFS",
        _ => "ext4",
    };
    assert!(
        xml.contains(&format!("<ftype_str>{ftype}</ftype_str>")),
        "no volume in report.xml"
    );
    assert!(xml.contains("<alloc>1</alloc>") && xml.contains("<alloc>0</alloc>"));
    assert_valid_dfxml(&out.join("report.xml"));
    Some((right, exact))
}

#[test]
fn fat32_files_allocation_is_the_fat_s() {
    check("fat32", 3);
}

#[test]
fn ext4_files_allocation_is_the_block_bitmaps() {
    check("ext4", 3);
}

#[test]
fn ntfs_files_allocation_is_the_bitmap() {
    check("ntfs", 3);
}

#[test]
fn no_file_system_no_allocation() {
    let d = tempfile::tempdir().unwrap();
    let Some(img) = common::raw_image(d.path(), "disk.img", "16MiB", 7) else {
        return;
    };
    let out = d.path().join("out");
    carve(&img, &out);
    let files = jsonl(&out);
    assert!(files.len() > 5, "only {} files", files.len());
    assert!(files.iter().all(|f| f.get("alloc").is_none()));
    let xml = std::fs::read_to_string(out.join("report.xml")).expect("report.xml");
    assert!(!xml.contains("alloc>") && !xml.contains("<volume"));
    let audit = std::fs::read_to_string(out.join("audit.txt")).expect("audit");
    assert!(audit.contains("volumes: 0\n"), "{audit}");
    assert_valid_dfxml(&out.join("report.xml"));
}

/// A logical partition of an extended MBR partition (`sfdisk`: primary 1
/// FAT32 at 1 MiB; extended 2; logical 5 FAT32 inside it, behind its EBR):
/// both volumes are found and listed, and a file in each gets the
/// allocation status and the name its own volume gives (a live JPEG and a
/// deleted one in the logical volume, a PDF in the primary).
#[test]
fn a_logical_partition_behind_an_extended_one_is_a_volume_too() {
    let d = tempfile::tempdir().unwrap();
    let s = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    let (first, logical) = (2048u64 * 512, 88064u64 * 512);
    let script = format!(
        "truncate -s 96M disk.img && \
         printf 'label: dos\\nstart=2048, size=81920, type=c\\nstart=86016, type=5\\nstart=88064, size=81920, type=c\\n' | sfdisk -q disk.img && \
         mkfs.vfat -F 32 -s 1 --offset 2048 -n FIRST disk.img 40960 && \
         mkfs.vfat -F 32 -s 1 --offset 88064 -n LOGICAL disk.img 40960 && \
         mcopy -i disk.img@@{logical} '{s}/IMG_1054.jpg' ::/photo.jpg && \
         mcopy -i disk.img@@{logical} '{s}/IMG-20191006-WA0002.jpg' ::/gone.jpg && \
         mdel -i disk.img@@{logical} ::/gone.jpg && \
         mcopy -i disk.img@@{first} '{s}/a-text.pdf' ::/first.pdf >/dev/null 2>&1",
        s = s.display()
    );
    if !common::sh(&format!("({script}) >/dev/null 2>&1"), d.path()) {
        assert!(
            !common::required("GPUCARVE_REQUIRE_TOOLS"),
            "sfdisk, mkfs.vfat or mtools failed: fdisk, dosfstools and mtools are required in CI"
        );
        eprintln!("SKIPPED (not run): sfdisk, mkfs.vfat or mtools unavailable");
        return;
    }
    let out = d.path().join("out");
    carve(&d.path().join("disk.img"), &out);
    let audit = std::fs::read_to_string(out.join("audit.txt")).expect("audit");
    assert!(audit.contains("volumes: 2\n"), "{audit}");
    assert!(
        audit.contains(&format!("FAT32 at offset {first} ")),
        "{audit}"
    );
    assert!(
        audit.contains(&format!("FAT32 at offset {logical} ")),
        "{audit}"
    );
    let files = jsonl(&out);
    let sample = |name: &str| common::sha256(&std::fs::read(s.join(name)).expect("sample"));
    let find = |name: &str| {
        let sha = sample(name);
        files
            .iter()
            .find(|f| f["sha256"] == sha.as_str())
            .unwrap_or_else(|| panic!("{name} not recovered: {files:#?}"))
            .clone()
    };
    for (name, path, alloc, volume) in [
        ("IMG_1054.jpg", "/photo.jpg", "allocated", logical),
        ("IMG-20191006-WA0002.jpg", "", "unallocated", logical),
        ("a-text.pdf", "/first.pdf", "allocated", first),
    ] {
        let f = find(name);
        assert_eq!(f["alloc"], alloc, "{name}: {f}");
        let o = &f["original_name"];
        assert_eq!(o["volume"], volume, "{name}: {f}");
        assert_eq!(o["deleted"], alloc == "unallocated", "{name}: {f}");
        if !path.is_empty() {
            assert_eq!(o["path"], path, "{name}: {f}");
        }
    }
    let xml = std::fs::read_to_string(out.join("report.xml")).expect("report.xml");
    assert!(xml.contains(&format!("<partition_offset>{logical}</partition_offset>")));
    assert_valid_dfxml(&out.join("report.xml"));
}
