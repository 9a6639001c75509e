//! JPEG (JFIF/EXIF): a marker walk from SOI to the real EOI.
//!
//! Structure (ITU-T T.81 Annex B, JFIF 1.02, EXIF 2.3 §4.5): `FF D8` (SOI),
//! then marker segments `FF xx | length (u16 BE, ≥ 2, includes itself) | data`.
//! `SOS` (`FF DA`) is followed by entropy-coded data in which `FF 00` is a
//! stuffed byte and `FF D0..D7` are restart markers; the first other marker
//! ends the scan (progressive files have many scans with `DHT`s between
//! them). Standalone markers (`TEM`, `RSTn`) carry no length; `FF` fill bytes
//! may precede any marker. `FF D9` (EOI) ends the file.
//!
//! An EXIF thumbnail (a whole JPEG inside `APP1`) never ends the outer file:
//! the `APP1` length skips it.
//!
//! Checked: the fourth byte is a real segment marker; every marker is a
//! defined one (no reserved `02..BF`, no second SOI; hierarchical and
//! extension markers `DE DF F0..FD` are not accepted); segment lengths fit;
//! SOF (1..4 components, `len = 8 + 3·components`, precision 8/12, 2..16 for
//! lossless, non-zero width), SOS (`len = 6 + 2·components`, components 1..4,
//! spectral/approximation fields in range), DRI (`len = 4`), DQT and DHT
//! bodies parsed table by table to exactly the segment length; SOF before SOS.
//!
//! * `None`: not `FF D8 FF <segment marker>`, or damage before the second
//!   segment (a lone plausible segment is not evidence enough).
//! * `Complete`: EOI reached after at least one frame header and one scan;
//!   length = end of EOI.
//! * `Partial`: the walk runs past the window (length = window), or hits an
//!   invalid marker/segment after a valid start (length = where the damage
//!   begins), or EOI comes without any image data.

use super::Verdict;
use super::read::{Cursor, Src};

/// More markers than this is not a real JPEG.
const MAX_MARKERS: u32 = 1_000_000;

/// Markers that may legitimately follow SOI as the first segment.
fn first_segment_marker(m: u8) -> bool {
    matches!(m, 0xC0..=0xCF | 0xDB..=0xDF | 0xE0..=0xEF | 0xFE)
}

/// Markers with a length field accepted inside a file: SOFn (not the
/// reserved `C8`), DHT, DAC, SOS, DQT, DNL, DRI, APPn, COM. Hierarchical
/// (`DE`, `DF`) and JPEG extension markers (`F0..FD`, e.g. JPEG-LS) are not
/// accepted: they are rare in real files and common in random data.
fn has_length(m: u8) -> bool {
    matches!(m, 0xC0..=0xC7 | 0xC9..=0xCF | 0xDA..=0xDD | 0xE0..=0xEF | 0xFE)
}

/// DQT body: tables of `Pq/Tq` + 64 (8-bit) or 128 (16-bit) values.
fn dqt_ok(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        let (pq, tq) = (b[i] >> 4, b[i] & 15);
        if pq > 1 || tq > 3 {
            return false;
        }
        i += 1 + 64 * (usize::from(pq) + 1);
    }
    i == b.len() && !b.is_empty()
}

/// DHT body: tables of `Tc/Th`, 16 code counts, then the symbols.
fn dht_ok(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        let (tc, th) = (b[i] >> 4, b[i] & 15);
        let Some(counts) = b.get(i + 1..i + 17) else {
            return false;
        };
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        if tc > 1 || th > 3 || n > 256 {
            return false;
        }
        i += 17 + n;
    }
    i == b.len() && !b.is_empty()
}

