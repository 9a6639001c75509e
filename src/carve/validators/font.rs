//! Fonts: TrueType / OpenType (sfnt), TrueType collections, WOFF and WOFF2.
//!
//! Structure (OpenType 1.9 "Font file organization"; Apple TrueType Reference
//! Manual ch. 6; W3C WOFF 1.0 §3-5; W3C WOFF 2.0 §3-5):
//!
//! * **sfnt** (`.ttf`, `.otf`): `sfntVersion (00010000, 'OTTO' or 'true') |
//!   numTables | searchRange | entrySelector | rangeShift`, then numTables
//!   table records `tag | checksum | offset | length`, sorted by tag. Each
//!   table's checksum is the sum of its big-endian u32 words (zero-padded to
//!   4); the `head` table's is taken with its checkSumAdjustment (at 8) read
//!   as 0. Tables are 4-byte aligned and padded with zeros, so the font ends
//!   at the end of the table that ends last, padded to 4.
//! * **Collection** (`.ttc`): `'ttcf' | version (1 or 2) | numFonts |
//!   offsets of each font's table directory`; the file ends where the last
//!   table of any of its fonts ends.
//! * **WOFF**: a 44-byte header `'wOFF' | flavor | length | numTables |
//!   reserved (0) | totalSfntSize | version | metaOffset | metaLength |
//!   metaOrigLength | privOffset | privLength`, then 20-byte table entries
//!   `tag | offset | compLength | origLength | origChecksum`; `length` is the
//!   whole file's.
//! * **WOFF2**: a 48-byte header (as WOFF, plus totalCompressedSize), a table
//!   directory of variable-length entries (a flags byte, a tag unless the
//!   flags name a known one, UIntBase128 origLength and, for transformed
//!   tables, transformLength), then one Brotli stream; `length` is the whole
//!   file's.
//!
//! Checked: header fields (searchRange/entrySelector/rangeShift agree with
//! numTables; tags printable; table extents inside the window and after the
//! directory; a `head` table, or `bhed`/`CFF `/`CFF2` in bitmap and CFF
//! fonts); for sfnt, every table's checksum (the payload: a font split
//! between two clusters fails it); for WOFF/WOFF2, that the tables (and
//! metadata and private blocks) lie inside `length` after the directory.
//! The compressed data of WOFF/WOFF2 is not inflated.
//!
//! * `None`: a header that is a chance match (fields out of range,
//!   inconsistent, tags that are not text).
//! * `Complete`: sfnt/collection whose table checksums all match; WOFF/WOFF2
//!   whose directory adds up; length = the end of the last table (sfnt,
//!   padded to 4 when the padding is zero) or `length`.
//! * `Partial`: a table past the window (length = window), or a checksum that
//!   does not match (length = the font's end: damaged or not contiguous).
//!
//! Work: at most [`MAX_TABLES`] records, and the tables' bytes once for the
//! checksums (a font's size, bounded by its max_size).
//!
//! Subtype: `otf` for CFF outlines (`OTTO`).

use super::Verdict;
use super::read::{Cursor, Src, printable};

/// Table records read at most (real fonts have a few dozen).
pub const MAX_TABLES: u64 = 1024;
/// Fonts of a collection read at most.
pub const MAX_FONTS: u64 = 256;

/// One sfnt table record.
#[derive(Clone, Copy)]
struct Table {
    tag: [u8; 4],
    sum: u32,
    off: u64,
    len: u64,
}

