//! The block I/O chain's Rust side (src/bpf/chains/block_io.bpf.h): a request's completion
//! softirq billed to the thread that issued it. Owns its two programs and the sweep of `reqs`.

use super::{first_missing, owner_stale, Chain, SweepAt, Swept};
use crate::error::CollectError;
use crate::map_walk;
use crate::preflight::TracepointIndex;
use crate::skel::types::pkprof_owner;
use crate::skel::{CpuAccountMaps, OpenCpuAccountProgs};

pub(crate) static CHAIN: Chain = Chain {
    name: "block_io",
    title: "block I/O",
    unattributed: "block completions go to KERNEL",
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

fn configure(p: &mut OpenCpuAccountProgs<'static>, _: &TracepointIndex, on: bool) {
    p.on_block_rq_issue.set_autoload(on);
    p.on_block_rq_complete.set_autoload(on);
}

/// Forgets requests never completed, after a long while.
fn sweep(maps: &CpuAccountMaps<'static>, at: &SweepAt, _: &mut Swept) -> Result<(), CollectError> {
    map_walk::sweep(&maps.reqs, "reqs", |_: &u64, o: &pkprof_owner| {
        !owner_stale(o, at)
    })
}
