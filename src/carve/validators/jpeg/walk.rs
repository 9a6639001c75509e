//! The marker walk: SOI to EOI, segment by segment, checking each marker and
//! segment body and handing every scan to the entropy decoder ([`super::decode`]);
//! MPF (multi-picture) images end where their index says.

use super::Damage;
use super::bits::{Buffered, MAX_BLOCKS, ScanErr};
use super::decode::decode_scan;
use super::frame::MAX_HISTORY_BLOCKS;
use super::frame::{Frame, FrameKind, Restored, Scan, restore_history};
use super::huffman::Huff;
use super::tables::Tables;
use super::trail::SnapCtl;

use std::ops::ControlFlow;

use crate::carve::validators::Verdict;
use crate::carve::validators::read::{Cursor, Src};

/// More markers than this is not a real JPEG.
pub(super) const MAX_MARKERS: u32 = 1_000_000;

/// Most foreign bytes a lenient walk passes before one marker.
pub(super) const MAX_JUNK: u64 = 32;

/// Most markers a lenient walk finds after foreign bytes in one file.
pub(super) const MAX_JUNK_SKIPS: u32 = 4;

/// Most fill `FF`s before a marker's code (as [`Walk::marker`] allows).
const MAX_FILL: u64 = 4096;

/// Where libjpeg's `next_marker` finds a marker from the cursor's position
/// on: the first `FF` of a run of (at most [`MAX_FILL`]) `FF`s followed by
/// a code other than `00`, after at most [`MAX_JUNK`] discarded bytes (any
/// byte but `FF`, and `FF`s followed by `00`); `None` when there is none by
/// then. The cursor is left anywhere (the caller seeks).
pub(super) fn marker_after_junk(c: &mut Cursor) -> Option<u64> {
    let from = c.pos();
    loop {
        let at = c.pos();
        if at - from > MAX_JUNK {
            return None;
        }
        if c.u8()? != 0xFF {
            continue;
        }
        let mut fill = 0;
        let code = loop {
            match c.u8()? {
                0xFF if fill < MAX_FILL => fill += 1,
                0xFF => return None,
                b => break b,
            }
        };
        if code != 0 {
            return Some(at);
        }
    }
}

/// Markers that may legitimately follow SOI as the first segment.
pub(super) fn first_segment_marker(m: u8) -> bool {
    matches!(m, 0xC0..=0xCF | 0xDB..=0xDF | 0xE0..=0xEF | 0xFE)
}

/// Markers with a length field accepted inside a file: SOFn (not the
/// reserved `C8`), DHT, DAC, SOS, DQT, DNL, DRI, APPn, COM. Hierarchical
/// (`DE`, `DF`) and JPEG extension markers (`F0..FD`, e.g. JPEG-LS) are not
/// accepted: they are rare in real files and common in random data.
pub(super) fn has_length(m: u8) -> bool {
    matches!(m, 0xC0..=0xC7 | 0xC9..=0xCF | 0xDA..=0xDD | 0xE0..=0xEF | 0xFE)
}

