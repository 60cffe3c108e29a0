//! The wall chain's Rust side (src/bpf/chains/wall.bpf.h; docs/design.md, "Wall time"): the
//! program that starts following a new thread at its first wakeup (its switch hooks run inside
//! the core's switch program; no program runs at other wakeups), and the read of its per-CPU
//! register of switch-ins not yet applied to their entries. It bills no one and has nothing to
//! sweep: its state lives in each thread entry's `wall`, read with the entry (`reader.rs`).

use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags};

use super::{first_missing, Chain, Setup, SweepAt, Swept};
use crate::error::CollectError;
use crate::map_walk;
use crate::skel::types::pkprof_wall_cpu;
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

/// The switch-ins not yet applied to their threads' entries (the per-CPU register `wall_cpus`,
/// docs/design.md "Wall time"), by thread: for the reader, which closes those threads' off
/// periods at them. Empty while the chain is off.
pub(crate) fn switched_in(
    maps: &CpuAccountMaps<'static>,
) -> Result<HashMap<u32, pkprof_wall_cpu>, CollectError> {
    let per_cpu = maps
        .wall_cpus
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(CollectError::reading("wall_cpus"))?
        .unwrap_or_default();
    let mut out = HashMap::new();
    for bytes in &per_cpu {
        let r: pkprof_wall_cpu =
            map_walk::decode(bytes).map_err(|e| CollectError::read("wall_cpus", e))?;
        if r.tid != 0 && r.in_ns != 0 {
            out.insert(r.tid, r);
        }
    }
    Ok(out)
}
