//! I/O backends over a 256 MiB file in the page cache (warm), in bytes/s:
//! `io/<backend>/discard` (read and drop: the ceiling), `io/<backend>/memcpy`
//! (copy every block once more: what an extra staging copy costs) and
//! `io/<backend>/bytewise` (touch every byte: a minimal consumer).
//! Cold-cache numbers come from `gpucarve bench --drop-caches`.

use std::io::Write;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpucarve::source::{BlockPlan, BufferPool, Image, IoMode, open_reader};

mod common;

const LEN: usize = 256 << 20;
const BLOCK: usize = 8 << 20;

fn bench(c: &mut Criterion) {
    let dir = std::env::var_os("GPUCARVE_BENCH_DIR")
        .map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    let path = dir.join(format!("gpucarve-io-bench-{}.img", std::process::id()));
    {
        let mut f =
            std::fs::File::create(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        f.write_all(&common::disk_like(LEN, 3))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let image = Image::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let plan = BlockPlan::new(image.len(), BLOCK, 63).unwrap_or_else(|e| panic!("{e}"));
    let pool = BufferPool::new(12, plan.buffer_capacity());
    let mut g = c.benchmark_group("io");
    g.throughput(Throughput::Bytes(LEN as u64));
    g.sample_size(10);
    for mode in IoMode::ALL {
        let mut reader = open_reader(&image, mode, false, &mut |w| eprintln!("{w}"))
            .unwrap_or_else(|e| panic!("{e}"));
        let name = reader.name();
        g.bench_function(format!("{name}/discard"), |b| {
            b.iter(|| {
                let mut n = 0usize;
                reader
                    .read_blocks(&plan, &pool, &mut |blk| {
                        n += blk.bytes().len();
                        true
                    })
                    .unwrap_or_else(|e| panic!("{e}"));
                n
            })
        });
        let mut copy = vec![0u8; plan.buffer_capacity()];
        g.bench_function(format!("{name}/memcpy"), |b| {
            b.iter(|| {
                reader
                    .read_blocks(&plan, &pool, &mut |blk| {
                        let s = blk.bytes();
                        copy[..s.len()].copy_from_slice(s);
                        true
                    })
                    .unwrap_or_else(|e| panic!("{e}"));
                copy[0]
            })
        });
        g.bench_function(format!("{name}/bytewise"), |b| {
            b.iter(|| {
                let mut acc = 0u64;
                reader
                    .read_blocks(&plan, &pool, &mut |blk| {
                        acc = blk
                            .bytes()
                            .iter()
                            .fold(acc, |a, &x| a.wrapping_add(u64::from(x)));
                        true
                    })
                    .unwrap_or_else(|e| panic!("{e}"));
                acc
            })
        });
    }
    g.finish();
    let _ = std::fs::remove_file(&path);
}

criterion_group!(benches, bench);
criterion_main!(benches);
