//! The profile model: what `pkprof record` writes and every report reads.
//!
//! Data flows one way: collection produces labelled samples, symbolization turns their addresses
//! into [`Frame`]s, a [`ProfileBuilder`] interns frames and stacks and aggregates samples into a
//! [`Profile`], and reports read the profile. Nothing here needs root or a kernel.

pub mod builder;
pub mod model;

pub use builder::ProfileBuilder;
pub use model::*;
