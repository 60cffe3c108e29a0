//! The server chain's Rust side (src/bpf/chains/server.bpf.h; docs/design.md, "Server work
//! billed to its clients"): a thread's time after it reads a client's data from a pipe, a unix
//! socket or a loopback TCP connection, billed to that client. Owns its twelve syscall
//! tracepoint programs and the sweeps of `srv_writers`, `srv_reads` and `srv_parked`.

use super::{first_missing, Chain, Setup, SweepAt, Swept};
use crate::error::CollectError;
use crate::map_walk;
use crate::skel::types::{pkprof_srv_key, pkprof_srv_mark, pkprof_srv_read};
use crate::skel::{CpuAccountMaps, OpenCpuAccountSkel};

/// The syscalls whose entry (writes and reads) or exit (reads) the chain follows.
const WRITES: [&str; 4] = ["write", "writev", "sendto", "sendmsg"];
const READS: [&str; 4] = ["read", "readv", "recvfrom", "recvmsg"];

pub(crate) static CHAIN: Chain = Chain {
    name: "server",
    title: "server",
    unattributed: "a server's work for its clients stays the server's own time",
    missing,
    configure,
    programs: |p| {
        vec![
            &p.on_srv_enter_write,
            &p.on_srv_enter_writev,
            &p.on_srv_enter_sendto,
            &p.on_srv_enter_sendmsg,
            &p.on_srv_enter_read,
            &p.on_srv_enter_readv,
            &p.on_srv_enter_recvfrom,
            &p.on_srv_enter_recvmsg,
            &p.on_srv_exit_read,
            &p.on_srv_exit_readv,
            &p.on_srv_exit_recvfrom,
            &p.on_srv_exit_recvmsg,
        ]
    },
    sweep,
};

fn missing(index: &crate::preflight::TracepointIndex) -> Option<String> {
    let enters = WRITES
        .iter()
        .chain(READS.iter())
        .map(|s| format!("sys_enter_{s}"));
    let exits = READS.iter().map(|s| format!("sys_exit_{s}"));
    let names: Vec<String> = enters.chain(exits).collect();
    let list: Vec<(&str, &str)> = names.iter().map(|n| ("syscalls", n.as_str())).collect();
    first_missing(index, &list)
}

fn configure(open: &mut OpenCpuAccountSkel<'static>, s: &Setup) -> Result<(), libbpf_rs::Error> {
    open.maps.srv_writers.set_max_entries(s.max_tags)?;
    open.maps.srv_reads.set_max_entries(s.max_tags)?;
    open.maps.srv_parked.set_max_entries(s.max_tags)?;
    let p = &mut open.progs;
    for prog in [
        &mut p.on_srv_enter_write,
        &mut p.on_srv_enter_writev,
        &mut p.on_srv_enter_sendto,
        &mut p.on_srv_enter_sendmsg,
        &mut p.on_srv_enter_read,
        &mut p.on_srv_enter_readv,
        &mut p.on_srv_enter_recvfrom,
        &mut p.on_srv_enter_recvmsg,
        &mut p.on_srv_exit_read,
        &mut p.on_srv_exit_readv,
        &mut p.on_srv_exit_recvfrom,
        &mut p.on_srv_exit_recvmsg,
    ] {
        prog.set_autoload(s.on);
    }
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
