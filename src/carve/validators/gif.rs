//! GIF: header, logical screen, then a block walk to the `3B` trailer.
//!
//! Structure (GIF89a specification, CompuServe 1990, §17-27): `GIF87a` or
//! `GIF89a`; the logical screen descriptor (width, height, packed flags,
//! background index, aspect); an optional global colour table of
//! `3 · 2^(size+1)` bytes; then blocks: extensions `21 <label> <sub-blocks>`,
//! images `2C <9-byte descriptor> [local colour table] <LZW min code size>
//! <sub-blocks>`, and the trailer `3B`. Sub-blocks are `len (1 byte) | data`,
//! ended by a zero length.
//!
//! Checked: the signature; the packed-field reserved bits of image
//! descriptors; the LZW minimum code size (2..=11; the spec says 8); the graphic control
//! extension's fixed block size (4); each block introducer; and each image's
//! LZW data is decoded (code lengths only, no pixels kept, a fixed 16 KiB
//! table): every code must be defined and the codes must yield at least
//! width × height pixels — so a cut or fragmented GIF whose tail is someone
//! else's data is not taken for complete when a `3B` turns up in it.
//!
//! * `None`: bad signature, or the first block after the header is not an
//!   extension, image or trailer.
//! * `Complete`: the trailer is reached; length = trailer + 1.
//! * `Partial`: the walk runs past the window (length = window) or meets an
//!   invalid block (length = end of the last good block).

use super::Verdict;
use super::read::{Cursor, Src};

/// More blocks than this is not a real GIF.
const MAX_BLOCKS: u32 = 10_000_000;

pub fn validate(src: Src) -> Option<Verdict> {
    let Some(h) = src.bytes::<13>(0) else {
        let mut b = [0u8; 6];
        let n = src.read(0, &mut b);
        let sig_ok = (n >= 4 && b[..4] == *b"GIF8")
            && (n < 5 || matches!(b[4], b'7' | b'9'))
            && (n < 6 || b[5] == b'a');
        return sig_ok.then(|| Verdict::partial(src.len(), src.cut_note()));
    };
    if &h[..6] != b"GIF87a" && &h[..6] != b"GIF89a" {
        return None;
    }
    let packed = h[10];
    let mut c = Cursor::new(src, 13);
    let cut = |src: &Src| Some(Verdict::partial(src.len(), src.cut_note()));
    if packed & 0x80 != 0 && !c.skip(3 << ((packed & 7) + 1)) {
        return cut(&src);
    }
    let mut blocks = 0u32;
    let mut images = 0u32;
    // (Made at the first image: most headers in the evidence are not GIFs,
    // and zeroing 16 KiB for each of them was the validator's main cost.)
    let mut lz: Option<Box<LzwTable>> = None;
    let mut good_end = c.pos();
    let damaged =
        |at: u64, blocks: u32, note: String| (blocks > 0).then(|| Verdict::partial(at, note));
    for _ in 0..MAX_BLOCKS {
        let at = c.pos();
        let Some(b) = c.u8() else { return cut(&src) };
        match b {
            0x3B => {
                if images == 0 && !plain_screen(&h) {
                    return None;
                }
                let mut v = Verdict::complete(c.pos());
                v.notes.push(format!("{images} image(s)"));
                return Some(v);
            }
            0x21 => {
                let Some(label) = c.u8() else {
                    return cut(&src);
                };
                if label == 0xF9 && c.peek_u8().is_some_and(|n| n != 4) {
                    return damaged(
                        good_end,
                        blocks,
                        format!("bad graphic control extension at {at}"),
                    );
                }
                match sub_blocks(&mut c) {
                    Walk::Ok => {}
                    Walk::Cut => return cut(&src),
                }
            }
            0x2C => {
                let Some(d) = c.bytes::<9>() else {
                    return cut(&src);
                };
                let p = d[8];
                if p & 0x18 != 0 && images == 0 && blocks == 0 {
                    // Reserved bits set on the very first block: implausible.
                    return None;
                }
                if p & 0x80 != 0 && !c.skip(3 << ((p & 7) + 1)) {
                    return cut(&src);
                }
                let Some(code) = c.u8() else { return cut(&src) };
                // The spec says 2..=8; decoders (giflib, Pillow) take up to
                // 11 and encoders write it (Pillow's issue 2811 file).
                if !(2..=11).contains(&code) {
                    return damaged(good_end, blocks, format!("LZW code size {code} at {at}"));
                }
                let pixels = u64::from(u16::from_le_bytes([d[4], d[5]]))
                    * u64::from(u16::from_le_bytes([d[6], d[7]]));
                match lzw(
                    &mut c,
                    lz.get_or_insert_with(|| Box::new(LzwTable { len: [0; 4096] })),
                    code,
                    pixels,
                ) {
                    Lzw::Ok => {}
                    Lzw::Cut => return cut(&src),
                    Lzw::Bad(why) => {
                        return damaged(good_end, blocks, format!("image at {at}: {why}"));
                    }
                }
                images += 1;
            }
            _ => return damaged(good_end, blocks, format!("unknown block {b:#04x} at {at}")),
        }
        blocks += 1;
        good_end = c.pos();
    }
    damaged(good_end, blocks, "too many blocks".into())
}

