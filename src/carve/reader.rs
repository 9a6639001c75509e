//! [`ByteReader`]: random read access to the image, the one way validators,
//! file-system parsers, the fragment search and the writer read its bytes
//! (the image through [`super::view`], a file laid out by its file system, a
//! join being tried, or a test buffer).

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
    /// For a view of another reader (a file as the file system lays it out,
    /// a join the fragment search tries): that reader, and where the bytes
    /// `[offset, offset + len)` lie in it, as runs `(offset, length)` in
    /// order. `None` for a reader of its own, or a range past the end.
    fn lies_in(&self, _offset: u64, _len: u64) -> Option<LiesIn<'_>> {
        None
    }
    /// True when a read of a few bytes costs about what copying them does
    /// (no system call: bytes in memory, a memory-mapped image). Callers
    /// that gather small reads into large ones to spare system calls read
    /// directly then.
    fn cheap_small_reads(&self) -> bool {
        false
    }
}

/// [`ByteReader::lies_in`]: the reader a view is of, and runs
/// `(offset, length)` in it.
pub type LiesIn<'a> = (&'a dyn ByteReader, Vec<(u64, u64)>);

impl ByteReader for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let Ok(off) = usize::try_from(offset) else {
            return 0;
        };
        if off >= <[u8]>::len(self) {
            return 0;
        }
        let n = buf.len().min(<[u8]>::len(self) - off);
        buf[..n].copy_from_slice(&self[off..off + n]);
        n
    }
    fn cheap_small_reads(&self) -> bool {
        true
    }
}

impl ByteReader for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        self.as_slice().read_at(offset, buf)
    }
    fn cheap_small_reads(&self) -> bool {
        true
    }
}

/// Little-endian u16 at `i` of `b`, widened (0 past the end): the file-system
/// parsers' and the ZIP fragment search's fixed-offset fields
/// ([`super::validators::read::le16`] reads from the start of a slice).
pub(crate) fn le16(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 2)
        .map_or(0, |s| u64::from(u16::from_le_bytes([s[0], s[1]])))
}

/// Little-endian u32 at `i` of `b`, widened (0 past the end).
pub(crate) fn le32(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 4).map_or(0, |s| {
        u64::from(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    })
}
