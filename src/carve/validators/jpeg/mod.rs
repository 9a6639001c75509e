//! JPEG (JFIF/EXIF): a marker walk from SOI to the real EOI.
//!
//! Structure (ITU-T T.81 Annex B, JFIF 1.02, EXIF 2.3 §4.5): `FF D8` (SOI),
//! then marker segments `FF xx | length (u16 BE, ≥ 2, includes itself) | data`.
//! `SOS` (`FF DA`) is followed by entropy-coded data in which `FF 00` is a
//! stuffed byte and `FF D0..D7` are restart markers; the first other marker
//! ends the scan (progressive files have many scans with `DHT`s between
//! them). Standalone markers (`TEM`, `RSTn`) carry no length; `FF` fill bytes
//! may precede any marker. `FF D9` (EOI) ends the file.
//!
//! An EXIF thumbnail (a whole JPEG inside `APP1`) never ends the outer file:
//! the `APP1` length skips it.
//!
//! Checked: the fourth byte is a real segment marker; every marker is a
//! defined one (no reserved `02..BF`, no second SOI; hierarchical and
//! extension markers `DE DF F0..FD` are not accepted); segment lengths fit;
//! SOF (1..4 components, `len = 8 + 3·components`, precision 8/12, 2..16 for
//! lossless, non-zero width), SOS (`len = 6 + 2·components`, components 1..4,
//! spectral/approximation fields in range), DRI (`len = 4`), DQT and DHT
//! bodies parsed table by table to exactly the segment length; SOF before SOS.
//!
//! Entropy-coded data is *decoded* (Huffman codes only: no dequantisation
//! or IDCT) for baseline, extended-sequential and progressive Huffman frames
//! (T.81 Annex F and G): every code must be in its table, coefficient
//! indices must stay in the block / spectral band, the scan must hold
//! exactly the number of MCUs the frame size requires, restart markers must
//! come every restart interval in sequence, and the scan must end at a
//! marker. This is what catches a fragmented or cut file whose tail is
//! someone else's data (which a marker walk alone accepts as soon as any
//! `FF D9` turns up). Progressive refinement (AC successive approximation)
//! needs the per-block history of non-zero coefficients, kept as one bit per
//! coefficient for at most [`MAX_HISTORY_BLOCKS`] blocks; larger progressive
//! images, arithmetic-coded and lossless frames, frames whose height comes
//! from a DNL marker and scans whose tables are missing (Motion-JPEG) fall
//! back to the marker walk for that scan (noted). At most [`MAX_BLOCKS`]
//! blocks are decoded per candidate (end-of-band runs make blocks cheap to
//! claim), and one frame header is allowed (no hierarchical mode).
//!
//! Decoding is table-driven (`Huff`): an 11-bit lookahead gives a code's
//! length and symbol; for AC tables one lookup also gives what a symbol does
//! to the coefficient index with its extra bits dropped (the values are not
//! needed), and in long sequential scans several symbols at once. Each such
//! step is taken only where decoding code by code would neither fill the
//! bit reader in between nor fail, so the reader's position, and with it
//! every verdict and damage offset, is exactly that of a code-by-code
//! decoder (checked against the previous decoder, kept for the tests).
//!
//! Foreign bytes where a marker must follow a segment (junk after a
//! comment, `FF 00`, a length hexedited short that lands inside the
//! segment's data) are what libjpeg passes with "Corrupt JPEG data: N
//! extraneous bytes before marker": when the strict walk breaks there, a
//! lenient walk passes at most [`walk::MAX_JUNK`] such bytes before a marker,
//! [`walk::MAX_JUNK_SKIPS`] times (noted), and its verdict is taken only when
//! the file is then complete; otherwise the strict verdict and its damage
//! stand (the fragment search sees only strict walks). Nothing is ever
//! skipped inside entropy-coded data.
//!
//! * `None`: not `FF D8 FF <segment marker>`, or damage before the second
//!   segment (a lone plausible segment is not evidence enough).
//! * `Complete`: EOI reached after at least one frame header and one scan,
//!   every scan decoded; length = end of EOI.
//! * `Partial`: the walk runs past the window (length = window), or hits an
//!   invalid marker/segment or undecodable entropy data after a valid start
//!   (length = where the damage begins: the segment, or the start of the
//!   restart interval / MCU row that failed), or EOI comes without any image
//!   data.

