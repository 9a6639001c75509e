//! A file system's entry ends the file: on a FAT32 volume (mkfs.vfat,
//! mtools, 512-byte clusters) a JPEG with padding after its EOI and a TIFF
//! with bytes after its last structure are carved to their directory
//! entries' sizes, live or deleted (the tail in the entry's last cluster);
//! a deleted file whose tail goes on into later clusters keeps its
//! structure's length (those clusters may be another file's since); and
//! the same bytes with no file system end where the structure ends.

mod common;

use std::path::Path;

use serde_json::Value;

/// A JPEG of the samples with `pad` zero bytes after its EOI.
fn padded_jpeg(pad: usize) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut d = std::fs::read(root.join("corpora/samples/debian_logo.jpg")).unwrap();
    d.extend(std::iter::repeat_n(0u8, pad));
    d
}

/// The report record of the file carved at image offset `at`.
fn record_at(records: &[Value], at: u64) -> Option<&Value> {
    records.iter().find(|r| r["offset"].as_u64() == Some(at))
}

/// Builds the volume from `files` (name, bytes), deletes `deleted`, and
/// returns the image and each file's (name, first cluster's image offset).
fn fat32(dir: &Path, files: &[(&str, Vec<u8>)], deleted: &[&str]) -> Option<Vec<(String, u64)>> {
    let img = dir.join("fat.img");
    let mut cmd = String::from(
        "truncate -s 40M fat.img && mkfs.vfat -F 32 -s 1 --invariant fat.img >/dev/null",
    );
    for (name, data) in files {
        std::fs::write(dir.join(name), data).unwrap();
        cmd += &format!(" && mcopy -i fat.img {name} ::/{name}");
    }
    if !common::sh(&cmd, dir) {
        assert!(
            !common::required("GPUCARVE_REQUIRE_TOOLS"),
            "mkfs.vfat/mtools failed: {cmd}"
        );
        eprintln!("SKIPPED (not run): mkfs.vfat or mtools unavailable");
        return None;
    }
    // Where each file starts, from the live volume (before the deletions).
    let geo = std::fs::read(&img).unwrap();
    let starts: Vec<(String, u64)> = files
        .iter()
        .map(|(name, data)| {
            // (The files share their JPEG: found whole, tails included; the
            // live one, written first, is found before the far one that
            // holds its bytes too.)
            let at = memchr::memmem::find(&geo, data).expect("file in the image");
            (name.to_string(), at as u64)
        })
        .collect();
    for name in deleted {
        assert!(common::sh(&format!("mdel -i fat.img ::/{name}"), dir));
    }
    Some(starts)
}

#[test]
fn directory_entries_end_files_with_trailers() {
    let d = tempfile::tempdir().unwrap();
    let jpeg = padded_jpeg(0).len();
    // Tails: 3 000 bytes (live), 100 (deleted, inside the last cluster when
    // the file ends early enough in it), 5 000 (deleted: later clusters).
    let live = padded_jpeg(3000);
    let tail = 100usize.min(511 - jpeg % 512);
    // (Each tail ends in a byte of its own: three different files.)
    let del_near = {
        let mut v = padded_jpeg(tail);
        *v.last_mut().unwrap() = 1;
        v
    };
    let del_far = {
        let mut v = padded_jpeg(5000);
        *v.last_mut().unwrap() = 2;
        v
    };
    let files = [
        ("live.jpg", live.clone()),
        ("near.jpg", del_near.clone()),
        ("far.jpg", del_far.clone()),
    ];
    let Some(starts) = fat32(d.path(), &files, &["near.jpg", "far.jpg"]) else {
        return;
    };
    let out = d.path().join("out");
    let records = common::carve_report(&d.path().join("fat.img"), &out, &["--engine", "cpu"]);
    let len = |name: &str| {
        let at = starts.iter().find(|s| s.0 == name).unwrap().1;
        let r = record_at(&records, at).unwrap_or_else(|| panic!("{name}: not carved"));
        assert_eq!(r["status"], "complete", "{name}: {r}");
        r["length"].as_u64().unwrap() as usize
    };
    assert_eq!(
        len("live.jpg"),
        live.len(),
        "a live entry's size ends the file"
    );
    assert_eq!(
        len("near.jpg"),
        del_near.len(),
        "a deleted entry's tail in its last cluster"
    );
    assert_eq!(
        len("far.jpg"),
        jpeg,
        "a deleted entry's tail beyond its last cluster"
    );
    // The written file is the file system's, byte for byte.
    let written: Vec<String> = common::files_under(&out)
        .iter()
        .map(|p| common::sha256(&std::fs::read(p).unwrap()))
        .collect();
    assert!(written.contains(&common::sha256(&live)));
    assert!(written.contains(&common::sha256(&del_near)));

    // The same bytes with no file system: the structure decides.
    let raw = d.path().join("raw.img");
    let mut img = vec![0u8; 8192];
    img.extend_from_slice(&live);
    img.resize(img.len() + 8192, 0);
    std::fs::write(&raw, &img).unwrap();
    let records = common::carve_report(&raw, &d.path().join("raw-out"), &["--engine", "cpu"]);
    let r = record_at(&records, 8192).expect("carved");
    assert_eq!(r["length"].as_u64(), Some(jpeg as u64), "{r}");
}

