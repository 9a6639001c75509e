//! foremost/scalpel `.conf` catalogues.
//!
//! One rule per line, fields separated by whitespace:
//!
//! ```text
//! # ext  case-sensitive  max-size  header                 [footer]   [REVERSE|NEXT]
//!   jpg  y               20000000  \xff\xd8\xff\xe0       \xff\xd9
//!   htm  n               50000     <html                  </html>
//!   pdf  y               5000000   %PDF                   %EOF\x0d   REVERSE
//! ```
//!
//! Escapes as scalpel's `translate()`: `\xHH`, octal `\ooo`, `\a \b \f \n \r
//! \t \v \\ \' \" \? \s` (space); an unescaped `?` is a one-byte wildcard
//! (foremost's `wildcard` directive changes that character). Case-insensitive
//! rules (`n`) match ASCII letters in either case. Several rules for one
//! extension become types `jpg`, `jpg_2`, ... Blank lines and `#` comments are
//! skipped.

use super::{Catalogue, CatalogueError, FileType, FooterMode, MAX_PATTERN_LEN, Signature};
use crate::pattern::{ByteClass, Pattern};

/// Parses a foremost/scalpel configuration; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Catalogue, CatalogueError> {
    let mut types: Vec<FileType> = Vec::new();
    let mut names = std::collections::HashSet::new();
    let mut suffixes: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut wildcard = b'?';
    for (lineno, line) in text.lines().enumerate() {
        let err = |col: usize, message: String| CatalogueError {
            origin: origin.to_string(),
            line: lineno + 1,
            column: col + 1,
            message,
        };
        let fields = tokens(line);
        if fields.is_empty() || fields[0].1.starts_with('#') {
            continue;
        }
        if fields[0].1 == "wildcard" {
            let Some(&(c, w)) = fields.get(1) else {
                return Err(err(line.len(), "`wildcard` needs a character".into()));
            };
            let b = unescape(w, 0).map_err(|(i, m)| err(c + i, m))?;
            if b.len() != 1 {
                return Err(err(c, "`wildcard` takes a single character".into()));
            }
            wildcard = b[0];
            continue;
        }
        if fields.len() < 4 {
            return Err(err(
                line.len(),
                "expected `ext case-sensitive(y/n) max-size header [footer] [REVERSE|NEXT]`".into(),
            ));
        }
        let (_, ext) = fields[0];
        let case_sensitive = match fields[1].1.to_ascii_lowercase().as_str() {
            "y" | "yes" => true,
            "n" | "no" => false,
            other => {
                return Err(err(
                    fields[1].0,
                    format!("case-sensitive must be y or n, not `{other}`"),
                ));
            }
        };
        let max_size: u64 = fields[2].1.parse().map_err(|_| {
            err(
                fields[2].0,
                format!("`{}` is not a size in bytes", fields[2].1),
            )
        })?;
        if max_size == 0 {
            return Err(err(fields[2].0, "the size must be above zero".into()));
        }
        let pattern = |(col, tok): (usize, &str)| -> Result<Signature, CatalogueError> {
            let p =
                conf_pattern(tok, case_sensitive, wildcard).map_err(|(i, m)| err(col + i, m))?;
            if p.len() > MAX_PATTERN_LEN {
                return Err(err(
                    col,
                    format!(
                        "pattern is {} bytes; at most {MAX_PATTERN_LEN} are allowed (block overlap)",
                        p.len()
                    ),
                ));
            }
            Ok(Signature {
                text: tok.to_string(),
                pattern: p,
                offset: 0,
            })
        };
        let header = pattern(fields[3])?;
        let mut footers = Vec::new();
        let mut footer_mode = FooterMode::First;
        for &(col, tok) in &fields[4..] {
            match tok.to_ascii_uppercase().as_str() {
                "REVERSE" if !footers.is_empty() => footer_mode = FooterMode::Last,
                "NEXT" if !footers.is_empty() => footer_mode = FooterMode::Next,
                _ if footers.is_empty() => footers.push(pattern((col, tok))?),
                _ => {
                    return Err(err(
                        col,
                        format!("unexpected `{tok}` after the footer (REVERSE or NEXT expected)"),
                    ));
                }
            }
        }
        let ext = if ext.eq_ignore_ascii_case("none") {
            String::new()
        } else {
            ext.to_ascii_lowercase()
        };
        let base = if ext.is_empty() {
            "noext".to_string()
        } else {
            sanitize(&ext)
        };
        // `jpg`, `jpg_2`, `jpg_3`...: the next free number of each base is
        // kept (scanning the types so far for each candidate name was cubic:
        // 3 000 lines of one extension took 7.4 s).
        let next = suffixes.entry(base.clone()).or_insert(1);
        let mut name = if *next == 1 {
            base.clone()
        } else {
            format!("{base}_{next}")
        };
        while names.contains(&name) {
            *next += 1;
            name = format!("{base}_{next}");
        }
        *next += 1;
        names.insert(name.clone());
        types.push(FileType {
            keywords: false,
            align: 1,
            name,
            description: format!("{origin} line {}", lineno + 1),
            extensions: if ext.is_empty() { vec![] } else { vec![ext] },
            headers: vec![header],
            footers,
            footer_mode,
            min_size: 0,
            max_size,
            validator: None,
            source: Some(origin.to_string()),
        });
    }
    if types.is_empty() {
        return Err(CatalogueError {
            origin: origin.to_string(),
            line: 0,
            column: 0,
            message: "no rules (every line is blank or commented out)".into(),
        });
    }
    Ok(Catalogue { types })
}

