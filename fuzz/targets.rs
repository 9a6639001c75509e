//! Fuzz targets: every parser of gpucarve that reads bytes an adversary may
//! have shaped, each as a function `fn(&[u8])` that must return (not panic,
//! not hang, not allocate without bound) whatever the bytes.
//!
//! Compiled twice: into the libFuzzer binary (`fuzz/fuzz_targets/fuzz.rs`,
//! coverage-guided, built with sancov flags on stable Rust) and into the
//! stable test `tests/fuzz_replay.rs`, which replays every committed corpus
//! and regression input through the same functions in `cargo test`. So a
//! regression in any parser fails CI without any fuzzing.
//!
//! Besides "no panic", targets assert cheap invariants that a correct parser
//! keeps on any input (a validator's length never exceeds its window).

#![allow(dead_code)]

use std::path::Path;

use gpucarve::carve::fragments::{self, FragLimits};
use gpucarve::carve::validators::{self, ByteReader, Limits};

/// One fuzz target.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

macro_rules! validator_targets {
    ($($name:literal => $f:ident),* $(,)?) => {
        $(fn $f(data: &[u8]) { validator($name, data) })*
        const VALIDATOR_TARGETS: &[Target] = &[$(Target { name: concat!("validate_", $name), run: $f }),*];
    };
}

validator_targets! {
    "jpeg" => v_jpeg, "png" => v_png, "gif" => v_gif, "bmp" => v_bmp, "tiff" => v_tiff,
    "pdf" => v_pdf, "zip" => v_zip, "sqlite" => v_sqlite, "ole2" => v_ole2, "riff" => v_riff,
    "mp4" => v_mp4, "mp3" => v_mp3, "ogg" => v_ogg, "flac" => v_flac, "gzip" => v_gzip,
    "elf" => v_elf, "pe" => v_pe, "mpeg" => v_mpeg, "text" => v_text, "mpa" => v_mpa,
    "macho" => v_macho, "qcow" => v_qcow, "vmdk" => v_vmdk,
    "mkv" => v_mkv, "asf" => v_asf,
    "evtx" => v_evtx, "regf" => v_regf, "lnk" => v_lnk, "kdbx" => v_kdbx,
    "7z" => v_7z, "rar5" => v_rar5, "rar4" => v_rar4, "xz" => v_xz, "cab" => v_cab, "tar" => v_tar,
    "bzip2" => v_bzip2, "jp2" => v_jp2, "j2k" => v_j2k,
    "ttf" => v_ttf, "ttc" => v_ttc, "woff" => v_woff, "woff2" => v_woff2,
    "ico" => v_ico, "icns" => v_icns,
    "aiff" => v_aiff, "dff" => v_dff, "ape" => v_ape, "wavpack" => v_wavpack, "midi" => v_midi,
    "dsf" => v_dsf, "au" => v_au, "caf" => v_caf, "tta" => v_tta, "mpc" => v_mpc,
    "flv" => v_flv, "emf" => v_emf, "wmf" => v_wmf, "swf" => v_swf,
    "djvu" => v_djvu,
}

const OTHER_TARGETS: &[Target] = &[
    Target {
        name: "fragments_jpeg",
        run: |d| recover("jpeg", d),
    },
    Target {
        name: "fragments_png",
        run: |d| recover("png", d),
    },
    Target {
        name: "fragments_zip",
        run: |d| recover("zip", d),
    },
    Target {
        name: "fs_layout",
        run: fs_layout,
    },
    Target {
        name: "fs_alloc",
        run: fs_alloc,
    },
    Target {
        name: "fs_names",
        run: fs_names,
    },
    Target {
        name: "fs_ntfs",
        run: fs_ntfs,
    },
    Target {
        name: "catalogue_toml",
        run: catalogue_toml,
    },
    Target {
        name: "catalogue_conf",
        run: catalogue_conf,
    },
    Target {
        name: "pattern",
        run: pattern,
    },
    Target {
        name: "source_open",
        run: source_open,
    },
    Target {
        name: "source_stdin",
        run: source_stdin,
    },
    Target {
        name: "journal",
        run: journal,
    },
    Target {
        name: "run_json",
        run: run_json,
    },
    Target {
        name: "merge",
        run: merge,
    },
    Target {
        name: "extract_report",
        run: extract_report,
    },
];

/// Every target, validators first.
pub fn all() -> impl Iterator<Item = &'static Target> {
    VALIDATOR_TARGETS.iter().chain(OTHER_TARGETS.iter())
}

pub fn names() -> Vec<&'static str> {
    all().map(|t| t.name).collect()
}

