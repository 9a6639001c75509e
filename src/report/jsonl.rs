//! `report.jsonl`: one JSON object per carved or detected file, in offset order.
//!
//! Fields: `id`, `type`, `family`, `status`, `alloc` (`allocated`,
//! `unallocated` or `partly`: whether the file system still allocates the
//! clusters the file's bytes lie in; absent when not known), `original_name`
//! (the directory entry pointing at the file's first cluster: `path` from the
//! volume's root, `deleted`, the entry's `size`, `modified`, `created`
//! (local times without a zone, as FAT keeps them), `accessed` (a date),
//! `volume` (the volume's image offset); absent when no entry is known:
//! [`crate::carve::geometry::names`]), `offset`, `length`,
//! `byte_runs` (`file_offset`, `img_offset`, `len`), then one key per hash
//! chosen with `--hash` (`sha256`, `md5`, `sha1`; null where the file was not
//! hashed, absent when not chosen), `parent`, `path` (relative to the output
//! folder; null when not written), `validator`, `notes`.
//!
//! After the files, one record per range of the image that could not be
//! read (bad sectors, bad E01 chunks; they read as zeros):
//! `{"record":"unreadable","offset":…,"length":…,"reason":"…"}`. Readers
//! of file records skip these ([`read`]); [`read_unreadable`] returns them.

use std::io::Write;

use super::CarveReport;
use crate::carve::{ByteRun, CarvedFile};
use crate::hashing::{HashAlg, HashChoice};

/// Streams files as JSON Lines.
pub struct JsonlReport<W: Write> {
    out: W,
    hashes: HashChoice,
}

impl<W: Write> JsonlReport<W> {
    /// `hashes`: the keys written for every file.
    pub fn new(out: W, hashes: HashChoice) -> Self {
        JsonlReport { out, hashes }
    }
    /// One `unreadable` record (after the files).
    pub fn unreadable(&mut self, d: &crate::source::Damage) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, &Unreadable::from(d))?;
        self.out.write_all(b"\n")
    }
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A hash field: written (a string or null) only when its algorithm was chosen.
#[derive(serde::Serialize)]
#[serde(transparent)]
struct HashField<'a> {
    value: Option<&'a str>,
    #[serde(skip)]
    chosen: bool,
}

impl HashField<'_> {
    fn not_chosen(&self) -> bool {
        !self.chosen
    }
}

/// One line, fields in the documented order.
#[derive(serde::Serialize)]
struct Line<'a> {
    id: u64,
    #[serde(rename = "type")]
    file_type: &'a str,
    family: &'a str,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    alloc: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    original_name: Option<&'a crate::carve::geometry::names::OriginalName>,
    offset: u64,
    length: u64,
    byte_runs: &'a [ByteRun],
    #[serde(skip_serializing_if = "HashField::not_chosen")]
    sha256: HashField<'a>,
    #[serde(skip_serializing_if = "HashField::not_chosen")]
    md5: HashField<'a>,
    #[serde(skip_serializing_if = "HashField::not_chosen")]
    sha1: HashField<'a>,
    parent: Option<u64>,
    path: Option<&'a str>,
    validator: Option<&'a str>,
    notes: &'a [String],
}

impl<W: Write> CarveReport for JsonlReport<W> {
    fn file(&mut self, f: &CarvedFile) -> std::io::Result<()> {
        let hashes = self.hashes;
        fn field(hashes: HashChoice, alg: HashAlg, v: &Option<String>) -> HashField<'_> {
            HashField {
                value: v.as_deref(),
                chosen: hashes.contains(alg),
            }
        }
        let line = Line {
            id: f.id,
            file_type: &f.file_type,
            family: &f.family,
            status: &f.status,
            alloc: f.alloc.map(|a| a.as_str()),
            original_name: f.original_name.as_ref(),
            offset: f.offset,
            length: f.length,
            byte_runs: &f.byte_runs,
            sha256: field(hashes, HashAlg::Sha256, &f.sha256),
            md5: field(hashes, HashAlg::Md5, &f.md5),
            sha1: field(hashes, HashAlg::Sha1, &f.sha1),
            parent: f.parent,
            path: f.path.as_deref(),
            validator: f.validator.as_deref(),
            notes: &f.notes,
        };
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }
}

