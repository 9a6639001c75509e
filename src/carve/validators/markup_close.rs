//! Where a markup document closes by its structure, when foreign text
//! follows it in the same run of text (older text in a cluster's slack, the
//! next file's text in free space), so that neither the run's end nor the
//! last closing mark in it is the document's end:
//!
//! * XML (W3C XML 1.0 §2.1, `document ::= prolog element Misc*`): the end
//!   tag (or empty-element tag) that closes the root element, then white
//!   space, comments and processing instructions (`Misc`); anything else
//!   after them is not the document's;
//! * HTML (WHATWG HTML 13.2.6.4.21-23, "after after body"): the first
//!   `</html>` outside comments, then white space and comments; text that
//!   is not markup after them (`<` after them may be a page's trailing
//!   markup, which parsers keep, so it does not end the page).
//! * RTF (RTF 1.9.1, "an RTF file consists of a single group"): the `}`
//!   that closes the group the file opens with, braces counted outside
//!   escapes (`\{`, `\}`, `\\`) and the raw bytes of `\binN`; then white
//!   space.
//!
//! The walk tracks XML elements' depth (tags, with quoted attribute values
//! that may hold `>`; comments, CDATA sections, declarations with an
//! internal subset, processing instructions skipped whole). It stops, with
//! no answer, at another document's start (an XML declaration; for HTML a
//! doctype or a second `<html`), where that document's own candidate walks
//! on: so the walks of all candidates in a run read each byte about once,
//! and what one reads is bounded by the run, which the scan found.

use super::read::Src;

/// Bytes read at a time.
const CHUNK: usize = 4096;

/// A forward reader over `[pos, end)` of the window, with a short look
/// ahead.
struct Bytes<'s, 'a> {
    src: &'s Src<'a>,
    end: u64,
    /// `buf[at..len]` holds the bytes from `pos` on (grown to what the
    /// run holds, at most [`CHUNK`]: most runs are short, and zeroing a
    /// whole chunk for each candidate was this walk's main cost on dense
    /// input).
    buf: Vec<u8>,
    at: usize,
    len: usize,
    pos: u64,
}

impl<'s, 'a> Bytes<'s, 'a> {
    fn new(src: &'s Src<'a>, end: u64) -> Self {
        Bytes {
            src,
            end,
            buf: Vec::new(),
            at: 0,
            len: 0,
            pos: 0,
        }
    }

    /// The next `n` (at most [`CHUNK`], here at most 9: `<![CDATA[`) bytes,
    /// fewer at the end.
    fn peek(&mut self, n: usize) -> &[u8] {
        if self.len - self.at < n {
            self.buf.copy_within(self.at..self.len, 0);
            self.len -= self.at;
            self.at = 0;
            let from = self.pos + self.len as u64;
            let want = (CHUNK - self.len).min(self.end.saturating_sub(from) as usize);
            if self.buf.len() < self.len + want {
                self.buf.resize(self.len + want, 0);
            }
            let got = self
                .src
                .read(from, &mut self.buf[self.len..self.len + want]);
            self.len += got.min(want);
        }
        &self.buf[self.at..self.len.min(self.at + n)]
    }

    fn starts(&mut self, s: &[u8], ignore_case: bool) -> bool {
        let p = self.peek(s.len());
        p.len() == s.len()
            && if ignore_case {
                p.eq_ignore_ascii_case(s)
            } else {
                p == s
            }
    }

    fn next(&mut self) -> Option<u8> {
        let b = *self.peek(1).first()?;
        self.at += 1;
        self.pos += 1;
        Some(b)
    }

    fn skip(&mut self, n: usize) {
        for _ in 0..n {
            if self.next().is_none() {
                return;
            }
        }
    }

    /// Past the next `close`; false when the run ends first.
    fn past(&mut self, close: &[u8]) -> bool {
        loop {
            if self.starts(close, false) {
                self.skip(close.len());
                return true;
            }
            if self.next().is_none() {
                return false;
            }
        }
    }

    /// Past the `>` that ends a tag or declaration, outside quotes and
    /// (for a doctype) its internal subset's brackets; the byte before it.
    fn past_tag_end(&mut self) -> Option<u8> {
        let (mut quote, mut nest, mut last) = (None, 0u32, 0u8);
        loop {
            let b = self.next()?;
            match (quote, b) {
                (Some(q), _) if b == q => quote = None,
                (Some(_), _) => {}
                (None, b'"' | b'\'') => quote = Some(b),
                (None, b'[') => nest += 1,
                (None, b']') => nest = nest.saturating_sub(1),
                (None, b'>') if nest == 0 => return Some(last),
                _ => {}
            }
            last = b;
        }
    }

