#!/bin/bash
# gpucarve on a Slurm job array: task I of N carves shard I/N of one image
# into CASE/partI; `gpucarve merge` then joins the N parts into the report a
# single run writes. The nodes need only a file system they all share, which
# holds the image (read-only is enough) and CASE.
#
#   sbatch --array=1-16 carve-array.sh /evidence/disk.E01 /scratch/case [carve options]
#   sbatch --dependency=afterok:<array job id> --wrap \
#       "gpucarve merge /scratch/case/part{1..16} -o /scratch/case/all"
#
# Or wait for the array, then merge: sbatch --wait --array=1-16 ...; gpucarve merge ...
# The directives below are defaults; options given to sbatch override them
# (e.g. --cpus-per-task=2 --mem=1G on small nodes). Each task's progress
# (one JSON object a line) goes to CASE/partI.log. A requeued or restarted
# task resumes its shard from its journal.
#SBATCH --job-name=gpucarve
#SBATCH --array=1-16
#SBATCH --cpus-per-task=8
#SBATCH --mem=4G
#SBATCH --output=gpucarve-%A_%a.out
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: sbatch --array=1-N $0 IMAGE CASEDIR [gpucarve carve options]" >&2
    exit 2
fi
image=$1
case_dir=$2
shift 2

# Task ids must be 1..N: each is one shard, and merge needs them all.
i=${SLURM_ARRAY_TASK_ID:?not run as a Slurm job array (sbatch --array=1-N)}
n=${SLURM_ARRAY_TASK_COUNT:?}
if [ "${SLURM_ARRAY_TASK_MIN:-1}" != 1 ] || [ "${SLURM_ARRAY_TASK_MAX:-$n}" != "$n" ]; then
    echo "$0: the array must be 1-N (got ${SLURM_ARRAY_TASK_MIN}-${SLURM_ARRAY_TASK_MAX}, $n tasks)" >&2
    exit 2
fi

out=$case_dir/part$i
mkdir -p "$case_dir"
resume=()
if [ -f "$out/run.json" ]; then
    resume=(--resume)
fi
threads=${SLURM_CPUS_PER_TASK:-0}
exec gpucarve carve "$image" -o "$out" --shard "$i/$n" --threads "$threads" \
    "${resume[@]}" --progress json "$@" 2>"$out.log"
