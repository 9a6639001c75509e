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

/// Everything `carve` writes that does not name the run (command line,
/// times): report.jsonl, report.xml and the carved files, by relative path.
fn carving(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if ["audit.txt", "run.json", "journal.jsonl"].contains(&rel.as_str()) {
                continue;
            } else {
                let mut bytes = std::fs::read(&p).unwrap();
                if rel == "report.xml" {
                    // Run-dependent: the execution environment and resource usage.
                    let text = String::from_utf8(bytes).unwrap();
                    let mut skip = false;
                    let mut kept = Vec::new();
                    for l in text.lines() {
                        if l.contains("<execution_environment>") || l.contains("<rusage>") {
                            skip = true;
                        }
                        if !skip {
                            kept.push(l);
                        }
                        if l.contains("</execution_environment>") || l.contains("</rusage>") {
                            skip = false;
                        }
                    }
                    bytes = kept.join("\n").into_bytes();
                }
                if rel == "hashes.txt" {
                    // Paths are absolute (hashdeep audits them as it prints
                    // them) and the header names the command.
                    let text = String::from_utf8(bytes).unwrap();
                    let root = dir.to_string_lossy().into_owned();
                    bytes = text
                        .lines()
                        .filter(|l| !l.starts_with("##"))
                        .map(|l| l.replace(&root, "OUT"))
                        .collect::<Vec<_>>()
                        .join("\n")
                        .into_bytes();
                }
                out.push((rel, bytes));
            }
        }
    }
    out.sort();
    out
}

fn carve(image: &std::path::Path, out: &std::path::Path, args: &[&str], upload: &str) {
    let o = common::carve_cmd(image, out)
        .args(args)
        .env("GPUCARVE_GPU_UPLOAD", upload)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "carve {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `carve --engine gpu` writes the same files and reports as `--engine cpu`
/// (on lavapipe where no GPU exists), with blocks read into the GPU's
/// staging memory by O_DIRECT and io_uring, searched in place or after a
/// copy to device-local memory.
#[test]
fn gpu_carve_equals_cpu_carve_on_real_and_generated_images() {
    if !gpu_available() {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // One real image (FAT, 50 MiB) and one generated with known content:
    // lavapipe searches at ~50 MiB/s, and every image is carved three times.
    let mut images: Vec<_> = common::forensic_sample_image(dir.path(), "fs.vfat")
        .into_iter()
        .collect();
    let generated = dir.path().join("fat32.img");
    let made = std::process::Command::new("python3")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/mkimage.py"))
        .args([
            "--fs", "fat32", "--size", "64MiB", "--seed", "4", "--quiet", "--out",
        ])
        .arg(&generated)
        .status();
    match made {
        Ok(s) if s.success() => images.push(generated),
        other => {
            assert!(
                !common::required("GPUCARVE_REQUIRE_SAMPLES"),
                "mkimage.py failed ({other:?})"
            );
            eprintln!("note: cannot generate an image ({other:?}); generated image not checked");
        }
    }
    for (n, img) in images.iter().enumerate() {
        let cpu = dir.path().join(format!("cpu{n}"));
        carve(img, &cpu, &["--engine", "cpu"], "auto");
        let expected = carving(&cpu);
        assert!(expected.iter().any(|(p, _)| p == "report.jsonl"));
        for (io, upload) in [("direct", "in-place"), ("uring", "copy")] {
            let out = dir.path().join(format!("gpu{n}-{io}-{upload}"));
            carve(img, &out, &["--engine", "gpu", "--io", io], upload);
            let got = carving(&out);
            let names = |v: &[(String, Vec<u8>)]| v.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
            assert_eq!(
                names(&got),
                names(&expected),
                "{} {io} {upload}",
                img.display()
            );
            for (a, b) in got.iter().zip(&expected) {
                assert!(
                    a.1 == b.1,
                    "{}: {} differs ({io}, {upload})",
                    img.display(),
                    a.0
                );
            }
            let audit = std::fs::read_to_string(out.join("audit.txt")).unwrap();
            assert!(audit.contains("engine: gpu:"), "{audit}");
        }
    }
}

/// The `N blocks` counts of `engine split: cpu N blocks (..), gpu M blocks (..)`.
fn split_counts(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.contains("engine split: "))?;
    let count = |engine: &str| -> Option<u64> {
        let at = line.find(&format!("{engine} "))? + engine.len() + 1;
        line[at..].split(' ').next()?.parse().ok()
    };
    Some((count("cpu")?, count("gpu")?))
}

/// `--engine auto` with lavapipe beside the CPU engine (`GPUCARVE_AUTO_GPU=wait`:
/// any size, software allowed, set-up awaited): the match stream equals the
/// CPU engine's; `scan`'s summary and audit.txt say how many blocks each
/// engine took (summing to the blocks scanned) and the figures that decided;
/// the GPU took its calibration blocks, and the CPU engine, far faster than
/// a software device, the rest but for the probes.
#[test]
fn auto_splits_blocks_by_measurement_and_says_so() {
    if !gpu_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut data = Vec::new();
    let sigs: [&[u8]; 4] = [b"\xff\xd8\xff\xe0", b"%PDF-1.7", b"PK\x03\x04", b"GIF89a"];
    for i in 0..3000usize {
        data.resize(i * 1399 + (i % 7), (i % 251) as u8);
        data.extend_from_slice(sigs[i % sigs.len()]);
    }
    data.resize(6 << 20, 0x42);
    let img = dir.path().join("auto.dd");
    std::fs::write(&img, &data).unwrap();
    let block = 64usize << 10;
    let blocks = data.len().div_ceil(block) as u64;
    let p = img.to_str().unwrap();
    let args = ["scan", p, "--block-size", "64KiB", "--threads", "2"];
    let cpu = common::bin()
        .args(args)
        .args(["--engine", "cpu"])
        .output()
        .unwrap();
    let auto = common::bin()
        .args(args)
        .args(["--engine", "auto"])
        .env("GPUCARVE_AUTO_GPU", "wait")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&auto.stderr);
    assert!(cpu.status.success() && auto.status.success(), "{err}");
    assert!(cpu.stdout.len() > 100_000, "{} bytes", cpu.stdout.len());
    assert!(
        cpu.stdout == auto.stdout,
        "auto and cpu match streams differ"
    );
    let (on_cpu, on_gpu) = split_counts(&err).unwrap_or_else(|| panic!("no split: {err}"));
    assert_eq!(on_cpu + on_gpu, blocks, "{err}");
    assert!(on_gpu >= 2, "the GPU was not calibrated: {err}");
    assert!(
        on_cpu > 3 * on_gpu,
        "lavapipe should lose nearly all: {err}"
    );
    assert!(
        err.contains("ns/byte") && err.contains("measured on this image"),
        "{err}"
    );
    // Without the split there is no line (one engine).
    let e = String::from_utf8_lossy(&cpu.stderr);
    assert!(split_counts(&e).is_none(), "{e}");

    let out = dir.path().join("carved");
    let o = common::carve_cmd(&img, &out)
        .args([
            "--engine",
            "auto",
            "--block-size",
            "64KiB",
            "--threads",
            "2",
        ])
        .env("GPUCARVE_AUTO_GPU", "wait")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let audit = std::fs::read_to_string(out.join("audit.txt")).unwrap();
    let (on_cpu, on_gpu) = split_counts(&audit).unwrap_or_else(|| panic!("{audit}"));
    assert_eq!(on_cpu + on_gpu, blocks, "{audit}");
    assert!(on_gpu >= 2 && on_cpu > on_gpu, "{audit}");
}
