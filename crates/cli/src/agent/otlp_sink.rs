//! The agent's fleet push: each closed window to the OTLP pusher of `crates/otlp`, with the
//! window's cgroups' container and unit labels and the machine's own labels (docs/design.md,
//! "Fleet push: OTLP profiles"). `window` converts and queues; it never waits on the network.

use std::collections::{BTreeMap, HashMap};

use pkprof_agent::{Config, WindowSink};
use pkprof_otlp::{CgroupLabels, ConvertOptions, PushConfig, PushError, Pusher};
use pkprof_profile::cgroup;
use pkprof_profile::Profile;

pub struct OtlpSink {
    pusher: Pusher,
    labels: Vec<(String, String)>,
}

impl OtlpSink {
    pub fn start(
        url: &str,
        queue: usize,
        labels: &BTreeMap<String, String>,
    ) -> Result<Self, PushError> {
        let mut config = PushConfig::new(url);
        config.queue_windows = queue;
        Ok(OtlpSink {
            pusher: Pusher::start(config)?,
            labels: labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
    }
}

/// The sinks the configuration asks for (none, or the OTLP pusher).
pub fn sinks(config: &Config) -> Result<Vec<Box<dyn WindowSink>>, PushError> {
    let mut sinks: Vec<Box<dyn WindowSink>> = Vec::new();
    if let Some(url) = &config.push.otlp_url {
        sinks.push(Box::new(OtlpSink::start(
            url,
            config.push.queue,
            &config.labels,
        )?));
    }
    Ok(sinks)
}

/// The container, Kubernetes and unit labels of the profile's cgroups (its cgroup table, parsed
/// from the paths alone), by cgroup id: the agent's windows and `pkprof push` of stored ones.
pub fn cgroup_labels(p: &Profile) -> HashMap<u64, CgroupLabels> {
    (p.cgroups.iter())
        .map(|c| {
            let l = cgroup::CgroupLabels::parse(&c.path);
            let labels = CgroupLabels {
                path: c.path.clone(),
                container_id: l.container_id,
                container_runtime: l.runtime.map(str::to_owned),
                pod_uid: l.pod_uid,
                pod_qos: l.qos.map(str::to_owned),
                systemd_unit: l.unit,
            };
            (c.id, labels)
        })
        .collect()
}

impl Drop for OtlpSink {
    /// The agent stops (SIGTERM) or the configuration changes: what is queued (the last window
    /// among them) gets a short grace to reach the collector; what is left is dropped.
    fn drop(&mut self) {
        self.pusher.flush(std::time::Duration::from_secs(3));
    }
}

impl WindowSink for OtlpSink {
    fn name(&self) -> &str {
        "otlp"
    }

    fn window(&mut self, p: &Profile) {
        let opts = ConvertOptions {
            cgroups: cgroup_labels(p),
            resource_labels: self.labels.clone(),
        };
        self.pusher.push_with(p, &opts);
    }

    fn status(&self) -> String {
        format!(
            "{}: {}",
            self.pusher.url(),
            self.pusher.stats().status_line()
        )
    }

    fn metrics(&self) -> String {
        self.pusher.stats().prometheus()
    }
}
