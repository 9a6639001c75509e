//! `report.xml`: Digital Forensics XML that validates against the DFXML
//! working group's schema (`tests/dfxml_schema/dfxml.xsd`) and that DFXML
//! readers (dfxml_python's `objects.iterparse`) understand, in the layout
//! PhotoRec users know:
//!
//! ```xml
//! <dfxml xmlns=... version='1.2.0'>
//!   <metadata><dc:type>Carve Report</dc:type></metadata>
//!   <creator><program>gpucarve</program><version>..</version>
//!     <execution_environment>(uname, host, command_line, uid, start_time)</execution_environment></creator>
//!   <source><image_filename>/absolute/path/disk.dd</image_filename></source>
//!   <diskimageobject><filesize>(image bytes)</filesize><sector_size>512</sector_size></diskimageobject>
//!   <volume offset='1048576'>                        (one per volume found)
//!     <partition_offset>1048576</partition_offset> <block_size>4096</block_size>
//!     <ftype_str>ext4</ftype_str> <block_count>..</block_count> <gc:length>(bytes)</gc:length>
//!   </volume>
//!   <fileobject>
//!     <filename>jpeg/000000001024.jpg</filename>      (absent when not written)
//!     <id>1</id> <filesize>..</filesize>
//!     <alloc>0</alloc>                                 (when known: see below)
//!     <byte_runs><byte_run file_offset='0' img_offset='1024' len='5120'/></byte_runs>
//!     <hashdigest type='sha256'>..</hashdigest>       (one per --hash algorithm, when hashed)
//!     <gc:type>jpeg</gc:type> <gc:family>..</gc:family> <gc:status>complete</gc:status>
//!     <gc:parent>..</gc:parent> <gc:validator>..</gc:validator> <gc:note>..</gc:note>
//!     <gc:alloc>partly</gc:alloc>                      (some clusters allocated, some not)
//!     <gc:original_name path='/DCIM/A.JPG' deleted='0' size='..' volume='..'/>  (see below)
//!   </fileobject>
//!   <rusage>(getrusage: utime, stime, maxrss, ...)<clocktime>..</clocktime></rusage>
//!   <gc:incomplete>..</gc:incomplete>                  (when the run stopped early)
//! </dfxml>
//! ```
//! The schema fixes the order of DFXML elements and allows other namespaces
//! only where it says so (the end of a `fileobject`, the start and end of
//! `dfxml`); gpucarve's own elements live in the `gc:` namespace there.
//! PhotoRec's `byte_run/@offset`, `source/image_size` and `source/sectorsize`
//! are not in the schema: they are `byte_run/@file_offset`,
//! `diskimageobject/filesize` and `diskimageobject/sector_size` here.
//! PhotoRec writes `<alloc>0</alloc>` for every carved file; gpucarve
//! writes `<alloc>` only where the file system's allocation map says it
//! ([`crate::carve::geometry::alloc`]): `1` when every cluster the file's
//! bytes lie in is allocated, `0` when none is (a deleted file, unallocated
//! space). The schema's `alloc` is the file's (FAT has no inodes apart from
//! names; an allocation map says nothing of `alloc_inode` or `alloc_name`).
//! A file whose clusters are partly allocated has no `alloc` (neither value
//! is true of it) but `<gc:alloc>partly</gc:alloc>`; a file whose status is
//! not known has neither. Volumes (the schema places them after the disk
//! image object, before the top-level file objects) carry the volume's
//! offset, cluster size, file system and length.
//! A file whose first cluster a directory entry points at
//! ([`crate::carve::geometry::names`]) has `<gc:original_name>` (its path
//! from the volume's root, whether deleted, the entry's size, the volume's
//! offset: `filename` stays the written file's path) and the entry's times
//! as `mtime`, `atime`, `crtime` (FAT's local times, written without a zone).

use std::io::Write;

use super::{CarveReport, RunInfo};
use crate::carve::CarvedFile;
use crate::hashing::HashChoice;

/// The DFXML namespace.
pub const XMLNS_DFXML: &str = "http://www.forensicswiki.org/wiki/Category:Digital_Forensics_XML";
/// gpucarve's namespace for its own elements.
pub const XMLNS_GC: &str = "https://github.com/gpucarve/gpucarve";

