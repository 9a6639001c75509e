//! The TOML catalogue format.
//!
//! ```toml
//! [[type]]
//! name = "jpeg"
//! extensions = ["jpg", "jpeg"]
//! headers = ["FF D8 FF"]                 # or { pattern = '"ftyp"', offset = 4 }
//! footers = ["FF D9"]
//! max_size = "20MiB"                     # or an integer number of bytes
//! min_size = 128
//! validator = "jpeg"
//! footer_mode = "first"                  # first | last | next
//! ```
//!
//! Other keys are allowed and ignored. Every error names the file, line and
//! column of the offending value.

use serde::Deserialize;
use toml::Spanned;

use super::{
    Catalogue, CatalogueError, DEFAULT_MAX_SIZE, FileType, FooterMode, MAX_PATTERN_LEN, Signature,
    parse_size,
};
use crate::pattern::Pattern;

#[derive(Deserialize)]
struct Doc {
    #[serde(rename = "type", default)]
    types: Vec<Spanned<RawType>>,
}

#[derive(Deserialize)]
struct RawType {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    extensions: Vec<String>,
    #[serde(default)]
    headers: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    footers: Vec<Spanned<toml::Value>>,
    min_size: Option<Spanned<toml::Value>>,
    max_size: Option<Spanned<toml::Value>>,
    validator: Option<String>,
    footer_mode: Option<Spanned<String>>,
    source: Option<String>,
    align: Option<Spanned<u64>>,
}

