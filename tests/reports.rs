//! Reports as the field's tools read them: report.xml validated by `xmllint`
//! against the DFXML working group's schema, hashes.txt audited by
//! `hashdeep` (passing, then failing once a carved file changes), the same
//! `--hash` set in every report, and `extract` run from another folder.
//!
//! `xmllint` (libxml2-utils) and `hashdeep` are Debian packages that `.ci/run`
//! installs; without them these checks print a note and are not run, unless
//! `GPUCARVE_REQUIRE_TOOLS=1` (CI), where a missing tool fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn image(dir: &Path, size: &str, seed: u32) -> Option<PathBuf> {
    common::raw_image(dir, "disk.img", size, seed)
}

/// True when `tool` runs; otherwise a note, or a failure under GPUCARVE_REQUIRE_TOOLS=1.
fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success() || !o.stdout.is_empty() || !o.stderr.is_empty());
    if !ok {
        assert!(
            !common::required("GPUCARVE_REQUIRE_TOOLS"),
            "GPUCARVE_REQUIRE_TOOLS=1 but `{tool}` is missing (apt-get install libxml2-utils hashdeep)"
        );
        eprintln!("note: `{tool}` is not installed; check not run");
    }
    ok
}

/// `gpucarve carve IMG -o OUT -q --engine cpu EXTRA...`.
fn carve_cpu(img: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    common::carve_cmd(img, out)
        .args(["--engine", "cpu"])
        .args(extra)
        .output()
        .expect("gpucarve")
}

/// [`carve_cpu`], which must succeed.
fn carve(img: &Path, out: &Path, extra: &[&str]) {
    common::carve_ok(img, out, &[&["--engine", "cpu"], extra].concat());
}

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dfxml_schema/dfxml.xsd")
}

