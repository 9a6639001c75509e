//! Shared reading helpers for the validators.
//!
//! * [`Src`]: a bounded view of the image starting at the candidate's offset.
//!   All offsets given to it are *relative to the candidate*, and it never
//!   reads past `min(image end, start + max_len)`, so every validator gets the
//!   "never read outside, never past `max_len`" rule for free and lengths it
//!   reports are relative to the candidate already.
//! * [`Cursor`]: a small buffered sequential reader over a [`Src`] (one fixed
//!   64 KiB buffer, reused), for the walks that read many small fields.
//! * [`Endian`]: integer decoding for the formats whose byte order is chosen by
//!   the file (TIFF, ELF).
//! * [`inflate`]: finds the end of a raw deflate stream with fixed buffers
//!   (ZIP data descriptors, gzip).
//! * [`looks_foreign`], [`ext_indirect_block`]: content tests shared by the
//!   formats that cannot check their payload (raw pixels, PCM samples).
//!
//! Nothing here allocates in proportion to a value read from the file.

use super::{ByteReader, Context, Limits, NO_CONTEXT};

/// A file made of any number of runs of the image (`(offset, length)`, in
/// file order), as a file system lists them.
pub struct RunsView<'a> {
    r: &'a dyn ByteReader,
    /// `(file offset, image offset, length)`.
    runs: Vec<(u64, u64, u64)>,
    len: u64,
}

impl<'a> RunsView<'a> {
    pub fn new(r: &'a dyn ByteReader, runs: &[(u64, u64)]) -> Self {
        let mut at = 0u64;
        let runs = runs
            .iter()
            .map(|&(img, n)| {
                let v = (at, img, n);
                at = at.saturating_add(n);
                v
            })
            .collect();
        RunsView { r, runs, len: at }
    }
}

impl ByteReader for RunsView<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn cheap_small_reads(&self) -> bool {
        self.r.cheap_small_reads()
    }
    fn lies_in(&self, offset: u64, len: u64) -> Option<super::LiesIn<'_>> {
        let end = offset.checked_add(len).filter(|&e| e <= self.len)?;
        let runs = self
            .runs
            .iter()
            .filter_map(|&(v, img, n)| {
                let (a, b) = (offset.max(v), end.min(v + n));
                (a < b).then(|| (img + (a - v), b - a))
            })
            .collect();
        Some((self.r, runs))
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let mut done = 0usize;
        let mut i = self.runs.partition_point(|&(v, _, n)| v + n <= offset);
        while done < buf.len() {
            let Some(&(v, img, n)) = self.runs.get(i) else {
                break;
            };
            let pos = offset + done as u64;
            let within = pos - v;
            let want = ((n - within) as usize).min(buf.len() - done);
            let got = self.r.read_at(img + within, &mut buf[done..done + want]);
            done += got;
            if got < want {
                break;
            }
            i += 1;
        }
        done
    }
}

/// Size of the pieces the helpers read at once.
pub const CHUNK: usize = 64 * 1024;

/// First read of a [`Cursor`] (and of [`inflate`]): small, because most
/// candidates are rejected within their first bytes, and on dense input (a
/// header every few bytes) each candidate's first read is the carving's work
/// per header hit. Later reads double up to [`CHUNK`].
const FIRST_READ: usize = 256;

/// Where the scan found some signatures, as it goes: every occurrence of a
/// logged signature that starts at or after `from` and below the log's
/// frontier is in it. A validator's forward search for such a signature
/// ([`Src::find_with_last`]) asks it instead of reading the image there.
pub trait SignatureLog: Send + Sync {
    /// The frontier: every occurrence of `sig` starting in `[from, t)` is
    /// logged; `None` when `sig` is not logged from `from` on.
    fn logged_through(&self, sig: &[u8], from: u64) -> Option<u64>;
    /// The first logged start of `sig` in `[from, below)`.
    fn first_in(&self, sig: &[u8], from: u64, below: u64) -> Option<u64>;
    /// The last logged start of `sig` in `[from, below)`.
    fn last_in(&self, sig: &[u8], from: u64, below: u64) -> Option<u64>;
    /// What the carving's forward searches past the log's frontier found,
    /// for the later candidates that ask again ([`SearchMemo`]).
    fn memo(&self) -> Option<&SearchMemo> {
        None
    }
}

/// Forward searches of a carving, remembered for the candidates that repeat
/// them: N headers of one type back to back, each searching forward for the
/// same footer (`%%EOF`) or the end of the same run of text, cost the search
/// once and N look-ups, not N searches of the same bytes. Entries are in
/// image offsets, per reader and per search (needles, or a named scan); at
/// most [`MEMO_ENTRIES`] per search are kept (then the older half is
/// forgotten: bounded memory, never a wrong answer).
#[derive(Debug, Default)]
pub struct SearchMemo {
    /// By reader, then by search (looked up by borrowed key: a look-up
    /// allocates nothing, and dense input asks millions).
    found: std::sync::Mutex<std::collections::HashMap<usize, PerReader>>,
    /// The chunk and box walks of the carving ([`super::walks`]).
    walks: super::walks::WalkMemo,
}

/// One search's remembered answers, by the image offset searched from.
type Searches = std::collections::BTreeMap<u64, Found>;

/// One reader's searches, by their needles or scan name.
type PerReader = std::collections::HashMap<Vec<u8>, Searches>;

/// Entries kept per search.
const MEMO_ENTRIES: usize = 1 << 16;

/// What a [`SearchMemo`] knows of a search asked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recall {
    Nothing,
    /// The search's answer: the first needle, the last second needle
    /// before it (or before the window's end when there is none).
    Answer(Option<u64>, Option<u64>),
    /// Nothing wholly below this offset: search on from it (the last second
    /// needle so far given).
    From(u64, Option<u64>),
}

/// One remembered search from an offset: no occurrence started in
/// `[from, first)` (or, with `first` none, in `[from, upto)`).
#[derive(Clone, Copy, Debug)]
struct Found {
    upto: u64,
    first: Option<u64>,
    /// The last start of the search's second needle wholly before `first`
    /// (or before `upto`).
    last: Option<u64>,
}

impl SearchMemo {
    fn entry(&self, reader: usize, key: &[u8], at: u64) -> Option<(u64, Found)> {
        let map = self.found.lock().unwrap_or_else(|e| e.into_inner());
        let per = map.get(&reader)?.get(key)?;
        per.range(..=at).next_back().map(|(&f, &e)| (f, e))
    }

    fn insert(&self, reader: usize, key: &[u8], from: u64, e: Found) {
        let mut map = self.found.lock().unwrap_or_else(|e| e.into_inner());
        let searches = map.entry(reader).or_default();
        if !searches.contains_key(key) {
            searches.insert(key.to_vec(), Searches::new());
        }
        let Some(per) = searches.get_mut(key) else {
            return;
        };
        if per.len() >= MEMO_ENTRIES {
            // The older half goes: candidates come in about ascending order,
            // and an answer is looked up from the nearest search before it.
            if let Some(&mid) = per.keys().nth(per.len() / 2) {
                *per = per.split_off(&mid);
            }
        }
        per.insert(from, e);
    }

