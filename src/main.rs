//! The `gpucarve` command line: parse, call the library, print. No logic here.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod batch_cli;
use gpucarve::carve::validators::Status;
use gpucarve::catalogue::Catalogue;
use gpucarve::engine::{EngineChoice, build_engines};
use gpucarve::report::matches::{MatchFormat, MatchWriter};
use gpucarve::scan::{Engines, ScanOptions, scan};
use gpucarve::source::IoMode;

#[derive(Parser)]
#[command(name = "gpucarve", version, about = "GPU-accelerated forensic file carver", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Neither read nor write the GPU pipeline cache (~/.cache/gpucarve; also GPUCARVE_NO_GPU_CACHE=1)
    #[arg(long, global = true)]
    no_gpu_cache: bool,
}

#[derive(clap::Args, Clone)]
struct CatalogueArgs {
    /// Signature catalogue: TOML, or a foremost/scalpel .conf (default: built-in)
    #[arg(long, value_name = "FILE")]
    signatures: Option<PathBuf>,
    /// Only these file types (names or extensions, comma-separated)
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    types: Vec<String>,
}

#[derive(clap::Args, Clone)]
struct KeywordArgs {
    /// Keyword list: one literal a line, text or `hex:DEADBEEF`; `#` comments, blank lines skipped, a leading `\` escapes (README). Only the keywords are searched unless --types or --signatures is also given
    #[arg(long, value_name = "FILE")]
    keywords: Option<PathBuf>,
    /// Match the keywords' ASCII letters in either case
    #[arg(long, requires = "keywords")]
    ignore_case: bool,
}

#[derive(clap::Args, Clone)]
struct ScanArgs {
    /// Search engine: auto (the CPU, joined by a real GPU if present for inputs of 4 GiB or more), cpu, gpu
    #[arg(long, default_value = "auto")]
    engine: EngineChoice,
    /// Vulkan device (index or name substring); implies --engine gpu
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// I/O backend: buffered, mmap, direct (O_DIRECT), uring (io_uring + O_DIRECT); a carving reads direct and uring through the page cache with io_uring (it reads the image again); a decoded container (E01) reads buffered
    #[arg(long, default_value = "buffered")]
    io: IoMode,
    /// Block size (e.g. 8MiB), a multiple of 4 KiB; 0: 4 MiB with the CPU engine, 8 MiB with a GPU
    #[arg(long, value_parser = parse_size_arg, default_value_t = 0)]
    block_size: usize,
    /// Worker threads (default: all cores)
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// How to take the image: auto (EWF, gzip, split raw or raw, by content) or raw (its bytes as they are)
    #[arg(long, default_value = "auto")]
    input: gpucarve::source::InputMode,
}

#[derive(Subcommand)]
enum Command {
    /// Find every header and footer signature in an image
    #[command(
        after_help = "Examples:\n  gpucarve scan disk.dd > matches.jsonl\n  gpucarve scan disk.dd --types jpeg,png --count\n  gpucarve scan disk.dd --signatures foremost.conf --format csv -o hits.csv"
    )]
    Scan {
        /// Image: raw (dd), E01, split raw (.001/.aa), gzip, block device, or - (standard input, spooled)
        image: PathBuf,
        #[command(flatten)]
        catalogue: CatalogueArgs,
        #[command(flatten)]
        keywords: KeywordArgs,
        #[command(flatten)]
        scan: ScanArgs,
        /// Where a gzip image or standard input is spooled (default: the system temporary folder)
        #[arg(long, value_name = "DIR")]
        spool_dir: Option<PathBuf>,
        /// Output format
        #[arg(long, default_value = "jsonl", value_parser = ["jsonl", "csv"])]
        format: String,
        /// Print a per-type/role count table instead of every match
        #[arg(long)]
        count: bool,
        /// Write to FILE instead of standard output
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// No progress bar
        #[arg(short, long)]
        quiet: bool,
    },
    /// Carve files out of images, with DFXML, JSONL and audit reports
    #[command(
        after_help = "Examples:\n  gpucarve carve disk.dd -o case1\n  gpucarve carve disk.E01 -o case1 --types jpeg,png,pdf --keep partial\n  gpucarve carve disk.dd -o case1 --no-write      # reports only; extract later\n  gpucarve carve /evidence/*.E01 /evidence/usb/ -o case2 --jobs 2\n  gpucarve carve disk.dd -o case1 --resume        # after an interruption\n  gpucarve carve disk.dd -o part3 --shard 3/8     # then: gpucarve merge part1 ... part8 -o all\n\nInputs are recognised by content: EWF (.E01/.Ex01, first segment), split raw (x.001 or x.aa,\nfirst segment), gzip (decompressed to --spool-dir), raw files and block devices; - reads a raw
