//! ZIP: the EOCD fixes the gap; central-directory offsets and CRCs prove the split.

use super::Joined;
use super::budget::Budget;
use super::cache::{Cache, read_exact};
use super::join::{for_each_piece, joined, nearest_first, tail_of_copy, validate_join};
use super::runs::{MAX_RUNS, TwoRuns};
use crate::carve::reader::{le16, le32};
use crate::carve::validators::{ByteReader, Status};

const LFH: &[u8; 4] = b"PK\x03\x04";
const CDH: &[u8; 4] = b"PK\x01\x02";
const EOCD: &[u8; 4] = b"PK\x05\x06";
/// Most EOCD records considered per file.
const MAX_EOCDS: usize = 64;
/// Most splits tried for a crossing entry.
const MAX_CROSS_SPLITS: u64 = 4;
/// Most bytes of second fragment searched for its EOCD beyond the gap.
const MAX_TAIL: u64 = 64 << 20;

/// The local-header walk: `(last good local header, break offset)`, or
/// `None` when the walk reaches the central directory (not fragmented
/// in the entries) or is not a ZIP.
fn break_at(r: &TwoRuns, b: &mut Budget) -> Option<(u64, u64)> {
    let max_len = r.len();
    let mut pos = 0u64;
    let mut last: Option<u64> = None;
    for _ in 0..65_536 {
        let mut h = [0u8; 30];
        if pos + 30 > max_len || !read_exact(r, pos, &mut h) {
            return last.map(|l| (l, pos.min(max_len)));
        }
        if &h[..4] == CDH {
            return cd_break(r, pos);
        }
        if &h[..4] != LFH {
            return last.map(|l| (l, pos));
        }
        let flags = le16(&h, 6);
        let method = le16(&h, 8);
        let csize = le32(&h, 18);
        let data = pos + 30 + le16(&h, 26) + le16(&h, 28);
        let end = if flags & 8 != 0 && csize == 0 {
            if method != 8 {
                return None;
            }
            // Inflate to find the end; an error means the split is before it.
            match inflate(r, data, max_len - data.min(max_len), u64::MAX, b) {
                Inflate::Ok { consumed, .. } => {
                    let mut sig = [0u8; 4];
                    let dd = if read_exact(r, data + consumed, &mut sig) && &sig == b"PK\x07\x08" {
                        16
                    } else {
                        12
                    };
                    data + consumed + dd
                }
                Inflate::Err { at } => return Some((pos, data + at)),
                Inflate::Budget => return None,
            }
        } else {
            data + csize + if flags & 8 != 0 { 12 } else { 0 }
        };
        if end > max_len {
            return Some((pos, max_len));
        }
        last = Some(pos);
        pos = end;
    }
    None
}

/// The central-directory walk from `pos`: `None` when it reaches the
/// EOCD intact, else `(last good central header, break offset)`.
fn cd_break(r: &TwoRuns, mut pos: u64) -> Option<(u64, u64)> {
    let max_len = r.len();
    let mut last = None;
    for _ in 0..65_536 {
        let mut h = [0u8; 46];
        let ok = pos + 46 <= max_len && read_exact(r, pos, &mut h);
        if ok && &h[..4] == EOCD {
            return None;
        }
        if !ok || &h[..4] != CDH {
            return last.map(|l| (l, pos.min(max_len)));
        }
        last = Some(pos);
        pos += 46 + le16(&h, 28) + le16(&h, 30) + le16(&h, 32);
    }
    None
}

pub(super) enum Inflate {
    /// Stream ended: bytes consumed, bytes produced, CRC-32 of the output.
    Ok {
        consumed: u64,
        out: u64,
        crc: u32,
    },
    /// Invalid data at about this input offset (relative to the data start).
    Err {
        at: u64,
    },
    Budget,
}

