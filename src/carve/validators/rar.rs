//! RAR: a chain of CRC-protected blocks from the marker to the end block.
//!
//! **RAR 5.0** (RARLAB "RAR 5.0 archive format"): signature
//! `52 61 72 21 1A 07 01 00`, then blocks of `HeaderCRC32` (u32 LE, over the
//! rest of the header from `HeaderSize` on), `HeaderSize` (vint: bytes from
//! the type field to the end of the header), `HeaderType`, `HeaderFlags`
//! (vints), `ExtraAreaSize` if flags & 1, `DataSize` if flags & 2, ...; the
//! data area (DataSize bytes) follows the header. Types: 1 main, 2 file,
//! 3 service, 4 encryption, 5 end of archive. The archive ends with the end
//! of archive block. After an encryption header the headers are encrypted
//! (16-byte IV, then AES blocks) and cannot be walked without the password.
//!
//! **RAR 1.5-4.x** (RARLAB technote): blocks of `HEAD_CRC` (u16: the low 16
//! bits of the CRC-32 of the header from `HEAD_TYPE` on), `HEAD_TYPE` (u8),
//! `HEAD_FLAGS` (u16), `HEAD_SIZE` (u16), and, when flags & 0x8000, a u32
//! `ADD_SIZE` (the packed size of a file block, with `HIGH_PACK_SIZE` at 32
//! when flags & 0x100) of data after the header. The marker block
//! `52 61 72 21 1A 07 00` is first, then the archive header (0x73), file
//! (0x74), comment/AV/sub/recovery/sign (0x75-0x7A) blocks and, since RAR
//! 2.9, an end of archive block (0x7B). Older archives stop after their last
//! block: the file ends where the block chain does (a next block whose
//! header CRC fails; the old sub-blocks 0x75-0x79 CRC their data with
//! the header). When the archive header says the headers are
//! encrypted (flag 0x80) the blocks after it cannot be walked.
//!
//! * `None`: the first block after the signature fails its CRC or is not an
//!   archive header;
//! * `Complete`: the chain reached the end block (RAR 5, RAR >= 2.9) or, in
//!   an archive without one, ended at a block boundary followed by bytes that
//!   are no block;
//! * `Partial`: a block runs past the window (length = window) or a header
//!   fails its CRC after a chain that needed an end block (length = the end
//!   of the last good block);
//! * `Unvalidated`: encrypted headers (length = window).
//!
//! Each step reads one header (at most 2 MiB for RAR 5, 64 KiB for RAR 4,
//! CRC'd in pieces) and moves forward by at least 7 bytes: linear in the
//! bytes read.

use super::Verdict;
use super::read::Src;

/// RAR 5 headers are at most 2 MiB (the format's limit).
const MAX_HEADER5: u64 = 2 << 20;

