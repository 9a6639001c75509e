//! FLAC: metadata blocks, then audio frames parsed to their exact ends.
//!
//! Structure (RFC 9639 §8–§9): `fLaC`; metadata blocks `last flag + type (1
//! byte) | length (u24 BE) | data`, the first being STREAMINFO (34 bytes:
//! block sizes, frame sizes, sample rate, channels, bits per sample, total
//! samples, MD5); then frames: a header (sync `FFF8`/`FFF9`, block size,
//! sample rate, channel assignment, sample size, UTF-8-style coded frame or
//! sample number, optional block size / rate bytes, CRC-8), one subframe per
//! channel (CONSTANT, VERBATIM, FIXED or LPC with Rice-coded residual), zero
//! padding to a byte, and a CRC-16 of the whole frame.
//!
//! Frames do not record their length, so each frame's subframes are parsed
//! bit by bit (no samples are decoded) to find where it ends; the CRC-16 then
//! confirms it. The walk continues while the next bytes are a valid frame
//! with the next frame/sample number, until STREAMINFO's total sample count
//! is reached (when known).
//!
//! Checked: STREAMINFO first and sane (block sizes ≥ 16, rate > 0, 4..32
//! bits), block types (127 invalid), frame header fields and CRC-8, the
//! header agreeing with STREAMINFO (rate, channels, bits, max block size),
//! subframe types, residual partitions, CRC-16.
//!
//! * `None`: no `fLaC` + valid STREAMINFO.
//! * `Complete`: the frames run from the metadata to the total sample count
//!   (or, when that is unknown, to where no further frame follows);
//!   length = end of the last frame.
//! * `Partial`: the window ends inside (length = window); a damaged block or
//!   frame, or fewer samples than STREAMINFO says (length = end of the last
//!   good frame/block).
//!
//! Not handled: an ID3v2 tag before `fLaC` (the candidate is `fLaC` itself).

use super::Verdict;
use super::read::{Cursor, Src};

/// Metadata blocks walked at most.
const MAX_BLOCKS: u32 = 100_000;
/// Frames walked at most.
const MAX_FRAMES: u32 = 50_000_000;
/// Longest Rice quotient accepted (longer means garbage).
const MAX_UNARY: u32 = 1 << 24;

#[derive(Clone, Copy)]
struct Info {
    max_block: u32,
    rate: u32,
    channels: u32,
    bps: u32,
    total: u64,
}

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"fLaC") {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    let Some(si) = src.bytes::<38>(4) else {
        return cut();
    };
    if si[0] & 0x7F != 0 || si[1..4] != [0, 0, 34] {
        return None;
    }
    let s = &si[4..];
    let min_block = u32::from(u16::from_be_bytes([s[0], s[1]]));
    let max_block = u32::from(u16::from_be_bytes([s[2], s[3]]));
    let packed = u64::from_be_bytes([s[10], s[11], s[12], s[13], s[14], s[15], s[16], s[17]]);
    let rate = (packed >> 44) as u32;
    let channels = ((packed >> 41) & 7) as u32 + 1;
    let bps = ((packed >> 36) & 31) as u32 + 1;
    let total = packed & 0xF_FFFF_FFFF;
    if min_block < 16 || max_block < min_block || rate == 0 || rate > 655_350 || bps < 4 {
        return None;
    }
    let info = Info {
        max_block,
        rate,
        channels,
        bps,
        total,
    };
    // Metadata blocks.
    let mut pos = 4u64;
    let mut last = false;
    let mut blocks = 0u32;
    while !last && blocks < MAX_BLOCKS {
        let Some(h) = src.bytes::<4>(pos) else {
            return cut();
        };
        last = h[0] & 0x80 != 0;
        let ty = h[0] & 0x7F;
        if ty == 127 || (blocks > 0 && ty == 0) {
            return Some(Verdict::partial(
                pos,
                format!("invalid metadata block type {ty} at {pos}"),
            ));
        }
        let len = u64::from(u32::from_be_bytes([0, h[1], h[2], h[3]]));
        pos += 4 + len;
        if pos > src.len() {
            return cut();
        }
        blocks += 1;
    }
    if !last {
        return Some(Verdict::partial(pos, "too many metadata blocks"));
    }
    // Frames.
    let mut frames = 0u32;
    let mut samples = 0u64;
    let mut c = Cursor::new(src, pos);
    let mut scratch = Vec::new();
    while frames < MAX_FRAMES {
        if info.total != 0 && samples >= info.total {
            break;
        }
        match frame(&mut c, pos, &info, (frames, samples), &mut scratch) {
            Ok((end, bs)) => {
                pos = end;
                samples += u64::from(bs);
                frames += 1;
            }
            Err(FrameErr::Cut) => return cut(),
            Err(FrameErr::Invalid) => break,
        }
    }
    let note = format!("{frames} frames, {samples} samples");
    if frames == 0 {
        return Some(Verdict::partial(pos, "no audio frame after the metadata"));
    }
    if info.total != 0 && samples != info.total {
        return Some(
            Verdict::partial(pos, format!("{samples} of {} samples", info.total)).with_note(note),
        );
    }
    Some(Verdict::complete(pos).with_note(note))
}

