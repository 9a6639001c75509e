//! Hostile shapes: inputs built to make a carver loop, allocate or write
//! without bound. Each image is carved (all types, default options, as a
//! separate process) and must finish with status 0, no panic, within the
//! bounds below; the measured time and peak RSS are printed (run with
//! `--nocapture`: RELIABILITY.md's table comes from there).
//!
//! Bounds (generous: the test machine is slow and shared): 120 s and
//! 1 GiB peak resident memory per image of at most 16 MiB, and an output
//! folder (files + reports) of at most 4 times the image plus 16 MiB.
//! Measured on the 2-core VM: at most 2 s and 250 MiB (RELIABILITY.md).
//! Two shapes failed the time bound before their fixes (PNGs claiming
//! 2 GiB chunks: the fragment search; TIFF strip tables reaching the image
//! end: O(image) reads per header), and looping OLE2 directories were
//! called complete. FAT32 volumes whose one allocated chain holds a header
//! at every cluster (or loops) bound the chain walk (`MAX_FAT_LINKS` in
//! `src/carve/geometry.rs`).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

const TIME_LIMIT: Duration = Duration::from_secs(120);
const RSS_LIMIT_KIB: i64 = 1 << 20;

fn be32(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}
fn le16(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}
fn le32(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}

/// `unit` repeated every `stride` bytes (zero padding) up to `len`.
fn tile(unit: &[u8], stride: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut at = 0;
    while at + unit.len() <= len {
        out[at..at + unit.len()].copy_from_slice(unit);
        at += stride.max(unit.len());
    }
    out
}

fn png_chunk(ty: &[u8; 4], data: &[u8], len_field: u32) -> Vec<u8> {
    let mut c = Vec::new();
    c.extend_from_slice(&be32(len_field));
    c.extend_from_slice(ty);
    c.extend_from_slice(data);
    let mut h = crc32fast::Hasher::new();
    h.update(ty);
    h.update(data);
    c.extend_from_slice(&be32(h.finalize()));
    c
}

/// A PNG whose IDAT claims `claim` bytes (4 GiB - 16: beyond the format's
/// 2^31 - 1; 2 GiB - 16: the largest legal claim).
fn png_claiming(claim: u32) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    let ihdr = [0, 0, 1, 0, 0, 0, 1, 0, 8, 2, 0, 0, 0];
    v.extend(png_chunk(b"IHDR", &ihdr, 13));
    v.extend_from_slice(&be32(claim));
    v.extend_from_slice(b"IDAT");
    v.extend(std::iter::repeat_n(0x55, 2000));
    v
}

/// A stored (uncompressed) ZIP holding `name` = `data`.
fn zip_stored(name: &str, data: &[u8]) -> Vec<u8> {
    let crc = crc32fast::hash(data);
    let mut v = Vec::new();
    v.extend_from_slice(b"PK\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00");
    v.extend_from_slice(&le32(crc));
    v.extend_from_slice(&le32(data.len() as u32));
    v.extend_from_slice(&le32(data.len() as u32));
    v.extend_from_slice(&le16(name.len() as u16));
    v.extend_from_slice(&le16(0));
    v.extend_from_slice(name.as_bytes());
    v.extend_from_slice(data);
    let cd = v.len() as u32;
    v.extend_from_slice(b"PK\x01\x02\x14\x00\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00");
    v.extend_from_slice(&le32(crc));
    v.extend_from_slice(&le32(data.len() as u32));
    v.extend_from_slice(&le32(data.len() as u32));
    v.extend_from_slice(&le16(name.len() as u16));
    v.extend_from_slice(&[0; 8]); // extra, comment, disk, internal attrs
    v.extend_from_slice(&le32(0)); // external attrs
    v.extend_from_slice(&le32(0)); // local header offset
    v.extend_from_slice(name.as_bytes());
    let cd_len = v.len() as u32 - cd;
    v.extend_from_slice(b"PK\x05\x06\x00\x00\x00\x00\x01\x00\x01\x00");
    v.extend_from_slice(&le32(cd_len));
    v.extend_from_slice(&le32(cd));
    v.extend_from_slice(&le16(0));
    v
}

/// ZIPs within ZIPs, `depth` deep.
fn zip_nested(depth: usize) -> Vec<u8> {
    let mut z = zip_stored("core.txt", b"the innermost file\n");
    for i in 0..depth {
        z = zip_stored(&format!("level{i}.zip"), &z);
    }
    z
}