    /// What a search remembered says of a forward search for needles of `n`
    /// bytes ([`Src::find_with_last`], [`Src::find_byte_memo`]) over the
    /// window `[a, b)` of the image.
    fn recall(&self, reader: usize, key: &[u8], n: u64, (a, b): (u64, u64)) -> Recall {
        let Some((_, e)) = self.entry(reader, key, a) else {
            return Recall::Nothing;
        };
        let last = e.last.filter(|&q| q >= a);
        match e.first {
            Some(p) if p >= a && p + n <= b => Recall::Answer(Some(p), last),
            // Nothing starts in [a, p), and what starts at p or later does
            // not fit in the window.
            Some(p) if p >= a => Recall::Answer(None, None),
            Some(_) => Recall::Nothing,
            None if b <= e.upto => Recall::Answer(None, last),
            // Nothing wholly in [a, upto): the search goes on from there.
            None if e.upto > a => Recall::From(e.upto, last),
            None => Recall::Nothing,
        }
    }

    /// Where a forward scan named `kind` from `a` in a window ending at `b`
    /// ends, when one remembered from at or before `a` ran past `a`. The scan
    /// must stop at the first unit failing a test of that unit alone, and `a`
    /// must lie on a unit boundary of the remembered scan (an ASCII byte of a
    /// UTF-8 text run): then both scans stop at the same byte. A remembered
    /// scan that stopped at its own window's end answers only windows ending
    /// no later.
    /// `Some((end, true))`: the scan ends at `end` (at most `b`);
    /// `Some((at, false))`: it runs at least to `at` (where the remembered
    /// scan's window ended) and goes on from there.
    pub fn run_end(&self, reader: usize, kind: &[u8], a: u64, b: u64) -> Option<(u64, bool)> {
        let (_, e) = self.entry(reader, kind, a)?;
        let end = e.first.unwrap_or(e.upto);
        if end <= a {
            return None;
        }
        match e.first {
            Some(end) => Some((end.min(b), true)),
            None if b <= e.upto => Some((b, true)),
            None => Some((e.upto, false)),
        }
    }

    /// Remembers a forward scan `kind` from `a` that ended at `end`: at a
    /// failing byte, or (`cut`) at its window's end.
    pub fn note_run(&self, reader: usize, kind: &[u8], a: u64, end: u64, cut: bool) {
        let e = if cut {
            Found {
                upto: end,
                first: None,
                last: None,
            }
        } else {
            Found {
                upto: end,
                first: Some(end),
                last: None,
            }
        };
        self.insert(reader, kind, a, e);
    }
}

/// Which reader `r` is (its address: equal for every use of one reader
/// while it lives).
pub fn reader_id(r: &dyn ByteReader) -> usize {
    r as *const dyn ByteReader as *const () as usize
}

/// A bounded window of the image: `[start, start + len)` with
/// `len = min(image length - start, max_len)`. Offsets are relative to `start`.
#[derive(Clone, Copy)]
pub struct Src<'a> {
    r: &'a dyn ByteReader,
    base: u64,
    len: u64,
    by_limit: bool,
    /// What the validation shares with the carving.
    cx: &'a Context,
}

impl<'a> Src<'a> {
    /// The validation's signature log, when this window is of the image
    /// the log is of.
    fn log(&self) -> Option<std::sync::Arc<dyn SignatureLog>> {
        self.cx
            .log
            .as_ref()
            .filter(|(_, id)| *id == reader_id(self.r))
            .map(|(log, _)| log.clone())
    }

