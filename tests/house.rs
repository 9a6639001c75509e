//! Functions a reader can hold in mind: none in `src/` is over
//! [`MAX_LINES`] lines long, outside `#[cfg(test)]` items.
//!
//! A function's length is the number of lines of its body, from the line of
//! its opening brace to the line of its closing brace, not counting lines that
//! hold only comments or whitespace. Nested functions and closures count
//! toward the function that holds them (and nested functions are measured on
//! their own as well).
//!
//! The functions still over the limit are listed in [`STILL_LONG`]; the list
//! only shrinks: a listed function that is no longer long fails the test too,
//! so that it is taken off the list.

use std::fs;
use std::path::{Path, PathBuf};

/// The longest body, in lines of code, a function may have.
const MAX_LINES: usize = 150;

/// Functions still over [`MAX_LINES`]: (file under `src/`, function name).
const STILL_LONG: &[(&str, &str)] = &[];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments, string and char literals blanked out; every
/// newline is kept, so line numbers stay those of the source.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    // the newlines of a skipped stretch, so lines keep their numbers
    let keep_lines = |out: &mut String, from: usize, to: usize| {
        let to = to.min(b.len());
        for _ in b[from..to].iter().filter(|&&c| c == b'\n') {
            out.push('\n');
        }
    };
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            keep_lines(&mut out, start, i);
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            // raw string r"..." or r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < b.len() {
                if b[j] == b'"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&b'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
            keep_lines(&mut out, start, i);
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            keep_lines(&mut out, start, i);
        } else if c == b'\'' {
            // a char literal ('x', '\n', '\u{..}') or a lifetime ('a)
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
                out.push_str("' '");
            } else if let Some(len) = std::str::from_utf8(&b[i + 1..])
                .ok()
                .and_then(|s| s.chars().next())
                .map(char::len_utf8)
                .filter(|&l| l > 1 && b.get(i + 1 + l) == Some(&b'\''))
            {
                i += len + 2;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            // copy one UTF-8 character
            let s = &src[i..];
            let ch = s.chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `{` `(` `[`
    Open(u8),
    /// `}` `)` `]`
    Close(u8),
    Semi,
    Hash,
    Other,
}

/// A token and the (1-based) line it is on.
type Token = (Tok, usize);

fn tokens(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident(src[s..i].to_string()), line));
            continue;
        }
        if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Other, line));
            continue;
        }
        i += 1;
        let tok = match c {
            b'{' | b'(' | b'[' => Tok::Open(c),
            b'}' | b')' | b']' => Tok::Close(c),
            b';' => Tok::Semi,
            b'#' => Tok::Hash,
            b'\n' => {
                line += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => continue,
            _ => Tok::Other,
        };
        out.push((tok, line));
    }
    out
}

/// The index of the token that closes the bracket opened at `open`.
fn matching(toks: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, (t, _)) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Open(_) => depth += 1,
            Tok::Close(_) => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len() - 1
}