/// The table directory at `at`: `None` when it is not one. Tables start at
/// or after `floor` (a collection's fonts share tables, which may lie before
/// a later font's directory) and after this directory when it is the
/// file's first.
fn directory(src: &Src, at: u64, floor: u64) -> Option<Vec<Table>> {
    let h = src.bytes::<12>(at)?;
    if !matches!(&h[..4], [0, 1, 0, 0] | b"OTTO" | b"true" | b"typ1") {
        return None;
    }
    let n = u16::from_be_bytes([h[4], h[5]]);
    let (range, selector, shift) = (
        u16::from_be_bytes([h[6], h[7]]),
        u16::from_be_bytes([h[8], h[9]]),
        u16::from_be_bytes([h[10], h[11]]),
    );
    if n == 0 || u64::from(n) > MAX_TABLES {
        return None;
    }
    let log2 = 15 - n.leading_zeros() as u16;
    if range != 16 << log2 || selector != log2 || shift != n * 16 - range {
        return None;
    }
    let dir_end = at + 12 + 16 * u64::from(n);
    let mut tables = Vec::with_capacity(usize::from(n));
    for i in 0..u64::from(n) {
        let r = src.bytes::<16>(at + 12 + 16 * i)?;
        let tag = [r[0], r[1], r[2], r[3]];
        let word = |k: usize| u32::from_be_bytes([r[k], r[k + 1], r[k + 2], r[k + 3]]);
        let (off, len) = (u64::from(word(8)), u64::from(word(12)));
        let inside = off < dir_end && off.saturating_add(len) > at;
        if !printable(&tag) || off < floor || inside {
            return None;
        }
        tables.push(Table {
            tag,
            sum: word(4),
            off,
            len,
        });
    }
    let has = |t: &[u8; 4]| tables.iter().any(|x| &x.tag == t);
    if !(has(b"head") || has(b"bhed") || has(b"CFF ") || has(b"CFF2")) {
        return None;
    }
    Some(tables)
}

/// The sum of the big-endian u32 words of `[off, off + len)` (the last one
/// zero-padded), with the word at `skip` (relative to `off`) read as 0.
fn checksum(cur: &mut Cursor, off: u64, len: u64, skip: Option<u64>) -> Option<u32> {
    cur.seek(off);
    let mut sum = 0u32;
    let mut i = 0u64;
    while i < len {
        let take = (len - i).min(4) as usize;
        let mut word = [0u8; 4];
        for b in word.iter_mut().take(take) {
            *b = cur.u8()?;
        }
        if skip != Some(i) {
            sum = sum.wrapping_add(u32::from_be_bytes(word));
        }
        i += 4;
    }
    Some(sum)
}

/// Checks the tables' checksums; the name of the first that fails.
fn checksums(src: &Src, tables: &[Table]) -> Result<(), String> {
    let mut cur = Cursor::new(*src, 0);
    for t in tables {
        let skip = (&t.tag == b"head").then_some(8);
        match checksum(&mut cur, t.off, t.len, skip) {
            Some(s) if s == t.sum => {}
            Some(_) => {
                return Err(format!(
                    "table {:?} checksum does not match: damaged or not contiguous",
                    String::from_utf8_lossy(&t.tag)
                ));
            }
            None => return Err(src.cut_note()),
        }
    }
    Ok(())
}

/// Where the tables end: the furthest table end, padded to 4 unless the
/// padding bytes are not zero.
fn tables_end(src: &Src, tables: &[Table]) -> u64 {
    let end = tables
        .iter()
        .map(|t| t.off.saturating_add(t.len))
        .max()
        .unwrap_or(0);
    let padded = end.div_ceil(4) * 4;
    let mut pad = [0u8; 4];
    let k = (padded - end) as usize;
    // Past the window the padding counts (the font is cut there); bytes that
    // are not zero are not padding but what follows the font.
    if k == 0 || !src.read_exact(end, &mut pad[..k]) || pad[..k].iter().all(|&b| b == 0) {
        padded
    } else {
        end
    }
}

/// A TrueType / OpenType font.
pub fn validate_sfnt(src: Src) -> Option<Verdict> {
    let tables = directory(&src, 0, 0)?;
    let end = tables_end(&src, &tables);
    if end > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let otf = src.starts_with_at(0, b"OTTO");
    let v = match checksums(&src, &tables) {
        Ok(()) => {
            Verdict::complete(end).with_note(format!("{} tables, checksums match", tables.len()))
        }
        Err(e) => Verdict::partial(end, e),
    };
    Some(v.with_subtype(otf.then_some("otf")))
}

