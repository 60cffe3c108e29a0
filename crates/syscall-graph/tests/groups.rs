//! The same cluster in several threads of one program is listed once (a group): summed count and
//! crossings saved, ranked on the sums, in the text, DOT and JSON reports; `Analysis::clusters`
//! keeps one entry per thread.

mod common;

use common::{profile, sc, stack, thread, times, without_trigrams};
use pkprof_syscall_graph::render::{dot, json, text};
use pkprof_syscall_graph::{Analysis, Kind, Options, Shape, Thread, TraceBuilder};

fn render(
    a: &Analysis,
    f: fn(&Analysis, &mut dyn std::io::Write) -> Result<(), pkprof_syscall_graph::Error>,
) -> String {
    let mut out = Vec::new();
    f(a, &mut out).expect("render");
    String::from_utf8(out).expect("UTF-8")
}

/// A worker that sends `n` messages one sendmsg each, from one call site: n - 1 repeats.
fn sender(pid: u32, tid: u32, comm: &str, n: usize) -> Thread {
    let site = stack(&["__libc_sendmsg", "flush_replies", "worker_loop"]);
    let mut t = TraceBuilder::new(pid, tid, comm);
    t.repeat(&sc("sendmsg"), n, 1000, Some(&site));
    t.finish()
}

/// Workers tids 100..=105 of pid 100 (srv) send 21..=26 messages: 20..=25 repeats, 135 in all,
/// each saved by sendmmsg. Thread 200 (cp) copies in 60 read/write rounds: a 2-call loop of 59
/// iterations (T(read, write, read)) saving 2 * 59 = 118, more than any single worker (25).
fn pool() -> Vec<Thread> {
    let mut threads: Vec<Thread> = (0..6)
        .map(|i| sender(100, 100 + i, "srv", 21 + i as usize))
        .collect();
    threads.push(thread(
        200,
        200,
        "cp",
        &times(&[sc("read"), sc("write")], 60),
        1000,
    ));
    threads
}

fn options(top: usize) -> Options {
    Options {
        top,
        ..Options::default()
    }
}

