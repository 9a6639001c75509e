//! Shared bench data: a deterministic "used disk" mix, so every bench measures the same bytes.

#![allow(dead_code)]

/// xorshift64*: deterministic, fast, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `len` bytes: 64 KiB segments of random bytes (compressed media), zeros
/// (free space) and English-like text (documents, logs), in a fixed order,
/// with a few real headers planted.
pub fn disk_like(len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng::new(seed);
    let mut v = vec![0u8; len];
    let words: &[&[u8]] = &[
        b"the ", b"of ", b"file ", b"data ", b"system ", b"and ", b"report ", b"image ", b"\n",
    ];
    for (i, seg) in v.chunks_mut(64 << 10).enumerate() {
        match i % 4 {
            0 | 1 => {
                for c in seg.chunks_mut(8) {
                    let x = r.next().to_le_bytes();
                    c.copy_from_slice(&x[..c.len()]);
                }
            }
            2 => {
                let mut k = 0;
                while k < seg.len() {
                    let w = words[(r.next() % words.len() as u64) as usize];
                    let n = w.len().min(seg.len() - k);
                    seg[k..k + n].copy_from_slice(&w[..n]);
                    k += n;
                }
            }
            _ => {}
        }
        if seg.len() > 16 && i % 16 == 5 {
            seg[..4].copy_from_slice(b"\xff\xd8\xff\xe0");
        }
    }
    v
}
