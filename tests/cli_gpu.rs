//! `gpucarve scan --engine gpu` gives byte-for-byte the same JSONL as
//! `--engine cpu` (on Mesa's lavapipe where no GPU exists). With
//! `GPUCARVE_REQUIRE_GPU=1` (CI), a missing Vulkan device fails the test.

mod common;

fn gpu_available() -> bool {
    let o = common::run(&["devices"]);
    if o.status.success() {
        return true;
    }
    let why = String::from_utf8_lossy(&o.stderr);
    assert!(
        !common::required("GPUCARVE_REQUIRE_GPU"),
        "GPUCARVE_REQUIRE_GPU=1 but no Vulkan device: {why}"
    );
    eprintln!(
        "note: no Vulkan device ({}); GPU checks not run",
        why.trim()
    );
    false
}

fn same_output(image: &str, extra: &[&str]) {
    let mut cpu_args = vec!["scan", image, "--engine", "cpu"];
    cpu_args.extend_from_slice(extra);
    let mut gpu_args = vec!["scan", image, "--engine", "gpu"];
    gpu_args.extend_from_slice(extra);
    let cpu = common::run(&cpu_args);
    let gpu = common::run(&gpu_args);
    assert!(
        cpu.status.success(),
        "{}",
        String::from_utf8_lossy(&cpu.stderr)
    );
    assert!(
        gpu.status.success(),
        "{}",
        String::from_utf8_lossy(&gpu.stderr)
    );
    assert!(!cpu.stdout.is_empty());
    assert!(
        cpu.stdout == gpu.stdout,
        "{image} {extra:?}: GPU and CPU JSONL differ"
    );
}

#[test]
fn gpu_scan_equals_cpu_scan_on_real_drive_images() {
    if !gpu_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for img in common::forensic_sample_images(dir.path()) {
        same_output(img.to_str().unwrap(), &["--block-size", "4MiB"]);
    }
}

#[test]
fn gpu_scan_equals_cpu_scan_at_seams_and_odd_sizes() {
    if !gpu_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Signatures at every seam of 4 KiB blocks, an odd size, dense regions.
    let mut data = Vec::new();
    let sigs: [&[u8]; 6] = [
        b"\xff\xd8\xff\xe0",
        b"\x89PNG\r\n\x1a\n",
        b"%PDF-1.7",
        b"PK\x03\x04",
        b"\0\0\0\x20ftypisom",
        b"GIF89a",
    ];
    for i in 0..200usize {
        let s = sigs[i % sigs.len()];
        let target = (i + 1) * 4096 - (i % (s.len() + 1));
        data.resize(target, (i % 251) as u8);
        data.extend_from_slice(s);
    }
    data.extend_from_slice(&b"\xff\xd8\xff".repeat(3000));
    data.extend_from_slice(b"tail\xff");
    let img = dir.path().join("seams.dd");
    std::fs::write(&img, &data).unwrap();
    let p = img.to_str().unwrap();
    same_output(p, &["--block-size", "4KiB"]);
    same_output(p, &["--block-size", "64KiB", "--threads", "1"]);
    same_output(p, &["--format", "csv"]);
}

#[test]
fn engine_gpu_without_a_device_is_an_error_not_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.dd");
    std::fs::write(&img, b"\xff\xd8\xff\xe0").unwrap();
    let o = common::bin()
        .args(["scan", img.to_str().unwrap(), "--engine", "gpu"])
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("Vulkan"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1);
    // auto falls back to the CPU quietly.
    let o = common::bin()
        .args(["scan", img.to_str().unwrap(), "--count"])
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .output()
        .unwrap();
    assert!(o.status.success());
}
