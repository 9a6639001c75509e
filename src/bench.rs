//! `gpucarve bench`: throughput of engines and I/O backends on the
//! examiner's own image and hardware, with a stage profile and a sweep.
//!
//! For every configuration (engine × I/O backend × block size × threads) it
//! measures, `repeat` times, and reports medians with the spread:
//! * the I/O ceiling: the same backend reading and discarding every block;
//! * the scan end to end (read → engine → merge), with the time each stage
//!   was busy, the bottleneck named, and the ratio to the I/O ceiling;
//! * the engine alone on data already in memory (the first `mem_bytes` of the
//!   image, searched block by block on the same number of threads).
//!
//! Each row also says what the blocks were read into (the heap, or the GPU
//! engine's staging memory), how many bytes the CPU copied per byte scanned
//! (0 when `direct`/`uring` reads land in the GPU's staging memory), and the
//! busy fraction of each stage: read, upload (to the memory the engine
//! searches), compute and read-back, and their overlap: the share of the
//! wall time stages spent running at once (the busy fractions add up to the
//! time any stage was busy plus the overlap).
//!
//! Baselines measured in the same run: aho-corasick's overlapping search over
//! the CPU engine's anchors (in memory, one thread), and `rg -a -c -F` over
//! the image when ripgrep is installed. Nothing here asserts a speed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::catalogue::Catalogue;
use crate::engine::{Engine, EngineChoice, Hit, Stage, build_engines};
use crate::scan::{Engines, Match, ScanOptions, ScanStats, scan};
use crate::source::{BlockMemory, BlockPlan, BlockSpec, BufferPool, Image, IoMode, open_reader};

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub engines: Vec<EngineChoice>,
    pub io: Vec<IoMode>,
    pub block_sizes: Vec<usize>,
    pub threads: Vec<usize>,
    pub repeat: usize,
    pub drop_caches: bool,
    /// Bytes of the image loaded for the in-memory engine measurement.
    pub mem_bytes: usize,
    pub baselines: bool,
    /// How the image is taken (a container is decoded: its io-ceiling is
    /// the decoding's throughput on the row's threads).
    pub input: crate::source::InputMode,
}

/// Median and spread of repeated timings, in seconds.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Timing {
    fn of(mut v: Vec<f64>) -> Timing {
        v.sort_by(f64::total_cmp);
        let median = if v.is_empty() { 0.0 } else { v[v.len() / 2] };
        Timing {
            median,
            min: v.first().copied().unwrap_or(0.0),
            max: v.last().copied().unwrap_or(0.0),
        }
    }
}

/// One configuration's results.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    pub engine: String,
    pub io: String,
    pub block_size: usize,
    pub threads: usize,
    pub mib: f64,
    pub wall: Timing,
    pub mib_s: f64,
    pub matches: u64,
    pub matches_s: f64,
    /// Read-and-discard with the same backend and block size.
    pub io_ceiling_mib_s: f64,
    pub ratio_to_io_ceiling: f64,
    /// Engine alone, data in memory, same threads.
    pub engine_mem_mib_s: f64,
    pub ratio_to_engine_mem: f64,
    /// Stage busy times (seconds, medians): reading, searching (summed over threads), merging.
    pub read_s: f64,
    pub search_s: f64,
    pub merge_s: f64,
    pub bottleneck: String,
    /// What blocks were read into: `heap`, the GPU's staging memory, `mapping`.
    pub buffers: String,
    /// Bytes copied by the CPU per byte scanned (reader and engine copies;
    /// median of the runs).
    pub host_copies_per_byte: f64,
    /// Busy fraction of each stage (medians of the runs).
    pub busy: StageBusy,
    /// Peak resident memory of the process after this row (KiB).
    pub peak_rss_kib: u64,
}

/// Fraction of the wall time during which at least one block was in each
/// stage; see [`crate::engine::profile`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct StageBusy {
    pub read: f64,
    pub upload: f64,
    pub compute: f64,
    pub readback: f64,
    /// Time the stages spent overlapping one another (the busy fractions
    /// add up to the time any stage was busy plus this).
    pub overlap: f64,
}

impl StageBusy {
    fn of(stats: &ScanStats) -> StageBusy {
        StageBusy {
            read: stats.busy_fraction(Stage::Read),
            upload: stats.busy_fraction(Stage::Upload),
            compute: stats.busy_fraction(Stage::Compute),
            readback: stats.busy_fraction(Stage::Readback),
            overlap: stats.overlap_fraction(),
        }
    }

