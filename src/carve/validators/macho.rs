//! Mach-O executables, dylibs, bundles and object files: thin (32- and
//! 64-bit, either byte order) and universal ("fat") files.
//!
//! Structure (Apple `mach-o/loader.h`, `mach-o/fat.h`): a thin file opens
//! with `mach_header` (magic `0xfeedface`/`0xfeedfacf`, `cputype`,
//! `cpusubtype`, `filetype`, `ncmds`, `sizeofcmds`, `flags`, and a reserved
//! word in the 64-bit header), then `ncmds` load commands of `sizeofcmds`
//! bytes, each `cmd`, `cmdsize`. A fat file opens with `0xcafebabe`
//! (`0xcafebabf` for 64-bit offsets), big-endian, `nfat_arch`, then one
//! `fat_arch` per slice (`cputype`, `cpusubtype`, `offset`, `size`, `align`),
//! each slice a thin Mach-O (or a static archive).
//!
//! There is no end marker: a thin file ends at the furthest byte a load
//! command points at: segments (`fileoff + filesize`), sections and their
//! relocations, the symbol and string tables, the dynamic symbol table's
//! tables, the `LC_DYLD_INFO` opcode streams, every `linkedit_data_command`
//! (code signature, function starts, chained fixups, exports trie...),
//! two-level hints and `LC_NOTE` data. A fat file ends at its last slice's
//! `offset + size`.
//!
//! Checked: the magic, a known CPU type and file type, load commands that
//! fill `sizeofcmds` exactly with sizes that are multiples of 4 and at least
//! 8, segment and section tables that fit their command, no offset + size
//! overflowing; for a fat file, 1 to [`MAX_ARCHS`] slices (a Java class file
//! shares the magic, with its version, 45 or more, where `nfat_arch` is),
//! each aligned as its `align` says, after the header, of a CPU type the
//! slice's own header repeats, and each slice valid.
//!
//! * `None`: a header check fails.
//! * `Complete`: the extent lies inside the window (and, fat, every slice is
//!   Complete within its size); length = extent.
//! * `Partial`: the extent runs past the window (length = window), or a
//!   slice is not Complete (length = end of the slice table).
//!
//! Work: at most [`MAX_CMDS`] commands and the bytes of `sizeofcmds`, read
//! once; a fat file's slices are each validated once.

use super::Verdict;
use super::read::{Endian, Src};

/// Load commands read at most.
pub const MAX_CMDS: u32 = 65_536;
/// Slices of a fat file at most (real ones have 1 to 4).
pub const MAX_ARCHS: u32 = 32;
/// `sizeofcmds` at most.
const MAX_SIZEOFCMDS: u32 = 16 << 20;

pub fn validate(src: Src) -> Option<Verdict> {
    let magic = src.u32be(0)?;
    match magic {
        0xCAFE_BABE | 0xCAFE_BABF => fat(src, magic == 0xCAFE_BABF),
        _ => thin(src),
    }
}

/// A CPU type `loader.h` names (the low 24 bits; the 64-bit ABI flags
/// above them).
fn known_cpu(cpu: u32) -> bool {
    let abi = cpu & 0xFF00_0000;
    (abi == 0 || abi == 0x0100_0000 || abi == 0x0200_0000)
        && matches!(
            cpu & 0x00FF_FFFF,
            1 | 6 | 7 | 10 | 11 | 12 | 13 | 14 | 15 | 18
        )
}

/// The thin header at 0: (endian, 64-bit), or None.
fn thin_magic(src: &Src) -> Option<(Endian, bool)> {
    match src.u32le(0)? {
        0xFEED_FACE => Some((Endian::Little, false)),
        0xFEED_FACF => Some((Endian::Little, true)),
        0xCEFA_EDFE => Some((Endian::Big, false)),
        0xCFFA_EDFE => Some((Endian::Big, true)),
        _ => None,
    }
}

