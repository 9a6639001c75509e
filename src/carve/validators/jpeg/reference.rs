//! Test-only reference: the JPEG validator as it was before the table-driven
//! decoder (commit 4389248), kept verbatim so that
//! `jpeg::tests::fast_decoder_verdicts_equal_the_reference` can check that
//! the fast decoder gives identical verdicts, damage and snapshots.
//!
//! Do not optimise or otherwise change this file: it is the oracle.
#![allow(dead_code)]

use super::super::Verdict;
use super::super::read::{Cursor, Src};

/// More markers than this is not a real JPEG.
const MAX_MARKERS: u32 = 1_000_000;

/// Markers that may legitimately follow SOI as the first segment.
fn first_segment_marker(m: u8) -> bool {
    matches!(m, 0xC0..=0xCF | 0xDB..=0xDF | 0xE0..=0xEF | 0xFE)
}

/// Markers with a length field accepted inside a file: SOFn (not the
/// reserved `C8`), DHT, DAC, SOS, DQT, DNL, DRI, APPn, COM. Hierarchical
/// (`DE`, `DF`) and JPEG extension markers (`F0..FD`, e.g. JPEG-LS) are not
/// accepted: they are rare in real files and common in random data.
fn has_length(m: u8) -> bool {
    matches!(m, 0xC0..=0xC7 | 0xC9..=0xCF | 0xDA..=0xDD | 0xE0..=0xEF | 0xFE)
}

/// DQT body: tables of `Pq/Tq` + 64 (8-bit) or 128 (16-bit) values.
fn dqt_ok(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        let (pq, tq) = (b[i] >> 4, b[i] & 15);
        if pq > 1 || tq > 3 {
            return false;
        }
        i += 1 + 64 * (usize::from(pq) + 1);
    }
    i == b.len() && !b.is_empty()
}

/// DHT body: tables of `Tc/Th`, 16 code counts, then the symbols.
fn dht_ok(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        let (tc, th) = (b[i] >> 4, b[i] & 15);
        let Some(counts) = b.get(i + 1..i + 17) else {
            return false;
        };
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        if tc > 1 || th > 3 || n > 256 {
            return false;
        }
        i += 17 + n;
    }
    i == b.len() && !b.is_empty()
}

/// The strict walk's verdict, or where it is partial, the lenient walk's
/// when that one finds the file complete (foreign bytes before markers
/// passed as libjpeg's `next_marker` does, within the bounds).
pub fn validate(src: Src) -> Option<Verdict> {
    let strict = validate_probe(src, &mut Damage::default())?;
    if strict.status == super::super::Status::Partial {
        let mut tables = Tables::new(SnapCtl::default(), Some((0, 0)));
        let lenient = walk_inner(src, &mut Damage::default(), &mut tables);
        if let Some(l) = lenient.filter(|l| l.status == super::super::Status::Complete) {
            return Some(l);
        }
    }
    Some(strict)
}

/// Where a damaged JPEG broke, for the fragment search
/// ([`crate::carve::fragments`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Damage {
    /// The verdict is `Partial` because of damage (not because the window
    /// ended first).
    pub damaged: bool,
    /// An upper bound on where foreign data begins: everything before the
    /// first foreign byte decodes, so the decoder reads past it before it
    /// fails. Meaningful when `damaged`.
    pub fail_at: u64,
}

/// [`validate`], also filling `d` when the verdict is damage.
pub fn validate_probe(src: Src, d: &mut Damage) -> Option<Verdict> {
    walk(src, d, SnapCtl::default()).0
}

/// The decoder's state at an MCU boundary inside a scan, taken while
/// validating a file, such that every byte it has consumed lies before
/// `split`: [`validate_resume`] then validates any window whose bytes before
/// `split` are the same without decoding them again (the fragment search
/// tries many second fragments after one first fragment).
#[derive(Clone, Debug)]
pub struct Snap {
    split: u64,
    /// The scan (1-based count) it was taken in.
    scan: u32,
    /// Scans decoded before it: (count, offset of the marker that ends it).
    scan_ends: Vec<(u32, u64)>,
    mcu: u64,
    eobrun: u32,
    rst: u8,
    good: u64,
    acc: u64,
    n: u32,
    pad: u32,
    at: u64,
    history: Option<Vec<Vec<u64>>>,
    budget: u64,
}

impl Snap {
    /// The split it was taken for.
    pub fn split(&self) -> u64 {
        self.split
    }
    /// Offset of the next byte the resumed decoder reads (≤ the split).
    pub fn at(&self) -> u64 {
        self.at
    }
}

/// [`validate_probe`], also returning the decoder's state at the last MCU
/// boundary before `split` (`None` when `split` is not inside a decoded scan).
pub fn validate_capture(src: Src, d: &mut Damage, split: u64) -> (Option<Verdict>, Option<Snap>) {
    let ctl = SnapCtl {
        want: Some(split),
        ..SnapCtl::default()
    };
    walk(src, d, ctl)
}

/// [`validate_probe`] of a window whose bytes before `snap`'s split are those
/// the snapshot was taken over: equal verdict, without decoding them again.
pub fn validate_resume(src: Src, d: &mut Damage, snap: &Snap) -> Option<Verdict> {
    let ctl = SnapCtl {
        resume: Some(snap.clone()),
        ..SnapCtl::default()
    };
    walk(src, d, ctl).0
}

