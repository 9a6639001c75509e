#!/usr/bin/env bash
# RUSTC_WRAPPER for building the fuzzer on stable Rust: adds libFuzzer's
# coverage instrumentation (SanitizerCoverage through the stable
# `-Cpasses=sancov-module` codegen flag) to every crate except the big ones
# that fuzzing never reaches (vulkano and its Vulkan bindings, clap).
# Overflow checks and debug assertions are on, as cargo-fuzz does.
rustc="$1"; shift
# Crates built for the host (build scripts, proc-macros) get no --target
# (build.sh passes an explicit --target) and are left alone.
crate=""
prev=""
target=""
for a in "$@"; do
  if [ "$prev" = "--crate-name" ]; then crate="$a"; fi
  if [ "$a" = "--target" ]; then target=1; fi
  prev="$a"
done
if [ -z "$target" ]; then exec "$rustc" "$@"; fi
case "$crate" in
  ""|___|build_script_*|vulkano*|ash|clap*|proc_macro2|quote|syn|serde_derive|thiserror_impl|bytemuck_derive)
    exec "$rustc" "$@" ;;
esac
exec "$rustc" "$@" \
  -Cpasses=sancov-module \
  -Cllvm-args=-sanitizer-coverage-level=4 \
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
  -Cllvm-args=-sanitizer-coverage-pc-table \
  -Cllvm-args=-sanitizer-coverage-trace-compares \
  -Cdebug-assertions -Coverflow-checks \
  --cfg fuzzing
