//! The pusher: hands encoded windows to a sender thread that POSTs them to an OTLP/HTTP endpoint
//! (`/v1development/profiles`, `application/x-protobuf`, gzip), through a bounded queue
//! (docs/design.md, "Fleet push: OTLP profiles").
//!
//! - [`Pusher::push`] converts and encodes the window in the caller's thread (CPU only: no I/O,
//!   no wait on the network), then queues it and returns; the lock it takes is never held across
//!   a request.
//! - The queue is bounded by windows and by bytes; a window that does not fit makes room by
//!   dropping the oldest queued ones (fresh data is worth more to a fleet view), and every dropped
//!   window and its samples are counted in [`PushStats`].
//! - A failed request (no connection, timeout, HTTP 429 or 5xx) is retried after an exponential
//!   back-off (doubling from `backoff_min` to `backoff_max`), the window staying at the head of
//!   the queue; other HTTP errors (4xx: the collector will never take it) drop it, counted as
//!   rejected. A 200 whose `partial_success` rejects profiles is counted too.
//! - Memory: at most `queue_bytes` of queued request bodies plus the one being sent.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flate2::write::GzEncoder;
use flate2::Compression;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceResponse;
use prost::Message;

use pkprof_profile::Profile;

use crate::convert::{to_request, ConvertOptions};

/// The OTLP/HTTP path of profiles, appended to an endpoint given without a path.
pub const PROFILES_PATH: &str = "/v1development/profiles";

/// Where and how to push.
#[derive(Clone, Debug)]
pub struct PushConfig {
    /// `http://HOST:PORT` (the path [`PROFILES_PATH`] is added) or a full URL.
    pub endpoint: String,
    /// Queue bounds: windows waiting to be sent, and their encoded bytes.
    pub queue_windows: usize,
    pub queue_bytes: usize,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Back-off after a failed request: first wait, and the most it doubles to.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

impl PushConfig {
    /// The defaults for `endpoint`: 16 windows, 32 MiB, 10 s timeout, back-off 1 s to 60 s.
    pub fn new(endpoint: &str) -> PushConfig {
        PushConfig {
            endpoint: endpoint.into(),
            queue_windows: 16,
            queue_bytes: 32 << 20,
            timeout: Duration::from_secs(10),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
        }
    }

    /// The URL requests go to.
    pub fn url(&self) -> String {
        let e = self.endpoint.trim_end_matches('/');
        let after_scheme = e.split_once("://").map_or(e, |(_, rest)| rest);
        if after_scheme.contains('/') {
            e.to_owned()
        } else {
            format!("{e}{PROFILES_PATH}")
        }
    }
}

/// Bad push configuration.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("OTLP endpoint {0:?}: not an http:// URL (https and gRPC are not supported)")]
    Endpoint(String),
    #[error("OTLP push: the queue must hold at least one window and one byte")]
    Queue,
    #[error("OTLP push: cannot start the sender thread: {0}")]
    Thread(std::io::Error),
}

/// What the pusher did so far (cumulative counts since it started, and the queue now).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushStats {
    /// Windows handed to [`Pusher::push`].
    pub windows: u64,
    /// Windows the collector accepted, their encoded bytes and samples.
    pub sent: u64,
    pub sent_bytes: u64,
    pub sent_samples: u64,
    /// Windows dropped because the queue was full (or one window alone was larger than it), or
    /// left in the queue at shutdown, and their samples.
    pub dropped: u64,
    pub dropped_samples: u64,
    /// Windows the collector refused for good (HTTP 4xx other than 429), and profiles it said it
    /// rejected in a partial success.
    pub rejected: u64,
    pub rejected_profiles: u64,
    /// Failed attempts (each retried after the back-off).
    pub failures: u64,
    /// Failures since the last success (0: the collector is answering).
    pub consecutive_failures: u64,
    /// The last failure, as one line.
    pub last_error: Option<String>,
    /// Windows and bytes waiting now (the one being sent included).
    pub queued: u64,
    pub queued_bytes: u64,
}

impl PushStats {
    /// The counts as (metric name, help, type, value), for `/metrics`.
    pub fn metrics(&self) -> Vec<(&'static str, &'static str, &'static str, u64)> {
        let c = "counter";
        let g = "gauge";
        vec![
            (
                "pkprof_agent_push_windows_total",
                "Windows handed to the OTLP pusher",
                c,
                self.windows,
            ),
            (
                "pkprof_agent_push_sent_total",
                "Windows the collector accepted",
                c,
                self.sent,
            ),
            (
                "pkprof_agent_push_sent_bytes_total",
                "Encoded bytes the collector accepted",
                c,
                self.sent_bytes,
            ),
            (
                "pkprof_agent_push_dropped_total",
                "Windows dropped: queue full or shut down",
                c,
                self.dropped,
            ),
            (
                "pkprof_agent_push_dropped_samples_total",
                "Samples of the dropped windows",
                c,
                self.dropped_samples,
            ),
            (
                "pkprof_agent_push_rejected_total",
                "Windows the collector refused (HTTP 4xx)",
                c,
                self.rejected,
            ),
            (
                "pkprof_agent_push_failures_total",
                "Failed push attempts (retried)",
                c,
                self.failures,
            ),
            (
                "pkprof_agent_push_queued",
                "Windows waiting to be pushed",
                g,
                self.queued,
            ),
            (
                "pkprof_agent_push_queued_bytes",
                "Encoded bytes waiting to be pushed",
                g,
                self.queued_bytes,
            ),
        ]
    }

