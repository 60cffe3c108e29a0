//! The crate's error type.

use std::io;
use std::sync::Arc;

/// Why a process could not be captured. The source `io::Error` is shared so that the error of a
/// failed capture can be returned again, cheaply, on every later call for that pid.
#[derive(Clone, Debug, thiserror::Error)]
pub enum SymbolizeError {
    /// The process exited before its memory map could be read.
    #[error("process {pid} is gone: cannot read /proc/{pid}/maps")]
    ProcessGone {
        pid: u32,
        #[source]
        source: Arc<io::Error>,
    },
    /// `/proc/PID/maps` exists but could not be read (usually: not root).
    #[error("cannot read /proc/{pid}/maps")]
    MapsUnreadable {
        pid: u32,
        #[source]
        source: Arc<io::Error>,
    },
}

impl SymbolizeError {
    pub(crate) fn from_maps_read(pid: u32, err: io::Error) -> Self {
        let gone = err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ESRCH);
        let source = Arc::new(err);
        if gone {
            SymbolizeError::ProcessGone { pid, source }
        } else {
            SymbolizeError::MapsUnreadable { pid, source }
        }
    }

    pub fn pid(&self) -> u32 {
        match self {
            SymbolizeError::ProcessGone { pid, .. }
            | SymbolizeError::MapsUnreadable { pid, .. } => *pid,
        }
    }
}