/// ZIP records with sizes, counts and offsets at their maxima, and a
/// central directory entry whose local header offset points at itself.
fn zip_huge() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(b"PK\x03\x04\x14\x00\x08\x00\x08\x00\x00\x00\x00\x00");
    v.extend_from_slice(&le32(0));
    v.extend_from_slice(&le32(u32::MAX));
    v.extend_from_slice(&le32(u32::MAX));
    v.extend_from_slice(&le16(4));
    v.extend_from_slice(&le16(0xFFFF));
    v.extend_from_slice(b"a.gz");
    v.extend(std::iter::repeat_n(0xAB, 300));
    let cd = v.len() as u32;
    v.extend_from_slice(b"PK\x01\x02\x14\x00\x14\x00\x00\x00\x08\x00\x00\x00\x00\x00");
    v.extend_from_slice(&le32(0));
    v.extend_from_slice(&le32(u32::MAX));
    v.extend_from_slice(&le32(u32::MAX));
    v.extend_from_slice(&le16(4));
    v.extend_from_slice(&[0; 8]);
    v.extend_from_slice(&le32(0));
    v.extend_from_slice(&le32(cd)); // points at itself
    v.extend_from_slice(b"a.gz");
    // zip64 end locator pointing far away, then an EOCD with every field at its maximum.
    v.extend_from_slice(b"PK\x06\x07\x00\x00\x00\x00");
    v.extend_from_slice(&u64::MAX.to_le_bytes());
    v.extend_from_slice(&le32(1));
    v.extend_from_slice(b"PK\x05\x06\x00\x00\x00\x00\xFF\xFF\xFF\xFF");
    v.extend_from_slice(&le32(u32::MAX));
    v.extend_from_slice(&le32(cd));
    v.extend_from_slice(&le16(0));
    v
}

/// OLE2 whose directory chain loops on itself and whose DIFAT chain claims
/// 2^31 sectors starting at itself.
fn ole2_loop() -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..8].copy_from_slice(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1");
    h[0x18..0x1A].copy_from_slice(&le16(0x3E));
    h[0x1A..0x1C].copy_from_slice(&le16(3));
    h[0x1C..0x1E].copy_from_slice(&le16(0xFFFE));
    h[0x1E..0x20].copy_from_slice(&le16(9));
    h[0x20..0x22].copy_from_slice(&le16(6));
    h[0x2C..0x30].copy_from_slice(&le32(1)); // FAT sectors
    h[0x30..0x34].copy_from_slice(&le32(1)); // first directory sector
    h[0x38..0x3C].copy_from_slice(&le32(4096));
    h[0x3C..0x40].copy_from_slice(&le32(2)); // mini FAT start
    h[0x40..0x44].copy_from_slice(&le32(0x7FFF_FFFF));
    h[0x44..0x48].copy_from_slice(&le32(2)); // first DIFAT sector
    h[0x48..0x4C].copy_from_slice(&le32(0x7FFF_FFFF)); // DIFAT sectors
    for i in 0..109 {
        let v = if i == 0 { 0 } else { u32::MAX };
        h[0x4C + 4 * i..0x50 + 4 * i].copy_from_slice(&le32(v));
    }
    let mut fat = vec![0xFFu8; 512];
    fat[0..4].copy_from_slice(&le32(0xFFFF_FFFD)); // the FAT itself
    fat[4..8].copy_from_slice(&le32(1)); // directory: 1 -> 1 -> 1 ...
    fat[8..12].copy_from_slice(&le32(2)); // DIFAT / mini FAT: 2 -> 2
    let mut dir = vec![0u8; 512];
    dir[..10].copy_from_slice(b"R\0o\0o\0t\0\0\0");
    dir[0x40..0x42].copy_from_slice(&le16(10));
    dir[0x42] = 5; // root storage
    dir[0x74..0x78].copy_from_slice(&le32(1)); // start sector: loops
    dir[0x78..0x7C].copy_from_slice(&le32(u32::MAX)); // size 4 GiB
    let mut difat = vec![0u8; 512];
    difat[508..512].copy_from_slice(&le32(2)); // next DIFAT sector: itself
    [h, fat, dir, difat].concat()
}

/// TIFF whose IFD entries claim 2^30-long arrays and whose next-IFD
/// offset points back to itself.
fn tiff_loop() -> Vec<u8> {
    let mut v = b"II*\x00".to_vec();
    v.extend_from_slice(&le32(8));
    v.extend_from_slice(&le16(10));
    for tag in [256u16, 257, 258, 259, 262, 273, 277, 278, 279, 330] {
        v.extend_from_slice(&le16(tag));
        v.extend_from_slice(&le16(4)); // LONG
        v.extend_from_slice(&le32(0x3FFF_FFFF)); // count
        v.extend_from_slice(&le32(8)); // offset: the IFD itself
    }
    v.extend_from_slice(&le32(8)); // next IFD: this one again
    v.extend(std::iter::repeat_n(0x11, 600));
    v
}

