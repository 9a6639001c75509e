//! Synthetic hostile images for benchmarks and tests.
//!
//! [`dense_headers`] builds the worst case for a carver's running time: every
//! header (and footer) signature of a catalogue, back to back, over and over,
//! with wildcard bytes filled from a seeded generator. Real disks hold regions
//! like it (thumbnail caches, swap, memory pages, logs); a carver whose work is
//! not bounded by the evidence goes quadratic on them.

use crate::catalogue::{Catalogue, Signature};
use crate::pattern::ByteClass;

/// A small deterministic generator (SplitMix64): reproducible images and
/// test mutations without a crate.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn byte(&mut self) -> u8 {
        (self.next_u64() >> 56) as u8
    }
    /// In `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// The bytes of one signature at its offset: filler before it, wildcards random.
fn instance(sig: &Signature, rng: &mut SplitMix, out: &mut Vec<u8>) {
    for _ in 0..sig.offset.min(4096) {
        out.push(rng.byte());
    }
    for c in sig.pattern.classes() {
        out.push(match *c {
            ByteClass::Exact(b) => b,
            ByteClass::Either(a, b) => {
                if rng.next_u64() & 1 == 0 {
                    a
                } else {
                    b
                }
            }
            ByteClass::Any => rng.byte(),
        });
    }
}

/// `len` bytes of back-to-back signatures of every type in `catalogue`
/// (headers, and each type's footers after its header), in catalogue order,
/// repeated until the image is full.
pub fn dense_headers(catalogue: &Catalogue, len: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix(seed);
    let mut unit = Vec::new();
    for t in &catalogue.types {
        for h in &t.headers {
            instance(h, &mut rng, &mut unit);
            for f in &t.footers {
                instance(f, &mut rng, &mut unit);
            }
        }
    }
    if unit.is_empty() {
        return vec![0; len];
    }
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let n = unit.len().min(len - out.len());
        out.extend_from_slice(&unit[..n]);
    }
    out
}

/// `len` bytes where every `stride` bytes a header of the catalogue (in turn)
/// interrupts seeded random data: headers in noise, the other dense shape.
pub fn headers_in_noise(catalogue: &Catalogue, len: usize, stride: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix(seed);
    let sigs: Vec<&Signature> = catalogue.types.iter().flat_map(|t| &t.headers).collect();
    let mut out = Vec::with_capacity(len);
    let mut k = 0usize;
    while out.len() < len {
        let at = out.len();
        if let Some(sig) = sigs.get(k % sigs.len().max(1)) {
            instance(sig, &mut rng, &mut out);
            k += 1;
        }
        while out.len() < at + stride.max(1) {
            out.push(rng.byte());
        }
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_image_holds_every_header_and_is_reproducible() {
        let cat = Catalogue::builtin();
        let a = dense_headers(&cat, 1 << 20, 1);
        assert_eq!(a.len(), 1 << 20);
        assert_eq!(a, dense_headers(&cat, 1 << 20, 1));
        for t in &cat.types {
            for h in &t.headers {
                let found =
                    (0..a.len()).any(|i| i >= h.offset as usize && h.pattern.matches_at(&a, i));
                assert!(found, "{} header {} missing", t.name, h.text);
            }
        }
        let b = headers_in_noise(&cat, 1 << 16, 512, 2);
        assert_eq!(b.len(), 1 << 16);
        assert!(
            b.starts_with(&[0xFF, 0xD8, 0xFF]),
            "first header is the first type's"
        );
    }
}