    /// What this validation shares with the carving.
    pub fn context(&self) -> &'a Context {
        self.cx
    }

    /// This window, validated with what `cx` shares instead.
    pub fn with_context<'b>(&self, cx: &'b Context) -> Src<'b>
    where
        'a: 'b,
    {
        Src { cx, ..*self }
    }

    /// Where a forward scan `kind` from window offset `from` ends, when an
    /// earlier candidate's scan of the same run says ([`SearchMemo::run_end`]:
    /// the scan stops at the first unit failing a test of that unit alone,
    /// and `from` is on a unit boundary of it): `(end, true)`, at most the
    /// window's length; or `(at, false)`: the run reaches at least `at`,
    /// where the scan goes on (a unit boundary).
    pub fn memo_run_end(&self, kind: &[u8], from: u64) -> Option<(u64, bool)> {
        let log = self.log()?;
        let memo = log.memo()?;
        let (end, done) = memo.run_end(
            reader_id(self.r),
            kind,
            self.base.checked_add(from)?,
            self.base.checked_add(self.len)?,
        )?;
        Some((end - self.base, done))
    }

    /// Where the walk `kind` standing at window offset `at` (in `state`) gets by the
    /// segments earlier walks noted ([`super::walks`]): ending at most at
    /// `below` (clamped to the window), in at most `max_steps` steps, with
    /// flags `ok` accepts. Offsets relative to the window.
    pub fn walk_jump(
        &self,
        kind: &'static str,
        (at, state): (u64, u32),
        (below, max_steps): (u64, u32),
        ok: impl Fn(u32) -> bool,
    ) -> Option<super::walks::Segment> {
        // (The log borrowed, not cloned: a walk asks at every step.)
        let (log, id) = self.cx.log.as_ref()?;
        if *id != reader_id(self.r) {
            return None;
        }
        let memo = log.memo()?;
        let below = self.base.checked_add(below.min(self.len))?;
        let s = memo.walks.jump(
            (reader_id(self.r), kind),
            (self.base.checked_add(at)?, state),
            (below, max_steps),
            ok,
        )?;
        Some(super::walks::Segment {
            to: s.to - self.base,
            ..s
        })
    }

    /// The walk `noting` notes went through `t` and stands at `at` (window
    /// offset, state): its segment is noted once long enough.
    pub fn walk_took(
        &self,
        noting: &mut super::walks::Noting,
        t: super::walks::Took,
        at: (u64, u32),
    ) {
        if let Some((from, seg)) = noting.took(t, at) {
            self.walk_note(noting.kind(), from, seg);
        }
    }

    /// Notes that the walk `kind` went from window offset `from` by `seg`
    /// (its end a window offset too).
    pub fn walk_note(&self, kind: &'static str, from: (u64, u32), seg: super::walks::Segment) {
        let Some(log) = self.log() else {
            return;
        };
        if let (Some(memo), Some(a), Some(to)) = (
            log.memo(),
            self.base.checked_add(from.0),
            self.base.checked_add(seg.to),
        ) {
            memo.walks.note(
                (reader_id(self.r), kind),
                (a, from.1),
                super::walks::Segment { to, ..seg },
            );
        }
    }

    /// The first `byte` in `[from, from + limit)` of the window. With the
    /// carving's memo ([`SearchMemo`]) the search runs on to the window's end
    /// once and later candidates look its answer up (a shebang line's end
    /// for every `#!` header of a run of text); without it, at most `limit`
    /// bytes are read.
    pub fn find_byte_memo(&self, byte: u8, from: u64, limit: u64) -> Option<u64> {
        let within = |p: u64| (p < from.saturating_add(limit)).then_some(p);
        let memo = self.log();
        let memo = memo.as_deref().and_then(|l| l.memo());
        let (Some(memo), Some(a), Some(b)) = (
            memo,
            self.base.checked_add(from),
            self.base.checked_add(self.len),
        ) else {
            return self.find_byte(byte, from, from.saturating_add(limit));
        };
        let rid = reader_id(self.r);
        let key = [b'b', byte];
        let search_from = match memo.recall(rid, &key, 1, (a, b)) {
            Recall::Answer(p, _) => return p.and_then(|p| within(p - self.base)),
            // None in [a, upto): the search goes on from there.
            Recall::From(upto, _) => upto - self.base,
            Recall::Nothing => from,
        };
        let found = self.find_byte(byte, search_from, self.len);
        memo.insert(
            rid,
            &key,
            a,
            Found {
                upto: b,
                first: found.map(|p| p + self.base),
                last: None,
            },
        );
        found.and_then(within)
    }

    /// The first `byte` in `[from, to)` of the window, read in pieces.
    fn find_byte(&self, byte: u8, from: u64, to: u64) -> Option<u64> {
        let to = to.min(self.len);
        let mut pos = from;
        let mut piece = FIRST_READ;
        let mut buf = Vec::new();
        while pos < to {
            let want = usize::try_from(to - pos).map_or(piece, |w| w.min(piece));
            piece = (piece * 2).min(CHUNK);
            if buf.len() < want {
                buf.resize(want, 0);
            }
            let got = self.read(pos, &mut buf[..want]);
            if let Some(i) = memchr::memchr(byte, &buf[..got]) {
                return Some(pos + i as u64);
            }
            if got < want {
                return None;
            }
            pos += got as u64;
        }
        None
    }

    /// Remembers that a forward scan `kind` from window offset `from` ended at
    /// `end`: at a failing unit, or (`cut`) because the window ended there
    /// (or a unit at `end` runs past it).
    pub fn memo_note_run(&self, kind: &[u8], from: u64, end: u64, cut: bool) {
        let Some(log) = self.log() else {
            return;
        };
        if let (Some(memo), Some(a), Some(e)) = (
            log.memo(),
            self.base.checked_add(from),
            self.base.checked_add(end),
        ) {
            memo.note_run(reader_id(self.r), kind, a, e, cut || end >= self.len);
        }
    }

    /// The window for a candidate at `start`, validated on its own.
    pub fn new(r: &'a dyn ByteReader, start: u64, limits: Limits) -> Self {
        Src::in_context(r, start, limits, &NO_CONTEXT)
    }

    /// The window for a candidate at `start`, validated with what `cx` shares.
    pub fn in_context(r: &'a dyn ByteReader, start: u64, limits: Limits, cx: &'a Context) -> Self {
        let rest = r.len().saturating_sub(start);
        let len = rest.min(limits.max_len);
        Src {
            r,
            base: start,
            len,
            by_limit: limits.max_len < rest,
            cx,
        }
    }

    /// True when a file ending at window offset `end` ends where file systems
    /// end files: on a 512-byte boundary of the image, or followed by zero
    /// bytes up to the next one (the slack of its last cluster).
    pub fn ends_cleanly(&self, end: u64) -> bool {
        let pad = (512 - self.base.saturating_add(end) % 512) % 512;
        if pad == 0 {
            return true;
        }
        let mut buf = [0u8; 512];
        let Some(b) = buf.get_mut(..pad as usize) else {
            return false;
        };
        self.read_exact(end, b) && b.iter().all(|&x| x == 0)
    }

    /// The window `[off, off + max_len)` of this one (clipped to it), for a
    /// structure inside the file that is validated on its own.
    pub fn sub(&self, off: u64, max_len: u64) -> Option<Src<'a>> {
        let rest = self.len.checked_sub(off)?;
        Some(Src {
            r: self.r,
            base: self.base.checked_add(off)?,
            len: rest.min(max_len),
            by_limit: self.by_limit || max_len < rest,
            cx: self.cx,
        })
    }

    /// Length of the window (what a validator may read and report at most).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Which reader this window reads (its address: equal for windows of
    /// one reader while it lives).
    pub fn reader_id(&self) -> usize {
        reader_id(self.r)
    }

    /// Up to `n` bytes right before the window (fewer at the reader's
    /// start), into `out`: what precedes a candidate.
    pub fn preceding(&self, n: u64, out: &mut Vec<u8>) {
        let k = n.min(self.base);
        out.resize(k as usize, 0);
        let got = self.r.read_at(self.base - k, out);
        out.truncate(got);
    }

    /// Offset in the reader of window offset `off`.
    pub fn abs(&self, off: u64) -> u64 {
        self.base.saturating_add(off)
    }

    /// The reader with identity `id` ([`Src::reader_id`]) when the window's
    /// reader is that one or a view of it ([`ByteReader::lies_in`]).
    pub fn image_reader(&self, id: usize) -> Option<&'a dyn ByteReader> {
        if reader_id(self.r) == id {
            return Some(self.r);
        }
        let (inner, _) = self.r.lies_in(0, 0)?;
        (reader_id(inner) == id).then_some(inner)
    }

    /// Where window bytes `[off, off + len)` lie in the reader with identity
    /// `id` (the window's reader or the one it is a view of), as runs.
    pub fn image_runs(&self, id: usize, off: u64, len: u64) -> Option<Vec<(u64, u64)>> {
        if !self.has(off, len) {
            return None;
        }
        let at = self.abs(off);
        if reader_id(self.r) == id {
            return Some(vec![(at, len)]);
        }
        let (inner, runs) = self.r.lies_in(at, len)?;
        (reader_id(inner) == id).then_some(runs)
    }

    /// How many of the `len` bytes at window offset `off`, from the first
    /// on, lie in the window and equal the bytes of `image` (identity `id`)
    /// along `runs` (`len` bytes in all; 0 when the runs add up to another
    /// length): `len` when every one does. A byte that cannot be read
    /// counts as different. Where the window's bytes are `image`'s at the
    /// very offsets `runs` name (a decode of the same file's head again),
    /// they are equal without being read.
    pub fn common_prefix_runs(
        &self,
        off: u64,
        (image, id): (&dyn ByteReader, usize),
        runs: &[(u64, u64)],
        len: u64,
    ) -> u64 {
        if runs.iter().map(|r| r.1).sum::<u64>() != len {
            return 0;
        }
        // Where the window's bytes lie in `image` (as far as both go).
        let mine = self
            .image_runs(id, off, len.min(self.len.saturating_sub(off)))
            .unwrap_or_default();
        let mut seg = 0usize;
        let mut seg_at = 0u64;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut done = 0u64;
        for &(at, n) in runs {
            let mut k = 0u64;
            while k < n {
                // The window's run holding byte `done`, and what is left of it.
                while mine.get(seg).is_some_and(|r| seg_at + r.1 <= done) {
                    seg_at += mine[seg].1;
                    seg += 1;
                }
                let here = mine
                    .get(seg)
                    .map(|&(p, l)| (p + (done - seg_at), seg_at + l - done));
                let there = at.saturating_add(k);
                if let Some((p, left)) = here
                    && p == there
                    && there < image.len()
                {
                    // The same bytes of the same image.
                    let step = (n - k).min(left).min(image.len() - there);
                    done += step;
                    k += step;
                    continue;
                }
                let m = usize::try_from(n - k).map_or(CHUNK, |r| r.min(CHUNK));
                let m = here.map_or(m, |(_, left)| m.min(usize::try_from(left).unwrap_or(m)));
                a.resize(m, 0);
                b.resize(m, 0);
                let (x, y) = (&mut a[..m], &mut b[..m]);
                let got_x = self.read(off.saturating_add(done), x);
                let got_y = image.read_at(there, y);
                let got = got_x.min(got_y).min(m);
                let same = if x[..got] == y[..got] {
                    got
                } else {
                    x.iter().zip(y.iter()).take_while(|(p, q)| p == q).count()
                };
                done += same as u64;
                if same < m {
                    return done;
                }
                k += m as u64;
            }
        }
        done
    }

    /// True when the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A note saying why a structure that runs past the window is cut.
    pub fn cut_note(&self) -> String {
        if self.by_limit {
            format!("truncated: max_len ({}) reached", self.len)
        } else {
            "truncated: image ends".to_string()
        }
    }

    /// True when `[off, off + n)` lies inside the window.
    pub fn has(&self, off: u64, n: u64) -> bool {
        off.checked_add(n).is_some_and(|e| e <= self.len)
    }

    /// Reads up to `buf.len()` bytes at `off`, never past the window; returns
    /// how many bytes were read.
    pub fn read(&self, off: u64, buf: &mut [u8]) -> usize {
        if off >= self.len {
            return 0;
        }
        let avail = self.len - off;
        let n = usize::try_from(avail).map_or(buf.len(), |a| a.min(buf.len()));
        let Some(abs) = self.base.checked_add(off) else {
            return 0;
        };
        let mut done = 0;
        // A reader may return short reads before the end; retry a few times.
        for _ in 0..4 {
            if done == n {
                break;
            }
            let Some(dst) = buf.get_mut(done..n) else {
                break;
            };
            let got = self.r.read_at(abs + done as u64, dst).min(dst.len());
            if got == 0 {
                break;
            }
            done += got;
        }
        done
    }

    /// Reads exactly `buf.len()` bytes at `off`; false when they are not all
    /// inside the window.
    pub fn read_exact(&self, off: u64, buf: &mut [u8]) -> bool {
        self.read(off, buf) == buf.len()
    }

    /// `N` bytes at `off`.
    pub fn bytes<const N: usize>(&self, off: u64) -> Option<[u8; N]> {
        let mut b = [0u8; N];
        self.read_exact(off, &mut b).then_some(b)
    }

    pub fn u8(&self, off: u64) -> Option<u8> {
        self.bytes::<1>(off).map(|b| b[0])
    }
    pub fn u16le(&self, off: u64) -> Option<u16> {
        self.bytes(off).map(u16::from_le_bytes)
    }
    pub fn u16be(&self, off: u64) -> Option<u16> {
        self.bytes(off).map(u16::from_be_bytes)
    }
    pub fn u32le(&self, off: u64) -> Option<u32> {
        self.bytes(off).map(u32::from_le_bytes)
    }
    pub fn u32be(&self, off: u64) -> Option<u32> {
        self.bytes(off).map(u32::from_be_bytes)
    }
    pub fn u64le(&self, off: u64) -> Option<u64> {
        self.bytes(off).map(u64::from_le_bytes)
    }
    pub fn u64be(&self, off: u64) -> Option<u64> {
        self.bytes(off).map(u64::from_be_bytes)
    }

    /// True when the bytes at `off` equal `pat`.
    pub fn starts_with_at(&self, off: u64, pat: &[u8]) -> bool {
        let mut b = [0u8; 64];
        let Some(dst) = b.get_mut(..pat.len()) else {
            return false;
        };
        self.read_exact(off, dst) && dst == pat
    }

    /// Feeds `[off, off + n)` to `f` in pieces of at most [`CHUNK`] bytes, using
    /// `scratch` as the buffer (grown to `CHUNK` once). Returns the number of
    /// bytes fed: less than `n` when the window ends first.
    pub fn for_each_chunk(
        &self,
        off: u64,
        n: u64,
        scratch: &mut Vec<u8>,
        mut f: impl FnMut(&[u8]),
    ) -> u64 {
        // Grown to what this call needs only: zeroing 64 KiB for a 13-byte
        // chunk, once per candidate, was a visible cost on dense input.
        let need = usize::try_from(n).map_or(CHUNK, |n| n.min(CHUNK));
        if scratch.len() < need {
            scratch.resize(need, 0);
        }
        let mut done = 0u64;
        while done < n {
            let want = usize::try_from(n - done).map_or(CHUNK, |w| w.min(CHUNK));
            let Some(buf) = scratch.get_mut(..want) else {
                break;
            };
            let got = self.read(off.saturating_add(done), buf);
            if got == 0 {
                break;
            }
            f(&buf[..got.min(want)]);
            done += got as u64;
        }
        done
    }

    /// The first offset in `[from, to)` (clamped to the window) where `needle`
    /// starts and lies completely inside `[from, to)`. Reads 4 KiB first and
    /// doubles the piece size up to [`CHUNK`].
    pub fn find(&self, needle: &[u8], from: u64, to: u64, scratch: &mut Vec<u8>) -> Option<u64> {
        let to = to.min(self.len);
        if needle.is_empty() || needle.len() >= CHUNK || from >= to {
            return None;
        }
        let finder = memchr::memmem::Finder::new(needle);
        let overlap = (needle.len() - 1) as u64;
        let mut pos = from;
        // Small first reads, doubling: a near hit costs little, a far one
        // is read in full-size pieces.
        let mut piece = (needle.len() * 2).clamp(4096, CHUNK);
        while pos < to {
            let want = usize::try_from(to - pos).map_or(piece, |w| w.min(piece));
            piece = (piece * 2).min(CHUNK);
            if scratch.len() < want {
                scratch.resize(want, 0);
            }
            let buf = scratch.get_mut(..want)?;
            let got = self.read(pos, buf);
            if got < needle.len() {
                return None;
            }
            if let Some(i) = finder.find(&buf[..got]) {
                return Some(pos + i as u64);
            }
            if pos + (got as u64) >= to {
                return None;
            }
            pos += got as u64 - overlap;
        }
        None
    }

    /// [`Src::find`] of `needle`, also telling where the last occurrence of
    /// `other` (as long as `needle`) lies wholly in `[from, found)`: one
    /// read of the bytes for both (a validator that asks both of the same
    /// long stretch would otherwise read it twice or three times).
    pub fn find_with_last<const N: usize>(
        &self,
        needle: &[u8; N],
        other: &[u8; N],
        from: u64,
        to: u64,
        scratch: &mut Vec<u8>,
    ) -> (Option<u64>, Option<u64>) {
        let to = to.min(self.len);
        if N == 0 || N >= CHUNK || from >= to {
            return (None, None);
        }
        // Where the scan's log holds both signatures: looked up, not read;
        // where an earlier candidate searched the same bytes: remembered.
        let log = self.log();
        let base = self.base;
        let Some(abs_to) = base.checked_add(to) else {
            return (None, None);
        };
        let key = [&needle[..], &other[..]].concat();
        let rid = reader_id(self.r);
        let memo = log.clone();
        let memo = memo.as_deref().and_then(|l| l.memo());
        let recall = memo.map_or(Recall::Nothing, |m| {
            m.recall(rid, &key, N as u64, (base + from, abs_to))
        });
        let (search_from, last_before) = match recall {
            Recall::Answer(p, q) => {
                return match p {
                    Some(p) => (Some(p - base), q.map(|q| q - base)),
                    None => (None, None),
                };
            }
            // (Occurrences of `other` that start up to N - 1 bytes before
            // `upto` were not wholly below it: searched again.)
            Recall::From(upto, q) => (
                (upto - base).saturating_sub(N as u64 - 1).max(from),
                q.map(|q| q - base),
            ),
            Recall::Nothing => (from, None),
        };
        let (first, last) =
            self.find_with_last_searched(needle, other, (search_from, to), log, scratch);
        let last = last.or(last_before);
        if let Some(m) = memo {
            m.insert(
                rid,
                &key,
                base + from,
                Found {
                    upto: abs_to,
                    first: first.map(|p| p + base),
                    last: last.map(|q| q + base),
                },
            );
        }
        match first {
            Some(p) => (Some(p), last),
            None => (None, None),
        }
    }

    /// [`Src::find_with_last`] without the memo: from the log, then reading.
    /// The last `other` is given also when `needle` is not found (the last
    /// wholly in the window then), for the memo.
    fn find_with_last_searched<const N: usize>(
        &self,
        needle: &[u8; N],
        other: &[u8; N],
        (from, to): (u64, u64),
        log: Option<std::sync::Arc<dyn SignatureLog>>,
        scratch: &mut Vec<u8>,
    ) -> (Option<u64>, Option<u64>) {
        let mut last = None;
        let overlap = (N - 1) as u64;
        let first = needle[0];
        let mut pos = from;
        let base = self.base;
        if let Some(log) = log
            && base.checked_add(to).is_some()
            && let (Some(a), Some(b)) = (
                log.logged_through(needle, base + from),
                log.logged_through(other, base + from),
            )
        {
            // Starts logged in [from, t), of occurrences wholly before `to`.
            let t = a.min(b).saturating_sub(base).clamp(from, to);
            let fits = t.min((to + 1).saturating_sub(N as u64));
            if fits > from {
                if let Some(p) = log.first_in(needle, base + from, base + fits) {
                    let p = p - base;
                    let q = (p + 1)
                        .checked_sub(N as u64)
                        .and_then(|below| log.last_in(other, base + from, base + below))
                        .map(|q| q - base);
                    return (Some(p), q);
                }
                // Not there: read on from the first start not logged (and
                // the `N − 1` before it, so that `other` is seen whole).
                last = (t + 1)
                    .checked_sub(N as u64)
                    .and_then(|below| log.last_in(other, base + from, base + below))
                    .map(|q| q - base);
                pos = t.saturating_sub(overlap).max(from);
            }
        }
        let mut piece = (N * 2).clamp(4096, CHUNK);
        while pos < to {
            let want = usize::try_from(to - pos).map_or(piece, |w| w.min(piece));
            piece = (piece * 2).min(CHUNK);
            if scratch.len() < want {
                scratch.resize(want, 0);
            }
            let Some(buf) = scratch.get_mut(..want) else {
                return (None, last);
            };
            let got = self.read(pos, buf).min(want);
            if got < N {
                return (None, last);
            }
            let buf = &buf[..got];
            // Both start with the same byte in the use this serves (`%`);
            // otherwise each is looked for at every one of its own first byte.
            let hits: Box<dyn Iterator<Item = usize>> = if other[0] == first {
                Box::new(memchr::memchr_iter(first, buf))
            } else {
                Box::new(memchr::memchr2_iter(first, other[0], buf))
            };
            for i in hits {
                let Some(w) = buf.get(i..i + N) else {
                    break;
                };
                if w == needle {
                    return (Some(pos + i as u64), last);
                }
                if w == other {
                    last = Some(pos + i as u64);
                }
            }
            if pos + (got as u64) >= to {
                return (None, last);
            }
            pos += got as u64 - overlap;
        }
        (None, last)
    }

    /// Like [`Src::find`] but returns the last occurrence in `[from, to)`.
    pub fn rfind(&self, needle: &[u8], from: u64, to: u64, scratch: &mut Vec<u8>) -> Option<u64> {
        let to = to.min(self.len);
        if needle.is_empty() || needle.len() >= CHUNK || from >= to {
            return None;
        }
        let need = usize::try_from(to - from).map_or(CHUNK, |n| n.min(CHUNK));
        if scratch.len() < need {
            scratch.resize(need, 0);
        }
        let finder = memchr::memmem::FinderRev::new(needle);
        let overlap = (needle.len() - 1) as u64;
        let mut end = to;
        while end > from {
            let begin = end.saturating_sub(CHUNK as u64).max(from);
            let want = (end - begin) as usize;
            let buf = scratch.get_mut(..want)?;
            let got = self.read(begin, buf);
            if got < want {
                return None;
            }
            if let Some(i) = finder.rfind(buf) {
                return Some(begin + i as u64);
            }
            if begin == from {
                return None;
            }
            end = begin + overlap;
        }
        None
    }
}

