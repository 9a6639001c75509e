#!/usr/bin/env bash
# Minimises fuzz/corpus/TARGET + fuzz/work/TARGET into fuzz/corpus/TARGET
# (libFuzzer -merge=1: the smallest set with the same coverage).
set -euo pipefail
cd "$(dirname "$0")"
bin=target/x86_64-unknown-linux-gnu/release/gpucarve-fuzz
for t in "$@"; do
  rm -rf "min/$t"; mkdir -p "min/$t"
  GPUCARVE_FUZZ_TARGET="$t" nice -n 19 "$bin" -merge=1 -timeout=10 -rss_limit_mb=1024 \
    -max_len=65536 "min/$t" "corpus/$t" "work/$t" >/dev/null 2>&1
  rm -rf "corpus/$t"; mv "min/$t" "corpus/$t"
  echo "$t: $(ls "corpus/$t" | wc -l) inputs, $(du -sk "corpus/$t" | cut -f1) KiB"
done
rmdir min 2>/dev/null || true
