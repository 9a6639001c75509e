//! SQLite 3 database file: length from the header's page size × page count.
//!
//! Structure (<https://www.sqlite.org/fileformat2.html> §1.3): a 100-byte
//! header `SQLite format 3\0`; page size (u16 BE at 16, a power of two in
//! 512..=32768, or 1 meaning 65536); write/read versions (18, 19: 1 legacy or
//! 2 WAL); maximum/minimum embedded payload fractions (21..24: 64, 32, 32);
//! file change counter (24); database size in pages (28), valid only when the
//! change counter equals "version-valid-for" (92); then page 1's b-tree header
//! at offset 100, which must be a table b-tree page (0x0D leaf or 0x05
//! interior) since page 1 is the root of `sqlite_schema`.
//!
//! When the page count is valid and the pages are in the window, every page
//! is accounted for the way `PRAGMA integrity_check` does: the b-trees are
//! walked from page 1 (`sqlite_schema`) and from every root page named in its
//! records (§2.6), with each page's header checked (type 2/5/10/13, cell
//! count and cell pointers inside the page, child pages in range, no page
//! reached twice) and each cell's overflow chain followed for exactly the
//! number of pages its payload needs (§1.6); the freelist trunk and leaf
//! pages (header 32/36), pointer-map pages of auto-vacuum databases (header
//! 52) and the lock-byte page are added. A valid database uses every page,
//! so any page left over or any bad page means the pages are not all this
//! database's (typically a fragmented file whose later pages are someone
//! else's data).
//!
//! * `None`: any header check above fails.
//! * `Complete`: `page_size × page_count` bytes lie inside the window and
//!   every page was accounted for; length = that product. (Databases of more
//!   than [`MAX_WALK_PAGES`] pages are not walked: Complete on the header.)
//! * `Partial`: the product runs past the window (a page count of 2^32-1 just
//!   ends here; nothing is allocated), length = window; or the page walk
//!   failed, length = the pages before the first bad page (or the whole
//!   product when pages are merely unaccounted for).
//! * `Unvalidated`: the in-header page count is not valid (written by a
//!   pre-3.7.0 library, or the counters disagree); length = window, as the
//!   true size would need a full b-tree walk without a known page count.
//!
//! Not checked: record contents beyond the schema's root page numbers, WAL
//! files, free-block chains inside pages.

use super::Verdict;
use super::read::Src;

pub fn validate(src: Src) -> Option<Verdict> {
    if !src.starts_with_at(0, b"SQLite format 3\0") {
        return None;
    }
    let Some(h) = src.bytes::<101>(0) else {
        return Some(Verdict::partial(src.len(), src.cut_note()));
    };
    let raw = u16::from_be_bytes([h[16], h[17]]);
    let page_size: u64 = match raw {
        1 => 65536,
        n if n >= 512 && n.is_power_of_two() => u64::from(n),
        _ => return None,
    };
    if !matches!(h[18], 1 | 2) || !matches!(h[19], 1 | 2) || h[21..24] != [64, 32, 32] {
        return None;
    }
    if u64::from(h[20]) > page_size - 480 {
        return None;
    }
    if !matches!(h[100], 0x0D | 0x05) {
        return None;
    }
    let change = u32::from_be_bytes([h[24], h[25], h[26], h[27]]);
    let pages = u32::from_be_bytes([h[28], h[29], h[30], h[31]]);
    let valid_for = u32::from_be_bytes([h[92], h[93], h[94], h[95]]);
    if change != valid_for || pages == 0 {
        return Some(Verdict::unvalidated(
            src.len(),
            "in-header page count not valid (legacy writer); size unknown",
        ));
    }
    let len = page_size * u64::from(pages);
    let note = format!("{pages} pages of {page_size} bytes");
    if len > src.len() {
        return Some(Verdict::partial(src.len(), src.cut_note()).with_note(note));
    }
    if u64::from(pages) > MAX_WALK_PAGES {
        return Some(
            Verdict::complete(len)
                .with_note(note)
                .with_note("too many pages to walk"),
        );
    }
    let usable = page_size - u64::from(h[20]);
    let mut w = Walker {
        src,
        ps: page_size,
        usable,
        pages,
        seen: vec![0u32; pages as usize + 1],
        stack: Vec::new(),
        buf: vec![0u8; page_size as usize],
        first_bad: None,
        roots: Vec::new(),
    };
    w.run(&h);
    let v = match w.first_bad {
        Some((page, why)) => {
            let good = (u64::from(page).saturating_sub(1) * page_size).clamp(page_size, len);
            Verdict::partial(good, format!("page {page}: {why}"))
        }
        None => match w.unseen() {
            0 => Verdict::complete(len),
            n => Verdict::partial(len, format!("{n} pages not used by the database")),
        },
    };
    Some(v.with_note(note))
}

