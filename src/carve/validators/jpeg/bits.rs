//! The bit reader over entropy-coded data: byte stuffing (`FF 00`), markers
//! ending the scan, and reading the image in growing pieces ([`Bits`]).

use super::huffman::{Huff, LOOK_BITS, ahead};

use crate::carve::validators::read::Src;

/// Why entropy decoding stopped.
pub(super) enum ScanErr {
    /// The window ended.
    Cut,
    /// Invalid data; the note.
    Bad(&'static str),
}

/// First piece of entropy-coded data read at once; pieces double up to
/// [`MAX_PIECE`].
pub(super) const FIRST_PIECE: usize = 64 * 1024;

/// First piece read by a decode resumed from a [`Snap`].
pub(super) const RESUME_PIECE: usize = 4096;

/// Largest piece of entropy-coded data read at once (the buffer never grows
/// past this plus a few bytes).
pub(super) const MAX_PIECE: usize = 512 * 1024;

/// The range of the window that an entropy buffer holds.
#[derive(Clone, Copy, Default)]
pub(super) struct Buffered {
    pub(super) off: u64,
    pub(super) len: usize,
    pub(super) piece: usize,
}

/// Bits of entropy-coded data (stuffing removed), stopping at a marker: past
/// a marker (or the window's end) only padding is supplied, and consuming it
/// is an error.
///
/// The data is read from the window in large pieces into `buf` (reused
/// across scans, at most [`MAX_PIECE`] + 8 bytes). `acc` holds `n` bits,
/// MSB first, of which the last `pad` are padding; [`Bits::fill`] tops it up
/// to more than 56 bits a whole byte at a time (eight at once when none of
/// them is `FF`), so the state after every call is the same as a byte-by-byte
/// reader's.
pub(super) struct Bits<'s, 'b> {
    pub(super) src: Src<'s>,
    pub(super) buf: &'b mut Vec<u8>,
    /// Window offset of `buf[0]`.
    pub(super) off: u64,
    /// Next unread byte in `buf`.
    pub(super) i: usize,
    /// Valid bytes in `buf`.
    pub(super) len: usize,
    /// Size of the next read.
    pub(super) piece: usize,
    pub(super) acc: u64,
    pub(super) n: u32,
    pub(super) pad: u32,
    pub(super) marker: bool,
    pub(super) cut: bool,
}

impl<'s, 'b> Bits<'s, 'b> {
    /// A reader at `at`, reusing what `keep` (the buffered range left by
    /// the previous scan's reader) holds.
    pub(super) fn new(src: Src<'s>, at: u64, buf: &'b mut Vec<u8>, keep: Buffered) -> Self {
        let (off, i, len, piece) = match at.checked_sub(keep.off) {
            Some(d) if d <= keep.len as u64 => (keep.off, d as usize, keep.len, keep.piece),
            _ => (at, 0, 0, FIRST_PIECE),
        };
        Bits {
            src,
            buf,
            off,
            i,
            len,
            piece,
            acc: 0,
            n: 0,
            pad: 0,
            marker: false,
            cut: false,
        }
    }

    /// Moves the reader to window offset `at` with the state of `m`, a
    /// mark of a decode of the same bytes there (as a reader made there by
    /// [`Bits::new`] with what this one buffers, then given the mark).
    pub(super) fn reposition(&mut self, at: u64, m: &Mark) {
        let keep = self.buffered();
        (self.off, self.i, self.len, self.piece) = match at.checked_sub(keep.off) {
            Some(d) if d <= keep.len as u64 => (keep.off, d as usize, keep.len, keep.piece),
            _ => (at, 0, 0, FIRST_PIECE),
        };
        (self.acc, self.n, self.pad) = (m.acc, m.n, m.pad);
        (self.marker, self.cut) = (false, false);
    }

    /// What the buffer holds, for the next scan's reader.
    pub(super) fn buffered(&self) -> Buffered {
        Buffered {
            off: self.off,
            len: self.len,
            piece: self.piece,
        }
    }

    /// Window offset of the next unread byte.
    pub(super) fn at(&self) -> u64 {
        self.off + self.i as u64
    }

    /// Reads the next piece after the buffered bytes, keeping the unread
    /// bytes and the one before them (so that [`Bits::back`] always works).
    pub(super) fn refill(&mut self) {
        let keep = self.i.saturating_sub(1).min(self.len);
        self.buf.copy_within(keep..self.len, 0);
        self.off += keep as u64;
        self.i -= keep;
        self.len -= keep;
        // No more than the window holds (no zeroed space that is never read).
        let left = self.src.len().saturating_sub(self.off + self.len as u64);
        let want = self.len + self.piece.min(usize::try_from(left).unwrap_or(usize::MAX));
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let Some(dst) = self.buf.get_mut(self.len..want) else {
            return;
        };
        let got = self.src.read(self.off + self.len as u64, dst);
        self.len += got.min(want - self.len);
        self.piece = (self.piece * 2).min(MAX_PIECE);
    }

