#!/usr/bin/env bash
# Sums fuzz/logs/*.log per target: CPU minutes (user + sys, from
# /usr/bin/time), executions, artifacts left in fuzz/artifacts; prints a
# Markdown table for RELIABILITY.md.
cd "$(dirname "$0")"
echo "| target | CPU min | executions | exec/s (CPU) | corpus (inputs) | open artifacts |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for t in $(ls corpus); do
  cpu=0; execs=0
  for f in logs/$t.*.log; do
    [ -f "$f" ] || continue
    c=$(awk '/^cputime/ {print $3 + $5}' "$f" | tail -1)
    e=$(awk -F': ' '/stat::number_of_executed_units/ {print $2}' "$f" | tail -1)
    cpu=$(echo "$cpu + ${c:-0}" | bc -l); execs=$((execs + ${e:-0}))
  done
  rate=$( [ "$(echo "$cpu > 0" | bc)" = 1 ] && echo "$execs / $cpu" | bc || echo 0)
  n=$(ls corpus/$t | wc -l)
  a=$(ls artifacts/$t 2>/dev/null | wc -l)
  printf "| %s | %.1f | %d | %d | %d | %d |\n" "$t" "$(echo "$cpu / 60" | bc -l)" "$execs" "$rate" "$n" "$a"
done