fn thin(src: Src) -> Option<Verdict> {
    let (e, wide) = thin_magic(&src)?;
    let hsize: u64 = if wide { 32 } else { 28 };
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    if !src.has(0, hsize) {
        return cut();
    }
    let u32_ = |o: u64| e.u32(&src, o).unwrap_or(0);
    let u64_ = |o: u64| e.u64(&src, o).unwrap_or(0);
    let cpu = u32_(4);
    let filetype = u32_(12);
    let ncmds = u32_(16);
    let sizeofcmds = u32_(20);
    if !known_cpu(cpu)
        || !(1..=12).contains(&filetype)
        || ncmds == 0
        || ncmds > MAX_CMDS
        || sizeofcmds > MAX_SIZEOFCMDS
        || u64::from(sizeofcmds) < u64::from(ncmds) * 8
    {
        return None;
    }
    let cmds_end = hsize + u64::from(sizeofcmds);
    let mut extent = cmds_end;
    let mut add = |off: u64, len: u64| -> bool {
        match off.checked_add(len) {
            Some(end) => {
                if len > 0 {
                    extent = extent.max(end);
                }
                true
            }
            None => false,
        }
    };
    let mut at = hsize;
    for _ in 0..ncmds {
        if !src.has(at, 8) {
            return cut();
        }
        let cmd = u32_(at);
        let size = u64::from(u32_(at + 4));
        if size < 8 || size % 4 != 0 || at + size > cmds_end {
            return None;
        }
        if !src.has(at, size) {
            return cut();
        }
        let w32 = |o: u64| u64::from(u32_(at + o));
        let ok = match cmd & 0x7FFF_FFFF {
            // LC_SEGMENT, LC_SEGMENT_64
            0x1 | 0x19 => {
                let w = cmd == 0x19;
                let (hdr, sect) = if w { (72u64, 80u64) } else { (56, 68) };
                if size < hdr {
                    return None;
                }
                let (fileoff, filesize, nsects) = if w {
                    (u64_(at + 40), u64_(at + 48), w32(64))
                } else {
                    (w32(32), w32(36), w32(48))
                };
                if hdr + nsects * sect > size {
                    return None;
                }
                let mut ok = add(fileoff, filesize);
                for i in 0..nsects {
                    let s = at + hdr + i * sect;
                    let (ssize, soff, reloff, nreloc, flags) = if w {
                        (
                            u64_(s + 40),
                            u64::from(u32_(s + 48)),
                            u64::from(u32_(s + 56)),
                            u64::from(u32_(s + 60)),
                            u32_(s + 64),
                        )
                    } else {
                        (
                            u64::from(u32_(s + 36)),
                            u64::from(u32_(s + 40)),
                            u64::from(u32_(s + 48)),
                            u64::from(u32_(s + 52)),
                            u32_(s + 56),
                        )
                    };
                    // S_ZEROFILL, S_GB_ZEROFILL, S_THREAD_LOCAL_ZEROFILL
                    // occupy no file bytes.
                    if !matches!(flags & 0xFF, 0x1 | 0xC | 0x12) && soff != 0 {
                        ok &= add(soff, ssize);
                    }
                    if nreloc > 0 {
                        ok &= add(reloff, nreloc * 8);
                    }
                }
                ok
            }
            // LC_SYMTAB
            0x2 if size >= 24 => {
                let nl = if wide { 16 } else { 12 };
                add(w32(8), w32(12) * nl) && add(w32(16), w32(20))
            }
            // LC_SYMSEG (obsolete): offset, size
            0x3 if size >= 16 => add(w32(8), w32(12)),
            // LC_DYSYMTAB
            0xB if size >= 80 => {
                let modtab = if wide { 56 } else { 52 };
                add(w32(32), w32(36) * 8)
                    && add(w32(40), w32(44) * modtab)
                    && add(w32(48), w32(52) * 4)
                    && add(w32(56), w32(60) * 4)
                    && add(w32(64), w32(68) * 8)
                    && add(w32(72), w32(76) * 8)
            }
            // LC_TWOLEVEL_HINTS: offset, nhints (4 bytes each)
            0x16 if size >= 16 => add(w32(8), w32(12) * 4),
            // LC_DYLD_INFO(_ONLY): five (offset, size) pairs
            0x22 if size >= 48 => (0..5).all(|k| add(w32(8 + 8 * k), w32(12 + 8 * k))),
            // linkedit_data_command: code signature, segment split info,
            // function starts, data in code, code-signing DRs, linker
            // optimisation hints, exports trie, chained fixups, atom info,
            // function variants.
            0x1D | 0x1E | 0x26 | 0x29 | 0x2B | 0x2E | 0x33 | 0x34 | 0x36 | 0x37 if size >= 16 => {
                add(w32(8), w32(12))
            }
            // LC_NOTE: data_owner[16], offset u64, size u64
            0x31 if size >= 40 => add(u64_(at + 24), u64_(at + 32)),
            _ => true,
        };
        if !ok {
            return None;
        }
        at += size;
    }
    if at != cmds_end {
        return None;
    }
    if extent > src.len() {
        return cut();
    }
    let mut v = Verdict::complete(extent);
    v.subtype = Some(
        match filetype {
            1 => "o",
            6 => "dylib",
            8 => "bundle",
            _ => "macho",
        }
        .to_string(),
    );
    Some(v)
}

