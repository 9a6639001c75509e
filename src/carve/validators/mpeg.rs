//! MPEG program stream (MPEG-1 system stream, MPEG-2 PS: `.mpg`, `.mpeg`,
//! DVD `.vob`): a walk of packs and packets up to the end code.
//!
//! Structure (ISO/IEC 11172-1 §2.4.3, ISO/IEC 13818-1 §2.5.3): a sequence of
//! packs, each a pack header `00 00 01 BA` followed by packets `00 00 01 id`
//! (`id` ≥ `BB`: the system header `BB` or a stream's PES packet) that carry
//! a 16-bit length after their start code; the stream ends with the end code
//! `00 00 01 B9`.
//!
//! * MPEG-1 pack header: 12 bytes; the byte after the start code is
//!   `0010 xxx1` and the SCR and mux-rate fields carry marker bits.
//! * MPEG-2 pack header: 14 bytes plus `0..=7` stuffing bytes (the low three
//!   bits of its last byte); the byte after the start code is `01xx x1xx`.
//!
//! Checked: the first pack carries the system header (`00 00 01 BB`), as a
//! stream's first pack must; every pack header's version bits and marker bits, every packet's
//! start code prefix and stream id, the lengths (which must lead to the next
//! start code). The payload (the coded audio and video) is not decoded.
//!
//! * `None`: the first pack header is not valid or not followed by the
//!   system header (a pack from the middle of a stream).
//! * `Complete`: the walk reaches the end code (length includes it); or, with
//!   at least [`MIN_PACKS`] packs walked, the chain of start codes stops where
//!   a file could end: on a 512-byte boundary or followed by zero bytes up to
//!   the next one (the slack of its last cluster). Muxers often omit the end
//!   code (PhotoRec ends such files the same way); a note says so.
//! * `Partial`: the window ends first (length = window), or the chain stops
//!   elsewhere (length = end of the last whole packet).

use super::Verdict;
use super::read::Src;

/// Packs walked before a chain without an end code may count as complete.
pub const MIN_PACKS: u64 = 2;
/// Start codes walked at most (bounds the time on hostile input).
const MAX_UNITS: u64 = 50_000_000;
/// Zero bytes taken between a packet's end and the next pack header. Video
/// CD muxers follow each audio pack's packet with 20 zero bytes (VCD 2.0;
/// ffmpeg's `vcd` muxer writes them), which are no packet of their own.
const MAX_STUFF: usize = 32;

/// The number of zero bytes (1..=[`MAX_STUFF`]) at `pos` that a valid pack
/// header follows, or `None`.
fn zero_stuffing(src: &Src, pos: u64) -> Option<u64> {
    let mut b = [0u8; MAX_STUFF + 4];
    let n = src.read(pos, &mut b);
    let z = b[..n].iter().position(|&x| x != 0)?.checked_sub(2)?;
    if z == 0 || z > MAX_STUFF || b[..n].get(z..z + 4)? != [0, 0, 1, 0xBA] {
        return None;
    }
    let z = z as u64;
    pack_header(src, pos + z).map(|_| z)
}

/// Length of the valid pack header at `off`, or `None`.
fn pack_header(src: &Src, off: u64) -> Option<u64> {
    let h = src.bytes::<14>(off).or_else(|| {
        // An MPEG-1 pack header is 12 bytes: the window may end after it.
        let b = src.bytes::<12>(off)?;
        let mut h = [0u8; 14];
        h[..12].copy_from_slice(&b);
        Some(h)
    })?;
    let (len, _) = parse_pack(&h)?;
    // An MPEG-2 pack header is 14 bytes at least.
    (len == 12 || src.has(off, 14)).then_some(len)
}