#[test]
fn worker_pool_is_one_entry() {
    let a = Analysis::new(&profile("pool", pool()), &options(2));
    // The full per-thread list is kept: the copy loop first, then the six workers.
    assert_eq!(a.clusters.len(), 7, "{:#?}", a.clusters);
    assert_eq!(a.clusters[0].comm, "cp");
    assert_eq!(a.clusters[0].crossings_saved, 118);
    let tids: Vec<u32> = a.clusters[1..].iter().map(|c| c.tid).collect();
    assert_eq!(tids, [105, 104, 103, 102, 101, 100]);

    let top = a.top_groups();
    assert_eq!(top.len(), 2);
    let g = &top[0];
    assert_eq!(g.rank, 1);
    assert_eq!(
        (g.first().shape, g.first().comm.as_str()),
        (Shape::SelfLoop, "srv")
    );
    assert_eq!(
        g.first().suggestion.replacement.as_deref(),
        Some("sendmmsg")
    );
    assert_eq!((g.threads(), g.count, g.crossings_saved), (6, 135, 135));
    assert_eq!(g.thread_calls, (21..=26).sum::<u64>());
    assert!(g.count_exact);
    assert_eq!(g.pids(), [100]);
    assert_eq!(g.first().tid, 105, "the best member comes first");
    assert_eq!(g.sites.len(), 1);
    assert_eq!(g.sites[0].count, 135, "call sites merged over the members");
    let cp = &top[1];
    assert_eq!((cp.rank, cp.threads(), cp.crossings_saved), (2, 1, 118));
    assert_eq!(cp.members[0], &a.clusters[0]);

    let t = render(&a, text::write);
    assert!(
        t.contains(
            "Top clusters by kernel crossings saved (2 of 2; 7 per-thread clusters grouped by \
             program and path)"
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "\n#1 self-loop sendmsg -> sendmsg  [in 6 threads of pid 100 (srv): tids 100, 101, \
             102, 103, 104, 105]\n    135 repeats, 135 crossings saved (95.7% of the 6 threads' \
             141 calls)\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("     135  sendmsg  __libc_sendmsg < flush_replies < worker_loop\n"),
        "{t}"
    );
    // A single thread's entry reads as it always did.
    assert!(
        t.contains(
            "\n#2 loop read -> write -> read  [pid 200 tid 200 (cp)]\n    59 iterations, 118 \
             crossings saved (98.3% of the thread's 120 calls)\n"
        ),
        "{t}"
    );
    assert_eq!(t.matches("self-loop sendmsg").count(), 1, "{t}");

    // DOT: the sendmsg edge is marked with the group's rank.
    let d = render(&a, dot::write);
    assert!(d.contains("tooltip=\"cluster #1\""), "{d}");
    assert!(d.contains("tooltip=\"cluster #2\""), "{d}");
}

#[test]
fn json_lists_members() {
    let a = Analysis::new(&profile("pool", pool()), &options(2));
    let out = render(&a, json::write);
    let r: json::Report = serde_json::from_str(&out).expect("parses back");
    assert_eq!((r.clusters_found, r.groups_found), (7, 2));
    assert_eq!(r.clusters.len(), 2);
    let c = &r.clusters[0];
    assert_eq!(
        (c.rank, c.pid, c.tid, c.comm.as_str()),
        (1, 100, 105, "srv")
    );
    assert_eq!((c.count, c.crossings_saved, c.threads), (135, 135, 6));
    assert!(c.count_exact);
    assert_eq!(c.members.len(), 6);
    let members: Vec<(usize, u32, u64)> =
        c.members.iter().map(|m| (m.rank, m.tid, m.count)).collect();
    assert_eq!(
        members,
        [
            (2, 105, 25),
            (3, 104, 24),
            (4, 103, 23),
            (5, 102, 22),
            (6, 101, 21),
            (7, 100, 20)
        ]
    );
    assert_eq!(
        c.members.iter().map(|m| m.crossings_saved).sum::<u64>(),
        c.crossings_saved
    );
    let cp = &r.clusters[1];
    assert_eq!((cp.rank, cp.threads, cp.members.len()), (2, 1, 1));
    assert_eq!(cp.members[0].rank, 1);

    // A report written before groups existed still reads back.
    let mut v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_object_mut().unwrap().remove("groups_found");
    for c in v["clusters"].as_array_mut().unwrap() {
        let c = c.as_object_mut().unwrap();
        c.remove("members");
        c.remove("threads");
    }
    let old: json::Report = serde_json::from_value(v).expect("old report");
    assert_eq!((old.groups_found, old.clusters[0].threads), (0, 0));
    assert!(old.clusters[0].members.is_empty());
}

/// The same run in processes of one program groups across pids; in programs with different
/// comms it does not.
#[test]
fn groups_by_comm_across_processes() {
    let mut threads: Vec<Thread> = (0..8)
        .map(|i| sender(10 + i, 10 + i, "nginx", 11))
        .collect();
    threads.push(sender(50, 50, "haproxy", 11));
    threads.push(sender(60, 61, "envoy", 11));
    let a = Analysis::new(&profile("system-wide", threads), &Options::default());
    assert_eq!(a.clusters.len(), 10);
    let groups = a.cluster_groups();
    let spans: Vec<(&str, usize, u64)> = groups
        .iter()
        .map(|g| (g.first().comm.as_str(), g.threads(), g.count))
        .collect();
    assert_eq!(
        spans,
        [("nginx", 8, 80), ("haproxy", 1, 10), ("envoy", 1, 10)]
    );
    let t = render(&a, text::write);
    assert!(
        t.contains(
            "[in 8 threads in 8 processes of nginx: pids 10, 11, 12, 13, 14, 15, ...]\n    80 \
             repeats"
        ),
        "{t}"
    );
    assert!(t.contains("[pid 50 tid 50 (haproxy)]"), "{t}");
    assert!(t.contains("[pid 60 tid 61 (envoy)]"), "{t}");
}

/// A group's count is exact only when every member's is: the copy loop is exact with trigram
/// counts and an upper bound without them.
#[test]
fn group_exact_only_if_every_member_is() {
    let copy = || times(&[sc("read"), sc("write")], 30);
    let exact = |pid| thread(pid, pid, "cp", &copy(), 1000);
    let a = Analysis::new(&profile("t", vec![exact(1), exact(2)]), &Options::default());
    let groups = a.cluster_groups();
    assert_eq!(groups.len(), 1, "{:#?}", a.clusters);
    assert!(groups[0].count_exact);

    let a = Analysis::new(
        &profile("t", vec![exact(1), without_trigrams(exact(2))]),
        &Options::default(),
    );
    assert!(a.clusters[0].count_exact != a.clusters[1].count_exact);
    let groups = a.cluster_groups();
    assert_eq!(groups.len(), 1, "{:#?}", a.clusters);
    let g = &groups[0];
    assert_eq!(g.threads(), 2);
    assert_eq!(g.first().suggestion.kind, Kind::SingleCall);
    assert!(!g.count_exact);
    assert_eq!(g.count, a.clusters.iter().map(|c| c.count).sum::<u64>());
    let t = render(&a, text::write);
    assert!(
        t.contains(&format!("\n    at most {} iterations,", g.count)),
        "{t}"
    );
}

/// A top that cuts before the epoll group still lists the best epoll group, with its rank.
#[test]
fn best_epoll_group_is_listed() {
    let calls = times(&[sc("poll"), sc("recvfrom"), sc("sendto")], 50);
    let threads: Vec<Thread> = (0..3)
        .map(|i| thread(7, 7 + i, "echo", &calls, 1))
        .collect();
    let a = Analysis::new(&profile("t", threads), &options(1));
    let listed: Vec<(usize, Kind, usize)> = a
        .top_groups()
        .iter()
        .map(|g| (g.rank, g.first().suggestion.kind, g.threads()))
        .collect();
    assert_eq!(
        listed,
        [(1, Kind::PartialMulticall, 3), (2, Kind::Epoll, 3)],
        "{:#?}",
        a.clusters
    );
    let t = render(&a, text::write);
    assert!(
        t.contains("(1 of 2, and the best epoll loop, #2; 6 per-thread clusters grouped"),
        "{t}"
    );
    assert!(Analysis::new(&profile("t", vec![]), &options(0))
        .top_groups()
        .is_empty());
}