/// Databases with more pages are accepted on their header alone.
pub const MAX_WALK_PAGES: u64 = 1 << 20;

/// A page to visit.
#[derive(Clone, Copy)]
enum Job {
    /// A b-tree page; `schema` for the sqlite_schema tree.
    Btree { page: u32, schema: bool },
    /// An overflow chain: first page, number of pages it must have.
    Overflow { page: u32, count: u64 },
}

struct Walker<'a> {
    src: Src<'a>,
    ps: u64,
    usable: u64,
    pages: u32,
    /// For each page, the page that referred to it (0: not reached yet).
    seen: Vec<u32>,
    stack: Vec<Job>,
    buf: Vec<u8>,
    /// The lowest bad page and why.
    first_bad: Option<(u32, &'static str)>,
    /// Root pages named by the schema, with the schema page naming them.
    roots: Vec<(u32, u32)>,
}

/// A SQLite varint at `b[i..]`: (value, length).
fn varint(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for k in 0..9 {
        let c = *b.get(i + k)?;
        if k == 8 {
            return Some((v << 8 | u64::from(c), 9));
        }
        v = v << 7 | u64::from(c & 0x7F);
        if c & 0x80 == 0 {
            return Some((v, k + 1));
        }
    }
    None
}

impl Walker<'_> {
    fn bad(&mut self, page: u32, why: &'static str) {
        if self.first_bad.is_none_or(|(p, _)| page < p) {
            self.first_bad = Some((page, why));
        }
    }

    /// Marks `page` used; false (and a bad mark) when out of range or seen.
    fn mark(&mut self, page: u32, from: u32) -> bool {
        if page == 0 || page > self.pages {
            self.bad(from, "page number out of range");
            return false;
        }
        let Some(slot) = self.seen.get_mut(page as usize) else {
            return false;
        };
        if *slot != 0 {
            // Two references: the later page of the two referrers is the
            // likelier stranger (a fragmented file's pages are the later ones).
            let other = *slot;
            self.bad(from.max(other), "refers to a page already in use");
            return false;
        }
        *slot = from.max(1);
        true
    }

    fn unseen(&self) -> u64 {
        self.seen.iter().skip(1).filter(|&&s| s == 0).count() as u64
    }

    fn read_page(&mut self, page: u32) -> bool {
        let off = (u64::from(page) - 1) * self.ps;
        self.src.read_exact(off, &mut self.buf)
    }

    fn run(&mut self, h: &[u8; 101]) {
        let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        // Lock-byte page (only in databases over 1 GiB).
        let lock = (1u64 << 30) / self.ps + 1;
        if lock <= u64::from(self.pages) {
            self.mark(lock as u32, 1);
        }
        // Pointer-map pages of auto-vacuum databases.
        if be32(52) != 0 {
            let step = self.usable / 5 + 1;
            let mut p = 2u64;
            while p <= u64::from(self.pages) {
                if p != lock {
                    self.mark(p as u32, 1);
                }
                p += step;
                if p == lock {
                    p += 1;
                }
            }
        }
        // Freelist: trunk pages and their leaves.
        let mut trunk = be32(32);
        let mut free_left = u64::from(be32(36));
        let mut hops = 0u32;
        let mut by = 1; // the header names the first trunk page
        while trunk != 0 && hops <= self.pages {
            hops += 1;
            if !self.mark(trunk, by) || !self.read_page(trunk) {
                break;
            }
            by = trunk;
            let next = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
            let n = u64::from(u32::from_be_bytes([
                self.buf[4],
                self.buf[5],
                self.buf[6],
                self.buf[7],
            ]));
            if n > self.usable / 4 - 2 || n + 1 > free_left {
                self.bad(trunk, "bad freelist trunk page");
                break;
            }
            free_left -= n + 1;
            for i in 0..n as usize {
                let o = 8 + 4 * i;
                let leaf = u32::from_be_bytes([
                    self.buf[o],
                    self.buf[o + 1],
                    self.buf[o + 2],
                    self.buf[o + 3],
                ]);
                self.mark(leaf, trunk);
            }
            trunk = next;
        }
        // B-trees: the schema, then every root it names.
        if self.mark(1, 1) {
            self.stack.push(Job::Btree {
                page: 1,
                schema: true,
            });
        }
        while let Some(job) = self.stack.pop() {
            match job {
                Job::Btree { page, schema } => self.btree(page, schema),
                Job::Overflow { page, count } => self.overflow(page, count),
            }
            if self.stack.is_empty() {
                while let Some((r, by)) = self.roots.pop() {
                    if self.mark(r, by) {
                        self.stack.push(Job::Btree {
                            page: r,
                            schema: false,
                        });
                        break;
                    }
                }
            }
        }
    }

    fn overflow(&mut self, mut page: u32, count: u64) {
        for k in 0..count {
            if !self.read_page(page) {
                self.bad(page, "overflow page unreadable");
                return;
            }
            let next = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
            if k + 1 == count {
                if next != 0 {
                    self.bad(page, "overflow chain too long");
                }
                return;
            }
            if !self.mark(next, page) {
                return;
            }
            page = next;
        }
    }

    fn btree(&mut self, page: u32, schema: bool) {
        if !self.read_page(page) {
            self.bad(page, "b-tree page unreadable");
            return;
        }
        let base = if page == 1 { 100 } else { 0 };
        let u = self.usable as usize;
        let b = &self.buf;
        let ty = b[base];
        let interior = matches!(ty, 2 | 5);
        if !matches!(ty, 2 | 5 | 10 | 13) {
            self.bad(page, "not a b-tree page");
            return;
        }
        let ncells = usize::from(u16::from_be_bytes([b[base + 3], b[base + 4]]));
        let content = match u16::from_be_bytes([b[base + 5], b[base + 6]]) {
            0 => 65536,
            c => usize::from(c),
        };
        let hdr = base + if interior { 12 } else { 8 };
        if hdr + 2 * ncells > content.min(u) || content > u {
            self.bad(page, "b-tree page header inconsistent");
            return;
        }
        let mut children: Vec<u32> = Vec::new();
        let mut overflows: Vec<(u32, u64)> = Vec::new();
        let mut roots: Vec<(u32, u32)> = Vec::new();
        if interior {
            children.push(u32::from_be_bytes([
                b[base + 8],
                b[base + 9],
                b[base + 10],
                b[base + 11],
            ]));
        }
        // Payload thresholds (§1.6).
        let max_local = if ty == 13 {
            u - 35
        } else {
            (u - 12) * 64 / 255 - 23
        };
        let min_local = (u - 12) * 32 / 255 - 23;
        for i in 0..ncells {
            let cp = usize::from(u16::from_be_bytes([b[hdr + 2 * i], b[hdr + 2 * i + 1]]));
            if cp < content || cp + 4 > u {
                self.bad(page, "cell pointer outside the cell area");
                return;
            }
            let mut at = cp;
            if interior {
                children.push(u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]));
                at += 4;
            }
            if ty == 5 {
                continue; // rowid only
            }
            let Some((payload, n)) = varint(b, at) else {
                self.bad(page, "bad cell");
                return;
            };
            at += n;
            if ty == 13 {
                let Some((_, n)) = varint(b, at) else {
                    self.bad(page, "bad cell");
                    return;
                };
                at += n;
            }
            let payload = payload as usize;
            let local = if payload <= max_local {
                payload
            } else {
                let k = min_local + (payload - min_local) % (u - 4);
                if k <= max_local { k } else { min_local }
            };
            if at + local > u {
                self.bad(page, "cell runs past the page");
                return;
            }
            if payload > local {
                let Some(o) = b.get(at + local..at + local + 4) else {
                    self.bad(page, "cell runs past the page");
                    return;
                };
                let first = u32::from_be_bytes([o[0], o[1], o[2], o[3]]);
                let count = (payload - local).div_ceil(u - 4) as u64;
                overflows.push((first, count));
            }
            if schema
                && ty == 13
                && let Some(r) = schema_root(&b[at..at + local])
            {
                roots.push((r, page));
            }
        }
        for c in children {
            if self.mark(c, page) {
                self.stack.push(Job::Btree { page: c, schema });
            }
        }
        for (first, count) in overflows {
            if self.mark(first, page) {
                self.stack.push(Job::Overflow { page: first, count });
            }
        }
        self.roots.extend(roots);
    }
}

