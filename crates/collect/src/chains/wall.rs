//! The wall chain's Rust side (src/bpf/chains/wall.bpf.h; docs/design.md, "Wall time"): the
//! program that starts following a new thread at its first wakeup (its switch hooks run inside
//! the core's switch program; no program runs at other wakeups). It bills no one and holds nothing to sweep: its state lives in each thread
//! entry's `wall` and is read with the entry (`reader.rs`).

use super::{first_missing, Chain, Setup, SweepAt, Swept};
use crate::error::CollectError;
use crate::skel::{CpuAccountMaps, OpenCpuAccountSkel};

pub(crate) static CHAIN: Chain = Chain {
    name: "wall",
    title: "wall time",
    unattributed: "blocked time is not told from runqueue wait (all off-CPU time is blocked)",
    opt_in: false,
    missing: |index| {
        first_missing(index, &[("sched", "sched_wakeup_new")])
    },
    configure,
    programs: |p| vec![&p.on_sched_wakeup_new],
    sweep,
};

fn configure(open: &mut OpenCpuAccountSkel<'static>, s: &Setup) -> Result<(), libbpf_rs::Error> {
    // The switch hooks run inside the core's program: off with the chain.
    if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
        ro.wall_on = s.on;
    }
    open.progs.on_sched_wakeup_new.set_autoload(s.on);
    Ok(())
}

/// Nothing to sweep: the chain keeps no map of its own.
fn sweep(_: &CpuAccountMaps<'static>, _: &SweepAt, _: &mut Swept) -> Result<(), CollectError> {
    Ok(())
}
