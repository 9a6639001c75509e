//! Where a signature occurs in a stretch of the image ([`PosIndex`]), shared
//! by the searches of one carving: the JPEG searches index cluster-aligned
//! SOIs, the ZIP searches end-of-central-directory records. Filled from the
//! scan's log ([`super::needles::ScanNeedles`]) where it holds the stretch,
//! else by reading the image.

use super::needles::ScanNeedles;
use crate::carve::validators::ByteReader;

/// Positions of one signature in a stretch `[lo, hi)` of the image, shared by
/// every search of a carving: consecutive searches look at overlapping
/// windows (up to [`super::FragLimits::max_gap`] either side of their file), and
/// each byte of the image is searched for the signature once instead of once
/// per search. The stretch grows at either end as searches ask, is restarted
/// when a search looks somewhere disjoint, and forgets what lies more than
/// [`MAX_SPAN`] behind its end. At most [`MAX_INDEXED`] positions: past that
/// (dense input) the index says so and the search reads the image itself, as
/// bounded by its own budget.
#[derive(Clone, Debug, Default)]
pub(super) struct PosIndex {
    needle: &'static [u8],
    /// Only positions `≡ phase (mod modulus)` are kept (`modulus` 1: all).
    modulus: u64,
    phase: u64,
    lo: u64,
    hi: u64,
    at: std::collections::BTreeSet<u64>,
    overflow: bool,
}

/// Most positions one index holds.
const MAX_INDEXED: usize = 1 << 18;

/// Longest stretch an index covers.
const MAX_SPAN: u64 = 512 << 20;

/// Bytes searched per read when an index grows.
const INDEX_PIECE: usize = 1 << 20;

/// Least an index grows by.
const INDEX_STEP: u64 = 1 << 20;

impl PosIndex {
    /// Makes `[from, to)` indexed for `needle` at positions `≡ phase (mod
    /// modulus)` whose byte after the needle passes `next_ok`; false when the
    /// index overflowed (the caller must search itself).
    pub(super) fn cover(
        &mut self,
        r: &dyn ByteReader,
        log: Option<&ScanNeedles>,
        (needle, modulus, phase): (&'static [u8], u64, u64),
        next_ok: fn(u8) -> bool,
        from: u64,
        to: u64,
    ) -> bool {
        let modulus = modulus.max(1);
        let phase = phase % modulus;
        let same = self.needle == needle && self.modulus == modulus && self.phase == phase;
        // A window near the stretch extends it (the bytes between are
        // searched too); one far from it starts a new stretch.
        let far = to.saturating_add(MAX_SPAN / 4) < self.lo
            || from > self.hi.saturating_add(MAX_SPAN / 4);
        if !same || far || self.hi == 0 {
            *self = PosIndex {
                needle,
                modulus,
                phase,
                lo: from,
                hi: from,
                ..PosIndex::default()
            };
        }
        if self.overflow {
            return false;
        }
        // Grown by at least `INDEX_STEP` at a time: callers ask for windows
        // a little past the last one, and a read per small step would cost
        // more than the bytes it searches.
        if from < self.lo {
            let lo = self.lo;
            let from = from.min(lo.saturating_sub(INDEX_STEP));
            self.fill(r, log, next_ok, from, lo);
            self.lo = from;
        }
        if to > self.hi {
            let hi = self.hi;
            let to = to.max(hi.saturating_add(INDEX_STEP));
            self.fill(r, log, next_ok, hi, to);
            self.hi = to;
        }
        if self.hi - self.lo > MAX_SPAN {
            self.lo = (self.hi - MAX_SPAN).min(from);
            let keep = self.at.split_off(&self.lo);
            self.at = keep;
        }
        !self.overflow
    }

    /// Indexes `[from, to)`: from the scan's log when it holds the stretch
    /// (the byte after each position read, as [`PosIndex::search`] checks
    /// it), else by reading the image.
    fn fill(
        &mut self,
        r: &dyn ByteReader,
        log: Option<&ScanNeedles>,
        next_ok: fn(u8) -> bool,
        from: u64,
        to: u64,
    ) {
        // (Where the scan has not been yet, searched here: a search running
        // ahead of the scan read its whole window, 0-15 ms of an ext2
        // carving depending on how far behind the scan was.)
        let Some((found, upto)) = log.and_then(|l| l.positions_upto(self.needle, from, to)) else {
            return self.search(r, next_ok, from, to);
        };
        self.log_positions(r, next_ok, found);
        if upto < to && !self.overflow {
            self.search(r, next_ok, upto, to);
        }
    }

    /// Indexes the logged positions `found` whose byte after the needle
    /// passes `next_ok`.
    fn log_positions(&mut self, r: &dyn ByteReader, next_ok: fn(u8) -> bool, found: Vec<u64>) {
        let len = self.needle.len() as u64;
        for p in found {
            if p % self.modulus != self.phase {
                continue;
            }
            let mut next = [0u8; 1];
            if r.read_at(p + len, &mut next) != 1 || !next_ok(next[0]) {
                continue;
            }
            self.at.insert(p);
            if self.at.len() > MAX_INDEXED {
                self.overflow = true;
                return;
            }
        }
    }

    fn search(&mut self, r: &dyn ByteReader, next_ok: fn(u8) -> bool, from: u64, to: u64) {
        let finder = memchr::memmem::Finder::new(self.needle);
        let extra = self.needle.len();
        let piece = usize::try_from(to - from).map_or(INDEX_PIECE, |n| n.min(INDEX_PIECE));
        let mut buf = vec![0u8; piece + extra];
        let mut pos = from;
        while pos < to && !self.overflow {
            let span = (to - pos).min(piece as u64);
            let want = span as usize + extra;
            let got = r.read_at(pos, &mut buf[..want]).min(want);
            // Every occurrence, overlapping ones included (as the scan
            // reports them: `FF D8 FF D8 FF` holds two SOIs).
            let mut at = 0;
            while let Some(i) = buf
                .get(at..got)
                .and_then(|b| finder.find(b))
                .map(|i| at + i)
            {
                at = i + 1;
                let p = pos + i as u64;
                if (i as u64) >= span || p % self.modulus != self.phase {
                    continue;
                }
                if !buf.get(i + self.needle.len()).copied().is_some_and(next_ok) {
                    continue;
                }
                self.at.insert(p);
                if self.at.len() > MAX_INDEXED {
                    self.overflow = true;
                    return;
                }
            }
            if got < want {
                break;
            }
            pos += span;
        }
    }

    /// Indexed positions in `[from, to)`.
    pub(super) fn range(&self, from: u64, to: u64) -> std::collections::btree_set::Range<'_, u64> {
        self.at.range(from..to.max(from))
    }
}