image from standard input (copied to --spool-dir first). Folders are\nsearched for such images. One image file: its carving goes into OUTDIR itself; several\nimages or a folder: one folder per image under OUTDIR, plus OUTDIR/case.jsonl and case.txt.\n\nFiles go to OUTDIR/<type>/<offset>.<ext>; partial and unvalidated files (with --keep)\nto OUTDIR/partial/... and OUTDIR/unvalidated/...; reports: report.xml (DFXML),\nreport.jsonl, audit.txt; journal.jsonl and run.json serve --resume and merge.\n\nExit codes: 0 every image carved; 1 an image failed (the others were still carved; see\ncase.txt); 2 bad command line; 3 carved, but parts of an image could not be read\n(bad sectors, damaged E01 or gzip: listed in audit.txt, report.jsonl and report.xml; they read\nas zeros, and no file crossing them is called complete)."
    )]
    Carve {
        /// Images (raw, E01, split .001/.aa, gzip, block devices, - for standard input) and folders holding them
        #[arg(required = true, value_name = "IMAGE|FOLDER")]
        images: Vec<PathBuf>,
        /// Output folder (created; must not already hold a carving unless --force)
        #[arg(short = 'o', long, value_name = "OUTDIR")]
        output: PathBuf,
        #[command(flatten)]
        catalogue: CatalogueArgs,
        #[command(flatten)]
        scan: ScanArgs,
        /// Also write files of these statuses: partial, unvalidated
        #[arg(long, value_delimiter = ',', value_name = "STATUSES")]
        keep: Vec<Status>,
        /// Write only the reports, no files (use `gpucarve extract` later)
        #[arg(long)]
        no_write: bool,
        /// Also write files found inside other files (thumbnails, images in archives)
        #[arg(long)]
        keep_embedded: bool,
        /// Also hash files that are not written (each up to 16 MiB; by default only what is written is hashed)
        #[arg(long)]
        hash_unwritten: bool,
        /// Hashes of written files (and of the image with --hash-image): any of sha256, md5, sha1
        #[arg(long = "hash", value_name = "ALGS", default_value = "sha256,md5")]
        hashes: gpucarve::hashing::HashChoice,
        /// Cluster size in bytes for fragment recovery (default: the file system's, else estimated from file starts)
        #[arg(long, value_name = "BYTES", value_parser = parse_cluster_size)]
        cluster_size: Option<u64>,
        /// Carve only headers in unallocated clusters (free space of FAT16/32, ext2/3/4 and exFAT volumes, and space outside them); headers whose allocation is not known are kept
        #[arg(long)]
        free_space_only: bool,
        /// Carve into a folder that already holds a carving, overwriting its reports
        #[arg(long)]
        force: bool,
        /// Hash the whole image (with the --hash algorithms) into audit.txt and run.json
        #[arg(long)]
        hash_image: bool,
        /// Where gzip images and standard input are spooled (default: the image's output folder)
        #[arg(long, value_name = "DIR")]
        spool_dir: Option<PathBuf>,
        /// Images carved at once (default: 1 if an image is 1 GiB or more, else 2)
        #[arg(long, value_name = "N", default_value_t = 0)]
        jobs: usize,
        /// Carry on an interrupted carving from its journal
        #[arg(long)]
        resume: bool,
        /// Carve only headers starting in START..END (bytes; sizes like 4GiB allowed)
        #[arg(long, value_name = "START..END", conflicts_with = "shard")]
        range: Option<String>,
        /// Carve slice I of N (1-based) of the image; merge the N outputs with `gpucarve merge`
        #[arg(long, value_name = "I/N")]
        shard: Option<String>,
        /// Progress: bar (on a terminal), json (one object a line on stderr), none
        #[arg(long, default_value = "bar", value_parser = ["bar", "json", "none"])]
        progress: String,
        /// No progress and no summary line
        #[arg(short, long)]
        quiet: bool,
    },
    /// Merge shard carvings (`carve --shard I/N`) into one, as a single run would have written it
    #[command(after_help = "Example:\n  gpucarve merge part1 part2 part3 part4 -o all")]
    Merge {
        /// Output folders of the shards
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Merged output folder
        #[arg(short = 'o', long, value_name = "DIR")]
        output: PathBuf,
        /// Merge into a folder that already holds a carving
        #[arg(long)]
        force: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(
        after_help = "Example:\n  gpucarve completions bash > /etc/bash_completion.d/gpucarve"
    )]
    Completions { shell: clap_complete::Shell },
    /// Write a hostile test image: one type's headers in a shape, or every header mixed
    #[command(
        after_help = "Shapes: back-to-back, in-noise, max-lengths, self-referencing (one type, --type);\ntiny-walks (--type wav, mp4 or mkv): a header in every sector of tiny chunks;\nmixed: every header and footer of the catalogue back to back.\nExamples:\n  gpucarve synth --type pdf --shape back-to-back --size 64MiB -o pdf.img\n  gpucarve synth --shape mixed --size 64MiB -o mixed.img"
    )]
    Synth {
        /// The type whose headers fill the image (not with --shape mixed)
        #[arg(long = "type", value_name = "TYPE")]
        type_name: Option<String>,
        /// back-to-back, in-noise, max-lengths, self-referencing, mixed
        #[arg(long)]
        shape: String,
        /// Image size (e.g. 64MiB)
        #[arg(long, value_parser = parse_size_arg)]
        size: usize,
        /// Seed of the random bytes
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        catalogue: CatalogueArgs,
        /// Where to write the image (a new file: an existing one is refused)
        #[arg(short = 'o', long, value_name = "FILE")]
        output: PathBuf,
    },
    /// Write chosen files of a carving's report from the image
    #[command(
        after_help = "Examples:\n  gpucarve extract case1/report.jsonl --ids 3,17 -o picked\n  gpucarve extract case1/report.jsonl --all --image /evidence/disk.dd -o all"
    )]
    Extract {
        /// A report.jsonl written by `gpucarve carve`
        report: PathBuf,
        /// Ids to extract (comma-separated)
        #[arg(long, value_delimiter = ',', required_unless_present = "all")]
        ids: Vec<u64>,
        /// Extract every file in the report
        #[arg(long)]
        all: bool,
        /// The image, when it is no longer where the carving's run.json says (its size must match)
        #[arg(long)]
        image: Option<PathBuf>,
        /// Destination folder
        #[arg(short = 'o', long, value_name = "DIR")]
        output: PathBuf,
    },
    /// Measure engines and I/O backends on this machine: throughput, stages, sweep
    #[command(
        after_help = "Examples:\n  gpucarve bench disk.dd\n  gpucarve bench disk.dd --engines cpu,gpu --io all --block-sizes 1MiB,4MiB,16MiB --threads 1,2 --repeat 5\n  gpucarve bench disk.dd --json > bench.json --plot bench.svg\n  sudo gpucarve bench /dev/sdb --drop-caches   # cold cache"
    )]
    Bench {
        /// Image: raw (dd), E01, split raw (.001/.aa), gzip (spooled to the temporary folder) or block device
        image: PathBuf,
        /// How to take the image: auto (EWF, gzip, split raw or raw, by content) or raw (its bytes as they are)
        #[arg(long, default_value = "auto")]
        input: gpucarve::source::InputMode,
        #[command(flatten)]
        catalogue: CatalogueArgs,
        #[command(flatten)]
        keywords: KeywordArgs,
        /// Engines to compare: cpu, gpu (GPU rows say why when no device exists)
        #[arg(long, value_delimiter = ',', default_value = "cpu,gpu")]
        engines: Vec<String>,
        /// I/O backends: all, or a list of buffered, mmap, direct, uring
        #[arg(long, value_delimiter = ',', default_value = "buffered")]
        io: Vec<String>,
        /// Block sizes to sweep
        #[arg(long, value_delimiter = ',', value_parser = parse_size_arg, default_value = "8MiB")]
        block_sizes: Vec<usize>,
        /// Thread counts to sweep (0 = all cores)
        #[arg(long, value_delimiter = ',', default_value = "0")]
        threads: Vec<usize>,
        /// Runs per configuration (medians are reported)
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Drop the page cache before every run (needs root)
        #[arg(long)]
        drop_caches: bool,
        /// Skip the aho-corasick and ripgrep baselines
        #[arg(long)]
        no_baselines: bool,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
        /// Draw MiB/s against block size to this SVG file
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// Time a whole carving instead (reports only, into a temporary folder) with its work meter: bytes read per stage and type
        #[arg(long, conflicts_with = "keywords")]
        carve: bool,
    },
    /// List Vulkan devices (index, name, type, driver, memory heaps), or say why there are none
    #[command(
        after_help = "Examples:\n  gpucarve devices\n  gpucarve scan disk.dd --device 0          # use device 0 (implies --engine gpu)\n  gpucarve scan disk.dd --device nvidia     # first device whose name contains 'nvidia'"
    )]
    Devices,
    /// List the signature catalogue
    #[command(
        after_help = "Examples:\n  gpucarve signatures\n  gpucarve signatures --signatures my.toml --types jpeg"
    )]
    Signatures {
        #[command(flatten)]
        catalogue: CatalogueArgs,
    },
}

