//! The PFAC table: a failureless automaton for matching anchored at a start.
//!
//! # Parallel Failureless Aho-Corasick
//!
//! Aho-Corasick walks one automaton over the whole input and follows
//! *failure* links when a pattern stops matching; every byte depends on the
//! state left by the previous one, so the walk is sequential. PFAC (Lin et
//! al., "Accelerating Pattern Matching Using a Novel Parallel Algorithm on
//! GPUs", IEEE Trans. Computers, 2013) removes the failure links: one thread
//! is started at *every* byte offset of the input and walks the automaton
//! from the start state only as long as some pattern still matches the bytes
//! read so far; the first byte that matches no pattern ends that thread. All
//! threads are independent, so the input is searched by as many threads as
//! the device can run, and a thread that starts at a non-matching byte (the
//! usual case) stops after a single table lookup.
//!
//! # Why a DFA and not a trie
//!
//! With exact patterns the automaton is a trie. Our patterns also have
//! wildcards (`??`) and two-byte classes (case-folded letters), and one
//! position of the input may be matched by several pattern prefixes at once
//! (`FF ?? FF` and `FF D8 FF` both match `FF D8 FF`). We therefore build a
//! DFA by subset construction:
//!
//! ```text
//! state     = (depth, alive)   alive = patterns matching the `depth` bytes read
//! start     = (0, all patterns)
//! δ(s, b)   = (depth + 1, { p ∈ alive : len(p) > depth ∧ class(p, depth) ∋ b })
//!             or DEAD when that set is empty
//! output(s) = { p ∈ alive : len(p) = depth }
//! ```
//!
//! States are memoized by `(depth, alive)`, so shared prefixes share states,
//! but two states are merged only when they are the *same* set of live
//! patterns at the same depth. That makes the automaton exact by
//! construction: a pattern that is a prefix of another is reported too
//! (`AB` and `ABC`), states are never merged because they share a suffix
//! (patterns `ABCD`, `XBCD`, `ABCE` report nothing on `XBCE`), and a
//! wildcard position keeps exactly the patterns that allow it.
//!
//! The walk from a start position `i` reports `(i, p)` for every `p` in the
//! outputs of each state it visits; it ends at DEAD or at the end of the
//! haystack. A pattern longer than what is left of the haystack is never
//! reported, so every hit lies wholly inside the haystack, as the
//! [`Engine`](super::Engine) contract requires.
//!
//! # Leading wildcards
//!
//! A pattern that starts with `k` wildcards (`?? ?? ?? ?? "ftyp"`) would keep
//! *every* walk alive for `k` bytes and multiply the states (each first byte
//! would meet a different set of other patterns). Such a pattern matches at
//! `p` exactly when its remainder (`"ftyp"`) matches at `p + k` and `p >= 0`,
//! so the automaton is built from the remainders, and a hit of pattern `id`
//! found by the walk from `i` is reported at `i - shift[id]`, and dropped
//! when `i < shift[id]`. The end of the haystack needs no extra check: the
//! remainder ends where the pattern does. The shader reports walk starts; the
//! host applies the shift ([`PfacTable::shifts`]).
//!
//! # Flat layout (shared with `shaders/pfac.comp`)
//!
//! * `transitions[s * 256 + b]`: the state after reading byte `b` in state
//!   `s`, or [`DEAD`]. Bit 31 ([`HAS_OUTPUT`]) is set when the target state
//!   has outputs, so a walk needs a single lookup per byte and touches the
//!   output arrays only when something matched. State 0 is the start state.
//! * `out_start[s]`, `out_count[s]`: the slice of `outputs` (pattern ids in
//!   increasing order) reported on entering state `s`.
//!
//! The table is `states × 1 KiB`; [`DEFAULT_MAX_STATES`] bounds it (64 MiB)
//! and building fails with [`EngineError::Build`] beyond that (a pathological
//! set of wildcard-heavy patterns can make the subset construction grow).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::{EngineError, Hit, PatternId};
use crate::pattern::{ByteClass, Pattern};

