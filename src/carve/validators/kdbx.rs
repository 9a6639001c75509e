//! KeePass 2.x database (KDBX 3.x and 4.x): header fields, then for KDBX 4
//! the header's SHA-256 and the HMAC block stream to its empty last block.
//!
//! Structure (KeePass `KdbxFile.Read.cs`, KeePassXC `KeePass2.h`,
//! `Kdbx4Reader.cpp`): signatures `03 D9 A2 9A` `67 FB 4B B5`, the format
//! version (u32: minor u16, major u16; major 3 or 4); header fields `id u8 |
//! size | data` with size u16 (KDBX 3) or u32 (KDBX 4), ended by the
//! EndOfHeader field (id 0). KDBX 4 then has the SHA-256 of the header
//! bytes, the header's HMAC-SHA-256 (32), and the payload as HMAC blocks
//! `HMAC (32) | size (i32) | data`, the last of size 0. A KDBX 3 payload is
//! the cipher's output, to the end of the file, with nothing saying where
//! that is.
//!
//! Checked: the signatures and major version; every field id is one the
//! version defines (1-10 for KDBX 3, 2-12 for KDBX 4) and the header ends
//! within 1 MiB; for KDBX 4 the header's SHA-256 matches, and every block
//! size is non-negative.
//!
//! * `None`: bad signature or version, or a header field that no KDBX has.
//! * `Complete` (KDBX 4): the empty last block is reached; length = its end.
//! * `Unvalidated` (KDBX 3): the header checks out; length = the window.
//! * `Partial`: the structure runs past the window (length = window), or the
//!   header's hash or a block size is wrong (length = end of the last good
//!   structure).

use sha2::{Digest, Sha256};

use super::Verdict;
use super::read::{Cursor, Src};

const SIG: [u8; 8] = [0x03, 0xD9, 0xA2, 0x9A, 0x67, 0xFB, 0x4B, 0xB5];
/// A header longer than this is not a real one (KeePass writes under 1 KiB
/// plus the public custom data).
const MAX_HEADER: u64 = 1 << 20;
/// More header fields than this is not a real header.
const MAX_FIELDS: u32 = 256;