pub fn validate(src: Src) -> Option<Verdict> {
    let head = src.bytes::<4>(0);
    let Some(head) = head else {
        // Fewer than 4 bytes: only a partial SOI can be judged.
        let mut b = [0u8; 3];
        let n = src.read(0, &mut b);
        return (b[..n] == [0xFF, 0xD8, 0xFF][..n] && n >= 2)
            .then(|| Verdict::partial(src.len(), src.cut_note()));
    };
    if head[..3] != [0xFF, 0xD8, 0xFF] || !first_segment_marker(head[3]) {
        return None;
    }
    // Room for one DQT/DHT segment body (lengths are 16-bit).
    let mut seg_buf = vec![0u8; 65536];
    let mut c = Cursor::new(src, 2);
    let mut seen_sof = false;
    let mut scans = 0u32;
    let mut segments = 0u32;
    let mut progressive = false;
    let cut = |src: &Src| Some(Verdict::partial(src.len(), src.cut_note()));
    // End of the last structure that was fully validated.
    let mut good_end: u64 = 2;
    let damaged = |good_end: u64, segments: u32, note: String| {
        // Damage before a second segment confirmed the first: a false hit.
        if segments < 2 {
            None
        } else {
            Some(Verdict::partial(good_end, note))
        }
    };
    for _ in 0..MAX_MARKERS {
        // Marker: FF, optional fill FFs, then the code.
        let marker_pos = c.pos();
        match c.u8() {
            Some(0xFF) => {}
            Some(b) => {
                return damaged(
                    good_end,
                    segments,
                    format!("expected a marker at {marker_pos}, found {b:#04x}"),
                );
            }
            None => return cut(&src),
        }
        let mut m = 0xFF;
        for _ in 0..4096 {
            match c.u8() {
                Some(0xFF) => continue,
                Some(b) => {
                    m = b;
                    break;
                }
                None => return cut(&src),
            }
        }
        match m {
            0xD9 => {
                let end = c.pos();
                if !seen_sof || scans == 0 {
                    return Some(Verdict::partial(end, "EOI without a frame header and scan"));
                }
                let mut v = Verdict::complete(end);
                if progressive {
                    v.notes.push(format!("progressive, {scans} scans"));
                }
                return Some(v);
            }
            0x01 | 0xD0..=0xD7 => {
                good_end = c.pos();
                continue;
            }
            0xD8 => return damaged(good_end, segments, format!("second SOI at {marker_pos}")),
            0xFF => return damaged(good_end, segments, "run of fill bytes".into()),
            m if !has_length(m) => {
                return damaged(
                    good_end,
                    segments,
                    format!("reserved marker {m:#04x} at {marker_pos}"),
                );
            }
            _ => {}
        }
        let Some(len) = c.u16be() else {
            return cut(&src);
        };
        let len = u64::from(len);
        let body = c.pos();
        let seg_end = body - 2 + len;
        if len < 2 {
            return damaged(
                good_end,
                segments,
                format!("segment length {len} at {marker_pos}"),
            );
        }
        // Per-marker checks on the first bytes of the segment.
        let ok = match m {
            0xC0..=0xCF if m != 0xC4 && m != 0xC8 && m != 0xCC => {
                // SOFn: P, Y, X, Nf, then 3 bytes per component.
                let Some(h) = src.bytes::<6>(body) else {
                    return cut(&src);
                };
                let nf = u64::from(h[5]);
                progressive |= matches!(m, 0xC2 | 0xC6 | 0xCA | 0xCE);
                seen_sof = true;
                let lossless = matches!(m, 0xC3 | 0xC7 | 0xCB | 0xCF);
                let precision_ok = if lossless {
                    matches!(h[0], 2..=16)
                } else {
                    matches!(h[0], 8 | 12)
                };
                (1..=4).contains(&nf) && len == 8 + 3 * nf && precision_ok && h[3..5] != [0, 0]
            }
            0xC4 | 0xDB => {
                let Some(b) = seg_buf.get_mut(..(len - 2) as usize) else {
                    return cut(&src);
                };
                if !src.read_exact(body, b) {
                    return cut(&src);
                }
                if m == 0xC4 { dht_ok(b) } else { dqt_ok(b) }
            }
            0xDD => len == 4,
            0xDA => {
                let Some(ns) = src.u8(body) else {
                    return cut(&src);
                };
                let ns = u64::from(ns);
                let tail = src.bytes::<3>(body + 1 + 2 * ns);
                let Some([ss, se, a]) = tail else {
                    return cut(&src);
                };
                seen_sof
                    && (1..=4).contains(&ns)
                    && len == 6 + 2 * ns
                    && ss <= 63
                    && se <= 63
                    && a >> 4 <= 13
            }
            _ => true,
        };
        if !ok {
            return damaged(
                good_end,
                segments,
                format!("invalid segment {m:#04x} at {marker_pos}"),
            );
        }
        if seg_end > src.len() {
            return cut(&src);
        }
        c.seek(seg_end);
        segments += 1;
        good_end = seg_end;
        if m == 0xDA {
            scans += 1;
            // Entropy-coded data: find the first FF not followed by 00, RSTn or FF.
            match scan_entropy(&mut c) {
                Some(p) => {
                    c.seek(p);
                    good_end = p;
                }
                None => return cut(&src),
            }
        }
    }
    damaged(good_end, segments, "too many markers".into())
}

