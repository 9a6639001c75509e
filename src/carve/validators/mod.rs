//! Structure validators: one file per format, each a pure function over a
//! byte-range reader.
//!
//! A validator is given random read access to the image and the absolute
//! offset of a header candidate. It walks the format's structure and decides
//! where the file ends and whether the structure is fully valid. It must never
//! read outside the image, never panic on hostile bytes, and be bounded in
//! time and memory per candidate (it reads in small pieces, never allocates
//! in proportion to a length field, and stops at `max_len`).
//!
//! Validators do no I/O of their own beyond the [`ByteReader`] they are given.
//!
//! Entry point: [`validate`] by name (see [`VALIDATORS`]); one module per
//! format (`jpeg`, `png`, `gif`, `bmp`, `tiff`, `pdf`, `zip`, `sqlite`,
//! `ole2`, `riff`, `mp4`, `mpeg`, `mp3`, `ogg`, `flac`, `mkv`, `asf`, `gzip`, `elf`, `pe`,
//! `text`, `macho`, `qcow`, `vmdk`, `evtx`, `regf`, `lnk`, `kdbx`, `sevenz` (7z), `rar`
//! (rar4, rar5), `xz`, `cab`, `tar`, `bzip2`; audio: `iff` (AIFF, DSDIFF),
//! `ape`, `wavpack`, `midi`, `dsf`, `au`, `caf`, `tta`, `mpc`), each
//! documenting its structure, checks and verdicts. Shared conventions:
//!
//! * a validator sees the image through [`read::Src`], the window
//!   `[start, min(image end, start + max_len))` with offsets relative to the
//!   candidate, so it cannot read outside the image or past `max_len`, and
//!   every length it reports is at most the window's length;
//! * `None`: the candidate is a false hit (its first structures are not
//!   valid), so nothing should be written;
//! * `Complete`: the structure was walked to its end and every check passed;
//!   the length is exact (trailing bytes are never included);
//! * `Partial`: a valid start that is cut by the window (length = the whole
//!   window, with a note saying whether the image or `max_len` ended it) or
//!   damaged (length = end of the last structure that checked out);
//! * `Unvalidated`: the format says "to the end" or the header lacks what is
//!   needed (mp4 box of size 0, legacy SQLite header): length = the window.
//!
//! Complete means "these bytes, contiguous, are the file", so validators go
//! beyond finding the end where they can, to catch files that are cut or
//! fragmented with someone else's data in between (CRCs, decoding the JPEG
//! entropy data, walking every SQLite page, PDF cross-reference offsets,
//! ELF tables, FLAC frame CRCs, heuristic seams in BMP pixels and WAV
//! samples); and every Complete verdict is checked for an ext2/3 indirect
//! block where the file's 13th block should be
//! ([`read::ext_indirect_block`]).

pub use super::reader::{ByteReader, LiesIn};

/// How much a carved file can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// The structure was walked to its end and every check passed.
    Complete,
    /// A valid start, but truncated (image ended / max size reached) or damaged.
    Partial,
    /// No structural check was possible (footer or max-size rule only).
    Unvalidated,
}

/// What a validation shares with the rest of the carving, given with the
/// bytes ([`read::Src::context`]): a validator is a function of its window
/// and this. Each part names the reader it is of (by [`read::reader_id`]):
/// windows of another reader validate as without it.
#[derive(Clone, Default)]
pub struct Context {
    /// The scan's signature log, answering the forward searches of logged
    /// signatures in windows of the reader.
    pub log: Option<(std::sync::Arc<dyn read::SignatureLog>, usize)>,
    /// The carving's memo of decoded JPEG scans, for the reader and views
    /// of it.
    pub jpeg_memo: Option<(std::sync::Arc<jpeg::ScanMemo>, usize)>,
    /// A JPEG trail asked for: a verdict of damage for the header at `.2`
    /// of the reader `.1` carries the decode's [`jpeg::Trail`], held within
    /// the carving's budget `.3`.
    pub jpeg_trail: Option<(
        jpeg::TrailSpec,
        usize,
        u64,
        std::sync::Arc<jpeg::TrailBudget>,
    )>,
}

impl Context {
    /// Nothing shared: a validation on its own.
    pub const NONE: Context = Context {
        log: None,
        jpeg_memo: None,
        jpeg_trail: None,
    };

    /// With `log` answering forward searches in windows of `image`.
    pub fn with_log(
        mut self,
        log: std::sync::Arc<dyn read::SignatureLog>,
        image: &dyn ByteReader,
    ) -> Self {
        self.log = Some((log, read::reader_id(image)));
        self
    }

    /// With `memo` remembering the JPEG scans decoded in `image` (read
    /// directly or through a view of it).
    pub fn with_jpeg_memo(
        mut self,
        memo: &std::sync::Arc<jpeg::ScanMemo>,
        image: &dyn ByteReader,
    ) -> Self {
        self.jpeg_memo = Some((memo.clone(), read::reader_id(image)));
        self
    }

    /// With a JPEG trail asked for the header at `start` of `image`, kept
    /// within `budget` (one per carving).
    pub fn with_jpeg_trail(
        mut self,
        spec: jpeg::TrailSpec,
        (image, start): (&dyn ByteReader, u64),
        budget: &std::sync::Arc<jpeg::TrailBudget>,
    ) -> Self {
        self.jpeg_trail = Some((spec, read::reader_id(image), start, budget.clone()));
        self
    }
}

/// The context of a validation that shares nothing ([`Context::NONE`]).
pub static NO_CONTEXT: Context = Context::NONE;

/// A validator's decision about one header candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: Status,
    /// Length of the file in bytes from the candidate's offset.
    pub length: u64,
    /// A more precise type found from content (e.g. `docx` for a ZIP, `xls` for OLE2, `webp` for RIFF).
    pub subtype: Option<String>,
    /// Human-readable notes for the report (why partial, what was checked).
    pub notes: Vec<String>,
    /// Set when the verdict is over a file the file system lays out in
    /// several runs ([`crate::carve::fragments::fs_layout_verdict`]): the
    /// runs in the image, `(offset, length)`, adding up to `length`.
    pub runs: Option<Vec<(u64, u64)>>,
    /// What one format's validator adds for the carver's later stages.
    pub extras: Extras,
}