/// A stream with no image is a GIF (the grammar allows it, and decoders'
/// test suites hold such files) only when its logical screen is what
/// encoders write: no aspect ratio (0) and a background index inside the
/// global colour table (0 without one). Random bytes after a `GIF89a` pass
/// this and a trailer where the first block goes 1 time in 2^16 or less
/// (main took 71 such "files" out of 16 MiB of `synth --shape in-noise`);
/// a text naming the signature has printable bytes there and fails.
fn plain_screen(h: &[u8; 13]) -> bool {
    let packed = h[10];
    let colours = if packed & 0x80 != 0 {
        2u16 << (packed & 7)
    } else {
        1
    };
    h[12] == 0 && u16::from(h[11]) < colours
}

/// LZW decoding state: each code's string length (fixed size, reused for
/// every image).
struct LzwTable {
    len: [u32; 4096],
}

enum Lzw {
    Ok,
    Cut,
    Bad(&'static str),
}

/// Decodes an image's LZW data (GIF89a Appendix F: variable-length codes,
/// LSB first, over the sub-block chain) without producing pixels: every
/// code must be defined, and the codes must expand to exactly `pixels`
/// pixels (at least — some encoders add a few), before the end-of-information
/// code or the end of the data. Leaves the cursor after the chain.
fn lzw(c: &mut Cursor, t: &mut LzwTable, min: u8, pixels: u64) -> Lzw {
    let clear = 1u32 << min;
    let eoi = clear + 1;
    let mut width = u32::from(min) + 1;
    let mut next = eoi + 1;
    let mut prev: Option<u32> = None;
    let mut acc = 0u32;
    let mut nbits = 0u32;
    let mut out = 0u64;
    let mut ended = false;
    for i in 0..clear {
        t.len[i as usize] = 1;
    }
    // Sub-blocks: length byte, then data.
    loop {
        let Some(n) = c.u8() else { return Lzw::Cut };
        if n == 0 {
            break;
        }
        for _ in 0..n {
            let Some(b) = c.u8() else { return Lzw::Cut };
            if ended {
                continue; // bytes after the end code are ignored
            }
            acc |= u32::from(b) << nbits;
            nbits += 8;
            while nbits >= width && !ended {
                let code = acc & ((1 << width) - 1);
                acc >>= width;
                nbits -= width;
                if code == clear {
                    width = u32::from(min) + 1;
                    next = eoi + 1;
                    prev = None;
                    continue;
                }
                if code == eoi {
                    ended = true;
                    break;
                }
                let l = if code < next {
                    if code >= clear && code <= eoi {
                        return Lzw::Bad("undefined LZW code");
                    }
                    t.len[code as usize]
                } else if code == next && prev.is_some() {
                    prev.map_or(1, |p| t.len[p as usize] + 1)
                } else {
                    return Lzw::Bad("undefined LZW code");
                };
                out += u64::from(l);
                if let Some(p) = prev
                    && next < 4096
                {
                    t.len[next as usize] = t.len[p as usize] + 1;
                    next += 1;
                    if next == 1 << width && width < 12 {
                        width += 1;
                    }
                }
                prev = Some(code);
            }
        }
    }
    if out < pixels {
        return Lzw::Bad("fewer pixels than the image size");
    }
    Lzw::Ok
}

enum Walk {
    Ok,
    Cut,
}

/// Skips a sub-block chain up to and including its zero terminator.
fn sub_blocks(c: &mut Cursor) -> Walk {
    // Each sub-block is at least one byte, so the window bounds the loop.
    loop {
        let Some(n) = c.u8() else { return Walk::Cut };
        if n == 0 {
            return Walk::Ok;
        }
        if !c.skip(u64::from(n)) {
            return Walk::Cut;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample(2)
    }

    /// LZW image data (min code size 2) for `n` pixels: pairs of literal
    /// codes (the second adds a table entry, code 6) with a clear code
    /// before each pair so the width stays 3 bits, then the end code; split
    /// into sub-blocks of at most `chunk` bytes.
    fn lzw_data(n: usize, chunk: usize) -> Vec<u8> {
        let mut codes = Vec::new();
        for i in 0..n {
            if i % 2 == 0 {
                codes.push(4u32);
            }
            codes.push((i % 4) as u32);
        }
        codes.push(5);
        let (mut acc, mut bits, mut bytes) = (0u32, 0, Vec::new());
        for c in codes {
            acc |= c << bits;
            bits += 3;
            while bits >= 8 {
                bytes.push(acc as u8);
                acc >>= 8;
                bits -= 8;
            }
        }
        if bits > 0 {
            bytes.push(acc as u8);
        }
        let mut v = vec![2u8];
        for piece in bytes.chunks(chunk) {
            v.push(piece.len() as u8);
            v.extend_from_slice(piece);
        }
        v.push(0);
        v
    }

    fn sample(frames: usize) -> Vec<u8> {
        let mut v = b"GIF89a".to_vec();
        v.extend_from_slice(&[4, 0, 4, 0, 0x81, 0, 0]); // 4x4, global table of 4 colours
        v.extend_from_slice(&[0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 255, 0]);
        // Application extension (NETSCAPE loop).
        v.extend_from_slice(&[0x21, 0xFF, 11]);
        v.extend_from_slice(b"NETSCAPE2.0");
        v.extend_from_slice(&[3, 1, 0, 0, 0]);
        for _ in 0..frames {
            v.extend_from_slice(&[0x21, 0xF9, 4, 0, 10, 0, 0, 0]);
            v.extend_from_slice(&[0x2C, 0, 0, 0, 0, 4, 0, 4, 0, 0x80]);
            v.extend_from_slice(&[1, 2, 3, 4, 5, 6]); // local table of 2 colours
            v.extend_from_slice(&lzw_data(16, 4));
        }
        v.extend_from_slice(&[0x21, 0xFE, 5]);
        v.extend_from_slice(b"hello");
        v.push(0);
        v.push(0x3B);
        v
    }

    #[test]
    fn image_data_is_decoded() {
        let g = sample(1);
        let i = g.windows(3).position(|w| w == [0x2C, 0, 0]).unwrap();
        // Garbage LZW codes, then a trailer: not Complete.
        let mut bad = g[..i + 10 + 6].to_vec();
        bad.extend_from_slice(&[2, 6, 0xFF, 0xEE, 0xDD, 0xCC, 0xBB, 0xAA, 0, 0x3B]);
        let v = run("gif", &bad).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Partial, i as u64),
            "{:?}",
            v.notes
        );
        // Too few pixels for the image size.
        let mut short = g[..i + 10 + 6].to_vec();
        short.extend_from_slice(&lzw_data(10, 255));
        short.push(0x3B);
        assert_eq!(run("gif", &short).unwrap().status, Status::Partial);
    }

