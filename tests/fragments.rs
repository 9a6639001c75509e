//! Bifragment gap carving (`src/carve/fragments.rs`): hand-built images with
//! a PNG, ZIP or JPEG split in two at cluster boundaries, recovered exactly;
//! joins that are not proven stay partial.

mod common;

use std::io::Write;

use gpucarve::carve::fragments::{FragLimits, Fragments, recover};
use gpucarve::carve::validators::{Limits, Status, validate};
use sha2::{Digest, Sha256};

const CL: u64 = 512;

/// Deterministic pseudo-random bytes (xorshift).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    gpucarve::synth::XorShift(seed | 1).bytes(n)
}

fn png_chunk(out: &mut Vec<u8>, ty: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(ty);
    out.extend_from_slice(data);
    let mut h = crc32fast::Hasher::new();
    h.update(ty);
    h.update(data);
    out.extend_from_slice(&h.finalize().to_be_bytes());
}

/// A PNG of a few KiB: IHDR, text, several IDAT chunks of noise, IEND
/// (the validator checks the chunk chain and CRCs, not the pixels).
fn png(seed: u64, idats: usize, idat_len: usize) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&64u32.to_be_bytes());
    ihdr.extend_from_slice(&64u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    png_chunk(&mut v, b"IHDR", &ihdr);
    png_chunk(&mut v, b"tEXt", b"Comment\0fragment test");
    for i in 0..idats {
        png_chunk(&mut v, b"IDAT", &noise(seed + i as u64, idat_len));
    }
    png_chunk(&mut v, b"IEND", b"");
    v
}

/// A ZIP with stored and deflated entries.
fn zip(seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    let mut n = 0u16;
    for i in 0..6u64 {
        let name = format!("dir/entry-{i}.txt");
        let raw: Vec<u8> = if i % 2 == 0 {
            noise(seed * 10 + i, 900 + 300 * i as usize)
        } else {
            (0..4000 + 500 * i)
                .map(|k| b"hello fragment world "[(k % 21) as usize])
                .collect()
        };
        let crc = crc32fast::hash(&raw);
        let (method, data) = if i % 2 == 0 {
            (0u16, raw.clone())
        } else {
            let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&raw).unwrap();
            (8u16, z.finish().unwrap())
        };
        let local = out.len() as u32;
        out.extend_from_slice(b"PK\x03\x04");
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&method.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0x21, 0]);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&data);
        central.extend_from_slice(b"PK\x01\x02");
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&method.to_le_bytes());
        central.extend_from_slice(&[0, 0, 0x21, 0]);
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        central.extend_from_slice(&(name.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0; 12]);
        central.extend_from_slice(&local.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
        n += 1;
    }
    let cd_off = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_off.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// An image of `len` noise bytes with `pieces` `(image offset, bytes)` written in.
fn image(len: usize, pieces: &[(u64, &[u8])]) -> Vec<u8> {
    let mut img = noise(0xfeed, len);
    for (off, b) in pieces {
        let o = *off as usize;
        img[o..o + b.len()].copy_from_slice(b);
    }
    img
}

/// The bytes of `runs` in the image.
fn assemble(img: &[u8], runs: &[(u64, u64)]) -> Vec<u8> {
    runs.iter()
        .flat_map(|&(o, l)| img[o as usize..(o + l) as usize].iter().copied())
        .collect()
}

fn sha(b: &[u8]) -> Vec<u8> {
    Sha256::digest(b).to_vec()
}

/// `file` split after `split` bytes; first piece at `a`, second at `b`.
fn fragmented(file: &[u8], split: usize, a: u64, b: u64, len: usize) -> Vec<u8> {
    image(len, &[(a, &file[..split]), (b, &file[split..])])
}

fn try_recover(name: &str, img: &[u8], start: u64) -> gpucarve::carve::fragments::Attempt {
    let img = img.to_vec();
    recover(
        name,
        &img,
        start,
        img.len() as u64 - start,
        CL,
        &FragLimits::default(),
    )
}

