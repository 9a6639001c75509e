#!/usr/bin/env bash
# The whole evaluation in one command: build gpucarve, generate a drive image
# with ground truth, carve it with gpucarve, PhotoRec, foremost and scalpel,
# and print each tool's score table.
#
# usage: corpora/evaluate.sh [SIZE] [SEED] [FS] [OUTDIR]
#   SIZE    image size for mkimage.py                 [1GiB]
#   SEED    generator seed                            [5]
#   FS      fat32 | ext2 | ext4 | raw                 [fat32]
#   OUTDIR  where the image and the outputs go        [/tmp/gpucarve-eval]
#
# Extra mkimage.py options go in MKIMAGE_OPTS (e.g. "--fragmented-fraction 0.5");
# the tools and types are compare.sh's (TOOLS, PHOTOREC_TYPES, ...). Needs
# python3, mtools, dosfstools, e2fsprogs (image), testdisk, foremost, scalpel
# (peers); a peer that is not installed is reported, the others still run,
# and the exit status is 1.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SIZE=${1:-1GiB}
SEED=${2:-5}
FS=${3:-fat32}
OUT=${4:-/tmp/gpucarve-eval}

mkdir -p "$OUT"
IMG="$OUT/$FS-$SIZE-seed$SEED.img"
(cd "$HERE/.." && cargo build --release --quiet)
if [ ! -f "$IMG" ] || [ ! -f "$IMG.truth.json" ]; then
    # shellcheck disable=SC2086
    python3 "$HERE/mkimage.py" --fs "$FS" --size "$SIZE" --seed "$SEED" ${MKIMAGE_OPTS:-} --out "$IMG"
fi
bash "$HERE/compare.sh" "$IMG" "$IMG.truth.json" "$OUT/compare"