    /// Next byte, `None` at the window's end.
    pub(super) fn next(&mut self) -> Option<u8> {
        if self.i >= self.len {
            self.refill();
        }
        let b = if self.i < self.len {
            self.buf.get(self.i).copied()
        } else {
            None
        };
        if b.is_some() {
            self.i += 1;
        }
        b
    }

    /// Next byte without advancing.
    pub(super) fn peek(&mut self) -> Option<u8> {
        if self.i >= self.len {
            self.refill();
        }
        if self.i < self.len {
            self.buf.get(self.i).copied()
        } else {
            None
        }
    }

    /// Steps back over the byte [`Bits::next`] just returned.
    pub(super) fn back(&mut self) {
        self.i = self.i.saturating_sub(1);
    }

    /// Tops the accumulator up: the common case (eight bytes buffered,
    /// none of them `FF`) inline, the rest in [`Bits::fill_slow`].
    #[inline(always)]
    pub(super) fn fill(&mut self) {
        if self.n <= 56 && !self.marker && !self.cut && self.fill_eight() {
            return;
        }
        self.fill_slow();
    }

    /// Takes the whole bytes that fit from the next eight buffered ones, at
    /// once, when none of them is `FF`; false (nothing taken) otherwise.
    #[inline(always)]
    pub(super) fn fill_eight(&mut self) -> bool {
        let Some(w) = self
            .buf
            .get(self.i..self.i + 8)
            .filter(|_| self.i + 8 <= self.len)
        else {
            return false;
        };
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        let w = u64::from_be_bytes(a);
        // Whole bytes that fit: the byte-by-byte loop of `fill_slow` stops
        // once more than 56 bits are held.
        let cnt = (56 - self.n) / 8 + 1;
        let bits = 8 * cnt;
        let top = w >> (64 - bits) << (64 - bits);
        // Any FF among those bytes (a zero byte of !top; the bytes not
        // taken are FF there, so never zero)?
        let x = !top;
        let ff = x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080;
        if ff != 0 {
            return false;
        }
        self.acc |= top >> self.n;
        self.n += bits;
        self.i += cnt as usize;
        true
    }

    #[inline(never)]
    pub(super) fn fill_slow(&mut self) {
        if self.n <= 56 && !self.marker && !self.cut {
            if self.len - self.i < 8 {
                self.refill();
            }
            if self.fill_eight() {
                return;
            }
        }
        while self.n <= 56 {
            if self.marker || self.cut {
                self.n += 8;
                self.pad += 8;
                continue;
            }
            match self.next() {
                None => self.cut = true,
                Some(0xFF) => match self.peek() {
                    Some(0x00) => {
                        self.i += 1;
                        self.push(0xFF);
                    }
                    other => {
                        // A marker (or the window ends after FF): stop before the FF.
                        if other.is_some() {
                            self.marker = true;
                        } else {
                            self.cut = true;
                        }
                        self.back();
                    }
                },
                Some(b) => self.push(b),
            }
        }
    }

    pub(super) fn push(&mut self, b: u8) {
        self.acc |= u64::from(b) << (56 - self.n);
        self.n += 8;
    }

    pub(super) fn real(&self) -> u32 {
        self.n - self.pad
    }

    /// Approximate offset of the next unread bit's byte.
    pub(super) fn pos(&self) -> u64 {
        self.at().saturating_sub(u64::from(self.real() / 8))
    }

    #[inline]
    pub(super) fn consume(&mut self, k: u32) -> Result<(), ScanErr> {
        if k > self.real() {
            return Err(if self.cut {
                ScanErr::Cut
            } else {
                ScanErr::Bad("entropy-coded data runs into a marker")
            });
        }
        self.acc = if k >= 64 { 0 } else { self.acc << k };
        self.n -= k;
        Ok(())
    }

    /// `k ≤ 16` raw bits.
    #[inline]
    pub(super) fn bits(&mut self, k: u32) -> Result<u32, ScanErr> {
        if k == 0 {
            return Ok(0);
        }
        if self.n < k {
            self.fill();
        }
        let v = (self.acc >> (64 - k)) as u32;
        self.consume(k)?;
        Ok(v)
    }

    /// Skips `k ≤ 16` raw bits (the value is not needed).
    #[inline]
    pub(super) fn skip(&mut self, k: u32) -> Result<(), ScanErr> {
        if k == 0 {
            return Ok(());
        }
        if self.n < k {
            self.fill();
        }
        self.consume(k)
    }

