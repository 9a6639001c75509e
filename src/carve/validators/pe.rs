//! PE/COFF images (Windows .exe, .dll, .sys, EFI applications).
//!
//! Structure (Microsoft "PE Format" specification): an MS-DOS header `MZ`
//! whose `e_lfanew` (u32 at 0x3C) points at `PE\0\0`; the COFF file header
//! (machine, number of sections, symbol table pointer and count, size of the
//! optional header, characteristics); the optional header (magic `0x10B`
//! PE32, `0x20B` PE32+, `0x107` ROM) with `SizeOfHeaders`, `FileAlignment`
//! and the data directories; then the section table (40 bytes per section:
//! `SizeOfRawData`, `PointerToRawData`).
//!
//! The extent is the maximum of `SizeOfHeaders`, the section table end, every
//! section's `PointerToRawData + SizeOfRawData`, the attribute certificate
//! table (data directory 4, whose address is a *file offset*), and the COFF
//! symbol table + string table when present.
//!
//! Checked: `e_lfanew` in 4..=1 MiB, the PE signature, a known optional header
//! magic with a large-enough size, `FileAlignment` a power of two ≤ 64 KiB,
//! 1..=96 sections (the loader's limit), no offset + size overflow.
//!
//! * `None`: any of the above fails (an `MZ` that is not a PE — a plain DOS
//!   program — is not handled).
//! * `Complete`: the extent lies inside the window; length = extent.
//! * `Partial`: the extent runs past the window; length = window.
//!
//! Overlays (installer payloads appended after the last section and not
//! covered by the certificate table) are not included. Subtype: `dll` when
//! `IMAGE_FILE_DLL` is set, otherwise `exe`.

