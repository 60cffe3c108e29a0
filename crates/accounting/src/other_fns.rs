//! OTHER's kernel functions (docs/design.md, "Wall time"): the time a thread spent blocked for
//! a reason the classifier has no name for (OTHER), by the kernel code it blocked in. Their own
//! table beside the rows' counters: read per (thread, kernel return address) by the collector,
//! kept here per row (a process keeps its exited threads' share until it exits itself), named
//! by the caller (the symbolizer's kernel side) into `OtherFn::function`.

use std::collections::HashMap;

use serde::Serialize;

use crate::snapshot::ThreadSample;

/// One kernel table entry: thread `tid` of `pid` blocked `ns` as OTHER, over `count` off
/// periods, at kernel return address `addr`, since attach.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OtherFnSample {
    pub tid: u32,
    pub pid: u32,
    pub addr: u64,
    pub ns: u64,
    pub count: u64,
}

/// A row's OTHER blocked time in one kernel function, cumulative since attach.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OtherFn {
    /// The function's name (empty until named); `addr` is one return address inside it.
    pub function: String,
    #[serde(skip)]
    pub addr: u64,
    pub ns: u64,
    pub count: u64,
}

/// The exited threads' share of each live process, by return address.
#[derive(Debug, Default)]
pub(crate) struct OtherFnTable {
    dead: HashMap<u32, HashMap<u64, (u64, u64)>>,
}

impl OtherFnTable {
    /// Each row's functions (`per_thread`: keyed by tid, else by pid), the largest first. The
    /// exited threads of `threads` are kept for their process; a process that exited is dropped.
    pub(crate) fn rows(
        &mut self,
        fns: &[OtherFnSample],
        threads: &[&ThreadSample],
        per_thread: bool,
    ) -> HashMap<u32, Vec<OtherFn>> {
        let mut by: HashMap<u32, HashMap<u64, (u64, u64)>> = HashMap::new();
        for f in fns {
            let e = (by
                .entry(if per_thread { f.tid } else { f.pid })
                .or_default())
            .entry(f.addr)
            .or_default();
            e.0 += f.ns;
            e.1 += f.count;
        }
        // A process none of whose threads is alive: gone (its exited threads' share with it).
        let live: std::collections::HashSet<u32> = (threads.iter().filter(|t| !t.exited))
            .map(|t| t.pid)
            .collect();
        let exited_tids: std::collections::HashSet<u32> = (threads.iter())
            .filter(|t| t.exited && live.contains(&t.pid))
            .map(|t| t.tid)
            .collect();
        if !per_thread {
            for (pid, dead) in &self.dead {
                for (addr, (ns, count)) in dead {
                    let e = by.entry(*pid).or_default().entry(*addr).or_default();
                    e.0 += ns;
                    e.1 += count;
                }
            }
        }
        if !exited_tids.is_empty() {
            for f in fns.iter().filter(|f| exited_tids.contains(&f.tid)) {
                let e = (self.dead.entry(f.pid).or_default())
                    .entry(f.addr)
                    .or_default();
                e.0 += f.ns;
                e.1 += f.count;
            }
        }
        self.dead.retain(|pid, _| live.contains(pid));
        by.into_iter()
            .map(|(k, m)| {
                let mut v: Vec<OtherFn> = m
                    .into_iter()
                    .map(|(addr, (ns, count))| OtherFn {
                        function: String::new(),
                        addr,
                        ns,
                        count,
                    })
                    .collect();
                v.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.addr.cmp(&b.addr)));
                (k, v)
            })
            .collect()
    }
}

/// Names `fns` with `name` (an address to its function's name) and merges the entries that name
/// the same function (several return addresses in one function), the largest first.
pub fn name_other_fns(fns: &mut Vec<OtherFn>, mut name: impl FnMut(u64) -> String) {
    let mut merged: Vec<OtherFn> = Vec::new();
    for mut f in fns.drain(..) {
        f.function = name(f.addr);
        match merged.iter_mut().find(|m| m.function == f.function) {
            Some(m) => {
                m.ns += f.ns;
                m.count += f.count;
            }
            None => merged.push(f),
        }
    }
    merged.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.function.cmp(&b.function)));
    *fns = merged;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: u32, pid: u32, exited: bool) -> ThreadSample {
        ThreadSample {
            tid,
            pid,
            exited,
            ..ThreadSample::default()
        }
    }

    fn f(tid: u32, pid: u32, addr: u64, ns: u64) -> OtherFnSample {
        OtherFnSample {
            tid,
            pid,
            addr,
            ns,
            count: 1,
        }
    }

    #[test]
    fn a_process_keeps_its_exited_threads_share_until_it_exits() {
        let mut t = OtherFnTable::default();
        let (a, b) = (thread(10, 10, false), thread(11, 10, true));
        // Thread 11 exits in this read: its entry is read one last time.
        let rows = t.rows(&[f(10, 10, 0xa, 5), f(11, 10, 0xa, 7)], &[&a, &b], false);
        assert_eq!((rows[&10][0].ns, rows[&10][0].count), (12, 2));
        // Next read: the kernel deleted 11's entry; the process still shows it.
        let rows = t.rows(&[f(10, 10, 0xa, 6), f(10, 10, 0xb, 20)], &[&a], false);
        let ns: Vec<(u64, u64)> = rows[&10].iter().map(|o| (o.addr, o.ns)).collect();
        assert_eq!(ns, vec![(0xb, 20), (0xa, 13)]);
        // Per thread: only the live thread's own.
        let rows = t.rows(&[f(10, 10, 0xa, 6)], &[&a], true);
        assert_eq!(rows[&10][0].ns, 6);
        assert!(!rows.contains_key(&11));
        // The process exits: nothing kept.
        t.rows(&[], &[&thread(10, 10, true)], false);
        assert!(t.dead.is_empty());
    }

    #[test]
    fn naming_merges_return_addresses_of_one_function() {
        let mut fns = vec![
            OtherFn {
                addr: 1,
                ns: 5,
                count: 1,
                ..OtherFn::default()
            },
            OtherFn {
                addr: 2,
                ns: 7,
                count: 2,
                ..OtherFn::default()
            },
            OtherFn {
                addr: 3,
                ns: 9,
                count: 1,
                ..OtherFn::default()
            },
        ];
        name_other_fns(&mut fns, |a| if a == 3 { "b".into() } else { "a".into() });
        let got: Vec<(&str, u64, u64)> = fns
            .iter()
            .map(|o| (o.function.as_str(), o.ns, o.count))
            .collect();
        assert_eq!(got, vec![("a", 12, 3), ("b", 9, 1)]);
    }
}