/// Transition to "no pattern can match any more": the walk stops.
pub const DEAD: u32 = u32::MAX;
/// Flag in a transition: the target state reports at least one pattern.
pub const HAS_OUTPUT: u32 = 1 << 31;
/// Mask that extracts the target state from a transition.
pub const STATE_MASK: u32 = !HAS_OUTPUT;
/// The start state.
pub const START: u32 = 0;
/// Default cap on the number of states: 65 536 states = a 64 MiB table.
pub const DEFAULT_MAX_STATES: usize = 1 << 16;

/// Most states [`state_cap`] allows a set without wildcards (a keyword
/// list): 2^20 states, a 1 GiB table. 100 000 random keywords of 6-10 bytes
/// take about 650 000.
pub const LITERAL_MAX_STATES: usize = 1 << 20;

/// The state cap for `patterns`: [`DEFAULT_MAX_STATES`] for a set of at
/// most that many bytes (every catalogue); for a larger one (a keyword
/// list) the default plus one state per byte of its wildcard-free patterns,
/// up to [`LITERAL_MAX_STATES`]. A literal (case-folded or not) adds at
/// most about one state per byte: it cannot blow up the subset
/// construction, so the extra room only bounds the table's size, while
/// wildcard patterns keep the default's room, which stops a blow-up early.
pub fn state_cap(patterns: &[Pattern]) -> usize {
    let (mut total, mut literal) = (1usize, 0usize);
    for p in patterns {
        total = total.saturating_add(p.len());
        if !p.classes().contains(&ByteClass::Any) {
            literal = literal.saturating_add(p.len());
        }
    }
    if total <= DEFAULT_MAX_STATES {
        DEFAULT_MAX_STATES
    } else {
        DEFAULT_MAX_STATES
            .saturating_add(literal)
            .min(LITERAL_MAX_STATES)
    }
}

/// The failureless automaton of a pattern set, in the flat layout the GPU
/// shader reads (see the module documentation).
#[derive(Clone, Debug)]
pub struct PfacTable {
    transitions: Vec<u32>,
    out_start: Vec<u32>,
    out_count: Vec<u32>,
    outputs: Vec<u32>,
    shifts: Vec<u32>,
    patterns: usize,
    max_len: usize,
    max_depth: usize,
}

/// One DFA state during construction.
struct Building {
    depth: usize,
    alive: Box<[PatternId]>,
}

impl PfacTable {
    /// Builds the table with the default state cap ([`DEFAULT_MAX_STATES`]).
    pub fn build(patterns: &[Pattern]) -> Result<PfacTable, EngineError> {
        PfacTable::build_with_limit(patterns, DEFAULT_MAX_STATES)
    }