/// Inflates raw deflate data at `off` of `r` (at most `max_in` bytes in,
/// `max_out` out); fixed buffers.
pub(super) fn inflate(
    r: &dyn ByteReader,
    off: u64,
    max_in: u64,
    max_out: u64,
    b: &mut Budget,
) -> Inflate {
    let mut d = flate2::Decompress::new(false);
    let mut inbuf = vec![0u8; 64 * 1024];
    let mut outbuf = vec![0u8; 64 * 1024];
    let mut crc = crc32fast::Hasher::new();
    let mut fed = 0u64; // bytes read into inbuf so far (absolute count)
    let mut have = 0usize; // valid bytes in inbuf
    let mut used = 0usize; // bytes of inbuf consumed
    loop {
        if used == have {
            // Reads grow from 4 KiB: most candidates fail within it.
            let cap = (4096u64 << (fed / 4096).min(4)).min(inbuf.len() as u64);
            let want = (max_in - fed).min(cap) as usize;
            if !b.bytes(want as u64) {
                return Inflate::Budget;
            }
            have = r.read_at(off + fed, &mut inbuf[..want]).min(want);
            used = 0;
            fed += have as u64;
        }
        let before_in = d.total_in();
        let before_out = d.total_out();
        let res = d.decompress(
            &inbuf[used..have],
            &mut outbuf,
            flate2::FlushDecompress::None,
        );
        let ate = (d.total_in() - before_in) as usize;
        let made = (d.total_out() - before_out) as usize;
        used += ate;
        crc.update(&outbuf[..made]);
        if d.total_out() > max_out {
            return Inflate::Err { at: d.total_in() };
        }
        match res {
            Ok(flate2::Status::StreamEnd) => {
                return Inflate::Ok {
                    consumed: d.total_in(),
                    out: d.total_out(),
                    crc: crc.finalize(),
                };
            }
            Ok(_) => {
                if ate == 0 && made == 0 {
                    // No progress: the input is exhausted (or stuck).
                    return Inflate::Err { at: d.total_in() };
                }
            }
            Err(_) => return Inflate::Err { at: d.total_in() },
        }
    }
}

/// EOCD records in `[from, to)` of the image (at most [`MAX_EOCDS`]),
/// nearest `from` first, or nearest `to` first with `backwards`; from the
/// shared index, else read here (charged to the budget).
fn eocds(
    r: &dyn ByteReader,
    (from, to): (u64, u64),
    backwards: bool,
    b: &mut Budget,
    out: &mut Vec<u64>,
) {
    let any = |_: u8| true;
    let log = b.memory.needles.clone();
    if b.memory
        .eocds
        .cover(r, log.as_deref(), (EOCD, 1, 0), any, from, to)
    {
        let found = b.memory.eocds.range(from, to);
        if backwards {
            out.extend(found.rev().take(MAX_EOCDS));
        } else {
            out.extend(found.take(MAX_EOCDS));
        }
        return;
    }
    let mut all = Vec::new();
    let finder = memchr::memmem::Finder::new(EOCD);
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = from;
    while pos < to && (backwards || all.len() < MAX_EOCDS) {
        let want = (to - pos).min(buf.len() as u64) as usize;
        if !b.bytes(want as u64) {
            break;
        }
        let got = r.read_at(pos, &mut buf[..want]).min(want);
        if got < 4 {
            break;
        }
        all.extend(finder.find_iter(&buf[..got]).map(|i| pos + i as u64));
        if got < want {
            break;
        }
        pos += got as u64 - 3;
    }
    if backwards {
        out.extend(all.into_iter().rev().take(MAX_EOCDS));
    } else {
        out.extend(all.into_iter().take(MAX_EOCDS));
    }
}

