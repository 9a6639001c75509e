//! Windows metafiles: Enhanced Metafile (EMF) and Windows Metafile (WMF).
//!
//! Structure:
//!
//! * **EMF** ([MS-EMF] 2.3.4.2 EMR_HEADER, 2.3.4.1 EMR_EOF): records `type
//!   (u32 LE) | size (u32 LE, a multiple of 4, at least 8)`; the first is
//!   the header (type 1) with the signature `' EMF'` at 40, the version
//!   0x10000 at 44, the file's size `nBytes` at 48 and the number of
//!   records `nRecords` at 52; the last is EMR_EOF (type 14), which ends at
//!   `nBytes`.
//! * **WMF** ([MS-WMF] 2.3.2.3 META_PLACEABLE, 2.3.2.2 META_HEADER, 2.3.2.1
//!   META_EOF): an optional placeable header `D7 CD C6 9A | handle 0 |
//!   bounds | inch | reserved 0 | checksum` (22 bytes; the checksum the XOR
//!   of its first ten 16-bit words), then META_HEADER `type (1 memory, 2
//!   disk) | header size 9 | version 0x0100 or 0x0300 | size (u32, in
//!   16-bit words) | objects | maxRecord (u32, words) | 0`, then records
//!   `size (u32, words, at least 3) | function (u16)` to META_EOF (size 3,
//!   function 0). The size counts the words after the placeable header;
//!   some writers (Pillow's test image) count them from the file's start.
//!
//! Checked: the headers; every record's size (EMF: a multiple of 4 inside
//! `nBytes`, no second header; WMF: at most maxRecord); the end record at
//! the declared size; EMF, the record count.
//!
//! * `None`: a header that is a chance match, or a first record that
//!   breaks.
//! * `Complete`: the end record ends exactly at the declared size; length
//!   = that size.
//! * `Partial`: a record past the window (length = window); a later record
//!   that breaks, an end record elsewhere, a record count that differs
//!   (length = the declared size, within the window).
//!
//! Work: at most [`MAX_RECORDS`] records per candidate, 8 bytes read each;
//! a record's step depends on its bytes alone, so stretches other
//! candidates walked are jumped ([`super::walks`]): headers nested in
//! earlier files' records walk the common stretch once.
//!
//! Subtype: `wmf` files with a placeable header are `apm` (Aldus).

use super::Verdict;
use super::read::Src;
use super::walks::{Noting, Took, took};

/// Records walked at most (by one [`walk`]).
pub const MAX_RECORDS: u32 = 1 << 22;

/// EMR_EOF's type.
const EMR_EOF: u32 = 14;
/// The placeable header's key.
const PLACEABLE: &[u8; 4] = b"\xD7\xCD\xC6\x9A";

/// One step of a record walk (also SWF's tags: [`super::swf`]).
pub(super) enum Step {
    /// A record of this many bytes that is not the end.
    Record(u64),
    /// The end record, this long.
    End(u64),
    /// Not a record of the file.
    Bad,
    /// Past the window.
    Cut,
}

/// Walks records from `pos` to the end record with `step`, jumping
/// stretches noted under `kind`; the end record must end at `end` (within
/// `below`). Returns (where the walk stopped, records, what stopped it).
pub(super) fn walk(
    src: &Src,
    kind: &'static str,
    (mut pos, below): (u64, u64),
    step: impl Fn(u64) -> Step,
) -> (u64, u32, Step) {
    let mut records = 0u32;
    let mut noting = Noting::new(kind);
    loop {
        if records >= MAX_RECORDS {
            return (pos, records, Step::Bad);
        }
        if records > 0
            && let Some(j) = src.walk_jump(kind, (pos, 0), (below, MAX_RECORDS - records), |_| true)
        {
            (pos, records) = (j.to, records + j.steps);
            src.walk_took(&mut noting, took(j), (pos, 0));
            continue;
        }
        match step(pos) {
            Step::Record(n) if pos + n <= below => {
                pos += n;
                records += 1;
                let t = Took {
                    steps: 1,
                    flags: 0,
                    count: 0,
                };
                src.walk_took(&mut noting, t, (pos, 0));
            }
            Step::Record(_) => return (pos, records, Step::Bad),
            s => return (pos, records, s),
        }
    }
}