/// From the start of entropy-coded data, returns the offset of the marker
/// that ends it (the `FF` of a marker other than stuffing/RST/fill), or
/// `None` when the window ends first.
fn scan_entropy(c: &mut Cursor) -> Option<u64> {
    loop {
        let chunk = c.chunk();
        if chunk.is_empty() {
            return None;
        }
        let Some(i) = memchr::memchr(0xFF, chunk) else {
            let n = chunk.len() as u64;
            c.skip(n);
            continue;
        };
        let ff = c.pos() + i as u64;
        c.seek(ff + 1);
        // Skip fill FFs; look at the byte after them.
        loop {
            match c.u8()? {
                0xFF => continue,
                0x00 | 0xD0..=0xD7 => break,
                _ => {
                    // The marker starts at the last FF before this byte.
                    return Some(c.pos() - 2);
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample()
    }

    fn seg(out: &mut Vec<u8>, m: u8, data: &[u8]) {
        out.extend_from_slice(&[0xFF, m]);
        out.extend_from_slice(&((data.len() + 2) as u16).to_be_bytes());
        out.extend_from_slice(data);
    }

    /// A minimal baseline JPEG: SOI, (APP), DQT, SOF0, DHT, SOS, entropy, EOI.
    fn jpeg(app: impl FnOnce(&mut Vec<u8>), scans: usize) -> Vec<u8> {
        let mut v = vec![0xFF, 0xD8];
        app(&mut v);
        let mut dqt = vec![0u8];
        dqt.extend((1..=64).map(|i| i as u8));
        seg(&mut v, 0xDB, &dqt);
        seg(&mut v, 0xC0, &[8, 0, 16, 0, 16, 1, 1, 0x11, 0]);
        let mut dht = vec![0x00];
        let mut counts = [0u8; 16];
        counts[0] = 1;
        dht.extend_from_slice(&counts);
        dht.push(0);
        seg(&mut v, 0xC4, &dht);
        seg(&mut v, 0xDD, &[0, 4]);
        for s in 0..scans {
            seg(&mut v, 0xDA, &[1, 1, 0x00, 0, 63, 0]);
            // Entropy data with stuffing, restart markers and a fill-byte run.
            v.extend_from_slice(&[
                0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56, 0xFF, 0x00, 0xFF, 0xD1, 0x77, s as u8,
            ]);
            if s + 1 < scans {
                seg(&mut v, 0xC4, &dht);
            }
        }
        v.extend_from_slice(&[0xFF, 0xD9]);
        v
    }

    fn app0(v: &mut Vec<u8>) {
        seg(v, 0xE0, b"JFIF\0\x01\x02\x00\x00\x01\x00\x01\x00\x00");
    }

    /// APP1 with an EXIF TIFF header and a complete thumbnail JPEG inside.
    fn app1_exif(v: &mut Vec<u8>) {
        let thumb = jpeg(app0, 1);
        let mut d = b"Exif\0\0II*\0\x08\0\0\0\0\0".to_vec();
        d.extend_from_slice(&thumb);
        d.extend_from_slice(b"trailing exif bytes");
        seg(v, 0xE1, &d);
    }

    pub fn sample() -> Vec<u8> {
        jpeg(
            |v| {
                app0(v);
                app1_exif(v);
                seg(v, 0xFE, b"a comment \xFF\xD9 with an EOI inside");
            },
            1,
        )
    }

    #[test]
    fn valid_jpegs() {
        assert_complete("jpeg", &jpeg(app0, 1));
        let s = sample();
        assert_complete("jpeg", &s);
        assert_prefixes("jpeg", &s);
        // Progressive: SOF2 and several scans with DHT between them.
        let mut p = jpeg(app0, 3);
        let i = p.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        p[i + 1] = 0xC2;
        assert_complete("jpeg", &p);
        assert_prefixes("jpeg", &p);
    }

    #[test]
    fn thumbnail_does_not_end_file() {
        let s = sample();
        let v = run("jpeg", &s).unwrap();
        assert_eq!(v.length, s.len() as u64);
    }

    #[test]
    fn false_positives() {
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0x00, 1, 2, 3]).is_none());
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0x12, 1, 2, 3]).is_none());
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xD9]).is_none());
        // Valid 4th byte, nonsense segment after.
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 1, 2, 0x55, 0x66]).is_none());
        assert!(run("jpeg", &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0, 1, 2]).is_none());
    }

    #[test]
    fn damage_after_valid_start() {
        let mut s = jpeg(app0, 1);
        // Overwrite the DHT marker with a reserved marker.
        let i = s.windows(2).position(|w| w == [0xFF, 0xC4]).unwrap();
        s[i + 1] = 0x05;
        let v = run("jpeg", &s).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, i as u64));
        // The same right after the first segment: not enough evidence.
        let mut s = jpeg(app0, 1);
        let i = s.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap();
        s[i + 1] = 0x05;
        assert!(run("jpeg", &s).is_none());
        // Hostile segment length past the end.
        let mut s = jpeg(app0, 1);
        let i = s.windows(2).position(|w| w == [0xFF, 0xDB]).unwrap();
        s[i + 2] = 0xFF;
        let v = run("jpeg", &s).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, s.len() as u64));
        // Window limit.
        let v = run_at("jpeg", &sample(), 0, Limits { max_len: 100 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 100));
    }

    #[test]
    fn real_jpegs() {
        let mut dirs = vec!["/usr/share".to_string()];
        dirs.extend(py_dirs("test/imghdrdata"));
        let d: Vec<&str> = dirs.iter().map(String::as_str).collect();
        check_real("jpeg", &real_files(&d, &[".jpg", ".jpeg"], 30));
    }
}
