//! ZIP and its family (docx/xlsx/pptx, odt/ods/odp, epub, jar, apk).
//!
//! Structure (PKWARE APPNOTE.TXT 6.3.10 §4.3): a sequence of local file
//! headers `PK\3\4` (30 bytes + name + extra), each followed by its compressed
//! data and, when general-purpose flag bit 3 is set, a data descriptor
//! (`[PK\7\8] crc csize usize`, sizes 8 bytes for ZIP64); then the central
//! directory (`PK\1\2` headers, 46 bytes + name + extra + comment, optionally
//! a digital signature `PK\5\5`), the ZIP64 end-of-central-directory record
//! (`PK\6\6`) and locator (`PK\6\7`), and the end-of-central-directory record
//! `PK\5\6` (22 bytes + comment). Android's APK Signing Block (between the
//! entries and the central directory) is recognised and skipped.
//!
//! The walk is sequential from the candidate: each local header's data is
//! skipped by its compressed size (ZIP64 extra field when the 32-bit field is
//! `FFFFFFFF`). With flag bit 3 the sizes come after the data: deflated data
//! is inflated (fixed-size buffers, output discarded) to find its end, other
//! data is searched for a `PK\7\8` whose size field matches the distance. The
//! descriptor's compressed size must match.
//!
//! Every stored or deflated, unencrypted entry's data is checked against its
//! CRC-32 (deflated data inflated with fixed buffers, output discarded, at
//! most 64 × the window or 256 MiB of output per candidate; later entries
//! are then not checked, noted): a fragmented archive whose middle is
//! someone else's data fails here even when its local headers line up.
//!
//! Cross-checks at the EOCD (with ZIP64 values where the 32-bit ones are
//! saturated): entry counts equal the central headers walked (and the local
//! headers walked), the central directory offset and size equal where it was
//! found, every central header's local-header offset is one that was walked,
//! the ZIP64 locator points at the ZIP64 record, single disk.
//!
//! * `None`: the first record is not a plausible local header, or is an EOCD
//!   that is not a valid empty archive (the tail of some other archive), or
//!   the EOCD shows the candidate is an entry in the middle of a larger
//!   archive (more central headers than local headers walked, and the
//!   central directory offset larger than where it was found).
//! * `Complete`: walked to the EOCD and every cross-check passed; length =
//!   end of the EOCD comment.
//! * `Partial`: the walk runs past the window (length = window), meets an
//!   unexpected record (length = end of the last good record), or the EOCD
//!   disagrees with the walk (length = end of the EOCD, with notes). A central
//!   directory offset past the image is just a failed cross-check: nothing is
//!   allocated or read from it.
//!
//! Subtype from the entry names: `[Content_Types].xml` with `word/`, `xl/`,
//! `ppt/` → docx/xlsx/pptx; a stored `mimetype` entry holding
//! `application/vnd.oasis.opendocument.text|spreadsheet|presentation` →
//! odt/ods/odp, `application/epub+zip` → epub; `AndroidManifest.xml` and
//! `classes.dex` → apk; `META-INF/MANIFEST.MF` → jar; otherwise zip.
//!
//! Not supported: archives split over several files, a prefix before the
//! first entry (self-extractors: the offsets then disagree → Partial), and
//! central directories that are not right after the last entry.

use super::Verdict;
use super::read::{Inflated, MAX_INFLATE_OUT, Src, inflate, le16, le32, le64};

const LFH: u32 = 0x0403_4b50;
const CDH: u32 = 0x0201_4b50;
const EOCD: u32 = 0x0605_4b50;
const Z64_EOCD: u32 = 0x0606_4b50;
const Z64_LOC: u32 = 0x0706_4b50;
const DD: u32 = 0x0807_4b50;
const DIGSIG: u32 = 0x0505_4b50;
const AED: u32 = 0x0806_4b50;
const APK_SIG_MAGIC: &[u8; 16] = b"APK Sig Block 42";

/// Records walked at most.
const MAX_RECORDS: u32 = 1 << 22;
/// Local header offsets remembered for the cross-check.
const MAX_REMEMBERED: usize = 1 << 18;
/// `PK\7\8` candidates examined per entry when searching for a descriptor.
const MAX_DD_HITS: u32 = 10_000;

#[derive(Default)]
struct Names {
    content_types: bool,
    word: bool,
    xl: bool,
    ppt: bool,
    manifest: bool,
    android: bool,
    dex: bool,
    mimetype: Option<Vec<u8>>,
}

impl Names {
    fn see(&mut self, name: &[u8]) {
        match name {
            b"[Content_Types].xml" => self.content_types = true,
            b"META-INF/MANIFEST.MF" => self.manifest = true,
            b"AndroidManifest.xml" => self.android = true,
            b"classes.dex" => self.dex = true,
            n if n.starts_with(b"word/") => self.word = true,
            n if n.starts_with(b"xl/") => self.xl = true,
            n if n.starts_with(b"ppt/") => self.ppt = true,
            _ => {}
        }
    }

