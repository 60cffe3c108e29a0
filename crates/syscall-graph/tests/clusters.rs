//! Cluster finding, counting, ranking and suggestions on hand-built traces whose expected figures
//! are worked out in the comments.

mod common;

use common::{arg, profile, sc, stack, thread, times, without_trigrams};
use pkprof_syscall_graph::{Analysis, Cluster, Kind, Node, Options, Shape, TraceBuilder};

fn analyse(threads: Vec<pkprof_syscall_graph::Thread>) -> Analysis {
    Analysis::new(&profile("test", threads), &Options::default())
}

fn names(c: &Cluster) -> Vec<&str> {
    c.path.iter().map(|n| n.name.as_str()).collect()
}

/// The one cluster of a thread that does `calls`.
fn only_cluster(calls: &[Node]) -> Cluster {
    let a = analyse(vec![thread(1, 1, "t", calls, 1000)]);
    assert_eq!(a.clusters.len(), 1, "clusters: {:#?}", a.clusters);
    a.clusters[0].clone()
}

/// cp: openat openat (read write) x100 read close close.
/// read->write 100, write->read 100 (the last write is followed by the EOF read): 100
/// iterations of a 2-call loop, and copy_file_range saves 100*2 = 200 of the 205 calls. The
/// chains read->write and write->read lie inside the loop and are used up by it.
#[test]
fn copy_loop_is_one_call() {
    let mut calls = vec![sc("openat"), sc("openat")];
    calls.extend(times(&[sc("read"), sc("write")], 100));
    calls.extend([sc("read"), sc("close"), sc("close")]);
    let c = only_cluster(&calls);
    assert_eq!(c.shape, Shape::Loop);
    assert_eq!(names(&c), ["read", "write"]);
    assert_eq!(
        (c.count, c.crossings_saved, c.thread_calls),
        (100, 200, 205)
    );
    assert_eq!(c.suggestion.kind, Kind::SingleCall);
    assert_eq!(
        c.suggestion.replacement.as_deref(),
        Some("copy_file_range / sendfile / splice")
    );
    assert_eq!(c.path_label(), "read -> write -> read");
}

/// A file read and sent to a socket: sendfile; received and written: splice.
#[test]
fn copy_loop_variants() {
    let c = only_cluster(&times(&[sc("read"), sc("sendto")], 20));
    assert_eq!(c.suggestion.replacement.as_deref(), Some("sendfile"));
    let c = only_cluster(&times(&[sc("recvfrom"), sc("write")], 20));
    assert_eq!(c.suggestion.replacement.as_deref(), Some("splice"));
}

/// (epoll_wait write write write write) x50: write->write 150 times, so writev saves 150 (one
/// writev per run of 4). The loop epoll_wait -> write -> epoll_wait (49 iterations) has no
/// replacement: epoll_wait is not a multi-call op and one write alone batches nothing.
#[test]
fn write_run_is_writev() {
    let mut body = vec![sc("epoll_wait")];
    body.extend(times(&[sc("write")], 4));
    let a = analyse(vec![thread(1, 1, "log", &times(&body, 50), 1000)]);
    let c = &a.clusters[0];
    assert_eq!((c.shape, names(c)), (Shape::SelfLoop, vec!["write"]));
    assert_eq!((c.count, c.crossings_saved), (150, 150));
    assert_eq!(c.suggestion.replacement.as_deref(), Some("writev"));
    assert_eq!(a.clusters.len(), 2, "{:#?}", a.clusters);
    let rest = &a.clusters[1];
    assert_eq!(
        (rest.shape, rest.count, rest.crossings_saved),
        (Shape::Loop, 49, 0)
    );
    assert_eq!(rest.suggestion.kind, Kind::None);
    assert_eq!(rest.suggestion.unbatchable, ["epoll_wait"]);
    assert_eq!(rest.suggestion.replacement, None);
}

