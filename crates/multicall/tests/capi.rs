//! The C API, called through its `extern "C"` functions: bad input gives a negative errno and
//! runs nothing, a normal batch behaves as in Rust, and mc_open reports why it failed.

mod common;

use std::ffi::{c_long, CStr};
use std::os::fd::AsRawFd;

use common::*;
use pkprof_multicall::ffi::*;

fn call(op: i32, check: bool, args: &[c_long]) -> McCall {
    let mut c = McCall {
        op,
        check: check as i32,
        result: 12345,
        ..McCall::default()
    };
    c.args[..args.len()].copy_from_slice(args);
    c
}

/// Opens an io_uring-backed and a sequential handle.
fn handles() -> Vec<(&'static str, *mut McRing)> {
    let ring = mc_open(8);
    assert!(!ring.is_null(), "mc_open(8) failed");
    vec![("io_uring", ring), ("sequential", mc_open_sequential())]
}

#[test]
fn unsupported_op_is_eopnotsupp_and_nothing_runs() {
    for (name, r) in handles() {
        let s = Scratch::new();
        let out = s.rw_file("out");
        let data = b"must not appear";
        let mut calls = [
            call(
                MC_WRITE,
                true,
                &[
                    out.as_raw_fd().into(),
                    data.as_ptr() as c_long,
                    data.len() as c_long,
                ],
            ),
            call(99, true, &[]),
        ];
        // SAFETY: r is live; calls holds 2 entries whose pointers are valid.
        let ret = unsafe { multi_call(r, 2, calls.as_mut_ptr()) };
        assert_eq!(ret, -libc::EOPNOTSUPP, "{name}");
        assert!(
            calls.iter().all(|c| c.result == 12345),
            "{name}: slots untouched"
        );
        assert_eq!(read(&s.path("out")), b"", "{name}: nothing submitted");
        // SAFETY: r is live and not used afterwards.
        unsafe { mc_close(r) };
    }
}

#[test]
fn bad_input_is_a_negative_errno() {
    for (name, r) in handles() {
        let mut one = [call(MC_CLOSE, true, &[BAD_FD.into()])];
        let mut buf = [0u8; 8];
        // SAFETY (all calls in this block): r is live or NULL on purpose; arrays are valid.
        unsafe {
            assert_eq!(
                multi_call(r, 0, one.as_mut_ptr()),
                -libc::EINVAL,
                "{name}: empty"
            );
            assert_eq!(
                multi_call(r, -1, one.as_mut_ptr()),
                -libc::EINVAL,
                "{name}: negative"
            );
            assert_eq!(
                multi_call(std::ptr::null_mut(), 1, one.as_mut_ptr()),
                -libc::EINVAL,
                "{name}"
            );
            assert_eq!(
                multi_call(r, 1, std::ptr::null_mut()),
                -libc::EINVAL,
                "{name}"
            );
            let mut neg = [call(MC_READ, true, &[0, buf.as_mut_ptr() as c_long, -1])];
            assert_eq!(
                multi_call(r, 1, neg.as_mut_ptr()),
                -libc::EINVAL,
                "{name}: negative len"
            );
            let mut off = [call(
                MC_PREAD,
                true,
                &[0, buf.as_mut_ptr() as c_long, 8, -5],
            )];
            assert_eq!(
                multi_call(r, 1, off.as_mut_ptr()),
                -libc::EINVAL,
                "{name}: negative offset"
            );
            let mut fsync = [call(MC_FSYNC, true, &[0, 7])];
            assert_eq!(
                multi_call(r, 1, fsync.as_mut_ptr()),
                -libc::EINVAL,
                "{name}: fsync flags"
            );
            let mut fd = [call(MC_CLOSE, true, &[1 << 40])];
            assert_eq!(
                multi_call(r, 1, fd.as_mut_ptr()),
                -libc::EINVAL,
                "{name}: fd range"
            );
            assert_eq!(one[0].result, 12345, "{name}");
            mc_close(r);
        }
    }
}

#[test]
fn batch_larger_than_the_ring_is_e2big() {
    let r = mc_open(2);
    assert!(!r.is_null());
    // SAFETY: r is live; calls is valid for 3 entries.
    unsafe {
        assert_eq!(mc_capacity(r), 2);
        let mut calls = [call(MC_CLOSE, false, &[BAD_FD.into()]); 3];
        assert_eq!(multi_call(r, 3, calls.as_mut_ptr()), -libc::E2BIG);
        assert_eq!(multi_call(r, 2, calls.as_mut_ptr()), 3);
        mc_close(r);
        let seq = mc_open_sequential();
        assert_eq!(mc_capacity(seq), 0, "sequential: no limit");
        assert_eq!(multi_call(seq, 3, calls.as_mut_ptr()), 4);
        mc_close(seq);
        assert_eq!(mc_capacity(std::ptr::null()), -libc::EINVAL);
        mc_close(std::ptr::null_mut());
    }
}

#[test]
fn a_c_batch_has_the_paper_semantics() {
    for (name, r) in handles() {
        let s = Scratch::new();
        let out = s.rw_file("out");
        let ofd: c_long = out.as_raw_fd().into();
        let mut buf = [0u8; 4];
        let mut calls = [
            call(MC_WRITE, true, &[ofd, b"ab".as_ptr() as c_long, 2]),
            call(
                MC_READ,
                false,
                &[BAD_FD.into(), buf.as_mut_ptr() as c_long, 4],
            ),
            call(MC_PWRITE, true, &[ofd, b"Z".as_ptr() as c_long, 1, 0]),
            call(MC_FSYNC, true, &[BAD_FD.into(), MC_FSYNC_DATASYNC]),
            call(MC_WRITE, true, &[ofd, b"no".as_ptr() as c_long, 2]),
        ];
        // SAFETY: r is live; the calls' buffers outlive the call.
        let ret = unsafe { multi_call(r, 5, calls.as_mut_ptr()) };
        assert_eq!(ret, 4, "{name}");
        let got: Vec<_> = calls.iter().map(|c| c.result).collect();
        assert_eq!(got, [2, EBADF, 1, EBADF, ECANCELED], "{name}");
        assert_eq!(read(&s.path("out")), b"Zb", "{name}");
        // SAFETY: r is live and not used afterwards.
        unsafe { mc_close(r) };
    }
}

#[test]
fn mc_open_says_why_it_failed() {
    for entries in [0, 1 << 20] {
        assert!(mc_open(entries).is_null());
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EINVAL)
        );
        // SAFETY: mc_last_error returns NULL or a NUL-terminated string owned by this thread.
        let msg = unsafe { CStr::from_ptr(mc_last_error()) }
            .to_string_lossy()
            .into_owned();
        assert!(msg.contains("invalid ring size"), "{msg}");
    }
}

#[test]
fn another_thread_gets_eexist_and_the_ring_stays_usable() {
    let r = mc_open(4);
    assert!(!r.is_null());
    let addr = r as usize;
    let from_other = std::thread::spawn(move || {
        let mut calls = [call(MC_CLOSE, false, &[BAD_FD.into()])];
        // SAFETY: the ring is live; the opener does not use it while this thread runs.
        unsafe { multi_call(addr as *mut McRing, 1, calls.as_mut_ptr()) }
    })
    .join()
    .unwrap();
    assert_eq!(from_other, -libc::EEXIST);
    let mut calls = [call(MC_CLOSE, false, &[BAD_FD.into()])];
    // SAFETY: r is live and used by its opener.
    unsafe {
        assert_eq!(multi_call(r, 1, calls.as_mut_ptr()), 2);
        assert_eq!(calls[0].result, EBADF);
        mc_close(r);
    }
}
