//! Markup and page descriptions in text (HTML, XML, RTF, PostScript): the run
//! of text from the header, ended where the format closes.
//!
//! These formats have no length field; the file is text and ends with a
//! closing mark: HTML with `</html>`, XML with the `>` of its root element's
//! end tag, RTF with the `}` that closes its group, DSC PostScript with
//! `%%EOF`; then usually a line break. Text here is [`super::text`]'s bytes
//! and printable Latin-1 (0xA0-0xFF outside UTF-8), which documents from
//! before UTF-8 hold. So:
//!
//! * `None`: the header is not one of those (an HTML page may start with a
//!   line break before its doctype, at a 512-byte boundary), or fewer than
//!   [`super::text::MIN_LEN`] text bytes;
//! * `Complete`, the structure rule (HTML, XML, RTF): the document closes
//!   (its root element's end, its `</html>`, its outer group's `}`) and
//!   foreign text follows in the run
//!   ([`super::markup_close`]);
//! * `Complete`, the text rule: the run of text ends on a 512-byte boundary
//!   or is followed by zero bytes to the next one (slack, as file systems
//!   leave it);
//! * `Complete`, the closing rule: otherwise the run went on into foreign
//!   bytes that happen to be text, and the file ends after its last closing
//!   mark and the white space after it (an XML `>` only where it closes an
//!   end tag, an empty element, a comment or a processing instruction; PostScript also after its last line
//!   break, past 64 bytes: DSC files without `%%EOF` end with one), if at
//!   most [`super::text::FOREIGN_MAX`] bytes follow in the run
//!   ([`super::text::end_in_tail`]). A header in random bytes is followed by
//!   a few bytes of text, which neither make such a mark nor reach 64 bytes;
//! * `Partial`: neither, or the window ends first.
//!
//! What a candidate reads is the run (shared through the carving's memo
//! with the other headers of the same run) and its last
//! [`super::text::TAIL`] bytes again: work linear in the run.

use super::Verdict;
use super::markup_close;
use super::read::Src;
use super::text::{FOREIGN_MAX, MIN_LEN, Run, end_before, latin1_text_run, run_end_of};

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
        let starts = |p: &[u8]| {
            head.get(..p.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(p))
        };
        if starts(b"<!doctype html") || starts(b"<html") {
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
}

/// Fewest bytes of a PostScript file that a line break may end.
const MIN_LINES: u64 = 64;

