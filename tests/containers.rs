//! An E01 reads as the raw image it was made from, whatever the read:
//! short reads (through the kept decoded chunks), long ones (decoded on
//! every core, in pieces of chunks), reads across chunk and segment
//! boundaries, from many threads at once; and a damaged chunk reads as zeros
//! and is listed the same way whether it was met by a long read or a short
//! one. (`tests/batch.rs` compares scans and carvings of the same image in
//! every container form.)

mod common;

use std::path::Path;

use gpucarve::source::Image;
use gpucarve::source::any::open_any;

use common::{ewfacquire, sh};
use gpucarve::synth::XorShift as Rng;

/// `raw` as an E01 set of 3 MiB segments (deflate), or None where
/// ewfacquire is missing (a failure under GPUCARVE_REQUIRE_SAMPLES=1).
fn e01_of(dir: &Path, raw: &str, name: &str) -> Option<std::path::PathBuf> {
    ewfacquire(
        &format!("-u -t {name} -f encase6 -c deflate:fast -S 3MiB -q {raw}"),
        dir,
    )
    .then(|| dir.join(format!("{name}.E01")))
}

/// A read of `len` bytes at `offset`: random, chunk-aligned, crossing a
/// chunk, or long (a scan block's size), anywhere in an image of `size`.
fn random_read(rng: &mut Rng, size: u64) -> (u64, usize) {
    const CHUNK: u64 = 32 << 10;
    let len = match rng.below(5) {
        0 => rng.below(64) + 1,
        1 => rng.below(CHUNK * 3) + 1,
        2 => rng.below(1 << 20) + 1,
        3 => (1 << 20) + rng.below(3 << 20),
        _ => 4 << 20,
    };
    let offset = match rng.below(3) {
        0 => rng.below(size),
        1 => rng.below(size / CHUNK) * CHUNK,
        _ => (rng.below(size / CHUNK) * CHUNK).saturating_sub(rng.below(100) + 1),
    };
    (offset, len as usize)
}

fn read(img: &Image, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xeeu8; len];
    let n = img.read_at(offset, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn e01_reads_equal_the_raw_image() {
    let dir = tempfile::tempdir().unwrap();
    let Some(raw) = common::raw_image(dir.path(), "img.dd", "12MiB", 11) else {
        return;
    };
    let Some(e01) = e01_of(dir.path(), "img.dd", "img") else {
        return;
    };
    assert!(
        dir.path().join("img.E02").exists(),
        "a set of several segments"
    );
    let want = std::fs::read(&raw).unwrap();
    let size = want.len() as u64;
    let img = open_any(&e01).unwrap();
    assert_eq!(img.len(), size);
    // The carving asks for more decoded chunks to be kept; reads are the
    // same before and after.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..2 {
        if round == 1 {
            img.media().keep_decoded(64 << 20);
        }
        for _ in 0..300 {
            let (offset, len) = random_read(&mut rng, size);
            let end = (offset + len as u64).min(size) as usize;
            let start = (offset as usize).min(end);
            assert!(
                read(&img, offset, len) == want[start..end],
                "read of {len} bytes at {offset} differs from the raw image"
            );
        }
    }
    // The whole image in one read, and from four threads at once.
    assert!(read(&img, 0, want.len()) == want);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (img, want) = (&img, &want);
            s.spawn(move || {
                let mut rng = Rng(t * 7919 + 1);
                for _ in 0..100 {
                    let (offset, len) = random_read(&mut rng, size);
                    let end = (offset + len as u64).min(size) as usize;
                    let start = (offset as usize).min(end);
                    assert!(read(img, offset, len) == want[start..end]);
                }
            });
        }
    });
    assert!(img.media().damage().is_empty());
}

