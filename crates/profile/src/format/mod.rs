//! The on-disk profile file: a fixed header, then one protobuf `Profile` message
//! (`proto/pkprof_profile.proto`), gzip-compressed. docs/profile-format.md is the specification.
//!
//! Reading never panics and bounds its memory: the stored body is read only as far as the input
//! really goes, and the decompressed body may not exceed [`MAX_BODY_LEN`] nor [`MAX_EXPANSION`]
//! times the stored body (the writer stores a body that would expand more uncompressed). Every
//! index and enum value is checked, so reports may index a profile's tables freely.

mod decode;
mod encode;
mod error;
mod header;

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

pub use error::{Corruption, FormatError};
pub use header::Compression;
use header::Header;

use crate::model::Profile;

/// Generated from `proto/pkprof_profile.proto` by build.rs; private to this module.
#[allow(clippy::all, clippy::pedantic)]
mod proto {
    include!(concat!(env!("OUT_DIR"), "/pkprof.profile.v1.rs"));
}

/// First 8 bytes of every profile file.
pub const MAGIC: [u8; 8] = *b"\x89PKPROF\n";
/// The format version this code writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the fixed header before the body.
pub const HEADER_LEN: usize = 36;
/// Largest body accepted, stored or decompressed: 4 GiB.
pub const MAX_BODY_LEN: u64 = 4 << 30;
/// Largest ratio of decompressed to stored body accepted. Real profiles gzip about 5:1; a body
/// that would compress better than this is stored uncompressed by the writer, so no file it
/// writes is refused. Decoding costs up to ~60 bytes of memory per body byte (a body of empty
/// messages), so this bounds the reader's memory to a few thousand times the file's size.
pub const MAX_EXPANSION: u64 = 64;

/// Writes `p` as a profile file (gzip-compressed body, or stored if it would expand more than
/// [`MAX_EXPANSION`] times).
pub fn write_profile<W: Write>(p: &Profile, w: W) -> Result<(), FormatError> {
    write_profile_with(p, w, Compression::Gzip)
}

/// Writes `p` as a profile file with the given body compression (gzip falls back to none, as in
/// [`write_profile`]).
pub fn write_profile_with<W: Write>(
    p: &Profile,
    mut w: W,
    compression: Compression,
) -> Result<(), FormatError> {
    let raw = encode::encode_body(p).map_err(FormatError::InvalidProfile)?;
    let raw_len = raw.len() as u64;
    if raw_len > MAX_BODY_LEN {
        let too_large = Corruption::BodyTooLarge {
            declared: raw_len,
            limit: MAX_BODY_LEN,
        };
        return Err(FormatError::InvalidProfile(too_large));
    }
    let (compression, body) = match compression {
        Compression::None => (Compression::None, raw),
        Compression::Gzip => {
            let out = Vec::with_capacity(raw.len() / 4);
            // Level 1: an agent's 10 s window (252 KB raw) took 3.0 ms and 102.9 KB against
            // 8.8 ms and 100.0 KB at the default level 6 (the agent writes one every window).
            let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
            gz.write_all(&raw).map_err(FormatError::io)?;
            let gz = gz.finish().map_err(FormatError::io)?;
            if raw_len > MAX_EXPANSION * gz.len() as u64 {
                (Compression::None, raw) // readers would refuse the expansion
            } else {
                (Compression::Gzip, gz)
            }
        }
    };
    let header = Header {
        compression,
        body_len: body.len() as u64,
        raw_len,
        crc32: crc32fast::hash(&body),
    };
    w.write_all(&header.encode()).map_err(FormatError::io)?;
    w.write_all(&body).map_err(FormatError::io)?;
    w.flush().map_err(FormatError::io)
}

/// Reads a whole profile file from `r`, which must end right after the body.
pub fn read_profile<R: Read>(mut r: R) -> Result<Profile, FormatError> {
    let h = Header::read(&mut r)?;
    let limit = match h.compression {
        Compression::None => h.body_len.min(MAX_BODY_LEN),
        Compression::Gzip => h.body_len.saturating_mul(MAX_EXPANSION).min(MAX_BODY_LEN),
    };
    if h.body_len > MAX_BODY_LEN || h.raw_len > limit {
        let declared = h.raw_len.max(h.body_len);
        return Err(Corruption::BodyTooLarge { declared, limit }.into());
    }
    // Grows with what the input really holds, whatever the header claims.
    let mut body = Vec::new();
    (&mut r)
        .take(h.body_len)
        .read_to_end(&mut body)
        .map_err(FormatError::io)?;
    if (body.len() as u64) < h.body_len {
        let header = HEADER_LEN as u64;
        return Err(FormatError::Truncated {
            expected: header + h.body_len,
            got: header + body.len() as u64,
        });
    }
    let trailing = io::copy(&mut r, &mut io::sink()).map_err(FormatError::io)?;
    if trailing > 0 {
        return Err(Corruption::TrailingData(trailing).into());
    }
    let computed = crc32fast::hash(&body);
    if computed != h.crc32 {
        return Err(Corruption::Checksum {
            stored: h.crc32,
            computed,
        }
        .into());
    }
    let raw = match h.compression {
        Compression::None => body,
        Compression::Gzip => gunzip(&body, h.raw_len)?,
    };
    if raw.len() as u64 != h.raw_len {
        return Err(Corruption::BodyShort {
            declared: h.raw_len,
            actual: raw.len() as u64,
        }
        .into());
    }
    Ok(decode::decode_body(&raw)?)
}

/// Decompresses a one-member gzip body of at most `raw_len` bytes with nothing after it.
fn gunzip(body: &[u8], raw_len: u64) -> Result<Vec<u8>, Corruption> {
    let mut dec = flate2::bufread::GzDecoder::new(body);
    let mut raw = Vec::new();
    let res = (&mut dec)
        .take(raw_len.saturating_add(1))
        .read_to_end(&mut raw);
    res.map_err(|e| Corruption::Decompress(e.to_string()))?;
    if raw.len() as u64 > raw_len {
        return Err(Corruption::BodyLong { declared: raw_len });
    }
    let rest = dec.into_inner().len();
    if rest > 0 {
        return Err(Corruption::Decompress(format!(
            "{rest} bytes after the gzip stream"
        )));
    }
    Ok(raw)
}

/// A frame's build-id as the file may hold it: empty, or an even number of lower-case hex
/// digits (reports make debug-file paths of it, so nothing else may get through).
pub(crate) fn valid_build_id(id: &str) -> bool {
    id.len().is_multiple_of(2) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Writes `p` to the file at `path` (created or truncated).
pub fn save(p: &Profile, path: impl AsRef<Path>) -> Result<(), FormatError> {
    let path = path.as_ref();
    let file = File::create(path).map_err(|e| FormatError::io(e).with_path(path))?;
    write_profile(p, file).map_err(|e| e.with_path(path))
}

/// Reads the profile file at `path`.
pub fn load(path: impl AsRef<Path>) -> Result<Profile, FormatError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| FormatError::io(e).with_path(path))?;
    read_profile(file).map_err(|e| e.with_path(path))
}

#[cfg(test)]
mod tests;
