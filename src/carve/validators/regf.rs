//! Windows NT registry hive (regf): the base block, then hive bins that add
//! up to the size it records, each filled exactly by its cells.
//!
//! Structure (libyal libregf "Windows NT Registry File (REGF) format" 2-4):
//! a 4096-byte base block: `regf`, primary and secondary sequence numbers,
//! a FILETIME, major version 1 at 0x14, minor version at 0x18, file type
//! at 0x1C, format 1 at 0x20, root cell offset at 0x24, the hive bins data
//! size at 0x28 (a multiple of 4096), and at 0x1FC the XOR of the 127
//! dwords before it. Then hive bins: `hbin`, the bin's offset from the
//! first bin (u32), its size (u32, a multiple of 4096); from 32 bytes in,
//! cells: a size (i32, negative when allocated) whose magnitude is a
//! multiple of 8, the cells filling the bin to its end.
//!
//! Checked: the base block's versions, format and checksum; every bin's
//! signature, offset and size; every cell size (so that a bin whose tail
//! is someone else's data does not pass). A base block whose checksum is
//! stale passes only when every bin checks out (`Complete`, noted).
//!
//! * `None`: the base block's signature or version is wrong, or its
//!   checksum is and the bins do not all check out.
//! * `Complete`: the bins add up to the recorded size; length = 4096 +
//!   that size, or, for a hive the kernel saved (its file named in the base
//!   block), the next multiple of 256 KiB when only zeros lie between (see
//!   [`padded_end`]).
//! * `Partial`: the bins run past the window (length = window) or a bin or
//!   cell does not check out (length = end of the last good bin).

use super::read::Src;
use super::{Status, Verdict};

const BASE: u64 = 4096;
/// The step in which Windows grows a hive's primary file.
const GROW: u64 = 256 << 10;

pub fn validate(src: Src) -> Option<Verdict> {
    let mut b = [0u8; 512];
    if !src.read_exact(0, &mut b) {
        let n = src.read(0, &mut b);
        return (n >= 4 && b[..4] == *b"regf").then(|| Verdict::partial(src.len(), src.cut_note()));
    }
    let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    if b[..4] != *b"regf" || word(0x14) != 1 || word(0x18) > 6 || word(0x20) != 1 {
        return None;
    }
    let mut xor = (0..127).fold(0u32, |x, i| x ^ word(i * 4));
    if xor == 0 {
        xor = 1;
    } else if xor == u32::MAX {
        xor = u32::MAX - 1;
    }
    let v = bins(&src, &b, u64::from(word(0x28)));
    if xor == word(0x1FC) {
        return v;
    }
    // A stale checksum (a writer that did not update it, nt_hive2's
    // `NewDirtyHive.clean1`): the hive only when every bin checks out.
    let mut v = v.filter(|v| v.status == Status::Complete)?;
    v.notes.push(format!(
        "base block checksum {:#x}, its dwords XOR to {xor:#x}",
        word(0x1FC)
    ));
    Some(v)
}

