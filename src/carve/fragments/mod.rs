//! Fragment gap carving: recovering a file stored in two (to five) pieces.
//!
//! Layout, one concept per file: this file holds the entry points
//! ([`recover`], [`recover_with`]) and what a search returns ([`Attempt`],
//! [`Joined`]); `carver.rs` the carver's side ([`Fragments`]: cluster sizes,
//! the hook after each validation, the image's budget spent); `ahead.rs`
//! the searches run ahead of the carver on threads of their own;
//! `claims.rs` the byte ranges already carved ([`Claims`]); `memory.rs`
//! what the searches remember between them ([`SearchMemory`]); `budget.rs`
//! the limits and what a search has spent ([`FragLimits`],
//! [`image_budget`]); `runs.rs` the joined view ([`TwoRuns`]); `cache.rs`
//! the prefilters' block cache; `join.rs` the candidate walk
//! (`nearest_first`) and the join proofs every format shares; `needles.rs`
//! the scan's log of signature positions ([`ScanNeedles`]) and `index.rs`
//! the searches' position index; `layout.rs` files laid out by their file
//! system ([`fs_layout_verdict`]). `png.rs`, `jpeg.rs` and `zip.rs` each
//! find where their format breaks and prove a join; `jpeg.rs` also holds
//! the JPEG-only state a carving shares ([`KnownJpegs`]).
//!
//! When a structure validator reports `Partial` for a PNG, ZIP or JPEG (its
//! structure breaks partway), the file may simply be fragmented: its first
//! fragment runs from the header to a cluster boundary at or before the break,
//! and its second fragment starts at a cluster-aligned position elsewhere (in
//! order: after a gap following the first fragment; out of order: before the
//! header). This module searches for that second fragment and accepts a join
//! only when the format itself proves it:
//!
//! * **PNG**: our own chunk walk finds the chunk at which the CRC chain breaks
//!   (`pos`). The split `S` (relative to the header) is a cluster multiple in
//!   `[pos, pos + 12 + length)` (the breaking chunk spans the join; when its
//!   header is itself foreign, `S ≤ pos + 8`). For every split the CRC of the
//!   chunk's bytes before the split is computed once and kept; a candidate
//!   second start `s2` is then tested cheaply (the joined chunk header is
//!   plausible, the next chunk header after it is plausible, the chunk's CRC
//!   continued over the bytes at `s2` matches the stored CRC) and finally the
//!   full PNG validator must return `Complete` over the joined virtual file.
//! * **ZIP**: our own local-header walk finds the entry in which the walk
//!   breaks. Candidate end-of-central-directory records (`PK\5\6`) are searched
//!   after the break (and before the header, out of order); each one fixes the
//!   gap exactly (its position minus the central directory's end). For each
//!   cluster-aligned split in the breaking entry, the joined file must have:
//!   every central header parsed up to exactly the EOCD, every central
//!   header's local-header offset landing on a `PK\3\4` with the same name, and
//!   the CRC-32 of the entry spanning the split (stored or inflated with
//!   flate2) equal to the central directory's; then every other stored or
//!   deflated entry's CRC is checked while the byte budget lasts. When a ZIP
//!   validator is registered and disagrees (`Partial`), the join is refused.
//! * **JPEG**: no checksum, and a Huffman decode is a weak detector on its
//!   own: it resynchronises after foreign bits, and pictures coded with the
//!   same tables (copies, one camera) decode as each other's continuation.
//!   So the search is narrow and the proof layered:
//!   - splits: the cluster multiples within one cluster below where the
//!     decoder failed (its read position is an upper bound on the split).
//!     Foreign data that decodes for longer is same-table data and the split
//!     cannot be placed: no join is attempted;
//!   - second starts: clusters whose next 4 KiB look like entropy-coded data
//!     (every `FF` is stuffing, a restart marker, EOI or a between-scans
//!     marker; no 64-byte runs; not text), not inside a range already carved
//!     ([`Claims`]) nor inside another JPEG stored contiguously (one of the
//!     nearest cluster-aligned JPEG headers before it validates past it), and
//!     not in the middle of an unowned run of entropy-like data (the 4 KiB
//!     before must not look like entropy data, unless another JPEG owns it);
//!   - a cheap decode of 32 KiB past the split, then the same decode with the
//!     cluster before the second start in its place must fail (else that
//!     cluster continues the head as well as the candidate does; unless its
//!     last bytes cannot be entropy-coded data, zeroed space or text, whose
//!     bits the decoder may take and fall in step with the candidate), then the
//!     full validator over the join: every Huffman code valid, coefficient
//!     indices in range, the exact MCU count of every scan, restart markers in
//!     sequence, EOI after the last MCU; and at least 2 KiB of second fragment
//!     (a few hundred bytes ending in EOI match the missing MCU count by
//!     chance).
//!
//!   The head is decoded once per split: the decoder's state at the last MCU
//!   boundary before the split ([`validators::jpeg::Snap`]) is kept, and each
//!   candidate decodes only what follows it. Those states come from the
//!   decode that placed the splits ([`validators::jpeg::Trail`]: the
//!   validation stage's, or the one that proved a crossing), which kept one
//!   at each of its last few cluster boundaries and block-map boundaries;
//!   only when it holds none is the head decoded again to take them. Bytes
//!   decoded per file are capped (64 MiB).
//!
//! **Three to five fragments** ([`MAX_RUNS`]): a join whose crossing is
//! proven but whose file breaks again later becomes the head of the next
//! search, from the end of its last run (candidates nearest first from where
//! that run would continue, and before where it starts). The crossing proof:
//! PNG, the chunk across the split has its CRC; ZIP (no EOCD proves the last
//! fragment), the entry holding the split has its local header's CRC-32 and a
//! header follows its data exactly (the split may lie in that entry's name or
//! extra field, in its fixed header, whose fields are then read through the
//! join, or where an intact entry ends, the next header in the next
//! fragment; entries with a data descriptor are not crossed); JPEG, the decode
//! stays valid at least 8 KiB and
//! two clusters past it (beyond what the cluster before the candidate may
//! reach), and such crossings are followed only when no two-fragment join is
//! proven, within half the budget spent so far (at least `CROSS_FLOOR`).
//! A JPEG join may have five runs like the others, but a Huffman decode
//! proves no order (in five fragments the middle ones of one picture,
//! permuted, reached the exact MCU count), so its order must be proven:
//! the file's final proof is the same as for two fragments, over every
//! run, and a JPEG join is refused when any boundary moved by one cluster
//! decodes as well, or when any other order of its runs after the header
//! (at most 23 for five runs) also decodes to the exact MCU count. Where
//! the file has restart markers their numbers prove the order; where it
//! has none, the join is taken only in the one order that decodes. No
//! cluster is taken twice, and all runs share the file's budget.
//!
//! A JPEG decode runs on through zeroed space after a fragment (zero bits
//! are valid blocks with many encoders' tables), and through some text,
//! and fails only clusters later, where that data ends: the start of that
//! run of clusters that cannot be entropy-coded data is a split too. (A
//! fragment shorter than the 8 KiB and two clusters above is not crossed:
//! with some pictures' tables a decode takes a 4 KiB cluster of noise
//! without a fault and stops just past its end as often as a fragment's.)
//!
//! A proven join becomes a `complete` file with two byte runs and a note
//! `bifragment join proven by …`; the number of candidates tried is noted
//! either way.
//!
//! **Cluster size**: `--cluster-size`, else the cluster size of the file
//! system holding the candidate ([`super::geometry`]: FAT, exFAT, NTFS,
//! ext2/3/4, HFS+, XFS, btrfs, at offset 0 or behind an MBR/GPT), else
//! estimated from the starts of the complete files carved so far: the largest power of two (512 B … 1 MiB)
//! modulo which at least 75% of them share the candidate's own phase; 512 when
//! fewer than 4 complete files are known. Splits and second starts are taken
//! relative to the candidate's start, so a file system whose data area is not
//! aligned to the cluster size in absolute terms works too.
//!
//! **Bounds** (per file, [`FragLimits`]): splits tried, gap searched (bytes
//! either side), candidate (split, second start) pairs, bytes read for
//! checksums and validation, and wall time. Reads go through a small block
//! cache (fixed size); nothing is allocated in proportion to a length field
//! (central directories are walked record by record; at most 65 535 entries,
//! the 16-bit EOCD count).

