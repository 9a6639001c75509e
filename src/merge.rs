//! `gpucarve merge`: shard outputs (`carve --shard I/N` or `--range`) into one carving.
//!
//! Each shard reported the files whose header starts in its slice, in offset
//! order, with ids of its own. Merging concatenates them in slice order,
//! renumbers ids 1, 2, 3… in offset order, and recomputes nesting across the
//! seams exactly as the carver does (a file inside an earlier complete file
//! is its child and, without `--keep-embedded`, is not written). Carved files
//! are hard-linked (or copied) into the merged folder, which gets the reports
//! a single run writes (report.jsonl, report.xml, hashes.txt, audit.txt) and
//! a run.json naming the image, so that `extract` works on it.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::carve::CarvedFile;
use crate::job::RunMeta;
use crate::report::dfxml::DfxmlReport;
use crate::report::hashdeep::{HASHES, HashdeepList};
use crate::report::jsonl::JsonlReport;
use crate::report::{CarveReport, RunInfo, audit, rfc3339};

/// A shard read: its `run.json`, its folder, the files its report lists.
type Shard = (RunMeta, PathBuf, Vec<CarvedFile>);

/// Merges `shards` into `out`; returns the number of files.
pub fn merge(shards: &[PathBuf], out: &Path, force: bool) -> Result<u64, String> {
    let started = std::time::Instant::now();
    // Ranges a shard could not read: carried into the merged reports.
    let (mut parts, mut unread) = read_shards(shards)?;
    let Some(first) = parts.first().map(|p| p.0.clone()) else {
        return Err("no shard folders given".into());
    };
    parts.sort_by_key(|p| p.0.range.map_or(0, |r| r.0));
    check_seams(&parts, &first)?;
    if let Some(why) = crate::source::evidence::refuse_output(out, Path::new(&first.image)) {
        return Err(why);
    }
    if !force && (out.join("report.jsonl").exists() || out.join("audit.txt").exists()) {
        return Err(format!(
            "{}: already holds a carving; use --force",
            out.display()
        ));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let info = RunInfo {
        image: first.image.clone(),
        image_len: first.image_len,
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        version: env!("CARGO_PKG_VERSION").to_string(),
        start_time: rfc3339(std::time::SystemTime::now()),
        sector_size: 512,
        hashes: first.hashes,
    };
    // Any shard that hashed the whole image hashed the same image.
    let image_hashes = parts.iter().find_map(|p| p.0.image_hashes.clone());
    let create = |name: &str| -> Result<BufWriter<File>, String> {
        File::create(out.join(name))
            .map(BufWriter::new)
            .map_err(|e| format!("{}: {e}", out.join(name).display()))
    };
    let mut jsonl = JsonlReport::new(create("report.jsonl")?, info.hashes);
    let mut dfxml = DfxmlReport::new(create("report.xml")?, &info).map_err(|e| e.to_string())?;
    // Every shard found the same volumes (each reads the whole image's).
    dfxml
        .volumes(&first.volumes)
        .map_err(|e| format!("report.xml: {e}"))?;
    let mut hashlist = HashdeepList::new(create(HASHES)?, out, info.hashes, &info.command_line)
        .map_err(|e| format!("{HASHES}: {e}"))?;
    let mut parents: Vec<(u64, u64, u64)> = Vec::new(); // (start, end, id)
    let mut id = 0u64;
    for (meta, dir, files) in &parts {
        for f in files {
            id += 1;
            let mut g = f.clone();
            g.id = id;
            parents.retain(|p| p.1 > g.offset);
            g.parent = parents
                .iter()
                .rev()
                .find(|p| p.0 <= g.offset && g.offset < p.1)
                .map(|p| p.2);
            let write = meta.write
                && meta.keep.contains(&g.status)
                && (g.parent.is_none() || meta.keep_embedded);
            if !write {
                g.path = None;
            } else {
                bring_file(dir, out, f)?;
            }
            if g.status == "complete" && g.parent.is_none() {
                parents.push((g.offset, first_run_end(&g), id));
            }
            jsonl.file(&g).map_err(|e| e.to_string())?;
            dfxml.file(&g).map_err(|e| e.to_string())?;
            hashlist.file(&g).map_err(|e| format!("{HASHES}: {e}"))?;
        }
    }
    unread.sort_by(|a, b| (a.offset, a.len, &a.reason).cmp(&(b.offset, b.len, &b.reason)));
    unread.dedup();
    for d in &unread {
        jsonl.unreadable(d).map_err(|e| e.to_string())?;
        dfxml.unreadable(d).map_err(|e| e.to_string())?;
    }
    jsonl.finish().map_err(|e| e.to_string())?;
    dfxml
        .finish(started.elapsed().as_secs_f64(), None)
        .map_err(|e| e.to_string())?;
    hashlist.finish().map_err(|e| format!("{HASHES}: {e}"))?;
    RunMeta {
        range: None,
        command_line: info.command_line.clone(),
        start_time: info.start_time.clone(),
        image_hashes: image_hashes.clone(),
        ..first.clone()
    }
    .write(out)?;
    let audit = audit_text(&info, image_hashes.as_ref(), &parts, id, &unread);
    std::fs::write(out.join("audit.txt"), audit).map_err(|e| e.to_string())?;
    Ok(id)
}

/// Reads each shard folder (refused unless its carving finished): its
/// `run.json`, the files of its report, and the ranges it could not read.
fn read_shards(shards: &[PathBuf]) -> Result<(Vec<Shard>, Vec<crate::source::Damage>), String> {
    let mut parts: Vec<Shard> = Vec::new();
    let mut unread: Vec<crate::source::Damage> = Vec::new();
    for dir in shards {
        let meta = RunMeta::read(dir)?;
        let audit = std::fs::read_to_string(dir.join("audit.txt")).unwrap_or_default();
        if audit.is_empty() || audit.contains("INCOMPLETE:") {
            return Err(format!(
                "{}: this shard did not finish (see its audit.txt)",
                dir.display()
            ));
        }
        let rp = dir.join("report.jsonl");
        let text = std::fs::read_to_string(&rp).map_err(|e| format!("{}: {e}", rp.display()))?;
        let files =
            crate::report::jsonl::read(&text).map_err(|e| format!("{}: {e}", rp.display()))?;
        unread.extend(crate::report::jsonl::read_unreadable(&text));
        parts.push((meta, dir.clone(), files));
    }
    Ok((parts, unread))
}

/// The shards (in slice order) are of one image, hashed alike, and their
/// slices meet end to start from byte 0 to the image's end.
fn check_seams(parts: &[Shard], first: &RunMeta) -> Result<(), String> {
    let mut at = 0u64;
    for (m, dir, _) in parts {
        if m.hashes != first.hashes {
            return Err(format!(
                "{}: carved with --hash {}, the first shard with {}: carve every shard with the same hashes",
                dir.display(),
                m.hashes,
                first.hashes
            ));
        }
        if m.image_len != first.image_len || m.image != first.image {
            return Err(format!(
                "{}: a shard of {} ({} bytes), not of {} ({} bytes)",
                dir.display(),
                m.image,
                m.image_len,
                first.image,
                first.image_len
            ));
        }
        let (a, b) = m.range.unwrap_or((0, m.image_len));
        if a != at {
            return Err(format!(
                "{}: its slice starts at byte {a}, but the shards before it end at {at} (missing or overlapping shard)",
                dir.display()
            ));
        }
        at = b;
    }
    if at != first.image_len {
        return Err(format!(
            "the shards end at byte {at}, the image at {}: a shard is missing",
            first.image_len
        ));
    }
    Ok(())
}

/// Hard-links (or copies) a file the merged carving writes from its shard
/// folder `dir` into `out`; an error when its path leaves the shard folder
/// or the shard did not write it.
fn bring_file(dir: &Path, out: &Path, f: &CarvedFile) -> Result<(), String> {
    let Some(rel) = &f.path else {
        return Err(format!(
            "{}: file at offset {} is not nested across the seam and should be written, but the shard did not write it; carve that slice with --keep-embedded",
            dir.display(),
            f.offset
        ));
    };
    if !is_inside(rel) {
        return Err(format!(
            "{}: file at offset {} has the path {rel:?}, which leaves the shard folder (damaged or edited report.jsonl)",
            dir.display(),
            f.offset
        ));
    }
    let (src, dst) = (dir.join(rel), out.join(rel));
    if let Some(d) = dst.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    if std::fs::hard_link(&src, &dst).is_err() {
        std::fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
    }
    Ok(())
}

/// Where a complete file stops holding later ones, as the carver nests:
/// the end of the file's first run (a joined or laid-out file's later runs
/// hold other data).
fn first_run_end(g: &CarvedFile) -> u64 {
    g.byte_runs
        .first()
        .filter(|r| r.img_offset == g.offset)
        .map_or(g.offset.saturating_add(g.length), |r| {
            r.img_offset.saturating_add(r.len)
        })
}

/// The merged carving's audit: the image, the command, each shard, the
/// files and the damaged ranges.
fn audit_text(
    info: &RunInfo,
    image_hashes: Option<&crate::hashing::Digests>,
    parts: &[Shard],
    files: u64,
    unread: &[crate::source::Damage],
) -> String {
    let mut audit = format!("gpucarve {} audit (merged)\n\n", info.version);
    audit::image_lines(&mut audit, info, image_hashes);
    audit.push_str(&format!(
        "command line: {}\nstart: {}\n",
        info.command_line, info.start_time
    ));
    for (m, dir, files) in parts {
        let (a, b) = m.range.unwrap_or((0, m.image_len));
        audit.push_str(&format!(
            "shard: {} bytes {a}..{b}, {} files\n",
            dir.display(),
            files.len()
        ));
    }
    audit.push_str(&format!("files: {files}\n"));
    audit::damage_lines(&mut audit, unread);
    audit
}

/// True for a path that stays inside the folder it is joined to: relative,
/// made of plain names only (no `..`, no root, not empty). A shard's report
/// is input like any other; `merge` links and copies only such paths.
fn is_inside(rel: &str) -> bool {
    let p = Path::new(rel);
    !rel.is_empty()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::is_inside;

    #[test]
    fn paths_that_leave_the_folder_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "jpeg/../../x", "./../x", "/"] {
            assert!(!is_inside(bad), "{bad}");
        }
        for good in ["jpeg/0001.jpg", "partial/png/02.png", "x"] {
            assert!(is_inside(good), "{good}");
        }
    }
}