/// A buffered sequential reader over a [`Src`]. Reads past the window's end
/// fail (return `None`/`false`) without moving past it.
pub struct Cursor<'a> {
    src: Src<'a>,
    pos: u64,
    buf: Vec<u8>,
    buf_off: u64,
    buf_len: usize,
    /// Size of the next refill: [`FIRST_READ`] first, doubling to [`CHUNK`]
    /// (most candidates are rejected or end within their first few KiB).
    next_read: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at `pos`.
    pub fn new(src: Src<'a>, pos: u64) -> Self {
        Cursor {
            src,
            pos,
            buf: Vec::new(),
            buf_off: 0,
            buf_len: 0,
            next_read: FIRST_READ,
        }
    }

    /// Current offset (relative to the candidate).
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Moves to `pos` (may be past the end: later reads then fail).
    pub fn seek(&mut self, pos: u64) {
        self.pos = pos;
    }

    /// Bytes left in the window from the current position.
    pub fn remaining(&self) -> u64 {
        self.src.len().saturating_sub(self.pos)
    }

    /// The window this cursor reads.
    pub fn src(&self) -> Src<'a> {
        self.src
    }

    /// The buffered bytes from the current position (refilling as needed);
    /// empty only at the end of the window. Does not advance.
    pub fn chunk(&mut self) -> &[u8] {
        let in_buf = self.pos >= self.buf_off && self.pos < self.buf_off + self.buf_len as u64;
        if !in_buf {
            let want = self.next_read;
            self.next_read = (want * 2).min(CHUNK);
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            self.buf_off = self.pos;
            self.buf_len = self.src.read(self.pos, &mut self.buf[..want]);
        }
        let s = (self.pos - self.buf_off) as usize;
        self.buf.get(s..self.buf_len).unwrap_or(&[])
    }

    /// Advances by `n` bytes; false (and the position unchanged) when that
    /// would go past the end of the window.
    pub fn skip(&mut self, n: u64) -> bool {
        match self.pos.checked_add(n) {
            Some(p) if p <= self.src.len() => {
                self.pos = p;
                true
            }
            _ => false,
        }
    }

    /// Next byte.
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.chunk().first()?;
        self.pos += 1;
        Some(b)
    }

    /// Next byte without advancing.
    pub fn peek_u8(&mut self) -> Option<u8> {
        self.chunk().first().copied()
    }

    /// Fills `out` from the current position and advances; false (position
    /// unchanged) when the window ends first.
    pub fn read_exact(&mut self, out: &mut [u8]) -> bool {
        let start = self.pos;
        let mut done = 0;
        while done < out.len() {
            let c = self.chunk();
            if c.is_empty() {
                self.pos = start;
                return false;
            }
            let n = c.len().min(out.len() - done);
            out[done..done + n].copy_from_slice(&c[..n]);
            done += n;
            self.pos += n as u64;
        }
        true
    }

    /// Next `N` bytes.
    pub fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut b = [0u8; N];
        self.read_exact(&mut b).then_some(b)
    }

    pub fn u16le(&mut self) -> Option<u16> {
        self.bytes().map(u16::from_le_bytes)
    }
    pub fn u16be(&mut self) -> Option<u16> {
        self.bytes().map(u16::from_be_bytes)
    }
    pub fn u32le(&mut self) -> Option<u32> {
        self.bytes().map(u32::from_le_bytes)
    }
    pub fn u32be(&mut self) -> Option<u32> {
        self.bytes().map(u32::from_be_bytes)
    }
}