/// Recovers the archive whose proven part is `head` (from its first
/// local header; the last run open-ended): the EOCD fixes the last
/// fragment; else a fragment whose crossing entry's CRC is proven heads
/// the next search, while runs are left.
pub(super) fn recover(head: &TwoRuns, max_len: u64, cl: u64, b: &mut Budget) -> Option<Joined> {
    let (r, start) = (head.r, head.a());
    let (last, brk) = break_at(head, b)?;
    let first = ((last + 1).div_ceil(cl) * cl).max((head.split() / cl + 1) * cl);
    let splits: Vec<u64> = (0..b.lim.max_splits)
        .map(|k| first + k * cl)
        .take_while(|&s| s <= brk)
        .collect();
    if splits.is_empty() {
        return None;
    }
    // EOCD candidates: after the break (in order), before the header (out of order).
    let mut found = Vec::new();
    // The EOCD lies within max_gap plus the rest of the file (bounded) after the break.
    // (Image offsets from where the last run holds `last` on.)
    let here = head.map(last.max(head.split()));
    let fwd_to = here
        .saturating_add(brk - last.max(head.split()).min(brk))
        .saturating_add(b.lim.max_gap)
        .saturating_add(MAX_TAIL)
        .min(
            here.saturating_add(max_len - last.max(head.split()).min(max_len))
                .saturating_add(b.lim.max_gap),
        )
        .min(r.len());
    eocds(r, (here, fwd_to), false, b, &mut found);
    let back_from = head.b().saturating_sub(b.lim.max_gap);
    eocds(r, (back_from, head.b()), true, b, &mut found);
    let mut cache = Cache::new(r);
    for e in found {
        let mut rec = [0u8; 22];
        if !cache.read(e, &mut rec) {
            continue;
        }
        let (disk, cd_disk) = (le16(&rec, 4), le16(&rec, 6));
        let (n_disk, n) = (le16(&rec, 8), le16(&rec, 10));
        let (cd_size, cd_off, clen) = (le32(&rec, 12), le32(&rec, 16), le16(&rec, 20));
        if disk != 0 || cd_disk != 0 || n_disk != n || n == 0 || cd_size < 46 * n {
            continue;
        }
        let cd_end = cd_off + cd_size;
        let total = cd_end + 22 + clen;
        if cd_end <= last || total > max_len || e + 22 + clen > r.len() {
            continue;
        }
        // The last run reads virtual offset v at image v + D (e = cd_end + D).
        let d = i128::from(e) - i128::from(cd_end);
        if (d - i128::from(start)) % i128::from(cl) != 0 {
            continue;
        }
        if head.count() == 1 && d > i128::from(start) - i128::from(total) && d <= i128::from(start)
        {
            continue;
        }
        for &split in &splits {
            if split > cd_end {
                break;
            }
            if !b.cand() {
                return None;
            }
            let Ok(s2) = u64::try_from(i128::from(split) + d) else {
                continue;
            };
            if s2 == head.map(split) || head.holds(s2, split) {
                continue;
            }
            let Some(j) = head.then(split, s2, total) else {
                continue;
            };
            if j.len != total {
                continue;
            }
            if let Some(found) = verify(&j, n, cd_off, cd_end, &mut cache, b) {
                return Some(found);
            }
        }
    }
    if head.count() + 2 > MAX_RUNS || !b.ok() {
        return None;
    }
    cross(head, (last, brk), (max_len, cl), &mut cache, b)
}

/// The walk breaks after the local header at `last`: the split lies in
/// that entry (its name, extra field or data) or where it ends (the next
/// header in the next fragment). Tries the next fragment nearest first,
/// for splits at most [`MAX_CROSS_SPLITS`] clusters below where its data
/// stops inflating, or below where the walk broke (anywhere in a short
/// stored entry). A candidate is a proven crossing when the entry holding
/// the split has its CRC-32 (from its local header) and a local or central
/// header follows its data exactly ([`crossing`]); the search then goes on
/// from that join. (Entries with a data descriptor are not crossed.)
fn cross(
    head: &TwoRuns,
    (last, brk): (u64, u64),
    (max_len, cl): (u64, u64),
    cache: &mut Cache,
    b: &mut Budget,
) -> Option<Joined> {
    let (mut splits, from) = entry_splits(head, (last, brk), cl, cache, b)?;
    // A split inside the local header's fixed fields leaves its sizes and
    // name length to the next fragment: that split is tried too (the
    // proof reads the header through the join).
    let in_header = ((last + 4) / cl + 1) * cl;
    if in_header < last + 30 && in_header > head.split() && !splits.contains(&in_header) {
        splits.push(in_header);
    }
    if splits.is_empty() {
        return None;
    }
    let found = nearest_first(head, &splits, cl, b, |i, s2, b| {
        let j = head.then(splits[i], s2, max_len)?;
        // (Before where the entry at `last` ends, the proof starts there.)
        let at = crossing(&j, if splits[i] < from { last } else { from }, cache, b)?;
        let note = format!(
            "fragment {} proven by the CRC-32 of the ZIP entry at {at} across its start and the header after it; split at {}, fragment at {s2}",
            j.count(),
            j.split()
        );
        Some((j, note))
    });
    let (j, note) = found?;
    let mut f = recover(&j, max_len, cl, b)?;
    f.notes.insert(0, note);
    Some(f)
}

