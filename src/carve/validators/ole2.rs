//! OLE2 / Compound File Binary (doc, xls, ppt, msg, …).
//!
//! Structure ([MS-CFB] §2.2): a 512-byte header (`D0 CF 11 E0 A1 B1 1A E1`,
//! major version 3 with 512-byte sectors or 4 with 4096-byte sectors, byte
//! order `FFFE`, mini sector shift 6, counts and first sectors of the FAT,
//! directory, mini FAT and DIFAT, and the first 109 DIFAT entries), then
//! sectors; sector `n` is at `(n + 1) × sector size`. The FAT maps every
//! sector to the next of its chain or to a special value (`FFFFFFFF` free,
//! `FFFFFFFE` end of chain, `FFFFFFFD` FAT sector, `FFFFFFFC` DIFAT sector).
//!
//! The FAT sectors are found from the header DIFAT and the DIFAT chain (at
//! most `num FAT sectors`, bounded by the window); each FAT sector is read in
//! turn and the highest non-free entry gives the last sector in use, so the
//! extent is `(highest used sector + 2) × sector size`. FAT entries pointing
//! past the sectors the FAT describes are counted as damage.
//!
//! The directory chain (bounded, cycle-safe) is read for classification: the
//! names of the root storage's children (UTF-16LE): `WordDocument` → doc,
//! `Workbook`/`Book` → xls, `PowerPoint Document` → ppt, any `__substg1.0_…`
//! → msg; otherwise ole2.
//!
//! * `None`: header checks fail, or no FAT sector can be found.
//! * `Complete`: all FAT sectors were read, the FAT is consistent, the first
//!   directory entry is the root, and the extent lies inside the window;
//!   length = extent.
//! * `Partial`: the extent (or a FAT sector) runs past the window (length =
//!   window), or the DIFAT/FAT/directory is damaged (length = extent found,
//!   capped to the window).

use super::Verdict;
use super::read::{Src, le16, le32};

