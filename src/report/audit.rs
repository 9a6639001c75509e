//! `audit.txt`: the human summary of a carving, in the spirit of foremost's audit file.

use std::fmt::Write as _;

use super::{RunInfo, rfc3339};
use crate::carve::CarveSummary;
use crate::hashing::{Digests, HashChoice};

/// Renders the audit text. `image_hashes`: the whole image's digests (`--hash-image`).
pub fn render(
    info: &RunInfo,
    image_hashes: Option<&Digests>,
    summary: &CarveSummary,
    error: Option<&str>,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "gpucarve {} audit\n", info.version);
    image_lines(&mut s, info, image_hashes);
    let _ = writeln!(s, "command line: {}", info.command_line);
    let _ = writeln!(s, "start: {}", info.start_time);
    if let Some(t) = summary.finished {
        let _ = writeln!(s, "end: {}", rfc3339(t));
    }
    let st = &summary.scan;
    let secs = st.wall.as_secs_f64();
    let _ = writeln!(
        s,
        "engine: {}  io: {}  threads: {}  block size: {} bytes",
        st.engine, st.io_backend, st.threads, st.block_size
    );
    if let Some(split) = &st.engine_split {
        let _ = writeln!(s, "engine split: {split}");
    }
    if st.fallback_blocks > 0 {
        let _ = writeln!(
            s,
            "blocks searched by the CPU after a GPU failure: {}",
            st.fallback_blocks
        );
    }
    let mibs = if secs > 0.0 {
        st.bytes as f64 / secs / (1 << 20) as f64
    } else {
        0.0
    };
    let _ = writeln!(
        s,
        "scanned: {} bytes in {secs:.2} s ({mibs:.1} MiB/s), {} signature matches",
        st.bytes, st.matches
    );
    let _ = writeln!(
        s,
        "files found: {} (written: {}, {} bytes; inside other files: {}); header hits rejected by validators: {}",
        summary.files_found,
        summary.files_written,
        summary.bytes_written,
        summary.embedded,
        summary.rejected_headers
    );
    if summary.unreported_unvalidated > 0 {
        let _ = writeln!(
            s,
            "unvalidated header hits not reported: {} (types without a validator; their extent is only a footer or max-size guess: --keep unvalidated writes and reports them, `gpucarve scan` lists every hit)",
            summary.unreported_unvalidated
        );
    }
    for (ty, [header_only, suffix, over, dense]) in &summary.held_back {
        let _ = writeln!(
            s,
            "{ty} header hits counted, not listed: {header_only} partial under {} bytes (header only), {suffix} repeating the end of an earlier {ty} file, {over} past the output bound (files + reports <= 2 x image + 16 MiB), {dense} not validated (more than {} {ty} hits in one {}-byte sector)",
            crate::carve::bound::MIN_PARTIAL,
            crate::carve::density::MAX_PER_SECTOR,
            crate::carve::density::SECTOR,
        );
    }
    for fs in &summary.file_systems {
        let _ = writeln!(s, "file system (cluster size for fragment joins): {fs}");
    }
    volumes_lines(&mut s, summary);
    if let Some(c) = &summary.free_space {
        let _ = writeln!(s, "{}", crate::carve::free::audit_line(c, info.image_len));
    }
    names_lines(&mut s, summary);
    if let Some(e) = error {
        let _ = writeln!(
            s,
            "\nINCOMPLETE: {e}\nThe reports list exactly the files found and written before the error."
        );
    }
    let _ = writeln!(
        s,
        "\n{:<12} {:<12} {:>8} {:>16}",
        "type", "status", "files", "bytes"
    );
    for ((t, st), (n, b)) in &summary.counts {
        let _ = writeln!(s, "{t:<12} {st:<12} {n:>8} {b:>16}");
    }
    if !summary.profile.stages.is_empty() {
        let _ = writeln!(
            s,
            "\nstage profile (CPU seconds summed over threads; waiting and write+hash: wall; the scan: {secs:.2} s wall; bytes read from the image by each stage's reads)\n{:<32} {:<10} {:>10} {:>10} {:>14}",
            "stage", "type", "count", "seconds", "bytes read"
        );
        for ((stage, what), (n, t)) in &summary.profile.stages {
            let read = summary
                .profile
                .read
                .get(&(stage.clone(), what.clone()))
                .copied()
                .unwrap_or(0);
            let _ = writeln!(s, "{stage:<32} {what:<10} {n:>10} {t:>10.3} {read:>14}");
        }
    }
    let _ = writeln!(
        s,
        "work: {} bytes read by validation and fragment searches ({:.2} x the image; bound {}: {} x the image + {} per signature match + {} MiB)",
        summary.profile.total_read(),
        summary.profile.total_read() as f64 / st.bytes.max(1) as f64,
        crate::carve::work_limit(st.bytes, st.matches),
        crate::carve::WORK_PER_BYTE,
        crate::carve::WORK_PER_HIT,
        crate::carve::WORK_FIXED >> 20
    );
    s
}