/// A format's additions to a [`Verdict`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Extras {
    #[default]
    None,
    Jpeg(JpegExtras),
}

/// What the JPEG validator tells the fragment search about a file it found
/// damaged (never both `None`: that is [`Extras::None`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JpegExtras {
    /// For a `Partial` verdict caused by damage: an upper bound on where
    /// foreign data begins (the decoder reads past the first foreign byte
    /// before it fails). The fragment search starts from it instead of
    /// decoding the file again.
    pub broke_at: Option<u64>,
    /// Validated by the validation stage: the decoder's snapshots near
    /// where it broke ([`jpeg::Trail`]), so that the fragment search need
    /// not decode the file again. Not part of the verdict (verdicts compare
    /// equal whatever it holds).
    pub trail: Option<TrailRef>,
}

/// A shared [`jpeg::Trail`]: compares equal to any other (it is what one
/// decode left behind, not part of what it decided).
#[derive(Clone)]
pub struct TrailRef(pub std::sync::Arc<jpeg::Trail>);

impl PartialEq for TrailRef {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for TrailRef {}

impl std::fmt::Debug for TrailRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TrailRef(..)")
    }
}

/// Per-candidate bounds given to a validator.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Never consider a file longer than this (from the catalogue's max_size).
    pub max_len: u64,
}

impl Verdict {
    /// A fully validated file of `length` bytes.
    pub fn complete(length: u64) -> Self {
        Verdict {
            status: Status::Complete,
            length,
            subtype: None,
            notes: Vec::new(),
            runs: None,
            extras: Extras::None,
        }
    }

    /// A valid start whose structure is truncated or damaged after `length` bytes.
    pub fn partial(length: u64, note: impl Into<String>) -> Self {
        Verdict {
            status: Status::Partial,
            length,
            subtype: None,
            notes: vec![note.into()],
            runs: None,
            extras: Extras::None,
        }
    }

    /// No structural end could be established; `length` is a rule-of-thumb extent.
    pub fn unvalidated(length: u64, note: impl Into<String>) -> Self {
        Verdict {
            status: Status::Unvalidated,
            length,
            subtype: None,
            notes: vec![note.into()],
            runs: None,
            extras: Extras::None,
        }
    }

    /// Where a damaged file broke, when its validator can tell (JPEG).
    pub fn broke_at(&self) -> Option<u64> {
        match &self.extras {
            Extras::Jpeg(j) => j.broke_at,
            Extras::None => None,
        }
    }

    /// The JPEG decoder's snapshots near where the file broke.
    pub fn trail(&self) -> Option<&TrailRef> {
        match &self.extras {
            Extras::Jpeg(j) => j.trail.as_ref(),
            Extras::None => None,
        }
    }

    /// Forgets where the file broke (the verdict is over other bytes now).
    pub fn forget_break(&mut self) {
        if let Extras::Jpeg(j) = &mut self.extras {
            j.broke_at = None;
            if j.trail.is_none() {
                self.extras = Extras::None;
            }
        }
    }

    /// With the trail set (JPEG); `None` leaves the verdict as it is.
    pub fn with_trail(mut self, trail: Option<TrailRef>) -> Self {
        if trail.is_none() {
            return self;
        }
        let broke_at = self.broke_at();
        self.extras = Extras::Jpeg(JpegExtras { broke_at, trail });
        self
    }

    /// The verdict without its trail.
    pub fn without_trail(mut self) -> Self {
        if let Extras::Jpeg(j) = &mut self.extras {
            j.trail = None;
            if j.broke_at.is_none() {
                self.extras = Extras::None;
            }
        }
        self
    }

    /// Sets the subtype.
    pub fn with_subtype(mut self, subtype: Option<impl Into<String>>) -> Self {
        self.subtype = subtype.map(Into::into);
        self
    }

