#!/usr/bin/env bash
# Run PhotoRec and foremost on IMAGE, time them, and score each against TRUTH.
#
# usage: corpora/compare.sh IMAGE TRUTH OUTBASE
#
# Writes OUTBASE/photorec/ (recup.N/ folders, photorec.log), OUTBASE/foremost/
# (per-type folders, audit.txt), OUTBASE/<tool>.console.txt (tool output),
# OUTBASE/<tool>.score.json, and prints one score table per tool.
# OUTBASE/photorec and OUTBASE/foremost are deleted first if they exist.
#
# Environment (defaults in brackets):
#   PHOTOREC_TYPES  PhotoRec file families to enable  [jpg,png,gif,pdf,zip]
#   FOREMOST_TYPES  foremost -t list                  [jpg,png,gif,pdf,zip]
#   SCORE_TYPES     truth types those cover, for the SELECTED row
#                   [jpeg,png,gif,pdf,zip,docx,xlsx,odt]  (zip covers OOXML/ODF)
#   PHOTOREC_EXT2   auto: add PhotoRec's mode_ext2 option when the truth says
#                   ext2 (PhotoRec's documented mode for ext2/ext3, which follows
#                   indirect blocks); 1: always; 0: never          [auto]
#   TOOLS           which tools to run      [gpucarve photorec foremost scalpel]
#   GPUCARVE        the gpucarve binary     [target/release/gpucarve]
#   GPUCARVE_TYPES  gpucarve --types list   [jpeg,png,gif,pdf,zip]
set -euo pipefail

if [ $# -ne 3 ]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
[ -f "$1" ] || { echo "compare.sh: no image $1" >&2; exit 2; }
[ -f "$2" ] || { echo "compare.sh: no truth $2" >&2; exit 2; }
IMAGE=$(realpath "$1")
TRUTH=$(realpath "$2")
mkdir -p "$3"
OUTBASE=$(realpath "$3")

PHOTOREC_TYPES=${PHOTOREC_TYPES:-jpg,png,gif,pdf,zip}
FOREMOST_TYPES=${FOREMOST_TYPES:-jpg,png,gif,pdf,zip}
SCORE_TYPES=${SCORE_TYPES:-jpeg,png,gif,pdf,zip,docx,xlsx,odt}
TOOLS=${TOOLS:-gpucarve photorec foremost scalpel}
GPUCARVE=${GPUCARVE:-$HERE/../target/release/gpucarve}
GPUCARVE_TYPES=${GPUCARVE_TYPES:-jpeg,png,gif,pdf,zip}

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }

run_photorec() {
    command -v photorec >/dev/null || { echo "photorec not installed (apt-get install testdisk)" >&2; return 1; }
    local dir="$OUTBASE/photorec" opts="paranoid" enable="" t
    rm -rf "$dir"; mkdir -p "$dir"
    case "${PHOTOREC_EXT2:-auto}" in
        1) opts="paranoid,mode_ext2" ;;
        auto) if grep -q '"fs": "ext2"' "$TRUTH"; then opts="paranoid,mode_ext2"; fi ;;
    esac
    for t in ${PHOTOREC_TYPES//,/ }; do enable="$enable,$t,enable"; done
    local cmd="partition_none,options,$opts,fileopt,everything,disable$enable,wholespace,search"
    local t0 t1
    t0=$(now)
    (cd "$dir" && photorec /log /d "$dir/recup" /cmd "$IMAGE" "$cmd" \
        </dev/null >"$OUTBASE/photorec.console.txt" 2>&1)
    t1=$(now)
    echo "photorec /cmd IMAGE $cmd" >"$OUTBASE/photorec.cmd.txt"
    echo "photorec /log /d $dir/recup /cmd $IMAGE $cmd"
    python3 "$HERE/score.py" "$TRUTH" "$dir" --image "$IMAGE" --tool photorec \
        --seconds "$(elapsed "$t0" "$t1")" --types "$SCORE_TYPES" --json "$OUTBASE/photorec.score.json"
}

run_foremost() {
    command -v foremost >/dev/null || { echo "foremost not installed (apt-get install foremost)" >&2; return 1; }
    local dir="$OUTBASE/foremost" t0 t1
    rm -rf "$dir"
    echo "foremost -t $FOREMOST_TYPES -i $IMAGE -o $dir"
    t0=$(now)
    foremost -t "$FOREMOST_TYPES" -i "$IMAGE" -o "$dir" </dev/null >"$OUTBASE/foremost.console.txt" 2>&1
    t1=$(now)
    python3 "$HERE/score.py" "$TRUTH" "$dir" --image "$IMAGE" --tool foremost \
        --seconds "$(elapsed "$t0" "$t1")" --types "$SCORE_TYPES" --json "$OUTBASE/foremost.score.json"
}

run_gpucarve() {
    [ -x "$GPUCARVE" ] || { echo "gpucarve not built ($GPUCARVE): cargo build --release" >&2; return 1; }
    local dir="$OUTBASE/gpucarve" t0 t1
    rm -rf "$dir"
    echo "gpucarve carve $IMAGE -o $dir --types $GPUCARVE_TYPES"
    t0=$(now)
    "$GPUCARVE" carve "$IMAGE" -o "$dir" --types "$GPUCARVE_TYPES" -q </dev/null >"$OUTBASE/gpucarve.console.txt" 2>&1
    t1=$(now)
    python3 "$HERE/score.py" "$TRUTH" "$dir" --image "$IMAGE" --tool gpucarve \
        --seconds "$(elapsed "$t0" "$t1")" --types "$SCORE_TYPES" --json "$OUTBASE/gpucarve.score.json"
}

run_scalpel() {
    command -v scalpel >/dev/null || { echo "scalpel not installed (apt-get install scalpel)" >&2; return 1; }
    local dir="$OUTBASE/scalpel" conf="$OUTBASE/scalpel.conf" t0 t1
    rm -rf "$dir"
    # scalpel's shipped configuration with the jpg/png/gif/pdf/zip rules enabled.
    sed -E 's/^#[[:space:]]*((jpg|png|gif|pdf|zip)[[:space:]])/\1/' /etc/scalpel/scalpel.conf >"$conf"
    echo "scalpel -c $conf -o $dir $IMAGE"
    t0=$(now)
    scalpel -c "$conf" -o "$dir" "$IMAGE" </dev/null >"$OUTBASE/scalpel.console.txt" 2>&1
    t1=$(now)
    python3 "$HERE/score.py" "$TRUTH" "$dir" --image "$IMAGE" --tool scalpel \
        --seconds "$(elapsed "$t0" "$t1")" --types "$SCORE_TYPES" --json "$OUTBASE/scalpel.score.json"
}

status=0
for tool in $TOOLS; do
    case "$tool" in
        photorec) run_photorec || status=1 ;;
        foremost) run_foremost || status=1 ;;
        gpucarve) run_gpucarve || status=1 ;;
        scalpel) run_scalpel || status=1 ;;
        *) echo "compare.sh: unknown tool $tool" >&2; status=2 ;;
    esac
    echo
done
exit $status
