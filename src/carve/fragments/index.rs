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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carve::fragments::NEEDLES;
    use crate::synth::XorShift;

    /// The searches' index filled from the scan's log holds exactly what
    /// reading the image finds (phase, the byte after the needle, the image
    /// end), and the log answers only for stretches it holds entirely.
    #[test]
    fn scan_log_index_equals_reading_the_image() {
        let mut img = vec![0u8; 3 << 20];
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15u64);
        for b in img.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        // SOIs on and off cluster boundaries, followed by a marker or not,
        // EOCDs anywhere, one of each at the very end.
        for _ in 0..400 {
            let p = (rng.next_u64() % (img.len() as u64 - 8)) as usize & !0x3f;
            let needle = NEEDLES[(rng.next_u64() % 2) as usize];
            img[p..p + needle.len()].copy_from_slice(needle);
        }
        let n = img.len();
        img[n - 3..].copy_from_slice(NEEDLES[0]);
        img[n - 8..n - 4].copy_from_slice(NEEDLES[1]);
        // Overlapping SOIs, the second on a cluster boundary.
        img[8190..8195].copy_from_slice(&[0xFF, 0xD8, 0xFF, 0xD8, 0xFF]);
        img[8195] = 0xE0;
        let brute = |needle: &[u8]| -> Vec<(usize, u64)> {
            let k = NEEDLES.iter().position(|x| *x == needle).unwrap();
            (0..img.len())
                .filter(|&p| img[p..].starts_with(needle))
                .map(|p| (k, p as u64))
                .collect()
        };
        let log = ScanNeedles::new(0, [true, true, false, false]);
        let mut all = brute(NEEDLES[0]);
        all.extend(brute(NEEDLES[1]));
        log.record(&all, (0, img.len() as u64));
        let marker: fn(u8) -> bool = |m| (0xC0..=0xFE).contains(&m);
        let any: fn(u8) -> bool = |_| true;
        // The index read from the image and the one fed from `log` hold
        // the same positions of `[from, to)`.
        let same_as_read = |log: &ScanNeedles,
                            (needle, modulus, phase): (&'static [u8], u64, u64),
                            ok: fn(u8) -> bool,
                            (from, to): (u64, u64),
                            at: &str| {
            let mut read = PosIndex::default();
            let mut fed = PosIndex::default();
            assert!(read.cover(&img, None, (needle, modulus, phase), ok, from, to));
            assert!(fed.cover(&img, Some(log), (needle, modulus, phase), ok, from, to));
            let a: Vec<u64> = read.range(from, to).copied().collect();
            let b: Vec<u64> = fed.range(from, to).copied().collect();
            assert_eq!(a, b, "{needle:?} mod {modulus} in [{from}, {to}){at}");
        };
        for (needle, modulus, phase, ok) in [
            (NEEDLES[0], 4096, 0, marker),
            (NEEDLES[0], 512, 64, marker),
            (NEEDLES[1], 1, 0, any),
        ] {
            for (from, to) in [
                (0, img.len() as u64),
                (1 << 20, (2 << 20) + 77),
                (n as u64 - 9000, n as u64),
            ] {
                same_as_read(&log, (needle, modulus, phase), ok, (from, to), "");
            }
        }
        // A log up to a frontier (the scan still going): the positions
        // before it from the log, the rest searched, the same index.
        for t in [4096u64, 5000, 1 << 20, (2 << 20) + 3, n as u64 - 1] {
            let part = ScanNeedles::new(0, [true, true, false, false]);
            let upto: Vec<(usize, u64)> = all.iter().copied().filter(|&(_, p)| p < t).collect();
            part.record(&upto, (0, t));
            for (needle, modulus, phase, ok) in
                [(NEEDLES[0], 4096, 0, marker), (NEEDLES[1], 1, 0, any)]
            {
                for (from, to) in [(0, n as u64), (4000, t + 9000)] {
                    let at = format!(", log up to {t}");
                    same_as_read(&part, (needle, modulus, phase), ok, (from, to), &at);
                }
            }
        }
        // Held up to the scan's frontier; before its start, or not a
        // pattern of the scan: no answer.
        let part = ScanNeedles::new(4096, [true, false, false, false]);
        part.record(&brute(NEEDLES[0]), (0, 1 << 20));
        let upto = |from, to| part.positions_upto(NEEDLES[0], from, to).map(|p| p.1);
        assert_eq!(upto(4096, 1 << 20), Some(1 << 20));
        assert_eq!(upto(4096, (1 << 20) + 1), Some(1 << 20));
        assert_eq!(upto(1 << 20, (1 << 20) + 1), None, "all past the frontier");
        assert_eq!(upto(0, 4096), None);
        assert!(
            part.positions_upto(NEEDLES[1], 4096, 8192).is_none(),
            "not a pattern of the scan"
        );
        assert!(part.positions_upto(b"nope", 4096, 8192).is_none());
    }
}
