//! `gpucarve scan` through the command line: output format, errors, and
//! agreement with the brute-force oracle on real third-party drive images.

mod common;

use std::io::Write;

use gpucarve::catalogue::Catalogue;
use gpucarve::engine::Engine;
use gpucarve::engine::naive::NaiveEngine;
use serde_json::Value;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_inputs_get_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.dd");
    std::fs::write(&empty, b"").unwrap();
    let bad_cat = dir.path().join("bad.toml");
    std::fs::write(&bad_cat, "[[type]]\nname = \"x\"\nheaders = [\"FF QQ\"]\n").unwrap();
    let typo_cat = dir.path().join("typo.toml");
    std::fs::write(
        &typo_cat,
        "[[type]]\nname = \"x\"\nheaders = [\"FF D8 FF\"]\nvalidator = \"jpg\"\n",
    )
    .unwrap();
    let img = dir.path().join("x.dd");
    std::fs::write(&img, b"hello").unwrap();
    let out = dir.path().join("out");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "carve".into(),
                img.display().to_string(),
                "-o".into(),
                out.display().to_string(),
                "--signatures".into(),
                typo_cat.display().to_string(),
            ],
            "names validator \"jpg\", which does not exist",
        ),
        (
            vec!["scan".into(), "/nonexistent/disk.dd".into()],
            "no such file",
        ),
        (
            vec!["scan".into(), dir.path().display().to_string()],
            "not a regular file or block device",
        ),
        (vec!["scan".into(), empty.display().to_string()], "empty"),
        (
            vec![
                "scan".into(),
                img.display().to_string(),
                "--signatures".into(),
                bad_cat.display().to_string(),
            ],
            "bad.toml:3:",
        ),
        (
            vec![
                "scan".into(),
                img.display().to_string(),
                "--types".into(),
                "nonesuch".into(),
            ],
            "unknown file type",
        ),
        (
            vec![
                "scan".into(),
                img.display().to_string(),
                "--block-size".into(),
                "1000".into(),
            ],
            "multiple of 4096",
        ),
    ];
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = common::run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: expected {want:?} in {e:?}");
        assert_eq!(
            e.trim_end().lines().count(),
            1,
            "{args:?}: one line expected, got {e:?}"
        );
        assert!(!e.contains("panicked"));
    }
}

#[test]
fn output_is_never_written_over_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.dd");
    std::fs::write(&img, b"\xff\xd8\xff\xe0").unwrap();
    let p = img.display().to_string();
    let o = common::run(&["scan", &p, "-o", &p]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read(&img).unwrap(), b"\xff\xd8\xff\xe0");
}

#[test]
fn jsonl_csv_and_count_agree() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.dd");
    let mut f = std::fs::File::create(&img).unwrap();
    for i in 0..300u32 {
        f.write_all(&[0u8; 1000]).unwrap();
        if i % 3 == 0 {
            f.write_all(b"\xff\xd8\xff\xe0").unwrap();
        }
        if i % 7 == 0 {
            f.write_all(b"%PDF-1.4").unwrap();
        }
        if i % 11 == 0 {
            f.write_all(b"\0\0\0\x18ftypisom").unwrap();
        }
    }
    drop(f);
    let p = img.display().to_string();
    let jsonl = common::run(&["scan", &p, "--block-size", "4KiB"]);
    assert!(jsonl.status.success(), "{}", stderr(&jsonl));
    let rows: Vec<Value> = String::from_utf8_lossy(&jsonl.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let offsets: Vec<u64> = rows.iter().map(|r| r["offset"].as_u64().unwrap()).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] <= w[1]),
        "ascending offsets"
    );
    assert_eq!(
        rows.iter()
            .filter(|r| r["type"] == "jpeg" && r["role"] == "header")
            .count(),
        100
    );
    assert_eq!(rows.iter().filter(|r| r["type"] == "pdf").count(), 43);
    let mp4: Vec<&Value> = rows.iter().filter(|r| r["type"] == "mp4").collect();
    assert_eq!(mp4.len(), 28);
    assert!(
        mp4.iter()
            .all(|r| r["start"].as_u64().unwrap() + 4 == r["offset"].as_u64().unwrap())
    );
    assert!(
        rows.iter()
            .all(|r| r["pattern"].is_string() && (r["role"] == "header" || r["role"] == "footer"))
    );

    let csv = common::run(&["scan", &p, "--format", "csv"]);
    let csv_text = String::from_utf8_lossy(&csv.stdout);
    assert_eq!(csv_text.lines().next(), Some("offset,type,role,pattern"));
    assert_eq!(csv_text.lines().count(), rows.len() + 1);

    let count = common::run(&["scan", &p, "--count", "--format", "csv"]);
    let count_text = String::from_utf8_lossy(&count.stdout);
    assert!(count_text.contains("jpeg,header,100"), "{count_text}");
    assert!(count_text.contains("pdf,header,43"), "{count_text}");
}

#[test]
fn foremost_conf_catalogue_works_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("foremost.conf");
    std::fs::write(
        &conf,
        "# test\n  jpg y 2000 \\xff\\xd8\\xff \\xff\\xd9\n  htm n 500 <html </html>\n",
    )
    .unwrap();
    let img = dir.path().join("x.dd");
    std::fs::write(&img, b"..<HTML>..\xff\xd8\xff..\xff\xd9..<html>").unwrap();
    let o = common::run(&[
        "scan",
        &img.display().to_string(),
        "--signatures",
        &conf.display().to_string(),
        "--count",
        "--format",
        "csv",
    ]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        t.contains("htm,header,2") && t.contains("jpg,header,1") && t.contains("jpg,footer,1"),
        "{t}"
    );
}

/// `gpucarve scan` on real drive images equals the brute-force oracle over
/// the whole image, for every I/O backend and a small block size (many seams).
#[test]
fn scan_equals_oracle_on_real_drive_images() {
    let dir = tempfile::tempdir().unwrap();
    let images = common::forensic_sample_images(dir.path());
    let cat = Catalogue::builtin();
    let set = cat.compile();
    let oracle = NaiveEngine::new(&set.patterns);
    for img in &images {
        let data = std::fs::read(img).unwrap();
        let mut hits = Vec::new();
        oracle.search(&data, &mut hits).unwrap();
        let expected: Vec<(u64, String, String, String)> = hits
            .iter()
            .map(|h| {
                let o = set.origins[h.pattern as usize];
                let t = &cat.types[o.type_index];
                (
                    h.pos as u64,
                    t.name.clone(),
                    o.role.as_str().to_string(),
                    cat.signature(o).text.clone(),
                )
            })
            .collect();
        assert!(!expected.is_empty());
        for io in ["buffered", "mmap", "direct", "uring"] {
            let o = common::run(&[
                "scan",
                &img.display().to_string(),
                "--io",
                io,
                "--block-size",
                "1MiB",
            ]);
            assert!(o.status.success(), "{}", stderr(&o));
            let got: Vec<(u64, String, String, String)> = String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(|l| {
                    let v: Value = serde_json::from_str(l).unwrap();
                    (
                        v["offset"].as_u64().unwrap(),
                        v["type"].as_str().unwrap().to_string(),
                        v["role"].as_str().unwrap().to_string(),
                        v["pattern"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            assert_eq!(got.len(), expected.len(), "{} --io {io}", img.display());
            assert!(
                got == expected,
                "{} --io {io}: scan differs from the oracle",
                img.display()
            );
        }
    }
}