/// Runs of 3, 5 and 1 writes: 9 calls in 3 runs, 6 write->write edges; writev per run saves
/// exactly calls - runs = 6.
#[test]
fn self_loop_saving_is_exact() {
    let mut calls = times(&[sc("write")], 3);
    calls.push(sc("fsync"));
    calls.extend(times(&[sc("write")], 5));
    calls.push(sc("fsync"));
    calls.push(sc("write"));
    let a = analyse(vec![thread(1, 1, "t", &calls, 1)]);
    let c = &a.clusters[0];
    assert_eq!(
        (names(c), c.count, c.crossings_saved),
        (vec!["write"], 6, 6)
    );
}

/// close(3..=100): 98 closes, 97 close->close; close_range saves 97.
#[test]
fn close_loop_is_close_range() {
    let c = only_cluster(&times(&[sc("close")], 98));
    assert_eq!(
        (c.shape, c.count, c.crossings_saved),
        (Shape::SelfLoop, 97, 97)
    );
    assert_eq!(c.suggestion.replacement.as_deref(), Some("close_range"));
}

/// A UDP sender and a receiver: sendmmsg and recvmmsg, each saving n-1 of n calls.
#[test]
fn message_loops_are_mmsg() {
    let a = analyse(vec![
        thread(1, 1, "tx", &times(&[sc("sendmsg")], 1000), 1),
        thread(2, 2, "rx", &times(&[sc("recvfrom")], 500), 1),
    ]);
    let got: Vec<(u32, Option<&str>, u64)> = a
        .clusters
        .iter()
        .map(|c| {
            (
                c.tid,
                c.suggestion.replacement.as_deref(),
                c.crossings_saved,
            )
        })
        .collect();
    assert_eq!(
        got,
        [(1, Some("sendmmsg"), 999), (2, Some("recvmmsg"), 499)]
    );
    assert_eq!(a.clusters[1].rank, 2);
}

/// An echo server: (poll recvfrom sendto) x100. recvfrom->sendto batches as one multi-call
/// (recvmsg + sendmsg) and saves 100; the poll loop (99 iterations: the last sendto has no
/// successor) is reported too, with epoll and 0 crossings saved, after it.
#[test]
fn poll_loop_is_epoll() {
    let a = analyse(vec![thread(
        7,
        7,
        "echo",
        &times(&[sc("poll"), sc("recvfrom"), sc("sendto")], 100),
        1000,
    )]);
    let epoll: Vec<&Cluster> = a
        .clusters
        .iter()
        .filter(|c| c.suggestion.kind == Kind::Epoll)
        .collect();
    assert_eq!(epoll.len(), 1, "{:#?}", a.clusters);
    let e = epoll[0];
    assert_eq!((e.shape, e.count, e.crossings_saved), (Shape::Loop, 99, 0));
    assert_eq!(names(e), ["poll", "recvfrom", "sendto"]);
    assert_eq!(e.suggestion.replacement.as_deref(), Some("epoll_wait"));
    let first = &a.clusters[0];
    assert_eq!(first.crossings_saved, 100);
    assert!(names(first).ends_with(&["recvfrom", "sendto"]));
    assert!(e.rank > first.rank);
}

/// (openat fstat read close) x50: the chain ran 50 times (each edge 50), the loop only 49
/// (close->openat), so the chain wins: one multi-call per file with fstat as statx saves
/// 50*3 = 150, and the loop is used up.
#[test]
fn open_stat_read_close_is_one_multicall() {
    let body = [sc("openat"), sc("fstat"), sc("read"), sc("close")];
    let c = only_cluster(&times(&body, 50));
    assert_eq!(c.shape, Shape::Chain);
    assert_eq!(names(&c), ["openat", "fstat", "read", "close"]);
    assert_eq!((c.count, c.crossings_saved), (50, 150));
    assert_eq!(c.suggestion.kind, Kind::Multicall);
    assert!(c.suggestion.unbatchable.is_empty());
    assert!(
        c.suggestion.why.contains("fstat as statx"),
        "{}",
        c.suggestion.why
    );
}

