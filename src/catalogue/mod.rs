//! The signature catalogue: which file types exist and how their headers and
//! footers look.
//!
//! A [`FileType`] has a name, extensions, header signatures (each with an
//! optional fixed distance from the file's first byte, e.g. `ftyp` at +4),
//! optional footers, size bounds and the name of the structure validator the
//! carver applies. Catalogues come from:
//!
//! * the built-in TOML (`builtin.toml`, embedded in the binary),
//! * a user TOML file (same schema, see [`toml_format`]),
//! * a foremost/scalpel `.conf` file (see [`conf`]), detected by extension or content.
//!
//! [`Catalogue::compile`] flattens the catalogue into the pattern list an
//! engine searches for, keeping for every pattern which type and role it
//! belongs to. This module never reads an image.

pub mod conf;
pub mod keywords;
pub mod toml_format;

use std::fmt;
use std::path::Path;

use crate::pattern::Pattern;

/// Longest pattern accepted. The pipeline's blocks overlap by the longest
/// pattern minus one byte; this keeps that overlap small beside any block.
pub const MAX_PATTERN_LEN: usize = 1024;

/// The built-in catalogue's TOML text.
pub const BUILTIN_TOML: &str = include_str!("builtin.toml");

/// Whether a signature marks the start or the end of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Header,
    Footer,
    /// A keyword of a keyword list (`scan --keywords`): reported, never carved.
    Keyword,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Header => "header",
            Role::Footer => "footer",
            Role::Keyword => "keyword",
        }
    }
}

/// One header or footer signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The pattern as written in the catalogue.
    pub text: String,
    pub pattern: Pattern,
    /// Distance of the pattern from the file's first byte (headers only).
    pub offset: u64,
}

/// How a footer ends a file (from foremost/scalpel: default, `REVERSE`, `NEXT`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FooterMode {
    /// The first footer after the header; the footer is included.
    #[default]
    First,
    /// The last footer within `max_size` (foremost `REVERSE`).
    Last,
    /// The first footer, not included in the file (foremost `NEXT`).
    Next,
}

/// A kind of file the carver knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileType {
    pub name: String,
    pub description: String,
    pub extensions: Vec<String>,
    pub headers: Vec<Signature>,
    pub footers: Vec<Signature>,
    pub footer_mode: FooterMode,
    pub min_size: u64,
    pub max_size: u64,
    pub validator: Option<String>,
    pub source: Option<String>,
    /// Headers count only at offsets that are multiples of this, a power of
    /// two (the loaders refuse others) (512: the
    /// start of a sector, where file systems start files; 1: anywhere). For
    /// weak signatures (an MPEG audio frame's sync) that are everywhere
    /// inside files of their own kind.
    pub align: u64,
    /// A keyword list ([`keywords`]): its headers are keywords, compiled
    /// with [`Role::Keyword`].
    pub keywords: bool,
}

impl FileType {
    /// Extension for carved files (the first listed, else the name).
    pub fn extension(&self) -> &str {
        self.extensions
            .first()
            .map(String::as_str)
            .unwrap_or(&self.name)
    }
}

/// Default maximum size when a catalogue gives none.
pub const DEFAULT_MAX_SIZE: u64 = 100 << 20;

/// Why a catalogue could not be loaded: always names the file, line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogueError {
    pub origin: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for CatalogueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.origin, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for CatalogueError {}

/// Where a pattern in a compiled set came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternOrigin {
    /// Index of the file type in the catalogue.
    pub type_index: usize,
    pub role: Role,
    /// Index within the type's headers or footers.
    pub signature_index: usize,
}

/// A catalogue flattened for an engine: `patterns[i]` came from `origins[i]`.
#[derive(Clone, Debug)]
pub struct CompiledSet {
    pub patterns: Vec<Pattern>,
    pub origins: Vec<PatternOrigin>,
}

impl CompiledSet {
    /// Longest pattern length.
    pub fn max_len(&self) -> usize {
        crate::engine::max_pattern_len(&self.patterns)
    }
}

/// A list of file types.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalogue {
    pub types: Vec<FileType>,
}

impl Catalogue {
    /// The catalogue shipped inside the binary.
    pub fn builtin() -> Catalogue {
        // The built-in file is checked by a unit test; failing here would be a build defect.
        toml_format::parse(BUILTIN_TOML, "builtin.toml")
            .unwrap_or_else(|e| panic!("built-in catalogue is invalid: {e}"))
    }

