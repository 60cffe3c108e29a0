//! The kernel's per-thread transition counts and sampled stacks -> the analysis model
//! (`pkprof_syscall_graph::SyscallProfile`): syscall names, thread commands, symbolized call sites.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use pkprof_collect::syscall_graph::{RawNode, RawSyscallGraph};
use pkprof_collect::syscall_name;
use pkprof_symbolize::Symbolizer;
use pkprof_syscall_graph::{
    CallSite, CallSiteFrame, Lost, Node, SyscallProfile, Thread, Transition,
};

fn node(raw: &RawNode) -> Node {
    Node::new(raw.nr, syscall_name(raw.nr)).with_arg(raw.fd, raw.size_class)
}

/// Builds the model; call sites are symbolized per process (return addresses minus one, so a call
/// at the end of a function is not taken for the next function).
pub fn profile(
    raw: RawSyscallGraph,
    symbolizer: &mut Symbolizer,
    target: String,
    elapsed: Duration,
    args_split: bool,
) -> SyscallProfile {
    let mut addrs: HashMap<u32, HashSet<u64>> = HashMap::new();
    for t in &raw.transitions {
        for site in &t.sites {
            addrs
                .entry(t.pid)
                .or_default()
                .extend(site.frames.iter().map(|a| a.saturating_sub(1)));
        }
    }
    let mut frames: HashMap<(u32, u64), CallSiteFrame> = HashMap::new();
    for (pid, set) in addrs {
        let list: Vec<u64> = set.into_iter().collect();
        let resolved = symbolizer.symbolize_user(pid, &list);
        for (addr, fs) in list.iter().zip(resolved) {
            // Without --lines there is one frame per address; with inlining, the innermost.
            let frame = fs.last().map_or(
                CallSiteFrame {
                    addr: *addr,
                    symbol: None,
                    module: None,
                },
                |f| CallSiteFrame {
                    addr: f.offset,
                    symbol: f.symbolized.then(|| f.name.clone()),
                    // Outside every mapping there is no module: the frame shows its address.
                    module: (f.module != "[unknown]").then(|| f.module.clone()),
                },
            );
            frames.insert((pid, *addr), frame);
        }
    }

    let mut threads: BTreeMap<(u32, u32), Thread> = BTreeMap::new();
    for t in raw.transitions {
        let thread = threads.entry((t.pid, t.tid)).or_insert_with(|| Thread {
            pid: t.pid,
            tid: t.tid,
            comm: raw
                .comms
                .get(&t.tid)
                .map(|(_, c)| c.clone())
                .unwrap_or_else(|| "?".into()),
            transitions: Vec::new(),
        });
        let sites = t
            .sites
            .iter()
            .map(|site| {
                let mut resolved: Vec<CallSiteFrame> = site
                    .frames
                    .iter()
                    .map(|a| {
                        let a = a.saturating_sub(1);
                        frames.get(&(t.pid, a)).cloned().unwrap_or(CallSiteFrame {
                            addr: a,
                            symbol: None,
                            module: None,
                        })
                    })
                    .collect();
                // A caller outside every mapping means the frame-pointer walk went astray (a
                // libc function using rbp as a register): it and what follows are not callers.
                if let Some(bad) = resolved.iter().skip(1).position(|f| f.module.is_none()) {
                    resolved.truncate(bad + 1);
                }
                // A stack that stopped before the thread's entry says why, as record's do.
                if let Some(reason) = site.end {
                    resolved.push(CallSiteFrame {
                        addr: 0,
                        symbol: Some(reason.frame_name()),
                        module: Some("[truncated]".into()),
                    });
                }
                CallSite {
                    frames: resolved,
                    count: site.count,
                }
            })
            .collect();
        thread.transitions.push(Transition {
            before: t.before.as_ref().map(node),
            from: t.from.as_ref().map(node),
            to: node(&t.to),
            count: t.count,
            errors: t.errors,
            total_ns: t.total_ns,
            sites,
        });
    }
    SyscallProfile {
        target,
        duration_ns: elapsed.as_nanos() as u64,
        args_split,
        threads: threads.into_values().collect(),
        lost: Lost {
            transitions_full: raw.lost.transitions_full,
            sites_full: raw.lost.sites_full,
            // Dropped for want of room in the ring: not read either (stderr tells them apart).
            stacks_failed: raw.lost.stacks_failed + raw.lost.sites_ring_full,
            threads_full: raw.lost.threads_full,
            targets_full: raw.lost.targets_full,
        },
    }
}
