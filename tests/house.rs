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

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::source_tree::{rust_files, strip};

/// The longest body, in lines of code, a function may have.
const MAX_LINES: usize = 150;

/// Functions still over [`MAX_LINES`]: (file under `src/`, function name).
const STILL_LONG: &[(&str, &str)] = &[];

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