/// The `volumes:` section (every volume the image's partition table and
/// boot sectors name) and the files per allocation status.
fn volumes_lines(s: &mut String, summary: &CarveSummary) {
    let _ = writeln!(s, "volumes: {}", summary.volumes.len());
    for v in &summary.volumes {
        let _ = writeln!(s, "  {v}");
    }
    if !summary.alloc.is_empty() {
        let counts: Vec<String> = ["allocated", "unallocated", "partly", "not known"]
            .iter()
            .map(|k| format!("{} {k}", summary.alloc.get(*k).copied().unwrap_or(0)))
            .collect();
        let _ = writeln!(
            s,
            "allocation status of the files reported (their clusters in the file system's allocation map): {}",
            counts.join(", ")
        );
    }
}

/// The files given an original name (FAT directory entries:
/// [`crate::carve::geometry::names`]), per volume.
fn names_lines(s: &mut String, summary: &CarveSummary) {
    if summary.names.is_empty() && !summary.volumes.iter().any(|v| v.starts_with("FAT")) {
        return;
    }
    let named: u64 = summary.names.values().sum();
    let files: u64 = summary.alloc.values().sum();
    let per: Vec<String> = summary
        .names
        .iter()
        .map(|(v, n)| format!("{n} in the volume at offset {v}"))
        .collect();
    let _ = writeln!(
        s,
        "original names (a directory entry points at the file's first cluster): {named} of {files} files reported{}{}",
        if per.is_empty() { "" } else { ": " },
        per.join(", ")
    );
}

/// `image:`, `image size:`, the image's digests and the file hash line (also
/// in the merged audit); `extract` reads `image:` and `image size:` back from
/// carvings without a run.json.
pub fn image_lines(s: &mut String, info: &RunInfo, image_hashes: Option<&Digests>) {
    let _ = writeln!(s, "image: {}", info.image);
    let _ = writeln!(s, "image size: {} bytes", info.image_len);
    for (alg, h) in image_hashes.into_iter().flat_map(Digests::iter) {
        let _ = writeln!(s, "image {}: {h}", alg.name());
    }
    let _ = writeln!(s, "{}", file_hashes_line(info.hashes));
}

/// One `damaged:` line per unreadable range (the carving's audit and the
/// merged one).
pub fn damage_lines(s: &mut String, damage: &[crate::source::Damage]) {
    for d in damage {
        let _ = writeln!(
            s,
            "damaged: {}..{} ({} bytes, read as zeros): {}",
            d.offset,
            d.offset + d.len,
            d.len,
            d.reason
        );
    }
}

/// Which hashes the written files carry, and where the hashdeep list is.
fn file_hashes_line(hashes: HashChoice) -> String {
    let names: Vec<&str> = hashes.iter().map(|a| a.name()).collect();
    format!(
        "file hashes: {} (written files; {} lists them for hashdeep -a)",
        names.join(", "),
        super::hashdeep::HASHES
    )
}