/// SQLite: 64 KiB pages, 2^32-1 pages claimed, a freelist trunk and a b-tree
/// interior page that both point to themselves.
fn sqlite_loop() -> Vec<u8> {
    let page = 4096usize;
    let mut v = vec![0u8; page * 3];
    v[..16].copy_from_slice(b"SQLite format 3\0");
    v[16..18].copy_from_slice(&(page as u16).to_be_bytes());
    v[18] = 1;
    v[19] = 1;
    v[20] = 0;
    v[21] = 64;
    v[22] = 32;
    v[23] = 32;
    v[24..28].copy_from_slice(&be32(1));
    v[28..32].copy_from_slice(&be32(u32::MAX)); // page count
    v[32..36].copy_from_slice(&be32(2)); // freelist trunk
    v[36..40].copy_from_slice(&be32(u32::MAX)); // freelist pages
    v[44..48].copy_from_slice(&be32(4));
    v[92..96].copy_from_slice(&be32(1));
    v[96..100].copy_from_slice(&be32(3_045_000));
    // page 1: interior table b-tree whose right child is page 1
    let b = 100;
    v[b] = 0x05;
    v[b + 3..b + 5].copy_from_slice(&1u16.to_be_bytes());
    v[b + 5..b + 7].copy_from_slice(&(page as u16 - 8).to_be_bytes());
    v[b + 8..b + 12].copy_from_slice(&be32(1));
    v[b + 12..b + 14].copy_from_slice(&(page as u16 - 8).to_be_bytes());
    v[page - 8..page - 4].copy_from_slice(&be32(1));
    v[page - 4] = 1;
    // page 2: freelist trunk pointing to itself with max leaf count
    v[page..page + 4].copy_from_slice(&be32(2));
    v[page + 4..page + 8].copy_from_slice(&be32(u32::MAX));
    v
}

/// MP4: a box with a 64-bit size near 2^64, boxes of size 8 by the
/// thousand, a moov claiming 4 GiB.
fn mp4_huge() -> Vec<u8> {
    let mut v = b"\0\0\0\x18ftypisom\0\0\0\0isommp41".to_vec();
    for _ in 0..2000 {
        v.extend_from_slice(b"\0\0\0\x08free");
    }
    v.extend_from_slice(b"\0\0\0\x01mdat");
    v.extend_from_slice(&(u64::MAX - 15).to_be_bytes());
    v.extend_from_slice(b"\xFF\xFF\xFF\xFFmoov");
    v.extend(std::iter::repeat_n(0x22, 100));
    v
}

/// A FAT32 volume (512-byte clusters) whose data area is one allocated
/// file of `data` (every cluster of it chained to the next; with `looped`
/// the last links back to the first): headers at every cluster of one long
/// chain, each one walking it.
fn fat32_chain(data: &[u8], looped: bool) -> Vec<u8> {
    const FAT_SECTORS: usize = 256;
    let data_at = (32 + 2 * FAT_SECTORS) * 512;
    let mut img = vec![0u8; data_at + data.len()];
    let b = &mut img[..512];
    b[0] = 0xEB;
    b[3..11].copy_from_slice(b"MSWIN4.1");
    b[11..13].copy_from_slice(&le16(512));
    b[13] = 1;
    b[14..16].copy_from_slice(&le16(32));
    b[16] = 2;
    // A FAT32 cluster count (the image holds fewer: a truncated volume).
    b[32..36].copy_from_slice(&le32(200_000));
    b[36..40].copy_from_slice(&le32(FAT_SECTORS as u32));
    b[510] = 0x55;
    b[511] = 0xAA;
    let clusters = (data.len() / 512) as u32;
    let entries = (FAT_SECTORS * 512 / 4) as u32;
    for n in 2..(clusters + 2).min(entries) {
        let next = if n + 1 < (clusters + 2).min(entries) {
            n + 1
        } else if looped {
            2
        } else {
            0x0FFF_FFFF
        };
        let at = 32 * 512 + 4 * n as usize;
        img[at..at + 4].copy_from_slice(&le32(next));
    }
    img[data_at..].copy_from_slice(data);
    img
}

