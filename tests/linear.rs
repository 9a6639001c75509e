//! Linear work and bounded output on hostile shapes of every catalogue type.
//!
//! Every type of the built-in catalogue, in every shape of
//! [`gpucarve::synth::Shape`] (its headers back to back; one every 512 bytes
//! of random bytes; each followed by `FF` bytes, the largest lengths; each
//! followed by self-referencing offsets), plus every header of the catalogue
//! mixed and the shapes issue 33 found by hand, is carved at two sizes with
//! every option that writes more (`--keep partial,unvalidated
//! --keep-embedded`). Each carving must end with status 0 and keep to the
//! bounds the carver states, measured, not timed (deterministic):
//!
//! * output (files + reports) at most `2 × image + 16 MiB`
//!   ([`gpucarve::carve::bound::output_limit`]);
//! * bytes read by validation and fragment searches (the work meter in
//!   `audit.txt`) at most `WORK_PER_BYTE × image + WORK_PER_HIT × header
//!   hits + WORK_FIXED` ([`gpucarve::carve::work_limit`]).
//!
//! A carving that read each candidate's bytes to the end of the image (the
//! quadratic shapes of issue 33: PDF headers with no `%%EOF`, scripts back
//! to back) reads hundreds of times the bound at 4 MiB and fails here.

mod common;

use std::path::Path;

use gpucarve::catalogue::Catalogue;
use gpucarve::synth::{Shape, type_shape};

const SIZES: [usize; 2] = [1 << 20, 4 << 20];