enum FrameErr {
    Cut,
    Invalid,
}

/// A bit reader over a cursor (MSB first).
struct Bits<'c, 'a> {
    c: &'c mut Cursor<'a>,
    acc: u64,
    n: u32,
}

impl Bits<'_, '_> {
    fn refill(&mut self) {
        while self.n <= 56 {
            match self.c.u8() {
                Some(b) => {
                    self.acc |= u64::from(b) << (56 - self.n);
                    self.n += 8;
                }
                None => break,
            }
        }
    }

    fn consume(&mut self, k: u32) {
        self.acc = if k >= 64 { 0 } else { self.acc << k };
        self.n -= k;
    }

    /// Reads `k ≤ 32` bits.
    fn read(&mut self, k: u32) -> Result<u32, FrameErr> {
        if k == 0 {
            return Ok(0);
        }
        if self.n < k {
            self.refill();
            if self.n < k {
                return Err(FrameErr::Cut);
            }
        }
        let v = (self.acc >> (64 - k)) as u32;
        self.consume(k);
        Ok(v)
    }

    /// Skips `k` bits (any size).
    fn skip(&mut self, mut k: u64) -> Result<(), FrameErr> {
        let buffered = u64::from(self.n).min(k);
        self.consume(buffered as u32);
        k -= buffered;
        if k >= 8 {
            if !self.c.skip(k / 8) {
                return Err(FrameErr::Cut);
            }
            k %= 8;
        }
        self.read(k as u32).map(|_| ())
    }

    /// Counts zero bits up to and including the next one bit.
    fn unary(&mut self) -> Result<u32, FrameErr> {
        let mut count = 0u32;
        loop {
            if self.n == 0 {
                self.refill();
                if self.n == 0 {
                    return Err(FrameErr::Cut);
                }
            }
            let lz = self.acc.leading_zeros();
            if lz < self.n {
                self.consume(lz + 1);
                return Ok(count + lz);
            }
            count += self.n;
            self.consume(self.n);
            if count > MAX_UNARY {
                return Err(FrameErr::Invalid);
            }
        }
    }

    /// Drops bits up to the next byte boundary; returns the byte offset.
    fn align(&mut self) -> u64 {
        let r = self.n % 8;
        self.consume(r);
        self.c.pos() - u64::from(self.n / 8)
    }
}

fn crc8(data: &[u8]) -> u8 {
    let mut c = 0u8;
    for &b in data {
        c ^= b;
        for _ in 0..8 {
            c = if c & 0x80 != 0 {
                (c << 1) ^ 0x07
            } else {
                c << 1
            };
        }
    }
    c
}

const fn crc16_table() -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = (i as u16) << 8;
        let mut k = 0;
        while k < 8 {
            r = if r & 0x8000 != 0 {
                (r << 1) ^ 0x8005
            } else {
                r << 1
            };
            k += 1;
        }
        t[i] = r;
        i += 1;
    }
    t
}

static CRC16: [u16; 256] = crc16_table();

fn crc16(mut c: u16, data: &[u8]) -> u16 {
    for &b in data {
        c = (c << 8) ^ CRC16[usize::from((c >> 8) as u8 ^ b)];
    }
    c
}

