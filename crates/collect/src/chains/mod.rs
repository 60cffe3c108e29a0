//! The chains' Rust side: each chain of attribution (docs/design.md, "How a chain plugs in") owns
//! its programs (named by their typed skeleton handles), the tracepoints it cannot work without,
//! and the sweeps of its maps at each read. [`CHAINS`] is the one list the loader and the reader
//! go through; adding a chain is one file here and one entry there.
//!
//! A kernel without a tracepoint a chain needs turns that chain off alone, before anything loads:
//! its programs are not loaded, what it would have attributed stays where the core puts it
//! (KERNEL, or the thread that ran it), and the collector reports it as a [`ChainOff`].
//!
//! Adding a chain, Rust side: a file `chains/<name>.rs` holding `pub(crate) static CHAIN: Chain`
//! (the tracepoints it needs in `missing`, its programs' autoload in `configure`, their typed
//! skeleton handles in `programs`, its maps' sweeps in `sweep`, each sweep decision a pure
//! function with a table test), then `pub(crate) mod <name>;` and `&<name>::CHAIN` in [`CHAINS`]
//! here. The loader and the reader name no chain's programs or maps.

pub(crate) mod block_io;
pub(crate) mod net_rx;
pub(crate) mod server;
pub(crate) mod wall;
pub(crate) mod workqueue;

use std::fmt;

use libbpf_rs::ProgramMut;

use crate::error::CollectError;
use crate::preflight::TracepointIndex;
use crate::skel::types::pkprof_owner;
use crate::skel::{CpuAccountMaps, CpuAccountProgs, OpenCpuAccountSkel};

/// Every chain, in the order the reader sweeps them.
pub(crate) static CHAINS: &[&Chain] = &[
    &net_rx::CHAIN,
    &block_io::CHAIN,
    &workqueue::CHAIN,
    &server::CHAIN,
    &wall::CHAIN,
];

/// One chain's Rust side.
pub(crate) struct Chain {
    /// As in file names and `PKPROF_TEST_HIDE_TRACEPOINTS` tests: "block_io".
    pub name: &'static str,
    /// As users read it: "block I/O".
    pub title: &'static str,
    /// What is not attributed while the chain is off.
    pub unattributed: &'static str,
    /// Runs only when asked for (`CollectorOptions::opt_in_chains`): its cost falls on events
    /// too frequent to pay for by default (docs/design.md, "How a chain plugs in").
    pub opt_in: bool,
    /// The first tracepoint the chain needs that `index` lacks ("category:event"), if any.
    pub missing: fn(&TracepointIndex) -> Option<String>,
    /// Sizes the chain's maps and sets which of its programs load (none when it is off).
    pub configure: fn(&mut OpenCpuAccountSkel<'static>, &Setup) -> Result<(), libbpf_rs::Error>,
    /// The chain's programs that attach to tracepoints (those not loaded are skipped).
    pub programs: for<'a> fn(&'a CpuAccountProgs<'static>) -> Vec<&'a ProgramMut<'static>>,
    /// Sweeps the chain's maps at a read.
    pub sweep: fn(&CpuAccountMaps<'static>, &SweepAt, &mut Swept) -> Result<(), CollectError>,
}

/// The first of `list` (category, event) that `index` lacks, as "category:event".
pub(crate) fn first_missing(index: &TracepointIndex, list: &[(&str, &str)]) -> Option<String> {
    list.iter()
        .find(|(c, e)| !index.has(c, e))
        .map(|(c, e)| format!("{c}:{e}"))
}

/// A chain turned off at start, and why: one line for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainOff {
    /// The chain, as users read it ("block I/O").
    pub chain: &'static str,
    /// The tracepoint missing, "category:event".
    pub tracepoint: String,
    /// What goes unattributed while it is off.
    pub unattributed: &'static str,
}

impl fmt::Display for ChainOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} chain off: tracepoint {} missing; {}",
            self.chain, self.tracepoint, self.unattributed
        )
    }
}

/// Splits [`CHAINS`] into those `index` has every tracepoint of, and those turned off. An opt-in
/// chain not named in `wanted` is in neither: it was not asked for.
pub(crate) fn plan(
    index: &TracepointIndex,
    wanted: &[&str],
) -> (Vec<&'static Chain>, Vec<ChainOff>) {
    let mut on = Vec::new();
    let mut off = Vec::new();
    for &chain in CHAINS {
        if chain.opt_in && !wanted.contains(&chain.name) {
            continue;
        }
        match (chain.missing)(index) {
            None => on.push(chain),
            Some(tracepoint) => off.push(ChainOff {
                chain: chain.title,
                tracepoint,
                unattributed: chain.unattributed,
            }),
        }
    }
    (on, off)
}

