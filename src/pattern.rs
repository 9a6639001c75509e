//! Byte patterns: what an engine searches for.
//!
//! A [`Pattern`] is a fixed-length sequence of [`ByteClass`]es: an exact byte,
//! any byte (`??`), or one of two bytes (an ASCII letter matched without case,
//! from a case-insensitive foremost/scalpel rule). Every engine, the GPU one
//! included, takes a slice of patterns and must report every position where
//! each one matches, overlaps, prefixes and suffixes included.
//!
//! The catalogue's textual syntax is parsed here too, so that the CPU engine,
//! the GPU table builder and the tests agree on one meaning:
//!
//! * hex bytes, spaces optional: `FF D8 FF`, `ffd8ff`
//! * `??` for any byte
//! * double-quoted strings with escapes `\" \\ \n \r \t \0 \xHH`: `"%PDF-"`
//!
//! mixed freely: `89 "PNG" 0D 0A 1A 0A`.
//!
//! This module never touches files, blocks or offsets in an image.

use std::fmt;

/// One position of a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteClass {
    /// Exactly this byte.
    Exact(u8),
    /// Either of two bytes (used for ASCII letters matched without case).
    Either(u8, u8),
    /// Any byte (`??`).
    Any,
}

impl ByteClass {
    /// Does `b` belong to this class?
    #[inline]
    pub fn matches(self, b: u8) -> bool {
        match self {
            ByteClass::Exact(x) => x == b,
            ByteClass::Either(x, y) => x == b || y == b,
            ByteClass::Any => true,
        }
    }

    /// The class for `b`, folded to both ASCII cases when `b` is a letter and
    /// `case_insensitive` is set.
    pub fn literal(b: u8, case_insensitive: bool) -> ByteClass {
        if case_insensitive && b.is_ascii_alphabetic() {
            ByteClass::Either(b.to_ascii_lowercase(), b.to_ascii_uppercase())
        } else {
            ByteClass::Exact(b)
        }
    }

    /// Is this a single concrete byte?
    pub fn exact(self) -> Option<u8> {
        match self {
            ByteClass::Exact(b) => Some(b),
            _ => None,
        }
    }
}

/// A byte pattern: a non-empty sequence of byte classes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pattern {
    classes: Vec<ByteClass>,
}

/// Why a pattern's text could not be parsed; `column` is 1-based, in chars.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternError {
    pub column: usize,
    pub message: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for PatternError {}

impl Pattern {
    /// Builds a pattern from classes. Returns `None` when empty or made only
    /// of wildcards (such a pattern would match at every byte).
    pub fn new(classes: Vec<ByteClass>) -> Option<Pattern> {
        if classes.iter().all(|c| *c == ByteClass::Any) {
            return None;
        }
        Some(Pattern { classes })
    }

    /// A pattern of exact bytes.
    pub fn literal(bytes: &[u8]) -> Option<Pattern> {
        Pattern::new(bytes.iter().map(|&b| ByteClass::Exact(b)).collect())
    }

    /// Parses the catalogue syntax (see the module documentation).
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let chars: Vec<char> = text.chars().collect();
        let mut classes = Vec::new();
        let mut i = 0;
        let err = |col: usize, msg: String| PatternError {
            column: col + 1,
            message: msg,
        };
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() || c == ',' {
                i += 1;
            } else if c == '?' {
                if chars.get(i + 1) != Some(&'?') {
                    return Err(err(
                        i,
                        "a wildcard is written `??` (two question marks)".into(),
                    ));
                }
                classes.push(ByteClass::Any);
                i += 2;
            } else if c == '"' {
                i += 1;
                let mut closed = false;
                while i < chars.len() {
                    let c = chars[i];
                    if c == '"' {
                        closed = true;
                        i += 1;
                        break;
                    }
                    if c == '\\' {
                        let (b, used) = parse_escape(&chars, i).map_err(|m| err(i, m))?;
                        classes.push(ByteClass::Exact(b));
                        i += used;
                        continue;
                    }
                    if !c.is_ascii() {
                        return Err(err(
                            i,
                            format!(
                                "non-ASCII character {c:?} in a string; write its bytes in hex"
                            ),
                        ));
                    }
                    classes.push(ByteClass::Exact(c as u8));
                    i += 1;
                }
                if !closed {
                    return Err(err(
                        chars.len().saturating_sub(1),
                        "unterminated string (missing closing `\"`)".into(),
                    ));
                }
            } else if c.is_ascii_hexdigit() {
                let Some(&d) = chars.get(i + 1).filter(|d| d.is_ascii_hexdigit()) else {
                    return Err(err(i, "a hex byte needs two digits".into()));
                };
                let hi = c.to_digit(16).unwrap_or(0) as u8;
                let lo = d.to_digit(16).unwrap_or(0) as u8;
                classes.push(ByteClass::Exact(hi << 4 | lo));
                i += 2;
            } else {
                return Err(err(
                    i,
                    format!(
                        "unexpected character {c:?}; expected hex bytes, `??` or a quoted string"
                    ),
                ));
            }
        }
        if classes.is_empty() {
            return Err(err(0, "empty pattern".into()));
        }
        Pattern::new(classes).ok_or_else(|| {
            err(
                0,
                "a pattern made only of `??` would match every byte".into(),
            )
        })
    }

    /// The classes, in order.
    pub fn classes(&self) -> &[ByteClass] {
        &self.classes
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    /// Patterns are never empty; provided for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// Does the pattern match `hay` at `pos`? (false when it does not fit)
    #[inline]
    pub fn matches_at(&self, hay: &[u8], pos: usize) -> bool {
        match hay.get(pos..pos.saturating_add(self.classes.len())) {
            Some(window) => self.classes.iter().zip(window).all(|(c, &b)| c.matches(b)),
            None => false,
        }
    }

    /// The longest run of exact bytes, as (start index, bytes). `None` if the
    /// pattern has no exact byte (only wildcards and case-folded letters).
    pub fn longest_exact_run(&self) -> Option<(usize, Vec<u8>)> {
        let mut best: Option<(usize, usize)> = None;
        let mut i = 0;
        while i < self.classes.len() {
            if self.classes[i].exact().is_some() {
                let start = i;
                while i < self.classes.len() && self.classes[i].exact().is_some() {
                    i += 1;
                }
                if best.is_none_or(|(_, l)| i - start > l) {
                    best = Some((start, i - start));
                }
            } else {
                i += 1;
            }
        }
        best.map(|(s, l)| {
            (
                s,
                self.classes[s..s + l]
                    .iter()
                    .filter_map(|c| c.exact())
                    .collect(),
            )
        })
    }
}