/// Whether the `>` that white space at most follows before `at` closes an
/// end tag (`</name>`) or an empty element (`<name/>`), as a document's
/// root element ends, or a comment or processing instruction, which may
/// follow it: a `>` of foreign bytes does not.
fn closes_a_tag(src: &Src, at: u64) -> bool {
    let from = at.saturating_sub(super::text::TAIL);
    let mut buf = [0u8; super::text::TAIL as usize];
    let Some(tail) = buf.get_mut(..(at - from) as usize) else {
        return false;
    };
    if !src.read_exact(from, tail) {
        return false;
    }
    let Some(gt) = tail.iter().rposition(|&b| b == b'>') else {
        return false;
    };
    let tag = &tail[..gt];
    let open = tag.iter().rposition(|&b| b == b'<');
    tag.ends_with(b"/")
        || tag.ends_with(b"--")
        // (Not the XML declaration itself: a declaration alone is no file.)
        || (tag.ends_with(b"?") && open.is_some_and(|lt| from + lt as u64 > 0))
        || open.is_some_and(|lt| tag.get(lt + 1) == Some(&b'/'))
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut head = [0u8; 16];
    let n = src.read(0, &mut head).min(head.len());
    // A line break before an HTML doctype, at a sector's start only (where
    // a file starts): within text it is the text's, not the page's.
    let lead = usize::from(n > 0 && head[0] == b'\n');
    if lead == 1 && !src.abs(0).is_multiple_of(512) {
        return None;
    }
    let kind = Kind::of(&head[lead..n]).filter(|&k| lead == 0 || k == Kind::Html)?;
    let end = match run_end_of(&src, 0, b"latin-1 text run", latin1_text_run) {
        Run::Cut(end) => return (end >= MIN_LEN).then(|| Verdict::partial(end, src.cut_note())),
        Run::Ends(end) => end,
    };
    if end < MIN_LEN {
        return None;
    }
    if matches!(kind, Kind::Html | Kind::Xml)
        && let Some(at) = markup_close::closed_at(&src, end, kind == Kind::Xml)
        && at >= MIN_LEN
    {
        let mut v = Verdict::complete(at);
        v.notes.push(format!(
            "the document closes at {at} ({}), foreign text follows",
            if kind == Kind::Xml {
                "its root element's end"
            } else {
                "its </html>"
            }
        ));
        return Some(v);
    }
    if kind == Kind::Rtf
        && let Some(at) = markup_close::rtf_closed_at(&src, end)
        && at >= MIN_LEN
    {
        let mut v = Verdict::complete(at);
        v.notes.push(format!(
            "the document closes at {at} (the }} of its outer group), foreign text follows"
        ));
        return Some(v);
    }
    if src.ends_cleanly(end) {
        let mut v = Verdict::complete(end);
        v.notes
            .push("text up to zero slack or a sector boundary".to_string());
        return Some(v);
    }
    let mark = kind.name().as_bytes();
    // Line breaks end only PostScript (DSC files without `%%EOF` end with
    // one), and only past [`MIN_LINES`]: a header in random bytes followed
    // by a few bytes that happen to be text and a line break is not a file.
    let at = end_before(&src, end, mark, kind == Kind::Html, false)
        .filter(|&at| kind != Kind::Xml || closes_a_tag(&src, at))
        .or_else(|| {
            (kind == Kind::Ps)
                .then(|| end_before(&src, end, b"", false, true))
                .flatten()
                .filter(|&at| at >= MIN_LINES)
        })
        .filter(|&at| at >= MIN_LEN);
    match at {
        Some(at) => {
            let mut v = Verdict::complete(at);
            v.notes.push(format!(
                "text ends at its last {} ({} foreign text bytes follow)",
                kind.name(),
                end - at
            ));
            Some(v)
        }
        None => Some(Verdict::partial(
            end,
            format!(
                "text runs into non-text bytes at {end} before the end of its sector, {FOREIGN_MAX}+ bytes after its last {}",
                kind.name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::super::testutil::{NO_LIMIT, run, run_at};

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

    /// After the line feed that ends a document's last line, white space
    /// that no line feed ends (a space, a lone carriage return) starts the
    /// foreign bytes: by the structure rule (foreign text follows) and by
    /// the closing rule (a non-text byte soon after).
    #[test]
    fn white_space_after_the_last_line_feed_is_not_the_documents() {
        let docs: [&[u8]; 3] = [
            b"<!DOCTYPE html>\n<html><body><p>x</p></body></html>\n",
            b"<?xml version=\"1.0\"?>\n<root a=\"1\"><b/></root>\r\n\r\n",
            b"%!PS-Adobe-3.0\n%%Pages: 1\nshowpage\n%%EOF\n",
        ];
        for doc in docs {
            for after in [&b" 12:34:08 INFO\x01"[..], b"\r\x05", b" \t\x01"] {
                let mut d = doc.to_vec();
                d.extend(after);
                d.resize(1024, 0x42);
                let v = run("markup", &d).expect("markup");
                assert_eq!(
                    (v.status, v.length),
                    (Status::Complete, doc.len() as u64),
                    "{} then {after:?}",
                    String::from_utf8_lossy(doc)
                );
            }
        }
        // Spaces before the line feed are the document's.
        let doc = b"<!DOCTYPE html>\n<html><body></body></html>  \n";
        let mut d = doc.to_vec();
        d.extend(b"\r\x05");
        d.resize(1024, 0x42);
        let v = run("markup", &d).expect("markup");
        assert_eq!((v.status, v.length), (Status::Complete, doc.len() as u64));
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

    /// No closing mark: the last line break ends the file, and a long last
    /// line without one is partial; not a header of these formats: none.
    #[test]
    fn no_mark_ends_at_a_line_break_or_is_partial_and_other_text_is_none() {
        let ps = b"%!PS-Adobe-2.0 EPSF-2.0\n%%BoundingBox: 0 0 1 1\ngsave 0.5 setgray 0 0 1 1 rectfill\n";
        let mut d = ps.to_vec();
        d.extend(b"Qz\x01");
        d.resize(512, 0x42);
        let v = run("markup", &d).expect("markup");
        assert_eq!((v.status, v.length), (Status::Complete, ps.len() as u64));
        let mut d = ps.to_vec();
        d.extend(b"1 0 0 setrgbcolor 0 0 1 1 rectfill");
        let n = d.len() as u64;
        d.push(0x01);
        d.resize(512, 0x42);
        let v = run("markup", &d).expect("markup");
        assert_eq!((v.status, v.length), (Status::Partial, n));
        assert!(run("markup", b"#!/bin/sh\necho not markup\n").is_none());
        assert!(run("markup", b"<html\x00\x00\x00\x00\x00\x00\x00\x00").is_none());
    }

    /// A header in random bytes, a few text bytes with a line break or a
    /// `>` among them: no file.
    #[test]
    fn headers_in_noise_are_not_closed_by_chance() {
        for (head, noise) in [
            (&b"<?xml version="[..], &b"1>z\x01"[..]),
            (b"<?xml version=", b"1<a>\x01"),
            (b"<?xml version=", b"\"1\"?>\n<\x02"),
            (b"<html", b"a\nb>\x01"),
            (b"%!PS-Adobe-", b"3.0\nq\x01"),
            (b"{\\rtf", b"1 a\n\x01"),
        ] {
            let mut d = head.to_vec();
            d.extend(noise);
            d.resize(512, 0x99);
            let v = run("markup", &d);
            assert!(
                v.as_ref().is_none_or(|v| v.status != Status::Complete),
                "{}: {v:?}",
                String::from_utf8_lossy(&d[..20])
            );
        }
    }

    /// More than FOREIGN_MAX bytes after the last mark or line break, the
    /// document not closed by its structure (an XML root element still
    /// open): the text is the file's own, whose end is not known. A
    /// document that has closed (`</html>`, then text that is not markup)
    /// ends there.
    #[test]
    fn text_long_after_the_last_mark_is_partial() {
        for (doc, closed) in [
            (&b"<?xml version=\"1.0\"?><r><a/>"[..], false),
            (b"<html><body></body></html>", true),
        ] {
            let mut d = doc.to_vec();
            let far = d.len() + super::FOREIGN_MAX + 1;
            d.resize(far, b'a');
            d.push(0x01);
            d.resize(far + 600, 0x42);
            let v = run("markup", &d).expect("markup");
            let want = if closed {
                (Status::Complete, doc.len() as u64)
            } else {
                (Status::Partial, far as u64)
            };
            assert_eq!((v.status, v.length), want);
        }
    }

    /// A page that starts with a line break: taken at a sector's start
    /// (where a file starts), not within text.
    #[test]
    fn a_line_break_before_a_doctype_starts_a_page_at_a_sector() {
        let doc = b"\n<!DOCTYPE html>\n<html><body>x</body></html>\n";
        let mut d = vec![b'a'; 512];
        d.extend_from_slice(doc);
        d.resize(1024, 0);
        let v = run_at("markup", &d, 512, NO_LIMIT).expect("markup");
        assert_eq!((v.status, v.length), (Status::Complete, doc.len() as u64));
        let mut d = vec![b'a'; 511];
        d.extend_from_slice(doc);
        d.resize(1024, 0);
        assert!(run_at("markup", &d, 511, NO_LIMIT).is_none());
    }

    /// Latin-1 text (a byte of 0xA0-0xFF outside UTF-8) does not end the run.
    #[test]
    fn latin1_is_text_in_documents() {
        let doc =
            b"<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n<a>\xb5 caf\xe9 \xc3\xa9</a>\n";
        let mut d = doc.to_vec();
        d.extend(b"x\x01");
        d.resize(1024, 0x42);
        let v = run("markup", &d).expect("markup");
        assert_eq!((v.status, v.length), (Status::Complete, doc.len() as u64));
    }
}
