//! The workqueue chain's Rust side (src/bpf/chains/workqueue.bpf.h): a kworker's execution of a
//! work item billed to the thread that queued it. Owns its three programs and the sweep of
//! `works`.

use super::{first_missing, owner_stale, Chain, Setup, SweepAt, Swept};
use crate::error::CollectError;
use crate::map_walk;
use crate::skel::types::pkprof_owner;
use crate::skel::{CpuAccountMaps, OpenCpuAccountSkel};

pub(crate) static CHAIN: Chain = Chain {
    name: "workqueue",
    title: "workqueue",
    unattributed: "work items stay the kworkers' own time (KERNEL)",
    opt_in: false,
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

fn configure(open: &mut OpenCpuAccountSkel<'static>, s: &Setup) -> Result<(), libbpf_rs::Error> {
    open.maps.works.set_max_entries(s.max_tags)?;
    let p = &mut open.progs;
    p.on_workqueue_queue_work.set_autoload(s.on);
    p.on_workqueue_execute_start.set_autoload(s.on);
    p.on_workqueue_execute_end.set_autoload(s.on);
    Ok(())
}

/// Forgets work items never run (cancelled), after a long while.
fn sweep(maps: &CpuAccountMaps<'static>, at: &SweepAt, _: &mut Swept) -> Result<(), CollectError> {
    map_walk::sweep(&maps.works, "works", |_: &u64, o: &pkprof_owner| {
        !owner_stale(o, at)
    })
}
