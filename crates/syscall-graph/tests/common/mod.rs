//! Shared by the tests: syscall nodes with their x86_64 numbers, user stacks, thread traces built
//! call by call, and golden-file comparison (`pkprof-golden`).

#![allow(dead_code)]

use std::path::PathBuf;

use pkprof_syscall_graph::{CallSiteFrame, Node, SyscallProfile, Thread, TraceBuilder};

/// A syscall node (x86_64 numbers, 999 for names not listed).
pub fn sc(name: &str) -> Node {
    let nr = match name {
        "read" => 0,
        "write" => 1,
        "close" => 3,
        "fstat" => 5,
        "poll" => 7,
        "mmap" => 9,
        "pread64" => 17,
        "pwrite64" => 18,
        "sendto" => 44,
        "recvfrom" => 45,
        "sendmsg" => 46,
        "recvmsg" => 47,
        "fsync" => 74,
        "futex" => 202,
        "getdents64" => 217,
        "epoll_wait" => 232,
        "openat" => 257,
        "newfstatat" => 262,
        "statx" => 332,
        _ => 999,
    };
    Node::new(nr, name)
}

/// A node split by argument: `read(fd=3, 4K..8K)` is `arg("read", 3, 13)`.
pub fn arg(name: &str, fd: i64, size_class: u8) -> Node {
    sc(name).with_arg(Some(fd), Some(size_class))
}

/// A symbolized stack, innermost first, in /usr/bin/app (libc frames for `__libc_*`/`__GI_*`).
pub fn stack(symbols: &[&str]) -> Vec<CallSiteFrame> {
    symbols
        .iter()
        .enumerate()
        .map(|(i, s)| CallSiteFrame {
            addr: 0x1000 + 0x10 * i as u64,
            symbol: Some((*s).into()),
            module: Some(if s.starts_with("__") {
                "/usr/lib/x86_64-linux-gnu/libc.so.6".into()
            } else {
                "/usr/bin/app".into()
            }),
        })
        .collect()
}

/// An unsymbolized frame at `offset` in `module`.
pub fn raw(module: &str, offset: u64) -> CallSiteFrame {
    CallSiteFrame {
        addr: offset,
        symbol: None,
        module: Some(module.into()),
    }
}

/// A thread that runs `calls` in order, `ns` each, no errors, no stacks.
pub fn thread(pid: u32, tid: u32, comm: &str, calls: &[Node], ns: u64) -> Thread {
    let mut t = TraceBuilder::new(pid, tid, comm);
    for n in calls {
        t.call(n, false, ns, None);
    }
    t.finish()
}

/// The thread as a collector without trigram counts would give it: every `before` None.
pub fn without_trigrams(mut t: Thread) -> Thread {
    for tr in &mut t.transitions {
        tr.before = None;
    }
    t
}

/// `body` repeated `n` times.
pub fn times(body: &[Node], n: usize) -> Vec<Node> {
    body.iter().cloned().cycle().take(body.len() * n).collect()
}

pub fn profile(target: &str, threads: Vec<Thread>) -> SyscallProfile {
    SyscallProfile {
        target: target.into(),
        duration_ns: 1_000_000_000,
        args_split: false,
        threads,
        lost: Default::default(),
    }
}

/// Compares `actual` with `tests/golden/NAME` ([`pkprof_golden::assert_golden`]).
#[track_caller]
pub fn assert_golden(name: &str, actual: &str) {
    pkprof_golden::assert_golden(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name),
        actual,
    );
}
