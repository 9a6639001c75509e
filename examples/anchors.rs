fn main() {
    let set = gpucarve::catalogue::Catalogue::builtin().compile();
    let e = gpucarve::engine::cpu::CpuEngine::new(&set.patterns).unwrap();
    println!(
        "patterns {} anchors {} simd {}",
        set.patterns.len(),
        e.anchor_count(),
        e.uses_simd()
    );
    for p in &set.patterns {
        println!(
            "{:?}",
            p.longest_exact_run()
                .map(|(d, r)| (d, String::from_utf8_lossy(&r).to_string()))
        );
    }
}
