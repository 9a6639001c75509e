//! The GPU engine against the CPU engine and the naive oracle.
//!
//! Runs on whatever Vulkan device is present, software ones (llvmpipe)
//! included. Without one the tests print a note and pass, unless
//! `GPUCARVE_REQUIRE_GPU=1`, where a missing device fails them.
//!
//! llvmpipe searches at roughly 0.1–0.2 GiB/s, so the data here stays at a
//! few MiB. Throughput is measured by `cargo bench --bench search`
//! (`search/pfac_gpu/*`), never here.

use gpucarve::engine::cpu::CpuEngine;
use gpucarve::engine::gpu::{DeviceChoice, GpuConfig, GpuEngine, GpuError, list_devices};
use gpucarve::engine::naive::NaiveEngine;
use gpucarve::engine::{Engine, Hit};
use gpucarve::pattern::{ByteClass, Pattern};
use proptest::prelude::*;

fn require_gpu() -> bool {
    std::env::var("GPUCARVE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Small slots and a tiny initial hit buffer, so that growth is exercised.
fn test_config() -> GpuConfig {
    GpuConfig {
        slots: 2,
        slot_bytes: 8 << 20,
        initial_hit_capacity: 64,
        ..GpuConfig::default()
    }
}

/// The engine, or `None` (with a note) when this machine has no Vulkan device.
fn gpu_with(patterns: &[Pattern], config: GpuConfig) -> Option<GpuEngine> {
    match GpuEngine::with_config(patterns, DeviceChoice::Auto, true, config) {
        Ok(e) => Some(e),
        Err(e @ (GpuError::NoLoader | GpuError::NoDriver | GpuError::NoComputeDevice)) => {
            assert!(
                !require_gpu(),
                "GPUCARVE_REQUIRE_GPU=1 but no Vulkan device: {e}"
            );
            eprintln!("note: skipping GPU test: {e}");
            None
        }
        Err(e) => panic!("GPU engine setup failed: {e}"),
    }
}

fn gpu(patterns: &[Pattern]) -> Option<GpuEngine> {
    gpu_with(patterns, test_config())
}

fn pats(texts: &[&str]) -> Vec<Pattern> {
    texts.iter().map(|t| Pattern::parse(t).unwrap()).collect()
}

fn ci(text: &str) -> Pattern {
    Pattern::new(text.bytes().map(|b| ByteClass::literal(b, true)).collect()).unwrap()
}

fn run(e: &dyn Engine, hay: &[u8]) -> Vec<Hit> {
    let mut out = Vec::new();
    e.search(hay, &mut out).unwrap();
    out
}

/// GPU == CPU (== naive when `naive`); returns the hits.
fn check(g: &GpuEngine, p: &[Pattern], hay: &[u8], naive: bool) -> Vec<Hit> {
    let got = run(g, hay);
    let cpu = run(&CpuEngine::new(p).unwrap(), hay);
    assert!(
        got == cpu,
        "GPU {} hits != CPU {} hits (len {})",
        got.len(),
        cpu.len(),
        hay.len()
    );
    if naive {
        let oracle = run(&NaiveEngine::new(p), hay);
        assert!(got == oracle, "GPU != naive (len {})", hay.len());
    }
    got
}

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// About 60 carving signatures: headers, footers, wildcards, case-folded text.
fn signatures() -> Vec<Pattern> {
    let mut p = pats(&[
        "FF D8 FF E0",
        "FF D8 FF E1",
        "FF D8 FF DB",
        "FF D9",
        "89 50 4E 47 0D 0A 1A 0A",
        "49 45 4E 44 AE 42 60 82",
        r#""GIF87a""#,
        r#""GIF89a""#,
        "00 3B",
        r#""%PDF-""#,
        r#""%%EOF""#,
        r#""PK" 03 04"#,
        r#""PK" 05 06"#,
        r#""PK" 01 02"#,
        r#""Rar!" 1A 07 00"#,
        r#""Rar!" 1A 07 01 00"#,
        "37 7A BC AF 27 1C",
        "1F 8B 08",
        r#""BZh" ?? "1AY&SY""#,
        "FD 37 7A 58 5A 00",
        r#"?? ?? ?? ?? "ftyp""#,
        r#"?? ?? ?? ?? "ftypisom""#,
        r#"?? ?? ?? ?? "ftypqt  ""#,
        r#""OggS" 00 02"#,
        r#""RIFF" ?? ?? ?? ?? "WAVE""#,
        r#""RIFF" ?? ?? ?? ?? "AVI ""#,
        r#""RIFF" ?? ?? ?? ?? "WEBP""#,
        r#""BM" ?? ?? ?? ?? 00 00 00 00"#,
        r#""SQLite format 3" 00"#,
        r#"7F "ELF""#,
        r#""MZ" ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? ?? "PE" 00 00"#,
        "CA FE BA BE",
        "1A 45 DF A3",
        r#""fLaC" 00 00 00 22"#,
        r#""ID3" 03"#,
        r#""ID3" 04"#,
        "D0 CF 11 E0 A1 B1 1A E1",
        r#""{\rtf1""#,
        r#""8BPS" 00 01"#,
        r#""II*" 00"#,
        r#""MM" 00 2A"#,
        "00 00 01 BA",
        "00 00 01 B3",
        r#""wOFF""#,
        r#""wOF2""#,
        r#""OTTO" 00"#,
        "00 01 00 00 00",
        r#""-----BEGIN ""#,
        r#""From: ""#,
        "25 21 50 53",
        r#""MSCF" 00 00 00 00"#,
        r#""ITSF" 03 00 00 00"#,
        "ED AB EE DB",
        r#""KDM""#,
        r#""conectix""#,
        r#""QFI" FB"#,
    ]);
    p.push(ci("<html"));
    p.push(ci("</html>"));
    p.push(ci("<?xml"));
    p.push(ci("<!doctype html"));
    p
}

/// Random bytes with `count` copies of random patterns (wildcards filled at random).
fn planted(rng: &mut Rng, p: &[Pattern], len: usize, count: usize) -> Vec<u8> {
    let mut hay = rng.bytes(len);
    for _ in 0..count {
        let pat = &p[rng.below(p.len())];
        if pat.len() > len {
            continue;
        }
        let at = rng.below(len - pat.len() + 1);
        for (i, c) in pat.classes().iter().enumerate() {
            hay[at + i] = match *c {
                ByteClass::Exact(b) => b,
                ByteClass::Either(a, b) => {
                    if rng.next() & 1 == 0 {
                        a
                    } else {
                        b
                    }
                }
                ByteClass::Any => hay[at + i],
            };
        }
    }
    hay
}

#[test]
fn lists_devices_and_applies_the_choice() {
    let devices = match list_devices() {
        Ok(d) => d,
        Err(e) => {
            assert!(!require_gpu(), "GPUCARVE_REQUIRE_GPU=1 but: {e}");
            eprintln!("note: skipping GPU test: {e}");
            return;
        }
    };
    assert!(!devices.is_empty());
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.index, i);
        assert!(!d.name.is_empty() && !d.heaps.is_empty());
        println!("{d}");
    }
    let p = pats(&["FF D8 FF"]);
    let err = GpuEngine::new(&p, DeviceChoice::Index(devices.len()), true).unwrap_err();
    assert!(matches!(err, GpuError::NoSuchDevice(..)), "{err}");
    let err = GpuEngine::new(
        &p,
        DeviceChoice::NameContains("no such device, surely".into()),
        true,
    )
    .unwrap_err();
    assert!(matches!(err, GpuError::NoSuchDevice(..)), "{err}");
    let first = &devices[0];
    if first.compute {
        let by_name = GpuEngine::new(
            &p,
            DeviceChoice::NameContains(first.name.to_uppercase()),
            true,
        )
        .unwrap();
        assert_eq!(by_name.device_info().index, 0);
        assert_eq!(by_name.name(), format!("gpu:{}", first.name));
    }
    // `--engine auto` never runs on a software device.
    match GpuEngine::new(&p, DeviceChoice::Auto, false) {
        Ok(e) => assert!(!e.device_info().software),
        Err(GpuError::SoftwareOnly(name)) => {
            assert!(devices.iter().all(|d| d.software || !d.compute));
            assert!(devices.iter().any(|d| d.name == name));
        }
        Err(e) => panic!("{e}"),
    }
    if let Some(sw) = devices.iter().find(|d| d.software && d.compute) {
        let err = GpuEngine::new(&p, DeviceChoice::Index(sw.index), false).unwrap_err();
        assert!(matches!(err, GpuError::SoftwareRefused(_)), "{err}");
    }
}

