//! The profile model: what `pkprof record` writes and every report reads.
//!
//! Data flows one way: collection produces labelled samples, symbolization turns their addresses
//! into [`Frame`]s, a [`ProfileBuilder`] interns frames and stacks and aggregates samples into a
//! [`Profile`], and reports read the profile. Nothing here needs root or a kernel.
//!
//! [`format`] saves and loads profiles as files (docs/profile-format.md); [`synthetic`] makes
//! profiles of any size for tests and benchmarks.

pub mod builder;
pub mod cgroup;
pub mod format;
pub mod model;
pub mod synthetic;

pub use builder::ProfileBuilder;

/// The interning tables' hash map: foldhash with a fixed seed, as the report and OTLP crates use
/// (SipHash of frames, stacks and strings was a fifth of merging an hour of the agent's store).
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
pub use cgroup::CgroupLabels;
pub use format::{load, read_profile, save, write_profile, FormatError};
pub use model::*;
