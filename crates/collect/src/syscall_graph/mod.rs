//! Collection for `pkprof syscalls`: loads src/bpf/syscall_graph.bpf.c (its own small object, so
//! counting transitions costs only the two syscall tracepoints), keeps its targets, decodes its
//! ring of process events and call-site samples (`TraceEvent`), and reads the per-thread
//! transition counts and losses out of the kernel's maps. Call-site samples carry user stack bytes
//! that the caller unwinds at once and counts in a [`SiteTable`] (docs/design.md, "User stacks").

mod argspec;
mod sites;
mod skel;

pub use sites::{RawSite, SiteTable, DEFAULT_MAX_SITES};

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags, RingBuffer, RingBufferBuilder};

use crate::error::CollectError;
use crate::map_walk;
use crate::preflight::{self, TracepointIndex};
use crate::skeleton;
use skel::types::{
    pkprof_sc_comm, pkprof_sc_edge, pkprof_sc_edge_key, pkprof_sc_event, pkprof_sc_event_kind,
    pkprof_sc_lost, pkprof_sc_node, pkprof_sc_node_layout as Layout, pkprof_sc_site,
    pkprof_stack_flags,
};
use skel::{SyscallGraphSkel, SyscallGraphSkelBuilder};

const NODE_FD: u64 = pkprof_sc_node::PKPROF_SC_NODE_FD.0 as u64;
const NODE_SIZE: u64 = pkprof_sc_node::PKPROF_SC_NODE_SIZE.0 as u64;
const NODE_NR_MASK: u64 = Layout::PKPROF_SC_NODE_NR_MASK.0 as u64;
const NODE_SIZE_SHIFT: u32 = Layout::PKPROF_SC_NODE_SIZE_SHIFT.0;
const NODE_FD_SHIFT: u32 = Layout::PKPROF_SC_NODE_FD_SHIFT.0;
/// PKPROF_SC_NONE: all ones (a 64-bit value, so a define rather than an enum in pkprof.h).
const NODE_NONE: u64 = u64::MAX;
const EVENT_EXEC: pkprof_sc_event_kind = pkprof_sc_event_kind::PKPROF_SC_EXEC;
const EVENT_SITE: pkprof_sc_event_kind = pkprof_sc_event_kind::PKPROF_SC_SITE;
const STACK_USER_TRUNCATED: u32 = pkprof_stack_flags::PKPROF_STACK_USER_TRUNCATED.0;
const STACK_BYTES_SHORT: u32 = pkprof_stack_flags::PKPROF_STACK_BYTES_SHORT.0;

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
    /// Bytes of user stack copied per sampled call, for unwinding (a multiple of 8, at most
    /// `record::MAX_STACK_BYTES`; 0: frame pointers only).
    pub stack_bytes: u32,
    /// Size of the ring of process events and call-site samples, bytes (a power of two, a
    /// multiple of the page size).
    pub ring_bytes: u32,
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
    /// The sampled calls' unwound user stacks, most frequent first.
    pub sites: Vec<RawSite>,
}

/// What the kernel (or the site table) could not keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallGraphLost {
    pub transitions_full: u64,
    /// Sampled calls not counted: the site table was full (`SiteTable`).
    pub sites_full: u64,
    /// Sampled calls whose user stack came out empty.
    pub stacks_failed: u64,
    /// Sampled calls the ring had no room for.
    pub sites_ring_full: u64,
    pub threads_full: u64,
    pub targets_full: u64,
    /// Process events the ring had no room for (such a process may not be symbolized).
    pub events_lost: u64,
}

/// A record of the ring, oldest first: a process whose mappings should be captured now, or a
/// sampled call to unwind now (while the process lives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A thread made its first traced call.
    NewThread { pid: u32, tid: u32 },
    /// A traced process executed a new image: what was captured before is stale.
    Exec { pid: u32 },
    /// A sampled call.
    Site(Box<SiteSample>),
}

/// A transition's identity, to join call sites to their transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EdgeId(u32, u32, u64, u64, u64);

impl EdgeId {
    fn of(k: &pkprof_sc_edge_key) -> Self {
        EdgeId(k.pid, k.tid, k.before, k.from, k.to)
    }
}

