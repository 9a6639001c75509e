//! Writes a synthetic dense image: `cargo run --release --example mkdense -- OUT SIZE_MIB [noise STRIDE]`.
//!
//! Without `noise`: every built-in header and footer signature back to back
//! (the worst case for carving time). With `noise STRIDE`: a header every
//! STRIDE bytes in random data.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(out), Some(mib)) = (
        args.first(),
        args.get(1).and_then(|s| s.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: mkdense OUT SIZE_MIB [noise STRIDE]");
        std::process::exit(2);
    };
    let cat = gpucarve::catalogue::Catalogue::builtin();
    let len = mib << 20;
    let bytes = match (args.get(2).map(String::as_str), args.get(3)) {
        (Some("noise"), Some(stride)) => {
            let Ok(stride) = stride.parse::<usize>() else {
                eprintln!("mkdense: bad stride {stride}");
                std::process::exit(2);
            };
            gpucarve::synth::headers_in_noise(&cat, len, stride, 1)
        }
        _ => gpucarve::synth::dense_headers(&cat, len, 1),
    };
    if let Err(e) = std::fs::write(out, bytes) {
        eprintln!("mkdense: {out}: {e}");
        std::process::exit(1);
    }
}