/// What a chain's `configure` needs to know.
pub(crate) struct Setup<'a> {
    /// Whether the chain runs (every tracepoint it needs is there).
    pub on: bool,
    pub index: &'a TracepointIndex,
    /// Capacity of each tag table (`CollectorOptions::max_tags`).
    pub max_tags: u32,
}

/// What a sweep needs to know.
pub(crate) struct SweepAt {
    /// CLOCK_MONOTONIC of this read.
    pub now: u64,
    /// Held time older than this is expired (`CollectorOptions::tag_expire_ns`).
    pub expire_ns: u64,
}

/// What the sweeps of one read found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    /// Time held for a beneficiary not known yet (in flight).
    pub held_ns: u64,
    /// Held time given up on this read (goes to KERNEL), and on how many tags.
    pub expired_ns: u64,
    pub expired_tags: u64,
}

/// What a sweep does with one entry holding time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keep it; its time is in flight.
    Hold,
    /// Its time waited too long for its beneficiary: count it as expired, delete the entry.
    Expire,
    /// An entry holding nothing, idle for long: delete it.
    Forget,
}

impl Swept {
    /// Counts an entry holding `ns` under `verdict`; returns whether the entry stays.
    pub(crate) fn count(&mut self, verdict: Verdict, ns: u64) -> bool {
        match verdict {
            Verdict::Hold => {
                self.held_ns = self.held_ns.saturating_add(ns);
                true
            }
            Verdict::Expire => {
                self.expired_ns = self.expired_ns.saturating_add(ns);
                self.expired_tags += 1;
                false
            }
            Verdict::Forget => false,
        }
    }
}

