//! PDF: from `%PDF-` to the `%%EOF` that ends the last incremental update.
//!
//! Structure (ISO 32000-1 §7.5): a header `%PDF-M.m`, a body of objects, a
//! cross-reference section (`xref` table or stream), a trailer, then
//! `startxref <offset> %%EOF`. An incremental update (§7.5.6) appends more
//! objects, another cross-reference section and another `startxref … %%EOF`;
//! linearized files (Annex F) also carry an early `%%EOF`. The file ends at
//! the last `%%EOF` (plus its end-of-line) that belongs to it.
//!
//! The scan: find the next `%%EOF`; take its optional EOL; look at what
//! follows (after PDF white space, at most [`LOOKAHEAD`] bytes): an object
//! (`N G obj`), `xref`, `startxref`, a `%` comment line or `endstream`/`endobj`
//! (the `%%EOF` of a PDF embedded uncompressed in a stream) means the file
//! goes on, and the scan continues to the next `%%EOF` unless a new `%PDF-`
//! header comes first. Everything is bounded by the window (max_len).
//!
//! The final `startxref` must point (from the candidate) at a
//! cross-reference section; when that is a classic table, it and the tables
//! reached through `/Prev` are read and every in-use entry must point at its
//! own `N G obj` — which catches a fragmented file whose middle is someone
//! else's data even when its first and last pieces are in place. Writers
//! that miscount their own bytes (pypdf's `issue-297.pdf`, `toy.pdf`) are
//! off by tens of bytes, a gap by whole sectors: an offset (and `startxref`)
//! is also taken when what it names is within [`NEAR`] bytes of it, and
//! 19-byte entries (a lone LF or CR) are read as such.
//! (Cross-reference streams are not decoded.)
//!
//! * `None`: no `%PDF-d.d` header.
//! * `Complete`: the final `%%EOF` is preceded (within 1 KiB) by `startxref`
//!   and an offset pointing at a cross-reference section whose objects are
//!   all where it says; length = end of that `%%EOF` and its EOL.
//! * `Partial`: no `%%EOF` in the window (length = window); the final one
//!   lacks a valid `startxref` (length = its end, or the header of another
//!   PDF the scan ran into); an object is not where the table says (length =
//!   that object's offset).
//!
//! Not checked: object syntax, stream contents, cross-reference streams.

use super::Verdict;
use super::read::Src;

/// How far after a `%%EOF` the next token is looked for.
pub const LOOKAHEAD: usize = 1024;
/// `%%EOF` markers followed at most (incremental updates, embedded files).
const MAX_EOFS: u32 = 100_000;