/// A RAR 5 vint at `pos`: (value, bytes).
fn vint(src: &Src, pos: u64) -> Option<(u64, u64)> {
    let mut v = 0u64;
    for i in 0..10u64 {
        let b = src.u8(pos + i)?;
        v |= u64::from(b & 0x7F).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

fn crc_of(src: &Src, from: u64, len: u64) -> u32 {
    let mut hc = crc32fast::Hasher::new();
    let mut scratch = Vec::new();
    src.for_each_chunk(from, len, &mut scratch, |b| hc.update(b));
    hc.finalize()
}

enum Block5 {
    /// (type, flags of the end block, block end)
    Ok(u64, u64, u64),
    Cut,
    Bad,
}

fn block5(src: &Src, pos: u64) -> Block5 {
    let Some(crc) = src.u32le(pos) else {
        return Block5::Cut;
    };
    let Some((size, n)) = vint(src, pos + 4) else {
        return if src.len() < pos + 14 {
            Block5::Cut
        } else {
            Block5::Bad
        };
    };
    if size == 0 || size > MAX_HEADER5 {
        return Block5::Bad;
    }
    let body = pos + 4 + n;
    let hend = body + size;
    // Type and flags before the CRC (which may read 2 MiB): a known type,
    // no unknown flag bits.
    match (vint(src, body), vint(src, body + 1)) {
        (Some((1..=5, 1)), Some((f, _))) if f < 0x80 => {}
        (None, _) | (_, None) if src.len() < body + 12 => return Block5::Cut,
        _ => return Block5::Bad,
    }
    if hend > src.len() {
        return Block5::Cut;
    }
    if crc_of(src, pos + 4, n + size) != crc {
        return Block5::Bad;
    }
    let mut p = body;
    let next = |p: &mut u64| -> Option<u64> {
        let (v, k) = vint(src, *p)?;
        *p += k;
        (*p <= hend).then_some(v)
    };
    let (Some(ty), Some(flags)) = (next(&mut p), next(&mut p)) else {
        return Block5::Bad;
    };
    if flags & 1 != 0 && next(&mut p).is_none() {
        return Block5::Bad;
    }
    let data = if flags & 2 != 0 {
        match next(&mut p) {
            Some(d) => d,
            None => return Block5::Bad,
        }
    } else {
        0
    };
    if !(1..=5).contains(&ty) {
        return Block5::Bad;
    }
    // End of archive flags (after the common fields).
    let eflags = if ty == 5 {
        next(&mut p).unwrap_or(0)
    } else {
        0
    };
    match hend.checked_add(data) {
        Some(end) if end <= src.len() => Block5::Ok(ty, eflags, end),
        _ => Block5::Cut,
    }
}

/// RAR 5.0.
pub fn validate5(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"Rar!\x1A\x07\x01\x00") {
        return None;
    }
    let mut pos = 8u64;
    let mut blocks = 0u64;
    loop {
        match block5(&src, pos) {
            Block5::Ok(ty, eflags, end) => {
                if blocks == 0 && ty != 1 && ty != 4 {
                    return None;
                }
                blocks += 1;
                pos = end;
                match ty {
                    4 => {
                        return Some(Verdict::unvalidated(
                            src.len(),
                            "headers encrypted: the end cannot be found without the password",
                        ));
                    }
                    5 => {
                        let mut v = Verdict::complete(pos);
                        if eflags & 1 != 0 {
                            v = v.with_note("volume of a multi-volume archive (not the last)");
                        }
                        return Some(v);
                    }
                    _ => {}
                }
            }
            Block5::Cut if blocks == 0 => return None,
            Block5::Cut => return Some(Verdict::partial(src.len(), src.cut_note())),
            Block5::Bad if blocks == 0 => return None,
            Block5::Bad => {
                return Some(Verdict::partial(
                    pos,
                    format!("block at {pos} fails its header CRC before the end block"),
                ));
            }
        }
    }
}

enum Block4 {
    /// (type, flags, block end)
    Ok(u8, u16, u64),
    Cut,
    Bad,
}

fn block4(src: &Src, pos: u64) -> Block4 {
    let Some(h) = src.bytes::<7>(pos) else {
        return Block4::Cut;
    };
    let crc = u16::from_le_bytes([h[0], h[1]]);
    let ty = h[2];
    let flags = u16::from_le_bytes([h[3], h[4]]);
    let size = u64::from(u16::from_le_bytes([h[5], h[6]]));
    if !(0x72..=0x7B).contains(&ty) || size < 7 {
        return Block4::Bad;
    }
    let hend = pos + size;
    if hend > src.len() {
        return Block4::Cut;
    }
    // The archive header of RAR 1.5-2.x archives is CRC'd over its first
    // 13 bytes only when it is longer (an old AV or comment follows).
    let full = crc_of(src, pos + 2, size - 2) as u16;
    // Old sub-blocks (0x75-0x79, RAR 2.x: Unix owner, ...) CRC their data
    // too (at most 64 KiB of it is read for that).
    let with_data = || {
        let add = u64::from(src.u32le(pos + 7).unwrap_or(u32::MAX));
        (0x75..=0x79).contains(&ty)
            && flags & 0x8000 != 0
            && size >= 11
            && add <= 64 * 1024
            && src.has(pos + size, add)
            && crc_of(src, pos + 2, size - 2 + add) as u16 == crc
    };
    let ok = full == crc
        || with_data()
        || (ty == 0x73 && size > 13 && crc_of(src, pos + 2, 11) as u16 == crc)
        || (ty == 0x74 && flags & 0x0200 == 0 && old_file_crc(src, pos, size) == Some(crc));
    if !ok {
        return Block4::Bad;
    }
    let mut data = 0u64;
    if flags & 0x8000 != 0 || ty == 0x74 || ty == 0x7A {
        if size < 11 {
            return Block4::Bad;
        }
        let Some(add) = src.u32le(pos + 7) else {
            return Block4::Cut;
        };
        data = u64::from(add);
        if (ty == 0x74 || ty == 0x7A) && flags & 0x0100 != 0 {
            match src.u32le(pos + 32) {
                Some(hi) if size >= 36 => data |= u64::from(hi) << 32,
                _ => return Block4::Bad,
            }
        }
    }
    match hend.checked_add(data) {
        Some(end) if end <= src.len() => Block4::Ok(ty, flags, end),
        _ => Block4::Cut,
    }
}

/// A file header whose CRC covers its fixed part and name only (a few RAR
/// 2.x writers): the CRC's low 16 bits over `HEAD_TYPE..name end`.
fn old_file_crc(src: &Src, pos: u64, size: u64) -> Option<u16> {
    let name_len = u64::from(src.u16le(pos + 26)?);
    let end = 32 + name_len;
    (end < size).then(|| crc_of(src, pos + 2, end - 2) as u16)
}

/// RAR 1.5-4.x.
pub fn validate4(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"Rar!\x1A\x07\x00") {
        return None;
    }
    let mut pos = 7u64;
    let mut blocks = 0u64;
    // Version needed to extract, highest seen: from 2.9 on archives end
    // with an end block.
    let mut unp_ver = 0u8;
    loop {
        match block4(&src, pos) {
            Block4::Ok(ty, flags, end) => {
                if ty == 0x74 {
                    unp_ver = unp_ver.max(src.u8(pos + 24).unwrap_or(0));
                }
                if blocks == 0 && ty != 0x73 {
                    return None;
                }
                blocks += 1;
                pos = end;
                if blocks == 1 && flags & 0x0080 != 0 {
                    return Some(Verdict::unvalidated(
                        src.len(),
                        "headers encrypted: the end cannot be found without the password",
                    ));
                }
                if ty == 0x7B {
                    let mut v = Verdict::complete(pos);
                    if flags & 1 != 0 {
                        v = v.with_note("volume of a multi-volume archive (not the last)");
                    }
                    return Some(v);
                }
            }
            Block4::Cut if blocks == 0 => return None,
            Block4::Cut if pos == src.len() => {
                // The window ends exactly after a block: the chain may go on.
                return Some(Verdict::partial(pos, src.cut_note()));
            }
            Block4::Cut => return Some(Verdict::partial(src.len(), src.cut_note())),
            Block4::Bad if blocks == 0 => return None,
            Block4::Bad if unp_ver >= 29 => {
                return Some(Verdict::partial(
                    pos,
                    format!("block at {pos} fails its header CRC before the end block"),
                ));
            }
            Block4::Bad => {
                return Some(Verdict::complete(pos).with_note(
                    "no end of archive block (RAR < 2.9): ends where the block chain stops",
                ));
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    fn vint(mut v: u64) -> Vec<u8> {
        let mut o = Vec::new();
        loop {
            let b = (v & 0x7F) as u8;
            v >>= 7;
            if v == 0 {
                o.push(b);
                return o;
            }
            o.push(b | 0x80);
        }
    }

    /// One RAR 5 block: type, flags, extra fields, data.
    fn block5(ty: u64, flags: u64, fields: &[u8], data: &[u8]) -> Vec<u8> {
        let mut h = vint(ty);
        h.extend(vint(flags));
        if flags & 2 != 0 {
            h.extend(vint(data.len() as u64));
        }
        h.extend_from_slice(fields);
        let mut sized = vint(h.len() as u64);
        sized.extend(h);
        let mut b = crc32fast::hash(&sized).to_le_bytes().to_vec();
        b.extend(sized);
        b.extend_from_slice(data);
        b
    }

    pub fn seed5() -> Vec<u8> {
        let mut f = b"Rar!\x1A\x07\x01\x00".to_vec();
        f.extend(block5(1, 0, &[0], &[]));
        f.extend(block5(2, 2, b"\x00\x05\x20file", b"hello world, packed"));
        f.extend(block5(5, 0, &[0], &[]));
        f
    }

    fn block4(ty: u8, flags: u16, fields: &[u8], data: &[u8]) -> Vec<u8> {
        let mut h = vec![ty];
        h.extend_from_slice(&flags.to_le_bytes());
        let add = if flags & 0x8000 != 0 { 4 } else { 0 };
        h.extend_from_slice(&((7 + add + fields.len()) as u16).to_le_bytes());
        if add != 0 {
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
        }
        h.extend_from_slice(fields);
        let mut b = (crc32fast::hash(&h) as u16).to_le_bytes().to_vec();
        b.extend(h);
        b.extend_from_slice(data);
        b
    }

    pub fn seed4() -> Vec<u8> {
        let mut f = b"Rar!\x1A\x07\x00".to_vec();
        f.extend(block4(0x73, 0, &[0; 6], &[]));
        // File header fields after PACK_SIZE: UNP_SIZE HOST_OS FILE_CRC FTIME
        // UNP_VER METHOD NAME_SIZE ATTR, then the name.
        let mut fields = vec![0u8; 21];
        fields[13] = 29; // UNP_VER
        fields[15] = 4; // NAME_SIZE
        fields.extend_from_slice(b"a.tx");
        f.extend(block4(0x74, 0x8000, &fields, b"stored data of the file"));
        f.extend(block4(0x7B, 0x4000, &[], &[]));
        f
    }

    #[test]
    fn rar5_valid_cut_garbage() {
        let f = seed5();
        assert_complete("rar5", &f);
        assert_prefixes("rar5", &f);
        let mut g = f.clone();
        let n = g.len();
        g[n - 3] ^= 0x40; // end block damaged
        let v = run("rar5", &g).unwrap();
        assert_eq!(v.status, Status::Partial);
        let mut junk = b"Rar!\x1A\x07\x01\x00".to_vec();
        junk.extend((0..300u32).map(|i| (i * 91 + 7) as u8));
        assert!(run("rar5", &junk).is_none());
    }

    #[test]
    fn rar5_hostile_data_size() {
        let mut f = b"Rar!\x1A\x07\x01\x00".to_vec();
        f.extend(block5(1, 0, &[0], &[]));
        // A file block whose data size says 2^60 bytes.
        let mut h = vint(2);
        h.extend(vint(2));
        h.extend(vint(1 << 60));
        let mut sized = vint(h.len() as u64);
        sized.extend(h);
        f.extend(crc32fast::hash(&sized).to_le_bytes());
        f.extend(sized);
        f.extend([0u8; 100]);
        let v = run("rar5", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
    }

    #[test]
    fn rar4_valid_cut_garbage() {
        let f = seed4();
        assert_complete("rar4", &f);
        assert_prefixes("rar4", &f);
        let mut junk = b"Rar!\x1A\x07\x00".to_vec();
        junk.extend((0..300u32).map(|i| (i * 13 + 1) as u8));
        assert!(run("rar4", &junk).is_none());
        // Without its end block (RAR < 2.9): ends after the file block.
        let n = f.len() - 7;
        let mut old = f[..n].to_vec();
        old[7 + 13 + 7 + 4 + 13] = 20; // UNP_VER 2.0
        let c = crc32fast::hash(&old[7 + 13 + 2..n - 23]) as u16;
        old[7 + 13..7 + 13 + 2].copy_from_slice(&c.to_le_bytes());
        old.extend_from_slice(b"\xFF\xFF\x00 not a block at all");
        let v = run("rar4", &old).unwrap();
        assert_eq!((v.status, v.length), (Status::Complete, n as u64));
    }

    #[test]
    fn rar4_hostile_pack_size() {
        let mut f = b"Rar!\x1A\x07\x00".to_vec();
        f.extend(block4(0x73, 0, &[0; 6], &[]));
        let mut fields = vec![0u8; 21];
        fields[15] = 1;
        fields.push(b'x');
        let mut b = block4(0x74, 0x8000, &fields, b"");
        // PACK_SIZE = 4 GiB - 1, CRC recomputed.
        b[7..11].copy_from_slice(&u32::MAX.to_le_bytes());
        let c = crc32fast::hash(&b[2..]) as u16;
        b[..2].copy_from_slice(&c.to_le_bytes());
        f.extend(b);
        f.extend([0u8; 64]);
        let v = run("rar4", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
    }
}