    fn subtype(&self) -> &'static str {
        if self.content_types {
            if self.word {
                return "docx";
            }
            if self.xl {
                return "xlsx";
            }
            if self.ppt {
                return "pptx";
            }
        }
        if let Some(m) = &self.mimetype {
            match m.trim_ascii() {
                b"application/vnd.oasis.opendocument.text" => return "odt",
                b"application/vnd.oasis.opendocument.spreadsheet" => return "ods",
                b"application/vnd.oasis.opendocument.presentation" => return "odp",
                b"application/epub+zip" => return "epub",
                _ => {}
            }
        }
        if self.android && self.dex {
            return "apk";
        }
        if self.manifest {
            return "jar";
        }
        "zip"
    }
}

fn method_ok(m: u16) -> bool {
    matches!(
        m,
        0..=10 | 12 | 14 | 16 | 18 | 19 | 20 | 93 | 94 | 95 | 96 | 97 | 98 | 99
    )
}

/// The ZIP64 values (usize, csize, local offset) of an extra field, taking
/// only the fields whose 32-bit counterpart is saturated; in a local header
/// both sizes are present whenever the record is 16 bytes or more.
fn zip64_extra(
    extra: &[u8],
    usize32: u32,
    csize32: u32,
    off32: Option<u32>,
) -> Option<(u64, u64, u64)> {
    let mut i = 0usize;
    while i + 4 <= extra.len() {
        let id = le16(&extra[i..]);
        let n = usize::from(le16(&extra[i + 2..]));
        let body = extra.get(i + 4..i + 4 + n)?;
        if id == 1 {
            let mut u = u64::from(usize32);
            let mut c = u64::from(csize32);
            let mut o = off32.map_or(0, u64::from);
            if off32.is_none() && n >= 16 {
                u = le64(body);
                c = le64(&body[8..]);
            } else {
                let mut k = 0usize;
                let mut take = |v: &mut u64| {
                    if let Some(b) = body.get(k..k + 8) {
                        *v = le64(b);
                        k += 8;
                    }
                };
                if usize32 == u32::MAX {
                    take(&mut u);
                }
                if csize32 == u32::MAX {
                    take(&mut c);
                }
                if off32 == Some(u32::MAX) {
                    take(&mut o);
                }
            }
            return Some((u, c, o));
        }
        i += 4 + n;
    }
    None
}

pub fn validate(src: Src) -> Option<Verdict> {
    let first = src.u32le(0)?;
    let mut pos = 0u64;
    if first == DD || first == 0x3030_4b50 {
        // Split/spanned marker in front of the first entry.
        if src.u32le(4)? != LFH {
            return None;
        }
        pos = 4;
    } else if first != LFH && first != EOCD {
        return None;
    }
    Walk::new(src).run(pos)
}

struct Walk<'a> {
    src: Src<'a>,
    scratch: Vec<u8>,
    names: Names,
    locals: Vec<u64>,
    local_count: u64,
    cd_start: Option<u64>,
    cd_end: Option<u64>,
    cd_count: u64,
    bad_local_ref: u64,
    z64: Option<(u64, u64, u64, u64)>, // (position, total entries, cd size, cd offset)
    z64_loc: Option<u64>,
    records: u32,
    /// Inflated bytes the CRC checks may still produce.
    budget: u64,
    /// Some CRCs were not checked for lack of budget.
    crc_skipped: bool,
}

/// An entry's CRC-32 check.
enum Crc {
    Value(u32),
    /// The data cannot be this entry's.
    Bad(&'static str),
    /// Not computed (other methods, encrypted, budget spent).
    Skipped,
}

enum Step {
    Next(u64),
    Done(Verdict),
}

impl<'a> Walk<'a> {
    fn new(src: Src<'a>) -> Self {
        Walk {
            src,
            scratch: Vec::new(),
            names: Names::default(),
            locals: Vec::new(),
            local_count: 0,
            cd_start: None,
            cd_end: None,
            cd_count: 0,
            bad_local_ref: 0,
            z64: None,
            z64_loc: None,
            records: 0,
            budget: src.len().saturating_mul(64).max(256 << 20),
            crc_skipped: false,
        }
    }

    fn cut(&self) -> Step {
        Step::Done(Verdict::partial(self.src.len(), self.src.cut_note()))
    }

    fn damaged(&self, at: u64, note: String) -> Option<Verdict> {
        if self.records == 0 {
            return None;
        }
        Some(Verdict::partial(at, note).with_subtype(Some(self.names.subtype())))
    }

    fn run(mut self, mut pos: u64) -> Option<Verdict> {
        while self.records < MAX_RECORDS {
            let Some(sig) = self.src.u32le(pos) else {
                // Not even a signature: the image (or window) ends here.
                return (self.records > 0)
                    .then(|| Verdict::partial(self.src.len(), self.src.cut_note()));
            };
            let step = match sig {
                LFH if self.cd_start.is_none() => self.local(pos),
                CDH if self.z64.is_none() && self.z64_loc.is_none() => Ok(self.central(pos)),
                DIGSIG if self.cd_start.is_some() => Ok(self.simple(pos, 6, 4, true)),
                AED if self.cd_start.is_none() => Ok(self.aed(pos)),
                Z64_EOCD => Ok(self.z64_record(pos)),
                Z64_LOC => Ok(self.z64_locator(pos)),
                EOCD => {
                    let v = self.eocd(pos)?;
                    // An EOCD at the candidate itself is only an empty archive.
                    if self.records == 0 && v.status != super::Status::Complete {
                        return None;
                    }
                    return Some(v.with_subtype(Some(self.names.subtype())));
                }
                _ if self.cd_start.is_none() && self.records > 0 => match self.apk_block(pos) {
                    Some(s) => Ok(s),
                    None => Err(format!("unexpected bytes at {pos}")),
                },
                _ => Err(format!("unexpected record {sig:#010x} at {pos}")),
            };
            match step {
                Ok(Step::Next(p)) => pos = p,
                Ok(Step::Done(v)) => return Some(v.with_subtype(Some(self.names.subtype()))),
                Err(note) => return self.damaged(pos, note),
            }
            self.records += 1;
        }
        self.damaged(pos, "too many records".into())
    }

