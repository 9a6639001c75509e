#!/bin/bash
# The carving-speed loops of BENCHMARKS.md ("Carving speed, all types").
#
#   corpora/carve_speed.sh photorec BIN DIR   gpucarve vs PhotoRec (everything enabled),
#                                             3 runs alternating, medians, per image
#   corpora/carve_speed.sh bound BIN DIR IMG...  carve vs 2 x scan + write/hash, where
#                                             write/hash is `gpucarve extract` of the files
#                                             the carving wrote (medians of ROUNDS, default
#                                             5, from the environment); also with
#                                             write/hash = extract then `sync` (the carving
#                                             makes its output durable before it ends: its
#                                             journal syncs the file system)
#
# Every timed command starts after a `sync` (not timed), so that none of them
# pays for writing back what the one before it left in the page cache (an
# extract leaves ~30 MB dirty, which the next carving's final sync used to
# write out; PhotoRec leaves its recovered files, 100-300 MB, which made the
# next carving's final sync take 150-250 ms until session 14). Nothing is
# deleted until the end: every command writes into a folder of its own. On a
# file system without a journal, ext4 skips inodes freed in the last 60 s
# (300 s while their table block is dirty) when it allocates one
# (`recently_deleted`), so deleting the last command's output made the next
# one's file creations slow (PhotoRec's thousands of files: the next carving
# took 630 ms instead of 400 on ext2). Start it after a few minutes in which
# nothing was deleted.
#
# DIR holds the images made by corpora/mkimage.py as in sessions 8-12:
#   fat.img  (512 MiB FAT32, seed 7), ext4.img (256 MiB ext4, seed 8),
#   ext2.img (256 MiB ext2, seed 9, --fragmented-fraction 0.3), each with its .truth.json.
# Needs photorec (testdisk), python3, bc. Times are wall-clock milliseconds; the
# machine's noise is large, so compare binaries side by side in one sitting.
set -euo pipefail
what=$1 bin=$(realpath "$2") dir=$(realpath "$3"); shift 3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
med() { printf "%s\n" "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
n=0
fresh() { n=$((n + 1)); out="$work/$1.$n"; } # a new folder name in $out
photorec_run() { # OUT IMG [ext2] [types]
  local mode="" types="everything,enable"
  [ "${3:-}" = ext2 ] && mode=",mode_ext2"
  [ -n "${4:-}" ] && types="everything,disable,$(echo "$4" | sed 's/jpeg/jpg/; s/,/,enable,/g'),enable"
  mkdir -p "$1"
  # (In the output folder: /log writes photorec.log where it runs.)
  (cd "$1" && photorec /log /d "$1/recup" /cmd "$2" "partition_none,options,paranoid${mode},fileopt,${types},wholespace,search")
}
extract_sync() { "$bin" extract "$@" && sync; }
case $what in
photorec)
  for row in fat ext4 ext2 5types; do
    a=() b=() img=$dir/$row.img extra=() mode="" types=""
    [ "$row" = 5types ] && img=$dir/fat.img types=jpeg,png,gif,pdf,zip extra=(--types "$types")
    [ "$row" = ext2 ] && mode=ext2
    for _ in 1 2 3; do
      fresh gc; sync
      a+=("$(ms "$bin" carve "$img" -o "$out" -q "${extra[@]}")")
      fresh pr; sync
      b+=("$(ms photorec_run "$out" "$img" "$mode" "$types")")
    done
    ma=$(med "${a[@]}") mb=$(med "${b[@]}")
    echo "$row gpucarve ${a[*]} ms, median $ma | photorec ${b[*]} ms, median $mb | ratio $(echo "scale=2; $mb / $ma" | bc)"
  done
  ;;
bound)
  for name in "$@"; do
    img=$dir/$name.img
    fresh ref; ref=$out; "$bin" carve "$img" -o "$ref" -q
    ids=$(python3 -c "import json,sys; print(','.join(str(r['id']) for r in map(json.loads, open(sys.argv[1])) if r.get('path')))" "$ref/report.jsonl")
    c=() s=() x=() y=()
    for _ in $(seq "${ROUNDS:-5}"); do
      fresh gc; sync; c+=("$(ms "$bin" carve "$img" -o "$out" -q)")
      sync; s+=("$(ms "$bin" scan "$img")")
      fresh x; sync; x+=("$(ms "$bin" extract "$ref/report.jsonl" --ids "$ids" -o "$out")")
      fresh x; sync; y+=("$(ms extract_sync "$ref/report.jsonl" --ids "$ids" -o "$out")")
    done
    mc=$(med "${c[@]}") msc=$(med "${s[@]}") mx=$(med "${x[@]}") my=$(med "${y[@]}")
    bound=$((2 * msc + mx)) bsync=$((2 * msc + my))
    echo "$name carve $mc ms | scan $msc ms | write+hash (extract) $mx ms, with sync $my ms | 2 x scan + write/hash = $bound ms, $bsync ms | carve/bound $(echo "scale=2; $mc / $bound" | bc), with sync $(echo "scale=2; $mc / $bsync" | bc)"
  done
  ;;
*) echo "usage: $0 photorec|bound BIN DIR [IMG...]" >&2; exit 2 ;;
esac