    /// Medians, stage by stage.
    fn median(runs: &[StageBusy]) -> StageBusy {
        let m = |f: fn(&StageBusy) -> f64| Timing::of(runs.iter().map(f).collect()).median;
        StageBusy {
            read: m(|b| b.read),
            upload: m(|b| b.upload),
            compute: m(|b| b.compute),
            readback: m(|b| b.readback),
            overlap: m(|b| b.overlap),
        }
    }
}

/// A baseline measured in the same run.
#[derive(Clone, Debug, Serialize)]
pub struct Baseline {
    pub name: String,
    pub mib_s: f64,
    pub note: String,
}

/// Everything `bench` measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub image: String,
    /// What the image is (`raw`, `EWF (E01), chunk 32768 bytes`, ...).
    pub container: String,
    pub image_bytes: u64,
    pub patterns: usize,
    pub cpus: usize,
    pub rows: Vec<BenchRow>,
    pub baselines: Vec<Baseline>,
    /// Engines that could not run, and why.
    pub missing: Vec<String>,
    pub best: Option<String>,
    /// Each engine's set-up and tear-down.
    pub setups: Vec<EngineSetup>,
}

/// How long an engine took to be ready, step by step, and to go away.
#[derive(Clone, Debug, Serialize)]
pub struct EngineSetup {
    pub engine: String,
    /// From asking for the engine to its being ready (seconds).
    pub setup_s: f64,
    /// The engine's own steps, in order (the GPU: PFAC table, instance,
    /// device, staging memory, pipeline, table upload, slots).
    pub steps: Vec<SetupStep>,
    /// Dropping it after its rows (seconds).
    pub teardown_s: f64,
}

/// One set-up step.
#[derive(Clone, Debug, Serialize)]
pub struct SetupStep {
    pub step: String,
    pub s: f64,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Peak resident set size of this process (VmHWM), in KiB.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Drops the page cache (needs root): cold-cache measurements.
pub fn drop_caches() -> Result<(), String> {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        format!(
            "--drop-caches needs the right to write /proc/sys/vm/drop_caches (run as root): {e}"
        )
    })
}

fn io_ceiling(image: &Image, io: IoMode, block_size: usize, overlap: usize) -> Result<f64, String> {
    let plan = BlockPlan::new(image.len(), block_size, overlap).map_err(|e| e.to_string())?;
    let pool = BufferPool::new(8, plan.buffer_capacity());
    let mut reader = open_reader(image, io, false, &mut |_| {}).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let mut n = 0u64;
    reader
        .read_blocks(&plan, &pool, &mut |b| {
            n += b.spec.owned_len as u64;
            // Touch one byte per page so mmap really faults its pages in.
            let s = b.bytes();
            let mut acc = 0u8;
            for i in (0..s.len()).step_by(4096) {
                acc ^= s[i];
            }
            std::hint::black_box(acc);
            true
        })
        .map_err(|e| e.to_string())?;
    Ok(t.elapsed().as_secs_f64())
}

/// The engine over in-memory blocks on `threads` threads; returns MiB/s.
///
/// The blocks are laid out in the engine's own memory when it offers some
/// (the GPU's staging buffers, so the figure is the device's, not a copy's:
/// comparable to in-memory GPU figures elsewhere), else searched in `data`.
fn engine_in_memory(
    engine: &dyn Engine,
    data: &[u8],
    block_size: usize,
    overlap: usize,
    threads: usize,
) -> f64 {
    let plan = match BlockPlan::new(data.len() as u64, block_size, overlap) {
        Ok(p) => p,
        Err(_) => return 0.0,
    };
    let blocks: Vec<BlockSpec> = plan.blocks().collect();
    let staged: Option<Vec<Box<dyn BlockMemory>>> = engine.buffer_provider().and_then(|p| {
        blocks
            .iter()
            .map(|b| {
                let mut m = p.allocate(plan.buffer_capacity()).ok()?;
                let start = b.offset as usize;
                m.as_mut_slice()
                    .get_mut(..b.data_len)?
                    .copy_from_slice(&data[start..start + b.data_len]);
                Some(m)
            })
            .collect()
    });
    let haystack = |i: usize| -> Option<&[u8]> {
        let b = blocks.get(i)?;
        match &staged {
            Some(m) => m.get(i)?.as_slice().get(..b.data_len),
            None => data.get(b.offset as usize..b.offset as usize + b.data_len),
        }
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut hits: Vec<Hit> = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(h) = haystack(i) else { break };
                    hits.clear();
                    let _ = engine.search(h, &mut hits);
                }
            });
        }
    });
    mib(data.len() as u64) / t.elapsed().as_secs_f64().max(1e-9)
}

