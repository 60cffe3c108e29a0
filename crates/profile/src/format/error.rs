//! Errors of reading and writing profile files: each displays as one line that names the problem.
//!
//! That line includes the cause (an I/O error, a [`Corruption`]), so no error here also returns
//! its cause from `source()`: a printer of the whole chain (`{:#}` in anyhow) would say the cause
//! twice. Hence the hand-written `From<Corruption>` below rather than thiserror's `#[from]`
//! (which always makes the field a source), and an I/O field not named `source`.

use std::io;
use std::path::PathBuf;

use super::FORMAT_VERSION;

/// Why a profile could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("empty file: not a pkprof profile")]
    Empty,
    #[error("not a pkprof profile (bad magic bytes)")]
    BadMagic,
    #[error(
        "unsupported profile format version {found} (this pkprof reads version {FORMAT_VERSION})"
    )]
    UnsupportedVersion { found: u32 },
    #[error("unsupported profile compression {found} (this pkprof reads 0 = none and 1 = gzip)")]
    UnsupportedCompression { found: u32 },
    /// The file ends early. `expected` and `got` count bytes of the whole file, header included.
    #[error("truncated profile (expected {expected} bytes, got {got})")]
    Truncated { expected: u64, got: u64 },
    #[error("corrupt profile ({0})")]
    Corrupt(Corruption),
    /// `write_profile` was given a profile whose indices do not hold (a bug of its builder).
    #[error("cannot write an invalid profile ({0})")]
    InvalidProfile(Corruption),
    #[error("I/O error{}: {error}", on_path(path))]
    Io {
        /// The file, when the caller named one ([`super::load`], [`super::save`]).
        path: Option<PathBuf>,
        error: io::Error,
    },
}

impl From<Corruption> for FormatError {
    fn from(c: Corruption) -> Self {
        FormatError::Corrupt(c)
    }
}

/// What is wrong inside a file whose header could be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Corruption {
    #[error("checksum mismatch: header says {stored:08x}, body has {computed:08x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("{0} unexpected bytes after the body")]
    TrailingData(u64),
    #[error("declared body size of {declared} bytes is over the limit of {limit} bytes")]
    BodyTooLarge { declared: u64, limit: u64 },
    #[error("body decompresses to {actual} bytes, the header says {declared}")]
    BodyShort { declared: u64, actual: u64 },
    #[error("body decompresses to more than the {declared} bytes the header says")]
    BodyLong { declared: u64 },
    #[error("cannot decompress the body: {0}")]
    Decompress(String),
    #[error("undecodable body: {0}")]
    Decode(String),
    #[error("{what} {index} is out of range (the table has {len} entries)")]
    IndexOutOfRange {
        what: &'static str,
        index: u64,
        len: usize,
    },
    #[error("unknown {what} value {value}")]
    UnknownEnum { what: &'static str, value: i64 },
    #[error("invalid {what}: {value}")]
    InvalidValue { what: &'static str, value: u64 },
    #[error("string table entry 0 must be empty")]
    StringTableStart,
    /// A frame's build-id string is not an even number of lower-case hex digits (reports build
    /// debug-file paths from it).
    #[error("frame {frame} has a build-id that is not lower-case hex of whole bytes")]
    BadBuildId { frame: u32 },
}

fn on_path(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!(" on {}", p.display()),
        None => String::new(),
    }
}

impl FormatError {
    pub(crate) fn io(error: io::Error) -> Self {
        FormatError::Io { path: None, error }
    }

    /// Attaches `path` to an I/O error that has none; other errors are returned unchanged.
    pub(crate) fn with_path(self, p: &std::path::Path) -> Self {
        match self {
            FormatError::Io { path: None, error } => FormatError::Io {
                path: Some(p.to_path_buf()),
                error,
            },
            e => e,
        }
    }
}
