//! Musepack stream version 8 (`.mpc`, `MPCK`).
//!
//! Structure (Musepack "SV8 specification", musepack.net): `"MPCK"`, then
//! packets `key (2 capital letters) | size (variable-length: 7 bits a
//! byte, high bit set on all but the last; the size of the whole packet,
//! key and size field included) | payload`. The first packet is the
//! stream header `SH` (payload: CRC-32 of the rest, stream version 8,
//! ...); the stream ends with the `SE` packet. Taggers append APEv2 and
//! ID3v1. (Stream version 7, `MP+`, is a bit stream of frames that records
//! no byte length: not carved.)
//!
//! Checked: the `SH` packet's CRC and version; every key two capitals and
//! every size at least its header.
//!
//! * `None`: no valid `SH` packet first;
//! * `Complete`: the packets reach `SE`; length = its end plus the tags
//!   after it;
//! * `Partial`: the window ends inside a packet (length = window), or a
//!   packet is not one (length = its offset).
//!
//! Reads at most 11 bytes per packet (each at least 3 long): linear.

use super::Verdict;
use super::mp3::complete_with_tags;
use super::read::Src;

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
    let mut n = 1u64;
    loop {
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
    }
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

    #[test]
    fn packets_to_the_end() {
        for f in [seed(), make(0, 0), make(2, 10)] {
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
    }
}