/// One engine's measurements on the image ([`run`]).
struct Measure<'a> {
    image: &'a Image,
    engines: &'a crate::engine::EngineSet,
    /// The image's first bytes, for the engine's in-memory speed.
    mem: &'a [u8],
    overlap: usize,
    /// Scans per configuration (at least one).
    repeat: usize,
    drop_caches: bool,
}

/// What the repeated scans of one configuration measured: per scan, and
/// from the last one.
struct Samples {
    walls: Vec<f64>,
    reads: Vec<f64>,
    searches: Vec<f64>,
    merges: Vec<f64>,
    ceilings: Vec<f64>,
    copies: Vec<f64>,
    busy: Vec<StageBusy>,
    matches: u64,
    backend: String,
    buffers: String,
    block_size: usize,
}

impl Measure<'_> {
    /// Scans the image `repeat` times with `io`, blocks of `bs` bytes and
    /// `threads` threads, each after measuring the I/O ceiling (caches
    /// dropped before each, when asked).
    fn scans(&self, io: IoMode, bs: usize, threads: usize) -> Result<Samples, String> {
        let (image, engines, overlap) = (self.image, self.engines, self.overlap);
        let (mut walls, mut reads, mut searches, mut merges, mut ceilings) =
            (vec![], vec![], vec![], vec![], vec![]);
        let (mut copies, mut busy) = (vec![], vec![]);
        let mut matches = 0;
        let mut backend = io.as_str().to_string();
        let mut buffers = String::new();
        let mut block_size = bs;
        for _ in 0..self.repeat {
            if self.drop_caches {
                drop_caches()?;
            }
            image.media().use_threads(threads);
            ceilings.push(io_ceiling(image, io, bs, overlap)?);
            if self.drop_caches {
                drop_caches()?;
            }
            let mut count = 0u64;
            let mut sink = |_: &BlockSpec, m: &[Match]| {
                count += m.len() as u64;
                Ok(())
            };
            let so = ScanOptions {
                block_size: bs,
                io,
                threads,
                observer: None,
                read_again: false,
            };
            let st = scan(
                image,
                Engines {
                    primary: engines.primary.as_ref(),
                    fallback: engines.fallback.as_deref(),
                },
                overlap,
                &so,
                &mut sink,
                &mut |_| {},
                &mut |_| {},
            )
            .map_err(|e| e.to_string())?;
            walls.push(st.wall.as_secs_f64());
            reads.push(st.read.as_secs_f64());
            searches.push(st.search.as_secs_f64());
            merges.push(st.sink.as_secs_f64());
            copies.push(st.host_copies_per_byte());
            busy.push(StageBusy::of(&st));
            matches = count;
            backend = st.io_backend.clone();
            buffers = st.buffers.clone();
            block_size = st.block_size;
        }
        Ok(Samples {
            walls,
            reads,
            searches,
            merges,
            ceilings,
            copies,
            busy,
            matches,
            backend,
            buffers,
            block_size,
        })
    }

    /// The row of one configuration: its medians, its speed beside the I/O
    /// ceiling and the engine's in memory (measured now), its bottleneck.
    fn row(&self, s: Samples, threads: usize) -> BenchRow {
        let (engines, overlap, block_size, matches) =
            (self.engines, self.overlap, s.block_size, s.matches);
        let wall = Timing::of(s.walls);
        let size = mib(self.image.len());
        let mib_s = size / wall.median.max(1e-9);
        let ceiling = size / Timing::of(s.ceilings).median.max(1e-9);
        let mem_mib_s = engine_in_memory(
            engines.primary.as_ref(),
            self.mem,
            block_size,
            overlap,
            threads,
        );
        let (read_s, search_s, merge_s) = (
            Timing::of(s.reads).median,
            Timing::of(s.searches).median,
            Timing::of(s.merges).median,
        );
        // Busy fraction of each stage's capacity: the fullest is the bottleneck.
        let stages = [
            ("read", read_s / wall.median.max(1e-9)),
            (
                "search",
                search_s / (wall.median.max(1e-9) * threads as f64),
            ),
            ("merge", merge_s / wall.median.max(1e-9)),
        ];
        let bottleneck = stages
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|s| format!("{} ({:.0}% busy)", s.0, s.1 * 100.0))
            .unwrap_or_default();
        BenchRow {
            engine: engines.primary.name(),
            io: s.backend,
            block_size,
            threads,
            mib: size,
            mib_s,
            matches,
            matches_s: matches as f64 / wall.median.max(1e-9),
            io_ceiling_mib_s: ceiling,
            ratio_to_io_ceiling: mib_s / ceiling.max(1e-9),
            engine_mem_mib_s: mem_mib_s,
            ratio_to_engine_mem: mib_s / mem_mib_s.max(1e-9),
            read_s,
            search_s,
            merge_s,
            bottleneck,
            buffers: s.buffers,
            host_copies_per_byte: Timing::of(s.copies).median,
            busy: StageBusy::median(&s.busy),
            peak_rss_kib: peak_rss_kib(),
            wall,
        }
    }
}

