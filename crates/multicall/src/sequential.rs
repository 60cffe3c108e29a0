//! The fallback engine: the same batch, one plain system call per operation (one crossing each),
//! with the same stop rule, result slots and return value as the io_uring engine.

use crate::call::{Call, Op};

/// Runs a non-empty, validated batch; sets every result slot.
pub(crate) fn run(calls: &mut [Call<'_>]) {
    let mut stopped = false;
    for call in calls.iter_mut() {
        if stopped {
            call.result = Some(-i64::from(libc::ECANCELED));
            continue;
        }
        let result = execute(&call.op);
        call.result = Some(result);
        stopped = call.check && call.is_failure(result);
    }
}

/// One operation as a plain system call: its return value, or `-errno`.
fn execute(op: &Op) -> i64 {
    // SAFETY (all calls below): the pointers come from a Call, which borrows them for longer than
    // the run (or, from the C API, by the caller's contract); the kernel checks the rest.
    let ret: i64 = unsafe {
        match *op {
            Op::Read {
                fd,
                buf,
                len,
                offset: None,
            } => libc::read(fd, buf.cast(), len) as i64,
            Op::Read {
                fd,
                buf,
                len,
                offset: Some(off),
            } => libc::pread(fd, buf.cast(), len, off as libc::off_t) as i64,
            Op::Write {
                fd,
                buf,
                len,
                offset: None,
            } => libc::write(fd, buf.cast(), len) as i64,
            Op::Write {
                fd,
                buf,
                len,
                offset: Some(off),
            } => libc::pwrite(fd, buf.cast(), len, off as libc::off_t) as i64,
            // io_uring opens with O_LARGEFILE forced; on 64-bit Linux it is 0 in libc and implied.
            Op::OpenAt {
                dirfd,
                path,
                flags,
                mode,
            } => libc::openat(dirfd, path, flags, mode) as i64,
            Op::Close { fd } => libc::close(fd) as i64,
            Op::Fsync {
                fd,
                datasync: false,
            } => libc::fsync(fd) as i64,
            Op::Fsync { fd, datasync: true } => libc::fdatasync(fd) as i64,
            Op::Statx {
                dirfd,
                path,
                flags,
                mask,
                buf,
            } => libc::statx(dirfd, path, flags, mask, buf) as i64,
            // io_uring's sendmsg always adds MSG_NOSIGNAL; so do we, for identical results.
            Op::SendMsg { fd, msg, flags } => {
                libc::sendmsg(fd, msg, flags | libc::MSG_NOSIGNAL) as i64
            }
            Op::RecvMsg { fd, msg, flags } => libc::recvmsg(fd, msg, flags) as i64,
        }
    };
    if ret < 0 {
        -i64::from(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    } else {
        ret
    }
}
