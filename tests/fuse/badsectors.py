#!/usr/bin/python3
"""A FUSE file system holding one read-only file, `image`, whose bytes come
from a backing file, except that reads touching chosen byte ranges fail
with EIO, as a failing disk's bad sectors do. Used by tests/faults.rs and
tests/integrity.rs (through tests/common/badfs.rs).

Environment:
  BADSECTORS_BACKING  the backing file (served as MOUNTPOINT/image)
  BADSECTORS_NAME     its name instead of `image` (e.g. `image.002`)
  BADSECTORS_ALSO     more files served as they are, "NAME=PATH:NAME=PATH"
                      (the other segments of a split set)
  BADSECTORS_RANGES   bad ranges, "START-END,START-END" (bytes, END exclusive)
  BADSECTORS_LOG      a file that gets one line per open: "open FLAGS"
                      (so tests can check that the image is opened read-only)

Usage: badsectors.py MOUNTPOINT   (stays in the foreground; unmount with
fusermount3 -u MOUNTPOINT). Needs python3-fuse (fuse-python) and fuse3.
"""

import errno
import os
import stat
import sys

import fuse

fuse.fuse_python_api = (0, 2)

BACKING = os.environ["BADSECTORS_BACKING"]
RANGES = [
    tuple(int(x) for x in r.split("-"))
    for r in os.environ.get("BADSECTORS_RANGES", "").split(",")
    if r
]
LOG = os.environ.get("BADSECTORS_LOG")
NAME = os.environ.get("BADSECTORS_NAME", "image")
# name -> (fd, size, mtime, has the bad ranges)
FILES = {NAME: (os.open(BACKING, os.O_RDONLY), os.path.getsize(BACKING), int(os.path.getmtime(BACKING)), True)}
for item in os.environ.get("BADSECTORS_ALSO", "").split(":"):
    if "=" in item:
        n, p = item.split("=", 1)
        FILES[n] = (os.open(p, os.O_RDONLY), os.path.getsize(p), int(os.path.getmtime(p)), False)


def log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


class BadSectors(fuse.Fuse):
    def getattr(self, path):
        st = fuse.Stat()
        if path == "/":
            st.st_mode = stat.S_IFDIR | 0o755
            st.st_nlink = 2
        elif path[1:] in FILES:
            _, size, mtime, _ = FILES[path[1:]]
            st.st_mode = stat.S_IFREG | 0o644
            st.st_nlink = 1
            st.st_size = size
            st.st_mtime = mtime
        else:
            return -errno.ENOENT
        return st

    def readdir(self, path, offset):
        for name in [".", ".."] + sorted(FILES):
            yield fuse.Direntry(name)

    def open(self, path, flags):
        log("open %d" % flags)
        if path[1:] not in FILES:
            return -errno.ENOENT
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            return -errno.EROFS
        return 0

    def read(self, path, size, offset):
        if path[1:] not in FILES:
            return -errno.ENOENT
        fd, _, _, bad = FILES[path[1:]]
        end = offset + size
        for a, b in RANGES if bad else []:
            if offset < b and a < end:
                return -errno.EIO
        return os.pread(fd, size, offset)

    def write(self, path, buf, offset):
        log("write %d %d" % (offset, len(buf)))
        return -errno.EROFS

    def truncate(self, path, size):
        log("truncate %d" % size)
        return -errno.EROFS

    def utime(self, path, times):
        log("utime")
        return -errno.EROFS

    def utimens(self, path, ts_acc, ts_mod):
        log("utimens")
        return -errno.EROFS


def main():
    server = BadSectors(version="%prog " + fuse.__version__, dash_s_do="setsingle")
    server.parse(args=[sys.argv[1], "-f"], errex=1)
    server.main()


if __name__ == "__main__":
    main()
