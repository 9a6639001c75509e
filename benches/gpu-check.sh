#!/usr/bin/env bash
# gpu-check: what gpucarve's GPU engine does on this machine, next to its CPU
# engine and to the figures Searchlight published for PFAC (Bayne et al.:
# RX 6950 XT 3.38 GiB/s, its CPU 1.07 GiB/s; one 4-byte pattern, data in
# memory), and which stage limits each configuration: the disk (read), the
# bus (upload: PCIe/DMA), the shader (compute) or the read-back.
#
# Usage:  bash benches/gpu-check.sh [IMAGE] [OUT_DIR]
#   IMAGE    a raw image on the disk to measure (default: a generated one,
#            SIZE=2GiB, in OUT_DIR; put it on the disk you want to measure)
#   OUT_DIR  where the JSON reports and the table go (default: gpu-check-out)
# Environment: SIZE (generated image, default 2GiB), REPEAT (default 3),
#   BLOCKS (default 8MiB,32MiB), KEYWORDS (keyword list sizes, default
#   "10 1000 10000 100000"; empty: none). The GPU is the best device Vulkan lists
#   (`gpucarve devices`; discrete first); VK_ICD_FILENAMES picks a driver.
# Needs cargo (or BIN=path/to/gpucarve) and python3; a Vulkan driver for the GPU rows (`gpucarve
# devices` says what is missing). Run as root to add cold-cache rows
# (COLD=1: drops the page cache before every run of the buffered backend).
#
# The table printed at the end is the one to paste into BENCHMARKS.md, with
# the date, the machine (CPU, GPU, disk, PCIe link: `lspci -vv | grep LnkSta`)
# and this command.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${2:-gpu-check-out}
SIZE=${SIZE:-2GiB}
REPEAT=${REPEAT:-3}
BLOCKS=${BLOCKS:-8MiB,32MiB}
mkdir -p "$OUT"

# BIN: a gpucarve built elsewhere (a machine without cargo); else build here.
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=target/release/gpucarve
fi

echo "== devices"
"$BIN" devices | tee "$OUT/devices.txt" || true

IMG=${1:-}
if [ -z "$IMG" ]; then
  IMG="$OUT/disk-$SIZE.img"
  if [ ! -f "$IMG" ]; then
    echo "== generating $IMG ($SIZE, raw, corpora/mkimage.py)"
    python3 corpora/mkimage.py --fs raw --size "$SIZE" --seed 1 --quiet --out "$IMG"
  fi
fi

# Searchlight's benchmark shape: one 4-byte pattern.
cat > "$OUT/one-pattern.toml" <<'EOF'
[[type]]
name = "jpeg-jfif"
extensions = ["jpg"]
headers = ["FF D8 FF E0"]
EOF

run() { # name, engines, extra args...
  local name=$1 engines=$2
  shift 2
  echo "== $name"
  "$BIN" bench "$IMG" --engines "$engines" --io buffered,direct,uring \
    --block-sizes "$BLOCKS" --repeat "$REPEAT" --json "$@" > "$OUT/$name.json"
}

run one-pattern cpu,gpu --signatures "$OUT/one-pattern.toml"
run catalogue cpu,gpu
# Both upload paths, side by side (by default a discrete GPU copies to VRAM
# on a transfer queue; integrated GPUs and lavapipe search in place).
GPUCARVE_GPU_UPLOAD=in-place run catalogue-in-place gpu --no-baselines
GPUCARVE_GPU_UPLOAD=copy run catalogue-copy gpu --no-baselines
# Keyword lists (scan --keywords): 10 to 100 000 random 6-10 byte literals.
# PFAC's cost should not grow with the count; the CPU engine's does.
for n in ${KEYWORDS-10 1000 10000 100000}; do
  python3 -c "import random,sys; r=random.Random(int(sys.argv[1]))
for _ in range(int(sys.argv[1])): print('hex:' + bytes(r.getrandbits(8) for _ in range(r.randint(6, 10))).hex())" "$n" > "$OUT/keywords-$n.txt"
  echo "== keywords-$n"  # one backend and block size: the engines are what differs
  "$BIN" bench "$IMG" --engines cpu,gpu --io buffered --block-sizes 32MiB --repeat "$REPEAT" \
    --json --no-baselines --keywords "$OUT/keywords-$n.txt" > "$OUT/keywords-$n.json"
done
if [ "${COLD:-0}" = 1 ]; then
  run catalogue-cold cpu,gpu --drop-caches --no-baselines
