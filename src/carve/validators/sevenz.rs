//! 7z: a 32-byte signature header that points at the header at the end.
//!
//! Structure (7-Zip `DOC/7zFormat.txt`, SignatureHeader): `37 7A BC AF 27 1C`,
//! version major (0) and minor, `StartHeaderCRC` (CRC-32 of the next 20
//! bytes), then the start header: `NextHeaderOffset` (u64 LE, from the end of
//! the signature header), `NextHeaderSize` (u64 LE) and `NextHeaderCRC`
//! (CRC-32 of the next header). The packed streams lie between the
//! signature header and the next header, which is the last thing in the
//! archive: the file is `32 + NextHeaderOffset + NextHeaderSize` bytes.
//!
//! Checks: the start header's CRC; major version 0; the next header's CRC
//! over its bytes (read in pieces) and its first byte, `kHeader` (0x01) or
//! `kEncodedHeader` (0x17). An empty archive is the signature header alone,
//! with an all-zero start header.
//!
//! * `None`: a bad start header CRC or version, or a next header that does
//!   not begin with one of the two ids;
//! * `Complete`: the next header's CRC matches; length = its end;
//! * `Partial`: the next header runs past the window (length = window) or its
//!   CRC does not match (length = its declared end, when in the window).
//!
//! Reads 32 bytes plus the next header once: linear, nothing allocated in
//! proportion to a length field.

use super::Verdict;
use super::read::Src;

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<32>(0)?;
    if h[..6] != [0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C] || h[6] != 0 {
        return None;
    }
    let crc = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if crc32fast::hash(&h[12..32]) != crc {
        return None;
    }
    let u64at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[o..o + 8]);
        u64::from_le_bytes(b)
    };
    let (off, size) = (u64at(12), u64at(20));
    let want = u32::from_le_bytes([h[28], h[29], h[30], h[31]]);
    if off == 0 && size == 0 {
        return Some(Verdict::complete(32).with_note("empty archive (signature header only)"));
    }
    if size == 0 {
        return None;
    }
    let start = 32u64.checked_add(off)?;
    let end = start.checked_add(size)?;
    if start >= src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    match src.u8(start) {
        Some(0x01 | 0x17) => {}
        _ => return None,
    }
    if end > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let mut hc = crc32fast::Hasher::new();
    let mut scratch = Vec::new();
    src.for_each_chunk(start, size, &mut scratch, |b| hc.update(b));
    if hc.finalize() != want {
        return Some(Verdict::partial(
            end,
            "next header CRC does not match (damaged or not contiguous)",
        ));
    }
    let kind = if src.u8(start) == Some(0x17) {
        "encoded (compressed or encrypted) header"
    } else {
        "plain header"
    };
    Some(Verdict::complete(end).with_note(kind))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A 7z with `payload` as its packed streams and a plain next header.
    pub fn make(payload: &[u8], header: &[u8]) -> Vec<u8> {
        let mut start = Vec::new();
        start.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        start.extend_from_slice(&(header.len() as u64).to_le_bytes());
        start.extend_from_slice(&crc32fast::hash(header).to_le_bytes());
        let mut f = vec![0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C, 0, 4];
        f.extend_from_slice(&crc32fast::hash(&start).to_le_bytes());
        f.extend_from_slice(&start);
        f.extend_from_slice(payload);
        f.extend_from_slice(header);
        f
    }

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        make(b"packed stream bytes here", &[0x01, 0x04, 0x06, 0x00, 0x00])
    }

    #[test]
    fn valid_and_empty() {
        let f = seed();
        assert_complete("7z", &f);
        assert_prefixes("7z", &f);
        let e = make(b"", b"");
        assert_eq!(e.len(), 32);
        assert_complete("7z", &e);
    }

    #[test]
    fn damaged_and_garbage() {
        let mut f = seed();
        let n = f.len();
        f[n - 2] ^= 1; // next header CRC
        let v = run("7z", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, n as u64));
        let mut g = seed();
        g[14] ^= 1; // start header CRC
        assert!(run("7z", &g).is_none());
        let mut junk = b"7z\xBC\xAF\x27\x1C\x00\x04".to_vec();
        junk.extend((0..200u32).map(|i| (i * 37) as u8));
        assert!(run("7z", &junk).is_none());
    }

    #[test]
    fn hostile_length_is_bounded() {
        // A next header said to be 2^62 bytes away: cut by the window.
        let mut start = Vec::new();
        start.extend_from_slice(&(1u64 << 62).to_le_bytes());
        start.extend_from_slice(&100u64.to_le_bytes());
        start.extend_from_slice(&0u32.to_le_bytes());
        let mut f = vec![0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C, 0, 4];
        f.extend_from_slice(&crc32fast::hash(&start).to_le_bytes());
        f.extend_from_slice(&start);
        f.extend_from_slice(&[0u8; 64]);
        let v = run("7z", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        // Offsets that overflow: refused.
        let mut s2 = start.clone();
        s2[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let mut g = vec![0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C, 0, 4];
        g.extend_from_slice(&crc32fast::hash(&s2).to_le_bytes());
        g.extend_from_slice(&s2);
        assert!(run("7z", &g).is_none());
    }
}
