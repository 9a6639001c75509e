#!/usr/bin/env python3
"""Score a file carver's output folder against an image's ground truth.

Any output folder is scored the same way: every regular file under it is
hashed (report files such as report.jsonl, report.xml, audit.txt and
photorec.log are skipped), so gpucarve, PhotoRec (recup_dir.N/), foremost and
scalpel (per-type folders) are all comparable. When OUTDIR/report.jsonl exists
(gpucarve), its entries add the reported type/status/byte runs, and entries
whose file was not written are scored by their reported sha256.

Each output is classified as
  exact      its sha256 equals a truth file's
  embedded   found inside a truth file or decoy (EXIF thumbnail, JPEG in XLSX)
  decoy      equals a decoy (truncated remnant of old data) or starts with one
  partial    a strict prefix of a truth file
  overlong   a truth file is a strict prefix of it
  unmatched  none of the above
Prefix checks hash each output once, taking the running sha256 at every truth
(and decoy) size below the output's size; truth-file prefixes at the outputs'
sizes are hashed from the image (found next to the truth file, or --image).

Metrics, per type and overall: truth files, recovered exactly (recall),
fragmented truth files and how many were recovered exactly, outputs by class,
precision (exact outputs / outputs not counting embedded ones), decoys hit;
unm_hdr counts unmatched outputs that begin like a truth file (its first 4 KiB):
the right header carved with the wrong content, typically a fragmented file.
With --broken LIST (corpora/wild/BROKEN.tsv: files their suites broke on
purpose, by sha256), each row also gives intact planted / intact exact: the
truth files not in the list, and how many of them were recovered exactly.
Exit status: 0, or 2 on a usage error.
"""

import argparse
import fnmatch
import hashlib
import json
import os
import sys

REPORT_FILES = {"report.jsonl", "report.xml", "audit.txt", "photorec.log", "photorec.ses",
                "scalpel.conf", "foremost.conf", "timing.txt", "journal.jsonl", "run.json", "hashes.txt",
                "case.jsonl", "case.txt"}
EXT_TYPES = {
    "jpg": "jpeg", "jpeg": "jpeg", "jfif": "jpeg", "png": "png", "gif": "gif", "bmp": "bmp",
    "tif": "tiff", "tiff": "tiff", "pdf": "pdf", "zip": "zip", "jar": "zip", "docx": "docx",
    "xlsx": "xlsx", "pptx": "pptx", "odt": "odt", "ods": "ods", "odp": "odp", "sxw": "odt", "sx": "odt",
    "gz": "gzip", "gzip": "gzip", "tgz": "gzip", "sqlite": "sqlite", "sqlite3": "sqlite", "db": "sqlite",
    "wav": "wav", "riff": "wav", "ogg": "ogg", "oga": "ogg", "mp3": "mp3", "flac": "flac",
    "elf": "elf", "so": "elf", "exe": "pe", "dll": "pe", "mp4": "mp4", "mov": "mp4", "avi": "avi",
    "doc": "ole2", "xls": "ole2", "ole": "ole2", "htm": "html", "html": "html", "txt": "text",
}
CLASSES = ["exact", "embedded", "decoy", "partial", "overlong", "unmatched"]


def sha256_bytes(data):
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def guess_type(relpath, reported=None):
    """Carver type of an output: reported type, else extension, else folder name."""
    if reported:
        return reported
    name = os.path.basename(relpath).lower()
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if ext in EXT_TYPES:
        return EXT_TYPES[ext]
    parent = os.path.basename(os.path.dirname(relpath)).lower()
    return EXT_TYPES.get(parent, parent if parent and not parent.startswith("recup") else "other")


def load_truth(path, image=None):
    """Load a truth JSON; return (truth, image path or None)."""
    with open(path) as f:
        truth = json.load(f)
    if image is None:
        cand = os.path.join(os.path.dirname(os.path.abspath(path)), truth.get("image", ""))
        image = cand if truth.get("image") and os.path.exists(cand) else None
    return truth, image


def read_report(outdir):
    """Entries of OUTDIR/report.jsonl (gpucarve) keyed by path; list of path-less ones."""
    path = os.path.join(outdir, "report.jsonl")
    by_path, no_file = {}, []
    if not os.path.exists(path):
        return by_path, no_file
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            e = json.loads(line)
            p = e.get("path")
            if p and os.path.isfile(os.path.join(outdir, p)):
                by_path[os.path.normpath(p)] = e
            else:
                no_file.append(e)
    return by_path, no_file