    /// The metrics in the Prometheus text format (HELP, TYPE and value lines).
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        for (name, help, kind, v) in self.metrics() {
            out += &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n");
        }
        out
    }

    /// One line for a status display: sent, queued, dropped, and the collector's state.
    pub fn status_line(&self) -> String {
        let mut line = format!(
            "{} windows sent, {} queued ({} bytes), {} dropped ({} samples), {} rejected",
            self.sent,
            self.queued,
            self.queued_bytes,
            self.dropped,
            self.dropped_samples,
            self.rejected
        );
        match &self.last_error {
            Some(e) if self.consecutive_failures > 0 => {
                line += &format!("; failing ({} in a row): {e}", self.consecutive_failures)
            }
            _ => {}
        }
        line
    }
}

struct Item {
    body: Vec<u8>,
    samples: u64,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Item>,
    /// The sender holds a window (taken off the queue) and is sending it.
    in_flight: Option<(u64, u64)>,
    stats: PushStats,
    stop: bool,
}

impl State {
    fn bytes(&self) -> usize {
        self.queue.iter().map(|i| i.body.len()).sum::<usize>()
    }

    fn drop_item(&mut self, item: &Item) {
        self.stats.dropped += 1;
        self.stats.dropped_samples = self.stats.dropped_samples.saturating_add(item.samples);
    }