    /// Skips `c` single bits, the same as `c` calls of [`Bits::skip`]`(1)`
    /// (at once when they are held: no fill falls between them then).
    #[inline]
    pub(super) fn skip_bits(&mut self, c: u32) -> Result<(), ScanErr> {
        if c <= self.real() {
            self.acc = if c >= 64 { 0 } else { self.acc << c };
            self.n -= c;
            return Ok(());
        }
        for _ in 0..c {
            self.skip(1)?;
        }
        Ok(())
    }

    /// A DC difference category and its extra bits (the value is not
    /// needed), at most `max_dc` of them: the same as [`Bits::decode`] then
    /// [`Bits::skip`], in one step when the table has the code, no fill
    /// falls between the two and the real bits suffice.
    #[inline(always)]
    pub(super) fn dc(&mut self, h: &Huff, max_dc: u8) -> Result<(), ScanErr> {
        if self.n < 16 {
            self.fill();
        }
        let e = h.look[ahead(self.acc)];
        let (l, size) = (u32::from(e >> 8), u32::from(e & 0xFF));
        if e != 0 && size <= u32::from(max_dc) && l + size + self.pad <= self.n {
            // l + size ≤ 11 + 15 bits.
            self.acc <<= l + size;
            self.n -= l + size;
            return Ok(());
        }
        // No fill here: at least 16 bits are held.
        let n = self.decode(h)?;
        if n > max_dc {
            return Err(ScanErr::Bad("DC difference too large"));
        }
        self.skip(u32::from(n))
    }

    #[inline]
    pub(super) fn decode(&mut self, h: &Huff) -> Result<u8, ScanErr> {
        if self.n < 16 {
            self.fill();
        }
        let e = h.look[ahead(self.acc)];
        if e != 0 {
            self.consume(u32::from(e >> 8))?;
            return Ok(e as u8);
        }
        self.decode_slow(h)
    }

    /// Codes longer than the lookup table's [`LOOK_BITS`].
    #[cold]
    pub(super) fn decode_slow(&mut self, h: &Huff) -> Result<u8, ScanErr> {
        for l in LOOK_BITS as usize + 1..=16 {
            let code = (self.acc >> (64 - l)) as i32;
            if code <= h.maxcode[l] {
                self.consume(l as u32)?;
                let i = h.valptr[l] + code - h.mincode[l];
                return h
                    .vals
                    .get(i as usize)
                    .copied()
                    .ok_or(ScanErr::Bad("bad Huffman table"));
            }
        }
        Err(if self.real() < 16 && self.cut {
            ScanErr::Cut
        } else {
            ScanErr::Bad("invalid Huffman code")
        })
    }

    /// After the last MCU of an interval or scan: drops the padding bits,
    /// requires the next thing in the stream to be a marker (at most
    /// `tolerance` data bytes before it) and returns its code and the offset
    /// of its first `FF`, leaving the reader after the code.
    pub(super) fn finish(&mut self, tolerance: u32) -> Result<(u8, u64), ScanErr> {
        let mut extra = self.real() / 8;
        self.acc = 0;
        self.n = 0;
        self.pad = 0;
        if !self.marker {
            if self.cut {
                return Err(ScanErr::Cut);
            }
            loop {
                if extra > tolerance {
                    return Err(ScanErr::Bad("data after the last MCU"));
                }
                match self.next() {
                    None => return Err(ScanErr::Cut),
                    Some(0xFF) => match self.peek() {
                        Some(0x00) => {
                            self.i += 1;
                            extra += 1;
                        }
                        Some(_) => {
                            self.back();
                            break;
                        }
                        None => return Err(ScanErr::Cut),
                    },
                    Some(_) => extra += 1,
                }
            }
        }
        if extra > tolerance {
            return Err(ScanErr::Bad("data after the last MCU"));
        }
        self.marker = false;
        let at = self.at();
        for _ in 0..4096 {
            match self.next() {
                Some(0xFF) => continue,
                Some(m) => return Ok((m, at)),
                None => return Err(ScanErr::Cut),
            }
        }
        Err(ScanErr::Bad("run of fill bytes"))
    }
}

/// The decoder's state at an MCU boundary: a [`Snap`] without its split,
/// scan ends and history (what a [`Trail`] keeps of every boundary).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Mark {
    /// The scan (1-based count) it was taken in.
    pub(super) scan: u32,
    pub(super) mcu: u64,
    pub(super) eobrun: u32,
    pub(super) rst: u8,
    pub(super) good: u64,
    pub(super) acc: u64,
    pub(super) n: u32,
    pub(super) pad: u32,
    pub(super) at: u64,
    pub(super) budget: u64,
}

/// Blocks decoded at most per candidate, over all scans.
pub const MAX_BLOCKS: u64 = 1 << 28;