/// A history word to put back: (component, block, word).
type Undo = (usize, usize, u64);

/// What a walk captures or resumes from.
#[derive(Default)]
struct SnapCtl {
    /// Capture: the split.
    want: Option<u64>,
    /// The scan being decoded (the outer walk's count).
    scan: u32,
    /// Scans decoded so far.
    scan_ends: Vec<(u32, u64)>,
    /// Capture: the last MCU boundary with everything consumed before the
    /// split, and the history word its MCU may change (component, block, word).
    latest: Option<(Snap, Option<Undo>)>,
    got: Option<Snap>,
    /// Resume from this state.
    resume: Option<Snap>,
}

impl SnapCtl {
    /// Turns the latest boundary into a snapshot (history as it was there).
    fn finalize(&mut self, history: &Option<Vec<Vec<u64>>>) {
        if let Some((mut snap, undo)) = self.latest.take() {
            let mut h = history.clone();
            if let (Some(h), Some((ci, i, w))) = (h.as_mut(), undo)
                && let Some(slot) = h.get_mut(ci).and_then(|c| c.get_mut(i))
            {
                *slot = w;
            }
            snap.history = h;
            snap.scan_ends = self.scan_ends.clone();
            self.got = Some(snap);
        }
    }
}

fn walk(src: Src, d: &mut Damage, ctl: SnapCtl) -> (Option<Verdict>, Option<Snap>) {
    let mut tables = Tables::new(ctl, None);
    let v = walk_inner(src, d, &mut tables);
    let got = tables.snap.got.take();
    (v, got)
}

