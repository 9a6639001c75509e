//! Structure validators: one file per format, each a pure function over a
//! byte-range reader.
//!
//! A validator is given random read access to the image and the absolute
//! offset of a header candidate. It walks the format's structure and decides
//! where the file ends and whether the structure is fully valid. It must never
//! read outside the image, never panic on hostile bytes, and be bounded in
//! time and memory per candidate (it reads in small pieces, never allocates
//! in proportion to a length field, and stops at `max_len`).
//!
//! Validators do no I/O of their own beyond the [`ByteReader`] they are given.

/// Random read access to the image (or to a test buffer).
pub trait ByteReader: Sync {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read
    /// (fewer only at the end of the data; 0 at or past the end). I/O errors
    /// are reported as a short read.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize;
    /// True when the reader holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ByteReader for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let Ok(off) = usize::try_from(offset) else { return 0 };
        if off >= <[u8]>::len(self) {
            return 0;
        }
        let n = buf.len().min(<[u8]>::len(self) - off);
        buf[..n].copy_from_slice(&self[off..off + n]);
        n
    }
}

impl ByteReader for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        self.as_slice().read_at(offset, buf)
    }
}

/// How much a carved file can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// The structure was walked to its end and every check passed.
    Complete,
    /// A valid start, but truncated (image ended / max size reached) or damaged.
    Partial,
    /// No structural check was possible (footer or max-size rule only).
    Unvalidated,
}

/// A validator's decision about one header candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: Status,
    /// Length of the file in bytes from the candidate's offset.
    pub length: u64,
    /// A more precise type found from content (e.g. `docx` for a ZIP, `xls` for OLE2, `webp` for RIFF).
    pub subtype: Option<String>,
    /// Human-readable notes for the report (why partial, what was checked).
    pub notes: Vec<String>,
}

/// Per-candidate bounds given to a validator.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Never consider a file longer than this (from the catalogue's max_size).
    pub max_len: u64,
}