fn sanitize(ext: &str) -> String {
    ext.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Whitespace-separated fields with their char columns (0-based).
fn tokens(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push((s, &line[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &line[s..]));
    }
    out
}

/// A byte that came from an escape is never a wildcard.
enum Unit {
    Literal(u8),
    Escaped(u8),
}

fn units(tok: &str) -> Result<Vec<(usize, Unit)>, (usize, String)> {
    let b = tok.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push((i, Unit::Literal(b[i])));
            i += 1;
            continue;
        }
        let at = i;
        let Some(&e) = b.get(i + 1) else {
            return Err((i, "dangling `\\`".into()));
        };
        let (v, used) = match e {
            b'x' | b'X' => {
                let h = b
                    .get(i + 2..i + 4)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                (h.ok_or((i, "`\\x` needs two hex digits".to_string()))?, 4)
            }
            b'0'..=b'7' => {
                let digits = b[i + 1..]
                    .iter()
                    .take(3)
                    .take_while(|d| (b'0'..=b'7').contains(d))
                    .count();
                let s = std::str::from_utf8(&b[i + 1..i + 1 + digits]).unwrap_or("0");
                let v = u32::from_str_radix(s, 8).unwrap_or(0);
                (
                    u8::try_from(v).map_err(|_| (i, "octal escape above \\377".to_string()))?,
                    1 + digits,
                )
            }
            b'a' => (7, 2),
            b'b' => (8, 2),
            b'f' => (12, 2),
            b'n' => (b'\n', 2),
            b'r' => (b'\r', 2),
            b't' => (b'\t', 2),
            b'v' => (11, 2),
            b's' => (b' ', 2),
            b'\\' | b'\'' | b'"' | b'?' => (e, 2),
            other => return Err((i, format!("unknown escape `\\{}`", other as char))),
        };
        out.push((at, Unit::Escaped(v)));
        i += used;
    }
    Ok(out)
}

fn unescape(tok: &str, _col: usize) -> Result<Vec<u8>, (usize, String)> {
    Ok(units(tok)?
        .into_iter()
        .map(|(_, u)| match u {
            Unit::Literal(b) | Unit::Escaped(b) => b,
        })
        .collect())
}

fn conf_pattern(tok: &str, case_sensitive: bool, wildcard: u8) -> Result<Pattern, (usize, String)> {
    let classes: Vec<ByteClass> = units(tok)?
        .into_iter()
        .map(|(_, u)| match u {
            Unit::Literal(b) if b == wildcard => ByteClass::Any,
            Unit::Literal(b) | Unit::Escaped(b) => ByteClass::literal(b, !case_sensitive),
        })
        .collect();
    Pattern::new(classes).ok_or((
        0,
        "a pattern made only of wildcards would match every byte".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# foremost-style\n\
        \tjpg\ty\t200000000\t\\xff\\xd8\\xff\\xe0\\x00\\x10\t\\xff\\xd9\n\
        \tjpg\ty\t200000000\t\\xff\\xd8\\xff\\xe1\t\\xff\\xd9\n\
        htm n 50000 <html </html>\n\
        pdf y 5000000 %PDF %EOF\\x0d REVERSE\n\
        doc y 10000 \\xd0\\xcf\\x11\\xe0 \\xd0\\xcf\\x11\\xe0 NEXT\n\
        mpg y 10000 \\x00\\x00\\x01\\xba?\\x3f\n\
        \n";

    #[test]
    fn parses_foremost_rules() {
        let c = parse(SAMPLE, "foremost.conf").unwrap();
        let names: Vec<&str> = c.types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["jpg", "jpg_2", "htm", "pdf", "doc", "mpg"]);
        assert_eq!(
            c.types[0].headers[0].pattern,
            Pattern::literal(b"\xff\xd8\xff\xe0\x00\x10").unwrap()
        );
        assert_eq!(c.types[0].max_size, 200_000_000);
        assert!(c.types[2].headers[0].pattern.matches_at(b"<HtMl>", 0));
        assert_eq!(c.types[3].footer_mode, FooterMode::Last);
        assert_eq!(c.types[4].footer_mode, FooterMode::Next);
        let mpg = c.types[5].headers[0].pattern.classes();
        assert_eq!(mpg[4], ByteClass::Any);
        assert_eq!(mpg[5], ByteClass::Exact(b'?'));
    }

    #[test]
    fn errors_have_line_and_column() {
        let e = parse("jpg y 100 \\xZZ\n", "x.conf").unwrap_err();
        assert_eq!((e.line, e.column), (1, 11));
        let e = parse("\njpg maybe 100 abc\n", "x.conf").unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        let e = parse("jpg y\n", "x.conf").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(parse("# nothing\n", "x.conf").is_err());
        assert!(parse("x y 10 ???\n", "x.conf").is_err());
    }
    proptest::proptest! {
        /// Names are what the scan of the types so far gave (the first free
        /// of `base`, `base_2`, `base_3`...), whatever the extensions and
        /// their collisions with names made earlier (`jpg_2` as an extension).
        #[test]
        fn names_are_the_first_free_of_each_base(
            exts in proptest::collection::vec(
                proptest::sample::select(vec!["jpg", "jpg_2", "jpg_2_2", "png", "none", "noext"]),
                1..60,
            )
        ) {
            let text: String = exts.iter().map(|e| format!("{e} y 100 \\x00\\x01\n")).collect();
            let got: Vec<String> = parse(&text, "t").unwrap().types.into_iter().map(|t| t.name).collect();
            let mut want: Vec<String> = Vec::new();
            for e in &exts {
                let base = if *e == "none" { "noext".to_string() } else { e.to_string() };
                let mut name = base.clone();
                let mut n = 1;
                while want.contains(&name) {
                    n += 1;
                    name = format!("{base}_{n}");
                }
                want.push(name);
            }
            proptest::prop_assert_eq!(got, want);
        }
    }
}
