//! The fallback engine: the same batch, one plain system call per operation (one crossing each),
//! with the same stop rule, result slots and return value as the io_uring engine, and the ring's
//! fixed-file table emulated in user space (a slot holds an ordinary descriptor).

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use crate::call::{chains, Call, Op};

/// The sequential engine's state: its emulated fixed-file table and the calls it made.
#[derive(Debug, Default)]
pub(crate) struct Sequential {
    slots: Vec<Option<OwnedFd>>,
    pub(crate) calls: u64,
}

impl Sequential {
    pub(crate) fn new(file_slots: u32) -> Sequential {
        Sequential {
            slots: (0..file_slots).map(|_| None).collect(),
            calls: 0,
        }
    }

    pub(crate) fn file_slots(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Puts duplicates of `fds` into the slots from `first` on (the ring also keeps its own
    /// reference, so the caller may close its descriptors).
    pub(crate) fn register_files(&mut self, first: u32, fds: &[RawFd]) -> std::io::Result<()> {
        for (i, &fd) in fds.iter().enumerate() {
            // SAFETY: F_DUPFD_CLOEXEC on any fd either fails or returns a new descriptor we own.
            let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
            if dup < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: dup was just created and is owned by nobody else.
            self.slots[first as usize + i] = Some(unsafe { OwnedFd::from_raw_fd(dup) });
        }
        Ok(())
    }

    /// Runs a non-empty, validated batch cut into independent chains of `lens` operations; sets
    /// every result slot.
    pub(crate) fn run(&mut self, calls: &mut [Call<'_>], lens: &[usize]) {
        for (start, end) in chains(lens) {
            let mut stopped = false;
            for call in &mut calls[start..end] {
                if stopped {
                    call.result = Some(-i64::from(libc::ECANCELED));
                    continue;
                }
                let result = self.execute(call);
                call.result = Some(result);
                stopped = call.check && call.is_failure(result);
            }
        }
    }

    /// One operation, with a fixed-file slot turned into its descriptor.
    fn execute(&mut self, call: &Call<'_>) -> i64 {
        self.calls += 1;
        let mut op = call.op;
        if call.fixed {
            let slot = op.fd().unwrap_or(-1) as usize; // validated: in range
            if let Op::Close { .. } = op {
                return match self.slots[slot].take() {
                    // SAFETY: the descriptor is ours; closing it is the operation.
                    Some(fd) => errno_result(unsafe { libc::close(fd.into_raw_fd()) } as i64),
                    None => -i64::from(libc::EBADF),
                };
            }
            let Some(fd) = self.slots[slot].as_ref().map(|f| f.as_raw_fd()) else {
                return -i64::from(libc::EBADF);
            };
            set_fd(&mut op, fd);
        }
        if let (Some(_), Op::OpenAt { flags, .. }) = (call.slot, &mut op) {
            *flags |= libc::O_CLOEXEC; // a slot stands for a direct descriptor: not inherited
        }
        let result = execute(&op);
        match call.slot {
            Some(slot) if result >= 0 => {
                // SAFETY: openat just returned this descriptor; the slot owns it from now on.
                self.slots[slot as usize] = Some(unsafe { OwnedFd::from_raw_fd(result as RawFd) });
                0
            }
            _ => result,
        }
    }
}

fn set_fd(op: &mut Op, new: RawFd) {
    match op {
        Op::Read { fd, .. }
        | Op::Write { fd, .. }
        | Op::ReadFixed { fd, .. }
        | Op::WriteFixed { fd, .. }
        | Op::Close { fd }
        | Op::Fsync { fd, .. }
        | Op::SendMsg { fd, .. }
        | Op::RecvMsg { fd, .. } => *fd = new,
        Op::OpenAt { .. } | Op::Statx { .. } => {}
    }
}

fn errno_result(ret: i64) -> i64 {
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
            }
            | Op::ReadFixed {
                fd,
                buf,
                len,
                offset: None,
                ..
            } => libc::read(fd, buf.cast(), len) as i64,
            Op::Read {
                fd,
                buf,
                len,
                offset: Some(off),
            }
            | Op::ReadFixed {
                fd,
                buf,
                len,
                offset: Some(off),
                ..
            } => libc::pread(fd, buf.cast(), len, off as libc::off_t) as i64,
            Op::Write {
                fd,
                buf,
                len,
                offset: None,
            }
            | Op::WriteFixed {
                fd,
                buf,
                len,
                offset: None,
                ..
            } => libc::write(fd, buf.cast(), len) as i64,
            Op::Write {
                fd,
                buf,
                len,
                offset: Some(off),
            }
            | Op::WriteFixed {
                fd,
                buf,
                len,
                offset: Some(off),
                ..
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
    errno_result(ret)
}
