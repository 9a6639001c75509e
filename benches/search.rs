//! Engine throughput on data already in memory (one thread), in bytes/s.
//!
//! * `search/ac_cpu/*`: gpucarve's CPU engine (prefilter + verify, all matches);
//! * `search/aho_corasick_overlapping/*`: the aho-corasick crate's overlapping
//!   (Standard) search over the same literals: the all-matches baseline;
//! * `search/aho_corasick_leftmost/*`: its leftmost-first search with the
//!   packed (Teddy) prefilter: the speed class we aim for, without all-matches semantics;
//! * `search/pfac_gpu/*`: the PFAC compute shader, when a Vulkan device exists
//!   (the haystack on the heap: the engine copies it into its own buffer);
//! * `search/pfac_gpu_staged/*`: the same, the haystack already in the
//!   engine's staging memory, where the pipeline reads blocks (no copy).
//!
//! `catalogue` is the built-in catalogue; `1pattern` is `FF D8 FF`.
//!
//! `keywords/*/N` (N = 10, 1 000, 10 000, 100 000): a keyword list of N
//! random 6-10 byte literals (`scan --keywords`), 1 000 of them planted in
//! the data; each set's CPU engine is first checked against the
//! brute-force oracle on the first MiB. `keywords/pfac_gpu/N` runs where a
//! Vulkan device exists and holds the set's table (llvmpipe: up to 10 000).
//! `cargo bench --bench search -- keywords` runs these alone.
//! Literals for aho-corasick are the CPU engine's anchors (each pattern's most
//! selective run of exact bytes; wildcards cannot be expressed there).

use aho_corasick::{AhoCorasick, MatchKind};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpucarve::catalogue::Catalogue;
use gpucarve::engine::Engine;
use gpucarve::engine::cpu::CpuEngine;
use gpucarve::pattern::Pattern;

mod common;

const LEN: usize = 32 << 20;

fn bench(c: &mut Criterion) {
    let data = common::disk_like(LEN, 7);
    let sets: Vec<(&str, Vec<Pattern>)> = vec![
        ("catalogue", Catalogue::builtin().compile().patterns),
        (
            "1pattern",
            vec![Pattern::parse("FF D8 FF").unwrap_or_else(|e| panic!("{e}"))],
        ),
    ];
    let mut g = c.benchmark_group("search");
    g.throughput(Throughput::Bytes(LEN as u64));
    g.sample_size(10);
    for (name, patterns) in &sets {
        let engine = CpuEngine::new(patterns).unwrap_or_else(|e| panic!("{e}"));
        let mut hits = Vec::new();
        g.bench_function(format!("ac_cpu/{name}"), |b| {
            b.iter(|| {
                hits.clear();
                engine
                    .search(&data, &mut hits)
                    .unwrap_or_else(|e| panic!("{e}"));
                hits.len()
            })
        });
        // The same literals our prefilter searches for, so both sides do the same finding work.
        let lits = engine.anchors().to_vec();
        let overlapping = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&lits)
            .unwrap_or_else(|e| panic!("{e}"));
        g.bench_function(format!("aho_corasick_overlapping/{name}"), |b| {
            b.iter(|| overlapping.find_overlapping_iter(&data).count())
        });
        let leftmost = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&lits)
            .unwrap_or_else(|e| panic!("{e}"));
        g.bench_function(format!("aho_corasick_leftmost/{name}"), |b| {
            b.iter(|| leftmost.find_iter(&data).count())
        });
    }
    // The PFAC shader, where a Vulkan device exists (lavapipe runs it on the CPU).
    // Smaller data: lavapipe manages about 0.1 GiB/s.
    let gpu_len = 8 << 20;
    g.throughput(Throughput::Bytes(gpu_len as u64));
    for (name, patterns) in &sets {
        let config = gpucarve::engine::gpu::GpuConfig {
            slot_bytes: gpu_len,
            ..Default::default()
        };
        match gpucarve::engine::gpu::GpuEngine::with_config(
            patterns,
            Default::default(),
            true,
            config,
        ) {
            Ok(engine) => {
                let mut hits = Vec::new();
                g.bench_function(format!("pfac_gpu/{name}"), |b| {
                    b.iter(|| {
                        hits.clear();
                        engine
                            .search(&data[..gpu_len], &mut hits)
                            .unwrap_or_else(|e| panic!("{e}"));
                        hits.len()
                    })
                });
                // The same bytes already in the engine's staging memory (where
                // the pipeline reads blocks): no copy by the CPU first.
                let Some(provider) = engine.buffer_provider() else {
                    eprintln!("search/pfac_gpu_staged/{name}: skipped, no staging memory");
                    continue;
                };
                let mut staged = provider.allocate(gpu_len).unwrap_or_else(|e| panic!("{e}"));
                staged.as_mut_slice()[..gpu_len].copy_from_slice(&data[..gpu_len]);
                g.bench_function(format!("pfac_gpu_staged/{name}"), |b| {
                    b.iter(|| {
                        hits.clear();
                        engine
                            .search(&staged.as_slice()[..gpu_len], &mut hits)
                            .unwrap_or_else(|e| panic!("{e}"));
                        hits.len()
                    })
                });
            }
            Err(e) => eprintln!("search/pfac_gpu/{name}: skipped, no Vulkan device: {e}"),
        }
    }
    g.finish();
}