    /// A local file header and its data (and data descriptor).
    fn local(&mut self, pos: u64) -> Result<Step, String> {
        let Some(h) = self.src.bytes::<30>(pos) else {
            return Ok(self.cut());
        };
        let version = le16(&h[4..]);
        let flags = le16(&h[6..]);
        let method = le16(&h[8..]);
        let csize32 = le32(&h[18..]);
        let usize32 = le32(&h[22..]);
        let nlen = u64::from(le16(&h[26..]));
        let xlen = u64::from(le16(&h[28..]));
        if (version & 0xFF) > 100 || !method_ok(method) || nlen == 0 {
            return Err(format!("implausible local header at {pos}"));
        }
        // Name (first 256 bytes are enough to classify).
        let mut name = [0u8; 256];
        let nread = (nlen as usize).min(name.len());
        if !self.src.read_exact(pos + 30, &mut name[..nread]) {
            return Ok(self.cut());
        }
        let name = &name[..nread];
        if name.contains(&0) {
            return Err(format!("NUL in entry name at {pos}"));
        }
        self.names.see(name);
        let is_mimetype = name == b"mimetype";
        // Extra field (≤ 65535 bytes).
        let mut extra = vec![0u8; xlen as usize];
        if !self.src.read_exact(pos + 30 + nlen, &mut extra) {
            return Ok(self.cut());
        }
        let z64 = zip64_extra(&extra, usize32, csize32, None);
        let csize = match z64 {
            Some((_, c, _)) if csize32 == u32::MAX => c,
            _ => u64::from(csize32),
        };
        let data = pos + 30 + nlen + xlen;
        if self.locals.len() < MAX_REMEMBERED {
            self.locals.push(pos);
        }
        self.local_count += 1;
        let encrypted = flags & 1 != 0;
        // CRC-32 of the entry's uncompressed data, when computed on the way.
        let mut crc = Crc::Skipped;
        let mut want_crc = le32(&h[14..]);
        let mut data_len = csize;
        let end = if flags & 8 != 0 {
            let clen = if method == 8 && !encrypted {
                let mut hs = crc32fast::Hasher::new();
                match inflate(&self.src, data, MAX_INFLATE_OUT, |b| hs.update(b)) {
                    Inflated::End { consumed, produced } => {
                        self.budget = self.budget.saturating_sub(produced);
                        crc = Crc::Value(hs.finalize());
                        consumed
                    }
                    Inflated::Cut => return Ok(self.cut()),
                    Inflated::Corrupt { .. } => {
                        return Err(format!("corrupt deflate data in entry at {pos}"));
                    }
                    Inflated::TooLarge => {
                        return Err(format!("entry at {pos} inflates past the output cap"));
                    }
                }
            } else if csize != 0 {
                csize
            } else {
                match self.find_descriptor(data, z64.is_some()) {
                    Some(c) => c,
                    None if self.src.len() > data => {
                        return Err(format!("no data descriptor for entry at {pos}"));
                    }
                    None => return Ok(self.cut()),
                }
            };
            data_len = clen;
            let dd_at = data.saturating_add(clen);
            if dd_at > self.src.len() {
                return Ok(self.cut());
            }
            match self.descriptor_len(dd_at, clen, z64.is_some()) {
                Some((n, c)) => {
                    want_crc = c;
                    dd_at + n
                }
                None if !self.src.has(dd_at, 24) => return Ok(self.cut()),
                None => return Err(format!("data descriptor mismatch for entry at {pos}")),
            }
        } else {
            data.saturating_add(csize)
        };
        if end > self.src.len() {
            return Ok(self.cut());
        }
        // The data must be the entry's: its CRC-32 (stored and deflated
        // entries, while the inflate budget lasts).
        if matches!(crc, Crc::Skipped) && !encrypted {
            crc = self.entry_crc(method, data, data_len);
        }
        match crc {
            Crc::Value(c) if c != want_crc => {
                return Err(format!("CRC mismatch in the entry at {pos}"));
            }
            Crc::Bad(why) => return Err(format!("{why} in the entry at {pos}")),
            _ => {}
        }
        if is_mimetype && method == 0 && csize <= 128 {
            let mut m = vec![0u8; csize as usize];
            if self.src.read_exact(data, &mut m) {
                self.names.mimetype = Some(m);
            }
        }
        Ok(Step::Next(end))
    }

