//! Where a file ends when no validator can say: the footer and max-size rules.
//!
//! For a type without a structure validator (foremost/scalpel rules, and
//! built-in types such as RAR or HTML), a header candidate ends:
//! * `first` (default): at the end of the first footer after the header;
//! * `next`: just before the first footer after the header;
//! * `last`: at the end of the last footer within `max_size`;
//! * at `max_size` (or the end of the image) when no footer applies.
//!
//! and in every mode never past the next header of its own type: a new file
//! of the type starts there (as PhotoRec ends a file at the next header).
//! So the files of one type never overlap, and however many headers an image
//! holds, what they cover adds up to at most the image.
//!
//! Such files are always `unvalidated`. Footers arrive in the match stream,
//! so candidates wait here until a footer, the next header of their type or
//! the scan position decides them; at most one waits per type.

use std::collections::VecDeque;

use super::validators::{Status, Verdict};
use crate::catalogue::{Catalogue, FooterMode};

/// Waiting candidates (or remembered footers) per type before the oldest are decided early.
const MAX_WAITING: usize = 100_000;

/// A header hit: the file would start at `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub type_index: usize,
    pub start: u64,
    /// Bytes from `start` to the end of the header pattern (a footer must begin after it).
    pub header_len: u64,
}

/// A decided extent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extent {
    pub status: Status,
    pub length: u64,
    pub subtype: Option<String>,
    pub notes: Vec<String>,
    /// A file in its own right wherever it lies: `Complete` by a validator
    /// ([`super::validators::stands_alone`]) and starting on a cluster
    /// boundary. Inside a container whose payload was not checked it is
    /// carved, not hidden as an embedded object.
    pub standalone: bool,
}

impl Extent {
    pub fn from_verdict(v: Verdict) -> Extent {
        Extent {
            status: v.status,
            length: v.length,
            subtype: v.subtype,
            notes: v.notes,
            standalone: false,
        }
    }

    fn unvalidated(length: u64, note: String) -> Extent {
        Extent {
            status: Status::Unvalidated,
            length,
            subtype: None,
            notes: vec![note],
            standalone: false,
        }
    }
}

struct TypeRule {
    mode: FooterMode,
    max_size: u64,
    min_size: u64,
    has_footers: bool,
    pending: VecDeque<Candidate>,
    /// Footers remembered for `last` mode: (offset, end).
    footers: VecDeque<(u64, u64)>,
}

/// Footer/max-size decisions for every type without a validator.
pub struct FooterRules {
    rules: Vec<TypeRule>,
    image_len: u64,
}

impl FooterRules {
    pub fn new(catalogue: &Catalogue) -> FooterRules {
        FooterRules {
            rules: catalogue
                .types
                .iter()
                .map(|t| TypeRule {
                    mode: t.footer_mode,
                    max_size: t.max_size,
                    min_size: t.min_size,
                    has_footers: !t.footers.is_empty() && t.validator.is_none(),
                    pending: VecDeque::new(),
                    footers: VecDeque::new(),
                })
                .collect(),
            image_len: u64::MAX,
        }
    }

    /// A header of a type without a validator.
    pub fn add_candidate(
        &mut self,
        c: Candidate,
        image_len: u64,
        out: &mut Vec<(Candidate, Extent)>,
    ) {
        self.image_len = image_len;
        let Some(r) = self.rules.get_mut(c.type_index) else {
            return;
        };
        // No footer came between the waiting ones and this header: they end
        // where it starts (at their last footer in `last` mode).
        while let Some(old) = r.pending.pop_front() {
            decide_pending(r, old, (c.start.min(image_len), true), out);
        }
        r.pending.push_back(c);
    }

    /// Decides every waiting candidate now, as at the image's end (the
    /// carver holds too many decided files behind the earliest of them).
    pub fn decide_all_now(&mut self, out: &mut Vec<(Candidate, Extent)>) {
        let image_len = self.image_len;
        for r in &mut self.rules {
            while let Some(c) = r.pending.pop_front() {
                decide_pending(r, c, (image_len, false), out);
            }
        }
    }

    /// A footer of `type_index` at `[offset, end)`.
    pub fn add_footer(
        &mut self,
        type_index: usize,
        offset: u64,
        end: u64,
        out: &mut Vec<(Candidate, Extent)>,
    ) {
        let Some(r) = self.rules.get_mut(type_index) else {
            return;
        };
        if !r.has_footers {
            return;
        }
        match r.mode {
            FooterMode::First | FooterMode::Next => {
                while let Some(c) = r.pending.front().copied() {
                    if c.start + c.header_len > offset {
                        break;
                    }
                    r.pending.pop_front();
                    let len = if r.mode == FooterMode::Next {
                        offset - c.start
                    } else {
                        end - c.start
                    };
                    if len <= r.max_size {
                        push_if_long_enough(r, c, len, "ended at footer", out);
                    } else {
                        let len = decide_without_footer(r, &c, self.image_len);
                        push_if_long_enough(
                            r,
                            c,
                            len,
                            "no footer within max_size: carved to max_size",
                            out,
                        );
                    }
                }
            }
            FooterMode::Last => {
                if !r.pending.is_empty() {
                    r.footers.push_back((offset, end));
                    if r.footers.len() > MAX_WAITING {
                        r.footers.pop_front();
                    }
                }
            }
        }
    }