/// Runs `carve` on `data`; checks the bounds; returns (seconds, peak RSS KiB, output bytes).
fn carve_bounded(name: &str, data: &[u8], dir: &Path) -> (f64, i64, u64) {
    let img = dir.join(format!("{name}.dd"));
    std::fs::write(&img, data).unwrap();
    let out = dir.join(format!("{name}-out"));
    let stderr_path = dir.join(format!("{name}.stderr"));
    let t0 = Instant::now();
    let child = common::carve_cmd(&img, &out)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (status, rss) = loop {
        let mut st = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child, not yet reaped (the Child handle is
        // never waited on); `st` and `ru` are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut st, libc::WNOHANG, &mut ru) };
        if r == pid {
            break (st, ru.ru_maxrss);
        }
        assert!(r == 0, "{name}: wait4 failed");
        if t0.elapsed() > TIME_LIMIT {
            // SAFETY: as above; the child is still ours to kill.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{name}: carving did not finish within {TIME_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(child);
    let secs = t0.elapsed().as_secs_f64();
    let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(!err.contains("panicked"), "{name}: {err}");
    assert!(libc::WIFEXITED(status), "{name}: killed by a signal: {err}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "{name}: {err}");
    assert!(rss < RSS_LIMIT_KIB, "{name}: peak RSS {rss} KiB");
    let audit = std::fs::read_to_string(out.join("audit.txt")).unwrap();
    assert!(audit.contains("files found:"), "{name}: {audit}");
    let mut bytes = 0;
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                bytes += m.len();
            }
        }
    }
    let limit = 4 * data.len() as u64 + (16 << 20);
    assert!(
        bytes <= limit,
        "{name}: {bytes} bytes of output for {} bytes",
        data.len()
    );
    if name.contains("loops") || name.contains("huge") || name.contains("gib") {
        // Loops and impossible sizes are damage: nothing of these is complete.
        let report = std::fs::read_to_string(out.join("report.jsonl")).unwrap();
        assert!(
            !report.contains("\"status\":\"complete\""),
            "{name}: a looping or oversized structure was called complete"
        );
    }
    eprintln!(
        "hostile shape | {name} | {} MiB | {secs:.2} s | {} MiB peak RSS | {:.2} MiB output",
        data.len() >> 20,
        rss >> 10,
        bytes as f64 / f64::from(1 << 20)
    );
    (secs, rss, bytes)
}

#[test]
fn hostile_shapes_carve_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let cat = gpucarve::catalogue::Catalogue::builtin();
    const M: usize = 1 << 20;
    let shapes: Vec<(&str, Vec<u8>)> = vec![
        ("all-zero", vec![0u8; 16 * M]),
        ("all-ff", vec![0xFFu8; 16 * M]),
        (
            "dense-headers",
            gpucarve::synth::dense_headers(&cat, 16 * M, 3),
        ),
        (
            "headers-every-512",
            gpucarve::synth::headers_in_noise(&cat, 16 * M, 512, 4),
        ),
        (
            "png-4gib-chunks",
            tile(&png_claiming(0xFFFF_FFF0), 4096, 8 * M),
        ),
        (
            "png-2gib-chunks",
            tile(&png_claiming(0x7FFF_FFF0), 4096, 8 * M),
        ),
        // Chunks that fit the image: every PNG's search may CRC up to its
        // own limit; the image's search budget bounds them all (2 MiB of
        // these took 7.9 s before it).
        ("png-1mib-chunks", tile(&png_claiming(1 << 20), 4096, 8 * M)),
        ("zip-huge-offsets", tile(&zip_huge(), 4096, 8 * M)),
        ("zip-nested-30", tile(&zip_nested(30), 64 << 10, 8 * M)),
        ("ole2-loops", tile(&ole2_loop(), 4096, 8 * M)),
        ("tiff-loops", tile(&tiff_loop(), 4096, 16 * M)),
        ("sqlite-loops", tile(&sqlite_loop(), 16384, 8 * M)),
        ("mp4-huge-boxes", tile(&mp4_huge(), 32768, 8 * M)),
        (
            "fat32-dense-chain",
            fat32_chain(&gpucarve::synth::dense_headers(&cat, 15 * M, 5), false),
        ),
        (
            "fat32-looped-chain",
            fat32_chain(
                &gpucarve::synth::headers_in_noise(&cat, 15 * M, 512, 6),
                true,
            ),
        ),
    ];
    for (name, data) in &shapes {
        carve_bounded(name, data, dir.path());
    }
    // The bound that holds the PNG searches: the image's budget ran out and
    // the searches left were not run (without it, 8 MiB took 49 s).
    let report =
        std::fs::read_to_string(dir.path().join("png-1mib-chunks-out/report.jsonl")).unwrap();
    assert!(
        report.contains("have spent their budget"),
        "png-1mib-chunks: the image's search budget was not reached"
    );
}