/// Parses the frame at `pos`; returns its end and block size. `expect`:
/// (frame index, samples so far), one of which the header's coded number
/// must equal (fixed / variable block size).
fn frame(
    c: &mut Cursor,
    pos: u64,
    info: &Info,
    expect: (u32, u64),
    scratch: &mut Vec<u8>,
) -> Result<(u64, u32), FrameErr> {
    let src = c.src();
    // Header: up to 16 bytes.
    let mut h = [0u8; 16];
    let n = src.read(pos, &mut h);
    if n < 4 {
        // Nothing left is the end of the chain; a partial sync is a cut frame.
        return if n > 0 && h[0] == 0xFF {
            Err(FrameErr::Cut)
        } else {
            Err(FrameErr::Invalid)
        };
    }
    if h[0] != 0xFF || h[1] & 0xFE != 0xF8 {
        return Err(FrameErr::Invalid);
    }
    let variable = h[1] & 1 != 0;
    let bs_code = h[2] >> 4;
    let sr_code = h[2] & 0xF;
    let ch = h[3] >> 4;
    let ss = (h[3] >> 1) & 7;
    if bs_code == 0 || sr_code == 15 || ch > 10 || ss == 3 || h[3] & 1 != 0 {
        return Err(FrameErr::Invalid);
    }
    // Coded number.
    let lead = h[4].leading_ones() as usize;
    let extra = match lead {
        0 => 0,
        2..=7 => lead - 1,
        _ => return Err(FrameErr::Invalid),
    };
    let mut number = if lead == 0 {
        u64::from(h[4])
    } else {
        u64::from(h[4] & (0x7F >> lead))
    };
    let mut i = 5;
    for _ in 0..extra {
        let b = *h.get(i).ok_or(FrameErr::Cut)?;
        if b & 0xC0 != 0x80 {
            return Err(FrameErr::Invalid);
        }
        number = number << 6 | u64::from(b & 0x3F);
        i += 1;
    }
    let mut get = |k: usize| -> Result<u32, FrameErr> {
        let mut v = 0u32;
        for _ in 0..k {
            v = v << 8 | u32::from(*h.get(i).ok_or(FrameErr::Cut)?);
            i += 1;
        }
        Ok(v)
    };
    let bs = match bs_code {
        1 => 192,
        2..=5 => 576 << (bs_code - 2),
        6 => get(1)? + 1,
        7 => get(2)? + 1,
        _ => 256 << (bs_code - 8),
    };
    let rate = match sr_code {
        0 => info.rate,
        1 => 88200,
        2 => 176_400,
        3 => 192_000,
        4 => 8000,
        5 => 16000,
        6 => 22050,
        7 => 24000,
        8 => 32000,
        9 => 44100,
        10 => 48000,
        11 => 96000,
        12 => get(1)? * 1000,
        13 => get(2)?,
        _ => get(2)? * 10,
    };
    let bps = match ss {
        0 => info.bps,
        1 => 8,
        2 => 12,
        4 => 16,
        5 => 20,
        6 => 24,
        _ => 32,
    };
    let channels = if ch <= 7 { u32::from(ch) + 1 } else { 2 };
    if rate != info.rate
        || bps != info.bps
        || channels != info.channels
        || bs > info.max_block.max(16)
    {
        return Err(FrameErr::Invalid);
    }
    if n < i + 1 {
        return Err(FrameErr::Cut);
    }
    if crc8(&h[..i]) != h[i] {
        return Err(FrameErr::Invalid);
    }
    let want = if variable {
        expect.1
    } else {
        u64::from(expect.0)
    };
    if number != want {
        return Err(FrameErr::Invalid);
    }
    // Subframes.
    c.seek(pos + i as u64 + 1);
    let mut b = Bits { c, acc: 0, n: 0 };
    for chan in 0..channels {
        let side = matches!((ch, chan), (8, 1) | (9, 0) | (10, 1));
        subframe(&mut b, bs, bps + u32::from(side))?;
    }
    let crc_at = b.align();
    let end = crc_at + 2;
    if end > src.len() {
        return Err(FrameErr::Cut);
    }
    let mut crc = 0u16;
    src.for_each_chunk(pos, end - pos, scratch, |d| crc = crc16(crc, d));
    if crc != 0 {
        return Err(FrameErr::Invalid);
    }
    Ok((end, bs))
}

fn subframe(b: &mut Bits, bs: u32, bps: u32) -> Result<(), FrameErr> {
    let hdr = b.read(8)?;
    if hdr & 0x80 != 0 {
        return Err(FrameErr::Invalid);
    }
    let ty = (hdr >> 1) & 0x3F;
    let wasted = if hdr & 1 != 0 { b.unary()? + 1 } else { 0 };
    if wasted >= bps {
        return Err(FrameErr::Invalid);
    }
    let bps = bps - wasted;
    match ty {
        0 => b.skip(u64::from(bps)),
        1 => b.skip(u64::from(bps) * u64::from(bs)),
        8..=12 => {
            let order = ty - 8;
            b.skip(u64::from(order * bps))?;
            residual(b, bs, order)
        }
        32..=63 => {
            let order = ty - 31;
            b.skip(u64::from(order * bps))?;
            let precision = b.read(4)?;
            if precision == 15 {
                return Err(FrameErr::Invalid);
            }
            b.read(5)?;
            b.skip(u64::from(order * (precision + 1)))?;
            residual(b, bs, order)
        }
        _ => Err(FrameErr::Invalid),
    }
}

