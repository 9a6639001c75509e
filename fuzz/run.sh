#!/usr/bin/env bash
# Fuzzes one target: fuzz/run.sh TARGET SECONDS [more libFuzzer options]
#
# New inputs go to fuzz/work/TARGET (not committed; minimise into
# fuzz/corpus/TARGET with fuzz/minimize.sh); crashes, hangs and oversized
# allocations to fuzz/artifacts/TARGET/; the log, with CPU seconds and
# executions, to fuzz/logs/. Niced: the build machine is shared.
set -euo pipefail
cd "$(dirname "$0")"
t="$1"; secs="$2"; shift 2
bin=target/x86_64-unknown-linux-gnu/release/gpucarve-fuzz
mkdir -p "work/$t" "artifacts/$t" logs
log="logs/$t.$(date +%Y%m%d-%H%M%S).log"
# -timeout: a hard hang (10 s on a shared, niced core); inputs slower than
# 1 s are listed by -report_slow_units and checked by hand.
GPUCARVE_FUZZ_TARGET="$t" /usr/bin/time -f "cputime user %U sys %S wall %e maxrss_kib %M" \
  nice -n 19 "$bin" "work/$t" "corpus/$t" \
  -max_total_time="$secs" -timeout=10 -report_slow_units=1 -rss_limit_mb=1024 \
  -max_len=65536 -artifact_prefix="artifacts/$t/" -print_final_stats=1 "$@" >"$log" 2>&1 || true
tail -n 20 "$log" | grep -E "stat::number_of_executed_units|cputime|ERROR|SUMMARY|Slowest" || true
