#!/usr/bin/env python3
"""Build a drive image with ground truth for evaluating file carvers.

The image is built deterministically from --seed (same seed, size and options:
same bytes, same sha256):

1. "Previous content" fills the whole image: random bytes, zlib-compressed
   text, plain text, zero runs, slices of executables, and truncated remnants
   of real sample files ("decoys": a JPEG/PNG/ZIP/... cut part-way; these are
   listed in the truth as decoys, never as recoverable files).
2. A file system is created on top (fat32 with mkfs.vfat + mtools, ext2/ext4
   with mke2fs -d + debugfs, ntfs with mkntfs + ntfscp; nothing is mounted),
   or none (raw). NTFS images are not byte-for-byte reproducible (mkntfs and
   ntfscp stamp the current time and a random serial number); their files,
   placement and truth are.
3. Sample files (corpora/samples, see MANIFEST.tsv) are copied in: originals,
   then modified copies (a well-formed change such as a JPEG comment segment,
   a PNG tEXt chunk, a ZIP archive comment, so that hashes differ).
4. Some files are deleted (status "deleted": data intact, metadata gone).
5. Some files are written straight into unallocated space with no file-system
   metadata (status "unallocated"), contiguous or in 2-3 fragments placed in
   order or out of order. In raw mode every file is placed this way.
6. Every file's byte ranges come from the file system itself (FAT chain walk,
   debugfs stat) or from the placement; every range list is read back from the
   finished image and its sha256 compared; any mismatch aborts.

Output: IMAGE and IMAGE.truth.json (see corpora/README.md for the format).
Tools: mkfs.vfat (dosfstools), mmd/mcopy/mdel (mtools), mke2fs/debugfs/
dumpe2fs (e2fsprogs), mkntfs/ntfscp/ntfsinfo (ntfs-3g); fsck.vfat / e2fsck
are run read-only as a sanity check.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import random
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
# Files smaller than this may stay resident in a 1 KiB NTFS MFT record.
NTFS_RESIDENT = 1024
FIXED_EPOCH = 1600000000  # 2020-09-13T12:26:40Z, used for every FS timestamp
FIXED_UUID = "6770752d-6361-7276-652d-636f72706f72"  # "gpu-carve-corpor"
TYPE_DIRS = {
    "jpeg": "DCIM", "png": "Pictures", "gif": "Pictures", "bmp": "Pictures", "tiff": "Pictures",
    "pdf": "Documents", "docx": "Documents", "xlsx": "Documents", "odt": "Documents",
    "wav": "Music", "ogg": "Music", "mp3": "Music", "flac": "Music",
    "zip": "Downloads", "gzip": "Downloads", "sqlite": "Downloads", "elf": "Downloads",
}


class BuildError(Exception):
    """Raised when the image cannot be built or its truth does not verify."""


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------

def parse_size(text):
    """Parse '64MiB', '64M', '1GiB', '512KiB', '1000000' into bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B?)\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size: {text!r}")
    n, unit, suffix = int(m.group(1)), m.group(2).upper(), m.group(3)
    base = 1000 if suffix.upper() == "B" and unit else 1024
    return n * base ** " KMGT".index(unit or " ")


def sha256(data):
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def run(cmd, env_extra=None, input_text=None):
    """Run a command, raise BuildError with its stderr on failure, return stdout."""
    env = dict(os.environ, LC_ALL="C", TZ="UTC", SOURCE_DATE_EPOCH=str(FIXED_EPOCH),
               E2FSPROGS_FAKE_TIME=str(FIXED_EPOCH), MTOOLS_SKIP_CHECK="1")
    if env_extra:
        env.update(env_extra)
    p = subprocess.run(cmd, env=env, input=input_text, capture_output=True, text=True)
    if p.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[:2000]}")
    return p.stdout


def merge_ranges(ranges):
    """Merge physically adjacent [offset, length] ranges, keeping file order."""
    out = []
    for off, ln in ranges:
        if out and out[-1][0] + out[-1][1] == off:
            out[-1][1] += ln
        else:
            out.append([off, ln])
    return out


def read_ranges(f, ranges):
    """Read and concatenate the given [offset, length] ranges from an open file."""
    parts = []
    for off, ln in ranges:
        f.seek(off)
        parts.append(f.read(ln))
    return b"".join(parts)


# ---------------------------------------------------------------------------
# samples and well-formed modifications
# ---------------------------------------------------------------------------

def load_samples(folders):
    """Read each folder's MANIFEST.tsv; return a list of dicts with name,
    type, data. A file whose bytes another folder already gave is left out
    (one plant per sha256); a name already taken gets a numbered suffix."""
    samples, seen, names = [], set(), set()
    for folder in folders:
        path = os.path.join(folder, "MANIFEST.tsv")
        if not os.path.exists(path):
            raise BuildError(f"no MANIFEST.tsv in {folder}")
        with open(path) as f:
            header = f.readline().rstrip("\n").split("\t")
            for line in f:
                row = dict(zip(header, line.rstrip("\n").split("\t")))
                with open(os.path.join(folder, row["file"]), "rb") as g:
                    data = g.read()
                digest = sha256(data)
                if digest != row["sha256"]:
                    raise BuildError(f"sample {row['file']} does not match MANIFEST.tsv")
                if digest in seen:
                    continue
                seen.add(digest)
                name, n = row["file"], 1
                while name in names:
                    n += 1
                    stem, ext = os.path.splitext(row["file"])
                    name = f"{stem}-{n}{ext}"
                names.add(name)
                samples.append({"name": name, "type": row["type"], "data": data})
    return samples


WORDS = ("the of and to in is was for on that with as by at from this be are or an "
         "data file disk block cluster sector image photo report invoice meeting project "
         "budget forensic recovery carver signature header footer offset length index "
         "table record value system user account password network server client request "
         "response error warning info debug kernel module driver device memory buffer "
         "stream packet session token config option default release version update patch "
         "january february march april may june july august september october november "
         "december monday tuesday wednesday thursday friday alpha beta gamma delta").split()


def random_text(rng, nbytes):
    """Plausible ASCII text (prose, log lines, CSV rows) of about nbytes."""
    lines, total = [], 0
    while total < nbytes:
        kind = rng.random()
        if kind < 0.5:
            line = " ".join(rng.choices(WORDS, k=rng.randint(6, 18))).capitalize() + "."
        elif kind < 0.8:
            line = "2020-%02d-%02d %02d:%02d:%02d %s %s: %s" % (
                rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59),
                rng.randint(0, 59), rng.choice(["INFO", "WARN", "ERROR", "DEBUG"]),
                rng.choice(WORDS), " ".join(rng.choices(WORDS, k=rng.randint(3, 9))))
        else:
            line = ",".join(str(rng.randint(0, 99999)) if rng.random() < 0.5 else rng.choice(WORDS)
                            for _ in range(rng.randint(3, 8)))
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()[:nbytes]


def _ascii(rng, n):
    """n random printable ASCII bytes (words)."""
    return random_text(rng, n).replace(b"\n", b" ")


