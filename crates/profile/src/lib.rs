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
pub use cgroup::CgroupLabels;
pub use format::{load, read_profile, save, write_profile, FormatError};
pub use model::*;

/// The interning tables' hash map (frames, stacks, sample groups, strings): foldhash, as the
/// report and OTLP crates use (SipHash was a fifth of merging an hour of the agent's store).
/// Seeded at random per map: ids are handed out in first-use order, never in hash order, and the
/// keys include names any local user can choose (the agent builds profiles as root).
pub(crate) type InternMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
