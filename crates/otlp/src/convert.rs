//! A pkprof [`Profile`] (one window, or a whole recording) as one OTLP
//! `ExportProfilesServiceRequest` (docs/design.md, "Fleet push: OTLP profiles").
//!
//! - One `ResourceProfiles` per served process (`process.pid`, `process.parent_pid`,
//!   `process.executable.name` / `.path`, `host.name`, and `container.id` ... when the caller
//!   knows the process's cgroup labels), plus one resource with `host.name` alone for the samples
//!   that served no process (buckets KERNEL and IDLE); the agent's row of short-lived processes
//!   (`SHORT_LIVED_PID`) is a resource with `pkprof.processes=short-lived` and no pid.
//! - Each resource holds up to two profiles in one scope (`pkprof`):
//!   - `samples/count` with `period_type` `cpu/nanoseconds` and the sampling period: one OTLP
//!     sample per pkprof sample group, with the group's labels as sample attributes
//!     (`thread.id`, `thread.name`, `pkprof.bucket`, `pkprof.context` such as
//!     `softirq:NET_RX`, `pkprof.served_pid`, `pkprof.current_pid`, `pkprof.cgroup_id`);
//!   - `cpu/nanoseconds`: the exact CPU time of the process over the window from the accounting
//!     (no stack), one sample per part: `pkprof.cpu_time` = `own` (split by `cpu.mode` `user` /
//!     `system` when the split adds up) and `served` (kernel work others did for it).
//! - Stacks are leaf first; a frame is a location with the attribute `profile.frame.type`
//!   (`native`, `kernel`, `syscall` for the syscall boundary, `abort-marker` for a truncated
//!   stack's root, as the OpenTelemetry eBPF profiler names an aborted unwind); an inlined frame
//!   shares its caller's location as an extra line, innermost first. Mappings are per
//!   (module, build-id), the build-id as `process.executable.build_id.gnu`.
//! - Attribute and resource keys follow the OpenTelemetry semantic conventions where one exists;
//!   pkprof's own labels are under `pkprof.`. The user's own machine labels
//!   ([`ConvertOptions::resource_labels`]) are added to every resource.

use std::collections::{BTreeMap, HashMap};

type FastMap<K, V> = crate::dictionary::HashMap<K, V>;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::profiles::v1development::{
    Line, Profile as OtlpProfile, ResourceProfiles, Sample, ScopeProfiles, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use pkprof_accounting::SHORT_LIVED_PID;
use pkprof_profile::{
    Bucket, Frame, FrameId, FrameKind, ProcessInfo, Profile, SampleGroup, StackId,
};
use pkprof_report::names::{bucket_name, context_name};

use crate::dictionary::Dictionary;

/// What pkprof knows of a cgroup beyond its id, as the agent parses it from the cgroup path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupLabels {
    /// The cgroup v2 path (`/system.slice/nginx.service`).
    pub path: String,
    /// Container id and runtime (`docker`, `containerd`, `cri-o`, `podman`, `systemd-nspawn`).
    pub container_id: Option<String>,
    pub container_runtime: Option<String>,
    /// Kubernetes pod UID and QoS class (`guaranteed`, `burstable`, `besteffort`).
    pub pod_uid: Option<String>,
    pub pod_qos: Option<String>,
    /// systemd unit (`nginx.service`).
    pub systemd_unit: Option<String>,
}

/// What the conversion needs beyond the profile.
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions {
    /// Labels of the cgroups the caller could name, by cgroup v2 id (a sample's `cgroup_id`).
    pub cgroups: HashMap<u64, CgroupLabels>,
    /// Labels the user gives this machine (the agent's `[labels]`), added to every resource as
    /// string attributes, keys as given.
    pub resource_labels: Vec<(String, String)>,
}

/// Attribute key of a frame's kind on locations.
pub const FRAME_TYPE: &str = "profile.frame.type";

/// The instrumentation scope's name and the profiles' sample types.
const SCOPE: &str = "pkprof";

