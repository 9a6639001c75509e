//! Windows shell link (`.lnk`): header, then the optional parts its flags
//! announce, then extra-data blocks to the terminal block.
//!
//! Structure (MS-SHLLINK 2.1-2.5): the 76-byte ShellLinkHeader
//! (`HeaderSize` 0x4C, the link CLSID, `LinkFlags` at 0x14, file
//! attributes, three FILETIMEs, file size, icon index, `ShowCommand` at
//! 0x3C, hot key at 0x40, then 10 reserved bytes that must be zero); if
//! `HasLinkTargetIDList` (flag bit 0) a LinkTargetIDList: `IDListSize`
//! (u16) and that many bytes of ItemIDs (each `ItemIDSize` u16, counting
//! itself) ended by a zero TerminalID; if `HasLinkInfo` (bit 1) a LinkInfo
//! of `LinkInfoSize` (u32, counting itself) bytes; then up to five
//! StringData (NAME, RELATIVE_PATH, WORKING_DIR, ARGUMENTS, ICON_LOCATION:
//! bits 2-6, in that order), each a u16 character count and that many
//! characters of 2 bytes (`IsUnicode`, bit 7) or 1; then ExtraData blocks
//! (`BlockSize` u32 >= 8, `BlockSignature` 0xA0000001-0xA00000FF) ended by a
//! TerminalBlock, a `BlockSize` below 4 (0 as written).
//!
//! Checked: the header's size, CLSID, `ShowCommand` (1, 3 or 7: other
//! values are written by nothing), the reserved fields; the IDList walk
//! adds up to `IDListSize`; the LinkInfo's header size (0x1C or >= 0x24)
//! and its offsets lie inside it; each extra block's size and signature.
//!
//! * `None`: the header is not a shell link header.
//! * `Complete`: the terminal block is reached; length = its end.
//! * `Partial`: the structure runs past the window (length = window) or a
//!   part does not check out (length = end of the last part that did).

use super::Verdict;
use super::read::{Cursor, Src};

const CLSID: [u8; 16] = [
    0x01, 0x14, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46,
];

/// More extra-data blocks than this is not a real link (MS-SHLLINK
/// defines 11 kinds, each at most once).
const MAX_BLOCKS: u32 = 64;
/// More ItemIDs than this is not a real link (a path of 4096 components).
const MAX_ITEMS: u32 = 4096;

