//! The workqueue chain's Rust side (src/bpf/chains/workqueue.bpf.h): a kworker's execution of a
//! work item billed to the thread that queued it. Owns its three programs and the sweep of
//! `works`.

use super::{first_missing, owner_stale, Chain, SweepAt, Swept};
use crate::error::CollectError;
use crate::map_walk;
use crate::preflight::TracepointIndex;
use crate::skel::types::pkprof_owner;
use crate::skel::{CpuAccountMaps, OpenCpuAccountProgs};

pub(crate) static CHAIN: Chain = Chain {
    name: "workqueue",
    title: "workqueue",
    unattributed: "work items stay the kworkers' own time (KERNEL)",
    missing: |index| {
        first_missing(
            index,
            &[
                ("workqueue", "workqueue_queue_work"),
                ("workqueue", "workqueue_execute_start"),
                ("workqueue", "workqueue_execute_end"),
            ],
        )
    },
    configure,
    programs: |p| {
        vec![
            &p.on_workqueue_queue_work,
            &p.on_workqueue_execute_start,
            &p.on_workqueue_execute_end,
        ]
    },
    sweep,
};

fn configure(p: &mut OpenCpuAccountProgs<'static>, _: &TracepointIndex, on: bool) {
    p.on_workqueue_queue_work.set_autoload(on);
    p.on_workqueue_execute_start.set_autoload(on);
    p.on_workqueue_execute_end.set_autoload(on);
}

/// Forgets work items never run (cancelled), after a long while.
fn sweep(maps: &CpuAccountMaps<'static>, at: &SweepAt, _: &mut Swept) -> Result<(), CollectError> {
    map_walk::sweep(&maps.works, "works", |_: &u64, o: &pkprof_owner| {
        !owner_stale(o, at)
    })
}