impl fmt::Display for Pattern {
    /// Canonical hex form: `FF D8 FF ??`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.classes.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            match c {
                ByteClass::Exact(b) => write!(f, "{b:02X}")?,
                ByteClass::Either(a, b) => write!(f, "[{a:02X}|{b:02X}]")?,
                ByteClass::Any => f.write_str("??")?,
            }
        }
        Ok(())
    }
}

/// Parses one escape starting at `chars[i] == '\\'`; returns (byte, chars used).
fn parse_escape(chars: &[char], i: usize) -> Result<(u8, usize), String> {
    let Some(&e) = chars.get(i + 1) else {
        return Err("dangling `\\` at the end".into());
    };
    Ok(match e {
        '"' => (b'"', 2),
        '\\' => (b'\\', 2),
        'n' => (b'\n', 2),
        'r' => (b'\r', 2),
        't' => (b'\t', 2),
        '0' => (0, 2),
        'x' => {
            let h: String = chars.iter().skip(i + 2).take(2).collect();
            if h.len() != 2 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err("`\\x` needs two hex digits".into());
            }
            (u8::from_str_radix(&h, 16).map_err(|e| e.to_string())?, 4)
        }
        other => return Err(format!("unknown escape `\\{other}`")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mixed_syntax() {
        let p = Pattern::parse(r#"89 "PNG" 0D0A 1a 0A ??"#).unwrap();
        assert_eq!(p.len(), 9);
        assert_eq!(p.classes()[0], ByteClass::Exact(0x89));
        assert_eq!(p.classes()[1], ByteClass::Exact(b'P'));
        assert_eq!(p.classes()[6], ByteClass::Exact(0x1A));
        assert_eq!(p.classes()[8], ByteClass::Any);
        assert_eq!(p.to_string(), "89 50 4E 47 0D 0A 1A 0A ??");
    }

    #[test]
    fn parses_escapes() {
        let p = Pattern::parse(r#""a\"\\\n\x00\xfF""#).unwrap();
        let bytes: Vec<u8> = p.classes().iter().filter_map(|c| c.exact()).collect();
        assert_eq!(bytes, b"a\"\\\n\x00\xff");
    }

    #[test]
    fn errors_have_columns() {
        assert_eq!(Pattern::parse("FF D").unwrap_err().column, 4);
        assert_eq!(Pattern::parse("FF ?").unwrap_err().column, 4);
        assert_eq!(Pattern::parse("FF zz").unwrap_err().column, 4);
        assert!(Pattern::parse("\"abc").is_err());
        assert!(Pattern::parse("").is_err());
        assert!(Pattern::parse("?? ??").is_err());
        assert!(Pattern::parse(r#""\q""#).is_err());
        assert!(Pattern::parse(r#""é""#).is_err());
    }

    #[test]
    fn matching_and_runs() {
        let p = Pattern::parse(r#"?? ?? ?? ?? "ftyp""#).unwrap();
        assert!(p.matches_at(b"\0\0\0\x18ftypisom", 0));
        assert!(!p.matches_at(b"\0\0\0\x18ftyp", 1));
        assert_eq!(p.longest_exact_run(), Some((4, b"ftyp".to_vec())));
        let ci =
            Pattern::new(b"ab".iter().map(|&b| ByteClass::literal(b, true)).collect()).unwrap();
        assert!(ci.matches_at(b"xAb", 1));
        assert_eq!(ci.longest_exact_run(), None);
    }
}