/// An EMF file.
pub fn validate_emf(src: Src) -> Option<Verdict> {
    let h = src.bytes::<60>(0)?;
    let le = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let (hsize, n_bytes, n_records) = (u64::from(le(4)), u64::from(le(48)), le(52));
    if le(0) != 1
        || &h[40..44] != b" EMF"
        || le(44) != 0x10000
        || hsize < 88
        || hsize % 4 != 0
        || n_bytes < hsize + 20
        || n_bytes % 4 != 0
        || n_records < 2
        || h[58..60] != [0, 0]
    {
        return None;
    }
    let below = n_bytes.min(src.len());
    let step = |pos: u64| {
        let Some(r) = src.bytes::<8>(pos) else {
            return Step::Cut;
        };
        let ty = u32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        let size = u64::from(u32::from_le_bytes([r[4], r[5], r[6], r[7]]));
        if !(2..=122).contains(&ty) || size < 8 || size % 4 != 0 {
            Step::Bad
        } else if pos + size > src.len() && pos + size <= n_bytes {
            Step::Cut
        } else if ty == EMR_EOF {
            Step::End(size)
        } else {
            Step::Record(size)
        }
    };
    let (pos, records, last) = walk(&src, "emf", (hsize, below), step);
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    let broken = |what: String| {
        (records > 0)
            .then(|| Verdict::partial(below, format!("record {} at {pos}: {what}", records + 1)))
    };
    match last {
        Step::End(n) if pos + n == n_bytes && records + 2 == n_records => {
            Some(Verdict::complete(n_bytes).with_note(format!("{n_records} record(s)")))
        }
        Step::End(n) if pos + n == n_bytes => {
            broken(format!("{} records, not {n_records}", records + 2))
        }
        Step::End(_) => broken(format!("EMR_EOF does not end at nBytes ({n_bytes})")),
        Step::Cut => cut(),
        _ if pos >= src.len() && n_bytes > src.len() => cut(),
        _ => broken("not a record".to_string()),
    }
}