// The files, from the bottom up (each uses only those before it; checked
// by tests/layering.rs): `huffman` (the tables), `bits` (the bit reader and
// its resume point, `Mark`), `frame` (frame and scan headers, the
// coefficient history), `trail` (the fragment search's snapshots),
// `tables` (the decoder's state), `memo` (shared between copies of a
// picture), `decode` (the entropy decoder), `walk` (the marker walk).
// `tests.rs` holds the tests, `reference.rs` the oracle they compare with.
mod bits;
mod decode;
mod frame;
mod huffman;
mod memo;
/// The JPEG validator before the table-driven decoder: the oracle of
/// `jpeg::tests::fast_decoder_verdicts_equal_the_reference`.
#[cfg(test)]
mod reference;
mod tables;
mod trail;
mod walk;

pub use bits::MAX_BLOCKS;
pub use frame::MAX_HISTORY_BLOCKS;
pub use memo::ScanMemo;
use tables::Tables;
use trail::SnapCtl;
pub use trail::{Snap, Trail, TrailBudget, TrailSpec};
use walk::{walk, walk_inner};

use super::Verdict;
use super::read::Src;

pub fn validate(src: Src) -> Option<Verdict> {
    let mut d = Damage::default();
    // The validation stage's own validation of a header leaves a trail of
    // snapshots for the fragment search ([`super::Context::jpeg_trail`]).
    let asked = src
        .context()
        .jpeg_trail
        .as_ref()
        .filter(|(_, id, at, _)| *id == src.reader_id() && *at == src.abs(0));
    let spec = asked.map(|(spec, _, _, _)| *spec);
    let (v, trail) = match spec {
        Some(spec) => validate_trail(src, &mut d, None, spec),
        None => (validate_probe(src, &mut d), None),
    };
    let mut v = v?;
    if d.damaged && d.tolerable && v.status == super::Status::Partial {
        // What libjpeg reads in full is carved whole; anything else keeps
        // the strict verdict (and its damage, for the fragment search).
        let mut tables = Tables::new_lenient(MAX_BLOCKS);
        let lenient = walk_inner(src, &mut Damage::default(), &mut tables);
        if let Some(l) = lenient.filter(|l| l.status == super::Status::Complete) {
            return Some(l);
        }
    }
    if d.damaged && v.status == super::Status::Partial {
        let trail = trail
            .map(|mut t| {
                t.fill_sticky(src);
                t
            })
            .zip(asked)
            .and_then(|(t, (_, _, _, budget))| t.kept(budget))
            .map(|t| super::TrailRef(std::sync::Arc::new(t)));
        v.extras = super::Extras::Jpeg(super::JpegExtras {
            broke_at: Some(d.fail_at),
            trail,
        });
    }
    Some(v)
}

/// [`validate_probe`] (resumed from `resume` when given, as
/// [`validate_resume`]), leaving a [`Trail`] of snapshots.
pub fn validate_trail(
    src: Src,
    d: &mut Damage,
    resume: Option<&Snap>,
    spec: TrailSpec,
) -> (Option<Verdict>, Option<Trail>) {
    let ctl = SnapCtl {
        scan_ends: resume.map(|r| r.scan_ends.clone()).unwrap_or_default(),
        resume: resume.cloned(),
        trail: Some(Trail::new(spec, src.len())),
        ..SnapCtl::default()
    };
    let mut tables = Tables::new(MAX_BLOCKS, ctl, false);
    let v = walk_inner(src, d, &mut tables);
    let trail = tables.snap.trail.take().map(|mut t| {
        t.history = tables.history.take();
        t
    });
    (v, trail)
}

/// Where a damaged JPEG broke, for the fragment search
/// ([`crate::carve::fragments`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Damage {
    /// The verdict is `Partial` because of damage (not because the window
    /// ended first).
    pub damaged: bool,
    /// An upper bound on where foreign data begins: everything before the
    /// first foreign byte decodes, so the decoder reads past it before it
    /// fails. Meaningful when `damaged`.
    pub fail_at: u64,
    /// The damage is of a kind libjpeg passes (foreign bytes where a
    /// marker must be, a marker within [`walk::MAX_JUNK`] bytes): a lenient walk
    /// ([`validate`]'s retry) may find the file whole.
    pub tolerable: bool,
}

