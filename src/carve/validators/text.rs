//! Plain text (scripts): UTF-8 text up to its first non-text byte.
//!
//! Text has no structure to walk: the file is the run of text that starts at
//! the header (`#!/bin/...` for a script). Text bytes are tab, line feed,
//! form feed, carriage return, escape, printable ASCII and well-formed UTF-8
//! sequences; anything else (NUL, other control bytes, DEL, a bad UTF-8
//! sequence) ends the run.
//!
//! * `None`: fewer than [`MIN_LEN`] text bytes, or no line break in the first
//!   `MAX_FIRST_LINE` bytes (a shebang line is short).
//! * `Complete`: the run ends on a 512-byte boundary of the image, or is
//!   followed by zero bytes up to the next one (the slack of the file's last
//!   cluster, as file systems leave it): that is where the file ends.
//! * `Partial`: the run ends on other bytes (the cluster after it may be
//!   another file's, or the file's own next fragment), or the window ends
//!   first.
//!
//! Subtype from the interpreter on the `#!` line: `py`, `pl`, `rb`, `php`;
//! otherwise none (`sh`).

use super::Verdict;
use super::read::Src;

/// Fewest text bytes accepted.
pub const MIN_LEN: u64 = 12;
/// Longest first line accepted.
const MAX_FIRST_LINE: usize = 1024;

/// Length of the run of text at the start of `buf` (stopping before an
/// incomplete UTF-8 sequence at its end), and whether a non-text byte ends it.
fn text_run(buf: &[u8]) -> (usize, bool) {
    run_of(buf, false)
}

/// [`text_run`] that also takes a byte of 0xA0-0xFF outside a UTF-8
/// sequence for text: a printable Latin-1 (ISO 8859-1, Windows-1252)
/// character, as documents from before UTF-8 hold them.
pub(super) fn latin1_text_run(buf: &[u8]) -> (usize, bool) {
    run_of(buf, true)
}

fn run_of(buf: &[u8], latin1: bool) -> (usize, bool) {
    let mut i = 0;
    while i < buf.len() {
        let b = buf[i];
        match b {
            b'\t' | b'\n' | 0x0C | b'\r' | 0x1B | 0x20..=0x7E => i += 1,
            0x80.. => {
                let n = match b {
                    0xC2..=0xDF => 2,
                    0xE0..=0xEF => 3,
                    0xF0..=0xF4 => 4,
                    0xA0.. if latin1 => 1,
                    _ => return (i, true),
                };
                let Some(seq) = buf.get(i..i + n) else {
                    // Incomplete at the end of the buffer: the caller reads on.
                    return (i, false);
                };
                if n > 1 && std::str::from_utf8(seq).is_err() {
                    if latin1 {
                        i += 1;
                        continue;
                    }
                    return (i, true);
                }
                i += n;
            }
            _ => return (i, true),
        }
    }
    (i, false)
}

fn subtype(first_line: &[u8]) -> Option<&'static str> {
    let line = String::from_utf8_lossy(first_line);
    let interp = line
        .split_whitespace()
        .take(2)
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .find(|w| *w != "env" && !w.starts_with("#!"))?;
    let interp = interp.trim();
    if interp.starts_with("python") {
        Some("py")
    } else if interp.starts_with("perl") {
        Some("pl")
    } else if interp.starts_with("ruby") {
        Some("rb")
    } else if interp.starts_with("php") {
        Some("php")
    } else {
        None
    }
}

/// Where the run of text that goes on at `pos` ends.
pub(super) enum Run {
    /// At a non-text byte (or an incomplete UTF-8 sequence) at this offset.
    Ends(u64),
    /// At the window's end (the image's end or `max_len`): the text may go on.
    Cut(u64),
}

/// The end of the run of text from `pos` on (text at `pos` assumed), through
/// the carving's memo: a run that an earlier candidate already followed
/// (scripts or documents back to back: each header would read the rest of
/// the run again) is looked up.
pub(super) fn run_end(src: &Src, pos: u64) -> Run {
    run_end_of(src, pos, b"text run", text_run)
}

