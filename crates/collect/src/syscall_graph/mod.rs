//! Collection for `pkprof syscalls`: loads src/bpf/syscall_graph.bpf.c (its own small object, so
//! counting transitions costs only the two syscall tracepoints), keeps its targets, and reads the
//! per-thread transition counts, sampled call sites and losses out of the kernel's maps.

mod argspec;
mod skel;

use std::cell::RefCell;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, RingBuffer, RingBufferBuilder};

use crate::error::CollectError;
use crate::preflight::{self, TracepointIndex};
use skel::types::{
    pkprof_sc_comm, pkprof_sc_edge, pkprof_sc_edge_key, pkprof_sc_event, pkprof_sc_lost,
    pkprof_sc_site_key,
};
use skel::{SyscallGraphSkel, SyscallGraphSkelBuilder};

const NODE_FD: u64 = 1 << 16;
const NODE_SIZE: u64 = 1 << 17;
const NODE_NONE: u64 = u64::MAX;
const EVENT_EXEC: u32 = 2; // PKPROF_SC_EXEC

/// How `pkprof syscalls` collects.
#[derive(Clone, Debug)]
pub struct SyscallGraphOptions {
    /// Every process but pkprof (`-a`), rather than the targets added.
    pub all: bool,
    /// Children of a target become targets at fork (`-- CMD`, `-p`).
    pub follow_children: bool,
    /// Split nodes by fd and size class (`--args`).
    pub split_args: bool,
    /// Keep the user stack of every Nth call of a thread (and of each transition's first); 0: none.
    pub stack_every: u32,
    /// Capacity of the transition table.
    pub max_transitions: u32,
    /// Time every call (sys_enter attached too); without, only counts (one tracepoint).
    pub timed: bool,
}

/// One syscall node as the kernel counted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RawNode {
    pub nr: u32,
    pub fd: Option<i64>,
    pub size_class: Option<u8>,
}

/// "`to` returned right after `from`, which returned right after `before`" on one thread, with the sampled user stacks of `to`.
#[derive(Clone, Debug)]
pub struct RawTransition {
    pub pid: u32,
    pub tid: u32,
    /// The call before `from`; None when `from` is None or was the thread's first call.
    pub before: Option<RawNode>,
    /// None: the first call seen on the thread.
    pub from: Option<RawNode>,
    pub to: RawNode,
    pub count: u64,
    pub errors: u64,
    pub total_ns: u64,
    /// (user stack, leaf first; how many sampled calls had it).
    pub sites: Vec<(Vec<u64>, u64)>,
}

/// What the kernel could not keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallGraphLost {
    pub transitions_full: u64,
    pub sites_full: u64,
    pub stacks_failed: u64,
    pub threads_full: u64,
    pub targets_full: u64,
    /// Process events the ring had no room for (such a process may not be symbolized).
    pub events_lost: u64,
}

/// A process whose mappings should be captured now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessEvent {
    /// A thread made its first traced call.
    NewThread { pid: u32, tid: u32 },
    /// A traced process executed a new image: what was captured before is stale.
    Exec { pid: u32 },
}

/// Everything read at the end of a run.
#[derive(Clone, Debug, Default)]
pub struct RawSyscallGraph {
    pub transitions: Vec<RawTransition>,
    /// tid -> (pid, command) at the thread's first traced call or last exec.
    pub comms: HashMap<u32, (u32, String)>,
    pub lost: SyscallGraphLost,
}

/// The loaded, attached syscall-graph programs.
pub struct SyscallTracer {
    skel: SyscallGraphSkel<'static>,
    /// Emptied by `read`: the programs are detached before the tables are read.
    links: Vec<Link>,
    events: RingBuffer<'static>,
    inbox: Rc<RefCell<Vec<ProcessEvent>>>,
}

fn read_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> CollectError {
    move |e| CollectError::Read {
        map,
        reason: e.to_string(),
    }
}

