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
