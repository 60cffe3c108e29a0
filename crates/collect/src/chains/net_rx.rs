//! The network receive chain's Rust side (src/bpf/chains/net_rx.bpf.h): receive softirq work
//! held on the socket (or, across CPUs, on the skb) until the thread that reads it is known.
//! Owns its programs and the sweeps of `socks` and `skb_held`: their held time is in flight,
//! and what waited past the expiry goes to KERNEL as expired.

use super::{first_missing, Chain, Setup, SweepAt, Swept, Verdict};
use crate::error::CollectError;
use crate::map_walk;
use crate::skel::types::{pkprof_held, pkprof_sock};
use crate::skel::{CpuAccountMaps, OpenCpuAccountSkel};

/// Tracepoints the chain needs; besides, one of the two send tracepoints (`SEND`).
const NEEDED: &[(&str, &str)] = &[
    ("net", "netif_rx"),
    ("net", "netif_receive_skb"),
    ("tcp", "tcp_probe"),
    ("udp", "udp_fail_queue_rcv_skb"),
    ("sock", "sk_data_ready"),
    ("sock", "sock_recv_length"),
];

/// The TCP-only send tracepoint, used when present (else every send runs a program), and the
/// generic one.
const TCP_SEND: (&str, &str) = ("tcp", "tcp_sendmsg_locked");
const SEND: (&str, &str) = ("sock", "sock_send_length");

pub(crate) static CHAIN: Chain = Chain {
    name: "net_rx",
    title: "network receive",
    unattributed: "receive softirq time goes to KERNEL",
    opt_in: false,
    missing: |index| {
        first_missing(index, NEEDED).or_else(|| {
            let has = |(c, e): (&str, &str)| index.has(c, e);
            (!has(TCP_SEND) && !has(SEND)).then(|| format!("{}:{}", SEND.0, SEND.1))
        })
    },
    configure,
    programs: |p| {
        vec![
            &p.on_netif_rx,
            &p.on_netif_receive_skb,
            &p.on_tcp_probe,
            &p.on_udp_fail_queue_rcv_skb,
            &p.on_sk_data_ready,
            &p.on_sock_recv_length,
            &p.on_tcp_sendmsg_locked,
            &p.on_sock_send_length,
        ]
    },
    sweep,
};

fn configure(open: &mut OpenCpuAccountSkel<'static>, s: &Setup) -> Result<(), libbpf_rs::Error> {
    // skb_held keeps its size from net_rx.bpf.h: it holds only skbs between two CPUs.
    open.maps.socks.set_max_entries(s.max_tags)?;
    let (p, on) = (&mut open.progs, s.on);
    for prog in [
        &mut p.on_netif_rx,
        &mut p.on_netif_receive_skb,
        &mut p.on_tcp_probe,
        &mut p.on_udp_fail_queue_rcv_skb,
        &mut p.on_sk_data_ready,
        &mut p.on_sock_recv_length,
    ] {
        prog.set_autoload(on);
    }
    let tcp_send = s.index.has(TCP_SEND.0, TCP_SEND.1);
    p.on_tcp_sendmsg_locked.set_autoload(on && tcp_send);
    p.on_sock_send_length.set_autoload(on && !tcp_send);
    Ok(())
}

/// A socket's receive time: held while its reader may still come; expired once it waited past
/// the expiry (sockets that get no more traffic are expired here, busy ones by BPF); forgotten
/// when it holds nothing and has been idle ten expiries (closed or idle socket).
pub(crate) fn sock_verdict(s: &pkprof_sock, at: &SweepAt) -> Verdict {
    if s.pending_ns > 0 && at.now.saturating_sub(s.first_ns) > at.expire_ns {
        Verdict::Expire
    } else if s.pending_ns == 0 && at.now.saturating_sub(s.last_ns) > 10 * at.expire_ns {
        Verdict::Forget
    } else {
        Verdict::Hold
    }
}

/// Receive work held on an skb handed to another CPU (RPS): in flight until the expiry, then
/// expired (the skb never showed up again).
pub(crate) fn held_skb_verdict(h: &pkprof_held, at: &SweepAt) -> Verdict {
    if at.now.saturating_sub(h.since_ns) > at.expire_ns {
        Verdict::Expire
    } else {
        Verdict::Hold
    }
}

fn sweep(
    maps: &CpuAccountMaps<'static>,
    at: &SweepAt,
    out: &mut Swept,
) -> Result<(), CollectError> {
    map_walk::sweep(&maps.socks, "socks", |_: &u64, s: &pkprof_sock| {
        out.count(sock_verdict(s, at), s.pending_ns)
    })?;
    map_walk::sweep(&maps.skb_held, "skb_held", |_: &u64, h: &pkprof_held| {
        out.count(held_skb_verdict(h, at), h.ns)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn sockets_hold_expire_or_are_forgotten() {
        let at = SweepAt {
            now: 100 * S,
            expire_ns: S,
        };
        // (pending_ns, first_ns, last_ns, verdict)
        let cases = [
            (500, 99 * S + 1, 99 * S + 1, Verdict::Hold),
            (500, 99 * S, 99 * S, Verdict::Hold), // exactly the expiry: not past it
            (500, 99 * S - 1, 99 * S + 5, Verdict::Expire),
            (500, 0, 100 * S, Verdict::Expire),
            (0, 0, 90 * S, Verdict::Hold), // idle ten expiries exactly: kept
            (0, 0, 90 * S - 1, Verdict::Forget),
            (0, 0, 0, Verdict::Forget),
            // Stamps after `now` (a read racing a credit) never expire.
            (500, 101 * S, 101 * S, Verdict::Hold),
        ];
        for (pending_ns, first_ns, last_ns, verdict) in cases {
            let s = pkprof_sock {
                pending_ns,
                first_ns,
                last_ns,
                ..Default::default()
            };
            assert_eq!(sock_verdict(&s, &at), verdict, "{s:?}");
        }
    }

    #[test]
    fn held_skbs_expire_after_the_expiry() {
        let at = SweepAt {
            now: 10 * S,
            expire_ns: S,
        };
        for (since_ns, verdict) in [
            (10 * S, Verdict::Hold),
            (9 * S, Verdict::Hold),
            (9 * S - 1, Verdict::Expire),
            (0, Verdict::Expire),
            (11 * S, Verdict::Hold),
        ] {
            let h = pkprof_held {
                ns: 42,
                since_ns,
                ..Default::default()
            };
            assert_eq!(held_skb_verdict(&h, &at), verdict, "since {since_ns}");
        }
    }

    #[test]
    fn a_sweep_sums_what_it_holds_and_counts_what_it_expires() {
        let at = SweepAt {
            now: 100 * S,
            expire_ns: S,
        };
        let socks = [
            (300, 99 * S + 1, 100 * S), // held
            (700, 0, 100 * S),          // expired
            (0, 0, 0),                  // forgotten
        ];
        let mut out = Swept::default();
        let kept: Vec<bool> = socks
            .iter()
            .map(|&(pending_ns, first_ns, last_ns)| {
                let s = pkprof_sock {
                    pending_ns,
                    first_ns,
                    last_ns,
                    ..Default::default()
                };
                out.count(sock_verdict(&s, &at), s.pending_ns)
            })
            .collect();
        assert_eq!(kept, [true, false, false]);
        assert_eq!(
            out,
            Swept {
                held_ns: 300,
                expired_ns: 700,
                expired_tags: 1
            }
        );
    }
}