#[test]
fn png_in_order_recovered_exactly() {
    let p = png(1, 4, 3000);
    let split = 5 * CL as usize; // inside the first IDAT
    let (a, b) = (8 * CL, 8 * CL + split as u64 + 7 * CL);
    let img = fragmented(&p, split, a, b, 64 * 1024);
    let v = validate(
        "png",
        &img,
        a,
        Limits { max_len: u64::MAX },
        &gpucarve::carve::validators::NO_CONTEXT,
    )
    .unwrap();
    assert_eq!(v.status, Status::Partial);
    let got = try_recover("png", &img, a);
    let j = got.joined.expect(&got.note);
    assert_eq!(
        j.runs,
        vec![(a, split as u64), (b, (p.len() - split) as u64)]
    );
    assert_eq!(sha(&assemble(&img, &j.runs)), sha(&p));
    assert!(j.notes[0].starts_with("bifragment join proven by PNG"));
}

#[test]
fn png_out_of_order_and_split_at_chunk_boundary() {
    let p = png(2, 3, 4000);
    let split = 9 * CL as usize;
    let (a, b) = (40 * CL, 20 * CL);
    let img = fragmented(&p, split, a, b, 64 * 1024);
    let j = try_recover("png", &img, a).joined.unwrap();
    assert_eq!(
        j.runs,
        vec![(a, split as u64), (b, (p.len() - split) as u64)]
    );
    assert_eq!(sha(&assemble(&img, &j.runs)), sha(&p));

    // A PNG whose chunks end exactly on a cluster boundary: pad with a tEXt chunk.
    let mut q = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = 64u32.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&64u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    png_chunk(&mut q, b"IHDR", &ihdr);
    let pad = 2 * CL as usize - q.len() - 12;
    png_chunk(&mut q, b"tEXt", &vec![b'a'; pad]);
    assert_eq!(q.len(), 2 * CL as usize);
    png_chunk(&mut q, b"IDAT", &noise(9, 3000));
    png_chunk(&mut q, b"IEND", b"");
    let img = fragmented(&q, 2 * CL as usize, 4 * CL, 10 * CL, 32 * 1024);
    let j = try_recover("png", &img, 4 * CL).joined.unwrap();
    assert_eq!(sha(&assemble(&img, &j.runs)), sha(&q));
}

#[test]
fn png_without_its_second_half_stays_partial() {
    let p = png(3, 4, 3000);
    let split = 6 * CL as usize;
    let img = image(64 * 1024, &[(4 * CL, &p[..split])]);
    let got = try_recover("png", &img, 4 * CL);
    assert!(got.joined.is_none(), "{got:?}");
    assert!(got.note.contains("candidates"));
    // Through the carver hook: the verdict stays Partial, no runs.
    let mut f = Fragments::new(Some(CL));
    let v = validate(
        "png",
        &img,
        4 * CL,
        Limits { max_len: u64::MAX },
        &gpucarve::carve::validators::NO_CONTEXT,
    );
    let (v, runs) = f.after_validate("png", &img, 4 * CL, img.len() as u64 - 4 * CL, v);
    assert_eq!(v.unwrap().status, Status::Partial);
    assert!(runs.is_none());
}

#[test]
fn halves_of_two_different_pngs_are_not_joined() {
    // Same chunk layout, different data: only the CRCs tell them apart.
    let p1 = png(4, 4, 3000);
    let p2 = png(5, 4, 3000);
    assert_eq!(p1.len(), p2.len());
    let split = 7 * CL as usize;
    let img = image(
        64 * 1024,
        &[(2 * CL, &p1[..split]), (30 * CL, &p2[split..])],
    );
    let got = try_recover("png", &img, 2 * CL);
    assert!(got.joined.is_none(), "{got:?}");
}

