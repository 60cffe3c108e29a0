//! Each supported operation does its real job, on both engines, checked against the file system
//! and the sockets afterwards.

mod common;

use std::ffi::CString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;

use common::*;
use pkprof_multicall::Call;

fn zeroed_statx() -> libc::statx {
    // SAFETY: statx is a plain C struct; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

#[test]
fn openat_write_fsync_close_then_statx_sees_the_size() {
    for (name, mut mc) in engines() {
        let s = Scratch::new();
        let path = CString::new(s.path("new").as_os_str().as_bytes()).unwrap();
        let missing = CString::new(s.path("missing").as_os_str().as_bytes()).unwrap();

        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
        let mut calls = [
            Call::openat(libc::AT_FDCWD, &path, flags, 0o640).checked(),
            Call::openat(libc::AT_FDCWD, &missing, libc::O_RDONLY, 0),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3, "{name}");
        let fd = calls[0].result().unwrap();
        assert!(fd >= 0, "{name}: openat gave {fd}");
        assert_eq!(calls[1].result(), Some(-(libc::ENOENT as i64)), "{name}");
        let fd = fd as i32;

        let data = vec![b'z'; 10_000];
        let mut calls = [
            Call::write(fd, &data[..6000]).checked(),
            Call::write(fd, &data[6000..]).checked(),
            Call::fsync(fd).checked(),
            Call::fdatasync(fd).checked(),
            Call::close(fd).checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 6, "{name}");
        let got: Vec<_> = calls.iter().map(|c| c.result().unwrap()).collect();
        assert_eq!(got, [6000, 4000, 0, 0, 0], "{name}");

        let mut st = zeroed_statx();
        let mut calls = [Call::statx(
            libc::AT_FDCWD,
            &path,
            0,
            libc::STATX_SIZE | libc::STATX_MODE,
            &mut st,
        )
        .checked()];
        assert_eq!(mc.run(&mut calls).unwrap(), 2, "{name}");
        assert_eq!(calls[0].result(), Some(0), "{name}");
        assert_eq!(st.stx_size, 10_000, "{name}");
        assert_eq!(u32::from(st.stx_mode & 0o777), 0o640 & !umask(), "{name}");
        assert_eq!(read(&s.path("new")), data, "{name}");
        // The descriptor really is closed.
        // SAFETY: fcntl(F_GETFD) on a number we closed only queries it.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_GETFD) }, -1, "{name}");
    }
}

fn umask() -> u32 {
    // SAFETY: umask has no preconditions; it is restored at once.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old
    }
}

#[test]
fn pread_and_pwrite_at_offsets() {
    for (name, mut mc) in engines() {
        let s = Scratch::new();
        let f = s.rw_file("f");
        let fd = f.as_raw_fd();
        let (mut a, mut b) = ([0u8; 3], [0u8; 5]);
        let mut calls = [
            Call::pwrite(fd, b"abc", 10).checked(),
            Call::pwrite(fd, b"01234", 0).checked(),
            Call::pread(fd, &mut a, 10).checked(),
            Call::pread(fd, &mut b, 0).checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 5, "{name}");
        assert_eq!(&a, b"abc", "{name}");
        assert_eq!(&b, b"01234", "{name}");
        assert_eq!(read(&s.path("f")), b"01234\0\0\0\0\0abc", "{name}");
        // pread/pwrite leave the file position alone.
        // SAFETY: lseek on a descriptor we own.
        assert_eq!(unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) }, 0, "{name}");
    }
}

#[test]
fn read_and_write_use_and_advance_the_file_position() {
    for (name, mut mc) in engines() {
        let s = Scratch::new();
        let f = s.rw_file("f");
        let fd = f.as_raw_fd();
        let mut calls = [
            Call::write(fd, b"hello").checked(),
            Call::write(fd, b" world").checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3, "{name}");
        assert_eq!(read(&s.path("f")), b"hello world", "{name}");

        let src = s.file_with("src", b"0123456789");
        let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
        let mut calls = [
            Call::read(src.as_raw_fd(), &mut a).checked(),
            Call::read(src.as_raw_fd(), &mut b).checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3, "{name}");
        assert_eq!((&a, &b), (b"0123", b"4567"), "{name}");
    }
}

#[test]
fn sendmsg_and_recvmsg_over_a_socketpair() {
    for (name, mut mc) in engines() {
        let (a, b) = socketpair();
        let (mut r1, mut r2) = ([0u8; 4], [0u8; 16]);
        let out = [IoSlice::new(b"head"), IoSlice::new(b"-and-body")];
        let mut bufs = [IoSliceMut::new(&mut r1), IoSliceMut::new(&mut r2)];
        let mut calls = [
            Call::sendmsg(a.as_raw_fd(), &out, 0).checked(),
            Call::recvmsg(b.as_raw_fd(), &mut bufs, 0).checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3, "{name}");
        assert_eq!(calls[0].result(), Some(13), "{name}");
        assert_eq!(calls[1].result(), Some(13), "{name}");
        assert_eq!(&r1, b"head", "{name}");
        assert_eq!(&r2[..9], b"-and-body", "{name}");
    }
}