    /// CRC-32 of an entry's uncompressed data: stored data read directly,
    /// deflated data inflated (output discarded) within the remaining
    /// budget; `clen` is the compressed length.
    fn entry_crc(&mut self, method: u16, data: u64, clen: u64) -> Crc {
        match method {
            0 => {
                let n = clen;
                let mut hs = crc32fast::Hasher::new();
                let got = self
                    .src
                    .for_each_chunk(data, n, &mut self.scratch, |b| hs.update(b));
                if got == n {
                    Crc::Value(hs.finalize())
                } else {
                    Crc::Skipped
                }
            }
            8 if self.budget > 0 => {
                let mut hs = crc32fast::Hasher::new();
                let cap = self.budget.min(MAX_INFLATE_OUT);
                match inflate(&self.src, data, cap, |b| hs.update(b)) {
                    Inflated::End { consumed, produced } => {
                        self.budget = self.budget.saturating_sub(produced);
                        if clen != consumed {
                            Crc::Bad("deflate data does not end at the compressed size")
                        } else {
                            Crc::Value(hs.finalize())
                        }
                    }
                    Inflated::TooLarge => {
                        self.budget = 0;
                        self.crc_skipped = true;
                        Crc::Skipped
                    }
                    Inflated::Corrupt { .. } | Inflated::Cut => Crc::Bad("corrupt deflate data"),
                }
            }
            8 => {
                self.crc_skipped = true;
                Crc::Skipped
            }
            _ => Crc::Skipped,
        }
    }

    /// Searches for `PK\7\8` whose compressed-size field equals the distance
    /// from `data`; returns that distance.
    fn find_descriptor(&mut self, data: u64, z64: bool) -> Option<u64> {
        let mut from = data;
        for _ in 0..MAX_DD_HITS {
            let q = self
                .src
                .find(b"PK\x07\x08", from, self.src.len(), &mut self.scratch)?;
            let dist = q - data;
            let c32 = self.src.u32le(q + 8).map(u64::from);
            let c64 = self.src.u64le(q + 8);
            if (!z64 && c32 == Some(dist)) || (z64 && c64 == Some(dist)) {
                return Some(dist);
            }
            from = q + 1;
        }
        None
    }

    /// Length of the data descriptor at `at` for `clen` compressed bytes,
    /// and the CRC-32 it holds.
    fn descriptor_len(&self, at: u64, clen: u64, z64: bool) -> Option<(u64, u32)> {
        let s = &self.src;
        let (base, sig) = if s.u32le(at)? == DD {
            (at + 4, 4)
        } else {
            (at, 0)
        };
        let order: [u64; 2] = if z64 { [20, 12] } else { [12, 20] };
        for n in order {
            let ok = if n == 12 {
                s.u32le(base + 4).map(u64::from) == Some(clen)
            } else {
                s.u64le(base + 4) == Some(clen)
            };
            if !ok {
                continue;
            }
            let next = base + n;
            let crc = s.u32le(base)?;
            // The next record must start with PK (or the window ends there).
            match s.bytes::<2>(next) {
                Some(b) if b == *b"PK" => return Some((sig + n, crc)),
                None => return Some((sig + n, crc)),
                _ => {}
            }
        }
        None
    }

    /// A central directory header.
    fn central(&mut self, pos: u64) -> Step {
        let Some(h) = self.src.bytes::<46>(pos) else {
            return self.cut();
        };
        self.cd_start.get_or_insert(pos);
        let csize32 = le32(&h[20..]);
        let usize32 = le32(&h[24..]);
        let nlen = u64::from(le16(&h[28..]));
        let xlen = u64::from(le16(&h[30..]));
        let clen = u64::from(le16(&h[32..]));
        let off32 = le32(&h[42..]);
        let mut name = [0u8; 256];
        let nread = (nlen as usize).min(name.len());
        if !self.src.read_exact(pos + 46, &mut name[..nread]) {
            return self.cut();
        }
        self.names.see(&name[..nread]);
        let mut extra = vec![0u8; xlen as usize];
        if !self.src.read_exact(pos + 46 + nlen, &mut extra) {
            return self.cut();
        }
        let local = match zip64_extra(&extra, usize32, csize32, Some(off32)) {
            Some((_, _, o)) => o,
            None => u64::from(off32),
        };
        if self.locals.len() < MAX_REMEMBERED && self.locals.binary_search(&local).is_err() {
            self.bad_local_ref += 1;
        }
        self.cd_count += 1;
        let end = pos + 46 + nlen + xlen + clen;
        self.cd_end = Some(end);
        if end > self.src.len() {
            return self.cut();
        }
        Step::Next(end)
    }

    /// A record of `fixed` bytes whose u16 (or u32) length at `len_at` counts
    /// what follows it.
    fn simple(&mut self, pos: u64, fixed: u64, len_at: u64, u16len: bool) -> Step {
        let n = if u16len {
            self.src.u16le(pos + len_at).map(u64::from)
        } else {
            self.src.u32le(pos + len_at).map(u64::from)
        };
        let Some(n) = n else { return self.cut() };
        let end = pos + fixed + n;
        if end > self.src.len() {
            return self.cut();
        }
        self.cd_end = Some(end);
        Step::Next(end)
    }

