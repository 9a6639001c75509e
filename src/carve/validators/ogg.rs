//! Ogg: a page walk with CRC checks up to the end of the first stream group.
//!
//! Structure (RFC 3533 §6): pages of `OggS | version 0 | header type (1
//! continued, 2 BOS, 4 EOS) | granule (8) | serial (4) | sequence (4) | CRC
//! (4) | segment count | segment table | body`, the body being the sum of the
//! segment table. The CRC is CRC-32 with polynomial 0x04C11DB7, not
//! reflected, initial value 0, no final xor, over the page with the CRC field
//! zeroed (computed here with a 256-entry table; crc32fast is the reflected
//! variant and does not apply). A physical stream starts with the BOS pages
//! of all its logical streams and ends when each has had its EOS page.
//!
//! Checked: capture pattern, version, reserved header bits, CRC of every page;
//! the first page is a BOS; every page belongs to one of the streams opened by
//! the initial BOS pages, and their page sequence numbers increase by one.
//!
//! * `None`: the first page is not a valid BOS page (or its CRC fails), or
//!   the second page is already invalid or foreign.
//! * `Complete`: every stream opened at the start reached its EOS page;
//!   length = end of the last EOS page. (A chained file — a new group of BOS
//!   pages after that — is carved as separate files.)
//! * `Partial`: the walk runs past the window (length = window), or a page is
//!   damaged / foreign (length = end of the last good page).
//!
//! Subtype from the codecs of the BOS pages: Theora → ogv, Opus → opus,
//! Speex → spx, FLAC → oga; Vorbis alone → none.

use super::Verdict;
use super::read::Src;

/// Pages walked at most.
const MAX_PAGES: u32 = 10_000_000;
/// Logical streams followed at most.
const MAX_STREAMS: usize = 256;

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = (i as u32) << 24;
        let mut k = 0;
        while k < 8 {
            r = if r & 0x8000_0000 != 0 {
                (r << 1) ^ 0x04C1_1DB7
            } else {
                r << 1
            };
            k += 1;
        }
        t[i] = r;
        i += 1;
    }
    t
}

static CRC_TABLE: [u32; 256] = crc_table();

/// Tables for eight bytes at a time (slicing-by-8): `SLICES[k][i]` is the
/// CRC of byte `i` followed by `k` zero bytes.
const fn slice_tables() -> [[u32; 256]; 8] {
    let t0 = crc_table();
    let mut t = [[0u32; 256]; 8];
    t[0] = t0;
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev << 8) ^ t0[(prev >> 24) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static SLICES: [[u32; 256]; 8] = slice_tables();

/// Continues an Ogg CRC over `data` (eight bytes per step, then byte by byte).
pub fn ogg_crc(mut crc: u32, data: &[u8]) -> u32 {
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let hi = crc ^ u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
        crc = SLICES[7][(hi >> 24) as usize]
            ^ SLICES[6][((hi >> 16) & 0xFF) as usize]
            ^ SLICES[5][((hi >> 8) & 0xFF) as usize]
            ^ SLICES[4][(hi & 0xFF) as usize]
            ^ SLICES[3][w[4] as usize]
            ^ SLICES[2][w[5] as usize]
            ^ SLICES[1][w[6] as usize]
            ^ SLICES[0][w[7] as usize];
    }
    for &b in words.remainder() {
        crc = (crc << 8) ^ CRC_TABLE[((crc >> 24) as u8 ^ b) as usize];
    }
    crc
}

struct Stream {
    serial: u32,
    next_seq: u32,
    eos: bool,
}

