//! Reports and exporters: everything that reads a [`Profile`](pkprof_profile::Profile) and writes
//! what people read or load into other tools. Nothing here needs root or a kernel.
//!
//! - [`counts`]: the exact counts (syscalls, counted functions) as routines;
//! - [`header`]: what every report says first (losses, samples against the exact CPU time);
//! - [`format`]: the number formats the reports share (thousands, percentages, `%g`);
//! - [`names`]: how frames are named (`PIDu:func` / `PIDk:func`, or plain names);
//! - [`kind`]: which sample kinds (on-CPU, off-CPU, both) the reports see;
//! - [`select`]: filters and grouping applied before any report;
//! - `stacks`: samples folded into named stacks, for the call graph and the HTML export;
//! - [`graph`]: the call graph measured from the sampled stacks (self, children, cycles);
//! - [`flat`], [`callgraph`], [`dcpi`], [`diff`]: the text reports;
//! - [`export`]: one module per exchange format behind the [`export::Exporter`] trait.

pub mod callgraph;
pub mod counts;
pub mod dcpi;
pub mod diff;
pub mod error;
pub mod export;
pub mod flat;
pub mod format;
pub mod graph;
pub mod header;
pub mod kind;
pub mod names;
pub mod select;
mod stacks;

/// The hash map of the hot paths (millions of look-ups on small integer keys, where SipHash was a
/// third to a half of a report's time): foldhash, with a fixed seed so that runs are identical.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

pub use callgraph::write_callgraph;
pub use dcpi::{write_dcpi, DcpiTable};
pub use diff::write_diff;
pub use error::ReportError;
pub use flat::write_flat;
pub use graph::CallGraph;
pub use select::{SelectOptions, Selection};
