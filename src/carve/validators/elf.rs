//! ELF executables, shared objects, relocatable objects and core files.
//!
//! Structure (System V ABI gABI 4.1, "ELF Header", "Sections", "Program
//! Header"): `7F 'E' 'L' 'F'`, class (1 = 32-bit, 2 = 64-bit), data (1 = LE,
//! 2 = BE), version 1; then `e_type`, `e_machine`, `e_version`, entry,
//! `e_phoff`, `e_shoff`, flags, `e_ehsize`, `e_phentsize`, `e_phnum`,
//! `e_shentsize`, `e_shnum`, `e_shstrndx`. With more than 0xFF00 sections
//! `e_shnum` is 0 and section 0's `sh_size` holds the count (and `e_phnum`
//! 0xFFFF means section 0's `sh_info` holds the segment count).
//!
//! There is no end marker: the extent is the maximum of the ELF header, the
//! program header table end, the section header table end, the end of every
//! section with file contents (not `SHT_NOBITS`/`SHT_NULL`) and the end of
//! every segment's file image (`p_offset + p_filesz`). At most [`MAX_TABLE`]
//! entries of each table are read.
//!
//! Checked: identification bytes, `e_version` 1, a known `e_type`, `e_ehsize`
//! and table entry sizes matching the class, at least one table present, and
//! no offset + size overflowing. Then the contents the tables point at, to
//! catch a fragmented file whose later parts are someone else's data:
//! section 0 null (or, in a table without extended numbering, a real
//! section named like the others: hand-made files such as pyelftools'
//! `trailing_null_dies.elf` put their first section there, and readers take
//! it) and at most a few other null sections, the section-name
//! string table a `SHT_STRTAB` whose names are printable and NUL-terminated,
//! the dynamic section made of known tags up to `DT_NULL`, the interpreter
//! an absolute path.
//!
//! * `None`: any header check fails, or an offset + size overflows.
//! * `Complete`: the extent lies inside the window and the content checks
//!   pass; length = extent.
//! * `Partial`: the extent (or a table) runs past the window (length =
//!   window), or a content check fails (length = offset of that structure).
//!
//! Bytes after the extent that nothing refers to (e.g. appended payloads)
//! are not included.

use super::Verdict;
use super::read::{Endian, Src};

/// Program/section header entries read at most.
pub const MAX_TABLE: u64 = 65_536;

