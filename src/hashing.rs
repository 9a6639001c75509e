//! File hashes as examiners check them: which algorithms a carving computes
//! (`--hash sha256,md5,sha1`), all of them in one pass over the bytes.
//!
//! The chosen set is the same in every report (`report.jsonl`, `report.xml`,
//! `audit.txt`, `hashes.txt`) and is recorded in `run.json`, so that `merge`
//! and `--resume` keep it. This module hashes; it never decides what is
//! hashed (the carver does: only what is written, see [`crate::carve`]).

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// One hash algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HashAlg {
    Sha256,
    Md5,
    Sha1,
}

impl HashAlg {
    /// Every algorithm, in the order the reports list them.
    pub const ALL: [HashAlg; 3] = [HashAlg::Sha256, HashAlg::Md5, HashAlg::Sha1];

    /// The name used on the command line, in report.jsonl keys and DFXML `hashdigest/@type`.
    pub fn name(self) -> &'static str {
        match self {
            HashAlg::Sha256 => "sha256",
            HashAlg::Md5 => "md5",
            HashAlg::Sha1 => "sha1",
        }
    }

    fn bit(self) -> u8 {
        match self {
            HashAlg::Sha256 => 1,
            HashAlg::Md5 => 2,
            HashAlg::Sha1 => 4,
        }
    }
}

impl std::str::FromStr for HashAlg {
    type Err = String;
    fn from_str(s: &str) -> Result<HashAlg, String> {
        HashAlg::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown hash `{s}` (sha256, md5, sha1)"))
    }
}

/// The algorithms a carving computes: a non-empty set, listed in [`HashAlg::ALL`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct HashChoice {
    bits: u8,
}

impl HashChoice {
    /// sha256 and md5: what carvings have always carried.
    pub const DEFAULT: HashChoice = HashChoice { bits: 1 | 2 };

    /// The set of `algs`; an empty list is an error.
    pub fn of(algs: &[HashAlg]) -> Result<HashChoice, String> {
        let bits = algs.iter().fold(0, |b, a| b | a.bit());
        if bits == 0 {
            return Err("choose at least one hash (sha256, md5, sha1)".into());
        }
        Ok(HashChoice { bits })
    }

    pub fn contains(self, alg: HashAlg) -> bool {
        self.bits & alg.bit() != 0
    }

    /// The chosen algorithms, in [`HashAlg::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = HashAlg> {
        HashAlg::ALL.into_iter().filter(move |a| self.contains(*a))
    }
}

impl Default for HashChoice {
    fn default() -> Self {
        HashChoice::DEFAULT
    }
}

impl std::str::FromStr for HashChoice {
    type Err = String;
    /// `sha256,md5,sha1` (any order, any subset).
    fn from_str(s: &str) -> Result<HashChoice, String> {
        let algs = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(str::parse)
            .collect::<Result<Vec<HashAlg>, String>>()?;
        HashChoice::of(&algs)
    }
}

impl std::fmt::Display for HashChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.iter().map(HashAlg::name).collect();
        f.write_str(&names.join(","))
    }
}

impl TryFrom<Vec<String>> for HashChoice {
    type Error = String;
    fn try_from(v: Vec<String>) -> Result<HashChoice, String> {
        let algs = v
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<HashAlg>, String>>()?;
        HashChoice::of(&algs)
    }
}

impl From<HashChoice> for Vec<String> {
    fn from(c: HashChoice) -> Vec<String> {
        c.iter().map(|a| a.name().to_string()).collect()
    }
}

/// Lowercase hex digests; `None` for algorithms not computed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Digests {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
}

impl Digests {
    pub fn get(&self, alg: HashAlg) -> Option<&str> {
        match alg {
            HashAlg::Sha256 => self.sha256.as_deref(),
            HashAlg::Md5 => self.md5.as_deref(),
            HashAlg::Sha1 => self.sha1.as_deref(),
        }
    }

    /// The algorithms with a digest, with it, in [`HashAlg::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (HashAlg, &str)> {
        HashAlg::ALL
            .into_iter()
            .filter_map(|a| self.get(a).map(|h| (a, h)))
    }
}

/// Computes the chosen digests over bytes fed in order.
pub struct Hasher {
    sha256: Option<Sha256>,
    md5: Option<Md5>,
    sha1: Option<Sha1>,
}

impl Hasher {
    pub fn new(choice: HashChoice) -> Hasher {
        Hasher {
            sha256: choice.contains(HashAlg::Sha256).then(Sha256::new),
            md5: choice.contains(HashAlg::Md5).then(Md5::new),
            sha1: choice.contains(HashAlg::Sha1).then(Sha1::new),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        if let Some(h) = &mut self.sha256 {
            h.update(bytes);
        }
        if let Some(h) = &mut self.md5 {
            h.update(bytes);
        }
        if let Some(h) = &mut self.sha1 {
            h.update(bytes);
        }
    }

    pub fn finish(self) -> Digests {
        Digests {
            sha256: self.sha256.map(|h| hex(&h.finalize())),
            md5: self.md5.map(|h| hex(&h.finalize())),
            sha1: self.sha1.map(|h| hex(&h.finalize())),
        }
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests_of_abc() {
        let mut h = Hasher::new("sha1,md5,sha256".parse().unwrap());
        h.update(b"a");
        h.update(b"bc");
        let d = h.finish();
        assert_eq!(
            d.sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(d.md5.as_deref(), Some("900150983cd24fb0d6963f7d28e17f72"));
        assert_eq!(
            d.sha1.as_deref(),
            Some("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
    }

    #[test]
    fn only_chosen_digests_are_computed() {
        let mut h = Hasher::new("sha1".parse().unwrap());
        h.update(b"abc");
        let d = h.finish();
        assert!(d.sha256.is_none() && d.md5.is_none() && d.sha1.is_some());
        assert_eq!(d.iter().count(), 1);
    }

    #[test]
    fn choice_parses_prints_and_round_trips() {
        let c: HashChoice = "md5, SHA256".parse().unwrap();
        assert_eq!(c, HashChoice::DEFAULT);
        assert_eq!(c.to_string(), "sha256,md5");
        assert!("".parse::<HashChoice>().is_err());
        assert!("sha256,crc32".parse::<HashChoice>().is_err());
        let all: HashChoice = "sha1,md5,sha256".parse().unwrap();
        let json = serde_json::to_string(&all).unwrap();
        assert_eq!(json, r#"["sha256","md5","sha1"]"#);
        assert_eq!(serde_json::from_str::<HashChoice>(&json).unwrap(), all);
        assert!(serde_json::from_str::<HashChoice>("[]").is_err());
    }
}
