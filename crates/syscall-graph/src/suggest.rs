//! The replacement table: for a cluster's shape and syscalls, the Linux call that does the same
//! work in fewer kernel crossings, else a batch through pkprof's multi-call library (io_uring),
//! and how many crossings that saves per occurrence of the cluster.

use serde::{Deserialize, Serialize};

use crate::model::Node;

/// The calls pkprof's multi-call library can put in one batch, as its README lists them
/// (fdatasync is its fsync op, `MC_FSYNC`, with the `MC_FSYNC_DATASYNC` flag).
pub const MULTICALL_OPS: [&str; 11] = [
    "read",
    "write",
    "pread",
    "pwrite",
    "openat",
    "close",
    "fsync",
    "fdatasync",
    "statx",
    "sendmsg",
    "recvmsg",
];

/// How a cluster's calls connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A -> A: the same call repeated.
    SelfLoop,
    /// A -> B -> ... -> A with distinct nodes: each iteration runs every node once.
    Loop,
    /// A -> B -> ... -> Z, not closed.
    Chain,
}

/// What to replace the cluster with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// One existing Linux syscall does the whole run or loop (writev, copy_file_range, ...).
    SingleCall,
    /// A poll/select loop: epoll saves per-call work, not crossings.
    Epoll,
    /// Every call is an op of the multi-call library: one io_uring_enter per occurrence.
    Multicall,
    /// Some calls are not ops of the multi-call library: only the runs around them batch.
    PartialMulticall,
    /// Nothing known replaces it.
    None,
    /// A replacement exists but the measured costs (`pkprof syscalls --calibrate`) say it would
    /// not save time on this machine: keep the calls as they are (`why` says by how much it
    /// would lose).
    LeaveIt,
}

/// A concrete suggestion for one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    pub kind: Kind,
    /// The call or mechanism to use; None when nothing applies.
    pub replacement: Option<String>,
    pub why: String,
    /// The cluster's syscalls that the multi-call library cannot batch (path order, no repeats).
    pub unbatchable: Vec<String>,
}

/// A suggestion and the kernel crossings it saves per unit of the cluster's count.
pub(crate) struct Plan {
    pub suggestion: Suggestion,
    pub saved_per_count: u64,
}

/// Syscalls that read into user memory: (name, from a socket).
fn reader(name: &str) -> Option<bool> {
    match name {
        "read" | "pread64" | "readv" | "preadv" | "preadv2" => Some(false),
        "recvfrom" | "recvmsg" | "recv" => Some(true),
        _ => None,
    }
}

/// Syscalls that write from user memory: (name, to a socket).
fn writer(name: &str) -> Option<bool> {
    match name {
        "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2" => Some(false),
        "sendto" | "sendmsg" | "send" => Some(true),
        _ => None,
    }
}

/// The multi-call op a syscall becomes, and how it must be rewritten to be one.
pub(crate) fn multicall_op(name: &str) -> Option<(&'static str, Option<&'static str>)> {
    Some(match name {
        "read" => ("read", None),
        "write" => ("write", None),
        "pread64" | "pread" => ("pread", None),
        "pwrite64" | "pwrite" => ("pwrite", None),
        "openat" => ("openat", None),
        "open" => ("openat", Some("open as openat(AT_FDCWD, ...)")),
        "creat" => (
            "openat",
            Some("creat as openat(AT_FDCWD, path, O_CREAT|O_WRONLY|O_TRUNC)"),
        ),
        "close" => ("close", None),
        "fsync" => ("fsync", None),
        "fdatasync" => ("fsync", Some("fdatasync as fsync with MC_FSYNC_DATASYNC")),
        "statx" => ("statx", None),
        "fstat" | "fstat64" => ("statx", Some("fstat as statx(fd, \"\", AT_EMPTY_PATH)")),
        "newfstatat" | "fstatat64" | "stat" | "lstat" | "stat64" | "lstat64" => {
            ("statx", Some("stat calls as statx"))
        }
        "sendmsg" => ("sendmsg", None),
        "sendto" | "send" => ("sendmsg", Some("sendto as sendmsg")),
        "recvmsg" => ("recvmsg", None),
        "recvfrom" | "recv" => ("recvmsg", Some("recvfrom as recvmsg")),
        _ => return None,
    })
}

