//! The block I/O chain's Rust side (src/bpf/chains/block_io.bpf.h): a request's completion
//! softirq billed to the thread that issued it. Owns its two programs and the sweep of `reqs`.

use super::{first_missing, owner_stale, Chain, Setup, SweepAt, Swept};
use crate::error::CollectError;
use crate::map_walk;
use crate::skel::types::pkprof_owner;
use crate::skel::{CpuAccountMaps, OpenCpuAccountSkel};

pub(crate) static CHAIN: Chain = Chain {
    name: "block_io",
    title: "block I/O",
    unattributed: "block completions go to KERNEL",
    opt_in: false,
    missing: |index| {
        first_missing(
            index,
            &[("block", "block_rq_issue"), ("block", "block_rq_complete")],
        )
    },
    configure,
    programs: |p| vec![&p.on_block_rq_issue, &p.on_block_rq_complete],
    sweep,
};

fn configure(open: &mut OpenCpuAccountSkel<'static>, s: &Setup) -> Result<(), libbpf_rs::Error> {
    open.maps.reqs.set_max_entries(s.max_tags)?;
    open.progs.on_block_rq_issue.set_autoload(s.on);
    open.progs.on_block_rq_complete.set_autoload(s.on);
    Ok(())
}

/// Forgets requests never completed, after a long while.
fn sweep(maps: &CpuAccountMaps<'static>, at: &SweepAt, _: &mut Swept) -> Result<(), CollectError> {
    map_walk::sweep(&maps.reqs, "reqs", |_: &u64, o: &pkprof_owner| {
        !owner_stale(o, at)
    })
}
