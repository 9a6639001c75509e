#!/bin/bash
# Writes the generated files of corpora/wild/newtypes from synthetic input
# (run here, in this folder; the MANIFEST.tsv rows name each tool and
# version). Tools: opj_compress (Debian 12 libopenjp2-tools), ffmpeg 5.1
# (native jpeg2000 encoder and libopenjpeg), Pillow 13 (its OpenJPEG).
# PYTHON: a Python with Pillow 13 (python3 -m venv v && v/bin/pip install Pillow).
set -euo pipefail
PYTHON=${PYTHON:-python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# Synthetic pictures: gradients, circles and noise (seeded).
$PYTHON - "$T" <<'PY'
import random, sys, math
random.seed(36)
d = sys.argv[1]
def img(w, h, ch, name):
    px = bytearray()
    for y in range(h):
        for x in range(w):
            r = math.hypot(x - w / 2, y - h / 3)
            v = [int((x * 255) // max(w - 1, 1)), int((y * 255) // max(h - 1, 1)), 200 if r < min(w, h) / 4 else 40]
            for c in range(ch):
                px.append(max(0, min(255, v[c % 3] + random.randint(-12, 12))))
    hdr = (b"P6" if ch == 3 else b"P5") + b"\n%d %d\n255\n" % (w, h)
    open(f"{d}/{name}", "wb").write(hdr + px)
img(160, 120, 3, "rgb.ppm")
img(333, 97, 1, "gray.pgm")
img(64, 64, 3, "small.ppm")
img(700, 500, 3, "big.ppm")
PY
o() { opj_compress "$@" >/dev/null; }
o -i "$T/rgb.ppm" -o gen-opj-lossless.jp2
o -i "$T/rgb.ppm" -o gen-opj-rate40.j2k -r 40
o -i "$T/gray.pgm" -o gen-opj-gray-irreversible.jp2 -I -r 20,10
o -i "$T/big.ppm" -o gen-opj-tiles128.jp2 -t 128,128 -r 30
o -i "$T/big.ppm" -o gen-opj-tiles-tp-r.j2k -t 256,256 -TP R -n 4 -r 50
o -i "$T/rgb.ppm" -o gen-opj-sop-eph-rpcl.jp2 -SOP -EPH -p RPCL -r 10
o -i "$T/small.ppm" -o gen-opj-small-plt-tlm.jp2 -PLT -TLM
o -i "$T/gray.pgm" -o gen-opj-gray-cblk16.j2k -b 16,16 -c [64,64]
o -i "$T/big.ppm" -o gen-opj-mct0-precincts.jp2 -mct 0 -c [128,128],[64,64] -r 25
f() { ffmpeg -v error -y -i "$@"; }
f "$T/rgb.ppm" -c:v jpeg2000 -pred 1 gen-ffmpeg-native-lossless.jp2
f "$T/rgb.ppm" -c:v jpeg2000 -format j2k -tile_width 64 -tile_height 64 gen-ffmpeg-native-tiled.j2k
f "$T/gray.pgm" -c:v jpeg2000 -q:v 8 gen-ffmpeg-native-gray.jp2
f "$T/small.ppm" -c:v libopenjpeg gen-ffmpeg-libopenjpeg.jp2
f "$T/rgb.ppm" -c:v libopenjpeg -format j2k -compression_level 30 gen-ffmpeg-libopenjpeg.j2k
$PYTHON - "$T" <<'PY'
import sys
from PIL import Image
d = sys.argv[1]
im = Image.open(f"{d}/rgb.ppm")
im.save("gen-pillow-default.jp2")
im.save("gen-pillow-layers.jp2", quality_mode="rates", quality_layers=[40, 20, 10])
im.convert("L").save("gen-pillow-gray.j2k")
im.save("gen-pillow-tiled-lrcp.jp2", tile_size=(64, 64), progression="LRCP", irreversible=True)
Image.open(f"{d}/small.ppm").save("gen-pillow-comment.jp2", comment="gpucarve corpus", no_jp2=False)
PY
# --- Fonts: fontTools 4.68 (FontBuilder: TrueType and CFF outlines; WOFF,
# WOFF2 and a collection of them) ---
$PYTHON - <<'PY'
from fontTools.fontBuilder import FontBuilder
from fontTools.pens.ttGlyphPen import TTGlyphPen
from fontTools.pens.t2CharStringPen import T2CharStringPen
from fontTools.ttLib import TTFont, TTCollection

def build(cff, name, glyphs=("A", "B", "C"), upm=1000):
    fb = FontBuilder(upm, isTTF=not cff)
    order = [".notdef", *glyphs]
    fb.setupGlyphOrder(order)
    fb.setupCharacterMap({ord(g): g for g in glyphs})
    def draw(pen, k):
        pen.moveTo((50 + k * 10, 0)); pen.lineTo((50, 700 - k * 40)); pen.lineTo((450, 700)); pen.lineTo((450 - k * 5, 0)); pen.closePath()
    if cff:
        cs = {}
        for k, g in enumerate(order):
            p = T2CharStringPen(500, None); draw(p, k); cs[g] = p.getCharString()
        fb.setupCFF(name, {"FullName": name}, cs, {})
    else:
        gl = {}
        for k, g in enumerate(order):
            p = TTGlyphPen(None); draw(p, k); gl[g] = p.glyph()
        fb.setupGlyf(gl)
    fb.setupHorizontalMetrics({g: (500, 50) for g in order})
    fb.setupHorizontalHeader(ascent=800, descent=-200)
    fb.setupNameTable({"familyName": name, "styleName": "Regular"})
    fb.setupOS2(sTypoAscender=800, usWinAscent=800, usWinDescent=200)
    fb.setupPost()
    return fb.font

for cff, ext in ((False, "ttf"), (True, "otf")):
    f = build(cff, "Gpucarve" + ext.upper())
    f.save(f"gen-fonttools-three-glyphs.{ext}")
    for flavor in ("woff", "woff2"):
        f = build(cff, "Gpucarve" + ext.upper() + flavor)
        f.flavor = flavor
        f.save(f"gen-fonttools-{ext}.{flavor}")
big = build(False, "GpucarveBig", glyphs=tuple(chr(c) for c in range(0x41, 0x5B)) + tuple(chr(c) for c in range(0x61, 0x7B)), upm=2048)
big.save("gen-fonttools-52-glyphs-upm2048.ttf")
c = TTCollection()
c.fonts = [build(False, "GpucarveA"), build(False, "GpucarveB", glyphs=("X", "Y"))]
c.save("gen-fonttools-two-fonts.ttc")
PY
# --- Icons: ImageMagick 6.9.11 (ICO of BMP and PNG images), Pillow (ICO,
# ICNS), png2icns (Debian 12 icnsutils 0.8.1) ---
$PYTHON - "$T" <<'PY'
import sys, random
from PIL import Image, ImageDraw
d = sys.argv[1]
random.seed(7)
for n in (16, 32, 48, 128, 256, 512):
    im = Image.new("RGBA", (n, n), (0, 0, 0, 0))
    dr = ImageDraw.Draw(im)
    dr.ellipse((n // 8, n // 8, n - n // 8, n - n // 8), fill=(30, 120, 200, 255), outline=(250, 200, 20, 255), width=max(1, n // 16))
    dr.rectangle((n // 3, n // 3, n // 2, n // 2), fill=(random.randint(0, 255), 40, 60, 180))
    im.save(f"{d}/icon{n}.png")
base = Image.open(f"{d}/icon256.png")
base.save("gen-pillow-sizes.ico", sizes=[(16, 16), (32, 32), (48, 48), (256, 256)])
base.save("gen-pillow-bmp.ico", sizes=[(16, 16), (32, 32)], bitmap_format="bmp")
Image.open(f"{d}/icon512.png").save("gen-pillow.icns")
PY
convert-im6.q16 "$T/icon48.png" gen-imagemagick-48.ico
convert-im6.q16 "$T/icon256.png" -define icon:auto-resize=64,48,32,16 gen-imagemagick-auto-resize.ico
convert-im6.q16 "$T/icon16.png" -colors 16 -type Palette BMP3:"$T/p16.bmp" && convert-im6.q16 "$T/p16.bmp" gen-imagemagick-palette16.ico
png2icns gen-png2icns-three.icns "$T/icon16.png" "$T/icon32.png" "$T/icon128.png" >/dev/null
png2icns gen-png2icns-512.icns "$T/icon512.png" >/dev/null