/// Formats that do not say where they end, or whose last bytes only the
/// entry ends: a live KDBX 3 database (its payload's end is not recorded)
/// and a deleted HTML page whose last cluster's tail holds older text (the
/// text runs on past the entry's size) are carved to their entries' sizes.
#[test]
fn directory_entries_end_files_whose_structure_does_not() {
    let d = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kdbx =
        std::fs::read(root.join("corpora/wild/docs/keepassrs-test_db_with_password.kdbx")).unwrap();
    let mut html = b"<!DOCTYPE html>\n<html><head><title>t</title></head><body>\n".to_vec();
    while html.len() < 700 {
        html.extend_from_slice(b"<p>a paragraph of the page</p>\n");
    }
    html.extend_from_slice(b"</body></html>\n");
    let files = [("db.kdbx", kdbx.clone()), ("page.htm", html.clone())];
    let Some(starts) = fat32(d.path(), &files, &["page.htm"]) else {
        return;
    };
    let at = |name: &str| starts.iter().find(|s| s.0 == name).unwrap().1;
    // Older text in the deleted page's last cluster, after its end.
    let img_path = d.path().join("fat.img");
    let mut img = std::fs::read(&img_path).unwrap();
    let end = at("page.htm") as usize + html.len();
    let slack = end.div_ceil(512) * 512 - end;
    assert!(slack > 64, "slack of {slack} bytes");
    for (i, b) in img[end..end + slack].iter_mut().enumerate() {
        *b = b"older text of a page once here "[i % 31];
    }
    std::fs::write(&img_path, &img).unwrap();
    let out = d.path().join("out");
    let records = common::carve_report(&img_path, &out, &["--engine", "cpu"]);
    for (name, data) in &files {
        let r = record_at(&records, at(name)).unwrap_or_else(|| panic!("{name}: not carved"));
        assert_eq!(r["status"], "complete", "{name}: {r}");
        assert_eq!(r["length"].as_u64(), Some(data.len() as u64), "{name}: {r}");
        assert_eq!(r["sha256"], common::sha256(data), "{name}: {r}");
        // Whole as its entry holds it: no note says it was cut.
        let notes = r["notes"].to_string();
        assert!(!notes.contains("truncated"), "{name}: {r}");
        assert!(notes.contains("as its file system holds it"), "{name}: {r}");
    }
}

/// A deleted page whose clusters after its first hold other text (as when
/// it was fragmented and its later runs lie elsewhere): its entry's size
/// does not end the text, which runs on through those clusters and past
/// them; the page is not carved to that size from the wrong bytes.
#[test]
fn a_deleted_entry_does_not_end_text_that_runs_on_past_it() {
    let d = tempfile::tempdir().unwrap();
    let mut html = b"<!DOCTYPE html>\n<html><head><title>t</title></head><body>\n".to_vec();
    while html.len() < 1400 {
        html.extend_from_slice(b"<p>a paragraph of the page</p>\n");
    }
    html.extend_from_slice(b"</body></html>\n");
    let files = [("page.htm", html.clone())];
    let Some(starts) = fat32(d.path(), &files, &["page.htm"]) else {
        return;
    };
    let at = starts[0].1 as usize;
    // Other text from the page's second cluster on, for four clusters.
    let img_path = d.path().join("fat.img");
    let mut img = std::fs::read(&img_path).unwrap();
    for (i, b) in img[at + 512..at + 512 * 5].iter_mut().enumerate() {
        *b = b"older text of another document "[i % 31];
    }
    std::fs::write(&img_path, &img).unwrap();
    let records = common::carve_report(&img_path, &d.path().join("out"), &["--engine", "cpu"]);
    let r = record_at(&records, at as u64);
    assert!(
        r.is_none_or(|r| r["length"].as_u64() != Some(html.len() as u64)),
        "{r:?}"
    );
}
