//! Table-driven Huffman decoding: [`Huff`] builds an 11-bit lookahead from a
//! DHT table (code length and symbol; for AC tables what a symbol does to the
//! coefficient index, and several symbols at once), shared by DHT content.

/// Bits of lookahead of the decoding tables ([`Huff::look`], [`Huff::fast`]).
pub(super) const LOOK_BITS: u32 = 11;

/// [`Huff::fast`]: the symbol ends a sequential block (EOB, or an EOBn that
/// a sequential decoder reads as EOB).
pub(super) const FAST_EOB: u16 = 1 << 15;
/// [`Huff::fast`]: the symbol is ZRL (sixteen zeros, no coefficient).
pub(super) const FAST_ZRL: u16 = 1 << 14;
/// [`Huff::multi`]: the last symbol ends the block.
pub(super) const MULTI_EOB: u32 = 1 << 15;

/// The next [`LOOK_BITS`] bits of a reader's accumulator, as a table index.
#[inline]
pub(super) fn ahead(acc: u64) -> usize {
    (acc >> (64 - LOOK_BITS)) as usize
}

/// [`Huff::multi`] before it is built: nothing at once.
pub(super) static NO_MULTI: [u32; 1 << LOOK_BITS] = [0; 1 << LOOK_BITS];

/// [`Huff::fast`] of a DC table: nothing in one lookup.
pub(super) static NO_FAST: [u16; 1 << LOOK_BITS] = [0; 1 << LOOK_BITS];

/// A zeroed table on the heap (not built on the stack and moved).
pub(super) fn zeroed<T: Copy + Default, const N: usize>() -> Option<Box<[T; N]>> {
    vec![T::default(); N].into_boxed_slice().try_into().ok()
}

/// A Huffman decoding table (T.81 F.2.2.3) with an 11-bit lookup.
#[derive(Clone)]
pub(super) struct Huff {
    /// By the next [`LOOK_BITS`] bits: code length << 8 | symbol; 0 when
    /// the code is longer (or there is none).
    pub(super) look: Box<[u16; 1 << LOOK_BITS]>,
    /// AC tables, by the next [`LOOK_BITS`] bits: what the code does to the
    /// coefficient index, for the one-lookup path. A coefficient of size
    /// 1..=10: code length + size (the bits to drop, extra bits included)
    /// | (run + 1) << 8; ZRL: code length | 16 << 8 | [`FAST_ZRL`]; a size-0
    /// symbol other than ZRL: code length | [`FAST_EOB`]. 0: none (longer
    /// code, no code, or a size over 10), decode the long way.
    pub(super) fast: Option<Box<[u16; 1 << LOOK_BITS]>>,
    /// Sequential AC tables, by the next [`LOOK_BITS`] bits: the symbols of
    /// [`Huff::fast`] that follow one another inside those bits, at once:
    /// bits to drop (codes and extra bits; the last one's may run past the
    /// lookahead) | their index increments << 8 | [`MULTI_EOB`] when the
    /// last ends the block | the offset of the last code << 24 (a reader
    /// holding fewer than 16 bits there would fill first). 0: none. Built
    /// by [`Huff::build_multi`] for the first scan long enough to repay it,
    /// once for every decode sharing the table ([`Huff::shared`]).
    pub(super) multi: std::sync::OnceLock<Option<Box<[u32; 1 << LOOK_BITS]>>>,
    pub(super) maxcode: [i32; 18],
    pub(super) valptr: [i32; 17],
    pub(super) mincode: [i32; 17],
    pub(super) vals: [u8; 256],
}

/// The Huffman tables built in this process, by DHT table: most pictures
/// (every camera's, every copy of one) use a few, and each decode of one
/// (the validation, the layouts, the fragment searches' proofs) parsed
/// and built its tables again. At most [`MAX_HUFFS`] (then forgotten all
/// at once): what a table decodes is a function of its DHT bytes alone.
pub(super) static HUFFS: std::sync::Mutex<
    Option<std::collections::HashMap<HuffKey, std::sync::Arc<Huff>>>,
> = std::sync::Mutex::new(None);

/// Most tables [`HUFFS`] holds (up to 16 KiB each).
pub(super) const MAX_HUFFS: usize = 256;

/// A DHT table: its class (AC), its 16 counts, its symbols.
pub(super) type HuffKey = (bool, [u8; 16], Vec<u8>);