/// Bytes under `dir`, files and reports.
fn du(dir: &Path) -> u64 {
    common::files_under(dir)
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// The number after `key` in audit.txt's line starting with `line`.
fn audit_number(audit: &str, line: &str, key: &str) -> u64 {
    let l = audit
        .lines()
        .find(|l| l.starts_with(line))
        .unwrap_or_else(|| panic!("no `{line}` line in audit.txt:\n{audit}"));
    let words: Vec<&str> = l.split_whitespace().collect();
    let i = words
        .iter()
        .position(|w| *w == key)
        .unwrap_or_else(|| panic!("no `{key}` in `{l}`"));
    words[i - 1]
        .parse()
        .unwrap_or_else(|e| panic!("`{l}`: {e}"))
}

/// Carves `bytes` with every option that writes more and checks the bounds.
fn check(name: &str, bytes: &[u8]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let img = dir.path().join("hostile.img");
    std::fs::write(&img, bytes).expect("write image");
    let out = dir.path().join("out");
    let o = common::carve_cmd(&img, &out)
        .args([
            "--keep",
            "partial,unvalidated",
            "--keep-embedded",
            "--input",
            "raw",
            "--threads",
            "2",
        ])
        .output()
        .expect("run gpucarve");
    assert!(
        o.status.success(),
        "{name}: status {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let audit = std::fs::read_to_string(out.join("audit.txt")).expect("audit.txt");
    let len = bytes.len() as u64;
    let written = du(&out);
    let limit = gpucarve::carve::bound::output_limit(len);
    assert!(
        written <= limit,
        "{name}: {written} bytes of output for a {len}-byte image (bound {limit})"
    );
    let work = audit_number(&audit, "work:", "bytes");
    let hits = audit_number(&audit, "scanned:", "signature");
    let bound = gpucarve::carve::work_limit(len, hits);
    assert!(
        work <= bound,
        "{name}: read {work} bytes for a {len}-byte image with {hits} hits (bound {bound})"
    );
}

fn every_type(shape: Shape) {
    let cat = Catalogue::builtin();
    for t in &cat.types {
        for (k, &size) in SIZES.iter().enumerate() {
            let img = type_shape(&cat, &t.name, shape, size, 7 + k as u64).expect("type");
            check(&format!("{} {} {size}", t.name, shape.name()), &img);
        }
    }
}

#[test]
fn every_type_back_to_back() {
    every_type(Shape::BackToBack);
}

#[test]
fn every_type_in_noise() {
    every_type(Shape::InNoise);
}

#[test]
fn every_type_with_max_lengths() {
    every_type(Shape::MaxLengths);
}

#[test]
fn every_type_with_self_referencing_offsets() {
    every_type(Shape::SelfReferencing);
}

/// A header in every sector of tiny chunks, each sector one chunk of the
/// walks before it ([`gpucarve::synth::tiny_walks`]): each header's walk
/// would run to the image's end (quadratic: at 16 MiB about 16 times the
/// bound) unless walks are remembered across candidates.
#[test]
fn tiny_chunk_walks_under_a_header_per_sector() {
    for t in ["wav", "mp4", "mkv"] {
        for size in [1 << 20, 16 << 20] {
            let img = gpucarve::synth::tiny_walks(t, size).expect("a tiny-walks type");
            check(&format!("{t} tiny-walks {size}"), &img);
        }
    }
}

/// `unit` repeated to `len` bytes.
fn repeat(unit: &[u8], len: usize) -> Vec<u8> {
    unit.iter().copied().cycle().take(len).collect()
}

#[test]
fn mixed_headers_and_the_shapes_found_by_hand() {
    let cat = Catalogue::builtin();
    let ogg_page = {
        let mut p = b"OggS\x00\x02".to_vec();
        p.extend([0; 8]);
        p.extend([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 30]);
        p.extend(b"\x01vorbis");
        p.extend([0; 23]);
        p
    };
    let by_hand: [(&str, Vec<u8>); 5] = [
        ("pdf header lines", b"%PDF-1.4\n%\xe2\xe3\n".to_vec()),
        (
            "pdf streams claiming 99999999 bytes",
            b"%PDF-1.7\n1 0 obj << /Length 99999999 >> stream\n".to_vec(),
        ),
        ("shebang lines", b"#!/bin/sh\n".to_vec()),
        (
            "mp4 ftyp boxes",
            b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2".to_vec(),
        ),
        ("ogg pages", ogg_page),
    ];
    for (k, &size) in SIZES.iter().enumerate() {
        check(
            &format!("mixed {size}"),
            &gpucarve::synth::dense_headers(&cat, size, 3 + k as u64),
        );
        for (name, unit) in &by_hand {
            check(&format!("{name} {size}"), &repeat(unit, size));
        }
    }
}

/// A raw image that starts like a gzip file is refused with the way to
/// carve it, and carved with `--input raw`.
#[test]
fn an_image_that_only_looks_like_a_container() {
    let dir = tempfile::tempdir().expect("temp dir");
    let img = dir.path().join("disk.img");
    // A gzip header, then an invalid deflate block type (11) at once.
    let mut bytes = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0];
    bytes.resize(1 << 16, 0xFF);
    std::fs::write(&img, &bytes).expect("write");
    let out = dir.path().join("auto");
    let o = common::carve_cmd(&img, &out).output().expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "carved as gzip: {err}");
    assert!(
        err.contains("starts like a gzip file") && err.contains("--input raw"),
        "{err}"
    );
    let out = dir.path().join("raw");
    common::carve_ok(&img, &out, &["--input", "raw"]);
    let audit = std::fs::read_to_string(out.join("audit.txt")).expect("audit");
    assert!(audit.contains("image size: 65536 bytes"), "{audit}");
    // gzip headers in random bytes: nothing decodes from the start.
    let cat = Catalogue::builtin();
    let shape = type_shape(&cat, "gzip", Shape::InNoise, 1 << 16, 5).expect("gzip");
    std::fs::write(&img, shape).expect("write");
    let o = common::carve_cmd(&img, &dir.path().join("noise"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--input raw"), "{err}");
}

/// `gpucarve synth` makes the shapes the test uses, and never writes over
/// an existing file (it could be evidence).
#[test]
fn synth_writes_only_new_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let img = dir.path().join("pdf.img");
    let path = img.to_str().expect("utf-8 path");
    let args = [
        "synth",
        "--type",
        "pdf",
        "--shape",
        "back-to-back",
        "--size",
        "64KiB",
        "-o",
        path,
    ];
    let o = common::run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let made = std::fs::read(&img).expect("image");
    let cat = Catalogue::builtin();
    assert_eq!(
        made,
        type_shape(&cat, "pdf", Shape::BackToBack, 64 << 10, 1).expect("pdf")
    );
    std::fs::write(&img, b"evidence").expect("write");
    let o = common::run(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("exists"), "{err}");
    assert_eq!(std::fs::read(&img).expect("read"), b"evidence");
}