    /// Appends a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

pub mod read;
pub mod walks;

pub mod asf;
pub mod bmp;
pub mod bzip2;
pub mod cab;
pub mod djvu;
pub mod elf;
pub mod evtx;
pub mod flac;
pub mod flv;
pub mod font;
pub mod gif;
pub mod gzip;
pub mod icon;
pub mod jp2;
pub mod jpeg;
pub mod kdbx;
pub mod lnk;
pub mod macho;
pub mod markup;
pub mod markup_close;
pub mod metafile;
pub mod mkv;
pub mod mp3;
pub mod mp4;
pub mod mpeg;
pub mod ogg;
pub mod ole2;
pub mod pdf;
pub mod pe;
pub mod png;
pub mod psd;
pub mod pst;
pub mod qcow;
pub mod rar;
pub mod regf;
pub mod riff;
pub mod sevenz;
pub mod sqlite;
pub mod swf;
pub mod tar;
pub mod text;
pub mod tiff;
pub mod vmdk;
pub mod xz;
pub mod zip;

pub mod ape;
pub mod au;
pub mod caf;
pub mod dsf;
pub mod iff;
pub mod midi;
pub mod mpc;
pub mod tta;
pub mod wavpack;

use read::Src;

/// A validator: walks the structure in the window `src` (offsets relative to
/// the candidate).
type ValidatorFn = fn(Src) -> Option<Verdict>;

/// Every validator by name, in the order of [`VALIDATORS`].
const TABLE: &[(&str, ValidatorFn)] = &[
    ("jpeg", jpeg::validate),
    ("png", png::validate),
    ("gif", gif::validate),
    ("bmp", bmp::validate),
    ("tiff", tiff::validate),
    ("pdf", pdf::validate),
    ("zip", zip::validate),
    ("sqlite", sqlite::validate),
    ("ole2", ole2::validate),
    ("riff", riff::validate),
    ("mp4", mp4::validate),
    ("mpeg", mpeg::validate),
    ("mp3", mp3::validate),
    ("mpa", mp3::validate_untagged),
    ("ogg", ogg::validate),
    ("flac", flac::validate),
    ("mkv", mkv::validate),
    ("asf", asf::validate),
    ("gzip", gzip::validate),
    ("elf", elf::validate),
    ("pe", pe::validate),
    ("text", text::validate),
    ("markup", markup::validate),
    ("psd", psd::validate),
    ("macho", macho::validate),
    ("qcow", qcow::validate),
    ("vmdk", vmdk::validate),
    ("evtx", evtx::validate),
    ("regf", regf::validate),
    ("pst", pst::validate),
    ("lnk", lnk::validate),
    ("kdbx", kdbx::validate),
    ("7z", sevenz::validate),
    ("rar5", rar::validate5),
    ("rar4", rar::validate4),
    ("xz", xz::validate),
    ("cab", cab::validate),
    ("tar", tar::validate),
    ("bzip2", bzip2::validate),
    ("jp2", jp2::validate),
    ("j2k", jp2::validate_codestream),
    ("ttf", font::validate_sfnt),
    ("ttc", font::validate_ttc),
    ("woff", font::validate_woff),
    ("woff2", font::validate_woff2),
    ("ico", icon::validate_ico),
    ("icns", icon::validate_icns),
    ("flv", flv::validate),
    ("emf", metafile::validate_emf),
    ("wmf", metafile::validate_wmf),
    ("swf", swf::validate),
    ("djvu", djvu::validate),
    ("aiff", iff::validate_aiff),
    ("dff", iff::validate_dff),
    ("ape", ape::validate),
    ("wavpack", wavpack::validate),
    ("midi", midi::validate),
    ("dsf", dsf::validate),
    ("au", au::validate),
    ("caf", caf::validate),
    ("tta", tta::validate),
    ("mpc", mpc::validate),
];

/// True for the validators whose `Complete` verdict checks the file's
/// content, not only its structure: every byte is covered by a CRC (PNG, ZIP,
/// gzip, Ogg, FLAC) or by a full entropy decode (JPEG). A `Complete` from the
/// others (MP4 and RIFF box sizes, TIFF and OLE2 tables, PDF cross-references,
/// ELF/PE headers...) says that the structure adds up; the payload between
/// its tables (`mdat`, `movi`, strips, streams, sections) is opaque.
pub fn proves_content(validator: &str) -> bool {
    matches!(validator, "jpeg" | "png" | "zip" | "gzip" | "ogg" | "flac")
}

/// True for the validators whose `Complete` verdict, on a cluster boundary,
/// makes a file in its own right even inside another file whose payload was
/// not checked: a structure that adds up over its whole length (RIFF chunk
/// sizes, MP4 boxes, OLE2 tables, MPEG packs...) does not arise by chance in
/// someone else's payload, so it is the container that is suspect
/// (fragmented). Not MP3: a few frames of an AVI's or MP4's audio track
/// chain like an MP3 file; not tar: a tar archive from any member's header
/// on is a tar archive too.
pub fn stands_alone(validator: &str) -> bool {
    !matches!(validator, "mp3" | "mpa" | "tar")
}

/// The names [`validate`] accepts.
pub const VALIDATORS: &[&str] = &[
    "jpeg", "png", "gif", "bmp", "tiff", "pdf", "zip", "sqlite", "ole2", "riff", "mp4", "mpeg",
    "mp3", "mpa", "ogg", "flac", "mkv", "asf", "gzip", "elf", "pe", "text", "markup", "psd",
    "macho", "qcow", "vmdk", "evtx", "regf", "pst", "lnk", "kdbx", "7z", "rar5", "rar4", "xz",
    "cab", "tar", "bzip2", "jp2", "j2k", "ttf", "ttc", "woff", "woff2", "ico", "icns", "flv",
    "emf", "wmf", "swf", "djvu", "aiff", "dff", "ape", "wavpack", "midi", "dsf", "au", "caf",
    "tta", "mpc",
];

/// Every validator a catalogue names exists: a misspelt name would refuse
/// every header of its type without a word. The error names the type, the
/// validator and the names there are.
pub fn check_names(catalogue: &crate::catalogue::Catalogue) -> Result<(), String> {
    for t in &catalogue.types {
        if let Some(v) = &t.validator
            && !VALIDATORS.contains(&v.as_str())
        {
            return Err(format!(
                "file type {:?} names validator {v:?}, which does not exist (validators: {})",
                t.name,
                VALIDATORS.join(", ")
            ));
        }
    }
    Ok(())
}

/// Runs the validator named `validator` on the candidate at `start`.
///
/// Returns `None` when the name is unknown or the bytes at `start` are not a
/// plausible file of that format. The reported length never exceeds
/// `min(r.len() - start, limits.max_len)`.
pub fn validate(
    validator: &str,
    r: &dyn ByteReader,
    start: u64,
    limits: Limits,
    cx: &Context,
) -> Option<Verdict> {
    let mut v = validate_raw(validator, r, start, limits, cx)?;
    // Safety net: validators already keep to the window.
    let src = Src::new(r, start, limits);
    if v.length > src.len() {
        v.length = src.len();
        v.status = Status::Partial;
        v.notes.push(src.cut_note());
        v.forget_break();
    }
    Some(v)
}

/// The validator without the safety net (the property tests check that the
/// net is never needed).
fn validate_raw(
    validator: &str,
    r: &dyn ByteReader,
    start: u64,
    limits: Limits,
    cx: &Context,
) -> Option<Verdict> {
    let f = TABLE.iter().find(|(n, _)| *n == validator)?.1;
    let src = Src::in_context(r, start, limits, cx);
    if src.is_empty() {
        return None;
    }
    Some(after(src, f(src)?))
}

/// Checks every validator's Complete verdict shares: a file that holds an
/// ext2/3 indirect block where its 13th block should be was not stored
/// contiguously ([`read::ext_indirect_block`]), whatever its format could
/// check by itself.
fn after(src: Src, v: Verdict) -> Verdict {
    if v.status != Status::Complete {
        return v;
    }
    match read::ext_indirect_block(&src, v.length) {
        Some(at) => {
            let mut p =
                Verdict::partial(at, format!("ext2/3 indirect block at {at}: not contiguous"));
            p.subtype = v.subtype;
            p
        }
        None => v,
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers shared by the validators' tests.
    use super::*;

    pub const NO_LIMIT: Limits = Limits { max_len: u64::MAX };

    /// A borrowed slice as a reader.
    pub struct Slice<'a>(pub &'a [u8]);

    impl ByteReader for Slice<'_> {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
            self.0.read_at(offset, buf)
        }
    }

    /// Runs `name` on `data` at 0 without the safety net and checks the length bound.
    pub fn run(name: &str, data: &[u8]) -> Option<Verdict> {
        run_at(name, data, 0, NO_LIMIT)
    }

    /// Runs `name` at `start` with `limits`, checking the length bounds.
    pub fn run_at(name: &str, data: &[u8], start: u64, limits: Limits) -> Option<Verdict> {
        let v = validate_raw(name, &Slice(data), start, limits, &NO_CONTEXT);
        if let Some(v) = &v {
            let avail = (data.len() as u64).saturating_sub(start);
            assert!(
                v.length <= avail,
                "{name}: length {} > available {avail}",
                v.length
            );
            assert!(
                v.length <= limits.max_len,
                "{name}: length {} > max_len",
                v.length
            );
        }
        v
    }

    /// Asserts `data` is one Complete file of exactly its length, also when
    /// preceded by junk and followed by garbage; returns its subtype.
    pub fn assert_complete(name: &str, data: &[u8]) -> Option<String> {
        assert_complete_opts(name, data, true)
    }

    /// [`assert_complete`]; `limit_check`: also assert that a `max_len` one
    /// byte short is never Complete (not for formats where a shorter
    /// complete file is legitimate, e.g. a PDF before its last update).
    pub fn assert_complete_opts(name: &str, data: &[u8], limit_check: bool) -> Option<String> {
        let v = run(name, data).unwrap_or_else(|| panic!("{name}: rejected"));
        assert_eq!(v.status, Status::Complete, "{name}: {:?}", v.notes);
        assert_eq!(v.length, data.len() as u64, "{name}: {:?}", v.notes);
        let mut img = b"\x00junk\x01\x02\x03before".to_vec();
        let at = img.len() as u64;
        img.extend_from_slice(data);
        img.extend_from_slice(
            b"\x00\x00GARBAGE AFTER THE FILE \xff\xfe\x00\x01 garbage garbage garbage",
        );
        img.extend_from_slice(&[0u8; 300]);
        let w = run_at(name, &img, at, NO_LIMIT)
            .unwrap_or_else(|| panic!("{name}: rejected at offset"));
        assert_eq!(
            w.status,
            Status::Complete,
            "{name} with garbage: {:?}",
            w.notes
        );
        assert_eq!(
            w.length,
            data.len() as u64,
            "{name} with garbage: {:?}",
            w.notes
        );
        assert_eq!(w.subtype, v.subtype);
        // max_len just short of the file: never Complete.
        if limit_check && !data.is_empty() {
            let lim = Limits {
                max_len: data.len() as u64 - 1,
            };
            if let Some(p) = run_at(name, &img, at, lim) {
                assert_ne!(p.status, Status::Complete, "{name}: Complete past max_len");
            }
        }
        v.subtype
    }

    /// Every strict prefix of `data`: no panic, never Complete.
    pub fn assert_prefixes(name: &str, data: &[u8]) {
        for n in 0..data.len() {
            if let Some(v) = run(name, &data[..n]) {
                assert_ne!(
                    v.status,
                    Status::Complete,
                    "{name}: prefix {n} Complete {v:?}"
                );
            }
        }
    }

    /// Every prefix in steps (for larger files).
    pub fn assert_prefixes_step(name: &str, data: &[u8], step: usize) {
        let mut n = 0;
        while n < data.len() {
            if let Some(v) = run(name, &data[..n]) {
                assert_ne!(
                    v.status,
                    Status::Complete,
                    "{name}: prefix {n} Complete {v:?}"
                );
            }
            n += step.max(1);
        }
    }

    /// Runs `name` over real files: each must be accepted with a length within
    /// the file, and at least 90% must be Complete with exactly the file's
    /// length (real files may legitimately carry trailing bytes). Returns
    /// (files, exact).
    pub fn check_real(name: &str, files: &[std::path::PathBuf]) -> (usize, usize) {
        let (mut total, mut exact) = (0, 0);
        for f in files {
            let Ok(d) = std::fs::read(f) else { continue };
            total += 1;
            match run(name, &d) {
                Some(v) if v.status == Status::Complete && v.length == d.len() as u64 => exact += 1,
                other => eprintln!("{name}: {f:?} ({} bytes): {other:?}", d.len()),
            }
        }
        eprintln!("{name}: {exact} of {total} real files Complete with the exact length");
        assert!(
            exact * 10 >= total * 9,
            "{name}: only {exact} of {total} real files exact"
        );
        (total, exact)
    }

    /// `<python prefix>/lib/pythonX.Y/<sub>` for every Python found under
    /// `/usr/lib` and `~/.pyenv` (test data shipped with Python).
    pub fn py_dirs(sub: &str) -> Vec<String> {
        let mut roots = vec!["/usr/lib".to_string()];
        if let Ok(rd) = std::fs::read_dir("/root/.pyenv/versions") {
            roots.extend(rd.flatten().map(|e| format!("{}/lib", e.path().display())));
        }
        let mut out = Vec::new();
        for r in roots {
            let Ok(rd) = std::fs::read_dir(&r) else {
                continue;
            };
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with("python") {
                    out.push(format!("{}/{sub}", e.path().display()));
                }
            }
        }
        out
    }

    /// Where Debian's `forensics-samples` package keeps its original files.
    pub const SAMPLES: &str = "/usr/share/forensics-samples/original-files";

    /// Real files on this machine with one of `exts` below `dirs` (bounded
    /// search); empty when there are none.
    pub fn real_files(dirs: &[&str], exts: &[&str], max: usize) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let mut stack: Vec<std::path::PathBuf> = dirs.iter().rev().map(Into::into).collect();
        // Debian's forensics-samples package (real photos, audio, video,
        // documents), searched first when installed.
        stack.push(SAMPLES.into());
        let mut visited = 0;
        while let Some(d) = stack.pop() {
            visited += 1;
            if visited > 20_000 || out.len() >= max {
                break;
            }
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() {
                    stack.push(p);
                } else if ft.is_file() {
                    let name = p
                        .file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or("")
                        .to_ascii_lowercase();
                    let ok = exts.iter().any(|x| name.ends_with(x));
                    let small = e.metadata().map(|m| m.len() <= 8 << 20).unwrap_or(false);
                    if ok && small && out.len() < max {
                        out.push(p);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod props {
    //! Properties every validator must have, over random and mutated input.
    use super::testutil::Slice;
    use super::*;
    use proptest::prelude::*;

    /// Each validator's magic prefixes (what a header hit guarantees).
    const MAGICS: &[(&str, &[&[u8]])] = &[
        (
            "jpeg",
            &[
                b"\xFF\xD8\xFF\xE0",
                b"\xFF\xD8\xFF\xE1",
                b"\xFF\xD8\xFF\xDB",
                b"\xFF\xD8\xFF\xC0\x00\x11\x08",
            ],
        ),
        (
            "png",
            &[
                b"\x89PNG\r\n\x1a\n",
                b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR",
            ],
        ),
        ("gif", &[b"GIF89a", b"GIF87a"]),
        (
            "bmp",
            &[
                b"BM",
                b"BM\x00\x10\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00\x28\x00\x00\x00",
            ],
        ),
        (
            "tiff",
            &[
                b"II*\x00",
                b"MM\x00*",
                b"II*\x00\x08\x00\x00\x00",
                b"II+\x00\x08\x00\x00\x00",
            ],
        ),
        ("pdf", &[b"%PDF-1.4\n", b"%PDF-1."]),
        (
            "zip",
            &[
                b"PK\x03\x04",
                b"PK\x03\x04\x14\x00\x08\x00\x08\x00",
                b"PK\x05\x06",
                b"PK\x03\x04\x14\x00\x00\x00\x00\x00",
            ],
        ),
        (
            "sqlite",
            &[
                b"SQLite format 3\x00",
                b"SQLite format 3\x00\x10\x00\x01\x01\x00\x40\x20\x20",
            ],
        ),
        ("ole2", &[b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"]),
        (
            "riff",
            &[
                b"RIFF",
                b"RIFF\x00\x01\x00\x00WAVE",
                b"RIFF\x00\x01\x00\x00AVI LIST",
            ],
        ),
        (
            "mp4",
            &[b"\x00\x00\x00\x18ftypisom", b"\x00\x00\x00\x14ftypqt  "],
        ),
        (
            "mp3",
            &[b"ID3\x03\x00\x00", b"\xFF\xFB\x90\x64", b"\xFF\xFB"],
        ),
        ("ogg", &[b"OggS\x00\x02"]),
        ("flac", &[b"fLaC", b"fLaC\x00\x00\x00\x22\x10\x00\x10\x00"]),
        (
            "gzip",
            &[
                b"\x1F\x8B\x08\x00",
                b"\x1F\x8B\x08\x08",
                b"\x1F\x8B\x08\x1E",
            ],
        ),
        (
            "elf",
            &[
                b"\x7FELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",
                b"\x7FELF\x01\x02\x01",
            ],
        ),
        ("pe", &[b"MZ", b"MZ\x90\x00"]),
        (
            "macho",
            &[
                b"\xCF\xFA\xED\xFE",
                b"\xCE\xFA\xED\xFE",
                b"\xCA\xFE\xBA\xBE\x00\x00\x00",
            ],
        ),
        (
            "qcow",
            &[b"QFI\xFB\x00\x00\x00\x03", b"QFI\xFB\x00\x00\x00\x01"],
        ),
        ("vmdk", &[b"KDMV\x01\x00\x00\x00", b"KDMV\x03\x00\x00\x00"]),
        ("evtx", &[b"ElfFile\x00"]),
        ("regf", &[b"regf"]),
        (
            "lnk",
            &[b"L\x00\x00\x00\x01\x14\x02\x00\x00\x00\x00\x00\xC0\x00\x00\x00\x00\x00\x00F"],
        ),
        ("kdbx", &[b"\x03\xD9\xA2\x9Ag\xFBK\xB5\x01\x00\x04\x00"]),
        ("7z", &[b"7z\xBC\xAF\x27\x1C\x00\x04"]),
        ("rar5", &[b"Rar!\x1A\x07\x01\x00"]),
        (
            "rar4",
            &[
                b"Rar!\x1A\x07\x00",
                b"Rar!\x1A\x07\x00\xCF\x90\x73\x00\x00\x0D\x00",
            ],
        ),
        ("xz", &[b"\xFD7zXZ\x00\x00\x04\xE6\xD6\xB4\x46"]),
        ("cab", &[b"MSCF\x00\x00\x00\x00"]),
        ("tar", &[b"a.txt\x00"]),
        ("bzip2", &[b"BZh91AY&SY"]),
        (
            "jp2",
            &[b"\x00\x00\x00\x0CjP  \x0D\x0A\x87\x0A\x00\x00\x00\x14ftyp"],
        ),
        ("j2k", &[b"\xFF\x4F\xFF\x51\x00\x29"]),
        ("ttf", &[b"\x00\x01\x00\x00\x00", b"OTTO\x00"]),
        ("ttc", &[b"ttcf\x00\x01\x00\x00", b"ttcf\x00\x02\x00\x00"]),
        ("woff", &[b"wOFF"]),
        ("woff2", &[b"wOF2"]),
        (
            "ico",
            &[b"\x00\x00\x01\x00\x01\x00", b"\x00\x00\x02\x00\x01\x00"],
        ),
        ("icns", &[b"icns"]),
        ("flv", &[b"FLV\x01\x05\x00\x00\x00\x09"]),
        ("emf", &[b"\x01\x00\x00\x00"]),
        (
            "wmf",
            &[b"\xD7\xCD\xC6\x9A\x00\x00", b"\x01\x00\x09\x00\x00\x03"],
        ),
        (
            "swf",
            &[b"FWS\x0A", b"CWS\x0A\x00\x01\x00\x00\x78\x9C", b"ZWS\x0D"],
        ),
        ("djvu", &[b"AT&TFORM\x00\x00\x01\x00DJVUINFO"]),
        (
            "aiff",
            &[b"FORM\x00\x00\x01\x00AIFF", b"FORM\x00\x00\x01\x00AIFCFVER"],
        ),
        ("dff", &[b"FRM8\x00\x00\x00\x00\x00\x00\x01\x00DSD FVER"]),
        (
            "ape",
            &[b"MAC \x96\x0f\x00\x00\x34\x00\x00\x00", b"MAC \x78\x0f"],
        ),
        ("wavpack", &[b"wvpk\x00\x01\x00\x00\x10\x04\x00\x00"]),
        ("midi", &[b"MThd\x00\x00\x00\x06\x00\x01\x00\x02"]),
        ("dsf", &[b"DSD \x1c\x00\x00\x00\x00\x00\x00\x00"]),
        ("au", &[b".snd\x00\x00\x00\x18"]),
        (
            "caf",
            &[b"caff\x00\x01\x00\x00desc\x00\x00\x00\x00\x00\x00\x00\x20"],
        ),
        ("tta", &[b"TTA1\x01\x00\x02\x00\x10\x00"]),
        (
            "mpc",
            &[
                b"MPCK",
                b"MPCKSH\x0e",
                b"MP+\x07",
                b"MP+\x17\x02\x00\x00\x00",
            ],
        ),
    ];

    fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        vec![
            ("jpeg", jpeg::tests::seed()),
            ("png", png::tests::seed()),
            ("gif", gif::tests::seed()),
            ("bmp", bmp::tests::seed()),
            ("tiff", tiff::tests::seed()),
            ("pdf", pdf::tests::seed()),
            ("zip", zip::tests::seed()),
            ("sqlite", sqlite::tests::seed()),
            ("ole2", ole2::tests::seed()),
            ("riff", riff::tests::seed()),
            ("mp4", mp4::tests::seed()),
            ("mp3", mp3::tests::seed()),
            ("ogg", ogg::tests::seed()),
            ("flac", flac::tests::seed()),
            ("mkv", mkv::tests::seed()),
            ("asf", asf::tests::seed()),
            ("gzip", gzip::tests::seed()),
            ("elf", elf::tests::seed()),
            ("pe", pe::tests::seed()),
            ("macho", macho::tests::seed()),
            ("qcow", qcow::tests::seed()),
            ("vmdk", vmdk::tests::seed()),
            ("evtx", evtx::tests::seed()),
            ("regf", regf::tests::seed()),
            ("pst", pst::tests::seed()),
            ("lnk", lnk::tests::seed()),
            ("kdbx", kdbx::tests::seed()),
            ("jpeg", jpeg::tests::progressive()),
            ("zip", zip::tests::zip64_sample()),
            ("7z", sevenz::tests::seed()),
            ("rar5", rar::tests::seed5()),
            ("rar4", rar::tests::seed4()),
            ("xz", xz::tests::seed()),
            ("cab", cab::tests::seed()),
            ("tar", tar::tests::seed()),
            ("bzip2", bzip2::tests::seed()),
            ("jp2", jp2::tests::seed()),
            ("j2k", jp2::tests::codestream_bytes(2, 30)),
            ("ttf", font::tests::seed()),
            ("woff", font::tests::woff_seed()),
            ("woff2", font::tests::woff2_seed()),
            ("ico", icon::tests::seed()),
            ("icns", icon::tests::icns_seed()),
            ("flv", flv::tests::seed()),
            ("emf", metafile::tests::seed()),
            ("wmf", metafile::tests::wmf_seed()),
            ("swf", swf::tests::seed()),
            ("swf", swf::tests::cws_seed()),
            ("djvu", djvu::tests::seed()),
            ("aiff", iff::tests::seed()),
            ("aiff", iff::tests::aiff(true, 5)),
            ("dff", iff::tests::dff(20)),
            ("ape", ape::tests::seed()),
            ("wavpack", wavpack::tests::seed()),
            ("midi", midi::tests::seed()),
            ("dsf", dsf::tests::seed()),
            ("au", au::tests::seed()),
            ("caf", caf::tests::seed()),
            ("tta", tta::tests::seed()),
            ("mpc", mpc::tests::seed()),
            ("mpc", mpc::tests::sv7(&[300, 200, 90])),
        ]
    }

    /// Runs every validator (not only `name`) on `data` at `start`: no panic,
    /// lengths within the reader and max_len.
    fn check_all(data: &[u8], start: u64, max_len: u64) {
        let limits = Limits { max_len };
        for name in VALIDATORS {
            if let Some(v) = validate_raw(name, &Slice(data), start, limits, &NO_CONTEXT) {
                let avail = (data.len() as u64).saturating_sub(start);
                assert!(v.length <= avail, "{name}: length {} > {avail}", v.length);
                assert!(
                    v.length <= max_len,
                    "{name}: length {} > max_len {max_len}",
                    v.length
                );
                let pub_v = validate(name, &Slice(data), start, limits, &NO_CONTEXT);
                assert_eq!(
                    pub_v.as_ref(),
                    Some(&v),
                    "{name}: safety net changed a verdict"
                );
            }
        }
    }

    #[test]
    fn names_and_dispatch() {
        assert_eq!(VALIDATORS.len(), TABLE.len());
        for (n, (t, _)) in VALIDATORS.iter().zip(TABLE) {
            assert_eq!(n, t);
        }
        let d = b"%PDF-1.4\nxref\n0 0\ntrailer\n<<>>\nstartxref\n9\n%%EOF\n".to_vec();
        assert!(validate("nope", &d, 0, testutil::NO_LIMIT, &NO_CONTEXT).is_none());
        assert!(validate("pdf", &d, d.len() as u64, testutil::NO_LIMIT, &NO_CONTEXT).is_none());
        assert!(validate("pdf", &d, u64::MAX, testutil::NO_LIMIT, &NO_CONTEXT).is_none());
        assert!(validate("pdf", &d, 0, Limits { max_len: 0 }, &NO_CONTEXT).is_none());
        assert_eq!(
            validate("pdf", &d, 0, testutil::NO_LIMIT, &NO_CONTEXT).map(|v| v.status),
            Some(Status::Complete)
        );
        for (name, seed) in seeds() {
            let v = validate(name, &seed, 0, testutil::NO_LIMIT, &NO_CONTEXT)
                .unwrap_or_else(|| panic!("{name} seed"));
            assert_eq!(
                (v.status, v.length),
                (Status::Complete, seed.len() as u64),
                "{name} seed {:?}",
                v.notes
            );
            // No other validator claims it as Complete at the same length
            // (mp3 aside: an MP3 frame run can hide anywhere).
            for other in VALIDATORS.iter().filter(|o| **o != name) {
                if let Some(w) = validate(other, &seed, 0, testutil::NO_LIMIT, &NO_CONTEXT) {
                    assert_ne!(
                        w.status,
                        Status::Complete,
                        "{other} accepts the {name} seed"
                    );
                }
            }
        }
    }

    #[test]
    fn tiny_inputs() {
        for (_, magics) in MAGICS {
            for m in *magics {
                for n in 0..=m.len() {
                    check_all(&m[..n], 0, u64::MAX);
                    check_all(&m[..n], 1, 3);
                }
            }
        }
    }

    proptest! {
        // 512 cases each by default; PROPTEST_CASES=n for a longer run.
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
            ..ProptestConfig::default()
        })]

        /// Random bytes behind a valid magic.
        #[test]
        fn random_after_magic(
            which in 0usize..64,
            body in proptest::collection::vec(any::<u8>(), 0..3000),
            lead in 0usize..8,
            max_len in prop_oneof![Just(u64::MAX), 0u64..4000],
        ) {
            let (_, magics) = MAGICS[which % MAGICS.len()];
            let magic = magics[(which / MAGICS.len()) % magics.len()];
            let mut data = vec![0x55u8; lead];
            data.extend_from_slice(magic);
            data.extend_from_slice(&body);
            check_all(&data, lead as u64, max_len);
        }

        /// Valid files with random bytes overwritten, truncated and/or extended.
        #[test]
        fn mutated_seeds(
            which in 0usize..64,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..12),
            cut in any::<prop::sample::Index>(),
            do_cut in any::<bool>(),
            tail in proptest::collection::vec(any::<u8>(), 0..64),
            max_len in prop_oneof![Just(u64::MAX), 1u64..20_000],
        ) {
            let seeds = seeds();
            let (_, mut data) = seeds[which % seeds.len()].clone();
            for (i, b) in &edits {
                let k = i.index(data.len());
                data[k] = *b;
            }
            if do_cut {
                data.truncate(cut.index(data.len() + 1));
            }
            data.extend_from_slice(&tail);
            check_all(&data, 0, max_len);
        }

        /// Hostile 32-bit length-like values written at random field offsets.
        #[test]
        fn hostile_fields(
            which in 0usize..64,
            at in any::<prop::sample::Index>(),
            value in prop_oneof![Just(u32::MAX), Just(0x7FFF_FFFF), Just(0xFFFF_FFF0), Just(0), Just(1), any::<u32>()],
            be in any::<bool>(),
        ) {
            let seeds = seeds();
            let (_, mut data) = seeds[which % seeds.len()].clone();
            let k = at.index(data.len().saturating_sub(3).max(1));
            let bytes = if be { value.to_be_bytes() } else { value.to_le_bytes() };
            for (j, b) in bytes.iter().enumerate() {
                if let Some(d) = data.get_mut(k + j) {
                    *d = *b;
                }
            }
            check_all(&data, 0, u64::MAX);
        }
    }
}

