#!/bin/bash
# Writes the generated files of corpora/wild/newtypes2 from synthetic input
# (run here, in this folder; the MANIFEST.tsv rows name each tool and
# version). Tools: ffmpeg 5.1 (Debian 12: flv muxer, swf muxer),
# GStreamer 1.22 (Debian 12: flvmux).
set -euo pipefail
# --- FLV: ffmpeg's flv muxer (lavfi test sources) and GStreamer's flvmux ---
f() { ffmpeg -v error -y "$@"; }
V="-f lavfi -i testsrc=size=160x120:rate=15:duration=2"
A="-f lavfi -i sine=frequency=440:sample_rate=44100:duration=2"
f $V $A -c:v libx264 -preset ultrafast -c:a aac -b:a 64k gen-ffmpeg-h264-aac.flv
f $V $A -c:v flv1 -q:v 8 -c:a libmp3lame -ar 22050 -b:a 32k gen-ffmpeg-flv1-mp3.flv
f $A -c:a libmp3lame -b:a 48k gen-ffmpeg-audio-only.flv
f $V -c:v libx264 -preset ultrafast -g 10 -flvflags add_keyframe_index gen-ffmpeg-keyframe-index.flv
f $V $A -c:v flv1 -c:a adpcm_swf -ar 22050 -flvflags no_metadata gen-ffmpeg-no-metadata-adpcm.flv
f $A -c:a nellymoser -ar 22050 -t 1 gen-ffmpeg-nellymoser.flv
f $V -c:v flv1 -an -t 1 -f flv - > gen-ffmpeg-piped-unseekable.flv
gst() { gst-launch-1.0 -q "$@" >/dev/null; }
gst videotestsrc num-buffers=30 ! video/x-raw,width=128,height=96,framerate=15/1 ! x264enc ! flvmux name=m ! filesink location=gen-gst-flvmux-h264.flv
gst audiotestsrc num-buffers=40 ! audioconvert ! lamemp3enc ! mpegaudioparse ! flvmux ! filesink location=gen-gst-flvmux-mp3.flv
gst flvmux name=m streamable=true ! filesink location=gen-gst-flvmux-streamable.flv videotestsrc num-buffers=20 pattern=ball ! video/x-raw,width=96,height=64 ! avenc_flv ! m. audiotestsrc num-buffers=20 ! audioconvert ! voaacenc ! m.
# --- SWF: ffmpeg's swf muxer (Sorenson Spark video, MP3 audio) ---
f $V -c:v flv1 -an -t 1 gen-ffmpeg-video.swf
f $V $A -c:v flv1 -c:a libmp3lame -ar 22050 -t 1 gen-ffmpeg-video-mp3.swf
f $V -c:v mjpeg -an -t 1 gen-ffmpeg-mjpeg.swf
# --- DjVu: djvulibre 3.5.28 (Debian 12 djvulibre-bin) of synthetic pictures ---
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 - "$T" <<'PY'
import random, sys, math
random.seed(36)
d = sys.argv[1]
def ppm(w, h, name):
    px = bytearray()
    for y in range(h):
        for x in range(w):
            r = math.hypot(x - w / 2, y - h / 3)
            for v in (x * 255 // (w - 1), y * 255 // (h - 1), 200 if r < min(w, h) / 4 else 40):
                px.append(max(0, min(255, v + random.randint(-12, 12))))
    open(f"{d}/{name}", "wb").write(b"P6\n%d %d\n255\n" % (w, h) + px)
def pbm(w, h, name):
    rows = bytearray()
    for y in range(h):
        bits, row = 0, bytearray()
        for x in range(w):
            on = ((x // 8 + y // 8) % 2 == 0) ^ (math.hypot(x - w / 2, y - h / 2) < min(w, h) / 3)
            bits = (bits << 1) | on
            if x % 8 == 7:
                row.append(bits)
                bits = 0
        if w % 8:
            row.append(bits << (8 - w % 8))
        rows += row
    open(f"{d}/{name}", "wb").write(b"P4\n%d %d\n" % (w, h) + rows)
ppm(200, 150, "rgb.ppm"); ppm(97, 61, "small.ppm"); pbm(300, 200, "bw.pbm"); pbm(123, 77, "bw2.pbm")
PY
c44 "$T/rgb.ppm" gen-djvulibre-c44.djvu
c44 -slice 74,89,99 "$T/small.ppm" gen-djvulibre-c44-slices.djvu
cjb2 "$T/bw.pbm" gen-djvulibre-cjb2.djvu
cjb2 -lossy "$T/bw2.pbm" gen-djvulibre-cjb2-lossy.djvu
cpaldjvu -colors 8 "$T/rgb.ppm" gen-djvulibre-cpaldjvu.djvu
djvm -c gen-djvulibre-djvm-bundle.djvu gen-djvulibre-c44.djvu gen-djvulibre-cjb2.djvu gen-djvulibre-cpaldjvu.djvu
cp gen-djvulibre-cjb2.djvu gen-djvulibre-djvused-annotated.djvu
printf '(background #ffffff)\n(zoom page)\n' > "$T/ant"
printf '(page 0 0 300 200 "gpucarve corpus")\n' > "$T/txt"
djvused -s -e "select 1; set-ant $T/ant; set-txt $T/txt" gen-djvulibre-djvused-annotated.djvu
