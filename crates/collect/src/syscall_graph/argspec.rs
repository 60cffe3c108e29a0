//! Which argument of a syscall splits its node under `--args`: the fd it works on and the size it
//! moves. Named here once, resolved to this architecture's numbers with the `syscalls` crate.

use std::str::FromStr;

/// (syscall, index of the fd argument, index of the size argument), 0-based.
const SPECS: &[(&str, Option<u8>, Option<u8>)] = &[
    ("read", Some(0), Some(2)),
    ("write", Some(0), Some(2)),
    ("pread64", Some(0), Some(2)),
    ("pwrite64", Some(0), Some(2)),
    ("readv", Some(0), None),
    ("writev", Some(0), None),
    ("preadv", Some(0), None),
    ("pwritev", Some(0), None),
    ("preadv2", Some(0), None),
    ("pwritev2", Some(0), None),
    ("getdents64", Some(0), Some(2)),
    ("sendto", Some(0), Some(2)),
    ("recvfrom", Some(0), Some(2)),
    ("sendmsg", Some(0), None),
    ("recvmsg", Some(0), None),
    ("sendmmsg", Some(0), None),
    ("recvmmsg", Some(0), None),
    ("sendfile", Some(0), Some(3)),
    ("copy_file_range", Some(0), Some(4)),
    ("splice", Some(0), Some(4)),
    ("readahead", Some(0), Some(2)),
    ("close", Some(0), None),
    ("fstat", Some(0), None),
    ("lseek", Some(0), None),
    ("ioctl", Some(0), None),
    ("fcntl", Some(0), None),
    ("fsync", Some(0), None),
    ("fdatasync", Some(0), None),
    ("ftruncate", Some(0), None),
    ("fallocate", Some(0), None),
    ("fadvise64", Some(0), None),
    ("flock", Some(0), None),
    ("dup", Some(0), None),
    ("dup2", Some(0), None),
    ("dup3", Some(0), None),
    ("shutdown", Some(0), None),
    ("connect", Some(0), None),
    ("accept", Some(0), None),
    ("accept4", Some(0), None),
    ("bind", Some(0), None),
    ("listen", Some(0), None),
    ("epoll_wait", Some(0), None),
    ("epoll_pwait", Some(0), None),
    ("epoll_ctl", Some(0), None),
    ("io_uring_enter", Some(0), None),
    ("mmap", None, Some(1)),
    ("munmap", None, Some(1)),
];

/// Argument specs as (syscall number, fd argument + 1, size argument + 1), 0 meaning none: the
/// layout of `struct pkprof_sc_argspec`. Names this architecture lacks are skipped.
pub fn argspecs() -> Vec<(u32, u8, u8)> {
    SPECS
        .iter()
        .filter_map(|(name, fd, size)| {
            let nr = syscalls::Sysno::from_str(name).ok()?.id() as u32;
            Some((nr, fd.map_or(0, |i| i + 1), size.map_or(0, |i| i + 1)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_resolves_on_x86_64_and_read_splits_by_fd_and_size() {
        let specs = argspecs();
        if cfg!(target_arch = "x86_64") {
            assert_eq!(specs.len(), SPECS.len(), "a name in SPECS is misspelt");
            assert!(specs.contains(&(0, 1, 3)), "read: fd arg 0, size arg 2");
        }
        let max = super::super::skel::types::pkprof_sc_limits::PKPROF_SC_MAX_NR.0;
        assert!(specs.iter().all(|&(nr, _, _)| nr < max), "PKPROF_SC_MAX_NR");
    }
}
