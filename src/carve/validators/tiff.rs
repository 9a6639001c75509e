//! TIFF (and BigTIFF): the extent is the furthest byte any IFD refers to.
//!
//! Structure (TIFF 6.0 §2, Adobe 1992; BigTIFF proposal; EXIF 2.3 §4.6):
//! `II*\0` (little-endian) or `MM\0*` (big-endian) and the offset (u32) of the
//! first IFD; BigTIFF is `II+\0`/`MM\0+`, `8, 0`, and a u64 offset. An IFD is
//! `count | count × entry | next IFD offset`, an entry `tag, type, count,
//! value-or-offset` (12 bytes, or 20 in BigTIFF) whose value is stored inline
//! when it fits in the 4 (8) byte field and at the offset otherwise.
//!
//! There is no end marker: the file ends at the furthest referenced byte, so
//! the extent is the maximum over every IFD's end, every out-of-line entry
//! value, every strip/tile (`StripOffsets` 273 + `StripByteCounts` 279,
//! `TileOffsets` 324 + `TileByteCounts` 325) and the old-style JPEG thumbnail
//! (513 + 514). The walk follows the next-IFD chain and `SubIFDs` (330), EXIF
//! (34665), GPS (34853) and Interoperability (40965) pointers, visiting at
//! most [`MAX_IFDS`] IFDs of at most [`MAX_ENTRIES`] entries (cycles are
//! detected), and reads at most [`MAX_STRIPS`] strip/tile pairs in all.
//!
//! * `None`: bad magic, or the first IFD is not inside the window or has an
//!   implausible entry count.
//! * `Complete`: every visited IFD was sane and the extent lies inside the
//!   window; length = extent.
//! * `Partial`: the extent runs past the window (length = window), or a later
//!   IFD is damaged (length = extent of what was walked, capped to the window),
//!   or the IFDs reach past 1 MiB but refer to less than 1/16 of the bytes up
//!   to their extent (strip offsets of a broken or foreign IFD: no writer lays
//!   a file out so; such an extent would swallow the files after it).
//!
//! The extent is a lower bound when a file holds bytes no IFD refers to (e.g.
//! maker-note blobs addressed only from inside a maker note). Subtype: `cr2`
//! (Canon `CR` at offset 8), `dng` (`DNGVersion` tag), otherwise none.

use super::Verdict;
use super::read::{Endian, Src};

/// IFDs visited at most (main chain + sub-IFDs).
pub const MAX_IFDS: usize = 512;
/// Entries per IFD at most.
pub const MAX_ENTRIES: u64 = 4096;
/// Strip/tile pairs read per IFD at most.
pub const MAX_STRIPS: u64 = 1 << 22;

struct Layout {
    e: Endian,
    big: bool,
}

/// How far the IFDs reach (the file's end) and how many bytes they refer to
/// in all (IFDs, values, strips and tiles, the JPEG thumbnail).
struct Reach {
    end: u64,
    covered: u64,
    /// An uncompressed image whose strips or tiles hold far more bytes than
    /// its pixels take (width × height × samples × bits): bogus byte counts.
    oversized: Option<u64>,
}

impl Reach {
    fn add(&mut self, start: u64, end: u64) {
        self.end = self.end.max(end);
        self.covered = self.covered.saturating_add(end.saturating_sub(start));
    }
}

/// Extents past which a TIFF whose IFDs refer to less than 1/[`SPARSE`] of
/// its bytes is no file's layout (writers store strips back to back after
/// the header): the offsets of a broken or foreign IFD.
const SPARSE_FROM: u64 = 1 << 20;
const SPARSE: u64 = 16;

impl Layout {
    fn off(&self, s: &Src, at: u64) -> Option<u64> {
        if self.big {
            self.e.u64(s, at)
        } else {
            self.e.u32(s, at).map(u64::from)
        }
    }
    fn inline(&self) -> u64 {
        if self.big { 8 } else { 4 }
    }
    fn entry(&self) -> u64 {
        if self.big { 20 } else { 12 }
    }
}

fn type_size(t: u16) -> Option<u64> {
    Some(match t {
        1 | 2 | 6 | 7 => 1,
        3 | 8 => 2,
        4 | 9 | 11 | 13 => 4,
        5 | 10 | 12 | 16 | 17 | 18 => 8,
        _ => return None,
    })
}

/// Where an entry's array lives and how to read its elements.
#[derive(Clone, Copy)]
struct Array {
    ty: u16,
    count: u64,
    base: u64,
}

impl Array {
    fn get(&self, l: &Layout, s: &Src, i: u64) -> Option<u64> {
        let sz = type_size(self.ty)?;
        let at = self.base.checked_add(i.checked_mul(sz)?)?;
        match self.ty {
            3 => l.e.u16(s, at).map(u64::from),
            4 | 13 => l.e.u32(s, at).map(u64::from),
            16 | 18 => l.e.u64(s, at),
            1 => s.u8(at).map(u64::from),
            _ => None,
        }
    }
}