    /// Past one byte of white space, if one is next; a line feed's end goes
    /// to `line_end`.
    fn past_white(&mut self, line_end: &mut Option<u64>) -> bool {
        let Some(&b @ (b' ' | b'\t' | b'\r' | b'\n')) = self.peek(1).first() else {
            return false;
        };
        self.skip(1);
        if b == b'\n' {
            *line_end = Some(self.pos);
        }
        true
    }

    /// Past white space, comments and (XML) processing instructions; where
    /// the document ends among them: after a line feed, white space that no
    /// line feed ends is not the document's (its last line ends with its
    /// line feed; a space or a lone carriage return after it starts the
    /// foreign text).
    fn past_misc(&mut self, xml: bool) -> u64 {
        // The end of the white space's last line feed, since the last
        // comment or processing instruction.
        let mut line_end: Option<u64> = None;
        loop {
            if self.past_white(&mut line_end) {
                continue;
            }
            match self.peek(1).first().copied() {
                Some(b'<') if self.starts(b"<!--", false) => {
                    line_end = None;
                    if !self.past(b"-->") {
                        return self.pos;
                    }
                }
                Some(b'<')
                    if xml && self.starts(b"<?", false) && !self.starts(b"<?xml ", false) =>
                {
                    line_end = None;
                    if !self.past(b"?>") {
                        return self.pos;
                    }
                }
                _ => return line_end.unwrap_or(self.pos),
            }
        }
    }
}

/// Where the XML (`xml`) or HTML document at the window's start closes,
/// with the white space and comments after it, when foreign text follows
/// before `end`, the end of its run of text; `None` when the run ends first,
/// the structure does not close, or another document starts before it does.
pub(super) fn closed_at(src: &Src, end: u64, xml: bool) -> Option<u64> {
    let mut r = Bytes::new(src, end);
    let mut depth = 0u32;
    let (mut doctype, mut html) = (false, false);
    loop {
        // The next `<`.
        while r.peek(1).first()? != &b'<' {
            r.skip(1);
        }
        let at = r.pos;
        if r.starts(b"<!--", false) {
            r.past(b"-->").then_some(())?;
        } else if r.starts(b"<![CDATA[", false) {
            r.past(b"]]>").then_some(())?;
        } else if r.starts(b"<!", false) {
            if !xml && r.starts(b"<!doctype", true) {
                // (A page's own doctype comes before its html element.)
                if doctype || html {
                    return None;
                }
                doctype = true;
            }
            r.past_tag_end()?;
        } else if r.starts(b"<?", false) {
            if xml && at > 0 && r.starts(b"<?xml ", false) {
                return None;
            }
            r.past(b"?>").then_some(())?;
        } else if !xml {
            if r.starts(b"<html", true) {
                if html {
                    return None;
                }
                html = true;
            }
            let close = r.starts(b"</html", true);
            r.skip(1);
            if close {
                r.past_tag_end()?;
                break;
            }
        } else if r.starts(b"</", false) {
            r.past_tag_end()?;
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                break;
            }
        } else {
            r.skip(1);
            let name = r.peek(1).first().copied()?;
            if !(name.is_ascii_alphabetic() || name == b'_' || name == b':' || name >= 0x80) {
                // Not a tag ("a < b" is not well-formed XML, but text).
                continue;
            }
            if r.past_tag_end()? == b'/' {
                if depth == 0 {
                    break;
                }
            } else {
                depth += 1;
            }
        }
    }
    let at = r.past_misc(xml);
    let next = *r.peek(1).first()?;
    (xml || next != b'<').then_some(at)
}