/// Byte order chosen by the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    pub fn u16(self, s: &Src, off: u64) -> Option<u16> {
        match self {
            Endian::Little => s.u16le(off),
            Endian::Big => s.u16be(off),
        }
    }
    pub fn u32(self, s: &Src, off: u64) -> Option<u32> {
        match self {
            Endian::Little => s.u32le(off),
            Endian::Big => s.u32be(off),
        }
    }
    pub fn u64(self, s: &Src, off: u64) -> Option<u64> {
        match self {
            Endian::Little => s.u64le(off),
            Endian::Big => s.u64be(off),
        }
    }
}

/// True when every byte of `id` is printable ASCII (space included): a
/// four-character code (RIFF and IFF chunk ids, MP4 brands, sfnt and WOFF
/// table tags, ICNS element types).
pub fn printable(id: &[u8]) -> bool {
    id.iter().all(|b| (0x20..0x7F).contains(b))
}

/// Little-endian u16 from the first two bytes of `b` (0 when too short).
pub fn le16(b: &[u8]) -> u16 {
    match b {
        [a, c, ..] => u16::from_le_bytes([*a, *c]),
        _ => 0,
    }
}

/// Little-endian u32 from the first four bytes of `b` (0 when too short).
pub fn le32(b: &[u8]) -> u32 {
    match b {
        [a, c, d, e, ..] => u32::from_le_bytes([*a, *c, *d, *e]),
        _ => 0,
    }
}