#[cfg(test)]
mod image_smoke {
    //! Manual check on a real disk image: `GPUCARVE_TEST_IMAGE=/path/img
    //! cargo test --lib carve::validators::image_smoke -- --ignored --nocapture`.
    //! Runs every validator at every magic hit and reports which original
    //! files of Debian's forensics-samples were carved byte-exactly.
    use super::*;

    const HEADS: &[(&str, &[u8])] = &[
        ("jpeg", b"\xFF\xD8\xFF"),
        ("png", b"\x89PNG\r\n\x1a\n"),
        ("gif", b"GIF8"),
        ("bmp", b"BM"),
        ("tiff", b"II*\x00"),
        ("tiff", b"MM\x00*"),
        ("pdf", b"%PDF-"),
        ("zip", b"PK\x03\x04"),
        ("sqlite", b"SQLite format 3\x00"),
        ("ole2", b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"),
        ("riff", b"RIFF"),
        ("mp4", b"ftyp"),
        ("mp3", b"ID3"),
        ("ogg", b"OggS"),
        ("flac", b"fLaC"),
        ("gzip", b"\x1F\x8B\x08"),
        ("elf", b"\x7FELF"),
        ("pe", b"MZ"),
    ];

    #[test]
    #[ignore]
    fn carve_image() {
        let Ok(path) = std::env::var("GPUCARVE_TEST_IMAGE") else {
            eprintln!("GPUCARVE_TEST_IMAGE not set");
            return;
        };
        let img = std::fs::read(&path).expect("image");
        let limits = Limits { max_len: 64 << 20 };
        let t0 = std::time::Instant::now();
        let mut carved: Vec<(String, u64, Verdict)> = Vec::new();
        let mut stats: std::collections::BTreeMap<&str, [usize; 4]> = Default::default();
        for (name, head) in HEADS {
            for pos in memchr::memmem::find_iter(&img, head) {
                let start = if *name == "mp4" {
                    pos.saturating_sub(4)
                } else {
                    pos
                } as u64;
                let v = validate(name, &img, start, limits, &NO_CONTEXT);
                let e = stats.entry(name).or_default();
                match &v {
                    None => e[3] += 1,
                    Some(v) => e[v.status as usize] += 1,
                }
                if let Some(v) = v {
                    if v.status != Status::Complete && std::env::var("SMOKE_VERBOSE").is_ok() {
                        eprintln!(
                            "  {name} at {start}: {:?} {} {:?}",
                            v.status, v.length, v.notes
                        );
                    }
                    carved.push((name.to_string(), start, v));
                }
            }
        }
        eprintln!("validated in {:?}", t0.elapsed());
        if let Ok(out) = std::env::var("SMOKE_OUT") {
            let lines: Vec<String> = carved
                .iter()
                .map(|(n, s, v)| {
                    format!(
                        "{n}\t{s}\t{:?}\t{}\t{}",
                        v.status,
                        v.length,
                        v.notes.join("; ")
                    )
                })
                .collect();
            std::fs::write(out, lines.join("\n")).expect("write SMOKE_OUT");
        }
        for (n, s) in &stats {
            eprintln!(
                "{n:>6}: complete {:>5} partial {:>5} unvalidated {:>3} none {:>6}",
                s[0], s[1], s[2], s[3]
            );
        }
        let originals = testutil::real_files(&[], &[""], 1000);
        let (mut found, mut total) = (0, 0);
        for f in originals {
            let Ok(d) = std::fs::read(&f) else { continue };
            total += 1;
            let hit = carved.iter().find(|(_, s, v)| {
                v.length == d.len() as u64
                    && img.get(*s as usize..(*s + v.length) as usize) == Some(&d[..])
            });
            match hit {
                Some((n, s, v)) => {
                    found += 1;
                    eprintln!("  exact   {f:?} as {n} {:?} at {s}", v.subtype);
                }
                None => eprintln!("  missing {f:?} ({} bytes)", d.len()),
            }
        }
        eprintln!("{found} of {total} original files carved exactly");
    }
}

#[cfg(test)]
mod worst_case {
    //! Time on pathological inputs: `cargo test --release --lib
    //! carve::validators::worst_case -- --ignored --nocapture`.
    use super::*;