def _flip(data, pos, rng):
    """Return data with the byte at pos changed (XOR with a non-zero value)."""
    b = bytearray(data)
    b[pos] ^= rng.randint(1, 255)
    return bytes(b)


def mutate_jpeg(data, rng):
    """Insert a COM segment after the first APPn segment (SOI/APPn stay first)."""
    pos = 2
    if data[2] == 0xFF and 0xE0 <= data[3] <= 0xEF:
        pos = 4 + struct.unpack(">H", data[4:6])[0]
    text = _ascii(rng, rng.randint(16, 96))
    return data[:pos] + b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text + data[pos:]


def mutate_png(data, rng):
    """Insert a tEXt chunk right after IHDR."""
    body = b"tEXt" + b"Comment\x00" + _ascii(rng, rng.randint(16, 96))
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
    return data[:33] + chunk + data[33:]


def mutate_gif(data, rng):
    """Insert a comment extension after the header and global colour table."""
    flags = data[10]
    pos = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
    text = _ascii(rng, rng.randint(16, 96))
    return data[:pos] + b"\x21\xfe" + bytes([len(text)]) + text + b"\x00" + data[pos:]


def mutate_zip(data, rng):
    """Add an archive comment to the end-of-central-directory record."""
    if data[-22:-18] != b"PK\x05\x06":
        return None
    text = _ascii(rng, rng.randint(16, 96))
    return data[:-2] + struct.pack("<H", len(text)) + text


def mutate_pdf(data, rng):
    """Change the binary marker comment on line 2 (same length), else a date digit."""
    nl = data.index(b"\n") + 1
    end = data.index(b"\n", nl)
    line = data[nl:end]
    if line.startswith(b"%") and sum(c >= 0x80 for c in line) >= 4:
        new = b"%" + bytes(rng.randint(0x80, 0xFF) for _ in line[1:])
        return data[:nl] + new + data[end:]
    m = re.search(rb"/CreationDate\s*\(D:(\d{14})", data)
    if m:
        s = m.start(1) + 12  # seconds
        return data[:s] + b"%02d" % rng.randint(0, 59) + data[s + 2:]
    return None


def mutate_gzip(data, rng):
    """Set a different MTIME in the gzip header."""
    return data[:4] + struct.pack("<I", rng.randint(1, 2**31)) + data[8:]


def mutate_sqlite(data, rng):
    """Set the database header's user_version field (offset 60)."""
    return data[:60] + struct.pack(">I", rng.randint(1, 2**31)) + data[64:]


def mutate_flac(data, rng):
    """Replace the STREAMINFO MD5 signature (not checked when carving)."""
    if data[:4] != b"fLaC" or data[4] & 0x7F != 0:
        return None
    return data[:26] + rng.randbytes(16) + data[42:]


def _ogg_crc(page):
    """Ogg page CRC-32 (poly 0x04C11DB7, not reflected, init 0), CRC field zeroed."""
    crc = 0
    for byte in page:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if crc & 0x80000000 else (crc << 1) & 0xFFFFFFFF
    return crc