#[test]
fn zip_in_order_recovered_exactly() {
    let z = zip(1);
    for split in [2 * CL as usize, 5 * CL as usize, 8 * CL as usize] {
        assert!(split < z.len());
        let (a, b) = (6 * CL, 6 * CL + split as u64 + 5 * CL);
        let img = fragmented(&z, split, a, b, 96 * 1024);
        let got = try_recover("zip", &img, a);
        let j = got.joined.expect(&got.note);
        assert_eq!(
            j.runs,
            vec![(a, split as u64), (b, (z.len() - split) as u64)]
        );
        assert_eq!(sha(&assemble(&img, &j.runs)), sha(&z));
        assert!(j.notes[0].starts_with("bifragment join proven by ZIP"));
    }
}

#[test]
fn zip_out_of_order_and_split_in_central_directory() {
    let z = zip(2);
    let split = 10 * CL as usize;
    let img = fragmented(&z, split, 100 * CL, 40 * CL, 96 * 1024);
    let j = try_recover("zip", &img, 100 * CL).joined.unwrap();
    assert_eq!(sha(&assemble(&img, &j.runs)), sha(&z));
    // Split inside the central directory (the last cluster boundary before the EOCD).
    let split = (z.len() - 30) / CL as usize * CL as usize;
    let img = fragmented(&z, split, 2 * CL, 2 * CL + split as u64 + 3 * CL, 96 * 1024);
    let j = try_recover("zip", &img, 2 * CL).joined.unwrap();
    assert_eq!(sha(&assemble(&img, &j.runs)), sha(&z));
}

#[test]
fn zip_halves_of_different_archives_or_copies_are_not_joined() {
    let (z1, z2) = (zip(3), zip(4));
    assert_eq!(z1.len(), z2.len());
    let split = 10 * CL as usize;
    let img = image(
        96 * 1024,
        &[(2 * CL, &z1[..split]), (60 * CL, &z2[split..])],
    );
    assert!(try_recover("zip", &img, 2 * CL).joined.is_none());
    // The tail of a contiguous copy of the same archive is not grafted on.
    let img = image(96 * 1024, &[(2 * CL, &z1[..split]), (60 * CL, &z1)]);
    assert!(try_recover("zip", &img, 2 * CL).joined.is_none());
}

/// A real JPEG from `corpora/samples` (licences in its MANIFEST.tsv).
fn sample_jpeg(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpora/samples")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn jpeg_in_order_and_out_of_order_recovered_exactly() {
    // A progressive and a baseline picture, split at a cluster boundary
    // inside their entropy-coded data, the gap filled with noise.
    for (name, split_cl) in [("d-debian.jpg", 100), ("debian_logo.jpg", 40)] {
        let j = sample_jpeg(name);
        let split = split_cl * CL as usize;
        let len = 1 << 20;
        for (a, b) in [
            (8 * CL, 8 * CL + split as u64 + 37 * CL),
            (700 * CL, 20 * CL),
        ] {
            let img = fragmented(&j, split, a, b, len);
            let got = try_recover("jpeg", &img, a);
            let joined = got
                .joined
                .unwrap_or_else(|| panic!("{name} at {a}/{b}: {}", got.note));
            assert_eq!(
                joined.runs,
                vec![(a, split as u64), (b, (j.len() - split) as u64)],
                "{name}"
            );
            assert_eq!(sha(&assemble(&img, &joined.runs)), sha(&j));
            assert!(joined.notes[0].contains("JPEG entropy decode"));
        }
    }
}

