//! pprof exporter: a gzipped `profile.proto` (`go tool pprof`, pprof.me, Grafana Pyroscope...).
//!
//! - Two sample types, `samples/count` and `cpu/nanoseconds` (count x `meta.period_ns`, the CPU time
//!   a sample stands for); `cpu` is the default. `period_type` is `cpu/nanoseconds`, `period` the
//!   sampling period, `time_nanos` / `duration_nanos` the recording's wall-clock span.
//! - A view of off-CPU time (`report --kind off`) or of both kinds (`--kind both`), whose counts
//!   are microseconds, not samples ([`crate::kind`]), has one sample type: `off_cpu/nanoseconds`
//!   or `wall/nanoseconds` (on- plus off-CPU time), which is also its `period_type`.
//! - Stacks are written LEAF FIRST, as pprof wants (the model keeps them root first).
//! - Function names are the report's frame names (`1234u:main`, `1234k:vfs_read`, `KERNEL:...`),
//!   so `go tool pprof -top` keeps pkprof's labels; `system_name` is the plain function name and
//!   `filename` / `Line.line` the source position when recorded. A frame named for several owners
//!   (two PIDs running the same code) is one function and location per owner.
//! - A frame the model marks `inlined` shares a location with the frame it was inlined into: one
//!   `Location` with several `Line`s, innermost first, as pprof represents inlining.
//! - One `Mapping` per module (binary, shared object, `[kernel]`, kernel module, `[syscall]`),
//!   marked symbolized so pprof never goes looking for the files.
//! - Sample labels: `pid`, `tid`, `current_pid`, `cgroup_id` (numbers), `comm` (string), when not
//!   0 or empty (pprof reads a 0 or an empty string as no label: the KERNEL and IDLE buckets have
//!   no `pid`),
//!   `bucket` (`process`, `other`, `kernel`, `idle`) and `context` (`user`, `syscall`, `kernel-task`,
//!   `kworker`, `hardirq`, `softirq:NET_RX`, `idle`): `go tool pprof -tags`, `-tagfocus=comm=nginx`.
//! - Sample groups with a zero count are left out; values beyond `i64` saturate.
//! - `comment`s (`go tool pprof -comments`): the title, the recording, its losses (`lost: none`
//!   or each count) and, when idle was under-sampled, both idle figures ([`crate::header`]).
//!
//! Samples are encoded and compressed one by one, before the tables they refer to (protobuf lets a
//! message's fields come in any order), so memory stays proportional to the distinct stacks, not to
//! the samples.

mod tables;

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use pkprof_profile::Profile;

use super::{ExportOptions, Exporter};
use crate::kind::KindSelection;
pub(crate) use crate::names::{bucket_name, context_name};
use crate::ReportError;
use tables::Tables;

/// The types generated from `proto/profile.proto`.
#[allow(clippy::all, missing_docs)]
mod proto {
    include!(concat!(env!("OUT_DIR"), "/perftools.profiles.rs"));
}

/// Field 2 of `Profile` (`repeated Sample sample`), length-delimited: the key byte that precedes
/// each sample written on its own.
const SAMPLE_KEY: u8 = (2 << 3) | 2;
/// Encoded samples are handed to the compressor in chunks of about this size.
const CHUNK: usize = 1 << 16;

/// Writes gzipped pprof `profile.proto`.
pub struct Pprof;

impl Exporter for Pprof {
    fn name(&self) -> &'static str {
        "pprof"
    }

    fn extension(&self) -> &'static str {
        "pb.gz"
    }

    fn write(
        &self,
        profile: &Profile,
        opts: &ExportOptions,
        out: &mut dyn Write,
    ) -> Result<(), ReportError> {
        // Level 1: pprof files are written once and read a few times; the default level (6)
        // takes about three times as long for a file ~15% smaller.
        let mut gz = GzEncoder::new(out, Compression::fast());
        let mut tables = Tables::new(profile, opts.names);
        let period = profile.meta.period_ns;
        // On-CPU samples are counted too; a view's counts are microseconds, not samples.
        let counts_samples = opts.kind == KindSelection::On;
        let mut buf = Vec::with_capacity(2 * CHUNK);
        let mut sample = proto::Sample::default();
        for group in profile.samples.iter().filter(|g| g.count > 0) {
            sample.location_id.clear();
            sample.location_id.extend_from_slice(tables.stack(
                group.stack,
                group.bucket,
                group.pid,
            ));
            sample.value.clear();
            if counts_samples {
                sample.value.push(saturate(group.count));
            }
            sample
                .value
                .push(saturate(group.count.saturating_mul(period)));
            sample.label.clear();
            tables.labels(group, &mut sample.label);
            buf.push(SAMPLE_KEY);
            sample
                .encode_length_delimited(&mut buf)
                .map_err(encode_error)?;
            if buf.len() >= CHUNK {
                gz.write_all(&buf)?;
                buf.clear();
            }
        }
        let count = [tables.string("samples"), tables.string("count")];
        let time = match opts.kind {
            KindSelection::On => "cpu",
            KindSelection::Off => "off_cpu",
            KindSelection::Both => "wall",
        };
        let time = [tables.string(time), tables.string("nanoseconds")];
        let meta = &profile.meta;
        let mut comments = vec![format!(
            "pkprof {} export of a recording on {} (Linux {}): {} CPUs sampled at {} Hz",
            env!("CARGO_PKG_VERSION"),
            meta.hostname,
            meta.kernel,
            meta.cpus,
            meta.frequency_hz
        )];
        // The losses and idle sampling, as every report's header says them.
        comments.extend(crate::header::notes(profile));
        if !opts.title.is_empty() {
            comments.insert(0, opts.title.clone());
        }
        let comment = comments.iter().map(|c| tables.string(c)).collect();
        let mut message = tables.into_profile();
        message.sample_type = if counts_samples {
            vec![value_type(count), value_type(time)]
        } else {
            vec![value_type(time)]
        };
        message.period_type = Some(value_type(time));
        message.period = saturate(period);
        message.default_sample_type = time[0];
        message.time_nanos = saturate(meta.start_unix_ns);
        message.duration_nanos = saturate(meta.end_unix_ns.saturating_sub(meta.start_unix_ns));
        message.comment = comment;
        message.encode(&mut buf).map_err(encode_error)?;
        gz.write_all(&buf)?;
        gz.finish()?;
        Ok(())
    }
}

fn value_type(ids: [i64; 2]) -> proto::ValueType {
    proto::ValueType {
        r#type: ids[0],
        unit: ids[1],
    }
}

/// `u64` to pprof's `int64`, saturating.
fn saturate(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Encoding into a `Vec` cannot run out of room; kept as an error rather than a panic.
fn encode_error(e: prost::EncodeError) -> ReportError {
    ReportError::Io(std::io::Error::other(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates() {
        assert_eq!(saturate(u64::MAX), i64::MAX);
        assert_eq!(saturate(7), 7);
    }
}
