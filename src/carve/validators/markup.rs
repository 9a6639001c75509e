//! Markup and page descriptions in text (HTML, XML, RTF, PostScript): the run
//! of text from the header, ended where the format closes.
//!
//! These formats have no length field; the file is text ([`super::text`]'s
//! bytes) and ends with a closing mark: HTML with `</html>`, XML with the `>`
//! of its root element's end tag, RTF with the `}` that closes its group,
//! DSC PostScript with `%%EOF`; then usually a line break. So:
//!
//! * `None`: the header is not one of those, or fewer than
//!   [`super::text::MIN_LEN`] text bytes;
//! * `Complete`, the text rule: the run of text ends on a 512-byte boundary
//!   or is followed by zero bytes to the next one (slack, as file systems
//!   leave it);
//! * `Complete`, the closing rule: otherwise, the last closing mark within
//!   the run's last [`TAIL`] bytes and the white space (tab, CR, LF, space)
//!   right after it end the file: what follows in the run is foreign bytes
//!   that happen to be text (after a file, foreign bytes are text for a
//!   byte or two by chance, not for a kilobyte);
//! * `Partial`: no closing mark in the tail, or the window ends first.
//!
//! What a candidate reads is the run (shared through the carving's memo
//! with the other headers of the same run) and at most [`TAIL`] bytes of it
//! again: work linear in the run.

use super::Verdict;
use super::read::Src;
use super::text::{MIN_LEN, Run, run_end};

/// How far back from the run's end a closing mark is looked for.
pub const TAIL: u64 = 1024;

/// The format a header opens, by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Xml,
    Rtf,
    Ps,
}

impl Kind {
    fn of(head: &[u8]) -> Option<Kind> {
        let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
        if lower.starts_with(b"<!doctype html") || lower.starts_with(b"<html") {
            Some(Kind::Html)
        } else if head.starts_with(b"<?xml") {
            Some(Kind::Xml)
        } else if head.starts_with(b"{\\rtf") {
            Some(Kind::Rtf)
        } else if head.starts_with(b"%!PS-Adobe-") {
            Some(Kind::Ps)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Html => "</html>",
            Kind::Xml => ">",
            Kind::Rtf => "}",
            Kind::Ps => "%%EOF",
        }
    }

    /// The end of the last closing mark in `tail`.
    fn last_close(self, tail: &[u8]) -> Option<usize> {
        let mark = self.name().as_bytes();
        let ci = self == Kind::Html;
        (mark.len()..=tail.len()).rev().find(|&end| {
            let w = &tail[end - mark.len()..end];
            if ci {
                w.eq_ignore_ascii_case(mark)
            } else {
                w == mark
            }
        })
    }
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut head = [0u8; 16];
    let n = src.read(0, &mut head).min(head.len());
    let kind = Kind::of(&head[..n])?;
    let end = match run_end(&src, 0) {
        Run::Cut(end) => return (end >= MIN_LEN).then(|| Verdict::partial(end, src.cut_note())),
        Run::Ends(end) => end,
    };
    if end < MIN_LEN {
        return None;
    }
    if src.ends_cleanly(end) {
        let mut v = Verdict::complete(end);
        v.notes
            .push("text up to zero slack or a sector boundary".to_string());
        return Some(v);
    }
    let from = end.saturating_sub(TAIL);
    let mut tail = vec![0u8; (end - from) as usize];
    if !src.read_exact(from, &mut tail) {
        return Some(Verdict::partial(end, "text could not be read again"));
    }
    let Some(close) = kind.last_close(&tail) else {
        return Some(Verdict::partial(
            end,
            format!(
                "text runs into non-text bytes at {end} before the end of its sector, and no {} in its last {TAIL} bytes",
                kind.name()
            ),
        ));
    };
    let ws = tail[close..]
        .iter()
        .take_while(|b| matches!(b, b'\t' | b'\n' | b'\r' | b' '))
        .count();
    let at = from + (close + ws) as u64;
    if at < MIN_LEN {
        return None;
    }
    let mut v = Verdict::complete(at);
    v.notes.push(format!(
        "text ends at its last {} and the white space after it ({} foreign text bytes follow)",
        kind.name(),
        end - at
    ));
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::super::testutil::run;

    /// Each format, followed by foreign bytes: a few that are text (no
    /// closing mark among them), then one that is not.
    #[test]
    fn each_format_ends_at_its_closing_mark_and_line_break() {
        let docs: [&[u8]; 5] = [
            b"<!DOCTYPE html>\n<html><body><p>x</p></body></html>\n",
            b"<HTML>\r\n<BODY>a</BODY>\r\n</HTML>\r\n",
            b"<?xml version=\"1.0\"?>\n<root a=\"1\"><b/></root>\n",
            b"{\\rtf1\\ansi{\\fonttbl{\\f0 Times;}}\\f0 text\\par}",
            b"%!PS-Adobe-3.0\n%%Pages: 1\nshowpage\n%%EOF\n",
        ];
        for doc in docs {
            let mut d = doc.to_vec();
            d.extend(b"zq9");
            d.push(0x01);
            d.resize(1024, 0x42);
            let v = run("markup", &d).expect("markup");
            assert_eq!(
                (v.status, v.length),
                (Status::Complete, doc.len() as u64),
                "{}",
                String::from_utf8_lossy(doc)
            );
        }
    }

    /// Zero slack after the text: the whole run, even after the last mark.
    #[test]
    fn zero_slack_ends_the_text_where_it_ends() {
        let doc = b"<?xml version=\"1.0\"?>\n<a>b</a>\n<!-- trailing comment without a close -- x";
        let mut d = doc.to_vec();
        d.resize(512, 0);
        let v = run("markup", &d).expect("markup");
        assert_eq!((v.status, v.length), (Status::Complete, doc.len() as u64));
    }

    /// No closing mark: partial; not a header of these formats: none.
    #[test]
    fn no_mark_is_partial_and_other_text_is_none() {
        let mut d = b"%!PS-Adobe-2.0 EPSF-2.0\n%%BoundingBox: 0 0 1 1\ngsave\n".to_vec();
        let n = d.len() as u64;
        d.push(0x01);
        d.resize(512, 0x42);
        let v = run("markup", &d).expect("markup");
        assert_eq!((v.status, v.length), (Status::Partial, n));
        assert!(run("markup", b"#!/bin/sh\necho not markup\n").is_none());
        assert!(run("markup", b"<html\x00\x00\x00\x00\x00\x00\x00\x00").is_none());
    }

    /// A mark further back than the tail does not end the file.
    #[test]
    fn a_mark_before_the_tail_is_not_looked_for() {
        let mut d = b"<html><body></body></html>".to_vec();
        let far = d.len() + super::TAIL as usize + 10;
        d.resize(far, b'a');
        d.push(0x01);
        d.resize(far + 600, 0x42);
        let v = run("markup", &d).expect("markup");
        assert_eq!((v.status, v.length), (Status::Partial, far as u64));
    }
}
