//! The scan pipeline with the GPU engine: blocks read with `O_DIRECT`
//! (`direct`, `uring`) land in the engine's staging memory and reach the
//! shader with **no copy by the CPU**; `buffered` copies once (out of the
//! page cache), `mmap` once (the engine's copy out of the mapping). Matches
//! are identical to the CPU engine's on both upload paths (in place, and
//! device-local copy, forced here on lavapipe), and the stage profile shows
//! the stages each path has.
//!
//! Without a Vulkan device the checks print a note and pass, unless
//! `GPUCARVE_REQUIRE_GPU=1`, where a missing device (or missing staging
//! memory) fails them.

use std::path::{Path, PathBuf};

use gpucarve::catalogue::Catalogue;
use gpucarve::engine::Stage;
use gpucarve::engine::cpu::CpuEngine;
use gpucarve::engine::gpu::{DeviceChoice, GpuConfig, GpuEngine, GpuError, UploadPath};
use gpucarve::scan::{Engines, Match, ScanOptions, ScanStats, scan};
use gpucarve::source::{BlockSpec, Image, IoMode};

fn require_gpu() -> bool {
    std::env::var("GPUCARVE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// A disk-like image of `len` bytes with signatures at block seams, in a
/// folder on a real file system (O_DIRECT is refused by tmpfs).
fn image(dir: &Path, len: usize) -> PathBuf {
    let mut data = Vec::with_capacity(len);
    let mut rng = gpucarve::synth::XorShift(0x2545_F491_4F6C_DD1D);
    while data.len() < len {
        data.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    data.truncate(len);
    let sigs: [&[u8]; 5] = [
        b"\xff\xd8\xff\xe0",
        b"\x89PNG\r\n\x1a\n",
        b"%PDF-1.7",
        b"PK\x03\x04",
        b"\0\0\0\x20ftypisom",
    ];
    let mut at = 3usize;
    let mut i = 0;
    while at + 16 < len {
        let s = sigs[i % sigs.len()];
        data[at..at + s.len()].copy_from_slice(s);
        // Next one near a 64 KiB seam, or inside a block.
        at = if i % 3 == 0 {
            (at / 65_536 + 1) * 65_536 - (i % 11)
        } else {
            at + 7_919
        };
        i += 1;
    }
    let path = dir.join("pipeline.dd");
    std::fs::write(&path, &data).unwrap();
    path
}

fn scan_with(
    img: &Image,
    primary: &dyn gpucarve::engine::Engine,
    overlap: usize,
    io: IoMode,
) -> (Vec<Match>, ScanStats) {
    let mut all = Vec::new();
    let mut sink = |_: &BlockSpec, m: &[Match]| {
        all.extend_from_slice(m);
        Ok(())
    };
    let opts = ScanOptions {
        block_size: 64 << 10,
        io,
        threads: 2,
        observer: None,
        read_again: false,
    };
    let mut warnings = Vec::new();
    let stats = scan(
        img,
        Engines {
            primary,
            fallback: None,
        },
        overlap,
        &opts,
        &mut sink,
        &mut |_| {},
        &mut |w| warnings.push(w),
    )
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    (all, stats)
}

#[test]
fn direct_reads_reach_the_gpu_without_a_host_copy_and_match_the_cpu() {
    let set = Catalogue::builtin().compile();
    let overlap = set.max_len() - 1;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = image(dir.path(), (3 << 20) + 12_345);
    let img = Image::open(&path).unwrap();
    let cpu = CpuEngine::new(&set.patterns).unwrap();
    let (expected, _) = scan_with(&img, &cpu, overlap, IoMode::Buffered);
    assert!(expected.len() > 200, "{}", expected.len());
    for upload in [UploadPath::InPlace, UploadPath::DeviceCopy] {
        let config = GpuConfig {
            slots: 3,
            slot_bytes: (64 << 10) + overlap + 3,
            upload,
            ..GpuConfig::default()
        };
        let g = match GpuEngine::with_config(&set.patterns, DeviceChoice::Auto, true, config) {
            Ok(g) => g,
            Err(e @ (GpuError::NoLoader | GpuError::NoDriver | GpuError::NoComputeDevice)) => {
                assert!(!require_gpu(), "GPUCARVE_REQUIRE_GPU=1 but: {e}");
                eprintln!("note: no Vulkan device ({e}); check not run");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        if let Err(why) = g.staging() {
            assert!(
                !require_gpu(),
                "GPUCARVE_REQUIRE_GPU=1 but no staging memory: {why}"
            );
            eprintln!("note: {why}; check not run");
            return;
        }
        for io in IoMode::ALL {
            let (got, st) = scan_with(&img, &g, overlap, io);
            let what = format!("{upload:?} {io}");
            assert!(got == expected, "{what}: GPU matches differ from the CPU's");
            assert_eq!(st.io_backend, io.as_str(), "{what}: no fallback expected");
            assert_eq!(st.bytes, img.len());
            let copies = st.host_copies_per_byte();
            match io {
                IoMode::Direct | IoMode::Uring => {
                    assert_eq!(st.stages.host_copied, 0, "{what}");
                    assert!(st.buffers.contains("gpu staging"), "{what}: {}", st.buffers);
                }
                // One copy (plus the overlap each block reads again).
                IoMode::Buffered => {
                    assert!((1.0..1.01).contains(&copies), "{what}: {copies}");
                    assert!(st.buffers.contains("gpu staging"), "{what}: {}", st.buffers);
                }
                IoMode::Mmap => {
                    assert!((1.0..1.01).contains(&copies), "{what}: {copies}");
                    assert_eq!(st.buffers, "mapping");
                }
            }
            // The stages each path has: reading (but for mmap, whose pages
            // are read as the engine copies them) and compute always; an
            // upload stage only for a copy (by the CPU, or to device memory).
            let busy = |s| st.busy_fraction(s);
            assert_eq!(busy(Stage::Read) > 0.0, io != IoMode::Mmap, "{what}");
            assert!(busy(Stage::Compute) > 0.0, "{what}");
            assert!(busy(Stage::Readback) > 0.0, "{what}");
            let uploads = upload == UploadPath::DeviceCopy || io == IoMode::Mmap;
            assert_eq!(busy(Stage::Upload) > 0.0, uploads, "{what}");
            for s in Stage::ALL {
                assert!(busy(s) <= 1.0 + 1e-6, "{what}: {s:?} {}", busy(s));
                assert!(st.stages.summed(s) >= st.stages.busy(s), "{what}: {s:?}");
            }
            // The reader fills free staging buffers while the device
            // searches earlier blocks: reading overlaps compute. Asserted
            // where compute is a real share of the time (lavapipe in CI);
            // on a real GPU the shader's time on a 64 KiB block is a few
            // microseconds (an H200: compute ~1% busy), and whether a read
            // falls inside one of them is chance (it failed 1 run in 2 there).
            let sum: f64 = Stage::ALL.iter().map(|&s| busy(s)).sum();
            assert!(st.overlap_fraction() <= sum, "{what}");
            if matches!(io, IoMode::Direct | IoMode::Uring) && busy(Stage::Compute) > 0.05 {
                assert!(st.overlap_fraction() > 0.0, "{what}: no overlap");
            }
        }
    }
}
