#!/usr/bin/env python3
"""Evaluation loop for multi-fragment recovery: builds images (raw and fat32
by seeds), carves them with gpucarve and prints, per fragment count and type,
the JPEG/PNG/ZIP-family files planted, recovered exactly (sha256 of the
original written `complete`) and the false joins (a `complete` file of several
byte runs that is no planted original). With --why, each missed file of 3+
fragments is listed with the note of the report entry at its header.

    python3 corpora/fragloop.py --seeds 11,12 [--fs raw,fat32] [--counts 3,4,5]
        [--size 64MiB] [--work /tmp/fragloop] [--bin target/release/gpucarve] [--why]

Images are kept in --work and reused (same options, same image); carvings
are redone every run."""
import argparse, collections, json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILY = {"jpeg", "png", "zip", "docx", "xlsx", "odt", "jar", "pptx", "ods", "odp", "epub", "apk"}


def kind(t):
    return "zip" if t in FAMILY - {"jpeg", "png"} else t


def build(work, fs, seed, size, counts, frac):
    img = os.path.join(work, f"{fs}-{seed}-{size}-{counts.replace(',', '')}-{frac}.img")
    if not (os.path.exists(img) and os.path.exists(img + ".truth.json")):
        subprocess.run([sys.executable, os.path.join(HERE, "mkimage.py"), "--fs", fs, "--size", size,
                        "--seed", str(seed), "--fragmented-fraction", str(frac),
                        "--fragment-counts", counts, "--out", img, "--quiet"], check=True)
    return img


def carve(binary, img, out):
    subprocess.run(["rm", "-rf", out], check=True)
    t0 = time.time()
    subprocess.run([binary, "carve", img, "-o", out, "-q"], check=True)
    secs = time.time() - t0
    with open(os.path.join(out, "report.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return [r for r in recs if "offset" in r and "status" in r], secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="11,12")
    ap.add_argument("--fs", default="raw,fat32")
    ap.add_argument("--counts", default="3,4,5")
    ap.add_argument("--fraction", default="0.5")
    ap.add_argument("--size", default="64MiB")
    ap.add_argument("--work", default="/tmp/fragloop")
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"),
                                                  "release", "gpucarve"))
    ap.add_argument("--why", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    table = collections.defaultdict(lambda: [0, 0])  # (n, kind) -> [planted, exact]
    false_joins, total_secs = 0, 0.0
    for fs in a.fs.split(","):
        for seed in a.seeds.split(","):
            img = build(a.work, fs, seed, a.size, a.counts, a.fraction)
            truth = json.load(open(img + ".truth.json"))
            recs, secs = carve(a.bin, img, img + ".out")
            total_secs += secs
            planted = {f["sha256"] for f in truth["files"]}
            written = {r.get("sha256") for r in recs if r.get("path") and r.get("status") == "complete"}
            by_off = {r["offset"]: r for r in recs}
            for r in recs:
                if r.get("status") == "complete" and len(r.get("byte_runs") or []) > 1 \
                        and r.get("sha256") not in planted:
                    false_joins += 1
                    print(f"FALSE JOIN {fs}-{seed} at {r['offset']}: {len(r['byte_runs'])} runs {r.get('notes')}")
            for f in truth["files"]:
                if f["type"] not in FAMILY:
                    continue
                n = len(f["fragments"])
                got = f["sha256"] in written
                cell = table[(n, kind(f["type"]))]
                cell[0] += 1
                cell[1] += got
                if a.why and n >= 3 and not got:
                    r = by_off.get(f["fragments"][0][0])
                    notes = (r.get("notes") if r else None) or []
                    note = " | ".join(x for x in notes if "fragment" in x) or (r or {}).get("status")
                    order = [f["fragments"].index(x) for x in sorted(f["fragments"])]
                    print(f"miss {fs}-{seed} {kind(f['type'])} n={n} size={f['size']} layout={order}: {note}")
    print(f"# seeds {a.seeds} fs {a.fs} counts {a.counts} size {a.size}; carving {total_secs:.1f} s")
    print("| fragments | type | planted | exact |")
    print("|---|---|---|---|")
    sums = collections.defaultdict(lambda: [0, 0])
    for (n, k), (p, e) in sorted(table.items()):
        print(f"| {n} | {k} | {p} | {e} |")
        sums[n][0] += p
        sums[n][1] += e
    for n, (p, e) in sorted(sums.items()):
        print(f"| {n} | all | {p} | {e} ({100 * e // max(p, 1)}%) |")
    print(f"false joins: {false_joins}")


if __name__ == "__main__":
    main()