pub fn validate(src: Src) -> Option<Verdict> {
    let Some(h) = src.bytes::<12>(0) else {
        let mut b = [0u8; 8];
        let n = src.read(0, &mut b);
        return (n >= 4 && b[..n] == SIG[..n]).then(|| Verdict::partial(src.len(), src.cut_note()));
    };
    if h[..8] != SIG {
        return None;
    }
    let major = u16::from_le_bytes([h[10], h[11]]);
    if major != 3 && major != 4 {
        return None;
    }
    let cut = |src: &Src| Some(Verdict::partial(src.len(), src.cut_note()));
    let mut c = Cursor::new(src, 12);
    let mut fields = 0u32;
    loop {
        let Some(id) = c.u8() else { return cut(&src) };
        let size = if major == 4 {
            let Some(s) = c.u32le() else { return cut(&src) };
            u64::from(s)
        } else {
            let Some(s) = c.u16le() else { return cut(&src) };
            u64::from(s)
        };
        let known = if major == 4 {
            matches!(id, 0 | 2..=12)
        } else {
            id <= 10
        };
        fields += 1;
        if !known || fields > MAX_FIELDS || c.pos() + size > MAX_HEADER {
            return None;
        }
        if !c.skip(size) {
            return cut(&src);
        }
        if id == 0 {
            break;
        }
    }
    let header_end = c.pos();
    if major == 3 {
        return Some(Verdict::unvalidated(
            src.len(),
            format!("KDBX 3: {fields} header fields; the payload's end is not recorded"),
        ));
    }
    // The header's SHA-256 (at most MAX_HEADER bytes hashed, in pieces).
    let mut hasher = Sha256::new();
    let mut buf = [0u8; 4096];
    let mut at = 0;
    while at < header_end {
        let n = (header_end - at).min(buf.len() as u64) as usize;
        if !src.read_exact(at, &mut buf[..n]) {
            return cut(&src);
        }
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    let Some(stored) = c.bytes::<32>() else {
        return cut(&src);
    };
    if hasher.finalize()[..] != stored[..] {
        return Some(Verdict::partial(header_end, "KDBX 4 header hash mismatch"));
    }
    if !c.skip(32) {
        return cut(&src);
    }
    let mut good = c.pos();
    let mut blocks = 0u64;
    loop {
        if !c.skip(32) {
            return cut(&src);
        }
        let Some(size) = c.u32le() else {
            return cut(&src);
        };
        if size > i32::MAX as u32 {
            return Some(Verdict::partial(good, "negative HMAC block size"));
        }
        if size == 0 {
            let mut v = Verdict::complete(c.pos());
            v.subtype = Some("kdbx4".into());
            v.notes
                .push(format!("KDBX 4: {fields} header fields, {blocks} block(s)"));
            return Some(v);
        }
        if !c.skip(u64::from(size)) {
            return cut(&src);
        }
        blocks += 1;
        good = c.pos();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;
    use super::*;

    /// A KDBX 4 file: header with a cipher id and a seed, its hash, an HMAC,
    /// two blocks and the empty last one. The seed for the mutation tests.
    pub fn seed() -> Vec<u8> {
        let mut d = SIG.to_vec();
        d.extend_from_slice(&[1, 0, 4, 0]);
        for (id, data) in [(2u8, &[0x31u8; 16][..]), (4, &[9; 32]), (0, b"\r\n\r\n")] {
            d.push(id);
            d.extend_from_slice(&(data.len() as u32).to_le_bytes());
            d.extend_from_slice(data);
        }
        let hash = Sha256::digest(&d);
        d.extend_from_slice(&hash);
        d.extend_from_slice(&[0x55; 32]);
        for n in [40u32, 7, 0] {
            d.extend_from_slice(&[0x66; 32]);
            d.extend_from_slice(&n.to_le_bytes());
            d.extend(std::iter::repeat_n(0x77, n as usize));
        }
        d
    }

    #[test]
    fn valid_is_exact_with_trailing_bytes() {
        let s = seed();
        let mut d = s.clone();
        d.extend_from_slice(&[0xAB; 100]);
        let v = run("kdbx", &d).unwrap();
        assert_eq!(v.status, Status::Complete, "{:?}", v.notes);
        assert_eq!(v.length, s.len() as u64);
    }

    #[test]
    fn kdbx3_is_unvalidated() {
        let mut d = SIG.to_vec();
        d.extend_from_slice(&[1, 0, 3, 0, 2, 16, 0]);
        d.extend_from_slice(&[0x31; 16]);
        d.extend_from_slice(&[0, 4, 0, 13, 10, 13, 10]);
        d.extend_from_slice(&[0x99; 64]);
        let v = run("kdbx", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Unvalidated, d.len() as u64));
    }

    #[test]
    fn truncated_is_partial() {
        let s = seed();
        for cut in [6, 13, 40, 120, s.len() - 36, s.len() - 1] {
            let v = run("kdbx", &s[..cut]).unwrap();
            assert_eq!(v.status, Status::Partial, "cut {cut}");
            assert_eq!(v.length, cut as u64);
        }
    }

    #[test]
    fn garbage_refused() {
        assert!(run("kdbx", &[0u8; 200]).is_none());
        let mut d = seed();
        d[10] = 5; // major version 5
        assert!(run("kdbx", &d).is_none());
        let mut d = seed();
        d[12] = 40; // no such header field
        assert!(run("kdbx", &d).is_none());
        // The header changed: its hash no longer matches.
        let mut d = seed();
        d[20] ^= 1;
        let v = run("kdbx", &d).unwrap();
        assert_eq!(v.status, Status::Partial);
    }

    #[test]
    fn hostile_lengths_bounded() {
        // A header field claiming 4 GiB.
        let mut d = seed();
        d[13..17].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(run("kdbx", &d).is_none());
        // A block claiming 2 GiB - 1: cut by the window.
        let s = seed();
        let first = s.len() - 3 * 36 - 47 + 32;
        let mut d = s.clone();
        d[first..first + 4].copy_from_slice(&(i32::MAX as u32).to_le_bytes());
        let v = run("kdbx", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d.len() as u64));
        d[first..first + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("kdbx", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, (first - 32) as u64));
    }
}
