//! The brute-force oracle: try every pattern at every position.
//!
//! Obviously correct and slow (O(n × patterns × length)). Tests compare every
//! other engine, and the whole scan pipeline, against it.

use super::{Engine, EngineError, Hit, PatternId};
use crate::pattern::Pattern;

/// Brute-force engine.
#[derive(Clone, Debug)]
pub struct NaiveEngine {
    patterns: Vec<Pattern>,
    /// For each byte value, the patterns whose first class admits it (in
    /// pattern order): a lookup that only saves time, it decides nothing.
    by_first: Vec<Vec<PatternId>>,
}

impl NaiveEngine {
    pub fn new(patterns: &[Pattern]) -> NaiveEngine {
        let by_first = (0..=255u8)
            .map(|b| {
                (0..patterns.len())
                    .filter(|&i| patterns[i].classes()[0].matches(b))
                    .map(|i| i as PatternId)
                    .collect()
            })
            .collect();
        NaiveEngine {
            patterns: patterns.to_vec(),
            by_first,
        }
    }
}

impl Engine for NaiveEngine {
    fn name(&self) -> String {
        "naive".into()
    }

    fn search(&self, haystack: &[u8], out: &mut Vec<Hit>) -> Result<(), EngineError> {
        for (pos, &b) in haystack.iter().enumerate() {
            for &id in &self.by_first[b as usize] {
                if self.patterns[id as usize].matches_at(haystack, pos) {
                    out.push(Hit { pos, pattern: id });
                }
            }
        }
        Ok(())
    }
}
