//! VMware virtual disks: hosted sparse extents (`monolithicSparse`,
//! `twoGbMaxExtentSparse` extents) and stream-optimized extents.
//!
//! Structure (VMware "Virtual Disk Format 1.1", sec. 4), little-endian: the
//! 512-byte `SparseExtentHeader`: magic `KDMV`, version (1 to 3), flags,
//! capacity, `grainSize` (sectors), descriptor offset and size, `numGTEsPerGT`
//! (512), redundant and primary grain directory offsets, `overHead`
//! (sectors of metadata before the grains), the unclean-shutdown byte, four
//! line-end check characters (`\n`, ` `, `\r`, `\n`) and the compression
//! algorithm. A sparse extent's grain directory points at grain tables,
//! whose entries point at grains (entry 1: a zeroed grain, when flag bit 2
//! says so). A stream-optimized extent (flags bit 16: compressed grains, bit
//! 17: markers) follows its metadata with markers: a grain marker (LBA,
//! compressed size, then the deflate stream), or a metadata marker (sector
//! count, size 0, type: 0 end of stream, 1 grain table, 2 grain directory,
//! 3 footer) followed by its sectors; each padded to a sector.
//!
//! There is no end marker in a sparse extent: it ends at the furthest of
//! `overHead`, the descriptor, both grain directories, the grain tables and
//! the grains. A stream-optimized extent ends after its end-of-stream
//! marker; one whose grain directory is in its metadata, not at its end
//! (as qemu-img writes them, with no footer and no end-of-stream marker),
//! ends like a sparse extent, each grain taking at least a whole grain
//! (measured on qemu-img 10.0: the file is cut there).
//!
//! Checked: magic, version, a power-of-two grain size of at least 1 sector,
//! `numGTEsPerGT` 512, the line-end characters, a descriptor that begins
//! with `#`, text or zeros, directories and tables inside the file and entries
//! pointing past the metadata; stream-optimized, every marker's type and
//! that a grain's data begins with a zlib header.
//!
//! * `None`: a header check fails, or the header is a stream-optimized
//!   extent's footer (a footer marker in the sector before it).
//! * `Complete`: the extent (or the end-of-stream marker) lies inside the
//!   window; length = its end.
//! * `Partial`: a table or the extent runs past the window (length =
//!   window), or a marker is damaged (length = that marker).
//!
//! Work: each grain directory once, grain tables up to a budget of the
//! window's length and [`MAX_TABLE_BYTES`], markers one by one (each
//! advances at least a sector).

use super::Verdict;
use super::read::Src;

/// Grain directory and grain table bytes read at most (a 2 TiB sparse
/// extent of 64 KiB grains has 64 MiB of grain tables).
pub const MAX_TABLE_BYTES: u64 = 64 << 20;
/// Flag bits: zeroed-grain entries, compressed grains, markers.
const ZEROED_GRAIN: u32 = 1 << 2;
const COMPRESSED: u32 = 1 << 16;
const MARKERS: u32 = 1 << 17;

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"KDMV") {
        return None;
    }
    if !src.has(0, 512) {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let version = src.u32le(4)?;
    let flags = src.u32le(8)?;
    let capacity = src.u64le(12)?;
    let grain = src.u64le(20)?;
    let desc_off = src.u64le(28)?;
    let desc_len = src.u64le(36)?;
    let gtes = u64::from(src.u32le(44)?);
    let rgd = src.u64le(48)?;
    let gd = src.u64le(56)?;
    let overhead = src.u64le(64)?;
    let eol = src.bytes::<4>(73)?;
    let compression = src.u16le(77)?;
    if !(1..=3).contains(&version)
        || grain == 0
        || !grain.is_power_of_two()
        || grain > 1 << 20
        || gtes != 512
        || (eol != *b"\n \r\n" && eol != [0; 4])
        || compression > 1
        || overhead == 0
        || capacity == 0
    {
        return None;
    }
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    let sec = |s: u64| s.checked_mul(512);
    let mut end = sec(overhead)?;
    if desc_off > 0 {
        let d = sec(desc_off)?;
        end = end.max(d.checked_add(sec(desc_len)?)?);
        if src.has(d, 1) {
            let b = src.u8(d)?;
            // Zeros where the descriptor is kept in a file of its own
            // (the extents of a `twoGbMaxExtentSparse` disk).
            if !(b == 0 || b == b'#' || b.is_ascii_graphic() || b == b'\n') {
                return None;
            }
        }
    }
    let markers = flags & MARKERS != 0;
    if markers && after_footer_marker(&src) {
        return None;
    }
    if markers && gd == u64::MAX {
        return stream(src, sec(overhead)?, flags & COMPRESSED != 0);
    }
    let gt_len = gtes * 4;
    let gd_entries = capacity.div_ceil(grain.checked_mul(gtes)?);
    let grain_len = sec(grain)?;
    let mut budget = src.len().min(MAX_TABLE_BYTES);
    let zeroed = flags & ZEROED_GRAIN != 0;
    for dir in [gd, rgd] {
        if dir == 0 {
            continue;
        }
        let dir_off = sec(dir)?;
        let dir_len = gd_entries.checked_mul(4)?;
        if dir_len > MAX_TABLE_BYTES {
            return None;
        }
        end = end.max(dir_off.checked_add(dir_len)?);
        if !src.has(dir_off, dir_len) {
            return if dir_off >= src.len() { cut() } else { None };
        }
        let mut tables = Vec::new();
        let mut buf = [0u8; 4096];
        let mut i = 0;
        while i < dir_len {
            let n = (dir_len - i).min(4096);
            let b = &mut buf[..n as usize];
            if !src.read_exact(dir_off + i, b) {
                return cut();
            }
            for c in b.chunks_exact(4) {
                let e = u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                if e != 0 {
                    tables.push(sec(e)?);
                }
            }
            i += n;
        }
        for t in tables {
            end = end.max(t + gt_len);
            if budget < gt_len {
                return None;
            }
            budget -= gt_len;
            let mut b = [0u8; 2048];
            if !src.read_exact(t, &mut b) {
                return cut();
            }
            for c in b.chunks_exact(4) {
                let e = u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                if e == 0 || (zeroed && e == 1) {
                    continue;
                }
                let g = sec(e)?;
                if g < 512 {
                    return None;
                }
                if markers {
                    // A grain marker in a stream-optimized extent whose
                    // tables are in its metadata (qemu-img): qemu moves its
                    // next grain a whole grain on, so the extent ends at the
                    // furthest of a grain's size and its compressed bytes.
                    let Some(size) = src.u32le(g + 8) else {
                        return cut();
                    };
                    let data = (12 + u64::from(size)).next_multiple_of(512);
                    end = end.max(g + grain_len.max(data));
                } else {
                    end = end.max(g + grain_len);
                }
            }
        }
    }
    if end > src.len() {
        return cut();
    }
    let mut v = Verdict::complete(end);
    v.subtype = Some("sparse".to_string());
    Some(v)
}