/// Drops every item under `#[cfg(test)]` (test modules and test-only functions).
fn without_test_items(toks: Vec<Token>) -> Vec<Token> {
    let attr = [
        Tok::Hash,
        Tok::Open(b'['),
        Tok::Ident("cfg".into()),
        Tok::Open(b'('),
        Tok::Ident("test".into()),
        Tok::Close(b')'),
        Tok::Close(b']'),
    ];
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if toks[i..]
            .iter()
            .map(|(t, _)| t)
            .take(attr.len())
            .eq(attr.iter())
        {
            let mut j = i + attr.len();
            while j < toks.len() && toks[j].0 != Tok::Semi && toks[j].0 != Tok::Open(b'{') {
                j += 1;
            }
            if j < toks.len() && toks[j].0 == Tok::Open(b'{') {
                j = matching(&toks, j);
            }
            i = j + 1;
            continue;
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// A function found in the source.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    /// the line of the `fn` keyword
    line: usize,
    /// lines of code in the body, braces included
    lines: usize,
}

/// Every function with a body in `src` (outside `#[cfg(test)]` items).
fn functions(src: &str) -> Vec<Function> {
    let stripped = strip(src);
    // the lines that hold code, once comments and whitespace are gone
    let code: Vec<bool> = stripped.lines().map(|l| !l.trim().is_empty()).collect();
    let toks = without_test_items(tokens(&stripped));
    let mut out = Vec::new();
    for i in 0..toks.len() {
        let (Tok::Ident(kw), line) = &toks[i] else {
            continue;
        };
        let Some((Tok::Ident(name), _)) = toks.get(i + 1) else {
            continue;
        };
        if kw != "fn" {
            continue;
        }
        // the signature ends at a `;` (no body) or the body's `{`, outside
        // any bracket (`-> [u8; 4]`, `where F: Fn(u8)`)
        let mut j = i + 2;
        let mut depth = 0usize;
        while j < toks.len() {
            match toks[j].0 {
                Tok::Open(b'{') if depth == 0 => break,
                Tok::Semi if depth == 0 => break,
                Tok::Open(_) => depth += 1,
                Tok::Close(_) => depth = depth.saturating_sub(1),
                _ => {}
            }
            j += 1;
        }
        if j >= toks.len() || toks[j].0 != Tok::Open(b'{') {
            continue;
        }
        let (from, to) = (toks[j].1, toks[matching(&toks, j)].1);
        let lines = (from..=to)
            .filter(|l| code.get(l - 1).copied().unwrap_or(false))
            .count();
        out.push(Function {
            name: name.clone(),
            line: *line,
            lines,
        });
    }
    out
}

/// The files of modules declared under `#[cfg(test)]` (`mod tests;`): tests.
fn test_only_files(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for f in files {
        let text = fs::read_to_string(f).expect("read source");
        let dir = match f.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => f.parent().map(Path::to_path_buf),
            _ => Some(f.with_extension("")),
        };
        let Some(dir) = dir else { continue };
        let mut lines = text.lines().map(str::trim);
        while let Some(l) = lines.next() {
            if l != "#[cfg(test)]" {
                continue;
            }
            // the item after the attribute (doc comments come before it)
            let Some(next) = lines.next() else { break };
            let decl = next
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                out.push(dir.join(format!("{name}.rs")));
                out.push(dir.join(name).join("mod.rs"));
            }
        }
    }
    out
}

/// Every function in `src/`: (file under `src/`, function).
fn all_functions() -> Vec<(String, Function)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let test_only = test_only_files(&files);
    let mut out = Vec::new();
    for f in files.iter().filter(|f| !test_only.contains(*f)) {
        let rel = f.strip_prefix(&root).expect("under src");
        let rel = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let text = fs::read_to_string(f).expect("read source");
        for func in functions(&text) {
            out.push((rel.clone(), func));
        }
    }
    out
}

#[test]
fn no_function_is_too_long_to_hold_in_mind() {
    let all = all_functions();
    assert!(
        all.len() > 100,
        "only {} functions seen: the parser is broken",
        all.len()
    );
    if std::env::var_os("GPUCARVE_PRINT_LONG").is_some() {
        let mut long: Vec<_> = all.iter().filter(|(_, f)| f.lines > 60).collect();
        long.sort_by_key(|(_, f)| std::cmp::Reverse(f.lines));
        for (file, f) in long {
            println!("{:5}  src/{file}:{}  {}", f.lines, f.line, f.name);
        }
    }
    let listed = |file: &str, name: &str| STILL_LONG.iter().any(|&(f, n)| f == file && n == name);
    let mut problems = Vec::new();
    for (file, f) in &all {
        if f.lines > MAX_LINES && !listed(file, &f.name) {
            problems.push(format!(
                "src/{file}:{}: fn {} is {} lines long (at most {MAX_LINES}): \
                 extract named steps",
                f.line, f.name, f.lines
            ));
        }
    }
    for &(file, name) in STILL_LONG {
        let still = all
            .iter()
            .any(|(f, func)| f == file && func.name == name && func.lines > MAX_LINES);
        if !still {
            problems.push(format!(
                "src/{file}: fn {name} is listed in STILL_LONG but is no longer over \
                 {MAX_LINES} lines (or is gone): take it off the list"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_measurer_counts_body_lines_and_skips_comments_strings_and_tests() {
    let src = r##"
fn short(x: u8) -> [u8; 4] {
    // a comment line is not counted
    let s = "a } brace in a string";
    let c = '}';
    /* a block comment
       over two lines } */
    [x; 4]
}

trait T {
    fn declared(&self);
    fn provided<'a>(&'a self, f: fn(u8) -> u8) where Self: Sized {
        let raw = r#"{ not a block
        "#;
    }
}

#[cfg(test)]
mod tests {
    fn hidden() {}
}
"##;
    let got = functions(src);
    assert_eq!(
        got,
        [
            Function {
                name: "short".into(),
                line: 2,
                lines: 5,
            },
            Function {
                name: "provided".into(),
                line: 13,
                lines: 4,
            },
        ]
    );
}
