//! Fleet push: a pkprof [`Profile`](pkprof_profile::Profile) (one agent window, or a whole
//! recording) as OTLP profiles (`v1development`), and a bounded pusher that sends them to an
//! OpenTelemetry Collector over OTLP/HTTP (docs/design.md, "Fleet push: OTLP profiles").
//! Nothing here needs root or a kernel.
//!
//! - [`convert`]: the profile as an `ExportProfilesServiceRequest` (resources per process, sample
//!   attributes, frame kinds, build-ids, the exact CPU time profile);
//! - [`pusher`]: the queue, the sender thread, back-off and the counts of what was sent or dropped.
//!
//! The wire types come from the `opentelemetry-proto` crate, pinned together with the collector
//! the tests run (scripts/otelcol/builder.yaml): the profiles signal is still in development.

pub mod convert;
mod dictionary;
pub mod pusher;

pub use convert::{to_request, CgroupLabels, ConvertOptions, FRAME_TYPE};
/// The wire types, for callers that read requests back (tests, tools).
pub use opentelemetry_proto::tonic as proto;
pub use pusher::{encode, PushConfig, PushError, PushStats, Pusher, PROFILES_PATH};