pub fn find(name: &str) -> Option<&'static Target> {
    all().find(|t| t.name == name)
}

/// A borrowed slice as the image.
struct Slice<'a>(&'a [u8]);

impl ByteReader for Slice<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        self.0.read_at(offset, buf)
    }
}

/// A validator at offset 0, unbounded and then with a window cut in half:
/// the verdict's length never exceeds the window.
fn validator(name: &str, data: &[u8]) {
    let len = data.len() as u64;
    for max_len in [u64::MAX, len / 2 + 1] {
        if let Some(v) = validators::validate(
            name,
            &Slice(data),
            0,
            Limits { max_len },
            &validators::NO_CONTEXT,
        ) {
            assert!(
                v.length <= len.min(max_len),
                "{name}: length {} beyond the window {}",
                v.length,
                len.min(max_len)
            );
        }
    }
}

/// Bifragment recovery of the file at offset 0; the first byte picks a
/// cluster size (64..512) so that small inputs hold several clusters.
fn recover(name: &str, data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let cluster = 64u64 << (sel % 4);
    let limits = FragLimits {
        max_time: std::time::Duration::from_secs(5),
        ..FragLimits::default()
    };
    let len = rest.len() as u64;
    let a = fragments::recover(name, &Slice(rest), 0, len, cluster, &limits);
    if let Some(j) = a.joined {
        let sum: u64 = j.runs.iter().map(|r| r.1).sum();
        assert_eq!(sum, j.length, "{name}: runs do not add up to the length");
        for (off, l) in &j.runs {
            assert!(
                off.saturating_add(*l) <= len,
                "{name}: run beyond the image"
            );
        }
    }
}

fn catalogue_toml(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(c) = gpucarve::catalogue::toml_format::parse(&text, "fuzz.toml") {
        let set = c.compile();
        let _ = set.max_len();
    }
}

fn catalogue_conf(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(c) = gpucarve::catalogue::conf::parse(&text, "fuzz.conf") {
        let set = c.compile();
        let _ = set.max_len();
    }
}

/// The pattern syntax; a parsed pattern is then matched against the input.
fn pattern(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(p) = gpucarve::pattern::Pattern::parse(&text) {
        assert!(!p.is_empty());
        let _ = p.longest_exact_run();
        for pos in 0..data.len().min(64) {
            let _ = p.matches_at(data, pos);
        }
    }
}

/// Reads what an opened image delivers: the start, the end and a few
/// places between (at most ~1 MiB per input), then its damage list.
fn drain(img: &gpucarve::source::Image) {
    let len = img.len();
    let mut buf = vec![0u8; 64 << 10];
    let mut offs: Vec<u64> = (0..8u64).map(|i| i * (64 << 10)).collect();
    offs.extend([
        len.saturating_sub(64 << 10),
        len / 2,
        len / 3,
        len.saturating_sub(1),
    ]);
    for o in offs {
        if o < len
            && let Ok(n) = img.read_at(o, &mut buf)
        {
            assert!(n as u64 <= len - o, "read past the end of the medium");
        }
    }
    let _ = img.media().damage();
    let _ = img.media().describe();
}

/// Input sniffing and the container readers: the first byte picks file
/// names (raw, E01, E01+E02, split .001/.002, .aa/.ab, gzip); the rest is
/// cut into the segments' contents at a point given by the next two bytes.
fn source_open(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let names: &[&str] = match sel % 6 {
        0 => &["img.dd"],
        1 => &["img.E01"],
        2 => &["img.E01", "img.E02"],
        3 => &["img.001", "img.002"],
        4 => &["img.aa", "img.ab"],
        _ => &["img.gz"],
    };
    let Ok(dir) = tempfile::tempdir() else { return };
    let parts: Vec<&[u8]> = if names.len() == 1 {
        vec![rest]
    } else {
        let cut = match rest {
            [a, b, ..] => (usize::from(*a) << 8 | usize::from(*b)).min(rest.len()),
            _ => rest.len(),
        };
        let (x, y) = rest.split_at(cut);
        vec![x.get(2..).unwrap_or_default(), y]
    };
    for (n, p) in names.iter().zip(&parts) {
        if std::fs::write(dir.path().join(n), p).is_err() {
            return;
        }
    }
    let spool = dir.path().join("spool");
    if std::fs::create_dir(&spool).is_err() {
        return;
    }
    if let Ok(img) = gpucarve::source::open_any_with(&dir.path().join(names[0]), &spool) {
        drain(&img);
    }
}

