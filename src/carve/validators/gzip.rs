//! stub
use super::Verdict;
use super::read::Src;

pub fn validate(_src: Src) -> Option<Verdict> {
    None
}