fn walk_inner(src: Src, d: &mut Damage, tables: &mut Tables) -> Option<Verdict> {
    let head = src.bytes::<4>(0);
    let Some(head) = head else {
        // Fewer than 4 bytes: only a partial SOI can be judged.
        let mut b = [0u8; 3];
        let n = src.read(0, &mut b);
        return (b[..n] == [0xFF, 0xD8, 0xFF][..n] && n >= 2)
            .then(|| Verdict::partial(src.len(), src.cut_note()));
    };
    if head[..3] != [0xFF, 0xD8, 0xFF] || !first_segment_marker(head[3]) {
        return None;
    }
    // Room for one DQT/DHT segment body (lengths are 16-bit).
    let mut seg_buf = Vec::new();
    // Entropy-coded data, read in large pieces (allocated on the first scan).
    let mut entropy_buf = Vec::new();
    let mut kept = Buffered::default();
    let mut c = Cursor::new(src, 2);
    let mut frame: Option<Frame> = None;
    let mut scan: Option<Scan> = None;
    let mut undecoded = 0u32;
    let mut undecoded_why: Option<&'static str> = None;
    let mut seen_sof = false;
    let mut scans = 0u32;
    let mut segments = 0u32;
    let mut progressive = false;
    let cut = |src: &Src| Some(Verdict::partial(src.len(), src.cut_note()));
    // End of the last structure that was fully validated.
    let mut good_end: u64 = 2;
    let mut damaged = |good_end: u64, fail: u64, segments: u32, note: String| {
        // Damage before a second segment confirmed the first: a false hit.
        if segments < 2 {
            None
        } else {
            d.damaged = true;
            d.fail_at = fail.max(good_end);
            Some(Verdict::partial(good_end, note))
        }
    };
    for _ in 0..MAX_MARKERS {
        // Lenient: junk before the marker, byte by byte as libjpeg's
        // next_marker discards it (not FF, or FF 00), within the bounds.
        if let Some((skips, bytes)) = tables.lenient.as_mut() {
            let from = c.pos();
            let mut at = from;
            let found = loop {
                if at - from > super::walk::MAX_JUNK {
                    break None;
                }
                match src.u8(at) {
                    None => break None,
                    Some(0xFF) => {}
                    Some(_) => {
                        at += 1;
                        continue;
                    }
                }
                let mut next = at + 1;
                while src.u8(next) == Some(0xFF) && next - at <= 4096 {
                    next += 1;
                }
                match src.u8(next) {
                    None => break None,
                    Some(0xFF) => break None,
                    Some(0) => at = next + 1,
                    Some(_) => break Some(at),
                }
            };
            if let Some(at) = found
                && at > from
                && *skips < super::walk::MAX_JUNK_SKIPS
            {
                *skips += 1;
                *bytes += at - from;
                c.seek(at);
            }
        }
        // Marker: FF, optional fill FFs, then the code.
        let marker_pos = c.pos();
        match c.u8() {
            Some(0xFF) => {}
            Some(b) => {
                return damaged(
                    good_end,
                    c.pos(),
                    segments,
                    format!("expected a marker at {marker_pos}, found {b:#04x}"),
                );
            }
            None => return cut(&src),
        }
        let mut m = 0xFF;
        for _ in 0..4096 {
            match c.u8() {
                Some(0xFF) => continue,
                Some(b) => {
                    m = b;
                    break;
                }
                None => return cut(&src),
            }
        }
        match m {
            0xD9 => {
                let end = c.pos();
                if !seen_sof || scans == 0 {
                    return Some(Verdict::partial(end, "EOI without a frame header and scan"));
                }
                let mut v = Verdict::complete(end);
                if progressive {
                    v.notes.push(format!("progressive, {scans} scans"));
                }
                if let Some((skips @ 1.., bytes)) = tables.lenient {
                    v.notes.push(format!(
                        "{bytes} foreign byte(s) before {skips} marker(s) passed, as libjpeg does"
                    ));
                }
                if let Some(why) = undecoded_why {
                    v.notes.push(format!(
                        "{undecoded} scan(s) checked by marker walk only ({why})"
                    ));
                }
                return Some(v);
            }
            0x01 | 0xD0..=0xD7 => {
                good_end = c.pos();
                continue;
            }
            0xD8 => {
                return damaged(
                    good_end,
                    c.pos(),
                    segments,
                    format!("second SOI at {marker_pos}"),
                );
            }
            0xFF => return damaged(good_end, c.pos(), segments, "run of fill bytes".into()),
            m if !has_length(m) => {
                return damaged(
                    good_end,
                    c.pos(),
                    segments,
                    format!("reserved marker {m:#04x} at {marker_pos}"),
                );
            }
            _ => {}
        }
        let Some(len) = c.u16be() else {
            return cut(&src);
        };
        let len = u64::from(len);
        let body = c.pos();
        let seg_end = body - 2 + len;
        if len < 2 {
            return damaged(
                good_end,
                c.pos(),
                segments,
                format!("segment length {len} at {marker_pos}"),
            );
        }
        // Per-marker checks on the first bytes of the segment.
        let ok = match m {
            0xC0..=0xCF if m != 0xC4 && m != 0xC8 && m != 0xCC => {
                // SOFn: P, Y, X, Nf, then 3 bytes per component.
                let mut h = [0u8; 6 + 3 * 4];
                let n = src.read(body, &mut h);
                if n < 6 {
                    return cut(&src);
                }
                let nf = u64::from(h[5]);
                if seen_sof {
                    // One frame per (non-hierarchical) image.
                    return damaged(
                        good_end,
                        seg_end,
                        segments,
                        format!("second frame header at {marker_pos}"),
                    );
                }
                progressive |= matches!(m, 0xC2 | 0xC6 | 0xCA | 0xCE);
                seen_sof = true;
                let lossless = matches!(m, 0xC3 | 0xC7 | 0xCB | 0xCF);
                let precision_ok = if lossless {
                    matches!(h[0], 2..=16)
                } else {
                    matches!(h[0], 8 | 12)
                };
                let ok =
                    (1..=4).contains(&nf) && len == 8 + 3 * nf && precision_ok && h[3..5] != [0, 0];
                if ok && n < 6 + 3 * nf as usize {
                    return cut(&src);
                }
                let comps: Vec<(u8, u32, u32)> = (0..nf.min(4) as usize)
                    .map(|i| {
                        let hv = h[6 + 3 * i + 1];
                        (h[6 + 3 * i], u32::from(hv >> 4), u32::from(hv & 15))
                    })
                    .collect();
                let hv_ok = comps
                    .iter()
                    .all(|&(_, a, b)| (1..=4).contains(&a) && (1..=4).contains(&b));
                let kind = match m {
                    0xC0 | 0xC1 => FrameKind::Sequential,
                    0xC2 => FrameKind::Progressive,
                    _ => FrameKind::Other,
                };
                let f = Frame {
                    kind,
                    precision: h[0],
                    height: u32::from(u16::from_be_bytes([h[1], h[2]])),
                    width: u32::from(u16::from_be_bytes([h[3], h[4]])),
                    hmax: comps.iter().map(|c| c.1).max().unwrap_or(1).max(1),
                    vmax: comps.iter().map(|c| c.2).max().unwrap_or(1).max(1),
                    comps,
                };
                if !(ok && hv_ok) {
                    return damaged(
                        good_end,
                        seg_end,
                        segments,
                        format!("invalid frame header at {marker_pos}"),
                    );
                }
                if kind == FrameKind::Progressive {
                    let blocks: Vec<(u64, u64)> = (0..f.comps.len()).map(|i| f.blocks(i)).collect();
                    let total: u64 = blocks.iter().map(|(w, h)| w * h).sum();
                    tables.history = (total <= MAX_HISTORY_BLOCKS).then(|| {
                        blocks
                            .iter()
                            .map(|(w, h)| vec![0u64; (w * h) as usize])
                            .collect()
                    });
                }
                frame = Some(f);
                ok && hv_ok
            }
            0xC4 | 0xDB => {
                let body_len = (len - 2) as usize;
                if seg_buf.len() < body_len {
                    seg_buf.resize(body_len, 0);
                }
                let Some(b) = seg_buf.get_mut(..body_len) else {
                    return cut(&src);
                };
                if !src.read_exact(body, b) {
                    return cut(&src);
                }
                if m == 0xC4 {
                    dht_ok(b) && load_dht(b, tables)
                } else {
                    dqt_ok(b)
                }
            }
            0xDD => {
                if let Some(ri) = src.u16be(body) {
                    tables.restart = u32::from(ri);
                }
                len == 4
            }
            0xDA => {
                let Some(ns) = src.u8(body) else {
                    return cut(&src);
                };
                let ns = u64::from(ns);
                let tail = src.bytes::<3>(body + 1 + 2 * ns);
                let Some([ss, se, a]) = tail else {
                    return cut(&src);
                };
                let prog_ok =
                    !progressive || ((ss == 0) == (se == 0) && se >= ss && (ss == 0 || ns == 1));
                let ok = seen_sof
                    && (1..=4).contains(&ns)
                    && len == 6 + 2 * ns
                    && ss <= 63
                    && se <= 63
                    && a >> 4 <= 13
                    && prog_ok;
                scan = None;
                if ok && let Some(f) = &frame {
                    let mut sc = Scan {
                        comps: Vec::new(),
                        ss,
                        se,
                        ah: a >> 4,
                    };
                    for i in 0..ns {
                        let Some([cs, tt]) = src.bytes::<2>(body + 1 + 2 * i) else {
                            return cut(&src);
                        };
                        if let Some(ci) = f.comps.iter().position(|c| c.0 == cs) {
                            sc.comps
                                .push((ci, usize::from(tt >> 4 & 3), usize::from(tt & 3)));
                        }
                    }
                    scan = Some(sc);
                }
                ok
            }
            _ => true,
        };
        if !ok {
            return damaged(
                good_end,
                seg_end,
                segments,
                format!("invalid segment {m:#04x} at {marker_pos}"),
            );
        }
        if seg_end > src.len() {
            return cut(&src);
        }
        c.seek(seg_end);
        segments += 1;
        good_end = seg_end;
        if m == 0xDA {
            scans += 1;
            tables.snap.scan = scans;
            // Resuming: scans decoded before the snapshot's are skipped.
            let skip = tables.snap.resume.as_ref().and_then(|r| {
                (r.scan > scans)
                    .then(|| r.scan_ends.iter().find(|e| e.0 == scans).map(|e| e.1))
                    .flatten()
            });
            if let Some(end) = skip {
                c.seek(end);
                good_end = end;
                continue;
            }
            let decodable = match (&frame, &scan) {
                (Some(f), Some(s)) => scan_decodable(f, s, tables),
                _ => Err("no usable frame/scan header"),
            };
            match decodable {
                Ok(()) => {
                    let (Some(f), Some(s)) = (&frame, &scan) else {
                        return cut(&src);
                    };
                    let r = decode_scan(&mut c, &mut entropy_buf, &mut kept, tables, f, s);
                    if tables.snap.latest.is_some() {
                        tables.snap.finalize(&tables.history);
                    }
                    match r {
                        Ok(()) => {
                            good_end = c.pos();
                            if tables.snap.want.is_some() {
                                tables.snap.scan_ends.push((scans, good_end));
                            }
                        }
                        Err((ScanErr::Cut, _, _)) => return cut(&src),
                        Err((ScanErr::Bad(why), at, fail)) => {
                            return damaged(
                                at.max(good_end),
                                fail,
                                segments,
                                format!("scan {scans}: {why}"),
                            );
                        }
                    }
                }
                Err(why) => {
                    // Not decodable here: find the first FF not followed by
                    // 00, RSTn or FF.
                    undecoded_why.get_or_insert(why);
                    undecoded += 1;
                    match scan_entropy(&mut c) {
                        Some(p) => {
                            c.seek(p);
                            good_end = p;
                        }
                        None => return cut(&src),
                    }
                }
            }
        }
    }
    damaged(good_end, c.pos(), segments, "too many markers".into())
}

