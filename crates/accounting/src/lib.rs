//! Accounting: from raw counter snapshots read out of the kernel to per-process / per-thread frames.
//!
//! Data flows one way: `collect` reads a [`Snapshot`]; an [`Accountant`] turns successive snapshots
//! into [`Frame`]s (interval deltas, cumulative totals, exited threads folded into their process,
//! filters, sort order); the `live` crate renders frames. Nothing here needs root or a kernel.

pub mod accountant;
pub mod counters;
pub mod filter;
pub mod frame;
pub mod snapshot;

pub use accountant::Accountant;
pub use counters::{
    Counters, CpuCounters, LostCounters, CHAIN_NAMES, NR_CHAINS, NR_SOFTIRQS, SOFTIRQ_NAMES,
};
pub use filter::Filter;
pub use frame::{Buckets, CpuRow, Frame, ProgStat, Row, SelfUsage, SyscallRow, TagStats};
pub use snapshot::{Snapshot, SyscallCount, ThreadSample};