    fn refresh(&mut self) {
        let (n, b) = self.in_flight.unwrap_or((0, 0));
        self.stats.queued = self.queue.len() as u64 + n;
        self.stats.queued_bytes = self.bytes() as u64 + b;
    }
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    config: PushConfig,
    url: String,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in the sender leaves counts that are still right: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Pushes windows to one OTLP endpoint from its own thread.
pub struct Pusher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Pusher {
    /// Starts the sender thread; nothing is sent before the first window.
    pub fn start(config: PushConfig) -> Result<Pusher, PushError> {
        let url = config.url();
        if !url.starts_with("http://") || url.len() <= "http://".len() {
            return Err(PushError::Endpoint(config.endpoint.clone()));
        }
        if config.queue_windows == 0 || config.queue_bytes == 0 {
            return Err(PushError::Queue);
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            config,
            url,
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("pkprof-otlp".into())
            .spawn(move || send_loop(&s))
            .map_err(PushError::Thread)?;
        Ok(Pusher {
            shared,
            thread: Some(thread),
        })
    }

    /// The URL windows go to.
    pub fn url(&self) -> &str {
        &self.shared.url
    }

    /// Queues one window (see [`Pusher::push_with`]).
    pub fn push(&self, profile: &Profile) {
        self.push_with(profile, &ConvertOptions::default());
    }

    /// Converts, encodes and queues one window; never waits for the network.
    pub fn push_with(&self, profile: &Profile, opts: &ConvertOptions) {
        let body = encode(profile, opts);
        // Saturating: a profile file may hold any count.
        let samples = (profile.samples.iter()).fold(0u64, |n, g| n.saturating_add(g.count));
        self.push_encoded(body, samples);
    }

    fn push_encoded(&self, body: Vec<u8>, samples: u64) {
        let cfg = &self.shared.config;
        let item = Item { body, samples };
        let mut st = self.shared.lock();
        st.stats.windows += 1;
        if item.body.len() > cfg.queue_bytes {
            st.drop_item(&item);
        } else {
            let mut bytes = st.bytes();
            while st.queue.len() >= cfg.queue_windows || bytes + item.body.len() > cfg.queue_bytes {
                let Some(old) = st.queue.pop_front() else {
                    break;
                };
                bytes -= old.body.len();
                st.drop_item(&old);
            }
            st.queue.push_back(item);
        }
        st.refresh();
        drop(st);
        self.shared.wake.notify_all();
    }

    /// The counts so far.
    pub fn stats(&self) -> PushStats {
        self.shared.lock().stats.clone()
    }

    /// Waits until every queued window was sent or given up on, at most `timeout`; true when the
    /// queue is empty.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if st.queue.is_empty() && st.in_flight.is_none() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = (self.shared.wake)
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Sends what is queued for at most `grace`, then stops the sender; what is left is counted
    /// as dropped. Returns the final counts.
    pub fn shutdown(mut self, grace: Duration) -> PushStats {
        self.flush(grace);
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut st = self.shared.lock();
        for item in std::mem::take(&mut st.queue) {
            st.drop_item(&item);
        }
        st.refresh();
        st.stats.clone()
    }

    fn stop(&self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
    }
}

impl Drop for Pusher {
    /// Stops the sender without waiting for it (a request in flight ends by its own timeout).
    fn drop(&mut self) {
        self.stop();
    }
}

/// The request for one window, protobuf then gzip. Level 1: windows are sent once, and the
/// caller's thread pays for it.
pub fn encode(profile: &Profile, opts: &ConvertOptions) -> Vec<u8> {
    let request = to_request(profile, opts);
    let raw = request.encode_to_vec();
    let mut gz = GzEncoder::new(Vec::with_capacity(raw.len() / 4), Compression::fast());
    // Writing into a Vec cannot fail.
    gz.write_all(&raw).expect("gzip into memory");
    gz.finish().expect("gzip into memory")
}

/// How one attempt ended.
enum Outcome {
    Sent { rejected_profiles: u64 },
    Retry(String),
    Refused(String),
}

fn send_loop(shared: &Shared) {
    let cfg = &shared.config;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(cfg.timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let mut backoff = cfg.backoff_min;
    loop {
        let mut st = shared.lock();
        let item = loop {
            if st.stop {
                return;
            }
            if let Some(item) = st.queue.pop_front() {
                break item;
            }
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        };
        st.in_flight = Some((1, item.body.len() as u64));
        st.refresh();
        drop(st);
        let outcome = send(&agent, &shared.url, &item.body);
        let mut st = shared.lock();
        st.in_flight = None;
        let mut wait = None;
        match outcome {
            Outcome::Sent { rejected_profiles } => {
                st.stats.sent += 1;
                st.stats.sent_bytes += item.body.len() as u64;
                st.stats.sent_samples = st.stats.sent_samples.saturating_add(item.samples);
                st.stats.rejected_profiles += rejected_profiles;
                st.stats.consecutive_failures = 0;
                backoff = cfg.backoff_min;
            }
            Outcome::Refused(e) => {
                tracing::debug!("OTLP push refused: {e}");
                st.stats.rejected += 1;
                st.stats.last_error = Some(e);
                st.stats.consecutive_failures = 0;
            }
            Outcome::Retry(e) => {
                if st.stats.consecutive_failures == 0 {
                    tracing::debug!("OTLP push failed, retrying with back-off: {e}");
                }
                st.stats.failures += 1;
                st.stats.consecutive_failures += 1;
                st.stats.last_error = Some(e);
                // Back at the head, unless newer windows filled the queue meanwhile.
                if st.queue.len() < cfg.queue_windows
                    && st.bytes() + item.body.len() <= cfg.queue_bytes
                {
                    st.queue.push_front(item);
                } else {
                    st.drop_item(&item);
                }
                wait = Some(backoff);
                backoff = (backoff * 2).min(cfg.backoff_max);
            }
        }
        st.refresh();
        shared.wake.notify_all();
        if let Some(wait) = wait {
            let deadline = Instant::now() + wait;
            while !st.stop {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                st = (shared.wake)
                    .wait_timeout(st, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }
}

fn send(agent: &ureq::Agent, url: &str, body: &[u8]) -> Outcome {
    let response = agent
        .post(url)
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "gzip")
        .send(body);
    let mut response = match response {
        Ok(r) => r,
        Err(e) => return Outcome::Retry(format!("{url}: {e}")),
    };
    let status = response.status().as_u16();
    let answer = response
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .unwrap_or_default();
    match status {
        200..=299 => {
            let rejected = ExportProfilesServiceResponse::decode(&answer[..])
                .ok()
                .and_then(|r| r.partial_success)
                .map_or(0, |p| p.rejected_profiles.max(0) as u64);
            Outcome::Sent {
                rejected_profiles: rejected,
            }
        }
        429 | 500..=599 => Outcome::Retry(format!("{url}: HTTP {status}")),
        _ => Outcome::Refused(format!(
            "{url}: HTTP {status} {}",
            String::from_utf8_lossy(&answer[..answer.len().min(200)]).trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_to_url() {
        let url = |e: &str| PushConfig::new(e).url();
        assert_eq!(url("http://h:4318"), "http://h:4318/v1development/profiles");
        assert_eq!(
            url("http://h:4318/"),
            "http://h:4318/v1development/profiles"
        );
        assert_eq!(
            url("http://h:4318/custom/path"),
            "http://h:4318/custom/path"
        );
        assert!(matches!(
            Pusher::start(PushConfig::new("https://h:4318")),
            Err(PushError::Endpoint(_))
        ));
        assert!(matches!(
            Pusher::start(PushConfig::new("http://")),
            Err(PushError::Endpoint(_))
        ));
        let mut c = PushConfig::new("http://h:1");
        c.queue_windows = 0;
        assert!(matches!(Pusher::start(c), Err(PushError::Queue)));
    }
}