/// [`run_end`] of the runs that `classify` finds (named `kind` in the memo).
pub(super) fn run_end_of(
    src: &Src,
    mut pos: u64,
    kind: &[u8],
    classify: fn(&[u8]) -> (usize, bool),
) -> Run {
    // Small first reads, doubling: a run in noise or one that ends soon after
    // its header costs a few dozen bytes, not 4 KiB per candidate (nor a
    // 4 KiB buffer zeroed: the large one is made only for a long run).
    let mut small = [0u8; 256];
    let mut large: Vec<u8> = Vec::new();
    let mut piece = 64;
    let end = loop {
        match src.memo_run_end(kind, pos) {
            Some((end, true)) if end >= src.len() => return Run::Cut(end),
            Some((end, true)) => break end,
            // Text at least to `at`: read on from there.
            Some((at, false)) if at > pos => pos = at,
            _ => {}
        }
        let want = piece;
        piece = (piece * 2).min(4096);
        let buf: &mut [u8] = if want <= small.len() {
            &mut small
        } else {
            large.resize(4096, 0);
            &mut large
        };
        let n = src.read(pos, &mut buf[..want]).min(want);
        let (run, stopped) = classify(&buf[..n]);
        pos += run as u64;
        if stopped {
            break pos;
        }
        if n < want {
            // The window ends: at the image's end or at max_len.
            if pos >= MIN_LEN {
                src.memo_note_run(kind, 0, pos, true);
            }
            return Run::Cut(pos);
        }
        if run == 0 {
            // An incomplete UTF-8 sequence that the next read cannot complete.
            break pos;
        }
    };
    if end >= MIN_LEN {
        src.memo_note_run(kind, 0, end, false);
    }
    Run::Ends(end)
}

/// Most foreign bytes that may follow a text file's end inside its run of
/// text: after a file, foreign bytes (another file's, old data, filler) are
/// text for a byte or a few by chance (4 in 10 random bytes are), not for
/// 16 in a row (about 1 in 2 million; 1 in 80 counting Latin-1).
pub const FOREIGN_MAX: usize = 16;

/// Bytes at the end of a run that [`end_in_tail`] looks at.
pub const TAIL: u64 = 64;

/// Where a text file ends inside `tail`, the last bytes of its run, when the
/// run went on into foreign bytes that happen to be text: after its last
/// line break (when `lines`), or after the last `mark` (compared without
/// case when `ci`) and the white space that follows it up to its last line
/// feed (up to its end where it holds none), whichever is later,
/// provided at
/// most [`FOREIGN_MAX`] bytes follow (a text file ends with a line break or
/// its format's closing mark; more text after one is the file's own).
pub(super) fn end_in_tail(tail: &[u8], mark: &[u8], ci: bool, lines: bool) -> Option<usize> {
    let line = tail
        .iter()
        .rposition(|&b| b == b'\n' || b == b'\r')
        .map(|i| i + 1)
        .filter(|_| lines);
    let closed = if mark.is_empty() {
        None
    } else {
        (mark.len()..=tail.len()).rev().find(|&e| {
            let w = &tail[e - mark.len()..e];
            if ci {
                w.eq_ignore_ascii_case(mark)
            } else {
                w == mark
            }
        })
    };
    let closed = closed.map(|e| {
        let ws = tail[e..]
            .iter()
            .take_while(|b| matches!(b, b'\t' | b'\n' | b'\r' | b' '))
            .count();
        // After a line feed, white space that no line feed ends is foreign:
        // a file's last line ends with its line feed.
        e + tail[e..e + ws]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(ws, |i| i + 1)
    });
    let at = line.max(closed)?;
    (tail.len() - at <= FOREIGN_MAX).then_some(at)
}

/// [`end_in_tail`] of the run `[0, end)` of `src`: the end as a window offset.
pub(super) fn end_before(src: &Src, end: u64, mark: &[u8], ci: bool, lines: bool) -> Option<u64> {
    let from = end.saturating_sub(TAIL);
    let mut tail = [0u8; TAIL as usize];
    let tail = tail.get_mut(..(end - from) as usize)?;
    if !src.read_exact(from, tail) {
        return None;
    }
    end_in_tail(tail, mark, ci, lines).map(|at| from + at as u64)
}