def norm_runs(runs):
    """Normalise byte runs ({img_offset,len} or [offset,len]) to a list of [offset, len]."""
    out = []
    for r in runs or []:
        if isinstance(r, dict):
            out.append([int(r.get("img_offset", r.get("offset", 0))), int(r.get("len", r.get("length", 0)))])
        else:
            out.append([int(r[0]), int(r[1])])
    merged = []
    for off, ln in out:
        if merged and merged[-1][0] + merged[-1][1] == off:
            merged[-1][1] += ln
        else:
            merged.append([off, ln])
    return merged


def hash_with_prefixes(path, cut_sizes):
    """sha256 of the file and of its prefixes at each size in cut_sizes (< file size).

    Returns (size, full hex digest, {size: hex digest of that prefix})."""
    h = hashlib.sha256()
    prefixes, pos = {}, 0
    cuts = iter(sorted(cut_sizes))
    nxt = next(cuts, None)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            start = 0
            while nxt is not None and pos + len(chunk) >= nxt:
                if nxt > pos:
                    h.update(chunk[start:nxt - pos])
                    start = nxt - pos
                prefixes[nxt] = h.copy().hexdigest()
                nxt = next(cuts, None)
            h.update(chunk[start:])
            pos += len(chunk)
    return pos, h.hexdigest(), {k: v for k, v in prefixes.items() if k < pos}


def collect_outputs(outdir, excludes, include_unwritten=False):
    """All regular output files under outdir (report files excluded), plus
    report-only entries (found but not written) when include_unwritten is set.

    By default only files on disk count, so every tool is scored on what it
    delivers to the examiner."""
    by_path, no_file = read_report(outdir)
    outputs = []
    for root, dirs, files in os.walk(outdir):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            rel = os.path.normpath(os.path.relpath(full, outdir))
            if name in REPORT_FILES or os.path.islink(full) or not os.path.isfile(full):
                continue
            if any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(name, g) for g in excludes):
                continue
            e = by_path.get(rel)
            outputs.append({"path": rel, "full": full, "report": e,
                            "type": guess_type(rel, e.get("type") if e else None)})
    for e in no_file if include_unwritten else []:
        if e.get("sha256"):
            outputs.append({"path": None, "full": None, "report": e, "type": e.get("type") or "other",
                            "size": int(e.get("length") or 0), "sha256": e["sha256"]})
    return outputs


def truth_prefix_table(truth_files, image, sizes):
    """{(size, sha256 of prefix): truth id} for every truth file longer than each size.

    Reads each truth file's bytes from the image through its fragments."""
    table = {}
    if not image:
        return table
    sizes = sorted(sizes)
    with open(image, "rb") as img:
        for t in truth_files:
            wanted = [s for s in sizes if 0 < s < t["size"]]
            if not wanted:
                continue
            h, done, widx = hashlib.sha256(), 0, 0
            for off, ln in t["fragments"]:
                img.seek(off)
                data = img.read(ln)
                start = 0
                while widx < len(wanted) and wanted[widx] <= done + len(data):
                    cut = wanted[widx] - done
                    h.update(data[start:cut])
                    start = cut
                    table.setdefault((wanted[widx], h.copy().hexdigest()), t["id"])
                    widx += 1
                h.update(data[start:])
                done += len(data)
    return table