/// From the start of entropy-coded data, returns the offset of the marker
/// that ends it (the `FF` of a marker other than stuffing/RST/fill), or
/// `None` when the window ends first.
fn scan_entropy(c: &mut Cursor) -> Option<u64> {
    loop {
        let chunk = c.chunk();
        if chunk.is_empty() {
            return None;
        }
        let Some(i) = memchr::memchr(0xFF, chunk) else {
            let n = chunk.len() as u64;
            c.skip(n);
            continue;
        };
        let ff = c.pos() + i as u64;
        c.seek(ff + 1);
        // Skip fill FFs; look at the byte after them.
        loop {
            match c.u8()? {
                0xFF => continue,
                0x00 | 0xD0..=0xD7 => break,
                _ => {
                    // The marker starts at the last FF before this byte.
                    return Some(c.pos() - 2);
                }
            }
        }
    }
}

/// Blocks whose non-zero-coefficient history is kept for progressive
/// refinement scans (8 bytes each).
pub const MAX_HISTORY_BLOCKS: u64 = 1 << 20;

/// Stores the tables of a DHT body (already checked by [`dht_ok`]).
fn load_dht(b: &[u8], t: &mut Tables) -> bool {
    let mut i = 0;
    while i + 17 <= b.len() {
        let (tc, th) = (b[i] >> 4, usize::from(b[i] & 3));
        let counts = &b[i + 1..i + 17];
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        let Some(syms) = b.get(i + 17..i + 17 + n) else {
            return false;
        };
        let Some(h) = Huff::new(counts, syms) else {
            return false;
        };
        if tc == 0 {
            t.dc[th] = Some(Box::new(h));
        } else {
            t.ac[th] = Some(Box::new(h));
        }
        i += 17 + n;
    }
    true
}

