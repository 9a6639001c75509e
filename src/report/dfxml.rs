//! `report.xml`: Digital Forensics XML, shaped as PhotoRec and fiwalk write it.
//!
//! ```xml
//! <dfxml xmlns=... version='1.0'>
//!   <metadata><dc:type>Carve Report</dc:type></metadata>
//!   <creator><package>gpucarve</package><version>..</version>
//!     <execution_environment><command_line>..</command_line><start_time>..</start_time></execution_environment></creator>
//!   <source><image_filename>..</image_filename><image_size>..</image_size><sectorsize>512</sectorsize></source>
//!   <fileobject>
//!     <filename>jpeg/000000001024.jpg</filename>      (absent when not written)
//!     <id>1</id> <filesize>..</filesize> <alloc>0</alloc>
//!     <byte_runs><byte_run offset='0' img_offset='1024' len='5120'/></byte_runs>
//!     <hashdigest type='sha256'>..</hashdigest><hashdigest type='md5'>..</hashdigest>
//!     <gc:type>jpeg</gc:type> <gc:status>complete</gc:status> <gc:parent>..</gc:parent>
//!   </fileobject>
//!   <rusage><clocktime>..</clocktime></rusage>
//! </dfxml>
//! ```
//! Elements outside DFXML's vocabulary live in a `gc:` namespace, so DFXML
//! tools ignore them.

use std::io::Write;

use super::{CarveReport, RunInfo};
use crate::carve::CarvedFile;

/// XML-escapes text for element content and single-quoted attributes.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\'' => o.push_str("&apos;"),
            '"' => o.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {
                o.push_str(&format!("&#x{:X};", c as u32))
            }
            c => o.push(c),
        }
    }
    o
}

/// Streams a DFXML document.
pub struct DfxmlReport<W: Write> {
    out: W,
}

impl<W: Write> DfxmlReport<W> {
    /// Writes the document head.
    pub fn new(mut out: W, info: &RunInfo) -> std::io::Result<Self> {
        write!(
            out,
            "<?xml version='1.0' encoding='UTF-8'?>\n\
<dfxml xmlns='http://www.forensicswiki.org/wiki/Category:Digital_Forensics_XML'\n  \
xmlns:dc='http://purl.org/dc/elements/1.1/'\n  \
xmlns:xsi='http://www.w3.org/2001/XMLSchema-instance'\n  \
xmlns:gc='https://github.com/gpucarve/gpucarve'\n  version='1.0'>\n  \
<metadata>\n    <dc:type>Carve Report</dc:type>\n  </metadata>\n  \
<creator>\n    <package>gpucarve</package>\n    <version>{}</version>\n    \
<execution_environment>\n      <command_line>{}</command_line>\n      <start_time>{}</start_time>\n    </execution_environment>\n  </creator>\n  \
<source>\n    <image_filename>{}</image_filename>\n    <image_size>{}</image_size>\n    <sectorsize>{}</sectorsize>\n  </source>\n",
            escape(&info.version),
            escape(&info.command_line),
            escape(&info.start_time),
            escape(&info.image),
            info.image_len,
            info.sector_size
        )?;
        Ok(DfxmlReport { out })
    }

    /// A range of the image that could not be read (after the files), in
    /// gpucarve's own namespace: `<gc:unreadable img_offset='…' len='…'>reason</gc:unreadable>`.
    pub fn unreadable(&mut self, d: &crate::source::Damage) -> std::io::Result<()> {
        writeln!(
            self.out,
            "  <gc:unreadable img_offset='{}' len='{}'>{}</gc:unreadable>",
            d.offset,
            d.len,
            escape(&d.reason)
        )
    }

    /// Closes the document; `clocktime` in seconds; `error` when the run stopped early.
    pub fn finish(mut self, clocktime: f64, error: Option<&str>) -> std::io::Result<W> {
        if let Some(e) = error {
            writeln!(self.out, "  <gc:incomplete>{}</gc:incomplete>", escape(e))?;
        }
        write!(
            self.out,
            "  <rusage>\n    <clocktime>{clocktime:.3}</clocktime>\n  </rusage>\n</dfxml>\n"
        )?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> CarveReport for DfxmlReport<W> {
    fn file(&mut self, f: &CarvedFile) -> std::io::Result<()> {
        let o = &mut self.out;
        writeln!(o, "  <fileobject>")?;
        if let Some(p) = &f.path {
            writeln!(o, "    <filename>{}</filename>", escape(p))?;
        }
        writeln!(
            o,
            "    <id>{}</id>\n    <filesize>{}</filesize>\n    <alloc>0</alloc>",
            f.id, f.length
        )?;
        writeln!(o, "    <byte_runs>")?;
        for r in &f.byte_runs {
            writeln!(
                o,
                "      <byte_run offset='{}' img_offset='{}' len='{}'/>",
                r.file_offset, r.img_offset, r.len
            )?;
        }
        writeln!(o, "    </byte_runs>")?;
        if let Some(h) = &f.sha256 {
            writeln!(o, "    <hashdigest type='sha256'>{h}</hashdigest>")?;
        }
        if let Some(h) = &f.md5 {
            writeln!(o, "    <hashdigest type='md5'>{h}</hashdigest>")?;
        }
        writeln!(
            o,
            "    <gc:type>{}</gc:type>\n    <gc:status>{}</gc:status>",
            escape(&f.file_type),
            escape(&f.status)
        )?;
        if let Some(p) = f.parent {
            writeln!(o, "    <gc:parent>{p}</gc:parent>")?;
        }
        writeln!(o, "  </fileobject>")
    }
}
