//! Reports and exporters: everything that reads a [`Profile`](pkprof_profile::Profile) and writes
//! what people read or load into other tools. Nothing here needs root or a kernel.
//!
//! - [`names`]: how frames are named (`PIDu:func` / `PIDk:func`, or plain names);
//! - [`select`]: filters and grouping applied before any report;
//! - [`graph`]: the call graph measured from the sampled stacks (self, children, cycles);
//! - [`flat`], [`callgraph`], [`dcpi`], [`diff`]: the text reports;
//! - [`export`]: one module per exchange format behind the [`export::Exporter`] trait.

pub mod error;
pub mod export;
pub mod names;

pub use error::ReportError;