    #[test]
    fn valid_gif() {
        let g = sample(3);
        assert_complete("gif", &g);
        assert_prefixes("gif", &g);
        let mut g87 = sample(1);
        g87[4] = b'7';
        assert_complete("gif", &g87);
    }

    #[test]
    fn damaged_and_false_positive() {
        let mut g = sample(2);
        let comment = g.len() - 10;
        g[comment] = 0x99;
        let v = run("gif", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, comment as u64));
        let mut bad = b"GIF89a\x04\x00\x04\x00\x00\x00\x00".to_vec();
        bad.extend_from_slice(b"nonsense");
        assert!(run("gif", &bad).is_none());
        assert!(run("gif", b"GIF89b\x04\x00\x04\x00\x00\x00\x00\x3b").is_none());
    }

    #[test]
    fn no_image_needs_a_plain_screen() {
        // The GIF test suite's zero-size.gif: a 0x0 screen, a global table
        // of 2 colours, no image, the trailer (20 bytes).
        let mut z = b"GIF89a\x00\x00\x00\x00\xf0\x01\x00".to_vec();
        z.extend_from_slice(&[0, 0, 0, 255, 255, 255, 0x3B]);
        let v = run("gif", &z).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, 20));
        // A screen no encoder writes (an aspect ratio, a background outside
        // the table) and no image: noise after a signature.
        let mut odd = z.clone();
        odd[12] = 49;
        assert!(run("gif", &odd).is_none());
        let mut odd = z.clone();
        odd[11] = 2;
        assert!(run("gif", &odd).is_none());
        // A text naming the signature with a ';' where a trailer could be.
        assert!(run("gif", b"GIF89a images;").is_none());
        assert!(run("gif", b"GIF89a, GIF87;").is_none());
    }

    #[test]
    fn real_gifs() {
        let mut dirs = vec!["/usr/share".to_string()];
        dirs.extend(py_dirs("test/imghdrdata"));
        let d: Vec<&str> = dirs.iter().map(String::as_str).collect();
        check_real("gif", &real_files(&d, &[".gif"], 40));
    }
}
