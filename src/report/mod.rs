//! Reports: how matches and carved files are written for people and tools.
//!
//! * [`matches`]: the `scan` match stream as JSON Lines or CSV, and the `--count` table.
//!
//! Writers format; they never decide what was found.

pub mod matches;
