//! Second-order transitions (trigrams): cluster counts over paths of 3+ calls, which are exact,
//! which are upper bounds, that no path is spliced from pieces that ran apart, the fallback for
//! profiles without trigram data, and the epoll loop kept in the listed clusters.

mod common;

use common::{profile, sc, thread, times, without_trigrams};
use pkprof_syscall_graph::render::{json, text};
use pkprof_syscall_graph::{
    Analysis, Cluster, Graph, Kind, Options, Shape, SyscallProfile, Thread,
};

fn analyse(threads: Vec<Thread>) -> Analysis {
    Analysis::new(&profile("test", threads), &Options::default())
}

fn names(c: &Cluster) -> Vec<&str> {
    c.path.iter().map(|n| n.name.as_str()).collect()
}

/// The path's consecutive calls, a loop's wrapping around (read -> write: read write read).
fn walk(c: &Cluster) -> Vec<&str> {
    let mut w = names(c);
    if c.shape != Shape::Chain {
        w.extend(names(c).into_iter().take(2));
    }
    w
}

/// The case seen in `pkprof syscalls` on a real workload, in one thread: (openat newfstatat read
/// close) x100, then a copy loop (read write) x50, then (poll read write) x99. read -> write ran
/// 149 times, all away from newfstatat -> read, so openat -> newfstatat -> read -> write never
/// ran although every edge on it ran at least 100 times; the min-edge estimate made it a top
/// cluster.
///
/// With trigrams it is no cluster. The file loop is found as the chain openat -> newfstatat ->
/// read -> close, which ran 100 times (its closed walk, openat ... close -> openat, ran 99 times:
/// the 100th close is followed by the copy's read); a 4-call chain's count is an upper bound,
/// here a tight one. One multi-call per file saves 3 crossings each: 300.
#[test]
fn no_splice_at_read() {
    let mut calls = times(
        &[sc("openat"), sc("newfstatat"), sc("read"), sc("close")],
        100,
    );
    calls.extend(times(&[sc("read"), sc("write")], 50));
    calls.extend(times(&[sc("poll"), sc("read"), sc("write")], 99));
    let t = thread(1, 1, "app", &calls, 1000);

    // Every edge of the spliced path ran 100 times or more: only the trigrams rule it out.
    let g = Graph::from_transitions(&t.transitions);
    let id = |name: &str| g.index_of(&sc(name)).unwrap();
    let (open, stat, read, write) = (id("openat"), id("newfstatat"), id("read"), id("write"));
    assert_eq!(
        (
            g.weight(open, stat),
            g.weight(stat, read),
            g.weight(read, write)
        ),
        (100, 100, 149)
    );
    assert_eq!(g.trigram(stat, read, write), 0);
    assert_eq!(g.trigram(open, stat, read), 100);

    let a = analyse(vec![t]);
    for c in &a.clusters {
        assert!(
            !walk(c)
                .windows(3)
                .any(|w| w == ["newfstatat", "read", "write"]),
            "spliced: {c:#?}"
        );
    }
    let c = &a.clusters[0];
    assert_eq!(
        (c.shape, names(c)),
        (Shape::Chain, vec!["openat", "newfstatat", "read", "close"])
    );
    assert_eq!(
        (c.count, c.crossings_saved, c.count_exact),
        (100, 300, false)
    );
    assert_eq!(c.suggestion.kind, Kind::Multicall);

    // The copy loop: read -> write -> read ran 49 times (reads 2..50 of the copy); the read
    // after the last open's close and the poll loop's reads are not in it. Exact.
    let copy = a
        .clusters
        .iter()
        .find(|c| c.shape == Shape::Loop && names(c) == ["read", "write"])
        .expect("the copy loop");
    assert_eq!(
        (copy.count, copy.crossings_saved, copy.count_exact),
        (49, 98, true)
    );
    // The poll loop, listed even though it saves no crossings. Its three wrapped triples all
    // ran 99 times (the first poll follows the copy's last read write), so it starts after its
    // lightest edge, write -> poll or poll -> read (99 each), at the busier node: read. Its
    // closed walk read write poll read ran 99 times (98 in the poll loop, once where the copy
    // ends); a 3-call loop's count is an upper bound, here a tight one.
    let poll = a
        .clusters
        .iter()
        .find(|c| c.suggestion.kind == Kind::Epoll)
        .expect("the poll loop");
    assert_eq!(names(poll), ["read", "write", "poll"]);
    assert_eq!((poll.count, poll.count_exact), (99, false));
}