#[test]
fn jpeg_copies_are_not_grafted_onto_each_other() {
    let j = sample_jpeg("d-debian.jpg");
    let split = 100 * CL as usize;
    let a = 8 * CL;
    // The head of one copy, and a whole contiguous copy after it: the copy's
    // clusters belong to the copy, so no join takes its tail.
    let img = image(1 << 20, &[(a, &j[..split]), (600 * CL, &j)]);
    let got = try_recover("jpeg", &img, a);
    assert!(got.joined.is_none(), "{:?}", got.joined);
    // The head followed directly by the middle of another copy (same
    // tables): the split cannot be placed, nothing is joined.
    let img = image(
        1 << 20,
        &[
            (a, &j[..split]),
            (a + split as u64, &j[split - 7 * CL as usize..]),
        ],
    );
    assert!(try_recover("jpeg", &img, a).joined.is_none());
    // The carver hook: a Partial JPEG with nothing to join stays partial.
    let mut f = Fragments::new(Some(CL));
    let img = image(1 << 20, &[(a, &j[..split])]);
    let v = validate(
        "jpeg",
        &img,
        a,
        Limits { max_len: 1 << 19 },
        &gpucarve::carve::validators::NO_CONTEXT,
    )
    .unwrap();
    assert_eq!(v.status, Status::Partial);
    let (v, runs) = f.after_validate("jpeg", &img, a, 1 << 19, Some(v));
    assert_eq!(v.unwrap().status, Status::Partial);
    assert!(runs.is_none());
}

#[test]
fn cli_writes_the_joined_png_with_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let p = png(11, 5, 3000);
    let split = 11 * CL as usize;
    let (a, b) = (16 * CL, 16 * CL + split as u64 + 9 * CL);
    let img = fragmented(&p, split, a, b, 256 * 1024);
    let path = dir.path().join("frag.img");
    std::fs::write(&path, &img).unwrap();
    let out = dir.path().join("out");
    let report = common::carve_report(&path, &out, &["--types", "png", "--cluster-size", "512"]);
    let e = report
        .into_iter()
        .find(|e| e["offset"] == a)
        .expect("the PNG is reported");
    assert_eq!(e["status"], "complete", "{e}");
    let runs: Vec<(u64, u64)> = e["byte_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["img_offset"].as_u64().unwrap(),
                r["len"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(runs, vec![(a, split as u64), (b, (p.len() - split) as u64)]);
    let written = std::fs::read(out.join(e["path"].as_str().unwrap())).unwrap();
    assert_eq!(sha(&written), sha(&p));
}

/// Random placements of real JPEGs split in two (split point, gap, order,
/// noise; other copies of the same picture, same tables, lying around as
/// decoys): a join, when one is written, is the original file byte for byte
/// at its true runs; and most decoy-free cases are joined (a progressive
/// refinement scan accepts almost any bits, so noise after the head that
/// holds no `FF` can leave the split unplaceable: those stay partial).
#[test]
fn a_jpeg_join_is_the_original_or_nothing() {
    let names = ["d-debian.jpg", "debian_logo.jpg", "IMG-20191006-WA0002.jpg"];
    let files: Vec<Vec<u8>> = names.iter().map(|n| sample_jpeg(n)).collect();
    let rng = noise(0x5eed, 6 * 48);
    let (mut clean, mut clean_joined, mut joins) = (0, 0, 0);
    for case in 0..48 {
        let r = &rng[case * 6..case * 6 + 6];
        let which = usize::from(r[0]) % 3;
        let j = &files[which];
        let frac = 0.1 + 0.8 * f64::from(r[1]) / 255.0;
        let split = ((j.len() as f64 * frac) as u64 / CL * CL).max(CL) as usize;
        let gap = 1 + u64::from(r[2]) % 40;
        let out_of_order = r[3] & 1 == 1;
        let decoy = usize::from(r[4]) % 3;
        let mut img = noise(u64::from(r[5]) << 8 | case as u64, 2 << 20);
        let head_len = split as u64;
        let tail_len = (j.len() - split) as u64;
        let (a, b) = if out_of_order {
            (8 * CL + tail_len.div_ceil(CL) * CL + gap * CL, 8 * CL)
        } else {
            (8 * CL, 8 * CL + head_len + gap * CL)
        };
        img[a as usize..a as usize + split].copy_from_slice(&j[..split]);
        img[b as usize..(b + tail_len) as usize].copy_from_slice(&j[split..]);
        // A decoy after both: nothing, a whole copy, or the middle of one.
        let free = ((a.max(b) + head_len.max(tail_len)).div_ceil(CL) + 64) * CL;
        match decoy {
            1 => img[free as usize..free as usize + j.len()].copy_from_slice(j),
            2 => {
                let from = j.len() / 3 / CL as usize * CL as usize;
                img[free as usize..free as usize + j.len() - from].copy_from_slice(&j[from..]);
            }
            _ => clean += 1,
        }
        let got = try_recover("jpeg", &img, a);
        if let Some(joined) = got.joined {
            let what = format!("case {case}: {} split {split} gap {gap}", names[which]);
            assert_eq!(sha(&assemble(&img, &joined.runs)), sha(j), "{what}");
            assert_eq!(joined.runs, vec![(a, head_len), (b, tail_len)], "{what}");
            joins += 1;
            clean_joined += usize::from(decoy == 0);
        }
    }
    eprintln!("JPEG joins: {joins}/48, decoy-free {clean_joined}/{clean}");
    // Measured 45/48 joined (12/13 decoy-free), every one exact.
    assert!(
        clean > 0 && clean_joined * 3 >= clean * 2,
        "{clean_joined}/{clean}"
    );
    assert!(joins * 4 >= 48 * 3, "{joins}/48 joined");
}

/// `file` cut at `cuts` (cluster multiples), piece `i` written at `at[i]`
/// into noise; returns the image and the file's true runs.
fn scattered(file: &[u8], cuts: &[usize], at: &[u64], len: usize) -> (Vec<u8>, Vec<(u64, u64)>) {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(file.len()))
        .collect();
    let pieces: Vec<(u64, &[u8])> = bounds
        .windows(2)
        .zip(at)
        .map(|(w, &o)| (o, &file[w[0]..w[1]]))
        .collect();
    let runs = pieces.iter().map(|&(o, p)| (o, p.len() as u64)).collect();
    (image(len, &pieces), runs)
}