    /// Builds the table, failing when it would need more than `max_states`
    /// states. `max_states` is also clamped so that every state id fits in 31
    /// bits and `state * 256 + byte` fits in a `u32` (the shader's index).
    pub fn build_with_limit(
        patterns: &[Pattern],
        max_states: usize,
    ) -> Result<PfacTable, EngineError> {
        if patterns.is_empty() {
            return Err(EngineError::Build("no patterns to search for".into()));
        }
        if patterns.len() > (u32::MAX >> 1) as usize {
            return Err(EngineError::Build(
                "too many patterns for the PFAC table".into(),
            ));
        }
        let max_states = max_states.clamp(1, 1 << 24);
        // Leading wildcards become shifts; the automaton sees the rest.
        let shifts: Vec<u32> = patterns
            .iter()
            .map(|p| {
                p.classes()
                    .iter()
                    .take_while(|&&c| c == ByteClass::Any)
                    .count() as u32
            })
            .collect();
        let classes: Vec<&[ByteClass]> = patterns
            .iter()
            .zip(&shifts)
            .map(|(p, &k)| &p.classes()[k as usize..])
            .collect();
        let max_depth = classes.iter().map(|c| c.len()).max().unwrap_or(0);

        let mut states: Vec<Building> = Vec::new();
        let mut index: HashMap<(usize, Box<[PatternId]>), u32> = HashMap::new();
        let mut has_output: Vec<bool> = Vec::new();

        // Interns a state; returns its id. Fails past the cap.
        let mut intern = |depth: usize,
                          alive: &[PatternId],
                          states: &mut Vec<Building>,
                          has_output: &mut Vec<bool>|
         -> Result<u32, EngineError> {
            match index.entry((depth, alive.into())) {
                Entry::Occupied(e) => Ok(*e.get()),
                Entry::Vacant(e) => {
                    if states.len() >= max_states {
                        return Err(EngineError::Build(format!(
                            "the PFAC automaton needs more than {max_states} states ({} MiB of table); \
                             use fewer or less wildcard-heavy patterns, or the CPU engine",
                            (max_states * 256 * 4) >> 20
                        )));
                    }
                    let id = states.len() as u32;
                    has_output.push(alive.iter().any(|&p| classes[p as usize].len() == depth));
                    states.push(Building {
                        depth,
                        alive: alive.into(),
                    });
                    e.insert(id);
                    Ok(id)
                }
            }
        };

        let all: Vec<PatternId> = (0..patterns.len() as PatternId).collect();
        intern(0, &all, &mut states, &mut has_output)?;

        let mut transitions: Vec<u32> = Vec::new();
        let mut out_start = Vec::new();
        let mut out_count = Vec::new();
        let mut outputs = Vec::new();
        // Scratch: patterns alive after byte b through an exact/either class.
        let mut by_byte: Vec<Vec<PatternId>> = vec![Vec::new(); 256];
        let mut wildcard: Vec<PatternId> = Vec::new();
        let mut merged: Vec<PatternId> = Vec::new();

        // States are numbered in discovery (breadth-first) order, so
        // processing them by index visits each exactly once.
        let mut s = 0;
        while s < states.len() {
            let depth = states[s].depth;
            let alive = std::mem::take(&mut states[s].alive);

            out_start.push(outputs.len() as u32);
            let before = outputs.len();
            outputs.extend(
                alive
                    .iter()
                    .copied()
                    .filter(|&p| classes[p as usize].len() == depth),
            );
            out_count.push((outputs.len() - before) as u32);

            wildcard.clear();
            for v in by_byte.iter_mut() {
                v.clear();
            }
            // `alive` is sorted, so every list built here is sorted too.
            for &p in alive.iter() {
                match classes[p as usize].get(depth) {
                    None => {}
                    Some(ByteClass::Any) => wildcard.push(p),
                    Some(&ByteClass::Exact(x)) => by_byte[x as usize].push(p),
                    Some(&ByteClass::Either(x, y)) => {
                        by_byte[x as usize].push(p);
                        if y != x {
                            by_byte[y as usize].push(p);
                        }
                    }
                }
            }
            let flag = |t: u32, has_output: &[bool]| {
                if has_output[t as usize] {
                    t | HAS_OUTPUT
                } else {
                    t
                }
            };
            // Bytes that only wildcards accept all lead to the same state.
            let wildcard_target = if wildcard.is_empty() {
                DEAD
            } else {
                let t = intern(depth + 1, &wildcard, &mut states, &mut has_output)?;
                flag(t, &has_output)
            };
            for exact in &by_byte {
                let t = if exact.is_empty() {
                    wildcard_target
                } else {
                    merge_sorted(exact, &wildcard, &mut merged);
                    let t = intern(depth + 1, &merged, &mut states, &mut has_output)?;
                    flag(t, &has_output)
                };
                transitions.push(t);
            }
            s += 1;
        }

        Ok(PfacTable {
            transitions,
            out_start,
            out_count,
            outputs,
            shifts,
            patterns: patterns.len(),
            max_len: super::max_pattern_len(patterns),
            max_depth,
        })
    }

    /// Number of DFA states (the start state is 0).
    pub fn state_count(&self) -> usize {
        self.out_start.len()
    }

    /// Number of patterns the table was built from.
    pub fn pattern_count(&self) -> usize {
        self.patterns
    }

    /// Longest pattern, leading wildcards included.
    pub fn max_pattern_len(&self) -> usize {
        self.max_len
    }

    /// Longest pattern without its leading wildcards: no walk reads more
    /// bytes than this.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Per pattern: its leading wildcards, i.e. how far before the walk's
    /// start the pattern begins (see the module documentation).
    pub fn shifts(&self) -> &[u32] {
        &self.shifts
    }

    /// The largest shift.
    pub fn max_shift(&self) -> usize {
        self.shifts.iter().copied().max().unwrap_or(0) as usize
    }

    /// `states × 256` transitions (see the module documentation).
    pub fn transitions(&self) -> &[u32] {
        &self.transitions
    }

    /// Per state: index of its first output in [`outputs`](Self::outputs).
    pub fn out_start(&self) -> &[u32] {
        &self.out_start
    }