    /// Loads a TOML or foremost/scalpel `.conf` catalogue from a file; the
    /// format is chosen by extension (`.toml`, `.conf`) and otherwise by content.
    pub fn load(path: &Path) -> Result<Catalogue, CatalogueError> {
        let origin = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| CatalogueError {
            origin: origin.clone(),
            line: 0,
            column: 0,
            message: format!("cannot read catalogue: {e}"),
        })?;
        let text = String::from_utf8_lossy(&bytes);
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        let is_toml = match ext.as_str() {
            "toml" => true,
            "conf" | "cfg" => false,
            _ => looks_like_toml(&text),
        };
        if is_toml {
            toml_format::parse(&text, &origin)
        } else {
            conf::parse(&text, &origin)
        }
    }

    /// Keeps only the named types (by name or extension), in catalogue order.
    /// An unknown name is an error listing what exists.
    pub fn select(&self, names: &[String]) -> Result<Catalogue, String> {
        if names.is_empty() {
            return Ok(self.clone());
        }
        let mut keep = vec![false; self.types.len()];
        for n in names {
            let n = n.trim().to_ascii_lowercase();
            let mut found = false;
            for (i, t) in self.types.iter().enumerate() {
                if t.name == n || t.extensions.iter().any(|e| e.eq_ignore_ascii_case(&n)) {
                    keep[i] = true;
                    found = true;
                }
            }
            if !found {
                let known: Vec<&str> = self.types.iter().map(|t| t.name.as_str()).collect();
                return Err(format!(
                    "unknown file type `{n}`; known types: {}",
                    known.join(", ")
                ));
            }
        }
        Ok(Catalogue {
            types: self
                .types
                .iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(t, _)| t.clone())
                .collect(),
        })
    }

    /// This catalogue with a keyword list appended as one more type.
    pub fn with_keywords(mut self, list: FileType) -> Catalogue {
        self.types.push(list);
        self
    }

    /// Flattens the catalogue to engine patterns (headers then footers per type).
    pub fn compile(&self) -> CompiledSet {
        let mut patterns = Vec::new();
        let mut origins = Vec::new();
        for (type_index, t) in self.types.iter().enumerate() {
            let header = if t.keywords {
                Role::Keyword
            } else {
                Role::Header
            };
            for (role, sigs) in [(header, &t.headers), (Role::Footer, &t.footers)] {
                for (signature_index, s) in sigs.iter().enumerate() {
                    patterns.push(s.pattern.clone());
                    origins.push(PatternOrigin {
                        type_index,
                        role,
                        signature_index,
                    });
                }
            }
        }
        CompiledSet { patterns, origins }
    }

    /// The signature a compiled pattern came from.
    pub fn signature(&self, o: PatternOrigin) -> &Signature {
        let t = &self.types[o.type_index];
        match o.role {
            Role::Header | Role::Keyword => &t.headers[o.signature_index],
            Role::Footer => &t.footers[o.signature_index],
        }
    }
}

/// Content sniffing: TOML catalogues have `[[type]]` tables.
fn looks_like_toml(text: &str) -> bool {
    text.lines().any(|l| l.trim_start().starts_with("[[type]]"))
}

/// Parses sizes such as `4096`, `20MiB`, `1.5 GB`, `512K` (K/M/G are binary).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        u => {
            return Err(format!(
                "unknown size unit `{u}` in `{t}` (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ));
        }
    };
    let value: f64 = num.parse().map_err(|_| format!("`{t}` is not a size"))?;
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("size `{t}` is out of range"));
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalogue_is_valid_and_covers_the_required_types() {
        let c = Catalogue::builtin();
        for name in [
            "jpeg", "png", "gif", "bmp", "tiff", "webp", "pdf", "zip", "rar4", "rar5", "7z",
            "gzip", "bzip2", "xz", "elf", "pe", "sqlite", "ole2", "mp3", "mp4", "avi", "wav",
            "ogg", "flac", "mkv", "rtf", "ps", "html", "xml", "pst", "evtx", "regf", "lnk", "aiff",
            "dff", "ape", "wavpack", "midi", "dsf", "au", "caf", "tta", "mpc",
        ] {
            assert!(
                c.types.iter().any(|t| t.name == name),
                "built-in catalogue lacks {name}"
            );
        }
        let set = c.compile();
        assert!(set.max_len() <= MAX_PATTERN_LEN);
        let mut names: Vec<&str> = c.types.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), c.types.len(), "duplicate type names");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("20MiB"), Ok(20 << 20));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("1.5 KiB"), Ok(1536));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn select_by_name_or_extension() {
        let c = Catalogue::builtin();
        let s = c.select(&["jpg".into(), "png".into()]).unwrap();
        assert_eq!(s.types.len(), 2);
        assert!(
            c.select(&["nonesuch".into()])
                .unwrap_err()
                .contains("unknown file type")
        );
    }
}