fn parse_size_arg(s: &str) -> Result<usize, String> {
    let v = gpucarve::catalogue::parse_size(s)?;
    usize::try_from(v).map_err(|_| format!("{s} is too large"))
}

fn load_catalogue(args: &CatalogueArgs) -> Result<Catalogue, String> {
    let c = match &args.signatures {
        Some(p) => Catalogue::load(p).map_err(|e| e.to_string())?,
        None => Catalogue::builtin(),
    };
    c.select(&args.types)
}

/// The catalogue with the keyword list, if any: only the keywords unless
/// --types or --signatures asks for catalogue types too.
fn load_with_keywords(args: &CatalogueArgs, kw: &KeywordArgs) -> Result<Catalogue, String> {
    let Some(path) = &kw.keywords else {
        return load_catalogue(args);
    };
    let list = gpucarve::catalogue::keywords::load(path, kw.ignore_case)?;
    let base = if args.types.is_empty() && args.signatures.is_none() {
        Catalogue::default()
    } else {
        load_catalogue(args)?
    };
    Ok(base.with_keywords(list))
}

fn warn(msg: String) {
    eprintln!("gpucarve: warning: {msg}");
}

fn progress_bar(len: u64, quiet: bool) -> indicatif::ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb
}

#[allow(clippy::too_many_arguments)]
fn run_scan(
    image: &Path,
    spool_dir: Option<&Path>,
    catalogue: &CatalogueArgs,
    keywords: &KeywordArgs,
    args: &ScanArgs,
    format: &str,
    count: bool,
    output: Option<&Path>,
    quiet: bool,
) -> Result<bool, String> {
    let cat = load_with_keywords(catalogue, keywords)?;
    let set = cat.compile();
    let img = gpucarve::source::open_input(
        image,
        spool_dir.unwrap_or(&std::env::temp_dir()),
        args.input,
    )
    .map_err(|e| e.to_string())?;
    let choice = engine_choice(args);
    let engines = build_engines(
        &set.patterns,
        &choice,
        gpucarve::scan::haystack_len(args.block_size, set.max_len().saturating_sub(1)),
        img.len(),
    )
    .map_err(|e| e.to_string())?;
    let out: Box<dyn Write> = match output {
        Some(p) => {
            if let Some(why) = gpucarve::source::evidence::refuse_output(p, image) {
                return Err(why);
            }
            Box::new(
                std::fs::File::create(p)
                    .map_err(|e| format!("{}: cannot create: {e}", p.display()))?,
            )
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let format = if format == "csv" {
        MatchFormat::Csv
    } else {
        MatchFormat::Jsonl
    };
    let mut writer = MatchWriter::new(std::io::BufWriter::new(out), &cat, &set, format, count);
    let opts = scan_options(args);
    let pb = progress_bar(img.len(), quiet);
    let overlap = set.max_len().saturating_sub(1);
    let mut sink = |_: &gpucarve::source::BlockSpec, m: &[gpucarve::scan::Match]| {
        writer.write(m).map_err(|e| format!("writing output: {e}"))
    };
    let result = scan(
        &img,
        Engines {
            primary: engines.primary.as_ref(),
            fallback: engines.fallback.as_deref(),
        },
        overlap,
        &opts,
        &mut sink,
        &mut |done| pb.set_position(done),
        &mut warn,
    );
    pb.finish_and_clear();
    let damage = img.media().damage();
    for d in &damage {
        warn(format!(
            "damaged range {}..{} (read as zeros): {}",
            d.offset,
            d.offset + d.len,
            d.reason
        ));
    }
    let stats = result.map_err(|e| e.to_string())?;
    if !quiet && let Some(split) = &stats.engine_split {
        eprintln!("gpucarve: engine split: {split}");
    }
    writer
        .finish()
        .map_err(|e| format!("writing output: {e}"))?;
    Ok(damage.is_empty())
}

fn engine_choice(args: &ScanArgs) -> EngineChoice {
    match &args.device {
        Some(d) => EngineChoice::Gpu {
            device: Some(d.clone()),
        },
        None => args.engine.clone(),
    }
}

fn scan_options(args: &ScanArgs) -> ScanOptions {
    ScanOptions {
        block_size: args.block_size,
        io: args.io,
        threads: args.threads,
        observer: None,
        read_again: false,
    }
}

fn run_extract(
    report: &Path,
    ids: &[u64],
    all: bool,
    image: Option<&Path>,
    output: &Path,
) -> Result<(), String> {
    let text = std::fs::read_to_string(report).map_err(|e| format!("{}: {e}", report.display()))?;
    let files =
        gpucarve::report::jsonl::read(&text).map_err(|e| format!("{}: {e}", report.display()))?;
    let dir = match report.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (img, image_path) = gpucarve::job::open_carved_image(dir, image)?;
    if let Some(why) = gpucarve::source::evidence::refuse_output(output, &image_path) {
        return Err(why);
    }
    for d in img.media().damage() {
        warn(format!(
            "damaged range {}..{}: {}",
            d.offset,
            d.offset + d.len,
            d.reason
        ));
    }
    let bytes = gpucarve::carve::ImageBytes::new(&img);
    std::fs::create_dir_all(output).map_err(|e| format!("{}: {e}", output.display()))?;
    let picks = gpucarve::extract::pick(&files, ids, all, img.len())
        .map_err(|e| format!("{}: {e}", report.display()))?;
    for p in picks {
        let f = p.file;
        let dest = output.join(&p.name);
        // Check the extracted bytes against every hash the report carries.
        let want = f.digests();
        let algs: Vec<_> = want.iter().map(|(a, _)| a).collect();
        let got = gpucarve::carve::output::extract_to(
            &bytes,
            &f.byte_runs,
            &dest,
            gpucarve::hashing::HashChoice::of(&algs).unwrap_or_default(),
        )
        .map_err(|e| e.to_string())?;
        let bad: Vec<&str> = want
            .iter()
            .filter(|(a, h)| got.get(*a) != Some(*h))
            .map(|(a, _)| a.name())
            .collect();
        let verdict = match (algs.is_empty(), bad.is_empty()) {
            (true, _) => "no hash in report".to_string(),
            (false, true) => {
                let names: Vec<&str> = algs.iter().map(|a| a.name()).collect();
                format!("{} ok", names.join(","))
            }
            (false, false) => format!("{} MISMATCH with the report", bad.join(",")),
        };
        println!("{}\t{}\t{verdict}", f.id, dest.display());
        if !bad.is_empty() {
            return Err(format!(
                "id {}: extracted bytes differ from the report's {} (wrong image?)",
                f.id,
                bad.join(", ")
            ));
        }
    }
    Ok(())
}

/// `gpucarve bench --carve`.
fn run_bench_carve(
    image: &Path,
    input: gpucarve::source::InputMode,
    catalogue: &CatalogueArgs,
    repeat: usize,
    json: bool,
) -> Result<(), String> {
    let cat = load_catalogue(catalogue)?;
    let r = gpucarve::bench::carve_bench(image, input, &cat, repeat)?;
    let text = if json {
        serde_json::to_string_pretty(&r).map_err(|e| e.to_string())? + "\n"
    } else {
        r.table()
    };
    print_all(text.as_bytes())
}

#[allow(clippy::too_many_arguments)]
fn run_bench(
    image: &Path,
    input: gpucarve::source::InputMode,
    catalogue: &Result<Catalogue, String>,
    engines: &[String],
    io: &[String],
    block_sizes: &[usize],
    threads: &[usize],
    repeat: usize,
    drop_caches: bool,
    no_baselines: bool,
    json: bool,
    plot: Option<&Path>,
) -> Result<(), String> {
    if let Some(why) = plot.and_then(|p| gpucarve::source::evidence::refuse_output(p, image)) {
        return Err(why);
    }
    let cat = catalogue.clone()?;
    let engines = engines
        .iter()
        .map(|e| e.parse::<EngineChoice>())
        .collect::<Result<Vec<_>, _>>()?;
    let io = if io.iter().any(|s| s == "all") {
        IoMode::ALL.to_vec()
    } else {
        io.iter()
            .map(|s| s.parse::<IoMode>())
            .collect::<Result<Vec<_>, _>>()?
    };
    if drop_caches {
        gpucarve::bench::drop_caches()?;
    }
    let opts = gpucarve::bench::BenchOptions {
        engines,
        io,
        block_sizes: block_sizes.to_vec(),
        threads: threads.to_vec(),
        repeat,
        drop_caches,
        mem_bytes: 256 << 20,
        baselines: !no_baselines,
        input,
    };
    let report = gpucarve::bench::run(image, &cat, &opts, &mut |line| {
        if !json {
            println!("{line}");
        }
    })?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        if report.container != "raw" {
            println!(
                "image: {} (io-ceiling: reading and decoding it, on the row's threads)",
                report.container
            );
        }
        for m in &report.missing {
            println!("not measured: {m}");
        }
        if let Some(b) = &report.best {
            println!("fastest: {b}");
        }
        for b in &report.baselines {
            println!(
                "baseline: {:<58} {:>9.1} MiB/s  {}",
                b.name, b.mib_s, b.note
            );
        }
        println!("peak RSS: {} KiB", gpucarve::bench::peak_rss_kib());
    }
    if let Some(p) = plot {
        std::fs::write(p, gpucarve::bench::plot_svg(&report))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

fn run_devices() -> Result<(), String> {
    let devices = gpucarve::engine::gpu::list_devices().map_err(|e| e.to_string())?;
    for d in &devices {
        println!("{d}");
    }
    if devices.iter().all(|d| d.software) {
        println!(
            "note: only software devices: --engine auto uses the CPU engine; --engine gpu or --device runs the shader on them"
        );
    }
    Ok(())
}

fn run_signatures(args: &CatalogueArgs) -> Result<(), String> {
    let cat = load_catalogue(args)?;
    let mut out = String::new();
    for t in &cat.types {
        let exts = t.extensions.join(",");
        out.push_str(&format!("{:<10} {:<28} {}\n", t.name, exts, t.description));
        for h in &t.headers {
            let at = if h.offset > 0 {
                format!(" @+{}", h.offset)
            } else {
                String::new()
            };
            out.push_str(&format!("{:<10}   header {}{}\n", "", h.text, at));
        }
        for f in &t.footers {
            out.push_str(&format!("{:<10}   footer {}\n", "", f.text));
        }
    }
    print_all(out.as_bytes())
}

/// Writes `bytes` to standard output; a reader that stopped reading (a
/// closed pipe: `| head`) is not an error.
fn print_all(bytes: &[u8]) -> Result<(), String> {
    match std::io::stdout().write_all(bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(|e| e.to_string()),
    }
}

/// `gpucarve synth`: a hostile image from the catalogue.
fn run_synth(
    type_name: Option<&str>,
    shape: &str,
    size: usize,
    seed: u64,
    catalogue: &CatalogueArgs,
    output: &Path,
) -> Result<(), String> {
    use gpucarve::synth;
    let cat = load_catalogue(catalogue)?;
    let bytes = match (shape, type_name) {
        ("mixed", _) => synth::dense_headers(&cat, size, seed),
        ("tiny-walks", Some(t)) => synth::tiny_walks(t, size)
            .ok_or_else(|| format!("no tiny-walks shape for {t:?}: wav, mp4, mkv"))?,
        (_, None) => return Err(format!("--shape {shape} needs --type")),
        (s, Some(t)) => {
            let shape = synth::Shape::from_name(s).ok_or_else(|| {
                format!("unknown shape {s:?}: back-to-back, in-noise, max-lengths, self-referencing, mixed")
            })?;
            synth::type_shape(&cat, t, shape, size, seed)
                .ok_or_else(|| format!("no type {t:?} in the catalogue"))?
        }
    };
    // Never over an existing file (it could be evidence).
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(output)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                format!("{}: exists; synth writes only new files", output.display())
            }
            _ => format!("{}: {e}", output.display()),
        })?;
    f.write_all(&bytes)
        .map_err(|e| format!("{}: {e}", output.display()))
}

