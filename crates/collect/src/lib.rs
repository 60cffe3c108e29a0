//! Collection: pkprof's BPF programs (src/bpf/) and the Rust side that loads, attaches and reads them.
//!
//! The public surface is small: a [`Collector`] started from [`CollectorOptions`] reads the
//! accounting as a `pkprof_accounting::Snapshot` (`Collector::snapshot`), and with
//! `CollectorOptions::record` also samples stacks for `pkprof record` ([`record`]: its ring of
//! [`RecordEvent`]s, targets, losses and exact call counts); a [`syscall_graph::SyscallTracer`]
//! counts syscall transitions for `pkprof syscalls`. [`monotonic_ns`] is the clock every kernel
//! stamp is in, [`syscall_name`] names syscall numbers as the snapshot does, and every failure is
//! a [`CollectError`].
//!
//! Inside, `preflight` checks privileges and tracepoints before anything is loaded, `skeleton` is
//! the one open/configure/load/attach path of both BPF objects, `loader` configures the accounting
//! object, `chains` holds each attribution chain's programs and map sweeps (docs/design.md,
//! "How a chain plugs in"), `map_walk` is the one walk-decode-delete of a BPF map, `reader`
//! turns the kernel maps into a `Snapshot`, and `short_lived` folds the processes born and gone
//! between two reads into one row where asked (the agent).

mod chains;
mod clock;
mod error;
mod loader;
mod map_walk;
mod preflight;
mod progstats;
mod reader;
pub mod record;
mod short_lived;
mod skel;
mod skeleton;
pub mod syscall_graph;
mod tracefs;

pub use chains::ChainOff;
pub use clock::monotonic_ns;
pub use error::{Cause, CollectError};
pub use loader::{
    Collector, CollectorOptions, DEFAULT_MAX_TAGS, DEFAULT_MAX_THREADS, DEFAULT_TAG_EXPIRE_S,
};
pub use reader::syscall_name;
pub use record::{
    EventRing, FuncCountRead, FuncProbe, OffCpuConfig, OffCpuCounts, OffCpuUserStacks, PyProc,
    RecordConfig, RecordEvent, RecordLost,
};
pub use tracefs::Tracefs;
