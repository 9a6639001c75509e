//! The CPU engine: all-matches search at the speed of a SIMD prefilter.
//!
//! aho-corasick's overlapping (Standard) search reports every match but walks
//! a full automaton byte by byte (about 0.5 GiB/s here). Its leftmost search
//! with the packed Teddy searcher runs at several GiB/s but reports only
//! non-overlapping, leftmost matches. We get both:
//!
//! 1. Each pattern contributes an *anchor*: its longest run of exact bytes
//!    (at distance `d` from the pattern's start). Patterns with no exact byte
//!    (case-folded letters and wildcards only) contribute every case variant
//!    of their longest non-wildcard run instead (at most 16).
//! 2. A leftmost-first search over the distinct anchors finds the *leftmost*
//!    position `q` where any anchor occurs. Restarting the search at `q + 1`
//!    (not at the match's end) therefore visits every position where some
//!    anchor occurs, overlaps included: the prefilter never skips a candidate.
//! 3. At each such `q`, every pattern whose anchor begins with byte `hay[q]`
//!    is verified in full at `q - d`. A pattern is reported only by its own
//!    anchor at its own `d`, so a hit is found once and only once.
//!
//! Hits are sorted at the end (anchors sit at different distances, so they are
//! found slightly out of order). The engine is single-threaded per haystack;
//! the pipeline runs one search per block on every core.

use aho_corasick::{AhoCorasick, Input, MatchKind, packed};
use std::collections::HashMap;

use super::{Engine, EngineError, Hit, PatternId};
use crate::pattern::{ByteClass, Pattern};

/// Anchors longer than this are truncated: Teddy fingerprints only the first
/// three bytes, and verification checks the whole pattern anyway.
const MAX_ANCHOR: usize = 8;
/// Case variants of a case-insensitive anchor are capped at 2^4.
const MAX_FOLDED_ANCHOR: usize = 4;

enum Prefilter {
    /// One distinct anchor: memchr's SIMD substring search.
    Single(memchr::memmem::Finder<'static>),
    Teddy(packed::Searcher),
    Automaton(AhoCorasick),
}

/// One prefilter pass and the patterns it is responsible for.
struct Group {
    prefilter: Prefilter,
    /// For each first byte of an anchor: (pattern, distance of its anchor from its start).
    by_first_byte: Vec<Vec<(PatternId, usize)>>,
}

impl Group {
    fn build(
        keys: &[Vec<u8>],
        entries: &[(Vec<u8>, PatternId, usize)],
    ) -> Result<Group, EngineError> {
        let mut by_first_byte: Vec<Vec<(PatternId, usize)>> = vec![Vec::new(); 256];
        // A pattern's entries (its case variants) are consecutive, so a
        // repeat is the slot's last entry: linear in the entries (a
        // `contains` here was quadratic in a keyword list's size).
        for (key, id, d) in entries {
            let slot = &mut by_first_byte[key[0] as usize];
            if slot.last() != Some(&(*id, *d)) {
                slot.push((*id, *d));
            }
        }
        let prefilter = if keys.len() == 1 {
            Prefilter::Single(memchr::memmem::Finder::new(&keys[0]).into_owned())
        } else {
            match packed::Config::new()
                .match_kind(packed::MatchKind::LeftmostFirst)
                .builder()
                .extend(keys)
                .build()
            {
                Some(s) => Prefilter::Teddy(s),
                None => Prefilter::Automaton(
                    AhoCorasick::builder()
                        .match_kind(MatchKind::LeftmostFirst)
                        .build(keys)
                        .map_err(|e| EngineError::Build(e.to_string()))?,
                ),
            }
        };
        Ok(Group {
            prefilter,
            by_first_byte,
        })
    }

