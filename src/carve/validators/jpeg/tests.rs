use super::super::testutil::*;
use super::super::{ByteReader, Context};

/// A carving's budget for the trails its verdicts keep.
fn trail_budget() -> std::sync::Arc<super::TrailBudget> {
    std::sync::Arc::default()
}

/// What a validation of `image`'s bytes shares with the carving's JPEG memo.
fn memo_cx(memo: &std::sync::Arc<super::ScanMemo>, image: &dyn ByteReader) -> Context {
    Context::NONE.with_jpeg_memo(memo, image)
}
use super::super::{Limits, Status};
use crate::synth::XorShift;

/// A valid file, the seed for the mutation property test.
pub fn seed() -> Vec<u8> {
    sample()
}

/// A DHT table's Huffman tables are those built from it alone, whoever
/// asked first, by class; an over-subscribed table has none; the
/// tables kept stay bounded however many tables an image holds.
#[test]
fn huffman_tables_are_shared_by_dht_table_and_bounded() {
    use super::huffman::{HUFFS, Huff, MAX_HUFFS};
    // T.81 K.3: the luminance DC table.
    let counts = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
    let syms: Vec<u8> = (0..12).collect();
    let same = |a: &Huff, b: &Huff| {
        a.look == b.look && a.fast == b.fast && a.maxcode == b.maxcode && a.vals == b.vals
    };
    for ac in [false, true] {
        let built = Huff::new(&counts, &syms, ac).unwrap();
        let first = Huff::shared(&counts, &syms, ac).unwrap();
        let again = Huff::shared(&counts, &syms, ac).unwrap();
        assert!(same(&built, &first) && same(&first, &again));
        assert_eq!(first.fast.is_some(), ac);
    }
    let over = [3u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(Huff::shared(&over, &[1, 2, 3], false).is_none());
    for k in 0..MAX_HUFFS + 10 {
        let syms: Vec<u8> = (0..12).map(|i| (i + k) as u8).collect();
        let h = Huff::shared(&counts, &syms, true).unwrap();
        assert_eq!(h.vals[..12], syms[..]);
        let held = HUFFS.lock().unwrap().as_ref().map_or(0, |m| m.len());
        assert!(held <= MAX_HUFFS, "{held}");
    }
}

fn seg(out: &mut Vec<u8>, m: u8, data: &[u8]) {
    out.extend_from_slice(&[0xFF, m]);
    out.extend_from_slice(&((data.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(data);
}

/// Entropy-coded data writer: MSB first, `FF` stuffed, 1-padded.
#[derive(Default)]
struct W {
    out: Vec<u8>,
    acc: u32,
    n: u32,
}

impl W {
    fn put(&mut self, v: u32, k: u32) {
        for i in (0..k).rev() {
            self.acc = self.acc << 1 | (v >> i) & 1;
            self.n += 1;
            if self.n == 8 {
                self.out.push(self.acc as u8);
                if self.acc == 0xFF {
                    self.out.push(0);
                }
                self.acc = 0;
                self.n = 0;
            }
        }
    }
    fn flush(&mut self) {
        while self.n != 0 {
            self.put(1, 1);
        }
    }
    /// Table codes (see [`tables`]).
    fn dc(&mut self, cat: u32, bits: u32) {
        self.put(cat, 2); // DC symbols 0, 1, 2 have codes 00, 01, 10
        self.put(bits, cat);
    }
    fn ac(&mut self, sym: u8, bits: u32) {
        let (code, len) = match sym {
            0x00 => (0b00, 2),
            0x01 => (0b01, 2),
            0xF0 => (0b100, 3),
            0x11 => (0b101, 3),
            0x02 => (0b110, 3),
            0x10 => (0b111, 3),
            _ => unreachable!(),
        };
        self.put(code, len);
        let extra = if sym == 0x10 { 1 } else { u32::from(sym & 15) };
        self.put(bits, extra);
    }
}

/// DHT body: DC table 0 (symbols 0, 1, 2, codes of 2 bits) and AC table
/// 0 (EOB, 0/1 with 2 bits; ZRL, 1/1, 0/2, EOBRUN 1 with 3 bits).
fn tables() -> Vec<u8> {
    let mut d = vec![0x00, 0, 3];
    d.extend_from_slice(&[0; 14]);
    d.extend_from_slice(&[0, 1, 2]);
    d.extend_from_slice(&[0x10, 0, 2, 4]);
    d.extend_from_slice(&[0; 13]);
    d.extend_from_slice(&[0x00, 0x01, 0xF0, 0x11, 0x02, 0x10]);
    d
}

/// One baseline block: DC, a few AC coefficients incl. a zero run, EOB.
fn block(w: &mut W, i: u32) {
    w.dc(i % 3, i);
    w.ac(0x01, 1);
    w.ac(0xF0, 0);
    w.ac(0x11, 0);
    w.ac(0x02, 3);
    if i.is_multiple_of(2) {
        w.ac(0x00, 0);
    } else {
        // Fill the block to coefficient 63 exactly (no EOB): k is 21
        // here, 21 × (1/1) brings it to 63, a last 0/1 to 64.
        for _ in 0..21 {
            w.ac(0x11, 1);
        }
        w.ac(0x01, 0);
    }
}

/// A baseline JPEG: 32x16, Y 2x2 + Cb + Cr (4:2:0), restart interval 1
/// (two MCUs, so one RST0), with DQT, SOF0, DHT, DRI, SOS, EOI.
fn jpeg(app: impl FnOnce(&mut Vec<u8>), scans: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8];
    app(&mut v);
    let mut dqt = vec![0u8];
    dqt.extend((1..=64).map(|i| i as u8));
    seg(&mut v, 0xDB, &dqt);
    seg(
        &mut v,
        0xC0,
        &[8, 0, 16, 0, 32, 3, 1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0],
    );
    seg(&mut v, 0xC4, &tables());
    seg(&mut v, 0xDD, &[0, 1]);
    for s in 0..scans {
        seg(&mut v, 0xDA, &[3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0]);
        for mcu in 0..2u32 {
            let mut w = W::default();
            for b in 0..6 {
                block(&mut w, mcu * 6 + b + s as u32);
            }
            w.flush();
            v.extend_from_slice(&w.out);
            if mcu == 0 {
                v.extend_from_slice(&[0xFF, 0xD0]);
            }
        }
        if s + 1 < scans {
            seg(&mut v, 0xC4, &tables());
        }
    }
    v.extend_from_slice(&[0xFF, 0xD9]);
    v
}

/// A progressive JPEG, 16x16 grey: DC first, AC first (with an EOB
/// run), DC refinement, AC refinement (with correction bits and a newly
/// non-zero coefficient).
pub fn progressive() -> Vec<u8> {
    let mut v = vec![0xFF, 0xD8];
    app0(&mut v);
    let mut dqt = vec![0u8];
    dqt.extend((1..=64).map(|i| i as u8));
    seg(&mut v, 0xDB, &dqt);
    seg(&mut v, 0xC2, &[8, 0, 16, 0, 16, 1, 1, 0x11, 0]);
    seg(&mut v, 0xC4, &tables());
    // DC first (Al = 1): four blocks.
    seg(&mut v, 0xDA, &[1, 1, 0x00, 0, 0, 0x01]);
    let mut w = W::default();
    for i in 0..4 {
        w.dc(i % 3, i);
    }
    w.flush();
    v.extend_from_slice(&w.out);
    // AC first 1..63: block 0 one coefficient at 1; then an EOB run of 3.
    seg(&mut v, 0xDA, &[1, 1, 0x00, 1, 63, 0x01]);
    let mut w = W::default();
    w.ac(0x01, 1);
    w.ac(0x00, 0);
    w.ac(0x10, 0); // EOBRUN = 2 + 0 → this block and the next one…
    w.ac(0x00, 0); // …then the last block.
    w.flush();
    v.extend_from_slice(&w.out);
    // DC refinement: one bit per block.
    seg(&mut v, 0xDA, &[1, 1, 0x00, 0, 0, 0x10]);
    let mut w = W::default();
    w.put(0b1010, 4);
    w.flush();
    v.extend_from_slice(&w.out);
    // AC refinement: block 0 gets a new coefficient at 2 (after the
    // correction bit of coefficient 1), then EOB; blocks 1..3 EOB.
    seg(&mut v, 0xDA, &[1, 1, 0x00, 1, 63, 0x10]);
    let mut w = W::default();
    w.ac(0x01, 1); // new coefficient, sign bit
    w.put(1, 1); // correction bit for coefficient 1
    w.ac(0x00, 0); // EOB: EOBRUN 1, nothing else non-zero in the band
    for _ in 1..4 {
        w.ac(0x00, 0);
    }
    w.flush();
    v.extend_from_slice(&w.out);
    v.extend_from_slice(&[0xFF, 0xD9]);
    v
}

fn app0(v: &mut Vec<u8>) {
    seg(v, 0xE0, b"JFIF\0\x01\x02\x00\x00\x01\x00\x01\x00\x00");
}

/// APP1 with an EXIF TIFF header and a complete thumbnail JPEG inside.
fn app1_exif(v: &mut Vec<u8>) {
    let thumb = jpeg(app0, 1);
    let mut d = b"Exif\0\0II*\0\x08\0\0\0\0\0".to_vec();
    d.extend_from_slice(&thumb);
    d.extend_from_slice(b"trailing exif bytes");
    seg(v, 0xE1, &d);
}

pub fn sample() -> Vec<u8> {
    jpeg(
        |v| {
            app0(v);
            app1_exif(v);
            seg(v, 0xFE, b"a comment \xFF\xD9 with an EOI inside");
        },
        1,
    )
}

#[test]
fn valid_jpegs() {
    assert_complete("jpeg", &jpeg(app0, 1));
    let s = sample();
    assert_complete("jpeg", &s);
    assert_prefixes("jpeg", &s);
    // Progressive with refinement scans.
    let p = progressive();
    assert_complete("jpeg", &p);
    assert_prefixes("jpeg", &p);
    // Several sequential scans with DHT between them.
    let m = jpeg(app0, 3);
    assert_complete("jpeg", &m);
}

/// Offset of the first entropy-coded byte of the first scan.
fn scan_data(j: &[u8]) -> usize {
    let i = j.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
    i + 2 + usize::from(u16::from_be_bytes([j[i + 2], j[i + 3]]))
}

#[test]
fn foreign_data_in_the_scan_is_caught() {
    let good = jpeg(app0, 1);
    let d = scan_data(&good);
    let rst = d + good[d..]
        .windows(2)
        .position(|w| w == [0xFF, 0xD0])
        .unwrap();
    // Cut after the restart marker, then someone else's bytes and an EOI:
    // a marker walk would call this complete.
    for junk in [
        (0..200u32)
            .map(|i| (i * 37 % 251) as u8)
            .collect::<Vec<u8>>(),
        vec![0u8; 300],
        b"plain text that happens to follow the cut ".repeat(8),
    ] {
        let mut bad = good[..rst + 2].to_vec();
        bad.extend_from_slice(&junk);
        bad.extend_from_slice(&[0xFF, 0xD9]);
        let v = run("jpeg", &bad).unwrap();
        assert_eq!(v.status, Status::Partial, "{:?}", v.notes);
        assert!(
            v.length >= rst as u64 + 2 && v.length < bad.len() as u64,
            "{v:?}"
        );
    }
    // Restart marker out of sequence.
    let mut bad = good.clone();
    bad[rst + 1] = 0xD3;
    assert_eq!(run("jpeg", &bad).unwrap().status, Status::Partial);
    // An MCU too few: the EOI comes early.
    let mut short = good[..rst].to_vec();
    short.extend_from_slice(&[0xFF, 0xD9]);
    assert_eq!(run("jpeg", &short).unwrap().status, Status::Partial);
    // Same for progressive data.
    let p = progressive();
    let d = scan_data(&p);
    let mut bad = p[..d].to_vec();
    bad.extend(std::iter::repeat_n(0x5Au8, 64));
    bad.extend_from_slice(&p[p.len() - 40..]);
    assert_eq!(run("jpeg", &bad).unwrap().status, Status::Partial);
}

#[test]
fn scans_without_tables_fall_back_to_the_marker_walk() {
    // Motion-JPEG frames omit DHT (the decoder uses the standard tables).
    let good = jpeg(app0, 1);
    let i = good.windows(2).position(|w| w == [0xFF, 0xC4]).unwrap();
    let n = usize::from(u16::from_be_bytes([good[i + 2], good[i + 3]])) + 2;
    let mut mj = good[..i].to_vec();
    mj.extend_from_slice(&good[i + n..]);
    let v = run("jpeg", &mj).unwrap();
    assert_eq!((v.status, v.length), (Status::Complete, mj.len() as u64));
    assert!(
        v.notes.iter().any(|n| n.contains("marker walk")),
        "{:?}",
        v.notes
    );
}

/// A multi-picture file: a first JPEG whose APP2 MPF index lists a
/// second JPEG of `second.len()` bytes placed `gap` bytes after the
/// first EOI.
fn mpf_file(second: &[u8], gap: usize, little: bool) -> (Vec<u8>, usize) {
    let u16b = |x: u16| {
        if little {
            x.to_le_bytes()
        } else {
            x.to_be_bytes()
        }
    };
    let u32b = |x: u32| {
        if little {
            x.to_le_bytes()
        } else {
            x.to_be_bytes()
        }
    };
    // Body: "MPF\0", TIFF header, IFD (2 entries), then the 2 MP entries.
    let build = |off: u32, size1: u32| {
        let mut d = b"MPF\0".to_vec();
        d.extend_from_slice(if little { b"II" } else { b"MM" });
        d.extend_from_slice(&u16b(42));
        d.extend_from_slice(&u32b(8));
        d.extend_from_slice(&u16b(2));
        // B000 version, B002 MP entries (32 bytes at 8 + 2 + 24 + 4 = 38).
        d.extend_from_slice(&u16b(0xB000));
        d.extend_from_slice(&u16b(7));
        d.extend_from_slice(&u32b(4));
        d.extend_from_slice(b"0100");
        d.extend_from_slice(&u16b(0xB002));
        d.extend_from_slice(&u16b(7));
        d.extend_from_slice(&u32b(32));
        d.extend_from_slice(&u32b(38));
        d.extend_from_slice(&u32b(0)); // next IFD
        for (size, o) in [(size1, 0u32), (second.len() as u32, off)] {
            d.extend_from_slice(&u32b(0x0003_0000));
            d.extend_from_slice(&u32b(size));
            d.extend_from_slice(&u32b(o));
            d.extend_from_slice(&[0; 4]);
        }
        d
    };
    let first_len = jpeg(|v| seg(v, 0xE2, &build(0, 0)), 1).len();
    // The MP header starts after SOI (2), APP2 marker+length (4), "MPF\0" (4).
    let mp = 2 + 4 + 4;
    let off = (first_len + gap - mp) as u32;
    let mut v = jpeg(|v| seg(v, 0xE2, &build(off, first_len as u32)), 1);
    assert_eq!(v.len(), first_len);
    v.extend(std::iter::repeat_n(0u8, gap));
    v.extend_from_slice(second);
    (v, first_len)
}

#[test]
fn multi_picture_files_end_after_their_last_image() {
    let second = jpeg(app0, 1);
    for little in [true, false] {
        for gap in [0, 3] {
            let (mut d, _) = mpf_file(&second, gap, little);
            let n = d.len() as u64;
            d.extend_from_slice(&[0x42; 100]);
            let v = run("jpeg", &d).expect("jpeg");
            assert_eq!(
                (v.status, v.length),
                (Status::Complete, n),
                "{little} {gap}"
            );
            assert!(v.notes.iter().any(|x| x.contains("multi-picture")));
        }
    }
    // The second image damaged or missing: the first image alone.
    let (mut d, first) = mpf_file(&second, 0, true);
    d[first + 1] = 0x00; // the second image's SOI
    let v = run("jpeg", &d).expect("jpeg");
    assert_eq!((v.status, v.length), (Status::Complete, first as u64));
    assert!(v.notes.iter().any(|x| x.contains("not intact")));
    let (d, first) = mpf_file(&second, 0, false);
    let v = run("jpeg", &d[..first + 10]).expect("jpeg");
    assert_eq!((v.status, v.length), (Status::Complete, first as u64));
}

#[test]
fn thumbnail_does_not_end_file() {
    let s = sample();
    let v = run("jpeg", &s).unwrap();
    assert_eq!(v.length, s.len() as u64);
}

/// A file of [`jpeg`] with a comment after APP0, and `junk` put between
/// the comment and the DQT that follows it; where the DQT starts in it.
fn junk_after_comment(junk: &[u8]) -> (Vec<u8>, usize) {
    let mut v = jpeg(
        |v| {
            app0(v);
            seg(v, 0xFE, b"quality = 60");
        },
        1,
    );
    let dqt = v.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap();
    v.splice(dqt..dqt, junk.iter().copied());
    (v, dqt)
}

#[test]
fn foreign_bytes_before_a_marker_are_passed_as_libjpeg_does() {
    use super::walk::{MAX_JUNK, MAX_JUNK_SKIPS, marker_after_junk};
    // libjpeg's next_marker: bytes other than FF, and FF 00, are junk; fill
    // FFs belong to the marker.
    let find = |b: &[u8]| {
        let sl = Slice(b);
        let src = super::Src::new(&sl, 0, NO_LIMIT);
        marker_after_junk(&mut crate::carve::validators::read::Cursor::new(src, 0))
    };
    assert_eq!(find(&[0xFF, 0xDB]), Some(0));
    assert_eq!(find(b"hello\xFF\xDB"), Some(5));
    assert_eq!(find(&[0xFF, 0, 0, 2, 0xFF, 0xFF, 0xDB]), Some(4));
    assert_eq!(find(&[0xFF, 0xFF, 0, 0xFF, 0xDB]), Some(3));
    assert_eq!(find(&[1, 2, 0xFF]), None);
    let far: Vec<u8> = std::iter::repeat_n(7u8, MAX_JUNK as usize + 1)
        .chain([0xFF, 0xDB])
        .collect();
    assert_eq!(find(&far), None);
    assert_eq!(find(&far[1..]), Some(MAX_JUNK));
    // A run of fill FFs longer than a marker may have: none.
    let fill: Vec<u8> = std::iter::repeat_n(0xFFu8, 5000).chain([0xDB]).collect();
    assert_eq!(find(&fill), None);

    let whole = junk_after_comment(&[]).0;
    assert_complete("jpeg", &whole);
    // Text after a comment (Pillow's junk_jpeg_header.jpg), FF 00 where a
    // marker must be (jpeg_ff00_header.jpg), as much junk as is passed.
    let bound = vec![b'x'; MAX_JUNK as usize];
    for junk in [&b"hello"[..], &[0xFF, 0, 0, 2], &[1], &bound] {
        let (f, _) = junk_after_comment(junk);
        let v = run("jpeg", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
        let note = format!("{} foreign byte(s) before 1 marker(s)", junk.len());
        assert!(v.notes.iter().any(|n| n.starts_with(&note)), "{v:?}");
    }
    // A segment length hexedited short (truncated_app14.jpg,
    // photoshop-200dpi-broken.jpg): the walk lands inside its data.
    let (mut f, dqt) = junk_after_comment(&[]);
    let com = f.windows(2).position(|w| w == [0xFF, 0xFE]).unwrap();
    f[com + 3] -= 7;
    let v = run("jpeg", &f).unwrap();
    assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
    assert!(v.notes.iter().any(|n| n.starts_with("7 foreign")), "{v:?}");
    // One byte more than passed: the strict verdict, damage at the comment's end.
    let (f, dqt2) = junk_after_comment(&vec![b'x'; MAX_JUNK as usize + 1]);
    assert_eq!(dqt, dqt2);
    let v = run("jpeg", &f).unwrap();
    assert_eq!((v.status, v.length), (Status::Partial, dqt as u64));
    // (No retry then: the strict walk sees no marker in reach.)
    let mut d = super::Damage::default();
    let sl = Slice(&f);
    super::validate_probe(super::Src::new(&sl, 0, NO_LIMIT), &mut d).unwrap();
    assert_eq!((d.damaged, d.tolerable), (true, false));
    // Junk before as many markers as are passed, and before one more.
    for (skips, status) in [
        (MAX_JUNK_SKIPS, Status::Complete),
        (MAX_JUNK_SKIPS + 1, Status::Partial),
    ] {
        let f = jpeg(
            |v| {
                app0(v);
                for _ in 0..skips {
                    seg(v, 0xFE, b"c");
                    v.extend_from_slice(b"junk");
                }
            },
            1,
        );
        assert_eq!(run("jpeg", &f).unwrap().status, status);
    }
    // Junk that is not followed by a complete file: the strict verdict
    // (and damage), not the lenient walk's.
    let (f, dqt) = junk_after_comment(b"hello");
    let cut = &f[..f.len() - 40];
    let strict_end = dqt as u64;
    let v = run("jpeg", cut).unwrap();
    assert_eq!((v.status, v.length), (Status::Partial, strict_end), "{v:?}");
    assert!(v.notes[0].starts_with("expected a marker"), "{v:?}");
    let mut d = super::Damage::default();
    let sl = Slice(cut);
    let p = super::validate_probe(super::Src::new(&sl, 0, NO_LIMIT), &mut d).unwrap();
    assert_eq!((p.length, d.damaged, d.tolerable), (strict_end, true, true));
    // Nothing is passed inside entropy-coded data or after its last MCU.
    let good = jpeg(app0, 1);
    let mut late = good.clone();
    late.splice(good.len() - 2..good.len() - 2, *b"hello");
    assert_eq!(run("jpeg", &late).unwrap().status, Status::Partial);
}

#[test]
fn false_positives() {
    assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0x00, 1, 2, 3]).is_none());
    assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0x12, 1, 2, 3]).is_none());
    assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xD9]).is_none());
    // Valid 4th byte, nonsense segment after.
    assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 1, 2, 0x55, 0x66]).is_none());
    assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0, 1, 2]).is_none());
}