/// The splits [`cross`] tries for the entry whose local header is at
/// `last` (its fields read before the split), nearest where it breaks
/// first, and the local header its crossing's proof starts from;
/// `None` when the budget ends.
fn entry_splits(
    head: &TwoRuns,
    (last, brk): (u64, u64),
    cl: u64,
    cache: &mut Cache,
    b: &mut Budget,
) -> Option<(Vec<u64>, u64)> {
    let Some(e) = entry_at(head, last, cache) else {
        return Some((Vec::new(), last));
    };
    let end = e.data + e.csize;
    let after = head.split() / cl + 1;
    // Splits `k·cl` for `k` in `low..=top`: where the entry's data stops
    // inflating (the split is in its name, extra field or data), or, its
    // data intact, where the next header should start; a stored entry
    // anywhere in its data.
    // `from`: the first local header the crossing's proof reads (the
    // entry at `last`, or, intact, the one after it at `brk`).
    let (low, top, from) = match e.method {
        8 => match inflate(head, e.data, e.csize, e.usize, b) {
            Inflate::Err { at } => (
                last / cl + 1,
                (e.data + at).min(end.saturating_sub(1)) / cl,
                last,
            ),
            Inflate::Ok { consumed, .. } => (
                (e.data + consumed).saturating_sub(4).div_ceil(cl),
                brk.saturating_add(3) / cl,
                brk,
            ),
            Inflate::Budget => return None,
        },
        _ => (e.data / cl + 1, end.saturating_sub(1) / cl, last),
    };
    let low = low.max(after);
    if top < low || (e.method == 0 && top - low >= MAX_CROSS_SPLITS) {
        return Some((Vec::new(), last));
    }
    let splits: Vec<u64> = (top.saturating_sub(MAX_CROSS_SPLITS - 1).max(low)..=top)
        .rev()
        .map(|k| k * cl)
        .collect();
    Some((splits, from))
}

/// The entry whose local header is at `pos` of `j` (read through the
/// join); `None` unless a stored or deflated, unencrypted entry whose
/// local header holds its sizes and CRC-32 (no data descriptor: with one,
/// every candidate would be inflated until its stream ends, unbounded by
/// the entry's size, and text decodes as deflate data for kilobytes).
fn entry_at(j: &TwoRuns, pos: u64, cache: &mut Cache) -> Option<Entry> {
    let mut h = [0u8; 30];
    if !cache.read_joined(j, pos, &mut h) || &h[..4] != LFH {
        return None;
    }
    let (flags, method) = (le16(&h, 6), le16(&h, 8));
    if flags & 9 != 0 || !matches!(method, 0 | 8) {
        return None;
    }
    Some(Entry {
        method,
        crc: le32(&h, 14) as u32,
        csize: le32(&h, 18),
        usize: le32(&h, 22),
        data: pos + 30 + le16(&h, 26) + le16(&h, 28),
    })
}

/// The crossing of `j`'s last split proven: from the local header at
/// `from` (at or before the split), the entry holding the split (the one
/// at `from`, or the next one when the split is where its data ends: that
/// header in the next fragment) has its CRC-32, and a local or central
/// header follows its data exactly. Its local header's position, or `None`.
fn crossing(j: &TwoRuns, from: u64, cache: &mut Cache, b: &mut Budget) -> Option<u64> {
    let split = j.split();
    let mut at = from;
    for _ in 0..2 {
        let e = entry_at(j, at, cache)?;
        let end = e.data + e.csize;
        if end <= split {
            at = end;
            continue;
        }
        let mut sig = [0u8; 4];
        if at > split || !cache.read_joined(j, end, &mut sig) || (&sig != LFH && &sig != CDH) {
            return None;
        }
        return (crc_ok(j, &e, b) == Some(true)).then_some(at);
    }
    None
}