def classify(outputs, truth, image):
    """Set out['class'] and out['match'] for every output."""
    files = truth["files"]
    by_sha = {t["sha256"]: t for t in files}
    decoys = [d for d in truth.get("decoys", []) if d.get("intact", True)]
    decoy_sha = {d["sha256"]: d for d in decoys}
    emb_sha = {e["sha256"]: e for e in truth.get("embedded", [])}
    by_size_sha = {(t["size"], t["sha256"]): t for t in files}
    decoy_size_sha = {(d["length"], d["sha256"]): d for d in decoys}
    cut_sizes = {t["size"] for t in files} | {d["length"] for d in decoys}
    for o in outputs:
        if o["full"] is not None:
            o["size"], o["sha256"], o["prefixes"] = hash_with_prefixes(o["full"], cut_sizes)
        else:
            o["prefixes"] = {}
    partial_tab = truth_prefix_table(files, image, {o["size"] for o in outputs if o["full"]})
    for o in outputs:
        sha, size = o["sha256"], o["size"]
        o["class"], o["match"] = "unmatched", None
        if sha in by_sha:
            o["class"], o["match"] = "exact", by_sha[sha]["id"]
        elif sha in emb_sha:
            o["class"], o["match"] = "embedded", emb_sha[sha]["parent"]
        elif sha in decoy_sha:
            o["class"], o["match"] = "decoy", decoy_sha[sha]["name"]
        elif (size, sha) in partial_tab:
            o["class"], o["match"] = "partial", partial_tab[(size, sha)]
        else:
            over = [by_size_sha[(s, h)]["id"] for s, h in o["prefixes"].items() if (s, h) in by_size_sha]
            dec = [decoy_size_sha[(s, h)]["name"] for s, h in o["prefixes"].items() if (s, h) in decoy_size_sha]
            if over:
                o["class"], o["match"] = "overlong", over[-1]
            elif dec:
                o["class"], o["match"] = "decoy", dec[-1]
    refine_unmatched(outputs, files, decoys, image)
    for o in outputs:
        if o["match"] is not None and o["class"] in ("exact", "partial", "overlong"):
            o["type"] = next(t["type"] for t in files if t["id"] == o["match"])


def refine_unmatched(outputs, files, decoys, image, max_size=64 << 20):
    """Look inside truth files and decoys for outputs still unmatched.

    An output found at a non-zero offset inside a truth file or decoy is
    'embedded' (a JPEG inside an XLSX, a thumbnail); an unmatched output that
    begins with a truth file's first 4 KiB (or its first fragment if smaller) gets
    o['starts_like'] = that truth id: right header, wrong content or length."""
    todo = [o for o in outputs if o["class"] == "unmatched" and o["full"] and 0 < o["size"] <= max_size]
    for o in outputs:
        o["starts_like"] = None
    if not todo or not image:
        return
    contents = []
    with open(image, "rb") as img:
        for t in files:
            parts = []
            for off, ln in t["fragments"]:
                img.seek(off)
                parts.append(img.read(ln))
            contents.append((f"file:{t['id']}", t["id"], b"".join(parts)))
        for d in decoys:
            img.seek(d["offset"])
            contents.append((d["name"], None, img.read(d["length"])))
    first_frag = [t["fragments"][0][1] for t in files] + [d["length"] for d in decoys]
    for o in todo:
        with open(o["full"], "rb") as f:
            data = f.read()
        for label, tid, content in contents:
            if len(data) < len(content):
                idx = content.find(data, 1)
                if idx > 0:
                    o["class"], o["match"] = "embedded", f"{label}@{idx}"
                    break
        if o["class"] == "unmatched":
            for (label, tid, content), first in zip(contents, first_frag):
                k = min(4096, len(content), first)
                if tid is not None and len(data) >= k and data[:k] == content[:k]:
                    o["starts_like"] = tid
                    break


def load_broken(path):
    """sha256 set of a BROKEN.tsv (header row; sha256 in its first column)."""
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    if not rows or rows[0][0] != "sha256":
        raise ValueError(f"{path}: no 'sha256' header column")
    return {r[0].strip().lower() for r in rows[1:] if r[0].strip()}


