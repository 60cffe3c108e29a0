//! The options of issue 16 (direct descriptors, registered files and buffers, RESOLVE_CACHED,
//! independent chains, SQPOLL, the registered ring fd, one ring per thread), each against the
//! sequential engine: the same batch must give the same results as plain system calls.

mod common;

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};

use common::*;
use pkprof_multicall::{with_thread_ring, Call, Error, MultiCall, Options};

const ENOENT: i64 = -(libc::ENOENT as i64);

/// An io_uring engine and the sequential one, both with `slots` fixed-file slots.
fn engines_with(opts: Options) -> Vec<(&'static str, MultiCall)> {
    vec![
        (
            "io_uring",
            MultiCall::with_options(&opts).expect("io_uring ring (is kernel.io_uring_disabled 0?)"),
        ),
        ("sequential", MultiCall::sequential_with_options(&opts)),
    ]
}

fn cstr(p: &std::path::Path) -> CString {
    CString::new(p.to_str().unwrap()).unwrap()
}

#[test]
fn an_openat_hands_its_file_to_the_calls_after_it_through_a_slot() {
    let s = Scratch::new();
    std::fs::write(s.path("in"), b"direct descriptors").unwrap();
    let path = cstr(&s.path("in"));
    for (name, mut mc) in engines_with(Options::new(8).file_slots(4)) {
        assert_eq!(mc.file_slots(), 4);
        let mut buf = [0u8; 64];
        let mut calls = [
            Call::openat(libc::AT_FDCWD, &path, libc::O_RDONLY | libc::O_CLOEXEC, 0)
                .into_slot(2)
                .checked(),
            Call::read(2, &mut buf).fixed(),
            Call::close(2).fixed().checked(),
            // The slot is empty now.
            Call::close(2).fixed(),
        ];
        let index = mc.run(&mut calls).unwrap();
        let results: Vec<i64> = calls.iter().map(|c| c.result().unwrap()).collect();
        assert_eq!(index, 5, "{name}");
        assert_eq!(results, vec![0, 18, 0, EBADF], "{name}");
        assert_eq!(&buf[..18], b"direct descriptors", "{name}");
    }
}