/// Image offsets for pieces of `sizes` bytes laid out in image order
/// `order` (piece indices), with `gaps` clusters of noise between them.
fn layout(sizes: &[usize], order: &[usize], gaps: &[u64]) -> Vec<u64> {
    let mut at = vec![0; sizes.len()];
    let mut pos = 8 * CL;
    for (k, &i) in order.iter().enumerate() {
        at[i] = pos;
        pos += (sizes[i] as u64).div_ceil(CL) * CL + gaps.get(k).copied().unwrap_or(0) * CL;
    }
    at
}

/// Each file in three fragments, in file order and in two shuffled orders:
/// recovered exactly at its true runs; without its last fragment, nothing
/// is joined.
fn three_fragments_recovered(name: &str, file: &[u8], cuts: [usize; 2], note: &str) {
    let sizes = [cuts[0], cuts[1] - cuts[0], file.len() - cuts[1]];
    let len = 4 << 20;
    for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1]] {
        let at = layout(&sizes, &order, &[5, 9]);
        let (img, runs) = scattered(file, &cuts, &at, len);
        let got = try_recover(name, &img, at[0]);
        let j = got
            .joined
            .unwrap_or_else(|| panic!("{name} {order:?}: {}", got.note));
        assert_eq!(j.runs, runs, "{name} {order:?}");
        assert_eq!(sha(&assemble(&img, &j.runs)), sha(file), "{name} {order:?}");
        assert!(
            j.notes.iter().any(|n| n.starts_with(note)),
            "{name} {order:?}: {:?}",
            j.notes
        );
        // The last fragment overwritten with noise: no join.
        let mut img = img;
        let (o, l) = runs[2];
        img[o as usize..(o + l) as usize].copy_from_slice(&noise(77, l as usize));
        let got = try_recover(name, &img, at[0]);
        assert!(got.joined.is_none(), "{name} {order:?}: {:?}", got.joined);
    }
}