def compute_metrics(truth, outputs, types=None, broken=None):
    """Per-type and overall metrics as a dict; with broken (a sha256 set),
    each row also counts intact_truth / intact_exact (truth files not broken)."""
    files = truth["files"]
    found = {}
    for o in outputs:
        if o["class"] == "exact":
            found.setdefault(o["match"], []).append(o)
    all_types = sorted({t["type"] for t in files} | {o["type"] for o in outputs})

    def row(sel_files, sel_outputs):
        r = {"truth": len(sel_files), "exact": sum(t["id"] in found for t in sel_files),
             "fragmented": sum(t["fragmented"] for t in sel_files),
             "fragmented_exact": sum(t["fragmented"] and t["id"] in found for t in sel_files),
             "outputs": len(sel_outputs)}
        for c in CLASSES:
            r["out_" + c] = sum(o["class"] == c for o in sel_outputs)
        seen, dups = set(), 0
        for o in sel_outputs:
            if o["class"] == "exact":
                dups += o["match"] in seen
                seen.add(o["match"])
        r["out_duplicate"] = dups
        r["out_unmatched_hdr"] = sum(o["class"] == "unmatched" and o.get("starts_like") is not None
                                     for o in sel_outputs)
        r["recall"] = round(r["exact"] / r["truth"], 4) if r["truth"] else None
        if broken is not None:
            intact = [t for t in sel_files if t["sha256"] not in broken]
            r["intact_truth"] = len(intact)
            r["intact_exact"] = sum(t["id"] in found for t in intact)
            r["intact_recall"] = round(r["intact_exact"] / len(intact), 4) if intact else None
        denom = r["outputs"] - r["out_embedded"]
        r["precision"] = round(r["out_exact"] / denom, 4) if denom else None
        return r

    per_type = {ty: row([t for t in files if t["type"] == ty], [o for o in outputs if o["type"] == ty])
                for ty in all_types}
    result = {"per_type": per_type, "overall": row(files, outputs)}
    if types:
        result["selected_types"] = sorted(types)
        result["selected"] = row([t for t in files if t["type"] in types],
                                 [o for o in outputs if o["type"] in types])
    by_status = {}
    for st in sorted({t["status"] for t in files}):
        sel = [t for t in files if t["status"] == st and (not types or t["type"] in types)]
        by_status[st] = {"truth": len(sel), "exact": sum(t["id"] in found for t in sel)}
    result["by_status"] = by_status
    order = {}
    for t in files:
        if t["fragmented"] and (not types or t["type"] in types):
            k = t.get("fragment_order") or "in-order"
            order.setdefault(k, {"truth": 0, "exact": 0})
            order[k]["truth"] += 1
            order[k]["exact"] += t["id"] in found
    result["fragmented_by_order"] = order
    decoys = [d for d in truth.get("decoys", []) if d.get("intact", True)]
    hit = {o["match"] for o in outputs if o["class"] == "decoy"}
    result["decoys"] = {"intact": len(decoys), "hit": len(hit), "outputs": sum(o["class"] == "decoy" for o in outputs)}
    result["missed"] = [{"id": t["id"], "name": t["name"], "type": t["type"], "status": t["status"],
                         "fragmented": t["fragmented"]} for t in files
                        if t["id"] not in found and (not types or t["type"] in types)]
    if broken is not None:
        for m, t in zip(result["missed"], [t for t in files if t["id"] not in found
                                           and (not types or t["type"] in types)]):
            m["broken"] = t["sha256"] in broken
    result["report"] = report_checks(truth, outputs)
    return result


def report_checks(truth, outputs):
    """Checks possible only with a report.jsonl: reported status vs truth, byte runs."""
    rep = [o for o in outputs if o["report"]]
    if not rep:
        return None
    frags = {t["id"]: t["fragments"] for t in truth["files"]}
    by_status = {}
    runs_ok = runs_checked = 0
    for o in rep:
        st = o["report"].get("status", "?")
        d = by_status.setdefault(st, {c: 0 for c in CLASSES})
        d[o["class"]] += 1
        if o["class"] == "exact" and o["report"].get("byte_runs"):
            runs_checked += 1
            runs_ok += norm_runs(o["report"]["byte_runs"]) == frags[o["match"]]
    return {"entries": len(rep), "by_reported_status": by_status,
            "byte_runs_checked": runs_checked, "byte_runs_exact": runs_ok}


def fmt_pct(x):
    """Format a ratio as a percentage, '-' when undefined."""
    return "-" if x is None else f"{100 * x:.0f}%"


