//! Opening any supported input, chosen by content (then by name):
//!
//! | first bytes / name                  | medium                         |
//! |-------------------------------------|--------------------------------|
//! | `EVF\t\r\n\xff\0`, `EVF2\r\n\x81\0` | EWF (E01, Ex01) segment set    |
//! | `1f 8b 08`                          | gzip (spooled, see `gzip.rs`)  |
//! | `NAME.001` / `.000` / `.aa` + next  | split raw segment set          |
//! | anything else, block devices        | raw                            |
//!
//! A later segment given by itself (`disk.E02`, `disk.002`) is refused with
//! the name of the first one: reading it alone would give wrong offsets.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Image, SourceError, buffered::head, ewf, gzip, split, stdin};

/// What an input is, by content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    Raw,
    BlockDevice,
    Ewf,
    /// A later EWF segment (number ≥ 2).
    EwfLaterSegment(u32),
    Gzip,
    Split,
    SplitLaterSegment,
}

impl InputKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InputKind::Raw => "raw",
            InputKind::BlockDevice => "block device",
            InputKind::Ewf => "ewf",
            InputKind::EwfLaterSegment(_) => "ewf segment",
            InputKind::Gzip => "gzip",
            InputKind::Split => "split raw",
            InputKind::SplitLaterSegment => "split raw segment",
        }
    }
}

/// How an input is taken: by its content (EWF, gzip, split raw, raw), or as
/// raw bytes whatever its first bytes look like (a disk whose first sector
/// happens to start like a gzip file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputMode {
    #[default]
    Auto,
    Raw,
}

impl std::str::FromStr for InputMode {
    type Err = String;
    fn from_str(s: &str) -> Result<InputMode, String> {
        match s {
            "auto" => Ok(InputMode::Auto),
            "raw" => Ok(InputMode::Raw),
            _ => Err(format!("unknown input kind `{s}` (auto, raw)")),
        }
    }
}

/// Opens `path` as `mode` says: [`open_any_with`], or a raw image.
pub fn open_input(path: &Path, spool_dir: &Path, mode: InputMode) -> Result<Image, SourceError> {
    match mode {
        InputMode::Raw if path != Path::new("-") => Image::open(path),
        _ => open_any_with(path, spool_dir),
    }
}

/// A container recognised by its first bytes that holds nothing when
/// decoded: most likely a raw image whose first bytes only look like one.
fn not_decoded(path: &Path, what: &str, why: &str) -> SourceError {
    SourceError::Container {
        path: path.to_path_buf(),
        what: format!(
            "starts like a {what} file but {why}; if it is a raw image, carve it with --input raw"
        ),
    }
}

/// Sniffs `path` (content first, then name). Errors only when it cannot be examined.
pub fn sniff(path: &Path) -> Result<InputKind, SourceError> {
    let meta = std::fs::metadata(path).map_err(|e| super::io_open_error(path, e))?;
    if meta.file_type().is_block_device() {
        return Ok(InputKind::BlockDevice);
    }
    if !meta.is_file() {
        return Ok(InputKind::Raw); // Image::open explains what it is instead
    }
    let h = head(path).map_err(|e| super::io_open_error(path, e))?;
    if let Some(n) = ewf::segment_number(&h) {
        return Ok(if n <= 1 {
            InputKind::Ewf
        } else {
            InputKind::EwfLaterSegment(n)
        });
    }
    if h.starts_with(&gzip::MAGIC) {
        return Ok(InputKind::Gzip);
    }
    if split::is_first_segment(path) {
        return Ok(InputKind::Split);
    }
    if split::first_segment_of(path).is_some() {
        return Ok(InputKind::SplitLaterSegment);
    }
    Ok(InputKind::Raw)
}

/// Opens any supported input; a gzip image is spooled into the system temporary folder.
pub fn open_any(path: &Path) -> Result<Image, SourceError> {
    open_any_with(path, &std::env::temp_dir())
}

/// Opens any supported input; a gzip image is spooled into `spool_dir`.
///
/// `-` is standard input, spooled into `spool_dir` and taken as a raw image.
pub fn open_any_with(path: &Path, spool_dir: &Path) -> Result<Image, SourceError> {
    if path == Path::new("-") {
        return Image::from_media(path, Arc::new(stdin::open(spool_dir)?));
    }
    match sniff(path)? {
        InputKind::Raw | InputKind::BlockDevice => Image::open(path),
        InputKind::Ewf => {
            let m = ewf::EwfMedia::open(path).map_err(|e| match e {
                SourceError::Container { what, .. } => {
                    not_decoded(path, "EWF (E01)", &format!("does not open as one ({what})"))
                }
                e => e,
            })?;
            Image::from_media(path, Arc::new(m))
        }
        InputKind::Gzip => {
            let m = gzip::open(path, spool_dir)?;
            if super::Media::len(&m) == 0 {
                return Err(not_decoded(path, "gzip", "decodes to 0 bytes"));
            }
            Image::from_media(path, Arc::new(m))
        }
        InputKind::Split => Image::from_media(path, Arc::new(split::SplitMedia::open(path)?)),
        InputKind::EwfLaterSegment(n) => Err(later_segment(
            path,
            &format!("segment {n} of an EWF set"),
            None,
        )),
        InputKind::SplitLaterSegment => Err(later_segment(
            path,
            "a later segment of a split image",
            split::first_segment_of(path),
        )),
    }
}

fn later_segment(path: &Path, what: &str, first: Option<PathBuf>) -> SourceError {
    let hint = match first {
        Some(f) => format!("; give the first segment ({})", f.display()),
        None => "; give the first segment (.E01)".to_string(),
    };
    SourceError::Container {
        path: path.to_path_buf(),
        what: format!("{what}{hint}"),
    }
}
