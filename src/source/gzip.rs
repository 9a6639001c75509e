//! gzip-compressed raw images (`disk.dd.gz`, several members concatenated).
//!
//! gzip has no random access, and carving needs it (validators jump around).
//! We chose to **spool**: the image is decompressed once, sequentially, into
//! an unlinked temporary file in a folder the user names (`--spool-dir`,
//! default the output folder), and carved from there. Reasons: simple and
//! exact (no inflate-state checkpoints, which flate2's pure-Rust backend
//! cannot restore), bounded memory (a few 4 MiB pieces between the inflater
//! and the thread writing the spool, which overlap), fast random reads
//! afterwards, and the mmap/O_DIRECT/io_uring backends work on the spool.
//! The cost is disk space equal to the image. The spool is unlinked as soon
//! as it is created, so it disappears when the process ends, even on
//! `kill -9`.
//!
//! A corrupt or truncated stream does not lose the bytes before it: the
//! medium is what decompressed cleanly, and the rest is reported as damage.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use super::spool::{Spooled, spool_file};
use super::{Damage, SourceError};

/// gzip magic and the deflate method byte.
pub const MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Output of a first member that fails before it, not by being cut short,
/// makes the input "not a gzip file" rather than a damaged one.
const EARLY: u64 = 64 << 10;

/// Decompresses `path` (every member) into a spool file in `spool_dir`.
pub fn open(path: &Path, spool_dir: &Path) -> Result<Spooled, SourceError> {
    let src = File::open(path).map_err(|e| super::io_open_error(path, e))?;
    let (spool, spool_path) = spool_file(spool_dir).map_err(|source| SourceError::Open {
        path: spool_dir.to_path_buf(),
        source: std::io::Error::new(
            source.kind(),
            format!("cannot create the gzip spool file here (--spool-dir): {source}"),
        ),
    })?;
    // Unlinked now: the space is given back when the process ends, however it ends.
    let _ = std::fs::remove_file(&spool_path);
    let spool_err = |e: std::io::Error| SourceError::Open {
        path: spool_dir.to_path_buf(),
        source: std::io::Error::new(e.kind(), format!("writing the gzip spool: {e}")),
    };
    // Inflating and writing the spool overlap: a writer thread takes pieces
    // of PIECE bytes (writing to the page cache costs as much system time
    // as inflating costs user time: 512 MiB, 1.1 s and 0.8 s on a 2-core VM).
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
    let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let (decoded, written) = std::thread::scope(|s| {
        let spool = &spool;
        let writer = s.spawn(move || -> std::io::Result<()> {
            let mut out = spool;
            for piece in rx {
                out.write_all(&piece)?;
                let _ = back_tx.send(piece);
            }
            Ok(())
        });
        let mut piece: Vec<u8> = Vec::with_capacity(PIECE);
        let mut ship = |bytes: &[u8], last: bool| -> bool {
            piece.extend_from_slice(bytes);
            if piece.len() >= PIECE || (last && !piece.is_empty()) {
                let next = back_rx
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(PIECE));
                if tx.send(std::mem::replace(&mut piece, next)).is_err() {
                    return false;
                }
                piece.clear();
            }
            true
        };
        let decoded = inflate(path, src, &mut ship);
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the spool writer failed")));
        (decoded, written)
    });
    // A write error explains a decoding stopped for want of a writer.
    written.map_err(spool_err)?;
    let (len, members, damage) = decoded?;
    Ok(Spooled {
        file: spool,
        len,
        what: format!(
            "gzip ({members} member{}), spooled decompressed",
            if members == 1 { "" } else { "s" }
        ),
        damage,
        map: Default::default(),
    })
}

/// Bytes handed to the spool writer at a time.
const PIECE: usize = 4 << 20;

/// Inflates every member of `src` (the file at `path`), handing the bytes to
/// `ship` in order (`last` with the final call); returns the length, the
/// members and the damage. Stops early, without error, when `ship` returns
/// false (the writer failed: its error is the one to report).
fn inflate(
    path: &Path,
    src: File,
    ship: &mut dyn FnMut(&[u8], bool) -> bool,
) -> Result<(u64, u64, Vec<Damage>), SourceError> {
    let mut input = BufReader::with_capacity(1 << 20, src);
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    let mut members = 0u64;
    let mut damage = Vec::new();
    'members: loop {
        match input.fill_buf() {
            Ok([]) => break,
            Ok(_) => {}
            Err(source) => {
                return Err(SourceError::Read {
                    path: path.to_path_buf(),
                    offset: 0,
                    source,
                });
            }
        }
        let member_start = len;
        let mut dec = flate2::bufread::GzDecoder::new(&mut input);
        loop {
            match dec.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if !ship(&buf[..n], false) {
                        return Ok((len, members, damage));
                    }
                    len += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The first member is not deflate data from its start (not
                // cut short: corrupt within its first 64 KiB): a raw image
                // whose first bytes only look like gzip's magic.
                Err(e)
                    if members == 0
                        && len < EARLY
                        && e.kind() != std::io::ErrorKind::UnexpectedEof =>
                {
                    return Err(SourceError::Container {
                        path: path.to_path_buf(),
                        what: format!(
                            "starts like a gzip file but does not decode as one ({e}); if it is a raw image, carve it with --input raw"
                        ),
                    });
                }
                Err(e) => {
                    let reason = if len == member_start && members > 0 {
                        format!("data after gzip member {members} is not gzip ({e}); ignored")
                    } else {
                        format!(
                            "gzip member {} corrupt or truncated ({e}): logical bytes from {member_start} are unverified and the image ends at {len}{}",
                            members + 1,
                            if members == 0 {
                                " (a raw image whose first bytes look like gzip's is carved with --input raw)"
                            } else {
                                ""
                            }
                        )
                    };
                    damage.push(Damage {
                        offset: member_start,
                        len: len - member_start,
                        reason,
                    });
                    break 'members;
                }
            }
        }
        members += 1;
    }
    ship(&[], true);
    Ok((len, members, damage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Media;
    use flate2::write::GzEncoder;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn multi_member_and_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let mut x = 12345u64;
        let data: Vec<u8> = (0..300_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        let mut two = gz(&data[..100_000]);
        two.extend(gz(&data[100_000..]));
        let p = dir.path().join("x.gz");
        std::fs::write(&p, &two).unwrap();
        let m = open(&p, dir.path()).unwrap();
        assert_eq!(m.len(), 300_000);
        assert!(m.damage().is_empty());
        let mut b = vec![0u8; 1000];
        m.read_at(99_500, &mut b).unwrap();
        assert_eq!(&b[..], &data[99_500..100_500]);
        // The spool is read through its memory map too, the same bytes.
        let mut c = vec![0u8; 1000];
        assert!(m.read_mapped(99_500, &mut c));
        assert_eq!(b, c);
        assert!(m.reads_mapped() && m.mapped_faults() == 0);
        assert!(!m.read_mapped(299_500, &mut c), "past the end");
        // No spool left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        std::fs::write(&p, &two[..two.len() - 5000]).unwrap();
        let m = open(&p, dir.path()).unwrap();
        assert!(m.len() >= 100_000 && m.len() < 300_000);
        let d = m.damage();
        assert_eq!(d.len(), 1);
        assert!(d[0].reason.contains("member 2"), "{d:?}");
    }
}