    /// The scan has passed `pos`: candidates whose max size ends before it are decided.
    pub fn advance(&mut self, pos: u64, out: &mut Vec<(Candidate, Extent)>) {
        let image_len = self.image_len;
        for r in &mut self.rules {
            while let Some(c) = r.pending.front().copied() {
                if c.start.saturating_add(r.max_size) > pos {
                    break;
                }
                r.pending.pop_front();
                decide_pending(r, c, (image_len, false), out);
            }
            let keep_from = r.pending.front().map_or(u64::MAX, |c| c.start);
            while r.footers.front().is_some_and(|&(o, _)| o < keep_from) {
                r.footers.pop_front();
            }
        }
    }

    /// The lowest start among candidates still waiting for a footer.
    pub fn earliest_pending(&self) -> Option<u64> {
        self.rules
            .iter()
            .flat_map(|r| r.pending.iter().map(|c| c.start))
            .min()
    }

    /// The scan is over: decide everything still waiting.
    pub fn finish(&mut self, image_len: u64, out: &mut Vec<(Candidate, Extent)>) {
        for r in &mut self.rules {
            while let Some(c) = r.pending.pop_front() {
                decide_pending(r, c, (image_len, false), out);
            }
            r.footers.clear();
        }
    }
}

/// Decides `c`, which no footer ended: at its last footer (`last` mode),
/// else at `end` (the next header of its type, or the image's end) or its
/// maximum size, whichever comes first.
fn decide_pending(
    r: &TypeRule,
    c: Candidate,
    (end, next_header): (u64, bool),
    out: &mut Vec<(Candidate, Extent)>,
) {
    if r.mode == FooterMode::Last && r.has_footers {
        let limit = c.start.saturating_add(r.max_size).min(end);
        let last = r
            .footers
            .iter()
            .rev()
            .find(|&&(o, e)| o >= c.start + c.header_len && e <= limit);
        if let Some(&(_, end)) = last {
            push_if_long_enough(
                r,
                c,
                end - c.start,
                "ended at the last footer within max_size",
                out,
            );
            return;
        }
    }
    let rest = end.saturating_sub(c.start);
    let len = r.max_size.min(rest);
    let note = match (r.has_footers, len < rest, next_header) {
        (true, true, _) => "no footer within max_size: carved to max_size",
        (false, true, _) => "no footer rule: carved to max_size",
        (true, false, true) => "no footer before the next header of its type: ended there",
        (false, false, true) => "no footer rule: ended at the next header of its type",
        (true, false, false) => "no footer within max_size: carved to the end of the image",
        (false, false, false) => "no footer rule: carved to the end of the image",
    };
    push_if_long_enough(r, c, len, note, out);
}

fn decide_without_footer(r: &TypeRule, c: &Candidate, image_len: u64) -> u64 {
    r.max_size.min(image_len.saturating_sub(c.start))
}

fn push_if_long_enough(
    r: &TypeRule,
    c: Candidate,
    len: u64,
    note: &str,
    out: &mut Vec<(Candidate, Extent)>,
) {
    if len >= r.min_size.max(1) {
        out.push((c, Extent::unvalidated(len, note.to_string())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::toml_format;

    fn cat(mode: &str) -> Catalogue {
        toml_format::parse(
            &format!("[[type]]\nname = \"t\"\nheaders = [\"'AB'\"]\nfooters = [\"'YZ'\"]\nmax_size = 100\nfooter_mode = \"{mode}\"\n")
                .replace("\"'", "'\"")
                .replace("'\"]", "\"']"),
            "t",
        )
        .unwrap()
    }

    fn cand(start: u64) -> Candidate {
        Candidate {
            type_index: 0,
            start,
            header_len: 2,
        }
    }

    #[test]
    fn first_next_last_and_max_size() {
        for (mode, expect) in [
            ("first", vec![(10, 12), (50, 100)]),
            ("next", vec![(10, 10), (50, 100)]),
            ("last", vec![(10, 32), (50, 100)]),
        ] {
            let c = cat(mode);
            let mut r = FooterRules::new(&c);
            let mut out = Vec::new();
            r.add_candidate(cand(10), 1000, &mut out);
            r.add_footer(0, 20, 22, &mut out);
            r.add_footer(0, 40, 42, &mut out);
            r.add_candidate(cand(50), 1000, &mut out);
            r.add_footer(0, 200, 202, &mut out);
            r.advance(300, &mut out);
            r.finish(1000, &mut out);
            let got: Vec<(u64, u64)> = out.iter().map(|(c, e)| (c.start, e.length)).collect();
            assert_eq!(got, expect, "{mode}");
            assert!(out.iter().all(|(_, e)| e.status == Status::Unvalidated));
        }
    }

    #[test]
    fn the_next_header_of_its_type_ends_a_file() {
        // With a footer rule and without: headers back to back never make
        // overlapping files, so what they cover adds up to the image.
        let plain = toml_format::parse(
            "[[type]]\nname = \"t\"\nheaders = ['\"AB\"']\nmax_size = 100\n",
            "t",
        )
        .unwrap();
        for c in [cat("first"), cat("last"), plain] {
            let mut r = FooterRules::new(&c);
            let mut out = Vec::new();
            for start in [10, 14, 18, 500] {
                r.add_candidate(cand(start), 1000, &mut out);
            }
            r.finish(1000, &mut out);
            let got: Vec<(u64, u64)> = out.iter().map(|(c, e)| (c.start, e.length)).collect();
            assert_eq!(got, vec![(10, 4), (14, 4), (18, 100), (500, 100)]);
            assert!(out[0].1.notes[0].contains("next header of its type"));
        }
    }

    #[test]
    fn truncated_at_end_of_image() {
        let c = cat("first");
        let mut r = FooterRules::new(&c);
        let mut out = Vec::new();
        r.add_candidate(cand(980), 1000, &mut out);
        r.finish(1000, &mut out);
        assert_eq!(out[0].1.length, 20);
    }
}
