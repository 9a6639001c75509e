//! gpucarve: a GPU-accelerated forensic file carver.
//!
//! The library reads the way the data flows:
//!
//! ```text
//! image bytes ─▶ source ─▶ engine ─▶ ordered match stream ─▶ carver ─▶ reports / files
//! ```
//!
//! * [`pattern`]: byte patterns and their catalogue syntax;
//! * [`catalogue`]: file types, their signatures, the built-in TOML and foremost/scalpel import;
//! * [`source`]: reading an image as blocks into a bounded buffer pool (buffered, mmap, O_DIRECT, io_uring);
//! * [`engine`]: all-matches search over a block (CPU prefilter+verify, GPU PFAC);
//! * [`scan`]: the pipeline, the one place that knows about block overlap;
//! * [`carve`]: deciding where each candidate file ends (structure validators,
//!   footer rules, bifragment recovery) and writing it;
//! * [`hashing`]: the `--hash` algorithms, computed together in one pass;
//! * [`report`]: scan output, DFXML, JSON Lines, audit, the hashdeep list;
//! * [`job`]: one carving end to end; [`batch`], [`journal`] and [`merge`]:
//!   many images, resume after interruption, shards;
//! * [`bench`](mod@bench): `gpucarve bench`, throughput and stage profile on this machine.
//!
//! The evidence is opened read-only and never written.

pub mod batch;
pub mod bench;
pub mod carve;
pub mod catalogue;
pub mod engine;
pub mod extract;
pub mod hashing;
pub mod job;
pub mod journal;
pub mod merge;
pub mod pattern;
pub mod report;
pub mod scan;
pub mod source;
pub mod synth;
pub mod unread;