pub fn validate(src: Src) -> Option<Verdict> {
    let Some(h) = src.bytes::<76>(0) else {
        let mut b = [0u8; 20];
        let n = src.read(0, &mut b);
        let sig = [&[0x4Cu8, 0, 0, 0][..], &CLSID[..]].concat();
        return (n >= 4 && b[..n] == sig[..n]).then(|| Verdict::partial(src.len(), src.cut_note()));
    };
    if h[..4] != [0x4C, 0, 0, 0] || h[4..20] != CLSID {
        return None;
    }
    let flags = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
    let show = u32::from_le_bytes([h[60], h[61], h[62], h[63]]);
    if !matches!(show, 1 | 3 | 7) || h[66..76].iter().any(|&b| b != 0) {
        return None;
    }
    let cut = |src: &Src| Some(Verdict::partial(src.len(), src.cut_note()));
    let mut c = Cursor::new(src, 76);
    let mut good = c.pos();
    if flags & 1 != 0 {
        let Some(size) = c.u16le() else {
            return cut(&src);
        };
        let end = c.pos() + u64::from(size);
        let mut items = 0u32;
        loop {
            let Some(n) = c.u16le() else { return cut(&src) };
            if n == 0 {
                break;
            }
            items += 1;
            if n < 2 || items > MAX_ITEMS || c.pos() - 2 + u64::from(n) > end {
                return Some(Verdict::partial(good, "bad LinkTargetIDList"));
            }
            if !c.skip(u64::from(n) - 2) {
                return cut(&src);
            }
        }
        if c.pos() != end {
            return Some(Verdict::partial(good, "LinkTargetIDList size mismatch"));
        }
        good = c.pos();
    }
    if flags & 2 != 0 {
        let at = c.pos();
        let Some(li) = c.bytes::<28>() else {
            return cut(&src);
        };
        let word = |i: usize| u32::from_le_bytes([li[i], li[i + 1], li[i + 2], li[i + 3]]);
        let (size, hsize) = (word(0), word(4));
        let offsets_ok = (12..28).step_by(4).all(|i| word(i) < size);
        if size < hsize || !(hsize == 0x1C || hsize >= 0x24) || !offsets_ok {
            return Some(Verdict::partial(good, format!("bad LinkInfo at {at}")));
        }
        c.seek(at);
        if !c.skip(u64::from(size)) {
            return cut(&src);
        }
        good = c.pos();
    }
    let unit = if flags & 0x80 != 0 { 2 } else { 1 };
    for bit in 2..7 {
        if flags & (1 << bit) != 0 {
            let Some(n) = c.u16le() else { return cut(&src) };
            if !c.skip(u64::from(n) * unit) {
                return cut(&src);
            }
        }
    }
    good = good.max(c.pos());
    for _ in 0..MAX_BLOCKS {
        let at = c.pos();
        let Some(size) = c.u32le() else {
            return cut(&src);
        };
        if size < 4 {
            let mut v = Verdict::complete(c.pos());
            v.notes.push(format!("flags {flags:#x}"));
            return Some(v);
        }
        let Some(sig) = c.u32le() else {
            return cut(&src);
        };
        if size < 8 || sig & 0xFFFF_FF00 != 0xA000_0000 {
            return Some(Verdict::partial(
                good,
                format!("bad extra data block at {at}"),
            ));
        }
        if !c.skip(u64::from(size) - 8) {
            return cut(&src);
        }
        good = c.pos();
    }
    Some(Verdict::partial(good, "too many extra data blocks"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;
    use super::CLSID;

    fn header(flags: u32) -> Vec<u8> {
        let mut h = vec![0x4C, 0, 0, 0];
        h.extend_from_slice(&CLSID);
        h.extend_from_slice(&flags.to_le_bytes());
        h.resize(60, 0);
        h.extend_from_slice(&1u32.to_le_bytes());
        h.resize(76, 0);
        h
    }

    /// A link with an IDList, a LinkInfo, a Unicode relative path and one
    /// extra block: the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        let mut d = header(0x1 | 0x2 | 0x8 | 0x80);
        // IDList: one item of 6 bytes + terminal.
        d.extend_from_slice(&8u16.to_le_bytes());
        d.extend_from_slice(&6u16.to_le_bytes());
        d.extend_from_slice(&[0x1F, 0x50, 0xAA, 0xBB]);
        d.extend_from_slice(&0u16.to_le_bytes());
        // LinkInfo: 0x1C header + "C:\\x\0".
        let mut li = vec![0u8; 0x1C];
        li[0..4].copy_from_slice(&(0x1Cu32 + 6).to_le_bytes());
        li[4..8].copy_from_slice(&0x1Cu32.to_le_bytes());
        li[8..12].copy_from_slice(&1u32.to_le_bytes());
        li[16..20].copy_from_slice(&0x1Cu32.to_le_bytes());
        li[24..28].copy_from_slice(&(0x1Cu32 + 5).to_le_bytes());
        li.extend_from_slice(b"C:\\x\0\0");
        d.extend_from_slice(&li);
        d.extend_from_slice(&2u16.to_le_bytes());
        d.extend_from_slice(&[b'x', 0, b'y', 0]);
        // A KnownFolderDataBlock (0x1C bytes).
        d.extend_from_slice(&0x1Cu32.to_le_bytes());
        d.extend_from_slice(&0xA000_000Bu32.to_le_bytes());
        d.extend_from_slice(&[7u8; 0x14]);
        d.extend_from_slice(&0u32.to_le_bytes());
        d
    }

    #[test]
    fn valid_is_exact_with_trailing_bytes() {
        let s = seed();
        let mut d = s.clone();
        d.extend_from_slice(&[0xAB; 300]);
        let v = run("lnk", &d).unwrap();
        assert_eq!(v.status, Status::Complete, "{:?}", v.notes);
        assert_eq!(v.length, s.len() as u64);
        let mut bare = header(0);
        bare.extend_from_slice(&0u32.to_le_bytes());
        let v = run("lnk", &bare).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, 80));
    }

    #[test]
    fn truncated_is_partial() {
        let s = seed();
        for cut in [20, 77, 90, s.len() - 4, s.len() - 1] {
            let v = run("lnk", &s[..cut]).unwrap();
            assert_eq!(v.status, Status::Partial, "cut {cut}");
            assert_eq!(v.length, cut as u64);
        }
    }

    #[test]
    fn garbage_refused() {
        assert!(run("lnk", &[0u8; 200]).is_none());
        let mut d = seed();
        d[60] = 2; // ShowCommand 2 is not defined
        assert!(run("lnk", &d).is_none());
        let mut d = seed();
        d[70] = 1; // reserved
        assert!(run("lnk", &d).is_none());
    }

    #[test]
    fn hostile_lengths_bounded() {
        let s = seed();
        // IDList size beyond its items.
        let mut d = s.clone();
        d[76] = 0xFF;
        let v = run("lnk", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 76));
        // An extra block claiming 4 GiB.
        let mut d = s.clone();
        let at = s.len() - 4 - 0x1C;
        d[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("lnk", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d.len() as u64));
        // A bad block signature ends the file at the last good part.
        let mut d = s.clone();
        d[at + 4..at + 8].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        let v = run("lnk", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, at as u64));
    }
}