impl Huff {
    /// [`Huff::new`] of a DHT table, built once per table ([`HUFFS`]).
    pub(super) fn shared(counts: &[u8], syms: &[u8], ac: bool) -> Option<std::sync::Arc<Huff>> {
        let key: HuffKey = (ac, counts.try_into().ok()?, syms.to_vec());
        let lock = || HUFFS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = lock().as_ref().and_then(|m| m.get(&key)) {
            return Some(h.clone());
        }
        let h = std::sync::Arc::new(Huff::new(counts, syms, ac)?);
        let mut m = lock();
        let m = m.get_or_insert_with(Default::default);
        if m.len() >= MAX_HUFFS {
            m.clear();
        }
        m.insert(key, h.clone());
        Some(h)
    }

    /// From the 16 code counts and the symbols of a DHT table (`ac`: of
    /// class AC, which the one-lookup tables are built for); `None` when
    /// the counts over-subscribe the code space.
    pub(super) fn new(counts: &[u8], syms: &[u8], ac: bool) -> Option<Huff> {
        let mut h = Huff {
            look: zeroed()?,
            fast: if ac { Some(zeroed()?) } else { None },
            multi: Default::default(),
            maxcode: [-1; 18],
            valptr: [0; 17],
            mincode: [0; 17],
            vals: [0; 256],
        };
        let n = syms.len().min(256);
        h.vals[..n].copy_from_slice(&syms[..n]);
        let (mut code, mut k) = (0i32, 0i32);
        for l in 1..=16usize {
            let cnt = i32::from(*counts.get(l - 1)?);
            h.valptr[l] = k;
            h.mincode[l] = code;
            if code + cnt > 1 << l {
                return None;
            }
            if cnt > 0 {
                if l <= LOOK_BITS as usize {
                    let shift = LOOK_BITS as usize - l;
                    for j in 0..cnt {
                        let sym = u16::from(*h.vals.get((k + j) as usize)?);
                        let first = ((code + j) << shift) as usize;
                        let (run, size) = (sym >> 4, sym & 15);
                        let fast = match (run, size) {
                            (15, 0) => l as u16 | 16 << 8 | FAST_ZRL,
                            (_, 0) => l as u16 | FAST_EOB,
                            (_, 1..=10) => (l as u16 + size) | (run + 1) << 8,
                            _ => 0,
                        };
                        let range = first..first + (1 << shift);
                        h.look.get_mut(range.clone())?.fill((l as u16) << 8 | sym);
                        if let Some(f) = h.fast.as_deref_mut() {
                            f.get_mut(range)?.fill(fast);
                        }
                    }
                }
                code += cnt;
                k += cnt;
                h.maxcode[l] = code - 1;
            }
            code <<= 1;
        }
        h.maxcode[17] = i32::MAX;
        Some(h)
    }

    /// Fills [`Huff::multi`] from [`Huff::fast`]: from each lookahead, the
    /// symbols whose codes lie wholly inside it, one after the other, up to
    /// a block's end (EOB) and at most 64 index steps.
    pub(super) fn build_multi(&self) {
        if let Some(table) = self.fast.as_deref() {
            self.multi.get_or_init(|| self.multi_from(table));
        }
    }

    pub(super) fn multi_from(
        &self,
        table: &[u16; 1 << LOOK_BITS],
    ) -> Option<Box<[u32; 1 << LOOK_BITS]>> {
        let mut multi = zeroed::<u32, { 1 << LOOK_BITS }>()?;
        let mask = (1usize << LOOK_BITS) - 1;
        for (idx, m) in multi.iter_mut().enumerate() {
            // Bits taken so far, index steps so far.
            let (mut p, mut inc) = (0u32, 0u32);
            while p < LOOK_BITS {
                let sub = (idx << p) & mask;
                let (look, fast) = (self.look[sub], table[sub]);
                let l = u32::from(look >> 8);
                if look == 0 || l > LOOK_BITS - p || fast == 0 {
                    break;
                }
                if fast & FAST_EOB != 0 {
                    *m = (p + l) | inc << 8 | MULTI_EOB | p << 24;
                    break;
                }
                let step = u32::from(fast >> 8 & 0x3F);
                if inc + step > 64 {
                    break;
                }
                let t = u32::from(fast & 0xFF);
                *m = (p + t) | (inc + step) << 8 | p << 24;
                p += t;
                inc += step;
            }
        }
        Some(multi)
    }

    /// [`Huff::multi`], once built.
    pub(super) fn multi(&self) -> Option<&[u32; 1 << LOOK_BITS]> {
        self.multi.get().and_then(Option::as_deref)
    }
}
