//! Standard input (`-`) as the image: `dd if=/dev/sdb | gpucarve carve - …`,
//! `ewfexport -t - …`, `zcat disk.gz | …`.
//!
//! A pipe has no random access and the carver needs it, so standard input is
//! **spooled** like a gzip image ([`super::gzip`]): copied once into an
//! unlinked file in the spool folder (`--spool-dir`, default the output
//! folder) and carved from there, with a 1 MiB buffer. The cost is disk
//! space equal to the image. What arrives is taken as a raw image (no
//! container is recognised on a pipe): decode containers before the pipe.

use std::io::{Read, Write};
use std::path::Path;

use super::SourceError;
use super::spool::{Spooled, spool_file};

/// Copies standard input to its end into a spool file in `spool_dir`.
/// A terminal is refused (it would wait for typing, not carve).
pub fn open(spool_dir: &Path) -> Result<Spooled, SourceError> {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(SourceError::Open {
            path: "-".into(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "standard input is a terminal: pipe an image in (dd if=/dev/sdX | gpucarve ... -)",
            ),
        });
    }
    from_reader(stdin.lock(), spool_dir)
}

/// Copies `input` to its end into a spool file in `spool_dir`.
pub fn from_reader(mut input: impl Read, spool_dir: &Path) -> Result<Spooled, SourceError> {
    let spool_err = |what: &str, e: std::io::Error| SourceError::Open {
        path: spool_dir.to_path_buf(),
        source: std::io::Error::new(e.kind(), format!("{what} (--spool-dir): {e}")),
    };
    let (spool, spool_path) = spool_file(spool_dir)
        .map_err(|e| spool_err("cannot create the standard-input spool file here", e))?;
    // Unlinked now: the space is given back when the process ends, however it ends.
    let _ = std::fs::remove_file(&spool_path);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &spool);
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.write_all(&buf[..n])
                    .map_err(|e| spool_err("writing the standard-input spool", e))?;
                len += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(SourceError::Read {
                    path: "-".into(),
                    offset: len,
                    source,
                });
            }
        }
    }
    out.flush()
        .map_err(|e| spool_err("writing the standard-input spool", e))?;
    drop(out);
    Ok(Spooled {
        file: spool,
        len,
        what: "standard input, spooled".into(),
        damage: Vec::new(),
        map: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Media;

    #[test]
    fn spools_what_arrives_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let m = from_reader(&data[..], dir.path()).unwrap();
        assert_eq!(m.len(), data.len() as u64);
        let mut b = vec![0u8; 4096];
        assert_eq!(m.read_at(2_000_000, &mut b).unwrap(), 4096);
        assert_eq!(&b[..], &data[2_000_000..2_004_096]);
        assert_eq!(m.read_at(data.len() as u64 - 10, &mut b).unwrap(), 10);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A spool folder that cannot be made is a clear error.
        let bad = dir.path().join("file");
        std::fs::write(&bad, b"x").unwrap();
        let e = from_reader(&data[..10], &bad.join("sub")).unwrap_err();
        assert!(e.to_string().contains("spool"), "{e}");
    }
}