/// A TrueType / OpenType collection.
pub fn validate_ttc(src: Src) -> Option<Verdict> {
    let h = src.bytes::<12>(0)?;
    let version = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let fonts = u64::from(u32::from_be_bytes([h[8], h[9], h[10], h[11]]));
    if &h[..4] != b"ttcf"
        || !matches!(version, 0x10000 | 0x20000)
        || fonts == 0
        || fonts > MAX_FONTS
    {
        return None;
    }
    let mut all = Vec::new();
    for i in 0..fonts {
        let Some(off) = src.u32be(12 + 4 * i) else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        let Some(tables) = directory(&src, u64::from(off), 12 + 4 * fonts) else {
            return if i == 0 {
                None
            } else {
                Some(Verdict::partial(
                    src.len(),
                    format!("font {i}: no table directory"),
                ))
            };
        };
        for t in tables {
            // Fonts of a collection share tables: each checked once.
            if !all.iter().any(|a: &Table| a.off == t.off && a.len == t.len) {
                all.push(t);
            }
        }
    }
    let end = tables_end(&src, &all);
    if end > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(match checksums(&src, &all) {
        Ok(()) => Verdict::complete(end).with_note(format!("{fonts} fonts, checksums match")),
        Err(e) => Verdict::partial(end, e),
    })
}

/// A WOFF 1.0 font.
pub fn validate_woff(src: Src) -> Option<Verdict> {
    let h = src.bytes::<44>(0)?;
    let u32at = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let (length, n) = (u32at(8), u64::from(u16::from_be_bytes([h[12], h[13]])));
    let reserved = u16::from_be_bytes([h[14], h[15]]);
    let dir_end = 44 + 20 * n;
    if &h[..4] != b"wOFF" || reserved != 0 || n == 0 || n > MAX_TABLES || length < dir_end {
        return None;
    }
    if !blocks_fit(
        &[(u32at(24), u32at(28)), (u32at(36), u32at(40))],
        dir_end,
        length,
    ) {
        return None;
    }
    for i in 0..n {
        let Some(e) = src.bytes::<20>(44 + 20 * i) else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        let w = |k: usize| u64::from(u32::from_be_bytes([e[k], e[k + 1], e[k + 2], e[k + 3]]));
        let (off, comp, orig) = (w(4), w(8), w(12));
        if !printable(&e[..4]) || off < dir_end || off.saturating_add(comp) > length || comp > orig
        {
            return None;
        }
    }
    if length > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(Verdict::complete(length).with_note(format!("{n} tables")))
}

/// Whether each (offset, length) block with a non-zero length lies in
/// `[from, to)`.
fn blocks_fit(blocks: &[(u64, u64)], from: u64, to: u64) -> bool {
    blocks
        .iter()
        .all(|&(off, len)| len == 0 || (off >= from && off.saturating_add(len) <= to))
}