/// (openat fstat mmap close) x40: mmap is no multi-call op. Around it, close -> openat -> fstat
/// (the previous file's close with the next file's open) batches as one multi-call per
/// iteration: 39 iterations * 2 = 78, more than the chain's 40 * 1 (openat -> fstat).
#[test]
fn cluster_with_unbatchable_call() {
    let body = [sc("openat"), sc("fstat"), sc("mmap"), sc("close")];
    let c = only_cluster(&times(&body, 40));
    assert_eq!((c.shape, c.count, c.crossings_saved), (Shape::Loop, 39, 78));
    assert_eq!(c.suggestion.kind, Kind::PartialMulticall);
    assert_eq!(c.suggestion.unbatchable, ["mmap"]);
    assert!(
        c.suggestion.why.contains("batch close -> openat -> fstat"),
        "{}",
        c.suggestion.why
    );
}

/// futex x20: nothing replaces it and the library cannot batch it.
#[test]
fn nothing_replaces_futex() {
    let c = only_cluster(&times(&[sc("futex")], 20));
    assert_eq!(
        (c.suggestion.kind, c.crossings_saved, c.count),
        (Kind::None, 0, 19)
    );
    assert_eq!(c.suggestion.unbatchable, ["futex"]);
}

/// (openat read close) x5 then (statx read fsync) x5: read is shared, and edge weights alone
/// would also allow statx -> read -> close (each edge ran 5 times) although it never ran: a
/// path's count from edge weights is only an upper bound.
///
/// With trigram counts, statx -> read -> close ran 0 times and is no candidate, while each real
/// 3-call chain ran exactly 5 times: one multi-call per occurrence saves 5*2 = 10, more than the
/// loops' 4 iterations * 2 (close->openat and fsync->statx ran 4 times), which are used up.
///
/// Without trigram data (an older collector), chains are grown on each step's share of the
/// traffic, so the two real loops are found (4 iterations each) and nothing spliced at read. A
/// loop starts after its lightest edge.
#[test]
fn chains_do_not_splice_at_shared_nodes() {
    let mut calls = times(&[sc("openat"), sc("read"), sc("close")], 5);
    calls.extend(times(&[sc("statx"), sc("read"), sc("fsync")], 5));
    let got = |t| -> Vec<(Shape, String, u64, u64, bool)> {
        let a = analyse(vec![t]);
        let row = |c: &Cluster| {
            let path = names(c).join(" ");
            (c.shape, path, c.count, c.crossings_saved, c.count_exact)
        };
        a.clusters.iter().map(row).collect()
    };
    let chain = |p: &str| (Shape::Chain, p.to_string(), 5, 10, true);
    assert_eq!(
        got(thread(1, 1, "t", &calls, 1)),
        [chain("openat read close"), chain("statx read fsync")]
    );
    let looped = |p: &str| (Shape::Loop, p.to_string(), 4, 8, false);
    assert_eq!(
        got(without_trigrams(thread(1, 1, "t", &calls, 1))),
        [looped("openat read close"), looped("statx read fsync")]
    );
}

/// Below min_count nothing is a cluster; raising it drops the rarer ones.
#[test]
fn min_count_filters() {
    let mut calls = times(&[sc("write")], 3);
    calls.extend(times(&[sc("close")], 10));
    let t = thread(1, 1, "t", &calls, 1);
    let options = Options {
        min_count: 5,
        ..Options::default()
    };
    let a = Analysis::new(&profile("t", vec![t]), &options);
    let got: Vec<(Vec<&str>, u64)> = a.clusters.iter().map(|c| (names(c), c.count)).collect();
    assert_eq!(got, [(vec!["close"], 9)]);
}