/// Where the RTF document at the window's start closes (the `}` that ends
/// its outermost group, and the white space after it up to its last line
/// feed; none when no line feed follows it), when foreign text follows before `end`, the end of its run of
/// text; `None` when the run ends first or another document starts inside
/// the group (its own candidate walks on from there).
pub(super) fn rtf_closed_at(src: &Src, end: u64) -> Option<u64> {
    let mut r = Bytes::new(src, end);
    let mut depth = 0u32;
    loop {
        match r.next()? {
            b'\\' => {
                if r.starts(b"bin", false) {
                    r.skip(3);
                    // `\binN`: N raw bytes (bounded by the run) after the
                    // control word and its delimiting space.
                    let mut n: u64 = 0;
                    while let Some(&d) = r.peek(1).first().filter(|d| d.is_ascii_digit()) {
                        n = n.saturating_mul(10).saturating_add(u64::from(d - b'0'));
                        r.skip(1);
                    }
                    if r.starts(b" ", false) {
                        r.skip(1);
                    }
                    let left = end.saturating_sub(r.pos);
                    if n > left {
                        return None;
                    }
                    r.skip(n as usize);
                } else {
                    r.skip(1);
                }
            }
            b'{' => {
                if depth > 0 && r.starts(b"\\rtf", false) {
                    return None;
                }
                depth += 1;
            }
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    // White space that no line feed ends is not the document's (AbiWord
    // ends on the brace; a space after it starts the foreign text).
    let brace_end = r.pos;
    let mut line_end = None;
    while r.past_white(&mut line_end) {}
    // (Foreign text follows: the run goes on.)
    r.peek(1).first()?;
    Some(line_end.unwrap_or(brace_end))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{NO_LIMIT, Slice};
    use super::*;

    fn closed(doc: &[u8], xml: bool) -> Option<u64> {
        let r = Slice(doc);
        closed_at(&Src::new(&r, 0, NO_LIMIT), doc.len() as u64, xml)
    }

    #[test]
    fn rtf_closes_with_the_brace_of_its_outer_group() {
        let rtf = |doc: &[u8]| {
            let r = Slice(doc);
            rtf_closed_at(&Src::new(&r, 0, NO_LIMIT), doc.len() as u64)
        };
        let doc = b"{\\rtf1\\ansi{\\fonttbl{\\f0 Times;}}\\f0 a \\{ b \\} c \\\\{\\bin3 }}}x}}\r\n";
        let mut img = doc.to_vec();
        img.extend_from_slice(b" older text of a file once here");
        assert_eq!(rtf(&img), Some(doc.len() as u64));
        // The run ends first (white space alone after it): not this rule's.
        assert_eq!(rtf(doc), None);
        assert_eq!(rtf(&img[..doc.len() - 4]), None);
        // No line feed after the brace: the white space is the foreign
        // text's (a space, a tab, a lone carriage return).
        for tail in [&b" older text"[..], b"\t\t older", b"\rolder"] {
            let mut img = doc[..doc.len() - 2].to_vec();
            img.extend_from_slice(tail);
            assert_eq!(rtf(&img), Some(doc.len() as u64 - 2), "{tail:?}");
        }
        // Another document inside the group; a `\bin` past the run.
        assert_eq!(rtf(b"{\\rtf1 a {\\rtf1 b} c} text"), None);
        assert_eq!(rtf(b"{\\rtf1 a \\bin99999 } c} text"), None);
    }

    #[test]
    fn xml_closes_with_its_root_element() {
        let doc = b"<?xml version=\"1.0\"?>\n<!DOCTYPE r [<!ENTITY e \"x>\">]>\n<r a=\"1>2\"><b/><c>t<![CDATA[</r>]]></c><!-- </r> --></r>\n<!-- end -->\n";
        let mut img = doc.to_vec();
        img.extend_from_slice(b"older text of a file once here");
        assert_eq!(closed(&img, true), Some(doc.len() as u64));
        // White space alone after it: the run's end decides, not this.
        assert_eq!(closed(doc, true), None);
        // Not closed before the run ends, or another declaration first.
        assert_eq!(closed(&img[..doc.len() - 20], true), None);
        let mut two = b"<?xml version=\"1.0\"?><r><?xml version=\"1.0\"?>".to_vec();
        two.extend_from_slice(b"<s/></r> text");
        assert_eq!(closed(&two, true), None);
    }

    #[test]
    fn html_closes_with_its_first_end_tag_before_text() {
        let doc = b"<!DOCTYPE html>\n<html><body><!-- </html> -->x</body></HTML>\n";
        let mut img = doc.to_vec();
        img.extend_from_slice(b"older text");
        assert_eq!(closed(&img, false), Some(doc.len() as u64));
        // Markup after it: a page's trailing markup, not foreign text.
        let mut tail = doc.to_vec();
        tail.extend_from_slice(b"<script>x()</script>");
        assert_eq!(closed(&tail, false), None);
        // A second page starts first.
        let mut two = b"<html><body>".to_vec();
        two.extend_from_slice(&img);
        assert_eq!(closed(&two, false), None);
        let mut two = b"<!doctype html><p>".to_vec();
        two.extend_from_slice(&img);
        assert_eq!(closed(&two, false), None);
    }
}
