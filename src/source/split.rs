//! Split raw images: `disk.001, disk.002, …` (also `.000`, `.00`) and
//! `disk.aa, disk.ab, …` (as `split` names them), read as one medium.
//!
//! Given the first segment, the set is every following name that exists;
//! offsets run across segments in order. A gap (a later segment present
//! while one before it is missing) is an error naming the missing file,
//! never a silently shorter image.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::{Media, SourceError, buffered::pread_full};

/// The naming scheme of a segment's suffix (the text after the last `.`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    /// Decimal digits of fixed width, counting from `first` (0 or 1).
    Digits { width: usize, first: u64 },
    /// Lowercase letters of fixed width, counting from `aa…a`.
    Letters { width: usize },
}

impl Scheme {
    fn name(self, index: u64) -> Option<String> {
        match self {
            Scheme::Digits { width, first } => {
                let n = first.checked_add(index)?;
                let s = format!("{n:0width$}");
                (s.len() == width).then_some(s)
            }
            Scheme::Letters { width } => {
                let mut s = vec![b'a'; width];
                let mut n = index;
                for c in s.iter_mut().rev() {
                    *c = b'a' + (n % 26) as u8;
                    n /= 26;
                }
                (n == 0).then(|| String::from_utf8_lossy(&s).into_owned())
            }
        }
    }

    /// Index of `suffix` in this scheme, if it is one of its names.
    fn index_of(self, suffix: &str) -> Option<u64> {
        match self {
            Scheme::Digits { width, first } => {
                if suffix.len() != width || !suffix.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                suffix.parse::<u64>().ok()?.checked_sub(first)
            }
            Scheme::Letters { width } => {
                if suffix.len() != width || !suffix.bytes().all(|b| b.is_ascii_lowercase()) {
                    return None;
                }
                Some(
                    suffix
                        .bytes()
                        .fold(0u64, |n, b| n.saturating_mul(26) + u64::from(b - b'a')),
                )
            }
        }
    }
}

/// Where a path sits in a split naming scheme: (stem including the dot, suffix).
fn split_name(path: &Path) -> Option<(String, String)> {
    let name = path.file_name()?.to_str()?;
    let dot = name.rfind('.')?;
    let (stem, suffix) = (&name[..=dot], &name[dot + 1..]);
    if stem.len() < 2 || suffix.len() < 2 || suffix.len() > 4 {
        return None;
    }
    Some((stem.to_string(), suffix.to_string()))
}

/// The scheme when `path` is named as the *first* segment of a split set.
fn first_scheme(path: &Path) -> Option<Scheme> {
    let (_, suffix) = split_name(path)?;
    if suffix.bytes().all(|b| b.is_ascii_digit()) {
        let v: u64 = suffix.parse().ok()?;
        (v <= 1).then_some(Scheme::Digits {
            width: suffix.len(),
            first: v,
        })
    } else if suffix.bytes().all(|b| b == b'a') && suffix.len() <= 3 {
        Some(Scheme::Letters {
            width: suffix.len(),
        })
    } else {
        None
    }
}

fn sibling(path: &Path, stem: &str, suffix: &str) -> PathBuf {
    path.with_file_name(format!("{stem}{suffix}"))
}

/// True when `path` is the first segment of a set of two or more segments
/// (or of a set with a gap: its opening then names the missing segment).
pub fn is_first_segment(path: &Path) -> bool {
    let (Some(scheme), Some((stem, _))) = (first_scheme(path), split_name(path)) else {
        return false;
    };
    if scheme
        .name(1)
        .is_some_and(|s| sibling(path, &stem, &s).is_file())
    {
        return true;
    }
    lowest_index_after(path, &stem, scheme, 0).is_some()
}

/// The lowest segment index above `index` present beside `path`.
fn lowest_index_after(path: &Path, stem: &str, scheme: Scheme, index: u64) -> Option<u64> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut later: Option<u64> = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(suffix) = name.strip_prefix(stem)
            && let Some(i) = scheme.index_of(suffix)
            && i > index
        {
            later = Some(later.map_or(i, |l| l.min(i)));
        }
    }
    later
}

/// When `path` is a later segment (`.002`, `.ab`) of a set whose first segment
/// exists, that first segment.
pub fn first_segment_of(path: &Path) -> Option<PathBuf> {
    let (stem, suffix) = split_name(path)?;
    let candidates = if suffix.bytes().all(|b| b.is_ascii_digit()) {
        let w = suffix.len();
        vec![
            Scheme::Digits { width: w, first: 1 },
            Scheme::Digits { width: w, first: 0 },
        ]
    } else if suffix.bytes().all(|b| b.is_ascii_lowercase()) && suffix.len() <= 3 {
        vec![Scheme::Letters {
            width: suffix.len(),
        }]
    } else {
        return None;
    };
    for scheme in candidates {
        let (Some(i), Some(first)) = (scheme.index_of(&suffix), scheme.name(0)) else {
            continue;
        };
        let first = sibling(path, &stem, &first);
        if i > 0 && first.is_file() && is_first_segment(&first) {
            return Some(first);
        }
    }
    None
}

