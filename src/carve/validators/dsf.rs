//! DSF (Sony DSD Stream File).
//!
//! Structure (Sony "DSF File Format Specification" 1.01, 2005; all LE): a
//! `"DSD "` chunk `size u64 (28) | total file size u64 | metadata pointer
//! u64` (offset of an ID3v2 tag at the end of the file, 0 when none), a
//! `"fmt "` chunk `size u64 (52) | format version u32 (1) | format id u32
//! (0: raw DSD) | channel type u32 (1-7) | channel num u32 (1-6) |
//! sampling frequency u32 | bits per sample u32 (1 or 8) | sample count
//! u64 | block size per channel u32 (4096) | reserved u32`, and a
//! `"data"` chunk `size u64 (12 + sample data)` holding blocks of every
//! channel (the last padded to a whole block by the specification; some
//! writers do not); then the metadata (ID3v2).
//!
//! Checked: the fixed chunk sizes and fields above; the data ends where
//! the metadata pointer says (or at the total size when there is none);
//! the ID3v2 tag there fills the file to
//! its total size.
//!
//! * `None`: a header failing those checks;
//! * `Complete`: everything adds up; length = the total file size;
//! * `Partial`: the total is past the window (length = window), or the
//!   metadata is not an ID3v2 tag of the right size (length = the total).

use super::Verdict;
use super::read::Src;

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<92>(0)?;
    let u32at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let u64at = |o: usize| u64::from(u32at(o)) | u64::from(u32at(o + 4)) << 32;
    let (total, meta) = (u64at(12), u64at(20));
    let fields = &h[..4] == b"DSD "
        && u64at(4) == 28
        && &h[28..32] == b"fmt "
        && u64at(32) == 52
        && u32at(40) == 1
        && u32at(44) == 0
        && (1..=7).contains(&u32at(48))
        && (1..=6).contains(&u32at(52))
        && u32at(56) > 0
        && matches!(u32at(60), 1 | 8)
        && u32at(72) == 4096
        && &h[80..84] == b"data";
    if !fields {
        return None;
    }
    let data = u64at(84);
    let data_end = 80u64.checked_add(data)?;
    let ends = if meta == 0 { total } else { meta };
    if data < 12 || data_end != ends || total < data_end {
        return None;
    }
    if total > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    if meta != 0 {
        let tag = src.bytes::<10>(meta).filter(|t| &t[..3] == b"ID3");
        let size = tag.map(|t| {
            t[6..10]
                .iter()
                .fold(0u64, |a, b| a << 7 | u64::from(*b & 0x7F))
        });
        if size.map(|s| meta + 10 + s) != Some(total) {
            return Some(Verdict::partial(
                total,
                "metadata is not an ID3v2 tag filling the file",
            ));
        }
    }
    Some(Verdict::complete(total).with_note("DSF chunks add up"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A DSF of `blocks` blocks of 4096 bytes for each of `ch` channels,
    /// with an ID3v2 tag of `tag` bytes (0: none).
    pub fn make(ch: u32, blocks: u64, tag: u32) -> Vec<u8> {
        let data = 12 + blocks * 4096 * u64::from(ch);
        let meta = if tag > 0 { 80 + data } else { 0 };
        let total = 80 + data + if tag > 0 { 10 + u64::from(tag) } else { 0 };
        let mut f = b"DSD ".to_vec();
        for v in [28, total, meta] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(b"fmt ");
        f.extend_from_slice(&52u64.to_le_bytes());
        for v in [1, 0, 2, ch, 2_822_400, 1] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(&(blocks * 4096 * 8).to_le_bytes());
        f.extend_from_slice(&4096u32.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(b"data");
        f.extend_from_slice(&data.to_le_bytes());
        f.extend((12..data).map(|i| (i * 5 + 0x69) as u8));
        if tag > 0 {
            f.extend_from_slice(b"ID3\x04\x00\x00");
            f.extend((0..4).map(|k| (tag >> (21 - 7 * k) & 0x7F) as u8));
            f.extend((0..tag).map(|i| (i % 50) as u8));
        }
        f
    }

    pub fn seed() -> Vec<u8> {
        make(2, 1, 30)
    }

    #[test]
    fn sizes_add_up() {
        for f in [make(2, 1, 30), make(1, 2, 0), make(1, 0, 200)] {
            assert_complete("dsf", &f);
            assert_prefixes_step("dsf", &f, 97);
        }
    }

    #[test]
    fn hostile_and_damaged() {
        let mut f = make(1, 1, 20);
        f[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        let v = run("dsf", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        let mut g = make(1, 1, 20);
        g[84..92].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(run("dsf", &g).is_none());
        let mut h = make(1, 1, 20);
        let at = h.len() - 30;
        h[at] = b'X';
        assert_eq!(run("dsf", &h).unwrap().status, Status::Partial);
    }
}