    #[inline]
    fn next_candidate(&self, hay: &[u8], from: usize) -> Option<usize> {
        match &self.prefilter {
            Prefilter::Single(f) => f.find(&hay[from..]).map(|i| from + i),
            Prefilter::Teddy(s) => s
                .find_in(hay, aho_corasick::Span::from(from..hay.len()))
                .map(|m| m.start()),
            Prefilter::Automaton(ac) => ac
                .find(Input::new(hay).span(from..hay.len()))
                .map(|m| m.start()),
        }
    }
}

/// Anchors scoring below this (short, or made of common bytes) go to a second
/// SIMD pass of their own instead of weakening the first: Teddy fingerprints
/// patterns by their first bytes in shared buckets, so a `00 3B` anchor among
/// sixty others would make every zero-filled sector a candidate. Among a few
/// weak anchors each gets its own bucket and the fingerprint stays exact.
/// (Measured: one pass per weak anchor 2.1 GiB/s, one shared weak pass
/// 3.3 GiB/s, built-in catalogue, benches/search.rs.)
const WEAK_ANCHOR: f32 = 2.5;

/// Prefilter + verify engine (see the module documentation).
pub struct CpuEngine {
    patterns: Vec<Pattern>,
    /// The strong anchors' pass, then the weak anchors' passes (keys shorter
    /// than 3 bytes, then the others).
    groups: Vec<Group>,
    anchors: Vec<Vec<u8>>,
}

impl CpuEngine {
    /// Builds the engine. Fails only for an empty pattern set.
    pub fn new(patterns: &[Pattern]) -> Result<CpuEngine, EngineError> {
        if patterns.is_empty() {
            return Err(EngineError::Build("no patterns to search for".into()));
        }
        // (key, pattern, distance), split into the strong and the weak pass.
        let mut strong: Vec<(Vec<u8>, PatternId, usize)> = Vec::new();
        let mut weak: Vec<(Vec<u8>, PatternId, usize)> = Vec::new();
        for (id, p) in patterns.iter().enumerate() {
            let (d, variants) = anchor_of(p);
            let single = variants.len() == 1;
            for key in variants {
                let e = (key, id as PatternId, d);
                if single && anchor_score(&e.0) < WEAK_ANCHOR {
                    weak.push(e);
                } else {
                    strong.push(e);
                }
            }
        }
        let mut groups = Vec::new();
        let mut anchors: Vec<Vec<u8>> = Vec::new();
        let distinct = |entries: &[(Vec<u8>, PatternId, usize)]| {
            let mut seen: HashMap<&[u8], ()> = HashMap::new();
            let mut keys = Vec::new();
            for (k, _, _) in entries {
                if seen.insert(k.as_slice(), ()).is_none() {
                    keys.push(k.clone());
                }
            }
            keys
        };
        if !strong.is_empty() {
            let keys = distinct(&strong);
            groups.push(Group::build(&keys, &strong)?);
            anchors.extend(keys);
        }
        // Teddy fingerprints every key by as many leading bytes as its
        // shortest key has (up to 3): one 2-byte key among the weak ones
        // made `00 00 01 BA` fire on every position of zeroed space (the weak
        // pass at 0.6 GiB/s on an ext4 image, 11 GiB/s once split).
        let (short, long): (Vec<_>, Vec<_>) = weak.into_iter().partition(|(k, _, _)| k.len() < 3);
        for part in [short, long] {
            if !part.is_empty() {
                let keys = distinct(&part);
                groups.push(Group::build(&keys, &part)?);
                anchors.extend(keys);
            }
        }
        Ok(CpuEngine {
            patterns: patterns.to_vec(),
            groups,
            anchors,
        })
    }

    /// Number of distinct anchor literals the prefilters search for.
    pub fn anchor_count(&self) -> usize {
        self.anchors.len()
    }

    /// The distinct anchor literals (what the prefilters look for).
    pub fn anchors(&self) -> &[Vec<u8>] {
        &self.anchors
    }

    /// Number of passes over each haystack (strong anchors, weak anchors).
    pub fn passes(&self) -> usize {
        self.groups.len()
    }