struct Entry {
    method: u64,
    crc: u32,
    csize: u64,
    usize: u64,
    data: u64,
}

/// Checks the joined archive; `Some` when the join is proven.
fn verify(
    j: &TwoRuns,
    n: u64,
    cd_off: u64,
    cd_end: u64,
    cache: &mut Cache,
    b: &mut Budget,
) -> Option<Joined> {
    let mut entries = Vec::new();
    let mut p = cd_off;
    for _ in 0..n {
        let mut h = [0u8; 46];
        if !cache.read_joined(j, p, &mut h) || &h[..4] != CDH {
            return None;
        }
        let flags = le16(&h, 8);
        let method = le16(&h, 10);
        let crc = le32(&h, 16) as u32;
        let (csize, usize) = (le32(&h, 20), le32(&h, 24));
        let (nl, xl, cl) = (le16(&h, 28), le16(&h, 30), le16(&h, 32));
        let local = le32(&h, 42);
        if local >= cd_off || flags & 1 != 0 {
            return None;
        }
        let mut lh = [0u8; 30];
        if !cache.read_joined(j, local, &mut lh) || &lh[..4] != LFH || le16(&lh, 26) != nl {
            return None;
        }
        // Names equal (first 256 bytes).
        let k = nl.min(256) as usize;
        let (mut n1, mut n2) = ([0u8; 256], [0u8; 256]);
        if !cache.read_joined(j, p + 46, &mut n1[..k])
            || !cache.read_joined(j, local + 30, &mut n2[..k])
            || n1[..k] != n2[..k]
        {
            return None;
        }
        let data = local + 30 + nl + le16(&lh, 28);
        if data + csize > cd_off {
            return None;
        }
        entries.push(Entry {
            method,
            crc,
            csize,
            usize,
            data,
        });
        p += 46 + nl + xl + cl;
    }
    if p != cd_end || tail_of_copy(j.r, j, LFH) {
        return None;
    }
    // The entry spanning the split must be checked; then the others.
    let spans = |e: &Entry| {
        (1..j.count()).any(|i| {
            let s = j.at[i].0;
            e.data < s && s < e.data + e.csize
        })
    };
    let mut spanning = 0;
    for e in entries.iter().filter(|e| spans(e)) {
        if !crc_ok(j, e, b)? {
            return None;
        }
        spanning += 1;
    }
    let mut checked = spanning;
    for e in entries.iter().filter(|e| !spans(e)) {
        if !b.ok() {
            break;
        }
        match crc_ok(j, e, b) {
            Some(true) => checked += 1,
            Some(false) => return None,
            None if !b.ok() => break,
            None => {}
        }
    }
    let v = validate_join("zip", j, b);
    let subtype = match v {
        Some(v) if v.status == Status::Complete && v.length == j.len => v.subtype,
        Some(_) => return None,
        None => None,
    };
    let kind = if j.count() == 2 {
        "bifragment"
    } else {
        "multi-fragment"
    };
    let note = format!(
        "{kind} join proven by ZIP central directory offsets ({n} entries land on their local headers) and {checked} entry CRC-32s; split at {}, second fragment at {}",
        j.split(),
        j.b()
    );
    joined(j, j.len, subtype, note)
}

/// CRC check of one entry: `Some(ok)`, or `None` when it cannot be checked
/// (other method, budget).
fn crc_ok(j: &TwoRuns, e: &Entry, b: &mut Budget) -> Option<bool> {
    match e.method {
        0 => {
            if e.csize != e.usize {
                return Some(false);
            }
            let mut c = crc32fast::Hasher::new();
            let ok = for_each_piece(j, e.data, e.csize, b, |d| {
                c.update(d);
                true
            });
            if !ok {
                return if b.ok() { Some(false) } else { None };
            }
            Some(c.finalize() == e.crc)
        }
        8 => match inflate(j, e.data, e.csize, e.usize, b) {
            Inflate::Ok { consumed, out, crc } => {
                Some(consumed == e.csize && out == e.usize && crc == e.crc)
            }
            Inflate::Err { .. } => Some(false),
            Inflate::Budget => None,
        },
        _ => None,
    }
}