#[test]
fn damage_after_valid_start() {
    let mut s = jpeg(app0, 1);
    // Overwrite the DHT marker with a reserved marker.
    let i = s.windows(2).position(|w| w == [0xFF, 0xC4]).unwrap();
    s[i + 1] = 0x05;
    let v = run("jpeg", &s).unwrap();
    assert_eq!((v.status, v.length), (Status::Partial, i as u64));
    // The same right after the first segment: not enough evidence.
    let mut s = jpeg(app0, 1);
    let i = s.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap();
    s[i + 1] = 0x05;
    assert!(run("jpeg", &s).is_none());
    // Hostile segment length past the end.
    let mut s = jpeg(app0, 1);
    let i = s.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap();
    s[i + 2] = 0xFF;
    let v = run("jpeg", &s).unwrap();
    assert_eq!((v.status, v.length), (Status::Partial, s.len() as u64));
    // Window limit.
    let v = run_at("jpeg", &sample(), 0, Limits { max_len: 100 }).unwrap();
    assert_eq!((v.status, v.length), (Status::Partial, 100));
}

#[test]
fn real_jpegs() {
    let mut dirs = vec!["/usr/share".to_string()];
    dirs.extend(py_dirs("test/imghdrdata"));
    let d: Vec<&str> = dirs.iter().map(String::as_str).collect();
    check_real("jpeg", &real_files(&d, &[".jpg", ".jpeg"], 30));
}