/// Whether a scan can be decoded here; otherwise why not.
fn scan_decodable(f: &Frame, s: &Scan, t: &Tables) -> Result<(), &'static str> {
    if f.kind == FrameKind::Other {
        return Err("arithmetic, lossless or hierarchical coding");
    }
    if f.height == 0 {
        return Err("height given by DNL");
    }
    if s.comps.is_empty() {
        return Err("scan names no frame component");
    }
    let blocks: u32 = s
        .comps
        .iter()
        .map(|&(ci, _, _)| f.comps[ci].1 * f.comps[ci].2)
        .sum();
    if s.comps.len() > 1 && blocks > 10 {
        return Err("more than 10 blocks per MCU");
    }
    let progressive = f.kind == FrameKind::Progressive;
    let needs_dc = !progressive || (s.ss == 0 && s.ah == 0);
    let needs_ac = !progressive || s.ss > 0;
    for &(_, td, ta) in &s.comps {
        if (needs_dc && t.dc[td].is_none()) || (needs_ac && t.ac[ta].is_none()) {
            return Err("Huffman table not defined (e.g. Motion-JPEG)");
        }
    }
    if progressive && s.ss > 0 && s.ah > 0 && t.history.is_none() {
        return Err("progressive image too large to track refinement");
    }
    Ok(())
}

/// A Huffman decoding table (T.81 F.2.2.3) with a 9-bit lookup.
#[derive(Clone)]
struct Huff {
    look: [u16; 512],
    maxcode: [i32; 18],
    valptr: [i32; 17],
    mincode: [i32; 17],
    vals: [u8; 256],
}