#[test]
fn random_data_with_planted_signatures() {
    let p = signatures();
    assert!(p.len() >= 55);
    let Some(g) = gpu(&p) else { return };
    assert_eq!(g.max_haystack_len(), 8 << 20);
    assert_eq!(Engine::max_haystack_len(&g), Some(8 << 20));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let hay = planted(&mut rng, &p, 256 << 10, 2000);
    let hits = check(&g, &p, &hay, true);
    assert!(hits.len() >= 1500, "{} hits", hits.len());
    let hay = planted(&mut rng, &p, 3 << 20, 20_000);
    check(&g, &p, &hay, false);
}

#[test]
fn tiny_and_odd_sized_haystacks() {
    let p = pats(&[
        r#""a""#,
        r#""ab""#,
        r#""abc""#,
        r#""bc""#,
        "?? 63",
        r#""abcd""#,
    ]);
    let Some(g) = gpu(&p) else { return };
    for len in [0, 1, 2, 3, 4, 5, 7, 8, 9, 4095, 4096, 4097] {
        let hay: Vec<u8> = b"abcd".iter().copied().cycle().take(len).collect();
        let hits = check(&g, &p, &hay, true);
        if len > 0 {
            assert_eq!(hits[0], Hit { pos: 0, pattern: 0 });
        }
    }
    let mut rng = Rng(7);
    for len in [1, 3, 4097] {
        let hay = planted(&mut rng, &p, len, len / 8 + 1);
        check(&g, &p, &hay, true);
    }
}