/// Single calls that replace a run of one syscall: (replacement, needs one fd, why).
fn run_replacement(name: &str) -> Option<(&'static str, bool, &'static str)> {
    Some(match name {
        "write" | "writev" => (
            "writev",
            true,
            "consecutive writes to one fd: gather the buffers and write them with one writev \
             (up to IOV_MAX = 1024 buffers per call)",
        ),
        "pwrite64" | "pwritev" => (
            "pwritev",
            true,
            "consecutive positioned writes: where the offsets are contiguous, one pwritev writes \
             all the buffers",
        ),
        "read" | "readv" => (
            "readv",
            true,
            "consecutive reads from one fd: read into several buffers with one readv, or read \
             into one larger buffer",
        ),
        "pread64" | "preadv" => (
            "preadv",
            true,
            "consecutive positioned reads: where the offsets are contiguous, one preadv fills \
             all the buffers",
        ),
        "sendmsg" | "sendto" | "send" => (
            "sendmmsg",
            true,
            "one message per call: sendmmsg sends up to 1024 messages in one call",
        ),
        "recvmsg" | "recvfrom" | "recv" => (
            "recvmmsg",
            true,
            "one message per call: recvmmsg receives up to 1024 messages in one call (with \
             MSG_WAITFORONE it returns as soon as one has arrived)",
        ),
        "close" => (
            "close_range",
            false,
            "one close per fd: close_range(first, last, 0) closes a range of fds in one call \
             (CLOSE_RANGE_CLOEXEC marks them to close at exec instead)",
        ),
        _ => return None,
    })
}

const POLLERS: [&str; 5] = ["poll", "ppoll", "select", "pselect6", "_newselect"];

/// The suggestion for a cluster of `path` (for loops, one iteration) with `shape`.
pub(crate) fn plan(shape: Shape, path: &[Node]) -> Plan {
    let len = path.len() as u64;
    let is_loop = shape != Shape::Chain;
    let names: Vec<&str> = path.iter().map(|n| n.name.as_str()).collect();
    let mut unbatchable: Vec<String> = Vec::new();
    for name in &names {
        if multicall_op(name).is_none() && !unbatchable.iter().any(|u| u == name) {
            unbatchable.push((*name).to_string());
        }
    }
    let single = |replacement: &str, why: String, per: u64| Plan {
        suggestion: Suggestion {
            kind: Kind::SingleCall,
            replacement: Some(replacement.into()),
            why,
            unbatchable: unbatchable.clone(),
        },
        saved_per_count: per,
    };
    let fds: Vec<Option<i64>> = path.iter().map(|n| n.arg.fd).collect();
    let same_fd = fds.windows(2).all(|w| match (w[0], w[1]) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    });

    if is_loop {
        if let Some(p) = names.iter().find(|n| POLLERS.contains(n)) {
            return Plan {
                suggestion: Suggestion {
                    kind: Kind::Epoll,
                    replacement: Some("epoll_wait".into()),
                    why: format!(
                        "{p} loop: every {p} copies the whole fd set into the kernel and scans it; \
                         epoll keeps the set in the kernel (epoll_ctl once per fd) and epoll_wait \
                         returns only the ready fds. This saves work per call, not crossings"
                    ),
                    unbatchable,
                },
                saved_per_count: 0,
            };
        }
    }

    let run = names.windows(2).all(|w| w[0] == w[1]);
    if run {
        if let Some((replacement, needs_fd, why)) = run_replacement(names[0]) {
            if !needs_fd || same_fd {
                let per = if is_loop { len } else { len - 1 };
                return single(replacement, why.into(), per);
            }
        }
    }

    if shape == Shape::Loop && path.len() == 2 && !(fds[0].is_some() && fds[0] == fds[1]) {
        let copy = match (reader(names[0]), writer(names[1])) {
            (Some(r), Some(w)) => Some((r, w)),
            _ => match (reader(names[1]), writer(names[0])) {
                (Some(r), Some(w)) => Some((r, w)),
                _ => None,
            },
        };
        if let Some((from_socket, to_socket)) = copy {
            let (replacement, why) = match (from_socket, to_socket) {
                (false, false) => (
                    "copy_file_range / sendfile / splice",
                    "a read -> write loop moves the data through user memory: copy_file_range \
                     copies file to file inside the kernel (reflinks where the filesystem can), \
                     sendfile copies a file to a socket, splice moves data to or from a pipe; \
                     one call per loop, or per chunk of up to 2 GiB",
                ),
                (false, true) => (
                    "sendfile",
                    "a file is read and sent: sendfile copies from the file to the socket inside \
                     the kernel, one call per loop or per chunk",
                ),
                (true, _) => (
                    "splice",
                    "data received from a socket is written out: splice it through a pipe \
                     (socket -> pipe -> fd) and it never enters user memory",
                ),
            };
            return single(replacement, why.into(), len);
        }
    }

    if let Some(batch) = batch_plan(shape, path) {
        return batch;
    }
    let not_ops = unbatchable.join(", ");
    let ops = MULTICALL_OPS.join(", ");
    Plan {
        suggestion: Suggestion {
            kind: Kind::None,
            replacement: None,
            why: format!(
                "no single Linux call replaces it, and {not_ops} cannot be batched by pkprof's \
                 multi-call library (its ops: {ops})"
            ),
            unbatchable,
        },
        saved_per_count: 0,
    }
}