/// True when the sector before the candidate is a footer marker (one
/// sector, size 0, type 3, zero padding): the header is the footer of a
/// stream-optimized extent, its copy with the grain directory's offset, and
/// no file starts there.
fn after_footer_marker(src: &Src) -> bool {
    let mut b = Vec::new();
    src.preceding(512, &mut b);
    b.len() == 512
        && b[..8] == 1u64.to_le_bytes()
        && b[8..12] == [0; 4]
        && b[12..16] == 3u32.to_le_bytes()
        && b[16..].iter().all(|&x| x == 0)
}

/// Walks the markers of a stream-optimized extent from `at` to the
/// end-of-stream marker.
fn stream(src: Src, mut at: u64, compressed: bool) -> Option<Verdict> {
    let cut = || Some(Verdict::partial(src.len(), src.cut_note()));
    let mut footer = false;
    loop {
        if !src.has(at, 512) {
            return cut();
        }
        let val = src.u64le(at)?;
        let size = u64::from(src.u32le(at + 8)?);
        if size > 0 {
            // A grain marker: LBA, size, then `size` bytes of data.
            if compressed {
                let cmf = src.u8(at + 12)?;
                let flg = src.u8(at + 13)?;
                if cmf & 0x0F != 8 || (u16::from(cmf) << 8 | u16::from(flg)) % 31 != 0 {
                    return Some(Verdict::partial(at, "a grain marker without zlib data"));
                }
            }
            at = (at + 12).checked_add(size)?.next_multiple_of(512);
            continue;
        }
        let ty = src.u32le(at + 12)?;
        // Metadata markers pad to a whole sector with zeros.
        let mut pad = [0u8; 496];
        if !src.read_exact(at + 16, &mut pad) || pad.iter().any(|&b| b != 0) {
            return Some(Verdict::partial(at, "a damaged metadata marker"));
        }
        match ty {
            0 if val == 0 => {
                let end = at + 512;
                if !footer {
                    return Some(Verdict::partial(end, "end of stream without a footer"));
                }
                let mut v = Verdict::complete(end);
                v.subtype = Some("stream".to_string());
                return Some(v);
            }
            1 | 2 => {}
            3 => {
                if val != 1 || !src.starts_with_at(at + 512, b"KDMV") {
                    return Some(Verdict::partial(at, "a damaged footer"));
                }
                footer = true;
            }
            _ => return Some(Verdict::partial(at, "an unknown marker")),
        }
        at = (at + 512).checked_add(val.checked_mul(512)?)?;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sparse()
    }

    fn header(flags: u32, gd: u64, overhead: u64) -> Vec<u8> {
        let mut v = vec![0u8; 512];
        v[..4].copy_from_slice(b"KDMV");
        v[4..8].copy_from_slice(&1u32.to_le_bytes());
        v[8..12].copy_from_slice(&flags.to_le_bytes());
        // 4 grains of 8 sectors: one grain table of 512 entries
        v[12..20].copy_from_slice(&32u64.to_le_bytes());
        v[20..28].copy_from_slice(&8u64.to_le_bytes());
        v[28..36].copy_from_slice(&1u64.to_le_bytes());
        v[36..44].copy_from_slice(&1u64.to_le_bytes());
        v[44..48].copy_from_slice(&512u32.to_le_bytes());
        v[56..64].copy_from_slice(&gd.to_le_bytes());
        v[64..72].copy_from_slice(&overhead.to_le_bytes());
        v[73..77].copy_from_slice(b"\n \r\n");
        v
    }

    /// A sparse extent: header, descriptor (sector 1), grain directory
    /// (sector 2), grain table (3..7), overhead 8 sectors, two grains.
    pub fn sparse() -> Vec<u8> {
        let mut v = header(3, 2, 8);
        v.extend_from_slice(b"# Disk DescriptorFile\n");
        v.resize(1024, 0);
        v.extend_from_slice(&3u32.to_le_bytes());
        v.resize(1536, 0);
        v.extend_from_slice(&8u32.to_le_bytes());
        v.extend_from_slice(&16u32.to_le_bytes());
        v.resize(8 * 512, 0);
        v.resize(24 * 512, 0xEE);
        v
    }

    /// A stream-optimized extent: header, descriptor, one grain, a grain
    /// table and directory, the footer and end of stream.
    fn streamed() -> Vec<u8> {
        let mut v = header(3 | super::COMPRESSED | super::MARKERS, u64::MAX, 2);
        v.extend_from_slice(b"# Disk DescriptorFile\n");
        v.resize(1024, 0);
        // grain marker: lba 0, 20 bytes of zlib data
        v.extend_from_slice(&0u64.to_le_bytes());
        v.extend_from_slice(&20u32.to_le_bytes());
        v.extend_from_slice(&[0x78, 0x9C]);
        v.extend_from_slice(&[0x11; 18]);
        v.resize(1536, 0);
        for (n, ty) in [(4u64, 1u32), (1, 2)] {
            v.extend_from_slice(&n.to_le_bytes());
            v.extend_from_slice(&0u32.to_le_bytes());
            v.extend_from_slice(&ty.to_le_bytes());
            v.resize(v.len() + 496, 0);
            v.resize(v.len() + n as usize * 512, 0x01);
        }
        v.extend_from_slice(&1u64.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&3u32.to_le_bytes());
        v.resize(v.len() + 496, 0);
        v.extend(header(3 | super::COMPRESSED | super::MARKERS, 7, 2));
        v.resize(v.len() + 512, 0);
        v
    }

    #[test]
    fn a_stream_footer_is_no_file_of_its_own() {
        let d = streamed();
        let footer = d.len() - 1024;
        assert!(d[footer..].starts_with(b"KDMV"));
        assert!(run_at("vmdk", &d, footer as u64, NO_LIMIT).is_none());
        // The same header after anything but a footer marker is a start.
        let mut e = d.clone();
        e[footer - 500] = 1; // the marker's padding no longer zero
        assert!(run_at("vmdk", &e, footer as u64, NO_LIMIT).is_some());
    }

    #[test]
    fn valid_extents() {
        assert_eq!(
            assert_complete("vmdk", &sparse()).as_deref(),
            Some("sparse")
        );
        assert_eq!(
            assert_complete("vmdk", &streamed()).as_deref(),
            Some("stream")
        );
        assert_prefixes_step("vmdk", &sparse(), 13);
        assert_prefixes_step("vmdk", &streamed(), 11);
    }

    #[test]
    fn rejects_and_hostile() {
        let mut g = b"KDMVgarbage garbage garbage".to_vec();
        g.resize(1024, b'g');
        assert!(run("vmdk", &g).is_none());
        // Under a header's 512 bytes: cut, never Complete.
        assert_eq!(
            run("vmdk", &g[..100]).map(|v| v.status),
            Some(Status::Partial)
        );
        let mut f = sparse();
        f[44..48].copy_from_slice(&7u32.to_le_bytes());
        assert!(run("vmdk", &f).is_none());
        // A hostile grain table entry: Partial at the window.
        let mut f = sparse();
        f[1536..1540].copy_from_slice(&u32::MAX.to_le_bytes());
        let v = run("vmdk", &f).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, f.len() as u64));
        // A hostile capacity: the directory does not fit, never read.
        let mut f = sparse();
        f[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(run("vmdk", &f).is_none_or(|v| v.status != Status::Complete));
        // Cut: never Complete.
        let s = streamed();
        assert_eq!(
            run("vmdk", &s[..s.len() - 512]).unwrap().status,
            Status::Partial
        );
        let lim = Limits {
            max_len: s.len() as u64 - 1,
        };
        assert_ne!(
            run_at("vmdk", &s, 0, lim).map(|v| v.status),
            Some(Status::Complete)
        );
        // A grain without zlib data: Partial at that marker.
        let mut s = streamed();
        s[1024 + 12] = 0;
        let v = run("vmdk", &s).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 1024));
    }
}
