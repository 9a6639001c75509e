//! Microsoft Cabinet: a header giving the cabinet's size, folders of data
//! blocks that must fill it.
//!
//! Structure (MS-CAB 2.1-2.4): `CFHEADER` (`MSCF`, reserved 0, `cbCabinet`
//! u32 = the file's size, `coffFiles`, version 1.3, `cFolders`, `cFiles`,
//! flags: 1 previous cabinet, 2 next cabinet, 4 reserve fields present);
//! optional reserve sizes (`cbCFHeader` u16, `cbCFFolder` u8, `cbCFData`
//! u8) and reserved bytes; optional previous/next cabinet and disk names
//! (zero-terminated); `CFFOLDER` entries (`coffCabStart` u32, `cCFData`
//! u16, `typeCompress` u16, reserve); the `CFFILE` table at `coffFiles`;
//! each folder's `CFDATA` blocks from `coffCabStart` (`csum` u32, `cbData`
//! u16, `cbUncomp` u16, reserve, `cbData` bytes).
//!
//! Checks: version 1.3; offsets inside the cabinet (a folder of no data
//! block, whose files are all empty, may start at its end); every folder's data
//! blocks walked (each at most 61,440 bytes of data and 32,768 uncompressed)
//! and the last block of the last folder ending exactly at `cbCabinet`.
//!
//! * `None`: a header that fails those checks;
//! * `Complete`: the data blocks fill the cabinet; length = `cbCabinet`;
//! * `Partial`: `cbCabinet` is past the window (length = window), or the
//!   blocks do not reach it (length = the end of the last block).
//!
//! Reads 8 bytes (plus reserve) per data block: linear, at most 65,535
//! folders of at most 65,535 blocks, each step at least 8 bytes forward.

use super::Verdict;
use super::read::Src;

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<36>(0)?;
    let u32at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let u16at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
    if &h[..4] != b"MSCF" || u32at(4) != 0 || h[24] != 3 || h[25] != 1 {
        return None;
    }
    let size = u64::from(u32at(8));
    let coff_files = u64::from(u32at(16));
    let folders = u64::from(u16at(26));
    let flags = u16at(30);
    if size < 36 || coff_files >= size || folders == 0 || flags & !7 != 0 {
        return None;
    }
    let mut p = 36u64;
    let (mut res_folder, mut res_data) = (0u64, 0u64);
    if flags & 4 != 0 {
        let r = src.bytes::<4>(36)?;
        res_folder = u64::from(r[2]);
        res_data = u64::from(r[3]);
        p += 4 + u64::from(u16::from_le_bytes([r[0], r[1]]));
    }
    let mut scratch = Vec::new();
    for bit in [1u16, 2] {
        if flags & bit != 0 {
            for _ in 0..2 {
                let z = src.find(&[0], p, p + 256, &mut scratch)?;
                p = z + 1;
            }
        }
    }
    if size > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let mut last_end = 0u64;
    for _ in 0..folders {
        let f = src.bytes::<8>(p)?;
        p += 8 + res_folder;
        let mut q = u64::from(u32::from_le_bytes([f[0], f[1], f[2], f[3]]));
        let blocks = u16::from_le_bytes([f[4], f[5]]);
        // A folder of no data block (its files all empty) starts at the
        // cabinet's end.
        if q < p || q > size || (q == size && blocks > 0) || f[6] & 0xF0 != 0 {
            return None;
        }
        for _ in 0..blocks {
            let Some(d) = src.bytes::<8>(q) else {
                return Some(Verdict::partial(src.len(), src.cut_note()));
            };
            let cb = u64::from(u16::from_le_bytes([d[4], d[5]]));
            let unc = u16::from_le_bytes([d[6], d[7]]);
            if cb > 61_440 || unc > 32_768 {
                return Some(Verdict::partial(
                    q,
                    format!("bad data block at {q} (damaged or not contiguous)"),
                ));
            }
            q += 8 + res_data + cb;
            if q > size {
                return Some(Verdict::partial(
                    last_end.max(p),
                    "data blocks run past the cabinet's size",
                ));
            }
        }
        last_end = last_end.max(q);
    }
    if last_end != size {
        return Some(Verdict::partial(
            last_end,
            format!("data blocks end at {last_end}, cabinet size {size}"),
        ));
    }
    let mut v = Verdict::complete(size);
    if flags & 3 != 0 {
        v = v.with_note("part of a cabinet set");
    }
    Some(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A cabinet with one stored folder of `blocks` data blocks.
    pub fn make(blocks: &[&[u8]]) -> Vec<u8> {
        let name = b"file.txt\0";
        let data_at = 36 + 8 + 16 + name.len();
        let size = data_at + blocks.iter().map(|b| 8 + b.len()).sum::<usize>();
        let total: usize = blocks.iter().map(|b| b.len()).sum();
        let mut f = b"MSCF\0\0\0\0".to_vec();
        f.extend_from_slice(&(size as u32).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&44u32.to_le_bytes()); // coffFiles
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&[3, 1, 1, 0, 1, 0, 0, 0, 0x34, 0x12, 0, 0]);
        f.extend_from_slice(&(data_at as u32).to_le_bytes());
        f.extend_from_slice(&(blocks.len() as u16).to_le_bytes());
        f.extend_from_slice(&0u16.to_le_bytes()); // stored
        f.extend_from_slice(&(total as u32).to_le_bytes());
        f.extend_from_slice(&[0u8; 12]);
        f.extend_from_slice(name);
        for b in blocks {
            f.extend_from_slice(&0u32.to_le_bytes());
            f.extend_from_slice(&(b.len() as u16).to_le_bytes());
            f.extend_from_slice(&(b.len() as u16).to_le_bytes());
            f.extend_from_slice(b);
        }
        f
    }

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        make(&[b"first block of data", b"second"])
    }

    #[test]
    fn valid_cut_garbage() {
        let f = seed();
        assert_complete("cab", &f);
        assert_prefixes("cab", &f);
        let mut junk = b"MSCF\0\0\0\0".to_vec();
        junk.extend((0..300u32).map(|i| (i * 29 + 5) as u8));
        assert!(run("cab", &junk).is_none());
        // Blocks that do not fill the cabinet.
        let mut g = seed();
        let n = g.len() as u32 + 10;
        g[8..12].copy_from_slice(&n.to_le_bytes());
        g.extend_from_slice(&[0u8; 10]);
        let v = run("cab", &g).unwrap();
        assert_eq!(v.status, Status::Partial);
    }

    #[test]
    fn hostile_size_is_bounded() {
        let mut f = seed();
        f[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("cab", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
    }

    /// A cabinet whose only file is empty: its folder holds no data block
    /// and starts at the cabinet's end.
    #[test]
    fn folder_of_no_block() {
        let f = make(&[]);
        assert_complete("cab", &f);
        let mut g = f.clone();
        g.extend_from_slice(b"MSCF after it");
        let v = run("cab", &g).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, f.len() as u64));
        // A folder that claims a block but starts at the end is refused.
        let mut h = f.clone();
        h[40] = 1;
        assert!(run("cab", &h).is_none());
    }
}