/// The batch through pkprof's multi-call library for a cluster of `path` with `shape`: the whole
/// path (`Kind::Multicall`) or its runs of batchable calls (`Kind::PartialMulticall`); None when
/// no two batchable calls are adjacent. `plan` uses it where no single call applies, and the
/// measured advice (`costs`) weighs it against a single call that does not save time.
pub(crate) fn batch_plan(shape: Shape, path: &[Node]) -> Option<Plan> {
    let len = path.len() as u64;
    let is_loop = shape != Shape::Chain;
    let names: Vec<&str> = path.iter().map(|n| n.name.as_str()).collect();
    let run = names.windows(2).all(|w| w[0] == w[1]);
    let mut unbatchable: Vec<String> = Vec::new();
    for name in &names {
        if multicall_op(name).is_none() && !unbatchable.iter().any(|u| u == name) {
            unbatchable.push((*name).to_string());
        }
    }
    let (rewrites, batchable): (Vec<&str>, Vec<bool>) = names
        .iter()
        .map(|n| multicall_op(n))
        .map(|op| (op.and_then(|(_, r)| r).unwrap_or(""), op.is_some()))
        .unzip();
    let mut unique: Vec<&str> = Vec::new();
    for r in rewrites {
        if !r.is_empty() && !unique.contains(&r) {
            unique.push(r);
        }
    }
    let rewrites = unique;
    let rewrite_note = if rewrites.is_empty() {
        String::new()
    } else {
        format!(" ({})", rewrites.join(", "))
    };
    let ops = MULTICALL_OPS.join(", ");
    // An fd opened in the batch is an argument of the calls after it, unknown when the batch is
    // built: the library opens into a direct descriptor and the calls after it use that.
    let opens_fd_for_later = names.iter().enumerate().any(|(i, n)| {
        matches!(*n, "open" | "openat" | "openat2" | "creat") && (is_loop || i + 1 < names.len())
    });
    let fd_note = if opens_fd_for_later {
        "; the fd the open returns is an argument of the calls after it, unknown when the \
         batch is built: open into a direct descriptor (MC_INTO_SLOT, Call::into_slot) and \
         give the calls after it that slot (MC_FIXED, Call::fixed)"
    } else {
        ""
    };
    if batchable.iter().all(|&b| b) {
        let (per, unit) = match shape {
            Shape::Chain => (len - 1, "each occurrence of the path"),
            _ if run => (len, "each run"),
            _ => (len - 1, "one iteration of the loop"),
        };
        return Some(Plan {
            suggestion: Suggestion {
                kind: Kind::Multicall,
                replacement: Some("pkprof multi-call (io_uring)".into()),
                why: format!(
                    "all its calls are ops of pkprof's multi-call library{rewrite_note}: one \
                     multi-call (one io_uring_enter, linked SQEs stopping at the first checked \
                     failure) runs {unit}{fd_note}"
                ),
                unbatchable,
            },
            saved_per_count: per,
        });
    }

    let segments = batchable_segments(&batchable, is_loop);
    let per: u64 = segments.iter().map(|s| s.len() as u64 - 1).sum();
    let not_ops = unbatchable.join(", ");
    if per > 0 {
        let runs: Vec<String> = segments
            .iter()
            .filter(|s| s.len() > 1)
            .map(|s| s.iter().map(|&i| names[i]).collect::<Vec<_>>().join(" -> "))
            .collect();
        return Some(Plan {
            suggestion: Suggestion {
                kind: Kind::PartialMulticall,
                replacement: Some("pkprof multi-call (io_uring), in part".into()),
                why: format!(
                    "{not_ops} cannot be batched by pkprof's multi-call library (its ops: {ops}); \
                     batch {}{rewrite_note} as one multi-call each",
                    runs.join(" and ")
                ),
                unbatchable,
            },
            saved_per_count: per,
        });
    }
    None
}