    /// Per state: number of outputs.
    pub fn out_count(&self) -> &[u32] {
        &self.out_count
    }

    /// Pattern ids reported by the states, grouped by state.
    pub fn outputs(&self) -> &[u32] {
        &self.outputs
    }

    /// Bytes of the whole table as uploaded to a device.
    pub fn table_bytes(&self) -> usize {
        4 * (self.transitions.len()
            + self.out_start.len()
            + self.out_count.len()
            + self.outputs.len())
    }

    /// The patterns entered in `state` (in increasing id order).
    #[inline]
    pub fn outputs_of(&self, state: u32) -> &[u32] {
        let s = state as usize;
        let start = self.out_start[s] as usize;
        &self.outputs[start..start + self.out_count[s] as usize]
    }

    /// Walks the automaton from `start`, calling `report(pattern)` for every
    /// pattern whose remainder (after its leading wildcards) matches at
    /// `start`, shortest first. The pattern itself starts `shift` earlier.
    #[inline]
    pub fn walk(&self, haystack: &[u8], start: usize, mut report: impl FnMut(PatternId)) {
        let mut state = START;
        for &b in &haystack[start.min(haystack.len())..] {
            let t = self.transitions[(state as usize) << 8 | b as usize];
            if t == DEAD {
                return;
            }
            state = t & STATE_MASK;
            if t & HAS_OUTPUT != 0 {
                self.outputs_of(state).iter().for_each(|&p| report(p));
            }
        }
    }

    /// The CPU reference of the GPU shader: one PFAC walk from every start
    /// position, shifts applied on the host as the GPU engine does. Appends
    /// every hit to `out`, sorted by (pos, pattern).
    pub fn search_reference(&self, haystack: &[u8], out: &mut Vec<Hit>) {
        let first = out.len();
        for start in 0..haystack.len() {
            self.walk(haystack, start, |pattern| {
                if let Some(pos) = start.checked_sub(self.shifts[pattern as usize] as usize) {
                    out.push(Hit { pos, pattern });
                }
            });
        }
        // Walks report by depth and shift, not in (pos, pattern) order.
        out[first..].sort_unstable();
    }
}

