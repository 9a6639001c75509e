#!/usr/bin/env python3
"""Writes ntfs_synthetic.bin: the $MFT and data of a tiny NTFS volume, as the
fs_ntfs fuzz target reads its input (after its own boot sector: 512-byte
clusters, 1 KiB records, $MFT at cluster 2, so the input starts at cluster 2).

Clusters: 2..25 $MFT (12 records), 26 $Bitmap, 27..28 /a.jpg, 29 /D/b.png
(deleted: record in-use flag clear, bit clear), 30 /$OrphanFiles/L/c (its
directory L is its own parent: a loop). Written by gpucarve's authors for
the fuzz corpus and src/carve/geometry/ntfs.rs's tests; no third-party data.
"""
import os
import struct

CL, REC = 512, 1024
T = 132_000_000_000_000_000  # 2019-04-12, NTFS time (100 ns since 1601)


def attr(kind, body, resident=True, runs=b"", size=0, clusters=0):
    if resident:
        h = struct.pack("<IIBBHHHIHBB", kind, 0, 0, 0, 0, 0, 0, len(body), 0x18, 0, 0)
        a = h + body
    else:
        h = struct.pack("<IIBBHHH", kind, 0, 1, 0, 0, 0, 0)
        h += struct.pack("<QQHHIQQQ", 0, max(clusters - 1, 0), 0x40, 0, 0, clusters * CL, size, size)
        a = h + runs
    a += b"\0" * (-len(a) % 8)
    return a[:4] + struct.pack("<I", len(a)) + a[8:]


def file_name(parent, pseq, name, ns=1):
    u = name.encode("utf-16-le")
    return struct.pack("<QQQQQQQII", parent | (pseq << 48), T, T, T, T, 0, 0, 0, 0)[:0x40] + \
        bytes([len(name), ns]) + u


def record(seq, flags, attrs):
    body = b"".join(attrs) + struct.pack("<I", 0xFFFFFFFF) + b"\0" * 4
    used = 0x38 + len(body)
    h = b"FILE" + struct.pack("<HHQHHHHII", 0x30, 3, 0, seq, 1, 0x38, flags, used, REC)
    h += struct.pack("<QHHI", 0, 0, 0, 0)
    h += b"\0" * (0x30 - len(h))
    usa = bytearray(struct.pack("<HHH", 1, 0, 0))
    rec = bytearray(h + bytes(usa) + b"\0" * 2 + body)
    rec += b"\0" * (REC - len(rec))
    for i in (1, 2):
        end = i * 512
        rec[0x30 + 2 * i:0x32 + 2 * i] = rec[end - 2:end]
        rec[end - 2:end] = struct.pack("<H", 1)
    return bytes(rec)


def si():
    return attr(0x10, struct.pack("<QQQQI", T, T + 10_000_000, T, T + 20_000_000, 0x20) + b"\0" * 12)


def data(lcn, n, size):
    return attr(0x80, b"", False, bytes([0x11, n, lcn, 0]), size, n)


recs = [b"\0" * REC] * 12
recs[0] = record(1, 1, [si(), attr(0x30, file_name(5, 5, "$MFT")), data(2, 24, 12 * REC)])
recs[5] = record(5, 3, [si(), attr(0x30, file_name(5, 5, "."))])
recs[6] = record(6, 1, [si(), attr(0x30, file_name(5, 5, "$Bitmap")), data(26, 1, CL)])
recs[8] = record(1, 1, [si(), attr(0x30, file_name(5, 5, "A~1.JPG", 2)),
                        attr(0x30, file_name(5, 5, "a.jpg")), data(27, 2, 1000)])
recs[9] = record(1, 3, [si(), attr(0x30, file_name(5, 5, "D"))])
recs[10] = record(2, 0, [si(), attr(0x30, file_name(9, 1, "b.png")), data(29, 1, 300)])
recs[11] = record(1, 3, [si(), attr(0x30, file_name(11, 1, "L"))])
recs[7] = record(1, 1, [si(), attr(0x30, file_name(11, 1, "c")), data(30, 1, 10)])
bitmap = bytearray(CL)
for c in list(range(0, 29)) + [30]:
    bitmap[c // 8] |= 1 << (c % 8)
out = b"".join(recs) + bytes(bitmap) + b"\xFF\xD8\xFF" + b"a" * (2 * CL - 3) + b"\x89PNG" + \
    b"b" * (CL - 4) + b"c" * CL
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ntfs_synthetic.bin"), "wb") as f:
    f.write(out)