const SIG: &[u8; 8] = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1";
const FREE: u32 = 0xFFFF_FFFF;
const MAXREG: u32 = 0xFFFF_FFFA;
/// Directory entries read at most.
const MAX_DIR_ENTRIES: usize = 1 << 16;
/// FAT sectors walked at most (1 Mi sectors of 4 KiB describe 512 GiB).
const MAX_FAT_SECTORS: u64 = 1 << 20;

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, SIG) {
        return None;
    }
    // The fixed fields first (most candidates end here), then the rest of
    // the 512-byte header.
    let mut h = [0u8; 512];
    if !src.read_exact(0, &mut h[..0x4C]) {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let major = le16(&h[0x1A..]);
    let shift = le16(&h[0x1E..]);
    if le16(&h[0x1C..]) != 0xFFFE
        || le16(&h[0x20..]) != 6
        || !matches!((major, shift), (3, 9) | (4, 12))
    {
        return None;
    }
    if !src.read_exact(0x4C, &mut h[0x4C..]) {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let ss: u64 = 1 << shift;
    let eps = ss / 4; // entries per FAT sector
    let num_fat = u64::from(le32(&h[0x2C..]));
    let first_dir = le32(&h[0x30..]);
    let first_difat = le32(&h[0x44..]);
    let num_difat = u64::from(le32(&h[0x48..]));
    if num_fat == 0 {
        return None;
    }
    let sector_off = |s: u32| (u64::from(s) + 1) * ss;
    let mut notes = Vec::new();
    // A FAT larger than the window cannot be walked: the file is cut.
    if num_fat.saturating_mul(ss) > src.len() || num_fat > MAX_FAT_SECTORS {
        return Some(
            Verdict::partial(src.len(), src.cut_note()).with_note(format!("{num_fat} FAT sectors")),
        );
    }
    // FAT sector list (bounded by num_fat, itself bounded by the window).
    let mut fat: Vec<u32> = Vec::with_capacity(num_fat.min(109) as usize);
    for i in 0..num_fat.min(109) as usize {
        fat.push(le32(&h[0x4C + 4 * i..]));
    }
    let mut difat_sec = first_difat;
    let mut difat_walked = 0u64;
    let mut buf = vec![0u8; ss as usize];
    while (fat.len() as u64) < num_fat {
        if difat_sec > MAXREG || difat_walked >= num_difat.max(1) || difat_walked > num_fat {
            notes.push(format!(
                "DIFAT ends after {} of {num_fat} FAT sectors",
                fat.len()
            ));
            break;
        }
        if !src.read_exact(sector_off(difat_sec), &mut buf) {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        for k in 0..(eps - 1) as usize {
            if (fat.len() as u64) < num_fat {
                fat.push(le32(&buf[4 * k..]));
            }
        }
        difat_sec = le32(&buf[(ss - 4) as usize..]);
        difat_walked += 1;
    }
    if fat.first().is_none_or(|&s| s > MAXREG) {
        return None;
    }
    // Walk the FAT: highest used sector and out-of-range pointers.
    let covered = fat.len() as u64 * eps;
    let mut highest: Option<u64> = None;
    let mut bad_ptr = 0u64;
    for (k, &fs) in fat.iter().enumerate() {
        if fs > MAXREG {
            notes.push(format!("FAT sector #{k} missing"));
            continue;
        }
        if !src.read_exact(sector_off(fs), &mut buf) {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        for i in 0..eps as usize {
            let e = le32(&buf[4 * i..]);
            if e != FREE {
                highest = Some(k as u64 * eps + i as u64);
                if e <= MAXREG && u64::from(e) >= covered {
                    bad_ptr += 1;
                }
            }
        }
    }
    let highest = highest?;
    let extent = (highest + 2) * ss;
    if bad_ptr > 0 {
        notes.push(format!("{bad_ptr} FAT entries point past the FAT"));
    }
    // Directory and classification.
    let fat_next = |s: u32, buf: &mut [u8; 4]| -> Option<u32> {
        let fs = *fat.get(usize::try_from(u64::from(s) / eps).ok()?)?;
        if fs > MAXREG {
            return None;
        }
        src.read_exact(sector_off(fs) + (u64::from(s) % eps) * 4, buf)
            .then(|| u32::from_le_bytes(*buf))
    };
    let mut entries: Vec<DirEntry> = Vec::new();
    let mut s = first_dir;
    let mut steps = 0u64;
    let mut b4 = [0u8; 4];
    while s <= MAXREG && steps < covered && entries.len() < MAX_DIR_ENTRIES {
        if !src.read_exact(sector_off(s), &mut buf) {
            break;
        }
        for e in buf.chunks_exact(128) {
            let mut name = [0u16; 32];
            for (j, c) in e[..64].chunks_exact(2).enumerate() {
                name[j] = le16(c);
            }
            let nlen = usize::from((le16(&e[64..]) / 2).saturating_sub(1).min(31));
            entries.push(DirEntry {
                class: name_class(&String::from_utf16_lossy(&name[..nlen])),
                ty: e[66],
                left: le32(&e[68..]),
                right: le32(&e[72..]),
                child: le32(&e[76..]),
            });
        }
        steps += 1;
        match fat_next(s, &mut b4) {
            Some(n) => s = n,
            None => break,
        }
    }
    // Still on a sector after as many steps as the FAT has entries: the
    // chain revisits a sector (a loop), so the directory is damaged.
    if s <= MAXREG && steps >= covered {
        notes.push(format!("directory chain loops (sector {s} again)"));
    }
    let root_ok = entries.first().is_some_and(|e| e.ty == 5);
    if !root_ok {
        notes.push("first directory entry is not the root storage".into());
    }
    let subtype = if root_ok { classify(&entries) } else { "ole2" };
    let v = if extent > src.len() {
        Verdict::partial(src.len(), src.cut_note())
    } else if notes.is_empty() {
        Verdict::complete(extent)
    } else {
        Verdict::partial(extent, notes.remove(0))
    };
    let mut v = v.with_subtype(Some(subtype));
    v.notes.extend(notes);
    Some(v)
}

/// One 128-byte directory entry (the fields used here).
struct DirEntry {
    class: Class,
    ty: u8,
    left: u32,
    right: u32,
    child: u32,
}

/// What a directory entry's name says about the file.
#[derive(Clone, Copy)]
enum Class {
    Doc,
    Xls,
    Ppt,
    Msg,
    Other,
}

fn name_class(name: &str) -> Class {
    match name {
        "WordDocument" => Class::Doc,
        "Workbook" | "Book" => Class::Xls,
        "PowerPoint Document" => Class::Ppt,
        n if n.starts_with("__substg1.0_") => Class::Msg,
        _ => Class::Other,
    }
}

/// Classifies by the names of the root storage's children (a red-black tree
/// of left/right siblings under the root's child).
fn classify(entries: &[DirEntry]) -> &'static str {
    let (mut msg, mut doc, mut xls, mut ppt) = (false, false, false, false);
    let mut seen = vec![false; entries.len()];
    let mut stack: Vec<u32> = entries.first().map(|r| vec![r.child]).unwrap_or_default();
    while let Some(i) = stack.pop() {
        let Some(e) = entries.get(i as usize) else {
            continue;
        };
        if std::mem::replace(&mut seen[i as usize], true) {
            continue;
        }
        match e.class {
            Class::Doc => doc = true,
            Class::Xls => xls = true,
            Class::Ppt => ppt = true,
            Class::Msg => msg = true,
            Class::Other => {}
        }
        stack.push(e.left);
        stack.push(e.right);
    }
    if msg {
        "msg"
    } else if doc {
        "doc"
    } else if xls {
        "xls"
    } else if ppt {
        "ppt"
    } else {
        "ole2"
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample("WordDocument")
    }

    const END: u32 = 0xFFFF_FFFE;
    const NONE: u32 = 0xFFFF_FFFF;

    fn dir_entry(
        name: &str,
        ty: u8,
        left: u32,
        right: u32,
        child: u32,
        start: u32,
        size: u32,
    ) -> Vec<u8> {
        let mut e = vec![0u8; 128];
        let u: Vec<u16> = name.encode_utf16().collect();
        for (i, c) in u.iter().enumerate() {
            e[2 * i..2 * i + 2].copy_from_slice(&c.to_le_bytes());
        }
        e[64..66].copy_from_slice(&((u.len() as u16 + 1) * 2).to_le_bytes());
        e[66] = ty;
        e[67] = 1;
        e[68..72].copy_from_slice(&left.to_le_bytes());
        e[72..76].copy_from_slice(&right.to_le_bytes());
        e[76..80].copy_from_slice(&child.to_le_bytes());
        e[116..120].copy_from_slice(&start.to_le_bytes());
        e[120..124].copy_from_slice(&size.to_le_bytes());
        e
    }

    /// A version-3 compound file: sector 0 FAT, 1 directory, 2..=9 a stream
    /// named `stream` (plus a sibling `1Table`).
    fn sample(stream: &str) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..8].copy_from_slice(super::SIG);
        h[0x18..0x1A].copy_from_slice(&0x3Eu16.to_le_bytes());
        h[0x1A..0x1C].copy_from_slice(&3u16.to_le_bytes());
        h[0x1C..0x1E].copy_from_slice(&0xFFFEu16.to_le_bytes());
        h[0x1E..0x20].copy_from_slice(&9u16.to_le_bytes());
        h[0x20..0x22].copy_from_slice(&6u16.to_le_bytes());
        h[0x2C..0x30].copy_from_slice(&1u32.to_le_bytes());
        h[0x30..0x34].copy_from_slice(&1u32.to_le_bytes());
        h[0x38..0x3C].copy_from_slice(&4096u32.to_le_bytes());
        h[0x3C..0x40].copy_from_slice(&END.to_le_bytes());
        h[0x44..0x48].copy_from_slice(&END.to_le_bytes());
        for i in 0..109 {
            h[0x4C + 4 * i..0x50 + 4 * i].copy_from_slice(&NONE.to_le_bytes());
        }
        h[0x4C..0x50].copy_from_slice(&0u32.to_le_bytes());
        let mut fat = vec![0xFFFF_FFFDu32, END];
        fat.extend(3..=9);
        fat.push(END);
        fat.resize(128, NONE);
        let mut v = h;
        for e in fat {
            v.extend_from_slice(&e.to_le_bytes());
        }
        v.extend(dir_entry("Root Entry", 5, NONE, NONE, 1, END, 0));
        v.extend(dir_entry(stream, 2, NONE, 2, NONE, 2, 4096));
        v.extend(dir_entry("1Table", 2, NONE, NONE, NONE, END, 0));
        v.extend(vec![0u8; 128]);
        v.extend((0..4096u32).map(|i| i as u8));
        v
    }

    #[test]
    fn valid_and_classified() {
        for (name, want) in [
            ("WordDocument", "doc"),
            ("Workbook", "xls"),
            ("Book", "xls"),
            ("PowerPoint Document", "ppt"),
            ("__substg1.0_0037001F", "msg"),
            ("Contents", "ole2"),
        ] {
            let f = sample(name);
            assert_eq!(f.len(), 512 * 11);
            assert_eq!(assert_complete("ole2", &f).as_deref(), Some(want));
        }
        assert_prefixes("ole2", &sample("WordDocument"));
    }

    #[test]
    fn hostile() {
        // Huge FAT sector count: Partial, nothing allocated.
        let mut f = sample("WordDocument");
        f[0x2C..0x30].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("ole2", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        // FAT sector pointing far away.
        let mut f = sample("WordDocument");
        f[0x4C..0x50].copy_from_slice(&0x00FF_FFFFu32.to_le_bytes());
        let v = run("ole2", &f).unwrap();
        assert_eq!(v.status, Status::Partial);
        // Directory chain looping onto itself.
        let mut f = sample("WordDocument");
        f[512 + 4..512 + 8].copy_from_slice(&1u32.to_le_bytes());
        let v = run("ole2", &f).unwrap();
        assert_eq!(v.length, f.len() as u64);
        assert_eq!(v.status, Status::Partial, "{v:?}");
        assert!(v.notes.iter().any(|n| n.contains("loops")), "{v:?}");
        // Bad header.
        let mut f = sample("WordDocument");
        f[0x1E] = 10;
        assert!(run("ole2", &f).is_none());
        let v = run_at("ole2", &sample("Book"), 0, Limits { max_len: 1000 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 1000));
    }
}
