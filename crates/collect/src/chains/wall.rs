//! The wall chain's Rust side (src/bpf/chains/wall.bpf.h; docs/design.md, "Wall time"): the
//! program that starts following a new thread at its first wakeup (its switch hooks run inside
//! the core's switch program; no program runs at other wakeups), and the read of its per-CPU
//! register of switch-ins not yet applied to their entries. It bills no one and has nothing to
//! sweep: its state lives in each thread entry's `wall`, read with the entry (`reader.rs`).

use std::collections::HashMap;

use super::{first_missing, Chain, Setup, SweepAt, Swept};
use crate::error::CollectError;
use crate::map_walk;
use crate::skel::types::{pkprof_cpu, pkprof_other_fn, pkprof_other_fn_key, pkprof_wall_cpu};
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
        // OTHER's functions: the scheduler's text, to skip on an OTHER switch-out's stack.
        if let Some(t) = std::fs::read_to_string("/proc/kallsyms")
            .ok()
            .and_then(|k| sched_text_of(&k))
        {
            ro.sched_text_start = t.sched.0;
            ro.sched_text_end = t.sched.1;
            ro.switch_tp_start = t.switch_tp.0;
            ro.switch_tp_end = t.switch_tp.1;
        }
    }
    open.progs.on_sched_wakeup_new.set_autoload(s.on);
    Ok(())
}

/// What an OTHER switch-out skips on its kernel stack, from /proc/kallsyms: the kernel's
/// `.sched.text` and the switch tracepoint's `__traceiter_sched_switch` (to the next symbol).
#[derive(Debug, PartialEq)]
struct SchedText {
    sched: (u64, u64),
    switch_tp: (u64, u64),
}

/// None when the scheduler's text is not there or hidden (kptr_restrict reads 0): OTHER then
/// has no function. The tracepoint's range is (0, 0) when not found.
fn sched_text_of(kallsyms: &str) -> Option<SchedText> {
    let (mut start, mut end, mut tp) = (None, None, (0, 0));
    let mut tp_open = false;
    for line in kallsyms.lines() {
        let mut f = line.split_whitespace();
        let (Some(addr), Some(_), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        if tp_open && addr > tp.0 {
            tp.1 = addr;
            tp_open = false;
        }
        match name {
            "__sched_text_start" => start = Some(addr),
            "__sched_text_end" => end = Some(addr),
            "__traceiter_sched_switch" => {
                tp = (addr, 0);
                tp_open = true;
            }
            _ => {}
        }
    }
    if tp.1 == 0 || tp.0 == 0 {
        tp = (0, 0);
    }
    match (start?, end?) {
        (s, e) if s != 0 && e > s => Some(SchedText {
            sched: (s, e),
            switch_tp: tp,
        }),
        _ => None,
    }
}

/// OTHER blocked time by (thread, kernel return address) since attach (`wall_other_fns`,
/// docs/design.md "Wall time"); the entries of `finished` threads are then deleted (this read
/// is their last, as for their thread entries).
pub(crate) fn other_fns(
    maps: &CpuAccountMaps<'static>,
    finished: &[u32],
) -> Result<Vec<pkprof_accounting::OtherFnSample>, CollectError> {
    let mut out = Vec::new();
    let mut gone = Vec::new();
    for (k, v) in map_walk::decoded::<_, pkprof_other_fn_key, pkprof_other_fn>(
        &maps.wall_other_fns,
        "wall_other_fns",
    )? {
        out.push(pkprof_accounting::OtherFnSample {
            tid: k.tid,
            pid: k.pid,
            addr: k.func,
            ns: v.ns,
            count: v.count,
        });
        if finished.contains(&k.tid) {
            gone.push(k);
        }
    }
    map_walk::delete(
        &maps.wall_other_fns,
        "wall_other_fns",
        gone.iter().map(key_bytes),
    )?;
    Ok(out)
}

fn key_bytes(k: &pkprof_other_fn_key) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&k.tid.to_ne_bytes());
    b[4..8].copy_from_slice(&k.pid.to_ne_bytes());
    b[8..].copy_from_slice(&k.func.to_ne_bytes());
    b
}

/// Nothing to sweep: the chain keeps no map of its own.
fn sweep(_: &CpuAccountMaps<'static>, _: &SweepAt, _: &mut Swept) -> Result<(), CollectError> {
    Ok(())
}

/// The switch-ins not yet applied to their threads' entries (each CPU entry's register `wall`,
/// docs/design.md "Wall time"), by thread: for the reader, which closes those threads' off
/// periods at them. Empty while the chain is off.
pub(crate) fn switched_in(cpus: &[pkprof_cpu]) -> HashMap<u32, pkprof_wall_cpu> {
    cpus.iter()
        .map(|c| c.wall)
        .filter(|r| r.tid != 0 && r.in_ns != 0)
        .map(|r| (r.tid, r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{sched_text_of, SchedText};

    #[test]
    fn sched_text_from_kallsyms() {
        let k = "ffffffff81000000 T _stext\n\
                 ffffffff813a50b0 T __traceiter_sched_switch\n\
                 ffffffff813a5110 T __probestub_sched_switch\n\
                 ffffffff82265800 T __sched_text_start\n\
                 ffffffff82265810 t __schedule\n\
                 ffffffff8226e522 T __sched_text_end\n";
        assert_eq!(
            sched_text_of(k),
            Some(SchedText {
                sched: (0xffffffff82265800, 0xffffffff8226e522),
                switch_tp: (0xffffffff813a50b0, 0xffffffff813a5110),
            })
        );
        // Hidden addresses (kptr_restrict) read as 0: no range.
        let hidden = "0000000000000000 T __sched_text_start\n0000000000000000 T __sched_text_end\n";
        assert_eq!(sched_text_of(hidden), None);
        assert_eq!(sched_text_of("ffffffff81000000 T _stext\n"), None);
    }
}
