//! The server chain's Rust side (src/bpf/chains/server.bpf.h; docs/design.md, "Server work
//! billed to its clients"): a thread's time after it reads a client's data from a pipe, a unix
//! socket or a loopback TCP connection, billed to that client. Owns its two raw syscall
//! tracepoint programs, its exec program and the sweeps of `srv_writers`, `srv_reads` and `srv_parked`.

use super::{first_missing, Chain, Setup, SweepAt, Swept};
use crate::error::CollectError;
use crate::map_walk;
use crate::skel::types::{pkprof_srv_key, pkprof_srv_mark, pkprof_srv_read};
use crate::skel::{types, CpuAccountMaps, OpenCpuAccountSkel};

pub(crate) static CHAIN: Chain = Chain {
    name: "server",
    title: "server",
    unattributed: "a server's work for its clients stays the server's own time",
    opt_in: true,
    missing: |index| {
        first_missing(
            index,
            &[
                ("raw_syscalls", "sys_enter"),
                ("raw_syscalls", "sys_exit"),
                ("sched", "sched_process_exec"),
            ],
        )
    },
    configure,
    programs: |p| vec![&p.on_srv_sys_enter, &p.on_srv_sys_exit, &p.on_srv_exec],
    sweep,
};

/// This architecture's number of syscall `name` (the "no such call" number if it has none).
fn nr(name: &str) -> u32 {
    name.parse::<syscalls::Sysno>()
        .map_or(types::pkprof_syscall_nr::PKPROF_NO_SYSCALL.0, |s| {
            s.id() as u32
        })
}

fn configure(open: &mut OpenCpuAccountSkel<'static>, s: &Setup) -> Result<(), libbpf_rs::Error> {
    open.maps.srv_writers.set_max_entries(s.max_tags)?;
    open.maps.srv_reads.set_max_entries(s.max_tags)?;
    open.maps.srv_parked.set_max_entries(s.max_tags)?;
    if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
        ro.srv_nr_read = nr("read");
        ro.srv_nr_readv = nr("readv");
        ro.srv_nr_recvfrom = nr("recvfrom");
        ro.srv_nr_recvmsg = nr("recvmsg");
        ro.srv_nr_write = nr("write");
        ro.srv_nr_writev = nr("writev");
        ro.srv_nr_sendto = nr("sendto");
        ro.srv_nr_sendmsg = nr("sendmsg");
    }
    open.progs.on_srv_sys_enter.set_autoload(s.on);
    open.progs.on_srv_sys_exit.set_autoload(s.on);
    open.progs.on_srv_exec.set_autoload(s.on);
    Ok(())
}

/// Whether an entry stamped `since_ns` is old enough to forget: a channel nobody wrote to, a read
/// whose exit never came (the thread died in it), a mark parked by a thread that never ran again,
/// for sixty expiries of at least a second. They hold no time: the marks' time is credited at
/// every switch-out.
fn stale(since_ns: u64, at: &SweepAt) -> bool {
    at.now.saturating_sub(since_ns) > 60 * at.expire_ns.max(1_000_000_000)
}

fn sweep(maps: &CpuAccountMaps<'static>, at: &SweepAt, _: &mut Swept) -> Result<(), CollectError> {
    map_walk::sweep(
        &maps.srv_writers,
        "srv_writers",
        |_: &pkprof_srv_key, m: &pkprof_srv_mark| !stale(m.since_ns, at),
    )?;
    map_walk::sweep(
        &maps.srv_reads,
        "srv_reads",
        |_: &u32, r: &pkprof_srv_read| !stale(r.since_ns, at),
    )?;
    map_walk::sweep(
        &maps.srv_parked,
        "srv_parked",
        |_: &u32, m: &pkprof_srv_mark| !stale(m.since_ns, at),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn entries_are_forgotten_after_sixty_expiries_of_at_least_a_second() {
        // (now, since, expire, stale)
        let cases = [
            (100 * S, 40 * S, S, false),
            (100 * S, 40 * S - 1, S, true),
            (61 * S, 0, 1_000, true),
            (60 * S, 0, 1_000, false),
            (S, 2 * S, S, false),
        ];
        for (now, since, expire_ns, want) in cases {
            assert_eq!(
                stale(since, &SweepAt { now, expire_ns }),
                want,
                "now {now} since {since}"
            );
        }
    }
}
