//! Never write over the evidence: which paths an image is made of, and
//! whether an output path is one of them.
//!
//! A split raw set (`x.001`, `x.002`…) or an EWF set (`x.E01`, `x.E02`…)
//! is evidence in every segment, and a new file named like a segment beside
//! them would join the set the next time it is opened. So an output path is
//! refused when it is the image (any hard or symbolic link to it included),
//! any existing segment of its set, or a name that would be taken for a
//! segment of the set.

use std::path::{Path, PathBuf};

use super::any::{InputKind, sniff};
use super::same_file;

/// Why `out` may not be written, or `None` when it may.
pub fn refuse_output(out: &Path, image: &Path) -> Option<String> {
    if same_file(out, image) {
        return Some(format!(
            "{}: this is the image being examined; refusing to write over it",
            out.display()
        ));
    }
    let set = matches!(
        sniff(image),
        Ok(InputKind::Split | InputKind::Ewf | InputKind::EwfLaterSegment(_))
    );
    if !set {
        return None;
    }
    let (Some(stem), Some(ext)) = (stem_ext(image), ext_of(image)) else {
        return None;
    };
    let same_dir = match (out.parent(), image.parent()) {
        (Some(a), Some(b)) => same_file(&nonempty(a), &nonempty(b)),
        _ => false,
    };
    if same_dir
        && stem_ext(out).as_deref() == Some(stem.as_str())
        && ext_of(out).is_some_and(|e| looks_like_segment(&e, &ext))
    {
        return Some(format!(
            "{}: a segment of the evidence set {} (or a name that would join it); refusing to write there",
            out.display(),
            image.display()
        ));
    }
    None
}

/// The file name without its last extension.
fn stem_ext(p: &Path) -> Option<String> {
    p.file_stem()?.to_str().map(String::from)
}

fn ext_of(p: &Path) -> Option<String> {
    p.extension()?.to_str().map(String::from)
}

fn nonempty(p: &Path) -> PathBuf {
    if p.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        p.to_path_buf()
    }
}

/// Whether `ext` could be the extension of a segment of the set whose
/// image has the extension `first`: the same length and the same scheme:
/// digits (`001`…), lowercase letters (`aa`…), or EWF's letter prefix
/// (`E`, `Ex`, `L`, `s`…) followed by digits or letters of the prefix's case
/// (`E01`…`E99`, `EAA`…).
fn looks_like_segment(ext: &str, first: &str) -> bool {
    let (e, f) = (ext.as_bytes(), first.as_bytes());
    if e.len() != f.len() || f.is_empty() {
        return false;
    }
    if f.iter().all(u8::is_ascii_digit) {
        return e.iter().all(u8::is_ascii_digit);
    }
    if f.iter().all(u8::is_ascii_lowercase) {
        return e.iter().all(u8::is_ascii_lowercase);
    }
    let prefix = if f.len() == 4 { 2 } else { 1 };
    let lower = f[0].is_ascii_lowercase();
    e[..prefix] == f[..prefix]
        && e[prefix..].iter().all(|c| {
            c.is_ascii_digit() || (c.is_ascii_alphabetic() && c.is_ascii_lowercase() == lower)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_their_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        std::fs::write(p("x.001"), [1u8; 600]).unwrap();
        std::fs::write(p("x.002"), [2u8; 600]).unwrap();
        std::fs::write(p("raw.dd"), [3u8; 600]).unwrap();
        assert!(refuse_output(&p("x.001"), &p("x.001")).is_some());
        assert!(refuse_output(&p("x.002"), &p("x.001")).is_some());
        assert!(refuse_output(&p("x.003"), &p("x.001")).is_some());
        assert!(refuse_output(&p("x.out"), &p("x.001")).is_none());
        assert!(looks_like_segment("E07", "E01") && looks_like_segment("EAB", "E01"));
        assert!(looks_like_segment("Ex02", "Ex01") && looks_like_segment("ab", "aa"));
        assert!(!looks_like_segment("out", "E01") && !looks_like_segment("txt", "001"));
        assert!(!looks_like_segment("E1", "E01") && !looks_like_segment("F01", "E01"));
        assert!(refuse_output(&p("y.002"), &p("x.001")).is_none());
        assert!(refuse_output(&p("raw.dd"), &p("raw.dd")).is_some());
        assert!(refuse_output(&p("raw.001"), &p("raw.dd")).is_none());
        std::os::unix::fs::symlink(p("x.002"), p("link")).unwrap();
        assert!(refuse_output(&p("link"), &p("x.002")).is_some());
    }
}