/// XML-escapes text for element content and single-quoted attributes;
/// characters XML 1.0 cannot carry become U+FFFD.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\'' => o.push_str("&apos;"),
            '"' => o.push_str("&quot;"),
            // Not allowed in XML 1.0, not even as character references.
            c if ((c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r'))
                || matches!(c, '\u{FFFE}' | '\u{FFFF}') =>
            {
                o.push('\u{FFFD}')
            }
            c => o.push(c),
        }
    }
    o
}

/// What report.xml says of a volume: where it lies, its cluster size and
/// file system. Kept in each carving's run.json, so that `merge` writes
/// the volumes its shards found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VolumeHead {
    pub start: u64,
    pub end: u64,
    pub cluster: u64,
    pub fs: String,
}

impl From<&crate::carve::geometry::Volume> for VolumeHead {
    fn from(v: &crate::carve::geometry::Volume) -> Self {
        VolumeHead {
            start: v.start,
            end: v.end,
            cluster: v.cluster,
            fs: v.fs.to_string(),
        }
    }
}

/// Streams a DFXML document.
pub struct DfxmlReport<W: Write> {
    out: W,
    hashes: HashChoice,
}

impl<W: Write> DfxmlReport<W> {
    /// Writes the document head.
    pub fn new(mut out: W, info: &RunInfo) -> std::io::Result<Self> {
        let mut env = String::new();
        let host = host_facts();
        for (name, value) in [
            ("os_sysname", &host.sysname),
            ("os_release", &host.release),
            ("os_version", &host.version),
            ("host", &host.nodename),
            ("arch", &host.machine),
        ] {
            if !value.is_empty() {
                env.push_str(&format!("      <{name}>{}</{name}>\n", escape(value)));
            }
        }
        env.push_str(&format!(
            "      <command_line>{}</command_line>\n",
            escape(&info.command_line)
        ));
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        env.push_str(&format!("      <uid>{uid}</uid>\n"));
        env.push_str(&format!(
            "      <start_time>{}</start_time>\n",
            escape(&info.start_time)
        ));
        write!(
            out,
            "<?xml version='1.0' encoding='UTF-8'?>\n\
<dfxml xmlns='{XMLNS_DFXML}'\n  \
xmlns:dc='http://purl.org/dc/elements/1.1/'\n  \
xmlns:xsi='http://www.w3.org/2001/XMLSchema-instance'\n  \
xmlns:gc='{XMLNS_GC}'\n  version='1.2.0'>\n  \
<metadata>\n    <dc:type>Carve Report</dc:type>\n  </metadata>\n  \
<creator>\n    <program>gpucarve</program>\n    <version>{}</version>\n    \
<execution_environment>\n{env}    </execution_environment>\n  </creator>\n  \
<source>\n    <image_filename>{}</image_filename>\n  </source>\n  \
<diskimageobject>\n    <filesize>{}</filesize>\n    <sector_size>{}</sector_size>\n  </diskimageobject>\n",
            escape(&info.version),
            escape(&info.image),
            info.image_len,
            info.sector_size
        )?;
        Ok(DfxmlReport {
            out,
            hashes: info.hashes,
        })
    }