pub fn validate(src: Src) -> Option<Verdict> {
    let h = src.bytes::<4>(0)?;
    let (e, big) = match &h {
        b"II*\0" => (Endian::Little, false),
        b"MM\0*" => (Endian::Big, false),
        b"II+\0" => (Endian::Little, true),
        b"MM\0+" => (Endian::Big, true),
        _ => return None,
    };
    let l = Layout { e, big };
    let (first, header) = if big {
        if e.u16(&src, 4)? != 8 || e.u16(&src, 6)? != 0 {
            return None;
        }
        (e.u64(&src, 8)?, 16)
    } else {
        (u64::from(e.u32(&src, 4)?), 8)
    };
    if first < header {
        return None;
    }
    let mut reach = Reach {
        end: header,
        covered: header,
        oversized: None,
    };
    let mut queue: Vec<u64> = vec![first];
    let mut visited: Vec<u64> = Vec::new();
    let mut dng = false;
    let mut damage: Option<String> = None;
    let mut ifds = 0usize;
    let mut strip_budget = MAX_STRIPS;
    while let Some(off) = queue.pop() {
        if visited.contains(&off) {
            continue;
        }
        if visited.len() >= MAX_IFDS {
            damage = Some("too many IFDs".into());
            break;
        }
        visited.push(off);
        match walk_ifd(
            &src,
            &l,
            off,
            &mut reach,
            &mut queue,
            &mut dng,
            &mut strip_budget,
        ) {
            Ok(()) => ifds += 1,
            Err(msg) => {
                if ifds == 0 {
                    return None;
                }
                damage = Some(msg);
                break;
            }
        }
    }
    let subtype = if src.starts_with_at(8, b"CR\x02") && !big {
        Some("cr2")
    } else if dng {
        Some("dng")
    } else {
        None
    };
    let extent = reach.end;
    let mut v = if extent > src.len() {
        Verdict::partial(src.len(), src.cut_note())
    } else if let Some(d) = damage {
        Verdict::partial(extent, d)
    } else if let Some(off) = reach.oversized {
        Verdict::partial(
            extent,
            format!(
                "uncompressed image of IFD at {off}: its strips hold far more bytes than its pixels"
            ),
        )
    } else if extent > SPARSE_FROM && reach.covered.saturating_mul(SPARSE) < extent {
        Verdict::partial(
            extent,
            format!(
                "its IFDs refer to {} bytes scattered over {extent}: no file's layout",
                reach.covered
            ),
        )
    } else {
        Verdict::complete(extent)
    };
    v.notes.push(format!("{ifds} IFD(s)"));
    Some(v.with_subtype(subtype))
}