/// `xmllint --noout --schema dfxml.xsd FILE`: (passed, stderr).
fn xmllint(file: &Path) -> (bool, String) {
    let o = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(schema())
        .arg(file)
        .output()
        .expect("xmllint");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The folders of carved files in an output folder (`jpeg`, `partial`, ...).
fn type_dirs(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// `hashdeep -r -a -k OUT/hashes.txt OUT/<type dirs>`, from `cwd`: (passed, output).
fn hashdeep_audit(out: &Path, cwd: &Path) -> (bool, String) {
    let o = Command::new("hashdeep")
        .args(["-r", "-a", "-k"])
        .arg(out.join("hashes.txt"))
        .args(type_dirs(out))
        .current_dir(cwd)
        .output()
        .expect("hashdeep");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success() && text.contains("Audit passed"), text)
}

#[test]
fn report_xml_is_valid_dfxml() {
    if !have("xmllint") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let Some(img) = image(d.path(), "16MiB", 5) else {
        return;
    };
    // Everything a report can hold: partial and unvalidated files, embedded
    // files (not written: no filename, no hash, a note), all three hashes.
    let out = d.path().join("out");
    carve(
        &img,
        &out,
        &["--keep", "partial,unvalidated", "--hash", "sha256,md5,sha1"],
    );
    let files = common::report_records(&out);
    assert!(files.len() > 10, "too few files: {}", files.len());
    assert!(
        files.iter().any(|f| f["path"].is_null()) && files.iter().any(|f| f["path"].is_string())
    );
    let (ok, err) = xmllint(&out.join("report.xml"));
    assert!(ok, "report.xml does not validate:\n{err}");
    // The validator does check: PhotoRec's byte_run/@offset, or a rusage
    // with only a clock time, are rejected.
    let xml = std::fs::read_to_string(out.join("report.xml")).unwrap();
    // Allocation is not determined by the carving: not stated (PhotoRec
    // states `<alloc>0</alloc>`, unallocated, for every file).
    assert!(
        xml.contains("<fileobject>") && !xml.contains("<alloc>"),
        "{xml}"
    );
    for (what, bad) in [
        (
            "offset attribute",
            xml.replacen("file_offset=", "offset=", 1),
        ),
        (
            "rusage without utime",
            xml.replacen("<utime>", "<gc:utime>", 1)
                .replacen("</utime>", "</gc:utime>", 1),
        ),
        (
            "source/image_size",
            xml.replacen(
                "</image_filename>",
                "</image_filename><image_size>1</image_size>",
                1,
            ),
        ),
    ] {
        assert_ne!(bad, xml);
        let p = d.path().join("bad.xml");
        std::fs::write(&p, bad).unwrap();
        assert!(!xmllint(&p).0, "{what}: validated, but must not");
    }

    // What a DFXML reader looks for, for every fileobject: byte runs with
    // file_offset, img_offset and len; for every written file its filename
    // and all the chosen hashes; for every other one a note saying why not.
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let dfxml_ns = "http://www.forensicswiki.org/wiki/Category:Digital_Forensics_XML";
    let objs: Vec<_> = doc
        .descendants()
        .filter(|n| {
            n.tag_name().name() == "fileobject" && n.tag_name().namespace() == Some(dfxml_ns)
        })
        .collect();
    assert_eq!(objs.len(), files.len());
    for (n, f) in objs.iter().zip(&files) {
        let runs: Vec<_> = n
            .descendants()
            .filter(|c| c.has_tag_name((dfxml_ns, "byte_run")))
            .collect();
        assert_eq!(runs.len(), f["byte_runs"].as_array().unwrap().len());
        for r in runs {
            for a in ["file_offset", "img_offset", "len"] {
                assert!(
                    r.attribute(a).is_some(),
                    "id {}: byte_run lacks {a}",
                    f["id"]
                );
            }
        }
        let filename = n
            .children()
            .find(|c| c.has_tag_name((dfxml_ns, "filename")))
            .and_then(|c| c.text());
        let hashes: Vec<(&str, &str)> = n
            .children()
            .filter(|c| c.has_tag_name((dfxml_ns, "hashdigest")))
            .map(|c| (c.attribute("type").unwrap(), c.text().unwrap()))
            .collect();
        match f["path"].as_str() {
            Some(p) => {
                assert_eq!(filename, Some(p));
                let want: Vec<(&str, &str)> = ["sha256", "md5", "sha1"]
                    .iter()
                    .map(|a| (*a, f[*a].as_str().unwrap()))
                    .collect();
                assert_eq!(hashes, want, "id {}", f["id"]);
            }
            None => {
                assert_eq!(filename, None);
                assert!(hashes.is_empty());
                let notes: Vec<&str> = n
                    .children()
                    .filter(|c| c.tag_name().name() == "note")
                    .filter_map(|c| c.text())
                    .collect();
                assert!(
                    notes.iter().any(|t| t.starts_with("not hashed")),
                    "id {}: {notes:?}",
                    f["id"]
                );
            }
        }
    }
}

#[test]
fn shard_and_merged_reports_are_valid_dfxml() {
    if !have("xmllint") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let Some(img) = image(d.path(), "8MiB", 6) else {
        return;
    };
    let mut parts = Vec::new();
    for i in 1..=2 {
        let out = d.path().join(format!("part{i}"));
        carve(&img, &out, &["--shard", &format!("{i}/2")]);
        parts.push(out);
    }
    let merged = d.path().join("all");
    let o = common::bin()
        .arg("merge")
        .args(&parts)
        .arg("-o")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for p in parts.iter().chain([&merged]) {
        let (ok, err) = xmllint(&p.join("report.xml"));
        assert!(ok, "{}: {err}", p.display());
    }
}

#[test]
fn hashdeep_audits_every_carving_and_catches_a_changed_file() {
    if !have("hashdeep") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let Some(img) = image(d.path(), "16MiB", 7) else {
        return;
    };
    let elsewhere = tempfile::tempdir().unwrap();
    for (name, extra) in [
        ("default", vec![]),
        (
            "kept",
            vec!["--keep", "partial,unvalidated", "--keep-embedded"],
        ),
        ("sha1", vec!["--hash", "sha1"]),
        ("all", vec!["--hash", "md5,sha1,sha256"]),
    ] {
        let out = d.path().join(name);
        carve(&img, &out, &extra);
        let written: Vec<Value> = common::report_records(&out)
            .into_iter()
            .filter(|f| f["path"].is_string())
            .collect();
        assert!(written.len() > 5, "{name}: too few written files");
        let list = std::fs::read_to_string(out.join("hashes.txt")).unwrap();
        assert_eq!(
            list.lines()
                .filter(|l| !l.starts_with('%') && !l.starts_with('#'))
                .count(),
            written.len(),
            "{name}: hashes.txt lists every written file, and only those"
        );
        // From the output folder's parent and from an unrelated folder.
        for cwd in [d.path(), elsewhere.path()] {
            let (ok, text) = hashdeep_audit(&out, cwd);
            assert!(
                ok,
                "{name}: hashdeep audit failed from {}:\n{text}",
                cwd.display()
            );
        }
    }
    // Change one byte of one carved file: the audit fails.
    let out = d.path().join("default");
    let f = written_file(&out);
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&f, &bytes).unwrap();
    let (ok, text) = hashdeep_audit(&out, d.path());
    assert!(
        !ok,
        "hashdeep audit passed after a file was changed:\n{text}"
    );
    // Restored, it passes again; a file appended to, or a file added, fails.
    bytes[0] ^= 0xff;
    std::fs::write(&f, &bytes).unwrap();
    assert!(hashdeep_audit(&out, d.path()).0);
    let mut longer = bytes.clone();
    longer.push(0);
    std::fs::write(&f, &longer).unwrap();
    assert!(
        !hashdeep_audit(&out, d.path()).0,
        "appended byte not caught"
    );
    std::fs::write(&f, &bytes).unwrap();
    std::fs::write(f.with_extension("extra"), b"not carved").unwrap();
    assert!(!hashdeep_audit(&out, d.path()).0, "added file not caught");
}

