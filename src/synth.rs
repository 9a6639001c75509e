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

/// A deterministic pseudo-random sequence (xorshift64: shifts 13, 7, 17):
/// the tests' inputs and noise, without a crate. A seed of 0 stays 0.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform enough in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// `n` bytes of noise, one a step (bits 24..32).
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next_u64() >> 24) as u8).collect()
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

/// The ways [`type_shape`] lays one type's headers out in an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The type's headers back to back, nothing between them.
    BackToBack,
    /// A header of the type every 512 bytes of seeded random data.
    InNoise,
    /// A header every 512 bytes, each followed by `FF` bytes: every length,
    /// count and size field after the header claims its largest value.
    MaxLengths,
    /// A header every 512 bytes, each followed by 32-bit words `8` (both
    /// byte orders) and zero bytes: offsets that point back into the header
    /// or at the file's own start, lengths of zero.
    SelfReferencing,
}

impl Shape {
    pub const ALL: [Shape; 4] = [
        Shape::BackToBack,
        Shape::InNoise,
        Shape::MaxLengths,
        Shape::SelfReferencing,
    ];

    /// The shape's name in test and benchmark output.
    pub fn name(self) -> &'static str {
        match self {
            Shape::BackToBack => "back-to-back",
            Shape::InNoise => "in-noise",
            Shape::MaxLengths => "max-lengths",
            Shape::SelfReferencing => "self-referencing",
        }
    }

    /// The shape named `name` ([`Shape::name`]).
    pub fn from_name(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// `len` bytes of one shape of type `type_name`'s headers (each of its
/// header signatures in turn, wildcards seeded), built from the catalogue
/// alone so that every type, built-in or the examiner's, has its hostile
/// images. `None` for a type the catalogue lacks.
pub fn type_shape(
    catalogue: &Catalogue,
    type_name: &str,
    shape: Shape,
    len: usize,
    seed: u64,
) -> Option<Vec<u8>> {
    let ty = catalogue.types.iter().find(|t| t.name == type_name)?;
    let sigs: Vec<&Signature> = ty.headers.iter().collect();
    if sigs.is_empty() {
        return Some(vec![0; len]);
    }
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(len + 4096);
    let mut k = 0usize;
    while out.len() < len {
        let at = out.len();
        instance(sigs[k % sigs.len()], &mut rng, &mut out);
        k += 1;
        if shape == Shape::BackToBack {
            continue;
        }
        let end = at + 512.max(out.len() - at);
        let mut word = 0usize;
        while out.len() < end {
            out.push(match shape {
                Shape::InNoise => rng.byte(),
                Shape::MaxLengths => 0xFF,
                _ => {
                    // 00 00 00 08, 08 00 00 00, then zeros: offset 8 in
                    // either byte order, length 0.
                    let b = [0, 0, 0, 8, 8, 0, 0, 0, 0, 0, 0, 0][word % 12];
                    word += 1;
                    b
                }
            });
        }
    }
    out.truncate(len);
    Some(out)
}

/// `len` bytes of 512-byte sectors, each one chunk (box, element) of the
/// walks of the headers before it, holding a header of `type_name` (wav,
/// mp4, mkv) followed by the smallest chunks to the sector's end: every
/// header's walk runs on through every later sector (to the caps of 1 M
/// chunks or boxes and 4 M elements) unless walks are remembered across
/// candidates. `None` for another type.
pub fn tiny_walks(type_name: &str, len: usize) -> Option<Vec<u8>> {
    let be = |v: u32| v.to_be_bytes();
    let le = |v: u32| v.to_le_bytes();
    let (outer, head, tiny): (Vec<u8>, Vec<u8>, Vec<u8>) = match type_name {
        "mp4" => (
            [&be(512)[..], b"free"].concat(),
            [&be(24)[..], b"ftypisom\0\0\0\0isommp41"].concat(),
            [&be(8)[..], b"free"].concat(),
        ),
        "wav" => (
            [&b"JUNK"[..], &le(504)].concat(),
            // The RIFF's first chunk (12 bytes) evens the rest to 8s.
            [&b"RIFF"[..], &le(0xFFFF_FFF0), b"WAVEJUNK", &le(4), &[0; 4]].concat(),
            [&b"JUNK"[..], &le(0)].concat(),
        ),
        "mkv" => (
            // A Void of 509 bytes; the EBML header (DocType webm), a
            // Segment of unknown size, a 3-byte Void; then 2-byte Voids.
            vec![0xEC, 0x41, 0xFD],
            [
                &[0x1A, 0x45, 0xDF, 0xA3, 0x87, 0x42, 0x82, 0x84][..],
                b"webm",
                &[0x18, 0x53, 0x80, 0x67, 0x01],
                &[0xFF; 7],
                &[0xEC, 0x81, 0x00],
            ]
            .concat(),
            vec![0xEC, 0x80],
        ),
        _ => return None,
    };
    let mut sector = [outer, head].concat();
    while sector.len() + tiny.len() <= 512 {
        sector.extend_from_slice(&tiny);
    }
    Some(sector.iter().copied().cycle().take(len).collect())
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

    #[test]
    fn type_shapes_hold_the_type_s_headers_where_the_shape_says() {
        let cat = Catalogue::builtin();
        for t in &cat.types {
            for shape in Shape::ALL {
                let img = type_shape(&cat, &t.name, shape, 1 << 16, 9).unwrap();
                assert_eq!(img.len(), 1 << 16);
                let h = &t.headers[0];
                let first = h.offset as usize;
                assert!(h.pattern.matches_at(&img, first), "{} {shape:?}", t.name);
                if shape != Shape::BackToBack && h.offset < 512 {
                    let stride = 512 * t.headers.len();
                    assert!(h.pattern.matches_at(&img, stride + first), "{}", t.name);
                }
                if shape == Shape::MaxLengths && h.offset == 0 {
                    assert_eq!(img[511], 0xFF, "{}", t.name);
                }
            }
        }
        assert!(type_shape(&cat, "no-such-type", Shape::InNoise, 1, 1).is_none());
        // Tiny walks: a header of the type in every sector, sectors whole.
        for t in ["mp4", "wav", "mkv"] {
            let img = tiny_walks(t, 1 << 16).unwrap();
            let ty = cat.types.iter().find(|x| x.name == t).unwrap();
            let h = &ty.headers[0];
            let hits = (0..img.len())
                .filter(|&i| h.pattern.matches_at(&img, i))
                .count();
            assert_eq!(hits, 128, "{t}");
        }
        assert!(tiny_walks("pdf", 512).is_none());
    }
}
