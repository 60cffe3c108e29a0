//! Collection: pkprof's BPF programs (src/bpf/) and the Rust side that loads, attaches and reads them.
//!
//! `preflight` checks privileges and tracepoints before anything is loaded, `loader` opens, configures,
//! loads and attaches the skeleton, `reader` turns the kernel maps into an accounting `Snapshot`, `record` adds
//! stack sampling, uprobe counts and the ring buffer of labelled samples for `pkprof record`.

pub mod error;
pub mod loader;
mod map_walk;
pub mod preflight;
pub mod progstats;
pub mod reader;
pub mod record;
mod skel;
pub mod syscall_graph;
pub mod tracefs;

pub use error::CollectError;
pub use loader::{Collector, CollectorOptions};
pub use record::{FuncProbe, RecordConfig};
