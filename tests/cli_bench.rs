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
