//! The `gpucarve` command line: parse, call the library, print. No logic here.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gpucarve::catalogue::Catalogue;
use gpucarve::engine::{EngineChoice, build_engines};
use gpucarve::report::matches::{MatchFormat, MatchWriter};
use gpucarve::scan::{DEFAULT_BLOCK_SIZE, Engines, ScanOptions, scan};
use gpucarve::source::{Image, IoMode};

#[derive(Parser)]
#[command(name = "gpucarve", version, about = "GPU-accelerated forensic file carver", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
struct ScanArgs {
    /// Search engine: auto (a real GPU if present, else CPU), cpu, gpu
    #[arg(long, default_value = "auto")]
    engine: EngineChoice,
    /// Vulkan device (index or name substring); implies --engine gpu
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// I/O backend: buffered, mmap, direct (O_DIRECT), uring (io_uring + O_DIRECT)
    #[arg(long, default_value = "buffered")]
    io: IoMode,
    /// Block size (e.g. 8MiB); a multiple of 4 KiB
    #[arg(long, value_parser = parse_size_arg, default_value_t = DEFAULT_BLOCK_SIZE)]
    block_size: usize,
    /// Worker threads (default: all cores)
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

#[derive(Subcommand)]
enum Command {
    /// Find every header and footer signature in an image
    #[command(
        after_help = "Examples:\n  gpucarve scan disk.dd > matches.jsonl\n  gpucarve scan disk.dd --types jpeg,png --count\n  gpucarve scan disk.dd --signatures foremost.conf --format csv -o hits.csv"
    )]
    Scan {
        /// Raw image (dd) or block device
        image: PathBuf,
        #[command(flatten)]
        catalogue: CatalogueArgs,
        #[command(flatten)]
        scan: ScanArgs,
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

fn warn(msg: String) {
    eprintln!("gpucarve: warning: {msg}");
}

/// Refuses to write output onto the evidence itself.
fn check_not_image(output: &Path, image: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(a), Ok(b)) = (std::fs::metadata(output), std::fs::metadata(image))
        && a.dev() == b.dev()
        && a.ino() == b.ino()
    {
        return Err(format!(
            "{}: refusing to write output over the image being examined",
            output.display()
        ));
    }
    Ok(())
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

fn run_scan(
    image: &Path,
    catalogue: &CatalogueArgs,
    args: &ScanArgs,
    format: &str,
    count: bool,
    output: Option<&Path>,
    quiet: bool,
) -> Result<(), String> {
    let cat = load_catalogue(catalogue)?;
    let set = cat.compile();
    let img = Image::open(image).map_err(|e| e.to_string())?;
    let choice = match &args.device {
        Some(d) => EngineChoice::Gpu {
            device: Some(d.clone()),
        },
        None => args.engine.clone(),
    };
    let engines =
        build_engines(&set.patterns, &choice, &mut |m| warn(m)).map_err(|e| e.to_string())?;
    let out: Box<dyn Write> = match output {
        Some(p) => {
            check_not_image(p, image)?;
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
    let opts = ScanOptions {
        block_size: args.block_size,
        io: args.io,
        threads: args.threads,
    };
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
    result.map_err(|e| e.to_string())?;
    writer
        .finish()
        .map_err(|e| format!("writing output: {e}"))?;
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
    std::io::stdout()
        .write_all(out.as_bytes())
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Scan {
            image,
            catalogue,
            scan,
            format,
            count,
            output,
            quiet,
        } => run_scan(
            image,
            catalogue,
            scan,
            format,
            *count,
            output.as_deref(),
            *quiet,
        ),
        Command::Signatures { catalogue } => run_signatures(catalogue),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpucarve: error: {e}");
            ExitCode::FAILURE
        }
    }
}