/// [`validate`], also filling `d` when the verdict is damage.
pub fn validate_probe(src: Src, d: &mut Damage) -> Option<Verdict> {
    walk(src, d, SnapCtl::default())
}

/// [`validate_probe`], also returning the decoder's state at the last MCU
/// boundary before `split` (`None` when `split` is not inside a decoded scan):
/// the decode the tests compare [`capture_snaps`] and the trails with.
#[cfg(test)]
pub fn validate_capture(src: Src, d: &mut Damage, split: u64) -> (Option<Verdict>, Option<Snap>) {
    let (v, mut snaps) = validate_capture_all(src, d, &[split]);
    (v, snaps.pop().flatten())
}

/// [`validate_capture`] for several splits in one decode: `snaps[i]` is the
/// snapshot for `splits[i]` (in any order), each equal to what
/// [`validate_capture`] takes for that split alone.
#[cfg(test)]
pub fn validate_capture_all(
    src: Src,
    d: &mut Damage,
    splits: &[u64],
) -> (Option<Verdict>, Vec<Option<Snap>>) {
    capture(src, d, None, splits, false)
}

/// The decoder's state at the last MCU boundary before each of `splits` (in
/// any order; `None` for a split not inside a decoded scan), decoding
/// `src` from its start, or resumed from `from`, a snapshot taken over the
/// same bytes (the scans before its own skipped; `None` for a split before
/// where it resumes). The decode stops at the first MCU boundary past the
/// last split, where every snapshot is final: a fragment search wants the
/// decoder's state at its splits, not how the rest of the file decodes.
/// (The tests compare it with a capture decoding on, `validate_capture_all`.)
pub fn capture_snaps(src: Src, from: Option<&Snap>, splits: &[u64]) -> Vec<Option<Snap>> {
    capture(src, &mut Damage::default(), from, splits, true).1
}

/// [`validate_capture_all`] of a window whose bytes before `snap`'s split
/// are those the snapshot was taken over, resumed there: the same verdict,
/// and for every split at or after where the snapshot resumes (its
/// [`Snap::at`]) the same snapshot, without decoding the bytes before it
/// again; `None` for a split before that. (A search that follows a file
/// into its next fragment captures the longer head from the last split's
/// snapshot, not from the file's start.)
#[cfg(test)]
pub fn validate_capture_from(
    src: Src,
    d: &mut Damage,
    snap: &Snap,
    splits: &[u64],
) -> (Option<Verdict>, Vec<Option<Snap>>) {
    capture(src, d, Some(snap), splits, false)
}

/// [`validate_probe`] of a window whose bytes before `snap`'s split are those
/// the snapshot was taken over: equal verdict, without decoding them again.
pub fn validate_resume(src: Src, d: &mut Damage, snap: &Snap) -> Option<Verdict> {
    let ctl = SnapCtl {
        resume: Some(snap.clone()),
        ..SnapCtl::default()
    };
    walk(src, d, ctl)
}

#[cfg(test)]
pub(crate) mod tests;

/// [`capture_snaps`], with the decode's verdict; `stop`: stop past the last
/// split (else decode on as a validation does).
pub(super) fn capture(
    src: Src,
    d: &mut Damage,
    from: Option<&Snap>,
    splits: &[u64],
    stop: bool,
) -> (Option<Verdict>, Vec<Option<Snap>>) {
    let mut wants: Vec<u64> = splits
        .iter()
        .copied()
        .filter(|&s| from.is_none_or(|sn| s >= sn.at()))
        .collect();
    wants.sort_unstable();
    wants.dedup();
    let ctl = SnapCtl {
        got: vec![None; wants.len()],
        wants,
        // The scans before the snapshot's are skipped, not decoded: their
        // ends are the snapshot's.
        scan_ends: from.map(|sn| sn.scan_ends.clone()).unwrap_or_default(),
        resume: from.cloned(),
        stop,
        ..SnapCtl::default()
    };
    let mut tables = Tables::new(MAX_BLOCKS, ctl, false);
    let v = walk_inner(src, d, &mut tables);
    let ctl = &mut tables.snap;
    let snaps = splits
        .iter()
        .map(|s| {
            let i = ctl.wants.binary_search(s).ok()?;
            ctl.got.get_mut(i)?.take()
        })
        .collect();
    (v, snaps)
}
