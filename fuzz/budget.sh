#!/usr/bin/env bash
# Fuzzes each named target until its logged CPU time (user + sys, summed over
# fuzz/logs/TARGET.*.log) reaches its goal: 20 CPU minutes for the
# offset-heavy parsers, 10 for the rest. Runs in chunks of at most CHUNK
# wall seconds (default 300) through run.sh, so it can be stopped any time
# and picks up where the logs left off.
#   fuzz/budget.sh TARGET...
set -uo pipefail
cd "$(dirname "$0")"
chunk="${CHUNK:-300}"
cpu_secs() {
  local t="$1" sum=0 c
  for f in logs/"$t".*.log; do
    [ -f "$f" ] || continue
    c=$(awk '/^cputime/ {print $3 + $5}' "$f" | tail -1)
    sum=$(echo "$sum + ${c:-0}" | bc -l)
  done
  echo "$sum"
}
goal_secs() {
  case "$1" in
    validate_zip|validate_ole2|validate_tiff|validate_mp4|validate_sqlite|validate_jpeg|fragments_jpeg) echo 1200 ;;
    *) echo 600 ;;
  esac
}
for t in "$@"; do
  while :; do
    have=$(cpu_secs "$t"); goal=$(goal_secs "$t")
    left=$(echo "$goal - $have" | bc -l)
    if [ "$(echo "$left <= 0" | bc)" = 1 ]; then
      echo "$t: $(printf %.0f "$have") CPU s, goal $goal reached"
      break
    fi
    secs=$(printf %.0f "$(echo "if ($left + 5 < $chunk) $left + 5 else $chunk" | bc -l)")
    echo "$t: $(printf %.0f "$have")/$goal CPU s, fuzzing $secs s"
    ./run.sh "$t" "$secs"
  done
done
