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
//! * `None`: any header check above fails.
//! * `Complete`: the page count is valid and non-zero and `page_size ×
//!   page_count` bytes lie inside the window; length = that product.
//! * `Partial`: the product runs past the window (a page count of 2^32-1 just
//!   ends here; nothing is allocated), length = window.
//! * `Unvalidated`: the in-header page count is not valid (written by a
//!   pre-3.7.0 library, or the counters disagree); length = window, as the
//!   true size would need a b-tree walk.
//!
//! Not checked: b-tree pages other than page 1's header, freelist, WAL.

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
    let v = if len > src.len() {
        Verdict::partial(src.len(), src.cut_note())
    } else {
        Verdict::complete(len)
    };
    Some(v.with_note(format!("{pages} pages of {page_size} bytes")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{Limits, Status};

    /// A valid file, the seed for the mutation property test.
    pub fn seed() -> Vec<u8> {
        sample(512, 3)
    }

    fn sample(page_size: u32, pages: u32) -> Vec<u8> {
        let mut v = vec![0u8; (page_size * pages) as usize];
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
        v[44..48].copy_from_slice(&4u32.to_be_bytes());
        v[92..96].copy_from_slice(&7u32.to_be_bytes());
        v[96..100].copy_from_slice(&3_045_001u32.to_be_bytes());
        v[100] = 0x0D;
        for p in 1..pages as usize {
            v[p * page_size as usize] = 0x0D;
        }
        v
    }

    #[test]
    fn valid() {
        assert_complete("sqlite", &sample(4096, 3));
        assert_complete("sqlite", &sample(512, 1));
        assert_complete("sqlite", &sample(65536, 2));
        assert_prefixes("sqlite", &sample(512, 3));
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
        let db = dir.join("t.db");
        let script = "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\nc.execute('create table t(a,b)')\nc.executemany('insert into t values(?,?)',[(i,'x'*i) for i in range(2000)])\nc.commit()\n";
        let ok = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&db)
            .status()
            .is_ok_and(|s| s.success());
        if let (true, Ok(d)) = (ok, std::fs::read(&db)) {
            check_real("sqlite", std::slice::from_ref(&db));
            assert!(d.len() > 4096);
        } else {
            eprintln!("python3/sqlite3 not available; skipped");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
