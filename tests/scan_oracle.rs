//! The whole scan pipeline (blocks, overlap, every I/O backend, worker
//! threads, merge) against the brute-force oracle run over the whole image
//! in one piece.

use std::io::Write;

use gpucarve::catalogue::Catalogue;
use gpucarve::engine::cpu::CpuEngine;
use gpucarve::engine::naive::NaiveEngine;
use gpucarve::engine::{Engine, Hit};
use gpucarve::pattern::Pattern;
use gpucarve::scan::{BlockObserver, Engines, Match, ScanOptions, scan};
use gpucarve::source::{BlockSpec, Image, IoMode};
use proptest::prelude::*;

fn oracle(patterns: &[Pattern], data: &[u8]) -> Vec<Match> {
    let mut hits: Vec<Hit> = Vec::new();
    NaiveEngine::new(patterns).search(data, &mut hits).unwrap();
    hits.iter()
        .map(|h| Match {
            offset: h.pos as u64,
            pattern: h.pattern,
        })
        .collect()
}

fn scan_file(
    path: &std::path::Path,
    engine: &dyn Engine,
    patterns: &[Pattern],
    io: IoMode,
    block_size: usize,
    threads: usize,
) -> Vec<Match> {
    let image = Image::open(path).unwrap();
    let overlap = gpucarve::engine::max_pattern_len(patterns) - 1;
    let mut got = Vec::new();
    let mut last_end = 0u64;
    let mut sink = |b: &BlockSpec, m: &[Match]| {
        assert_eq!(
            b.offset, last_end,
            "blocks must arrive in order with no gap"
        );
        last_end = b.offset + b.owned_len as u64;
        got.extend_from_slice(m);
        Ok(())
    };
    let seen = std::sync::Arc::new(Seen::default());
    let opts = ScanOptions {
        block_size,
        io,
        threads,
        observer: Some(seen.clone()),
        // Even thread counts read as a carving does (`direct` and `uring`
        // through the page cache): the same matches either way.
        read_again: threads.is_multiple_of(2),
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
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(last_end, image.len());
    assert_eq!(stats.bytes, image.len());
    assert_eq!(stats.matches, got.len() as u64);
    // The observer was shown every owned byte once, as it is in the image.
    let mut blocks = std::mem::take(&mut *seen.0.lock().unwrap());
    blocks.sort_by_key(|(offset, _)| *offset);
    let shown: Vec<u8> = blocks.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    let mut at = 0u64;
    for (offset, bytes) in &blocks {
        assert_eq!(*offset, at, "blocks shown to the observer tile the image");
        at += bytes.len() as u64;
    }
    assert!(
        shown == std::fs::read(path).unwrap(),
        "the observer saw the image's bytes"
    );
    got
}

/// A [`BlockObserver`] that keeps what it is shown.
#[derive(Debug, Default)]
struct Seen(std::sync::Mutex<Vec<(u64, Vec<u8>)>>);

impl BlockObserver for Seen {
    fn observe(&self, offset: u64, owned: &[u8]) {
        self.0.lock().unwrap().push((offset, owned.to_vec()));
    }
}

fn write_temp(data: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(data).unwrap();
    f.flush().unwrap();
    f
}

/// Pattern sets that stress the semantics: prefixes, shared suffixes, overlaps, wildcards.
fn tricky_patterns() -> Vec<Pattern> {
    [
        r#""ABCD""#,
        r#""XBCD""#,
        r#""ABCE""#,
        r#""AB""#,
        r#""ABC""#,
        r#""BC""#,
        r#""AA""#,
        "FF D8 FF",
        "FF D8 FF ??",
        "FF ?? FF",
        r#"?? ?? ?? ?? "ftyp""#,
        r#""PK" 03 04"#,
        r#""%PDF-""#,
    ]
    .iter()
    .map(|t| Pattern::parse(t).unwrap())
    .collect()
}

/// Random bytes over a small alphabet (so patterns occur often) with planted
/// patterns, including at offset 0 and ending at the last byte.
fn planted_data() -> impl Strategy<Value = Vec<u8>> {
    let alphabet = prop::sample::select(vec![
        b'A', b'B', b'C', b'D', b'E', b'X', 0xFF, 0xD8, b'P', b'K', 3, 4, 0,
    ]);
    (
        prop::collection::vec(alphabet, 1..40_000),
        prop::collection::vec((any::<prop::sample::Index>(), 0usize..6), 0..40),
    )
        .prop_map(|(mut data, plants)| {
            let seeds: [&[u8]; 6] = [
                b"ABCD",
                b"\xff\xd8\xff\xe0",
                b"\0\0\0\x18ftypisom",
                b"PK\x03\x04",
                b"%PDF-1.4",
                b"XBCE",
            ];
            for (idx, which) in plants {
                let s = seeds[which];
                if data.len() >= s.len() {
                    let at = idx.index(data.len() - s.len() + 1);
                    data[at..at + s.len()].copy_from_slice(s);
                }
            }
            // Always one at the very start and one ending at the very last byte.
            if data.len() >= 8 {
                data[..4].copy_from_slice(b"ABCD");
                let n = data.len();
                data[n - 4..].copy_from_slice(b"FF\xd8\xff");
            }
            data
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn pipeline_equals_oracle_for_every_backend(data in planted_data(), blocks in 1usize..4, threads in 1usize..4) {
        let patterns = tricky_patterns();
        let expected = oracle(&patterns, &data);
        let engine = CpuEngine::new(&patterns).unwrap();
        let file = write_temp(&data);
        let block_size = 4096 * blocks; // down to the smallest legal block
        for io in IoMode::ALL {
            let got = scan_file(file.path(), &engine, &patterns, io, block_size, threads);
            prop_assert_eq!(&got, &expected, "backend {}", io);
        }
    }

    #[test]
    fn cpu_engine_equals_oracle_on_random_patterns(
        data in prop::collection::vec(prop::sample::select(vec![0u8, 1, 2, 0xFF]), 0..3000),
        pats in prop::collection::vec(prop::collection::vec(prop::option::weighted(0.8, prop::sample::select(vec![0u8, 1, 2, 0xFF])), 1..6), 1..12),
    ) {
        let patterns: Vec<Pattern> = pats
            .into_iter()
            .filter_map(|p| Pattern::new(p.into_iter().map(|b| b.map_or(gpucarve::pattern::ByteClass::Any, gpucarve::pattern::ByteClass::Exact)).collect()))
            .collect();
        prop_assume!(!patterns.is_empty());
        let mut a = Vec::new();
        let mut b = Vec::new();
        CpuEngine::new(&patterns).unwrap().search(&data, &mut a).unwrap();
        NaiveEngine::new(&patterns).search(&data, &mut b).unwrap();
        prop_assert_eq!(a, b);
    }
}

#[test]
fn shared_suffix_case_matches_nothing() {
    let patterns: Vec<Pattern> = [r#""ABCD""#, r#""XBCD""#, r#""ABCE""#]
        .iter()
        .map(|t| Pattern::parse(t).unwrap())
        .collect();
    let file = write_temp(b"XBCE");
    let engine = CpuEngine::new(&patterns).unwrap();
    for io in IoMode::ALL {
        assert!(scan_file(file.path(), &engine, &patterns, io, 4096, 1).is_empty());
    }
}

#[test]
fn built_in_catalogue_on_odd_sized_image_with_seams() {
    // Headers of every built-in type planted across block seams of a 4 KiB-block scan.
    let cat = Catalogue::builtin();
    let set = cat.compile();
    let mut data = vec![0x5Au8; 4096 * 5 + 1234];
    let mut at = 4096 - 3;
    for t in &cat.types {
        for h in &t.headers {
            let bytes: Vec<u8> = h
                .pattern
                .classes()
                .iter()
                .map(|c| c.exact().unwrap_or(0x11))
                .collect();
            let start = at as u64 + h.offset;
            let s = start as usize;
            if s + bytes.len() <= data.len() {
                data[s..s + bytes.len()].copy_from_slice(&bytes);
            }
            at = (at + 317) % (data.len() - 80);
        }
    }
    let expected = oracle(&set.patterns, &data);
    assert!(expected.len() >= cat.types.len());
    let engine = CpuEngine::new(&set.patterns).unwrap();
    let file = write_temp(&data);
    for io in IoMode::ALL {
        assert_eq!(
            scan_file(file.path(), &engine, &set.patterns, io, 4096, 2),
            expected,
            "{io}"
        );
    }
}

#[test]
fn match_dense_block_reports_every_byte() {
    let patterns = vec![
        Pattern::parse("FF").unwrap(),
        Pattern::parse("FF FF").unwrap(),
    ];
    let data = vec![0xFFu8; 3 * 4096 + 17];
    let engine = CpuEngine::new(&patterns).unwrap();
    let file = write_temp(&data);
    let got = scan_file(file.path(), &engine, &patterns, IoMode::Buffered, 4096, 2);
    assert_eq!(got.len(), data.len() * 2 - 1);
    assert_eq!(got, oracle(&patterns, &data));
}

/// An engine that loses its "device" after a few blocks.
struct FlakyEngine {
    inner: CpuEngine,
    left: std::sync::atomic::AtomicUsize,
}

impl Engine for FlakyEngine {
    fn name(&self) -> String {
        "flaky".into()
    }
    fn search(&self, hay: &[u8], out: &mut Vec<Hit>) -> Result<(), gpucarve::engine::EngineError> {
        let left = self.left.load(std::sync::atomic::Ordering::SeqCst);
        if left == 0 {
            // Report some garbage first: the pipeline must discard a failed block's hits.
            out.push(Hit { pos: 0, pattern: 0 });
            return Err(gpucarve::engine::EngineError::Device(
                "device lost (simulated)".into(),
            ));
        }
        self.left
            .store(left - 1, std::sync::atomic::Ordering::SeqCst);
        self.inner.search(hay, out)
    }
}

#[test]
fn device_lost_mid_scan_falls_back_to_the_cpu_and_loses_nothing() {
    let patterns = tricky_patterns();
    let mut data = vec![0u8; 20 * 4096 + 77];
    for i in (0..data.len() - 8).step_by(1000) {
        data[i..i + 4].copy_from_slice(b"ABCD");
    }
    let expected = oracle(&patterns, &data);
    let file = write_temp(&data);
    let image = Image::open(file.path()).unwrap();
    let flaky = FlakyEngine {
        inner: CpuEngine::new(&patterns).unwrap(),
        left: std::sync::atomic::AtomicUsize::new(5),
    };
    let cpu = CpuEngine::new(&patterns).unwrap();
    let mut got = Vec::new();
    let mut warnings = Vec::new();
    let stats = scan(
        &image,
        Engines {
            primary: &flaky,
            fallback: Some(&cpu),
        },
        gpucarve::engine::max_pattern_len(&patterns) - 1,
        &ScanOptions {
            block_size: 4096,
            io: IoMode::Buffered,
            threads: 2,
            observer: None,
            read_again: false,
        },
        &mut |_: &BlockSpec, m: &[Match]| {
            got.extend_from_slice(m);
            Ok(())
        },
        &mut |_| {},
        &mut |w| warnings.push(w),
    )
    .unwrap();
    assert_eq!(got, expected);
    assert!(stats.fallback_blocks >= 15, "{}", stats.fallback_blocks);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("device lost") && warnings[0].contains("CPU"));
}