    /// Is the SIMD (Teddy) prefilter in use on this CPU and pattern set?
    pub fn uses_simd(&self) -> bool {
        self.groups
            .iter()
            .any(|g| matches!(g.prefilter, Prefilter::Teddy(_)))
    }
}

fn anchor_score(key: &[u8]) -> f32 {
    key.iter()
        .enumerate()
        .map(|(i, &b)| {
            if i > 0 && key[i - 1] == b {
                0.05
            } else {
                selectivity(b)
            }
        })
        .sum()
}

/// How much a byte narrows the search: bytes that fill free space (00, FF)
/// and text (lowercase, space) are common on disks; others are not.
fn selectivity(b: u8) -> f32 {
    match b {
        0x00 => 0.2,
        0xFF => 0.5,
        b' ' | b'a'..=b'z' | b'0'..=b'9' => 0.6,
        _ => 1.0,
    }
}

/// The most selective window (at most MAX_ANCHOR bytes) of exact bytes:
/// (start, bytes). Runs of one repeated byte score as a single byte.
fn best_exact_window(p: &Pattern) -> Option<(usize, Vec<u8>)> {
    let classes = p.classes();
    let mut best: Option<(f32, usize, usize)> = None;
    for start in 0..classes.len() {
        let mut end = start;
        while end < classes.len() && end - start < MAX_ANCHOR {
            if classes[end].exact().is_none() {
                break;
            }
            end += 1;
            let window: Vec<u8> = classes[start..end]
                .iter()
                .filter_map(|c| c.exact())
                .collect();
            let score = anchor_score(&window);
            if best.is_none_or(|(s, _, _)| score > s + 1e-6) {
                best = Some((score, start, end));
            }
        }
    }
    best.map(|(_, s, e)| (s, classes[s..e].iter().filter_map(|c| c.exact()).collect()))
}

/// Chooses a pattern's anchor: (distance from the pattern start, key variants).
/// The most selective window of exact bytes; but when that is weak and the
/// pattern has case-folded letters (a case-insensitive keyword such as
/// `john.doe@x.com`, whose exact bytes are only `.` and `@`), a longer
/// window with its case variants, if there is one.
fn anchor_of(p: &Pattern) -> (usize, Vec<Vec<u8>>) {
    let exact = best_exact_window(p);
    let folds = p
        .classes()
        .iter()
        .any(|c| matches!(c, ByteClass::Either(..)));
    match exact {
        Some((start, run)) if !folds || anchor_score(&run) >= WEAK_ANCHOR => (start, vec![run]),
        exact => {
            let (s, variants) = folded_window(p);
            match exact {
                Some((start, run)) if variants.first().is_none_or(|v| v.len() <= run.len()) => {
                    (start, vec![run])
                }
                _ => (s, variants),
            }
        }
    }
}

/// The longest run of non-wildcard classes, from its start up to
/// MAX_ANCHOR classes of which at most MAX_FOLDED_ANCHOR fold case, with
/// every case variant expanded: (start, variants).
fn folded_window(p: &Pattern) -> (usize, Vec<Vec<u8>>) {
    let classes = p.classes();
    let (mut best_start, mut best_len, mut i) = (0, 0, 0);
    while i < classes.len() {
        if classes[i] == ByteClass::Any {
            i += 1;
            continue;
        }
        let s = i;
        while i < classes.len() && classes[i] != ByteClass::Any {
            i += 1;
        }
        if i - s > best_len {
            (best_start, best_len) = (s, i - s);
        }
    }
    let mut end = best_start;
    let mut folded = 0;
    while end < best_start + best_len && end - best_start < MAX_ANCHOR {
        if matches!(classes[end], ByteClass::Either(..)) {
            if folded == MAX_FOLDED_ANCHOR {
                break;
            }
            folded += 1;
        }
        end += 1;
    }
    let mut variants: Vec<Vec<u8>> = vec![Vec::new()];
    for c in &classes[best_start..end] {
        let choices: Vec<u8> = match *c {
            ByteClass::Exact(b) => vec![b],
            ByteClass::Either(a, b) => vec![a, b],
            ByteClass::Any => vec![],
        };
        variants = variants
            .iter()
            .flat_map(|v| {
                choices.iter().map(move |&b| {
                    let mut w = v.clone();
                    w.push(b);
                    w
                })
            })
            .collect();
    }
    (best_start, variants)
}

impl Engine for CpuEngine {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn search(&self, hay: &[u8], out: &mut Vec<Hit>) -> Result<(), EngineError> {
        let first = out.len();
        for g in &self.groups {
            let mut from = 0;
            while from < hay.len() {
                let Some(q) = g.next_candidate(hay, from) else {
                    break;
                };
                for &(id, d) in &g.by_first_byte[hay[q] as usize] {
                    if q >= d && self.patterns[id as usize].matches_at(hay, q - d) {
                        out.push(Hit {
                            pos: q - d,
                            pattern: id,
                        });
                    }
                }
                from = q + 1;
            }
        }
        // (Each group's hits are nearly in order: a stable sort merges such
        // runs in about linear time, where an unstable one sorts from scratch;
        // on dense input this sort was a tenth of the carving.)
        out[first..].sort();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::naive::NaiveEngine;

