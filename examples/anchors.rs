//! Diagnostics: which anchors the CPU engine picks and how often each fires on a file.
use std::collections::HashMap;
fn main() {
    let set = gpucarve::catalogue::Catalogue::builtin().compile();
    let e = gpucarve::engine::cpu::CpuEngine::new(&set.patterns).unwrap();
    println!(
        "patterns {} anchors {} simd {} passes {}",
        set.patterns.len(),
        e.anchor_count(),
        e.uses_simd(),
        e.passes()
    );
    let Some(path) = std::env::args().nth(1) else {
        return;
    };
    let data = std::fs::read(path).unwrap();
    let data = &data[..data.len().min(256 << 20)];
    let ac = aho_corasick::AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::Standard)
        .build(e.anchors())
        .unwrap();
    let mut counts: HashMap<usize, usize> = HashMap::new();
    for m in ac.find_overlapping_iter(data) {
        *counts.entry(m.pattern().as_usize()).or_default() += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    for (i, n) in v.iter().take(12) {
        println!("{n:>8}  {:?}", String::from_utf8_lossy(&e.anchors()[*i]));
    }
    let t = std::time::Instant::now();
    let mut hits = Vec::new();
    gpucarve::engine::Engine::search(&e, data, &mut hits).unwrap();
    println!(
        "{} hits, {:.0} MiB/s",
        hits.len(),
        data.len() as f64 / t.elapsed().as_secs_f64() / 1048576.0
    );
}
