//! tar: 512-byte headers, each with its data, to two zero blocks.
//!
//! Structure (POSIX.1-2001 ustar/pax, GNU tar): a header block per member
//! with `size` at 124 (12 bytes octal, or base-256 when the first byte has
//! its top bit set), `chksum` at 148 (octal; the sum of the header's bytes
//! with the checksum field as spaces, unsigned or signed), `typeflag` at
//! 156 and the magic at 257; the member's data in `ceil(size / 512)` blocks;
//! pax extended headers (`x`) may give the next member's `size`; old GNU
//! sparse members (`S`) may carry extension headers (byte 482, then 504 of
//! each); links, devices, directories and FIFOs (`1`-`6`) have no data. The
//! archive ends with two zero blocks, and writers that work in records
//! (GNU tar, bsdtar, Python's tarfile: 20 blocks of 512) fill the last
//! record with zeros.
//!
//! * `None`: the first header's checksum does not match;
//! * `Complete`: the end-of-archive blocks were found; length = after them,
//!   extended to the 10,240-byte record when the bytes up to it are zeros
//!   (zero filler after an unpadded archive cannot be told from a record's
//!   padding: such an archive comes out longer);
//! * `Partial`: a member runs past the window (length = window) or a block
//!   that is neither a header nor zeros follows a member (length = there).
//!
//! Each step reads a header (and at most 64 KiB of a pax header) and moves
//! forward by at least 512 bytes: linear.

use super::Verdict;
use super::read::Src;

const RECORD: u64 = 10_240;
/// pax header data read for a `size` record.
const MAX_PAX: u64 = 64 * 1024;

fn octal(f: &[u8]) -> Option<u64> {
    if f[0] & 0x80 != 0 {
        // base-256, big-endian, first byte's top bit the marker
        if f.len() < 9 || f[0] != 0x80 || f[1..f.len() - 8].iter().any(|&b| b != 0) {
            return None;
        }
        let mut v = 0u64;
        for &b in &f[f.len() - 8..] {
            v = (v << 8) | u64::from(b);
        }
        return Some(v);
    }
    let mut v = 0u64;
    let mut seen = false;
    for &b in f {
        match b {
            b'0'..=b'7' => {
                v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
                seen = true;
            }
            b' ' | 0 if !seen => {}
            b' ' | 0 => break,
            _ => return None,
        }
    }
    Some(v)
}

fn checksum_ok(h: &[u8; 512]) -> bool {
    let Some(want) = octal(&h[148..156]) else {
        return false;
    };
    let (mut u, mut s) = (0u64, 0i64);
    for (i, &b) in h.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        u += u64::from(b);
        s += i64::from(b as i8);
    }
    want == u || i64::try_from(want).is_ok_and(|w| w == s)
}

/// The `size` record of pax header data, if any.
fn pax_size(src: &Src, at: u64, len: u64) -> Option<u64> {
    let n = len.min(MAX_PAX) as usize;
    let mut b = vec![0u8; n];
    if !src.read_exact(at, &mut b) {
        return None;
    }
    let mut i = 0usize;
    while i < n {
        let sp = b[i..].iter().position(|&c| c == b' ')? + i;
        let rlen: usize = std::str::from_utf8(&b[i..sp]).ok()?.parse().ok()?;
        let end = i.checked_add(rlen)?;
        if rlen == 0 || end > n {
            return None;
        }
        let rec = &b[sp + 1..end];
        if let Some(v) = rec.strip_prefix(b"size=") {
            let v = v.strip_suffix(b"\n").unwrap_or(v);
            return std::str::from_utf8(v).ok()?.parse().ok();
        }
        i = end;
    }
    None
}