/// A WOFF 2.0 font.
pub fn validate_woff2(src: Src) -> Option<Verdict> {
    let h = src.bytes::<48>(0)?;
    let u32at = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let (length, n) = (u32at(8), u64::from(u16::from_be_bytes([h[12], h[13]])));
    let reserved = u16::from_be_bytes([h[14], h[15]]);
    let compressed = u32at(20);
    if &h[..4] != b"wOF2" || reserved != 0 || n == 0 || n > MAX_TABLES || length < 48 {
        return None;
    }
    // The table directory: flags, [tag], origLength, [transformLength].
    let mut cur = Cursor::new(src, 48);
    for _ in 0..n {
        let Some(flags) = cur.u8() else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        let known = flags & 0x3F;
        if known == 0x3F {
            let mut tag = [0u8; 4];
            for b in &mut tag {
                *b = cur.u8()?;
            }
            if !printable(&tag) {
                return None;
            }
        }
        let _orig = base128(&mut cur)?;
        // glyf and loca (known 10 and 11) are transformed unless the
        // version bits say 3; other tables only when they are not 0.
        let version = flags >> 6;
        let transformed = if matches!(known, 10 | 11) {
            version != 3
        } else {
            version != 0
        };
        if transformed {
            base128(&mut cur)?;
        }
    }
    let mut data = cur.pos();
    if &h[4..8] == b"ttcf" {
        // A collection directory follows; its end is not needed when the
        // blocks below fit, so only its start is skipped conservatively.
        data = data.saturating_add(8);
    }
    let data_end = data.saturating_add(compressed);
    if compressed == 0 || data_end > length {
        return None;
    }
    if !blocks_fit(
        &[(u32at(28), u32at(32)), (u32at(40), u32at(44))],
        data_end,
        length,
    ) {
        return None;
    }
    if length > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(Verdict::complete(length).with_note(format!("{n} tables")))
}

