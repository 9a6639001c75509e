//! The image as validators, the fragment search and the writer see it.

use super::validators::ByteReader;
use crate::source::Image;

/// Random read access to an image for validators and the writer.
pub struct ImageBytes<'a> {
    image: &'a Image,
}

impl<'a> ImageBytes<'a> {
    pub fn new(image: &'a Image) -> Self {
        ImageBytes { image }
    }
}

impl ByteReader for ImageBytes<'_> {
    fn len(&self) -> u64 {
        self.image.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        if offset >= self.image.len() {
            return 0;
        }
        let n = (self.image.len() - offset).min(buf.len() as u64) as usize;
        self.image.read_at(offset, &mut buf[..n]).unwrap_or(0)
    }
}