    /// The volumes found in the image (before any file).
    pub fn volumes(&mut self, vols: &[VolumeHead]) -> std::io::Result<()> {
        for v in vols {
            let len = v.end.saturating_sub(v.start);
            writeln!(
                self.out,
                "  <volume offset='{0}'>\n    <partition_offset>{0}</partition_offset>\n    \
<block_size>{1}</block_size>\n    <ftype_str>{2}</ftype_str>\n    \
<block_count>{3}</block_count>\n    <gc:length>{len}</gc:length>\n  </volume>",
                v.start,
                v.cluster,
                escape(&v.fs),
                len / v.cluster.max(1)
            )?;
        }
        Ok(())
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

    /// Closes the document: the process's resource usage with `clocktime`
    /// (seconds) and, when the run stopped early, why.
    pub fn finish(mut self, clocktime: f64, error: Option<&str>) -> std::io::Result<W> {
        if let Some(ru) = rusage() {
            write!(
                self.out,
                "  <rusage>\n    <utime>{:.6}</utime>\n    <stime>{:.6}</stime>\n    \
<maxrss>{}</maxrss>\n    <minflt>{}</minflt>\n    <majflt>{}</majflt>\n    \
<nswap>{}</nswap>\n    <inblock>{}</inblock>\n    <oublock>{}</oublock>\n    \
<clocktime>{clocktime:.3}</clocktime>\n  </rusage>\n",
                ru.utime,
                ru.stime,
                ru.maxrss,
                ru.minflt,
                ru.majflt,
                ru.nswap,
                ru.inblock,
                ru.oublock
            )?;
        }
        if let Some(e) = error {
            writeln!(self.out, "  <gc:incomplete>{}</gc:incomplete>", escape(e))?;
        }
        writeln!(self.out, "</dfxml>")?;
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
            "    <id>{}</id>\n    <filesize>{}</filesize>",
            f.id, f.length
        )?;
        use crate::carve::geometry::alloc::Alloc;
        match f.alloc {
            Some(Alloc::Allocated) => writeln!(o, "    <alloc>1</alloc>")?,
            Some(Alloc::Unallocated) => writeln!(o, "    <alloc>0</alloc>")?,
            _ => {}
        }
        if let Some(n) = &f.original_name {
            times(o, n)?;
        }
        writeln!(o, "    <byte_runs>")?;
        for r in &f.byte_runs {
            writeln!(
                o,
                "      <byte_run file_offset='{}' img_offset='{}' len='{}'/>",
                r.file_offset, r.img_offset, r.len
            )?;
        }
        writeln!(o, "    </byte_runs>")?;
        let digests = f.digests();
        for alg in self.hashes.iter() {
            if let Some(h) = digests.get(alg) {
                writeln!(
                    o,
                    "    <hashdigest type='{}'>{}</hashdigest>",
                    alg.name(),
                    escape(h)
                )?;
            }
        }
        writeln!(
            o,
            "    <gc:type>{}</gc:type>\n    <gc:family>{}</gc:family>\n    <gc:status>{}</gc:status>",
            escape(&f.file_type),
            escape(&f.family),
            escape(&f.status)
        )?;
        if let Some(p) = f.parent {
            writeln!(o, "    <gc:parent>{p}</gc:parent>")?;
        }
        if let Some(v) = &f.validator {
            writeln!(o, "    <gc:validator>{}</gc:validator>", escape(v))?;
        }
        for n in &f.notes {
            writeln!(o, "    <gc:note>{}</gc:note>", escape(n))?;
        }
        if f.alloc == Some(Alloc::Partly) {
            writeln!(o, "    <gc:alloc>partly</gc:alloc>")?;
        }
        if let Some(n) = &f.original_name {
            writeln!(
                o,
                "    <gc:original_name path='{}' deleted='{}' size='{}' volume='{}'/>",
                escape(&n.path),
                u8::from(n.deleted),
                n.size,
                n.volume
            )?;
        }
        writeln!(o, "  </fileobject>")
    }
}

/// The original entry's times: DFXML's `mtime`, `atime`, `crtime` (in the
/// schema's order; `prec` in seconds: FAT keeps 2 s, a day, 10 ms; ext2/3/4
/// times, UTC with `Z`, are whole seconds as read).
fn times(
    o: &mut impl Write,
    n: &crate::carve::geometry::names::OriginalName,
) -> std::io::Result<()> {
    let utc = [&n.modified, &n.accessed, &n.created]
        .iter()
        .any(|t| t.as_deref().is_some_and(|t| t.ends_with('Z')));
    if utc {
        for (tag, t) in [
            ("mtime", &n.modified),
            ("atime", &n.accessed),
            ("crtime", &n.created),
        ] {
            if let Some(t) = t {
                writeln!(o, "    <{tag}>{}</{tag}>", escape(t))?;
            }
        }
        return Ok(());
    }
    if let Some(t) = &n.modified {
        writeln!(o, "    <mtime prec='2'>{}</mtime>", escape(t))?;
    }
    if let Some(d) = &n.accessed {
        writeln!(o, "    <atime prec='86400'>{}T00:00:00</atime>", escape(d))?;
    }
    if let Some(t) = &n.created {
        writeln!(o, "    <crtime>{}</crtime>", escape(t))?;
    }
    Ok(())
}