def mutate_ogg(data, rng):
    """Change one audio byte in a page near the middle and fix that page's CRC."""
    pages, pos = [], 0
    while pos + 27 <= len(data) and data[pos:pos + 4] == b"OggS":
        nseg = data[pos + 26]
        body = sum(data[pos + 27:pos + 27 + nseg])
        pages.append((pos, 27 + nseg, body))
        pos += 27 + nseg + body
    cands = [p for p in pages[3:] if p[2] > 8]
    if not cands:
        return None
    start, hlen, blen = cands[len(cands) // 2]
    b = bytearray(data)
    b[start + hlen + rng.randrange(blen)] ^= rng.randint(1, 255)
    page = bytearray(b[start:start + hlen + blen])
    page[22:26] = b"\0\0\0\0"
    b[start + 22:start + 26] = struct.pack("<I", _ogg_crc(page))
    return bytes(b)


def mutate_mp3(data, rng):
    """Swap the case of a few letters inside the ID3v2 tag's text."""
    if data[:3] != b"ID3":
        return None
    size = 0
    for c in data[6:10]:
        size = (size << 7) | (c & 0x7F)
    letters = [i for i in range(10, 10 + size) if 0x61 <= data[i] <= 0x7A]
    if not letters:
        return None
    b = bytearray(data)
    for i in rng.sample(letters, min(6, len(letters))):
        b[i] ^= 0x20
    return bytes(b)


def mutate_wav(data, rng):
    """Change one sample byte inside the 'data' chunk."""
    i = data.find(b"data", 12)
    if i < 0:
        return None
    n = struct.unpack("<I", data[i + 4:i + 8])[0]
    return _flip(data, i + 8 + n // 4 + rng.randrange(max(1, n // 2)), rng)


def mutate_bmp(data, rng):
    """Change one pixel byte."""
    off = struct.unpack("<I", data[10:14])[0]
    return _flip(data, off + (len(data) - off) // 4 + rng.randrange(max(1, (len(data) - off) // 2)), rng)


def mutate_tiff(data, rng):
    """Change one byte inside the first image strip."""
    e = "<" if data[:2] == b"II" else ">"
    ifd = struct.unpack(e + "I", data[4:8])[0]
    n = struct.unpack(e + "H", data[ifd:ifd + 2])[0]
    vals = {}
    for k in range(n):
        tag, typ, cnt = struct.unpack(e + "HHI", data[ifd + 2 + 12 * k:ifd + 10 + 12 * k])
        raw = data[ifd + 10 + 12 * k:ifd + 14 + 12 * k]
        fmt = "H" if typ == 3 else "I"
        width = 2 if typ == 3 else 4
        if cnt * width > 4:
            off = struct.unpack(e + "I", raw)[0]
            raw = data[off:off + width]
        vals[tag] = struct.unpack(e + fmt, raw[:width])[0]
    if 273 not in vals or 279 not in vals or vals[279] < 4:
        return None
    start, cnt = vals[273], vals[279]
    return _flip(data, start + cnt // 4 + rng.randrange(max(1, cnt // 2)), rng)


def mutate_elf(data, rng):
    """Change one byte in the first half of the body (code/data, not headers)."""
    return _flip(data, len(data) // 4 + rng.randrange(len(data) // 4), rng)


MUTATORS = {
    "jpeg": mutate_jpeg, "png": mutate_png, "gif": mutate_gif, "zip": mutate_zip,
    "docx": mutate_zip, "xlsx": mutate_zip, "odt": mutate_zip, "pdf": mutate_pdf,
    "gzip": mutate_gzip, "sqlite": mutate_sqlite, "flac": mutate_flac, "ogg": mutate_ogg,
    "mp3": mutate_mp3, "wav": mutate_wav, "bmp": mutate_bmp, "tiff": mutate_tiff, "elf": mutate_elf,
}


def jpeg_thumbnails(data):
    """Return (offset, length) of JPEG thumbnails embedded in APP1/Exif segments.

    Walks the APPn/COM segments after SOI; a thumbnail runs from the first SOI
    inside an Exif segment to the last EOI inside it."""
    out, pos = [], 2
    while pos + 4 <= len(data) and data[pos] == 0xFF and (0xE0 <= data[pos + 1] <= 0xEF or data[pos + 1] == 0xFE):
        seglen = struct.unpack(">H", data[pos + 2:pos + 4])[0]
        seg_end = min(len(data), pos + 2 + seglen)
        if data[pos + 1] == 0xE1 and data[pos + 4:pos + 10] == b"Exif\0\0":
            s = data.find(b"\xff\xd8\xff", pos + 10, seg_end)
            e = data.rfind(b"\xff\xd9", s, seg_end) if s >= 0 else -1
            if s >= 0 and e > s:
                out.append((s, e + 2 - s))
        pos = seg_end
    return out


# ---------------------------------------------------------------------------
# previous content
# ---------------------------------------------------------------------------

def fill_previous_content(img, rng, samples, n_decoys, align):
    """Fill bytearray img with old data; return (segments, decoys).

    Segments are aligned to 512 bytes; decoys (truncated sample files) to
    `align`. Decoys are spread evenly over the image (one per slot)."""
    size = len(img)
    text_pool = random_text(rng, 256 * 1024)
    zlib_pool = []  # zlib streams of text slices, reused (compressing per segment is slow)
    for _ in range(64):
        o = rng.randrange(len(text_pool) - 65536)
        zlib_pool.append(zlib.compress(text_pool[o:o + rng.randint(4096, 65536)], rng.choice([1, 6, 9])))
    elves = [s["data"] for s in samples if s["type"] == "elf"]
    decoy_srcs = [s for s in samples if len(s["data"]) >= 4096]
    slot = size // (n_decoys + 1) if n_decoys else size + 1
    decoy_at = [slot * (i + 1) // align * align for i in range(n_decoys)]
    segments, decoys, pos = [], [], 0
    while pos < size:
        if decoy_at and pos >= decoy_at[0]:
            decoy_at.pop(0)
            pos = (pos + align - 1) // align * align
            src = rng.choice(decoy_srcs)
            cut = int(len(src["data"]) * rng.uniform(0.3, 0.7))
            cut = min(cut, size - pos)
            if cut <= 0:
                break
            img[pos:pos + cut] = src["data"][:cut]
            decoys.append({"name": f"decoy-{len(decoys) + 1:03d}-{src['name']}", "type": src["type"],
                           "sample": src["name"], "offset": pos, "length": cut,
                           "sample_size": len(src["data"]), "sha256": sha256(src["data"][:cut])})
            segments.append(["decoy", pos, cut])
            pos += cut
            continue
        n = min(size - pos, rng.randrange(1, 257) * 512)
        kind = rng.choices(["random", "zlib", "text", "zero", "binary"], [30, 20, 20, 20, 10])[0]
        if kind == "random":
            chunk = rng.randbytes(n)
        elif kind == "zero":
            chunk = bytes(n)
        elif kind == "text":
            o = rng.randrange(len(text_pool) - 4096)
            chunk = (text_pool[o:] + text_pool[:o]) * (n // len(text_pool) + 1)
        elif kind == "zlib":
            parts, total = [], 0
            while total < n:
                c = rng.choice(zlib_pool)
                parts.append(c)
                total += len(c)
            chunk = b"".join(parts)
        else:  # slices from the middle of executables, never their headers
            src = rng.choice(elves) if elves else rng.randbytes(n)
            o = rng.randrange(1024, max(1025, len(src) - 1024))
            chunk = (src[o:] + src[1024:o]) * (n // len(src) + 1)
        img[pos:pos + n] = chunk[:n]
        segments.append([kind, pos, n])
        pos += n
    return segments, decoys


# ---------------------------------------------------------------------------
# free space allocation for raw placement
# ---------------------------------------------------------------------------

class FreeSpace:
    """Runs of free allocation units (clusters/blocks), with random allocation."""

    def __init__(self, base, unit, runs):
        """base: byte offset of unit 0; unit: bytes per unit; runs: [(start, count)]."""
        self.base, self.unit = base, unit
        self.runs = sorted((s, c) for s, c in runs if c > 0)

    def exclude(self, offset, length):
        """Remove every unit that overlaps the byte range [offset, offset+length)."""
        lo = (offset - self.base) // self.unit
        hi = (offset + length - 1 - self.base) // self.unit + 1
        out = []
        for s, c in self.runs:
            e = s + c
            if e <= lo or s >= hi:
                out.append((s, c))
                continue
            if s < lo:
                out.append((s, lo - s))
            if e > hi:
                out.append((hi, e - hi))
        self.runs = out

    def allocate(self, n, rng, guard=1, lo=None, hi=None):
        """Take n units at a random place, leaving `guard` free units either side.

        lo/hi (byte offsets) optionally bound where the units may lie.
        Returns the byte offset, or None when no run is large enough."""
        need = n + 2 * guard
        ulo = None if lo is None else -(-(lo - self.base) // self.unit)
        uhi = None if hi is None else (hi - self.base) // self.unit
        fits = []
        for s, c in self.runs:
            a = s if ulo is None else max(s, ulo)
            b = s + c if uhi is None else min(s + c, uhi)
            if b - a >= need:
                fits.append((s, c, a, b))
        if not fits:
            return None
        weights = [b - a - need + 1 for s, c, a, b in fits]
        s, c, a, b = rng.choices(fits, weights)[0]
        start = a + guard + rng.randrange(b - a - need + 1)
        self.runs.remove((s, c))
        if start > s:
            self.runs.append((s, start - s))
        if s + c > start + n:
            self.runs.append((start + n, s + c - start - n))
        self.runs.sort()
        return self.base + start * self.unit


def place_unallocated(imgf, plant, space, rng, nfrag):
    """Write plant's data into free space in nfrag pieces; set its fragments.

    Pieces are cut at unit boundaries and share one free region with 1-64
    units of old data between them, laid out in file order ("in-order") or
    shuffled ("out-of-order"), about half each. Without such a region each
    piece goes wherever there is room."""
    data, unit = plant["data"], space.unit
    units = (len(data) + unit - 1) // unit
    nfrag = max(1, min(nfrag, units))
    cuts = sorted(rng.sample(range(1, units), nfrag - 1)) if nfrag > 1 else []
    bounds = [0] + [c * unit for c in cuts] + [len(data)]
    pieces = [(bounds[i], bounds[i + 1]) for i in range(nfrag)]
    sizes = [(b - a + unit - 1) // unit for a, b in pieces]
    offsets = [None] * nfrag
    if nfrag > 1:
        # One region holding every piece with gaps of old data between them,
        # pieces laid out in file order or in a shuffled order.
        perm = list(range(nfrag))
        if rng.random() >= 0.5:
            while perm == sorted(perm):
                rng.shuffle(perm)
        gaps = [rng.randint(1, 64) for _ in range(nfrag - 1)]
        region = space.allocate(sum(sizes) + sum(gaps), rng)
        if region is not None:
            pos = region
            for k, idx in enumerate(perm):
                offsets[idx] = pos
                pos += sizes[idx] * unit + (gaps[k] * unit if k < nfrag - 1 else 0)
    for i, n in enumerate(sizes):
        if offsets[i] is None:
            offsets[i] = space.allocate(n, rng)
            if offsets[i] is None:
                raise BuildError(f"no free space left for {plant['name']}")
    frags = []
    for (a, b), off in zip(pieces, offsets):
        imgf.seek(off)
        imgf.write(data[a:b])
        frags.append([off, b - a])
    plant["fragments"] = merge_ranges(frags)


# ---------------------------------------------------------------------------
# FAT32
# ---------------------------------------------------------------------------

class Fat32:
    """Minimal read-only FAT32 parser: boot sector, FAT, directories, chains."""

    def __init__(self, path):
        """Parse the boot sector and load the first FAT of the image at path."""
        with open(path, "rb") as f:
            bs = f.read(512)
            self.bps = struct.unpack_from("<H", bs, 11)[0]
            self.spc = bs[13]
            rsvd = struct.unpack_from("<H", bs, 14)[0]
            nfats = bs[16]
            tot = struct.unpack_from("<H", bs, 19)[0] or struct.unpack_from("<I", bs, 32)[0]
            fatsz = struct.unpack_from("<I", bs, 36)[0]
            self.root = struct.unpack_from("<I", bs, 44)[0]
            if bs[510:512] != b"\x55\xaa" or bs[82:87] != b"FAT32":
                raise BuildError("not a FAT32 boot sector")
            self.cluster_size = self.bps * self.spc
            self.data_start = (rsvd + nfats * fatsz) * self.bps
            self.nclusters = (tot * self.bps - self.data_start) // self.cluster_size
            self.nfats, self.fat_start, self.fat_bytes = nfats, rsvd * self.bps, fatsz * self.bps
            f.seek(rsvd * self.bps)
            raw = f.read(fatsz * self.bps)
            self.fat = [v & 0x0FFFFFFF for v in struct.unpack(f"<{len(raw) // 4}I", raw)]
            self.path = path

    def offset(self, cluster):
        """Byte offset of a data cluster."""
        return self.data_start + (cluster - 2) * self.cluster_size

    def chain(self, start):
        """Cluster numbers of the chain starting at start."""
        out, c = [], start
        while 2 <= c < 0x0FFFFFF8 and len(out) <= self.nclusters:
            out.append(c)
            c = self.fat[c]
        return out

    def files(self):
        """Map 'DIR/NAME' -> (first cluster, size) for every live regular file."""
        result = {}
        with open(self.path, "rb") as f:
            self._walk(f, self.root, "", result)
        return result

    def _walk(self, f, cluster, prefix, result):
        """Recursive directory walk (long file names supported)."""
        data = read_ranges(f, [[self.offset(c), self.cluster_size] for c in self.chain(cluster)])
        lfn = {}
        for i in range(0, len(data), 32):
            e = data[i:i + 32]
            if e[0] == 0:
                break
            if e[0] == 0xE5:
                lfn = {}
                continue
            if e[11] == 0x0F:
                seq = e[0] & 0x1F
                lfn[seq] = (e[1:11] + e[14:26] + e[28:32]).decode("utf-16-le", "replace")
                continue
            if e[11] & 0x08:  # volume label
                lfn = {}
                continue
            if lfn:
                name = "".join(lfn[k] for k in sorted(lfn)).split("\x00")[0]
            else:
                base, ext = e[0:8].decode("latin-1").rstrip(), e[8:11].decode("latin-1").rstrip()
                if e[12] & 0x08:  # Windows NT / VFAT "lower-case base" flag
                    base = base.lower()
                if e[12] & 0x10:  # "lower-case extension" flag
                    ext = ext.lower()
                name = base + ("." + ext if ext else "")
            lfn = {}
            first = (struct.unpack_from("<H", e, 20)[0] << 16) | struct.unpack_from("<H", e, 26)[0]
            if e[11] & 0x10:
                if name not in (".", ".."):
                    self._walk(f, first, prefix + name + "/", result)
            else:
                result[prefix + name] = (first, struct.unpack_from("<I", e, 28)[0])

    def file_ranges(self, first, size):
        """Byte ranges [offset, length] of a file's data, merged."""
        cs = self.cluster_size
        need = (size + cs - 1) // cs
        clusters = self.chain(first)[:need]
        if len(clusters) != need:
            raise BuildError(f"FAT chain from {first} too short: {len(clusters)} < {need}")
        ranges = [[self.offset(c), cs] for c in clusters]
        if ranges:
            ranges[-1][1] = size - cs * (need - 1)
        return merge_ranges(ranges)

    def set_entries(self, f, entries):
        """Write {cluster: value} into every FAT copy of the open image f."""
        for copy in range(self.nfats):
            base = self.fat_start + copy * self.fat_bytes
            for c, v in entries.items():
                f.seek(base + 4 * c)
                f.write(struct.pack("<I", v))
        for c, v in entries.items():
            self.fat[c] = v

    def free_space(self):
        """FreeSpace of the clusters marked free in the FAT."""
        runs, start = [], None
        for c in range(2, self.nclusters + 2):
            free = self.fat[c] == 0
            if free and start is None:
                start = c
            elif not free and start is not None:
                runs.append((start, c - start))
                start = None
        if start is not None:
            runs.append((start, self.nclusters + 2 - start))
        return FreeSpace(self.data_start - 2 * self.cluster_size, self.cluster_size, runs)


def fat_fragment(f, fat, space, first, size, nfrag, rng):
    """Split a contiguous FAT file into nfrag fragments inside the file system.

    The first piece stays; the others move to free clusters (before the first
    piece for "out of order" when there is room, else after it), the FAT chain
    is rewritten in every FAT copy, and the clusters they left are overwritten
    with random bytes so no stale whole copy remains."""
    cs = fat.cluster_size
    clusters = fat.chain(first)[:(size + cs - 1) // cs]
    if len(clusters) < nfrag + 1 or clusters != list(range(clusters[0], clusters[0] + len(clusters))):
        return
    cuts = sorted(rng.sample(range(1, len(clusters)), nfrag - 1))
    pieces = [clusters[a:b] for a, b in zip([0] + cuts, cuts + [len(clusters)])]
    moved = pieces[1:]
    gaps = [rng.randint(1, 64) for _ in moved]
    total = sum(len(m) for m in moved) + sum(gaps)
    head = fat.offset(pieces[0][0])
    region = None
    if rng.random() < 0.5:  # out of order: moved pieces before the first one
        region = space.allocate(total, rng, hi=head)
    if region is None:
        region = space.allocate(total, rng, lo=fat.offset(pieces[0][-1]) + cs)
    if region is None:
        return
    new_chain = list(pieces[0])
    order = list(range(len(moved)))
    if len(moved) > 1 and rng.random() < 0.5:
        order.reverse()
    pos = (region - fat.data_start) // cs + 2
    placed = {}
    for k, idx in enumerate(order):
        placed[idx] = list(range(pos, pos + len(moved[idx])))
        pos += len(moved[idx]) + gaps[k]
    for idx, old in enumerate(moved):
        f.seek(fat.offset(old[0]))
        data = f.read(len(old) * cs)
        f.seek(fat.offset(placed[idx][0]))
        f.write(data)
        f.seek(fat.offset(old[0]))
        f.write(rng.randbytes(len(old) * cs))
        new_chain += placed[idx]
    entries = {c: 0 for m in moved for c in m}
    for a, b in zip(new_chain, new_chain[1:]):
        entries[a] = b
    entries[new_chain[-1]] = 0x0FFFFFFF
    fat.set_entries(f, entries)


def build_fat32(img_path, fs_plants, cluster_size, rng):
    """Format FAT32, copy fs_plants in, delete those with status 'deleted'.

    Sets each plant's fragments from a FAT chain walk; returns (FreeSpace,
    cluster size)."""
    cmd = ["mkfs.vfat", "-F", "32", "--invariant", "-i", "6770752d", "-n", "GPUCARVE"]
    if cluster_size:
        cmd += ["-s", str(max(1, cluster_size // 512))]
    run(cmd + [img_path])
    with tempfile.TemporaryDirectory() as tmp:
        for d in sorted({os.path.dirname(p["name"]) for p in fs_plants} - {""}):
            run(["mmd", "-i", img_path, "::/" + d])
        for p in fs_plants:
            local = os.path.join(tmp, "f")
            with open(local, "wb") as f:
                f.write(p["data"])
            os.utime(local, (p["mtime"], p["mtime"]))
            run(["mcopy", "-m", "-i", img_path, local, "::/" + p["name"]])
    fat = Fat32(img_path)
    listing = fat.files()
    to_split = [p for p in fs_plants if p.get("fs_frag")]
    if to_split:
        space = fat.free_space()
        with open(img_path, "r+b") as f:
            for p in to_split:
                fat_fragment(f, fat, space, listing[p["name"]][0], len(p["data"]), p["nfrag"], rng)
        fat = Fat32(img_path)
    for p in fs_plants:
        if p["name"] not in listing:
            raise BuildError(f"{p['name']} not found in FAT directory tree")
        first, size = listing[p["name"]]
        if size != len(p["data"]):
            raise BuildError(f"{p['name']}: directory size {size} != {len(p['data'])}")
        p["fragments"] = fat.file_ranges(first, size)
    deleted = [p for p in fs_plants if p["status"] == "deleted"]
    for p in deleted:
        run(["mdel", "-i", img_path, "::/" + p["name"]])
    fat = Fat32(img_path)
    space = fat.free_space()
    for p in deleted:
        for off, ln in p["fragments"]:
            space.exclude(off, ln)
    return space, fat.cluster_size


# ---------------------------------------------------------------------------
# ext2 / ext4
# ---------------------------------------------------------------------------

STAT_RANGE = re.compile(r"\((\d+)(?:-(\d+))?\):(\d+)(?:-(\d+))?")
STAT_ANY = re.compile(r"\(([A-Z]+\d*|\d+(?:-\d+)?)\):(\d+)(?:-(\d+))?")


def debugfs_script(img_path, commands, write=False):
    """Run debugfs commands from a script file; return {command: output}."""
    with tempfile.NamedTemporaryFile("w", suffix=".cmd", delete=False) as f:
        f.write("set_current_time 20200913122640\n" if write else "")
        f.write("\n".join(commands) + "\n")
        script = f.name
    try:
        out = run(["debugfs"] + (["-w"] if write else []) + ["-f", script, img_path])
    finally:
        os.unlink(script)
    result, cur = {}, None
    for line in out.splitlines():
        if line.startswith("debugfs: "):
            cur = line[len("debugfs: "):]
            result[cur] = []
        elif cur is not None:
            result[cur].append(line)
    return {k: "\n".join(v) for k, v in result.items()}


def ext_stat_ranges(stat_text, block_size, size):
    """Data byte ranges and all used blocks (data + indirect/extent) from debugfs stat."""
    m = re.search(r"^(?:BLOCKS|EXTENTS):\n(.*?)(?:\nTOTAL|\Z)", stat_text, re.S | re.M)
    if not m:
        raise BuildError("no BLOCKS/EXTENTS in debugfs stat output")
    text = m.group(1)
    mapping = []
    for lo, hi, plo, phi in STAT_RANGE.findall(text):
        lo, plo = int(lo), int(plo)
        hi = int(hi) if hi else lo
        mapping.append((lo, hi, plo))
    mapping.sort()
    ranges, remaining, expect = [], size, 0
    for lo, hi, plo in mapping:
        if lo != expect:
            raise BuildError(f"sparse file or unexpected map at logical block {lo}")
        ln = min((hi - lo + 1) * block_size, remaining)
        if ln > 0:
            ranges.append([plo * block_size, ln])
        remaining -= ln
        expect = hi + 1
    if remaining > 0:
        raise BuildError("debugfs block map shorter than the file")
    used = []
    for _, plo, phi in STAT_ANY.findall(text):
        used.append((int(plo), (int(phi) if phi else int(plo)) - int(plo) + 1))
    return merge_ranges(ranges), used


def build_ext(img_path, fs_plants, fstype, block_size, rng):
    """mke2fs -d a staging tree, delete plants marked deleted with debugfs.

    Sets each plant's fragments from debugfs stat; returns (FreeSpace, block size)."""
    block_size = block_size or 4096
    with tempfile.TemporaryDirectory() as stage:
        dirs = set()
        for p in fs_plants:
            path = os.path.join(stage, p["name"])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            dirs.add(os.path.dirname(path))
            # mke2fs -d stores all-zero blocks as holes; stage them with one
            # non-zero byte and restore the zero in the image afterwards.
            p["zero_blocks"] = zero_blocks(p["data"], block_size)
            staged = bytearray(p["data"])
            for k in p["zero_blocks"]:
                staged[k * block_size] = 1
            with open(path, "wb") as f:
                f.write(staged)
            os.utime(path, (p["mtime"], p["mtime"]))
        for d in sorted(dirs | {stage}, reverse=True):
            os.utime(d, (FIXED_EPOCH, FIXED_EPOCH))
        run(["mke2fs", "-q", "-F", "-t", fstype, "-b", str(block_size), "-L", "GPUCARVE",
             "-U", FIXED_UUID, "-E", f"hash_seed={FIXED_UUID},nodiscard,root_owner=0:0",
             "-d", stage, img_path])
    # mke2fs -d copies each source inode's ctime (the time of staging); pin it.
    paths = ["/"] + sorted({"/" + os.path.relpath(d, stage) for d in dirs} - {"/."}) + \
        ["/" + p["name"] for p in fs_plants]
    debugfs_script(img_path, [f'sif "{q}" ctime 20200913122640' for q in paths], write=True)
    stats = debugfs_script(img_path, [f'stat "/{p["name"]}"' for p in fs_plants])
    deleted_blocks = []
    for p in fs_plants:
        text = stats.get(f'stat "/{p["name"]}"', "")
        if f"Size: {len(p['data'])}" not in text:
            raise BuildError(f"debugfs stat of {p['name']} lacks the expected size:\n{text[:500]}")
        p["fragments"], used = ext_stat_ranges(text, block_size, len(p["data"]))
        if p["status"] == "deleted":
            deleted_blocks += used
    with open(img_path, "r+b") as f:
        for p in fs_plants:
            for k in p["zero_blocks"]:
                f.seek(file_pos_to_offset(p["fragments"], k * block_size))
                f.write(b"\0")
    deleted = [p for p in fs_plants if p["status"] == "deleted"]
    if deleted:
        debugfs_script(img_path, [f'rm "/{p["name"]}"' for p in deleted], write=True)
    space = FreeSpace(0, block_size, ext_free_runs(img_path))
    for start, count in deleted_blocks:
        space.exclude(start * block_size, count * block_size)
    return space, block_size


def zero_blocks(data, block_size):
    """Indices of the file's blocks that are entirely zero bytes."""
    zero = bytes(block_size)
    return [k for k in range(0, (len(data) + block_size - 1) // block_size)
            if data[k * block_size:(k + 1) * block_size] == zero[:len(data) - k * block_size]]


def file_pos_to_offset(fragments, pos):
    """Image offset of byte `pos` of a file stored in `fragments`."""
    for off, ln in fragments:
        if pos < ln:
            return off + pos
        pos -= ln
    raise BuildError("position beyond the end of the file")


def ext_free_runs(img_path):
    """Free block runs [(start, count)] from dumpe2fs's per-group "Free blocks:" lines."""
    runs = []
    for line in run(["dumpe2fs", img_path]).splitlines():
        m = re.match(r"\s+Free blocks: (.*)$", line)  # group lines are indented, the header's is not
        if not m:
            continue
        for part in m.group(1).split(","):
            part = part.strip()
            if part:
                a, _, b = part.partition("-")
                runs.append((int(a), int(b or a) - int(a) + 1))
    return runs


# ---------------------------------------------------------------------------
# NTFS
# ---------------------------------------------------------------------------

RUNLIST_LINE = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s*$")


def ntfs_data(img_path, which):
    """(inode, [(lcn, clusters)], data size) of the unnamed $DATA of the
    record `ntfsinfo -v` dumps for `which` (["-F", path] or ["-i", n])."""
    text = run(["ntfsinfo", "-v"] + which + [img_path])
    m = re.search(r"Dumping Inode (\d+)", text)
    if not m:
        raise BuildError(f"ntfsinfo {which}: no inode")
    inode = int(m.group(1))
    sections = re.split(r"Dumping attribute ", text)
    data = [t for t in sections if t.startswith("$DATA (0x80)") and re.search(r"Name length:\s+0 ", t)]
    if not data or not re.search(r"Resident:\s+No", data[0]):
        raise BuildError(f"ntfsinfo {which}: no non-resident unnamed $DATA")
    size = int(re.search(r"Data size:\s+(\d+)", data[0]).group(1))
    runs = []
    for line in data[0].split("Runlist:", 1)[-1].splitlines()[1:]:
        m = RUNLIST_LINE.match(line)
        if not m:
            break
        runs.append((int(m.group(2), 16), int(m.group(3), 16)))
    return inode, runs, size


def runs_to_ranges(runs, cluster, size):
    """Byte ranges [offset, length] of the first `size` bytes of cluster runs."""
    out, left = [], size
    for lcn, n in runs:
        if left <= 0:
            break
        ln = min(n * cluster, left)
        out.append([lcn * cluster, ln])
        left -= ln
    if left > 0:
        raise BuildError("NTFS run list shorter than the file")
    return merge_ranges(out)


def ntfs_read(f, runs, cluster, at, n):
    """`n` bytes at `at` of the data that cluster runs map."""
    out = bytearray()
    pos = 0
    for lcn, count in runs:
        ln = count * cluster
        lo, hi = max(at, pos), min(at + n, pos + ln)
        if lo < hi:
            f.seek(lcn * cluster + lo - pos)
            out += f.read(hi - lo)
        pos += ln
    return out


def build_ntfs(img_path, fs_plants, cluster_size, rng):
    """mkntfs, ntfscp every plant into the root directory, then delete those
    with status 'deleted' by patching the image as NTFS deletes: the MFT
    record's in-use flag cleared (its sequence number counted up) and the
    file's clusters cleared in $Bitmap; the record keeps its $FILE_NAME and
    run list, the root index its entry (no ntfs-3g tool deletes without a
    mount). Sets each plant's fragments from ntfsinfo's run lists; returns
    (FreeSpace, cluster size)."""
    cluster = cluster_size or 4096
    run(["mkntfs", "-F", "-Q", "-q", "-c", str(cluster), "-s", "512", "-L", "GPUCARVE", img_path])
    with tempfile.TemporaryDirectory() as tmp:
        for p in fs_plants:
            local = os.path.join(tmp, "f")
            with open(local, "wb") as f:
                f.write(p["data"])
            os.utime(local, (p["mtime"], p["mtime"]))
            run(["ntfscp", "-q", img_path, local, "/" + p["name"]])
    inodes = {}
    for p in fs_plants:
        inode, runs, size = ntfs_data(img_path, ["-F", "/" + p["name"]])
        if size != len(p["data"]):
            raise BuildError(f"{p['name']}: $DATA size {size} != {len(p['data'])}")
        inodes[p["name"]] = inode
        p["fragments"] = runs_to_ranges(runs, cluster, size)
    _, mft_runs, _ = ntfs_data(img_path, ["-i", "0"])
    _, bitmap_runs, bitmap_len = ntfs_data(img_path, ["-i", "6"])
    deleted = [p for p in fs_plants if p["status"] == "deleted"]
    with open(img_path, "r+b") as f:
        f.seek(0)
        boot = f.read(512)
        rec_size = boot[0x40] * cluster if boot[0x40] < 0x80 else 1 << (256 - boot[0x40])
        total = struct.unpack_from("<Q", boot, 0x28)[0] * 512 // cluster
        bitmap = ntfs_read(f, bitmap_runs, cluster, 0, bitmap_len)
        for p in deleted:
            at = None
            pos = inodes[p["name"]] * rec_size
            for lcn, count in mft_runs:
                if pos < count * cluster:
                    at = lcn * cluster + pos
                    break
                pos -= count * cluster
            f.seek(at)
            rec = bytearray(f.read(rec_size))
            if rec[:4] != b"FILE":
                raise BuildError(f"{p['name']}: MFT record not found")
            flags, seq = struct.unpack_from("<H", rec, 0x16)[0], struct.unpack_from("<H", rec, 0x10)[0]
            struct.pack_into("<H", rec, 0x16, flags & ~1)
            struct.pack_into("<H", rec, 0x10, (seq + 1) & 0xFFFF or 1)
            f.seek(at)
            f.write(rec)
            for off, ln in p["fragments"]:
                for c in range(off // cluster, (off + ln - 1) // cluster + 1):
                    bitmap[c // 8] &= ~(1 << (c % 8)) & 0xFF
        pos = 0
        for lcn, count in bitmap_runs:
            part = bitmap[pos:pos + count * cluster]
            f.seek(lcn * cluster)
            f.write(part)
            pos += count * cluster
            if pos >= len(bitmap):
                break
    free, c = [], 0
    while c < total:
        if bitmap[c // 8] & (1 << (c % 8)):
            c += 1
            continue
        s = c
        while c < total and not bitmap[c // 8] & (1 << (c % 8)):
            c += 1
        free.append((s, c - s))
    space = FreeSpace(0, cluster, free)
    for p in deleted:
        for off, ln in p["fragments"]:
            space.exclude(off, ln)
    return space, cluster


# ---------------------------------------------------------------------------
# main build
# ---------------------------------------------------------------------------

def choose_plants(samples, rng, budget, copies_allowed=True):
    """Pick originals, then modified copies (unless `copies_allowed` is
    false), until about `budget` bytes.

    Every chosen file has a distinct sha256."""
    plants, seen, used = [], set(), 0
    order = samples[:]
    rng.shuffle(order)
    for s in order:
        if used + len(s["data"]) <= budget or not plants:
            plants.append({"sample": s["name"], "type": s["type"], "data": s["data"], "variant": "original"})
            seen.add(sha256(s["data"]))
            used += len(s["data"])
    copies = {}
    tries = 0
    while copies_allowed and used < budget and tries < 20 * len(samples):
        tries += 1
        s = rng.choice(samples)
        if used + len(s["data"]) > budget * 1.02:
            continue
        data = MUTATORS[s["type"]](s["data"], rng) if s["type"] in MUTATORS else None
        if data is None or sha256(data) in seen:
            continue
        seen.add(sha256(data))
        copies[s["name"]] = copies.get(s["name"], 1) + 1
        plants.append({"sample": s["name"], "type": s["type"], "data": data,
                       "variant": f"modified copy {copies[s['name']]}"})
        used += len(data)
    return plants


def assign_names_and_status(plants, rng, args, cluster_guess):
    """Give every plant a status, a path, an mtime and a fragment count.

    Counts are exact: round(fraction x number of files) deleted, unallocated
    and fragmented (fragmented ones chosen among files of at least 4 clusters;
    on FAT half of them stay in the file system, fragmented through the FAT)."""
    n = len(plants)
    order = list(range(n))
    rng.shuffle(order)
    n_del = round(args.deleted_fraction * n)
    n_una = round(args.unallocated_fraction * n)
    for rank, i in enumerate(order):
        p = plants[i]
        if args.fs == "raw" or n_del <= rank < n_del + n_una:
            p["status"] = "unallocated"
        else:
            p["status"] = "deleted" if rank < n_del else "allocated"
        p["nfrag"] = 1
    eligible = [p for p in plants if (len(p["data"]) + cluster_guess - 1) // cluster_guess >= 4]
    for p in rng.sample(eligible, min(len(eligible), round(args.fragmented_fraction * n))):
        p["nfrag"] = rng.choice(args.fragment_counts)
        if args.fs == "fat32" and p["status"] != "unallocated" and rng.random() < 0.5:
            p["fs_frag"] = True
        else:
            p["status"] = "unallocated"
    for p in plants:
        stem, ext = os.path.splitext(p["sample"])
        base = stem if p["variant"] == "original" else f"{stem}_copy{p['variant'].split()[-1]}"
        folder = TYPE_DIRS.get(p["type"], "misc") if rng.random() < 0.75 else ""
        if args.fs == "ntfs":
            folder = ""  # ntfscp cannot make directories
        p["name"] = (folder + "/" if folder else "") + base + ext
        p["mtime"] = FIXED_EPOCH - rng.randrange(3 * 365 * 86400)
    rng.shuffle(plants)


def parse_counts(text):
    """Parse --fragment-counts: comma-separated integers in 2..5."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}")
    if not counts or any(c < 2 or c > 5 for c in counts):
        raise argparse.ArgumentTypeError("fragment counts must be 2, 3, 4 or 5")
    return counts


def build(args):
    """Build the image; return (truth dict, seconds taken)."""
    t0 = time.time()
    rng = random.Random(args.seed)
    samples = load_samples(args.samples)
    size = args.size
    if size % 4096:
        raise BuildError("--size must be a multiple of 4096")
    img = bytearray(size)
    n_decoys = args.decoys if args.decoys is not None else max(4, size // (8 << 20))
    segments, decoys = fill_previous_content(img, rng, samples, n_decoys, 4096)
    with open(args.out, "wb") as f:
        f.write(img)
    del img

    cluster_guess = args.cluster_size or (512 if args.fs == "fat32" else 4096)
    plants = choose_plants(samples, rng, int(size * args.fill), not args.originals_only)
    assign_names_and_status(plants, rng, args, cluster_guess)
    if args.fs == "ntfs":
        # NTFS keeps small files inside their MFT record (resident data,
        # no cluster of their own): those are written to free space instead.
        for p in plants:
            if len(p["data"]) < NTFS_RESIDENT:
                p["status"] = "unallocated"
    fs_plants = [p for p in plants if p["status"] in ("allocated", "deleted")]
    raw_plants = [p for p in plants if p["status"] == "unallocated"]

    if args.fs == "fat32":
        space, cluster = build_fat32(args.out, fs_plants, args.cluster_size, rng)
    elif args.fs == "ntfs":
        space, cluster = build_ntfs(args.out, fs_plants, args.cluster_size, rng)
    elif args.fs in ("ext2", "ext4"):
        space, cluster = build_ext(args.out, fs_plants, args.fs, args.cluster_size, rng)
    else:
        cluster = args.cluster_size or 4096
        space = FreeSpace(0, cluster, [(0, size // cluster)])
    for d in decoys:  # keep decoys intact where raw placement can choose
        space.exclude(d["offset"], d["length"])
    with open(args.out, "r+b") as f:
        for p in raw_plants:
            place_unallocated(f, p, space, rng, p["nfrag"])

    truth = verify_and_describe(args, plants, decoys, segments, cluster)
    fsck(args)
    with open(args.out, "rb") as f:
        h = hashlib.sha256()
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    truth["image_sha256"] = h.hexdigest()
    return truth, time.time() - t0


def verify_and_describe(args, plants, decoys, segments, cluster):
    """Check every plant's ranges against the image and assemble the truth dict."""
    files, embedded = [], []
    with open(args.out, "rb") as f:
        for i, p in enumerate(sorted(plants, key=lambda p: p["fragments"][0][0]), 1):
            got = read_ranges(f, p["fragments"])
            if sha256(got) != sha256(p["data"]):
                raise BuildError(f"truth check failed for {p['name']} ({p['status']})")
            files.append({
                "id": i, "name": p["name"], "type": p["type"], "status": p["status"],
                "size": len(p["data"]), "sha256": sha256(p["data"]),
                "fragments": p["fragments"], "fragmented": len(p["fragments"]) > 1,
                "fragment_order": (None if len(p["fragments"]) == 1 else "in-order"
                                   if p["fragments"] == sorted(p["fragments"]) else "out-of-order"),
                "sample": p["sample"], "variant": p["variant"],
            })
            if p["type"] == "jpeg":
                for off, ln in jpeg_thumbnails(p["data"]):
                    embedded.append({"parent": f"file:{i}", "type": "jpeg", "offset_in_parent": off,
                                     "size": ln, "sha256": sha256(p["data"][off:off + ln])})
        for d in decoys:
            f.seek(d["offset"])
            data = f.read(d["length"])
            d["intact"] = sha256(data) == d["sha256"]
            if d["intact"] and d["type"] == "jpeg":
                for off, ln in jpeg_thumbnails(data):
                    if off + ln <= len(data):
                        embedded.append({"parent": d["name"], "type": "jpeg", "offset_in_parent": off,
                                         "size": ln, "sha256": sha256(data[off:off + ln])})
    counts = {}
    for kind, _, n in segments:
        counts[kind] = counts.get(kind, 0) + n
    return {
        "format": "gpucarve-truth/1",
        "image": os.path.basename(args.out),
        "image_size": args.size,
        "seed": args.seed,
        "fs": args.fs,
        "fs_offset": 0,
        "cluster_size": cluster,
        "generator": "corpora/mkimage.py",
        "options": {"fill": args.fill, "fragmented_fraction": args.fragmented_fraction,
                    "fragment_counts": args.fragment_counts,
                    "deleted_fraction": args.deleted_fraction,
                    "unallocated_fraction": args.unallocated_fraction, "decoys": len(decoys)},
        "files": files,
        "decoys": decoys,
        "embedded": embedded,
        "previous_content_bytes": counts,
    }


def fsck(args):
    """Read-only file-system check; a failure aborts (raw writes must not touch metadata)."""
    if args.fs == "fat32":
        cmd = ["fsck.vfat", "-n", args.out]
    elif args.fs in ("ext2", "ext4"):
        cmd = ["e2fsck", "-fn", args.out]
    elif args.fs == "ntfs":
        cmd = ["ntfsfix", "-n", args.out]
    else:
        return
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    if p.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} reports problems:\n{p.stdout[-2000:]}{p.stderr[-1000:]}")


def summary(truth):
    """One-paragraph human summary of a truth dict."""
    files = truth["files"]
    by = {}
    for f in files:
        by[f["status"]] = by.get(f["status"], 0) + 1
    frag = sum(f["fragmented"] for f in files)
    intact = sum(d["intact"] for d in truth["decoys"])
    return (f"{truth['image']}: {truth['fs']}, {truth['image_size']} bytes, cluster {truth['cluster_size']}, "
            f"{len(files)} files ({', '.join(f'{k} {v}' for k, v in sorted(by.items()))}), "
            f"{frag} fragmented, {intact}/{len(truth['decoys'])} decoys intact, "
            f"{len(truth['embedded'])} embedded thumbnails, sha256 {truth['image_sha256'][:16]}...")


def main(argv=None):
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Example: corpora/mkimage.py --fs fat32 --size 64MiB --seed 1 --out /tmp/fat.img")
    ap.add_argument("--fs", choices=["fat32", "ext2", "ext4", "ntfs", "raw"], default="fat32", help="file system (default: %(default)s)")
    ap.add_argument("--size", type=parse_size, default=parse_size("64MiB"), help="image size, e.g. 64MiB (default)")
    ap.add_argument("--out", required=True, help="image path; the truth goes to OUT.truth.json")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default: %(default)s)")
    ap.add_argument("--samples", action="append", default=None,
                    help="samples folder with MANIFEST.tsv; may be given several times (default: corpora/samples)")
    ap.add_argument("--originals-only", action="store_true",
                    help="plant each sample once, no modified copies (with a --fill large enough, every sample)")
    ap.add_argument("--fill", type=float, default=0.15, help="fraction of the image taken by planted files (default: %(default)s)")
    ap.add_argument("--fragmented-fraction", type=float, default=0.15,
                    help="fraction of files split into fragments (--fragment-counts): on fat32 half of them inside the "
                         "file system (FAT chain), the others written to unallocated space (default: %(default)s)")
    ap.add_argument("--fragment-counts", type=parse_counts, default=[2, 3],
                    help="comma-separated fragment counts a fragmented file draws from, each 2-5, e.g. 3,4 "
                         "(default: 2,3); pieces are laid out in file order or shuffled, about half each")
    ap.add_argument("--deleted-fraction", type=float, default=0.25, help="fraction of files deleted (default: %(default)s)")
    ap.add_argument("--unallocated-fraction", type=float, default=0.1,
                    help="fraction of files written contiguously to unallocated space (default: %(default)s)")
    ap.add_argument("--decoys", type=int, default=None, help="number of truncated remnants (default: 1 per 8 MiB, at least 4)")
    ap.add_argument("--cluster-size", type=int, default=None,
                    help="bytes per cluster/block (fat32: mkfs.vfat's choice; ext, ntfs, raw: 4096)")
    ap.add_argument("--quiet", action="store_true", help="print nothing on success")
    args = ap.parse_args(argv)
    args.samples = args.samples or [os.path.join(HERE, "samples")]
    if args.fs == "fat32":
        need = 65525 * (args.cluster_size or 512) + (2 << 20)  # FAT32's minimum cluster count
        if args.size < need:
            ap.error(f"fat32 with {args.cluster_size or 512}-byte clusters needs --size >= {need >> 20} MiB")
    if min(args.fill, args.fragmented_fraction, args.deleted_fraction, args.unallocated_fraction) < 0 or \
            args.deleted_fraction + args.unallocated_fraction > 1 or args.fill > 0.9:
        ap.error("fractions must be >= 0, deleted + unallocated <= 1, fill <= 0.9")
    if args.cluster_size and (args.cluster_size & (args.cluster_size - 1) or args.cluster_size < 512):
        ap.error("--cluster-size must be a power of two >= 512")
    for tool in {"fat32": ["mkfs.vfat", "mcopy", "mdel", "mmd", "fsck.vfat"],
                 "ext2": ["mke2fs", "debugfs", "dumpe2fs", "e2fsck"],
                 "ext4": ["mke2fs", "debugfs", "dumpe2fs", "e2fsck"],
                 "ntfs": ["mkntfs", "ntfscp", "ntfsinfo", "ntfsfix"], "raw": []}[args.fs]:
        if not shutil.which(tool):
            ap.error(f"{tool} not found (apt-get install mtools dosfstools e2fsprogs ntfs-3g)")
    try:
        truth, seconds = build(args)
    except BuildError as e:
        print(f"mkimage: error: {e}", file=sys.stderr)
        return 1
    with open(args.out + ".truth.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    if not args.quiet:
        print(summary(truth) + f", {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