fn walk_ifd(
    src: &Src,
    l: &Layout,
    off: u64,
    reach: &mut Reach,
    queue: &mut Vec<u64>,
    dng: &mut bool,
    strip_budget: &mut u64,
) -> Result<(), String> {
    let e = l.e;
    let (count, first_entry) = if l.big {
        (e.u64(src, off), off.saturating_add(8))
    } else {
        (e.u16(src, off).map(u64::from), off.saturating_add(2))
    };
    let count = count.ok_or_else(|| format!("IFD at {off} outside the window"))?;
    if count == 0 || count > MAX_ENTRIES {
        return Err(format!("IFD at {off} with {count} entries"));
    }
    let next_at = first_entry.saturating_add(count * l.entry());
    let ifd_end = next_at.saturating_add(l.inline());
    if ifd_end > src.len() {
        return Err(format!("IFD at {off} runs past the window"));
    }
    reach.add(off, ifd_end);
    let mut strips: [Option<Array>; 4] = [None; 4]; // offsets, counts, tile offsets, tile counts
    let mut jpeg_if: Option<u64> = None;
    let mut jpeg_len: Option<u64> = None;
    // Width, height, bits per sample, samples per pixel, compression.
    let mut dims: [Option<u64>; 5] = [None; 5];
    for i in 0..count {
        let at = first_entry + i * l.entry();
        let tag = e.u16(src, at).ok_or("entry")?;
        let ty = e.u16(src, at + 2).ok_or("entry")?;
        let n = if l.big {
            e.u64(src, at + 4)
        } else {
            e.u32(src, at + 4).map(u64::from)
        }
        .ok_or("entry")?;
        let field = at + if l.big { 12 } else { 8 };
        let Some(ts) = type_size(ty) else {
            // Unknown types are to be ignored (TIFF 6.0 §2), but many of them
            // mean this is not an IFD.
            if i == 0 {
                return Err(format!("unknown type {ty} in IFD at {off}"));
            }
            continue;
        };
        let size = n
            .checked_mul(ts)
            .ok_or_else(|| format!("entry count overflow in IFD at {off}"))?;
        let base = if size <= l.inline() {
            field
        } else {
            let vo = l.off(src, field).ok_or("entry")?;
            let end = vo.checked_add(size).ok_or("value offset overflow")?;
            reach.add(vo, end);
            vo
        };
        let arr = Array { ty, count: n, base };
        match tag {
            273 => strips[0] = Some(arr),
            279 => strips[1] = Some(arr),
            324 => strips[2] = Some(arr),
            325 => strips[3] = Some(arr),
            256 => dims[0] = arr.get(l, src, 0),
            257 => dims[1] = arr.get(l, src, 0),
            258 => dims[2] = arr.get(l, src, 0),
            277 => dims[3] = arr.get(l, src, 0),
            259 => dims[4] = arr.get(l, src, 0),
            513 => jpeg_if = arr.get(l, src, 0),
            514 => jpeg_len = arr.get(l, src, 0),
            330 | 34665 | 34853 | 40965 => {
                for k in 0..n.min(64) {
                    if let Some(p) = arr.get(l, src, k)
                        && p != 0
                        && queue.len() < MAX_IFDS
                    {
                        queue.push(p);
                    }
                }
            }
            50706 => *dng = true,
            _ => {}
        }
    }
    for (tiles, (o, c)) in [
        (false, (strips[0], strips[1])),
        (true, (strips[2], strips[3])),
    ] {
        let (Some(o), Some(c)) = (o, c) else { continue };
        let n = o.count.min(c.count).min(*strip_budget);
        // Tables that run past the window fail at its edge: say so without
        // reading up to it (a hostile run of TIFF headers whose tables all
        // reach the end of the image cost O(image) reads per header).
        let fits = |a: &Array| {
            type_size(a.ty)
                .and_then(|ts| n.checked_mul(ts))
                .and_then(|len| a.base.checked_add(len))
                .is_some_and(|end| end <= src.len())
        };
        if !fits(&o) || !fits(&c) {
            return Err(format!("strip table runs past the window in IFD at {off}"));
        }
        *strip_budget -= n;
        let mut bytes = 0u64;
        for k in 0..n {
            let (Some(so), Some(sc)) = (o.get(l, src, k), c.get(l, src, k)) else {
                return Err(format!("unreadable strip table in IFD at {off}"));
            };
            let end = so.checked_add(sc).ok_or("strip overflow")?;
            reach.add(so, end);
            bytes = bytes.saturating_add(sc);
        }
        // (Strips only: tiles are padded to whole tiles.)
        if let [Some(w), Some(h), bits, samples, compression] = dims
            && !tiles
            && compression.unwrap_or(1) == 1
        {
            let bits = bits.unwrap_or(1).max(1);
            let pixels = w
                .saturating_mul(h)
                .saturating_mul(samples.unwrap_or(1).max(1));
            let raw = pixels.saturating_mul(bits).div_ceil(8);
            // (Rows padded to bytes: twice the pixels' bytes and 64 KiB are
            // room enough.)
            if bytes > raw.saturating_mul(2).saturating_add(64 << 10) {
                reach.oversized.get_or_insert(off);
            }
        }
    }
    if let (Some(o), Some(n)) = (jpeg_if, jpeg_len) {
        reach.add(o, o.saturating_add(n));
    }
    let next = l.off(src, next_at).ok_or("next IFD")?;
    if next != 0 && queue.len() < MAX_IFDS {
        queue.push(next);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample_le()
    }

    /// A little-endian TIFF: header, strip data, IFD0 (with an EXIF pointer),
    /// EXIF IFD, IFD1, and a trailing out-of-line value at the very end.
    pub fn sample_le() -> Vec<u8> {
        fn entry(v: &mut Vec<u8>, tag: u16, ty: u16, n: u32, val: u32) {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&ty.to_le_bytes());
            v.extend_from_slice(&n.to_le_bytes());
            v.extend_from_slice(&val.to_le_bytes());
        }
        let mut v = b"II*\0".to_vec();
        v.extend_from_slice(&0u32.to_le_bytes()); // patched
        // Strip data at 8: two strips of 10 bytes.
        v.extend_from_slice(&[0xAA; 20]);
        // Strip offsets array at 28 (2 LONGs).
        v.extend_from_slice(&8u32.to_le_bytes());
        v.extend_from_slice(&18u32.to_le_bytes());
        // IFD0 at 36.
        let ifd0 = v.len() as u32;
        v[4..8].copy_from_slice(&ifd0.to_le_bytes());
        let n = 7u16;
        let exif_at = ifd0 + 2 + 12 * u32::from(n) + 4;
        let exif_len = 2 + 12 + 4;
        let ifd1_at = exif_at + exif_len;
        let ifd1_len = 2 + 12 + 4;
        let desc_at = ifd1_at + ifd1_len;
        v.extend_from_slice(&n.to_le_bytes());
        entry(&mut v, 256, 3, 1, 10); // width
        entry(&mut v, 257, 3, 1, 2); // height
        entry(&mut v, 270, 2, 12, desc_at); // description, out of line, at the very end
        entry(&mut v, 273, 4, 2, 28); // strip offsets (array)
        entry(&mut v, 278, 3, 1, 1); // rows per strip
        entry(&mut v, 279, 3, 2, 10 | (10 << 16)); // byte counts inline (2 SHORTs)
        entry(&mut v, 34665, 4, 1, exif_at);
        v.extend_from_slice(&ifd1_at.to_le_bytes()); // next IFD
        // EXIF IFD.
        v.extend_from_slice(&1u16.to_le_bytes());
        entry(&mut v, 36864, 7, 4, u32::from_le_bytes(*b"0230"));
        v.extend_from_slice(&0u32.to_le_bytes());
        // IFD1 (thumbnail, JPEG interchange format pointing at the strips).
        v.extend_from_slice(&1u16.to_le_bytes());
        entry(&mut v, 256, 3, 1, 1);
        v.extend_from_slice(&0u32.to_le_bytes());
        assert_eq!(v.len() as u32, desc_at);
        v.extend_from_slice(b"hello tiff!\0");
        v
    }

    /// The same structure big-endian, one IFD whose strip ends the file.
    fn sample_be() -> Vec<u8> {
        let mut v = b"MM\0*".to_vec();
        v.extend_from_slice(&8u32.to_be_bytes());
        v.extend_from_slice(&2u16.to_be_bytes());
        for (tag, ty, n, val) in [(273u16, 4u16, 1u32, 38u32), (279, 4, 1, 5)] {
            v.extend_from_slice(&tag.to_be_bytes());
            v.extend_from_slice(&ty.to_be_bytes());
            v.extend_from_slice(&n.to_be_bytes());
            v.extend_from_slice(&val.to_be_bytes());
        }
        v.extend_from_slice(&0u32.to_be_bytes());
        assert_eq!(v.len(), 38);
        v.extend_from_slice(b"12345");
        v
    }

    #[test]
    fn valid_tiffs() {
        assert_eq!(assert_complete("tiff", &sample_le()), None);
        assert_complete("tiff", &sample_be());
        assert_prefixes("tiff", &sample_le());
        assert_prefixes("tiff", &sample_be());
    }

    #[test]
    fn cycles_and_hostile_offsets() {
        // Next-IFD pointing to itself.
        let mut t = sample_be();
        t[34..38].copy_from_slice(&8u32.to_be_bytes());
        assert_complete("tiff", &t);
        // Strip far past the end: Partial, never a huge length.
        let mut t = sample_be();
        t[18..22].copy_from_slice(&0xFFFF_FF00u32.to_be_bytes());
        let v = run("tiff", &t).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, t.len() as u64));
        // First IFD outside: not a TIFF we can judge.
        let mut t = sample_be();
        t[4..8].copy_from_slice(&0xFFFF_FF00u32.to_be_bytes());
        assert!(run("tiff", &t).is_none());
        assert!(run("tiff", b"II*\0\x08\0\0\0\0\0garbage").is_none());
    }

    #[test]
    fn real_tiffs() {
        let d = py_dirs("test/imghdrdata");
        let d: Vec<&str> = d.iter().map(String::as_str).collect();
        check_real("tiff", &real_files(&d, &[".tiff", ".tif"], 20));
    }

    #[test]
    fn sparse_references_are_no_file() {
        // One strip of 100 bytes 4 MiB after the header: Partial.
        let mut d = sample_le();
        let far = 4u32 << 20;
        // The second strip offset (the array at 28).
        d[32..36].copy_from_slice(&far.to_le_bytes());
        d.resize(far as usize + 200, 0);
        let v = run("tiff", &d).unwrap();
        assert_eq!(v.status, Status::Partial, "{:?}", v.notes);
    }

    #[test]
    fn strips_far_larger_than_the_pixels_are_bogus() {
        // 10 x 2 pixels, one byte each, but the strips claim 200 000 bytes.
        let mut d = sample_le();
        let counts = d.windows(4).position(|w| w == [0x17, 0x01, 3, 0]).unwrap();
        // One LONG byte count, inline: 100 000.
        d[counts + 2..counts + 4].copy_from_slice(&4u16.to_le_bytes());
        d[counts + 4..counts + 8].copy_from_slice(&1u32.to_le_bytes());
        d[counts + 8..counts + 12].copy_from_slice(&100_000u32.to_le_bytes());
        d.resize(200_100, 0);
        let v = run("tiff", &d).unwrap();
        assert_eq!(v.status, Status::Partial, "{:?}", v.notes);
    }
}
