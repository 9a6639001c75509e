//! The claims: byte ranges of the image already carved ([`Claims`]), which
//! a search never takes a fragment from, and the record of what a search run
//! ahead asked of them ([`Asked`], [`ClaimsSeen`]).

/// What [`Claims`] hold within the span `[lo, hi]` of the positions a
/// search asked about ([`Claims::seen`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimsSeen {
    pub(super) lo: u64,
    pub(super) hi: u64,
    /// The claimed stretches (merged) reaching into the span, last first.
    merged: Vec<(u64, u64)>,
    /// Where claimed ranges start inside the span.
    pub(super) starts: Vec<u64>,
}

/// A question a fragment search asked the claims, and the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// [`Claims::covers`]
    Covers(u64, bool),
    /// [`Claims::starts_within`]
    StartsWithin(u64, u64, bool),
}

/// Most questions recorded per search run ahead (beyond, its answer is not
/// checkable and the carver searches again).
pub(super) const MAX_ASKED: usize = 1 << 20;

/// Byte ranges of the image already known to belong to a file: complete
/// files and proven joins carved so far. A cluster belongs to one file, so a
/// second fragment is never taken from inside one of them (this is what keeps
/// several copies of one picture from being grafted onto each other).
/// Bounded: ranges ending more than the largest gap behind the file being
/// searched are forgotten, and at most 2^18 are kept.
#[derive(Clone, Debug, Default)]
pub struct Claims {
    /// start → end, as claimed (ranges may overlap).
    ranges: std::collections::BTreeMap<u64, u64>,
    /// The same ranges merged into disjoint intervals (start → end): what
    /// [`Claims::covers`] asks, exactly and in O(log n).
    merged: std::collections::BTreeMap<u64, u64>,
}

/// Most claimed ranges kept.
const MAX_CLAIMS: usize = 1 << 18;

impl Claims {
    /// Records `[start, end)` as belonging to a file.
    pub fn claim(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        if self.ranges.len() >= MAX_CLAIMS {
            self.ranges.pop_first();
            self.merged.pop_first();
        }
        let e = self.ranges.entry(start).or_insert(end);
        *e = (*e).max(end);
        // Merge with every interval it touches.
        let (mut lo, mut hi) = (start, end);
        if let Some((&s0, &e0)) = self.merged.range(..=start).next_back()
            && e0 >= start
        {
            lo = s0;
            hi = hi.max(e0);
        }
        let inside: Vec<(u64, u64)> = self.merged.range(lo..=hi).map(|(&a, &b)| (a, b)).collect();
        for (a, b) in inside {
            self.merged.remove(&a);
            hi = hi.max(b);
        }
        self.merged.insert(lo, hi);
    }

    /// The claimed ranges that touch `[lo, hi)` (what a search of a file in
    /// that window can ask about), or `None` when there are more than `most`.
    pub(super) fn window(&self, lo: u64, hi: u64, most: usize) -> Option<Claims> {
        let pick = |m: &std::collections::BTreeMap<u64, u64>| {
            let v: Vec<(u64, u64)> = m
                .range(..hi)
                .filter(|&(_, &e)| e > lo)
                .map(|(&a, &b)| (a, b))
                .take(most + 1)
                .collect();
            (v.len() <= most).then(|| v.into_iter().collect())
        };
        Some(Claims {
            ranges: pick(&self.ranges)?,
            merged: pick(&self.merged)?,
        })
    }

    /// Forgets ranges that end at or before `before`.
    pub(super) fn prune(&mut self, before: u64) {
        while let Some((_, &end)) = self.ranges.first_key_value() {
            if end > before {
                break;
            }
            self.ranges.pop_first();
        }
        while let Some((_, &end)) = self.merged.first_key_value() {
            if end > before {
                break;
            }
            self.merged.pop_first();
        }
    }

    /// True when `pos` lies inside a claimed range.
    pub fn covers(&self, pos: u64) -> bool {
        self.merged
            .range(..=pos)
            .next_back()
            .is_some_and(|(_, &end)| end > pos)
    }

    /// What these claims hold within `[lo, hi]`: everything
    /// [`Claims::covers`] of a position in it and [`Claims::starts_within`]
    /// of two positions in it answer from.
    pub fn seen(&self, lo: u64, hi: u64) -> ClaimsSeen {
        ClaimsSeen {
            lo,
            hi,
            merged: self
                .merged
                .range(..=hi)
                .rev()
                .take_while(|&(_, &end)| end > lo)
                .map(|(&a, &b)| (a, b))
                .collect(),
            starts: self.ranges.range(lo..=hi).map(|(&a, _)| a).collect(),
        }
    }

    /// True when these claims hold what `seen` records within its span.
    pub fn agrees(&self, seen: &ClaimsSeen) -> bool {
        self.seen(seen.lo, seen.hi) == *seen
    }

    /// True when these claims give every answer `asked` records.
    pub fn answers(&self, asked: &[Asked]) -> bool {
        asked.iter().all(|q| match *q {
            Asked::Covers(p, a) => self.covers(p) == a,
            Asked::StartsWithin(x, y, a) => self.starts_within(x, y) == a,
        })
    }

    /// True when a claimed range starts inside `(a, b)`.
    pub fn starts_within(&self, a: u64, b: u64) -> bool {
        a.checked_add(1)
            .is_some_and(|lo| lo < b && self.ranges.range(lo..b).next().is_some())
    }
}