/// Standard input (`-`): any bytes through the spooling reader.
fn source_stdin(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    if let Ok(m) = gpucarve::source::stdin::from_reader(data, dir.path()) {
        let m: std::sync::Arc<dyn gpucarve::source::Media> = std::sync::Arc::new(m);
        if let Ok(img) = gpucarve::source::Image::from_media(Path::new("-"), m) {
            drain(&img);
        }
    }
}

/// The resume journal, as `carve --resume` reads it.
fn journal(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    if std::fs::write(dir.path().join(gpucarve::journal::JOURNAL), data).is_ok()
        && let Ok((files, cp)) = gpucarve::journal::read(dir.path())
        && let Some(cp) = cp
    {
        assert_eq!(cp.files, files.len() as u64);
    }
}

/// `run.json`, as `--resume` and `merge` read it.
fn run_json(data: &[u8]) {
    let _ = serde_json::from_slice::<gpucarve::job::RunMeta>(data);
}

/// `merge` of shard folders built from the input: pieces separated by
/// `\n--\n` are, in turn, a shard's run.json, audit.txt, report.jsonl and
/// one carved file (at the `path` its report names, if it names one), for
/// up to two shards. Runs in a private temporary folder.
fn merge(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    let pieces = split_on(data, b"\n--\n");
    let mut shards = Vec::new();
    for (i, chunk) in pieces.chunks(4).take(2).enumerate() {
        let s = dir.path().join(format!("shard{i}"));
        if std::fs::create_dir(&s).is_err() {
            return;
        }
        let names = ["run.json", "audit.txt", "report.jsonl"];
        for (n, p) in names.iter().zip(chunk) {
            if std::fs::write(s.join(n), p).is_err() {
                return;
            }
        }
        if let (Some(report), Some(body)) = (chunk.get(2), chunk.get(3))
            && let Ok(files) = gpucarve::report::jsonl::read(&String::from_utf8_lossy(report))
        {
            // Only a plain relative path inside the shard folder is created here.
            for f in files.iter().take(4) {
                if let Some(rel) = f.path.as_deref().filter(|p| is_plain_relative(p)) {
                    let dst = s.join(rel);
                    if let Some(parent) = dst.parent() {
                        let _ = std::fs::create_dir_all(parent);
                    }
                    let _ = std::fs::write(dst, body);
                }
            }
        }
        shards.push(s);
    }
    let out = dir.path().join("merged");
    if let Ok(n) = gpucarve::merge::merge(&shards, &out, false) {
        let text = std::fs::read_to_string(out.join("report.jsonl")).unwrap_or_default();
        let files = gpucarve::report::jsonl::read(&text);
        assert!(files.is_ok(), "merge wrote a report it cannot read back");
        assert_eq!(files.map(|f| f.len() as u64).unwrap_or(0), n);
    }
    // Nothing may have been written outside the temporary folder: `merge`
    // refuses paths that leave it (checked in tests/hostile.rs as well).
}

/// `extract`'s reading of a report.jsonl, the choice of files and their
/// names, and the extraction itself against a 64 KiB image.
fn extract_report(data: &[u8]) {
    let Ok(files) = gpucarve::report::jsonl::read(&String::from_utf8_lossy(data)) else {
        return;
    };
    let image: Vec<u8> = (0..64u32 << 10).map(|i| (i % 251) as u8).collect();
    let ids: Vec<u64> = files.iter().map(|f| f.id).take(8).collect();
    let Ok(picks) = gpucarve::extract::pick(&files, &ids, false, image.len() as u64) else {
        return;
    };
    let Ok(dir) = tempfile::tempdir() else { return };
    for p in picks.iter().take(8) {
        assert!(
            is_plain_relative(&p.name) && !p.name.contains('/'),
            "unsafe name {:?}",
            p.name
        );
        let dest = dir.path().join(&p.name);
        if dest.exists() {
            continue;
        }
        let _ = gpucarve::carve::output::extract_to(
            &Slice(&image),
            &p.file.byte_runs,
            &dest,
            gpucarve::hashing::HashChoice::default(),
        );
    }
}

fn is_plain_relative(p: &str) -> bool {
    let p = Path::new(p);
    !p.as_os_str().is_empty()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

fn split_on<'a>(data: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.windows(sep.len()).position(|w| w == sep) {
        out.push(&rest[..i]);
        rest = &rest[i + sep.len()..];
    }
    out.push(rest);
    out
}