/// The `rootpage` column (the fourth) of a sqlite_schema record, when it is
/// in the record's local part.
fn schema_root(rec: &[u8]) -> Option<u32> {
    let (hlen, mut i) = varint(rec, 0)?;
    let mut body = usize::try_from(hlen).ok()?;
    for col in 0..4 {
        let (st, n) = varint(rec, i)?;
        i += n;
        let size = match st {
            0 | 8 | 9 => 0,
            1..=4 => st as usize,
            5 => 6,
            6 | 7 => 8,
            n if n >= 12 => usize::try_from((n - 12) / 2).ok()?,
            _ => return None,
        };
        if col == 3 {
            let v = match st {
                8 => 0,
                9 => 1,
                1..=6 => rec
                    .get(body..body + size)?
                    .iter()
                    .fold(0u64, |a, b| a << 8 | u64::from(*b)),
                _ => return None,
            };
            return u32::try_from(v).ok().filter(|v| *v > 0);
        }
        body = body.checked_add(size)?;
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample(512, 3)
    }

    /// A database of `pages` pages (≥ 2): page 1 the schema naming table
    /// `t` at page 2 (a leaf with one row), pages 3.. the freelist (page 3 a
    /// trunk listing the others as leaves).
    fn sample(page_size: u32, pages: u32) -> Vec<u8> {
        let ps = page_size as usize;
        let mut v = vec![0u8; ps * pages as usize];
        v[..16].copy_from_slice(b"SQLite format 3\0");
        let raw = if page_size == 65536 {
            1u16
        } else {
            page_size as u16
        };
        v[16..18].copy_from_slice(&raw.to_be_bytes());
        v[18] = 1;
        v[19] = 1;
        v[21..24].copy_from_slice(&[64, 32, 32]);
        v[24..28].copy_from_slice(&7u32.to_be_bytes());
        v[28..32].copy_from_slice(&pages.to_be_bytes());
        if pages >= 3 {
            v[32..36].copy_from_slice(&3u32.to_be_bytes());
            v[36..40].copy_from_slice(&(pages - 2).to_be_bytes());
        }
        v[44..48].copy_from_slice(&4u32.to_be_bytes());
        v[92..96].copy_from_slice(&7u32.to_be_bytes());
        v[96..100].copy_from_slice(&3_045_001u32.to_be_bytes());
        // Leaf table page with one cell (payload size, rowid, record) at the end.
        let leaf = |v: &mut [u8], page: usize, base: usize, rec: &[u8]| {
            let mut cell = vec![rec.len() as u8, 1];
            cell.extend_from_slice(rec);
            let start = page * ps;
            let at = ps - cell.len();
            v[start + at..start + ps].copy_from_slice(&cell);
            let h = start + base;
            v[h] = 0x0D;
            v[h + 3..h + 5].copy_from_slice(&1u16.to_be_bytes());
            v[h + 5..h + 7].copy_from_slice(&(at as u16).to_be_bytes());
            v[h + 8..h + 10].copy_from_slice(&(at as u16).to_be_bytes());
        };
        let mut rec = vec![6u8, 23, 15, 15, 1, 47];
        rec.extend_from_slice(b"tablett\x02CREATE TABLE t(a)");
        leaf(&mut v, 0, 100, &rec);
        leaf(&mut v, 1, 0, &[2, 1, 7]);
        if pages >= 3 {
            let t = 2 * ps;
            v[t + 4..t + 8].copy_from_slice(&(pages - 3).to_be_bytes());
            for (i, p) in (4..=pages).enumerate() {
                v[t + 8 + 4 * i..t + 12 + 4 * i].copy_from_slice(&p.to_be_bytes());
            }
        }
        v
    }

    #[test]
    fn valid() {
        assert_complete("sqlite", &sample(4096, 3));
        assert_complete("sqlite", &sample(512, 2));
        assert_complete("sqlite", &sample(512, 9));
        assert_complete("sqlite", &sample(65536, 2));
        assert_prefixes("sqlite", &sample(512, 4));
    }

    #[test]
    fn pages_not_all_ours() {
        // Page 2 (the table) replaced by someone else's data: only page 1 stands.
        let mut s = sample(1024, 5);
        s[1024..2048].fill(0x41);
        let v = run("sqlite", &s).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 1024));
        // A freelist page replaced.
        let mut s = sample(1024, 5);
        s[2048..3072].fill(0x41);
        let v = run("sqlite", &s).unwrap();
        assert_eq!(v.status, Status::Partial);
        // A page no structure refers to.
        let mut s = sample(1024, 4);
        s[36..40].copy_from_slice(&1u32.to_be_bytes());
        s[2048 + 4..2048 + 8].fill(0);
        let v = run("sqlite", &s).unwrap();
        assert_eq!(
            (v.status, v.length),
            (Status::Partial, 4096),
            "{:?}",
            v.notes
        );
        // A root page pointing past the end.
        let mut s = sample(1024, 3);
        let i = s[..1024]
            .windows(8)
            .position(|w| w == b"tablett\x02")
            .unwrap()
            + 7;
        s[i] = 0x7F;
        let v = run("sqlite", &s).unwrap();
        assert_eq!(v.status, Status::Partial);
    }

    #[test]
    fn hostile_and_invalid() {
        let mut s = sample(4096, 2);
        s[28..32].copy_from_slice(&u32::MAX.to_be_bytes());
        let v = run("sqlite", &s).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, s.len() as u64));
        let v = run_at("sqlite", &s, 0, Limits { max_len: 5000 }).unwrap();
        assert_eq!((v.status, v.length), (Status::Partial, 5000));
        let mut s = sample(4096, 2);
        s[92] = 9;
        assert_eq!(run("sqlite", &s).unwrap().status, Status::Unvalidated);
        let mut s = sample(4096, 2);
        s[16..18].copy_from_slice(&1000u16.to_be_bytes());
        assert!(run("sqlite", &s).is_none());
        let mut s = sample(4096, 2);
        s[100] = 0x02;
        assert!(run("sqlite", &s).is_none());
    }

    /// A real database made by Python's sqlite3 module, when python3 is here.
    #[test]
    fn real_database() {
        let dir = std::env::temp_dir().join(format!("gpucarve-sqlite-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        // Several layouts: plain; small pages with overflow chains, an index
        // and a freelist; auto-vacuum (pointer maps); WITHOUT ROWID.
        let script = "import sqlite3,sys,os\n\
            def mk(name, pre, body):\n\
            \tc=sqlite3.connect(os.path.join(sys.argv[1], name))\n\
            \tfor s in pre: c.execute(s)\n\
            \tbody(c); c.commit(); c.close()\n\
            def plain(c):\n\
            \tc.execute('create table t(a,b)')\n\
            \tc.executemany('insert into t values(?,?)',[(i,'x'*i) for i in range(2000)])\n\
            def over(c):\n\
            \tc.execute('create table t(a,b)'); c.execute('create index i on t(a)')\n\
            \tc.executemany('insert into t values(?,?)',[(str(i)*50,bytes(range(256))*(i%40)) for i in range(300)])\n\
            \tc.execute('delete from t where rowid%3=0')\n\
            def wr(c):\n\
            \tc.execute('create table w(k text primary key, v) without rowid')\n\
            \tc.executemany('insert into w values(?,?)',[('k'*(i%300)+str(i),'v'*i) for i in range(800)])\n\
            mk('plain.db', [], plain)\n\
            mk('over.db', ['pragma page_size=1024'], over)\n\
            mk('auto.db', ['pragma auto_vacuum=1', 'pragma page_size=512'], over)\n\
            mk('wr.db', ['pragma page_size=2048'], wr)\n";
        let ok = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        let dbs: Vec<_> = ["plain.db", "over.db", "auto.db", "wr.db"]
            .iter()
            .map(|n| dir.join(n))
            .collect();
        if ok && dbs.iter().all(|d| d.exists()) {
            let (total, exact) = check_real("sqlite", &dbs);
            assert_eq!((total, exact), (4, 4));
        } else {
            eprintln!("python3/sqlite3 not available; skipped");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
