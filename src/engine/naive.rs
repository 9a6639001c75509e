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
}

impl NaiveEngine {
    pub fn new(patterns: &[Pattern]) -> NaiveEngine {
        NaiveEngine {
            patterns: patterns.to_vec(),
        }
    }
}

impl Engine for NaiveEngine {
    fn name(&self) -> String {
        "naive".into()
    }

    fn search(&self, haystack: &[u8], out: &mut Vec<Hit>) -> Result<(), EngineError> {
        for pos in 0..haystack.len() {
            for (id, p) in self.patterns.iter().enumerate() {
                if p.matches_at(haystack, pos) {
                    out.push(Hit {
                        pos,
                        pattern: id as PatternId,
                    });
                }
            }
        }
        Ok(())
    }
}
