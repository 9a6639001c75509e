#!/usr/bin/env python3
"""Fragmented-file table: planted JPEG, PNG and ZIP-family files by number of
fragments (and order, for two), and how many each tool's output folder holds
byte for byte.

    python3 corpora/fragtab.py IMG.truth.json OUT_DIR [OUT_DIR...]

Prints one Markdown row: `got1 / got2 / ... of planted` per category."""
import hashlib, json, os, sys

FAMILY = {"jpeg", "png", "zip", "docx", "xlsx", "odt", "jar", "pptx", "ods", "odp", "epub", "apk"}


def hashes(folder):
    out = set()
    for root, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            if os.path.isfile(p) and os.path.getsize(p) < (256 << 20):
                h = hashlib.sha256()
                with open(p, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                out.add(h.hexdigest())
    return out


def main():
    truth = json.load(open(sys.argv[1]))
    tools = [hashes(d) for d in sys.argv[2:]]
    cats = {"2 in order": [], "2 out of order": [], "3": [], "4": []}
    for f in truth["files"]:
        if f["type"] not in FAMILY or not f.get("fragmented"):
            continue
        n = len(f["fragments"])
        if n == 2:
            key = "2 in order" if f.get("fragment_order") == "in-order" else "2 out of order"
        else:
            key = str(n)
        if key in cats:
            cats[key].append(f["sha256"])
    cells = []
    for k, shas in cats.items():
        if not shas:
            cells.append("–")
            continue
        got = [sum(s in t for s in shas) for t in tools]
        cells.append(" / ".join(map(str, got)) + f" of {len(shas)}")
    print("| " + os.path.basename(truth.get("image", sys.argv[1])) + " | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