/// Runs the benchmark. `progress` receives one line per finished measurement.
pub fn run(
    image_path: &Path,
    catalogue: &Catalogue,
    opts: &BenchOptions,
    progress: &mut dyn FnMut(String),
) -> Result<BenchReport, String> {
    let image = crate::source::open_input(image_path, &std::env::temp_dir(), opts.input)
        .map_err(|e| e.to_string())?;
    let set = catalogue.compile();
    let overlap = set.max_len().saturating_sub(1);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let container = image.media().describe();
    let mut report = BenchReport {
        image: image_path.display().to_string(),
        container: container.clone(),
        image_bytes: image.len(),
        patterns: set.patterns.len(),
        cpus,
        rows: Vec::new(),
        baselines: Vec::new(),
        missing: Vec::new(),
        best: None,
        setups: Vec::new(),
    };
    let mem_len = (image.len() as usize).min(opts.mem_bytes);
    let mut mem = vec![0u8; mem_len];
    image.read_at(0, &mut mem).map_err(|e| e.to_string())?;
    let repeat = opts.repeat.max(1);

    for choice in &opts.engines {
        let asked = Instant::now();
        let engines = match build_engines(
            &set.patterns,
            choice,
            opts.block_sizes
                .iter()
                .copied()
                .max()
                .unwrap_or(crate::scan::DEFAULT_BLOCK_SIZE)
                + overlap,
            image.len(),
        ) {
            Ok(e) => e,
            Err(e) => {
                let name = match choice {
                    EngineChoice::Gpu { .. } => "gpu",
                    EngineChoice::Cpu => "cpu",
                    EngineChoice::Auto => "auto",
                };
                report.missing.push(format!("{name}: {e}"));
                progress(format!("{name}: not measured: {e}"));
                continue;
            }
        };
        let setup_s = asked.elapsed().as_secs_f64();
        let measure = Measure {
            image: &image,
            engines: &engines,
            mem: &mem,
            overlap,
            repeat,
            drop_caches: opts.drop_caches,
        };
        for &io in &opts.io {
            for &bs in &opts.block_sizes {
                for &threads in &opts.threads {
                    let threads = if threads == 0 { cpus } else { threads };
                    let samples = measure.scans(io, bs, threads)?;
                    let row = measure.row(samples, threads);
                    progress(format_row(&row));
                    report.rows.push(row);
                }
            }
        }
        let setup = timed_teardown(engines, setup_s);
        progress(format_setup(&setup));
        report.setups.push(setup);
    }
    report.best = report
        .rows
        .iter()
        .max_by(|a, b| a.mib_s.total_cmp(&b.mib_s))
        .map(|r| {
            format!(
                "{} --io {} --block-size {} --threads {}: {:.0} MiB/s",
                r.engine, r.io, r.block_size, r.threads, r.mib_s
            )
        });
    if opts.baselines {
        // ripgrep reads the file as it lies on the disk: a container's
        // bytes are not the medium.
        let file = (image.kind() != crate::source::ImageKind::Container).then_some(image_path);
        report.baselines = baselines(file, &set.patterns, &mem)?;
    }
    Ok(report)
}