/// Clusters of all threads are ranked together; `top` limits what the reports list.
#[test]
fn ranking_across_threads_and_top() {
    let threads = vec![
        thread(10, 10, "a", &times(&[sc("close")], 11), 1),
        thread(10, 11, "a-worker", &times(&[sc("write")], 51), 1),
        thread(20, 20, "b", &times(&[sc("sendmsg")], 31), 1),
    ];
    let options = Options {
        top: 2,
        ..Options::default()
    };
    let a = Analysis::new(&profile("t", threads), &options);
    let got: Vec<(usize, u32, u32, u64)> = a
        .clusters
        .iter()
        .map(|c| (c.rank, c.pid, c.tid, c.crossings_saved))
        .collect();
    assert_eq!(got, [(1, 10, 11, 50), (2, 20, 20, 30), (3, 10, 10, 10)]);
    assert_eq!(a.top_clusters().len(), 2);
    assert_eq!(a.processes[0].pid, 10);
    assert_eq!(a.processes[0].tids, [10, 11]);
    assert_eq!(a.processes[0].comm, "a");
}

/// With --args: a copy between fds 3 and 4 is still one call; reading and writing the same fd
/// (an echo) is not a copy, so each iteration is one multi-call; writes to one fd are writev,
/// writes alternating between two fds are batched whole as a multi-call.
#[test]
fn args_split() {
    let copy = times(&[arg("read", 3, 13), arg("write", 4, 13)], 30);
    let echo = times(&[arg("read", 5, 7), arg("write", 5, 7)], 30);
    let same = times(&[arg("write", 1, 5)], 30);
    let two = times(&[arg("write", 1, 5), arg("write", 2, 5)], 30);
    let a = analyse(vec![
        thread(1, 1, "copy", &copy, 1),
        thread(2, 2, "echo", &echo, 1),
        thread(3, 3, "same", &same, 1),
        thread(4, 4, "two", &two, 1),
    ]);
    let by_tid = |tid| a.clusters.iter().find(|c| c.tid == tid).expect("a cluster");
    let c = by_tid(1);
    assert_eq!(
        c.path_label(),
        "read(fd=3, 4K..8K) -> write(fd=4, 4K..8K) -> read(fd=3, 4K..8K)"
    );
    assert_eq!(
        (c.suggestion.kind, c.crossings_saved),
        (Kind::SingleCall, 58)
    );
    // 30 read->write, 29 write->read: the chain beats the loop.
    let c = by_tid(2);
    assert_eq!(c.shape, Shape::Chain);
    assert_eq!(
        (c.suggestion.kind, c.count, c.crossings_saved),
        (Kind::Multicall, 30, 30)
    );
    let c = by_tid(3);
    assert_eq!(c.suggestion.replacement.as_deref(), Some("writev"));
    assert_eq!(c.crossings_saved, 29);
    let c = by_tid(4);
    assert_eq!((c.shape, c.suggestion.kind), (Shape::Loop, Kind::Multicall));
    assert_eq!((c.count, c.crossings_saved), (29, 58));
}

/// Call sites of a cluster's transitions are merged by stack and listed most frequent first,
/// cut to `options.sites`.
#[test]
fn sites_are_merged_and_ranked() {
    let (hot, cold) = (
        stack(&["__libc_write", "flush", "main"]),
        stack(&["__libc_write", "log_line", "main"]),
    );
    let mut t = TraceBuilder::new(1, 1, "t");
    for i in 0..10 {
        let s = if i % 5 == 0 { &cold } else { &hot };
        t.call(&sc("write"), false, 1, Some(s));
    }
    let a = analyse(vec![t.finish()]);
    let c = &a.clusters[0];
    // 9 write->write transitions: the first write (from no call) is not on the self-loop.
    let got: Vec<(&str, u64, &str)> = c
        .sites
        .iter()
        .map(|s| {
            (
                s.syscall.as_str(),
                s.count,
                s.frames[1].symbol.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("write", 8, "flush"), ("write", 1, "log_line")]);
}