    /// Archive extra data record (before the central directory).
    fn aed(&mut self, pos: u64) -> Step {
        let Some(n) = self.src.u32le(pos + 4) else {
            return self.cut();
        };
        let end = pos + 8 + u64::from(n);
        if end > self.src.len() {
            return self.cut();
        }
        Step::Next(end)
    }

    fn z64_record(&mut self, pos: u64) -> Step {
        let Some(h) = self.src.bytes::<56>(pos) else {
            return self.cut();
        };
        let size = le64(&h[4..]);
        let Some(end) = pos.checked_add(12).and_then(|p| p.checked_add(size)) else {
            return Step::Done(Verdict::partial(pos, "ZIP64 EOCD size overflows"));
        };
        if size < 44 {
            return Step::Done(Verdict::partial(pos, "ZIP64 EOCD record too short"));
        }
        self.z64 = Some((pos, le64(&h[32..]), le64(&h[40..]), le64(&h[48..])));
        if end > self.src.len() {
            return self.cut();
        }
        Step::Next(end)
    }

    fn z64_locator(&mut self, pos: u64) -> Step {
        let Some(h) = self.src.bytes::<20>(pos) else {
            return self.cut();
        };
        self.z64_loc = Some(le64(&h[8..]));
        Step::Next(pos + 20)
    }

    /// Android's APK Signing Block (v2+ signatures), before the central directory.
    fn apk_block(&mut self, pos: u64) -> Option<Step> {
        let size = self.src.u64le(pos)?;
        let end = pos.checked_add(8)?.checked_add(size)?;
        // Unverifiable when cut: treated as damage (the entries before it stand).
        if size < 32 || end > self.src.len() {
            return None;
        }
        let magic = self.src.bytes::<16>(end - 16)?;
        (magic == *APK_SIG_MAGIC && self.src.u64le(end - 24)? == size).then_some(Step::Next(end))
    }

    /// The end-of-central-directory record: cross-checks and the verdict.
    /// `None` when the candidate is an entry inside a larger archive.
    fn eocd(&mut self, pos: u64) -> Option<Verdict> {
        let Some(h) = self.src.bytes::<22>(pos) else {
            return Some(Verdict::partial(self.src.len(), self.src.cut_note()));
        };
        let comment = u64::from(le16(&h[20..]));
        let end = pos + 22 + comment;
        if end > self.src.len() {
            return Some(Verdict::partial(self.src.len(), self.src.cut_note()));
        }
        let disk = le16(&h[4..]);
        let cd_disk = le16(&h[6..]);
        let mut on_disk = u64::from(le16(&h[8..]));
        let mut total = u64::from(le16(&h[10..]));
        let mut cd_size = u64::from(le32(&h[12..]));
        let mut cd_off = u64::from(le32(&h[16..]));
        let mut notes = Vec::new();
        if let Some((z64pos, zt, zs, zo)) = self.z64 {
            if on_disk == 0xFFFF {
                on_disk = zt;
            }
            if total == 0xFFFF {
                total = zt;
            }
            if cd_size == 0xFFFF_FFFF {
                cd_size = zs;
            }
            if cd_off == 0xFFFF_FFFF {
                cd_off = zo;
            }
            if self.z64_loc.is_some_and(|l| l != z64pos) {
                notes.push("ZIP64 locator does not point at the ZIP64 record".to_string());
            }
        }
        // Where the central directory was found, and what it held.
        let found_off = self.cd_start.or(self.z64.map(|z| z.0)).unwrap_or(pos);
        let found_size = match (self.cd_start, self.cd_end) {
            (Some(s), Some(e)) => e - s,
            _ => 0,
        };
        if (disk != 0 && disk != 0xFFFF) || (cd_disk != 0 && cd_disk != 0xFFFF) {
            notes.push("multi-disk archive".to_string());
        }
        let count_ok = |n: u64| {
            n == self.cd_count
                || (self.z64.is_none() && self.cd_count > 0xFFFF && n == self.cd_count & 0xFFFF)
        };
        if !count_ok(total) || !count_ok(on_disk) {
            notes.push(format!(
                "EOCD says {total} entries, {} central headers walked",
                self.cd_count
            ));
        }
        if self.local_count != self.cd_count {
            notes.push(format!(
                "{} local headers but {} central headers",
                self.local_count, self.cd_count
            ));
        }
        if cd_off > found_off && self.cd_count > self.local_count && self.local_count > 0 {
            // The central directory lists entries before the candidate and is
            // itself further away than found: the candidate is an entry in
            // the middle of a larger archive, not a file start.
            return None;
        }
        if cd_off != found_off {
            notes.push(format!(
                "EOCD central directory offset {cd_off} but found at {found_off}"
            ));
            if cd_off > found_off && self.cd_count == self.local_count {
                notes.push(format!(
                    "offsets shifted by {}: a self-extracting or prefixed archive",
                    cd_off - found_off
                ));
            }
        }
        if cd_size != found_size {
            notes.push(format!(
                "EOCD central directory size {cd_size} but walked {found_size}"
            ));
        }
        if self.bad_local_ref > 0 {
            notes.push(format!(
                "{} central headers point at no walked local header",
                self.bad_local_ref
            ));
        }
        if notes.is_empty() {
            let mut v = Verdict::complete(end);
            v.notes.push(format!("{} entries", self.cd_count));
            if self.crc_skipped {
                v.notes
                    .push("some deflated entries not CRC-checked (inflate budget spent)".into());
            }
            Some(v)
        } else {
            let mut v = Verdict::partial(end, notes.remove(0));
            v.notes.extend(notes);
            Some(v)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};
    use std::io::Write;

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        docx()
    }

