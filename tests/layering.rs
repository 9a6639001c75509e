//! The module graph has no circles, and the pipeline's arrows point down it.
//!
//! Every `crate::`, `super::` and `self::` path in `src/` (outside comments,
//! strings and `#[cfg(test)]` items) is an arrow from the module that writes it
//! to the module it names. Arrows between a module and its own ancestors are the
//! parent's business (a parent declares and re-exports its children); every
//! other arrow is lifted to the two siblings under the modules' nearest common
//! ancestor (`carve::fragments::jpeg` → `carve::validators::read` is
//! `fragments` → `validators` inside `carve`). Among siblings the arrows must
//! form no circle, and among the top-level modules the pipeline's stages may
//! only reach stages before them:
//! source → engine → scan → carve → report → job → batch.
//!
//! Glob imports of the crate's own modules (`use super::*`) are not allowed
//! outside tests: they would hide arrows from this check.
//!
//! Run with `GPUCARVE_PRINT_GRAPH=1` and `--nocapture` to print the graph.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use common::source_tree::{rust_files, strip};

/// The pipeline, in the order data flows: a stage may use the stages before it.
const PIPELINE: &[&str] = &[
    "source", "engine", "scan", "carve", "report", "job", "batch",
];

type Module = Vec<String>;

fn module_of(rel: &Path) -> Module {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path, // ::
    Open,
    Close,
    Comma,
    Semi,
    Hash,
    Star,
    Other,
}

fn tokens(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(src[s..i].to_string()));
            continue;
        }
        if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Other);
            continue;
        }
        i += 1;
        match c {
            b':' if b.get(i) == Some(&b':') => {
                i += 1;
                out.push(Tok::Path);
            }
            b'{' => out.push(Tok::Open),
            b'}' => out.push(Tok::Close),
            b',' => out.push(Tok::Comma),
            b';' => out.push(Tok::Semi),
            b'#' => out.push(Tok::Hash),
            b'*' => out.push(Tok::Star),
            b' ' | b'\n' | b'\t' | b'\r' => {}
            _ => out.push(Tok::Other),
        }
    }
    out
}

