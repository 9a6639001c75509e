//! Musepack stream version 8 (`.mpc`, `MPCK`).
//!
//! Structure (Musepack "SV8 specification", musepack.net): `"MPCK"`, then
//! packets `key (2 capital letters) | size (variable-length: 7 bits a
//! byte, high bit set on all but the last; the size of the whole packet,
//! key and size field included) | payload`. The first packet is the
//! stream header `SH` (payload: CRC-32 of the rest, stream version 8,
//! ...); the stream ends with the `SE` packet. Taggers append APEv2 and
//! ID3v1.
//!
//! Stream version 7 (`"MP+"`, version byte 0x07 or 0x17; Musepack SV7
//! header as libmpcdec reads it): 6 little-endian 32-bit words (magic and
//! version, frame count, flags, gains, encoder info), then a bit stream
//! read as 32-bit LE words, most significant bit first, from bit 8 of the
//! seventh word: each frame is a 20-bit length `n` then `n` bits. The
//! file ends with the word holding the last frame's last bit.
//!
//! Checked: SV8: the `SH` packet's CRC and version; every key two capitals
//! and every size at least its header. SV7: a frame count that fits the
//! window; every frame 1 to 65,535 bits (1,152 samples of two
//! channels take far fewer).
//!
//! * `None`: no valid `SH` packet first (SV8), a frame count of 0 or one
//!   that cannot fit (SV7);
//! * `Complete`: the packets reach `SE` (SV8), the frames fit (SV7);
//!   length = their end plus the tags after it;
//! * `Partial`: the window ends inside a packet or frame (length =
//!   window), or a packet or frame is not one (length = its offset).
//!
//! Reads at most 11 bytes per packet (each at least 3 long; stretches
//! other candidates walked are jumped, [`super::walks`]) or 8 per frame
//! (each at least 21 bits; not remembered: an SV7 header every sector of
//! crafted frames makes each candidate walk far).

use super::Verdict;
use super::mp3::complete_with_tags;
use super::read::Src;
use super::walks::{Noting, Took, took};

/// The packet at `at`: (key, header length, packet length); `Err(true)`
/// when the window ends inside the header, `Err(false)` when it is not one.
fn packet(src: &Src, at: u64) -> Result<([u8; 2], u64, u64), bool> {
    let Some(key) = src.bytes::<2>(at) else {
        return Err(true);
    };
    if !key.iter().all(u8::is_ascii_uppercase) {
        return Err(false);
    }
    let mut size = 0u64;
    for i in 0..9 {
        let Some(b) = src.u8(at + 2 + i) else {
            return Err(true);
        };
        size = size << 7 | u64::from(b & 0x7F);
        if b & 0x80 == 0 {
            let head = 3 + i;
            return if size < head {
                Err(false)
            } else {
                Ok((key, head, size))
            };
        }
    }
    Err(false)
}