    pub struct Entry<'a> {
        pub name: &'a str,
        pub data: &'a [u8],
        pub deflate: bool,
        pub descriptor: bool,
        pub zip64: bool,
    }

    pub fn entry<'a>(name: &'a str, data: &'a [u8]) -> Entry<'a> {
        Entry {
            name,
            data,
            deflate: false,
            descriptor: false,
            zip64: false,
        }
    }

    /// Builds a ZIP by hand with correct local headers, central directory and EOCD.
    pub fn build(entries: &[Entry], comment: &[u8], zip64_eocd: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut cd = Vec::new();
        for e in entries {
            let crc = crc32fast::hash(e.data);
            let comp = if e.deflate {
                let mut z =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                z.write_all(e.data).unwrap();
                z.finish().unwrap()
            } else {
                e.data.to_vec()
            };
            let off = out.len() as u32;
            let flags: u16 = if e.descriptor { 8 } else { 0 };
            let method: u16 = if e.deflate { 8 } else { 0 };
            let (c32, u32_) = if e.zip64 {
                (u32::MAX, u32::MAX)
            } else if e.descriptor {
                (0, 0)
            } else {
                (comp.len() as u32, e.data.len() as u32)
            };
            let mut extra = Vec::new();
            if e.zip64 {
                extra.extend_from_slice(&1u16.to_le_bytes());
                extra.extend_from_slice(&16u16.to_le_bytes());
                extra.extend_from_slice(&(e.data.len() as u64).to_le_bytes());
                extra.extend_from_slice(&(comp.len() as u64).to_le_bytes());
            }
            out.extend_from_slice(&super::LFH.to_le_bytes());
            out.extend_from_slice(&20u16.to_le_bytes());
            out.extend_from_slice(&flags.to_le_bytes());
            out.extend_from_slice(&method.to_le_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&(if e.descriptor { 0 } else { crc }).to_le_bytes());
            out.extend_from_slice(&c32.to_le_bytes());
            out.extend_from_slice(&u32_.to_le_bytes());
            out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            out.extend_from_slice(&(extra.len() as u16).to_le_bytes());
            out.extend_from_slice(e.name.as_bytes());
            out.extend_from_slice(&extra);
            out.extend_from_slice(&comp);
            if e.descriptor {
                out.extend_from_slice(&super::DD.to_le_bytes());
                out.extend_from_slice(&crc.to_le_bytes());
                if e.zip64 {
                    out.extend_from_slice(&(comp.len() as u64).to_le_bytes());
                    out.extend_from_slice(&(e.data.len() as u64).to_le_bytes());
                } else {
                    out.extend_from_slice(&(comp.len() as u32).to_le_bytes());
                    out.extend_from_slice(&(e.data.len() as u32).to_le_bytes());
                }
            }
            cd.extend_from_slice(&super::CDH.to_le_bytes());
            cd.extend_from_slice(&20u16.to_le_bytes());
            cd.extend_from_slice(&20u16.to_le_bytes());
            cd.extend_from_slice(&flags.to_le_bytes());
            cd.extend_from_slice(&method.to_le_bytes());
            cd.extend_from_slice(&[0; 4]);
            cd.extend_from_slice(&crc.to_le_bytes());
            cd.extend_from_slice(
                &(if e.zip64 { u32::MAX } else { comp.len() as u32 }).to_le_bytes(),
            );
            cd.extend_from_slice(
                &(if e.zip64 {
                    u32::MAX
                } else {
                    e.data.len() as u32
                })
                .to_le_bytes(),
            );
            cd.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            let mut cextra = Vec::new();
            if e.zip64 {
                cextra.extend_from_slice(&1u16.to_le_bytes());
                cextra.extend_from_slice(&24u16.to_le_bytes());
                cextra.extend_from_slice(&(e.data.len() as u64).to_le_bytes());
                cextra.extend_from_slice(&(comp.len() as u64).to_le_bytes());
                cextra.extend_from_slice(&u64::from(off).to_le_bytes());
            }
            cd.extend_from_slice(&(cextra.len() as u16).to_le_bytes());
            cd.extend_from_slice(&0u16.to_le_bytes()); // comment
            cd.extend_from_slice(&[0; 8]); // disk, internal, external attrs
            cd.extend_from_slice(&(if e.zip64 { u32::MAX } else { off }).to_le_bytes());
            cd.extend_from_slice(e.name.as_bytes());
            cd.extend_from_slice(&cextra);
        }
        let cd_off = out.len() as u64;
        out.extend_from_slice(&cd);
        let n = entries.len() as u64;
        if zip64_eocd {
            let rec = out.len() as u64;
            out.extend_from_slice(&super::Z64_EOCD.to_le_bytes());
            out.extend_from_slice(&44u64.to_le_bytes());
            out.extend_from_slice(&45u16.to_le_bytes());
            out.extend_from_slice(&45u16.to_le_bytes());
            out.extend_from_slice(&[0; 8]);
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&(cd.len() as u64).to_le_bytes());
            out.extend_from_slice(&cd_off.to_le_bytes());
            out.extend_from_slice(&super::Z64_LOC.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&rec.to_le_bytes());
            out.extend_from_slice(&1u32.to_le_bytes());
        }
        out.extend_from_slice(&super::EOCD.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        let (n16, size32, off32) = if zip64_eocd {
            (0xFFFF, u32::MAX, u32::MAX)
        } else {
            (n as u16, cd.len() as u32, cd_off as u32)
        };
        out.extend_from_slice(&n16.to_le_bytes());
        out.extend_from_slice(&n16.to_le_bytes());
        out.extend_from_slice(&size32.to_le_bytes());
        out.extend_from_slice(&off32.to_le_bytes());
        out.extend_from_slice(&(comment.len() as u16).to_le_bytes());
        out.extend_from_slice(comment);
        out
    }