/// The engine's set-up (measured by the caller, `setup_s`, and step by
/// step by the engine) and the time dropping it takes.
fn timed_teardown(engines: crate::engine::EngineSet, setup_s: f64) -> EngineSetup {
    let engine = engines.primary.name();
    let steps = engines
        .primary
        .setup_steps()
        .into_iter()
        .map(|(step, s)| SetupStep {
            step: step.into(),
            s,
        })
        .collect();
    let t = Instant::now();
    drop(engines);
    EngineSetup {
        engine,
        setup_s,
        steps,
        teardown_s: t.elapsed().as_secs_f64(),
    }
}

/// `gpu:lavapipe: set-up 412 ms (instance 12, device 40, ...), tear-down 3 ms`.
fn format_setup(s: &EngineSetup) -> String {
    let steps: Vec<String> = s
        .steps
        .iter()
        .map(|p| format!("{} {:.0}", p.step, p.s * 1e3))
        .collect();
    let detail = if steps.is_empty() {
        String::new()
    } else {
        format!(" ({})", steps.join(", "))
    };
    format!(
        "{}: set-up {:.0} ms{detail}, tear-down {:.0} ms",
        s.engine,
        s.setup_s * 1e3,
        s.teardown_s * 1e3
    )
}

fn baselines(
    image_path: Option<&Path>,
    patterns: &[crate::pattern::Pattern],
    mem: &[u8],
) -> Result<Vec<Baseline>, String> {
    let mut out = Vec::new();
    let cpu = crate::engine::cpu::CpuEngine::new(patterns).map_err(|e| e.to_string())?;
    let mut hits = Vec::new();
    let t = Instant::now();
    let _ = cpu.search(mem, &mut hits);
    out.push(Baseline {
        name: "gpucarve cpu engine, in memory, 1 thread".into(),
        mib_s: mib(mem.len() as u64) / t.elapsed().as_secs_f64().max(1e-9),
        note: format!(
            "{} matches over {:.0} MiB",
            hits.len(),
            mib(mem.len() as u64)
        ),
    });
    let ac = aho_corasick::AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::Standard)
        .build(cpu.anchors())
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    let n = ac.find_overlapping_iter(mem).count();
    out.push(Baseline {
        name: "aho-corasick overlapping (Standard), in memory, 1 thread".into(),
        mib_s: mib(mem.len() as u64) / t.elapsed().as_secs_f64().max(1e-9),
        note: format!("{n} anchor matches, same anchors as the cpu engine"),
    });
    let Some(image_path) = image_path else {
        out.push(Baseline {
            name: "ripgrep".into(),
            mib_s: 0.0,
            note: "not run: the image is a container (ripgrep would search its stored bytes)"
                .into(),
        });
        return Ok(out);
    };
    // ripgrep counting the same literals over the image file. Literals with
    // non-UTF-8 bytes cannot go through -F, so each is a byte regex of hex
    // escapes under (?-u), which ripgrep turns back into a literal set.
    let dir = std::env::temp_dir().join(format!("gpucarve-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let pat_file: PathBuf = dir.join("patterns.txt");
    let text: String = cpu
        .anchors()
        .iter()
        .map(|l| {
            // ripgrep is line-oriented and refuses `\n` in a pattern: keep the longest piece without one.
            let piece = l
                .split(|&b| b == b'\n')
                .max_by_key(|p| p.len())
                .unwrap_or(&[]);
            let hex: String = piece.iter().map(|b| format!("\\x{b:02X}")).collect();
            format!("(?-u){hex}\n")
        })
        .collect();
    let _ = std::fs::write(&pat_file, text);
    let t = Instant::now();
    match std::process::Command::new("rg")
        .args(["-a", "-c", "--no-config", "-f"])
        .arg(&pat_file)
        .arg(image_path)
        .output()
    {
        Ok(o) => {
            let secs = t.elapsed().as_secs_f64();
            let size = std::fs::metadata(image_path).map(|m| m.len()).unwrap_or(0);
            out.push(Baseline {
                name: "ripgrep rg -a -c (same literals as (?-u) hex, whole image)".into(),
                mib_s: mib(size) / secs.max(1e-9),
                note: if o.status.success() {
                    format!(
                        "{} matching lines (rg counts lines, not matches)",
                        String::from_utf8_lossy(&o.stdout).trim()
                    )
                } else {
                    format!(
                        "rg failed: {}",
                        String::from_utf8_lossy(&o.stderr)
                            .lines()
                            .next()
                            .unwrap_or("")
                    )
                },
            });
        }
        Err(e) => out.push(Baseline {
            name: "ripgrep".into(),
            mib_s: 0.0,
            note: format!("not run: {e} (apt-get install ripgrep)"),
        }),
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

/// One table line for a row.
pub fn format_row(r: &BenchRow) -> String {
    format!(
        "{:<14} {:<9} {:>9} {:>3}t  {:>9.1} MiB/s (±{:>4.1}%)  io-ceiling {:>8.1} ({:>4.0}%)  engine-mem {:>8.1} ({:>4.0}%)  {:>9} matches  read {:>6.2}s search {:>6.2}s merge {:>5.2}s  bottleneck: {}  copies/byte {:.2}  busy read {:.0}% upload {:.0}% compute {:.0}% readback {:.0}% (overlap {:.0}%)",
        r.engine,
        r.io,
        human_size(r.block_size as u64),
        r.threads,
        r.mib_s,
        if r.wall.median > 0.0 {
            (r.wall.max - r.wall.min) / r.wall.median * 50.0
        } else {
            0.0
        },
        r.io_ceiling_mib_s,
        r.ratio_to_io_ceiling * 100.0,
        r.engine_mem_mib_s,
        r.ratio_to_engine_mem * 100.0,
        r.matches,
        r.read_s,
        r.search_s,
        r.merge_s,
        r.bottleneck,
        r.host_copies_per_byte,
        r.busy.read * 100.0,
        r.busy.upload * 100.0,
        r.busy.compute * 100.0,
        r.busy.readback * 100.0,
        r.busy.overlap * 100.0
    )
}

/// `4MiB`, `512KiB`, `123B`.
pub fn human_size(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{}GiB", b >> 30)
    } else if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{}KiB", b >> 10)
    } else {
        format!("{b}B")
    }
}

/// An SVG line chart of MiB/s against block size, one line per engine/io/threads.
pub fn plot_svg(report: &BenchReport) -> String {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    let (w, h, l, r, t, b) = (760.0, 420.0, 70.0, 220.0, 30.0, 50.0);
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for row in &report.rows {
        series
            .entry(format!("{} {} {}t", row.engine, row.io, row.threads))
            .or_default()
            .push(((row.block_size as f64).log2(), row.mib_s));
    }
    let xs: Vec<f64> = series.values().flatten().map(|p| p.0).collect();
    let (xmin, xmax) = (
        xs.iter().copied().fold(f64::MAX, f64::min),
        xs.iter().copied().fold(f64::MIN, f64::max),
    );
    let ymax = series.values().flatten().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let xspan = if xmax > xmin { xmax - xmin } else { 1.0 };
    let px = |x: f64| l + (x - xmin) / xspan * (w - l - r);
    let py = |y: f64| h - b - y / ymax * (h - t - b);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n<text x='{l}' y='18'>gpucarve bench: {} ({:.0} MiB)</text>\n",
        crate::report::dfxml::escape(&report.image),
        mib(report.image_bytes)
    );
    let _ = writeln!(
        s,
        "<line x1='{l}' y1='{}' x2='{}' y2='{}' stroke='black'/>",
        h - b,
        w - r,
        h - b
    );
    let _ = writeln!(
        s,
        "<line x1='{l}' y1='{t}' x2='{l}' y2='{}' stroke='black'/>",
        h - b
    );
    for i in 0..=4 {
        let y = ymax * f64::from(i) / 4.0;
        let _ = writeln!(
            s,
            "<text x='{}' y='{}' text-anchor='end'>{y:.0}</text>",
            l - 6.0,
            py(y) + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<text x='14' y='{}' transform='rotate(-90 14 {})'>MiB/s</text>",
        h / 2.0,
        h / 2.0
    );
    let mut ticks: Vec<f64> = xs.clone();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    for x in ticks {
        let _ = writeln!(
            s,
            "<text x='{}' y='{}' text-anchor='middle'>{}</text>",
            px(x),
            h - b + 16.0,
            human_size(x.exp2().round() as u64)
        );
    }
    let _ = writeln!(
        s,
        "<text x='{}' y='{}' text-anchor='middle'>block size</text>",
        (l + w - r) / 2.0,
        h - 10.0
    );
    let colours = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    ];
    for (i, (name, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let c = colours[i % colours.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill='none' stroke='{c}' stroke-width='2' points='{}'/>",
            path.join(" ")
        );
        for &(x, y) in &pts {
            let _ = writeln!(
                s,
                "<circle cx='{:.1}' cy='{:.1}' r='3' fill='{c}'/>",
                px(x),
                py(y)
            );
        }
        let ly = t + 16.0 * i as f64;
        let _ = writeln!(
            s,
            "<rect x='{}' y='{}' width='12' height='3' fill='{c}'/>",
            w - r + 10.0,
            ly + 4.0
        );
        let _ = writeln!(
            s,
            "<text x='{}' y='{}'>{}</text>",
            w - r + 28.0,
            ly + 9.0,
            crate::report::dfxml::escape(&name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// `gpucarve bench --carve`: a whole carving (reports only, no files
/// written), timed, with its work meter.
#[derive(Clone, Debug, Serialize)]
pub struct CarveBench {
    pub image: String,
    pub image_bytes: u64,
    pub seconds: Timing,
    pub mib_per_s: f64,
    pub files_found: u64,
    pub signature_matches: u64,
    /// Bytes the validations and fragment searches read from the image.
    pub work_bytes: u64,
    /// Their bound ([`crate::carve::work_limit`]).
    pub work_limit: u64,
    /// Bytes read per `(stage, type)`, and candidates (count) per stage and type.
    pub read: Vec<(String, String, u64, u64)>,
}

/// Carves `image_path` `repeat` times into temporary folders (reports only)
/// and reports the median time and the last run's work meter.
pub fn carve_bench(
    image_path: &Path,
    input: crate::source::InputMode,
    catalogue: &Catalogue,
    repeat: usize,
) -> Result<CarveBench, String> {
    let mut times = Vec::new();
    let mut last = None;
    for i in 0..repeat.max(1) {
        let dir =
            std::env::temp_dir().join(format!("gpucarve-bench-carve-{}-{i}", std::process::id()));
        let job = crate::job::CarveJob {
            image: image_path.to_path_buf(),
            out_dir: dir.clone(),
            catalogue: catalogue.clone(),
            engine: EngineChoice::Cpu,
            scan: Default::default(),
            carve: crate::carve::CarveOptions {
                write: false,
                ..Default::default()
            },
            force: true,
            hash_image: false,
            command_line: "gpucarve bench --carve".into(),
            spool_dir: None,
            input,
            range: None,
            resume: false,
        };
        let t0 = Instant::now();
        let r = job.run(&mut |_, _| {}, &mut |_| {});
        times.push(t0.elapsed().as_secs_f64());
        let _ = std::fs::remove_dir_all(&dir);
        last = Some(r?);
    }
    let s = last.ok_or("no run")?;
    let seconds = Timing::of(times);
    let bytes = s.scan.bytes;
    Ok(CarveBench {
        image: image_path.display().to_string(),
        image_bytes: bytes,
        mib_per_s: mib(bytes) / seconds.median.max(1e-9),
        seconds,
        files_found: s.files_found,
        signature_matches: s.scan.matches,
        work_bytes: s.profile.total_read(),
        work_limit: crate::carve::work_limit(bytes, s.scan.matches),
        read: s
            .profile
            .stages
            .iter()
            .map(|((st, ty), (n, _))| {
                let b = s.profile.read.get(&(st.clone(), ty.clone())).copied();
                (st.clone(), ty.clone(), b.unwrap_or(0), *n)
            })
            .collect(),
    })
}

impl CarveBench {
    /// The table `gpucarve bench --carve` prints.
    pub fn table(&self) -> String {
        let mut s = format!(
            "carve {} ({:.0} MiB): median {:.3} s ({:.1} MiB/s; runs {:.3}-{:.3} s), {} files found, {} signature matches\nwork: {} bytes read by validation and fragment searches ({:.2} x the image; bound {})\n{:<28} {:<10} {:>12} {:>14}\n",
            self.image,
            mib(self.image_bytes),
            self.seconds.median,
            self.mib_per_s,
            self.seconds.min,
            self.seconds.max,
            self.files_found,
            self.signature_matches,
            self.work_bytes,
            self.work_bytes as f64 / self.image_bytes.max(1) as f64,
            self.work_limit,
            "stage",
            "type",
            "candidates",
            "bytes read"
        );
        for (st, ty, b, n) in &self.read {
            s.push_str(&format!("{st:<28} {ty:<10} {n:>12} {b:>14}\n"));
        }
        s
    }
}