/// Allocation status (`carve::geometry::alloc`): FAT entries, ext block
/// bitmaps, the exFAT allocation bitmap, read on demand for byte runs the
/// input's last bytes pick (and runs across every volume's edges and data
/// area). Never more read than the budget; no file system, no status.
fn fs_alloc(data: &[u8]) {
    use gpucarve::carve::geometry::{self, alloc};
    let image = Slice(data);
    let len = data.len() as u64;
    let g = geometry::detect(&image);
    let mut maps = alloc::AllocMaps::new(&g);
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for v in &g.volumes {
        let data_at = v.fat.map_or(v.start, |f| f.data);
        for at in [
            v.start,
            data_at,
            v.end.saturating_sub(1),
            v.start.saturating_sub(512),
        ] {
            runs.push((at, 1));
            runs.push((at, 3 * v.cluster));
        }
        runs.push((v.start, v.end - v.start));
    }
    // Runs the input's tail picks: (offset, length) pairs of u16s scaled.
    for w in data.rchunks_exact(4).take(16) {
        let off = u64::from(u16::from_le_bytes([w[0], w[1]])) * 64;
        let n = u64::from(u16::from_le_bytes([w[2], w[3]])) * 16;
        runs.push((off, n));
    }
    runs.push((len, 10));
    runs.push((u64::MAX - 5, 10));
    for &r in &runs {
        let s = maps.status(&image, [r]);
        if g.volumes.is_empty() {
            assert_eq!(s, None, "{r:?}");
        }
    }
    let all = maps.status(&image, runs.iter().copied());
    if g.volumes.is_empty() {
        assert_eq!(all, None);
    }
    assert!(maps.bytes_read() <= alloc::MAX_MAP_BYTES + (1 << 16));
}

/// Original names (`carve::geometry::names`): the FAT and ext2/3/4
/// directory trees of the volumes found, looked up at each volume's first
/// clusters and at offsets the input's last bytes pick. A name is a path
/// from the root, of a FAT or ext volume holding the offset; no file
/// system, no name.
fn fs_names(data: &[u8]) {
    use gpucarve::carve::geometry::{self, names};
    let image = Slice(data);
    let g = geometry::detect(&image);
    let mut maps = names::NameMaps::new(&g);
    let mut at: Vec<u64> = Vec::new();
    for v in &g.volumes {
        let data_at = v.fat.map_or(v.start, |f| f.data);
        for k in 0..64 {
            at.push(data_at + k * v.cluster);
        }
        at.push(v.start);
    }
    for w in data.rchunks_exact(2).take(16) {
        at.push(u64::from(u16::from_le_bytes([w[0], w[1]])) * 32);
    }
    at.push(u64::MAX);
    for a in at {
        if let Some(n) = maps.lookup(&image, a) {
            assert!(n.path.starts_with('/'), "{n:?}");
            let v = g.at(a).expect("a name outside every volume");
            let named_fs = v.fat.is_some() || matches!(v.fs, "ext2/3" | "ext4" | "NTFS");
            assert!(named_fs && v.start == n.volume, "{n:?}");
        }
    }
}

/// NTFS (`carve::geometry::ntfs`): the input is a volume's `$MFT` from
/// cluster 2 on, behind a boot sector of 512-byte clusters and 1 KiB
/// records (or a whole volume when it starts with a boot sector). Each
/// 1 KiB of it is also read as a record: update sequence, attribute walk,
/// run lists, `$FILE_NAME`s. Then the allocation of every cluster and the
/// name at every cluster start: names are paths from the root of the
/// volume, attributes stay in their record, run lists within their bound,
/// maps within their budget, the maps in memory (`AllocBits`) agree with
/// them; the live files' runs (`ntfs_files`) lie in the volume.
fn fs_ntfs(data: &[u8]) {
    use gpucarve::carve::geometry::{self, alloc, names, ntfs};
    for c in data.chunks(1024) {
        let mut rec = c.to_vec();
        if !ntfs::fixup(&mut rec) {
            continue;
        }
        for a in ntfs::attrs(&rec) {
            assert!(a.bytes.len() >= 16 && a.bytes.len() <= rec.len());
            if let Some(r) = a.runs().and_then(|b| ntfs::runs(b, ntfs::MAX_RUNS)) {
                assert!(r.len() <= ntfs::MAX_RUNS);
            }
            if let Some(f) = a.value().and_then(ntfs::file_name) {
                assert!(f.name.chars().count() <= 255);
            }
        }
    }
    let img = ntfs::with_boot_sector(data);
    let image = Slice(&img);
    let g = geometry::detect(&image);
    let mut maps = alloc::AllocMaps::new(&g);
    let mut names = names::NameMaps::new(&g);
    for v in &g.volumes {
        for c in 0..((v.end - v.start) / v.cluster).min(4096) {
            let at = v.start + c * v.cluster;
            let _ = maps.status(&image, [(at, v.cluster)]);
            if let Some(n) = names.lookup(&image, at) {
                assert!(n.path.starts_with('/') && n.volume == v.start, "{n:?}");
            }
        }
        let _ = maps.status(&image, [(v.start, v.end - v.start)]);
    }
    let _ = maps.allocated_bytes(&image);
    assert!(maps.bytes_read() <= alloc::MAX_MAP_BYTES + (1 << 16));
    // The bitmap in memory says what the maps say, cluster by cluster.
    if let Some(bits) = alloc::AllocMaps::new(&g).bits(&image) {
        let mut maps = alloc::AllocMaps::new(&g);
        for v in &g.volumes {
            for c in 0..((v.end - v.start) / v.cluster).min(4096) {
                let at = v.start + c * v.cluster;
                let s = maps.status(&image, [(at, 1)]);
                assert_eq!(
                    bits.allocated(at),
                    s == Some(alloc::Alloc::Allocated),
                    "{at}"
                );
            }
        }
    }
    // The live files' runs: inside the volume, adding up to their sizes.
    for v in &g.volumes {
        let Some(m) = geometry::ntfs_files::read(&image, v) else {
            continue;
        };
        for f in m.files.values() {
            assert!(f.runs.len() >= 2 && f.runs.len() <= ntfs::MAX_RUNS);
            assert_eq!(f.runs.iter().map(|r| r.1).sum::<u64>(), f.size);
            assert!(f.runs.iter().all(|&(o, n)| o >= v.start && o + n <= v.end));
        }
    }
}

