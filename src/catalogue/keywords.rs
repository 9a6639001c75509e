//! Keyword lists (`gpucarve scan --keywords FILE`): many literals, one a line.
//!
//! A line is one keyword:
//!
//! * text, taken as the bytes written (UTF-8 or not), line end (`\n`,
//!   `\r\n`) excluded, spaces kept: `john.doe@example.com`;
//! * hex, when written `hex:` then byte pairs, spaces allowed between
//!   pairs: `hex:DEADBEEF`, `hex:de ad be ef`;
//! * blank lines (nothing, or only spaces and tabs) and lines starting with
//!   `#` are skipped;
//! * a leading backslash is dropped and the rest taken as text as written:
//!   `\#hashtag` is the keyword `#hashtag`, `\hex:41` the keyword `hex:41`,
//!   `\\x` the keyword `\x`.
//!
//! With `ignore_case`, ASCII letters match either case (as a
//! case-insensitive foremost rule does); other bytes match themselves.
//! A keyword repeated (the same bytes, or the same letters up to case with
//! `ignore_case`) is kept once, at its first line.
//!
//! Errors name the file and line: bad hex, an empty keyword (`hex:`, a lone
//! `\`), a keyword longer than [`super::MAX_PATTERN_LEN`] bytes, a line over
//! the length any keyword can take, more than [`MAX_KEYWORDS`] keywords. The
//! file is read a line at a time; loading is linear in its size.

use std::collections::HashSet;
use std::io::{BufRead, Read};
use std::path::Path;

use super::{DEFAULT_MAX_SIZE, FileType, FooterMode, MAX_PATTERN_LEN, Signature};
use crate::pattern::{ByteClass, Pattern};

/// Most keywords a list may hold (a larger file is refused, not read on).
pub const MAX_KEYWORDS: usize = 1_000_000;

/// The name of the keyword list's type in reports (`"type":"keyword"`).
pub const KEYWORD_TYPE: &str = "keyword";

/// Longest line read: a `hex:` line of the longest keyword with a space
/// between every byte pair, and some slack. A longer line is an error.
const MAX_LINE: usize = 4 + 3 * MAX_PATTERN_LEN + 64;

/// Reads a keyword list from `path` (see the module documentation) into a
/// file type named [`KEYWORD_TYPE`] whose headers are the keywords.
pub fn load(path: &Path, ignore_case: bool) -> Result<FileType, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("{}: cannot read keyword list: {e}", path.display()))?;
    parse(
        std::io::BufReader::with_capacity(1 << 16, file),
        &path.display().to_string(),
        ignore_case,
    )
}

/// Parses a keyword list; `origin` names it in errors (`origin:line: ...`).
pub fn parse(mut input: impl BufRead, origin: &str, ignore_case: bool) -> Result<FileType, String> {
    let mut headers: Vec<Signature> = Vec::new();
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        number += 1;
        let at = |msg: String| format!("{origin}:{number}: {msg}");
        let n = (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| at(format!("cannot read keyword list: {e}")))?;
        if n == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        } else if n > MAX_LINE {
            return Err(at(format!(
                "line longer than {MAX_LINE} bytes (a keyword is at most {MAX_PATTERN_LEN} bytes)"
            )));
        }
        let Some((bytes, text)) = keyword(&line).map_err(&at)? else {
            continue;
        };
        if bytes.is_empty() {
            return Err(at("empty keyword".into()));
        }
        if bytes.len() > MAX_PATTERN_LEN {
            return Err(at(format!(
                "keyword of {} bytes is longer than the longest pattern the engines take ({MAX_PATTERN_LEN} bytes)",
                bytes.len()
            )));
        }
        let key = if ignore_case {
            bytes.to_ascii_lowercase()
        } else {
            bytes.clone()
        };
        if !seen.insert(key) {
            continue;
        }
        if headers.len() == MAX_KEYWORDS {
            return Err(at(format!(
                "more than {MAX_KEYWORDS} keywords; split the list"
            )));
        }
        let classes = bytes
            .iter()
            .map(|&b| ByteClass::literal(b, ignore_case))
            .collect();
        let pattern = Pattern::new(classes).ok_or_else(|| at("empty keyword".into()))?;
        headers.push(Signature {
            text,
            pattern,
            offset: 0,
        });
    }
    if headers.is_empty() {
        return Err(format!("{origin}: the keyword list holds no keyword"));
    }
    Ok(FileType {
        name: KEYWORD_TYPE.into(),
        description: format!("keywords from {origin}"),
        extensions: Vec::new(),
        headers,
        footers: Vec::new(),
        footer_mode: FooterMode::First,
        min_size: 0,
        max_size: DEFAULT_MAX_SIZE,
        validator: None,
        source: Some(origin.to_string()),
        align: 1,
        keywords: true,
    })
}