#[test]
fn png_in_three_fragments_recovered_exactly() {
    // Six IDAT chunks of 3000 bytes; both cuts inside an IDAT.
    let p = png(21, 6, 3000);
    three_fragments_recovered(
        "png",
        &p,
        [5 * CL as usize, 20 * CL as usize],
        "multi-fragment join proven by PNG",
    );
}

#[test]
fn zip_in_three_fragments_recovered_exactly() {
    let z = zip(23);
    // Both cuts inside stored entries (2 and 4), away from their ends.
    let data_of = |name: &str| {
        let at = z
            .windows(name.len())
            .position(|w| w == name.as_bytes())
            .expect("entry name");
        at + name.len()
    };
    let cut = |name: &str| (data_of(name) + 700) / CL as usize * CL as usize;
    let cuts = [cut("dir/entry-2.txt"), cut("dir/entry-4.txt")];
    assert!(cuts[0] > data_of("dir/entry-2.txt") && cuts[1] > data_of("dir/entry-4.txt"));
    three_fragments_recovered("zip", &z, cuts, "multi-fragment join proven by ZIP");
}

#[test]
fn jpeg_in_three_fragments_recovered_exactly() {
    let j = sample_jpeg("d-debian.jpg");
    for cuts in [[100, 150], [40, 120], [120, 220]] {
        three_fragments_recovered(
            "jpeg",
            &j,
            cuts.map(|c| c * CL as usize),
            "multi-fragment join proven by a JPEG",
        );
    }
    // A cut inside a scan that takes any bits at a fixed rate (DC
    // refinement) cannot be placed by the decode: a foreign cluster in place
    // of the file's own decodes as well. Those files stay partial (in some
    // orders); a join, when one is made, is the original at its true runs.
    for cuts in [[100, 200], [60, 200]] {
        let cuts = cuts.map(|c| c * CL as usize);
        let sizes = [cuts[0], cuts[1] - cuts[0], j.len() - cuts[1]];
        for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1]] {
            let at = layout(&sizes, &order, &[5, 9]);
            let (img, runs) = scattered(&j, &cuts, &at, 4 << 20);
            if let Some(got) = try_recover("jpeg", &img, at[0]).joined {
                assert_eq!(got.runs, runs, "{cuts:?} {order:?}");
            }
        }
    }
}

/// A join proven over a copy of a picture the carving has decoded before
/// (the validation stage's decode, kept in the shared scan memo) is taken
/// from the memo, not decoded again, and is the join a search without it
/// finds; a second search of the same file (as when the carver runs again
/// a search run ahead) finds the same.
#[test]
fn a_join_over_a_known_copy_is_proven_from_the_memo() {
    use gpucarve::carve::fragments::KnownJpegs;
    let j = sample_jpeg("IMG_20200124_231153.jpg");
    let split = 1500 * CL as usize;
    let whole_at = 8 * CL;
    let a = (whole_at + j.len() as u64).next_multiple_of(CL) + 64 * CL;
    let b = a + split as u64 + 40 * CL;
    let len = (b as usize + j.len() - split + 64 * CL as usize).next_power_of_two();
    let img = image(len, &[(whole_at, &j), (a, &j[..split]), (b, &j[split..])]);
    let lim = Limits { max_len: 16 << 20 };
    let v = validate(
        "jpeg",
        &img,
        a,
        lim,
        &gpucarve::carve::validators::NO_CONTEXT,
    )
    .unwrap();
    assert_eq!(v.status, Status::Partial);
    let search = |known: Option<std::sync::Arc<KnownJpegs>>| {
        let mut f = Fragments::new(Some(CL));
        if let Some(k) = known {
            f.share_jpegs(k);
        }
        f.after_validate("jpeg", &img, a, lim.max_len, Some(v.clone()))
    };
    let plain = search(None);
    assert_eq!(
        plain.1,
        Some(vec![(a, split as u64), (b, (j.len() - split) as u64)])
    );
    let known = std::sync::Arc::new(KnownJpegs::default());
    // The stage's validation of the whole copy, under the carving's memo.
    let shared = gpucarve::carve::validators::Context::NONE.with_jpeg_memo(&known.scan_memo, &img);
    let whole = validate("jpeg", &img, whole_at, lim, &shared);
    assert_eq!(whole.unwrap().status, Status::Complete);
    let before = known.scan_memo.hits().0 + known.scan_memo.resumes().0;
    assert_eq!(search(Some(known.clone())), plain);
    let after = known.scan_memo.hits().0 + known.scan_memo.resumes().0;
    assert!(after > before, "the join's proof was decoded again");
    assert_eq!(search(Some(known)), plain);
}

