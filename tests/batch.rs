//! End-to-end tests of inputs (E01, split, gzip), batches, resume and shards.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, run};

/// A raw image of `size` bytes from corpora/mkimage.py (real sample files with filler).
fn image(dir: &Path, name: &str, size: &str, seed: u32) -> PathBuf {
    common::raw_image(dir, name, size, seed).expect("corpora/mkimage.py")
}

fn scan(p: &Path) -> String {
    scan_io(p, "buffered")
}

fn scan_io(p: &Path, io: &str) -> String {
    let o = run(&[
        "scan",
        "--engine",
        "cpu",
        "--io",
        io,
        "-q",
        p.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "{}: {}",
        p.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn media_sha(p: &Path, out: &Path) -> String {
    let o = run(&[
        "carve",
        "--engine",
        "cpu",
        "-q",
        "--no-write",
        "--hash-image",
        "--types",
        "jpeg",
        p.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a = std::fs::read_to_string(out.join("audit.txt")).unwrap();
    a.lines()
        .find_map(|l| l.strip_prefix("image sha256: "))
        .unwrap()
        .to_string()
}

fn sh(cmd: &str, dir: &Path) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn containers_read_as_the_raw_image() {
    let d = tempfile::tempdir().unwrap();
    let raw = image(d.path(), "img.dd", "32MiB", 3);
    let want = scan(&raw);
    let want_sha = media_sha(&raw, &d.path().join("h0"));
    assert!(sh(
        "split -b 5000000 -d -a 3 --numeric-suffixes=1 img.dd s. && split -b 7MiB img.dd l.",
        d.path()
    ));
    assert!(sh(
        "gzip -c img.dd > one.gz && head -c 10000000 img.dd | gzip -c > two.gz && tail -c +10000001 img.dd | gzip -c >> two.gz",
        d.path()
    ));
    let mut inputs = vec!["s.001", "l.aa", "one.gz", "two.gz"];
    if sh(
        "ewfacquire -u -t e01img -f encase6 -c deflate:fast -S 8MiB -q img.dd </dev/null >/dev/null 2>&1",
        d.path(),
    ) {
        inputs.push("e01img.E01");
    } else {
        assert!(
            !common::required("GPUCARVE_REQUIRE_SAMPLES"),
            "ewfacquire (Debian ewf-tools) is required in CI for the E01 checks"
        );
        eprintln!("ewfacquire (Debian ewf-tools) not available: E01 not tested");
    }
    for (i, name) in inputs.iter().enumerate() {
        let p = d.path().join(name);
        // O_DIRECT and io_uring read the medium too (the gzip spool; a
        // container that is decoded, buffered), never the container's bytes.
        for io in ["buffered", "direct", "uring"] {
            assert_eq!(
                scan_io(&p, io),
                want,
                "{name}, --io {io}: scan differs from the raw image's"
            );
        }
        assert_eq!(
            media_sha(&p, &d.path().join(format!("h{}", i + 1))),
            want_sha,
            "{name}"
        );
    }
    // A later segment alone, and a gap, are refused by name.
    let o = run(&["scan", "-q", d.path().join("s.003").to_str().unwrap()]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("s.001"));
    std::fs::remove_file(d.path().join("s.002")).unwrap();
    let o = run(&["scan", "-q", d.path().join("s.001").to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("s.002") && e.contains("missing"),
        "{e}"
    );
}

/// What identifies a carved file, whatever container it came from.
fn carved(report: &Path) -> Vec<(u64, u64, String, String, String)> {
    std::fs::read_to_string(report)
        .unwrap_or_else(|e| panic!("{}: {e}", report.display()))
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["offset"].as_u64().unwrap(),
                v["length"].as_u64().unwrap(),
                v["type"].as_str().unwrap().to_string(),
                v["status"].as_str().unwrap().to_string(),
                v["sha256"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Standard input (`-`) is spooled and carved like the file it came from;
/// scanning it gives the same matches; nothing is left in the spool folder.
#[test]
fn standard_input_carves_like_the_file() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path(), "in.img", "8MiB", 3);
    let piped = |args: &[&str]| {
        let mut child = bin()
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let data = std::fs::read(&img).unwrap();
        let feeder = std::thread::spawn(move || stdin.write_all(&data));
        let o = child.wait_with_output().unwrap();
        feeder.join().unwrap().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    };
    let o = piped(&["scan", "--engine", "cpu", "-q", "-"]);
    assert_eq!(String::from_utf8(o.stdout).unwrap(), scan(&img));
    let (a, b) = (dir.path().join("from-stdin"), dir.path().join("from-file"));
    piped(&["carve", "-", "-o", a.to_str().unwrap(), "-q"]);
    carve(&[
        "carve",
        img.to_str().unwrap(),
        "-o",
        b.to_str().unwrap(),
        "-q",
    ]);
    let from_stdin = carved(&a.join("report.jsonl"));
    assert!(!from_stdin.is_empty());
    assert_eq!(from_stdin, carved(&b.join("report.jsonl")));
    let audit = std::fs::read_to_string(a.join("audit.txt")).unwrap();
    assert!(audit.contains("standard input, spooled"), "{audit}");
    assert!(
        !std::fs::read_dir(&a).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("spool"))
    );
}

/// One command over a folder holding an E01 set, a split raw image, a gzip'd
/// image and the plain raw image of the same media: every container's
/// carving equals the plain raw's (same logical offsets, lengths, hashes).
#[test]
fn folder_of_containers_carves_like_the_raw_media() {
    let d = tempfile::tempdir().unwrap();
    let ev = d.path().join("evidence");
    std::fs::create_dir_all(&ev).unwrap();
    image(&ev, "plain.dd", "24MiB", 7);
    assert!(sh(
        "rm -f plain.dd.truth.json && mkdir split gz && split -b 5MiB -d -a 3 --numeric-suffixes=1 plain.dd split/media. && gzip -c plain.dd > gz/media.dd.gz",
        &ev
    ));
    let e01 = sh(
        "mkdir e01 && ewfacquire -u -t e01/media -f encase6 -c deflate:fast -S 8MiB -q plain.dd </dev/null >/dev/null 2>&1",
        &ev,
    );
    assert!(
        e01 || !common::required("GPUCARVE_REQUIRE_SAMPLES"),
        "ewfacquire (Debian ewf-tools) is required in CI for the E01 checks"
    );
    let case = d.path().join("case");
    let o = run(&[
        "carve",
        "--engine",
        "cpu",
        "-q",
        ev.to_str().unwrap(),
        "-o",
        case.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(case.join("case.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let out_of = |suffix: &str| -> PathBuf {
        let l = lines
            .iter()
            .find(|l| l["image"].as_str().unwrap().ends_with(suffix))
            .unwrap_or_else(|| panic!("{suffix} not carved: {lines:?}"));
        PathBuf::from(l["output"].as_str().unwrap())
    };
    let want = carved(&out_of("plain.dd").join("report.jsonl"));
    assert!(want.iter().filter(|f| f.3 == "complete").count() > 10);
    let mut containers = vec!["split/media.001", "gz/media.dd.gz"];
    if e01 {
        containers.push("e01/media.E01");
    }
    assert_eq!(lines.len(), containers.len() + 1, "{lines:?}");
    for c in containers {
        assert_eq!(
            carved(&out_of(c).join("report.jsonl")),
            want,
            "{c}: carving differs from the raw media's"
        );
    }
}

#[test]
fn batch_of_folders_one_failure_does_not_stop_the_others() {
    let d = tempfile::tempdir().unwrap();
    let ev = d.path().join("evidence");
    std::fs::create_dir_all(ev.join("usb")).unwrap();
    image(&ev, "a.dd", "8MiB", 1);
    image(&ev.join("usb"), "b.img", "8MiB", 2);
    assert!(sh(
        "split -b 3MiB usb/b.img c. && gzip -c a.dd > d.raw.gz && rm -f *.truth.json usb/*.truth.json",
        &ev
    ));
    std::fs::write(ev.join("notes.txt"), "not an image").unwrap();
    std::fs::write(ev.join("bad.dd"), b"").unwrap(); // empty: fails
    let case = d.path().join("case");
    let o = run(&[
        "carve",
        "--engine",
        "cpu",
        "-q",
        "--no-write",
        ev.to_str().unwrap(),
        "-o",
        case.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(case.join("case.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<String> = lines
        .iter()
        .map(|l| {
            Path::new(l["image"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["a.dd", "b.img", "bad.dd", "c.aa", "d.raw.gz"],
        "{names:?}"
    );
    for l in &lines {
        let failed = l["error"].is_string();
        assert_eq!(
            failed,
            l["image"].as_str().unwrap().ends_with("bad.dd"),
            "{l}"
        );
    }
    assert!(
        std::fs::read_to_string(case.join("case.txt"))
            .unwrap()
            .contains("1 failed")
    );
    assert!(case.join("a.dd/report.jsonl").exists() && case.join("c.aa/report.xml").exists());
}

fn carve(args: &[&str]) {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn resume_after_kill_9_gives_the_same_reports() {
    let d = tempfile::tempdir().unwrap();
    let img = image(d.path(), "img.dd", "64MiB", 7);
    let (clean, cut) = (d.path().join("clean"), d.path().join("cut"));
    let common = [
        "--engine",
        "cpu",
        "-q",
        "--block-size",
        "64KiB",
        "--threads",
        "1",
        "--keep",
        "partial,unvalidated",
    ];
    let mut a = vec![
        "carve",
        img.to_str().unwrap(),
        "-o",
        clean.to_str().unwrap(),
    ];
    a.extend(common);
    carve(&a);
    let clean_files = std::fs::read_to_string(clean.join("report.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(
        clean_files > 10,
        "too few files to test resume: {clean_files}"
    );

    let mut killed_mid_run = false;
    for _attempt in 0..5 {
        let _ = std::fs::remove_dir_all(&cut);
        let mut child = bin()
            .args(["carve", img.to_str().unwrap(), "-o", cut.to_str().unwrap()])
            .args(common)
            .spawn()
            .unwrap();
        // Wait until some files are journalled, then kill -9.
        let t = std::time::Instant::now();
        loop {
            let n = std::fs::read_to_string(cut.join("journal.jsonl"))
                .map(|j| j.lines().filter(|l| l.starts_with("{\"file\"")).count())
                .unwrap_or(0);
            if n >= 3 || t.elapsed().as_secs() > 60 || child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = child.kill(); // SIGKILL
        let st = child.wait().unwrap();
        if !st.success() {
            killed_mid_run = true;
            break;
        }
    }
    assert!(
        killed_mid_run,
        "the carving always finished before it could be killed"
    );
    let mut a = vec![
        "carve",
        img.to_str().unwrap(),
        "-o",
        cut.to_str().unwrap(),
        "--resume",
    ];
    a.extend(common);
    carve(&a);
    let (x, y) = (
        std::fs::read_to_string(clean.join("report.jsonl")).unwrap(),
        std::fs::read_to_string(cut.join("report.jsonl")).unwrap(),
    );
    assert_eq!(x, y, "report.jsonl after resume differs");
    // The command line and start time are the interrupted run's; only timing differs... and the
    // command line of the clean run names another folder.
    assert_eq!(
        common::dfxml_sans_run(&clean.join("report.xml")),
        common::dfxml_sans_run(&cut.join("report.xml"))
    );
}

/// `merge` nests files as the carver does: inside a complete file's first
/// run only. A file joined from fragments (here an ext2 image's block-mapped
/// and fragmented files) spans, from its header to header + length, bytes
/// of its later runs' neighbours: the carver does not make a header there
/// its child, and neither may the merge (it did, giving `parent` where a
/// single run gives none).
#[test]
fn shards_merged_nest_joined_files_like_one_run() {
    let d = tempfile::tempdir().unwrap();
    let Some(img) = common::mkimage(
        d.path(),
        "e2.img",
        &[
            "--fs",
            "ext2",
            "--size",
            "48MiB",
            "--seed",
            "2",
            "--fragmented-fraction",
            "0.5",
            "--fragment-counts",
            "2,3",
        ],
    ) else {
        return;
    };
    let run_carve = |out: &Path, shard: Option<&str>| {
        let extra: Vec<&str> = shard.map(|s| vec!["--shard", s]).unwrap_or_default();
        common::carve_ok(&img, out, &extra);
    };
    let single = d.path().join("single");
    run_carve(&single, None);
    let (p1, p2, merged) = (
        d.path().join("p1"),
        d.path().join("p2"),
        d.path().join("merged"),
    );
    run_carve(&p1, Some("1/2"));
    run_carve(&p2, Some("2/2"));
    carve(&[
        "merge",
        p1.to_str().unwrap(),
        p2.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    let one = std::fs::read_to_string(single.join("report.jsonl")).unwrap();
    // The case the test is about: a complete joined file whose span, not
    // its first run, holds another file's header.
    let files = common::report_records(&single);
    let spans_another = files.iter().any(|f| {
        let (off, len) = (f["offset"].as_u64().unwrap(), f["length"].as_u64().unwrap());
        let first_end = off + f["byte_runs"][0]["len"].as_u64().unwrap();
        f["status"] == "complete"
            && files.iter().any(|g| {
                let o = g["offset"].as_u64().unwrap();
                o >= first_end && o < off + len
            })
    });
    assert!(
        spans_another,
        "no joined file spans another header: the image no longer tests this"
    );
    assert_eq!(
        one,
        std::fs::read_to_string(merged.join("report.jsonl")).unwrap(),
        "merged shards nest differently from one run"
    );
}

#[test]
fn four_shards_merged_equal_one_run() {
    let d = tempfile::tempdir().unwrap();
    let img = image(d.path(), "img.dd", "32MiB", 11);
    shards_merged_equal_one_run(d.path(), &img);
}

/// On a FAT32 volume: the merged report.xml lists the volume too.
#[test]
fn four_shards_of_a_fat32_image_merged_equal_one_run() {
    let d = tempfile::tempdir().unwrap();
    let img = common::mkimage(
        d.path(),
        "fat.img",
        &["--fs", "fat32", "--size", "40MiB", "--seed", "12"],
    )
    .expect("corpora/mkimage.py");
    shards_merged_equal_one_run(d.path(), &img);
    let xml = std::fs::read_to_string(d.path().join("merged/report.xml")).unwrap();
    assert!(xml.contains("<ftype_str>FAT32</ftype_str>"), "{xml}");
    common::assert_valid_dfxml(&d.path().join("merged/report.xml"));
}

/// Carves `img` once and in four shards, merges them: the same reports.
fn shards_merged_equal_one_run(dir: &Path, img: &Path) {
    let d = dir;
    let single = d.join("single");
    let common = [
        "--engine",
        "cpu",
        "-q",
        "--block-size",
        "256KiB",
        "--keep",
        "partial,unvalidated",
    ];
    let mut a = vec![
        "carve",
        img.to_str().unwrap(),
        "-o",
        single.to_str().unwrap(),
    ];
    a.extend(common);
    carve(&a);
    let mut parts = Vec::new();
    for i in 1..=4 {
        let out = d.join(format!("part{i}"));
        let shard = format!("{i}/4");
        let mut a = vec![
            "carve",
            img.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--shard",
            &shard,
        ];
        a.extend(common);
        carve(&a);
        parts.push(out);
    }
    let merged = d.join("merged");
    let mut a: Vec<&str> = vec!["merge"];
    a.extend(parts.iter().map(|p| p.to_str().unwrap()));
    a.extend(["-o", merged.to_str().unwrap()]);
    carve(&a);
    assert_eq!(
        std::fs::read_to_string(single.join("report.jsonl")).unwrap(),
        std::fs::read_to_string(merged.join("report.jsonl")).unwrap()
    );
    assert_eq!(
        common::dfxml_sans_run(&single.join("report.xml")),
        common::dfxml_sans_run(&merged.join("report.xml"))
    );
}
