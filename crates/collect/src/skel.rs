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
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_func_key {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_offcpu {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_offcpu_stats {}

// The accounting crate sizes its per-chain columns without the BPF types: keep it in step with the
// chain list (chains/chains.h; docs/design.md, "How a chain plugs in").
const _: () =
    assert!(types::pkprof_chain::PKPROF_NR_CHAINS.0 as usize == pkprof_accounting::NR_CHAINS);
// ... and in its order: `CHAIN_NAMES` names the served slots by index, so a reordered chain list
// fails the build here instead of swapping two columns.
const _: () = {
    use types::pkprof_chain as Chain;
    assert!(Chain::PKPROF_CHAIN_NET.0 == 0);
    assert!(Chain::PKPROF_CHAIN_BLOCK.0 == 1);
    assert!(Chain::PKPROF_CHAIN_WORKQ.0 == 2);
};