/// The first written file of a carving.
fn written_file(out: &Path) -> PathBuf {
    let r = common::report_records(out);
    let p = r
        .iter()
        .find_map(|f| f["path"].as_str())
        .expect("a written file");
    out.join(p)
}

#[test]
fn every_report_carries_the_chosen_hashes() {
    let d = tempfile::tempdir().unwrap();
    let Some(img) = image(d.path(), "8MiB", 8) else {
        return;
    };
    let out = d.path().join("out");
    carve(&img, &out, &["--hash", "sha1", "--hash-image"]);
    let files = common::report_records(&out);
    let written: Vec<&Value> = files.iter().filter(|f| f["path"].is_string()).collect();
    assert!(!written.is_empty());
    for f in &files {
        let o = f.as_object().unwrap();
        assert!(o.contains_key("sha1"), "{f}");
        assert!(!o.contains_key("sha256") && !o.contains_key("md5"), "{f}");
    }
    for f in &written {
        let data = std::fs::read(out.join(f["path"].as_str().unwrap())).unwrap();
        let want = Command::new("sha1sum")
            .arg(out.join(f["path"].as_str().unwrap()))
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split(' ')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_default();
        assert!(!data.is_empty());
        if !want.is_empty() {
            assert_eq!(f["sha1"].as_str().unwrap(), want);
        }
    }
    let xml = std::fs::read_to_string(out.join("report.xml")).unwrap();
    assert_eq!(
        xml.matches("<hashdigest type='sha1'>").count(),
        written.len()
    );
    assert!(!xml.contains("type='sha256'") && !xml.contains("type='md5'"));
    let audit = std::fs::read_to_string(out.join("audit.txt")).unwrap();
    assert!(audit.contains("file hashes: sha1 "), "{audit}");
    assert!(
        audit.contains("image sha1: ") && !audit.contains("image sha256"),
        "{audit}"
    );
    let list = std::fs::read_to_string(out.join("hashes.txt")).unwrap();
    assert!(
        list.starts_with("%%%% HASHDEEP-1.0\n%%%% size,sha1,filename\n"),
        "{list}"
    );
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["hashes"], serde_json::json!(["sha1"]));
    assert!(meta["image_hashes"]["sha1"].is_string());
    // --resume with another hash set is refused (the reports would mix sets).
    let o = carve_cpu(&img, &out, &["--resume"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("hashed with --hash sha1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // An unknown algorithm is a usage error.
    let o = common::run(&["carve", img.to_str().unwrap(), "-o", "x", "--hash", "crc32"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn extract_finds_the_image_from_another_folder_and_refuses_a_different_one() {
    let d = tempfile::tempdir().unwrap();
    let Some(img) = image(d.path(), "8MiB", 9) else {
        return;
    };
    // Carve with relative paths from the image's folder...
    let o = common::bin()
        .args([
            "carve",
            "disk.img",
            "-o",
            "case",
            "-q",
            "--engine",
            "cpu",
            "--no-write",
        ])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("case/run.json")).unwrap())
            .unwrap();
    assert_eq!(meta["image"].as_str().unwrap(), img.to_str().unwrap());
    let audit = std::fs::read_to_string(d.path().join("case/audit.txt")).unwrap();
    assert!(
        audit.contains(&format!("image: {}\n", img.display())),
        "{audit}"
    );
    let xml = std::fs::read_to_string(d.path().join("case/report.xml")).unwrap();
    assert!(xml.contains(&format!(
        "<image_filename>{}</image_filename>",
        img.display()
    )));
    let ids: Vec<String> = common::report_records(&d.path().join("case"))
        .iter()
        .filter(|f| f["sha256"].is_string())
        .take(2)
        .map(|f| f["id"].to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    // ...and extract from another folder.
    let other = d.path().join("elsewhere");
    std::fs::create_dir(&other).unwrap();
    let extract = |extra: &[&str], dest: &str| {
        common::bin()
            .args([
                "extract",
                "../case/report.jsonl",
                "--ids",
                &ids.join(","),
                "-o",
                dest,
            ])
            .args(extra)
            .current_dir(&other)
            .output()
            .unwrap()
    };
    let o = extract(&[], "picked");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(stdout.matches("sha256,md5 ok").count(), 2, "{stdout}");

    // The image moved: the error names the image expected and --image.
    let moved = d.path().join("moved.img");
    std::fs::rename(&img, &moved).unwrap();
    let o = extract(&[], "picked2");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(img.to_str().unwrap())
            && err.contains("8388608 bytes")
            && err.contains("--image"),
        "{err}"
    );
    // --image pointing to it works; to an image of another size is refused.
    let o = extract(&["--image", moved.to_str().unwrap()], "picked3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let short = d.path().join("short.img");
    let bytes = std::fs::read(&moved).unwrap();
    std::fs::write(&short, &bytes[..bytes.len() - 512]).unwrap();
    let o = extract(&["--image", short.to_str().unwrap()], "picked4");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not the same image"), "{err}");
    assert!(
        !other
            .join("picked4")
            .read_dir()
            .is_ok_and(|mut r| r.next().is_some())
    );
}