/// The hive bins after the base block `b`, `data` bytes of them.
fn bins(src: &Src, b: &[u8; 512], data: u64) -> Option<Verdict> {
    if data == 0 || !data.is_multiple_of(4096) {
        return Some(Verdict::partial(
            BASE.min(src.len()),
            format!("hive bins size {data}"),
        ));
    }
    let end = BASE + data;
    let mut at = BASE;
    let mut bins = 0u64;
    while at < end {
        let Some(h) = src.bytes::<12>(at) else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        let off = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        let size = u64::from(u32::from_le_bytes([h[8], h[9], h[10], h[11]]));
        if h[..4] != *b"hbin"
            || u64::from(off) != at - BASE
            || size == 0
            || size % 4096 != 0
            || at + size > end
        {
            return Some(Verdict::partial(at, format!("bad hive bin at {at}")));
        }
        if !src.has(at, size) {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        match cells(src, at + 32, at + size) {
            Cells::Ok => {}
            Cells::Cut => return Some(Verdict::partial(src.len(), src.cut_note())),
            Cells::Bad(c) => {
                return Some(Verdict::partial(
                    at,
                    format!("bad cell at {c} in bin at {at}"),
                ));
            }
        }
        bins += 1;
        at += size;
    }
    let file_end = padded_end(src, b, end);
    let mut v = Verdict::complete(file_end);
    v.notes.push(format!("{bins} hive bin(s)"));
    if file_end > end {
        v.notes.push(format!(
            "zero padding from {end} to the 256 KiB step at {file_end}"
        ));
    }
    Some(v)
}

/// Windows grows a hive's file in steps of 256 KiB and fills the step's
/// tail with zeros (libyal libregf 2: "the primary file can be larger than
/// the hive bins data size"; every hive the kernel saved in the wild
/// corpus is a multiple of 256 KiB). A hive the kernel saved names its
/// file in the base block (the last 31 UTF-16 characters of its path at
/// 0x30); hives written by other tools (hivex, test generators) leave that
/// field empty and end at their last bin. So: a named hive whose data end
/// is followed by zeros up to the next 256 KiB multiple ends there;
/// anything else (no name, a non-zero byte, the window cut first) ends at
/// `end`. Reads at most 256 KiB.
fn padded_end(src: &Src, base: &[u8; 512], end: u64) -> u64 {
    if base[0x30..0x70].iter().all(|&x| x == 0) {
        return end;
    }
    let step = end.next_multiple_of(GROW);
    let mut buf = [0u8; 4096];
    let mut at = end;
    while at < step {
        let n = (step - at).min(buf.len() as u64) as usize;
        if !src.read_exact(at, &mut buf[..n]) || buf[..n].iter().any(|&x| x != 0) {
            return end;
        }
        at += n as u64;
    }
    step
}

enum Cells {
    Ok,
    Cut,
    Bad(u64),
}

/// Walks the cells of `[from, to)`: each reads 4 bytes and advances at least
/// 8, so the walk is linear in the bin's size.
fn cells(src: &Src, from: u64, to: u64) -> Cells {
    let mut at = from;
    while at < to {
        let Some(s) = src.bytes::<4>(at) else {
            return Cells::Cut;
        };
        let n = u64::from(i32::from_le_bytes(s).unsigned_abs());
        if n < 8 || n % 8 != 0 || at + n > to {
            return Cells::Bad(at);
        }
        at += n;
    }
    Cells::Ok
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    fn with_checksum(mut d: Vec<u8>) -> Vec<u8> {
        let x = (0..127).fold(0u32, |x, i| {
            x ^ u32::from_le_bytes([d[i * 4], d[i * 4 + 1], d[i * 4 + 2], d[i * 4 + 3]])
        });
        d[0x1FC..0x200].copy_from_slice(&x.to_le_bytes());
        d
    }

    fn bin(off: u32, size: u32) -> Vec<u8> {
        let mut b = b"hbin".to_vec();
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&size.to_le_bytes());
        b.resize(32, 0);
        // An allocated 96-byte cell, then one free cell to the end.
        b.extend_from_slice(&(-96i32).to_le_bytes());
        b.resize(32 + 96, 0x11);
        b.extend_from_slice(&(size as i32 - 32 - 96).to_le_bytes());
        b.resize(size as usize, 0);
        b
    }

    /// A hive of two bins (4096 and 8192 bytes): the seed for the mutation
    /// property test.
    pub fn seed() -> Vec<u8> {
        let mut d = vec![0u8; 4096];
        d[..4].copy_from_slice(b"regf");
        d[4] = 1;
        d[8] = 1;
        d[0x14] = 1;
        d[0x18] = 5;
        d[0x20] = 1;
        d[0x24] = 0x20;
        d[0x28..0x2C].copy_from_slice(&12288u32.to_le_bytes());
        let mut d = with_checksum(d);
        d.extend(bin(0, 4096));
        d.extend(bin(4096, 8192));
        d
    }

    #[test]
    fn valid_is_exact_with_trailing_bytes() {
        let s = seed();
        let mut d = s.clone();
        d.extend_from_slice(&[0xAB; 5000]);
        let v = run("regf", &d).unwrap();
        assert_eq!(v.status, Status::Complete, "{:?}", v.notes);
        assert_eq!(v.length, s.len() as u64);
    }

    #[test]
    fn truncated_is_partial() {
        let s = seed();
        for cut in [4, 100, 4096, 5000, 8192 + 100, s.len() - 1] {
            let v = run("regf", &s[..cut]).unwrap();
            assert_eq!(v.status, Status::Partial, "cut {cut}");
            assert_eq!(v.length, cut as u64);
        }
    }

    #[test]
    fn garbage_refused() {
        assert!(run("regf", &[0u8; 9000]).is_none());
        // A stale checksum: refused unless every bin checks out.
        let mut d = seed();
        d[0x30] ^= 1;
        let v = run("regf", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, 12288 + 4096));
        assert!(
            v.notes.iter().any(|n| n.contains("checksum")),
            "{:?}",
            v.notes
        );
        for (at, len) in [(8192, 100), (4096 + 32, 4)] {
            let mut bad = d.clone();
            bad[at..at + len].fill(0x5A);
            assert!(run("regf", &bad).is_none(), "{at}");
        }
        assert!(run("regf", &d[..8000]).is_none());
        // A second bin overwritten by foreign data.
        let mut d = seed();
        d[8192..].fill(0x5A);
        let v = run("regf", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 8192));
        // A cell size that overruns its bin.
        let mut d = seed();
        d[4096 + 32..4096 + 36].copy_from_slice(&(-5000i32).to_le_bytes());
        let v = run("regf", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 4096));
    }

    /// The seed as the kernel saves it: its path in the base block.
    fn named() -> Vec<u8> {
        let mut d = seed();
        for (i, c) in "\\??\\C:\\Users\\u\\ntuser.dat".encode_utf16().enumerate() {
            d[0x30 + 2 * i..0x32 + 2 * i].copy_from_slice(&c.to_le_bytes());
        }
        let mut d = with_checksum(d[..4096].to_vec());
        d.extend_from_slice(&seed()[4096..]);
        d
    }

    #[test]
    fn kernel_saved_hive_ends_at_its_256k_step() {
        let step = 256 << 10;
        // Named, zeros to the step, then foreign bytes: the step.
        let mut d = named();
        let data_end = d.len();
        d.resize(step, 0);
        d.extend_from_slice(&[0xAB; 5000]);
        let v = run("regf", &d).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Complete, step as u64),
            "{:?}",
            v.notes
        );
        // A non-zero byte inside the padding: the data end.
        let mut e = d.clone();
        e[step - 1] = 1;
        let v = run("regf", &e).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, data_end as u64));
        // The window ends inside the padding: the data end.
        let v = run("regf", &d[..step - 10]).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, data_end as u64));
        // Not named (a tool's hive): zeros after it are not its own.
        let mut e = seed();
        e.resize(step + 100, 0);
        let v = run("regf", &e).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, data_end as u64));
    }

    #[test]
    fn hostile_lengths_bounded() {
        // Hive bins size of 4 GiB - 4096: cut by the window.
        let mut d = seed();
        d[0x28..0x2C].copy_from_slice(&(u32::MAX - 4095).to_le_bytes());
        let mut d = with_checksum(d[..4096].to_vec());
        d.extend_from_slice(&seed()[4096..]);
        let v = run("regf", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, d.len() as u64));
        // A bin claiming 4 GiB.
        let mut d = seed();
        d[4096 + 8..4096 + 12].copy_from_slice(&(u32::MAX - 4095).to_le_bytes());
        let v = run("regf", &d).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 4096));
    }
}
