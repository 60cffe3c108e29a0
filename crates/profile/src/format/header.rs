//! The fixed 36-byte file header: magic, format version, compression, body lengths and checksum.
//!
//! All integers are little-endian. See docs/profile-format.md for the byte-by-byte layout.

use std::io::{self, Read};

use super::error::FormatError;
use super::{FORMAT_VERSION, HEADER_LEN, MAGIC};

/// How the body is compressed (header bytes 12..16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    /// Stored as is: for debugging (`tail -c +37 FILE | protoc --decode_raw`) and fuzzing.
    None,
    /// gzip (RFC 1952), one member. What [`super::write_profile`] writes.
    #[default]
    Gzip,
}

impl Compression {
    pub(crate) fn id(self) -> u32 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
        }
    }

    fn from_id(id: u32) -> Option<Self> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub compression: Compression,
    /// Bytes of the body as stored in the file.
    pub body_len: u64,
    /// Bytes of the body once decompressed (the encoded protobuf message).
    pub raw_len: u64,
    /// CRC-32 (IEEE, as gzip and zlib) of the body as stored.
    pub crc32: u32,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.compression.id().to_le_bytes());
        h[16..24].copy_from_slice(&self.body_len.to_le_bytes());
        h[24..32].copy_from_slice(&self.raw_len.to_le_bytes());
        h[32..36].copy_from_slice(&self.crc32.to_le_bytes());
        h
    }

    /// Reads and checks the header: magic first, then version, then compression.
    pub fn read<R: Read>(r: &mut R) -> Result<Header, FormatError> {
        let mut h = [0u8; HEADER_LEN];
        let got = read_up_to(r, &mut h).map_err(FormatError::io)?;
        if got == 0 {
            return Err(FormatError::Empty);
        }
        let magic_got = got.min(MAGIC.len());
        if h[..magic_got] != MAGIC[..magic_got] {
            return Err(FormatError::BadMagic);
        }
        if got < HEADER_LEN {
            return Err(FormatError::Truncated {
                expected: HEADER_LEN as u64,
                got: got as u64,
            });
        }
        let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion { found: version });
        }
        let id = u32::from_le_bytes(h[12..16].try_into().expect("4 bytes"));
        let compression =
            Compression::from_id(id).ok_or(FormatError::UnsupportedCompression { found: id })?;
        Ok(Header {
            compression,
            body_len: u64::from_le_bytes(h[16..24].try_into().expect("8 bytes")),
            raw_len: u64::from_le_bytes(h[24..32].try_into().expect("8 bytes")),
            crc32: u32::from_le_bytes(h[32..36].try_into().expect("4 bytes")),
        })
    }
}

/// Fills as much of `buf` as the reader has; returns the bytes read (less than `buf.len()` only
/// at end of input).
pub(crate) fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