/// A pack header's length and system clock reference (its 33-bit base, in
/// 90 kHz ticks), or `None` when `h` is not a valid pack header.
fn parse_pack(h: &[u8; 14]) -> Option<(u64, u64)> {
    if h[..4] != [0, 0, 1, 0xBA] {
        return None;
    }
    let b = |i: usize| u64::from(h[i]);
    if h[4] >> 4 == 0b0010 {
        // MPEG-1: '0010' SCR[32..30] 1 | SCR[29..15] 1 | SCR[14..0] 1 | 1 mux_rate 1.
        let ok =
            h[4] & 1 == 1 && h[6] & 1 == 1 && h[8] & 1 == 1 && h[9] & 0x80 != 0 && h[11] & 1 == 1;
        let scr = ((b(4) >> 1) & 7) << 30 | b(5) << 22 | (b(6) >> 1) << 15 | b(7) << 7 | b(8) >> 1;
        return ok.then_some((12, scr));
    }
    if h[4] >> 6 == 0b01 {
        // MPEG-2: '01' SCR 1 SCR 1 SCR 1 ext 1 | mux_rate 11 | reserved stuffing.
        let ok = h[4] & 0x04 != 0
            && h[6] & 0x04 != 0
            && h[8] & 0x04 != 0
            && h[9] & 0x01 != 0
            && h[12] & 0x03 == 0x03;
        let scr = ((b(4) >> 3) & 7) << 30
            | (b(4) & 3) << 28
            | b(5) << 20
            | (b(6) >> 3) << 15
            | (b(6) & 3) << 13
            | b(7) << 5
            | b(8) >> 3;
        return ok.then_some((14 + u64::from(h[13] & 0x07), scr));
    }
    None
}

/// How far back [`continues_a_stream`] looks for the pack before the
/// candidate (Video CD packs are 2,324 bytes, DVD's 2,048).
const LOOKBACK: usize = 8192;

/// True when the candidate's pack continues the stream before it: the last
/// pack header in the [`LOOKBACK`] bytes before the candidate is followed
/// by packets (and at most [`MAX_STUFF`] zeros) that end exactly at the
/// candidate, and its clock is earlier than the candidate's. A muxer that
/// repeats the system header (SVCD, DVD) makes such packs look like a
/// stream's first; a new file (its clock restarted) after the end of
/// another is a start all the same.
fn continues_a_stream(src: &Src, scr: u64) -> bool {
    let mut before = Vec::new();
    src.preceding(LOOKBACK as u64, &mut before);
    let n = before.len();
    let Some(p) = before.windows(4).rposition(|w| w == [0, 0, 1, 0xBA]) else {
        return false;
    };
    let mut h = [0u8; 14];
    let k = (n - p).min(14);
    h[..k].copy_from_slice(&before[p..p + k]);
    let Some((len, prev_scr)) = parse_pack(&h) else {
        return false;
    };
    let mut at = p + len as usize;
    while at + 6 <= n && before[at..at + 3] == [0, 0, 1] && before[at + 3] >= 0xBB {
        at += 6 + usize::from(u16::from_be_bytes([before[at + 4], before[at + 5]]));
    }
    let lands = at <= n && n - at <= MAX_STUFF && before[at..].iter().all(|&x| x == 0);
    lands && prev_scr < scr
}