/// True unless the page header at `at` is one the walk would refuse right
/// after a first (BOS) page of stream `serial`, sequence `seq`: a valid
/// page start, and either another BOS page of a new stream or the next page
/// of the same one. True where the window ends first (the walk decides).
fn next_page_fits(src: &Src, at: u64, serial: u32, seq: u32) -> bool {
    let Some(n) = src.bytes::<27>(at) else {
        return true;
    };
    let n_serial = u32::from_le_bytes([n[14], n[15], n[16], n[17]]);
    let n_seq = u32::from_le_bytes([n[18], n[19], n[20], n[21]]);
    &n[..4] == b"OggS"
        && n[4] == 0
        && n[5] & 0xF8 == 0
        && if n[5] & 2 != 0 {
            n_serial != serial
        } else {
            n_serial == serial && n_seq == seq.wrapping_add(1)
        }
}

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"OggS") {
        return None;
    }
    let mut streams: Vec<Stream> = Vec::new();
    let mut codecs = (false, false, false, false); // theora, opus, speex, flac
    let mut scratch = Vec::new();
    let mut pos = 0u64;
    let mut in_bos_group = true;
    let mut pages = 0u32;
    let cut = |pages: u32| {
        (pages > 0 || src.len() < 27).then(|| Verdict::partial(src.len(), src.cut_note()))
    };
    // Damage right after the first page: more likely a hit inside another
    // Ogg file (e.g. its second BOS page) than a damaged file.
    let damaged =
        |pos: u64, pages: u32, note: String| (pages > 1).then(|| Verdict::partial(pos, note));
    while pages < MAX_PAGES {
        let Some(h) = src.bytes::<27>(pos) else {
            return cut(pages);
        };
        if &h[..4] != b"OggS" || h[4] != 0 || h[5] & 0xF8 != 0 {
            return damaged(pos, pages, format!("no valid page at {pos}"));
        }
        let flags = h[5];
        let serial = u32::from_le_bytes([h[14], h[15], h[16], h[17]]);
        let seq = u32::from_le_bytes([h[18], h[19], h[20], h[21]]);
        let stored = u32::from_le_bytes([h[22], h[23], h[24], h[25]]);
        let nseg = usize::from(h[26]);
        let mut table = [0u8; 255];
        if !src.read_exact(pos + 27, &mut table[..nseg]) {
            return cut(pages);
        }
        let body: u64 = table[..nseg].iter().map(|&b| u64::from(b)).sum();
        let body_at = pos + 27 + nseg as u64;
        let end = body_at + body;
        if end > src.len() {
            return cut(pages);
        }
        if pages == 0 {
            // Cheap checks before the first page's CRC (up to 64 KiB read
            // per header hit), whose failure the walk reaches anyway before
            // it keeps anything: the first page opens a stream, and unless it
            // also closes it, the next page's header is one the walk takes.
            if flags & 2 == 0 || (flags & 4 == 0 && !next_page_fits(&src, end, serial, seq)) {
                return None;
            }
        }
        let mut hz = h;
        hz[22..26].fill(0);
        let mut crc = ogg_crc(0, &hz);
        crc = ogg_crc(crc, &table[..nseg]);
        src.for_each_chunk(body_at, body, &mut scratch, |b| crc = ogg_crc(crc, b));
        if crc != stored {
            return damaged(pos, pages, format!("CRC mismatch in page at {pos}"));
        }
        let bos = flags & 2 != 0;
        if pages == 0 && !bos {
            return None;
        }
        if bos {
            if !in_bos_group
                || streams.len() >= MAX_STREAMS
                || streams.iter().any(|s| s.serial == serial)
            {
                return damaged(pos, pages, format!("unexpected BOS page at {pos}"));
            }
            streams.push(Stream {
                serial,
                next_seq: seq,
                eos: false,
            });
            let mut id = [0u8; 8];
            let n = src.read(body_at, &mut id).min(body as usize);
            let id = &id[..n];
            codecs.0 |= id.starts_with(b"\x80theora");
            codecs.1 |= id.starts_with(b"OpusHead");
            codecs.2 |= id.starts_with(b"Speex   ");
            codecs.3 |= id.starts_with(b"\x7FFLAC") || id.starts_with(b"fLaC");
        } else {
            in_bos_group = false;
        }
        let Some(s) = streams.iter_mut().find(|s| s.serial == serial) else {
            return damaged(pos, pages, format!("page of a foreign stream at {pos}"));
        };
        if s.eos || seq != s.next_seq {
            return damaged(pos, pages, format!("page out of sequence at {pos}"));
        }
        s.next_seq = seq.wrapping_add(1);
        s.eos |= flags & 4 != 0;
        pages += 1;
        pos = end;
        if streams.iter().all(|s| s.eos) {
            let subtype = if codecs.0 {
                Some("ogv")
            } else if codecs.1 {
                Some("opus")
            } else if codecs.2 {
                Some("spx")
            } else if codecs.3 {
                Some("oga")
            } else {
                None
            };
            let v = Verdict::complete(pos).with_subtype(subtype);
            return Some(v.with_note(format!("{pages} pages, {} stream(s)", streams.len())));
        }
    }
    damaged(pos, pages, "too many pages".into())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{CRC_TABLE, ogg_crc};

    #[test]
    fn sliced_crc_equals_the_bytewise_crc() {
        let bytewise = |mut crc: u32, data: &[u8]| {
            for &b in data {
                crc = (crc << 8) ^ CRC_TABLE[((crc >> 24) as u8 ^ b) as usize];
            }
            crc
        };
        let data: Vec<u8> = (0..4099u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 4099] {
            for init in [0, 0xDEAD_BEEF] {
                assert_eq!(
                    ogg_crc(init, &data[..len]),
                    bytewise(init, &data[..len]),
                    "len {len}"
                );
            }
        }
    }

    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample()
    }

    /// Bit-by-bit reference CRC, to check the table.
    fn crc_ref(data: &[u8]) -> u32 {
        let mut crc = 0u32;
        for &b in data {
            crc ^= u32::from(b) << 24;
            for _ in 0..8 {
                crc = if crc & 0x8000_0000 != 0 {
                    (crc << 1) ^ 0x04C1_1DB7
                } else {
                    crc << 1
                };
            }
        }
        crc
    }

    fn page(flags: u8, serial: u32, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut p = b"OggS\0".to_vec();
        p.push(flags);
        p.extend_from_slice(&(seq as u64 * 1000).to_le_bytes());
        p.extend_from_slice(&serial.to_le_bytes());
        p.extend_from_slice(&seq.to_le_bytes());
        p.extend_from_slice(&[0; 4]);
        let mut segs = vec![255u8; body.len() / 255];
        segs.push((body.len() % 255) as u8);
        p.push(segs.len() as u8);
        p.extend_from_slice(&segs);
        p.extend_from_slice(body);
        let c = crc_ref(&p);
        p[22..26].copy_from_slice(&c.to_le_bytes());
        p
    }

    fn sample() -> Vec<u8> {
        let mut v = page(2, 7, 0, b"OpusHead\x01\x02\x38\x01\x80\xbb\0\0\0\0\0");
        v.extend(page(0, 7, 1, b"OpusTags\0\0\0\0\0\0\0\0"));
        v.extend(page(0, 7, 2, &[0x55; 700]));
        v.extend(page(4, 7, 3, &[0x66; 30]));
        v
    }

    #[test]
    fn crc_table_matches_reference() {
        let d: Vec<u8> = (0..1000u32).map(|i| (i * 31) as u8).collect();
        assert_eq!(super::ogg_crc(0, &d), crc_ref(&d));
        assert_eq!(super::ogg_crc(0, b"OggS"), crc_ref(b"OggS"));
    }

    #[test]
    fn valid_ogg() {
        assert_eq!(assert_complete("ogg", &sample()).as_deref(), Some("opus"));
        assert_prefixes("ogg", &sample());
        // Two multiplexed streams (Theora + Vorbis).
        let mut v = page(2, 1, 0, b"\x80theora....");
        v.extend(page(2, 2, 0, b"\x01vorbis...."));
        v.extend(page(0, 1, 1, b"video"));
        v.extend(page(4, 2, 1, b"audio"));
        v.extend(page(4, 1, 2, b"video"));
        assert_eq!(assert_complete("ogg", &v).as_deref(), Some("ogv"));
    }

    #[test]
    fn damaged() {
        let mut s = sample();
        let second = page(2, 7, 0, b"OpusHead\x01\x02\x38\x01\x80\xbb\0\0\0\0\0").len();
        let third = second + page(0, 7, 1, b"OpusTags\0\0\0\0\0\0\0\0").len();
        s[third + 30] ^= 1;
        let v = run("ogg", &s).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, third as u64));
        // Damage already in the second page: not evidence of a file start.
        let mut s = sample();
        s[second + 30] ^= 1;
        assert!(run("ogg", &s).is_none());
        let mut s = sample();
        s[30] ^= 1;
        assert!(run("ogg", &s).is_none());
        let v = run_at("ogg", &sample(), 0, Limits { max_len: 100 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 100));
    }

    #[test]
    fn real_oggs() {
        let d = [
            "/usr/share/forensics-samples/original-files",
            "/usr/share/sounds",
        ];
        check_real(
            "ogg",
            &real_files(&d, &[".ogg", ".oga", ".ogv", ".opus"], 10),
        );
    }
}