    fn text() -> Vec<u8> {
        (0..3000).map(|i| b"hello zip world "[i % 16]).collect()
    }

    pub fn docx() -> Vec<u8> {
        let t = text();
        build(
            &[
                entry("[Content_Types].xml", b"<Types/>"),
                Entry {
                    deflate: true,
                    ..entry("_rels/.rels", &t)
                },
                Entry {
                    deflate: true,
                    descriptor: true,
                    ..entry("word/document.xml", &t)
                },
                entry("docProps/app.xml", b"<x/>"),
            ],
            b"a comment",
            false,
        )
    }

    #[test]
    fn plain_zip_and_docx() {
        let t = text();
        let z = build(
            &[
                entry("a.txt", b"hello"),
                Entry {
                    deflate: true,
                    ..entry("b/c.txt", &t)
                },
            ],
            b"",
            false,
        );
        assert_eq!(assert_complete("zip", &z).as_deref(), Some("zip"));
        assert_prefixes("zip", &z);
        let d = docx();
        assert_eq!(assert_complete("zip", &d).as_deref(), Some("docx"));
        assert_prefixes("zip", &d);
    }

    #[test]
    fn classification() {
        let cases: &[(&[Entry], &str)] = &[
            (
                &[
                    entry("[Content_Types].xml", b"x"),
                    entry("xl/workbook.xml", b"x"),
                ],
                "xlsx",
            ),
            (
                &[
                    entry("[Content_Types].xml", b"x"),
                    entry("ppt/presentation.xml", b"x"),
                ],
                "pptx",
            ),
            (
                &[
                    entry("mimetype", b"application/vnd.oasis.opendocument.text"),
                    entry("content.xml", b"x"),
                ],
                "odt",
            ),
            (
                &[
                    entry(
                        "mimetype",
                        b"application/vnd.oasis.opendocument.spreadsheet",
                    ),
                    entry("c", b"x"),
                ],
                "ods",
            ),
            (
                &[
                    entry(
                        "mimetype",
                        b"application/vnd.oasis.opendocument.presentation",
                    ),
                    entry("c", b"x"),
                ],
                "odp",
            ),
            (
                &[
                    entry("mimetype", b"application/epub+zip"),
                    entry("META-INF/container.xml", b"x"),
                ],
                "epub",
            ),
            (
                &[
                    entry("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\n"),
                    entry("a.class", b"x"),
                ],
                "jar",
            ),
            (
                &[
                    entry("AndroidManifest.xml", b"x"),
                    entry("classes.dex", b"dex"),
                    entry("META-INF/MANIFEST.MF", b"x"),
                ],
                "apk",
            ),
        ];
        for (entries, want) in cases {
            let z = build(entries, b"", false);
            assert_eq!(assert_complete("zip", &z).as_deref(), Some(*want));
        }
    }

    /// Data descriptors (stored and deflated), ZIP64 extra fields and EOCD.
    pub fn zip64_sample() -> Vec<u8> {
        let t = text();
        build(
            &[
                Entry {
                    descriptor: true,
                    ..entry("stored-dd.txt", &t)
                },
                Entry {
                    deflate: true,
                    descriptor: true,
                    zip64: true,
                    ..entry("z64-dd", &t)
                },
                Entry {
                    zip64: true,
                    ..entry("z64", b"zip64 stored")
                },
            ],
            b"",
            true,
        )
    }

    #[test]
    fn descriptors_and_zip64() {
        let t = text();
        let z = build(
            &[
                Entry {
                    descriptor: true,
                    ..entry("stored-dd.txt", &t)
                },
                Entry {
                    deflate: true,
                    descriptor: true,
                    zip64: true,
                    ..entry("z64-dd", &t)
                },
                Entry {
                    zip64: true,
                    ..entry("z64", b"zip64 stored")
                },
            ],
            b"",
            true,
        );
        assert_eq!(assert_complete("zip", &z).as_deref(), Some("zip"));
        assert_prefixes_step("zip", &z, 7);
    }

    #[test]
    fn empty_archive() {
        let z = build(&[], b"", false);
        assert_eq!(z.len(), 22);
        assert_complete("zip", &z);
    }