/// Whether an owner entry (a block request never completed, a work item never run: cancelled)
/// is old enough to forget, so that its table cannot fill up. Such entries carry no time.
pub(crate) fn owner_stale(o: &pkprof_owner, at: &SweepAt) -> bool {
    at.now.saturating_sub(o.since_ns) > 60 * at.expire_ns.max(1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn owners_are_forgotten_after_sixty_expiries_of_at_least_a_second() {
        // (now, since, expire, stale)
        let cases = [
            (100 * S, 50 * S, S, false),
            (100 * S, 40 * S, S, false),
            (100 * S, 40 * S - 1, S, true),
            (100 * S, 0, 2 * S, false),
            (200 * S, 0, 2 * S, true),
            // An expiry under a second still waits a minute.
            (61 * S, 0, 1_000, true),
            (60 * S, 0, 1_000, false),
            // A stamp after `now` (read raced a new entry) is never stale.
            (S, 2 * S, S, false),
        ];
        for (now, since, expire_ns, stale) in cases {
            let o = pkprof_owner {
                since_ns: since,
                ..Default::default()
            };
            let at = SweepAt { now, expire_ns };
            assert_eq!(owner_stale(&o, &at), stale, "now {now} since {since}");
        }
    }

    #[test]
    fn swept_counts_by_verdict() {
        let mut s = Swept::default();
        assert!(s.count(Verdict::Hold, 5));
        assert!(!s.count(Verdict::Expire, 7));
        assert!(!s.count(Verdict::Forget, 0));
        assert!(s.count(Verdict::Hold, u64::MAX));
        assert_eq!(
            s,
            Swept {
                held_ns: u64::MAX,
                expired_ns: 7,
                expired_tags: 1
            }
        );
    }

    #[test]
    fn the_off_line_names_the_chain_the_tracepoint_and_the_loss() {
        let off = ChainOff {
            chain: block_io::CHAIN.title,
            tracepoint: "block:block_rq_issue".into(),
            unattributed: block_io::CHAIN.unattributed,
        };
        assert_eq!(
            off.to_string(),
            "block I/O chain off: tracepoint block:block_rq_issue missing; \
             block completions go to KERNEL"
        );
    }

    /// A fake tracefs `events` directory holding `present`.
    fn events_dir(tag: &str, present: &[&str]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("pkprof-chains-{tag}-{}", std::process::id()));
        for tp in present {
            let (c, e) = tp.split_once(':').unwrap();
            std::fs::create_dir_all(dir.join(c).join(e)).unwrap();
        }
        dir
    }

    const ALL: &[&str] = &[
        "net:netif_rx",
        "net:netif_receive_skb",
        "tcp:tcp_probe",
        "udp:udp_fail_queue_rcv_skb",
        "sock:sk_data_ready",
        "sock:sock_recv_length",
        "tcp:tcp_sendmsg_locked",
        "sock:sock_send_length",
        "block:block_rq_issue",
        "block:block_rq_complete",
        "workqueue:workqueue_queue_work",
        "workqueue:workqueue_execute_start",
        "workqueue:workqueue_execute_end",
        "sched:sched_wakeup",
        "sched:sched_wakeup_new",
        "raw_syscalls:sys_enter",
        "raw_syscalls:sys_exit",
    ];

    #[test]
    fn a_missing_tracepoint_turns_off_its_chain_alone() {
        /// (tracepoints absent, chains on, (chain off, tracepoint named)).
        type Case = (
            &'static [&'static str],
            &'static [&'static str],
            Option<(&'static str, &'static str)>,
        );
        let cases: &[Case] = &[
            (
                &[],
                &["net_rx", "block_io", "workqueue", "server", "wall"],
                None,
            ),
            (
                &["sched:sched_wakeup_new"],
                &["net_rx", "block_io", "workqueue", "server"],
                Some(("wall time", "sched:sched_wakeup_new")),
            ),
            (
                &["block:block_rq_issue"],
                &["net_rx", "workqueue", "server", "wall"],
                Some(("block I/O", "block:block_rq_issue")),
            ),
            (
                &["workqueue:workqueue_execute_end"],
                &["net_rx", "block_io", "server", "wall"],
                Some(("workqueue", "workqueue:workqueue_execute_end")),
            ),
            (
                &["sock:sk_data_ready"],
                &["block_io", "workqueue", "server", "wall"],
                Some(("network receive", "sock:sk_data_ready")),
            ),
            // One send tracepoint is enough; without both the chain is off.
            (
                &["tcp:tcp_sendmsg_locked"],
                &["net_rx", "block_io", "workqueue", "server", "wall"],
                None,
            ),
            (
                &["sock:sock_send_length"],
                &["net_rx", "block_io", "workqueue", "server", "wall"],
                None,
            ),
            (
                &["tcp:tcp_sendmsg_locked", "sock:sock_send_length"],
                &["block_io", "workqueue", "server", "wall"],
                Some(("network receive", "sock:sock_send_length")),
            ),
            (
                &["raw_syscalls:sys_exit"],
                &["net_rx", "block_io", "workqueue", "wall"],
                Some(("server", "raw_syscalls:sys_exit")),
            ),
        ];
        for (i, (absent, on, off)) in cases.iter().enumerate() {
            let present: Vec<&str> = ALL
                .iter()
                .copied()
                .filter(|t| !absent.contains(t))
                .collect();
            let dir = events_dir(&i.to_string(), &present);
            let (chains_on, chains_off) =
                plan(&TracepointIndex::of_events_dir(dir.clone()), &["server"]);
            std::fs::remove_dir_all(dir).unwrap();
            let names: Vec<&str> = chains_on.iter().map(|c| c.name).collect();
            assert_eq!(names, *on, "without {absent:?}");
            let got: Vec<(&str, &str)> = (chains_off.iter())
                .map(|o| (o.chain, o.tracepoint.as_str()))
                .collect();
            assert_eq!(
                got,
                off.iter().copied().collect::<Vec<_>>(),
                "without {absent:?}"
            );
        }
    }

    #[test]
    fn an_opt_in_chain_runs_only_when_asked() {
        let dir = events_dir("opt-in", ALL);
        let index = TracepointIndex::of_events_dir(dir.clone());
        let names = |wanted: &[&str]| {
            let (on, off) = plan(&index, wanted);
            assert!(off.is_empty());
            on.iter().map(|c| c.name).collect::<Vec<_>>()
        };
        assert_eq!(names(&[]), ["net_rx", "block_io", "workqueue", "wall"]);
        assert_eq!(
            names(&["server"]),
            ["net_rx", "block_io", "workqueue", "server", "wall"]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn chain_names_are_distinct() {
        let mut names: Vec<_> = CHAINS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CHAINS.len());
    }
}