use super::validators::{self, ByteReader, Verdict};

// The concepts every format's search shares (each format imports what it uses).
mod ahead;
mod budget;
mod cache;
mod carver;
mod claims;
mod entropy;
mod index;
mod join;
mod known;
mod layout;
mod memory;
mod needles;
mod runs;
// One file per format: each finds where its file breaks and proves a join.
mod jpeg;
mod png;
mod zip;

pub use ahead::{AheadDone, AheadJob, AheadJoins, run_ahead};
pub use budget::{FragLimits, image_budget};
pub use carver::{Fragments, estimate_cluster};
pub use claims::{Asked, Claims, ClaimsSeen};
pub use jpeg::trail_spec as jpeg_trail_spec;
pub use known::KnownJpegs;
pub use layout::{fs_entry_verdict, fs_layout_verdict};
pub use memory::SearchMemory;
pub use needles::{NEEDLES, ScanNeedles};
pub use runs::{MAX_RUNS, TwoRuns};

use budget::Budget;

/// A proven two-fragment file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    /// `(image offset, length)` of each fragment, in file order.
    pub runs: Vec<(u64, u64)>,
    /// Total length.
    pub length: u64,
    pub subtype: Option<String>,
    pub notes: Vec<String>,
}

/// The result of a recovery attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub joined: Option<Joined>,
    /// Candidates tried, why it stopped (for the report).
    pub note: String,
    /// False when the wall-time cap stopped the search (a result that
    /// depends on the machine, never taken from a search run ahead).
    pub reusable: bool,
    /// A search run ahead of the carver ([`run_ahead`]): every question it
    /// asked the claims, with the answer it got (`None` when it asked more
    /// than 2^20 questions). The search is a pure function of the image, the
    /// validation stage's verdicts and these answers, so the carver takes
    /// its result when its own claims answer every question the same
    /// ([`Claims::answers`]) and its budget holds what the search spent:
    /// the result is then the one the carver's own search would give,
    /// whatever the claims were when it ran. PNG and ZIP searches ask none.
    pub asked: Option<Vec<Asked>>,
    /// With `asked`: the claims those questions were asked of, where they
    /// can matter to them ([`Claims::seen`]). Claims the same there answer
    /// every question the same: the carver compares a few ranges instead
    /// of asking the questions again (30 000 of them for a search of
    /// 16 384 candidates, ~1% of an ext2 carving).
    pub seen: Option<ClaimsSeen>,
    /// Candidates tried and bytes read (what the search charged its budget).
    pub spent: (u64, u64),
}