fi

# Whole scans, and how --engine auto shared the blocks (GPUCARVE_AUTO_GPU=1:
# a GPU beside the CPU engine at any image size) with the figures it measured.
echo "== scan end to end: cpu, gpu, auto (its engine split)"
for e in cpu gpu auto; do
  start=$(date +%s%N)
  GPUCARVE_AUTO_GPU=1 "$BIN" scan "$IMG" --engine "$e" --count > /dev/null 2> "$OUT/scan-$e.err" || true
  end=$(date +%s%N)
  echo "scan --engine $e: $(( (end - start) / 1000000 )) ms"
  grep -h "engine split" "$OUT/scan-$e.err" || true
done | tee "$OUT/scan-engines.txt"

python3 - "$OUT" <<'EOF' | tee "$OUT/table.md"
import json, os, sys

out = sys.argv[1]
SEARCHLIGHT_GPU, SEARCHLIGHT_CPU = 3.38, 1.07  # GiB/s, PFAC, one 4-byte pattern, in memory

def gib(mib):
    return mib / 1024

def limit(r):
    b = r["busy"]
    stages = {
        "disk (read)": b["read"],
        "bus (upload)": b["upload"],
        "search (compute; the shader on a GPU)": b["compute"],
        "read-back": b["readback"],
    }
    # Compute is summed over workers on the CPU engine; a stage near 100%
    # busy is the limit; reading at the I/O ceiling means the disk.
    if r["ratio_to_io_ceiling"] >= 0.85:
        return "disk (at its ceiling)"
    name, frac = max(stages.items(), key=lambda kv: kv[1])
    return f"{name} {frac:.0%}"

for name in ["one-pattern", "catalogue", "catalogue-in-place", "catalogue-copy", "catalogue-cold"] + [
        f"keywords-{n}" for n in (10, 1000, 10000, 100000)]:
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        continue
    rep = json.load(open(path))
    print(f"\n### {name}: {rep['image']} ({rep['image_bytes'] / 2**30:.2f} GiB, "
          f"{rep['patterns']} patterns, {rep['cpus']} CPUs)\n")
    print("| engine | io | block | scan GiB/s | engine in memory GiB/s | vs Searchlight GPU / CPU (in memory) "
          "| I/O ceiling GiB/s | host copies/byte | busy read / upload / compute / read-back (overlap) | limit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rep["rows"]:
        b = r["busy"]
        mem = gib(r["engine_mem_mib_s"])
        print(f"| {r['engine']} | {r['io']} | {r['block_size'] >> 20} MiB | {gib(r['mib_s']):.2f} "
              f"| {mem:.2f} | {mem / SEARCHLIGHT_GPU:.2f}x / {mem / SEARCHLIGHT_CPU:.2f}x "
              f"| {gib(r['io_ceiling_mib_s']):.2f} | {r['host_copies_per_byte']:.2f} "
              f"| {b['read']:.0%} / {b['upload']:.0%} / {b['compute']:.0%} / {b['readback']:.0%} ({b['overlap']:.0%}) "
              f"| {limit(r)} |")
    for st in rep.get("setups", []):
        steps = ", ".join(f"{p['step']} {p['s'] * 1e3:.0f}" for p in st["steps"])
        print(f"\nset-up: {st['engine']}: {st['setup_s'] * 1e3:.0f} ms"
              + (f" ({steps} ms)" if steps else "")
              + f"; tear-down {st['teardown_s'] * 1e3:.0f} ms (targets: 150 ms, 20 ms)")
    for m in rep["missing"]:
        print(f"\nnot measured: {m}")
    for b in rep.get("baselines", []):
        print(f"\nbaseline: {b['name']}: {gib(b['mib_s']):.2f} GiB/s ({b['note']})")
print("""
Reading the table: 'engine in memory' is the engine alone on blocks already in
memory (for the GPU: in its staging memory, so upload and shader, no host copy):
the figure to set beside Searchlight's. 'host copies/byte' is 0 when O_DIRECT
reads land in the GPU's staging memory. Busy fractions are shares of the wall
time during which at least one block was in the stage; the overlap is the
share of the wall time stages spent running at once (reading the next blocks
while the shader works: the pipeline doing its job). The limit is the busiest stage: disk (read near
100%, or the scan at the I/O ceiling), bus (upload), search (compute: the
shader on a GPU, the workers together on the CPU).""")
EOF
echo "== reports in $OUT/"
