//! What the fragment searches of one carving remember between them
//! ([`SearchMemory`]): facts about the image found by one search and reused
//! by the next (JPEG headers validated, signature positions indexed, the
//! JPEG prefilter's verdicts), and the carving's shared sources of such
//! facts (the validation stage's JPEG verdicts, the scan's needle log). None
//! of it says which bytes are taken: that is [`super::claims::Claims`].

use std::collections::BTreeMap;
use std::sync::Arc;

use super::index::PosIndex;
use super::known::KnownJpegs;
use super::needles::ScanNeedles;
use crate::carve::geometry::alloc::AllocBits;

/// What the searches remember, owned next to the [`super::claims::Claims`]
/// by whoever runs searches (the carver, each searching thread run ahead).
/// Every entry is a pure function of the image: what a search finds does not
/// depend on which earlier search filled it in. Bounded: entries more than
/// the largest gap behind the file being searched are forgotten, and at most
/// [`MAX_HEADS`] JPEG heads and four times as many prefilter verdicts are
/// kept.
#[derive(Debug, Default)]
pub struct SearchMemory {
    /// JPEG headers validated by the search (to see whether they own a
    /// candidate second fragment): header → validated length.
    pub(super) jpeg_heads: BTreeMap<u64, u64>,
    /// ZIP end-of-central-directory records around the searches so far.
    pub(super) eocds: PosIndex,
    /// Cluster-aligned JPEG headers around the searches so far.
    pub(super) sois: PosIndex,
    /// Whether the `n` bytes at a position look like entropy-coded data:
    /// (position, n) → verdict, shared by the JPEG searches (their windows
    /// overlap: each cluster is examined once per carving, not once per search).
    /// A memory with the stage's [`KnownJpegs`] uses its map instead, shared
    /// with the searches run ahead too.
    entropy: BTreeMap<(u64, u64), bool>,
    /// The validation stage's JPEG verdicts.
    pub(super) known: Option<Arc<KnownJpegs>>,
    /// The scan's positions of the indexed signatures.
    pub(super) needles: Option<Arc<ScanNeedles>>,
    /// With `--free-space-only`: the clusters the file systems allocate
    /// (no fragment of a file carved from free space is taken from them).
    pub(super) allocated: Option<Arc<AllocBits>>,
}

/// What a carving's searches share ([`SearchMemory::sharing`]): the
/// validation stage's JPEG verdicts, the scan's needle log, the clusters
/// the file systems allocate (`--free-space-only`).
pub type Shared = (
    Option<Arc<KnownJpegs>>,
    Option<Arc<ScanNeedles>>,
    Option<Arc<AllocBits>>,
);

/// Most JPEG heads remembered (and a quarter of the prefilter verdicts).
const MAX_HEADS: usize = 1 << 18;

impl SearchMemory {
    /// A memory sharing the validation stage's JPEG verdicts and the scan's
    /// needle log, when there are.
    pub(super) fn sharing((known, needles, allocated): Shared) -> Self {
        SearchMemory {
            known,
            needles,
            allocated,
            ..SearchMemory::default()
        }
    }

    /// True when `pos` lies in a cluster the file systems allocate and the
    /// searches are told to keep out of them ([`SearchMemory::allocated`]).
    pub(super) fn in_allocated(&self, pos: u64) -> bool {
        self.allocated.as_ref().is_some_and(|a| a.allocated(pos))
    }

    /// Remembers the validated length of the JPEG header at `start` (0: not
    /// a JPEG), while fewer than [`MAX_HEADS`] are.
    pub(super) fn note_jpeg_head(&mut self, start: u64, length: u64) {
        if self.jpeg_heads.len() < MAX_HEADS {
            self.jpeg_heads.insert(start, length);
        }
    }

    /// The JPEG prefilter's verdict of the `n` bytes at `pos` ([`SearchMemory::entropy`],
    /// shared through [`KnownJpegs`] when the memory has it).
    pub(super) fn entropy_verdict(&mut self, key: (u64, u64), f: impl FnOnce() -> bool) -> bool {
        match &self.known {
            Some(k) => k.entropy(key, f),
            None => *self.entropy.entry(key).or_insert_with(f),
        }
    }

    /// Forgets prefilter verdicts below `before` and JPEG heads that end at
    /// or before it (and the lowest of either past its bound).
    pub(super) fn prune(&mut self, before: u64) {
        while let Some((&(p, _), _)) = self.entropy.first_key_value() {
            if p >= before && self.entropy.len() < MAX_HEADS * 4 {
                break;
            }
            self.entropy.pop_first();
        }
        while let Some((&h, &len)) = self.jpeg_heads.first_key_value() {
            if h.saturating_add(len) > before && self.jpeg_heads.len() < MAX_HEADS {
                break;
            }
            self.jpeg_heads.pop_first();
        }
    }
}