pub fn validate(src: Src) -> Option<Verdict> {
    let first = pack_header(&src, 0)?;
    // A stream's first pack carries the system header (ISO/IEC 11172-1
    // 2.4.3.2, ISO/IEC 13818-1 2.5.3.5): the packs after it, which do not,
    // are not candidates of their own; nor are those that repeat it in the
    // middle of a stream.
    if src.bytes::<4>(first)? != [0, 0, 1, 0xBB] {
        return None;
    }
    let mut h = [0u8; 14];
    src.read(0, &mut h);
    if parse_pack(&h).is_some_and(|(_, scr)| continues_a_stream(&src, scr)) {
        return None;
    }
    let mut pos = first;
    let mut packs = 1u64;
    let mut packets = 0u64;
    // The zero stuffing last seen before a pack header, if any.
    let mut stuffing = None;
    for _ in 0..MAX_UNITS {
        let Some(code) = src.bytes::<4>(pos) else {
            // The window ends inside the stream (or right after a packet).
            if packets == 0 {
                return None;
            }
            let mut v = Verdict::partial(src.len(), src.cut_note());
            v.notes.push(format!("{packs} packs, {packets} packets"));
            return Some(v);
        };
        if code[..3] != [0, 0, 1] {
            let Some(z) = zero_stuffing(&src, pos) else {
                break;
            };
            stuffing = Some(z);
            pos += z;
            continue;
        }
        match code[3] {
            0xB9 => {
                let mut v = Verdict::complete(pos + 4);
                v.notes
                    .push(format!("{packs} packs, {packets} packets, end code"));
                return Some(v);
            }
            0xBA => {
                let Some(n) = pack_header(&src, pos) else {
                    break;
                };
                pos += n;
                packs += 1;
            }
            0xBB..=0xFF => {
                let Some(len) = src.u16be(pos + 4) else {
                    break;
                };
                let end = pos + 6 + u64::from(len);
                if end > src.len() {
                    let mut v = Verdict::partial(src.len(), src.cut_note());
                    v.notes.push(format!("{packs} packs, {packets} packets"));
                    return Some(v);
                }
                pos = end;
                packets += 1;
            }
            _ => break,
        }
    }
    if packets == 0 {
        return None;
    }
    // A stream that stuffs its packs with zeros ends with its last pack's
    // stuffing (the same number of zeros) when that ends cleanly.
    if let Some(z) = stuffing
        && packs >= MIN_PACKS
        && src.has(pos, z)
        && (0..z).all(|i| src.u8(pos + i) == Some(0))
        && src.ends_cleanly(pos + z)
    {
        let mut v = Verdict::complete(pos + z);
        v.notes.push(format!(
            "{packs} packs, {packets} packets; no end code: ends after its last pack's {z} zero bytes of stuffing, at the end of a sector or before zero slack"
        ));
        return Some(v);
    }
    if packs >= MIN_PACKS && src.ends_cleanly(pos) {
        let mut v = Verdict::complete(pos);
        v.notes.push(format!(
            "{packs} packs, {packets} packets; no end code: ends where the chain of start codes stops, at the end of a sector or before zero slack"
        ));
        return Some(v);
    }
    let mut v = Verdict::partial(
        pos,
        format!("no start code at {pos} (after {packs} packs, {packets} packets) and no end code"),
    );
    v.notes.push(format!("{packs} packs, {packets} packets"));
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::super::testutil::run;

    /// An MPEG-1 pack header with valid marker bits.
    fn pack1() -> Vec<u8> {
        vec![0, 0, 1, 0xBA, 0x21, 0, 1, 0, 1, 0x80, 0x1B, 0x83]
    }

    /// An MPEG-2 pack header with `stuff` stuffing bytes.
    fn pack2(stuff: u8) -> Vec<u8> {
        let mut h = vec![
            0,
            0,
            1,
            0xBA,
            0x44,
            0,
            4,
            0,
            4,
            1,
            0x01,
            0x89,
            0xC3,
            0xF8 | stuff,
        ];
        h.extend(std::iter::repeat_n(0xFF, usize::from(stuff)));
        h
    }

    fn packet(id: u8, payload: usize) -> Vec<u8> {
        let mut p = vec![0, 0, 1, id];
        p.extend_from_slice(&(payload as u16).to_be_bytes());
        p.extend((0..payload).map(|i| (i * 7 + 3) as u8 | 1));
        p
    }

    fn stream(pack: fn() -> Vec<u8>, packs: usize, end_code: bool) -> Vec<u8> {
        let mut d = Vec::new();
        for i in 0..packs {
            d.extend(pack());
            if i == 0 {
                d.extend(packet(0xBB, 12));
            }
            d.extend(packet(0xE0, 300));
            d.extend(packet(0xC0, 100));
        }
        if end_code {
            d.extend([0, 0, 1, 0xB9]);
        }
        d
    }

    #[test]
    fn end_code_makes_it_complete() {
        for pack in [pack1 as fn() -> Vec<u8>, || pack2(3)] {
            let mut d = stream(pack, 5, true);
            let n = d.len() as u64;
            d.extend([0x55u8; 700]);
            let v = run("mpeg", &d).expect("valid");
            assert_eq!(v.status, Status::Complete);
            assert_eq!(v.length, n);
        }
    }

    #[test]
    fn no_end_code_is_complete_only_at_a_clean_end() {
        let mut d = stream(pack1, 4, false);
        let n = d.len() as u64;
        // Zero slack to the sector boundary: the file ends there.
        d.resize(n.div_ceil(512) as usize * 512, 0);
        d.extend([0x55u8; 512]);
        let v = run("mpeg", &d).expect("valid");
        assert_eq!((v.status, v.length), (Status::Complete, n));
        // Foreign bytes right after the last packet: not proven to end there.
        let mut d = stream(pack1, 4, false);
        d.extend([0x55u8; 1024]);
        let v = run("mpeg", &d).expect("valid");
        assert_eq!((v.status, v.length), (Status::Partial, n));
    }

    #[test]
    fn one_pack_without_end_code_is_partial_and_junk_is_rejected() {
        let mut d = stream(pack1, 1, false);
        d.resize(4096, 0);
        assert_eq!(run("mpeg", &d).map(|v| v.status), Some(Status::Partial));
        let mut bad = pack1();
        bad[4] = 0x20; // marker bit cleared
        bad.extend(packet(0xE0, 10));
        assert!(run("mpeg", &bad).is_none());
        assert!(run("mpeg", &[0, 0, 1, 0xBA, 0x21, 0x55]).is_none());
        let mut lone = pack1();
        lone.extend([0x12u8; 64]);
        assert!(run("mpeg", &lone).is_none());
        // A pack from the middle of a stream (no system header) is not a start.
        let d = stream(pack1, 4, true);
        let second = d
            .windows(4)
            .skip(4)
            .position(|w| w == [0, 0, 1, 0xBA])
            .expect("second pack")
            + 4;
        assert!(run("mpeg", &d[second..]).is_none());
    }

    /// A Video CD stream: each pack's audio packet followed by 20 zero
    /// bytes; `last` sizes the last packet.
    fn vcd(packs: usize, last: usize) -> Vec<u8> {
        let mut d = Vec::new();
        for i in 0..packs {
            d.extend(pack1());
            if i == 0 {
                d.extend(packet(0xBB, 12));
            }
            d.extend(packet(0xC0, if i + 1 == packs { last } else { 200 }));
            d.extend([0u8; 20]);
        }
        d
    }

    #[test]
    fn zero_stuffing_between_packs_is_walked() {
        // The stream ends on a sector boundary after its last stuffing.
        let probe = vcd(3, 0).len();
        let last = probe.next_multiple_of(512) - probe;
        let mut d = vcd(3, last);
        let n = d.len();
        assert_eq!(n % 512, 0);
        d.extend([0x55u8; 600]);
        let v = run("mpeg", &d).expect("valid");
        assert_eq!(
            (v.status, v.length),
            (Status::Complete, n as u64),
            "{:?}",
            v.notes
        );
        // Fewer zeros than the stream's stuffing after its last packet,
        // then foreign bytes: not proven to end there.
        let mut d = vcd(3, last);
        d.truncate(n - 10);
        d.extend([0x55u8; 600]);
        let v = run("mpeg", &d).expect("valid");
        assert_eq!((v.status, v.length), (Status::Partial, (n - 20) as u64));
        // More zeros than MAX_STUFF before a pack: the walk stops there.
        let mut d = stream(pack1, 1, false);
        let stop = d.len();
        d.extend([0u8; 40]);
        d.extend(pack1());
        d.extend(packet(0xE0, 300));
        d.extend([0, 0, 1, 0xB9]);
        d.resize(d.len().next_multiple_of(512), 0x55);
        let v = run("mpeg", &d).expect("valid");
        assert_eq!(v.length, stop as u64, "{:?}", v.notes);
    }

    /// An MPEG-1 pack header whose clock reads `scr`.
    fn pack1_at(scr: u64) -> Vec<u8> {
        let mut h = pack1();
        h[4] = 0x21 | (((scr >> 30) & 7) as u8 * 2);
        h[5] = (scr >> 22) as u8;
        h[6] = ((scr >> 15) & 0x7F) as u8 * 2 + 1;
        h[7] = (scr >> 7) as u8;
        h[8] = (scr & 0x7F) as u8 * 2 + 1;
        h
    }

    #[test]
    fn a_pack_repeating_the_system_header_mid_stream_is_no_start() {
        use super::super::testutil::{NO_LIMIT, run_at};
        let unit = |scr: u64| {
            let mut d = pack1_at(scr);
            d.extend(packet(0xBB, 12));
            d.extend(packet(0xE0, 300));
            d
        };
        for (second, starts) in [(9000, false), (50, true)] {
            let mut d = unit(3000);
            let at = d.len() as u64;
            d.extend(unit(second));
            d.extend(unit(second + 3000));
            d.extend([0, 0, 1, 0xB9]);
            // The clock runs on: the second pack continues the first's
            // stream. It went back: a new file begins there.
            let v = run_at("mpeg", &d, at, NO_LIMIT);
            assert_eq!(v.is_some(), starts, "second pack's clock {second}");
            assert_eq!(run("mpeg", &d).map(|v| v.status), Some(Status::Complete));
        }
    }

    #[test]
    fn cut_by_the_window_is_partial() {
        let d = stream(pack1, 6, true);
        let cut = &d[..d.len() - 200];
        let v = run("mpeg", cut).expect("valid start");
        assert_eq!(v.status, Status::Partial);
        assert!(v.length <= cut.len() as u64);
    }
}