    fn time(label: &str, data: &[u8]) {
        for name in VALIDATORS {
            let t = std::time::Instant::now();
            let v = validate(
                name,
                &testutil::Slice(data),
                0,
                Limits { max_len: u64::MAX },
                &NO_CONTEXT,
            );
            let e = t.elapsed();
            if e.as_millis() > 50 || std::env::var("WORST_ALL").is_ok() {
                eprintln!(
                    "{label:>14} {name:>6}: {e:?} {:?}",
                    v.map(|v| (v.status, v.length))
                );
            }
        }
    }

    #[test]
    #[ignore]
    fn pathological_inputs() {
        const N: usize = 64 << 20;
        // Repeated %%EOF + object: the PDF scan's worst case.
        let mut pdf = b"%PDF-1.4\n".to_vec();
        while pdf.len() < N {
            pdf.extend_from_slice(b"startxref\n1\n%%EOF\n1 0 obj\n");
        }
        time("pdf-eofs", &pdf);
        // A stored bit-3 ZIP entry followed by descriptor signatures that never match.
        let mut zip = b"PK\x03\x04\x14\x00\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00a".to_vec();
        while zip.len() < N {
            zip.extend_from_slice(b"PK\x07\x08\xff\xff\xff\xff\xff\xff\xff\xff");
        }
        time("zip-dd", &zip);
        // A deflate bomb inside gzip (1 GiB of zeros).
        {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            let z = vec![0u8; 1 << 20];
            for _ in 0..1024 {
                e.write_all(&z).unwrap();
            }
            time("gzip-bomb", &e.finish().unwrap());
        }
        // Entropy data with no marker.
        let mut jpg = vec![0xFF, 0xD8, 0xFF, 0xDB, 0, 67, 0];
        jpg.extend(1..=64u8);
        jpg.extend_from_slice(&[0xFF, 0xC0, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x11, 0]);
        jpg.extend_from_slice(&[0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 63, 0]);
        jpg.resize(N, 0x12);
        time("jpeg-entropy", &jpg);
        // Progressive JPEG, 65535x65535, many AC scans that are one long
        // end-of-band run each (few bits, many blocks).
        let mut pj = vec![0xFF, 0xD8, 0xFF, 0xDB, 0, 67, 0];
        pj.extend(1..=64u8);
        pj.extend_from_slice(&[0xFF, 0xC2, 0, 11, 8, 0xFF, 0xFF, 0xFF, 0xFF, 1, 1, 0x11, 0]);
        // AC table: one symbol, EOBRUN 14 (0xE0), code "0".
        pj.extend_from_slice(&[0xFF, 0xC4, 0, 20, 0x10, 1]);
        pj.extend_from_slice(&[0; 15]);
        pj.push(0xE0);
        while pj.len() < N {
            pj.extend_from_slice(&[0xFF, 0xDA, 0, 8, 1, 1, 0x00, 1, 63, 0]);
            pj.extend_from_slice(&[0x00; 8192]);
        }
        time("jpeg-eobrun", &pj);
        // SQLite claiming the largest walked page count, pages of zeros.
        let mut sq = vec![0u8; N];
        sq[..16].copy_from_slice(b"SQLite format 3\0");
        sq[16..18].copy_from_slice(&512u16.to_be_bytes());
        sq[18] = 1;
        sq[19] = 1;
        sq[21..24].copy_from_slice(&[64, 32, 32]);
        sq[28..32].copy_from_slice(&((N / 512) as u32).to_be_bytes());
        sq[100] = 0x0D;
        time("sqlite-zeros", &sq);
        // A PDF whose xref table lists a million objects.
        let mut px = b"%PDF-1.4\n".to_vec();
        let x = px.len();
        px.extend_from_slice(b"xref\n0 1000000\n");
        for _ in 0..1_000_000 {
            px.extend_from_slice(b"0000000009 00000 n \n");
        }
        px.extend_from_slice(format!("trailer\n<<>>\nstartxref\n{x}\n%%EOF\n").as_bytes());
        time("pdf-xref", &px);
        // A large 24-bit BMP of noise (the seam check reads every row).
        let mut bmp = b"BM".to_vec();
        let (w, h) = (4096u32, (N as u32 - 54) / (4096 * 3));
        bmp.extend_from_slice(&(54 + w * 3 * h).to_le_bytes());
        bmp.extend_from_slice(&[0, 0, 0, 0, 54, 0, 0, 0, 40, 0, 0, 0]);
        bmp.extend_from_slice(&w.to_le_bytes());
        bmp.extend_from_slice(&h.to_le_bytes());
        bmp.extend_from_slice(&[1, 0, 24, 0]);
        bmp.extend_from_slice(&[0; 24]);
        bmp.extend((0..w * 3 * h).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        time("bmp-noise", &bmp);
        // Zeros and 0xFF everywhere behind each magic.
        for fill in [0u8, 0xFF] {
            for (name, magic) in [
                ("flac", &b"fLaC\x80\x00\x00\x22\x00\x10\x00\x10\x00\x00\x00\x00\x00\x00\x0a\xc4\x42\xf0\x00\x00\x00\x00"[..]),
                ("mp3", b"\xFF\xFB\x90\x64"),
                ("ogg", b"OggS\x00\x02"),
                ("tiff", b"II*\x00\x08\x00\x00\x00"),
                ("ole2", b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"),
            ] {
                let mut d = magic.to_vec();
                d.resize(N, fill);
                time(&format!("{name}-{fill:#x}"), &d);
            }
        }
    }
}