pub fn validate(src: Src) -> Option<Verdict> {
    let mut pos = 0u64;
    let mut next_size: Option<u64> = None;
    let mut members = 0u64;
    let mut h = [0u8; 512];
    loop {
        if !src.read_exact(pos, &mut h) {
            return if members == 0 {
                None
            } else {
                Some(Verdict::partial(src.len(), src.cut_note()))
            };
        }
        if h.iter().all(|&b| b == 0) {
            if members == 0 {
                return None;
            }
            // End of archive: a second zero block, then the record's padding.
            let mut z = [0u8; 512];
            if !src.read_exact(pos + 512, &mut z) {
                return Some(Verdict::partial(src.len(), src.cut_note()));
            }
            if z.iter().any(|&b| b != 0) {
                return Some(Verdict::complete(pos + 512).with_note("one end-of-archive block"));
            }
            let mut end = pos + 1024;
            let rec = end.next_multiple_of(RECORD);
            let mut q = end;
            while q < rec {
                let n = src.read(q, &mut z);
                if z[..n].iter().any(|&b| b != 0) {
                    break;
                }
                if n < 512 {
                    // Zeros to the window's end: the record may go on.
                    return Some(Verdict::partial(src.len(), src.cut_note()));
                }
                q += 512;
            }
            if q == rec {
                end = rec;
            }
            return Some(Verdict::complete(end).with_note(format!("{members} members")));
        }
        if !checksum_ok(&h) {
            return if members == 0 {
                None
            } else {
                Some(Verdict::partial(
                    pos,
                    format!("no header at {pos} and no end-of-archive blocks"),
                ))
            };
        }
        members += 1;
        let ty = h[156];
        let mut size = match octal(&h[124..136]) {
            Some(s) => s,
            None => return Some(Verdict::partial(pos, "bad size field")),
        };
        if let Some(s) = next_size.take() {
            size = s;
        }
        if matches!(ty, b'1'..=b'6') {
            size = 0;
        }
        let mut data = pos + 512;
        if ty == b'S' && h[482] != 0 {
            // Old GNU sparse extension headers.
            loop {
                let Some(flag) = src.u8(data + 504) else {
                    return Some(Verdict::partial(src.len(), src.cut_note()));
                };
                data += 512;
                if flag == 0 {
                    break;
                }
            }
        }
        if ty == b'x' {
            next_size = pax_size(&src, data, size);
        }
        let Some(end) = size
            .checked_add(511)
            .map(|s| s / 512 * 512)
            .and_then(|s| data.checked_add(s))
        else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        if end > src.len() {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        pos = end;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    fn header(name: &str, ty: u8, size: usize) -> [u8; 512] {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(b"0000644");
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        h[156] = ty;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h
    }

    /// An archive of `files`, padded to a record when `record`.
    pub fn make(files: &[(&str, &[u8])], record: bool) -> Vec<u8> {
        let mut t = Vec::new();
        for (n, d) in files {
            t.extend_from_slice(&header(n, b'0', d.len()));
            t.extend_from_slice(d);
            t.resize(t.len().next_multiple_of(512), 0);
        }
        t.extend_from_slice(&[0u8; 1024]);
        if record {
            t.resize(t.len().next_multiple_of(10_240), 0);
        }
        t
    }

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        make(&[("a.txt", b"hello"), ("b.txt", &[7u8; 700])], true)
    }

    #[test]
    fn valid_record_and_cut() {
        let f = make(&[("a.txt", b"hello"), ("dir/", b"")], true);
        assert_eq!(f.len(), 10_240);
        assert_complete("tar", &f);
        assert_prefixes_step("tar", &f, 97);
        let s = make(&[("a.txt", b"hello"), ("b.txt", &[7u8; 700])], false);
        let v = run("tar", &s).unwrap();
        assert_eq!(v.status, Status::Partial, "zeros to the window's end");
        let mut img = s.clone();
        img.extend_from_slice(b"foreign bytes after the archive");
        let v = run("tar", &img).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, s.len() as u64));
    }

    #[test]
    fn garbage_and_hostile_size() {
        let mut junk = vec![0x41u8; 600];
        junk[257..262].copy_from_slice(b"ustar");
        assert!(run("tar", &junk).is_none());
        let mut h = header("big", b'0', 0);
        h[124..136].copy_from_slice(b"77777777777\0");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        let mut f = h.to_vec();
        f.extend_from_slice(&[0u8; 2048]);
        let v = run("tar", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
    }
}