pub fn validate(src: Src) -> Option<Verdict> {
    // The first line must end within MAX_FIRST_LINE bytes and be text.
    let nl = src.find_byte_memo(b'\n', 0, MAX_FIRST_LINE as u64)?;
    let mut head = vec![0u8; nl as usize];
    if !src.read_exact(0, &mut head) || text_run(&head) != (head.len(), false) {
        return None;
    }
    let sub = subtype(&head).map(str::to_string);
    // The run goes on from the first line's line feed.
    let end = match run_end(&src, nl) {
        Run::Cut(end) => {
            return (end >= MIN_LEN)
                .then(|| Verdict::partial(end, src.cut_note()).with_subtype(sub));
        }
        Run::Ends(end) => end,
    };
    if end < MIN_LEN {
        return None;
    }
    let mut v = if src.ends_cleanly(end) {
        let mut v = Verdict::complete(end);
        v.notes
            .push("text up to zero slack or a sector boundary".to_string());
        v
    } else if let Some(at) = end_before(&src, end, b"", false, true).filter(|&at| at > nl) {
        let mut v = Verdict::complete(at);
        v.notes.push(format!(
            "text ends at its last line break ({} foreign text bytes follow)",
            end - at
        ));
        v
    } else {
        Verdict::partial(
            end,
            format!(
                "text runs into non-text bytes at {end} before the end of its sector, {FOREIGN_MAX}+ bytes after its last line break"
            ),
        )
    };
    v.subtype = sub;
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::super::testutil::run;

    /// Every script header of a long run of text, validated in turn through
    /// the carving's memo (windows of 700 bytes: each reaches past where
    /// the one before it stopped), gets the verdict it gets alone.
    #[test]
    fn headers_of_one_run_get_through_the_memo_what_they_get_alone() {
        use super::super::read::{MemoOnly, SignatureLog};
        use super::super::{ByteReader, Context, Limits, NO_CONTEXT, validate};
        for seed in [7u32, 19, 29, 39, 1234] {
            let mut d = Vec::new();
            let mut x = seed;
            while d.len() < 20_000 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                d.extend_from_slice(match x >> 29 {
                    0 => b"#!/bin/sh\n".as_slice(),
                    1 => b"#!/bin/sh and no line feed for a while ",
                    2 => "caf\u{e9} \u{2603}\n".as_bytes(),
                    3 if x & 0x700 == 0 => b"\x01",
                    _ => b"echo text\n",
                });
            }
            let starts: Vec<u64> = (0..d.len())
                .filter(|&i| d[i..].starts_with(b"#!/bin/"))
                .map(|i| i as u64)
                .collect();
            assert!(starts.len() > 100);
            let image: &dyn ByteReader = &d;
            let log: std::sync::Arc<dyn SignatureLog> = std::sync::Arc::new(MemoOnly::default());
            for &start in &starts {
                let limits = Limits { max_len: 700 };
                let alone = validate("text", image, start, limits, &NO_CONTEXT);
                let cx = Context::NONE.with_log(log.clone(), image);
                let memo = validate("text", image, start, limits, &cx);
                assert_eq!(memo, alone, "seed {seed}, header at {start}");
            }
        }
    }

    #[test]
    fn a_script_in_zero_slack_is_complete() {
        let script = b"#!/bin/bash\n\necho \"A test only...\"\nexit 0\n";
        let mut d = script.to_vec();
        d.resize(1024, 0);
        d.extend([0xAB; 512]);
        let v = run("text", &d).expect("text");
        assert_eq!(
            (v.status, v.length),
            (Status::Complete, script.len() as u64)
        );
        assert_eq!(v.subtype, None);
    }

    /// Foreign bytes in the sector after the text: the last line break ends
    /// the file when at most FOREIGN_MAX text bytes follow it (foreign bytes
    /// that happen to be text); a longer last line is partial.
    #[test]
    fn foreign_bytes_in_the_sector_end_it_at_its_last_line_break() {
        let script = b"#!/usr/bin/env python3\nprint('h\xc3\xa9')\n";
        for foreign in [&b"\x01\x99\x42"[..], b"k7 \x01", b"x\xc3\xa9\x99"] {
            let mut d = script.to_vec();
            d.extend(foreign);
            d.resize(512, 0x42);
            let v = run("text", &d).expect("text");
            assert_eq!(
                (v.status, v.length),
                (Status::Complete, script.len() as u64)
            );
            assert_eq!(v.subtype.as_deref(), Some("py"));
        }
        let mut d = script.to_vec();
        d.extend(b"print('no line break at the end')");
        let n = d.len() as u64;
        d.extend([0x01, 0x99, 0x42]);
        d.resize(512, 0x42);
        let v = run("text", &d).expect("text");
        assert_eq!((v.status, v.length), (Status::Partial, n));
    }

    #[test]
    fn text_across_reads_and_utf8_split_at_a_read_boundary() {
        let mut d = b"#!/usr/bin/perl\n".to_vec();
        while d.len() < 4095 {
            d.push(b'a');
        }
        d.extend("é".as_bytes()); // straddles the first 4 KiB read
        d.extend(b"\nmore text\n");
        let n = d.len() as u64;
        d.resize(8192, 0);
        let v = run("text", &d).expect("text");
        assert_eq!((v.status, v.length), (Status::Complete, n));
        assert_eq!(v.subtype.as_deref(), Some("pl"));
    }

    #[test]
    fn not_text() {
        assert!(run("text", b"#!/bin/sh").is_none()); // too short, no line
        assert!(run("text", b"#!/bin\x00\x00\x00\x00\x00\x00\x00\x00\x00").is_none());
        let long = [b'#', b'!']
            .iter()
            .copied()
            .chain(std::iter::repeat_n(b'x', 2000));
        assert!(run("text", &long.collect::<Vec<u8>>()).is_none());
        assert!(run("text", b"#!/bin/sh\n\xff\xfe").is_none());
    }
}