fn fat(src: Src, wide: bool) -> Option<Verdict> {
    let n = src.u32be(4)?;
    if n == 0 || n > MAX_ARCHS {
        return None;
    }
    let entry: u64 = if wide { 32 } else { 20 };
    let table_end = 8 + u64::from(n) * entry;
    if !src.has(0, table_end) {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let mut end = table_end;
    let mut slices = Vec::with_capacity(n as usize);
    for i in 0..u64::from(n) {
        let a = 8 + i * entry;
        let cpu = src.u32be(a)?;
        let (off, size, align) = if wide {
            (src.u64be(a + 8)?, src.u64be(a + 16)?, src.u32be(a + 24)?)
        } else {
            (
                u64::from(src.u32be(a + 8)?),
                u64::from(src.u32be(a + 12)?),
                src.u32be(a + 16)?,
            )
        };
        if !known_cpu(cpu) || align > 16 || off < table_end || off % (1u64 << align) != 0 {
            return None;
        }
        end = end.max(off.checked_add(size)?);
        slices.push((cpu, off, size));
    }
    if end > src.len() {
        // The first slice must still look like one before this counts.
        let (cpu, off, _) = slices[0];
        if let Some(s) = src.sub(off, u64::MAX)
            && s.has(0, 8)
        {
            let thin_ok = thin_magic(&s).is_some_and(|(e, _)| e.u32(&s, 4) == Some(cpu));
            if !thin_ok && !s.starts_with_at(0, b"!<arch>\n") {
                return None;
            }
        }
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let mut complete = true;
    for &(cpu, off, size) in &slices {
        let s = src.sub(off, size)?;
        if s.starts_with_at(0, b"!<arch>\n") {
            continue;
        }
        let (e, _) = thin_magic(&s)?;
        if e.u32(&s, 4) != Some(cpu) {
            return None;
        }
        match thin(s) {
            Some(v) if v.status == super::Status::Complete => {}
            Some(_) => complete = false,
            None => return None,
        }
    }
    if !complete {
        return Some(Verdict::partial(
            table_end,
            "a slice of the universal file is damaged or cut",
        ));
    }
    let mut v = Verdict::complete(end);
    v.subtype = Some("fat".to_string());
    Some(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        thin64()
    }

    /// A 64-bit x86-64 executable: `__TEXT` with one section, `__LINKEDIT`,
    /// `LC_SYMTAB` and a code signature at the end.
    pub fn thin64() -> Vec<u8> {
        let mut cmds = Vec::new();
        // LC_SEGMENT_64 __TEXT, one section __text at 0x400 (0x100 bytes)
        let mut seg = vec![0u8; 72 + 80];
        seg[..4].copy_from_slice(&0x19u32.to_le_bytes());
        seg[4..8].copy_from_slice(&(152u32).to_le_bytes());
        seg[8..14].copy_from_slice(b"__TEXT");
        seg[40..48].copy_from_slice(&0u64.to_le_bytes());
        seg[48..56].copy_from_slice(&0x800u64.to_le_bytes());
        seg[64..68].copy_from_slice(&1u32.to_le_bytes());
        seg[72..78].copy_from_slice(b"__text");
        seg[88..94].copy_from_slice(b"__TEXT");
        seg[112..120].copy_from_slice(&0x100u64.to_le_bytes());
        seg[120..124].copy_from_slice(&0x400u32.to_le_bytes());
        cmds.extend(seg);
        // LC_SEGMENT_64 __LINKEDIT 0x800..0xA00
        let mut le = vec![0u8; 72];
        le[..4].copy_from_slice(&0x19u32.to_le_bytes());
        le[4..8].copy_from_slice(&72u32.to_le_bytes());
        le[8..18].copy_from_slice(b"__LINKEDIT");
        le[40..48].copy_from_slice(&0x800u64.to_le_bytes());
        le[48..56].copy_from_slice(&0x200u64.to_le_bytes());
        cmds.extend(le);
        // LC_SYMTAB: 4 symbols at 0x800, strings at 0x840 (0x40)
        let mut st = vec![0u8; 24];
        st[..4].copy_from_slice(&2u32.to_le_bytes());
        st[4..8].copy_from_slice(&24u32.to_le_bytes());
        st[8..12].copy_from_slice(&0x800u32.to_le_bytes());
        st[12..16].copy_from_slice(&4u32.to_le_bytes());
        st[16..20].copy_from_slice(&0x840u32.to_le_bytes());
        st[20..24].copy_from_slice(&0x40u32.to_le_bytes());
        cmds.extend(st);
        // LC_CODE_SIGNATURE at 0x880, 0x180 bytes: ends at 0xA00
        let mut cs = vec![0u8; 16];
        cs[..4].copy_from_slice(&0x1Du32.to_le_bytes());
        cs[4..8].copy_from_slice(&16u32.to_le_bytes());
        cs[8..12].copy_from_slice(&0x880u32.to_le_bytes());
        cs[12..16].copy_from_slice(&0x180u32.to_le_bytes());
        cmds.extend(cs);
        let mut v = vec![0u8; 32];
        v[..4].copy_from_slice(&0xFEED_FACFu32.to_le_bytes());
        v[4..8].copy_from_slice(&0x0100_0007u32.to_le_bytes());
        v[8..12].copy_from_slice(&3u32.to_le_bytes());
        v[12..16].copy_from_slice(&2u32.to_le_bytes());
        v[16..20].copy_from_slice(&4u32.to_le_bytes());
        v[20..24].copy_from_slice(&(cmds.len() as u32).to_le_bytes());
        v.extend(cmds);
        v.resize(0xA00, 0x90);
        v[0xA00 - 1] = 0xC3;
        v
    }

    /// A universal file of two copies of [`thin64`] (cputype x86-64 and,
    /// patched, arm64), 4 KiB aligned.
    fn fat2() -> Vec<u8> {
        let a = thin64();
        let mut b = thin64();
        b[4..8].copy_from_slice(&0x0100_000Cu32.to_le_bytes());
        let mut v = vec![0u8; 0x1000];
        v[..4].copy_from_slice(&0xCAFE_BABEu32.to_be_bytes());
        v[4..8].copy_from_slice(&2u32.to_be_bytes());
        for (i, (cpu, off)) in [(0x0100_0007u32, 0x1000u32), (0x0100_000C, 0x2000)]
            .into_iter()
            .enumerate()
        {
            let e = 8 + i * 20;
            v[e..e + 4].copy_from_slice(&cpu.to_be_bytes());
            v[e + 8..e + 12].copy_from_slice(&off.to_be_bytes());
            v[e + 12..e + 16].copy_from_slice(&(a.len() as u32).to_be_bytes());
            v[e + 16..e + 20].copy_from_slice(&12u32.to_be_bytes());
        }
        v.extend_from_slice(&a);
        v.resize(0x2000, 0);
        v.extend_from_slice(&b);
        v
    }

    #[test]
    fn valid_thin_and_fat() {
        assert_eq!(
            assert_complete("macho", &thin64()).as_deref(),
            Some("macho")
        );
        assert_prefixes("macho", &thin64());
        assert_eq!(assert_complete("macho", &fat2()).as_deref(), Some("fat"));
        assert_prefixes_step("macho", &fat2(), 97);
    }

    #[test]
    fn rejects_and_hostile() {
        // Garbage and a Java class file (nfat_arch = its version, 52).
        assert!(run("macho", b"\xCF\xFA\xED\xFEgarbage garbage garbage garbage").is_none());
        let mut class = b"\xCA\xFE\xBA\xBE\x00\x00\x00\x34".to_vec();
        class.resize(4096, 7);
        assert!(run("macho", &class).is_none());
        // Load commands that do not fill sizeofcmds.
        let mut f = thin64();
        let n = f.len() as u32;
        f[20..24].copy_from_slice(&n.to_le_bytes());
        assert!(run("macho", &f).is_none());
        // A hostile segment size: bounded, Partial at the window.
        let mut f = thin64();
        f[32 + 48..32 + 56].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        let v = run("macho", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        // ... and one that overflows: refused.
        f[32 + 40..32 + 48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(run("macho", &f).is_none());
        // A cut file is never Complete; max_len short of the end neither.
        let t = thin64();
        let v = run("macho", &t[..t.len() - 1]).unwrap();
        assert_eq!(v.status, Status::Partial);
        let lim = Limits { max_len: 0x9FF };
        assert_ne!(
            run_at("macho", &t, 0, lim).map(|v| v.status),
            Some(Status::Complete)
        );
        // A fat slice whose header names another CPU: refused.
        let mut f = fat2();
        f[0x2004..0x2008].copy_from_slice(&0x0100_0007u32.to_le_bytes());
        assert!(run("macho", &f).is_none());
        // A damaged slice: Partial.
        let mut f = fat2();
        f.truncate(0x2000 + 0x900);
        f[8 + 20 + 12..8 + 20 + 16].copy_from_slice(&0x900u32.to_be_bytes());
        let v = run("macho", &f).unwrap();
        assert_eq!(v.status, Status::Partial);
    }
}
