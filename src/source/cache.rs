//! A small, bounded, sharded cache of aligned blocks of a medium, least
//! recently used evicted: for readers that come back to the same bytes
//! (`carve::view`'s small reads, the decoded chunks of an E01).
//!
//! At most `shards × slots` blocks of `block` bytes; a slot's buffer is only
//! allocated when first filled. A block goes to the shard of its index, each
//! shard behind its own lock, held while one block is filled or copied. A
//! block is kept only when its fill read every byte it asked for: a failed
//! or short fill is never cached, and the caller reads the bytes another way.

use std::collections::HashMap;
use std::sync::Mutex;

/// One cached block.
struct Slot {
    /// Block index (offset / block size); meaningful only when `valid`.
    key: u64,
    /// True only after a complete fill.
    valid: bool,
    /// Last use, for eviction.
    stamp: u64,
    /// The block's bytes (the last block of a medium may be shorter).
    data: Vec<u8>,
}

/// Blocks with least-recently-used eviction, found by key.
struct Blocks {
    slots: Vec<Slot>,
    /// Valid slots by key.
    index: HashMap<u64, usize>,
    clock: u64,
    cap: usize,
}

impl Blocks {
    fn new(cap: usize) -> Self {
        Blocks {
            slots: Vec::new(),
            index: HashMap::new(),
            clock: 0,
            cap: cap.max(1),
        }
    }

    /// The bytes of block `block` (`len` bytes long), filling a slot with
    /// `fill` on a miss. `fill` gets a buffer of exactly `len` bytes and
    /// returns true only when it read all of them; otherwise nothing is
    /// cached and `None` is returned.
    fn get(&mut self, key: u64, len: usize, fill: impl FnOnce(&mut [u8]) -> bool) -> Option<&[u8]> {
        self.clock += 1;
        let now = self.clock;
        let known = self.index.get(&key).copied();
        if let Some(i) = known
            && self.slots[i].data.len() == len
        {
            let s = &mut self.slots[i];
            s.stamp = now;
            return Some(&s.data);
        }
        // (A block of the same key but another length is filled again in place.)
        let i = if let Some(i) = known {
            i
        } else if self.slots.len() < self.cap {
            self.slots.push(Slot {
                key,
                valid: false,
                stamp: now,
                data: Vec::new(),
            });
            self.slots.len() - 1
        } else {
            self.slots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| (s.valid, s.stamp))
                .map_or(0, |(i, _)| i)
        };
        let s = &mut self.slots[i];
        if s.valid {
            self.index.remove(&s.key);
        }
        // Invalid until the fill is known to be complete.
        s.valid = false;
        s.key = key;
        s.stamp = now;
        s.data.resize(len, 0);
        if !fill(&mut s.data) {
            return None;
        }
        s.valid = true;
        self.index.insert(key, i);
        Some(&s.data)
    }
}

/// Aligned blocks of one medium, sharded, each shard least recently used.
pub struct BlockCache {
    block: u64,
    shards: Box<[Mutex<Blocks>]>,
}

impl BlockCache {
    /// `shards` shards of `slots` blocks of `block` bytes each.
    pub fn new(block: usize, shards: usize, slots: usize) -> BlockCache {
        BlockCache {
            block: (block as u64).max(1),
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(Blocks::new(slots)))
                .collect(),
        }
    }

    /// The most bytes it holds.
    pub fn capacity(&self) -> u64 {
        let slots = self.shards.first().map_or(0, |s| {
            s.lock().unwrap_or_else(|p| p.into_inner()).cap as u64
        });
        self.block * slots * self.shards.len() as u64
    }

    /// Holds at most about `bytes` from now on (at least one block a shard).
    pub fn set_capacity(&self, bytes: u64) {
        let slots = (bytes / self.block / self.shards.len() as u64).max(1) as usize;
        for shard in self.shards.iter() {
            let mut blocks = shard.lock().unwrap_or_else(|p| p.into_inner());
            blocks.cap = slots;
            if blocks.slots.len() > slots {
                blocks.slots.truncate(slots);
                blocks.index.retain(|_, i| *i < slots);
            }
        }
    }

    /// Copies `buf.len()` bytes at `offset` (all inside a medium of `len`
    /// bytes) out of cached blocks, filling a missing block with
    /// `fill(block start, block bytes)`, which returns true only when it read
    /// all of them; false when a block could not be read whole.
    pub fn read(
        &self,
        offset: u64,
        buf: &mut [u8],
        len: u64,
        fill: &dyn Fn(u64, &mut [u8]) -> bool,
    ) -> bool {
        let bs = self.block;
        let mut done = 0usize;
        while done < buf.len() {
            let pos = offset + done as u64;
            let block = pos / bs;
            let start = block * bs;
            let block_len = (len.saturating_sub(start)).min(bs) as usize;
            let Some(shard) = self.shards.get((block % self.shards.len() as u64) as usize) else {
                return false;
            };
            let mut blocks = shard.lock().unwrap_or_else(|p| p.into_inner());
            let Some(data) = blocks.get(block, block_len, |dst| fill(start, dst)) else {
                return false;
            };
            let Some(src) = data.get((pos - start) as usize..) else {
                return false;
            };
            if src.is_empty() {
                return false;
            }
            let k = src.len().min(buf.len() - done);
            buf[done..done + k].copy_from_slice(&src[..k]);
            done += k;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Reads through a cache whose size changes between them give the
    /// medium's bytes; a block is filled again only once evicted, and a
    /// failed fill is never kept.
    #[test]
    fn reads_equal_the_medium_whatever_the_capacity() {
        let medium: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let len = medium.len() as u64;
        let fills = Cell::new(0u32);
        let fill = |start: u64, dst: &mut [u8]| {
            fills.set(fills.get() + 1);
            dst.copy_from_slice(&medium[start as usize..start as usize + dst.len()]);
            true
        };
        let cache = BlockCache::new(100, 4, 2);
        assert_eq!(cache.capacity(), 800);
        let mut rng = crate::synth::XorShift(1);
        for round in 0..3 {
            match round {
                1 => cache.set_capacity(4_000),
                2 => cache.set_capacity(100),
                _ => {}
            }
            for _ in 0..500 {
                let x = rng.next_u64();
                let offset = x % len;
                let n = ((x >> 20) % 350).min(len - offset) as usize;
                let mut buf = vec![0u8; n];
                assert!(cache.read(offset, &mut buf, len, &fill));
                assert_eq!(buf, medium[offset as usize..offset as usize + n]);
            }
        }
        assert_eq!(cache.capacity(), 400, "one block a shard at least");
        // A block kept is not filled again.
        let mut one = [0u8; 10];
        assert!(cache.read(5_000, &mut one, len, &fill));
        let before = fills.get();
        assert!(cache.read(5_003, &mut one, len, &fill));
        assert_eq!(fills.get(), before);
        // A failed fill: false, and nothing kept.
        let fail = |_: u64, _: &mut [u8]| false;
        assert!(!cache.read(9_000, &mut one, len, &fail));
        assert!(cache.read(9_000, &mut one, len, &fill));
        assert_eq!(one[..], medium[9_000..9_010]);
    }
}
