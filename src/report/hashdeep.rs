//! `hashes.txt`: the written files in hashdeep's known-hashes format, so that
//! an examiner audits a carving with hashdeep as it is:
//!
//! ```text
//! hashdeep -r -a -k OUTDIR/hashes.txt OUTDIR/jpeg OUTDIR/png ...
//! ```
//!
//! ```text
//! %%%% HASHDEEP-1.0
//! %%%% size,md5,sha256,filename
//! ## Invoked from: /cases/case1
//! ## $ gpucarve carve disk.dd -o case1
//! ##
//! 5120,9e10...,4c38...,/cases/case1/jpeg/000000001024.jpg
//! ```
//!
//! Columns are the `--hash` algorithms in hashdeep's order (md5, sha1,
//! sha256). hashdeep's audit mode matches a file by its hashes *and* its path
//! as hashdeep prints it: an absolute path, `.`, `..` and repeated slashes
//! folded, symbolic links kept. The list writes every path that way, from the
//! output folder as it was given to `carve`. Only written files are listed;
//! files that are only reported carry no file to audit.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use super::CarveReport;
use crate::carve::CarvedFile;
use crate::hashing::{HashAlg, HashChoice};

/// The file name in the output folder.
pub const HASHES: &str = "hashes.txt";

/// hashdeep's column order.
const COLUMNS: [HashAlg; 3] = [HashAlg::Md5, HashAlg::Sha1, HashAlg::Sha256];

/// Streams the list of written files.
pub struct HashdeepList<W: Write> {
    out: W,
    root: PathBuf,
    hashes: HashChoice,
}

impl<W: Write> HashdeepList<W> {
    /// Writes the header. `out_dir` is the output folder as given (made
    /// absolute here); `command_line` goes into a comment.
    pub fn new(
        mut out: W,
        out_dir: &Path,
        hashes: HashChoice,
        command_line: &str,
    ) -> std::io::Result<Self> {
        let root = hashdeep_path(out_dir)?;
        let mut cols: Vec<&str> = vec!["size"];
        cols.extend(
            COLUMNS
                .iter()
                .filter(|a| hashes.contains(**a))
                .map(|a| a.name()),
        );
        cols.push("filename");
        write!(
            out,
            "%%%% HASHDEEP-1.0\n%%%% {}\n## Invoked from: {}\n## $ {}\n## \n",
            cols.join(","),
            root.display(),
            command_line.replace(['\n', '\r'], " ")
        )?;
        Ok(HashdeepList { out, root, hashes })
    }

    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> CarveReport for HashdeepList<W> {
    fn file(&mut self, f: &CarvedFile) -> std::io::Result<()> {
        let Some(rel) = &f.path else {
            return Ok(());
        };
        let d = f.digests();
        let mut line = f.length.to_string();
        for alg in COLUMNS.iter().filter(|a| self.hashes.contains(**a)) {
            line.push(',');
            // A written file always carries every chosen hash; an empty field
            // would make hashdeep reject the line, so say what is missing.
            line.push_str(d.get(*alg).ok_or_else(|| {
                std::io::Error::other(format!("{rel}: written without its {}", alg.name()))
            })?);
        }
        line.push(',');
        line.push_str(&self.root.join(rel).to_string_lossy());
        line.push('\n');
        self.out.write_all(line.as_bytes())
    }
}

/// `p` as hashdeep prints it: absolute (from the current folder, as the
/// kernel reports it), with `.`, `..` and repeated separators folded
/// lexically; symbolic links are not resolved.
pub fn hashdeep_path(p: &Path) -> std::io::Result<PathBuf> {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c.as_os_str()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carve::ByteRun;

    /// A written 3-byte JPEG with these digests.
    fn written(sha256: Option<&str>, md5: Option<&str>, sha1: Option<&str>) -> CarvedFile {
        CarvedFile {
            id: 1,
            file_type: "jpeg".into(),
            family: "jpeg".into(),
            status: "complete".into(),
            alloc: None,
            original_name: None,
            offset: 0,
            length: 3,
            byte_runs: vec![ByteRun {
                file_offset: 0,
                img_offset: 0,
                len: 3,
            }],
            sha256: sha256.map(str::to_string),
            md5: md5.map(str::to_string),
            sha1: sha1.map(str::to_string),
            parent: None,
            path: Some("jpeg/0.jpg".into()),
            validator: None,
            notes: vec![],
        }
    }

    #[test]
    fn paths_fold_like_hashdeep() {
        assert_eq!(
            hashdeep_path(Path::new("/a/./b//c/../d")).unwrap(),
            PathBuf::from("/a/b/d")
        );
        assert_eq!(
            hashdeep_path(Path::new("/../x")).unwrap(),
            PathBuf::from("/x")
        );
        let rel = hashdeep_path(Path::new("case/./x")).unwrap();
        assert_eq!(rel, std::env::current_dir().unwrap().join("case/x"));
    }

    #[test]
    fn header_and_lines_in_hashdeep_order() {
        let mut l = HashdeepList::new(
            Vec::new(),
            Path::new("/cases/c1"),
            "sha256,sha1,md5".parse().unwrap(),
            "gpucarve carve d.dd -o /cases/c1",
        )
        .unwrap();
        let mut f = written(Some("S256"), Some("M5"), Some("S1"));
        l.file(&f).unwrap();
        f.path = None; // not written: not listed
        l.file(&f).unwrap();
        let text = String::from_utf8(l.finish().unwrap()).unwrap();
        assert_eq!(
            text,
            "%%%% HASHDEEP-1.0\n%%%% size,md5,sha1,sha256,filename\n## Invoked from: /cases/c1\n## $ gpucarve carve d.dd -o /cases/c1\n## \n3,M5,S1,S256,/cases/c1/jpeg/0.jpg\n"
        );
    }

    #[test]
    fn a_written_file_without_a_chosen_hash_is_an_error() {
        let mut l =
            HashdeepList::new(Vec::new(), Path::new("/c"), HashChoice::DEFAULT, "x").unwrap();
        let f = written(Some("S"), None, None);
        assert!(l.file(&f).is_err());
    }
}
