//! Helpers shared by the integration tests: both engines, temporary files, pipes and sockets.
#![allow(dead_code)]

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use pkprof_multicall::MultiCall;

pub const ECANCELED: i64 = -(libc::ECANCELED as i64);
pub const EBADF: i64 = -(libc::EBADF as i64);
/// A descriptor number no test opens.
pub const BAD_FD: RawFd = 9999;

/// Both engines: an io_uring of 8 entries and the sequential fallback. Semantic tests run the
/// same batch on each and expect the same results.
pub fn engines() -> Vec<(&'static str, MultiCall)> {
    vec![
        (
            "io_uring",
            MultiCall::new(8).expect("io_uring ring (is kernel.io_uring_disabled 0?)"),
        ),
        ("sequential", MultiCall::sequential()),
    ]
}

pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A new file with `content`, opened for reading.
    pub fn file_with(&self, name: &str, content: &[u8]) -> File {
        let p = self.path(name);
        std::fs::write(&p, content).unwrap();
        File::open(p).unwrap()
    }

    /// A new empty file opened for reading and writing.
    pub fn rw_file(&self, name: &str) -> File {
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.path(name))
            .unwrap()
    }
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// (read end, write end).
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// A connected pair of Unix stream sockets.
pub fn socketpair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors socketpair writes.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0);
    // SAFETY: both descriptors were just created and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

pub fn write_fd(fd: &OwnedFd, data: &[u8]) {
    // SAFETY: data is a valid buffer of data.len() bytes.
    let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
    assert_eq!(n, data.len() as isize);
}

/// Whether the io_uring_disabled sysctl can be changed (root, sysctl present).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
