#!/usr/bin/env bash
# Evidence as examiners hold it: one image as raw, split raw, E01 and gzip,
# carved and scanned warm (page cache) and cold (caches dropped, as root),
# through each I/O backend, beside the device's sequential ceilings (dd with
# O_DIRECT, and buffered) and PhotoRec (raw, PHOTOREC=1).
#
#   sudo bash benches/inputs.sh [SIZE] [RUNS]      (default 512MiB, 3)
#
# Prints one line per configuration: input, command, backend, warm or cold,
# median wall seconds of RUNS, and the ratio to the raw image's carving in
# the same run. Every carving's report.jsonl is compared with the raw
# image's (identical, or the line says DIFFERS). Cold rows need root (they
# are skipped otherwise). Environment: GPUCARVE (binary), TMPDIR (where the
# image and its copies go: 3-4 times SIZE), SEED (mkimage seed, 34).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SIZE=${1:-512MiB}
RUNS=${2:-3}
B=${GPUCARVE:-$HERE/../target/release/gpucarve}
[ -x "$B" ] || { echo "build first: cargo build --release" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/inputs.XXXXXX")
trap 'rm -rf "$W"' EXIT
cold_ok=0
if [ "$(id -u)" = 0 ] && [ -w /proc/sys/vm/drop_caches ]; then cold_ok=1; fi

now() { date +%s.%N; }
median() { python3 -c "import sys,statistics; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" "$@"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

python3 "$HERE/../corpora/mkimage.py" --fs raw --size "$SIZE" --seed "${SEED:-34}" --out "$W/img.dd" --quiet
rm -f "$W/img.dd.truth.json"
(cd "$W" && split -b 100000000 -d -a 3 --numeric-suffixes=1 img.dd split.)
gzip -1 -c "$W/img.dd" > "$W/img.dd.gz"
(cd "$W" && ewfacquire -u -t img -f encase6 -c deflate:fast -S 4GiB -q img.dd </dev/null >/dev/null 2>&1) \
    || echo "# ewfacquire (ewf-tools) missing: no E01 rows"

RAW_CARVE=""
# time_it NAME TEMP COMMAND...: median wall of RUNS runs (cold: caches dropped before each)
time_it() {
    local name=$1 temp=$2; shift 2
    local times=() t0 t1
    for _ in $(seq "$RUNS"); do
        rm -rf "$W/out"
        if [ "$temp" = cold ]; then drop; fi
        t0=$(now)
        "$@" >/dev/null 2>"$W/err" || { echo "$name: failed: $(tail -1 "$W/err")"; return; }
        t1=$(now)
        times+=("$(python3 -c "print($t1 - $t0)")")
    done
    local m; m=$(median "${times[@]}")
    local same=""
    if [ -f "$W/out/report.jsonl" ]; then
        if [ -f "$W/want.jsonl" ]; then
            cmp -s "$W/out/report.jsonl" "$W/want.jsonl" && same="report identical" || same="report DIFFERS"
        else
            cp "$W/out/report.jsonl" "$W/want.jsonl"; same="reference report"
        fi
    fi
    local ratio=""
    if [ -n "$RAW_CARVE" ]; then ratio=$(python3 -c "print(f'{$m/$RAW_CARVE:.2f}x raw carve')"); fi
    printf "%-44s %-5s %8s s  %-18s %s\n" "$name" "$temp" "$m" "$ratio" "$same"
    if [ -z "$RAW_CARVE" ]; then RAW_CARVE=$m; fi
}

echo "# $(date -u +%F) $(uname -n) $(nproc) cores; $("$B" --version); image $SIZE (mkimage --fs raw), median of $RUNS"
time_it "carve raw" warm "$B" carve "$W/img.dd" -o "$W/out" -q
for f in split.001 img.E01 img.dd.gz; do
    [ -e "$W/$f" ] || continue
    time_it "carve $f" warm "$B" carve "$W/$f" -o "$W/out" -q
done
for f in img.dd split.001 img.E01 img.dd.gz; do
    [ -e "$W/$f" ] || continue
    time_it "scan $f" warm "$B" scan "$W/$f" -q --count
done
if [ "$cold_ok" = 1 ]; then
    for io in buffered direct uring; do
        time_it "carve raw --io $io" cold "$B" carve "$W/img.dd" -o "$W/out" -q --io "$io"
        time_it "scan raw --io $io" cold "$B" scan "$W/img.dd" -q --count --io "$io"
    done
    for f in split.001 img.E01 img.dd.gz; do
        [ -e "$W/$f" ] || continue
        time_it "carve $f" cold "$B" carve "$W/$f" -o "$W/out" -q
    done
    time_it "ceiling: dd iflag=direct bs=8M" cold dd if="$W/img.dd" of=/dev/null bs=8M iflag=direct
    time_it "ceiling: dd bs=8M (buffered)" cold dd if="$W/img.dd" of=/dev/null bs=8M
else
    echo "# cold rows skipped: run as root to drop the page cache"
fi
if [ "${PHOTOREC:-0}" = 1 ] && command -v photorec >/dev/null; then
    mkdir -p "$W/pr"
    time_it "photorec raw (everything, whole space)" warm sh -c "cd '$W/pr' && rm -rf recup* && photorec /log /d '$W/pr/recup' /cmd '$W/img.dd' partition_none,options,paranoid,fileopt,everything,enable,wholespace,search </dev/null"
fi