#[test]
fn a_damaged_chunk_reads_as_zeros_by_any_read() {
    let dir = tempfile::tempdir().unwrap();
    let Some(raw) = common::raw_image(dir.path(), "img.dd", "6MiB", 12) else {
        return;
    };
    let Some(e01) = e01_of(dir.path(), "img.dd", "bad") else {
        return;
    };
    let want = std::fs::read(&raw).unwrap();
    // Two compressed chunks of the first segment, stored bytes flipped in
    // their middle.
    let (chunk, hit) = {
        let r = ewf::EwfReader::open_lazy(&e01).unwrap();
        let chunk = r.chunk_size();
        let hit: Vec<(u64, u64, u64)> = (0..r.chunk_count())
            .filter_map(|i| {
                let (at, size, compressed, segment) = r.debug_chunk(i).ok()?;
                (compressed && segment == 0 && size > 200).then_some((i as u64, at, size))
            })
            .skip(5)
            .step_by(17)
            .take(2)
            .collect();
        (chunk, hit)
    };
    assert_eq!(hit.len(), 2, "compressed chunks in the first segment");
    let mut seg = std::fs::read(&e01).unwrap();
    for &(_, at, size) in &hit {
        let mid = (at + size / 2) as usize;
        for b in &mut seg[mid..mid + 16] {
            *b ^= 0xa5;
        }
    }
    std::fs::write(&e01, seg).unwrap();
    let expect = |start: u64, len: u64| -> Vec<u8> {
        let mut v = want[start as usize..(start + len) as usize].to_vec();
        for &(i, _, _) in &hit {
            let (a, b) = (i * chunk, (i + 1) * chunk);
            for (k, byte) in v.iter_mut().enumerate() {
                let at = start + k as u64;
                if a <= at && at < b {
                    *byte = 0;
                }
            }
        }
        v
    };
    let size = want.len() as u64;
    let listed = |img: &Image| -> Vec<(u64, u64)> {
        img.media()
            .damage()
            .iter()
            .map(|d| (d.offset, d.len))
            .collect()
    };
    // One long read (every core), then short reads of a fresh image.
    let long = open_any(&e01).unwrap();
    let got = read(&long, 0, want.len());
    let exp = expect(0, size);
    let first = got.iter().zip(&exp).position(|(a, b)| a != b);
    assert!(
        got == exp,
        "first difference at {first:?} (chunk {chunk}, {hit:?}), {:?}",
        listed(&long)
    );
    let short = open_any(&e01).unwrap();
    let mut at = 0u64;
    let mut rng = Rng(77);
    while at < size {
        let len = (rng.below(100_000) + 1).min(size - at);
        assert!(read(&short, at, len as usize) == expect(at, len), "at {at}");
        at += len;
    }
    let want_damage: Vec<(u64, u64)> = hit.iter().map(|&(i, _, _)| (i * chunk, chunk)).collect();
    assert_eq!(listed(&long), want_damage);
    assert_eq!(listed(&short), want_damage);
}

/// Every EWF flavour ewfacquire writes (EnCase 2-7, FTK, linen, SMART
/// `.s01`, EWF `.e01`; stored, deflated and empty-block chunks; one segment
/// or many) reads as the raw image, with no damage. (The last chunk of a
/// segment has no stored size: SMART sets came out short of it, and
/// multi-segment `.e01`/`.s01` sets long.)
#[test]
fn every_ewf_flavour_reads_as_the_raw_image() {
    let dir = tempfile::tempdir().unwrap();
    let Some(raw) = common::raw_image(dir.path(), "img.dd", "3MiB", 13) else {
        return;
    };
    let want = std::fs::read(&raw).unwrap();
    let mut tried = 0;
    for format in [
        "encase2", "encase6", "encase7", "ftk", "linen6", "smart", "ewf",
    ] {
        for compression in ["none", "deflate:fast", "empty-block"] {
            for segment in ["1MiB", "4GiB"] {
                let name = format!("{format}-{}-{segment}", compression.replace(':', "-"));
                assert!(sh(&format!("mkdir {name}"), dir.path()));
                let made = ewfacquire(
                    &format!("-u -t {name}/x -f {format} -c {compression} -S {segment} -q img.dd"),
                    dir.path(),
                );
                if !made {
                    continue;
                }
                let mut first: Vec<_> = std::fs::read_dir(dir.path().join(&name))
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect();
                first.sort();
                let img = open_any(&first[0]).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(read(&img, 0, want.len()) == want, "{name}: bytes differ");
                assert!(
                    img.media().damage().is_empty(),
                    "{name}: {:?}",
                    img.media().damage()
                );
                tried += 1;
            }
        }
    }
    assert!(tried == 0 || tried == 42, "{tried} flavours read");
}
