#!/usr/bin/env bash
# Carving speed on hostile shapes of every catalogue type, PhotoRec beside.
#
#   bash benches/hostile.sh [SIZE] [RUNS]        (default 64MiB, 3)
#
# For every type of the built-in catalogue and every shape of `gpucarve
# synth` (back-to-back, in-noise, max-lengths, self-referencing; and
# tiny-walks for wav, mp4 and mkv: WALKS), plus
# `mixed` (every header and footer of the catalogue back to back), builds a
# SIZE image and carves it RUNS times with default options (`--input raw`,
# since some shapes start with a container's magic) and once more with
# every option that writes more (`--keep partial,unvalidated
# --keep-embedded`). Prints one line per shape:
#
#   type shape MiB/s(median) peak-RSS-MiB output-MiB(keep all) work-x photorec-MiB/s
#
# `work-x`: bytes read by validation and fragment searches over the image
# (audit.txt's work meter). PhotoRec (everything enabled, whole space,
# paranoid) runs once per shape when PHOTOREC=1 (slow: minutes for the lot).
# Environment: GPUCARVE (binary), TYPES (space-separated subset), SHAPES,
# TMPDIR (where images and outputs go), TIMEOUT (seconds per run, 300).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SIZE=${1:-64MiB}
RUNS=${2:-3}
B=${GPUCARVE:-$HERE/../target/release/gpucarve}
TIMEOUT=${TIMEOUT:-300}
[ -x "$B" ] || { echo "build first: cargo build --release" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/hostile.XXXXXX")
trap 'rm -rf "$W"' EXIT
TYPES=${TYPES:-$("$B" signatures | awk '/^[a-z0-9]/{print $1}')}
SHAPES=${SHAPES:-back-to-back in-noise max-lengths self-referencing}

now() { date +%s.%N; }
mibs() { python3 -c "import sys; s=float(sys.argv[1]); print(f'{s/1048576/max(float(sys.argv[2]),1e-9):.1f}')" "$1" "$2"; }
median() { python3 -c "import sys,statistics; print(statistics.median(map(float, sys.argv[1:])))" "$@"; }

one() { # name image
    local name=$1 img=$2 bytes times=() t0 t1 rc rss out work pr="-"
    bytes=$(stat -c %s "$img")
    for _ in $(seq "$RUNS"); do
        rm -rf "$W/out"
        t0=$(now)
        rc=0
        /usr/bin/time -f %M -o "$W/rss" timeout "$TIMEOUT" "$B" carve "$img" -o "$W/out" -q --input raw >/dev/null 2>"$W/err" || rc=$?
        t1=$(now)
        if [ "$rc" != 0 ]; then echo "$name: exit $rc: $(tail -1 "$W/err")"; return; fi
        times+=("$(python3 -c "print($t1 - $t0)")")
    done
    rss=$(( $(tail -1 "$W/rss") / 1024 ))
    work=$(grep '^work:' "$W/out/audit.txt" | sed 's/.*(\([0-9.]*\) x the image.*/\1/')
    rm -rf "$W/out"
    timeout "$TIMEOUT" "$B" carve "$img" -o "$W/out" -q --input raw --keep partial,unvalidated --keep-embedded >/dev/null 2>&1 || true
    out=$(du -sb "$W/out" | awk '{printf "%.1f", $1/1048576}')
    rm -rf "$W/out"
    if [ "${PHOTOREC:-0}" = 1 ] && command -v photorec >/dev/null; then
        rm -rf "$W/pr"; mkdir -p "$W/pr"
        t0=$(now)
        (cd "$W/pr" && timeout "$TIMEOUT" photorec /log /d "$W/pr/recup" /cmd "$img" \
            partition_none,options,paranoid,fileopt,everything,enable,wholespace,search \
            </dev/null >/dev/null 2>&1) || true
        t1=$(now)
        pr=$(mibs "$bytes" "$(python3 -c "print($t1 - $t0)")")
        rm -rf "$W/pr"
    fi
    printf "%-28s %8s MiB/s  rss %4s MiB  out %6s MiB  work %7sx  photorec %s MiB/s\n" \
        "$name" "$(mibs "$bytes" "$(median "${times[@]}")")" "$rss" "$out" "$work" "$pr"
}

echo "# $(date -u +%F) $(uname -n) $(nproc) cores; $("$B" --version); image $SIZE, median of $RUNS"
rm -f "$W/img"; "$B" synth --shape mixed --size "$SIZE" -o "$W/img"
one "mixed" "$W/img"
for t in $TYPES; do
    for s in $SHAPES; do
        rm -f "$W/img"; "$B" synth --type "$t" --shape "$s" --size "$SIZE" -o "$W/img"
        one "$t $s" "$W/img"
    done
    # The walks' caps: a header in every sector of tiny chunks (the types
    # with such a walk).
    case " ${WALKS:-wav mp4 mkv} " in
    *" $t "*)
        rm -f "$W/img"; "$B" synth --type "$t" --shape tiny-walks --size "$SIZE" -o "$W/img"
        one "$t tiny-walks" "$W/img" ;;
    esac
done
