//! The libbpf-cargo skeleton generated from src/bpf/syscall_graph.bpf.c, and the `Plain` markers
//! that let its map bytes be viewed as the record types of pkprof.h.
#![allow(clippy::all, non_camel_case_types, dead_code)]

include!(concat!(env!("OUT_DIR"), "/syscall_graph.skel.rs"));

// SAFETY: #[repr(C)] structs of integers and integer arrays generated from pkprof.h; every bit
// pattern is a valid value.
unsafe impl plain::Plain for types::pkprof_sc_edge_key {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_sc_edge {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_sc_site {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_sc_comm {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_sc_lost {}
// SAFETY: as above.
unsafe impl plain::Plain for types::pkprof_sc_event {}
