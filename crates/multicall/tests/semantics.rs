//! The multi-call's stop rule, result slots and return value, on both engines: checked failures
//! (errors and short transfers) stop the batch, unchecked ones do not, and the kernel really
//! cancels what follows (the files show the cancelled writes never happened).

mod common;

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::AsRawFd;

use common::*;
use pkprof_multicall::{Call, Error};

fn results(calls: &[Call<'_>]) -> Vec<i64> {
    calls
        .iter()
        .map(|c| c.result().expect("every slot is set"))
        .collect()
}

#[test]
fn checked_error_in_the_middle_returns_its_index_and_cancels_the_rest() {
    for (name, mut mc) in engines() {
        let s = Scratch::new();
        let out = s.rw_file("out");
        let fd = out.as_raw_fd();
        let mut buf = [0u8; 16];
        let mut calls = [
            Call::write(fd, b"one ").checked(),
            Call::read(BAD_FD, &mut buf).checked(),
            Call::write(fd, b"two ").checked(),
            Call::write(fd, b"three").checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 2, "{name}");
        assert_eq!(results(&calls), [4, EBADF, ECANCELED, ECANCELED], "{name}");
        assert_eq!(
            read(&s.path("out")),
            b"one ",
            "{name}: cancelled writes must not run"
        );
    }
}

#[test]
fn unchecked_failure_does_not_stop_the_batch() {
    for (name, mut mc) in engines() {
        let s = Scratch::new();
        let out = s.rw_file("out");
        let fd = out.as_raw_fd();
        let mut buf = [0u8; 16];
        let mut calls = [
            Call::write(fd, b"one ").checked(),
            Call::read(BAD_FD, &mut buf),
            Call::close(BAD_FD),
            Call::write(fd, b"two").checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 5, "{name}: count + 1");
        assert_eq!(results(&calls), [4, EBADF, EBADF, 3], "{name}");
        assert_eq!(read(&s.path("out")), b"one two", "{name}");
    }
}

#[test]
fn checked_failure_cancels_unchecked_ops_after_it() {
    for (name, mut mc) in engines() {
        let s = Scratch::new();
        let out = s.rw_file("out");
        let mut calls = [
            Call::close(BAD_FD).checked(),
            Call::write(out.as_raw_fd(), b"a"),
            Call::write(out.as_raw_fd(), b"b"),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 1, "{name}");
        assert_eq!(results(&calls), [EBADF, ECANCELED, ECANCELED], "{name}");
        assert_eq!(read(&s.path("out")), b"", "{name}");
    }
}

#[test]
fn invalid_fd_alone() {
    for (name, mut mc) in engines() {
        let mut calls = [Call::fsync(BAD_FD).checked()];
        assert_eq!(mc.run(&mut calls).unwrap(), 1, "{name}");
        assert_eq!(results(&calls), [EBADF], "{name}");
    }
}

#[test]
fn short_read_of_a_regular_file_stops_a_checked_batch() {
    let s = Scratch::new();
    let src = s.file_with("src", b"hello");
    for (name, mut mc) in engines() {
        let out = s.rw_file(&format!("out-{name}"));
        let mut buf = [0u8; 4096];
        let mut calls = [
            Call::pread(src.as_raw_fd(), &mut buf, 0).checked(),
            Call::write(out.as_raw_fd(), b"x").checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 1, "{name}");
        assert_eq!(results(&calls), [5, ECANCELED], "{name}");
        assert_eq!(read(&s.path(&format!("out-{name}"))), b"", "{name}");
        // At end of file the count is 0: still a short transfer, still a stop.
        let mut calls = [
            Call::pread(src.as_raw_fd(), &mut buf, 5).checked(),
            Call::write(out.as_raw_fd(), b"x").checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 1, "{name}");
        assert_eq!(results(&calls), [0, ECANCELED], "{name}");
    }
}

#[test]
fn short_read_of_a_pipe_and_a_socket_stops_a_checked_batch() {
    for (name, mut mc) in engines() {
        let (r, w) = pipe();
        write_fd(&w, b"hello");
        short_read_stops_once(&mut mc, r.as_raw_fd(), &format!("pipe {name}"));
        drop(w);

        let (a, b) = socketpair();
        write_fd(&b, b"hello");
        short_read_stops_once(&mut mc, a.as_raw_fd(), &format!("socket {name}"));
    }
}

/// A checked 4096-byte read from `src` (holding "hello"), then a checked write: the read is
/// short, so the batch stops at 1 with the count in the slot and the write cancelled.
fn short_read_stops_once(mc: &mut pkprof_multicall::MultiCall, src: i32, label: &str) {
    let s = Scratch::new();
    let out = s.rw_file("out");
    let mut buf = [0u8; 4096];
    let mut calls = [
        Call::read(src, &mut buf).checked(),
        Call::write(out.as_raw_fd(), b"x").checked(),
    ];
    assert_eq!(mc.run(&mut calls).unwrap(), 1, "{label}");
    assert_eq!(results(&calls), [5, ECANCELED], "{label}");
    assert_eq!(&buf[..5], b"hello", "{label}");
    assert_eq!(read(&s.path("out")), b"", "{label}");
}

#[test]
fn unchecked_short_read_continues() {
    let s = Scratch::new();
    let src = s.file_with("src", b"hello");
    for (name, mut mc) in engines() {
        let out = s.rw_file("out");
        let mut buf = [0u8; 4096];
        let mut calls = [
            Call::pread(src.as_raw_fd(), &mut buf, 0),
            Call::write(out.as_raw_fd(), b"x").checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3, "{name}");
        assert_eq!(results(&calls), [5, 1], "{name}");
    }
}

#[test]
fn short_write_stops_a_checked_batch() {
    for (name, mut mc) in engines() {
        let (r, w) = pipe();
        // A one-page, non-blocking pipe takes 4096 of 10000 bytes and returns the count.
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            assert_eq!(libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 4096), 4096);
            assert_eq!(
                libc::fcntl(w.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK),
                0
            );
        }
        let data = vec![7u8; 10000];
        let s = Scratch::new();
        let out = s.rw_file("out");
        let mut calls = [
            Call::write(w.as_raw_fd(), &data).checked(),
            Call::write(out.as_raw_fd(), b"x"),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 1, "{name}");
        assert_eq!(results(&calls), [4096, ECANCELED], "{name}");
        drop(r);
    }
}

