//! WavPack 4 and 5 (`.wv`).
//!
//! Structure (WavPack "WavPack 5 File Format" / `wavpack.h` `WavpackHeader`):
//! a file is a sequence of blocks, each a 32-byte header
//! `"wvpk" | ckSize u32 (block length - 8) | version u16 (0x402-0x410) |
//! block_index_u8 | total_samples_u8 | total_samples u32 | block_index u32 |
//! block_samples u32 | flags u32 | crc u32` (LE) and its metadata
//! sub-blocks. Multichannel audio takes several blocks per stretch of
//! samples, the first flagged `INITIAL_BLOCK` (0x800), the last
//! `FINAL_BLOCK` (0x1000). `total_samples` (40 bits; `0xFFFFFFFF` in the
//! low word: unknown) is the stream's length. Taggers append APEv2 / ID3v1.
//!
//! Checked: every block's header (version, ckSize 24 bytes to 4 MiB and
//! even, the same total where known: a writer that
//! could not seek back leaves the first block's unknown); the first block starts the stream (index 0); each
//! initial block's index is the sum of the samples before it (a block of
//! someone else's data, or one missing, breaks the sum); the blocks' samples
//! add up to the total when it is known.
//!
//! * `None`: the first block's header fails the checks or does not start a
//!   stream;
//! * `Complete`: the block walk ends (no `wvpk` follows) after a final
//!   block with every sample the header declares; length = the blocks plus
//!   the tags after them;
//! * `Partial`: the window ends inside a block (length = window), or the
//!   walk stops before the total (length = the end of the last good block).
//!
//! Reads 32 bytes per block (each at least 32 long): linear in the window.

use super::Verdict;
use super::mp3::complete_with_tags;
use super::read::Src;

/// Largest block accepted (the format's blocks are at most 1 MiB; DSD
/// and high-rate blocks a few times that).
const MAX_BLOCK: u64 = 4 << 20;
const INITIAL: u32 = 0x800;
/// Stretches of no samples accepted per file.
const MAX_EMPTY: u32 = 16;
const FINAL: u32 = 0x1000;

/// A block header: (block length, total samples (None: unknown), block
/// index, block samples, flags).
type Block = (u64, Option<u64>, u64, u64, u32);

fn header(src: &Src, at: u64) -> Result<Block, bool> {
    let Some(h) = src.bytes::<32>(at) else {
        return Err(true);
    };
    let u32at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let version = u16::from_le_bytes([h[8], h[9]]);
    let size = u64::from(u32at(4)) + 8;
    if &h[..4] != b"wvpk"
        || !(0x402..=0x410).contains(&version)
        || !(32..=MAX_BLOCK).contains(&size)
        || size % 2 != 0
    {
        return Err(false);
    }
    let total = (u32at(12) != u32::MAX).then(|| {
        (u64::from(u32at(12)) + (u64::from(h[11]) << 32)).saturating_sub(u64::from(h[11]))
    });
    let index = u64::from(u32at(16)) | u64::from(h[10]) << 32;
    Ok((size, total, index, u64::from(u32at(20)), u32at(24)))
}

pub fn validate(src: Src) -> Option<Verdict> {
    let (_, mut total, index, _, flags) = header(&src, 0).ok()?;
    if index != 0 || flags & INITIAL == 0 {
        return None;
    }
    let (mut p, mut sum, mut last_flags, mut blocks) = (0u64, 0u64, 0u32, 0u64);
    let mut empty = 0u32;
    loop {
        let (size, t, idx, samples, flags) = match header(&src, p) {
            Ok(b) => b,
            Err(true) if cut_at(&src, p) => {
                return Some(Verdict::partial(src.len(), src.cut_note()));
            }
            Err(_) => break,
        };
        if t.is_some() && total.is_some() && t != total || (flags & INITIAL != 0 && idx != sum) {
            break;
        }
        total = total.or(t);
        if flags & INITIAL != 0 {
            sum = sum.saturating_add(samples);
            // Blocks of no samples (metadata only) come one or two a
            // file; more would let every header walk the same stretch.
            empty += u32::from(samples == 0);
            if empty > MAX_EMPTY {
                break;
            }
        }
        if p + size > src.len() {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        p += size;
        last_flags = flags;
        blocks += 1;
    }
    let note = format!("{blocks} WavPack blocks, {sum} samples");
    match total {
        Some(t) if sum < t && p == src.len() => Some(Verdict::partial(p, src.cut_note())),
        Some(t) if sum != t => Some(Verdict::partial(p, format!("{note} of {t}"))),
        _ if last_flags & FINAL == 0 => {
            Some(Verdict::partial(p, format!("{note}: no final block")))
        }
        _ => Some(complete_with_tags(&src, p, note)),
    }
}

/// True when the window ends inside what may be a block header at `at`.
fn cut_at(src: &Src, at: u64) -> bool {
    let mut b = [0u8; 4];
    let n = src.read(at, &mut b);
    n > 0 && b"wvpk".starts_with(&b[..n.min(4)]) && !src.has(at, 32)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A block: `total` samples in all (None: unknown), this one from
    /// `index`, `samples` long, `flags`, `body` bytes of sub-blocks.
    pub fn block(total: Option<u32>, index: u32, samples: u32, flags: u32, body: usize) -> Vec<u8> {
        let mut b = b"wvpk".to_vec();
        b.extend_from_slice(&(24 + body as u32).to_le_bytes());
        b.extend_from_slice(&[0x10, 0x04, 0, 0]);
        b.extend_from_slice(&total.unwrap_or(u32::MAX).to_le_bytes());
        for v in [index, samples, flags, 0x1234_5678] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend((0..body).map(|i| (i * 11 + 3) as u8));
        b
    }

    /// A stereo-as-two-mono-blocks stream of `n` stretches of 100 samples.
    pub fn make(n: u32, known: bool) -> Vec<u8> {
        let total = known.then_some(100 * n);
        let mut f = Vec::new();
        for i in 0..n {
            f.extend(block(total, 100 * i, 100, 0x800, 40));
            f.extend(block(total, 100 * i, 100, 0x1000, 20));
        }
        f
    }

    pub fn seed() -> Vec<u8> {
        make(3, true)
    }

    #[test]
    fn blocks_add_up() {
        for f in [make(3, true), make(1, true)] {
            assert_complete("wavpack", &f);
            assert_prefixes("wavpack", &f);
        }
        // With no total, any whole stretch could be the last.
        assert_complete("wavpack", &make(4, false));
        // A stream that starts later: not a file's start.
        let late = block(Some(300), 100, 100, 0x1800, 8);
        assert!(run("wavpack", &late).is_none());
    }

    #[test]
    fn missing_foreign_and_hostile_blocks() {
        // A stretch missing: Partial where the sum breaks.
        let f = make(3, true);
        let stretch = f.len() / 3;
        let g = [&f[..stretch], &f[2 * stretch..]].concat();
        let v = run("wavpack", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, stretch as u64));
        // A hostile block size: never past the window.
        let mut h = make(2, true);
        h[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(run("wavpack", &h).is_none());
        let mut k = make(2, true);
        let at = k.len() - 52; // the last block (20 bytes of body)
        k[at + 4..at + 8].copy_from_slice(&(3u32 << 20).to_le_bytes());
        let v = run("wavpack", &k).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, k.len() as u64));
    }
}