/// The files the snapshot tests decode: the hand-made baseline and
/// progressive samples, and three real pictures (progressive and
/// baseline, with and without chroma subsampling).
/// Every `FF DA` (start of scan) in `f`, with where that scan's
/// entropy-coded data starts (after its header).
fn scan_starts(f: &[u8]) -> Vec<(usize, usize)> {
    (0..f.len().saturating_sub(3))
        .filter(|&i| f[i] == 0xFF && f[i + 1] == 0xDA)
        .map(|i| {
            (
                i,
                i + 2 + usize::from(u16::from_be_bytes([f[i + 2], f[i + 3]])),
            )
        })
        .collect()
}

fn snapshot_files() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    let mut files = vec![sample(), progressive()];
    for name in ["d-debian.jpg", "debian_logo.jpg", "IMG-20191006-WA0002.jpg"] {
        files.push(std::fs::read(dir.join(name)).unwrap());
    }
    files
}

/// Resuming from a snapshot gives the verdict (and damage) of a whole
/// validation, for windows equal to the captured file before the split:
/// the file itself, its head followed by noise, by a later part of
/// itself, and cut short.
#[test]
fn resume_from_a_snapshot_equals_a_whole_validation() {
    use super::{Damage, Src, validate, validate_capture, validate_probe, validate_resume};
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let files = snapshot_files();
    let mut snaps = 0;
    for f in &files {
        let step = (f.len() / 7).max(1);
        for split in (step..f.len()).step_by(step) {
            let mut d0 = Damage::default();
            let sl = Slice(f);
            let src = Src::new(&sl, 0, NO_LIMIT);
            let (v0, snap) = validate_capture(src, &mut d0, split as u64);
            assert_eq!(v0, validate(src), "capture changes nothing");
            let Some(snap) = snap else { continue };
            snaps += 1;
            assert!(snap.at() <= split as u64);
            let noise: Vec<u8> = (0..f.len()).map(|i| (i * 7919 % 251) as u8).collect();
            let mut variants = vec![f.clone(), f[..split].to_vec()];
            variants.push([&f[..split], &noise[..]].concat());
            let later = (split + 4096).min(f.len());
            variants.push([&f[..split], &f[later..]].concat());
            // (Twice, the second time backwards: each resume restores
            // the history the decode before it on this thread changed,
            // from the same snapshot, [`super::frame::restore_history`].)
            let again: Vec<&Vec<u8>> = variants.iter().chain(variants.iter().rev()).collect();
            for w in again {
                let sl = Slice(w);
                let src = Src::new(&sl, 0, NO_LIMIT);
                let (mut d1, mut d2) = (Damage::default(), Damage::default());
                let whole = validate_probe(src, &mut d1);
                let resumed = validate_resume(src, &mut d2, &snap);
                assert_eq!(whole, resumed, "split {split} of a {} byte file", f.len());
                assert_eq!(d1, d2);
            }
        }
    }
    assert!(snaps >= 20, "only {snaps} snapshots taken");
}

/// One decode capturing several splits takes, for each, the snapshot a
/// capture of that split alone takes (splits a cluster apart, as the
/// fragment search asks, and far apart, across progressive scans).
#[test]
fn capturing_several_splits_equals_one_at_a_time() {
    use super::{Damage, Src, capture_snaps, validate_capture, validate_capture_all};
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let files = snapshot_files();
    let mut compared = 0;
    for f in &files {
        let sl = Slice(f);
        let src = Src::new(&sl, 0, NO_LIMIT);
        let n = f.len() as u64;
        for gap in [64u64, 512, 4096, n / 3] {
            for first in [gap.max(1), n / 5, n / 2, n.saturating_sub(3 * gap)] {
                let splits: Vec<u64> = (0..3).map(|i| first + i * gap.max(1)).collect();
                // Any order in, answers in that order.
                let asked = [splits[2], splits[0], splits[1]];
                let mut d = Damage::default();
                let (v, all) = validate_capture_all(src, &mut d, &asked);
                // Stopped past the last split: the same snapshots.
                let stopped = capture_snaps(src, None, &asked);
                assert_eq!(format!("{all:?}"), format!("{stopped:?}"), "{n}");
                for (split, got) in asked.iter().zip(&all) {
                    let mut d1 = Damage::default();
                    let (v1, one) = validate_capture(src, &mut d1, *split);
                    assert_eq!((&v, d), (&v1, d1));
                    assert_eq!(
                        format!("{got:?}"),
                        format!("{one:?}"),
                        "split {split} of {n}"
                    );
                    compared += usize::from(one.is_some());
                }
            }
        }
    }
    assert!(compared >= 40, "only {compared} snapshots compared");
}

/// A capture resumed from a snapshot takes, for every later split, the
/// snapshot a capture from the file's start takes, with the same
/// verdict: over the file itself and over its head followed by other
/// bytes (what the fragment search captures when it follows a file
/// into a further fragment).
#[test]
fn capture_resumed_from_a_snapshot_equals_one_from_the_start() {
    use super::{
        Damage, Src, capture_snaps, validate_capture, validate_capture_all, validate_capture_from,
    };
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let files = snapshot_files();
    let mut compared = 0;
    for f in &files {
        let n = f.len() as u64;
        for first in [n / 7, n / 3, n / 2] {
            let sl = Slice(f);
            let (_, from) =
                validate_capture(Src::new(&sl, 0, NO_LIMIT), &mut Damage::default(), first);
            let Some(from) = from else { continue };
            // The file, and its head up to `first` then a later part of itself.
            let later = (first as usize + 8192).min(f.len());
            let windows = [f.clone(), [&f[..first as usize], &f[later..]].concat()];
            for w in &windows {
                let sl = Slice(w);
                let src = Src::new(&sl, 0, NO_LIMIT);
                let m = w.len() as u64;
                let asked = [
                    m / 2 + 4096,
                    first + 1,
                    m.saturating_sub(100),
                    first,
                    m / 2,
                    from.at() - 1,
                ];
                let (mut d0, mut d1) = (Damage::default(), Damage::default());
                let (v0, all) = validate_capture_all(src, &mut d0, &asked);
                let (v1, resumed) = validate_capture_from(src, &mut d1, &from, &asked);
                assert_eq!((&v0, d0), (&v1, d1), "{first} of {n}");
                let stopped = capture_snaps(src, Some(&from), &asked);
                assert_eq!(
                    format!("{resumed:?}"),
                    format!("{stopped:?}"),
                    "{first} of {n}"
                );
                for ((split, a), b) in asked.iter().zip(&all).zip(&resumed) {
                    if *split < from.at() {
                        assert!(b.is_none());
                        continue;
                    }
                    assert_eq!(
                        format!("{a:?}"),
                        format!("{b:?}"),
                        "split {split}, from {first} of {n}"
                    );
                    compared += usize::from(a.is_some());
                }
            }
        }
    }
    assert!(compared >= 40, "only {compared} snapshots compared");
}

/// A trail holds, for every grid point and block-map boundary it answers
/// for, the snapshot a capture of that split takes (coefficient history
/// included), from the file's start or resumed from a snapshot, for
/// baseline and progressive files; it answers for the splits the
/// fragment search places (up to three grid points before where the
/// decode broke), and for no other window length. The verdict and
/// damage are a plain validation's.
#[test]
fn a_trail_holds_the_snapshots_a_capture_takes() {
    use super::{Damage, Src, TrailSpec, validate_capture, validate_probe, validate_trail};
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    // Noise that breaks a decode soon after it starts.
    let noise = XorShift(0x9E37_79B9_7F4A_7C15).bytes(16384);
    let (mut compared, mut placed, mut progressive_placed) = (0, 0, 0);
    for (k, f) in snapshot_files().iter().enumerate() {
        let n = f.len();
        // (An SOF2 marker: entropy data holds no FF C2.)
        let progressive = f.windows(2).any(|m| m == [0xFF, 0xC2]);
        for cut in [n / 5, n / 2, n * 4 / 5] {
            let w = [&f[..cut], &noise[..]].concat();
            let sl = Slice(&w);
            let src = Src::new(&sl, 0, NO_LIMIT);
            let len = src.len();
            let (_, from) = validate_capture(src, &mut Damage::default(), (n / 7) as u64);
            for grid in [512u64, 4096] {
                let spec = TrailSpec {
                    grid,
                    span: 4 * grid + 1024,
                    block_map: Some(1024),
                };
                for resume in [None, from.as_ref()] {
                    let (mut d0, mut d1) = (Damage::default(), Damage::default());
                    let (v, trail) = validate_trail(src, &mut d1, resume, spec);
                    assert_eq!((v, d1), (validate_probe(src, &mut d0), d0));
                    let trail = trail.unwrap();
                    // (Another window's length: no answer.)
                    assert!(trail.answer(len + 1, &[0]).is_none());
                    // The splits the search asks for near the failure.
                    let top = d1.fail_at / grid * grid;
                    let near: Vec<u64> = (0..3).filter_map(|i| top.checked_sub(i * grid)).collect();
                    let got = trail.answer(len, &near);
                    assert!(got.is_some(), "{k}: cut {cut}, grid {grid}: {near:?}");
                    placed += 1;
                    progressive_placed += usize::from(progressive);
                    // Every grid point and block-map boundary it answers for.
                    let bounds = crate::carve::geometry::block_map_boundaries(1024, len)
                        .flat_map(|b| [b, b - grid]);
                    let points = (0..len).step_by(grid as usize).chain(bounds);
                    let at = format!("{k}: cut {cut}, grid {grid}");
                    compared += trail_equals_captures(&trail, src, resume, points, &at);
                }
            }
        }
    }
    assert!(
        placed >= 20 && compared >= 200 && progressive_placed >= 8,
        "{placed} placed ({progressive_placed} progressive), {compared} compared"
    );
}