fn residual(b: &mut Bits, bs: u32, order: u32) -> Result<(), FrameErr> {
    let method = b.read(2)?;
    let (pbits, escape) = match method {
        0 => (4, 15),
        1 => (5, 31),
        _ => return Err(FrameErr::Invalid),
    };
    let porder = b.read(4)?;
    let parts = 1u32 << porder;
    if !bs.is_multiple_of(parts) || bs / parts < order {
        return Err(FrameErr::Invalid);
    }
    for p in 0..parts {
        let n = bs / parts - if p == 0 { order } else { 0 };
        let param = b.read(pbits)?;
        if param == escape {
            let raw = b.read(5)?;
            b.skip(u64::from(raw) * u64::from(n))?;
        } else {
            for _ in 0..n {
                b.unary()?;
                b.read(param)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample()
    }

    #[derive(Default)]
    struct W {
        out: Vec<u8>,
        acc: u64,
        n: u32,
    }

    impl W {
        fn put(&mut self, v: u64, k: u32) {
            for i in (0..k).rev() {
                self.acc = self.acc << 1 | (v >> i) & 1;
                self.n += 1;
                if self.n == 8 {
                    self.out.push(self.acc as u8);
                    self.acc = 0;
                    self.n = 0;
                }
            }
        }
        fn rice(&mut self, v: i32, param: u32) {
            let u = ((v << 1) ^ (v >> 31)) as u32;
            for _ in 0..(u >> param) {
                self.put(0, 1);
            }
            self.put(1, 1);
            self.put(u64::from(u & ((1 << param) - 1)), param);
        }
        fn align(&mut self) {
            while self.n != 0 {
                self.put(0, 1);
            }
        }
    }

    fn crc16_ref(d: &[u8]) -> u16 {
        let mut c = 0u16;
        for &b in d {
            c ^= u16::from(b) << 8;
            for _ in 0..8 {
                c = if c & 0x8000 != 0 {
                    (c << 1) ^ 0x8005
                } else {
                    c << 1
                };
            }
        }
        c
    }

    /// Header for a fixed-blocksize frame `num` of `bs` samples (bs-1 in 8 bits).
    fn header(w: &mut W, num: u8, bs: u32, ch: u8) {
        w.put(0xFFF8, 16);
        w.put(6, 4); // block size: 8-bit value follows
        w.put(0, 4); // rate from STREAMINFO
        w.put(u64::from(ch), 4);
        w.put(0, 3); // bits from STREAMINFO
        w.put(0, 1);
        w.put(u64::from(num), 8); // frame number (< 128)
        w.put(u64::from(bs - 1), 8);
        let c = super::crc8(&w.out);
        w.put(u64::from(c), 8);
    }

    fn finish(mut w: W) -> Vec<u8> {
        w.align();
        let c = crc16_ref(&w.out);
        w.put(u64::from(c), 16);
        w.out
    }

    fn sample() -> Vec<u8> {
        let bps = 16;
        let mut v = b"fLaC".to_vec();
        // STREAMINFO: blocks 16..=32, rate 44100, 2 channels, 16 bits, 16+32+5 samples.
        v.extend_from_slice(&[0x00, 0, 0, 34]);
        v.extend_from_slice(&16u16.to_be_bytes());
        v.extend_from_slice(&32u16.to_be_bytes());
        v.extend_from_slice(&[0; 6]);
        let packed: u64 = (44100u64 << 44) | (1 << 41) | (15 << 36) | 53;
        v.extend_from_slice(&packed.to_be_bytes());
        v.extend_from_slice(&[0xAB; 16]);
        // A padding block, last.
        v.extend_from_slice(&[0x81, 0, 0, 10]);
        v.extend_from_slice(&[0; 10]);
        // Frame 0: independent stereo, CONSTANT + VERBATIM.
        let mut w = W::default();
        header(&mut w, 0, 16, 1);
        w.put(0, 1);
        w.put(0, 6);
        w.put(0, 1);
        w.put(0x1234, bps);
        w.put(0, 1);
        w.put(1, 6);
        w.put(0, 1);
        for i in 0..16 {
            w.put(i * 1000, bps);
        }
        v.extend(finish(w));
        // Frame 1: mid/side; FIXED order 2 with partitioned Rice + escape;
        // side (17 bits) as LPC order 1 with wasted bits and 5-bit params.
        let mut w = W::default();
        header(&mut w, 1, 32, 10);
        w.put(0, 1);
        w.put(8 + 2, 6);
        w.put(0, 1);
        w.put(100, bps);
        w.put(200, bps);
        w.put(0, 2); // 4-bit params
        w.put(1, 4); // 2 partitions of 16
        w.put(3, 4);
        for r in [5, -3, 0, 17, -20, 1, 2, 3, 4, 5, 6, 7, 8, 9] {
            w.rice(r, 3);
        }
        w.put(15, 4); // escape
        w.put(6, 5);
        for r in 0..16u64 {
            w.put(r, 6);
        }
        w.put(0, 1);
        w.put(32, 6); // LPC order 1
        w.put(1, 1); // wasted bits: k = 1 → unary "1"
        w.put(1, 1);
        w.put(7, 17 - 1); // warm-up
        w.put(11, 4); // precision 12
        w.put(3, 5); // shift
        w.put(100, 12); // coefficient
        w.put(1, 2); // 5-bit params
        w.put(0, 4); // one partition
        w.put(2, 5);
        for r in 0..31 {
            w.rice(r - 15, 2);
        }
        v.extend(finish(w));
        // Frame 2: the last, short block (5 samples), left/side, two CONSTANTs.
        let mut w = W::default();
        header(&mut w, 2, 5, 8);
        w.put(0, 8);
        w.put(1, bps);
        w.put(0, 8);
        w.put(1, bps + 1);
        v.extend(finish(w));
        v
    }

    #[test]
    fn valid_flac() {
        let f = sample();
        assert_complete("flac", &f);
        assert_prefixes("flac", &f);
    }

    #[test]
    fn damaged_and_rejects() {
        let f = sample();
        // Corrupt a byte in the middle of frame 1: CRC-16 fails there.
        let frame1 = f
            .windows(2)
            .enumerate()
            .filter(|(_, w)| *w == [0xFF, 0xF8])
            .map(|(i, _)| i)
            .nth(1)
            .unwrap();
        let mut bad = f.clone();
        bad[frame1 + 20] ^= 0x10;
        let v = run("flac", &bad).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, frame1 as u64));
        // Unknown total: complete where the frames stop.
        let mut unk = f.clone();
        unk[8 + 13] &= 0xF0;
        unk[8 + 14..8 + 18].fill(0);
        let v = run("flac", &unk).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
        let mut zeros = b"fLaC\x00\x00\x00\x22".to_vec();
        zeros.extend_from_slice(&[0; 40]);
        assert!(run("flac", &zeros).is_none());
        let mut wrong = f.clone();
        wrong[4] = 0x04;
        assert!(run("flac", &wrong).is_none());
        let v = run_at("flac", &f, 0, Limits { max_len: 100 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 100));
    }

    /// Real FLAC files made by the `flac` encoder from WAV files on this
    /// machine (several settings, incl. 24/32-bit and variable-order LPC);
    /// skipped when there is no encoder or no WAV.
    #[test]
    fn real_flac_encoder() {
        let mut dirs = py_dirs("test/audiodata");
        dirs.push("/usr/share/forensics-samples/original-files/audio1".into());
        let d: Vec<&str> = dirs.iter().map(String::as_str).collect();
        let wavs = real_files(&d, &[".wav"], 4);
        let tmp = std::env::temp_dir().join(format!("gpucarve-flac-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&tmp);
        let mut made = Vec::new();
        for (i, w) in wavs.iter().enumerate() {
            for (j, opts) in [
                &["-0", "--no-padding"][..],
                &["-5"],
                &["-8", "--blocksize=1152"],
            ]
            .iter()
            .enumerate()
            {
                let out = tmp.join(format!("{i}-{j}.flac"));
                let ok = std::process::Command::new("flac")
                    .args(["-s", "-f", "--lax"])
                    .args(*opts)
                    .arg("-o")
                    .arg(&out)
                    .arg(w)
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if ok {
                    made.push(out);
                }
            }
        }
        if made.is_empty() {
            eprintln!("flac encoder or WAV files not available; skipped");
        } else {
            let (total, exact) = check_real("flac", &made);
            assert_eq!(total, exact);
        }
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