pub fn validate(src: Src) -> Option<Verdict> {
    let id = src.bytes::<16>(0)?;
    if &id[..4] != b"\x7FELF" || id[6] != 1 {
        return None;
    }
    let wide = match id[4] {
        1 => false,
        2 => true,
        _ => return None,
    };
    let e = match id[5] {
        1 => Endian::Little,
        2 => Endian::Big,
        _ => return None,
    };
    if id[9..16].iter().any(|&b| b != 0) {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    let hsize: u64 = if wide { 64 } else { 52 };
    if !src.has(0, hsize) {
        return cut();
    }
    let u16_ = |o: u64| e.u16(&src, o).unwrap_or(0);
    let u32_ = |o: u64| e.u32(&src, o).unwrap_or(0);
    let word = |o: u64| {
        if wide {
            e.u64(&src, o).unwrap_or(0)
        } else {
            u64::from(e.u32(&src, o).unwrap_or(0))
        }
    };
    let e_type = u16_(16);
    if !(matches!(e_type, 1..=4) || e_type >= 0xFE00) || u32_(20) != 1 {
        return None;
    }
    let (phoff, shoff, rest) = if wide {
        (word(32), word(40), 48)
    } else {
        (word(28), word(32), 36)
    };
    let ehsize = u64::from(u16_(rest + 4));
    let phentsize = u64::from(u16_(rest + 6));
    let mut phnum = u64::from(u16_(rest + 8));
    let shentsize = u64::from(u16_(rest + 10));
    let mut shnum = u64::from(u16_(rest + 12));
    let (ph_want, sh_want) = if wide { (56, 64) } else { (32, 40) };
    if ehsize != hsize
        || (phnum > 0 && phentsize != ph_want)
        || (shoff != 0 && shentsize != sh_want)
    {
        return None;
    }
    if phoff == 0 {
        phnum = 0;
    }
    // Extended numbering through section 0.
    let mut extended = false;
    if shoff != 0 && (shnum == 0 || phnum == 0xFFFF) {
        extended = true;
        let s0 = shoff;
        if shnum == 0 {
            shnum = word(s0.saturating_add(if wide { 32 } else { 20 }));
        }
        if phnum == 0xFFFF {
            phnum = u64::from(u32_(s0.saturating_add(if wide { 44 } else { 28 })));
        }
    }
    if phnum == 0 && shnum == 0 {
        return None;
    }
    let mut extent = hsize;
    // Folds one end into the extent; false when it overflowed.
    let mut add = |x: Option<u64>| -> bool {
        match x {
            Some(v) => {
                extent = extent.max(v);
                true
            }
            None => false,
        }
    };
    let ph_end = phoff.checked_add(phnum.checked_mul(phentsize)?);
    let sh_end = shoff.checked_add(shnum.checked_mul(shentsize)?);
    if !add(ph_end) || !add(sh_end) {
        return None;
    }
    let mut truncated_tables = false;
    for i in 0..phnum.min(MAX_TABLE) {
        let at = phoff + i * phentsize;
        if !src.has(at, phentsize) {
            truncated_tables = true;
            break;
        }
        let (off, filesz) = if wide {
            (word(at + 8), word(at + 32))
        } else {
            (word(at + 4), word(at + 16))
        };
        if filesz > 0 && !add(off.checked_add(filesz)) {
            return None;
        }
    }
    for i in 0..shnum.min(MAX_TABLE) {
        let at = shoff + i * shentsize;
        if !src.has(at, shentsize) {
            truncated_tables = true;
            break;
        }
        let ty = u32_(at + 4);
        let (off, size) = if wide {
            (word(at + 24), word(at + 32))
        } else {
            (word(at + 16), word(at + 20))
        };
        if ty != 0 && ty != 8 && size > 0 && !add(off.checked_add(size)) {
            return None;
        }
    }
    if extent > src.len() || truncated_tables {
        return cut();
    }
    let mut shstrndx = u64::from(u16_(rest + 14));
    if shstrndx == 0xFFFF && shoff != 0 {
        extended = true;
        shstrndx = u64::from(u32_(shoff.saturating_add(if wide { 40 } else { 24 })));
    }
    let t = Tables {
        e,
        wide,
        phoff,
        phnum,
        phentsize,
        shoff,
        shnum,
        shentsize,
        shstrndx,
        extended,
    };
    if let Err((at, why)) = t.check(&src) {
        return Some(Verdict::partial(at.min(extent), why));
    }
    let kind = match e_type {
        1 => "relocatable",
        2 => "executable",
        3 => "shared object / PIE",
        4 => "core",
        _ => "OS/processor specific",
    };
    Some(Verdict::complete(extent).with_note(format!("{}-bit {kind}", if wide { 64 } else { 32 })))
}

/// The header tables, for the content checks.
struct Tables {
    e: Endian,
    wide: bool,
    phoff: u64,
    phnum: u64,
    phentsize: u64,
    shoff: u64,
    shnum: u64,
    shentsize: u64,
    shstrndx: u64,
    /// Counts or the name-table index taken from section 0 (which must
    /// then be the null section).
    extended: bool,
}

/// Sections whose names are checked at most.
const MAX_NAMES: u64 = 4096;

impl Tables {
    fn word(&self, s: &Src, o: u64) -> u64 {
        if self.wide {
            self.e.u64(s, o).unwrap_or(0)
        } else {
            u64::from(self.e.u32(s, o).unwrap_or(0))
        }
    }

    /// Content checks on the structures the tables point at: the section
    /// header table (entry 0 null, or a named section when no count comes
    /// from it; few null entries; the section-name string table a
    /// `SHT_STRTAB` whose names are printable and NUL-terminated),
    /// the dynamic section (known tags up to `DT_NULL`) and the interpreter
    /// path. On failure: the offset of the structure that failed.
    fn check(&self, s: &Src) -> Result<(), (u64, &'static str)> {
        let (e, w) = (self.e, self.wide);
        // Program headers: PT_DYNAMIC and PT_INTERP.
        for i in 0..self.phnum.min(MAX_TABLE) {
            let at = self.phoff + i * self.phentsize;
            let ty = e.u32(s, at).unwrap_or(0);
            let (off, filesz) = if w {
                (self.word(s, at + 8), self.word(s, at + 32))
            } else {
                (self.word(s, at + 4), self.word(s, at + 16))
            };
            match ty {
                2 => {
                    let ent = if w { 16 } else { 8 };
                    let mut ended = false;
                    for k in 0..(filesz / ent).min(65_536) {
                        let tag = self.word(s, off + k * ent);
                        let known = tag <= 38
                            || (0x6000_000D..=0x6FFF_FFFF).contains(&tag)
                            || (0x7000_0000..=0x7FFF_FFFF).contains(&tag);
                        if !known {
                            return Err((off, "dynamic section holds unknown tags"));
                        }
                        if tag == 0 {
                            ended = true;
                            break;
                        }
                    }
                    if !ended && filesz >= ent {
                        return Err((off, "dynamic section without DT_NULL"));
                    }
                }
                3 => {
                    let mut b = [0u8; 256];
                    let n = (filesz as usize).min(b.len());
                    if n > 0 && s.read_exact(off, &mut b[..n]) {
                        let path = &b[..n];
                        let nul = path.iter().position(|&c| c == 0);
                        let ok = path.first() == Some(&b'/')
                            && nul.is_some_and(|z| {
                                path[..z].iter().all(|c| (0x21..0x7F).contains(c))
                            });
                        if !ok {
                            return Err((off, "interpreter path is not a path"));
                        }
                    }
                }
                _ => {}
            }
        }
        if self.shoff == 0 || self.shnum == 0 {
            return Ok(());
        }
        let sh = |i: u64| self.shoff + i * self.shentsize;
        let ty = |i: u64| e.u32(s, sh(i) + 4).unwrap_or(0);
        // Section 0 not null: only as a real section, named like the others
        // (checked below), in a table that takes no count from it.
        let first = u64::from(ty(0) == 0);
        if first == 0 && (self.extended || self.shstrndx == 0) {
            return Err((self.shoff, "section 0 is not null"));
        }
        let n = self.shnum.min(MAX_TABLE);
        let nulls = (1..n).filter(|&i| ty(i) == 0).count() as u64;
        if n > 1 && nulls * 2 >= n - 1 {
            return Err((self.shoff, "section header table mostly empty"));
        }
        if self.shstrndx == 0 {
            return Ok(());
        }
        if self.shstrndx >= self.shnum || ty(self.shstrndx) != 3 {
            return Err((self.shoff, "section-name table is not a string table"));
        }
        let at = sh(self.shstrndx);
        let (str_off, str_size) = if w {
            (self.word(s, at + 24), self.word(s, at + 32))
        } else {
            (self.word(s, at + 16), self.word(s, at + 20))
        };
        let mut name = [0u8; 64];
        for i in first..n.min(MAX_NAMES) {
            let no = u64::from(e.u32(s, sh(i)).unwrap_or(0));
            if no >= str_size {
                return Err((self.shoff, "section name outside the string table"));
            }
            let len = ((str_size - no) as usize).min(name.len());
            if !s.read_exact(str_off + no, &mut name[..len]) {
                return Err((str_off, "section-name table unreadable"));
            }
            let ok = name[..len]
                .iter()
                .position(|&c| c == 0)
                .is_some_and(|z| name[..z].iter().all(|c| (0x21..0x7F).contains(c)));
            if !ok {
                return Err((str_off, "section names are not names"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample64()
    }

    /// A small 64-bit LE executable: header, 1 program header, data, 3 section
    /// headers (null, .text, .bss) at the end.
    fn sample64() -> Vec<u8> {
        let mut v = vec![0u8; 64];
        v[..4].copy_from_slice(b"\x7FELF");
        v[4] = 2;
        v[5] = 1;
        v[6] = 1;
        v[16..18].copy_from_slice(&2u16.to_le_bytes());
        v[18..20].copy_from_slice(&62u16.to_le_bytes());
        v[20..24].copy_from_slice(&1u32.to_le_bytes());
        v[32..40].copy_from_slice(&64u64.to_le_bytes()); // phoff
        v[52..54].copy_from_slice(&64u16.to_le_bytes());
        v[54..56].copy_from_slice(&56u16.to_le_bytes());
        v[56..58].copy_from_slice(&1u16.to_le_bytes());
        v[58..60].copy_from_slice(&64u16.to_le_bytes());
        v[60..62].copy_from_slice(&3u16.to_le_bytes());
        // Program header: PT_LOAD offset 0, filesz 200.
        let mut ph = vec![0u8; 56];
        ph[..4].copy_from_slice(&1u32.to_le_bytes());
        ph[32..40].copy_from_slice(&200u64.to_le_bytes());
        v.extend(ph);
        v.resize(300, 0x90); // .text at 120..300
        let shoff = v.len() as u64;
        v[40..48].copy_from_slice(&shoff.to_le_bytes());
        v.extend(vec![0u8; 64]); // null section
        let mut text = vec![0u8; 64];
        text[4..8].copy_from_slice(&1u32.to_le_bytes());
        text[24..32].copy_from_slice(&120u64.to_le_bytes());
        text[32..40].copy_from_slice(&180u64.to_le_bytes());
        v.extend(text);
        let mut bss = vec![0u8; 64];
        bss[4..8].copy_from_slice(&8u32.to_le_bytes());
        bss[24..32].copy_from_slice(&300u64.to_le_bytes());
        bss[32..40].copy_from_slice(&1_000_000u64.to_le_bytes());
        v.extend(bss);
        v
    }

    /// A 32-bit big-endian object with the section table before a section.
    fn sample32be() -> Vec<u8> {
        let mut v = vec![0u8; 52];
        v[..4].copy_from_slice(b"\x7FELF");
        v[4] = 1;
        v[5] = 2;
        v[6] = 1;
        v[16..18].copy_from_slice(&1u16.to_be_bytes());
        v[20..24].copy_from_slice(&1u32.to_be_bytes());
        v[32..36].copy_from_slice(&52u32.to_be_bytes()); // shoff
        v[40..42].copy_from_slice(&52u16.to_be_bytes());
        v[46..48].copy_from_slice(&40u16.to_be_bytes());
        v[48..50].copy_from_slice(&2u16.to_be_bytes());
        v.extend(vec![0u8; 40]);
        let mut s = vec![0u8; 40];
        s[4..8].copy_from_slice(&1u32.to_be_bytes());
        s[16..20].copy_from_slice(&132u32.to_be_bytes());
        s[20..24].copy_from_slice(&50u32.to_be_bytes());
        v.extend(s);
        v.extend(vec![0xAA; 50]);
        v
    }

    #[test]
    fn valid_elves() {
        assert_complete("elf", &sample64());
        assert_complete("elf", &sample32be());
        assert_prefixes("elf", &sample64());
        assert_prefixes("elf", &sample32be());
    }

    #[test]
    fn foreign_tables_are_caught() {
        // The section header table zeroed (a fragmented file): Partial at it.
        let mut f = sample64();
        let shoff = 300;
        f[shoff + 64..].fill(0);
        let v = run("elf", &f).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Partial, shoff as u64),
            "{:?}",
            v.notes
        );
    }

    /// A 64-bit relocatable file laid out like pyelftools'
    /// `trailing_null_dies.elf`: no program headers, the section table at 64
    /// whose entry 0 is a real section (`.debug_info`, the last bytes of the
    /// file) instead of the null one, then the name table and the sections.
    fn first_section_not_null() -> Vec<u8> {
        let mut v = vec![0u8; 64];
        v[..4].copy_from_slice(b"\x7FELF");
        (v[4], v[5], v[6]) = (2, 1, 1);
        v[16..18].copy_from_slice(&1u16.to_le_bytes());
        v[20..24].copy_from_slice(&1u32.to_le_bytes());
        v[40..48].copy_from_slice(&64u64.to_le_bytes()); // shoff
        v[52..54].copy_from_slice(&64u16.to_le_bytes());
        v[58..60].copy_from_slice(&64u16.to_le_bytes());
        v[60..62].copy_from_slice(&3u16.to_le_bytes()); // shnum
        v[62..64].copy_from_slice(&2u16.to_le_bytes()); // shstrndx
        let names = b"\0.debug_info\0.debug_abbrev\0.shstrtab\0";
        let strtab_at = 64 + 3 * 64;
        let abbrev_at = strtab_at + names.len();
        let info_at = abbrev_at + 15;
        // (name, type, offset, size) of sections 0, 1, 2.
        let secs = [
            (1u32, 1u32, info_at, 23usize),
            (13, 1, abbrev_at, 15),
            (27, 3, strtab_at, names.len()),
        ];
        for (name, ty, off, size) in secs {
            let mut sh = vec![0u8; 64];
            sh[..4].copy_from_slice(&name.to_le_bytes());
            sh[4..8].copy_from_slice(&ty.to_le_bytes());
            sh[24..32].copy_from_slice(&(off as u64).to_le_bytes());
            sh[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            v.extend(sh);
        }
        v.extend_from_slice(names);
        v.extend(vec![0x11; 15]);
        v.extend(vec![0x22; 23]);
        v
    }

    #[test]
    fn first_section_may_be_a_real_one() {
        let f = first_section_not_null();
        assert_complete("elf", &f);
        // Its end is the end of section 0: not a byte less.
        let v = run("elf", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
        // Named outside the name table, or with no name table: not a section.
        let mut g = f.clone();
        g[64..68].copy_from_slice(&1000u32.to_le_bytes());
        let v = run("elf", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 64), "{:?}", v.notes);
        let mut g = f.clone();
        g[62..64].fill(0);
        let v = run("elf", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 64), "{:?}", v.notes);
        // A count taken from section 0 (e_shnum 0) needs the null section.
        let mut g = f;
        g[60..62].fill(0);
        assert!(run("elf", &g).is_none_or(|v| v.status != Status::Complete));
    }

    #[test]
    fn hostile() {
        let mut f = sample64();
        f[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(run("elf", &f).is_none());
        let mut f = sample64();
        f[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let v = run("elf", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        let mut f = sample64();
        f[52] = 50;
        assert!(run("elf", &f).is_none());
        let v = run_at("elf", &sample64(), 0, Limits { max_len: 100 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 100));
    }

    #[test]
    fn real_elves() {
        let files = real_files(&["/usr/bin", "/usr/lib/x86_64-linux-gnu"], &[""], 60)
            .into_iter()
            .filter(|p| std::fs::read(p).is_ok_and(|d| d.starts_with(b"\x7FELF")))
            .take(30)
            .collect::<Vec<_>>();
        check_real("elf", &files);
    }
}
