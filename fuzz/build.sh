#!/usr/bin/env bash
# Builds fuzz/target/x86_64-unknown-linux-gnu/release/gpucarve-fuzz (libFuzzer, stable Rust).
set -euo pipefail
cd "$(dirname "$0")"
export RUSTC_WRAPPER="$PWD/rustc-wrapper.sh"
export CARGO_TARGET_DIR="$PWD/target"
exec nice -n 19 cargo build --release --target x86_64-unknown-linux-gnu --bin gpucarve-fuzz "$@"
