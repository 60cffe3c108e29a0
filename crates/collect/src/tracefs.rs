//! Finds tracefs, mounting it at /sys/kernel/tracing when it is not mounted yet.

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted (or could be mounted), in the order the kernel documents.
const CANDIDATES: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Outcome of looking for tracefs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tracefs {
    /// Already mounted at this path.
    Found(PathBuf),
    /// Not mounted before; pkprof mounted it at this path.
    Mounted(PathBuf),
    /// Not mounted and mounting failed for this reason.
    Unavailable(String),
}

impl Tracefs {
    pub fn path(&self) -> Option<&Path> {
        match self {
            Tracefs::Found(p) | Tracefs::Mounted(p) => Some(p),
            Tracefs::Unavailable(_) => None,
        }
    }
}

/// Returns tracefs's mount point, mounting it at /sys/kernel/tracing if needed.
pub fn ensure_mounted() -> Tracefs {
    for c in CANDIDATES {
        if Path::new(c).join("events").is_dir() {
            return Tracefs::Found(PathBuf::from(c));
        }
    }
    let target = CANDIDATES[0];
    let (Ok(src), Ok(dst), Ok(fs)) = (
        CString::new("tracefs"),
        CString::new(target),
        CString::new("tracefs"),
    ) else {
        unreachable!("constant strings have no NUL");
    };
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call; data is null.
    let rc = unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    if rc == 0 && Path::new(target).join("events").is_dir() {
        Tracefs::Mounted(PathBuf::from(target))
    } else {
        Tracefs::Unavailable(format!(
            "mount -t tracefs tracefs {target} failed: {}",
            std::io::Error::last_os_error()
        ))
    }
}
