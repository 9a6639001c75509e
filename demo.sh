#!/usr/bin/env bash
# One command: build gpucarve, build a 64 MiB example drive image with known
# content from the real sample files in corpora/samples, carve it, and score
# the result against the image's ground truth. Needs only cargo and python3.
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --quiet
mkdir -p example
python3 corpora/mkimage.py --fs raw --size 64MiB --seed 1 --out example/disk.img --quiet
rm -rf example/carved
./target/release/gpucarve carve example/disk.img -o example/carved
echo
head -n 12 example/carved/audit.txt
echo
python3 corpora/score.py example/disk.img.truth.json example/carved --tool gpucarve
