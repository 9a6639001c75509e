#!/usr/bin/env python3
"""End-to-end self-test of mkimage.py and score.py (no carver needed).

For each file system (raw, fat32, ext2, ext4): build a small image twice and
check the bytes are identical; then build a synthetic carver output from the
truth (every file exactly, plus one partial, one overlong, one decoy remnant,
one duplicate and one junk file, with a gpucarve-style report.jsonl) and check
that score.py classifies each of them as expected, and that --broken counts
the intact files apart. Needs mtools, dosfstools and
e2fsprogs. Prints 'N passed, N failed' and exits non-zero on any failure.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import mkimage  # noqa: E402
import score  # noqa: E402


def file_sha(path):
    """Hex sha256 of a file."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_file(img, fragments):
    """Bytes of a file stored in the image at the given fragments."""
    with open(img, "rb") as f:
        return mkimage.read_ranges(f, fragments)


def synthetic_output(img, truth, outdir):
    """Write a fake carver output; return the expected class counts."""
    os.makedirs(outdir)
    files = truth["files"]
    report = []
    for i, t in enumerate(files):
        data = read_file(img, t["fragments"])
        rel = f"{t['type']}/{i:05d}.{t['type']}"
        if i == 0:
            data = data[: len(data) // 2]             # partial
        elif i == 1:
            data = data + b"\0trailing garbage"       # overlong
        os.makedirs(os.path.join(outdir, t["type"]), exist_ok=True)
        with open(os.path.join(outdir, rel), "wb") as f:
            f.write(data)
        report.append({"id": i, "type": t["type"], "status": "complete", "offset": t["fragments"][0][0],
                       "length": len(data), "byte_runs": [{"img_offset": o, "len": n} for o, n in t["fragments"]],
                       "sha256": hashlib.sha256(data).hexdigest(), "path": rel})
    with open(os.path.join(outdir, "report.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in report))
    shutil.copyfile(os.path.join(outdir, f"{files[2]['type']}/00002.{files[2]['type']}"),
                    os.path.join(outdir, "dup.bin"))
    decoy = next(d for d in truth["decoys"] if d["intact"])
    with open(img, "rb") as f:
        f.seek(decoy["offset"])
        remnant = f.read(decoy["length"])
    with open(os.path.join(outdir, "decoy.bin"), "wb") as f:
        f.write(remnant)
    with open(os.path.join(outdir, "junk.jpg"), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8)
    return {"exact": len(files) - 2 + 1, "partial": 1, "overlong": 1, "decoy": 1, "unmatched": 1}


def check_fs(fs, tmp, results):
    """Build, rebuild and score one image; append (name, ok, detail) to results."""
    img = os.path.join(tmp, f"{fs}.img")
    args = ["--fs", fs, "--size", "40MiB", "--seed", "7", "--out", img, "--quiet"]
    rc1 = mkimage.main(args)
    sha1 = file_sha(img)
    rc2 = mkimage.main(args)
    sha2 = file_sha(img)
    results.append((f"{fs}: build", rc1 == 0 and rc2 == 0, f"rc {rc1}/{rc2}"))
    results.append((f"{fs}: deterministic", sha1 == sha2, f"{sha1[:12]} vs {sha2[:12]}"))
    with open(img + ".truth.json") as f:
        truth = json.load(f)
    results.append((f"{fs}: truth sha256", truth["image_sha256"] == sha2, ""))
    out = os.path.join(tmp, f"{fs}-out")
    expected = synthetic_output(img, truth, out)
    js = os.path.join(tmp, f"{fs}-score.json")
    with open(os.devnull, "w") as devnull:
        old, sys.stdout = sys.stdout, devnull
        try:
            score.main([img + ".truth.json", out, "--json", js])
        finally:
            sys.stdout = old
    with open(js) as f:
        m = json.load(f)
    got = {c: m["overall"]["out_" + c] for c in expected}
    results.append((f"{fs}: output classes", got == expected, f"got {got}, expected {expected}"))
    n = len(truth["files"])
    results.append((f"{fs}: recall", m["overall"]["exact"] == n - 2, f"{m['overall']['exact']}/{n}"))
    rep = m["report"]
    results.append((f"{fs}: byte runs", rep["byte_runs_exact"] == rep["byte_runs_checked"] == n - 2,
                    f"{rep['byte_runs_exact']}/{rep['byte_runs_checked']}"))
    results.append((f"{fs}: no intact fields without --broken", "intact_truth" not in m["overall"], ""))
    check_broken(fs, tmp, img, out, truth, results)


def check_broken(fs, tmp, img, out, truth, results):
    """score.py --broken: a list naming a missed file (0, carved partial) and
    an exact one (3) leaves the others intact; each row counts them apart."""
    files = truth["files"]
    broken = {files[0]["sha256"], files[3]["sha256"]}
    tsv = os.path.join(tmp, f"{fs}-broken.tsv")
    with open(tsv, "w") as f:
        f.write("sha256\ttype\tfile\treason\tevidence\n")
        f.write("".join(f"{h}\t-\t-\tsynthetic\tselftest\n" for h in sorted(broken)))
    js = os.path.join(tmp, f"{fs}-score-broken.json")
    with open(os.devnull, "w") as devnull:
        old, sys.stdout = sys.stdout, devnull
        try:
            score.main([img + ".truth.json", out, "--json", js, "--broken", tsv])
        finally:
            sys.stdout = old
    with open(js) as f:
        m = json.load(f)
    intact = [i for i, t in enumerate(files) if t["sha256"] not in broken]
    want = (len(intact), sum(i >= 2 for i in intact))
    got = (m["overall"]["intact_truth"], m["overall"]["intact_exact"])
    results.append((f"{fs}: intact counts", got == want, f"got {got}, expected {want}"))
    per = sum(r["intact_truth"] for r in m["per_type"].values())
    results.append((f"{fs}: intact per type", per == want[0], f"{per} vs {want[0]}"))
    flags = {x["id"]: x["broken"] for x in m["missed"]}
    ok = flags.get(files[0]["id"]) is True and flags.get(files[1]["id"]) is (files[1]["sha256"] in broken)
    results.append((f"{fs}: missed flagged broken", ok, f"{flags}"))


def main(argv=None):
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fs", default="raw,fat32,ext2,ext4", help="comma-separated file systems (default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder and print its path")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="corpora-selftest-")
    results = []
    try:
        for fs in args.fs.split(","):
            try:
                check_fs(fs, tmp, results)
            except Exception as e:  # report and go on with the next file system
                results.append((f"{fs}: exception", False, repr(e)))
    finally:
        if args.keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    for name, ok, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail if not ok else ''}".rstrip())
    failed = sum(not ok for _, ok, _ in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