/// (read write fsync) x10 then (write read close) x10: read -> write and write -> read each ran
/// 10 times, but read write read and write read write never did. Edge weights alone make a
/// copy loop of 10 iterations (copy_file_range, 20 crossings) that never ran; with trigrams
/// there is none, and both 3-call chains ran exactly 10 times.
#[test]
fn two_call_loop_needs_its_trigram() {
    let mut calls = times(&[sc("read"), sc("write"), sc("fsync")], 10);
    calls.extend(times(&[sc("write"), sc("read"), sc("close")], 10));
    let copy_loop = |a: &Analysis| {
        a.clusters
            .iter()
            .find(|c| c.shape == Shape::Loop && c.path.len() == 2)
            .map(|c| (c.count, c.count_exact))
    };

    let a = analyse(vec![thread(1, 1, "t", &calls, 1)]);
    assert_eq!(copy_loop(&a), None, "{:#?}", a.clusters);
    let chains: Vec<(Vec<&str>, u64, bool)> = a
        .clusters
        .iter()
        .filter(|c| c.shape == Shape::Chain && c.path.len() == 3)
        .map(|c| (names(c), c.count, c.count_exact))
        .collect();
    assert_eq!(
        chains,
        [
            (vec!["read", "write", "fsync"], 10, true),
            (vec!["write", "read", "close"], 10, true)
        ]
    );

    // Without trigram data the loop is there, and its count is marked as a bound.
    let a = analyse(vec![without_trigrams(thread(1, 1, "t", &calls, 1))]);
    assert_eq!(copy_loop(&a), Some((10, false)));
}

/// Two copies, (read write) x10 read close and (read write) x5 read close: read write read ran
/// 10 + 5 = 15 times, exactly the iterations of the copy loop (15 * 2 = 30 crossings saved by
/// one copy_file_range per copy: 21 + 11 calls become 2). write read write ran 9 + 4 times and
/// is left out: the loop starts at read.
#[test]
fn two_call_loop_count_is_exact() {
    let mut calls = times(&[sc("read"), sc("write")], 10);
    calls.extend([sc("read"), sc("close")]);
    calls.extend(times(&[sc("read"), sc("write")], 5));
    calls.extend([sc("read"), sc("close")]);
    let a = analyse(vec![thread(1, 1, "cp", &calls, 1)]);
    let c = &a.clusters[0];
    assert_eq!((c.shape, names(c)), (Shape::Loop, vec!["read", "write"]));
    assert_eq!((c.count, c.crossings_saved, c.count_exact), (15, 30, true));
}

