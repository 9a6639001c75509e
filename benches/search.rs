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

criterion_group!(benches, bench);
criterion_main!(benches);
