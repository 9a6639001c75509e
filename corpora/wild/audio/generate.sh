#!/bin/sh
# Writes the files of this folder that were made here (the rest are copies
# of other projects' test data: see MANIFEST.tsv), from synthetic input.
# Needs sox 14.4.2, wavpack 5.6, ffmpeg 5.1 (Debian 12 packages) and mido
# 1.3.3 (`pip install mido==1.3.3`). Run from this folder.
set -eu
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
sox -n -r 8000 -c 1 -b 16 "$T/mono.wav" synth 0.6 pluck 220
sox -n -r 22050 -c 2 -b 16 "$T/stereo.wav" synth 0.4 sine 300 sine 450
sox -n -r 11025 -c 6 -b 16 "$T/six.wav" synth 0.2 square 200 square 300 sine 400 sine 500 noise noise
sox -n -r 16000 -c 1 -b 32 -e floating-point "$T/float.wav" synth 0.3 sine 1000

# AIFF and AIFF-C (sox, ffmpeg)
sox "$T/mono.wav" -b 8 sox-pcm8.aiff
sox "$T/stereo.wav" -b 24 sox-stereo-pcm24.aiff
ffmpeg -v error -y -i "$T/mono.wav" -c:a pcm_mulaw ffmpeg-ulaw.aifc
sox "$T/float.wav" -t aifc sox-float.aifc
ffmpeg -v error -y -i "$T/stereo.wav" -write_id3v2 1 -metadata title='Tagged by ffmpeg' ffmpeg-id3.aiff
ffmpeg -v error -y -i "$T/mono.wav" -c:a pcm_alaw ffmpeg-alaw.aifc

# Sun AU (sox, ffmpeg)
sox "$T/mono.wav" -e u-law sox-ulaw.au
sox "$T/stereo.wav" -e a-law sox-alaw-stereo.au
sox "$T/float.wav" sox-float.au
sox "$T/six.wav" -b 24 sox-six-pcm24.au
ffmpeg -v error -y -i "$T/mono.wav" -metadata comment='written by ffmpeg' ffmpeg-pcm16.au

# Core Audio Format (sox via libsndfile, ffmpeg: PCM, ALAC with a packet table)
sox "$T/stereo.wav" sox-pcm16.caf
ffmpeg -v error -y -i "$T/mono.wav" ffmpeg-pcm16.caf
ffmpeg -v error -y -i "$T/stereo.wav" -c:a alac ffmpeg-alac.caf

# WavPack (wavpack: default, high/extra, hybrid lossy, float, 6 channels,
# APEv2-tagged; ffmpeg's encoder)
wavpack -q -y "$T/stereo.wav" -o wavpack-default.wv
wavpack -q -y -hh -x4 "$T/mono.wav" -o wavpack-hh-x4.wv
wavpack -q -y -b256 "$T/stereo.wav" -o wavpack-hybrid.wv
wavpack -q -y "$T/float.wav" -o wavpack-float.wv
wavpack -q -y "$T/six.wav" -o wavpack-six.wv
wavpack -q -y -w "Title=Tagged by wavpack" -w "Artist=gpucarve" "$T/mono.wav" -o wavpack-apev2.wv
ffmpeg -v error -y -i "$T/stereo.wav" -c:a wavpack ffmpeg.wv

# True Audio (ffmpeg)
ffmpeg -v error -y -i "$T/mono.wav" ffmpeg-mono.tta
ffmpeg -v error -y -i "$T/stereo.wav" ffmpeg-stereo.tta

# Standard MIDI Files (mido: formats 0, 1 and 2)
python3 - <<'PY'
import mido
for fmt, tracks in ((0, 1), (1, 3), (2, 2)):
    f = mido.MidiFile(type=fmt, ticks_per_beat=96)
    for t in range(tracks):
        tr = mido.MidiTrack()
        tr.append(mido.MetaMessage('track_name', name=f'track {t}'))
        for k in range(8 + 4 * t):
            tr.append(mido.Message('note_on', note=60 + (k * 5 + t) % 24, velocity=90, time=0 if k == 0 else 48))
            tr.append(mido.Message('note_off', note=60 + (k * 5 + t) % 24, velocity=0, time=48))
        f.tracks.append(tr)
    f.save(f'mido-format{fmt}.mid')
PY