/// DQT body: tables of `Pq/Tq` + 64 (8-bit) or 128 (16-bit) values.
pub(super) fn dqt_ok(b: &[u8]) -> bool {
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
pub(super) fn dht_ok(b: &[u8]) -> bool {
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

pub(super) fn walk(src: Src, d: &mut Damage, ctl: SnapCtl) -> Option<Verdict> {
    let mut tables = Tables::new(MAX_BLOCKS, ctl, false);
    walk_inner(src, d, &mut tables)
}

/// How a step of the walk ends it: `Break(verdict)` is the walk's answer.
type Flow<T = ()> = ControlFlow<Option<Verdict>, T>;

/// The walk's state from marker to marker.
struct Walk<'a> {
    src: Src<'a>,
    c: Cursor<'a>,
    /// Room for one DQT/DHT segment body (lengths are 16-bit).
    seg_buf: Vec<u8>,
    /// Entropy-coded data, read in large pieces (allocated on the first scan).
    entropy_buf: Vec<u8>,
    kept: Buffered,
    frame: Option<Frame>,
    scan: Option<Scan>,
    undecoded: u32,
    undecoded_why: Option<&'static str>,
    seen_sof: bool,
    scans: u32,
    segments: u32,
    progressive: bool,
    /// Further images an MPF (multi-picture) index lists: (offset, size).
    mpf: Vec<(u64, u64)>,
    /// End of the last structure that was fully validated.
    good_end: u64,
    /// Foreign bytes before markers are passed as libjpeg does
    /// ([`Walk::junk`]): a retry after the strict walk met them.
    lenient: bool,
    /// Markers found after foreign bytes, and those bytes.
    junk_skips: u32,
    junk_bytes: u64,
}

/// One marker segment's place: its marker, where the marker and the body
/// start, its length field and where it ends.
#[derive(Clone, Copy)]
struct Segment {
    m: u8,
    marker_pos: u64,
    len: u64,
    body: u64,
    end: u64,
}

pub(super) fn walk_inner(src: Src, d: &mut Damage, tables: &mut Tables) -> Option<Verdict> {
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
    let mut w = Walk {
        src,
        c: Cursor::new(src, 2),
        seg_buf: Vec::new(),
        entropy_buf: Vec::new(),
        kept: Buffered::default(),
        frame: None,
        scan: None,
        undecoded: 0,
        undecoded_why: None,
        seen_sof: false,
        scans: 0,
        segments: 0,
        progressive: false,
        mpf: Vec::new(),
        good_end: 2,
        lenient: tables.lenient,
        junk_skips: 0,
        junk_bytes: 0,
    };
    match w.markers(d, tables) {
        ControlFlow::Break(v) => v,
        ControlFlow::Continue(()) => w.damaged(d, w.good_end, w.c.pos(), "too many markers".into()),
    }
}

impl Walk<'_> {
    /// The window ends: what was walked is a partial file.
    fn cut(&self) -> Option<Verdict> {
        Some(Verdict::partial(self.src.len(), self.src.cut_note()))
    }

    /// Damage at `fail` after the structures up to `good_end` checked out;
    /// damage before a second segment confirmed the first: a false hit.
    fn damaged(&self, d: &mut Damage, good_end: u64, fail: u64, note: String) -> Option<Verdict> {
        if self.segments < 2 {
            None
        } else {
            d.damaged = true;
            d.fail_at = fail.max(good_end);
            Some(Verdict::partial(good_end, note))
        }
    }

    /// Marker after marker until the walk has its answer (`Continue` after
    /// [`MAX_MARKERS`]).
    fn markers(&mut self, d: &mut Damage, tables: &mut Tables) -> Flow {
        for _ in 0..MAX_MARKERS {
            let (marker_pos, m) = self.marker(d)?;
            if self.standalone(d, tables, m, marker_pos)? {
                continue;
            }
            let seg = self.segment_at(d, tables, m, marker_pos)?;
            let ok = self.check_segment(d, tables, seg)?;
            if !ok {
                let note = format!("invalid segment {m:#04x} at {marker_pos}");
                return ControlFlow::Break(self.damaged(d, self.good_end, seg.end, note));
            }
            if seg.end > self.src.len() {
                return ControlFlow::Break(self.cut());
            }
            self.c.seek(seg.end);
            self.segments += 1;
            self.good_end = seg.end;
            if m == 0xDA {
                self.entropy_coded_data(d, tables)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// The next marker: `FF`, optional fill `FF`s, then the code; returns
    /// where it starts and the code. A lenient walk first passes foreign
    /// bytes before it as libjpeg does ([`Walk::junk`]).
    fn marker(&mut self, d: &mut Damage) -> Flow<(u64, u8)> {
        if self.lenient {
            self.junk();
        }
        let marker_pos = self.c.pos();
        match self.c.u8() {
            Some(0xFF) => {}
            Some(b) => {
                let note = format!("expected a marker at {marker_pos}, found {b:#04x}");
                d.tolerable = self.passable(marker_pos);
                return ControlFlow::Break(self.damaged(d, self.good_end, self.c.pos(), note));
            }
            None => return ControlFlow::Break(self.cut()),
        }
        let mut m = 0xFF;
        for _ in 0..4096 {
            match self.c.u8() {
                Some(0xFF) => continue,
                Some(b) => {
                    m = b;
                    break;
                }
                None => return ControlFlow::Break(self.cut()),
            }
        }
        ControlFlow::Continue((marker_pos, m))
    }

    /// Where a segment should be followed by a marker, libjpeg's
    /// `next_marker` (jdmarker.c) discards what is not one: bytes other
    /// than `FF`, and `FF 00`, warning "N extraneous bytes before marker".
    /// A lenient walk does the same, at most [`MAX_JUNK`] bytes before a
    /// marker and [`MAX_JUNK_SKIPS`] times a file; the cursor moves to the
    /// marker's first `FF` (unmoved when there is none within the bound,
    /// or no junk).
    fn junk(&mut self) {
        // (On the walk's own cursor: its buffer holds these bytes.)
        let from = self.c.pos();
        let at = marker_after_junk(&mut self.c);
        match at.filter(|&at| at > from && self.junk_skips < MAX_JUNK_SKIPS) {
            Some(at) => {
                self.junk_skips += 1;
                self.junk_bytes += at - from;
                self.c.seek(at);
            }
            None => self.c.seek(from),
        }
    }

    /// Whether a lenient walk would pass junk at `pos`, where a marker
    /// must be (else its retry is no use).
    fn passable(&mut self, pos: u64) -> bool {
        let back = self.c.pos();
        self.c.seek(pos);
        let at = marker_after_junk(&mut self.c);
        self.c.seek(back);
        at.is_some_and(|at| at > pos)
    }

    /// Markers without a length: EOI ends the walk, RSTn and TEM are
    /// passed (`true`), a second SOI, fill runs and reserved codes are
    /// damage; `false` for a marker with a segment.
    fn standalone(
        &mut self,
        d: &mut Damage,
        tables: &Tables,
        m: u8,
        marker_pos: u64,
    ) -> Flow<bool> {
        match m {
            0xD9 => ControlFlow::Break(self.eoi(tables)),
            0x01 | 0xD0..=0xD7 => {
                self.good_end = self.c.pos();
                ControlFlow::Continue(true)
            }
            0xD8 => {
                let note = format!("second SOI at {marker_pos}");
                ControlFlow::Break(self.damaged(d, self.good_end, self.c.pos(), note))
            }
            0xFF => ControlFlow::Break(self.damaged(
                d,
                self.good_end,
                self.c.pos(),
                "run of fill bytes".into(),
            )),
            m if !has_length(m) => {
                // (`FF 00` where a marker must be: junk to libjpeg.)
                d.tolerable = m == 0 && self.passable(marker_pos);
                let note = format!("reserved marker {m:#04x} at {marker_pos}");
                ControlFlow::Break(self.damaged(d, self.good_end, self.c.pos(), note))
            }
            _ => ControlFlow::Continue(false),
        }
    }

    /// The verdict at EOI: complete after a frame header and a scan (to the
    /// end of the MPF images when an index lists them intact).
    fn eoi(&self, tables: &Tables) -> Option<Verdict> {
        let end = self.c.pos();
        if !self.seen_sof || self.scans == 0 {
            return Some(Verdict::partial(end, "EOI without a frame header and scan"));
        }
        let mut v = Verdict::complete(end);
        if self.progressive {
            v.notes.push(format!("progressive, {} scans", self.scans));
        }
        if !self.mpf.is_empty() {
            match mpf_end(&self.src, end, &self.mpf, tables.budget) {
                Some(all) => {
                    v.length = all;
                    v.notes.push(format!(
                        "multi-picture (MPF): {} more image(s) after the first EOI, each decoded; the last ends at {all}",
                        self.mpf.len()
                    ));
                }
                None => v.notes.push(format!(
                    "the MPF index lists {} more image(s) that are not intact after the first EOI: carved to the first image",
                    self.mpf.len()
                )),
            }
        }
        if self.junk_skips > 0 {
            v.notes.push(format!(
                "{} foreign byte(s) before {} marker(s) passed, as libjpeg does",
                self.junk_bytes, self.junk_skips
            ));
        }
        if let Some(why) = self.undecoded_why {
            v.notes.push(format!(
                "{} scan(s) checked by marker walk only ({why})",
                self.undecoded
            ));
        }
        Some(v)
    }

    /// Reads a segment's length; an APP2 segment may hold the MPF index.
    fn segment_at(
        &mut self,
        d: &mut Damage,
        tables: &Tables,
        m: u8,
        marker_pos: u64,
    ) -> Flow<Segment> {
        let Some(len) = self.c.u16be() else {
            return ControlFlow::Break(self.cut());
        };
        let len = u64::from(len);
        let body = self.c.pos();
        let end = body - 2 + len;
        if len < 2 {
            let note = format!("segment length {len} at {marker_pos}");
            return ControlFlow::Break(self.damaged(d, self.good_end, self.c.pos(), note));
        }
        if m == 0xE2 && !tables.inner && self.mpf.is_empty() {
            self.mpf = mpf_images(&self.src, body, len - 2);
        }
        ControlFlow::Continue(Segment {
            m,
            marker_pos,
            len,
            body,
            end,
        })
    }

    /// Per-marker checks on the segment's body: whether it is valid.
    fn check_segment(&mut self, d: &mut Damage, tables: &mut Tables, seg: Segment) -> Flow<bool> {
        match seg.m {
            0xC0..=0xCF if seg.m != 0xC4 && seg.m != 0xC8 && seg.m != 0xCC => {
                self.frame_header(d, tables, seg)
            }
            0xC4 | 0xDB => self.table_segment(tables, seg),
            0xDD => {
                if let Some(ri) = self.src.u16be(seg.body) {
                    tables.restart = u32::from(ri);
                }
                ControlFlow::Continue(seg.len == 4)
            }
            0xDA => self.scan_header(seg),
            _ => ControlFlow::Continue(true),
        }
    }

    /// SOFn: P, Y, X, Nf, then 3 bytes per component; one frame per
    /// (non-hierarchical) image.
    fn frame_header(&mut self, d: &mut Damage, tables: &mut Tables, seg: Segment) -> Flow<bool> {
        let Segment {
            m,
            marker_pos,
            len,
            body,
            end,
        } = seg;
        let mut h = [0u8; 6 + 3 * 4];
        let n = self.src.read(body, &mut h);
        if n < 6 {
            return ControlFlow::Break(self.cut());
        }
        let nf = u64::from(h[5]);
        if self.seen_sof {
            let note = format!("second frame header at {marker_pos}");
            return ControlFlow::Break(self.damaged(d, self.good_end, end, note));
        }
        self.progressive |= matches!(m, 0xC2 | 0xC6 | 0xCA | 0xCE);
        self.seen_sof = true;
        let lossless = matches!(m, 0xC3 | 0xC7 | 0xCB | 0xCF);
        let precision_ok = if lossless {
            matches!(h[0], 2..=16)
        } else {
            matches!(h[0], 8 | 12)
        };
        let ok = (1..=4).contains(&nf) && len == 8 + 3 * nf && precision_ok && h[3..5] != [0, 0];
        if ok && n < 6 + 3 * nf as usize {
            return ControlFlow::Break(self.cut());
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
            let note = format!("invalid frame header at {marker_pos}");
            return ControlFlow::Break(self.damaged(d, self.good_end, end, note));
        }
        start_history(tables, &f);
        self.frame = Some(f);
        ControlFlow::Continue(ok && hv_ok)
    }

    /// DHT (loaded into `tables`) or DQT: the body parsed table by table to
    /// exactly the segment's length.
    fn table_segment(&mut self, tables: &mut Tables, seg: Segment) -> Flow<bool> {
        let body_len = (seg.len - 2) as usize;
        if self.seg_buf.len() < body_len {
            self.seg_buf.resize(body_len, 0);
        }
        let Some(b) = self.seg_buf.get_mut(..body_len) else {
            return ControlFlow::Break(self.cut());
        };
        if !self.src.read_exact(seg.body, b) {
            return ControlFlow::Break(self.cut());
        }
        ControlFlow::Continue(if seg.m == 0xC4 {
            dht_ok(b) && load_dht(b, tables)
        } else {
            dqt_ok(b)
        })
    }

    /// SOS: component count, selectors, spectral/approximation fields in
    /// range (progressive rules); the scan's components by frame index.
    fn scan_header(&mut self, seg: Segment) -> Flow<bool> {
        let Segment { len, body, .. } = seg;
        let Some(ns) = self.src.u8(body) else {
            return ControlFlow::Break(self.cut());
        };
        let ns = u64::from(ns);
        let tail = self.src.bytes::<3>(body + 1 + 2 * ns);
        let Some([ss, se, a]) = tail else {
            return ControlFlow::Break(self.cut());
        };
        let prog_ok =
            !self.progressive || ((ss == 0) == (se == 0) && se >= ss && (ss == 0 || ns == 1));
        let ok = self.seen_sof
            && (1..=4).contains(&ns)
            && len == 6 + 2 * ns
            && ss <= 63
            && se <= 63
            && a >> 4 <= 13
            && prog_ok;
        self.scan = None;
        if ok && let Some(f) = &self.frame {
            let mut sc = Scan {
                comps: Vec::new(),
                ss,
                se,
                ah: a >> 4,
            };
            for i in 0..ns {
                let Some([cs, tt]) = self.src.bytes::<2>(body + 1 + 2 * i) else {
                    return ControlFlow::Break(self.cut());
                };
                if let Some(ci) = f.comps.iter().position(|c| c.0 == cs) {
                    sc.comps
                        .push((ci, usize::from(tt >> 4 & 3), usize::from(tt & 3)));
                }
            }
            self.scan = Some(sc);
        }
        ControlFlow::Continue(ok)
    }

    /// After an SOS segment: its entropy-coded data decoded (or, where
    /// it cannot be, passed by marker search); scans a resumed walk has
    /// already decoded are skipped.
    fn entropy_coded_data(&mut self, d: &mut Damage, tables: &mut Tables) -> Flow {
        self.scans += 1;
        let scans = self.scans;
        tables.snap.scan = scans;
        // Resuming: scans decoded before the snapshot's are skipped.
        let skip = tables.snap.resume.as_ref().and_then(|r| {
            (r.m.scan > scans)
                .then(|| r.scan_ends.iter().find(|e| e.0 == scans).map(|e| e.1))
                .flatten()
        });
        if let Some(end) = skip {
            self.c.seek(end);
            self.good_end = end;
            return ControlFlow::Continue(());
        }
        let decodable = match (&self.frame, &self.scan) {
            (Some(f), Some(s)) => scan_decodable(f, s, tables),
            _ => Err("no usable frame/scan header"),
        };
        match decodable {
            Ok(()) => self.decode(d, tables),
            Err(why) => {
                // Not decodable here: find the first FF not followed by
                // 00, RSTn or FF.
                self.undecoded_why.get_or_insert(why);
                self.undecoded += 1;
                match scan_entropy(&mut self.c) {
                    Some(p) => {
                        self.c.seek(p);
                        self.good_end = p;
                        ControlFlow::Continue(())
                    }
                    None => ControlFlow::Break(self.cut()),
                }
            }
        }
    }

    /// Decodes the scan's entropy-coded data; the trail and snapshots
    /// learn where it ended.
    fn decode(&mut self, d: &mut Damage, tables: &mut Tables) -> Flow {
        let (Some(f), Some(s)) = (&self.frame, &self.scan) else {
            return ControlFlow::Break(self.cut());
        };
        let r = decode_scan(
            &mut self.c,
            &mut self.entropy_buf,
            &mut self.kept,
            tables,
            f,
            s,
        );
        if tables.snap.latest.is_some() {
            tables.snap.finalize(&tables.history);
        }
        if let Some(tr) = tables.snap.trail.as_mut() {
            tr.end_scan(&tables.snap.scan_ends, &tables.history);
        }
        match r {
            Ok(()) => {
                self.good_end = self.c.pos();
                if !tables.snap.wants.is_empty() || tables.snap.trail.is_some() {
                    tables.snap.scan_ends.push((self.scans, self.good_end));
                }
                ControlFlow::Continue(())
            }
            Err((ScanErr::Cut, _, _)) => ControlFlow::Break(self.cut()),
            Err((ScanErr::Bad(why), at, fail)) => {
                let note = format!("scan {}: {why}", self.scans);
                ControlFlow::Break(self.damaged(d, at.max(self.good_end), fail, note))
            }
        }
    }
}

/// A new frame's coefficient history: restored from the snapshot a walk
/// resumes from when it has this frame's shape (the scans before it are
/// skipped), else zeroed for a progressive frame small enough to keep.
fn start_history(tables: &mut Tables, f: &Frame) {
    let kind = f.kind;
    if let Some(tr) = tables.snap.trail.as_mut()
        && tr.first.is_some()
    {
        // (A second frame starts a history of its own.)
        tr.valid = false;
    }
    // (A history restored for an earlier frame is not the snapshot's for this one.)
    tables.restored = None;
    tables.resume_ready = false;
    tables.memo_sync = false;
    let blocks: Vec<(u64, u64)> = (0..f.comps.len()).map(|i| f.blocks(i)).collect();
    // Resuming from a snapshot with a history of this frame's
    // shape: the history the resumed scan starts from, at once
    // (the scans before it are skipped).
    let resumed = tables
        .snap
        .resume
        .as_ref()
        .and_then(|r| r.history.clone())
        .filter(|h| {
            kind == FrameKind::Progressive
                && h.len() == blocks.len()
                && h.iter()
                    .zip(&blocks)
                    .all(|(c, (w, b))| c.len() as u64 == w * b)
        });
    if let Some(from) = resumed {
        tables.history = Some(restore_history(&from));
        tables.restored = Some(Restored {
            from,
            dirty: Some(Vec::new()),
        });
        tables.resume_ready = true;
    } else if kind == FrameKind::Progressive {
        let total: u64 = blocks.iter().map(|(w, h)| w * h).sum();
        // Zeroed by writing, not `vec![0; n]`: calloc's fresh
        // pages map the shared zero page, and the decode's
        // first store to each then faults again and flushes
        // the other cores' TLBs (2-5% of a carving's time).
        tables.history = (total <= MAX_HISTORY_BLOCKS).then(|| {
            blocks
                .iter()
                .map(|(w, h)| {
                    let n = (w * h) as usize;
                    #[allow(clippy::slow_vector_initialization)]
                    let words = {
                        let mut words = Vec::with_capacity(n);
                        words.resize(n, 0u64);
                        words
                    };
                    words
                })
                .collect()
        });
    }
}

/// From the start of entropy-coded data, returns the offset of the marker
/// that ends it (the `FF` of a marker other than stuffing/RST/fill), or
/// `None` when the window ends first.
pub(super) fn scan_entropy(c: &mut Cursor) -> Option<u64> {
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

/// Stores the tables of a DHT body (already checked by [`dht_ok`]).
pub(super) fn load_dht(b: &[u8], t: &mut Tables) -> bool {
    let mut i = 0;
    while i + 17 <= b.len() {
        let (tc, th) = (b[i] >> 4, usize::from(b[i] & 3));
        let counts = &b[i + 1..i + 17];
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        let Some(syms) = b.get(i + 17..i + 17 + n) else {
            return false;
        };
        let Some(h) = Huff::shared(counts, syms, tc != 0) else {
            return false;
        };
        if tc == 0 {
            t.dc[th] = Some(h);
        } else {
            t.ac[th] = Some(h);
        }
        i += 17 + n;
    }
    true
}

/// Whether a scan can be decoded here; otherwise why not.
pub(super) fn scan_decodable(f: &Frame, s: &Scan, t: &Tables) -> Result<(), &'static str> {
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

/// Decoding state kept across segments.
/// Most further images an MPF index may list.
pub(super) const MAX_MPF_IMAGES: usize = 64;

/// The images other than the first that the MPF segment (`APP2` "MPF\0",
/// CIPA DC-007) whose body of `n` bytes starts at `body` lists: (offset from
/// the file's start, size). Offsets in the index count from the segment's
/// TIFF header. Empty when the segment is not MPF or its index is unusable.
pub(super) fn mpf_images(src: &Src, body: u64, n: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if n < 16 || !src.starts_with_at(body, b"MPF\0") {
        return out;
    }
    let mp = body + 4;
    let Some(order) = src.bytes::<2>(mp) else {
        return out;
    };
    let le = match &order {
        b"II" => true,
        b"MM" => false,
        _ => return out,
    };
    let u16at = |o: u64| if le { src.u16le(o) } else { src.u16be(o) };
    let u32at = |o: u64| if le { src.u32le(o) } else { src.u32be(o) };
    if u16at(mp + 2) != Some(42) {
        return out;
    }
    let Some(ifd) = u32at(mp + 4).map(|o| mp + u64::from(o)) else {
        return out;
    };
    let count = u16at(ifd).unwrap_or(0);
    for i in 0..u64::from(count.min(64)) {
        let e = ifd + 2 + 12 * i;
        if u16at(e) != Some(0xB002) {
            continue;
        }
        let (Some(bytes), Some(at)) = (u32at(e + 4), u32at(e + 8)) else {
            return out;
        };
        let entries = (u64::from(bytes) / 16).min(MAX_MPF_IMAGES as u64 + 1);
        for k in 0..entries {
            let ent = mp + u64::from(at) + 16 * k;
            let (Some(size), Some(off)) = (u32at(ent + 4), u32at(ent + 8)) else {
                return Vec::new();
            };
            // The first image's offset is 0: it is this file's start.
            if off != 0 && size >= 4 {
                out.push((mp + u64::from(off), u64::from(size)));
            }
        }
        break;
    }
    out.sort_unstable();
    out
}

/// Where a multi-picture file ends: every image the MPF index lists after
/// the first (which ends at `first_end`) starts at or after it, in order, and
/// validates as a complete JPEG of exactly its listed size. `None` when one
/// of them is missing, damaged or cut.
pub(super) fn mpf_end(
    src: &Src,
    first_end: u64,
    images: &[(u64, u64)],
    budget: u64,
) -> Option<u64> {
    let mut end = first_end;
    for &(off, size) in images {
        if off < end {
            return None;
        }
        let sub = src.sub(off, size)?;
        if sub.len() < size {
            return None;
        }
        let mut tables = Tables::new(budget, SnapCtl::default(), true);
        let v = walk_inner(sub, &mut Damage::default(), &mut tables)?;
        if v.status != crate::carve::validators::Status::Complete || v.length != size {
            return None;
        }
        end = off + size;
    }
    Some(end)
}