/// True for the validators this module can recover.
pub fn supported(validator: &str) -> bool {
    matches!(validator, "png" | "zip" | "jpeg")
}

/// Tries to recover the file of type `validator` whose header is at `start`.
pub fn recover(
    validator: &str,
    r: &dyn ByteReader,
    start: u64,
    max_len: u64,
    cluster: u64,
    limits: &FragLimits,
) -> Attempt {
    recover_with(
        validator,
        r,
        start,
        max_len,
        cluster,
        limits,
        (&Claims::default(), &mut SearchMemory::default()),
    )
}

/// [`recover`], never taking a second fragment from a range in `claims`;
/// `memory` keeps what the search learnt about other files.
pub fn recover_with(
    validator: &str,
    r: &dyn ByteReader,
    start: u64,
    max_len: u64,
    cluster: u64,
    limits: &FragLimits,
    (claims, memory): (&Claims, &mut SearchMemory),
) -> Attempt {
    recover_given(
        validator,
        r,
        start,
        max_len,
        (cluster, None),
        limits,
        claims,
        (memory, false),
        None,
    )
}

/// [`recover_with`], given the validator's verdict for the candidate (a
/// JPEG's says where its decode broke: not decoded again) and, with the
/// cluster size, the block size of an ext2/3 volume holding the file (its
/// block-map boundaries are split points, [`super::geometry::block_map_boundaries`]).
/// With `log`, the questions asked of the claims are recorded
/// ([`Attempt::asked`]: a search run ahead of the carver).
#[allow(clippy::too_many_arguments)]
fn recover_given(
    validator: &str,
    r: &dyn ByteReader,
    start: u64,
    max_len: u64,
    (cluster, block_map): (u64, Option<u64>),
    limits: &FragLimits,
    claims: &Claims,
    (memory, log): (&mut SearchMemory, bool),
    given: Option<&Verdict>,
) -> Attempt {
    let cluster = cluster.max(1);
    let max_len = max_len.min(r.len().saturating_sub(start));
    let mut b = Budget::new(*limits, claims, (memory, log));
    let joined = match validator {
        "png" => png::recover(&TwoRuns::one(r, start, max_len), max_len, cluster, &mut b),
        "zip" => zip::recover(&TwoRuns::one(r, start, max_len), max_len, cluster, &mut b),
        "jpeg" => jpeg::recover(
            &TwoRuns::one(r, start, max_len),
            max_len,
            cluster,
            (given, block_map),
            &mut b,
            (&Default::default(), None),
        ),
        _ => None,
    };
    let why = if joined.is_some() {
        "join found"
    } else if b.exhausted {
        "search budget exhausted"
    } else {
        "no join proven"
    };
    let reusable = !b.timed_out;
    Attempt {
        joined,
        note: format!(
            "fragment search ({validator}, cluster {cluster}): {} candidates, {why}",
            b.cands
        ),
        reusable,
        seen: b
            .asked_span
            .filter(|_| b.asked.is_some())
            .map(|(lo, hi)| b.claims.seen(lo, hi)),
        asked: b.asked.take(),
        spent: (b.cands, b.bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::cache::Cache;
    use super::*;
    use crate::carve::validators::read::RunsView;
    use crate::carve::validators::{Limits, Status};

    /// Runs `(offset, length)` cut to an image of `len` bytes (`offset <
    /// len`), empty ones dropped.
    fn runs_within(runs: Vec<(u64, u64)>, len: u64) -> Vec<(u64, u64)> {
        runs.into_iter()
            .map(|(a, n)| (a, n.min(len - a)))
            .filter(|r| r.1 > 0)
            .collect()
    }

    proptest::proptest! {
        /// Where a view says a range of its bytes lies in the image, the
        /// image holds those bytes: for a file system's runs and for the
        /// fragment search's joins (in order and out of order, three runs).
        #[test]
        fn a_view_lies_where_it_says(
            runs in proptest::collection::vec((0u64..4000, 1u64..900), 1..6),
            cuts in (0u64..2000, 1u64..3000, 0u64..4000, 0u64..4000),
            ranges in proptest::collection::vec((0u64..5000, 0u64..3000), 1..8),
        ) {
            let img: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
            let sl = crate::carve::validators::testutil::Slice(&img);
            let image: &dyn ByteReader = &sl;
            let runs = runs_within(runs, 5000);
            let (split, b, split2, c) = cuts;
            let two = TwoRuns::new(image, 100, split, b, 6000);
            let three = two.then(split + split2 % 700 + 1, c, 6000);
            let views: Vec<Box<dyn ByteReader + '_>> = [
                Some(Box::new(RunsView::new(image, &runs)) as Box<dyn ByteReader>),
                Some(Box::new(two) as Box<dyn ByteReader>),
                three.map(|t| Box::new(t) as Box<dyn ByteReader>),
            ]
            .into_iter()
            .flatten()
            .collect();
            for v in &views {
                for &(off, len) in &ranges {
                    let Some((inner, at)) = v.lies_in(off, len) else {
                        proptest::prop_assert!(off + len > v.len());
                        continue;
                    };
                    proptest::prop_assert!(std::ptr::eq(
                        inner as *const dyn ByteReader as *const (),
                        image as *const dyn ByteReader as *const ()
                    ));
                    let mut want = vec![0u8; len as usize];
                    proptest::prop_assert_eq!(v.read_at(off, &mut want), len as usize);
                    let mut got = Vec::new();
                    for (o, n) in at {
                        got.extend_from_slice(&img[o as usize..(o + n) as usize]);
                    }
                    proptest::prop_assert_eq!(got, want);
                }
            }
        }

        /// How far a window's bytes equal the image's along some runs is
        /// what comparing them byte by byte gives, whether the runs are
        /// where the window's bytes lie (not read then), shifted, cut,
        /// past the image's end or anywhere.
        #[test]
        fn a_common_prefix_equals_a_byte_by_byte_comparison(
            view in proptest::collection::vec((0u64..6000, 1u64..2500), 1..4),
            off in 0u64..3000,
            pick in 0u8..5,
            tweak in (0u64..4000, 1u64..3000, 0usize..4),
            other in proptest::collection::vec((0u64..6500, 1u64..2000), 1..4),
        ) {
            // Few byte values: equal bytes at other offsets are common.
            let img: Vec<u8> = (0..6000u32).map(|i| ((i.wrapping_mul(2_654_435_761) >> 13) % 3) as u8).collect();
            let sl = crate::carve::validators::testutil::Slice(&img);
            let image: &dyn ByteReader = &sl;
            let view = runs_within(view, 6000);
            proptest::prop_assume!(!view.is_empty());
            let v = RunsView::new(image, &view);
            let src = validators::read::Src::new(&v, 0, Limits { max_len: v.len() });
            let id = validators::read::Src::new(image, 0, Limits { max_len: 1 }).reader_id();
            let off = off.min(v.len());
            // The window's own runs from `off`, then changed one way or another.
            let (extra, len2, at) = tweak;
            let mut runs = v.lies_in(off, v.len() - off).map(|r| r.1).unwrap_or_default();
            match pick {
                0 => {}
                1 => {
                    let k = at % runs.len().max(1);
                    if let Some(r) = runs.get_mut(k) {
                        r.0 += extra % 7;
                    }
                }
                2 => runs.push((extra, len2)),
                // One run from where the window's first starts, as long as
                // its first two: the same bytes, then others.
                3 if runs.len() > 1 => {
                    let second = runs.remove(1);
                    runs[0].1 += second.1;
                }
                _ => runs = other,
            }
            let len: u64 = runs.iter().map(|r| r.1).sum();
            let want = {
                let mut mine = vec![0u8; len as usize];
                let got_mine = v.read_at(off, &mut mine);
                let theirs: Vec<Option<u8>> = runs
                    .iter()
                    .flat_map(|&(a, n)| (a..a + n).map(|p| img.get(p as usize).copied()))
                    .collect();
                mine.iter()
                    .take(got_mine)
                    .zip(&theirs)
                    .take_while(|(x, y)| Some(**x) == **y)
                    .count() as u64
            };
            proptest::prop_assert_eq!(src.common_prefix_runs(off, (image, id), &runs, len), want);
            proptest::prop_assert_eq!(src.common_prefix_runs(off, (image, id), &runs, len + 1), 0);
        }
    }

    /// A search run ahead records the claims' answers it relied on; the
    /// carver's claims that answer them all alike give the same result
    /// (taken), and claims that answer one differently may not (the
    /// carver searches again): here a claim over the true second fragment,
    /// made after the search ran, leaves its join unprovable.
    #[test]
    fn a_search_run_ahead_is_taken_only_when_the_claims_answer_alike() {
        const CL: u64 = 512;
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples/d-debian.jpg");
        let j = std::fs::read(path).unwrap();
        let split = 100 * CL as usize;
        let (a, b) = (8 * CL, 8 * CL + split as u64 + 37 * CL);
        let mut img: Vec<u8> = (0..1u64 << 20)
            .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 13) as u8)
            .collect();
        img[a as usize..a as usize + split].copy_from_slice(&j[..split]);
        img[b as usize..b as usize + j.len() - split].copy_from_slice(&j[split..]);
        let max_len = img.len() as u64 - a;
        let limits = FragLimits::default();
        let run = |claims: &Claims, log: bool| {
            let memory = &mut SearchMemory::default();
            recover_given(
                "jpeg",
                &img,
                a,
                max_len,
                (CL, None),
                &limits,
                claims,
                (memory, log),
                None,
            )
        };
        let got = run(&Claims::default(), true);
        let joined = got.joined.clone().expect("the join is found");
        assert_eq!(
            joined.runs,
            vec![(a, split as u64), (b, (j.len() - split) as u64)]
        );
        let asked = got.asked.clone().expect("questions recorded");
        assert!(asked.contains(&Asked::Covers(b, false)), "{asked:?}");
        // A claim no question touched: answered alike, and the carver's own
        // search finds the same.
        let mut far = Claims::default();
        far.claim(900 * CL, 901 * CL);
        assert!(far.answers(&asked));
        let own = run(&far, false);
        assert_eq!((own.joined, own.spent), (Some(joined.clone()), got.spent));
        // The second fragment claimed meanwhile: answered otherwise, and the
        // carver's own search does not find that join.
        let mut taken = Claims::default();
        taken.claim(b, b + 4 * CL);
        assert!(!taken.answers(&asked));
        // The claims the questions were asked of, where they matter: the
        // same (none) agree, the claimed fragment does not, one past the
        // span does; and claims that agree answer every question alike
        // (random claims, some agreeing).
        let seen = got.seen.clone().expect("claims seen recorded");
        assert!(Claims::default().agrees(&seen));
        assert!(!taken.agrees(&seen));
        let mut past = Claims::default();
        past.claim(seen.hi + 1, seen.hi + CL);
        past.claim(0, seen.lo);
        assert!(past.agrees(&seen) && past.answers(&asked));
        let mut rng = crate::synth::XorShift(0x2545_f491_4f6c_dd1du64);
        let mut agreed = 0;
        for _ in 0..300 {
            let mut c = Claims::default();
            for _ in 0..rng.next_u64() % 4 {
                let at = rng.next_u64() % (img.len() as u64);
                // (Mostly outside the span, some over its edges.)
                let at = if rng.next_u64().is_multiple_of(3) {
                    at
                } else {
                    at % seen.lo.max(1)
                };
                c.claim(at, at + 1 + rng.next_u64() % (64 * CL));
            }
            if c.agrees(&seen) {
                agreed += 1;
                assert!(c.answers(&asked), "{:?}", c.seen(seen.lo, seen.hi));
            }
        }
        assert!(agreed > 10, "only {agreed} agreed");
        assert_ne!(run(&taken, false).joined, Some(joined));
    }

    #[test]
    fn cluster_estimate() {
        let starts: Vec<u64> = (1..20).map(|i| i * 4096).chain([512 * 3]).collect();
        assert_eq!(estimate_cluster(&starts, 8192), 4096);
        assert_eq!(estimate_cluster(&starts[..2], 8192), 512);
        // Data area not aligned: phase 1024 modulo 4096.
        let starts: Vec<u64> = (1..20).map(|i| i * 4096 + 1024).collect();
        assert_eq!(estimate_cluster(&starts, 5 * 4096 + 1024), 4096);
    }

    #[test]
    fn two_runs_reads_across_the_join() {
        let img: Vec<u8> = (0..100u8).collect();
        let j = TwoRuns::new(&img, 10, 5, 50, 12);
        let mut buf = [0u8; 12];
        assert_eq!(j.read_at(0, &mut buf), 12);
        assert_eq!(buf, [10, 11, 12, 13, 14, 50, 51, 52, 53, 54, 55, 56]);
        let mut c = Cache::new(&img);
        let mut b2 = [0u8; 4];
        assert!(c.read_joined(&j, 3, &mut b2));
        assert_eq!(b2, [13, 14, 50, 51]);
        assert!(!c.read_joined(&j, 10, &mut b2));
        // Out of order: the second piece ends at the header.
        let j = TwoRuns::new(&img, 50, 5, 40, 1000);
        assert_eq!(j.len(), 15);
        // Three runs, the two after the header swapped: the same bytes in
        // the other order; no order that moves the header, repeats or
        // misses a run.
        let three = TwoRuns::new(&img, 10, 5, 30, 100).then(8, 60, 100).unwrap();
        let alt = three.reordered(&[0, 2, 1], 12).unwrap();
        let mut got = [0u8; 12];
        assert_eq!(alt.read_at(0, &mut got), 12);
        assert_eq!(got, [10, 11, 12, 13, 14, 60, 61, 62, 63, 30, 31, 32]);
        for bad in [
            &[1, 0, 2][..],
            &[0, 1, 1],
            &[0, 1],
            &[0, 2, 1, 3],
            &[0, 1, 5],
        ] {
            assert!(three.reordered(bad, 12).is_none(), "{bad:?}");
        }
    }
    /// A TIFF (its IFD at the end, past the indirect block) and a PNG laid
    /// out by an ext2 block map: carved whole, in two runs, from the block
    /// map; contiguous, neither is complete.
    #[test]
    fn block_mapped_files_are_validated_as_laid_out() {
        use crate::carve::geometry::{self, tests::ext2_volume, tests::lay_out_ext2};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
        for (name, validator) in [("d-debian-half.tif", "tiff"), ("debian.png", "png")] {
            let data = std::fs::read(dir.join(name)).unwrap();
            let mut img = ext2_volume(4096, 1 << 20);
            let meta = lay_out_ext2(&mut img, 4096, 10, &data);
            assert_eq!(meta.len(), 1);
            let vol = geometry::detect(&img).volumes[0].clone();
            let start = 10 * 4096;
            let max_len = img.len() as u64 - start;
            let contiguous = validators::validate(
                validator,
                &img,
                start,
                Limits { max_len },
                &crate::carve::validators::NO_CONTEXT,
            );
            assert!(
                contiguous
                    .as_ref()
                    .is_none_or(|v| v.status != Status::Complete),
                "{name}: {contiguous:?}"
            );
            let v = fs_layout_verdict(
                validator,
                &img,
                &vol,
                (start, max_len),
                contiguous.as_ref(),
                &crate::carve::validators::NO_CONTEXT,
            )
            .unwrap_or_else(|| panic!("{name}: no verdict"));
            assert_eq!((v.status, v.length), (Status::Complete, data.len() as u64));
            let runs = v.runs.clone().unwrap();
            assert_eq!(
                runs,
                vec![
                    (start, 12 * 4096),
                    (start + 13 * 4096, data.len() as u64 - 12 * 4096)
                ]
            );
            let carved: Vec<u8> = runs
                .iter()
                .flat_map(|&(o, n)| img[o as usize..(o + n) as usize].to_vec())
                .collect();
            assert_eq!(carved, data, "{name}");
            // Without the indirect block, nothing to follow.
            let mut plain = img.clone();
            plain[meta[0]..meta[0] + 4096].fill(0);
            assert!(
                fs_layout_verdict(
                    validator,
                    &plain,
                    &vol,
                    (start, max_len),
                    None,
                    &crate::carve::validators::NO_CONTEXT
                )
                .is_none()
            );
        }
    }
    /// The owner lengths the carver tells the searches are those of
    /// contiguous validations only (what a search asking about the header
    /// would compute, and what the validation stage shares): a verdict over
    /// the file system's layout of the file is left out, so that a search's
    /// answer does not depend on whether the carver had passed the header.
    #[test]
    fn owner_lengths_come_from_contiguous_verdicts_only() {
        let mut f = Fragments::new(None);
        let contiguous = Verdict::complete(70_000);
        let mut laid_out = Verdict::complete(2_000_000);
        laid_out.runs = Some(vec![(4096, 49_152), (57_344, 2_000_000 - 49_152)]);
        f.note_jpeg(4096, 1 << 30, Some(&laid_out));
        f.note_jpeg(1 << 20, 1 << 30, Some(&contiguous));
        f.note_jpeg(2 << 20, 1 << 30, None);
        let heads = &f.memory.jpeg_heads;
        assert_eq!(heads.get(&4096), None);
        assert_eq!(heads.get(&(1 << 20)), Some(&70_000));
        assert_eq!(heads.get(&(2 << 20)), Some(&0));
    }
}