/// Maximal runs of consecutive batchable positions; for a loop they may wrap around.
fn batchable_segments(batchable: &[bool], is_loop: bool) -> Vec<Vec<usize>> {
    let n = batchable.len();
    // Start right after an unbatchable call so that a wrapping run is not cut in two.
    let start = match (is_loop, batchable.iter().position(|b| !b)) {
        (true, Some(i)) => (i + 1) % n,
        _ => 0,
    };
    let mut segments = Vec::new();
    let mut cur = Vec::new();
    for k in 0..n {
        let i = (start + k) % n;
        if batchable[i] {
            cur.push(i);
        } else if !cur.is_empty() {
            segments.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        segments.push(cur);
    }
    segments
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(shape: Shape, names: &[&str]) -> (Kind, Option<String>, u64) {
        let path: Vec<Node> = names.iter().map(|n| Node::new(0, *n)).collect();
        let plan = plan(shape, &path);
        (
            plan.suggestion.kind,
            plan.suggestion.replacement,
            plan.saved_per_count,
        )
    }

    #[test]
    fn replacement_table() {
        use Kind::*;
        use Shape::*;
        let s = |r: &str| Some(r.to_string());
        let mc = s("pkprof multi-call (io_uring)");
        assert_eq!(p(SelfLoop, &["pwrite64"]), (SingleCall, s("pwritev"), 1));
        assert_eq!(p(SelfLoop, &["pread64"]), (SingleCall, s("preadv"), 1));
        assert_eq!(p(SelfLoop, &["read"]), (SingleCall, s("readv"), 1));
        assert_eq!(p(SelfLoop, &["sendto"]), (SingleCall, s("sendmmsg"), 1));
        assert_eq!(p(SelfLoop, &["recvmsg"]), (SingleCall, s("recvmmsg"), 1));
        assert_eq!(p(SelfLoop, &["poll"]), (Epoll, s("epoll_wait"), 0));
        assert_eq!(p(Loop, &["select", "read"]), (Epoll, s("epoll_wait"), 0));
        assert_eq!(
            p(Loop, &["write", "read"]),
            (SingleCall, s("copy_file_range / sendfile / splice"), 2)
        );
        // A poll in a chain is not a poll loop.
        assert_eq!(p(Chain, &["poll", "read", "write"]).0, PartialMulticall);
        assert_eq!(p(SelfLoop, &["statx"]), (Multicall, mc.clone(), 1));
        assert_eq!(
            p(Loop, &["open", "fstat", "close"]),
            (Multicall, mc.clone(), 2)
        );
        assert_eq!(p(Chain, &["openat", "fsync", "close"]), (Multicall, mc, 2));
        assert_eq!(
            p(Chain, &["openat", "getdents64", "close"]),
            (None, Option::None, 0)
        );
        assert_eq!(p(SelfLoop, &["futex"]), (None, Option::None, 0));
    }

    #[test]
    fn rewrites_are_named_once() {
        let path: Vec<Node> = ["open", "fstat", "read", "open"]
            .iter()
            .map(|n| Node::new(0, *n))
            .collect();
        let why = plan(Shape::Chain, &path).suggestion.why;
        assert_eq!(why.matches("open as openat").count(), 1, "{why}");
        assert!(why.contains("fstat as statx"), "{why}");
    }

    #[test]
    fn an_fd_opened_in_the_batch_is_flagged() {
        let why = |shape, names: &[&str]| {
            let path: Vec<Node> = names.iter().map(|n| Node::new(0, *n)).collect();
            plan(shape, &path).suggestion.why
        };
        let note = "open into a direct descriptor";
        assert!(why(Shape::Chain, &["openat", "read", "close"]).contains(note));
        // In a loop the open's fd reaches the calls after it in the next round too.
        assert!(why(Shape::Loop, &["read", "openat"]).contains(note));
        // An open at the end of a chain feeds nothing in the batch.
        assert!(!why(Shape::Chain, &["close", "openat"]).contains(note));
        assert!(!why(Shape::Chain, &["read", "close"]).contains(note));
    }

    #[test]
    fn fdatasync_is_batched_as_fsync() {
        use Kind::*;
        use Shape::*;
        let mc = Some("pkprof multi-call (io_uring)".to_string());
        assert_eq!(
            p(Chain, &["openat", "write", "fdatasync", "close"]),
            (Multicall, mc.clone(), 3)
        );
        assert_eq!(p(Loop, &["write", "fdatasync"]), (Multicall, mc, 1));
        let path: Vec<Node> = ["write", "fdatasync"]
            .iter()
            .map(|n| Node::new(0, *n))
            .collect();
        let s = plan(Shape::Loop, &path).suggestion;
        assert!(s.unbatchable.is_empty(), "{s:?}");
        assert!(
            s.why.contains("fdatasync as fsync with MC_FSYNC_DATASYNC"),
            "{}",
            s.why
        );
    }

    /// Every call `multicall_op` batches becomes an op the list names, and every name in the
    /// list is batched as it is or as the op it names.
    #[test]
    fn multicall_ops_list_matches_the_mapping() {
        for name in [
            "read",
            "write",
            "pread64",
            "pwrite64",
            "open",
            "creat",
            "openat",
            "close",
            "fsync",
            "fdatasync",
            "statx",
            "fstat",
            "newfstatat",
            "sendto",
            "sendmsg",
            "recvfrom",
            "recvmsg",
        ] {
            let (op, _) = multicall_op(name).unwrap_or_else(|| panic!("{name} not batched"));
            assert!(MULTICALL_OPS.contains(&op), "{name} -> {op} not listed");
        }
        for op in MULTICALL_OPS {
            assert!(multicall_op(op).is_some(), "{op} listed but not batched");
        }
    }

    #[test]
    fn segments_wrap_around_in_loops() {
        let b = [true, false, true, true];
        assert_eq!(batchable_segments(&b, false), vec![vec![0], vec![2, 3]]);
        assert_eq!(batchable_segments(&b, true), vec![vec![2, 3, 0]]);
    }
}
