//! `pkprof push`: sends recorded profiles to an OpenTelemetry Collector as OTLP profiles, one
//! request per file, through the same pusher the agent uses for its windows (crates/otlp;
//! docs/design.md, "Fleet push: OTLP profiles").

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use pkprof_otlp::{ConvertOptions, PushConfig, Pusher};

/// What `pkprof push` was asked to do.
pub struct PushOptions {
    /// `http://HOST:PORT` or the full `/v1development/profiles` URL.
    pub endpoint: String,
    pub files: Vec<PathBuf>,
    /// How long to keep trying (back-off included) before giving up.
    pub timeout: Duration,
}

pub fn run(opts: PushOptions) -> Result<()> {
    // Every file is read (and checked) before anything is sent.
    let mut profiles = Vec::with_capacity(opts.files.len());
    for f in &opts.files {
        let p = pkprof_profile::load(f).with_context(|| format!("cannot read {}", f.display()))?;
        profiles.push(p);
    }
    let mut config = PushConfig::new(&opts.endpoint);
    config.queue_windows = profiles.len().max(1);
    config.queue_bytes = usize::MAX;
    config.timeout = opts.timeout;
    config.backoff_min = Duration::from_millis(200);
    config.backoff_max = Duration::from_secs(5);
    let pusher = Pusher::start(config).context("cannot push")?;
    let start = Instant::now();
    for (f, p) in opts.files.iter().zip(&profiles) {
        if p.off_cpu.is_some() {
            // OTLP has no agreed off-CPU sample type yet: only the on-CPU samples go.
            eprintln!(
                "pkprof: {}: its off-CPU samples are not pushed (on-CPU samples only)",
                f.display()
            );
        }
        // A stored window of the agent names its cgroups: their labels go as the agent's do.
        let opts = ConvertOptions {
            cgroups: crate::agent::cgroup_labels(p),
            ..ConvertOptions::default()
        };
        pusher.push_with(p, &opts);
        tracing::info!("queued {} ({} samples)", f.display(), p.total_samples());
    }
    let url = pusher.url().to_owned();
    let stats = pusher.shutdown(opts.timeout);
    if stats.sent != profiles.len() as u64 {
        let why = stats.last_error.as_deref().unwrap_or("no answer in time");
        bail!(
            "pushed {} of {} profiles to {url} in {:.1} s: {why}",
            stats.sent,
            profiles.len(),
            start.elapsed().as_secs_f64()
        );
    }
    if stats.rejected_profiles > 0 {
        bail!(
            "{url} accepted the request but rejected {} profiles",
            stats.rejected_profiles
        );
    }
    let samples: u64 = profiles.iter().map(|p| p.total_samples()).sum();
    println!(
        "pushed {} profile(s), {samples} samples, {} bytes (gzip) to {url}",
        stats.sent, stats.sent_bytes
    );
    Ok(())
}
