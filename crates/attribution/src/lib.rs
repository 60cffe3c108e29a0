//! Attribution of stack samples to the process they served.
//!
//! Collection hands over [`SampleEvent`]s and [`LinkEvent`]s read from the kernel. A sample taken
//! under a served-event tag is *held* ([`Holds`]) until link events say whose work it was, or until
//! it expires to KERNEL; [`TargetSet`] then labels every sample with its bucket (a profiled
//! process, OTHER, KERNEL or IDLE). Nothing here needs root or a kernel.

pub mod events;
pub mod holds;
pub mod targets;

pub use events::{
    LinkEvent, LinkTarget, OffCpuEvent, PyRawFrame, PyWalk, SampleContext, SampleEvent, Served,
    WakerEvent,
};
pub use holds::{Holds, Resolution};
/// Why a sample's user stack stops early (the profile's type, carried by [`SampleEvent`]).
pub use pkprof_profile::{BlockReason, Truncation};
pub use targets::TargetSet;