/// One line's keyword: (bytes, how reports show it), `None` for a line
/// that holds none (blank, comment).
fn keyword(line: &[u8]) -> Result<Option<(Vec<u8>, String)>, String> {
    if line.iter().all(|b| *b == b' ' || *b == b'\t') || line[0] == b'#' {
        return Ok(None);
    }
    if let Some(rest) = line.strip_prefix(b"\\") {
        return Ok(Some((rest.to_vec(), shown(rest))));
    }
    let Some(hex) = line.strip_prefix(b"hex:") else {
        return Ok(Some((line.to_vec(), shown(line))));
    };
    let bytes = parse_hex(hex)?;
    let text = hex_text(&bytes);
    Ok(Some((bytes, text)))
}

/// `hex:` byte pairs, spaces and tabs allowed between pairs.
fn parse_hex(hex: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(hex.len() / 2);
    let mut i = 0;
    while i < hex.len() {
        let c = hex[i];
        if c == b' ' || c == b'\t' {
            i += 1;
            continue;
        }
        let digit = |b: u8| (b as char).to_digit(16);
        let (Some(hi), Some(lo)) = (digit(c), hex.get(i + 1).and_then(|&d| digit(d))) else {
            return Err(format!(
                "bad hex at column {}: write `hex:` then pairs of hex digits (spaces allowed between pairs)",
                i + 5
            ));
        };
        out.push((hi << 4 | lo) as u8);
        i += 2;
    }
    Ok(out)
}

/// How a text keyword is shown: as written when it is printable UTF-8,
/// else in the `hex:` form.
fn shown(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) if !s.chars().any(char::is_control) => {
            if s.starts_with('#') || s.starts_with("hex:") || s.starts_with('\\') {
                format!("\\{s}")
            } else {
                s.to_string()
            }
        }
        _ => hex_text(bytes),
    }
}

fn hex_text(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(4 + 2 * bytes.len());
    s.push_str("hex:");
    for b in bytes {
        let _ = write!(s, "{b:02X}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(s: &str, ic: bool) -> Result<FileType, String> {
        parse(s.as_bytes(), "k.txt", ic)
    }

    fn bytes(t: &FileType) -> Vec<Vec<u8>> {
        t.headers
            .iter()
            .map(|s| {
                s.pattern
                    .classes()
                    .iter()
                    .filter_map(|c| c.exact())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn text_hex_comments_escapes_duplicates() {
        let t = load_str(
            "# names\nalice\r\n\n  \nhex:DE AD be ef\nalice\n\\#tag\n\\hex:41\n\\\\x\nhex:616c696365\n b c \n",
            false,
        )
        .unwrap();
        assert_eq!(
            bytes(&t),
            vec![
                b"alice".to_vec(),
                vec![0xDE, 0xAD, 0xBE, 0xEF],
                b"#tag".to_vec(),
                b"hex:41".to_vec(),
                b"\\x".to_vec(),
                b" b c ".to_vec(),
            ]
        );
        let texts: Vec<&str> = t.headers.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "alice",
                "hex:DEADBEEF",
                "\\#tag",
                "\\hex:41",
                "\\\\x",
                " b c "
            ]
        );
        assert!(t.keywords);
        assert_eq!(t.name, KEYWORD_TYPE);
    }

    #[test]
    fn ignore_case_folds_letters_and_dedupes() {
        let t = load_str("Alice\nALICE\nx1\n", true).unwrap();
        assert_eq!(t.headers.len(), 2);
        assert!(t.headers[0].pattern.matches_at(b"aLiCe", 0));
        assert!(t.headers[1].pattern.matches_at(b"X1", 0));
        assert!(!t.headers[1].pattern.matches_at(b"X2", 0));
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            load_str("ok\nhex:ABC\n", false).unwrap_err(),
            "k.txt:2: bad hex at column 7: write `hex:` then pairs of hex digits (spaces allowed between pairs)"
        );
        assert!(
            load_str("hex:zz\n", false)
                .unwrap_err()
                .starts_with("k.txt:1: bad hex")
        );
        assert_eq!(
            load_str("a\n\nhex:\n", false).unwrap_err(),
            "k.txt:3: empty keyword"
        );
        assert_eq!(
            load_str("\\\n", false).unwrap_err(),
            "k.txt:1: empty keyword"
        );
        let long = "x".repeat(MAX_PATTERN_LEN + 1);
        assert!(
            load_str(&format!("a\n{long}\n"), false)
                .unwrap_err()
                .starts_with("k.txt:2: keyword of 1025 bytes is longer")
        );
        let huge = "x".repeat(MAX_LINE * 3);
        assert!(
            load_str(&huge, false)
                .unwrap_err()
                .starts_with("k.txt:1: line longer than")
        );
        assert!(
            load_str("# only\n\n", false)
                .unwrap_err()
                .contains("no keyword")
        );
    }

    #[test]
    fn non_utf8_text_is_shown_in_hex() {
        let t = parse(&b"\xff\xfeab\n"[..], "k", false).unwrap();
        assert_eq!(t.headers[0].text, "hex:FFFE6162");
    }
}