/// The request for `profile`. Sample groups with a zero count are left out; values beyond `i64`
/// saturate.
pub fn to_request(profile: &Profile, opts: &ConvertOptions) -> ExportProfilesServiceRequest {
    let mut dict = Dictionary::new();
    let meta = &profile.meta;
    let mut stacks = StackCache::default();
    // Served pid -> its samples (pid 0: KERNEL and IDLE), in pid order so requests are stable.
    let mut by_pid: BTreeMap<u32, Vec<&SampleGroup>> = BTreeMap::new();
    for g in profile.samples.iter().filter(|g| g.count > 0) {
        let pid = match g.bucket {
            Bucket::Kernel | Bucket::Idle => 0,
            _ => g.pid,
        };
        by_pid.entry(pid).or_default().push(g);
    }
    let infos: HashMap<u32, &ProcessInfo> = profile.processes.iter().map(|p| (p.pid, p)).collect();
    for p in &profile.processes {
        by_pid.entry(p.pid).or_default();
    }
    let period = ValueType {
        type_strindex: dict.string("cpu"),
        unit_strindex: dict.string("nanoseconds"),
    };
    let count_type = ValueType {
        type_strindex: dict.string("samples"),
        unit_strindex: dict.string("count"),
    };
    let time = meta.start_unix_ns;
    let duration = meta.end_unix_ns.saturating_sub(meta.start_unix_ns);
    let mut resources = Vec::with_capacity(by_pid.len());
    for (pid, groups) in by_pid {
        let info = infos.get(&pid).copied();
        let mut profiles = Vec::with_capacity(2);
        if !groups.is_empty() {
            let samples = groups
                .iter()
                .map(|g| Sample {
                    stack_index: stacks.get(&mut dict, profile, g.stack),
                    attribute_indices: sample_attributes(&mut dict, g),
                    link_index: 0,
                    values: vec![saturate(g.count)],
                    timestamps_unix_nano: Vec::new(),
                })
                .collect();
            profiles.push(OtlpProfile {
                sample_type: Some(count_type),
                samples,
                time_unix_nano: time,
                duration_nano: duration,
                period_type: Some(period),
                period: saturate(meta.period_ns),
                ..Default::default()
            });
        }
        if let Some(info) = info.filter(|_| pid != 0) {
            let samples = cpu_time_samples(&mut dict, info);
            if !samples.is_empty() {
                profiles.push(OtlpProfile {
                    sample_type: Some(period),
                    samples,
                    time_unix_nano: time,
                    duration_nano: duration,
                    ..Default::default()
                });
            }
        }
        if profiles.is_empty() {
            continue;
        }
        let cgroup = groups
            .iter()
            .find(|g| g.cgroup_id != 0)
            .and_then(|g| opts.cgroups.get(&g.cgroup_id));
        resources.push(ResourceProfiles {
            resource: Some(Resource {
                attributes: resource_attributes(&meta.hostname, pid, info, groups.first(), cgroup)
                    .into_iter()
                    .chain(opts.resource_labels.iter().map(|(k, v)| kv_str(k, v)))
                    .collect(),
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: SCOPE.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        });
    }
    ExportProfilesServiceRequest {
        resource_profiles: resources,
        dictionary: Some(dict.finish()),
    }
}

/// `u64` to OTLP's `int64`, saturating.
fn saturate(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        key_strindex: 0,
    }
}

fn kv_str(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.into()))
}

fn kv_int(key: &str, value: u64) -> KeyValue {
    kv(key, any_value::Value::IntValue(saturate(value)))
}

/// The resource of a served process (`pid` 0: the samples that served none).
fn resource_attributes(
    host: &str,
    pid: u32,
    info: Option<&ProcessInfo>,
    first: Option<&&SampleGroup>,
    cgroup: Option<&CgroupLabels>,
) -> Vec<KeyValue> {
    let mut attrs = vec![kv_str("host.name", host)];
    if pid == 0 {
        return attrs;
    }
    if pid == SHORT_LIVED_PID {
        // The agent's one row for the processes born and gone between two reads: no process.
        attrs.push(kv_str("pkprof.processes", "short-lived"));
        return attrs;
    }
    attrs.push(kv_int("process.pid", pid.into()));
    let comm = info.map(|i| i.comm.as_str()).filter(|c| !c.is_empty());
    let exe = info.map(|i| i.exe.as_str()).filter(|e| e.starts_with('/'));
    // process.executable.name: the base name of /proc/PID/exe's target, else the command name.
    let name = exe
        .and_then(|e| e.rsplit('/').next())
        .or(comm)
        .or(first.map(|g| g.comm.as_str()));
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        attrs.push(kv_str("process.executable.name", name));
    }
    if let Some(exe) = exe {
        attrs.push(kv_str("process.executable.path", exe));
    }
    if let Some(comm) = comm {
        attrs.push(kv_str("process.command", comm));
    }
    if let Some(info) = info {
        if info.ppid != 0 {
            attrs.push(kv_int("process.parent_pid", info.ppid.into()));
        }
        if info.target {
            attrs.push(kv(
                "pkprof.target",
                any_value::Value::BoolValue(info.target),
            ));
        }
    }
    if let Some(c) = cgroup {
        if !c.path.is_empty() {
            attrs.push(kv_str("pkprof.cgroup.path", &c.path));
        }
        let mut opt = |key: &str, v: &Option<String>| {
            if let Some(v) = v {
                attrs.push(kv_str(key, v));
            }
        };
        opt("container.id", &c.container_id);
        opt("container.runtime.name", &c.container_runtime);
        opt("k8s.pod.uid", &c.pod_uid);
        opt("pkprof.k8s.qos_class", &c.pod_qos);
        opt("pkprof.systemd.unit", &c.systemd_unit);
    }
    attrs
}

