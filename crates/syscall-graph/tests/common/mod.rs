//! Shared by the tests: syscall nodes with their x86_64 numbers, user stacks, thread traces built
//! call by call, and golden-file comparison with a readable diff and a bless switch.

#![allow(dead_code)]

use std::path::PathBuf;

use pkprof_syscall_graph::{Frame, Node, Profile, Thread, TraceBuilder};

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
pub fn stack(symbols: &[&str]) -> Vec<Frame> {
    symbols
        .iter()
        .enumerate()
        .map(|(i, s)| Frame {
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
pub fn raw(module: &str, offset: u64) -> Frame {
    Frame {
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

pub fn profile(target: &str, threads: Vec<Thread>) -> Profile {
    Profile {
        target: target.into(),
        duration_ns: 1_000_000_000,
        args_split: false,
        threads,
        lost: Default::default(),
    }
}

/// Compares `actual` with `tests/golden/NAME` line by line. With `PKPROF_BLESS=1` it writes the
/// file instead. A missing golden file is a failure, never created silently.
pub fn assert_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var("PKPROF_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let expected = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => panic!(
            "golden file {} cannot be read ({e}): if the output below is right, create it with \
             PKPROF_BLESS=1 cargo test -p pkprof-syscall-graph\n{actual}",
            path.display()
        ),
    };
    if expected != actual {
        panic!(
            "{name} differs from its golden file (- golden, + actual; PKPROF_BLESS=1 rewrites \
             it):\n{}",
            diff(&expected, actual)
        );
    }
}

/// A line diff (longest common subsequence) showing changed lines with 2 lines of context.
pub fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // (tag, line number in the golden file for ' ' and '-', in the output for '+', text)
    let mut ops: Vec<(char, usize, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', i + 1, a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', i + 1, a[i]));
            i += 1;
        } else {
            ops.push(('+', j + 1, b[j]));
            j += 1;
        }
    }
    let near_change = |k: usize| {
        ops[k.saturating_sub(2)..(k + 3).min(ops.len())]
            .iter()
            .any(|o| o.0 != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (tag, line, text)) in ops.iter().enumerate() {
        if near_change(k) {
            if skipped {
                out.push_str("   ...\n");
                skipped = false;
            }
            out.push_str(&format!("{tag} {line:4} | {text}\n"));
        } else {
            skipped = true;
        }
    }
    if expected.ends_with('\n') != actual.ends_with('\n') {
        out.push_str("(the final newline differs)\n");
    }
    out
}
