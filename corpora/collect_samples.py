#!/usr/bin/env python3
"""Rebuild corpora/samples/ from installed Debian packages and write MANIFEST.tsv.

Every sample is a real file shipped by a Debian package (or converted from one
with a named Debian tool, marked "derived"). The table SAMPLES below is the
single source of truth: destination name, carver type, Debian package, path in
that package, licence, and how the file was obtained.

Packages that are not normally installed (libpython3.11-testsuite,
r-cran-readxl, r-cran-rsqlite) can be unpacked without installing them:

    apt-get download libpython3.11-testsuite r-cran-readxl r-cran-rsqlite
    for d in *.deb; do dpkg-deb -x "$d" /tmp/debroot; done
    python3 corpora/collect_samples.py --extra-root /tmp/debroot

The conversions need `netpbm` (pamscale, ppmtobmp, pnmtotiff) and `flac`.
The committed samples are what mkimage.py uses; this script only documents and
reproduces them (conversion tools may embed their version, so a rebuild can
differ byte-wise from the committed derived files; --manifest-only rewrites
MANIFEST.tsv from the files as they are).
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

FS = "/usr/share/forensics-samples/original-files"
PYTEST = "/usr/lib/python3.11/test"
CC4 = "CC-BY-SA-4.0"

# (dest name, type, package, source path, licence, method)
# method: copy | gunzip | bmp-half | tiff-half | flac
SAMPLES = [
    # JPEG
    ("IMG_1054.jpg", "jpeg", "forensics-samples-files", f"{FS}/pic1/IMG_1054.JPG", CC4, "copy"),
    ("IMG_20200124_231153.jpg", "jpeg", "forensics-samples-files", f"{FS}/pic2/IMG_20200124_231153.jpg", CC4, "copy"),
    ("IMG-20191006-WA0002.jpg", "jpeg", "forensics-samples-files", f"{FS}/pic1/IMG-20191006-WA0002.jpg", CC4, "copy"),
    ("d-debian.jpg", "jpeg", "forensics-samples-files", f"{FS}/pic2/d-debian.jpg", CC4, "copy"),
    ("debian_logo.jpg", "jpeg", "forensics-samples-files", f"{FS}/pic1/debian_logo.jpg", "LGPL-3+ or CC-BY-SA-3.0", "copy"),
    ("empty.jpg", "jpeg", "forensics-samples-files", f"{FS}/pic1/empty.jpg", CC4, "copy"),
    # PNG
    ("debian.png", "png", "forensics-samples-files", f"{FS}/pic1/debian.png", CC4, "copy"),
    ("d-debian.png", "png", "forensics-samples-files", f"{FS}/pic2/d-debian.png", CC4, "copy"),
    ("debian_logo.png", "png", "forensics-samples-files", f"{FS}/pic1/debian_logo.png", "LGPL-3+ or CC-BY-SA-3.0", "copy"),
    # GIF
    ("tk_logoLarge.gif", "gif", "libtk8.6", "/usr/share/tcltk/tk8.6/images/logoLarge.gif", "TCL (Tcl/Tk BSD-style licence)", "copy"),
    ("tk_tai-ku.gif", "gif", "libtk8.6", "/usr/share/tcltk/tk8.6/images/tai-ku.gif", "TCL (Tcl/Tk BSD-style licence)", "copy"),
    ("xslt_processing.gif", "gif", "libxslt1-dev", "/usr/share/doc/libxslt1-dev/html/processing.gif", "MIT", "copy"),
    ("python.gif", "gif", "libpython3.11-testsuite", f"{PYTEST}/imghdrdata/python.gif", "PSF-2.0", "copy"),
    # BMP / TIFF
    ("python.bmp", "bmp", "libpython3.11-testsuite", f"{PYTEST}/imghdrdata/python.bmp", "PSF-2.0", "copy"),
    ("debian-half.bmp", "bmp", "forensics-samples-files", f"{FS}/pic1/debian.ppm", CC4, "bmp-half"),
    ("python.tiff", "tiff", "libpython3.11-testsuite", f"{PYTEST}/imghdrdata/python.tiff", "PSF-2.0", "copy"),
    ("d-debian-half.tif", "tiff", "forensics-samples-files", f"{FS}/pic2/d-debian.ppm", CC4, "tiff-half"),
    # PDF
    ("a-text.pdf", "pdf", "forensics-samples-files", f"{FS}/text1/a-text.pdf", CC4, "copy"),
    ("d-text.pdf", "pdf", "forensics-samples-files", f"{FS}/text2/d-text.pdf", CC4, "copy"),
    ("a-text-pass-A5d.pdf", "pdf", "forensics-samples-files", f"{FS}/text1/a-text-pass-A5d.pdf", CC4, "copy"),
    ("bzip2-manual.pdf", "pdf", "bzip2-doc", "/usr/share/doc/bzip2/manual.pdf.gz", "BSD-variant (bzip2)", "gunzip"),
    # ZIP family
    ("commons-cli-1.5.0.jar", "zip", "libcommons-cli-java", "/usr/share/java/commons-cli.jar", "Apache-2.0", "copy"),
    ("python-zipdir.zip", "zip", "libpython3.11-testsuite", f"{PYTEST}/zipdir.zip", "PSF-2.0", "copy"),
    ("a-text.docx", "docx", "forensics-samples-files", f"{FS}/text1/a-text.docx", CC4, "copy"),
    ("d-text.docx", "docx", "forensics-samples-files", f"{FS}/text2/d-text.docx", CC4, "copy"),
    ("a-text.odt", "odt", "forensics-samples-files", f"{FS}/text1/a-text.odt", CC4, "copy"),
    ("d-text.odt", "odt", "forensics-samples-files", f"{FS}/text2/d-text.odt", CC4, "copy"),
    ("readxl-datasets.xlsx", "xlsx", "r-cran-readxl", "/usr/lib/R/site-library/readxl/extdata/datasets.xlsx", "MIT", "copy"),
    ("readxl-deaths.xlsx", "xlsx", "r-cran-readxl", "/usr/lib/R/site-library/readxl/extdata/deaths.xlsx", "MIT", "copy"),
    # GZIP
    ("testdisk-changelog.gz", "gzip", "testdisk", "/usr/share/doc/testdisk/changelog.gz", "GPL-2", "copy"),
    ("forensics-samples-changelog.gz", "gzip", "forensics-samples-files", "/usr/share/doc/forensics-samples-files/changelog.gz", "MIT", "copy"),
    # SQLite
    ("rsqlite-datasets.sqlite", "sqlite", "r-cran-rsqlite", "/usr/lib/R/site-library/RSQLite/db/datasets.sqlite", "LGPL-2+", "copy"),
    # Audio
    ("deleted.wav", "wav", "forensics-samples-files", f"{FS}/audio2/deleted.wav", CC4, "copy"),
    ("pluck-pcm16.wav", "wav", "libpython3.11-testsuite", f"{PYTEST}/audiodata/pluck-pcm16.wav", "PSF-2.0", "copy"),
    ("debian.ogg", "ogg", "forensics-samples-files", f"{FS}/audio1/debian.ogg", CC4, "copy"),
    ("deleted.ogg", "ogg", "forensics-samples-files", f"{FS}/audio2/deleted.ogg", CC4, "copy"),
    ("debian.mp3", "mp3", "forensics-samples-files", f"{FS}/audio1/debian.mp3", CC4, "copy"),
    ("deleted.mp3", "mp3", "forensics-samples-files", f"{FS}/audio2/deleted.mp3", CC4, "copy"),
    ("deleted.flac", "flac", "forensics-samples-files", f"{FS}/audio2/deleted.wav", CC4, "flac"),
    ("pluck-pcm16.flac", "flac", "libpython3.11-testsuite", f"{PYTEST}/audiodata/pluck-pcm16.wav", "PSF-2.0", "flac"),
    # ELF
    ("bzip2.elf", "elf", "bzip2", "/bin/bzip2", "BSD-variant (bzip2)", "copy"),
    ("jq.elf", "elf", "jq", "/usr/bin/jq", "MIT", "copy"),
]

METHOD_NOTE = {
    "copy": "verbatim copy",
    "gunzip": "derived: gunzip of the packaged .gz (the original file)",
    "bmp-half": "derived: pamscale 0.5 | ppmtobmp (netpbm)",
    "tiff-half": "derived: pamscale 0.5 | pnmtotiff -lzw (netpbm)",
    "flac": "derived: flac -8 (flac 1.4.2) from the WAV",
}


def find_source(path, extra_roots):
    """Return the first existing copy of `path` under / or any extra root."""
    for root in ["/"] + list(extra_roots):
        cand = os.path.join(root, path.lstrip("/"))
        if os.path.exists(cand):
            return cand
    return None


def run_pipe(cmds, out_path):
    """Run a shell pipeline given as a list of argv lists, writing stdout to out_path."""
    shell = " | ".join(" ".join(map(quote, c)) for c in cmds)
    with open(out_path, "wb") as out:
        subprocess.run(["bash", "-o", "pipefail", "-c", shell], stdout=out, check=True)


def quote(s):
    """Shell-quote one argument."""
    import shlex
    return shlex.quote(s)


def produce(method, src, dest):
    """Create `dest` from `src` according to `method`."""
    if method == "copy":
        shutil.copyfile(src, dest)
    elif method == "gunzip":
        run_pipe([["gzip", "-dc", src]], dest)
    elif method == "bmp-half":
        run_pipe([["pamscale", "0.5", src], ["ppmtobmp"]], dest)
    elif method == "tiff-half":
        run_pipe([["pamscale", "0.5", src], ["pnmtotiff", "-lzw"]], dest)
    elif method == "flac":
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "o.flac")
            subprocess.run(["flac", "-s", "-8", "-o", out, src], check=True)
            shutil.copyfile(out, dest)
    else:
        raise ValueError(method)


def sha256_file(path):
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(outdir):
    """Write MANIFEST.tsv for the samples present in outdir (order of SAMPLES)."""
    rows = ["file\ttype\tsize\tsha256\tpackage\tsource_path\tlicence\tprovenance"]
    for name, typ, pkg, path, lic, method in SAMPLES:
        p = os.path.join(outdir, name)
        if not os.path.exists(p):
            continue
        rows.append("\t".join([name, typ, str(os.path.getsize(p)), sha256_file(p),
                               pkg, path, lic, METHOD_NOTE[method]]))
    with open(os.path.join(outdir, "MANIFEST.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    return len(rows) - 1


def main():
    """Command-line entry point."""
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(here, "samples"), help="samples folder (default: %(default)s)")
    ap.add_argument("--extra-root", action="append", default=[],
                    help="folder where extra .deb packages were unpacked with dpkg-deb -x (repeatable)")
    ap.add_argument("--manifest-only", action="store_true", help="only rewrite MANIFEST.tsv")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    missing = []
    if not args.manifest_only:
        for name, typ, pkg, path, lic, method in SAMPLES:
            src = find_source(path, args.extra_root)
            if src is None:
                missing.append(f"{name}: {path} (package {pkg})")
                continue
            produce(method, src, os.path.join(args.out, name))
    n = write_manifest(args.out)
    print(f"{n} samples in {args.out}")
    for m in missing:
        print("missing:", m, file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