#[test]
fn recvmsg_short_is_a_failure_only_with_waitall() {
    for (name, mut mc) in engines() {
        let (a, b) = socketpair();
        let s = Scratch::new();
        let out = s.rw_file("out");
        write_fd(&b, b"abcd");
        let mut buf = [0u8; 64];
        {
            let mut bufs = [IoSliceMut::new(&mut buf)];
            let mut calls = [
                Call::recvmsg(a.as_raw_fd(), &mut bufs, 0).checked(),
                Call::write(out.as_raw_fd(), b"x").checked(),
            ];
            assert_eq!(
                mc.run(&mut calls).unwrap(),
                3,
                "{name}: a plain short recvmsg is no failure"
            );
            assert_eq!(results(&calls), [4, 1], "{name}");
        }
        write_fd(&b, b"efgh");
        // SAFETY: shutdown on a socket we own.
        assert_eq!(unsafe { libc::shutdown(b.as_raw_fd(), libc::SHUT_WR) }, 0);
        let mut bufs = [IoSliceMut::new(&mut buf)];
        let mut calls = [
            Call::recvmsg(a.as_raw_fd(), &mut bufs, libc::MSG_WAITALL).checked(),
            Call::write(out.as_raw_fd(), b"y").checked(),
        ];
        assert_eq!(
            mc.run(&mut calls).unwrap(),
            1,
            "{name}: MSG_WAITALL short is a failure"
        );
        assert_eq!(results(&calls), [4, ECANCELED], "{name}");
        assert_eq!(read(&s.path("out")), b"x", "{name}");
    }
}

#[test]
fn sendmsg_to_a_closed_peer_is_epipe_not_sigpipe() {
    for (name, mut mc) in engines() {
        let (a, b) = socketpair();
        drop(b);
        let bufs = [IoSlice::new(b"hi")];
        let mut calls = [Call::sendmsg(a.as_raw_fd(), &bufs, 0).checked()];
        assert_eq!(mc.run(&mut calls).unwrap(), 1, "{name}");
        assert_eq!(results(&calls), [-(libc::EPIPE as i64)], "{name}");
    }
}

#[test]
fn empty_batch_is_an_error() {
    for (name, mut mc) in engines() {
        assert!(matches!(mc.run(&mut []), Err(Error::EmptyBatch)), "{name}");
    }
}

#[test]
fn batch_larger_than_the_ring_is_an_error_and_runs_nothing() {
    let s = Scratch::new();
    let out = s.rw_file("out");
    let mut mc = pkprof_multicall::MultiCall::new(8).unwrap();
    assert_eq!(mc.capacity(), Some(8));
    let mut calls: Vec<Call<'_>> = (0..9).map(|_| Call::write(out.as_raw_fd(), b"x")).collect();
    match mc.run(&mut calls) {
        Err(Error::BatchTooLarge {
            len: 9,
            capacity: 8,
        }) => {}
        other => panic!("expected BatchTooLarge, got {other:?}"),
    }
    assert!(calls.iter().all(|c| c.result().is_none()));
    assert_eq!(read(&s.path("out")), b"");
    // The ring is still fine, and the sequential engine has no limit.
    assert_eq!(mc.run(&mut calls[..8]).unwrap(), 9);
    assert_eq!(
        pkprof_multicall::MultiCall::sequential()
            .run(&mut calls)
            .unwrap(),
        10
    );
    assert_eq!(read(&s.path("out")), b"xxxxxxxxxxxxxxxxx");
}

#[test]
fn unexpressible_arguments_are_rejected_before_anything_runs() {
    for (name, mut mc) in engines() {
        let s = Scratch::new();
        let out = s.rw_file("out");
        let mut buf = [0u8; 4];
        let mut calls = [
            Call::write(out.as_raw_fd(), b"x"),
            Call::pread(out.as_raw_fd(), &mut buf, u64::MAX),
        ];
        match mc.run(&mut calls) {
            Err(Error::InvalidArgument { index: 2, .. }) => {}
            other => panic!("{name}: expected InvalidArgument for operation 2, got {other:?}"),
        }
        assert_eq!(read(&s.path("out")), b"", "{name}");
    }
}

#[test]
fn a_ring_is_reusable_after_a_failed_batch() {
    let mut mc = pkprof_multicall::MultiCall::new(4).unwrap();
    let s = Scratch::new();
    let out = s.rw_file("out");
    for round in 0..50 {
        let mut calls = [
            Call::close(BAD_FD).checked(),
            Call::write(out.as_raw_fd(), b"no"),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 1, "round {round}");
        let mut calls = [
            Call::write(out.as_raw_fd(), b"y").checked(),
            Call::close(BAD_FD),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3, "round {round}");
        assert_eq!(results(&calls), [1, EBADF]);
    }
    assert_eq!(read(&s.path("out")), vec![b'y'; 50]);
}