/// Asserts that `trail` holds, for each of `points` it answers, the
/// snapshot a capture over `src` takes (resumed from `resume` when
/// given); returns how many it answered.
fn trail_equals_captures(
    trail: &super::Trail,
    src: super::Src,
    resume: Option<&super::Snap>,
    points: impl Iterator<Item = u64>,
    at: &str,
) -> usize {
    use super::{Damage, validate_capture_all, validate_capture_from};
    let mut compared = 0;
    for p in points {
        let Some(mut got) = trail.answer(src.len(), &[p]) else {
            continue;
        };
        let want = match resume {
            Some(sn) => validate_capture_from(src, &mut Damage::default(), sn, &[p]).1,
            None => validate_capture_all(src, &mut Damage::default(), &[p]).1,
        };
        assert_eq!(got.pop(), want.into_iter().next(), "{at}, split {p}");
        compared += 1;
    }
    compared
}

/// Where a scan of a progressive file ends with an end-of-band run (the
/// decode counts the run off at once, [`scan_body`]), a trail still
/// holds the snapshots a capture takes: at every grid point from the
/// scan's last bytes to the next scan's first boundary, for a window
/// cut a little into the next scan (the decode fails there, so the
/// trail covers those bytes).
#[test]
fn a_trail_holds_the_snapshots_at_the_ends_of_scans() {
    use super::{Damage, Src, TrailSpec, validate_trail};
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let noise = XorShift(0x2545_F491_4F6C_DD1D).bytes(4096);
    let (mut ends, mut compared) = (0, 0);
    for f in snapshot_files() {
        if !f.windows(2).any(|m| m == [0xFF, 0xC2]) {
            continue;
        }
        let scans = scan_starts(&f);
        for &(_, body) in &scans {
            // The marker that ends the scan: the first after its
            // entropy-coded data.
            let Some(end) = (body..f.len() - 1)
                .find(|&i| f[i] == 0xFF && !matches!(f[i + 1], 0x00 | 0xD0..=0xD7))
            else {
                break;
            };
            // Cut a little into the next scan's data: its first
            // boundaries settle the grid points up to them.
            let Some(&(_, next_body)) = scans.iter().find(|&&(sos, _)| sos >= end) else {
                continue;
            };
            let cut = (next_body + 256).min(f.len());
            let w = [&f[..cut], &noise[..]].concat();
            let sl = Slice(&w);
            let src = Src::new(&sl, 0, NO_LIMIT);
            let spec = TrailSpec {
                grid: 8,
                span: 4 * 8 + 1024,
                block_map: None,
            };
            let (_, trail) = validate_trail(src, &mut Damage::default(), None, spec);
            let Some(trail) = trail else { continue };
            ends += 1;
            let points = (end.saturating_sub(96) as u64..next_body as u64 + 16).step_by(8);
            compared +=
                trail_equals_captures(&trail, src, None, points, &format!("scan end {end}"));
        }
    }
    assert!(
        ends >= 10 && compared >= 40,
        "{ends} scan ends, {compared} compared"
    );
}

/// A wrong split joined to the picture's own later data (or earlier:
/// the decode's MCU count behind or ahead of the bytes it decodes)
/// decodes in step with a kept decode of the picture for megabytes: it
/// goes on from the kept decode's mark near its end ([`super::memo::Shifted`])
/// with the verdict, the damage and the trail's snapshots of a decode of
/// every byte; joined to a copy whose bytes stop being the kept
/// decode's (a marker written into them), no further than that.
#[test]
fn a_split_joined_to_the_pictures_own_data_goes_on_from_a_kept_mark_alike() {
    use super::{Damage, ScanMemo, Src, capture_snaps, validate, validate_resume, validate_trail};
    use crate::carve::fragments::TwoRuns;
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    let p = std::fs::read(dir.join("IMG_20200124_231153.jpg")).unwrap();
    let mut rng = XorShift(7);
    let noise: Vec<u8> = (0..1 << 20).map(|_| rng.next_u64() as u8).collect();
    let n = p.len() as u64;
    // The picture, then copies of it with two bytes of the entropy-coded
    // data changed (where the bytes stop being the kept decode's).
    let changed: Vec<u64> = (0..4)
        .map(|_| 300_000 + rng.next_u64() % (n - 320_000))
        .collect();
    let mut img = p.clone();
    for &q in &changed {
        let mut copy = p.clone();
        // (A marker where none may be: the decode breaks there.)
        copy[q as usize..q as usize + 2].copy_from_slice(&[0xFF, 0x01]);
        img.extend_from_slice(&copy);
    }
    img.extend_from_slice(&noise);
    let sl = Slice(&img);
    let memo = std::sync::Arc::new(ScanMemo::default());
    let whole = Src::new(&sl, 0, NO_LIMIT);
    assert_eq!(
        validate(whole.with_context(&memo_cx(&memo, &sl))),
        validate(whole)
    );
    let spec = crate::carve::fragments::jpeg_trail_spec(4096, Some(4096));
    let (mut jumped, mut compared) = (0, 0);
    // Splits at the ext2 block-map boundaries and at random, continued
    // from the picture's own data later or earlier.
    let fixed = [
        (49152, 274432),
        (49152, 1_000_000),
        (851968, 2_039_808),
        (630784, 1_800_000),
        (1_500_000, 600_000),
        (300_000, 90_000),
        (200_000, 200_000 + 4096 * 37),
    ];
    let random: Vec<(u64, u64)> = (0..16)
        .map(|_| {
            (
                16384 + rng.next_u64() % (n - 400_000),
                16384 + rng.next_u64() % (n - 300_000),
            )
        })
        .collect();
    // Continued from a changed copy, before the change.
    let into_changed = changed.iter().enumerate().flat_map(|(i, &q)| {
        let copy = (i as u64 + 1) * n;
        [
            (49152, copy + q.saturating_sub(900_000).max(20_000)),
            (49152, copy + q - 200_000),
            (q / 2, copy + q / 3),
        ]
    });
    let pairs: Vec<(u64, u64)> = fixed
        .into_iter()
        .chain(random)
        .chain(into_changed)
        .collect();
    let mut jumped_changed = 0;
    for (split, cont) in pairs {
        let j = TwoRuns::new(&sl, 0, split, cont, n + (1 << 20));
        let src = Src::new(&j, 0, NO_LIMIT);
        let at = format!("split {split}, continued from {cont} (changed at {changed:?})");
        let Some(Some(snap)) = capture_snaps(src, None, &[split]).pop() else {
            panic!("{at}: no snapshot");
        };
        let mut d0 = Damage::default();
        let plain = validate_resume(src, &mut d0, &snap);
        let seen = memo.shifts();
        let mut d1 = Damage::default();
        let memoised = validate_resume(src.with_context(&memo_cx(&memo, &sl)), &mut d1, &snap);
        assert_eq!((&memoised, d1), (&plain, d0), "{at}");
        // As a search's proof: leaving a trail.
        let mut d2 = Damage::default();
        let (v, trail) = validate_trail(
            src.with_context(&memo_cx(&memo, &sl)),
            &mut d2,
            Some(&snap),
            spec,
        );
        assert_eq!((&v, d2), (&plain, d0), "{at}, trail");
        jumped += usize::from(memo.shifts() >= seen + 2);
        jumped_changed += usize::from(memo.shifts() >= seen + 2 && cont >= n);
        if let (Some(trail), true) = (trail, d2.damaged) {
            let top = d2.fail_at / 4096 * 4096;
            let bounds = crate::carve::geometry::block_map_boundaries(4096, d2.fail_at)
                .flat_map(|b| [b, b - 4096]);
            let points = (top.saturating_sub(24 * 4096)..=top + 4096)
                .step_by(4096)
                .chain(bounds);
            compared += trail_equals_captures(&trail, src, Some(&snap), points, &at);
        }
    }
    assert!(
        jumped >= 14 && jumped_changed >= 1,
        "{jumped} decodes went on from a kept mark, {jumped_changed} of a changed copy"
    );
    assert!(compared >= 300, "{compared} snapshots compared");
}