impl SyscallTracer {
    /// Checks, loads and attaches. Every failure is a one-line `CollectError`.
    pub fn start(options: &SyscallGraphOptions) -> Result<SyscallTracer, CollectError> {
        preflight::check_privileges()?;
        preflight::check_kernel_btf()?;
        let (index, _tracefs) = TracepointIndex::open();
        index.require(preflight::SYSCALL_TRACEPOINTS)?;
        index.require(&[("sched", "sched_process_fork")])?;

        let load_err = |reason: String| CollectError::Load {
            prog: "syscall_graph".into(),
            reason,
        };
        crate::loader::route_libbpf_logs();
        // The skeleton borrows its object storage for as long as it lives: leaked once per run.
        let storage: &'static mut MaybeUninit<OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = SyscallGraphSkelBuilder::default()
            .open(storage)
            .map_err(|e| load_err(e.to_string()))?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.trace_all = options.all;
            ro.follow_children = options.follow_children;
            ro.split_args = options.split_args;
            ro.stack_every = options.stack_every;
            ro.self_pid = std::process::id();
            ro.execve_nr = syscalls::Sysno::execve.id() as u32;
            ro.execveat_nr = syscalls::Sysno::execveat.id() as u32;
            ro.rt_sigreturn_nr = syscalls::Sysno::rt_sigreturn.id() as u32;
        }
        open.maps
            .sc_edges
            .set_max_entries(options.max_transitions.max(1))
            .map_err(|e| load_err(e.to_string()))?;
        open.progs.sc_enter.set_autoload(options.timed);
        open.progs.sc_exit.set_autoload(options.timed);
        open.progs.sc_exit_untimed.set_autoload(!options.timed);
        let skel = open
            .load()
            .map_err(|e| crate::loader::load_error(&e, "syscall_graph"))?;
        for (nr, fd_arg, size_arg) in argspec::argspecs() {
            skel.maps
                .sc_argspecs
                .update(&nr.to_ne_bytes(), &[fd_arg, size_arg], MapFlags::ANY)
                .map_err(read_err("sc_argspecs"))?;
        }
        let mut links = Vec::new();
        for prog in skel.object().progs_mut() {
            if !prog.autoload() {
                continue;
            }
            let name = prog.name().to_string_lossy().into_owned();
            let link = prog.attach().map_err(|e| CollectError::Attach {
                prog: name.clone(),
                reason: e.to_string(),
            })?;
            links.push(link);
        }
        let inbox: Rc<RefCell<Vec<ProcessEvent>>> = Rc::default();
        let sink = Rc::clone(&inbox);
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&skel.maps.sc_events, move |bytes: &[u8]| {
                if let Ok(ev) = plain::from_bytes::<pkprof_sc_event>(bytes) {
                    sink.borrow_mut().push(match ev.kind {
                        EVENT_EXEC => ProcessEvent::Exec { pid: ev.pid },
                        _ => ProcessEvent::NewThread {
                            pid: ev.pid,
                            tid: ev.tid,
                        },
                    });
                }
                0
            })
            .map_err(read_err("sc_events"))?;
        let events = builder.build().map_err(read_err("sc_events"))?;
        Ok(SyscallTracer {
            skel,
            links,
            events,
            inbox,
        })
    }

    /// Waits up to `timeout` for process events (new threads, execs), oldest first. A signal
    /// (Ctrl-C) ends the wait early without an error.
    pub fn poll_events(&self, timeout: Duration) -> Result<Vec<ProcessEvent>, CollectError> {
        match self.events.poll(timeout) {
            Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
            other => other.map_err(read_err("sc_events"))?,
        }
        Ok(std::mem::take(&mut *self.inbox.borrow_mut()))
    }

    /// Whether any target process is still alive (targets leave the table when they exit; with
    /// `all`, always true).
    pub fn targets_alive(&self) -> bool {
        self.skel.maps.sc_targets.keys().next().is_some()
    }

    /// Makes `pid` (all its threads) a target from its next syscall entry on.
    pub fn add_target(&mut self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .sc_targets
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(read_err("sc_targets"))?;
        // Threads cached a verdict under the old generation: they decide again at their next call.
        let data = self
            .skel
            .maps
            .data_data
            .as_deref_mut()
            .ok_or_else(|| CollectError::Read {
                map: "data",
                reason: "the object has no .data section".into(),
            })?;
        data.targets_gen += 1;
        Ok(())
    }

    /// Losses so far, summed over CPUs.
    pub fn lost(&self) -> Result<SyscallGraphLost, CollectError> {
        let per_cpu = self
            .skel
            .maps
            .sc_lost
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(read_err("sc_lost"))?
            .unwrap_or_default();
        let mut lost = SyscallGraphLost::default();
        for bytes in per_cpu {
            let l: &pkprof_sc_lost = plain::from_bytes(&bytes).map_err(|_| CollectError::Read {
                map: "sc_lost",
                reason: "short value".into(),
            })?;
            lost.transitions_full += l.edges_full;
            lost.sites_full += l.sites_full;
            lost.stacks_failed += l.stacks_failed;
            lost.threads_full += l.threads_full;
            lost.targets_full += l.targets_full;
            lost.events_lost += l.events_lost;
        }
        Ok(lost)
    }

    /// Stops tracing and reads every transition, call site and command the kernel kept. The
    /// programs are detached first, so that the tables are read as they were at one instant:
    /// read while traced threads go on filling them (every process with `trace_all`), a thread's
    /// later transition could be read and an earlier one not.
    pub fn read(&mut self) -> Result<RawSyscallGraph, CollectError> {
        self.links.clear();
        let maps = &self.skel.maps;
        let short = |map: &'static str| CollectError::Read {
            map,
            reason: "short key or value".into(),
        };
        let mut sites: HashMap<EdgeId, Vec<(Vec<u64>, u64)>> = HashMap::new();
        for key in maps.sc_sites.keys() {
            let k: &pkprof_sc_site_key = plain::from_bytes(&key).map_err(|_| short("sc_sites"))?;
            let Some(v) = maps
                .sc_sites
                .lookup(&key, MapFlags::ANY)
                .map_err(read_err("sc_sites"))?
            else {
                continue;
            };
            let n = u64::from_ne_bytes(v[..8].try_into().map_err(|_| short("sc_sites"))?);
            let mut stack = self.stack(k.stack_id as u32)?;
            // The frameless wrapper's caller, which the frame-pointer walk skipped.
            if k.leaf_return != 0 && !stack.is_empty() && stack.get(1) != Some(&k.leaf_return) {
                stack.insert(1, k.leaf_return);
            }
            if !stack.is_empty() {
                sites
                    .entry(EdgeId::of(&k.edge))
                    .or_default()
                    .push((stack, n));
            }
        }
        let mut transitions = Vec::new();
        for key in maps.sc_edges.keys() {
            let k: &pkprof_sc_edge_key = plain::from_bytes(&key).map_err(|_| short("sc_edges"))?;
            let Some(v) = maps
                .sc_edges
                .lookup(&key, MapFlags::ANY)
                .map_err(read_err("sc_edges"))?
            else {
                continue;
            };
            let e: &pkprof_sc_edge = plain::from_bytes(&v).map_err(|_| short("sc_edges"))?;
            let mut sites = sites.remove(&EdgeId::of(k)).unwrap_or_default();
            // The same stack may come with and without a leaf return: merge.
            sites.sort();
            sites.dedup_by(|a, b| {
                let same = a.0 == b.0;
                if same {
                    b.1 += a.1;
                }
                same
            });
            sites.sort_by_key(|s| std::cmp::Reverse(s.1));
            transitions.push(RawTransition {
                pid: k.pid,
                tid: k.tid,
                before: (k.before != NODE_NONE).then(|| node(k.before)),
                from: (k.from != NODE_NONE).then(|| node(k.from)),
                to: node(k.to),
                count: e.count,
                errors: e.errors,
                total_ns: e.total_ns,
                sites,
            });
        }
        let mut comms = HashMap::new();
        for key in maps.sc_comms.keys() {
            let Some(v) = maps
                .sc_comms
                .lookup(&key, MapFlags::ANY)
                .map_err(read_err("sc_comms"))?
            else {
                continue;
            };
            let tid = u32::from_ne_bytes(key[..4].try_into().map_err(|_| short("sc_comms"))?);
            let c: &pkprof_sc_comm = plain::from_bytes(&v).map_err(|_| short("sc_comms"))?;
            comms.insert(tid, (c.pid, crate::reader::comm_str(&c.comm)));
        }
        Ok(RawSyscallGraph {
            transitions,
            comms,
            lost: self.lost()?,
        })
    }

    /// A user stack from `sc_stacks`, leaf first, without the zero padding.
    fn stack(&self, id: u32) -> Result<Vec<u64>, CollectError> {
        let Some(v) = self
            .skel
            .maps
            .sc_stacks
            .lookup(&id.to_ne_bytes(), MapFlags::ANY)
            .map_err(read_err("sc_stacks"))?
        else {
            return Ok(Vec::new());
        };
        Ok(v.chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().expect("chunks of 8")))
            .take_while(|&a| a != 0)
            .collect())
    }
}

