//! Compiles `shaders/pfac.comp` to SPIR-V in `OUT_DIR/pfac.spv`.
//!
//! With `glslc` (or `glslangValidator`) on the PATH the shader is compiled
//! fresh; without either, the committed `shaders/pfac.spv` is copied, so the
//! crate builds everywhere. `.ci/check-spirv` keeps the committed file in step
//! with the source (it uses the same glslc arguments as `GLSLC_ARGS` below).
//! Set `GPUCARVE_GLSLC` to a glslc binary to choose one explicitly.

use std::env;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const SOURCE: &str = "shaders/pfac.comp";
const COMMITTED: &str = "shaders/pfac.spv";
/// Keep in step with `.ci/check-spirv`.
const GLSLC_ARGS: &[&str] = &["--target-env=vulkan1.0", "-O"];

/// What running one compiler gave.
enum Compiled {
    Yes,
    NotInstalled,
    Failed(String),
}

fn run(program: &str, args: &[&str], out: &Path) -> Compiled {
    let mut cmd = Command::new(program);
    cmd.args(args).arg("-o").arg(out).arg(SOURCE);
    match cmd.output() {
        Ok(o) if o.status.success() => Compiled::Yes,
        Ok(o) => Compiled::Failed(format!(
            "{program} failed on {SOURCE} ({}):\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) if e.kind() == ErrorKind::NotFound => Compiled::NotInstalled,
        Err(e) => Compiled::Failed(format!("could not run {program}: {e}")),
    }
}

fn main() -> ExitCode {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed={COMMITTED}");
    println!("cargo:rerun-if-env-changed=GPUCARVE_GLSLC");
    let Some(out_dir) = env::var_os("OUT_DIR") else {
        eprintln!("OUT_DIR is not set (build.rs must run under cargo)");
        return ExitCode::FAILURE;
    };
    let out = PathBuf::from(out_dir).join("pfac.spv");

    let glslc = env::var("GPUCARVE_GLSLC").unwrap_or_else(|_| "glslc".into());
    let attempts: [(&str, &[&str]); 2] = [(&glslc, GLSLC_ARGS), ("glslangValidator", &["-V"])];
    for (program, args) in attempts {
        match run(program, args, &out) {
            Compiled::Yes => return ExitCode::SUCCESS,
            Compiled::NotInstalled => continue,
            // A compiler that is present but rejects the shader means the
            // source is broken: the committed SPIR-V would be stale, so fail.
            Compiled::Failed(msg) => {
                eprintln!("{msg}");
                return ExitCode::FAILURE;
            }
        }
    }
    match std::fs::copy(COMMITTED, &out) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("no glslc or glslangValidator, and cannot copy {COMMITTED}: {e}");
            ExitCode::FAILURE
        }
    }
}