/// `n` random 6-10 byte literals (distinct), and `data` with up to 1 000 of them planted.
fn keyword_set(n: usize, data: &mut [u8]) -> Vec<Pattern> {
    let mut r = common::Rng::new(n as u64 + 3);
    let mut seen = std::collections::HashSet::new();
    let mut words = Vec::with_capacity(n);
    while words.len() < n {
        let len = 6 + (r.next() % 5) as usize;
        let w: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    for w in words.iter().take(1000) {
        let at = (r.next() % (data.len() - w.len()) as u64) as usize;
        data[at..at + w.len()].copy_from_slice(w);
    }
    words
        .iter()
        .map(|w| Pattern::literal(w).unwrap_or_else(|| panic!("empty keyword")))
        .collect()
}

fn keywords(c: &mut Criterion) {
    let mut g = c.benchmark_group("keywords");
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(4));
    for n in [10, 1_000, 10_000, 100_000] {
        let mut data = common::disk_like(LEN, 11);
        let patterns = keyword_set(n, &mut data);
        let t = std::time::Instant::now();
        let engine = CpuEngine::new(&patterns).unwrap_or_else(|e| panic!("{e}"));
        eprintln!("keywords/{n}: CPU engine built in {:?}", t.elapsed());
        let check = &data[..1 << 20];
        let (mut got, mut want) = (Vec::new(), Vec::new());
        engine
            .search(check, &mut got)
            .unwrap_or_else(|e| panic!("{e}"));
        gpucarve::engine::naive::NaiveEngine::new(&patterns)
            .search(check, &mut want)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            got == want,
            "keywords/{n}: the CPU engine differs from the oracle"
        );
        g.throughput(Throughput::Bytes(LEN as u64));
        let mut hits = Vec::new();
        g.bench_function(format!("ac_cpu/{n}"), |b| {
            b.iter(|| {
                hits.clear();
                engine
                    .search(&data, &mut hits)
                    .unwrap_or_else(|e| panic!("{e}"));
                hits.len()
            })
        });
        let lits: Vec<Vec<u8>> = patterns
            .iter()
            .map(|p| p.classes().iter().filter_map(|c| c.exact()).collect())
            .collect();
        let overlapping = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&lits)
            .unwrap_or_else(|e| panic!("{e}"));
        g.bench_function(format!("aho_corasick_overlapping/{n}"), |b| {
            b.iter(|| overlapping.find_overlapping_iter(&data).count())
        });
        let gpu_len = 8 << 20;
        let config = gpucarve::engine::gpu::GpuConfig {
            slot_bytes: gpu_len,
            max_states: gpucarve::engine::pfac::state_cap(&patterns),
            ..Default::default()
        };
        match gpucarve::engine::gpu::GpuEngine::with_config(
            &patterns,
            Default::default(),
            true,
            config,
        ) {
            Ok(gpu) => {
                got.clear();
                gpu.search(check, &mut got)
                    .unwrap_or_else(|e| panic!("{e}"));
                assert!(
                    got == want,
                    "keywords/{n}: the GPU engine differs from the oracle"
                );
                g.throughput(Throughput::Bytes(gpu_len as u64));
                g.bench_function(format!("pfac_gpu/{n}"), |b| {
                    b.iter(|| {
                        hits.clear();
                        gpu.search(&data[..gpu_len], &mut hits)
                            .unwrap_or_else(|e| panic!("{e}"));
                        hits.len()
                    })
                });
            }
            Err(e) => eprintln!("keywords/pfac_gpu/{n}: skipped: {e}"),
        }
    }
    g.finish();
}

criterion_group!(benches, bench, keywords);
criterion_main!(benches);