/// A transition's identity, to join call sites to their transition.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct EdgeId(u32, u32, u64, u64, u64);

impl EdgeId {
    fn of(k: &pkprof_sc_edge_key) -> Self {
        EdgeId(k.pid, k.tid, k.before, k.from, k.to)
    }
}

/// Unpacks a node (see pkprof.h).
fn node(packed: u64) -> RawNode {
    RawNode {
        nr: (packed & 0xffff) as u32,
        fd: (packed & NODE_FD != 0).then(|| i64::from((packed >> 32) as u32 as i32)),
        size_class: (packed & NODE_SIZE != 0).then_some(((packed >> 24) & 0xff) as u8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_unpack_as_the_bpf_side_packs_them() {
        assert_eq!(
            node(0),
            RawNode {
                nr: 0,
                fd: None,
                size_class: None
            }
        );
        let packed = 1 | NODE_FD | NODE_SIZE | (13 << 24) | (3u64 << 32);
        assert_eq!(
            node(packed),
            RawNode {
                nr: 1,
                fd: Some(3),
                size_class: Some(13)
            }
        );
        let at_fdcwd = 257 | NODE_FD | ((-100i32 as u32 as u64) << 32);
        assert_eq!(node(at_fdcwd).fd, Some(-100));
    }
}