/// Little-endian u64 from the first eight bytes of `b` (0 when too short).
pub fn le64(b: &[u8]) -> u64 {
    match b.get(..8) {
        Some(s) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_le_bytes(a)
        }
        None => 0,
    }
}

/// Big-endian u32 from the first four bytes of `b` (0 when too short).
pub fn be32(b: &[u8]) -> u32 {
    match b {
        [a, c, d, e, ..] => u32::from_be_bytes([*a, *c, *d, *e]),
        _ => 0,
    }
}

/// True when `[at, at + n)` (at most 64 KiB of it) has the byte statistics
/// of compressed/random data or of text.
pub fn looks_foreign(src: &Src, at: u64, n: u64) -> bool {
    let mut counts = [0u32; 256];
    let mut buf = [0u8; 4096];
    let mut total = 0u64;
    let n = n.min(64 * 1024);
    while total < n {
        let want = (n - total).min(buf.len() as u64) as usize;
        let got = src.read(at + total, &mut buf[..want]);
        if got == 0 {
            break;
        }
        for &b in &buf[..got] {
            counts[usize::from(b)] += 1;
        }
        total += got as u64;
    }
    if total < 256 {
        return false;
    }
    let t = total as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / t;
            -p * p.log2()
        })
        .sum();
    let printable: u32 = counts
        .iter()
        .enumerate()
        .filter(|(b, _)| matches!(*b, 9 | 10 | 13 | 32..=126))
        .map(|(_, c)| *c)
        .sum();
    entropy >= 7.5 || f64::from(printable) >= 0.98 * t
}

/// Checks for the ext2/ext3 indirect block inside a carved file.
///
/// A file of more than 12 blocks on ext2/3 (block size 1, 2 or 4 KiB) has
/// its 13th and later data blocks listed in an indirect block, which the
/// allocator usually places right after the 12th data block. Carving such a
/// file contiguously therefore takes in the indirect block at file offset
/// `12 × block size`: a run of consecutive block numbers (u32 LE), as many
/// as the file's remaining data blocks (at most one block's worth), then
/// zeros. Returns that offset when the bytes there are exactly that, for a
/// file of `len` bytes; data formats that cannot check their contents (raw
/// pixels, PCM samples) use it to avoid calling such a file complete.
pub fn ext_indirect_block(src: &Src, len: u64) -> Option<u64> {
    let mut buf = [0u8; 4096];
    for bs in [1024u64, 2048, 4096] {
        let at = 12 * bs;
        if len <= at || !src.has(at, bs) {
            continue;
        }
        let b = &mut buf[..bs as usize];
        if !src.read_exact(at, b) {
            continue;
        }
        let first = le32(b);
        let entries = bs / 4;
        let want = (len - at).div_ceil(bs).min(entries);
        if first == 0 || u64::from(first) + want > u64::from(u32::MAX) {
            continue;
        }
        let ok = (0..entries).all(|i| {
            let v = u64::from(le32(&b[(4 * i) as usize..]));
            if i < want {
                v == u64::from(first) + i
            } else {
                v == 0
            }
        });
        if ok {
            return Some(at);
        }
    }
    None
}

/// How a raw deflate stream ended (see [`inflate`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Inflated {
    /// The stream ended after `consumed` input bytes, producing `produced` bytes.
    End { consumed: u64, produced: u64 },
    /// The window ended before the stream did.
    Cut,
    /// Invalid deflate data after `consumed` input bytes.
    Corrupt { consumed: u64 },
    /// More than the allowed output was produced before the end.
    TooLarge,
}

/// Most output one deflate stream may produce before validation gives up
/// (a bound on time, not memory: output is discarded as it is made).
pub const MAX_INFLATE_OUT: u64 = 4 << 30;

/// Inflates the raw deflate stream starting at `start` in the window, feeding
/// the output (in pieces of at most 32 KiB, then discarded) to `sink`, to find
/// where the stream ends. Memory use is fixed; time is bounded by the window
/// and by `max_out` bytes of output.
pub fn inflate(src: &Src, start: u64, max_out: u64, mut sink: impl FnMut(&[u8])) -> Inflated {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(false);
    let mut inbuf = vec![0u8; CHUNK];
    let mut out = vec![0u8; 32 * 1024];
    let mut in_off = 0usize;
    let mut in_len = 0usize;
    let mut next_read = start;
    // Reads grow from FIRST_READ to CHUNK: a stream that is corrupt at once
    // (most candidates) costs a small read.
    let mut piece = FIRST_READ;
    // Every turn consumes input, produces output, reads input or returns;
    // input is bounded by the window and output by `max_out`.
    loop {
        if in_off == in_len {
            in_len = src.read(next_read, &mut inbuf[..piece]);
            piece = (piece * 2).min(CHUNK);
            in_off = 0;
            next_read += in_len as u64;
            if in_len == 0 {
                return Inflated::Cut;
            }
        }
        let (bi, bo) = (d.total_in(), d.total_out());
        let Some(input) = inbuf.get(in_off..in_len) else {
            return Inflated::Cut;
        };
        let st = d.decompress(input, &mut out, FlushDecompress::None);
        let used = (d.total_in() - bi) as usize;
        let made = (d.total_out() - bo) as usize;
        in_off = (in_off + used).min(in_len);
        sink(out.get(..made).unwrap_or(&[]));
        match st {
            Ok(Status::StreamEnd) => {
                return Inflated::End {
                    consumed: d.total_in(),
                    produced: d.total_out(),
                };
            }
            Ok(_) => {
                if used == 0 && made == 0 {
                    // Needs more input than is buffered: keep the rest, read more.
                    let rest = in_len - in_off;
                    inbuf.copy_within(in_off..in_len, 0);
                    let upto = (rest + piece).min(CHUNK);
                    piece = (piece * 2).min(CHUNK);
                    let more = src.read(next_read, &mut inbuf[rest..upto]);
                    if more == 0 {
                        return Inflated::Cut;
                    }
                    next_read += more as u64;
                    in_off = 0;
                    in_len = rest + more;
                }
            }
            Err(_) => {
                return Inflated::Corrupt {
                    consumed: d.total_in(),
                };
            }
        }
        if d.total_out() > max_out {
            return Inflated::TooLarge;
        }
    }
}