    #[test]
    fn hostile_eocd() {
        // Central directory offset past the end of the image.
        let mut z = build(&[entry("a.txt", b"hello")], b"", false);
        let e = z.len() - 22;
        z[e + 16..e + 20].copy_from_slice(&0xFFFF_FF00u32.to_le_bytes());
        let v = run("zip", &z).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, z.len() as u64));
        // Wrong entry count.
        let mut z = build(&[entry("a.txt", b"hello")], b"", false);
        z[e + 10] = 7;
        assert_eq!(run("zip", &z).unwrap().status, Status::Partial);
        // Huge compressed size: Partial at the window, nothing allocated.
        let mut z = build(&[entry("a.txt", b"hello")], b"", false);
        z[18..22].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        let v = run("zip", &z).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, z.len() as u64));
        // Hostile ZIP64 EOCD size.
        let mut z = build(&[entry("a.txt", b"hello")], b"", true);
        let r = z.len() - 22 - 20 - 56;
        z[r + 4..r + 12].copy_from_slice(&u64::MAX.to_le_bytes());
        let v = run("zip", &z).unwrap();
        assert_eq!(v.status, Status::Partial);
        // Max length reached.
        let v = run_at("zip", &docx(), 0, Limits { max_len: 100 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 100));
    }

    #[test]
    fn false_positives() {
        assert!(run("zip", b"PK\x03\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\0\0\0\0").is_none());
        assert!(run("zip", b"PK\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00").is_none());
        assert!(run("zip", b"PK\x05\x06").is_none());
        // An EOCD of some other archive: not a file start.
        let z = build(&[entry("a.txt", b"hello")], b"", false);
        assert!(run("zip", &z[z.len() - 22..]).is_none());
    }

    #[test]
    fn entry_inside_archive_is_not_a_start() {
        let d = docx();
        let i = d.windows(11).position(|w| w == b"_rels/.rels").unwrap() - 30;
        assert!(run("zip", &d[i..]).is_none());
        // A prefixed (self-extracting) archive, offsets counted from the
        // prefix: Partial with a note.
        let mut z = build(&[entry("a.txt", b"hello")], b"", false);
        let e = z.len() - 22;
        let cd = u32::from_le_bytes(z[e + 16..e + 20].try_into().unwrap()) as usize;
        z[e + 16..e + 20].copy_from_slice(&(cd as u32 + 80).to_le_bytes());
        z[cd + 42..cd + 46].copy_from_slice(&80u32.to_le_bytes());
        let mut sfx = b"MZ stub ".repeat(10);
        sfx.extend_from_slice(&z);
        let v = run_at("zip", &sfx, 80, NO_LIMIT).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, z.len() as u64));
        assert!(
            v.notes.iter().any(|n| n.contains("shifted by 80")),
            "{:?}",
            v.notes
        );
    }

    #[test]
    fn entry_data_must_match_its_crc() {
        let d = docx();
        // A byte of the stored [Content_Types].xml (the first entry)
        // changed: nothing of the archive is left to stand on.
        let i = d.windows(8).position(|w| w == b"<Types/>").unwrap();
        let mut bad = d.clone();
        bad[i + 1] ^= 0x20;
        assert!(run("zip", &bad).is_none());
        // A byte of the stored docProps/app.xml (the last entry) changed.
        let k = d.windows(4).rposition(|w| w == b"<x/>").unwrap();
        let mut bad = d.clone();
        bad[k + 1] ^= 0x20;
        let at = d
            .windows(16)
            .position(|w| w == b"docProps/app.xml")
            .unwrap()
            - 30;
        let v = run("zip", &bad).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Partial, at as u64),
            "{:?}",
            v.notes
        );
        // A byte of the deflated _rels/.rels (second entry) changed.
        let j = d.windows(11).position(|w| w == b"_rels/.rels").unwrap();
        let mut bad = d.clone();
        bad[j + 11 + 10] ^= 0x55;
        let v = run("zip", &bad).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Partial, (j - 30) as u64),
            "{:?}",
            v.notes
        );
    }

    #[test]
    fn corrupt_middle() {
        let d = docx();
        // Break the signature of the third local header.
        let i = d
            .windows(17)
            .position(|w| w == b"word/document.xml")
            .unwrap()
            - 30;
        let mut bad = d.clone();
        bad[i] = b'X';
        let v = run("zip", &bad).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, i as u64));
    }

    #[test]
    fn real_zips() {
        let mut dirs = vec!["/usr/share".to_string(), "/usr/lib".to_string()];
        dirs.extend(py_dirs("test"));
        let d: Vec<&str> = dirs.iter().map(String::as_str).collect();
        let files = real_files(
            &d,
            &[
                ".zip", ".jar", ".whl", ".odt", ".docx", ".epub", ".xlsx", ".apk",
            ],
            40,
        );
        check_real("zip", &files);
        // Office/ODF/Java containers are classified as their extension says.
        for f in &files {
            let ext = f
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_ascii_lowercase();
            if [
                "docx", "xlsx", "pptx", "odt", "ods", "odp", "epub", "jar", "apk",
            ]
            .contains(&ext.as_str())
            {
                let d = std::fs::read(f).unwrap();
                let v = run("zip", &d).unwrap();
                assert_eq!(v.subtype.as_deref(), Some(ext.as_str()), "{f:?}");
            }
        }
    }
}
