//! Reports: how matches and carved files are written for people and tools.
//!
//! * [`matches`](mod@matches): the `scan` match stream as JSON Lines or CSV, and the `--count` table;
//! * [`jsonl`]: `report.jsonl`, one object per carved or detected file;
//! * [`dfxml`]: `report.xml`, Digital Forensics XML valid against the DFXML schema;
//! * [`hashdeep`]: `hashes.txt`, the written files as hashdeep audits them;
//! * [`audit`]: `audit.txt`, the human summary (image, command, times, counts).
//!
//! Writers format; they never decide what was found.

pub mod audit;
pub mod dfxml;
pub mod hashdeep;
pub mod jsonl;
pub mod matches;

pub use crate::carve::sink::{CarveReport, Fanout};

/// Facts about a run, for report headers.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// The image's absolute path (see [`crate::job::absolute_image_path`]).
    pub image: String,
    pub image_len: u64,
    pub command_line: String,
    pub version: String,
    pub start_time: String,
    pub sector_size: u32,
    /// The `--hash` algorithms.
    pub hashes: crate::hashing::HashChoice,
}

/// RFC 3339 UTC time (as DFXML uses), without pulling in a date crate.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    crate::carve::geometry::names::rfc3339_secs(secs)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_dates() {
        use std::time::{Duration, UNIX_EPOCH};
        assert_eq!(super::rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            super::rfc3339(UNIX_EPOCH + Duration::from_secs(1_795_307_045)),
            "2026-11-22T00:24:05Z"
        );
        assert_eq!(
            super::rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }
}