/// A log that logs nothing (its frontier is its start) but carries a
/// memo: every search past it reads, or recalls a search remembered.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct MemoOnly(SearchMemo);

#[cfg(test)]
impl SignatureLog for MemoOnly {
    fn logged_through(&self, _sig: &[u8], _from: u64) -> Option<u64> {
        None
    }
    fn first_in(&self, _: &[u8], _: u64, _: u64) -> Option<u64> {
        None
    }
    fn last_in(&self, _: &[u8], _: u64, _: u64) -> Option<u64> {
        None
    }
    fn memo(&self) -> Option<&SearchMemo> {
        Some(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflate_finds_end() {
        use std::io::Write;
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&data).unwrap();
        let mut z = e.finish().unwrap();
        let zl = z.len() as u64;
        z.extend_from_slice(b"trailing");
        let s = src(&z, 0, u64::MAX);
        let mut n = 0u64;
        let mut h = crc32fast::Hasher::new();
        let r = inflate(&s, 0, u64::MAX, |b| {
            n += b.len() as u64;
            h.update(b)
        });
        assert_eq!(
            r,
            Inflated::End {
                consumed: zl,
                produced: 100_000
            }
        );
        assert_eq!(n, 100_000);
        assert_eq!(h.finalize(), crc32fast::hash(&data));
        let cut = z[..z.len() / 2].to_vec();
        assert_eq!(
            inflate(&src(&cut, 0, u64::MAX), 0, u64::MAX, |_| {}),
            Inflated::Cut
        );
        assert_eq!(inflate(&s, 0, 1000, |_| {}), Inflated::TooLarge);
        let bad = vec![0xFFu8; 100];
        assert!(matches!(
            inflate(&src(&bad, 0, u64::MAX), 0, u64::MAX, |_| {}),
            Inflated::Corrupt { .. }
        ));
    }

    // `Vec<u8>` (not a slice) because it is the reader type.
    #[allow(clippy::ptr_arg)]
    fn src<'a>(data: &'a Vec<u8>, start: u64, max: u64) -> Src<'a> {
        Src::new(data, start, Limits { max_len: max })
    }

    #[test]
    fn window_bounds() {
        let d: Vec<u8> = (0..100u8).collect();
        let s = src(&d, 10, 50);
        assert_eq!(s.len(), 50);
        assert_eq!(s.u8(0), Some(10));
        assert_eq!(s.u8(49), Some(59));
        assert_eq!(s.u8(50), None);
        assert_eq!(s.u32le(47), None);
        assert_eq!(s.u16be(u64::MAX), None);
        assert!(s.cut_note().contains("max_len"));
        let s = src(&d, 90, 50);
        assert_eq!(s.len(), 10);
        assert!(s.cut_note().contains("image"));
        let s = src(&d, 200, 50);
        assert_eq!(s.len(), 0);
        assert_eq!(s.u8(0), None);
    }

    #[test]
    fn find_across_chunks() {
        let mut d = vec![0u8; 3 * CHUNK];
        d[CHUNK - 2..CHUNK + 3].copy_from_slice(b"%%EOF");
        d[2 * CHUNK + 5..2 * CHUNK + 10].copy_from_slice(b"%%EOF");
        let s = src(&d, 0, u64::MAX);
        let mut sc = Vec::new();
        assert_eq!(
            s.find(b"%%EOF", 0, s.len(), &mut sc),
            Some(CHUNK as u64 - 2)
        );
        assert_eq!(
            s.find(b"%%EOF", CHUNK as u64, s.len(), &mut sc),
            Some(2 * CHUNK as u64 + 5)
        );
        assert_eq!(s.find(b"%%EOF", 0, CHUNK as u64 + 2, &mut sc), None);
        assert_eq!(
            s.rfind(b"%%EOF", 0, s.len(), &mut sc),
            Some(2 * CHUNK as u64 + 5)
        );
        assert_eq!(
            s.rfind(b"%%EOF", 0, 2 * CHUNK as u64 + 9, &mut sc),
            Some(CHUNK as u64 - 2)
        );
        assert_eq!(
            s.rfind(b"%%EOF", CHUNK as u64, 2 * CHUNK as u64 + 9, &mut sc),
            None
        );
    }

    proptest::proptest! {
        /// One pass equals the two searches it replaces: the first
        /// `needle` in the range, and the last `other` wholly before it,
        /// across chunk edges and short windows.
        #[test]
        fn find_with_last_equals_find_then_rfind(
            marks in proptest::collection::vec((0usize..3 * CHUNK, proptest::bool::ANY), 0..12),
            len in 1usize..3 * CHUNK + 64,
            from in 0u64..3 * CHUNK as u64,
            to in 0u64..4 * CHUNK as u64,
        ) {
            let mut d: Vec<u8> = (0..len).map(|i| if i % 97 == 0 { b'%' } else { (i % 251) as u8 }).collect();
            for (at, eof) in marks {
                let m: &[u8; 5] = if eof { b"%%EOF" } else { b"%PDF-" };
                if at + 5 <= d.len() {
                    d[at..at + 5].copy_from_slice(m);
                }
            }
            let s = src(&d, 0, u64::MAX);
            let mut sc = Vec::new();
            let first = s.find(b"%%EOF", from, to, &mut sc);
            let before = first.and_then(|p| s.rfind(b"%PDF-", from, p, &mut sc));
            let got = s.find_with_last(b"%%EOF", b"%PDF-", from, to, &mut sc);
            proptest::prop_assert_eq!(got, (first, before));
        }

        /// With a log of the scan's positions of both markers (complete from
        /// `lo` up to a frontier `t`, as the scan's is while it goes), the
        /// search answers as one that reads the image, whatever part of the
        /// window the log covers, for a window at any offset of the image.
        #[test]
        fn find_with_last_with_a_log_equals_without(
            marks in proptest::collection::vec((0usize..3 * CHUNK, proptest::bool::ANY), 0..12),
            len in 1usize..3 * CHUNK + 64,
            base in 0u64..600,
            from in 0u64..3 * CHUNK as u64,
            to in 0u64..4 * CHUNK as u64,
            lo in 0u64..2 * CHUNK as u64,
            t in 0u64..4 * CHUNK as u64,
            edges in proptest::collection::vec((0u64..8, proptest::bool::ANY, proptest::bool::ANY), 0..4),
        ) {
            let mut d: Vec<u8> = (0..len).map(|i| if i % 97 == 0 { b'%' } else { (i % 251) as u8 }).collect();
            // Markers just before the log's frontier and the window's end
            // (image offsets), where the two meet the reading.
            let marks = marks.into_iter().chain(edges.into_iter().filter_map(|(k, at_t, eof)| {
                let edge = if at_t { t } else { base + to };
                usize::try_from(edge.checked_sub(k)?).ok().map(|at| (at, eof))
            }));
            for (at, eof) in marks {
                let m: &[u8; 5] = if eof { b"%%EOF" } else { b"%PDF-" };
                if at + 5 <= d.len() {
                    d[at..at + 5].copy_from_slice(m);
                }
            }
            let log = std::sync::Arc::new(TestLog::of(&d, lo, t));
            let s = src(&d, base, u64::MAX);
            let mut sc = Vec::new();
            let plain = s.find_with_last(b"%%EOF", b"%PDF-", from, to, &mut sc);
            let cx = Context::NONE.with_log(log.clone(), &d);
            let logged = s.with_context(&cx).find_with_last(b"%%EOF", b"%PDF-", from, to, &mut sc);
            proptest::prop_assert_eq!(logged, plain);
        }
    }

    /// The two edges where the log meets the reading: a `%PDF-` starting just
    /// before the log's frontier (not wholly before it, so not the log's to
    /// give), and a `%%EOF` starting in the window's last bytes (logged, but
    /// not wholly inside the window).
    #[test]
    fn find_with_last_at_the_logs_edges() {
        let mut d = vec![b'.'; 4 * CHUNK];
        let t = CHUNK as u64 + 1000;
        d[t as usize - 2..t as usize + 3].copy_from_slice(b"%PDF-");
        d[t as usize + 100..t as usize + 105].copy_from_slice(b"%%EOF");
        let to = 3 * CHUNK as u64;
        d[to as usize - 3..to as usize + 2].copy_from_slice(b"%%EOF");
        let s = src(&d, 0, u64::MAX);
        let mut sc = Vec::new();
        for (t, from, to) in [(t, 0, 2 * CHUNK as u64), (to + 10, t + 200, to)] {
            let log = std::sync::Arc::new(TestLog::of(&d, 0, t));
            let plain = s.find_with_last(b"%%EOF", b"%PDF-", from, to, &mut sc);
            let cx = Context::NONE.with_log(log, &d);
            let logged = s
                .with_context(&cx)
                .find_with_last(b"%%EOF", b"%PDF-", from, to, &mut sc);
            assert_eq!(logged, plain, "frontier {t}, window {from}..{to}");
        }
    }

    /// A [`SignatureLog`] of both PDF markers in `d`, complete for starts in
    /// `[lo, t)`.
    struct TestLog {
        lo: u64,
        t: u64,
        at: [std::collections::BTreeSet<u64>; 2],
    }

    impl TestLog {
        fn of(d: &[u8], lo: u64, t: u64) -> Self {
            let find = |m: &[u8]| {
                d.windows(5)
                    .enumerate()
                    .filter(|(i, w)| *w == m && (lo..t).contains(&(*i as u64)))
                    .map(|(i, _)| i as u64)
                    .collect()
            };
            TestLog {
                lo,
                t,
                at: [find(b"%%EOF"), find(b"%PDF-")],
            }
        }
        fn k(sig: &[u8]) -> usize {
            usize::from(sig == b"%PDF-")
        }
    }

    impl SignatureLog for TestLog {
        fn logged_through(&self, _sig: &[u8], from: u64) -> Option<u64> {
            (self.lo <= from).then_some(self.t)
        }
        fn first_in(&self, sig: &[u8], from: u64, below: u64) -> Option<u64> {
            (from < below).then(|| self.at[Self::k(sig)].range(from..below).next().copied())?
        }
        fn last_in(&self, sig: &[u8], from: u64, below: u64) -> Option<u64> {
            (from < below).then(|| {
                self.at[Self::k(sig)]
                    .range(from..below)
                    .next_back()
                    .copied()
            })?
        }
    }

    proptest::proptest! {
        /// Candidates asking in turn (windows at any offset, of any length,
        /// as headers back to back do) get through the memo exactly the
        /// answers a search of the image gives: the first `%%EOF` with the
        /// last `%PDF-` before it, the first line feed, and the end of a
        /// run of text.
        #[test]
        fn searches_through_the_memo_equal_searches_of_the_image(
            marks in proptest::collection::vec((0usize..3 * CHUNK, 0u8..4), 0..16),
            len in 1usize..3 * CHUNK,
            asks in proptest::collection::vec((0usize..3 * CHUNK, 1u64..3 * CHUNK as u64, 0u64..CHUNK as u64), 1..12),
        ) {
            let mut d: Vec<u8> = (0..len).map(|i| b'a' + (i % 23) as u8).collect();
            for (at, kind) in marks {
                let m: &[u8] = match kind {
                    0 => b"%%EOF",
                    1 => b"%PDF-",
                    2 => b"\n",
                    _ => b"\x01",
                };
                if at + m.len() <= d.len() {
                    d[at..at + m.len()].copy_from_slice(m);
                }
            }
            let log: std::sync::Arc<dyn SignatureLog> = std::sync::Arc::new(MemoOnly::default());
            let image: &dyn ByteReader = &d;
            for (start, max_len, from) in asks {
                let start = start.min(d.len()) as u64;
                let plain = Src::new(image, start, Limits { max_len });
                let from = from.min(plain.len());
                let mut sc = Vec::new();
                let want = plain.find_with_last_searched(b"%%EOF", b"%PDF-", (from, plain.len()), None, &mut sc);
                let want = (want.0, want.0.and(want.1));
                let want_nl = plain.find_byte(b'\n', from, from + 1024);
                let cx = Context::NONE.with_log(log.clone(), image);
                let got = {
                    let s = Src::in_context(image, start, Limits { max_len }, &cx);
                    (
                        s.find_with_last(b"%%EOF", b"%PDF-", from, s.len(), &mut sc),
                        s.find_byte_memo(b'\n', from, 1024),
                    )
                };
                proptest::prop_assert_eq!(got, (want, want_nl), "start {} max_len {} from {}", start, max_len, from);
            }
        }
    }

    #[test]
    fn cursor_reads() {
        let d: Vec<u8> = (0..=255u8).cycle().take(CHUNK + 10).collect();
        let s = src(&d, 0, u64::MAX);
        let mut c = Cursor::new(s, CHUNK as u64 - 2);
        assert_eq!(c.u32be(), Some(u32::from_be_bytes([254, 255, 0, 1])));
        assert!(c.skip(4));
        assert!(!c.skip(5));
        assert_eq!(c.remaining(), 4);
        assert_eq!(c.bytes::<5>(), None);
        assert_eq!(c.pos(), CHUNK as u64 + 6);
        let mut sc = Vec::new();
        let mut total = 0u64;
        let n = s.for_each_chunk(5, u64::MAX, &mut sc, |b| total += b.len() as u64);
        assert_eq!(n, CHUNK as u64 + 5);
        assert_eq!(total, n);
    }
}