/// Where the local header of entry `i` of [`zip`]'s archive starts.
fn local_header(z: &[u8], i: usize) -> usize {
    let name = format!("dir/entry-{i}.txt");
    z.windows(name.len())
        .position(|w| w == name.as_bytes())
        .expect("entry name")
        - 30
}

/// A ZIP cut inside a local header's fixed fields (its sizes and name
/// length in the next fragment) and again inside a later stored entry:
/// the crossing reads the header through the join and proves it by the
/// entry's CRC-32; recovered exactly in every order, and not without its
/// second fragment. (A cluster size of the header's offset + 16 puts the
/// cut there.)
#[test]
fn zip_cut_inside_a_local_header_recovered_exactly() {
    let z = zip(29);
    let cl = local_header(&z, 2) as u64 + 16;
    let cuts = [cl as usize, 3 * cl as usize];
    assert!(cuts[1] > local_header(&z, 4) + 60 && cuts[1] < local_header(&z, 5));
    let sizes = [cuts[0], cuts[1] - cuts[0], z.len() - cuts[1]];
    for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1]] {
        let mut at = [0u64; 3];
        let mut pos = 8 * cl;
        for (k, &i) in order.iter().enumerate() {
            at[i] = pos;
            pos += (sizes[i] as u64).div_ceil(cl) * cl + [5, 9, 0][k] * cl;
        }
        let (img, runs) = scattered(&z, &cuts, &at, 1 << 20);
        let got = recover(
            "zip",
            &img,
            at[0],
            img.len() as u64 - at[0],
            cl,
            &FragLimits::default(),
        );
        let j = got
            .joined
            .unwrap_or_else(|| panic!("{order:?}: {}", got.note));
        assert_eq!(j.runs, runs, "{order:?}");
        assert_eq!(sha(&assemble(&img, &j.runs)), sha(&z), "{order:?}");
        let mut img = img;
        let (o, l) = runs[1];
        img[o as usize..(o + l) as usize].copy_from_slice(&noise(78, l as usize));
        let got = recover(
            "zip",
            &img,
            at[0],
            img.len() as u64 - at[0],
            cl,
            &FragLimits::default(),
        );
        assert!(got.joined.is_none(), "{order:?}: {:?}", got.joined);
    }
}

/// A PNG in five fragments (`MAX_RUNS`), every cut inside an IDAT, in file
/// order and shuffled: each crossing proven by its chunk's CRC, the file
/// recovered exactly at its true runs; with a middle fragment overwritten,
/// nothing is joined.
#[test]
fn png_in_five_fragments_recovered_exactly() {
    let p = png(31, 8, 3000);
    let cuts: Vec<usize> = [5, 15, 25, 35].iter().map(|c| c * CL as usize).collect();
    assert!(*cuts.last().unwrap() < p.len());
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(p.len()))
        .collect();
    let sizes: Vec<usize> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
    for order in [[0, 1, 2, 3, 4], [4, 2, 0, 3, 1], [0, 3, 1, 4, 2]] {
        let at = layout(&sizes, &order, &[3, 7, 2, 11]);
        let (img, runs) = scattered(&p, &cuts, &at, 4 << 20);
        let got = try_recover("png", &img, at[0]);
        let j = got
            .joined
            .unwrap_or_else(|| panic!("{order:?}: {}", got.note));
        assert_eq!(j.runs, runs, "{order:?}");
        assert_eq!(sha(&assemble(&img, &j.runs)), sha(&p), "{order:?}");
        let mut img = img;
        let (o, l) = runs[2];
        img[o as usize..(o + l) as usize].copy_from_slice(&noise(79, l as usize));
        let got = try_recover("png", &img, at[0]);
        assert!(got.joined.is_none(), "{order:?}: {:?}", got.joined);
    }
}