/// A sample group's labels.
fn sample_attributes(dict: &mut Dictionary, g: &SampleGroup) -> Vec<i32> {
    let mut a = Vec::with_capacity(7);
    a.push(dict.str_attribute("pkprof.bucket", bucket_name(g.bucket)));
    a.push(dict.str_attribute("pkprof.context", &context_name(g.context)));
    if g.pid != 0 {
        a.push(dict.int_attribute("pkprof.served_pid", g.pid.into()));
    }
    if g.tid != 0 {
        a.push(dict.int_attribute("thread.id", g.tid.into()));
    }
    if !g.comm.is_empty() {
        a.push(dict.str_attribute("thread.name", &g.comm));
    }
    if g.current_pid != 0 {
        a.push(dict.int_attribute("pkprof.current_pid", g.current_pid.into()));
    }
    if g.cgroup_id != 0 {
        a.push(dict.int_attribute("pkprof.cgroup_id", g.cgroup_id));
    }
    a
}

/// The exact CPU time profile's samples for one process.
fn cpu_time_samples(dict: &mut Dictionary, p: &ProcessInfo) -> Vec<Sample> {
    let mut parts: Vec<(u64, Vec<i32>)> = Vec::new();
    let own = dict.str_attribute("pkprof.cpu_time", "own");
    if p.user_ns + p.sys_ns == p.task_ns {
        let user = dict.str_attribute("cpu.mode", "user");
        let system = dict.str_attribute("cpu.mode", "system");
        parts.push((p.user_ns, vec![own, user]));
        parts.push((p.sys_ns, vec![own, system]));
    } else {
        parts.push((p.task_ns, vec![own]));
    }
    let served = dict.str_attribute("pkprof.cpu_time", "served");
    parts.push((p.served_ns, vec![served]));
    parts
        .into_iter()
        .filter(|(ns, _)| *ns > 0)
        .map(|(ns, attrs)| Sample {
            stack_index: 0,
            attribute_indices: attrs,
            link_index: 0,
            values: vec![saturate(ns)],
            timestamps_unix_nano: Vec::new(),
        })
        .collect()
}

/// Stacks converted once per window, by pkprof stack id, and locations once per frame group (a
/// frame and the frames inlined into it), by pkprof frame ids.
#[derive(Default)]
struct StackCache {
    done: FastMap<StackId, i32>,
    locations: FastMap<Vec<FrameId>, i32>,
}

impl StackCache {
    fn get(&mut self, dict: &mut Dictionary, profile: &Profile, id: StackId) -> i32 {
        if let Some(i) = self.done.get(&id) {
            return *i;
        }
        let ids = &profile.stacks[id as usize].frames;
        let frame = |f: &FrameId| &profile.frames[*f as usize];
        // Root first in pkprof, an inlined frame right after the frame it was inlined into: group
        // each frame with the inlined frames that follow it into one location.
        let mut locations = Vec::new();
        let mut i = 0;
        while i < ids.len() {
            let mut j = i + 1;
            while j < ids.len() && frame(&ids[j]).inlined {
                j += 1;
            }
            let group = &ids[i..j];
            let loc = match self.locations.get(group) {
                Some(l) => *l,
                None => {
                    let frames: Vec<&Frame> = group.iter().map(frame).collect();
                    let l = location(dict, &frames);
                    self.locations.insert(group.to_vec(), l);
                    l
                }
            };
            locations.push(loc);
            i = j;
        }
        locations.reverse();
        let index = dict.stack(locations);
        self.done.insert(id, index);
        index
    }
}

/// One location for a frame and the frames inlined into it (caller first in `frames`).
fn location(dict: &mut Dictionary, frames: &[&Frame]) -> i32 {
    let outer = frames[0];
    let mapping = dict.mapping(&outer.module, &outer.build_id);
    // OTLP wants the innermost line first.
    let lines = frames
        .iter()
        .rev()
        .map(|f| Line {
            function_index: dict.function(&f.name, f.file.as_deref()),
            line: f.line.map_or(0, i64::from),
            column: 0,
        })
        .collect();
    let kind = match outer.kind {
        FrameKind::User => "native",
        FrameKind::Kernel => "kernel",
        FrameKind::Syscall => "syscall",
        FrameKind::Truncated => "abort-marker",
        // As the OpenTelemetry eBPF profiler marks interpreted CPython frames.
        FrameKind::Python => "cpython",
    };
    let attrs = vec![dict.str_attribute(FRAME_TYPE, kind)];
    // The innermost frame's offset is the sampled (or return) address.
    let address = frames.last().map_or(0, |f| f.offset);
    dict.location(mapping, address, lines, attrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_lived_row_is_no_process() {
        let info = ProcessInfo {
            pid: SHORT_LIVED_PID,
            comm: "(short-lived)".into(),
            ..ProcessInfo::default()
        };
        let attrs = resource_attributes("h", SHORT_LIVED_PID, Some(&info), None, None);
        let keys: Vec<&str> = attrs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["host.name", "pkprof.processes"]);
    }
}
