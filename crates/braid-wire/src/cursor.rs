//! Bounds-checked readers and writers over byte slices: every read that would run past the
//! end returns [`Error::Truncated`] instead of panicking.

use crate::{Error, Result};

/// Reads big-endian integers from the front of a slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(Error::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn rest(self) -> &'a [u8] {
        self.buf
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Writes big-endian integers into a slice the caller has already checked is large enough.
/// Writing past the end still cannot panic: it returns [`Error::BufferTooSmall`].
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }

    pub(crate) fn put(&mut self, bytes: &[u8]) -> Result<()> {
        let end = self.pos + bytes.len();
        let have = self.buf.len();
        let dst = self
            .buf
            .get_mut(self.pos..end)
            .ok_or(Error::BufferTooSmall { need: end, have })?;
        dst.copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }

    pub(crate) fn u8(&mut self, v: u8) -> Result<()> {
        self.put(&[v])
    }

    pub(crate) fn u16(&mut self, v: u16) -> Result<()> {
        self.put(&v.to_be_bytes())
    }

    pub(crate) fn u32(&mut self, v: u32) -> Result<()> {
        self.put(&v.to_be_bytes())
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }
}