/// A WMF file.
pub fn validate_wmf(src: Src) -> Option<Verdict> {
    let first = src.bytes::<22>(0)?;
    let base = if first[..4] == *PLACEABLE {
        let w = |i: usize| u16::from_le_bytes([first[2 * i], first[2 * i + 1]]);
        let sum = (0..10).fold(0u16, |x, i| x ^ w(i));
        if w(2) != 0 || w(8) != 0 || w(9) != 0 || sum != w(10) {
            return None;
        }
        22u64
    } else {
        0
    };
    let h = src.bytes::<18>(base)?;
    let w16 = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
    let w32 = |i: usize| u64::from(u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let (size, max_record) = (2 * w32(6), w32(12));
    if !matches!(w16(0), 1 | 2)
        || w16(2) != 9
        || !matches!(w16(4), 0x0100 | 0x0300)
        || w16(16) != 0
        || max_record < 3
        || size < 18 + 6
    {
        return None;
    }
    // The declared end: the size counted after the placeable header, or
    // from the file's start.
    let ends = [base + size, size];
    let below = (base + size).min(src.len());
    let step = |pos: u64| {
        let Some(r) = src.bytes::<6>(pos) else {
            return Step::Cut;
        };
        let words = u64::from(u32::from_le_bytes([r[0], r[1], r[2], r[3]]));
        let function = u16::from_le_bytes([r[4], r[5]]);
        if words < 3 || words > max_record {
            Step::Bad
        } else if words == 3 && function == 0 {
            Step::End(6)
        } else if pos + 2 * words > src.len() && pos + 2 * words <= base + size {
            Step::Cut
        } else {
            Step::Record(2 * words)
        }
    };
    let (pos, records, last) = walk(&src, "wmf", (base + 18, below), step);
    let subtype = (base > 0).then_some("apm");
    let v = match last {
        Step::End(n) if ends.contains(&(pos + n)) => {
            Verdict::complete(pos + n).with_note(format!("{} record(s)", records + 1))
        }
        Step::Cut => Verdict::partial(src.len(), src.cut_note()),
        _ if pos >= src.len() && base + size > src.len() => {
            Verdict::partial(src.len(), src.cut_note())
        }
        _ if records == 0 => return None,
        Step::End(_) => Verdict::partial(
            below,
            format!("META_EOF at {pos}, not at the declared size"),
        ),
        _ => Verdict::partial(below, format!("record {} at {pos} breaks", records + 1)),
    };
    Some(v.with_subtype(subtype))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// An EMF file: header, `n` records (types 2..), EMR_EOF.
    pub fn emf(n: u32) -> Vec<u8> {
        let mut recs = Vec::new();
        for i in 0..n {
            let body: Vec<u8> = (0..4 * (i % 5)).map(|k| (k + i) as u8).collect();
            recs.extend_from_slice(&(2 + i % 80).to_le_bytes());
            recs.extend_from_slice(&(8 + body.len() as u32).to_le_bytes());
            recs.extend(body);
        }
        recs.extend_from_slice(&14u32.to_le_bytes());
        recs.extend_from_slice(&20u32.to_le_bytes());
        recs.extend_from_slice(&[0, 0, 0, 0, 16, 0, 0, 0, 20, 0, 0, 0]);
        let mut h = vec![0u8; 108];
        h[0] = 1;
        h[4] = 108;
        h[40..44].copy_from_slice(b" EMF");
        h[44..48].copy_from_slice(&0x10000u32.to_le_bytes());
        h[48..52].copy_from_slice(&((108 + recs.len()) as u32).to_le_bytes());
        h[52..56].copy_from_slice(&(n + 2).to_le_bytes());
        h[56] = 3;
        h.extend(recs);
        h
    }

    /// A WMF file (placeable or not; `size_from_start`: its size counts the
    /// placeable header, as Pillow's test image).
    pub fn wmf(placeable: bool, size_from_start: bool) -> Vec<u8> {
        let mut recs = Vec::new();
        for i in 0..9u16 {
            let words = 3 + u32::from(i % 4);
            recs.extend_from_slice(&words.to_le_bytes());
            recs.extend_from_slice(&(0x0200 + i).to_le_bytes());
            recs.extend((0..2 * (words - 3)).map(|k| k as u8 ^ 0x5A));
        }
        recs.extend_from_slice(&[3, 0, 0, 0, 0, 0]);
        let base = if placeable { 22 } else { 0 };
        let words = (18 + recs.len() + if size_from_start { base } else { 0 }) / 2;
        let mut d = Vec::new();
        if placeable {
            d.extend_from_slice(
                b"\xD7\xCD\xC6\x9A\x00\x00\x00\x00\x00\x00\xE8\x03\xE8\x03\x60\x00\x00\x00\x00\x00",
            );
            let sum = (0..10).fold(0u16, |x, i| {
                x ^ u16::from_le_bytes([d[2 * i], d[2 * i + 1]])
            });
            d.extend_from_slice(&sum.to_le_bytes());
        }
        d.extend_from_slice(&[1, 0, 9, 0, 0, 3]);
        d.extend_from_slice(&(words as u32).to_le_bytes());
        d.extend_from_slice(&[2, 0, 6, 0, 0, 0, 0, 0]);
        d.extend(recs);
        d
    }

    pub fn seed() -> Vec<u8> {
        emf(12)
    }

    pub fn wmf_seed() -> Vec<u8> {
        wmf(true, false)
    }

    #[test]
    fn emf_complete_prefixes_and_damage() {
        let d = seed();
        assert_eq!(assert_complete("emf", &d), None);
        assert_prefixes("emf", &d);
        // A record's size changed: Partial at nBytes.
        let mut bad = d.clone();
        bad[108 + 8 + 4] = 9;
        let v = run("emf", &bad).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d.len() as u64));
        // Another record count: Partial.
        let mut c = d.clone();
        c[52] = 5;
        assert_eq!(run("emf", &c).unwrap().status, Status::Partial);
        // nBytes of 4 GiB: cut.
        let mut big = d.clone();
        big[48..52].copy_from_slice(&0xFFFF_FFFCu32.to_le_bytes());
        assert_eq!(run("emf", &big).unwrap().status, Status::Partial);
        // Chance matches: another version, a first record that breaks.
        let mut j = d.clone();
        j[46] = 2;
        assert!(run("emf", &j).is_none());
        j = d.clone();
        j[108..112].copy_from_slice(&500u32.to_le_bytes());
        assert!(run("emf", &j).is_none());
        // Headers back to back: a second header is not a record.
        let mut hh = Vec::new();
        for _ in 0..50 {
            hh.extend_from_slice(&d[..108]);
        }
        assert!(run("emf", &hh).is_none());
    }

    #[test]
    fn wmf_complete_prefixes_and_damage() {
        for (p, s) in [(true, false), (false, false), (true, true)] {
            let d = wmf(p, s);
            let sub = assert_complete("wmf", &d);
            assert_eq!(sub.as_deref(), p.then_some("apm"));
            assert_prefixes("wmf", &d);
        }
        let d = wmf_seed();
        // A record over maxRecord: Partial.
        let mut bad = d.clone();
        bad[22 + 18 + 6] = 40;
        assert_eq!(run("wmf", &bad).unwrap().status, Status::Partial);
        // A wrong placeable checksum, another header size: chance matches.
        let mut j = d.clone();
        j[20] ^= 1;
        assert!(run("wmf", &j).is_none());
        j = d.clone();
        j[24] = 10;
        assert!(run("wmf", &j).is_none());
        // A size of 8 GiB: cut.
        let mut big = d.clone();
        big[22 + 6..22 + 10].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(run("wmf", &big).unwrap().status, Status::Partial);
    }
}