impl Huff {
    /// From the 16 code counts and the symbols of a DHT table; `None` when
    /// the counts over-subscribe the code space.
    fn new(counts: &[u8], syms: &[u8]) -> Option<Huff> {
        let mut h = Huff {
            look: [0; 512],
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
                if l <= 9 {
                    let shift = 9 - l;
                    for j in 0..cnt {
                        let sym = u16::from(*h.vals.get((k + j) as usize)?);
                        let first = ((code + j) << shift) as usize;
                        for e in h.look.get_mut(first..first + (1 << shift))? {
                            *e = (l as u16) << 8 | sym;
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
}

/// Why entropy decoding stopped.
enum ScanErr {
    /// The window ended.
    Cut,
    /// Invalid data; the note.
    Bad(&'static str),
}

/// First piece of entropy-coded data read at once; pieces double up to
/// [`MAX_PIECE`].
const FIRST_PIECE: usize = 64 * 1024;

/// Largest piece of entropy-coded data read at once (the buffer never grows
/// past this plus a few bytes).
const MAX_PIECE: usize = 512 * 1024;

/// A code found in a lookup table: its length and symbol.
struct Code {
    len: u32,
    sym: u32,
}

/// The range of the window that an entropy buffer holds.
#[derive(Clone, Copy, Default)]
struct Buffered {
    off: u64,
    len: usize,
    piece: usize,
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
struct Bits<'s, 'b> {
    src: Src<'s>,
    buf: &'b mut Vec<u8>,
    /// Window offset of `buf[0]`.
    off: u64,
    /// Next unread byte in `buf`.
    i: usize,
    /// Valid bytes in `buf`.
    len: usize,
    /// Size of the next read.
    piece: usize,
    acc: u64,
    n: u32,
    pad: u32,
    marker: bool,
    cut: bool,
}

impl<'s, 'b> Bits<'s, 'b> {
    /// A reader at `at`, reusing what `keep` (the buffered range left by
    /// the previous scan's reader) holds.
    fn new(src: Src<'s>, at: u64, buf: &'b mut Vec<u8>, keep: Buffered) -> Self {
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

    /// What the buffer holds, for the next scan's reader.
    fn buffered(&self) -> Buffered {
        Buffered {
            off: self.off,
            len: self.len,
            piece: self.piece,
        }
    }

    /// Window offset of the next unread byte.
    fn at(&self) -> u64 {
        self.off + self.i as u64
    }

    /// Reads the next piece after the buffered bytes, keeping the unread
    /// bytes and the one before them (so that [`Bits::back`] always works).
    fn refill(&mut self) {
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
    fn next(&mut self) -> Option<u8> {
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
    fn peek(&mut self) -> Option<u8> {
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
    fn back(&mut self) {
        self.i = self.i.saturating_sub(1);
    }

    fn fill(&mut self) {
        if self.n <= 56 && !self.marker && !self.cut {
            if self.len - self.i < 8 {
                self.refill();
            }
            if self.i + 8 <= self.len
                && let Some(w) = self.buf.get(self.i..self.i + 8)
            {
                let mut a = [0u8; 8];
                a.copy_from_slice(w);
                let w = u64::from_be_bytes(a);
                // Whole bytes that fit: the byte-by-byte loop below stops
                // once more than 56 bits are held.
                let cnt = (56 - self.n) / 8 + 1;
                let bits = 8 * cnt;
                let top = w >> (64 - bits) << (64 - bits);
                // Any FF among those bytes (a zero byte of !top; the bytes
                // not taken are FF there, so never zero)?
                let x = !top;
                let ff = x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080;
                if ff == 0 {
                    self.acc |= top >> self.n;
                    self.n += bits;
                    self.i += cnt as usize;
                    return;
                }
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

    fn push(&mut self, b: u8) {
        self.acc |= u64::from(b) << (56 - self.n);
        self.n += 8;
    }

    fn real(&self) -> u32 {
        self.n - self.pad
    }

    /// Approximate offset of the next unread bit's byte.
    fn pos(&self) -> u64 {
        self.at().saturating_sub(u64::from(self.real() / 8))
    }

    #[inline]
    fn consume(&mut self, k: u32) -> Result<(), ScanErr> {
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
    fn bits(&mut self, k: u32) -> Result<u32, ScanErr> {
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
    fn skip(&mut self, k: u32) -> Result<(), ScanErr> {
        if k == 0 {
            return Ok(());
        }
        if self.n < k {
            self.fill();
        }
        self.consume(k)
    }

    /// The next code if the lookup table has it (filling first exactly as
    /// [`Bits::decode`] does); consumes nothing.
    #[inline]
    fn peek_code(&mut self, h: &Huff) -> Option<Code> {
        if self.n < 16 {
            self.fill();
        }
        let e = h.look[(self.acc >> 55) as usize];
        (e != 0).then_some(Code {
            len: u32::from(e >> 8),
            sym: u32::from(e & 0xFF),
        })
    }

    /// Consumes `k < 64` bits when that many real bits are held (no fill:
    /// the caller has filled); false otherwise, nothing consumed.
    #[inline]
    fn take(&mut self, k: u32) -> bool {
        if k > self.real() {
            return false;
        }
        self.acc <<= k;
        self.n -= k;
        true
    }

    #[inline]
    fn decode(&mut self, h: &Huff) -> Result<u8, ScanErr> {
        if self.n < 16 {
            self.fill();
        }
        let e = h.look[(self.acc >> 55) as usize];
        if e != 0 {
            self.consume(u32::from(e >> 8))?;
            return Ok(e as u8);
        }
        self.decode_slow(h)
    }

    /// Codes longer than the lookup table's 9 bits.
    #[cold]
    fn decode_slow(&mut self, h: &Huff) -> Result<u8, ScanErr> {
        for l in 10..=16usize {
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
    fn finish(&mut self, tolerance: u32) -> Result<(u8, u64), ScanErr> {
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

/// The frame header (SOF) as far as decoding needs it.
#[derive(Clone)]
struct Frame {
    /// Huffman sequential (SOF0/1) or progressive (SOF2); others are not decoded.
    kind: FrameKind,
    precision: u8,
    width: u32,
    height: u32,
    /// (component id, H, V)
    comps: Vec<(u8, u32, u32)>,
    hmax: u32,
    vmax: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    Sequential,
    Progressive,
    Other,
}

impl Frame {
    /// Blocks across and down of component `i` (non-interleaved order).
    fn blocks(&self, i: usize) -> (u64, u64) {
        let (_, h, v) = self.comps[i];
        let w = (u64::from(self.width) * u64::from(h)).div_ceil(u64::from(self.hmax));
        let hh = (u64::from(self.height) * u64::from(v)).div_ceil(u64::from(self.vmax));
        (w.div_ceil(8), hh.div_ceil(8))
    }
}

/// A scan header (SOS).
struct Scan {
    /// (frame component index, DC table, AC table)
    comps: Vec<(usize, usize, usize)>,
    ss: u8,
    se: u8,
    ah: u8,
}

/// Decoding state kept across segments.
struct Tables {
    dc: [Option<Box<Huff>>; 4],
    ac: [Option<Box<Huff>>; 4],
    restart: u32,
    /// Progressive: per component, one bit per coefficient per block.
    history: Option<Vec<Vec<u64>>>,
    /// Blocks that may still be decoded (a bound on time: end-of-band runs
    /// decode many blocks from few bits).
    budget: u64,
    snap: SnapCtl,
    /// A lenient walk ([`validate`]'s retry): markers found after junk and
    /// the junk's bytes.
    lenient: Option<(u32, u64)>,
}

impl Tables {
    /// No tables yet, the whole block budget.
    fn new(snap: SnapCtl, lenient: Option<(u32, u64)>) -> Self {
        Tables {
            dc: Default::default(),
            ac: Default::default(),
            restart: 0,
            history: None,
            budget: MAX_BLOCKS,
            snap,
            lenient,
        }
    }
}

/// Blocks decoded at most per candidate, over all scans.
pub const MAX_BLOCKS: u64 = 1 << 28;

/// Decodes one scan starting at the cursor; on success the cursor is at the
/// marker that ends the scan. Errors carry the offset where good data ends
/// (the start of the failing MCU row or restart interval) and the offset
/// the decoder had reached when it failed (plus the bytes it may hold).
fn decode_scan(
    c: &mut Cursor,
    buf: &mut Vec<u8>,
    kept: &mut Buffered,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
) -> Result<(), (ScanErr, u64, u64)> {
    let start = c.pos();
    let resume = t
        .snap
        .resume
        .take_if(|r| r.scan == t.snap.scan && r.at >= start);
    let mut b = match &resume {
        Some(r) => {
            let mut b = Bits::new(c.src(), r.at, buf, Buffered::default());
            b.acc = r.acc;
            b.n = r.n;
            b.pad = r.pad;
            t.history.clone_from(&r.history);
            t.budget = r.budget;
            b
        }
        None => Bits::new(c.src(), start, buf, *kept),
    };
    let init = resume.map(|r| (r.mcu, r.eobrun, r.rst, r.good));
    let r = scan_body(&mut b, start, t, f, s, init);
    *kept = b.buffered();
    let fail = b.at();
    let at = r.map_err(|(e, good)| (e, good, fail))?;
    c.seek(at);
    Ok(())
}

/// [`decode_scan`] on a reader at `start`; returns the offset of the marker
/// that ends the scan.
fn scan_body(
    b: &mut Bits,
    start: u64,
    t: &mut Tables,
    f: &Frame,
    s: &Scan,
    init: Option<(u64, u32, u8, u64)>,
) -> Result<u64, (ScanErr, u64)> {
    let interleaved = s.comps.len() > 1;
    let (mcux, mcuy) = if interleaved {
        (
            u64::from(f.width).div_ceil(8 * u64::from(f.hmax)),
            u64::from(f.height).div_ceil(8 * u64::from(f.vmax)),
        )
    } else {
        f.blocks(s.comps[0].0)
    };
    let total = mcux * mcuy;
    let per_mcu: u64 = if interleaved {
        s.comps
            .iter()
            .map(|&(ci, _, _)| u64::from(f.comps[ci].1 * f.comps[ci].2))
            .sum()
    } else {
        1
    };
    if init.is_none() {
        match t.budget.checked_sub(total * per_mcu) {
            Some(left) => t.budget = left,
            None => return Err((ScanErr::Bad("too many blocks to decode"), start)),
        }
    }
    let (max_dc, max_ac) = if f.precision > 8 { (15, 14) } else { (11, 10) };
    let progressive = f.kind == FrameKind::Progressive;
    let (mcu0, mut eobrun, mut rst, mut good) = init.unwrap_or((0, 0, 0, start));
    let restart = u64::from(t.restart);
    for mcu in mcu0..total {
        if init.is_some() && mcu == mcu0 {
            // Resumed: this boundary was handled before the snapshot.
        } else if restart > 0 && mcu > 0 && mcu % restart == 0 {
            match b.finish(0) {
                Ok((m, _)) if m == 0xD0 + rst => {}
                Ok(_) => {
                    return Err((
                        ScanErr::Bad("restart marker missing or out of sequence"),
                        good,
                    ));
                }
                Err(e) => return Err((e, good)),
            }
            rst = (rst + 1) % 8;
            eobrun = 0;
            good = b.at();
        } else if mcu % mcux == 0 {
            good = b.pos().max(good);
        }
        if let Some(split) = t.snap.want {
            if b.at() <= split && !b.marker && !b.cut {
                let undo = if progressive && s.ss > 0 {
                    let ci = s.comps[0].0;
                    let w = t
                        .history
                        .as_ref()
                        .and_then(|h| h.get(ci))
                        .and_then(|c| c.get(mcu as usize))
                        .copied();
                    w.map(|w| (ci, mcu as usize, w))
                } else {
                    None
                };
                let snap = Snap {
                    split,
                    scan: t.snap.scan,
                    scan_ends: Vec::new(),
                    mcu,
                    eobrun,
                    rst,
                    good,
                    acc: b.acc,
                    n: b.n,
                    pad: b.pad,
                    at: b.at(),
                    history: None,
                    budget: t.budget,
                };
                t.snap.latest = Some((snap, undo));
            } else if t.snap.latest.is_some() {
                t.snap.finalize(&t.history);
            }
        }
        for &(ci, td, ta) in &s.comps {
            let (_, h, v) = f.comps[ci];
            let nblocks = if interleaved { h * v } else { 1 };
            for _ in 0..nblocks {
                let r = if !progressive {
                    let (Some(dc), Some(ac)) = (&t.dc[td], &t.ac[ta]) else {
                        return Err((ScanErr::Bad("missing table"), good));
                    };
                    block_sequential(b, dc, ac, max_dc, max_ac)
                } else if s.ss == 0 {
                    if s.ah == 0 {
                        match &t.dc[td] {
                            Some(dc) => b.decode(dc).and_then(|n| {
                                if n > max_dc {
                                    Err(ScanErr::Bad("DC difference too large"))
                                } else {
                                    b.skip(u32::from(n))
                                }
                            }),
                            None => Err(ScanErr::Bad("missing table")),
                        }
                    } else {
                        b.skip(1)
                    }
                } else {
                    let Some(ac) = &t.ac[ta] else {
                        return Err((ScanErr::Bad("missing table"), good));
                    };
                    let hist = t
                        .history
                        .as_mut()
                        .and_then(|hh| hh.get_mut(ci))
                        .and_then(|hc| hc.get_mut(mcu as usize));
                    if s.ah == 0 {
                        block_ac_first(b, ac, s, &mut eobrun, max_ac, hist)
                    } else {
                        match hist {
                            Some(hb) => block_ac_refine(b, ac, s, &mut eobrun, hb),
                            None => Err(ScanErr::Bad("no history")),
                        }
                    }
                };
                r.map_err(|e| (e, good))?;
            }
        }
    }
    match b.finish(0) {
        Ok((m, at)) if !matches!(m, 0x00 | 0xD0..=0xD7) => Ok(at),
        Ok(_) => Err((ScanErr::Bad("restart marker after the last MCU"), good)),
        Err(e) => Err((e, good)),
    }
}

fn block_sequential(
    b: &mut Bits,
    dc: &Huff,
    ac: &Huff,
    max_dc: u8,
    max_ac: u8,
) -> Result<(), ScanErr> {
    let n = b.decode(dc)?;
    if n > max_dc {
        return Err(ScanErr::Bad("DC difference too large"));
    }
    b.skip(u32::from(n))?;
    let mut k = 1u32;
    while k < 64 {
        // Fast run, in registers: while no fill is due, a table code that is
        // a coefficient inside the block is taken with its extra bits at
        // once (the state is then what decoding them one by one gives).
        let (mut acc, mut n) = (b.acc, b.n);
        let real_min = b.pad + 16;
        while k < 64 && n >= real_min {
            let e = u32::from(ac.look[(acc >> 55) as usize]);
            let (l, r, sz) = (e >> 8, (e >> 4) & 15, e & 15);
            let t = l + sz;
            if l == 0 || sz == 0 || k + r > 63 || sz > u32::from(max_ac) || t + b.pad > n {
                break;
            }
            acc <<= t;
            n -= t;
            k += r + 1;
        }
        b.acc = acc;
        b.n = n;
        if k >= 64 {
            break;
        }
        let rs = b.decode(ac)?;
        let (r, sz) = (u32::from(rs >> 4), rs & 15);
        if sz == 0 {
            if r != 15 {
                break;
            }
            k += 16;
            if k > 64 {
                return Err(ScanErr::Bad("zero run past the block"));
            }
            continue;
        }
        k += r;
        if k > 63 || sz > max_ac {
            return Err(ScanErr::Bad("coefficient past the block"));
        }
        b.skip(u32::from(sz))?;
        k += 1;
    }
    Ok(())
}

fn block_ac_first(
    b: &mut Bits,
    ac: &Huff,
    s: &Scan,
    eobrun: &mut u32,
    max_ac: u8,
    mut hist: Option<&mut u64>,
) -> Result<(), ScanErr> {
    if *eobrun > 0 {
        *eobrun -= 1;
        return Ok(());
    }
    let se = u32::from(s.se);
    let mut k = u32::from(s.ss);
    while k <= se {
        if let Some(rs) = b.peek_code(ac) {
            let (r, sz) = (rs.sym >> 4, rs.sym & 15);
            if sz != 0 && k + r <= se && sz <= u32::from(max_ac) && b.take(rs.len + sz) {
                k += r;
                if let Some(h) = hist.as_deref_mut() {
                    *h |= 1 << k;
                }
                k += 1;
                continue;
            }
        }
        let rs = b.decode(ac)?;
        let (r, sz) = (u32::from(rs >> 4), rs & 15);
        if sz == 0 {
            if r < 15 {
                *eobrun = (1 << r) - 1;
                if r > 0 {
                    *eobrun += b.bits(r)?;
                }
                break;
            }
            k += 16;
            continue;
        }
        k += r;
        if k > se || sz > max_ac {
            return Err(ScanErr::Bad("coefficient past the spectral band"));
        }
        b.skip(u32::from(sz))?;
        if let Some(h) = hist.as_deref_mut() {
            *h |= 1 << k;
        }
        k += 1;
    }
    if k > se + 1 {
        return Err(ScanErr::Bad("zero run past the spectral band"));
    }
    Ok(())
}

/// AC successive-approximation refinement (T.81 G.1.2.3; libjpeg's
/// decode_mcu_AC_refine), reading one correction bit per already-non-zero
/// coefficient.
fn block_ac_refine(
    b: &mut Bits,
    ac: &Huff,
    s: &Scan,
    eobrun: &mut u32,
    hist: &mut u64,
) -> Result<(), ScanErr> {
    let se = u32::from(s.se);
    let mut k = u32::from(s.ss);
    if *eobrun == 0 {
        while k <= se {
            let rs = b.decode(ac)?;
            let (mut r, sz) = (i32::from(rs >> 4), rs & 15);
            if sz != 0 {
                if sz != 1 {
                    return Err(ScanErr::Bad("refinement coefficient size is not 1"));
                }
                b.skip(1)?;
            } else if r != 15 {
                *eobrun = 1 << r;
                if r > 0 {
                    *eobrun += b.bits(r as u32)?;
                }
                break;
            }
            while k <= se {
                if *hist & (1 << k) != 0 {
                    b.skip(1)?;
                } else {
                    r -= 1;
                    if r < 0 {
                        break;
                    }
                }
                k += 1;
            }
            if sz != 0 {
                if k > se {
                    return Err(ScanErr::Bad("coefficient past the spectral band"));
                }
                *hist |= 1 << k;
            }
            k += 1;
        }
    }
    if *eobrun > 0 {
        while k <= se {
            if *hist & (1 << k) != 0 {
                b.skip(1)?;
            }
            k += 1;
        }
        *eobrun -= 1;
    }
    Ok(())
}
