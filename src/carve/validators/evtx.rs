//! Windows XML Event Log (EVTX): the file header, then 64 KiB chunks.
//!
//! Structure (libyal libevtx "Windows XML Event Log (EVTX) format" 2-3):
//! a file header block of `header block size` (4096) bytes: `ElfFile\0`,
//! first and last chunk numbers (u64), the next record identifier (u64),
//! the header size 128 (u32 at 32), minor version (u16 at 36, 1 or 2),
//! major version 3 (u16 at 38), the header block size 4096 (u16 at 40),
//! the number of chunks (u16 at 42), file flags (u32 at 120: 1 dirty, 2
//! full) and the CRC-32 of the header's first 120 bytes (u32 at 124). Then
//! that many chunks of 65,536 bytes, each starting `ElfChnk\0` with its
//! header size 128 (u32 at 40) and a free-space offset (u32 at 48) between
//! 512 and 65,536.
//!
//! Checked: the header's sizes, versions and CRC-32; every chunk's
//! signature, header size and free-space offset. A dirty log's header may
//! count fewer chunks than were written, so chunks that follow the counted
//! ones and check out are taken too (a new log starts with `ElfFile`, not a
//! chunk).
//!
//! * `None`: bad signature, sizes, versions or header CRC.
//! * `Complete`: every counted chunk checks out; length = header block +
//!   chunks · 65,536.
//! * `Partial`: the chunks run past the window (length = window) or a
//!   counted chunk does not check out (length = end of the last good one).

use super::Verdict;
use super::read::Src;

const CHUNK: u64 = 65536;

pub fn validate(src: Src) -> Option<Verdict> {
    let Some(h) = src.bytes::<128>(0) else {
        let mut b = [0u8; 8];
        let n = src.read(0, &mut b);
        return (n == 8 && b == *b"ElfFile\0").then(|| Verdict::partial(src.len(), src.cut_note()));
    };
    let u16at = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
    let u32at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    if h[..8] != *b"ElfFile\0"
        || u32at(32) != 128
        || !matches!(u16at(36), 1 | 2)
        || u16at(38) != 3
        || u16at(40) != 4096
        || crc32fast::hash(&h[..120]) != u32at(124)
    {
        return None;
    }
    let counted = u64::from(u16at(42));
    let flags = u32at(120);
    let mut at = 4096u64;
    let mut chunks = 0u64;
    loop {
        match chunk(&src, at) {
            Chunk::Ok => {}
            Chunk::Cut if chunks < counted => {
                return Some(Verdict::partial(src.len(), src.cut_note()));
            }
            Chunk::Bad if chunks < counted => {
                return Some(Verdict::partial(at, format!("bad chunk {chunks} at {at}")));
            }
            Chunk::Cut | Chunk::Bad => break,
        }
        chunks += 1;
        at += CHUNK;
    }
    if at == 4096 {
        return Some(Verdict::partial(at.min(src.len()), "no chunk"));
    }
    let mut v = Verdict::complete(at);
    v.notes.push(format!(
        "{chunks} chunk(s), {counted} counted in the header, flags {flags:#x}"
    ));
    Some(v)
}

enum Chunk {
    Ok,
    Cut,
    Bad,
}

fn chunk(src: &Src, at: u64) -> Chunk {
    let Some(c) = src.bytes::<52>(at) else {
        return Chunk::Cut;
    };
    let u32at = |i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
    if c[..8] != *b"ElfChnk\0" || u32at(40) != 128 || !(512..=65536).contains(&u32at(48)) {
        return Chunk::Bad;
    }
    if !src.has(at, CHUNK) {
        return Chunk::Cut;
    }
    Chunk::Ok
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    fn header(chunks: u16) -> Vec<u8> {
        let mut h = b"ElfFile\0".to_vec();
        h.resize(32, 0);
        h.extend_from_slice(&128u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&3u16.to_le_bytes());
        h.extend_from_slice(&4096u16.to_le_bytes());
        h.extend_from_slice(&chunks.to_le_bytes());
        h.resize(124, 0);
        let crc = crc32fast::hash(&h[..120]);
        h.extend_from_slice(&crc.to_le_bytes());
        h.resize(4096, 0);
        h
    }

    fn chunk() -> Vec<u8> {
        let mut c = b"ElfChnk\0".to_vec();
        c.resize(40, 0);
        c.extend_from_slice(&128u32.to_le_bytes());
        c.extend_from_slice(&700u32.to_le_bytes());
        c.extend_from_slice(&1200u32.to_le_bytes());
        c.resize(65536, 0x2A);
        c
    }

    /// A log of two chunks: the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        let mut d = header(2);
        d.extend(chunk());
        d.extend(chunk());
        d
    }

    #[test]
    fn valid_is_exact_with_trailing_bytes() {
        let s = seed();
        let mut d = s.clone();
        d.extend_from_slice(&[0xAB; 70000]);
        let v = run("evtx", &d).unwrap();
        assert_eq!(v.status, Status::Complete, "{:?}", v.notes);
        assert_eq!(v.length, s.len() as u64);
        // A dirty log counting one chunk of the two it holds.
        let mut d = header(1);
        d.extend(chunk());
        d.extend(chunk());
        d.extend_from_slice(b"ElfFile\0");
        let v = run("evtx", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, s.len() as u64));
    }

    #[test]
    fn truncated_is_partial() {
        let s = seed();
        for cut in [8, 200, 4096 + 100, 4096 + 65536 + 10, s.len() - 1] {
            let v = run("evtx", &s[..cut]).unwrap();
            assert_eq!(v.status, Status::Partial, "cut {cut}");
            assert_eq!(v.length, cut as u64);
        }
    }

    #[test]
    fn garbage_refused() {
        assert!(run("evtx", &[0u8; 5000]).is_none());
        let mut d = seed();
        d[50] ^= 1; // header CRC no longer matches
        assert!(run("evtx", &d).is_none());
        // The second chunk overwritten by foreign data.
        let mut d = seed();
        d[4096 + 65536..].fill(0x5A);
        let v = run("evtx", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 4096 + 65536));
    }

    #[test]
    fn hostile_lengths_bounded() {
        // 65,535 chunks counted, two present: cut by the window.
        let mut d = header(u16::MAX);
        d.extend(chunk());
        d.extend(chunk());
        let v = run("evtx", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d.len() as u64));
        // A free-space offset past the chunk.
        let mut d = seed();
        d[4096 + 48..4096 + 52].copy_from_slice(&70000u32.to_le_bytes());
        let v = run("evtx", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 4096));
    }
}