def print_table(m, title, out=None):
    """Print the metrics as a fixed-width table (to out, default stdout)."""
    out = out or sys.stdout
    cols = ["truth", "exact", "recall", "frag", "frag_ok", "outputs", "o_exact", "dup",
            "partial", "overlong", "decoy", "embedded", "unmatched", "unm_hdr", "precision"]
    with_intact = "intact_truth" in m["overall"]
    if with_intact:
        cols += ["intact", "int_exact", "int_rec"]
    print(title, file=out)
    print(f"{'type':<9}" + "".join(f"{c:>10}" for c in cols), file=out)

    def line(name, r):
        vals = [r["truth"], r["exact"], fmt_pct(r["recall"]), r["fragmented"], r["fragmented_exact"],
                r["outputs"], r["out_exact"], r["out_duplicate"], r["out_partial"], r["out_overlong"],
                r["out_decoy"], r["out_embedded"], r["out_unmatched"], r["out_unmatched_hdr"],
                fmt_pct(r["precision"])]
        if with_intact:
            vals += [r["intact_truth"], r["intact_exact"], fmt_pct(r["intact_recall"])]
        print(f"{name:<9}" + "".join(f"{v:>10}" for v in vals), file=out)

    for ty, r in m["per_type"].items():
        line(ty, r)
    if "selected" in m:
        line("SELECTED", m["selected"])
    line("ALL", m["overall"])
    st = ", ".join(f"{k} {v['exact']}/{v['truth']}" for k, v in m["by_status"].items())
    fo = ", ".join(f"{k} {v['exact']}/{v['truth']}" for k, v in m["fragmented_by_order"].items())
    scope = " (selected types)" if "selected" in m else ""
    print(f"recovered by status{scope}: {st}; fragmented by order: {fo or 'none'}; "
          f"decoys hit: {m['decoys']['hit']}/{m['decoys']['intact']} ({m['decoys']['outputs']} outputs)", file=out)
    if m.get("report"):
        r = m["report"]
        parts = ", ".join(f"{s}: " + " ".join(f"{c}={n}" for c, n in d.items() if n)
                          for s, d in sorted(r["by_reported_status"].items()))
        print(f"report.jsonl: {r['entries']} entries; by reported status: {parts}; "
              f"byte runs exact {r['byte_runs_exact']}/{r['byte_runs_checked']}", file=out)


def main(argv=None):
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Example: corpora/score.py img.truth.json out/ --types jpeg,png --json s.json")
    ap.add_argument("truth", help="IMAGE.truth.json written by mkimage.py")
    ap.add_argument("outdir", help="carver output folder")
    ap.add_argument("--image", help="image file (default: next to the truth file); used for 'partial'")
    ap.add_argument("--types", help="comma-separated truth types the tool was asked to carve (adds a SELECTED row)")
    ap.add_argument("--tool", default=None, help="name shown in the title")
    ap.add_argument("--seconds", type=float, default=None, help="run time to show in the title and JSON")
    ap.add_argument("--exclude", action="append", default=[], help="glob of output files to ignore (repeatable)")
    ap.add_argument("--report-entries", action="store_true",
                    help="also score gpucarve report.jsonl entries whose file was not written")
    ap.add_argument("--json", help="write full results (metrics, every output's class) to this file")
    ap.add_argument("--broken", help="TSV of files broken on purpose (corpora/wild/BROKEN.tsv, by sha256): "
                                     "adds intact planted / intact exact per type")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.truth):
        ap.error(f"no such truth file: {args.truth}")
    if not os.path.isdir(args.outdir):
        ap.error(f"no such output folder: {args.outdir}")
    if args.image and not os.path.isfile(args.image):
        ap.error(f"no such image: {args.image}")
    try:
        truth, image = load_truth(args.truth, args.image)
    except (OSError, ValueError, KeyError) as e:
        ap.error(f"cannot read truth: {e}")
    if args.broken and not os.path.isfile(args.broken):
        ap.error(f"no such broken list: {args.broken}")
    try:
        broken = load_broken(args.broken) if args.broken else None
    except (OSError, ValueError) as e:
        ap.error(f"cannot read broken list: {e}")
    types = set(args.types.split(",")) if args.types else None
    outputs = collect_outputs(args.outdir, args.exclude, args.report_entries)
    classify(outputs, truth, image)
    m = compute_metrics(truth, outputs, types, broken)
    nbytes = sum(o["size"] for o in outputs)
    title = (f"== {args.tool or os.path.basename(os.path.normpath(args.outdir))} on {truth.get('image')} "
             f"({truth.get('fs')}, seed {truth.get('seed')}): {len(outputs)} outputs, {nbytes} bytes"
             + (f", {args.seconds:.2f} s" if args.seconds is not None else "")
             + ("" if image else "; image not found: 'partial' not detected"))
    print_table(m, title)
    if args.json:
        m["tool"], m["seconds"], m["truth_file"], m["outdir"] = args.tool, args.seconds, args.truth, args.outdir
        m["outputs_detail"] = [{"path": o["path"], "size": o["size"], "sha256": o["sha256"], "type": o["type"],
                                "class": o["class"], "match": o["match"], "starts_like": o.get("starts_like"),
                                "reported_status": (o["report"] or {}).get("status")} for o in outputs]
        with open(args.json, "w") as f:
            json.dump(m, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