#[test]
fn a_failed_direct_open_stops_the_batch_like_a_plain_one() {
    let s = Scratch::new();
    let missing = cstr(&s.path("missing"));
    for (name, mut mc) in engines_with(Options::new(8).file_slots(2)) {
        let mut buf = [0u8; 8];
        let mut calls = [
            Call::openat(libc::AT_FDCWD, &missing, libc::O_RDONLY, 0)
                .into_slot(0)
                .checked(),
            Call::read(0, &mut buf).fixed(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 1, "{name}");
        assert_eq!(calls[0].result(), Some(ENOENT), "{name}");
        assert_eq!(calls[1].result(), Some(ECANCELED), "{name}");
        // Unchecked: the read runs, on the empty slot.
        let mut calls = [
            Call::openat(libc::AT_FDCWD, &missing, libc::O_RDONLY, 0).into_slot(0),
            Call::read(0, &mut buf).fixed(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3, "{name}");
        assert_eq!(calls[1].result(), Some(EBADF), "{name}");
    }
}

#[test]
fn slots_out_of_the_table_and_misplaced_flags_are_refused_before_anything_runs() {
    let s = Scratch::new();
    let path = cstr(&s.path("x"));
    let (r, _w) = pipe();
    for (name, mut mc) in engines_with(Options::new(8).file_slots(2)) {
        let mut buf = [0u8; 4];
        let cases: Vec<Vec<Call>> = vec![
            vec![Call::read(2, &mut buf).fixed()],
            vec![Call::close(-1).fixed()],
            vec![Call::openat(libc::AT_FDCWD, &path, libc::O_RDONLY, 0).into_slot(2)],
            vec![Call::openat(0, &path, libc::O_RDONLY, 0).fixed()],
            vec![Call::close(r.as_raw_fd()).into_slot(0)],
            vec![Call::close(r.as_raw_fd()).resolve_cached()],
        ];
        for mut calls in cases {
            match mc.run(&mut calls) {
                Err(Error::InvalidArgument { index: 1, .. }) => {}
                other => panic!("{name}: expected InvalidArgument, got {other:?}"),
            }
            assert_eq!(calls[0].result(), None, "{name}: nothing ran");
        }
    }
    // A ring without a table has no slot at all.
    let mut mc = MultiCall::new(4).unwrap();
    assert!(matches!(
        mc.run(&mut [Call::close(0).fixed()]),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn registered_files_and_buffers_give_the_plain_results() {
    let s = Scratch::new();
    for (name, mut mc) in engines_with(Options::new(8).file_slots(2)) {
        let f = s.rw_file(&format!("f-{name}"));
        mc.register_files(1, &[f.as_raw_fd()]).unwrap();
        drop(f); // the slot keeps the file open
        let mut mem = vec![0u8; 8192];
        let iov = [libc::iovec {
            iov_base: mem.as_mut_ptr().cast(),
            iov_len: mem.len(),
        }];
        // SAFETY: `mem` outlives `mc`, dropped explicitly at the end of this iteration.
        unsafe { mc.register_buffers(&iov) }.unwrap();
        let (head, tail) = mem.split_at_mut(4096);
        let (t1, t2) = tail.split_at_mut(8);
        head[..5].copy_from_slice(b"fixed");
        let mut calls = [
            Call::write_fixed(1, &head[..5], 0, Some(0))
                .fixed()
                .checked(),
            Call::read_fixed(1, &mut t1[..5], 0, Some(0))
                .fixed()
                .checked(),
            Call::read_fixed(1, &mut t2[..5], 0, Some(3))
                .fixed()
                .checked(), // short: 2
            Call::fsync(1).fixed(),
        ];
        let index = mc.run(&mut calls).unwrap();
        let results: Vec<i64> = calls.iter().map(|c| c.result().unwrap()).collect();
        assert_eq!((index, results), (3, vec![5, 5, 2, ECANCELED]), "{name}");
        assert_eq!(&t1[..5], b"fixed", "{name}");
        assert_eq!(&t2[..2], b"ed", "{name}");
        assert_eq!(read(&s.path(&format!("f-{name}"))), b"fixed", "{name}");
        drop(mc);
    }
    let mut mc = MultiCall::with_options(&Options::new(4).file_slots(1)).unwrap();
    assert!(matches!(
        mc.register_files(1, &[0]),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn resolve_cached_falls_back_when_the_path_is_not_in_the_dentry_cache() {
    let s = Scratch::new();
    std::fs::write(s.path("there"), b"cached").unwrap();
    let there = cstr(&s.path("there"));
    let _ = std::fs::read(s.path("there")); // its dentry is cached
    for (name, mut mc) in engines_with(Options::new(8).file_slots(1)) {
        // A name never looked up is not in the dentry cache: RESOLVE_CACHED answers -EAGAIN and
        // the engine runs the rest again without it. The caller sees what openat says.
        let never = cstr(&s.path(&format!("never-looked-up-{name}")));
        let never2 = cstr(&s.path(&format!("never-looked-up-2-{name}")));
        let (r, w) = pipe();
        let mut buf = [0u8; 16];
        let mut calls = [
            Call::openat(libc::AT_FDCWD, &never, libc::O_RDONLY, 0).resolve_cached(),
            Call::write(w.as_raw_fd(), b"ran"),
            Call::openat(libc::AT_FDCWD, &never2, libc::O_RDONLY, 0)
                .resolve_cached()
                .checked(),
            Call::write(w.as_raw_fd(), b"never"),
        ];
        let index = mc.run(&mut calls).unwrap();
        let results: Vec<i64> = calls.iter().map(|c| c.result().unwrap()).collect();
        assert_eq!(
            (index, results),
            (3, vec![ENOENT, 3, ENOENT, ECANCELED]),
            "{name}"
        );
        // SAFETY: reading the pipe into our buffer.
        let n = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(&buf[..n as usize], b"ran", "{name}");
        if name == "io_uring" {
            assert!(mc.cached_open_retries() >= 1, "the -EAGAIN path was taken");
        }
        // A cached path opens inline, into a slot, and hands the file on.
        let before = mc.cached_open_retries();
        let mut calls = [
            Call::openat(libc::AT_FDCWD, &there, libc::O_RDONLY, 0)
                .resolve_cached()
                .into_slot(0)
                .checked(),
            Call::read(0, &mut buf).fixed().checked(),
            Call::close(0).fixed(),
        ];
        // asks 16 bytes, gets 6: a short read stops the batch at 2.
        assert_eq!(mc.run(&mut calls).unwrap(), 2, "{name}");
        assert_eq!(calls[0].result(), Some(0), "{name}");
        assert_eq!(calls[1].result(), Some(6), "{name}");
        assert_eq!(&buf[..6], b"cached", "{name}");
        assert_eq!(
            mc.cached_open_retries(),
            before,
            "{name}: no second crossing"
        );
        mc.run(&mut [Call::close(0).fixed()]).unwrap();
    }
}

#[test]
fn independent_chains_each_keep_the_stop_rule_and_do_not_cancel_each_other() {
    let s = Scratch::new();
    for (name, mut mc) in engines() {
        let f = s.rw_file(&format!("chains-{name}"));
        let fd = f.as_raw_fd();
        let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
        let mut calls = [
            // chain 1: a checked failure at its 1st call
            Call::close(BAD_FD).checked(),
            Call::pwrite(fd, b"no", 10),
            // chain 2: runs whole
            Call::pwrite(fd, b"abcd", 0).checked(),
            Call::pread(fd, &mut a, 0).checked(),
            // chain 3: one call, a short read is its failure
            Call::pread(fd, &mut b, 2).checked(),
        ];
        let mut index = [0; 3];
        mc.run_chains(&mut calls, &[2, 2, 1], &mut index).unwrap();
        let results: Vec<i64> = calls.iter().map(|c| c.result().unwrap()).collect();
        assert_eq!(index, [1, 3, 1], "{name}");
        assert_eq!(results[..4], [EBADF, ECANCELED, 4, 4], "{name}");
        // Chain 3 is not ordered against chain 2: it read 0, 2 (or, if first, 0) bytes.
        assert!(results[4] >= 0 && results[4] < 4, "{name}: {results:?}");
        assert_eq!(&a, b"abcd", "{name}");
        assert_eq!(
            mc.run_chains(&mut [Call::close(BAD_FD)], &[1, 0], &mut [0, 0])
                .unwrap_err()
                .to_string(),
            Error::EmptyBatch.to_string()
        );
        assert!(matches!(
            mc.run_chains(&mut [Call::close(BAD_FD)], &[2], &mut [0]),
            Err(Error::InvalidArgument { .. })
        ));
    }
}

#[test]
fn sqpoll_gives_the_same_results_with_fewer_crossings() {
    let s = Scratch::new();
    // A long spin, so that on a loaded machine a run still waits for the polling thread in user
    // space rather than in io_uring_enter.
    let opts = Options::new(8)
        .sqpoll(Some(1000))
        .spin(std::time::Duration::from_secs(1))
        .file_slots(1);
    let mut mc = match MultiCall::with_options(&opts) {
        Ok(mc) => mc,
        Err(e) => {
            // Not permitted here (old kernel, container): say so rather than fail.
            eprintln!("skipped: SQPOLL refused: {e}");
            return;
        }
    };
    assert!(mc.describe().contains("sqpoll"), "{}", mc.describe());
    let mut seq = MultiCall::sequential_with_options(&opts);
    let mut outcomes = Vec::new();
    for (name, mc) in [("sqpoll", &mut mc), ("sequential", &mut seq)] {
        let f = s.rw_file(&format!("sq-{name}"));
        mc.register_files(0, &[f.as_raw_fd()]).unwrap();
        let mut back = [0u8; 8];
        let mut calls = [
            Call::write(0, b"polled").fixed().checked(),
            Call::pread(0, &mut back, 0).fixed().checked(), // short: 6 of 8
            Call::fsync(0).fixed(),
        ];
        let index = mc.run(&mut calls).unwrap();
        let results: Vec<i64> = calls.iter().map(|c| c.result().unwrap()).collect();
        outcomes.push((index, results, back));
    }
    assert_eq!(outcomes[0], outcomes[1]);
    assert_eq!(outcomes[0].0, 2);
    // Many batches in a row while the thread is awake: fewer enters than batches.
    let (r, w) = pipe();
    let before = mc.enters();
    for _ in 0..200 {
        let mut buf = [0u8; 1];
        let mut calls = [
            Call::write(w.as_raw_fd(), b"x").checked(),
            Call::read(r.as_raw_fd(), &mut buf).checked(),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3);
    }
    assert!(
        mc.enters() - before < 200,
        "{} enters",
        mc.enters() - before
    );
    assert!(
        MultiCall::sqpoll_cpu().is_some(),
        "the polling thread is found"
    );
}

#[test]
fn rings_with_a_registered_fd_can_be_opened_and_dropped_many_times() {
    // The kernel has 16 registered-ring slots per thread: dropping must give them back.
    for _ in 0..40 {
        let mut mc = MultiCall::new(2).unwrap();
        assert!(
            mc.describe().contains("ring fd registered"),
            "{}",
            mc.describe()
        );
        let (r, w) = pipe();
        let mut buf = [0u8; 2];
        let mut calls = [
            Call::write(w.as_raw_fd(), b"ok"),
            Call::read(r.as_raw_fd(), &mut buf),
        ];
        assert_eq!(mc.run(&mut calls).unwrap(), 3);
        assert_eq!(mc.enters(), 1);
    }
    let mut plain = MultiCall::with_options(&Options::new(2).register_ring_fd(false)).unwrap();
    assert!(!plain.describe().contains("ring fd"));
    assert_eq!(plain.run(&mut [Call::close(BAD_FD)]).unwrap(), 2);
}

#[test]
fn one_ring_per_thread_is_reused() {
    let opts = Options::new(4);
    let (r, w) = pipe();
    let fd: RawFd = w.as_raw_fd();
    for round in 1..=3u64 {
        let enters = with_thread_ring(&opts, |mc| {
            mc.run(&mut [Call::write(fd, b"t")]).unwrap();
            mc.enters()
        })
        .unwrap();
        assert_eq!(enters, round, "the same ring counts on");
    }
    let fresh = with_thread_ring(&Options::new(8), |mc| mc.enters()).unwrap();
    assert_eq!(fresh, 0, "other options: a new ring");
    let mut buf = [0u8; 3];
    // SAFETY: reading the pipe into our buffer.
    assert_eq!(
        unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), 3) },
        3
    );
    std::io::stderr().flush().unwrap();
}