/// Exit status when the command finished but parts of the image could not be
/// read (bad sectors, damaged containers; listed in audit.txt and the reports).
const EXIT_UNREAD: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.no_gpu_cache {
        gpucarve::engine::gpu::disable_pipeline_cache();
    }
    match run(&cli.command) {
        Ok(batch_cli::RunEnd::Clean) => ExitCode::SUCCESS,
        Ok(batch_cli::RunEnd::Unread) => ExitCode::from(EXIT_UNREAD),
        Ok(batch_cli::RunEnd::Failed) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gpucarve: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the command: how it ended (every byte read, some unread, some
/// image failed), or the error that stopped it.
fn run(command: &Command) -> Result<batch_cli::RunEnd, String> {
    let clean = |()| batch_cli::RunEnd::Clean;
    match command {
        Command::Scan {
            image,
            catalogue,
            keywords,
            scan,
            spool_dir,
            format,
            count,
            output,
            quiet,
        } => run_scan(
            image,
            spool_dir.as_deref(),
            catalogue,
            keywords,
            scan,
            format,
            *count,
            output.as_deref(),
            *quiet,
        )
        .map(|fully_read| {
            if fully_read {
                batch_cli::RunEnd::Clean
            } else {
                batch_cli::RunEnd::Unread
            }
        }),
        Command::Signatures { catalogue } => run_signatures(catalogue).map(clean),
        Command::Devices => run_devices().map(clean),
        Command::Bench {
            image,
            input,
            catalogue,
            repeat,
            json,
            carve: true,
            ..
        } => run_bench_carve(image, *input, catalogue, *repeat, *json).map(clean),
        Command::Bench {
            image,
            input,
            catalogue,
            keywords,
            engines,
            io,
            block_sizes,
            threads,
            repeat,
            drop_caches,
            no_baselines,
            json,
            plot,
            carve: false,
        } => run_bench(
            image,
            *input,
            &load_with_keywords(catalogue, keywords),
            engines,
            io,
            block_sizes,
            threads,
            *repeat,
            *drop_caches,
            *no_baselines,
            *json,
            plot.as_deref(),
        )
        .map(clean),
        Command::Carve {
            images,
            output,
            catalogue,
            scan,
            keep,
            no_write,
            keep_embedded,
            hash_unwritten,
            hashes,
            cluster_size,
            free_space_only,
            force,
            hash_image,
            spool_dir,
            jobs,
            resume,
            range,
            shard,
            progress,
            quiet,
        } => {
            let opts = batch_cli::CarveCli {
                images: images.clone(),
                output: output.clone(),
                catalogue: load_catalogue(catalogue),
                engine: engine_choice(scan),
                scan: scan_options(scan),
                keep: keep.clone(),
                no_write: *no_write,
                keep_embedded: *keep_embedded,
                hash_unwritten: *hash_unwritten,
                hashes: *hashes,
                cluster_size: *cluster_size,
                free_space_only: *free_space_only,
                force: *force,
                hash_image: *hash_image,
                spool_dir: spool_dir.clone(),
                input: scan.input,
                jobs: *jobs,
                resume: *resume,
                range: range.clone(),
                shard: shard.clone(),
                progress: if *quiet {
                    "none".into()
                } else {
                    progress.clone()
                },
                quiet: *quiet,
            };
            batch_cli::run(opts)
        }
        Command::Merge {
            shards,
            output,
            force,
        } => run_merge(shards, output, *force).map(clean),
        Command::Completions { shell } => run_completions(*shell).map(clean),
        Command::Synth {
            type_name,
            shape,
            size,
            seed,
            catalogue,
            output,
        } => run_synth(type_name.as_deref(), shape, *size, *seed, catalogue, output).map(clean),
        Command::Extract {
            report,
            ids,
            all,
            image,
            output,
        } => run_extract(report, ids, *all, image.as_deref(), output).map(clean),
    }
}

/// `gpucarve merge`: the shards into one carving, and a line saying so.
fn run_merge(shards: &[PathBuf], output: &Path, force: bool) -> Result<(), String> {
    gpucarve::merge::merge(shards, output, force).map(|n| {
        eprintln!(
            "gpucarve: merged {} shards: {n} files in {}",
            shards.len(),
            output.display()
        );
    })
}

/// `gpucarve completions`: the shell's completion script on stdout.
fn run_completions(shell: clap_complete::Shell) -> Result<(), String> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    // Into memory first: clap_complete panics on a write error (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gpucarve", &mut script);
    print_all(&script)
}

/// `--cluster-size`: a power of two of at least 512 bytes.
fn parse_cluster_size(s: &str) -> Result<u64, String> {
    let v: u64 = s.parse().map_err(|e| format!("{e}"))?;
    if v < 512 || !v.is_power_of_two() {
        return Err("must be a power of two of at least 512".into());
    }
    Ok(v)
}