#[test]
fn matches_at_offset_zero_and_ending_at_the_last_byte() {
    let p = pats(&["FF D8 FF", r#""%%EOF""#, "?? ?? 0A", "0A"]);
    let Some(g) = gpu(&p) else { return };
    let mut hay = Rng(11).bytes(4097);
    hay[..3].copy_from_slice(&[0xFF, 0xD8, 0xFF]);
    let n = hay.len();
    hay[n - 6..n - 1].copy_from_slice(b"%%EOF");
    hay[n - 1] = 0x0A;
    let hits = check(&g, &p, &hay, true);
    assert_eq!(hits.first(), Some(&Hit { pos: 0, pattern: 0 }));
    assert!(hits.contains(&Hit {
        pos: n - 6,
        pattern: 1
    }));
    assert!(hits.contains(&Hit {
        pos: n - 3,
        pattern: 2
    }));
    assert_eq!(
        hits.last(),
        Some(&Hit {
            pos: n - 1,
            pattern: 3
        })
    );
    // A pattern cut off by the end of the haystack is not reported.
    assert!(run(&g, &hay[..n - 2]).iter().all(|h| h.pattern != 1));
}

#[test]
fn match_dense_haystack_overflows_and_loses_nothing() {
    let p = pats(&["FF", "FF FF", "FF ?? FF", "FE"]);
    let Some(g) = gpu(&p) else { return };
    let n = 300_001;
    let hay = vec![0xFFu8; n];
    let hits = check(&g, &p, &hay, false);
    // Every byte starts "FF"; every byte but the last "FF FF"; but the last two "FF ?? FF".
    assert_eq!(hits.len(), n + (n - 1) + (n - 2));
    for pos in 0..n {
        assert!(
            hits.binary_search(&Hit { pos, pattern: 0 }).is_ok(),
            "missing FF at {pos}"
        );
    }
    // Small enough for the oracle too.
    check(&g, &p, &hay[..5000], true);
}

#[test]
fn more_hits_than_the_largest_buffer_splits_the_dispatch() {
    let p = pats(&["41", "41 41", "?? 41"]);
    let config = GpuConfig {
        max_hit_capacity: 1000,
        initial_hit_capacity: 16,
        ..test_config()
    };
    let Some(g) = gpu_with(&p, config) else {
        return;
    };
    let hay = vec![b'A'; 20_000];
    let hits = check(&g, &p, &hay, true);
    assert_eq!(hits.len(), 3 * 20_000 - 2);
}

#[test]
fn prefix_suffix_and_wildcard_sets() {
    let cases: Vec<(Vec<Pattern>, &[u8])> = vec![
        (pats(&[r#""ABCD""#, r#""XBCD""#, r#""ABCE""#]), b"XBCE"),
        (
            pats(&[r#""ABCD""#, r#""XBCD""#, r#""ABCE""#]),
            b"XBCEABCDXBCDABCEABC",
        ),
        (
            pats(&[
                r#""AB""#,
                r#""ABC""#,
                r#""ABCD""#,
                r#""BCD""#,
                r#""CD""#,
                r#""D""#,
            ]),
            b"ABCDABCABD",
        ),
        (pats(&[r#""AB""#, r#""AB""#, r#""A""#]), b"ABAB"),
        (
            pats(&["FF ?? FF", "FF D8 FF", "?? D8", "FF ?? ?? E0"]),
            b"\xff\xd8\xff\xe0\xff\xff\xff",
        ),
        (
            vec![
                ci("html"),
                Pattern::parse(r#""HTML""#).unwrap(),
                ci("<?xml"),
            ],
            b"<HtMl> <?XmL html HTML",
        ),
        (
            pats(&[r#"?? ?? ?? ?? "ftyp""#, r#""ftyp""#]),
            b"\0\0\0\x18ftypisom ftyp",
        ),
    ];
    let Some(g) = gpu(&cases[0].0) else { return };
    assert!(run(&g, b"XBCE").is_empty());
    drop(g);
    for (p, hay) in &cases {
        let Some(g) = gpu(p) else { return };
        check(&g, p, hay, true);
        // Shifted copies: the matches land at every offset modulo 4.
        let long: Vec<u8> = hay
            .iter()
            .chain(b"..")
            .copied()
            .cycle()
            .take(hay.len() * 7 + 3)
            .collect();
        check(&g, p, &long, true);
    }
}

#[test]
fn haystack_longer_than_the_slot_is_searched_in_windows() {
    // The shifted pattern is first: its hits found by a window can sort
    // before hits of other patterns at the same position found by the
    // previous window.
    let p = pats(&["?? ?? ?? ?? ?? ?? ?? 37", r#""0123456789""#, r#""9""#]);
    let config = GpuConfig {
        slot_bytes: 4096,
        ..test_config()
    };
    let Some(g) = gpu_with(&p, config) else {
        return;
    };
    assert_eq!(g.max_haystack_len(), 4096);
    let hay: Vec<u8> = b"0123456789".iter().copied().cycle().take(20_011).collect();
    // Every phase of the patterns against the window boundaries.
    for skip in 0..10 {
        check(&g, &p, &hay[skip..], true);
    }
}

#[test]
fn concurrent_searches_share_the_slots() {
    let p = signatures();
    for path in PATHS {
        let Some(g) = gpu_on(&p, path) else { return };
        concurrent_searches(g, &p);
    }
}

fn concurrent_searches(g: GpuEngine, p: &[Pattern]) {
    let g = std::sync::Arc::new(g);
    let cpu = std::sync::Arc::new(CpuEngine::new(p).unwrap());
    let mut rng = Rng(99);
    // A few large blocks and many small ones: many submissions from
    // several threads at once, more threads than slots (and, on the
    // device-copy path, uploads and dispatches in flight together).
    let mut blocks: Vec<Vec<u8>> = (0..12)
        .map(|i| planted(&mut rng, p, 100_000 + 997 * i, 300))
        .collect();
    blocks.extend((0..400).map(|i| planted(&mut rng, p, 1 + 37 * i, 4)));
    let (done, finished) = std::sync::mpsc::channel();
    for t in 0..4 {
        let mine: Vec<Vec<u8>> = blocks.iter().skip(t).step_by(4).cloned().collect();
        let (g, cpu, done) = (g.clone(), cpu.clone(), done.clone());
        std::thread::spawn(move || {
            let ok = mine.iter().all(|hay| run(&*g, hay) == run(&*cpu, hay));
            let _ = done.send(ok);
        });
    }
    // A watchdog rather than a join: a deadlock fails the test instead of
    // hanging it.
    for _ in 0..4 {
        let ok = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("concurrent searches did not finish within 60 s (deadlock?)");
        assert!(ok, "a concurrent GPU search differed from the CPU engine");
    }
}

fn class() -> impl Strategy<Value = ByteClass> {
    prop_oneof![
        6 => (0u8..3).prop_map(|b| ByteClass::Exact(b'a' + b)),
        1 => Just(ByteClass::Any),
        1 => (0u8..3).prop_map(|b| ByteClass::Either(b'a' + b, b'A' + b)),
    ]
}

fn pattern() -> impl Strategy<Value = Pattern> {
    proptest::collection::vec(class(), 1..6).prop_filter_map("all wildcards", Pattern::new)
}

fn haystack() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            4 => (0u8..3).prop_map(|b| b'a' + b),
            1 => (0u8..3).prop_map(|b| b'A' + b),
            1 => any::<u8>(),
        ],
        0..300,
    )
}

proptest! {
    // Each case sets up a pipeline: keep the count modest.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn gpu_equals_oracle_on_small_inputs(
        p in proptest::collection::vec(pattern(), 1..8),
        hays in proptest::collection::vec(haystack(), 1..4),
    ) {
        let Some(g) = gpu(&p) else { return Ok(()) };
        for hay in &hays {
            let got = run(&g, hay);
            prop_assert_eq!(&got, &run(&NaiveEngine::new(&p), hay));
            prop_assert_eq!(&got, &run(&CpuEngine::new(&p).unwrap(), hay));
        }
    }
}

// ---------------------------------------------------------------------------
// Staging memory and the two upload paths (in place, device copy).
// ---------------------------------------------------------------------------

use gpucarve::engine::gpu::UploadPath;
use gpucarve::engine::{Stage, StageClock};

const PATHS: [UploadPath; 2] = [UploadPath::InPlace, UploadPath::DeviceCopy];

fn gpu_on(p: &[Pattern], upload: UploadPath) -> Option<GpuEngine> {
    let g = gpu_with(
        p,
        GpuConfig {
            upload,
            ..test_config()
        },
    )?;
    assert_eq!(g.upload_path(), upload);
    Some(g)
}

/// The engine's staging memory, or `None` (with a note) where the device
/// cannot import host memory; on CI (lavapipe) it must exist.
fn staging_of(g: &GpuEngine) -> Option<std::sync::Arc<dyn gpucarve::source::BufferProvider>> {
    match g.staging() {
        Ok(what) => {
            assert!(what.contains("imported"), "{what}");
            let p = g.buffer_provider();
            assert!(p.is_some());
            p
        }
        Err(why) => {
            assert!(
                !require_gpu(),
                "GPUCARVE_REQUIRE_GPU=1 but no staging memory: {why}"
            );
            assert!(g.buffer_provider().is_none());
            eprintln!("note: no staging memory on this device ({why}); check not run");
            None
        }
    }
}

fn profiled(g: &GpuEngine, hay: &[u8]) -> (Vec<Hit>, gpucarve::engine::StageTimes) {
    let clock = StageClock::new();
    let mut out = Vec::new();
    g.search_profiled(hay, &mut out, &clock).unwrap();
    (out, clock.times())
}

#[test]
fn staging_memory_is_searched_where_it_lies_on_both_paths() {
    let p = signatures();
    let mut rng = Rng(0x5EED);
    let data = planted(&mut rng, &p, (1 << 20) + 4099, 3000);
    let cpu = CpuEngine::new(&p).unwrap();
    for path in PATHS {
        let Some(g) = gpu_on(&p, path) else { return };
        let Some(provider) = staging_of(&g) else {
            return;
        };
        let mut buf = provider.allocate(2 << 20).unwrap();
        assert!(buf.as_slice().len() >= 2 << 20);
        assert_eq!(buf.as_slice().as_ptr() as usize % 4096, 0);
        buf.as_mut_slice()[..data.len()].copy_from_slice(&data);
        // Whole buffer, an aligned sub-slice and an unaligned one (copied).
        for (from, copied) in [(0usize, false), (4096, false), (1, true)] {
            let hay = &buf.as_slice()[from..data.len()];
            let (hits, t) = profiled(&g, hay);
            assert!(hits == run(&cpu, hay), "{path:?} from {from}: GPU != CPU");
            assert!(hits.len() > 2000, "{}", hits.len());
            let expect = if copied { hay.len() as u64 } else { 0 };
            assert_eq!(t.host_copied, expect, "{path:?} from {from}");
            assert!(t.busy(Stage::Compute) > std::time::Duration::ZERO);
            assert!(t.busy(Stage::Readback) > std::time::Duration::ZERO);
            // In place, a staged haystack has no upload stage at all; the
            // device-copy path always uploads.
            let uploads = t.busy(Stage::Upload) > std::time::Duration::ZERO;
            assert_eq!(
                uploads,
                copied || path == UploadPath::DeviceCopy,
                "{path:?} {from}"
            );
        }
        // A haystack on the heap is copied once by the CPU.
        let (hits, t) = profiled(&g, &data);
        assert!(hits == run(&cpu, &data));
        assert_eq!(t.host_copied, data.len() as u64);
        // The buffer can be written again after a search (nothing holds it).
        buf.as_mut_slice()[..4].copy_from_slice(b"\xff\xd8\xff\xdb");
        let (hits, _) = profiled(&g, &buf.as_slice()[..64]);
        assert_eq!(hits.first().map(|h| h.pos), Some(0));
        drop(buf);
        // Freed buffers are forgotten: a heap haystack is never mistaken for one.
        let (hits, t) = profiled(&g, &data);
        assert!(hits == run(&cpu, &data));
        assert_eq!(t.host_copied, data.len() as u64);
    }
}

#[test]
fn device_copy_path_equals_cpu_on_dense_windowed_and_random_input() {
    let p = signatures();
    let Some(g) = gpu_on(&p, UploadPath::DeviceCopy) else {
        return;
    };
    let mut rng = Rng(0xC0FFEE);
    let hay = planted(&mut rng, &p, 3 << 20, 20_000);
    check(&g, &p, &hay, false);
    // Growth of the results buffer and split dispatches reuse the upload.
    let dense = pats(&["41", "41 41", "?? 41"]);
    let config = GpuConfig {
        max_hit_capacity: 1000,
        initial_hit_capacity: 16,
        upload: UploadPath::DeviceCopy,
        ..test_config()
    };
    let Some(g) = gpu_with(&dense, config) else {
        return;
    };
    let hits = check(&g, &dense, &vec![b'A'; 20_000], true);
    assert_eq!(hits.len(), 3 * 20_000 - 2);
    // Windows: each one uploaded on its own.
    let win = pats(&["?? ?? ?? ?? ?? ?? ?? 37", r#""0123456789""#, r#""9""#]);
    let config = GpuConfig {
        slot_bytes: 4096,
        upload: UploadPath::DeviceCopy,
        ..test_config()
    };
    let Some(g) = gpu_with(&win, config) else {
        return;
    };
    let hay: Vec<u8> = b"0123456789".iter().copied().cycle().take(20_011).collect();
    for skip in 0..10 {
        check(&g, &win, &hay[skip..], true);
    }
}

#[test]
fn upload_path_names_parse() {
    for p in [
        UploadPath::Auto,
        UploadPath::InPlace,
        UploadPath::DeviceCopy,
    ] {
        assert_eq!(p.as_str().parse::<UploadPath>(), Ok(p));
    }
    assert!(
        "dma"
            .parse::<UploadPath>()
            .unwrap_err()
            .contains("in-place")
    );
}

/// `--engine auto`'s engine with this machine's GPU beside the CPU engine
/// (software devices allowed here): a whole scan through the pipeline, on
/// four workers and one GPU slot, gives the CPU engine's match stream, and
/// both engines searched blocks.
#[test]
fn auto_engine_shares_a_scan_between_the_gpu_and_the_cpu() {
    use gpucarve::engine::auto::{AutoEngine, SetupFailure};
    use gpucarve::scan::{Engines, Match, ScanOptions, scan};
    use gpucarve::source::{BlockSpec, Image};
    use std::io::Write;

    let p = signatures();
    // Is there a device at all? (Fails under GPUCARVE_REQUIRE_GPU=1 if not.)
    if gpu(&p).is_none() {
        return;
    }
    let mut rng = Rng(0x5EED_0016);
    let data = planted(&mut rng, &p, 3 << 20, 3000);
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&data).unwrap();
    file.flush().unwrap();
    let image = Image::open(file.path()).unwrap();
    let overlap = gpucarve::engine::max_pattern_len(&p) - 1;
    let block = 64 << 10;
    let owned = p.clone();
    let auto = AutoEngine::start(
        Box::new(CpuEngine::new(&p).unwrap()),
        block + overlap,
        block,
        move || {
            let config = GpuConfig {
                slots: 1,
                slot_bytes: (block + overlap).next_multiple_of(4),
                ..GpuConfig::default()
            };
            GpuEngine::with_config(&owned, DeviceChoice::Auto, true, config)
                .map(|g| Box::new(g) as Box<dyn Engine>)
                .map_err(|e| SetupFailure::Failed(e.to_string()))
        },
    );
    auto.wait_for_setup();
    assert!(auto.gpu().is_some(), "{}", auto.name());
    let stream = |engine: &dyn Engine| {
        let mut got: Vec<Match> = Vec::new();
        let mut sink = |_: &BlockSpec, m: &[Match]| {
            got.extend_from_slice(m);
            Ok(())
        };
        let opts = ScanOptions {
            block_size: block,
            threads: 4,
            ..ScanOptions::default()
        };
        let stats = scan(
            &image,
            Engines {
                primary: engine,
                fallback: None,
            },
            overlap,
            &opts,
            &mut sink,
            &mut |_| {},
            &mut |w| panic!("warning: {w}"),
        )
        .unwrap();
        (got, stats)
    };
    let (want, _) = stream(&CpuEngine::new(&p).unwrap());
    let (got, stats) = stream(&auto);
    assert!(want.len() >= 2000, "{} matches", want.len());
    assert!(
        got == want,
        "auto {} matches != cpu {}",
        got.len(),
        want.len()
    );
    let (on_gpu, all) = auto.blocks();
    assert_eq!(all, stats.blocks);
    assert!(on_gpu >= 1, "the GPU searched no block: {}", stats.engine);
    assert!(
        stats.engine.starts_with("cpu+gpu:")
            && stats
                .engine
                .contains(&format!("({on_gpu} of {all} blocks on the GPU)")),
        "{}",
        stats.engine
    );
}

/// The pipeline cache on disk: a first set-up writes the device's file, a
/// second finds it and starts the driver's cache from it; a corrupt or
/// foreign file is ignored (the engine is still built and exact) and
/// replaced by a good one; `None` reads and writes nothing.
#[test]
fn pipeline_cache_is_saved_found_and_a_bad_file_ignored() {
    use gpucarve::engine::gpu::CacheState;
    let p = signatures();
    let dir = tempfile::tempdir().unwrap();
    let with_cache = |dir: Option<&std::path::Path>| GpuConfig {
        pipeline_cache: dir.map(|d| d.to_path_buf()),
        ..test_config()
    };
    let Some(first) = gpu_with(&p, with_cache(Some(dir.path()))) else {
        return;
    };
    assert_eq!(first.pipeline_cache(), &CacheState::Cold);
    assert!(
        first
            .setup_steps()
            .iter()
            .any(|(s, _)| *s == "pipeline (cold cache)"),
        "{:?}",
        first.setup_steps()
    );
    drop(first);
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "one file, no temporary left: {files:?}");
    let file = files[0].clone();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("pipeline-") && name.ends_with(".bin"),
        "{name}"
    );
    let good = std::fs::read(&file).unwrap();
    assert!(good.len() >= 32, "{} bytes", good.len());

    let second = gpu_with(&p, with_cache(Some(dir.path()))).unwrap();
    assert_eq!(second.pipeline_cache(), &CacheState::Loaded(good.len()));
    assert!(
        second
            .setup_steps()
            .iter()
            .any(|(s, _)| *s == "pipeline (warm cache)")
    );
    let hay = planted(&mut Rng(0xCAC4E), &p, 1 << 20, 200);
    check(&second, &p, &hay, false);
    drop(second);

    // Corrupt: same header, garbage after it, then garbage everywhere,
    // then another device's header.
    let mut corrupt = good.clone();
    corrupt.truncate(32);
    corrupt.extend(std::iter::repeat_n(0xA5, 4096));
    let mut foreign = good.clone();
    foreign[12] ^= 0xFF;
    for (what, bad) in [
        ("garbage body", corrupt),
        ("garbage", vec![0x5A; 100]),
        ("empty", Vec::new()),
        ("foreign", foreign),
    ] {
        std::fs::write(&file, &bad).unwrap();
        let g = gpu_with(&p, with_cache(Some(dir.path()))).unwrap();
        match (what, g.pipeline_cache()) {
            // The driver sees a header of this device and discards the rest.
            ("garbage body", CacheState::Loaded(_)) => {}
            (_, CacheState::Ignored(_)) => {}
            (w, s) => panic!("{w}: {s:?}"),
        }
        check(&g, &p, &hay, false);
        drop(g);
        let now = std::fs::read(&file).unwrap();
        assert!(
            now.len() >= 32 && now[..32] == good[..32],
            "{what}: a good file is written back"
        );
    }

    // Off: nothing read or written (the garbage stays).
    std::fs::write(&file, b"garbage").unwrap();
    let g = gpu_with(&p, with_cache(None)).unwrap();
    assert_eq!(g.pipeline_cache(), &CacheState::Off);
    drop(g);
    assert_eq!(std::fs::read(&file).unwrap(), b"garbage");
}