/// An `unreadable` record.
#[derive(serde::Serialize, serde::Deserialize)]
struct Unreadable {
    record: UnreadableTag,
    offset: u64,
    length: u64,
    reason: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum UnreadableTag {
    Unreadable,
}

impl From<&crate::source::Damage> for Unreadable {
    fn from(d: &crate::source::Damage) -> Self {
        Unreadable {
            record: UnreadableTag::Unreadable,
            offset: d.offset,
            length: d.len,
            reason: d.reason.clone(),
        }
    }
}

/// Reads the file records of a `report.jsonl` back (for `extract`, `merge`
/// and tests), skipping `unreadable` records. Errors name the line.
pub fn read(text: &str) -> Result<Vec<CarvedFile>, String> {
    let mut files = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(l) {
            Ok(f) => files.push(f),
            Err(_) if serde_json::from_str::<Unreadable>(l).is_ok() => {}
            Err(e) => return Err(format!("line {}: {e}", i + 1)),
        }
    }
    Ok(files)
}

/// The `unreadable` records of a `report.jsonl`, in file order.
pub fn read_unreadable(text: &str) -> Vec<crate::source::Damage> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Unreadable>(l).ok())
        .map(|u| crate::source::Damage {
            offset: u.offset,
            len: u.length,
            reason: u.reason,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> CarvedFile {
        CarvedFile {
            id: 3,
            file_type: "png".into(),
            family: "png".into(),
            status: "complete".into(),
            alloc: None,
            original_name: None,
            offset: 4096,
            length: 10,
            byte_runs: vec![ByteRun {
                file_offset: 0,
                img_offset: 4096,
                len: 10,
            }],
            sha256: Some("aa".into()),
            md5: None,
            sha1: Some("cc".into()),
            parent: None,
            path: Some("png/4096.png".into()),
            validator: Some("png".into()),
            notes: vec![],
        }
    }

    fn line(hashes: &str) -> String {
        let mut r = JsonlReport::new(Vec::new(), hashes.parse().unwrap());
        r.file(&file()).unwrap();
        String::from_utf8(r.finish().unwrap()).unwrap()
    }

    #[test]
    fn hash_keys_are_the_chosen_ones_in_order() {
        let l = line("sha256,md5");
        assert!(
            l.contains(r#""byte_runs":[{"file_offset":0,"img_offset":4096,"len":10}],"sha256":"aa","md5":null,"parent":null"#),
            "{l}"
        );
        let l = line("sha1");
        assert!(l.contains(r#""len":10}],"sha1":"cc","parent""#), "{l}");
        assert!(!l.contains("sha256") && !l.contains("md5"), "{l}");
    }

    #[test]
    fn alloc_is_written_after_status_when_known() {
        let l = line("sha256");
        assert!(!l.contains("alloc"), "{l}");
        let mut f = file();
        f.alloc = Some(crate::carve::geometry::alloc::Alloc::Unallocated);
        let mut r = JsonlReport::new(Vec::new(), "sha256".parse().unwrap());
        r.file(&f).unwrap();
        let l = String::from_utf8(r.finish().unwrap()).unwrap();
        assert!(
            l.contains(r#""status":"complete","alloc":"unallocated","offset""#),
            "{l}"
        );
        assert_eq!(read(&l).unwrap()[0].alloc, f.alloc);
    }

    #[test]
    fn lines_read_back() {
        let back = read(&line("sha256,md5,sha1")).unwrap();
        assert_eq!(back, vec![file()]);
        // Keys of algorithms not chosen read back as absent.
        let back = read(&line("sha256")).unwrap();
        assert_eq!(back[0].sha1, None);
        assert_eq!(back[0].sha256.as_deref(), Some("aa"));
    }
}
