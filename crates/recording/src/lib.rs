//! The recording pipeline of `pkprof record`, from kernel events to a profile (docs/design.md,
//! "Data flow"): the recording loop labels each sample with the process it served (`session`,
//! through `pkprof-attribution`), aggregates labelled raw stacks (`aggregate`), describes the
//! recording (`meta`) and assembles the symbolized profile (`assemble`), with CPython frames
//! spliced in (`python`).
//!
//! The kernel side, the processes' maps and the symbolizer are traits (`sources`): the CLI wires
//! the BPF collector and the real symbolizer, tests wire fakes, so all of this runs without root.

pub mod aggregate;
pub mod assemble;
pub mod costs;
pub mod meta;
pub mod python;
pub mod session;
pub mod sources;

pub use aggregate::{Aggregate, Labels, RawStack};
pub use assemble::{profile, Extras};
pub use costs::{Histogram, SampleCosts};
pub use meta::KernelLost;
pub use session::{Recorded, Session, SessionError, StopReason};
pub use sources::{KernelSource, ProcessMaps, RingRecord, Symbols, UnwoundStack, UserRegs};