/// `uname(2)`; empty strings where it fails.
#[derive(Default)]
struct HostFacts {
    sysname: String,
    release: String,
    version: String,
    nodename: String,
    machine: String,
}

fn host_facts() -> HostFacts {
    // SAFETY: utsname is plain old data; uname fills it or fails.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return HostFacts::default();
    }
    let field = |f: &[libc::c_char]| -> String {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            // (`c_char` is `i8` on x86-64 and `u8` on AArch64.)
            .map(|c| c.to_ne_bytes()[0])
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    HostFacts {
        sysname: field(&u.sysname),
        release: field(&u.release),
        version: field(&u.version),
        nodename: field(&u.nodename),
        machine: field(&u.machine),
    }
}

/// `getrusage(RUSAGE_SELF)`, as DFXML's `rusage` records it.
struct Rusage {
    utime: f64,
    stime: f64,
    maxrss: i64,
    minflt: i64,
    majflt: i64,
    nswap: i64,
    inblock: i64,
    oublock: i64,
}

fn rusage() -> Option<Rusage> {
    // SAFETY: rusage is plain old data; getrusage fills it or fails.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(Rusage {
        utime: secs(ru.ru_utime),
        stime: secs(ru.ru_stime),
        maxrss: ru.ru_maxrss as i64,
        minflt: ru.ru_minflt as i64,
        majflt: ru.ru_majflt as i64,
        nswap: ru.ru_nswap as i64,
        inblock: ru.ru_inblock as i64,
        oublock: ru.ru_oublock as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carve::ByteRun;

    fn info() -> RunInfo {
        RunInfo {
            image: "/cases/d\u{1}isk & <x>.dd".into(),
            image_len: 4096,
            command_line: "gpucarve carve 'd.dd'".into(),
            version: "0.1.0".into(),
            start_time: "2026-01-02T03:04:05Z".into(),
            sector_size: 512,
            hashes: "sha1,sha256".parse().unwrap(),
        }
    }

    #[test]
    fn volumes_and_allocation() {
        use crate::carve::geometry::{Volume, alloc::Alloc};
        let mut r = DfxmlReport::new(Vec::new(), &info()).unwrap();
        let vol = Volume {
            start: 1 << 20,
            end: 3 << 20,
            cluster: 4096,
            phase: 0,
            fs: "ext4",
            fat: None,
            inode_files: None,
            fat_files: None,
        };
        r.volumes(&[VolumeHead::from(&vol)]).unwrap();
        for (id, alloc) in [
            (1, Some(Alloc::Allocated)),
            (2, Some(Alloc::Partly)),
            (3, None),
        ] {
            r.file(&CarvedFile {
                id,
                file_type: "png".into(),
                family: "png".into(),
                status: "complete".into(),
                alloc,
                original_name: (id == 3).then(|| crate::carve::geometry::names::OriginalName {
                    path: "/DCIM/A&B.JPG".into(),
                    deleted: true,
                    size: 99,
                    modified: Some("2021-03-04T05:06:08".into()),
                    created: Some("2021-03-04T05:06:07.50".into()),
                    accessed: Some("2021-03-05".into()),
                    volume: 1 << 20,
                }),
                offset: 512,
                length: 100,
                byte_runs: vec![],
                sha256: None,
                md5: None,
                sha1: None,
                parent: None,
                path: None,
                validator: None,
                notes: vec![],
            })
            .unwrap();
        }
        let text = String::from_utf8(r.finish(1.5, None).unwrap()).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let root = doc.root_element();
        let v = root.children().find(|n| n.has_tag_name("volume")).unwrap();
        let kids: Vec<(&str, &str)> = v
            .children()
            .filter(|n| n.is_element())
            .map(|n| (n.tag_name().name(), n.text().unwrap_or("")))
            .collect();
        assert_eq!(
            kids,
            [
                ("partition_offset", "1048576"),
                ("block_size", "4096"),
                ("ftype_str", "ext4"),
                ("block_count", "512"),
                ("length", "2097152")
            ]
        );
        let files: Vec<Vec<&str>> = root
            .children()
            .filter(|n| n.has_tag_name("fileobject"))
            .map(|f| {
                f.children()
                    .filter(|n| n.is_element())
                    .map(|n| n.tag_name().name())
                    .collect()
            })
            .collect();
        assert_eq!(files[0][..4], ["id", "filesize", "alloc", "byte_runs"]);
        // `partly`: gc:alloc at the end, no DFXML alloc.
        assert_eq!(files[1].iter().filter(|n| **n == "alloc").count(), 1);
        assert_eq!(files[1].last(), Some(&"alloc"));
        assert_eq!(text.matches("<alloc>").count(), 1);
        assert!(!files[2].contains(&"alloc"));
        // The original name: DFXML times before byte_runs, gc:original_name last.
        assert_eq!(
            files[2],
            [
                "id",
                "filesize",
                "mtime",
                "atime",
                "crtime",
                "byte_runs",
                "type",
                "family",
                "status",
                "original_name"
            ]
        );
        assert!(text.contains("path='/DCIM/A&amp;B.JPG' deleted='1' size='99'"));
        assert!(text.contains("<atime prec='86400'>2021-03-05T00:00:00</atime>"));
        assert!(text.contains("<alloc>1</alloc>") && text.contains("<gc:alloc>partly</gc:alloc>"));
    }

    #[test]
    fn document_order_namespaces_and_escaping() {
        let mut r = DfxmlReport::new(Vec::new(), &info()).unwrap();
        r.file(&CarvedFile {
            id: 7,
            file_type: "png".into(),
            family: "png".into(),
            status: "complete".into(),
            alloc: None,
            original_name: None,
            offset: 512,
            length: 100,
            byte_runs: vec![ByteRun {
                file_offset: 0,
                img_offset: 512,
                len: 100,
            }],
            sha256: Some("s256".into()),
            md5: Some("m5".into()), // not chosen: not written
            sha1: Some("s1".into()),
            parent: Some(3),
            path: Some("png/512.png".into()),
            validator: Some("png".into()),
            notes: vec!["a < b".into()],
        })
        .unwrap();
        let text = String::from_utf8(r.finish(1.5, Some("disk full")).unwrap()).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let root = doc.root_element();
        assert_eq!(root.tag_name().namespace(), Some(XMLNS_DFXML));
        let top: Vec<&str> = root
            .children()
            .filter(|n| n.is_element())
            .map(|n| n.tag_name().name())
            .collect();
        assert_eq!(
            top,
            [
                "metadata",
                "creator",
                "source",
                "diskimageobject",
                "fileobject",
                "rusage",
                "incomplete"
            ]
        );
        let gc = |n: roxmltree::Node, name: &str| {
            n.children()
                .find(|c| c.has_tag_name((XMLNS_GC, name)))
                .and_then(|c| c.text())
                .map(str::to_string)
        };
        assert_eq!(gc(root, "incomplete").as_deref(), Some("disk full"));
        let image = root
            .descendants()
            .find(|n| n.has_tag_name("image_filename"))
            .and_then(|n| n.text())
            .unwrap();
        assert_eq!(image, "/cases/d\u{FFFD}isk & <x>.dd");
        let f = root
            .children()
            .find(|n| n.has_tag_name("fileobject"))
            .unwrap();
        let hashes: Vec<(&str, &str)> = f
            .children()
            .filter(|c| c.has_tag_name((XMLNS_DFXML, "hashdigest")))
            .map(|c| (c.attribute("type").unwrap(), c.text().unwrap()))
            .collect();
        assert_eq!(hashes, [("sha256", "s256"), ("sha1", "s1")]);
        assert_eq!(gc(f, "parent").as_deref(), Some("3"));
        assert_eq!(gc(f, "note").as_deref(), Some("a < b"));
        let run = f
            .descendants()
            .find(|n| n.has_tag_name("byte_run"))
            .unwrap();
        assert_eq!(run.attribute("file_offset"), Some("0"));
        assert_eq!(run.attribute("img_offset"), Some("512"));
        assert_eq!(run.attribute("len"), Some("100"));
        let rusage: Vec<&str> = root
            .children()
            .find(|n| n.has_tag_name("rusage"))
            .unwrap()
            .children()
            .filter(|n| n.is_element())
            .map(|n| n.tag_name().name())
            .collect();
        assert_eq!(
            rusage,
            [
                "utime",
                "stime",
                "maxrss",
                "minflt",
                "majflt",
                "nswap",
                "inblock",
                "oublock",
                "clocktime"
            ]
        );
    }
}