/// The file systems' layouts (`carve::geometry`, `carve::geometry::extfs`): volume
/// detection, ext inode tables, ext2/3 block maps and FAT chains from the
/// first clusters of each volume's data area, and the verdicts over them
/// (the first byte picks the validator).
/// Runs stay inside the image and the volume, add up to the verdict's
/// length, and come in whole clusters where the file system says so.
fn fs_layout(data: &[u8]) {
    use gpucarve::carve::geometry;
    let Some((&pick, _)) = data.split_first() else {
        return;
    };
    let image = Slice(data);
    let len = data.len() as u64;
    let g = geometry::detect(&image);
    let validator = ["jpeg", "png", "tiff", "zip", "bmp", "pdf"][usize::from(pick) % 6];
    for vol in &g.volumes {
        assert!(vol.start < vol.end && vol.end <= len.max(vol.end));
        if let Some(map) = gpucarve::carve::geometry::extfs::read(&image, vol) {
            for (&first, f) in &map.files {
                assert!(f.runs.len() >= 2, "{f:?}");
                assert_eq!(f.runs[0].0, first);
                assert_eq!(f.runs.iter().map(|r| r.1).sum::<u64>(), f.size, "{f:?}");
                for &(o, n) in &f.runs {
                    assert!(
                        o >= vol.start && o.checked_add(n).is_some_and(|e| e <= vol.end),
                        "{f:?}"
                    );
                }
            }
        }
        let first = vol.fat.map_or(vol.start, |f| f.data);
        for k in 0..8u64 {
            let Some(start) = first.checked_add(k.saturating_mul(vol.cluster)) else {
                break;
            };
            if start >= len {
                break;
            }
            if let Some(runs) = geometry::fat_chain(&image, vol, start, 1 << 20, 4) {
                assert!((2..=4).contains(&runs.len()));
                for &(o, n) in &runs {
                    assert!(n > 0 && n.is_multiple_of(vol.cluster), "{runs:?}");
                    assert!(o >= vol.start, "{runs:?}");
                }
            }
            if let Some((splits, blocks)) = geometry::ext_block_map(&image, vol, start, 4) {
                assert!(!splits.is_empty() && splits.len() <= 3);
                assert!(splits.windows(2).all(|w| w[0].0 < w[1].0));
                if let Some(b) = blocks {
                    assert!(b > 12);
                }
            }
            let contiguous = validators::validate(
                validator,
                &image,
                start,
                Limits {
                    max_len: len - start,
                },
                &validators::NO_CONTEXT,
            );
            if let Some(v) = fragments::fs_layout_verdict(
                validator,
                &image,
                vol,
                (start, len - start),
                contiguous.as_ref(),
                &validators::NO_CONTEXT,
            ) {
                let runs = v.runs.clone().expect("a laid-out verdict carries its runs");
                assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), v.length, "{runs:?}");
                assert_eq!(runs.first().map(|r| r.0), Some(start));
                for &(o, n) in &runs {
                    assert!(
                        o.checked_add(n).is_some_and(|e| e <= len),
                        "{runs:?} in {len}"
                    );
                }
            }
        }
    }
}
