//! Reads for the candidate prefilters: [`read_exact`] and a small block
//! cache ([`Cache`]) for their many tiny reads, of the image or of a join.

use super::runs::TwoRuns;
use crate::carve::validators::ByteReader;

/// Reads exactly `buf.len()` bytes at `off`.
pub(super) fn read_exact(r: &dyn ByteReader, off: u64, buf: &mut [u8]) -> bool {
    let mut done = 0;
    for _ in 0..4 {
        if done == buf.len() {
            break;
        }
        let Some(dst) = buf.get_mut(done..) else {
            break;
        };
        let got = r
            .read_at(off.saturating_add(done as u64), dst)
            .min(dst.len());
        if got == 0 {
            break;
        }
        done += got;
    }
    done == buf.len()
}

/// Size of a cache block.
const BLOCK: u64 = 64 * 1024;

/// Blocks kept.
const BLOCKS: usize = 64;

/// A small read cache for the many tiny reads of the candidate prefilters.
pub(super) struct Cache<'a> {
    r: &'a dyn ByteReader,
    blocks: Vec<(u64, Vec<u8>)>,
    next: usize,
    /// Reads go straight to `r` (its small reads cost no system call: a
    /// block here would only copy 64 KiB for the few bytes asked).
    direct: bool,
}

impl<'a> Cache<'a> {
    pub(super) fn new(r: &'a dyn ByteReader) -> Self {
        Cache {
            r,
            blocks: Vec::new(),
            next: 0,
            direct: r.cheap_small_reads(),
        }
    }
    pub(super) fn block(&mut self, base: u64) -> &[u8] {
        if let Some(i) = self.blocks.iter().position(|(b, _)| *b == base) {
            return &self.blocks[i].1;
        }
        // Reuse the buffer of the block it replaces (no zeroing per miss).
        let mut buf = if self.blocks.len() < BLOCKS {
            vec![0u8; BLOCK as usize]
        } else {
            let mut b = std::mem::take(&mut self.blocks[self.next].1);
            b.resize(BLOCK as usize, 0);
            b
        };
        let mut n = 0;
        while n < buf.len() {
            let got = self.r.read_at(base + n as u64, &mut buf[n..]);
            if got == 0 {
                break;
            }
            n += got;
        }
        buf.truncate(n);
        let i = if self.blocks.len() < BLOCKS {
            self.blocks.push((base, buf));
            self.blocks.len() - 1
        } else {
            let i = self.next;
            self.blocks[i] = (base, buf);
            self.next = (self.next + 1) % BLOCKS;
            i
        };
        &self.blocks[i].1
    }
    /// Reads exactly `out.len()` bytes at image offset `off`.
    pub(super) fn read(&mut self, off: u64, out: &mut [u8]) -> bool {
        if self.direct {
            return read_exact(self.r, off, out);
        }
        let mut done = 0usize;
        while done < out.len() {
            let o = off + done as u64;
            let base = o - o % BLOCK;
            let blk = self.block(base);
            let Some(src) = blk.get((o - base) as usize..) else {
                return false;
            };
            if src.is_empty() {
                return false;
            }
            let n = src.len().min(out.len() - done);
            out[done..done + n].copy_from_slice(&src[..n]);
            done += n;
        }
        true
    }
    /// Reads `out.len()` bytes at virtual offset `off` of the join `j`.
    pub(super) fn read_joined(&mut self, j: &TwoRuns, off: u64, out: &mut [u8]) -> bool {
        if off.saturating_add(out.len() as u64) > j.len {
            return false;
        }
        let mut done = 0usize;
        while done < out.len() {
            let o = off + done as u64;
            let end = j.piece_end(o).min(off + out.len() as u64);
            let n = (end - o) as usize;
            if !self.read(j.map(o), &mut out[done..done + n]) {
                return false;
            }
            done += n;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image whose small reads are said to be costly: the search's
    /// cache gathers them into blocks.
    struct Costly(Vec<u8>);
    impl ByteReader for Costly {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
            self.0.read_at(offset, buf)
        }
    }

    /// The search's cache gives the same bytes and the same answers whether
    /// it reads through blocks or straight from a reader whose small reads
    /// are cheap: across block boundaries, at the image's end and past it.
    #[test]
    fn cached_and_direct_reads_are_the_same() {
        let len = 5 * BLOCK as usize + 777;
        let img: Vec<u8> = (0..len).map(|i| (i * 31 + i / 977) as u8).collect();
        let costly = Costly(img.clone());
        let (mut blocks, mut direct) = (Cache::new(&costly), Cache::new(&img));
        assert!(!blocks.direct && direct.direct);
        let mut rng = 99u64;
        for k in 0..3000 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = match k % 3 {
                0 => (rng >> 20) % (len as u64 + 64),
                1 => (((rng >> 20) % 6) * BLOCK).saturating_sub((rng >> 50) % 16),
                _ => (len as u64).saturating_sub((rng >> 50) % 40),
            };
            let n = 1 + (rng >> 40) as usize % 24;
            let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
            let (ra, rb) = (blocks.read(off, &mut a), direct.read(off, &mut b));
            assert_eq!(ra, rb, "read of {n} at {off}");
            assert_eq!(ra, off as usize + n <= len, "read of {n} at {off}");
            if ra {
                assert_eq!(a, b);
                assert_eq!(a, img[off as usize..off as usize + n]);
            }
        }
        assert!(!blocks.blocks.is_empty() && direct.blocks.is_empty());
    }
}