/// Converts a byte offset in `text` to a 1-based (line, column).
pub(crate) fn line_col(text: &str, byte: usize) -> (usize, usize) {
    let byte = byte.min(text.len());
    let before = &text[..text.floor_char_boundary(byte)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Parses a TOML catalogue; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Catalogue, CatalogueError> {
    let err_at = |byte: usize, message: String| {
        let (line, column) = line_col(text, byte);
        CatalogueError {
            origin: origin.to_string(),
            line,
            column,
            message,
        }
    };
    let doc: Doc = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        err_at(at, e.message().trim().replace('\n', " "))
    })?;
    if doc.types.is_empty() {
        return Err(err_at(0, "no [[type]] entries".into()));
    }
    let mut types: Vec<FileType> = Vec::with_capacity(doc.types.len());
    // (A set, not a scan of the types so far: 100 000 types took 85 s.)
    let mut names = std::collections::HashSet::with_capacity(doc.types.len());
    for raw in doc.types {
        let at = raw.span().start;
        let raw = raw.into_inner();
        let name = raw.name.get_ref().trim().to_ascii_lowercase();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(err_at(
                raw.name.span().start,
                format!("type name `{name}` must be letters, digits, `_` or `-`"),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(err_at(
                raw.name.span().start,
                format!("type `{name}` is defined twice"),
            ));
        }
        let headers = signatures(&raw.headers, true, &err_at)?;
        if headers.is_empty() {
            return Err(err_at(at, format!("type `{name}` has no headers")));
        }
        let footers = signatures(&raw.footers, false, &err_at)?;
        let size = |v: &Option<Spanned<toml::Value>>,
                    default: u64|
         -> Result<u64, CatalogueError> {
            match v {
                None => Ok(default),
                Some(s) => match s.get_ref() {
                    toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
                    toml::Value::String(t) => parse_size(t).map_err(|m| err_at(s.span().start, m)),
                    _ => Err(err_at(
                        s.span().start,
                        "a size is a non-negative integer or a string like \"20MiB\"".into(),
                    )),
                },
            }
        };
        let min_size = size(&raw.min_size, 0)?;
        let max_size = size(&raw.max_size, DEFAULT_MAX_SIZE)?;
        if max_size == 0 || min_size > max_size {
            return Err(err_at(
                at,
                format!(
                    "type `{name}`: min_size {min_size} and max_size {max_size} are inconsistent"
                ),
            ));
        }
        let footer_mode = match raw.footer_mode {
            None => FooterMode::First,
            Some(m) => match m.get_ref().as_str() {
                "first" => FooterMode::First,
                "last" | "reverse" => FooterMode::Last,
                "next" => FooterMode::Next,
                other => {
                    return Err(err_at(
                        m.span().start,
                        format!("footer_mode `{other}` must be first, last or next"),
                    ));
                }
            },
        };
        let align = match raw.align {
            None => 1,
            Some(a) if a.get_ref().is_power_of_two() && *a.get_ref() <= 1 << 20 => *a.get_ref(),
            Some(a) => {
                return Err(err_at(
                    a.span().start,
                    format!(
                        "align = {} must be a power of two, at most 1 MiB",
                        a.get_ref()
                    ),
                ));
            }
        };
        types.push(FileType {
            keywords: false,
            align,
            description: raw.description,
            extensions: raw
                .extensions
                .iter()
                .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                .collect(),
            headers,
            footers,
            footer_mode,
            min_size,
            max_size,
            validator: raw.validator,
            source: raw.source,
            name,
        });
    }
    Ok(Catalogue { types })
}

fn signatures(
    values: &[Spanned<toml::Value>],
    allow_offset: bool,
    err_at: &dyn Fn(usize, String) -> CatalogueError,
) -> Result<Vec<Signature>, CatalogueError> {
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        let at = v.span().start;
        let (text, offset) = match v.get_ref() {
            toml::Value::String(s) => (s.clone(), 0),
            toml::Value::Table(t) if allow_offset => {
                let Some(toml::Value::String(p)) = t.get("pattern") else {
                    return Err(err_at(
                        at,
                        "a header table needs `pattern = \"...\"`".into(),
                    ));
                };
                let offset = match t.get("offset") {
                    None => 0,
                    Some(toml::Value::Integer(o)) if *o >= 0 => *o as u64,
                    Some(_) => {
                        return Err(err_at(at, "`offset` must be a non-negative integer".into()));
                    }
                };
                (p.clone(), offset)
            }
            _ => {
                let what = if allow_offset {
                    "a header is a pattern string or { pattern = \"...\", offset = N }"
                } else {
                    "a footer is a pattern string"
                };
                return Err(err_at(at, what.into()));
            }
        };
        let pattern = Pattern::parse(&text).map_err(|e| {
            err_at(
                at + 1 + e.column.saturating_sub(1),
                format!("bad pattern {text:?}: {}", e.message),
            )
        })?;
        if pattern.len() > MAX_PATTERN_LEN {
            return Err(err_at(
                at,
                format!(
                    "pattern is {} bytes; at most {MAX_PATTERN_LEN} are allowed because blocks overlap by the longest pattern minus one",
                    pattern.len()
                ),
            ));
        }
        out.push(Signature {
            text,
            pattern,
            offset,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_schema() {
        let c = parse(
            r#"
[[type]]
name = "jpeg"
extensions = ["jpg", "jpeg"]
headers = ["FF D8 FF"]
footers = ["FF D9"]
max_size = "20MiB"
colour = "ignored"

[[type]]
name = "mp4"
headers = [{ pattern = '"ftyp"', offset = 4 }]
min_size = 8
"#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.types.len(), 2);
        assert_eq!(c.types[0].max_size, 20 << 20);
        assert_eq!(c.types[0].footers[0].text, "FF D9");
        assert_eq!(c.types[1].headers[0].offset, 4);
        assert_eq!(c.types[1].extension(), "mp4");
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse(
            "[[type]]\nname = \"x\"\nheaders = [\"FF ZZ\"]\n",
            "bad.toml",
        )
        .unwrap_err();
        assert_eq!((e.origin.as_str(), e.line, e.column), ("bad.toml", 3, 16));
        assert!(e.to_string().starts_with("bad.toml:3:16: bad pattern"));
        let e = parse("[[type]]\nname = \"x\"\nheaders = [\"FF\"\n", "bad.toml").unwrap_err();
        assert!(e.line >= 3, "{e}");
        let e = parse("[[type]]\nname = \"x\"\nheaders = []\n", "f").unwrap_err();
        assert!(e.message.contains("no headers"));
        let long = format!(
            "[[type]]\nname = \"x\"\nheaders = [\"{}\"]\n",
            "AB".repeat(MAX_PATTERN_LEN + 1)
        );
        let e = parse(&long, "f").unwrap_err();
        assert!(e.message.contains("overlap"), "{e}");
        let e = parse(
            "[[type]]\nname = \"x\"\nheaders = [\"FF\"]\nmax_size = \"3 furlongs\"\n",
            "f",
        )
        .unwrap_err();
        assert_eq!(e.line, 4);
    }
}