fn is_ws(b: u8) -> bool {
    matches!(b, 0 | b'\t' | b'\n' | 0x0C | b'\r' | b' ')
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut h = [0u8; 8];
    let n = src.read(0, &mut h);
    let pat: [fn(u8) -> bool; 8] = [
        |b| b == b'%',
        |b| b == b'P',
        |b| b == b'D',
        |b| b == b'F',
        |b| b == b'-',
        |b| b.is_ascii_digit(),
        |b| b == b'.',
        |b| b.is_ascii_digit(),
    ];
    if n < 5 || !h[..n].iter().zip(pat).all(|(b, p)| p(*b)) {
        return None;
    }
    if n < 8 {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let mut scratch = Vec::new();
    let mut pos: u64 = 8;
    let mut last: Option<(u64, Result<u64, &'static str>)> = None;
    let mut eofs = 0u32;
    // The last `%PDF-` after the header and before `last`'s end (every
    // byte up to there is read by the searches for the `%%EOF`s).
    let mut last_header = None;
    for _ in 0..MAX_EOFS {
        let (Some(p), header) =
            src.find_with_last(b"%%EOF", b"%PDF-", pos, src.len(), &mut scratch)
        else {
            break;
        };
        if last.is_some() && header.is_some() {
            // A new document starts before this %%EOF.
            break;
        }
        if header.is_some() {
            last_header = header;
        }
        let mut end = p + 5;
        match src.bytes::<2>(end) {
            Some([b'\r', b'\n']) => end += 2,
            _ => {
                if matches!(src.u8(end), Some(b'\r' | b'\n')) {
                    end += 1;
                }
            }
        }
        let mut sx = startxref_ok(&src, p, &mut scratch);
        // A table found near where `startxref` says, past another PDF's
        // header, is that PDF's.
        if header.is_some() && sx.is_ok_and(|(_, near)| near) {
            sx = Err("startxref does not point at a cross-reference section");
        }
        let sx = sx.map(|(x, _)| x);
        last = Some((end, sx));
        eofs += 1;
        pos = end;
        if !continues(&src, end) {
            break;
        }
    }
    let Some((end, sx)) = last else {
        return Some(Verdict::partial(
            src.len(),
            format!("no %%EOF; {}", src.cut_note()),
        ));
    };
    let v = if eofs >= MAX_EOFS {
        Verdict::partial(end, "too many %%EOF markers; stopped")
    } else if let Err(why) = sx {
        // The %%EOF is not this file's (fragmented or cut, and the scan ran
        // into another PDF): stop at that PDF's header (the last one before
        // the %%EOF) if there is one.
        match last_header {
            Some(h) => Verdict::partial(h, format!("{why}; another PDF header at {h}")),
            None => Verdict::partial(end, why),
        }
    } else if let Ok(x) = sx
        && let Err((bad, why)) = check_xref(&src, x)
    {
        Verdict::partial(bad.min(end), why)
    } else {
        Verdict::complete(end + trailing_ws(&src, end))
    };
    Some(v.with_note(format!("{eofs} %%EOF marker(s)")))
}

/// White space that some writers leave after the final `%%EOF` and its EOL
/// (vim, hand-made and encrypting tools: `\n\n \t \n`): taken when it runs,
/// for at most [`MAX_TRAILING_WS`] bytes, up to a zero byte or the end of
/// the window, i.e. to the slack that follows a file's end on a disk.
/// Followed by anything else it is not known to be the file's.
fn trailing_ws(src: &Src, end: u64) -> u64 {
    let mut b = [0u8; MAX_TRAILING_WS + 1];
    let n = src.read(end, &mut b);
    let ws = b[..n]
        .iter()
        .take_while(|c| matches!(c, b'\t' | b'\n' | 0x0C | b'\r' | b' '))
        .count();
    if ws == 0 || ws > MAX_TRAILING_WS || (ws < n && b[ws] != 0) {
        return 0;
    }
    ws as u64
}

/// At most this much white space after the final `%%EOF` is taken.
const MAX_TRAILING_WS: usize = 64;

/// Checks that `startxref`, white space and an offset precede the `%%EOF` at
/// `p`, and that the offset (from the candidate) points at a cross-reference
/// table (`xref`) or stream (`N G obj`) before `p`.
/// Returns the section's offset and whether it was found near (not at)
/// where `startxref` says.
fn startxref_ok(src: &Src, p: u64, scratch: &mut Vec<u8>) -> Result<(u64, bool), &'static str> {
    let Some(s) = src.rfind(b"startxref", p.saturating_sub(1024), p, scratch) else {
        return Err("final %%EOF without startxref");
    };
    let mut buf = [0u8; 64];
    let n = src.read(s + 9, &mut buf);
    let rest = &buf[..n];
    let ws = rest.iter().take_while(|b| is_ws(**b)).count();
    let digits: Vec<u8> = rest
        .iter()
        .skip(ws)
        .take_while(|b| b.is_ascii_digit())
        .copied()
        .collect();
    if ws == 0 || digits.is_empty() || digits.len() > 19 {
        return Err("final %%EOF without startxref");
    }
    let x = digits
        .iter()
        .fold(0u64, |a, d| a * 10 + u64::from(d - b'0'));
    if x >= p {
        return Err("startxref points past its %%EOF");
    }
    let mut at = [0u8; 48];
    let n = src.read(x, &mut at);
    let t = &at[..n];
    // Some writers point at the white space before the keyword.
    let t = &t[t.iter().take(4).take_while(|c| is_ws(**c)).count()..];
    if t.starts_with(b"xref") || is_obj_start(t) {
        Ok((x, false))
    } else {
        xref_near(src, x, s, scratch)
            .map(|x| (x, true))
            .ok_or("startxref does not point at a cross-reference section")
    }
}

/// How far from where a writer said a table or object is it is looked for:
/// writers that miscount their own bytes are off by tens of bytes, while
/// a fragmented or cut file shifts what follows a gap by whole sectors
/// (512 bytes or more), which this stays well below.
const NEAR: u64 = 200;
/// Near searches made for one file at most (each reads about 450 bytes).
const MAX_NEAR: u32 = 4096;

/// The classic table that ends right before `startxref` (at `s`: its
/// `trailer` dictionary, with no object or `%%EOF` between them and `s`)
/// when it starts within [`NEAR`] bytes of `x`, where `startxref` says.
fn xref_near(src: &Src, x: u64, s: u64, scratch: &mut Vec<u8>) -> Option<u64> {
    let t = src.rfind(b"trailer", s.saturating_sub(1024), s, scratch)?;
    let mut b = [0u8; 1024];
    let n = src.read(t, &mut b[..(s - t) as usize]);
    let between = &b[..n];
    if memchr::memmem::find(between, b"obj").is_some()
        || memchr::memmem::find(between, b"%%EOF").is_some()
    {
        return None;
    }
    let from = x.saturating_sub(NEAR);
    let to = (x + NEAR + 4).min(t);
    let mut b = [0u8; 2 * NEAR as usize + 4];
    let n = src.read(from, &mut b[..to.saturating_sub(from) as usize]);
    let at = memchr::memmem::rfind_iter(&b[..n], b"xref")
        .find(|&i| i == 0 || is_ws(b[i - 1]))
        .map(|i| from + i as u64)?;
    // Nothing but the table between it and its trailer.
    let mut line = [0u8; 64];
    let mut pos = at + 4;
    while pos < t {
        let k = src.read(pos, &mut line[..((t - pos) as usize).min(64)]);
        if k == 0
            || line[..k]
                .iter()
                .any(|c| !(c.is_ascii_digit() || is_ws(*c) || matches!(c, b'n' | b'f')))
        {
            return None;
        }
        pos += k as u64;
    }
    Some(at)
}

/// `N G obj` for object `num` generation `generation` within [`NEAR`] bytes
/// of `off` (preceded by white space or a delimiter).
fn obj_near(src: &Src, off: u64, num: u64, generation: u64) -> bool {
    let from = off.saturating_sub(NEAR);
    let mut b = [0u8; 2 * NEAR as usize + 48];
    let n = src.read(from, &mut b);
    let b = &b[..n];
    (0..n).any(|i| {
        (i == 0 || is_ws(b[i - 1]) || matches!(b[i - 1], b'>' | b')' | b']' | b'}'))
            && obj_at_slice(&b[i..], num, generation)
    })
}

/// True when `t` starts with `N G obj` for `num` and `generation`, with any
/// white space between the parts.
fn obj_at_slice(t: &[u8], num: u64, generation: u64) -> bool {
    let Some((a, da)) = number(t) else {
        return false;
    };
    if a != num {
        return false;
    }
    let w = t[da..].iter().take_while(|c| is_ws(**c)).count();
    matches!(number(&t[da + w..]), Some((g, _)) if g == generation) && is_obj_start(t)
}

/// Cross-reference entries checked at most.
const MAX_XREF_ENTRIES: u64 = 1 << 20;
/// Cross-reference sections followed through `/Prev` at most.
const MAX_XREF_SECTIONS: usize = 256;

/// Checks classic cross-reference tables (§7.5.4) from the one at `x`
/// through the `/Prev` chain: every in-use entry's offset must hold
/// `N G obj` for its own object number and generation. On failure returns
/// the lowest bad offset (the file is good up to there at best). A section
/// that is a cross-reference *stream* ends the check (not decoded).
fn check_xref(src: &Src, mut x: u64) -> Result<(), (u64, &'static str)> {
    let mut seen: Vec<u64> = Vec::new();
    let mut checked = 0u64;
    let mut worst: Option<u64> = None;
    let mut near = 0u32;
    let mut line = [0u8; 64];
    while seen.len() < MAX_XREF_SECTIONS && !seen.contains(&x) {
        seen.push(x);
        let n = src.read(x, &mut line);
        let ws = line[..n].iter().take(4).take_while(|c| is_ws(**c)).count();
        if !line[ws..n].starts_with(b"xref") {
            break; // an xref stream
        }
        let mut pos = x + ws as u64 + 4;
        // Subsections: "first count" then count entries of 20 bytes.
        loop {
            let n = src.read(pos, &mut line);
            let t = &line[..n];
            let skip = t.iter().take_while(|c| is_ws(**c)).count();
            let t = &t[skip..];
            if t.starts_with(b"trailer") {
                pos += skip as u64;
                break;
            }
            let Some((first, a)) = number(t) else {
                return Err((x, "unreadable cross-reference table"));
            };
            let t2 = &t[a..];
            let w = t2
                .iter()
                .take_while(|c| matches!(**c, b' ' | b'\t'))
                .count();
            let Some((count, b)) = number(&t2[w..]) else {
                return Err((x, "unreadable cross-reference table"));
            };
            let eol = t2[w + b..].iter().take_while(|c| is_ws(**c)).count();
            pos += (skip + a + w + b + eol) as u64;
            // Entries are 20 bytes (a 2-byte EOL); some writers end them
            // with a lone LF or CR, 19 bytes (pypdf's toy.pdf).
            let mut e = [0u8; 20];
            let stride = if count > 1
                && src.read_exact(pos, &mut e)
                && matches!(e[17], b'n' | b'f')
                && matches!(e[18], b'\n' | b'\r')
                && e[19].is_ascii_digit()
            {
                19
            } else {
                20
            };
            for i in 0..count {
                let mut e = [0u8; 20];
                if !src.read_exact(pos + stride * i, &mut e) {
                    return Err((pos, "cross-reference table cut"));
                }
                if e[17] == b'n' && checked < MAX_XREF_ENTRIES {
                    checked += 1;
                    let (Some((off, _)), Some((generation, _))) =
                        (number(&e[..10]), number(&e[11..16]))
                    else {
                        return Err((pos, "bad cross-reference entry"));
                    };
                    let found = off == 0
                        || obj_at(src, off, first + i, generation)
                        || (near < MAX_NEAR && {
                            near += 1;
                            obj_near(src, off, first + i, generation)
                        });
                    if !found {
                        worst = Some(worst.map_or(off, |w: u64| w.min(off)));
                    }
                } else if e[17] != b'n' && e[17] != b'f' {
                    return Err((pos, "bad cross-reference entry"));
                }
            }
            pos += stride * count;
        }
        // /Prev in the trailer dictionary.
        let mut tr = [0u8; 1024];
        let n = src.read(pos, &mut tr);
        let t = &tr[..n];
        let end = memchr::memmem::find(t, b">>").map_or(n, |e| e);
        match memchr::memmem::find(&t[..end], b"/Prev") {
            Some(i) => {
                let r = &t[i + 5..end];
                let w = r.iter().take_while(|c| is_ws(**c)).count();
                match number(&r[w..]) {
                    Some((p, _)) => x = p,
                    None => break,
                }
            }
            None => break,
        }
    }
    match worst {
        Some(w) => Err((w, "an object is not where the cross-reference table says")),
        None => Ok(()),
    }
}

/// A decimal number at the start of `t` (at most 19 digits): (value, digits).
fn number(t: &[u8]) -> Option<(u64, usize)> {
    let d = t.iter().take(19).take_while(|c| c.is_ascii_digit()).count();
    (d > 0).then(|| {
        (
            t[..d]
                .iter()
                .fold(0u64, |a, c| a * 10 + u64::from(c - b'0')),
            d,
        )
    })
}

/// True when `N G obj` for object `num` generation `gen` starts at `off`
/// (a few white-space bytes before it are tolerated).
fn obj_at(src: &Src, off: u64, num: u64, generation: u64) -> bool {
    let mut b = [0u8; 48];
    let n = src.read(off, &mut b);
    let t = &b[..n];
    let t = &t[t.iter().take(4).take_while(|c| is_ws(**c)).count()..];
    let Some((a, da)) = number(t) else {
        return false;
    };
    let w = t[da..].iter().take_while(|c| is_ws(**c)).count();
    let Some((g, _)) = number(&t[da + w..]) else {
        return false;
    };
    a == num && g == generation && is_obj_start(t)
}

/// True when `t` starts with `N G obj`.
fn is_obj_start(t: &[u8]) -> bool {
    let d1 = t.iter().take_while(|c| c.is_ascii_digit()).count();
    let t2 = &t[d1..];
    let w1 = t2.iter().take_while(|c| is_ws(**c)).count();
    let t3 = &t2[w1..];
    let d2 = t3.iter().take_while(|c| c.is_ascii_digit()).count();
    let t4 = &t3[d2..];
    let w2 = t4.iter().take_while(|c| is_ws(**c)).count();
    d1 > 0 && w1 > 0 && d2 > 0 && w2 > 0 && t4[w2..].starts_with(b"obj")
}

/// True when what follows `end` continues a PDF (update, object, xref, …).
fn continues(src: &Src, end: u64) -> bool {
    let mut buf = [0u8; LOOKAHEAD];
    let n = src.read(end, &mut buf);
    let b = &buf[..n];
    let ws = b.iter().take_while(|c| is_ws(**c)).count();
    let t = &b[ws..];
    if t.starts_with(b"xref") || t.starts_with(b"startxref") || t.starts_with(b"trailer") {
        return true;
    }
    if t.starts_with(b"endstream") || t.starts_with(b"endobj") {
        return true;
    }
    // A comment line (e.g. "%" + binary marker bytes) but not a new header.
    if t.starts_with(b"%") && !t.starts_with(b"%PDF-") && !t.starts_with(b"%%EOF") {
        return t.len() > 1;
    }
    is_obj_start(t)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample()
    }

    /// A PDF with a classic cross-reference table, an embedded PDF in an
    /// uncompressed stream, an incremental update with its own table
    /// (`/Prev` to the first) and a second update whose cross-reference
    /// section is a stream.
    fn sample() -> Vec<u8> {
        let mut v = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
        let o1 = v.len();
        v.extend_from_slice(b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n");
        let o2 = v.len();
        v.extend_from_slice(b"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n");
        // An embedded PDF in an uncompressed stream: its %%EOF must not end us.
        let o3 = v.len();
        v.extend_from_slice(b"3 0 obj\n<< /Length 44 >>\nstream\n%PDF-1.3\nstartxref\n0\n%%EOF\nendstream\nendobj\n");
        let x1 = v.len();
        v.extend_from_slice(b"xref\n0 4\n0000000000 65535 f \n");
        for o in [o1, o2, o3] {
            v.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
        }
        v.extend_from_slice(b"trailer\n<< /Size 4 /Root 1 0 R >>\n");
        v.extend_from_slice(format!("startxref\n{x1}\n%%EOF\n").as_bytes());
        // Incremental update: object 4 and a table for it.
        let o4 = v.len();
        v.extend_from_slice(b"4 0 obj\n(update)\nendobj\n");
        let x2 = v.len();
        v.extend_from_slice(format!("xref\n4 1\n{o4:010} 00000 n \r\n").as_bytes());
        v.extend_from_slice(format!("trailer\n<< /Size 5 /Root 1 0 R /Prev {x1} >>\n").as_bytes());
        v.extend_from_slice(format!("startxref\n{x2}\n%%EOF\n").as_bytes());
        // Second update with a cross-reference stream.
        let x3 = v.len();
        v.extend_from_slice(
            format!("5 0 obj\n<< /Type /XRef /Prev {x2} >>\nstream\n\nendstream\nendobj\n")
                .as_bytes(),
        );
        v.extend_from_slice(format!("startxref\n{x3}\n%%EOF\r\n").as_bytes());
        v
    }

    /// Only the first update (classic tables all the way).
    fn classic() -> Vec<u8> {
        let s = sample();
        let e = s
            .windows(6)
            .enumerate()
            .filter(|(_, w)| *w == b"%%EOF\n")
            .map(|(i, _)| i + 6)
            .nth(2)
            .unwrap();
        s[..e].to_vec()
    }

    /// A one-table PDF whose recorded object offsets are `skew` bytes per
    /// object past the real ones and whose `startxref` is `xskew` past,
    /// with 19-byte entries when `lf` (as hand-made files have).
    fn miscounted(skew: usize, xskew: usize, lf: bool) -> Vec<u8> {
        let mut v = b"%PDF-1.4\n".to_vec();
        let mut offs = Vec::new();
        for (i, body) in [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [] /Count 0 >>",
        ]
        .iter()
        .enumerate()
        {
            offs.push(v.len() + skew * (i + 1));
            v.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
        }
        let x = v.len() + xskew;
        let eol = if lf { "\n" } else { " \n" };
        v.extend_from_slice(format!("xref\n0 3\n0000000000 65535 f{eol}").as_bytes());
        for o in offs {
            v.extend_from_slice(format!("{o:010} 00000 n{eol}").as_bytes());
        }
        v.extend_from_slice(
            format!("trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n{x}\n%%EOF\n").as_bytes(),
        );
        v
    }

    #[test]
    fn writers_that_miscount_offsets_but_not_gaps() {
        for (skew, xskew, lf) in [(0, 0, false), (0, 0, true), (30, 20, false), (60, 0, true)] {
            let d = miscounted(skew, xskew, lf);
            let v = run("pdf", &d).unwrap();
            assert_eq!(
                (v.status, v.length),
                (Status::Complete, d.len() as u64),
                "skew {skew} lf {lf}: {:?}",
                v.notes
            );
        }
        // Objects shifted by a sector (a gap in a fragmented file): not
        // this file's.
        let d = miscounted(512, 0, false);
        assert_eq!(run("pdf", &d).unwrap().status, Status::Partial);
    }

    #[test]
    fn white_space_after_the_last_eof_up_to_slack() {
        let c = classic();
        let mut ws = c.clone();
        ws.extend_from_slice(b"\n \t \n");
        // Followed by zeros (slack) or the window's end: the file's.
        for tail in [&[0u8; 100][..], &[]] {
            let mut d = ws.clone();
            d.extend_from_slice(tail);
            let v = run("pdf", &d).unwrap();
            assert_eq!((v.status, v.length), (Status::Complete, ws.len() as u64));
        }
        // Followed by other data, or too long a run: not taken.
        for tail in [&b"\xC3junk"[..], &[b' '; 70]] {
            let mut d = ws.clone();
            d.extend_from_slice(tail);
            let v = run("pdf", &d).unwrap();
            assert_eq!((v.status, v.length), (Status::Complete, c.len() as u64));
        }
    }

    #[test]
    fn cross_reference_tables_are_checked() {
        let c = classic();
        assert_complete_opts("pdf", &c, false);
        // Object 2 replaced by foreign bytes (a fragmented file whose first
        // and last pieces are in place): Partial at object 2.
        let o2 = c.windows(7).position(|w| w == b"2 0 obj").unwrap();
        let mut bad = c.clone();
        bad[o2..o2 + 7].copy_from_slice(b"\x8f\x12junk!");
        let v = run("pdf", &bad).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Partial, o2 as u64),
            "{:?}",
            v.notes
        );
        // The same in the section reached through /Prev only.
        let o4 = c.windows(7).position(|w| w == b"4 0 obj").unwrap();
        let mut bad = c.clone();
        bad[o4] = b'9';
        assert_eq!(run("pdf", &bad).unwrap().status, Status::Partial);
    }

    #[test]
    fn valid_pdf() {
        let p = sample();
        assert_complete_opts("pdf", &p, false);
        // Prefixes that end before the first %%EOF is complete are never
        // Complete. (A prefix cut right after the embedded PDF's %%EOF is,
        // since nothing tells it from a real end.)
        let first = p.windows(5).position(|w| w == b"%%EOF").unwrap() + 5;
        assert_prefixes("pdf", &p[..first]);
        // Two PDFs back to back: the first ends at its own %%EOF.
        let mut two = sample();
        let l = two.len() as u64;
        two.extend_from_slice(&sample());
        let v = run("pdf", &two).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, l));
    }

    #[test]
    fn startxref_must_point_at_xref() {
        let mut p = sample();
        // Point the last startxref somewhere else.
        let i = p.windows(10).rposition(|w| w == b"startxref\n").unwrap() + 10;
        p[i] = b'1';
        let v = run("pdf", &p).unwrap();
        assert_eq!(v.status, Status::Partial);
        // A cut PDF followed by another PDF: stops at the other header.
        let s = sample();
        let mut two = s[..100].to_vec();
        let h = two.len() as u64;
        two.extend_from_slice(b"%PDF-1.4\nxref\n0 0\ntrailer\n<<>>\nstartxref\n9\n%%EOF\n");
        let v = run("pdf", &two).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, h));
    }

    #[test]
    fn partial_and_reject() {
        let p = sample();
        let cut = &p[..p.len() - 10];
        let v = run("pdf", cut).unwrap();
        // The update's %%EOF is missing: ends at the first one, which is complete.
        assert_eq!(v.status, Status::Complete);
        assert!(v.length < cut.len() as u64);
        let v = run("pdf", b"%PDF-1.7\n1 0 obj\n").unwrap();
        assert_eq!(v.status, Status::Partial);
        let v = run("pdf", b"%PDF-1.7\n1 0 obj\n%%EOF\n").unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 23));
        assert!(run("pdf", b"%PDF-x.7\n").is_none());
    }

    #[test]
    fn real_pdfs() {
        check_real("pdf", &real_files(&["/usr/share/doc"], &[".pdf"], 12));
    }
}