/// One sampled call as the kernel saw it at its sys_exit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteSample {
    /// The transition the call ended.
    pub edge: EdgeId,
    pub pid: u32,
    pub tid: u32,
    /// User registers saved at the syscall's entry: ip just after the syscall instruction.
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The frame-pointer walk, leaf first, [0] = ip, with the caller of a frameless syscall
    /// wrapper put back at [1] (which the walk skips; see `leaf_return` in pkprof.h).
    pub fp_chain: Vec<u64>,
    /// The frame-pointer walk stopped at a frame chain gone wrong.
    pub fp_truncated: bool,
    /// User stack bytes from `sp` upwards (empty with `stack_bytes` 0).
    pub stack: Vec<u8>,
    /// The copy filled the whole window (false: it stopped at an unreadable page).
    pub window_full: bool,
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
    inbox: Rc<RefCell<Vec<TraceEvent>>>,
    /// Records of an unknown kind or size (a bug: counted, not fatal).
    undecodable: Rc<RefCell<u64>>,
}

fn read_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> CollectError {
    CollectError::reading(map)
}

impl SyscallTracer {
    /// Checks, loads and attaches. Every failure is a one-line `CollectError`.
    pub fn start(options: &SyscallGraphOptions) -> Result<SyscallTracer, CollectError> {
        preflight::check_privileges()?;
        preflight::check_kernel_btf()?;
        let (index, _tracefs) = TracepointIndex::open();
        index.require(preflight::SYSCALL_TRACEPOINTS)?;
        index.require(&[("sched", "sched_process_fork")])?;

        let cpus = skeleton::possible_cpus("syscall_graph")?;
        let (skel, links) = skeleton::start(
            "syscall_graph",
            SyscallGraphSkelBuilder::default(),
            |open| {
                if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
                    ro.trace_all = options.all;
                    ro.follow_children = options.follow_children;
                    ro.split_args = options.split_args;
                    ro.stack_every = options.stack_every;
                    ro.stack_bytes = options.stack_bytes.min(crate::record::MAX_STACK_BYTES);
                    ro.wakeup_bytes = u64::from(options.ring_bytes / 4);
                    ro.self_pid = std::process::id();
                    ro.execve_nr = syscalls::Sysno::execve.id() as u32;
                    ro.execveat_nr = syscalls::Sysno::execveat.id() as u32;
                    ro.rt_sigreturn_nr = syscalls::Sysno::rt_sigreturn.id() as u32;
                }
                open.maps
                    .sc_edges
                    .set_max_entries(options.max_transitions.max(1))?;
                open.maps.sc_events.set_max_entries(options.ring_bytes)?;
                open.maps.sc_scratch.set_max_entries(cpus as u32)?;
                open.progs.sc_enter.set_autoload(options.timed);
                open.progs.sc_exit.set_autoload(options.timed);
                open.progs.sc_exit_untimed.set_autoload(!options.timed);
                Ok(())
            },
            // Which syscalls' arguments name an fd and a size, before any call is counted.
            |skel: &mut SyscallGraphSkel<'static>| {
                for (nr, fd_arg, size_arg) in argspec::argspecs() {
                    skel.maps
                        .sc_argspecs
                        .update(&nr.to_ne_bytes(), &[fd_arg, size_arg], MapFlags::ANY)
                        .map_err(read_err("sc_argspecs"))?;
                }
                Ok(())
            },
            |skel| {
                let p = &skel.progs;
                skeleton::AttachPlan {
                    tracepoints: vec![
                        &p.sc_enter,
                        &p.sc_exit,
                        &p.sc_exit_untimed,
                        &p.sc_exit_process,
                        &p.sc_fork,
                    ],
                    elsewhere: Vec::new(),
                }
            },
        )?;
        let inbox: Rc<RefCell<Vec<TraceEvent>>> = Rc::default();
        let undecodable: Rc<RefCell<u64>> = Rc::default();
        let (sink, bad) = (Rc::clone(&inbox), Rc::clone(&undecodable));
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&skel.maps.sc_events, move |bytes: &[u8]| {
                match decode(bytes) {
                    Some(ev) => sink.borrow_mut().push(ev),
                    None => *bad.borrow_mut() += 1,
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
            undecodable,
        })
    }

    /// Waits up to `timeout` for a wake-up (a new thread, an exec, a call site of a process not
    /// captured yet, or a quarter of the ring waiting), then takes every record in the ring,
    /// oldest first: call sites do not wake the reader, so what arrived since the last call is
    /// taken too. A signal (Ctrl-C) ends the wait early without an error.
    pub fn poll_events(&self, timeout: Duration) -> Result<Vec<TraceEvent>, CollectError> {
        match self.events.poll(timeout) {
            Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
            other => other.map_err(read_err("sc_events"))?,
        }
        self.events.consume().map_err(read_err("sc_events"))?;
        Ok(std::mem::take(&mut *self.inbox.borrow_mut()))
    }

    /// Tells the programs that `pid`'s maps are captured: its call sites need not wake the reader.
    pub fn mark_captured(&self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .sc_captured
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(read_err("sc_captured"))
    }

    /// Ring records that could not be decoded so far (0 unless pkprof.h and this file disagree).
    pub fn undecodable(&self) -> u64 {
        *self.undecodable.borrow()
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
            .ok_or_else(|| CollectError::read("data", "the object has no .data section"))?;
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
            let l: pkprof_sc_lost =
                map_walk::decode(&bytes).map_err(|e| CollectError::read("sc_lost", e))?;
            lost.transitions_full += l.edges_full;
            lost.sites_ring_full += l.sites_ring_full;
            lost.threads_full += l.threads_full;
            lost.targets_full += l.targets_full;
            lost.events_lost += l.events_lost;
        }
        Ok(lost)
    }

    /// Detaches the programs: nothing is counted or sampled after this (the ring keeps what it
    /// holds for a last `poll_events`).
    pub fn stop(&mut self) {
        self.links.clear();
    }

    /// Stops tracing and reads every transition and command the kernel kept, joined with the call
    /// sites counted in `sites` (give it after the last `poll_events`). The programs are detached
    /// first, so that the tables are read as they were at one instant: read while traced threads
    /// go on filling them (every process with `trace_all`), a thread's later transition could be
    /// read and an earlier one not.
    pub fn read(&mut self, mut sites: SiteTable) -> Result<RawSyscallGraph, CollectError> {
        self.links.clear();
        let maps = &self.skel.maps;
        let mut transitions = Vec::new();
        for (k, e) in
            map_walk::decoded::<_, pkprof_sc_edge_key, pkprof_sc_edge>(&maps.sc_edges, "sc_edges")?
        {
            let sites = sites.take(&EdgeId::of(&k));
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
        let comms = map_walk::decoded::<_, u32, pkprof_sc_comm>(&maps.sc_comms, "sc_comms")?
            .into_iter()
            .map(|(tid, c)| (tid, (c.pid, crate::reader::comm_str(&c.comm))))
            .collect();
        let mut lost = self.lost()?;
        lost.sites_full = sites.full();
        lost.stacks_failed = sites.failed();
        Ok(RawSyscallGraph {
            transitions,
            comms,
            lost,
        })
    }
}