/// A UIntBase128 (WOFF2 §6.1.1): at most 5 bytes, no leading zero byte, no
/// overflow of 32 bits.
fn base128(cur: &mut Cursor) -> Option<u32> {
    let mut v = 0u32;
    for i in 0..5 {
        let b = cur.u8()?;
        if i == 0 && b == 0x80 {
            return None;
        }
        if v & 0xFE00_0000 != 0 {
            return None;
        }
        v = (v << 7) | u32::from(b & 0x7F);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    fn sum(d: &[u8]) -> u32 {
        d.chunks(4).fold(0u32, |a, c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            a.wrapping_add(u32::from_be_bytes(w))
        })
    }

    /// An sfnt of `version` with the given tables (each padded to 4), its
    /// records sorted, checksums right.
    pub fn sfnt(version: &[u8; 4], tables: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
        let n = tables.len() as u16;
        let log2 = 15 - n.leading_zeros() as u16;
        let range = 16u16 << log2;
        let mut d = version.to_vec();
        for v in [n, range, log2, n * 16 - range] {
            d.extend_from_slice(&v.to_be_bytes());
        }
        let mut off = 12 + 16 * tables.len();
        let mut body = Vec::new();
        for (tag, data) in tables {
            d.extend_from_slice(*tag);
            // (head's checkSumAdjustment, at 8, counts as 0.)
            let mut summed = data.clone();
            if *tag == b"head" {
                summed[8..12].fill(0);
            }
            d.extend_from_slice(&sum(&summed).to_be_bytes());
            d.extend_from_slice(&(off as u32).to_be_bytes());
            d.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let mut t = data.clone();
            t.resize(data.len().div_ceil(4) * 4, 0);
            off += t.len();
            body.extend(t);
        }
        d.extend(body);
        d
    }

    pub fn seed() -> Vec<u8> {
        let head: Vec<u8> = (0..54u8).map(|i| i.wrapping_mul(7)).collect();
        sfnt(
            &[0, 1, 0, 0],
            &[
                (b"OS/2", vec![1; 96]),
                (b"cmap", vec![2; 30]),
                (b"head", head),
                (b"hhea", vec![3; 36]),
                (b"maxp", vec![4, 5, 6]),
            ],
        )
    }

    #[test]
    fn sfnt_complete_prefixes_and_damage() {
        let d = seed();
        assert_eq!(assert_complete("ttf", &d), None);
        assert_prefixes("ttf", &d);
        let o = sfnt(b"OTTO", &[(b"CFF ", vec![9; 40]), (b"head", vec![1; 54])]);
        assert_eq!(assert_complete("ttf", &o).as_deref(), Some("otf"));
        // A byte of a table changed: the checksum fails.
        let mut bad = d.clone();
        let n = bad.len();
        bad[n - 8] ^= 0x55;
        let v = run("ttf", &bad).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, n as u64));
        // Inconsistent search fields, a table inside the directory: refused.
        let mut s = d.clone();
        s[7] ^= 1;
        assert!(run("ttf", &s).is_none());
        let mut t = d.clone();
        t[12 + 8..12 + 12].copy_from_slice(&4u32.to_be_bytes());
        assert!(run("ttf", &t).is_none());
        // A table claiming 4 GiB: cut.
        let mut h = d.clone();
        h[12 + 12..12 + 16].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(run("ttf", &h).unwrap().status, Status::Partial);
    }

    #[test]
    fn collection() {
        let f = seed();
        let mut d = b"ttcf\x00\x01\x00\x00\x00\x00\x00\x01\x00\x00\x00\x10".to_vec();
        // The font's directory at 16: its table offsets shift by 16.
        let mut g = f.clone();
        let n = usize::from(u16::from_be_bytes([g[4], g[5]]));
        for i in 0..n {
            let at = 12 + 16 * i + 8;
            let off = u32::from_be_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]]) + 16;
            g[at..at + 4].copy_from_slice(&off.to_be_bytes());
        }
        d.extend(g);
        assert_eq!(assert_complete("ttc", &d), None);
        assert_prefixes("ttc", &d);
    }

    pub fn woff_seed() -> Vec<u8> {
        let mut d = b"wOFF\x00\x01\x00\x00".to_vec();
        let tables: [(&[u8; 4], usize); 2] = [(b"cmap", 20), (b"head", 54)];
        let total = 44 + 20 * tables.len() + 20 + 56;
        d.extend_from_slice(&(total as u32).to_be_bytes());
        d.extend_from_slice(&(tables.len() as u16).to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(&200u32.to_be_bytes());
        d.extend_from_slice(&[0, 1, 0, 0]);
        d.extend_from_slice(&[0; 20]);
        let mut off = 44 + 20 * tables.len();
        for (tag, len) in tables {
            d.extend_from_slice(tag);
            d.extend_from_slice(&(off as u32).to_be_bytes());
            d.extend_from_slice(&(len as u32).to_be_bytes());
            d.extend_from_slice(&(len as u32).to_be_bytes());
            d.extend_from_slice(&[0; 4]);
            off += len.div_ceil(4) * 4;
        }
        d.extend(std::iter::repeat_n(7u8, 20 + 56));
        d
    }

    #[test]
    fn woff_complete_and_hostile() {
        let d = woff_seed();
        assert_eq!(assert_complete("woff", &d), None);
        assert_prefixes("woff", &d);
        let mut r = d.clone();
        r[14] = 1; // reserved
        assert!(run("woff", &r).is_none());
        let mut l = d.clone();
        l[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(run("woff", &l).unwrap().status, Status::Partial);
    }

    pub fn woff2_seed() -> Vec<u8> {
        let mut d = b"wOF2\x00\x01\x00\x00".to_vec();
        let dir = [
            0x01u8, 0x20, 0x3F, b'z', b'z', b'z', b'z', 0x10, 0x0A, 0x81, 0x00, 0x40,
        ];
        let compressed = 30u32;
        let total = 48 + dir.len() as u32 + compressed + 2;
        d.extend_from_slice(&total.to_be_bytes());
        d.extend_from_slice(&3u16.to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(&500u32.to_be_bytes());
        d.extend_from_slice(&compressed.to_be_bytes());
        d.extend_from_slice(&[0, 1, 0, 0]);
        d.extend_from_slice(&[0; 20]);
        d.extend_from_slice(&dir);
        d.extend(std::iter::repeat_n(0x5Au8, compressed as usize + 2));
        d
    }

    #[test]
    fn woff2_complete_and_hostile() {
        let d = woff2_seed();
        assert_eq!(assert_complete("woff2", &d), None);
        assert_prefixes("woff2", &d);
        let mut c = d.clone();
        c[20..24].copy_from_slice(&10_000u32.to_be_bytes()); // compressed past length
        assert!(run("woff2", &c).is_none());
    }
}