/// `out = a ∪ b` for sorted, disjoint `a` and `b`.
fn merge_sorted(a: &[PatternId], b: &[PatternId], out: &mut Vec<PatternId>) {
    out.clear();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::engine::naive::NaiveEngine;
    use proptest::prelude::*;

    fn pats(texts: &[&str]) -> Vec<Pattern> {
        texts.iter().map(|t| Pattern::parse(t).unwrap()).collect()
    }

    fn check(p: &[Pattern], hay: &[u8]) -> Vec<Hit> {
        let table = PfacTable::build(p).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        table.search_reference(hay, &mut a);
        NaiveEngine::new(p).search(hay, &mut b).unwrap();
        assert_eq!(a, b, "patterns {p:?} on {hay:?}");
        a
    }

    #[test]
    fn exact_patterns_form_a_trie() {
        let p = pats(&[r#""he""#, r#""she""#, r#""his""#, r#""hers""#]);
        let t = PfacTable::build(&p).unwrap();
        // root + h,he,her,hers,hi,his + s,sh,she
        assert_eq!(t.state_count(), 10);
        assert_eq!(t.transitions().len(), 10 * 256);
        assert_eq!(t.outputs().len(), 4);
        let hits = check(&p, b"ushers his hershe");
        assert_eq!(hits.len(), 8);
    }

    #[test]
    fn shared_suffix_gives_no_false_match() {
        let p = pats(&[r#""ABCD""#, r#""XBCD""#, r#""ABCE""#]);
        assert!(check(&p, b"XBCE").is_empty());
        assert_eq!(check(&p, b"ABCDXBCDABCE").len(), 3);
    }

    #[test]
    fn prefixes_overlaps_and_duplicates() {
        let p = pats(&[r#""AB""#, r#""ABC""#, r#""BC""#, r#""AA""#, r#""AB""#]);
        let hits = check(&p, b"AAABCABC");
        assert!(hits.contains(&Hit { pos: 2, pattern: 0 }));
        assert!(hits.contains(&Hit { pos: 2, pattern: 1 }));
        assert!(hits.contains(&Hit { pos: 2, pattern: 4 }));
    }

    #[test]
    fn wildcards_and_case_folding() {
        let ci = |s: &str| {
            Pattern::new(s.bytes().map(|b| ByteClass::literal(b, true)).collect()).unwrap()
        };
        let mut p = pats(&[
            r#"?? ?? ?? ?? "ftyp""#,
            "FF D8 FF ??",
            "FF ?? FF",
            "FF D8",
            r#"?? "B""#,
        ]);
        p.push(ci("html"));
        p.push(ci("<?xml"));
        let hay = b"\0\0\0\x18ftypFF\xff\xd8\xff\xe0\xff\xd8\xff <HtMl> <?XmL html HTML AB";
        let hits = check(&p, hay);
        assert!(hits.iter().any(|h| h.pattern == 0 && h.pos == 0));
        // A pattern running past the end is not reported.
        check(&p, b"\xff\xd8\xff");
    }

    #[test]
    fn leading_wildcards_are_shifts() {
        let p = pats(&[r#"?? ?? ?? ?? "ftyp""#, r#""ftyp""#, "?? 41", "?? ?? 41 ??"]);
        let t = PfacTable::build(&p).unwrap();
        assert_eq!(t.shifts(), &[4, 0, 1, 2]);
        assert_eq!(
            (t.max_depth(), t.max_pattern_len(), t.max_shift()),
            (4, 8, 4)
        );
        // root, f, ft, fty, ftyp (two outputs), A, A?
        assert_eq!(t.state_count(), 7);
        check(&p, b"ftyp\0\0\0\x18ftypAAAftyp");
        check(&p, b"AAAA");
        check(&p, b"");
    }

    #[test]
    fn matches_at_both_ends() {
        let p = pats(&[r#""ab""#, r#""b""#]);
        assert_eq!(
            check(&p, b"abab"),
            vec![
                Hit { pos: 0, pattern: 0 },
                Hit { pos: 1, pattern: 1 },
                Hit { pos: 2, pattern: 0 },
                Hit { pos: 3, pattern: 1 }
            ]
        );
        check(&p, b"");
        check(&p, b"a");
    }

    #[test]
    fn state_cap_is_a_clear_error() {
        // Wildcards after distinct bytes keep many subsets alive.
        let p = pats(&["00 ?? ?? 01", "?? 00 ?? 02", "?? ?? 00 03", "01 ?? ?? 04"]);
        let full = PfacTable::build(&p).unwrap();
        let err = PfacTable::build_with_limit(&p, full.state_count() - 1).unwrap_err();
        assert!(
            matches!(err, EngineError::Build(ref m) if m.contains("states")),
            "{err}"
        );
        assert!(PfacTable::build(&[]).is_err());
    }

    fn class() -> impl Strategy<Value = ByteClass> {
        prop_oneof![
            6 => (0u8..4).prop_map(|b| ByteClass::Exact(b'a' + b)),
            1 => Just(ByteClass::Any),
            1 => (0u8..4).prop_map(|b| ByteClass::Either(b'a' + b, b'A' + b)),
        ]
    }

    fn pattern() -> impl Strategy<Value = Pattern> {
        proptest::collection::vec(class(), 1..6).prop_filter_map("all wildcards", Pattern::new)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn reference_walk_equals_naive(
            p in proptest::collection::vec(pattern(), 1..8),
            hay in proptest::collection::vec(prop_oneof![
                4 => (0u8..4).prop_map(|b| b'a' + b),
                1 => (0u8..4).prop_map(|b| b'A' + b),
                1 => any::<u8>(),
            ], 0..200),
        ) {
            let table = PfacTable::build(&p).unwrap();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            table.search_reference(&hay, &mut a);
            NaiveEngine::new(&p).search(&hay, &mut b).unwrap();
            prop_assert_eq!(a, b);
            // Invariants of the flat layout.
            prop_assert_eq!(table.transitions().len(), table.state_count() * 256);
            for &t in table.transitions() {
                if t != DEAD {
                    let s = (t & STATE_MASK) as usize;
                    prop_assert!(s < table.state_count());
                    prop_assert_eq!(t & HAS_OUTPUT != 0, table.out_count()[s] > 0);
                }
            }
        }
    }
}
