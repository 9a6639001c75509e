//! `gpucarve extract`: which files of a `report.jsonl` to copy out, and the
//! names they get.
//!
//! A report may have been edited or damaged, so nothing in it is trusted:
//! every byte run must lie inside the image (no overflow), and the file name
//! is built from numbers and a sanitised extension only, so a hostile `type`
//! or `path` can never name a file outside the output folder.

use std::path::Path;

use crate::carve::CarvedFile;

/// One file to extract and the file name it gets in the output folder.
#[derive(Debug)]
pub struct Pick<'a> {
    pub file: &'a CarvedFile,
    /// `ID-OFFSET.EXT`: digits, one dot and at most 16 ASCII letters or digits.
    pub name: String,
}

/// The extension a file gets: its written path's, else its type, reduced to
/// ASCII letters and digits (`bin` when nothing is left).
pub fn extension(f: &CarvedFile) -> String {
    let from_path = f
        .path
        .as_deref()
        .and_then(|p| Path::new(p).extension())
        .and_then(|e| e.to_str());
    let raw = from_path.unwrap_or(&f.file_type);
    let clean: String = raw
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    if clean.is_empty() {
        "bin".into()
    } else {
        clean
    }
}

/// The files with `ids` (or every file with `all`), checked against an image
/// of `image_len` bytes. Errors: an unknown id, a byte run past the image.
pub fn pick<'a>(
    files: &'a [CarvedFile],
    ids: &[u64],
    all: bool,
    image_len: u64,
) -> Result<Vec<Pick<'a>>, String> {
    for id in ids {
        if !files.iter().any(|f| f.id == *id) {
            return Err(format!("no file with id {id}"));
        }
    }
    let mut out = Vec::new();
    for f in files.iter().filter(|f| all || ids.contains(&f.id)) {
        if f.byte_runs.iter().any(|r| {
            r.img_offset
                .checked_add(r.len)
                .is_none_or(|end| end > image_len)
        }) {
            return Err(format!(
                "id {}: byte runs reach past the end of the image",
                f.id
            ));
        }
        out.push(Pick {
            file: f,
            name: format!("{}-{}.{}", f.id, f.offset, extension(f)),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carve::ByteRun;

    fn file(id: u64, ty: &str, path: Option<&str>, runs: &[(u64, u64)]) -> CarvedFile {
        CarvedFile {
            id,
            file_type: ty.into(),
            family: ty.into(),
            status: "complete".into(),
            alloc: None,
            original_name: None,
            offset: runs.first().map_or(0, |r| r.0),
            length: runs.iter().map(|r| r.1).sum(),
            byte_runs: runs
                .iter()
                .map(|&(img_offset, len)| ByteRun {
                    file_offset: 0,
                    img_offset,
                    len,
                })
                .collect(),
            sha256: None,
            md5: None,
            sha1: None,
            parent: None,
            path: path.map(Into::into),
            validator: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn hostile_names_stay_in_the_folder() {
        let files = vec![
            file(1, "../../../etc/x", None, &[(0, 4)]),
            file(2, "jpeg", Some("/etc/passwd"), &[(0, 4)]),
            file(3, "a/b", Some("jpeg/../../x.j/pg"), &[(0, 4)]),
            file(4, "png", Some("png/00.png"), &[(0, 4)]),
        ];
        let p = pick(&files, &[], true, 100).unwrap();
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["1-0.etcx", "2-0.jpeg", "3-0.ab", "4-0.png"]);
    }

    #[test]
    fn runs_are_checked_without_overflow() {
        let files = vec![file(1, "jpeg", None, &[(u64::MAX - 1, 4)])];
        assert!(
            pick(&files, &[1], false, 100)
                .unwrap_err()
                .contains("past the end")
        );
        let files = vec![file(1, "jpeg", None, &[(90, 11)])];
        assert!(pick(&files, &[1], false, 100).is_err());
        assert!(
            pick(&files, &[2], false, 1000)
                .unwrap_err()
                .contains("no file with id 2")
        );
        assert_eq!(pick(&files, &[1], false, 101).unwrap().len(), 1);
    }
}
