//! Accounting: from raw counter snapshots read out of the kernel to per-process / per-thread
//! figures of each refresh interval.
//!
//! Data flows one way: `collect` reads a [`Snapshot`]; an [`Accountant`] turns successive snapshots
//! into [`Interval`]s (deltas over the interval, cumulative totals, exited threads folded into their
//! process, filters, sort order); the `live` crate renders them. Nothing here needs root or a kernel.

pub mod accountant;
pub mod counters;
pub mod filter;
pub mod interval;
pub mod other_fns;
pub mod snapshot;
pub mod wall;

pub use accountant::Accountant;
pub use counters::{
    Counters, CpuCounters, LostCounters, CHAIN_NAMES, NR_CHAINS, NR_SOFTIRQS, SOFTIRQ_NAMES,
};
pub use filter::Filter;
pub use interval::{Buckets, CpuRow, Interval, ProgStat, Row, SelfUsage, SyscallRow, TagStats};
pub use other_fns::{name_other_fns, OtherFn, OtherFnSample};
pub use snapshot::{Snapshot, SyscallCount, ThreadSample, Unshown, SHORT_LIVED_PID};
pub use wall::{RunqHist, WallCounters, BLOCK_REASONS, NR_BLOCK_REASONS, RUNQ_HIST};