/// Graph figures are sums over the call before: a thread's edges, node calls and tables are the
/// same with and without trigram data. Merged graphs keep no trigrams.
#[test]
fn trigrams_do_not_change_edges() {
    let calls = times(&[sc("openat"), sc("read"), sc("read"), sc("close")], 7);
    let t = thread(1, 1, "t", &calls, 3);
    let plain = without_trigrams(t.clone());
    // (none, none, openat), (none, openat, read), then (openat read read), (read read close),
    // (read close openat), (close openat read): openat -> read is split by the call before.
    assert_eq!(t.transitions.len(), 6);
    let (g, h) = (
        Graph::from_transitions(&t.transitions),
        Graph::from_transitions(&plain.transitions),
    );
    assert!(g.has_trigrams() && !h.has_trigrams());
    assert_eq!(g.nodes, h.nodes);
    assert_eq!(g.edges, h.edges);
    let id = |name: &str| g.index_of(&sc(name)).unwrap();
    let (open, read, close) = (id("openat"), id("read"), id("close"));
    assert_eq!(g.trigram(open, read, read), 7);
    assert_eq!(g.trigram(read, read, close), 7);
    assert_eq!(g.trigram(close, open, read), 6);
    assert_eq!(h.trigram(open, read, read), 0);
    let m = Graph::merge([&g, &g]);
    assert!(!m.has_trigrams() && m.trigrams().next().is_none());
    assert_eq!(m.edges.len(), g.edges.len());

    // The same figures through Analysis: node counts and tables do not move.
    let (a, b) = (analyse(vec![t]), analyse(vec![plain]));
    assert_eq!(a.threads[0].graph.nodes, b.threads[0].graph.nodes);
    assert_eq!(a.syscalls.nodes, b.syscalls.nodes);
}

/// A profile written before `before` existed (no such key) reads with every `before` None, and
/// is analysed from edge weights as before.
#[test]
fn old_profiles_fall_back_to_edge_weights() {
    let calls = times(&[sc("openat"), sc("fstat"), sc("read"), sc("close")], 50);
    let new = profile("t", vec![thread(1, 1, "t", &calls, 1)]);
    let mut v = serde_json::to_value(&new).unwrap();
    for t in v["threads"][0]["transitions"].as_array_mut().unwrap() {
        assert!(t.as_object_mut().unwrap().remove("before").is_some());
    }
    let old: SyscallProfile = serde_json::from_value(v).expect("an old profile reads");
    assert!(old.threads[0]
        .transitions
        .iter()
        .all(|t| t.before.is_none()));
    let (a, b) = (
        Analysis::new(&old, &Options::default()),
        Analysis::new(&new, &Options::default()),
    );
    assert!(!a.threads[0].graph.has_trigrams());
    // Both find the chain, 50 times (the min-edge bound happens to be right here); only the
    // trigram count knows that a 4-call chain's count is not exact either way.
    let got = |a: &Analysis| {
        let c = &a.clusters[0];
        (
            names(c).join(" "),
            c.count,
            c.crossings_saved,
            c.count_exact,
        )
    };
    let expected = ("openat fstat read close".to_string(), 50, 150, false);
    assert_eq!(got(&a), expected);
    assert_eq!(got(&b), expected);
}

/// The echo server (poll recvfrom sendto) x100 with top = 1: the chain saving 100 crossings is
/// rank 1 and the epoll loop rank 2; both are listed, in the text and the JSON. With a larger top
/// the epoll loop is listed once.
#[test]
fn best_epoll_loop_is_always_listed() {
    let calls = times(&[sc("poll"), sc("recvfrom"), sc("sendto")], 100);
    let options = |top| Options {
        top,
        ..Options::default()
    };
    let p = profile("t", vec![thread(7, 7, "echo", &calls, 1)]);
    let a = Analysis::new(&p, &options(1));
    let listed: Vec<(usize, Kind)> = a
        .top_clusters()
        .iter()
        .map(|c| (c.rank, c.suggestion.kind))
        .collect();
    assert_eq!(
        listed,
        [(1, Kind::PartialMulticall), (2, Kind::Epoll)],
        "{:#?}",
        a.clusters
    );
    let mut out = Vec::new();
    text::write(&a, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("(1 of 2, and the best epoll loop, #2)"),
        "{out}"
    );
    assert!(
        out.contains("#2 loop poll -> recvfrom -> sendto -> poll"),
        "{out}"
    );
    let report = json::report(&a);
    assert_eq!(report.clusters.len(), 2);
    assert_eq!(report.clusters[1].suggestion.kind, Kind::Epoll);

    let a = Analysis::new(&p, &options(10));
    assert_eq!(a.top_clusters().len(), 2);
    assert!(Analysis::new(&p, &options(0)).top_clusters().is_empty());
}
