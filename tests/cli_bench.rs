//! `gpucarve bench` runs end to end: rows for every configuration, a plot,
//! and GPU rows that either run (a Vulkan device, lavapipe included) or say
//! why they are missing.

mod common;

#[test]
fn bench_reports_rows_baselines_and_a_plot() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.dd");
    let mut data = vec![0u8; 6 << 20];
    for (i, chunk) in data.chunks_mut(4096).enumerate() {
        if i % 7 == 0 {
            chunk[..4].copy_from_slice(b"\xff\xd8\xff\xe0");
        }
        chunk[100] = (i % 251) as u8;
    }
    std::fs::write(&img, &data).unwrap();
    let plot = dir.path().join("b.svg");
    let o = common::run(&[
        "bench",
        img.to_str().unwrap(),
        "--engines",
        "cpu,gpu",
        "--io",
        "buffered,mmap",
        "--block-sizes",
        "1MiB,4MiB",
        "--threads",
        "1,2",
        "--repeat",
        "1",
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let cpu_rows = rows.iter().filter(|r| r["engine"] == "cpu").count();
    assert_eq!(
        cpu_rows,
        2 * 2 * 2,
        "every io x block size x threads configuration"
    );
    let gpu_rows = rows
        .iter()
        .filter(|r| r["engine"].as_str().unwrap().starts_with("gpu"))
        .count();
    let missing = v["missing"].as_array().unwrap();
    assert!(
        gpu_rows == 8
            || missing
                .iter()
                .any(|m| m.as_str().unwrap().starts_with("gpu")),
        "GPU rows run or say why not"
    );
    let scan = common::run(&["scan", img.to_str().unwrap()]);
    let expected = String::from_utf8_lossy(&scan.stdout).lines().count() as u64;
    assert!(expected >= 220);
    for r in rows {
        assert_eq!(r["matches"].as_u64().unwrap(), expected, "{r}");
        assert!(
            r["mib_s"].as_f64().unwrap() > 0.0 && r["io_ceiling_mib_s"].as_f64().unwrap() > 0.0
        );
        assert!(
            ["read", "search", "merge"]
                .iter()
                .any(|s| r["bottleneck"].as_str().unwrap().starts_with(s))
        );
    }
    assert!(v["best"].is_string());
    assert!(v["baselines"].as_array().unwrap().len() >= 2);
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
}

/// `bench --json` rows say how many bytes the CPU copied per byte scanned
/// (0 with `--io direct|uring --engine gpu`: reads land in the GPU's staging
/// memory) and how busy each stage was.
#[test]
fn bench_reports_host_copies_and_stage_busy_fractions() {
    // O_DIRECT needs a real file system (tmpfs refuses it).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let img = dir.path().join("x.dd");
    let mut data = vec![0u8; 4 << 20];
    for (i, chunk) in data.chunks_mut(4096).enumerate() {
        if i % 5 == 0 {
            chunk[..4].copy_from_slice(b"\xff\xd8\xff\xe0");
        }
        chunk[77] = (i % 253) as u8;
    }
    std::fs::write(&img, &data).unwrap();
    for upload in ["in-place", "copy"] {
        let o = common::bin()
            .args([
                "bench",
                img.to_str().unwrap(),
                "--engines",
                "cpu,gpu",
                "--io",
                "buffered,direct,uring",
                "--block-sizes",
                "1MiB",
                "--threads",
                "2",
                "--repeat",
                "1",
                "--no-baselines",
                "--json",
            ])
            .env("GPUCARVE_GPU_UPLOAD", upload)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let rows = v["rows"].as_array().unwrap();
        let gpu_rows: Vec<_> = rows
            .iter()
            .filter(|r| r["engine"].as_str().unwrap().starts_with("gpu"))
            .collect();
        if gpu_rows.is_empty() {
            assert!(
                !common::required("GPUCARVE_REQUIRE_GPU"),
                "GPUCARVE_REQUIRE_GPU=1 but no GPU rows: {}",
                v["missing"]
            );
            eprintln!("note: no Vulkan device; GPU rows not checked");
        }
        // Each engine measured says how long it took to be ready and to go;
        // a GPU's own steps in order, within its set-up time.
        let setups = v["setups"].as_array().unwrap();
        assert_eq!(setups.len(), 1 + usize::from(!gpu_rows.is_empty()), "{v}");
        for st in setups {
            let (setup, teardown) = (
                st["setup_s"].as_f64().unwrap(),
                st["teardown_s"].as_f64().unwrap(),
            );
            assert!(setup > 0.0 && teardown >= 0.0, "{st}");
            let steps = st["steps"].as_array().unwrap();
            if st["engine"].as_str().unwrap().starts_with("gpu") {
                // (The pipeline step says whether the on-disk pipeline
                // cache was warm, cold or off: `pipeline (warm cache)`.)
                let names: Vec<&str> = steps
                    .iter()
                    .map(|p| p["step"].as_str().unwrap())
                    .map(|n| {
                        let base = n.split(" (").next().unwrap_or(n);
                        if base == "pipeline" {
                            assert!(
                                [" (warm cache)", " (cold cache)", " (no cache)"]
                                    .contains(&&n[base.len()..]),
                                "{n}"
                            );
                        }
                        base
                    })
                    .collect();
                assert_eq!(
                    names,
                    [
                        "pfac table",
                        "instance",
                        "choose device",
                        "device",
                        "staging memory",
                        "pipeline",
                        "table upload",
                        "slots"
                    ],
                    "{st}"
                );
                let sum: f64 = steps.iter().map(|p| p["s"].as_f64().unwrap()).sum();
                assert!(sum > 0.0 && sum <= setup, "{st}");
            } else {
                assert!(steps.is_empty(), "{st}");
            }
        }
        for r in rows {
            let io = r["io"].as_str().unwrap();
            let gpu = r["engine"].as_str().unwrap().starts_with("gpu");
            let copies = r["host_copies_per_byte"].as_f64().unwrap();
            match io {
                "direct" | "uring" => assert_eq!(copies, 0.0, "{r}"),
                "buffered" => assert!((1.0..1.01).contains(&copies), "{r}"),
                _ => panic!("unexpected backend (fallback?): {r}"),
            }
            let busy = &r["busy"];
            let f = |s: &str| busy[s].as_f64().unwrap();
            for s in ["read", "upload", "compute", "readback"] {
                assert!((0.0..=1.0 + 1e-6).contains(&f(s)), "{s}: {r}");
            }
            let sum = f("read") + f("upload") + f("compute") + f("readback");
            assert!((0.0..=sum).contains(&f("overlap")), "{r}");
            assert!(f("read") > 0.0 && f("compute") > 0.0, "{r}");
            if gpu {
                assert!(
                    r["buffers"].as_str().unwrap().contains("gpu staging"),
                    "{r}"
                );
                assert!(f("readback") > 0.0, "{r}");
                // In place, blocks in staging memory need no upload at all.
                assert_eq!(f("upload") > 0.0, upload == "copy", "{r}");
            } else {
                assert_eq!(r["buffers"], "heap", "{r}");
                assert_eq!(f("upload"), 0.0, "{r}");
            }
        }
    }
}

/// `bench --carve` times a whole carving and gives its work meter: the
/// bytes each stage read, within the bound the carver states, with the
/// candidates each validator saw.
#[test]
fn bench_carve_reports_the_work_meter() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("dense.dd");
    let cat = gpucarve::catalogue::Catalogue::builtin();
    std::fs::write(&img, gpucarve::synth::dense_headers(&cat, 2 << 20, 9)).unwrap();
    let o = common::run(&[
        "bench",
        img.to_str().unwrap(),
        "--carve",
        "--repeat",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["image_bytes"], 2 << 20);
    let work = r["work_bytes"].as_u64().unwrap();
    let limit = r["work_limit"].as_u64().unwrap();
    assert!(work > 0 && work <= limit, "{r}");
    assert!(r["signature_matches"].as_u64().unwrap() > 1000, "{r}");
    let rows = r["read"].as_array().unwrap();
    let pdf = rows
        .iter()
        .find(|row| row[0] == "validate" && row[1] == "pdf")
        .unwrap_or_else(|| panic!("no pdf validation row: {r}"));
    assert!(pdf[3].as_u64().unwrap() > 100, "{pdf}");
    let summed: u64 = rows.iter().map(|row| row[2].as_u64().unwrap()).sum();
    assert!(summed <= work, "{summed} > {work}");
}

/// `bench` takes an E01 as `scan` does: its rows find the raw image's
/// matches, their io-ceiling is the decoding's (on each row's threads), and
/// ripgrep, which would search the stored bytes, is not run.
#[test]
fn bench_measures_an_e01_as_its_medium() {
    let dir = tempfile::tempdir().unwrap();
    let Some(raw) = common::raw_image(dir.path(), "img.dd", "8MiB", 5) else {
        return;
    };
    if !common::ewfacquire("-u -t e -f encase6 -c deflate:fast -q img.dd", dir.path()) {
        return;
    }
    let bench = |img: &std::path::Path| -> serde_json::Value {
        let o = common::run(&[
            "bench",
            img.to_str().unwrap(),
            "--engines",
            "cpu",
            "--threads",
            "1,2",
            "--repeat",
            "1",
            "--json",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let (plain, e01) = (bench(&raw), bench(&dir.path().join("e.E01")));
    assert_eq!(plain["container"], "raw");
    assert!(
        e01["container"].as_str().unwrap().starts_with("EWF"),
        "{}",
        e01["container"]
    );
    let matches = |v: &serde_json::Value| -> Vec<u64> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["matches"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(matches(&e01), matches(&plain));
    assert!(matches(&plain).iter().all(|&m| m > 0));
    for r in e01["rows"].as_array().unwrap() {
        assert!(r["io_ceiling_mib_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let rg = e01["baselines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "ripgrep")
        .expect("the ripgrep baseline says why it did not run");
    assert!(rg["note"].as_str().unwrap().contains("container"), "{rg}");
}