#[derive(Debug)]
struct Segment {
    path: PathBuf,
    file: File,
    start: u64,
    len: u64,
}

/// A set of raw segments read as one medium.
#[derive(Debug)]
pub struct SplitMedia {
    segments: Vec<Segment>,
    len: u64,
    /// Sectors of the segments that could not be read (as a raw file's).
    unread: super::BadSectors,
}

impl SplitMedia {
    /// Opens the set whose first segment is `first`.
    pub fn open(first: &Path) -> Result<SplitMedia, SourceError> {
        let (Some(scheme), Some((stem, _))) = (first_scheme(first), split_name(first)) else {
            return Err(SourceError::Settings(format!(
                "{}: not the first segment of a split image (.001, .000 or .aa)",
                first.display()
            )));
        };
        let mut segments = Vec::new();
        let mut start = 0u64;
        let mut index = 0u64;
        while let Some(suffix) = scheme.name(index) {
            let path = sibling(first, &stem, &suffix);
            let file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && index > 0 => break,
                Err(e) => return Err(super::io_open_error(&path, e)),
            };
            let len = file
                .metadata()
                .map_err(|e| super::io_open_error(&path, e))?
                .len();
            segments.push(Segment {
                path,
                file,
                start,
                len,
            });
            start = start.saturating_add(len);
            index += 1;
        }
        // A gap: a later segment exists although segment `index` is missing.
        if let (Some(l), Some(missing)) = (
            lowest_index_after(first, &stem, scheme, index),
            scheme.name(index),
        ) {
            let present = scheme.name(l).unwrap_or_default();
            return Err(SourceError::Container {
                path: sibling(first, &stem, &missing),
                what: format!(
                    "segment missing from the split image ({stem}{present} exists after it)"
                ),
            });
        }
        Ok(SplitMedia {
            len: start,
            segments,
            unread: Default::default(),
        })
    }

    /// Paths of the segments, in order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.segments.iter().map(|s| s.path.as_path())
    }
}

impl Media for SplitMedia {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut done = 0usize;
        let mut off = offset;
        // First segment holding `off`.
        let mut i = self.segments.partition_point(|s| s.start + s.len <= off);
        while done < buf.len() && i < self.segments.len() {
            let s = &self.segments[i];
            let within = off - s.start;
            let want = ((s.len - within) as usize).min(buf.len() - done);
            let piece = &mut buf[done..done + want];
            // A bad sector in a segment reads as zeros and is listed, as on a
            // raw file; other errors stop the read.
            let got = match pread_full(&s.file, within, piece) {
                Err(e) if super::unreadable(&e) => {
                    self.unread
                        .read_around(&s.file, within, s.start + within, piece)
                }
                r => r,
            }
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", s.path.display())))?;
            done += got;
            off += got as u64;
            if got < want {
                // The segment shrank since it was opened: stop short (reported as truncation).
                break;
            }
            i += 1;
        }
        Ok(done)
    }

    fn describe(&self) -> String {
        format!("split raw ({} segments)", self.segments.len())
    }

    fn damage(&self) -> Vec<super::Damage> {
        self.unread.list()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let d = Scheme::Digits { width: 3, first: 1 };
        assert_eq!(d.name(0).as_deref(), Some("001"));
        assert_eq!(d.name(998).as_deref(), Some("999"));
        assert_eq!(d.name(999), None);
        assert_eq!(d.index_of("010"), Some(9));
        let l = Scheme::Letters { width: 2 };
        assert_eq!(l.name(0).as_deref(), Some("aa"));
        assert_eq!(l.name(27).as_deref(), Some("bb"));
        assert_eq!(l.name(26 * 26), None);
        assert_eq!(l.index_of("ab"), Some(1));
        assert_eq!(first_scheme(Path::new("x.001")), Some(d));
        assert_eq!(first_scheme(Path::new("x.aa")), Some(l));
        assert_eq!(first_scheme(Path::new("x.dd")), None);
        assert_eq!(first_scheme(Path::new("x.002")), None);
    }

    #[test]
    fn reads_across_segments_and_names_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for (i, c) in data.chunks(3000).enumerate() {
            std::fs::write(dir.path().join(format!("img.{:03}", i + 1)), c).unwrap();
        }
        let first = dir.path().join("img.001");
        assert!(is_first_segment(&first));
        assert_eq!(
            first_segment_of(&dir.path().join("img.003")).as_deref(),
            Some(first.as_path())
        );
        let m = SplitMedia::open(&first).unwrap();
        assert_eq!(m.len(), 10_000);
        let mut buf = vec![0u8; 7000];
        assert_eq!(m.read_at(2500, &mut buf).unwrap(), 7000);
        assert_eq!(&buf[..], &data[2500..9500]);
        assert_eq!(m.read_at(9990, &mut buf).unwrap(), 10);
        std::fs::remove_file(dir.path().join("img.002")).unwrap();
        let e = SplitMedia::open(&first).unwrap_err().to_string();
        assert!(e.contains("img.002") && e.contains("missing"), "{e}");
    }
}