    fn pats(texts: &[&str]) -> Vec<Pattern> {
        texts.iter().map(|t| Pattern::parse(t).unwrap()).collect()
    }

    fn both(p: &[Pattern], hay: &[u8]) -> (Vec<Hit>, Vec<Hit>) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        CpuEngine::new(p).unwrap().search(hay, &mut a).unwrap();
        NaiveEngine::new(p).search(hay, &mut b).unwrap();
        (a, b)
    }

    #[test]
    fn shared_suffix_gives_no_false_match() {
        let p = pats(&[r#""ABCD""#, r#""XBCD""#, r#""ABCE""#]);
        let (a, b) = both(&p, b"XBCE");
        assert!(a.is_empty());
        assert_eq!(a, b);
    }

    #[test]
    fn prefixes_and_overlaps() {
        let p = pats(&[r#""AB""#, r#""ABC""#, r#""BC""#, r#""AA""#]);
        let (a, b) = both(&p, b"AAABCABC");
        assert_eq!(a, b);
        assert!(a.contains(&Hit { pos: 2, pattern: 0 }) && a.contains(&Hit { pos: 2, pattern: 1 }));
        assert_eq!(a.iter().filter(|h| h.pattern == 3).count(), 2);
    }

    #[test]
    fn wildcards_and_offset_anchors() {
        let p = pats(&[r#"?? ?? ?? ?? "ftyp""#, "FF D8 FF ??", "FF ?? FF"]);
        let hay = b"\0\0\0\x18ftypFF\xff\xd8\xff\xe0\xff\xd8\xff";
        let (a, b) = both(&p, hay);
        assert_eq!(a, b);
        assert_eq!(a.len(), 5);
    }

    #[test]
    fn anchors_avoid_free_space_bytes() {
        let bmp = Pattern::parse(r#""BM" ?? ?? ?? ?? 00 00 00 00"#).unwrap();
        assert_eq!(anchor_of(&bmp), (0, vec![b"BM".to_vec()]));
        let png = Pattern::parse(r#"89 "PNG" 0D 0A 1A 0A"#).unwrap();
        assert_eq!(anchor_of(&png), (0, vec![b"\x89PNG\r\n\x1a\n".to_vec()]));
        let zeros = Pattern::parse("00 00 00 00 00 00 00 00 00 00 01").unwrap();
        let (d, keys) = anchor_of(&zeros);
        assert_eq!((d + keys[0].len(), keys[0].last()), (11, Some(&1)));
    }

    #[test]
    fn case_insensitive_patterns() {
        let ci = |s: &str| {
            Pattern::new(s.bytes().map(|b| ByteClass::literal(b, true)).collect()).unwrap()
        };
        let p = vec![
            ci("html"),
            ci("<?xml"),
            Pattern::parse(r#""HTML""#).unwrap(),
        ];
        let (a, b) = both(&p, b"<HtMl> <?XmL html HTML");
        assert_eq!(a, b);
        assert_eq!(a.len(), 5);
    }
}