/// The scan memo gives every verdict a decode gives, for a baseline and
/// a progressive file: a copy with other header bytes (the same scans) is
/// answered from the memo; copies with one byte of a scan changed
/// (anywhere, in a later scan of the progressive file, at the end
/// marker), cut short by the window, or followed by other bytes get the
/// verdict their own decode gives.
#[test]
fn memoised_scans_give_the_verdicts_of_a_decode() {
    use super::{ScanMemo, Src, validate};
    use crate::carve::validators::ByteReader;
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    for name in ["debian_logo.jpg", "d-debian.jpg"] {
        let f = std::fs::read(dir.join(name)).unwrap();
        let (_, body) = scan_starts(&f)[0];
        let mut copy = f[..2].to_vec();
        copy.extend_from_slice(&[0xFF, 0xFE, 0, 6, b'c', b'o', b'p', b'y']);
        copy.extend_from_slice(&f[2..]);
        let mut variants = vec![f.clone(), copy.clone()];
        let n = f.len();
        for at in [
            body,
            body + 1,
            body + 777,
            (body + n) / 2,
            n * 3 / 4,
            n - 3,
            n - 2,
            n - 1,
        ] {
            for x in [0x00, 0x5A, 0xFF] {
                let mut v = f.clone();
                if v[at] != x {
                    v[at] = x;
                    variants.push(v);
                }
            }
        }
        let mut junk_after = f.clone();
        junk_after.extend_from_slice(&[0x12; 300]);
        variants.push(junk_after);
        let slot = n.next_power_of_two() * 2;
        // The file stored in two pieces (as a file system lays it out),
        // twice: the second time with a byte of its second piece changed.
        let split = body + (n - body) / 3;
        let mut changed = f.clone();
        changed[split + (n - split) / 2] ^= 0x5A;
        let pieces: [&[u8]; 4] = [&f[..split], &f[split..], &f[..split], &changed[split..]];
        let mut img = vec![0x33u8; slot * (variants.len() + pieces.len() + 1)];
        for (i, v) in variants.iter().enumerate() {
            img[i * slot..i * slot + v.len()].copy_from_slice(v);
        }
        let piece_at = |k: usize| (variants.len() + k) * slot;
        for (k, p) in pieces.iter().enumerate() {
            img[piece_at(k)..piece_at(k) + p.len()].copy_from_slice(p);
        }
        // Last, a copy the image cuts inside its scans.
        let cut_at = img.len() - (n - body) / 2 - body;
        img.truncate(cut_at + body + (n - body) / 2);
        let kept = img.len() - cut_at;
        img[cut_at..].copy_from_slice(&f[..kept]);
        let memo = std::sync::Arc::new(ScanMemo::default());
        let sl = Slice(&img);
        let starts = (0..variants.len())
            .map(|i| (i * slot) as u64)
            .chain([cut_at as u64]);
        for start in starts {
            let src = Src::new(&sl, start, NO_LIMIT);
            let plain = validate(src);
            let memoised = validate(src.with_context(&memo_cx(&memo, &sl)));
            assert_eq!(memoised, plain, "{name}: variant at {start}");
        }
        let (hits, bytes) = memo.hits();
        // The copy with a comment added, and the file followed by other
        // bytes (every scan of each, for the progressive file).
        assert!(hits >= 2, "{name}: {hits} scans answered from the memo");
        assert!(bytes as usize >= n - body, "{name}: {bytes} bytes");
        // Views of the image (the file joined from its pieces, as a file
        // system lays it out) keep their outcomes and are answered from
        // the memo where their bytes repeat a decode's, wherever those
        // lie: each gets the verdict a decode of its bytes gives. A fresh
        // memo: the first view's outcome is kept over its two pieces,
        // the second view differs in its second piece, and the file
        // stored whole repeats the first.
        let views = crate::carve::fragments::TwoRuns::new;
        let memo2 = std::sync::Arc::new(ScanMemo::default());
        let whole = Src::new(&sl, 0, NO_LIMIT);
        // (A progressive file's scans before the changed byte repeat.)
        for (k, repeats) in [(Some(0), Some(false)), (Some(2), None), (None, Some(true))] {
            let before = memo2.hits().0;
            let (plain, memoised) = match k {
                Some(k) => {
                    let view = views(
                        &sl,
                        piece_at(k) as u64,
                        split as u64,
                        piece_at(k + 1) as u64,
                        u64::MAX,
                    );
                    let mut bytes = vec![0u8; view.len() as usize];
                    assert_eq!(view.read_at(0, &mut bytes), bytes.len());
                    (
                        validate(Src::new(&Slice(&bytes), 0, NO_LIMIT)),
                        validate(Src::new(&view, 0, NO_LIMIT).with_context(&memo_cx(&memo2, &sl))),
                    )
                }
                None => (
                    validate(whole),
                    validate(whole.with_context(&memo_cx(&memo2, &sl))),
                ),
            };
            assert_eq!(memoised, plain, "{name}: view {k:?}");
            if let Some(r) = repeats {
                assert_eq!(memo2.hits().0 > before, r, "{name}: view {k:?}");
            }
        }
        // And without a memo, nothing is kept or answered; nor for a
        // window of another reader (the memo's offsets are of the image's).
        let before = memo.hits();
        let _ = validate(Src::new(&sl, slot as u64, NO_LIMIT));
        let copy_of_image = img.clone();
        let other = Slice(&copy_of_image);
        let _ =
            validate(Src::new(&other, slot as u64, NO_LIMIT).with_context(&memo_cx(&memo, &sl)));
        assert_eq!(memo.hits(), before);
    }
}

/// True when `trail` answers for `split` (asserting that its snapshot is
/// the one a capture of `src` takes there).
fn answers_as_captured(trail: &super::super::TrailRef, src: super::Src, split: u64) -> bool {
    let Some(mut one) = trail.0.answer(src.len(), &[split]) else {
        return false;
    };
    let capture = super::validate_capture_all(src, &mut super::Damage::default(), &[split]).1;
    assert_eq!(one.pop(), capture.into_iter().next(), "split {split}");
    true
}

/// A history known to equal a memo's `last` is compared with and
/// restored from a memo entry's as a word-by-word look does, skipping
/// only the components the entry shares with `last` (and a component
/// that only looks like `last`'s, not shared, is still compared).
#[test]
fn a_history_known_equal_to_the_memos_last_skips_only_shared_components() {
    use super::frame::{History, MemoHistory};
    use super::memo::{memo_history, memo_history_is, memo_history_restore};
    use std::sync::Arc;
    let comps = |seed: u64| -> Vec<Vec<u64>> {
        (0..3u64)
            .map(|c| (0..50 + 10 * c).map(|i| (i * 31 + c + seed) % 7).collect())
            .collect()
    };
    let h: History = Some(comps(0));
    let last: MemoHistory = memo_history(&h, &None);
    // An entry whose history before it is `last` (all shared), one with
    // component 1 equal but not shared, one with component 2 changed.
    let shared = last.clone();
    let mut copied = last.clone();
    if let Some(c) = copied.as_mut() {
        c[1] = Arc::new((*c[1]).clone());
    }
    let mut changed = last.clone();
    if let Some(c) = changed.as_mut() {
        c[2] = Arc::new(c[2].iter().map(|w| w ^ 1).collect());
    }
    for m in [&shared, &copied, &changed] {
        assert_eq!(
            memo_history_is(m, &h, Some(&last)),
            memo_history_is(m, &h, None),
        );
    }
    assert!(memo_history_is(&copied, &h, Some(&last)));
    assert!(!memo_history_is(&changed, &h, Some(&last)));
    // Restored: the changed component copied, the shared ones kept.
    let mut fast = h.clone();
    memo_history_restore(&mut fast, &changed, Some(&last));
    let mut slow = h.clone();
    memo_history_restore(&mut slow, &changed, None);
    assert_eq!(fast, slow);
    assert_ne!(fast, h);
    // (What it skips it takes as equal: a history that is not `last`
    // keeps its own words in the shared components.)
    let mut other: History = Some(comps(3));
    memo_history_restore(&mut other, &changed, Some(&last));
    assert_eq!(
        other.as_ref().map(|c| c[0].clone()),
        Some(comps(3)[0].clone())
    );
    assert_eq!(
        other.as_ref().map(|c| c[2].clone()),
        changed.as_ref().map(|c| (*c[2]).clone())
    );
}

/// An ext2/3 file's first block-map splits (4 KiB blocks: 44 and 48
/// KiB) do not hold a broken copy's decode under the memo back there:
/// it resumes from a mark near where the copy breaks, 1.9 MB on, and
/// its trail still answers those splits (captured afterwards, as a
/// capture takes them) and the ones near the break.
#[test]
fn a_broken_copy_resumes_past_the_first_block_map_splits() {
    use super::{ScanMemo, Src, validate};
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    let f = std::fs::read(dir.join("IMG_20200124_231153.jpg")).unwrap();
    let n = f.len();
    let cut = n * 3 / 4;
    let noise = XorShift(0x9E37_79B9_7F4A_7C15).bytes(64 * 1024);
    let copy = [&f[..cut], &noise[..]].concat();
    let slot = (n + noise.len()).next_power_of_two();
    let mut img = vec![0x33u8; slot * 2];
    img[..n].copy_from_slice(&f);
    img[slot..slot + copy.len()].copy_from_slice(&copy);
    let sl = Slice(&img);
    let memo = std::sync::Arc::new(ScanMemo::default());
    let whole = Src::new(&sl, 0, NO_LIMIT);
    assert_eq!(
        validate(whole.with_context(&memo_cx(&memo, &sl))),
        validate(whole)
    );
    let at = slot as u64;
    let src = Src::new(&sl, at, NO_LIMIT);
    let spec = crate::carve::fragments::jpeg_trail_spec(4096, Some(4096));
    let before = memo.resumes();
    let got = validate(src.with_context(&memo_cx(&memo, &sl).with_jpeg_trail(
        spec,
        (&sl, at),
        &trail_budget(),
    )));
    let bare = got.clone().map(|v| v.without_trail());
    assert_eq!(bare, validate(src));
    let (resumes, skipped) = memo.resumes();
    assert_eq!(resumes, before.0 + 1, "not resumed from a mark");
    assert!(
        skipped - before.1 > cut as u64 / 2,
        "resumed only {} bytes in",
        skipped - before.1
    );
    let v = got.expect("a verdict");
    let trail = v.trail().cloned().expect("a trail");
    for split in [45056, 49152] {
        assert!(answers_as_captured(&trail, src, split), "split {split}");
    }
    let top = v.broke_at().expect("broken") / 4096 * 4096;
    for split in (0..3).filter_map(|k| top.checked_sub(k * 4096)) {
        assert!(answers_as_captured(&trail, src, split), "split {split}");
    }
}

