//! The libbpf-cargo skeleton generated from src/bpf/cpu_account.bpf.c, and the `Plain` markers that
//! let ring/map bytes be viewed as its record types (all plain integers and arrays).
#![allow(clippy::all, non_camel_case_types, dead_code)]

include!(concat!(env!("OUT_DIR"), "/cpu_account.skel.rs"));

// SAFETY: these are #[repr(C)] structs of integers and integer arrays generated from pkprof.h;
// every bit pattern is a valid value.
unsafe impl plain::Plain for types::pkprof_thread {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_cpu {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_wall_cpu {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_other_fn_key {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_other_fn {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_syscall_key {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_syscall_stat {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_sock {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_held {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_owner {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_sample {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_link {}
// SAFETY: a pkprof.h record of plain integers.
unsafe impl plain::Plain for types::pkprof_py_proc {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_py_frame {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_exec {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_func_key {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_srv_key {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_srv_mark {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_srv_read {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_offcpu {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_offcpu_stats {}

// The accounting crate sizes its per-chain columns without the BPF types: keep it in step with the
// chain list (chains/chains.h; docs/design.md, "How a chain plugs in").
const _: () =
    assert!(types::pkprof_chain::PKPROF_NR_CHAINS.0 as usize == pkprof_accounting::NR_CHAINS);

// The wall chain's reasons and histogram as the accounting crate names and sizes them
// (docs/design.md, "Wall time").
const _: () = {
    use types::pkprof_block_reason as R;
    assert!(R::PKPROF_BLOCK_RUNNABLE.0 == 0);
    assert!(R::PKPROF_BLOCK_NR.0 as usize == pkprof_accounting::NR_BLOCK_REASONS + 1);
    assert!(R::PKPROF_BLOCK_IO.0 == 1 && R::PKPROF_BLOCK_NET.0 == 2 && R::PKPROF_BLOCK_IPC.0 == 3);
    assert!(R::PKPROF_BLOCK_LOCK.0 == 4 && R::PKPROF_BLOCK_SLEEP.0 == 5);
    assert!(R::PKPROF_BLOCK_POLL.0 == 6 && R::PKPROF_BLOCK_OTHER.0 == 7);
    assert!(types::pkprof_wall_hist::PKPROF_RUNQ_HIST.0 as usize == pkprof_accounting::RUNQ_HIST);
};