/// Decodes one record of `sc_events`; None for a record of unknown kind or size.
fn decode(bytes: &[u8]) -> Option<TraceEvent> {
    let kind = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?);
    if kind != EVENT_SITE.0 {
        let ev = plain::from_bytes::<pkprof_sc_event>(bytes).ok()?;
        return Some(match ev.kind {
            EVENT_EXEC => TraceEvent::Exec { pid: ev.pid },
            _ => TraceEvent::NewThread {
                pid: ev.pid,
                tid: ev.tid,
            },
        });
    }
    let s = plain::from_bytes::<pkprof_sc_site>(bytes).ok()?;
    let n = (s.ustack_len as usize / 8).min(s.ustack.len());
    let mut fp_chain = s.ustack[..n].to_vec();
    // The frameless wrapper's caller, which the frame-pointer walk skipped.
    if s.leaf_return != 0 && !fp_chain.is_empty() && fp_chain.get(1) != Some(&s.leaf_return) {
        fp_chain.insert(1, s.leaf_return);
    }
    let stack = bytes
        .get(size_of::<pkprof_sc_site>()..)?
        .get(..s.stack_bytes_len as usize)?
        .to_vec();
    Some(TraceEvent::Site(Box::new(SiteSample {
        edge: EdgeId::of(&s.edge),
        pid: s.edge.pid,
        tid: s.edge.tid,
        ip: s.user_ip,
        sp: s.user_sp,
        bp: s.user_bp,
        fp_chain,
        fp_truncated: s.stack_flags & STACK_USER_TRUNCATED != 0,
        window_full: s.stack_flags & STACK_BYTES_SHORT == 0 && !stack.is_empty(),
        stack,
    })))
}

/// Unpacks a node (see pkprof.h).
fn node(packed: u64) -> RawNode {
    RawNode {
        nr: (packed & NODE_NR_MASK) as u32,
        fd: (packed & NODE_FD != 0).then(|| i64::from((packed >> NODE_FD_SHIFT) as u32 as i32)),
        size_class: (packed & NODE_SIZE != 0).then_some(((packed >> NODE_SIZE_SHIFT) & 0xff) as u8),
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