/// Drops every item under `#[cfg(test)]` (test modules and test-only
/// imports); names the child modules declared test-only (`mod tests;`).
fn without_test_items(toks: Vec<Tok>, test_children: &mut Vec<String>) -> Vec<Tok> {
    let attr = [
        Tok::Hash,
        Tok::Other, // [
        Tok::Ident("cfg".into()),
        Tok::Other, // (
        Tok::Ident("test".into()),
        Tok::Other, // )
        Tok::Other, // ]
    ];
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if toks[i..].starts_with(&attr) {
            let mut j = i + attr.len();
            while j < toks.len() && toks[j] != Tok::Semi && toks[j] != Tok::Open {
                j += 1;
            }
            if toks.get(j) == Some(&Tok::Semi)
                && j >= 2
                && toks[j - 2] == Tok::Ident("mod".into())
                && let Tok::Ident(name) = &toks[j - 1]
            {
                test_children.push(name.clone());
            }
            if j < toks.len() && toks[j] == Tok::Open {
                let mut depth = 0;
                while j < toks.len() {
                    match toks[j] {
                        Tok::Open => depth += 1,
                        Tok::Close => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
            }
            i = j + 1;
            continue;
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// Every path the tokens name: `use` trees expanded, other paths as written.
fn paths(toks: &[Tok]) -> Vec<Vec<String>> {
    fn tree(toks: &[Tok], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        while *i < toks.len() {
            match &toks[*i] {
                Tok::Ident(s) => {
                    path.push(s.clone());
                    *i += 1;
                }
                Tok::Path => *i += 1,
                Tok::Star => {
                    path.push("*".into());
                    *i += 1;
                    break;
                }
                Tok::Open => {
                    *i += 1;
                    loop {
                        tree(toks, i, &path, out);
                        match toks.get(*i) {
                            Some(Tok::Comma) => *i += 1,
                            Some(Tok::Close) => {
                                *i += 1;
                                break;
                            }
                            _ => break,
                        }
                        if toks.get(*i) == Some(&Tok::Close) {
                            *i += 1;
                            break;
                        }
                    }
                    return;
                }
                _ => break,
            }
        }
        if path.len() > prefix.len() {
            // `as` renames are not module names
            if let Some(p) = path.iter().position(|s| s == "as") {
                path.truncate(p);
            }
            out.push(path);
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == Tok::Ident("use".into()) {
            i += 1;
            tree(toks, &mut i, &[], &mut out);
            continue;
        }
        if let Tok::Ident(s) = &toks[i]
            && (s == "crate" || s == "super" || s == "self")
            && toks.get(i + 1) == Some(&Tok::Path)
        {
            let mut path = vec![s.clone()];
            let mut j = i + 1;
            while toks.get(j) == Some(&Tok::Path) {
                match toks.get(j + 1) {
                    Some(Tok::Ident(n)) => {
                        path.push(n.clone());
                        j += 2;
                    }
                    _ => break,
                }
            }
            out.push(path);
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// The module a path names, seen from module `from`; `None` for outside crates.
fn resolve(from: &Module, path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    let mut base: Module;
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &path[1..];
        }
        Some("self") => {
            base = from.clone();
            rest = &path[1..];
        }
        Some("super") => {
            base = from.clone();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // a child module named without `self::`
            let mut child = from.clone();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            base = from.clone();
        }
        None => return None,
    }
    for name in rest {
        let mut next = base.clone();
        next.push(name.clone());
        if modules.contains(&next) {
            base = next;
        } else {
            break;
        }
    }
    Some(base)
}

struct Graph {
    /// (parent, from sibling, to sibling) → one example "file: path"
    arrows: BTreeMap<(Module, String, String), String>,
    /// Glob imports of the crate's own modules ("file: path"): they hide
    /// the arrows of the names they bring in.
    globs: Vec<String>,
}

fn graph() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut modules = BTreeSet::new();
    let mut sources = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).expect("under src");
        if rel == Path::new("main.rs") {
            continue; // the binary: above everything
        }
        let m = module_of(rel);
        modules.insert(m.clone());
        sources.push((rel.display().to_string(), m, f.clone()));
    }
    // Files of test-only modules (`#[cfg(test)] mod tests;`) are tests.
    let mut test_only: BTreeSet<Module> = BTreeSet::new();
    let mut texts = Vec::new();
    for (rel, m, f) in &sources {
        let text = fs::read_to_string(f).expect("read source");
        let mut children = Vec::new();
        let toks = without_test_items(tokens(&strip(&text)), &mut children);
        for c in children {
            let mut child = m.clone();
            child.push(c);
            test_only.insert(child);
        }
        texts.push((rel, m, toks));
    }
    let mut arrows = BTreeMap::new();
    let mut globs = Vec::new();
    for (rel, m, toks) in &texts {
        if test_only.iter().any(|t| m.starts_with(t)) {
            continue;
        }
        for p in paths(toks) {
            if p.last().is_some_and(|l| l == "*")
                && matches!(p[0].as_str(), "crate" | "super" | "self")
            {
                globs.push(format!("{rel}: {}", p.join("::")));
            }
            let Some(to) = resolve(m, &p, &modules) else {
                continue;
            };
            let common = m.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == m.len() || common == to.len() {
                continue; // a module and its own ancestor or descendant
            }
            let key = (m[..common].to_vec(), m[common].clone(), to[common].clone());
            arrows
                .entry(key)
                .or_insert_with(|| format!("{rel}: {}", p.join("::")));
        }
    }
    Graph { arrows, globs }
}

/// Circles among the siblings of each parent (Tarjan's strongly connected components).
fn circles(g: &Graph) -> Vec<String> {
    let mut by_parent: BTreeMap<&Module, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    for (parent, from, to) in g.arrows.keys() {
        by_parent
            .entry(parent)
            .or_default()
            .entry(from.as_str())
            .or_default()
            .push(to.as_str());
    }
    let mut found = Vec::new();
    for (parent, edges) in &by_parent {
        let nodes: BTreeSet<&str> = edges
            .iter()
            .flat_map(|(a, bs)| std::iter::once(*a).chain(bs.iter().copied()))
            .collect();
        let nodes: Vec<&str> = nodes.into_iter().collect();
        let idx = |n: &str| nodes.iter().position(|x| *x == n).expect("node");
        let n = nodes.len();
        let adj: Vec<Vec<usize>> = nodes
            .iter()
            .map(|a| {
                edges
                    .get(a)
                    .map(|bs| bs.iter().map(|b| idx(b)).collect())
                    .unwrap_or_default()
            })
            .collect();
        // iterative-enough Tarjan: the graphs are tiny, recursion is fine
        struct T<'a> {
            adj: &'a [Vec<usize>],
            index: Vec<Option<usize>>,
            low: Vec<usize>,
            on: Vec<bool>,
            stack: Vec<usize>,
            next: usize,
            sccs: Vec<Vec<usize>>,
        }
        fn visit(t: &mut T, v: usize) {
            t.index[v] = Some(t.next);
            t.low[v] = t.next;
            t.next += 1;
            t.stack.push(v);
            t.on[v] = true;
            for &w in &t.adj[v].clone() {
                match t.index[w] {
                    None => {
                        visit(t, w);
                        t.low[v] = t.low[v].min(t.low[w]);
                    }
                    Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                    _ => {}
                }
            }
            if Some(t.low[v]) == t.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = t.stack.pop() {
                    t.on[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                t.sccs.push(scc);
            }
        }
        let mut t = T {
            adj: &adj,
            index: vec![None; n],
            low: vec![0; n],
            on: vec![false; n],
            stack: Vec::new(),
            next: 0,
            sccs: Vec::new(),
        };
        for v in 0..n {
            if t.index[v].is_none() {
                visit(&mut t, v);
            }
        }
        for scc in t.sccs.iter().filter(|s| s.len() > 1) {
            let names: BTreeSet<&str> = scc.iter().map(|&v| nodes[v]).collect();
            let mut why = Vec::new();
            for ((p, a, b), ex) in &g.arrows {
                if p == *parent && names.contains(a.as_str()) && names.contains(b.as_str()) {
                    why.push(format!("    {a} → {b} ({ex})"));
                }
            }
            found.push(format!(
                "in `{}`: {}\n{}",
                if parent.is_empty() {
                    "crate".to_string()
                } else {
                    parent.join("::")
                },
                names.into_iter().collect::<Vec<_>>().join(" ↔ "),
                why.join("\n")
            ));
        }
    }
    found
}

#[test]
fn no_module_circles_and_the_pipeline_points_down() {
    let g = graph();
    if std::env::var_os("GPUCARVE_PRINT_GRAPH").is_some() {
        for ((p, a, b), ex) in &g.arrows {
            println!("{}: {a} → {b}   ({ex})", p.join("::"));
        }
    }
    // the check sees arrows at all (a parser that saw nothing would pass)
    assert!(
        g.arrows
            .contains_key(&(Vec::new(), "scan".into(), "engine".into())),
        "the scan's arrow to the engine was not seen: the parser is broken"
    );
    let mut problems = circles(&g);
    for glob in &g.globs {
        problems.push(format!("glob import (name what is used): {glob}"));
    }
    for ((parent, from, to), ex) in &g.arrows {
        if !parent.is_empty() {
            continue;
        }
        let (Some(a), Some(b)) = (
            PIPELINE.iter().position(|s| s == from),
            PIPELINE.iter().position(|s| s == to),
        ) else {
            continue;
        };
        if b > a {
            problems.push(format!("pipeline arrow up: {from} → {to} ({ex})"));
        }
    }
    assert!(
        problems.is_empty(),
        "module layering:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_parser_reads_use_trees_and_skips_comments_and_tests() {
    let src = r#"
        use crate::a::{b::C, d, e::{f, g as h}};
        // use crate::z;
        /* crate::y::Q */
        const S: &str = "crate::x::Y";
        const C: char = '"';
        fn f<'a>(x: &'a str) { super::sib::call(x); }
        #[cfg(test)]
        mod tests { use crate::t::T; }
        use super::glob::*;
        #[cfg(test)]
        mod more_tests;
    "#;
    let mut test_children = Vec::new();
    let toks = without_test_items(tokens(&strip(src)), &mut test_children);
    let got: Vec<String> = paths(&toks).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        got,
        [
            "crate::a::b::C",
            "crate::a::d",
            "crate::a::e::f",
            "crate::a::e::g",
            "super::sib::call",
            "super::glob::*"
        ]
    );
    assert_eq!(test_children, ["more_tests"]);
}

#[test]
fn a_circle_is_found() {
    let mut arrows = BTreeMap::new();
    for (a, b) in [("x", "y"), ("y", "z"), ("z", "x"), ("z", "w")] {
        arrows.insert(
            (vec!["carve".to_string()], a.to_string(), b.to_string()),
            String::new(),
        );
    }
    let found = circles(&Graph {
        arrows,
        globs: Vec::new(),
    });
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("x ↔ y ↔ z"), "{found:?}");
}