/// A copy that repeats a sequential scan only up to some byte (cut and
/// followed by other data, as a fragmented copy read contiguously; one
/// byte changed; behind other header bytes) resumes from the memo's
/// last usable mark and gets the verdict a decode of it gives. A trail
/// left by such a decode answers every split near where the decode
/// stopped with the snapshot a capture takes, and none below where it
/// resumed. Two validations of copies at once: one decodes, the other
/// takes its outcome.
#[test]
fn a_copy_repeating_a_scan_in_part_resumes_from_a_mark() {
    use super::{
        Damage, ScanMemo, Src, validate, validate_capture, validate_capture_from, validate_resume,
        validate_trail,
    };
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    let f = std::fs::read(dir.join("IMG_20200124_231153.jpg")).unwrap();
    let n = f.len();
    assert!(f.windows(2).any(|m| m == [0xFF, 0xC0]), "a baseline file");
    let noise = XorShift(0x2545_F491_4F6C_DD1D).bytes(64 * 1024);
    let mut commented = f[..2].to_vec();
    commented.extend_from_slice(&[0xFF, 0xFE, 0, 6, b'c', b'o', b'p', b'y']);
    commented.extend_from_slice(&f[2..]);
    // (variant, resumes from a mark)
    let mut variants: Vec<(Vec<u8>, bool)> = Vec::new();
    for p in [n * 2 / 5, n * 7 / 10, n - 5000] {
        variants.push(([&f[..p], &noise[..]].concat(), true));
        let mut one = f.clone();
        one[p] ^= 0x5A;
        variants.push((one, true));
        let mut c = commented.clone();
        c[p + 8] ^= 0x21;
        variants.push((c, true));
    }
    // (Breaks before the first mark a trail may use.)
    variants.push(([&f[..n / 50], &noise[..]].concat(), false));
    // Breaking a few bytes past a mark (the picture's scan data start
    // + k·32 KiB): inside the MCU row the decode resumes in.
    let (_, body) = *scan_starts(&f).last().unwrap();
    for (k, resumes) in [(3, false), (20, true)] {
        let p = body + k * 32 * 1024 + 200;
        variants.push(([&f[..p], &noise[..]].concat(), resumes));
    }
    let slot = (n + noise.len()).next_power_of_two();
    let mut img = vec![0x33u8; slot * (variants.len() + 3)];
    img[..n].copy_from_slice(&f);
    for (i, (v, _)) in variants.iter().enumerate() {
        img[(i + 1) * slot..(i + 1) * slot + v.len()].copy_from_slice(v);
    }
    let sl = Slice(&img);
    let mut checked = 0;
    for block_map in [None, Some(1024)] {
        for with_a_trail in [false, true] {
            let memo = std::sync::Arc::new(ScanMemo::default());
            let whole = Src::new(&sl, 0, NO_LIMIT);
            assert_eq!(
                validate(whole.with_context(&memo_cx(&memo, &sl))),
                validate(whole)
            );
            for (i, (_, resumes)) in variants.iter().enumerate() {
                let at = ((i + 1) * slot) as u64;
                let src = Src::new(&sl, at, NO_LIMIT);
                // As a fragment search's proof asks (4 KiB clusters).
                let spec = crate::carve::fragments::jpeg_trail_spec(4096, block_map);
                let grid = spec.grid;
                let before = memo.resumes().0;
                let got = if with_a_trail {
                    validate(src.with_context(&memo_cx(&memo, &sl).with_jpeg_trail(
                        spec,
                        (&sl, at),
                        &trail_budget(),
                    )))
                } else {
                    validate(src.with_context(&memo_cx(&memo, &sl)))
                };
                let want = validate(src);
                let bare = got.clone().map(|v| v.without_trail());
                assert_eq!(
                    bare, want,
                    "variant {i}, trail {with_a_trail}, {block_map:?}"
                );
                let resumed = memo.resumes().0 > before;
                if *resumes || !with_a_trail {
                    assert!(resumed, "variant {i}: not resumed");
                } else {
                    assert!(!resumed, "variant {i}: resumed");
                }
                let Some(trail) = got.as_ref().and_then(|v| v.trail().cloned()) else {
                    continue;
                };
                // Near the failure: every split the search places.
                let fail = got.as_ref().and_then(|v| v.broke_at()).unwrap();
                let top = fail / grid * grid;
                let near: Vec<u64> = (0..3).filter_map(|k| top.checked_sub(k * grid)).collect();
                assert!(
                    trail.0.answer(src.len(), &near).is_some(),
                    "variant {i}: {near:?}"
                );
                // The last block-map boundary before the failure (a
                // split the search places too) and the cluster before it.
                if let Some(bs) = block_map
                    && let Some(b) = crate::carve::geometry::block_map_boundaries(bs, fail)
                        .filter(|&b| b >= grid)
                        .last()
                {
                    assert!(
                        trail.0.answer(src.len(), &[b, b - grid]).is_some(),
                        "variant {i}: boundary {b}"
                    );
                }
                // Every split it answers for near there and at the
                // block-map boundaries, as a capture takes it; none far
                // below the failure when the decode resumed past it.
                let bounds = crate::carve::geometry::block_map_boundaries(1024, fail)
                    .flat_map(|b| [b, b - grid]);
                let near = (top.saturating_sub(24 * grid)..=top + grid).step_by(grid as usize);
                let low = [grid, 2 * grid, (n as u64 / 20) / grid * grid];
                for p in near.chain(bounds).chain(low) {
                    if answers_as_captured(&trail, src, p) {
                        assert!(
                            !(*resumes && low.contains(&p)),
                            "variant {i}: split {p} answered"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked >= 100, "{checked} snapshots compared");
    // A decode resumed from a snapshot (a fragment search's) asks the
    // memo too: the verdict of a decode, and a copy repeating the kept
    // scan past the snapshot is answered or resumed further on.
    let memo = std::sync::Arc::new(ScanMemo::default());
    let whole = Src::new(&sl, 0, NO_LIMIT);
    assert_eq!(
        validate(whole.with_context(&memo_cx(&memo, &sl))),
        validate(whole)
    );
    let (mut jumped, mut trailed_jumps) = (0, 0);
    for (i, _) in variants.iter().enumerate() {
        let at = ((i + 1) * slot) as u64;
        let src = Src::new(&sl, at, NO_LIMIT);
        let Some(snap) = validate_capture(src, &mut Damage::default(), n as u64 / 8).1 else {
            continue;
        };
        let (mut d0, mut d1) = (Damage::default(), Damage::default());
        let plain = validate_resume(src, &mut d0, &snap);
        let seen = memo.hits().0 + memo.resumes().0;
        let memoised = validate_resume(src.with_context(&memo_cx(&memo, &sl)), &mut d1, &snap);
        assert_eq!((memoised, d1), (plain.clone(), d0), "resumed variant {i}");
        jumped += usize::from(memo.hits().0 + memo.resumes().0 > seen);
        // Leaving a trail (block maps of 1 KiB: boundaries every 256
        // KiB), as a search's proof does: the trail answers near where
        // the decode stops as a capture resumed from the snapshot does.
        let spec = crate::carve::fragments::jpeg_trail_spec(4096, Some(1024));
        let mut d2 = Damage::default();
        let seen = memo.resumes().0;
        let (v, trail) = validate_trail(
            src.with_context(&memo_cx(&memo, &sl)),
            &mut d2,
            Some(&snap),
            spec,
        );
        assert_eq!((v, d2), (plain.clone(), d0), "resumed variant {i}, trail");
        let (Some(trail), true) = (trail, d2.damaged) else {
            continue;
        };
        trailed_jumps += usize::from(memo.resumes().0 > seen);
        let top = d2.fail_at / 4096 * 4096;
        let near: Vec<u64> = (0..3).filter_map(|k| top.checked_sub(k * 4096)).collect();
        assert!(
            trail.answer(src.len(), &near).is_some(),
            "variant {i}: {near:?}"
        );
        let bounds = crate::carve::geometry::block_map_boundaries(1024, d2.fail_at)
            .flat_map(|b| [b, b - 4096]);
        for w in (top.saturating_sub(24 * 4096)..=top)
            .step_by(4096)
            .chain(bounds)
        {
            if let Some(mut one) = trail.answer(src.len(), &[w]) {
                let capture = validate_capture_from(src, &mut Damage::default(), &snap, &[w]).1;
                assert_eq!(
                    one.pop(),
                    capture.into_iter().next(),
                    "variant {i}, split {w}"
                );
            }
        }
    }
    assert!(jumped >= 8, "{jumped} resumed decodes answered or moved on");
    assert!(
        trailed_jumps >= 3,
        "{trailed_jumps} trailed decodes moved on"
    );
    // A progressive copy broken in a later scan: the scans before it are
    // the memo's answers, and the trail still answers near the failure.
    let p = std::fs::read(dir.join("IMG_1054.jpg")).unwrap();
    let pn = p.len();
    let pslot = (pn + noise.len()).next_power_of_two();
    let cuts = [pn / 2, pn * 3 / 5, pn * 7 / 10, pn * 4 / 5, pn * 9 / 10];
    let mut pimg = vec![0x33u8; pslot * (cuts.len() + 1)];
    pimg[..pn].copy_from_slice(&p);
    for (i, &cut) in cuts.iter().enumerate() {
        let v = [&p[..cut], &noise[..]].concat();
        pimg[(i + 1) * pslot..(i + 1) * pslot + v.len()].copy_from_slice(&v);
    }
    let psl = Slice(&pimg);
    let memo = std::sync::Arc::new(ScanMemo::default());
    let whole = Src::new(&psl, 0, NO_LIMIT);
    assert_eq!(
        validate(whole.with_context(&memo_cx(&memo, &psl))),
        validate(whole)
    );
    let (mut answered, mut compared) = (0, 0);
    for i in 0..cuts.len() {
        let at = ((i + 1) * pslot) as u64;
        let src = Src::new(&psl, at, NO_LIMIT);
        let spec = crate::carve::fragments::jpeg_trail_spec(4096, None);
        let grid = spec.grid;
        let before = memo.hits().0;
        let got = validate(src.with_context(&memo_cx(&memo, &psl).with_jpeg_trail(
            spec,
            (&psl, at),
            &trail_budget(),
        )));
        assert!(memo.hits().0 > before, "cut {i}: no scan answered");
        let bare = got.clone().map(|v| v.without_trail());
        assert_eq!(bare, validate(src), "progressive cut {i}");
        let Some(v) = got else { continue };
        let (Some(trail), Some(fail)) = (v.trail().cloned(), v.broke_at()) else {
            continue;
        };
        let top = fail / grid * grid;
        let near: Vec<u64> = (0..3).filter_map(|k| top.checked_sub(k * grid)).collect();
        answered += usize::from(trail.0.answer(src.len(), &near).is_some());
        for w in (top.saturating_sub(24 * grid)..=top + grid).step_by(grid as usize) {
            compared += usize::from(answers_as_captured(&trail, src, w));
        }
    }
    assert!(
        answered >= 3 && compared >= 20,
        "{answered} answered, {compared} compared"
    );
    // Two copies validated at once: one decode.
    let memo = std::sync::Arc::new(ScanMemo::default());
    let copy_at = ((variants.len() + 1) * slot) as u64;
    img[copy_at as usize..copy_at as usize + commented.len()].copy_from_slice(&commented);
    let sl = Slice(&img);
    let verdicts: Vec<_> = std::thread::scope(|sc| {
        [0, copy_at]
            .map(|at| {
                let (memo, sl) = (&memo, &sl);
                sc.spawn(move || {
                    validate(Src::new(sl, at, NO_LIMIT).with_context(&memo_cx(memo, sl)))
                })
            })
            .map(|h| h.join().unwrap())
            .to_vec()
    });
    for (v, at) in verdicts.iter().zip([0, copy_at]) {
        assert_eq!(*v, validate(Src::new(&sl, at, NO_LIMIT)));
    }
    // (The picture's one scan: decoded once.)
    assert_eq!(memo.hits().0, 1, "{:?}", memo.hits());
}

/// C source of a small libjpeg encoder used by [`libjpeg_variants`].
const GEN_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>
int main(int argc, char **argv) {
  if (argc < 11) return 2;
  const char *out = argv[1];
  int w = atoi(argv[2]), h = atoi(argv[3]), nc = atoi(argv[4]);
  int hs = atoi(argv[5]), vs = atoi(argv[6]), prog = atoi(argv[7]);
  int rst = atoi(argv[8]), opt = atoi(argv[9]), arith = atoi(argv[10]);
  int q = argc > 11 ? atoi(argv[11]) : 85;
  struct jpeg_compress_struct c; struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e); jpeg_create_compress(&c);
  FILE *f = fopen(out, "wb"); if (!f) return 3;
  jpeg_stdio_dest(&c, f);
  c.image_width = w; c.image_height = h; c.input_components = nc;
  c.in_color_space = nc == 1 ? JCS_GRAYSCALE : nc == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, q, TRUE);
  if (nc == 3) { c.comp_info[0].h_samp_factor = hs; c.comp_info[0].v_samp_factor = vs; }
  if (prog) jpeg_simple_progression(&c);
  if (rst > 0) c.restart_interval = rst; else if (rst < 0) c.restart_in_rows = -rst;
  c.optimize_coding = opt ? TRUE : FALSE;
  c.arith_code = arith ? TRUE : FALSE;
  jpeg_start_compress(&c, TRUE);
  unsigned char *row = malloc(w * nc);
  unsigned s = 12345;
  while (c.next_scanline < c.image_height) {
int y = c.next_scanline;
for (int x = 0; x < w * nc; x++) {
  s = s * 1103515245 + 12345;
  int v = (x * 3 + y * 5 + ((x / 7) ^ (y / 5)) * 11) & 255;
  if (((x / 13) + (y / 9)) % 4 == 0) v = (s >> 16) & 255; /* noisy patches */
  row[x] = v;
}
JSAMPROW r = row; jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c); fclose(f); jpeg_destroy_compress(&c);
  return 0;
}
"#;

/// JPEGs written by the system's libjpeg in many configurations
/// (sampling factors, grey/RGB/CMYK, progressive, restart intervals,
/// optimised tables, arithmetic coding, odd sizes): each must be Complete
/// with its exact length, and each cut in its scan data and followed by
/// foreign bytes and an EOI must not be. Skipped without cc + libjpeg.
/// Builds [`GEN_C`] in a fresh temporary directory `tag`; returns the
/// directory and the executable, `None` (directory removed) without cc
/// or libjpeg.
fn libjpeg_gen(tag: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let dir = std::env::temp_dir().join(format!("gpucarve-{tag}-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let c = dir.join("gen.c");
    let exe = dir.join("gen");
    std::fs::write(&c, GEN_C).ok()?;
    let built = std::process::Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .arg("-ljpeg")
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        let _ = std::fs::remove_dir_all(&dir);
        return None;
    }
    Some((dir, exe))
}

/// Generator arguments (after the output path) of [`libjpeg_variants`]:
/// width height components h v progressive restart optimise arith [q].
const LIBJPEG_CONFIGS: [&str; 13] = [
    "64 48 3 2 2 0 0 0 0",
    "65 49 3 2 2 1 0 0 0",
    "33 17 1 1 1 0 5 0 0",
    "33 17 1 1 1 1 3 0 0",
    "100 75 3 2 1 0 -1 1 0",
    "100 75 3 2 1 1 -2 1 0",
    "80 80 3 1 1 1 0 1 0 95",
    "80 80 3 4 1 0 0 0 0",
    "40 40 4 1 1 0 0 0 0",
    "40 40 4 1 1 1 0 0 0",
    "257 129 3 2 2 1 7 1 0 50",
    "64 64 3 2 2 0 0 0 1",
    "300 200 3 1 2 1 0 0 0 100",
];

#[test]
fn libjpeg_variants() {
    let Some((dir, exe)) = libjpeg_gen("jpeg") else {
        eprintln!("cc or libjpeg not available; skipped");
        return;
    };
    let configs = LIBJPEG_CONFIGS;
    let mut files = Vec::new();
    for (i, args) in configs.iter().enumerate() {
        let out = dir.join(format!("{i}.jpg"));
        let ok = std::process::Command::new(&exe)
            .arg(&out)
            .args(args.split(' '))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "generator failed for {args}");
        files.push(out);
    }
    let (total, exact) = check_real("jpeg", &files);
    assert_eq!(total, exact);
    for (f, args) in files.iter().zip(configs) {
        let d = std::fs::read(f).unwrap();
        let arith = args.ends_with(" 1");
        let sd = scan_data(&d);
        for cut in [sd + 7, sd + (d.len() - sd) / 2] {
            let mut bad = d[..cut].to_vec();
            bad.extend((0..2000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
            bad.extend_from_slice(&[0xFF, 0xD9]);
            let v = run("jpeg", &bad).unwrap();
            // Arithmetic-coded scans are only marker-walked.
            if !arith {
                assert_ne!(
                    v.status,
                    Status::Complete,
                    "{args} cut at {cut}: {:?}",
                    v.notes
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The crate's deterministic pseudo-random sequence (splitmix64).
use crate::synth::SplitMix as Rng;

/// `f` damaged the way a carver meets JPEGs: bits flipped, an `FF`
/// written, a cluster deleted, replaced or inserted (zeros, noise or
/// another file's bytes), or cut and followed by another file's tail.
/// Only bytes at or after `from` change.
fn mutate(f: &[u8], others: &[Vec<u8>], from: usize, rng: &mut Rng) -> Vec<u8> {
    let mut v = f.to_vec();
    let len = v.len();
    if from >= len {
        return v;
    }
    let at = from + rng.below(len - from);
    let cluster = [512, 1024, 4096][rng.below(3)];
    let other = &others[rng.below(others.len())];
    let piece = |rng: &mut Rng| -> Vec<u8> {
        match rng.below(3) {
            0 => vec![0; cluster],
            1 => (0..cluster).map(|_| rng.next_u64() as u8).collect(),
            _ => {
                let o = rng.below(other.len().saturating_sub(cluster).max(1));
                other[o.min(other.len())..(o + cluster).min(other.len())].to_vec()
            }
        }
    };
    match rng.below(7) {
        0 => {
            for _ in 0..1 + rng.below(3) {
                let i = from + rng.below(len - from);
                v[i] ^= 1 << rng.below(8);
            }
        }
        1 => {
            v[at] = 0xFF;
            if at + 1 < len && rng.below(2) == 0 {
                v[at + 1] = [0x00, 0xD0, 0xD1, 0xD9, 0xC4, 0xDA, 0xFF][rng.below(7)];
            }
        }
        2 => {
            let end = (at + cluster).min(len);
            v.drain(at..end);
        }
        3 => {
            let p = piece(rng);
            let end = (at + p.len()).min(len);
            v.splice(at..end, p[..end - at].iter().copied());
        }
        4 => {
            let p = piece(rng);
            v.splice(at..at, p);
        }
        5 => {
            // Aligned like a file system cluster of the file.
            let a = at - at % cluster;
            let a = a.max(from);
            let p = piece(rng);
            let end = (a + p.len()).min(len);
            v.splice(a..end, p[..end - a].iter().copied());
        }
        _ => {
            v.truncate(at);
            let o = rng.below(other.len());
            v.extend_from_slice(&other[o..]);
            v.extend_from_slice(&[0xFF, 0xD9]);
        }
    }
    v
}

/// The table-driven decoder gives exactly the verdicts (status, length,
/// subtype, notes), damage and snapshots of the decoder it replaced
/// ([`super::reference`], this file as of
/// commit 4389248), over: every JPEG of `corpora/samples`, JPEGs found
/// under `/usr/share`, synthetic baseline/progressive files and libjpeg
/// variants (progressive, restart intervals, sampling factors, when cc
/// and libjpeg are there); each whole, inside an image after junk, cut
/// at many points (by the image's end and by `max_len`), and mutated
/// (bit flips, `FF`s, deleted / replaced / inserted clusters of zeros,
/// noise or other files' bytes, cut and joined to another file), the
/// mutants also cut; and snapshots: captures at several splits of the
/// files and mutants (verdict, damage, whether a snapshot is taken, its
/// split and offset), then resumes over windows equal before the split
/// (the file, cut, followed by noise, by a later part of itself, by
/// another file, mutated after the split). Where a verdict is partial,
/// [`super::validate`]'s lenient retry (foreign bytes before a marker)
/// answers as the reference's, which skips them byte by byte.
#[test]
fn fast_decoder_verdicts_equal_the_reference() {
    use super::reference as old;
    use super::{Damage, Src, validate_capture, validate_probe, validate_resume};
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};

    // (name, bytes)
    let mut files: Vec<(String, Vec<u8>)> = vec![
        ("sample".into(), sample()),
        ("progressive".into(), progressive()),
        ("three scans".into(), jpeg(app0, 3)),
    ];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    let manifest = std::fs::read_to_string(root.join("MANIFEST.tsv")).unwrap();
    let mut corpus = 0;
    for line in manifest.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.get(1) == Some(&"jpeg") {
            files.push((cols[0].into(), std::fs::read(root.join(cols[0])).unwrap()));
            corpus += 1;
        }
    }
    assert!(corpus >= 6, "corpus JPEGs missing");
    for p in real_files(&["/usr/share"], &[".jpg", ".jpeg"], 40) {
        if let Ok(d) = std::fs::read(&p) {
            files.push((p.display().to_string(), d));
        }
    }
    if let Some((dir, exe)) = libjpeg_gen("jpeg-ref") {
        let more = [
            "512 384 3 2 2 1 0 1 0 90",
            "640 480 3 2 2 0 4 0 0 75",
            "333 222 1 1 1 1 2 1 0 98",
            "256 256 3 1 1 1 -1 0 0 100",
        ];
        for (i, args) in LIBJPEG_CONFIGS.iter().chain(&more).enumerate() {
            if args.ends_with(" 1") {
                continue; // arithmetic coding is not decoded
            }
            let out = dir.join(format!("{i}.jpg"));
            let ok = std::process::Command::new(&exe)
                .arg(&out)
                .args(args.split(' '))
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "generator failed for {args}");
            files.push((format!("libjpeg {args}"), std::fs::read(&out).unwrap()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("cc or libjpeg not available: no libjpeg variants");
    }
    files.sort_by(|a, b| a.1.cmp(&b.1));
    files.dedup_by(|a, b| a.1 == b.1);
    let others: Vec<Vec<u8>> = files.iter().map(|f| f.1.clone()).collect();

    let mut cases = 0u64;
    // Both validators over `data` at `start` with `max_len`.
    let mut same = |data: &[u8], start: u64, max_len: u64, what: &dyn Fn() -> String| {
        let sl = Slice(data);
        let src = Src::new(&sl, start, Limits { max_len });
        let (mut d1, mut d2) = (Damage::default(), old::Damage::default());
        let v1 = validate_probe(src, &mut d1);
        let v2 = old::validate_probe(src, &mut d2);
        assert_eq!(v1, v2, "{}", what());
        assert_eq!(
            (d1.damaged, d1.fail_at),
            (d2.damaged, d2.fail_at),
            "{}",
            what()
        );
        // A partial verdict: the lenient retry's answer too (the extras for
        // the fragment search aside).
        if v1.as_ref().is_some_and(|v| v.status == Status::Partial) {
            let said =
                |v: Option<super::Verdict>| v.map(|v| (v.status, v.length, v.subtype, v.notes));
            assert_eq!(
                said(super::validate(src)),
                said(old::validate(src)),
                "{}",
                what()
            );
        }
        cases += 1;
    };
    // Fewer cases unoptimised.
    let scale = if cfg!(debug_assertions) { 4 } else { 1 };
    let mut rng = Rng(0x6A09_E667_F3BC_C908);
    for (name, f) in &files {
        let len = f.len();
        same(f, 0, NO_LIMIT.max_len, &|| format!("{name}: whole"));
        let mut img = b"junk before \xFF\xD8\xFF\xE0".to_vec();
        img.extend_from_slice(f);
        img.extend_from_slice(&[0x55; 700]);
        same(&img, 16, NO_LIMIT.max_len, &|| {
            format!("{name}: in an image")
        });
        // Cut: evenly spaced and random points, by the image's end or by
        // max_len.
        let cuts = 48 / scale;
        for i in 0..cuts {
            let cut = if i % 2 == 0 {
                len * (i + 1) / (cuts + 1)
            } else {
                rng.below(len + 1)
            };
            if i % 4 < 2 {
                same(&f[..cut], 0, NO_LIMIT.max_len, &|| {
                    format!("{name}: cut {cut}")
                });
            } else {
                same(f, 0, cut as u64, &|| format!("{name}: max_len {cut}"));
            }
        }
        // Mutants, some also cut.
        let muts = if len > 1 << 20 { 24 } else { 64 } / scale;
        for i in 0..muts {
            let seed = rng.0;
            let m = mutate(f, &others, 0, &mut rng);
            let what = || format!("{name}: mutant {i} (rng {seed:#x})");
            same(&m, 0, NO_LIMIT.max_len, &what);
            if rng.below(3) == 0 {
                let cut = rng.below(m.len() + 1);
                same(&m[..cut], 0, NO_LIMIT.max_len, &|| {
                    format!("{} cut {cut}", what())
                });
            }
        }
    }

    // Snapshots: capture, then resume over windows that keep the bytes
    // before the split.
    let (mut snaps, mut resumes) = (0u64, 0u64);
    for (name, f) in &files {
        let mut subjects = vec![f.clone()];
        for _ in 0..3 {
            subjects.push(mutate(f, &others, 0, &mut rng));
        }
        let splits = if f.len() > 1 << 20 { 4 } else { 7 };
        for (si, g) in subjects.iter().enumerate() {
            let len = g.len();
            for j in 1..=splits {
                let split = if j % 2 == 0 {
                    len * j / (splits + 1)
                } else {
                    rng.below(len + 1)
                };
                let what = || format!("{name}: subject {si} split {split}");
                let sl = Slice(g);
                let src = Src::new(&sl, 0, NO_LIMIT);
                let (mut d1, mut d2) = (Damage::default(), old::Damage::default());
                let (v1, s1) = validate_capture(src, &mut d1, split as u64);
                let (v2, s2) = old::validate_capture(src, &mut d2, split as u64);
                assert_eq!(v1, v2, "{}", what());
                assert_eq!(
                    (d1.damaged, d1.fail_at),
                    (d2.damaged, d2.fail_at),
                    "{}",
                    what()
                );
                assert_eq!(
                    s1.as_ref().map(|s| (s.split(), s.at())),
                    s2.as_ref().map(|s| (s.split(), s.at())),
                    "{}",
                    what()
                );
                let (Some(s1), Some(s2)) = (s1, s2) else {
                    continue;
                };
                snaps += 1;
                if si > 1 && scale > 1 {
                    continue;
                }
                let head = &g[..split];
                let noise: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
                let later = (split + 4096).min(len);
                let other = &others[rng.below(others.len())];
                let o = rng.below(other.len());
                let windows = [
                    g.clone(),
                    head.to_vec(),
                    [head, &noise[..]].concat(),
                    [head, &g[later..]].concat(),
                    [head, &other[o..]].concat(),
                    mutate(g, &others, split, &mut rng),
                    mutate(g, &others, split, &mut rng),
                ];
                for (wi, w) in windows.iter().enumerate() {
                    let sl = Slice(w);
                    let src = Src::new(&sl, 0, NO_LIMIT);
                    let (mut d1, mut d2, mut d3) =
                        (Damage::default(), old::Damage::default(), Damage::default());
                    let r1 = validate_resume(src, &mut d1, &s1);
                    let r2 = old::validate_resume(src, &mut d2, &s2);
                    let whole = validate_probe(src, &mut d3);
                    let what = || format!("{}: window {wi}", what());
                    assert_eq!(r1, r2, "{}", what());
                    assert_eq!(
                        (d1.damaged, d1.fail_at),
                        (d2.damaged, d2.fail_at),
                        "{}",
                        what()
                    );
                    assert_eq!(r1, whole, "{}", what());
                    assert_eq!(d1, d3, "{}", what());
                    resumes += 1;
                }
            }
        }
    }
    eprintln!(
        "{} files, {cases} validations, {snaps} snapshots, {resumes} resumes: all equal",
        files.len()
    );
    assert!(snaps >= 50, "only {snaps} snapshots");
}

/// Decoding speed of this validator against the reference
/// ([`fast_decoder_verdicts_equal_the_reference`]) on the JPEGs of
/// `corpora/samples`, alternating, best of several rounds: `cargo test
/// --release --lib jpeg_decode_speed -- --ignored --nocapture`. Then,
/// per file, what the carving's bookkeeping adds to a decode: a trail
/// of snapshots (clusters of 4 KiB, an ext2/3 block map, as the
/// validation stage's contiguous validations and a search's proofs
/// leave) and a first decode under a memo of scans (as every stage
/// validation is). `ONLY=name` picks files, `ROUNDS=n` the rounds.
#[test]
#[ignore]
fn jpeg_decode_speed() {
    use super::reference as old;
    use super::{Src, validate};
    use crate::carve::validators::testutil::{NO_LIMIT, Slice};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/samples");
    let manifest = std::fs::read_to_string(root.join("MANIFEST.tsv")).unwrap();
    let files: Vec<(String, Vec<u8>)> = manifest
        .lines()
        .filter(|l| l.split('\t').nth(1) == Some("jpeg"))
        .filter_map(|l| l.split('\t').next())
        .filter(|n| std::env::var("ONLY").map_or(true, |o| n.contains(&o)))
        .map(|n| (n.to_string(), std::fs::read(root.join(n)).unwrap()))
        .collect();
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    let (mut all_new, mut all_old) = (0f64, 0f64);
    for (name, f) in &files {
        let sl = Slice(f);
        let src = Src::new(&sl, 0, NO_LIMIT);
        let reps = (20_000_000 / f.len()).clamp(1, 2000);
        let (mut best_new, mut best_old) = (f64::MAX, f64::MAX);
        for _ in 0..rounds {
            let t = std::time::Instant::now();
            for _ in 0..reps {
                std::hint::black_box(validate(std::hint::black_box(src)));
            }
            best_new = best_new.min(t.elapsed().as_secs_f64() / reps as f64);
            let t = std::time::Instant::now();
            for _ in 0..reps {
                std::hint::black_box(old::validate(std::hint::black_box(src)));
            }
            best_old = best_old.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        all_new += best_new;
        all_old += best_old;
        let mb = f.len() as f64 / 1e6;
        eprintln!(
            "{name:>26}: {:>8.1} MB/s, reference {:>8.1} MB/s ({:.2}x)",
            mb / best_new,
            mb / best_old,
            best_old / best_new
        );
    }
    let mb: f64 = files.iter().map(|f| f.1.len() as f64 / 1e6).sum();
    eprintln!(
        "{:>26}: {:>8.1} MB/s, reference {:>8.1} MB/s ({:.2}x)",
        "all",
        mb / all_new,
        mb / all_old,
        all_old / all_new
    );
    let spec = super::TrailSpec {
        grid: 4096,
        span: 4 * 4096 + (64 << 10),
        block_map: Some(4096),
    };
    for (name, f) in &files {
        let sl = Slice(f);
        let src = Src::new(&sl, 0, NO_LIMIT);
        let reps = (20_000_000 / f.len()).clamp(1, 2000);
        let mut best = [f64::MAX; 3];
        for _ in 0..rounds {
            for (k, b) in best.iter_mut().enumerate() {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    let src = std::hint::black_box(src);
                    std::hint::black_box(match k {
                        0 => validate(src),
                        1 => validate(src.with_context(&Context::NONE.with_jpeg_trail(
                            spec,
                            (&sl, 0),
                            &trail_budget(),
                        ))),
                        _ => {
                            let memo = std::sync::Arc::new(super::ScanMemo::default());
                            validate(src.with_context(&memo_cx(&memo, &sl)))
                        }
                    });
                }
                *b = b.min(t.elapsed().as_secs_f64() / reps as f64);
            }
        }
        // A copy with a comment segment inserted after APP0 (as
        // mkimage's modified copies), decoded under the memo after the
        // original: with and without a trail.
        if f.len() > 1000 && f[2] == 0xFF && f[3] == 0xE0 {
            let pos = 4 + usize::from(u16::from_be_bytes([f[4], f[5]]));
            let mut img = f.clone();
            img.resize(f.len().next_multiple_of(4096), 0);
            let at = img.len() as u64;
            img.extend_from_slice(&f[..pos]);
            img.extend_from_slice(&[
                0xFF, 0xFE, 0, 10, b'c', b'o', b'p', b'y', b' ', b'n', b'o', b'w',
            ]);
            img.extend_from_slice(&f[pos..]);
            let sl = Slice(&img);
            let mut t2 = [f64::MAX; 2];
            for _ in 0..rounds {
                for (k, b) in t2.iter_mut().enumerate() {
                    let memo = std::sync::Arc::new(super::ScanMemo::default());
                    validate(Src::new(&sl, 0, NO_LIMIT).with_context(&memo_cx(&memo, &sl)));
                    let t = std::time::Instant::now();
                    let v = {
                        let src = Src::new(&sl, at, NO_LIMIT);
                        if k == 0 {
                            validate(src.with_context(&memo_cx(&memo, &sl)))
                        } else {
                            validate(src.with_context(&memo_cx(&memo, &sl).with_jpeg_trail(
                                spec,
                                (&sl, at),
                                &trail_budget(),
                            )))
                        }
                    };
                    *b = b.min(t.elapsed().as_secs_f64());
                    assert!(
                        v.is_some_and(|v| v.status == crate::carve::validators::Status::Complete)
                    );
                }
            }
            eprintln!(
                "{name:>26}: a copy under the memo {:.3} ms, with a trail {:.3} ms",
                t2[0] * 1e3,
                t2[1] * 1e3
            );
        }
        eprintln!(
            "{name:>26}: {:.3} ms; with a trail {:.3} ms ({:.2}x); first under a memo {:.3} ms ({:.2}x)",
            best[0] * 1e3,
            best[1] * 1e3,
            best[1] / best[0],
            best[2] * 1e3,
            best[2] / best[0]
        );
    }
}