pub fn validate(src: Src) -> Option<Verdict> {
    if src.starts_with_at(0, b"MP+") {
        return sv7(&src);
    }
    if !src.starts_with_at(0, b"MPCK") {
        return None;
    }
    let (key, head, size) = packet(&src, 4).ok()?;
    if &key != b"SH" || !(head + 5..=head + 64).contains(&size) {
        return None;
    }
    let mut sh = [0u8; 64];
    let body = sh.get_mut(..(size - head) as usize)?;
    if !src.read_exact(4 + head, body) {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    let crc = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    if body[4] != 8 || crc32fast::hash(&body[4..]) != crc {
        return None;
    }
    let mut p = 4 + size;
    let mut n = 1u32;
    // A packet's step depends on its bytes alone (the walk returns at `SE`
    // before noting it): the stretches other candidates walked are jumped
    // ([`super::walks`]).
    let mut noting = Noting::new("mpc8");
    loop {
        if let Some(j) = src.walk_jump("mpc8", (p, 0), (src.len(), MAX_PACKETS - n), |_| true) {
            (p, n) = (j.to, n + j.steps);
            src.walk_took(&mut noting, took(j), (p, 0));
            continue;
        }
        if n >= MAX_PACKETS {
            return Some(Verdict::partial(p, "too many packets"));
        }
        let (key, _, size) = match packet(&src, p) {
            Ok(k) => k,
            Err(true) => return Some(Verdict::partial(src.len(), src.cut_note())),
            Err(false) => return Some(Verdict::partial(p, format!("no packet at {p}"))),
        };
        if p + size > src.len() {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        }
        p += size;
        n += 1;
        if &key == b"SE" {
            return Some(complete_with_tags(
                &src,
                p,
                format!("{n} Musepack SV8 packets"),
            ));
        }
        let t = Took {
            steps: 1,
            flags: 0,
            count: 0,
        };
        src.walk_took(&mut noting, t, (p, 0));
    }
}

/// Packets walked at most.
const MAX_PACKETS: u32 = 1 << 24;

/// Largest SV7 frame accepted, in bits.
const MAX_FRAME_BITS: u64 = 65_535;

/// A stream version 7 file (`MP+` at 0).
fn sv7(src: &Src) -> Option<Verdict> {
    let version = src.u8(3)?;
    let frames = u64::from(src.u32le(4)?);
    if !matches!(version, 0x07 | 0x17) || frames == 0 || frames * 20 > src.len() * 8 {
        return None;
    }
    // The 20 bits at bit position `p` of the stream of LE words.
    let bits20 = |p: u64| -> Option<u64> {
        let w = (p / 32) * 4;
        let lo = match src.u32le(w + 4) {
            Some(lo) => lo,
            None if p % 32 > 12 => return None,
            None => 0,
        };
        let pair = u64::from(src.u32le(w)?) << 32 | u64::from(lo);
        Some(pair >> (44 - p % 32) & 0xF_FFFF)
    };
    let mut p = 24 * 8 + 8;
    for k in 0..frames {
        let Some(n) = bits20(p) else {
            return Some(Verdict::partial(src.len(), src.cut_note()));
        };
        if n == 0 || n > MAX_FRAME_BITS {
            let at = p / 8;
            return (k > 0).then(|| Verdict::partial(at, format!("frame {k} is not one")));
        }
        p += 20 + n;
    }
    let end = p.div_ceil(32) * 4;
    if end > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    }
    Some(complete_with_tags(
        src,
        end,
        format!("{frames} Musepack SV7 frames"),
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::Status;
    use super::super::testutil::*;

    fn packet(key: &[u8; 2], payload: &[u8]) -> Vec<u8> {
        let mut p = key.to_vec();
        let n = payload.len() + 3;
        if n + 1 < 128 {
            p.push(n as u8);
        } else {
            p.push(0x80 | ((n + 1) >> 7) as u8);
            p.push(((n + 1) & 0x7F) as u8);
        }
        p.extend_from_slice(payload);
        p
    }

    /// A stream of `frames` audio packets of `per` bytes.
    pub fn make(frames: usize, per: usize) -> Vec<u8> {
        let rest = [8u8, 0x81, 0x10, 0, 0x05, 0x19];
        let mut sh = crc32fast::hash(&rest).to_be_bytes().to_vec();
        sh.extend_from_slice(&rest);
        let mut f = b"MPCK".to_vec();
        f.extend(packet(b"SH", &sh));
        f.extend(packet(b"RG", &[1, 0, 0, 0, 0, 0, 0, 0, 0]));
        f.extend(packet(b"SO", &[4]));
        for i in 0..frames {
            f.extend(packet(b"AP", &vec![i as u8; per]));
        }
        f.extend(packet(b"SE", &[]));
        f
    }

    pub fn seed() -> Vec<u8> {
        make(4, 150)
    }

    /// An SV7 stream of frames of these bit lengths.
    pub fn sv7(frames: &[u32]) -> Vec<u8> {
        let mut bits: Vec<bool> = vec![false; 8];
        for (i, n) in frames.iter().enumerate() {
            bits.extend((0..20).rev().map(|b| n >> b & 1 == 1));
            bits.extend((0..*n).map(|b| (b as usize * 7 + i).is_multiple_of(3)));
        }
        bits.resize(bits.len().next_multiple_of(32), false);
        let mut f = b"MP+\x17".to_vec();
        f.extend_from_slice(&(frames.len() as u32).to_le_bytes());
        f.extend_from_slice(&[0x3F, 0x00, 0x99, 0x00]);
        f.extend_from_slice(&[0; 12]);
        for w in bits.chunks(32) {
            let v = w.iter().fold(0u32, |a, b| a << 1 | u32::from(*b));
            f.extend_from_slice(&v.to_le_bytes());
        }
        f
    }

    #[test]
    fn packets_to_the_end() {
        for f in [
            seed(),
            make(0, 0),
            make(2, 10),
            sv7(&[7163, 2737, 2516]),
            sv7(&[40]),
        ] {
            assert_complete("mpc", &f);
            assert_prefixes("mpc", &f);
        }
    }

    #[test]
    fn hostile_and_chance() {
        let mut f = make(2, 10);
        let at = f.len() - 3 - 13;
        f[at + 2] = 0xFF;
        f[at + 3] = 0xFF;
        let v = run("mpc", &f).unwrap();
        assert_eq!(v.status, Status::Partial);
        let mut g = seed();
        g[8] ^= 1; // the SH CRC
        assert!(run("mpc", &g).is_none());
        // SV7: a frame count that cannot fit, a frame that is not one.
        let mut h = sv7(&[300, 200]);
        h[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(run("mpc", &h).is_none());
        let mut k = sv7(&[300, 200, 100]);
        k[4] = 4;
        let v = run("mpc", &k).unwrap();
        assert_ne!(v.status, Status::Complete);
        let mut m = sv7(&[300, 200]);
        m[26] = 0xFF; // the first frame's length: over 65,535 bits
        assert!(run("mpc", &m).is_none());
    }
}