use super::Verdict;
use super::read::{Src, le16, le32};

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"MZ") {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    let Some(lfanew) = src.u32le(0x3C) else {
        return cut();
    };
    let lfanew = u64::from(lfanew);
    if !(4..=1 << 20).contains(&lfanew) {
        return None;
    }
    let mut coff = [0u8; 24];
    if !src.read_exact(lfanew, &mut coff) {
        // Only a cut if what is there still matches the signature.
        let n = src.read(lfanew, &mut coff);
        return if n > 0 && coff[..n.min(4)] == b"PE\0\0"[..n.min(4)] {
            cut()
        } else {
            None
        };
    }
    if &coff[..4] != b"PE\0\0" {
        return None;
    }
    let nsect = u64::from(le16(&coff[6..]));
    let symptr = u64::from(le32(&coff[12..]));
    let nsyms = u64::from(le32(&coff[16..]));
    let optsize = u64::from(le16(&coff[20..]));
    let chars = le16(&coff[22..]);
    let opt = lfanew + 24;
    let mut oh = [0u8; 112 + 16 * 8];
    let n = src.read(opt, &mut oh);
    let magic = le16(&oh);
    let (min_opt, dd_at, ndd_at) = match magic {
        0x10B => (96, 96, 92),
        0x20B => (112, 112, 108),
        0x107 => (56, 0, 0),
        _ if n < 2 => return cut(),
        _ => return None,
    };
    if optsize < min_opt || !(1..=96).contains(&nsect) {
        return None;
    }
    if (n as u64) < optsize.min(oh.len() as u64) {
        return cut();
    }
    let mut extent = opt + optsize + 40 * nsect;
    let mut cert = None;
    if magic != 0x107 {
        let file_align = le32(&oh[36..]);
        let size_of_headers = u64::from(le32(&oh[60..]));
        if file_align == 0 || !file_align.is_power_of_two() || file_align > 65536 {
            return None;
        }
        extent = extent.max(size_of_headers);
        let ndd = u64::from(le32(&oh[ndd_at..]));
        // Directory 4 must lie inside the optional header.
        if ndd > 4 && dd_at + 5 * 8 <= optsize {
            let d = dd_at as usize + 4 * 8;
            let (off, size) = (u64::from(le32(&oh[d..])), u64::from(le32(&oh[d + 4..])));
            if off != 0 && size != 0 {
                cert = Some(off + size);
            }
        }
    }
    if let Some(c) = cert {
        extent = extent.max(c);
    }
    // Section table.
    let table = opt + optsize;
    for i in 0..nsect {
        let Some(s) = src.bytes::<40>(table + 40 * i) else {
            return cut();
        };
        let raw_size = u64::from(le32(&s[16..]));
        let raw_ptr = u64::from(le32(&s[20..]));
        if raw_size > 0 && raw_ptr > 0 {
            extent = extent.max(raw_ptr + raw_size);
        }
    }
    // COFF symbol table and the string table after it.
    if symptr != 0 && nsyms > 0 {
        let strtab = symptr + nsyms * 18;
        extent = extent.max(strtab);
        match src.u32le(strtab) {
            Some(len) if len >= 4 => extent = extent.max(strtab + u64::from(len)),
            Some(_) => {}
            None => return cut(),
        }
    }
    if extent > src.len() {
        return cut();
    }
    let dll = chars & 0x2000 != 0;
    let mut v = Verdict::complete(extent).with_subtype(Some(if dll { "dll" } else { "exe" }));
    if magic == 0x20B {
        v.notes.push("PE32+".into());
    }
    if cert.is_some() {
        v.notes.push("attribute certificate table".into());
    }
    Some(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample(false, true)
    }

    /// A PE32+ image: DOS header, PE header, optional header with 16 data
    /// directories, 2 sections, and an attribute certificate at the end.
    fn sample(dll: bool, cert: bool) -> Vec<u8> {
        let mut v = vec![0u8; 0x80];
        v[..2].copy_from_slice(b"MZ");
        v[0x3C..0x40].copy_from_slice(&0x80u32.to_le_bytes());
        v.extend_from_slice(b"PE\0\0");
        let mut coff = vec![0u8; 20];
        coff[..2].copy_from_slice(&0x8664u16.to_le_bytes());
        coff[2..4].copy_from_slice(&2u16.to_le_bytes());
        coff[16..18].copy_from_slice(&240u16.to_le_bytes());
        coff[18..20].copy_from_slice(&(0x0022u16 | if dll { 0x2000 } else { 0 }).to_le_bytes());
        v.extend(coff);
        let mut opt = vec![0u8; 240];
        opt[..2].copy_from_slice(&0x20Bu16.to_le_bytes());
        opt[32..36].copy_from_slice(&0x1000u32.to_le_bytes());
        opt[36..40].copy_from_slice(&0x200u32.to_le_bytes());
        opt[60..64].copy_from_slice(&0x400u32.to_le_bytes());
        opt[108..112].copy_from_slice(&16u32.to_le_bytes());
        if cert {
            opt[112 + 32..112 + 36].copy_from_slice(&0xA00u32.to_le_bytes());
            opt[112 + 36..112 + 40].copy_from_slice(&0x48u32.to_le_bytes());
        }
        v.extend(opt);
        for (name, ptr, size) in [
            (b".text\0\0\0", 0x400u32, 0x400u32),
            (b".data\0\0\0", 0x800, 0x200),
        ] {
            let mut s = vec![0u8; 40];
            s[..8].copy_from_slice(name);
            s[16..20].copy_from_slice(&size.to_le_bytes());
            s[20..24].copy_from_slice(&ptr.to_le_bytes());
            v.extend(s);
        }
        v.resize(0xA00, 0xCC);
        if cert {
            v.extend(vec![0x30; 0x48]);
        }
        v
    }

    #[test]
    fn valid_pes() {
        assert_eq!(
            assert_complete("pe", &sample(false, false)).as_deref(),
            Some("exe")
        );
        assert_eq!(
            assert_complete("pe", &sample(true, true)).as_deref(),
            Some("dll")
        );
        assert_prefixes("pe", &sample(false, true));
    }

    #[test]
    fn rejects_and_hostile() {
        let mut f = sample(false, false);
        f[0x3C..0x40].copy_from_slice(&0x7FFF_FFFFu32.to_le_bytes());
        assert!(run("pe", &f).is_none());
        let mut f = sample(false, false);
        f[0x80] = b'X';
        assert!(run("pe", &f).is_none());
        let mut f = sample(false, true);
        let cert = 0x80 + 24 + 112 + 32;
        f[cert..cert + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        f[cert + 4..cert + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("pe", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        assert!(
            run(
                "pe",
                b"MZ this is not a PE at all, just text............................"
            )
            .is_none()
        );
        let v = run_at("pe", &sample(false, false), 0, Limits { max_len: 0x900 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 0x900));
    }

    #[test]
    fn real_pes() {
        let mut d = py_dirs("distutils/command");
        d.push("/root/.cargo/registry/src".into());
        d.push("/usr/lib/google-cloud-sdk/platform/bundledpythonunix/lib/python3.12/site-packages/setuptools".into());
        let d: Vec<&str> = d.iter().map(String::as_str).collect();
        check_real("pe", &real_files(&d, &[".exe", ".dll"], 20));
    }
}
