//! A kernel without io_uring, made by setting kernel.io_uring_disabled = 2 (root only): the
//! constructors fail with a clear error naming the sysctl, and the sequential fallback gives the
//! same results as io_uring did. The old value is restored even if the test panics. Alone in its
//! test binary so that no other io_uring test runs while io_uring is off.

mod common;

use std::ffi::CStr;
use std::os::fd::AsRawFd;
use std::path::Path;

use common::*;
use pkprof_multicall::{ffi, with_thread_ring, Call, Error, MultiCall, Options};

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

/// Puts the sysctl back when dropped, also while unwinding from a failed assertion.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(SYSCTL, &self.0) {
            eprintln!("could not restore {SYSCTL} to {}: {e}", self.0);
        }
    }
}

/// One batch with a bit of everything: writes, pread, an unchecked failure, a checked short
/// read that stops it. Returns the index, the result slots and the file's content.
fn reference_batch(mc: &mut MultiCall, s: &Scratch, name: &str) -> (usize, Vec<i64>, Vec<u8>) {
    let f = s.rw_file(name);
    let fd = f.as_raw_fd();
    let (mut a, mut b) = ([0u8; 3], [0u8; 100]);
    let mut calls = [
        Call::write(fd, b"abcdef").checked(),
        Call::pread(fd, &mut a, 2).checked(),
        Call::close(BAD_FD),
        Call::pread(fd, &mut b, 1).checked(),
        Call::write(fd, b"never").checked(),
    ];
    let index = mc.run(&mut calls).unwrap();
    let results = calls.iter().map(|c| c.result().unwrap()).collect();
    assert_eq!(&a, b"cde");
    (index, results, read(&s.path(name)))
}

#[test]
fn without_io_uring_the_error_is_clear_and_the_fallback_gives_the_same_results() {
    if !is_root() || !Path::new(SYSCTL).exists() {
        eprintln!("skipped: needs root and {SYSCTL}");
        return;
    }
    let s = Scratch::new();
    let expected = reference_batch(&mut MultiCall::new(8).unwrap(), &s, "uring");
    assert_eq!(
        expected,
        (4, vec![6, 3, EBADF, 5, ECANCELED], b"abcdef".to_vec())
    );

    let old = std::fs::read_to_string(SYSCTL).unwrap().trim().to_string();
    let restore = Restore(old.clone());
    std::fs::write(SYSCTL, "2").unwrap();

    match MultiCall::new(8) {
        Err(e @ Error::Unavailable { .. }) => {
            let Error::Unavailable { reason, source } = &e else {
                unreachable!()
            };
            assert_eq!(source.raw_os_error(), Some(libc::EPERM));
            assert!(reason.contains("kernel.io_uring_disabled = 2"), "{reason}");
            assert!(
                e.to_string().starts_with("io_uring is unavailable: "),
                "{e}"
            );
        }
        other => panic!("expected Error::Unavailable, got {other:?}"),
    }
    assert!(ffi::mc_open(8).is_null());
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EPERM)
    );
    // SAFETY: mc_last_error returns NULL or a NUL-terminated string owned by this thread.
    let msg = unsafe { CStr::from_ptr(ffi::mc_last_error()) }
        .to_string_lossy()
        .into_owned();
    assert!(msg.contains("io_uring_disabled"), "{msg}");

    let mut fallback = MultiCall::new_or_sequential(8).unwrap();
    assert!(fallback.is_sequential());
    let got = reference_batch(&mut fallback, &s, "sequential");
    assert_eq!(got, expected, "the fallback must give io_uring's results");

    // With options: the fallback keeps its (emulated) slots and says why it is sequential.
    let opts = Options::new(8).file_slots(2);
    let mut fallback = MultiCall::with_options_or_sequential(&opts).unwrap();
    assert!(fallback.is_sequential());
    assert_eq!(fallback.file_slots(), 2);
    let why = fallback.describe();
    assert!(
        why.starts_with("sequential (io_uring is unavailable: "),
        "{why}"
    );
    assert!(why.contains("kernel.io_uring_disabled = 2"), "{why}");
    let got = reference_batch(&mut fallback, &s, "sequential-opts");
    assert_eq!(
        got, expected,
        "the fallback with options must give io_uring's results"
    );
    let thread_ring = with_thread_ring(&opts, |mc| mc.describe()).unwrap();
    assert!(
        thread_ring.contains("io_uring_disabled = 2"),
        "{thread_ring}"
    );

    drop(restore);
    assert_eq!(
        std::fs::read_to_string(SYSCTL).unwrap().trim(),
        old,
        "sysctl restored"
    );
    assert!(!MultiCall::new(8).unwrap().is_sequential());
}