/// A JPEG in five fragments (each crossing proven by the decode running
/// on past it, the join by the exact MCU count and by no other order of
/// its runs decoding as well): in file order, recovered exactly at its
/// true runs; shuffled, recovered exactly or not at all (a progressive
/// picture's fragments decode after each other's: the search follows two
/// crossings per run and may spend them on wrong ones); with a middle
/// fragment overwritten, nothing is joined.
#[test]
fn jpeg_in_five_fragments_recovered_exactly() {
    let j = sample_jpeg("d-debian.jpg");
    let cuts: Vec<usize> = [40, 80, 130, 180].iter().map(|c| c * CL as usize).collect();
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(j.len()))
        .collect();
    let sizes: Vec<usize> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
    let mut found_shuffled = 0;
    for order in [
        [0, 1, 2, 3, 4],
        [0, 3, 1, 4, 2],
        [4, 2, 0, 3, 1],
        [2, 0, 4, 1, 3],
    ] {
        let at = layout(&sizes, &order, &[3, 7, 2, 11]);
        let (img, runs) = scattered(&j, &cuts, &at, 4 << 20);
        let got = try_recover("jpeg", &img, at[0]);
        match got.joined {
            Some(found) => {
                assert_eq!(found.runs, runs, "{order:?}");
                assert_eq!(sha(&assemble(&img, &found.runs)), sha(&j), "{order:?}");
                found_shuffled += usize::from(order[0] != 0 || order[1] != 1);
            }
            None => assert_ne!(order, [0, 1, 2, 3, 4], "{}", got.note),
        }
        let mut img = img;
        let (o, l) = runs[2];
        img[o as usize..(o + l) as usize].copy_from_slice(&noise(81, l as usize));
        let got = try_recover("jpeg", &img, at[0]);
        assert!(got.joined.is_none(), "{order:?}: {:?}", got.joined);
    }
    eprintln!("shuffled five-fragment JPEG layouts joined: {found_shuffled} of 3");
    assert!(found_shuffled >= 1, "no shuffled layout joined");
}

/// The cluster size estimated from complete files' starts: on a 4096-byte
/// grid where 9 of 12 starts happen to be 8192-aligned, 4096 (a size is
/// doubled only while it keeps 90% of the starts in phase); one start off
/// the grid does not lower it; a true 8192-byte grid is 8192.
#[test]
fn cluster_estimate_is_not_doubled_by_chance() {
    use gpucarve::carve::fragments::estimate_cluster;
    let starts: Vec<u64> = [2u64, 4, 6, 8, 10, 12, 14, 16, 18, 3, 5, 7]
        .iter()
        .map(|c| c * 4096)
        .collect();
    assert_eq!(estimate_cluster(&starts, 20 * 4096), 4096);
    assert_eq!(estimate_cluster(&starts, 21 * 4096), 4096);
    let off = [4096u64, 2 * 4096, 9 * 4096, 3314];
    assert_eq!(estimate_cluster(&off, 11 * 4096), 4096);
    let wide: Vec<u64> = (1..13).map(|c| c * 8192).collect();
    assert_eq!(estimate_cluster(&wide, 40 * 8192), 8192);
}
