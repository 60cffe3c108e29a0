//! Input that does not add up, as the kernel's transition table gives it when it is read while
//! other threads are still filling it (`pkprof syscalls -a` on a busy machine): a thread's later
//! transition is read but an earlier one is not, so a trigram (a, b, c) is there without any edge
//! a -> b. The analysis handles it (the trigram is skipped, its first step never ran as far as
//! the input says) and never panics.

mod common;

use common::{profile, sc, thread};
use pkprof_syscall_graph::render::{json, text};
use pkprof_syscall_graph::{Analysis, Graph, Node, Options};

/// 100 x (openat read close X), X one of 10 different calls in turn, then the transitions
/// openat -> read dropped, as a read that missed them makes it. read -> close is the heaviest
/// step; forward, no X continues it often enough to grow the chain, so it grows backward, through
/// the trigram (openat, read, close), onto the edge openat -> read that is not there.
fn torn_thread() -> pkprof_syscall_graph::Thread {
    let others: Vec<Node> = (0..10).map(|i| sc(&format!("other{i}"))).collect();
    let mut calls = Vec::new();
    for i in 0..100 {
        calls.extend([
            sc("openat"),
            sc("read"),
            sc("close"),
            others[i % 10].clone(),
        ]);
    }
    let mut t = thread(1, 1, "torn", &calls, 1000);
    let (open, read) = (sc("openat"), sc("read"));
    t.transitions
        .retain(|tr| !(tr.from.as_ref() == Some(&open) && tr.to == read));
    t
}

#[test]
fn a_trigram_without_its_first_edge_is_skipped_not_a_panic() {
    let t = torn_thread();
    // It panicked here ("no entry found for key" in clusters/count.rs).
    let a = Analysis::new(&profile("torn", vec![t.clone()]), &Options::default());

    let g = Graph::from_transitions(&t.transitions);
    let id = |name: &str| g.index_of(&sc(name)).unwrap();
    let (open, read, close) = (id("openat"), id("read"), id("close"));
    // The input as read: openat -> read never ran, read -> close 100 times.
    assert_eq!((g.weight(open, read), g.weight(read, close)), (0, 100));
    // So nothing ran as openat -> read -> close either: the trigram is not counted.
    assert_eq!(g.trigram(open, read, close), 0);
    for c in &a.clusters {
        for (from, to) in c.edges() {
            let (from, to) = (id(&from.name), id(&to.name));
            assert!(
                g.weight(from, to) > 0,
                "a cluster over an edge that never ran: {c:#?}"
            );
        }
    }
    // read -> close -> other0 ... : the most frequent step is still found, counted in full.
    let c = a
        .clusters
        .iter()
        .find(|c| c.path[..2] == [sc("read"), sc("close")])
        .expect("the read -> close chain");
    assert_eq!(c.count, 100);
    // Every format renders it.
    text::write(&a, &mut Vec::new()).unwrap();
    json::write(&a, &mut Vec::new()).unwrap();
}
