//! The agent's configuration: a TOML file (every key optional, unknown keys refused) with
//! defaults, overridden value by value by command-line flags, checked once; a bad value is one
//! line naming the key. Durations are written `10s`, `5m`, `24h`, `1h30m`; sizes `512MiB`,
//! `1GiB` (or plain bytes).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// A configuration error: one line naming the file and key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{key}: {message}")]
    Invalid { key: &'static str, message: String },
}

/// The configuration in effect.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Samples per second on each CPU.
    pub frequency_hz: u64,
    /// Length of an aggregation window.
    pub window: Duration,
    pub limits: Limits,
    /// The local store (None: windows are kept in memory only, `memory_windows` of them).
    pub store: Option<StoreConfig>,
    /// Closed windows kept in memory for `ctl dump` when there is no store.
    pub memory_windows: usize,
    /// The control socket.
    pub socket: PathBuf,
    /// Where `/metrics` is served (None: not served).
    pub listen: Option<SocketAddr>,
    pub allow_remote: bool,
    /// Processes exported individually in `/metrics`.
    pub metrics_top: usize,
    /// Fleet push targets (the OTLP pusher reads them; docs/design.md "The agent").
    pub push: PushConfig,
    /// Extra labels the user gives this machine (`[labels]`), for pushed profiles.
    pub labels: BTreeMap<String, String>,
    /// Bytes of user stack copied per sample (as `record --stack-bytes`).
    pub stack_bytes: u32,
    /// Have the kernel time every BPF program run (BPF_ENABLE_STATS) for `ctl status` and
    /// `/metrics`: off by default, as it costs two clock reads on every run of every BPF
    /// program on the machine while the agent lives (docs/design.md, "The agent / Cost").
    pub bpf_stats: bool,
}

/// Memory bounds of one window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Distinct raw stacks kept per window.
    pub max_stacks: usize,
    /// Distinct (stack, labels) groups kept per window.
    pub max_groups: usize,
    /// Processes the window's table keeps (the busiest by CPU time).
    pub max_processes: usize,
    /// A process born and gone between two reads of the accounting that cost less than this is
    /// counted in one row, `(short-lived)`, with the others (zero: each keeps its own row).
    pub short_lived: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    pub dir: PathBuf,
    /// Windows older than this are deleted.
    pub max_age: Duration,
    /// The oldest windows are deleted while the store holds more bytes than this.
    pub max_bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushConfig {
    /// OTLP/HTTP endpoint (`http://collector:4318`); None: no push.
    pub otlp_url: Option<String>,
    /// Windows waiting to be pushed at most; more are dropped and counted.
    pub queue: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            frequency_hz: 19,
            window: Duration::from_secs(10),
            limits: Limits {
                max_stacks: 50_000,
                max_groups: 100_000,
                max_processes: 10_000,
                short_lived: Duration::from_millis(10),
            },
            store: Some(StoreConfig {
                dir: PathBuf::from("/var/lib/pkprof"),
                max_age: Duration::from_secs(24 * 3600),
                max_bytes: 1 << 30,
            }),
            memory_windows: 6,
            socket: PathBuf::from(DEFAULT_SOCKET),
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
            allow_remote: false,
            metrics_top: 20,
            push: PushConfig {
                otlp_url: None,
                queue: 64,
            },
            labels: BTreeMap::new(),
            stack_bytes: 16384,
            bpf_stats: false,
        }
    }
}

/// The control socket's default path.
pub const DEFAULT_SOCKET: &str = "/run/pkprof/agent.sock";

/// The file as written: every key optional.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    frequency_hz: Option<u64>,
    bpf_stats: Option<bool>,
    window: Option<String>,
    stack_bytes: Option<u32>,
    memory_windows: Option<usize>,
    socket: Option<PathBuf>,
    #[serde(default)]
    limits: FileLimits,
    #[serde(default)]
    store: FileStore,
    #[serde(default)]
    metrics: FileMetrics,
    #[serde(default)]
    push: FilePush,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileLimits {
    max_stacks: Option<usize>,
    max_groups: Option<usize>,
    max_processes: Option<usize>,
    short_lived: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileStore {
    enabled: Option<bool>,
    dir: Option<PathBuf>,
    max_age: Option<String>,
    max_size: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileMetrics {
    /// `ADDR:PORT`, or "" for none.
    listen: Option<String>,
    allow_remote: Option<bool>,
    top: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FilePush {
    otlp_url: Option<String>,
    queue: Option<usize>,
}

/// Values given on the command line; each replaces the file's.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub frequency_hz: Option<u64>,
    pub window: Option<String>,
    pub store_dir: Option<PathBuf>,
    pub no_store: bool,
    pub max_age: Option<String>,
    pub max_size: Option<String>,
    pub socket: Option<PathBuf>,
    /// `ADDR:PORT`, or "" for none.
    pub listen: Option<String>,
    pub allow_remote: bool,
    pub max_stacks: Option<usize>,
    pub max_groups: Option<usize>,
    pub max_processes: Option<usize>,
    pub short_lived: Option<String>,
    pub otlp_url: Option<String>,
    pub stack_bytes: Option<u32>,
    /// `--bpf-stats`: on whatever the file says.
    pub bpf_stats: bool,
}

/// `10s`, `5m`, `24h`, `2d`, `1h30m`, `250ms`, or plain seconds (`90`, `0.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return if (0.0..1e12).contains(&secs) {
            Ok(Duration::from_secs_f64(secs))
        } else {
            Err(format!("{s:?} is not a duration"))
        };
    }
    let bad = || format!("{s:?} is not a duration (e.g. 10s, 5m, 24h, 1h30m)");
    let mut total = 0f64;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..u] {
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return Err(bad()),
        };
        total += value * unit;
        rest = &rest[u..];
    }
    if total < 1e12 {
        Ok(Duration::from_secs_f64(total))
    } else {
        Err(bad())
    }
}

/// A point in time for `--since`, `--until`, `--range`: a duration ago (`1h`, `90m`), `now`, or
/// `@SECONDS` since the Unix epoch. Returns Unix-epoch nanoseconds, given `now_ns`.
pub fn parse_when(s: &str, now_ns: u64) -> Result<u64, String> {
    let s = s.trim();
    if s == "now" {
        return Ok(now_ns);
    }
    if let Some(abs) = s.strip_prefix('@') {
        let secs: f64 = abs
            .parse()
            .map_err(|_| format!("{s:?}: expected @SECONDS since the Unix epoch"))?;
        if !(0.0..1e11).contains(&secs) {
            return Err(format!("{s:?}: out of range"));
        }
        return Ok((secs * 1e9) as u64);
    }
    let ago = parse_duration(s).map_err(|e| format!("{e}, `now` or @UNIX_SECONDS"))?;
    Ok(now_ns.saturating_sub(ago.as_nanos() as u64))
}

/// `FROM..TO` (each as [`parse_when`]), e.g. `2h..1h`, `1h..now`; FROM must not be after TO.
pub fn parse_range(s: &str, now_ns: u64) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?}: expected FROM..TO, e.g. 2h..1h or 1h..now"))?;
    let (a, b) = (parse_when(a, now_ns)?, parse_when(b, now_ns)?);
    if a > b {
        return Err(format!("{s:?}: FROM is after TO"));
    }
    Ok((a, b))
}

/// `1GiB`, `512MiB`, `64KiB`, `1G`, `100M`, or plain bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let n = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let bad = || format!("{s:?} is not a size (e.g. 512MiB, 1GiB)");
    let value: u64 = s[..n].parse().map_err(|_| bad())?;
    let mult: u64 = match s[n..].trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        _ => return Err(bad()),
    };
    value.checked_mul(mult).ok_or_else(bad)
}

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

fn listen_addr(s: &str, key: &'static str) -> Result<Option<SocketAddr>, ConfigError> {
    if s.is_empty() {
        return Ok(None);
    }
    if let Ok(port) = s.parse::<u16>() {
        return Ok(Some(SocketAddr::from(([127, 0, 0, 1], port))));
    }
    s.parse::<SocketAddr>().map(Some).map_err(|e| {
        invalid(
            key,
            format!("{s:?}: {e} (expected PORT or ADDR:PORT, or \"\")"),
        )
    })
}

impl Config {
    /// The configuration from `path` (None: the defaults), with `over` applied, checked.
    pub fn load(path: Option<&Path>, over: &Overrides) -> Result<Config, ConfigError> {
        let file = match path {
            None => File::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.display().to_string(),
                    source,
                })?;
                toml::from_str::<File>(&text).map_err(|e| ConfigError::Parse {
                    path: p.display().to_string(),
                    message: e.message().replace('\n', " "),
                })?
            }
        };
        Config::from_file(file, over)
    }

    /// Parses a configuration text (tests, `--check-config`).
    pub fn parse(text: &str, over: &Overrides) -> Result<Config, ConfigError> {
        let file = toml::from_str::<File>(text).map_err(|e| ConfigError::Parse {
            path: "config".into(),
            message: e.message().replace('\n', " "),
        })?;
        Config::from_file(file, over)
    }

    fn from_file(f: File, o: &Overrides) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        if let Some(hz) = o.frequency_hz.or(f.frequency_hz) {
            if !(1..=1000).contains(&hz) {
                return Err(invalid("frequency_hz", format!("{hz}: must be 1 to 1000")));
            }
            c.frequency_hz = hz;
        }
        if let Some(w) = o.window.as_ref().or(f.window.as_ref()) {
            let w = parse_duration(w).map_err(|e| invalid("window", e))?;
            if w < Duration::from_millis(500) || w > Duration::from_secs(3600) {
                return Err(invalid("window", "must be 0.5 s to 1 h"));
            }
            c.window = w;
        }
        if let Some(b) = o.stack_bytes.or(f.stack_bytes) {
            if b > 65536 || b % 8 != 0 {
                return Err(invalid(
                    "stack_bytes",
                    "must be a multiple of 8 from 0 to 65536",
                ));
            }
            c.stack_bytes = b;
        }
        c.bpf_stats = o.bpf_stats || f.bpf_stats.unwrap_or(c.bpf_stats);
        if let Some(n) = f.memory_windows {
            if n > 10_000 {
                return Err(invalid("memory_windows", "at most 10000"));
            }
            c.memory_windows = n;
        }
        if let Some(s) = o.socket.as_ref().or(f.socket.as_ref()) {
            if !s.is_absolute() {
                return Err(invalid("socket", "must be an absolute path"));
            }
            c.socket = s.clone();
        }
        let limit = |v: Option<usize>, key: &'static str, default: usize| match v {
            None => Ok(default),
            Some(0) => Err(invalid(key, "must be at least 1")),
            Some(n) if n > 100_000_000 => Err(invalid(key, "at most 100000000")),
            Some(n) => Ok(n),
        };
        c.limits = Limits {
            max_stacks: limit(
                o.max_stacks.or(f.limits.max_stacks),
                "limits.max_stacks",
                c.limits.max_stacks,
            )?,
            max_groups: limit(
                o.max_groups.or(f.limits.max_groups),
                "limits.max_groups",
                c.limits.max_groups,
            )?,
            max_processes: limit(
                o.max_processes.or(f.limits.max_processes),
                "limits.max_processes",
                c.limits.max_processes,
            )?,
            short_lived: match o.short_lived.as_ref().or(f.limits.short_lived.as_ref()) {
                Some(d) => parse_duration(d).map_err(|e| invalid("limits.short_lived", e))?,
                None => c.limits.short_lived,
            },
        };
        let enabled = !o.no_store && f.store.enabled.unwrap_or(true);
        c.store = if enabled {
            let mut s = c.store.take().unwrap_or_else(|| unreachable!());
            if let Some(d) = o.store_dir.as_ref().or(f.store.dir.as_ref()) {
                s.dir = d.clone();
            }
            if let Some(a) = o.max_age.as_ref().or(f.store.max_age.as_ref()) {
                s.max_age = parse_duration(a).map_err(|e| invalid("store.max_age", e))?;
                if s.max_age < c.window {
                    return Err(invalid("store.max_age", "must be at least one window"));
                }
            }
            if let Some(sz) = o.max_size.as_ref().or(f.store.max_size.as_ref()) {
                s.max_bytes = parse_size(sz).map_err(|e| invalid("store.max_size", e))?;
                if s.max_bytes < 1 << 20 {
                    return Err(invalid("store.max_size", "must be at least 1MiB"));
                }
            }
            Some(s)
        } else {
            None
        };
        c.allow_remote = o.allow_remote || f.metrics.allow_remote.unwrap_or(false);
        if let Some(l) = o.listen.as_ref().or(f.metrics.listen.as_ref()) {
            c.listen = listen_addr(l, "metrics.listen")?;
        }
        if let Some(a) = c.listen {
            if !a.ip().is_loopback() && !c.allow_remote {
                return Err(invalid(
                    "metrics.listen",
                    format!("{a} is not loopback (set metrics.allow_remote = true)"),
                ));
            }
        }
        if let Some(t) = f.metrics.top {
            c.metrics_top = limit(Some(t), "metrics.top", t)?;
        }
        if let Some(u) = o.otlp_url.as_ref().or(f.push.otlp_url.as_ref()) {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(invalid(
                    "push.otlp_url",
                    format!("{u:?}: not an http(s) URL"),
                ));
            }
            c.push.otlp_url = Some(u.clone());
        }
        if let Some(q) = f.push.queue {
            c.push.queue = limit(Some(q), "push.queue", q)?;
        }
        c.labels = f.labels;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        for bad in ["", "10x", "h", "-5", "1e400", "5s5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("1PB").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn points_in_time_and_ranges() {
        let now = 10_000 * 1_000_000_000u64;
        assert_eq!(parse_when("now", now), Ok(now));
        assert_eq!(parse_when("1h", now), Ok(now - 3600 * 1_000_000_000));
        assert_eq!(parse_when("@5", now), Ok(5_000_000_000));
        assert_eq!(
            parse_range("2h..1h", now),
            Ok((now - 7200 * 1_000_000_000, now - 3600 * 1_000_000_000))
        );
        assert!(parse_range("1h..2h", now)
            .unwrap_err()
            .contains("FROM is after TO"));
        assert!(parse_range("1h", now).is_err());
        assert!(parse_when("yesterday", now).is_err());
    }

    #[test]
    fn file_values_and_flags_over_them() {
        let text = r#"
            frequency_hz = 49
            window = "5s"
            [limits]
            max_stacks = 1000
            [store]
            dir = "/tmp/pk"
            max_age = "1h"
            max_size = "64MiB"
            [metrics]
            listen = ""
            [push]
            otlp_url = "http://127.0.0.1:4318"
            [labels]
            team = "db"
        "#;
        let c = Config::parse(text, &Overrides::default()).unwrap();
        assert_eq!(c.frequency_hz, 49);
        assert_eq!(c.window, Duration::from_secs(5));
        assert_eq!(c.limits.max_stacks, 1000);
        let s = c.store.as_ref().unwrap();
        assert_eq!(
            (s.dir.as_path(), s.max_age, s.max_bytes),
            (Path::new("/tmp/pk"), Duration::from_secs(3600), 64 << 20)
        );
        assert_eq!(c.listen, None);
        assert_eq!(c.labels["team"], "db");
        let over = Overrides {
            frequency_hz: Some(99),
            no_store: true,
            listen: Some("9999".into()),
            ..Overrides::default()
        };
        let c = Config::parse(text, &over).unwrap();
        assert_eq!(c.frequency_hz, 99);
        assert_eq!(c.store, None);
        assert_eq!(c.listen, Some(SocketAddr::from(([127, 0, 0, 1], 9999))));
    }

    /// The documented example file (packaging/agent.toml) parses and says the defaults.
    #[test]
    fn bpf_stats_are_opt_in() {
        let off = Overrides::default();
        assert!(!Config::parse("", &off).unwrap().bpf_stats);
        assert!(Config::parse("bpf_stats = true", &off).unwrap().bpf_stats);
        let on = Overrides {
            bpf_stats: true,
            ..Overrides::default()
        };
        assert!(Config::parse("bpf_stats = false", &on).unwrap().bpf_stats);
        assert!(Config::parse("bpf_stats = 1", &off).is_err());
    }

    #[test]
    fn the_packaged_file_is_the_defaults() {
        let text = include_str!("../../../packaging/agent.toml");
        let c = Config::parse(text, &Overrides::default()).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn bad_values_are_one_line_naming_the_key() {
        let cases = [
            ("frequency_hz = 0", "frequency_hz: 0: must be 1 to 1000"),
            ("window = \"10x\"", "window: \"10x\" is not a duration"),
            (
                "[store]\nmax_size = \"1KiB\"",
                "store.max_size: must be at least 1MiB",
            ),
            (
                "[limits]\nmax_stacks = 0",
                "limits.max_stacks: must be at least 1",
            ),
            (
                "[metrics]\nlisten = \"0.0.0.0:80\"",
                "metrics.listen: 0.0.0.0:80 is not loopback",
            ),
            ("frequncy_hz = 19", "unknown field `frequncy_hz`"),
            ("socket = \"rel\"", "socket: must be an absolute path"),
            ("[push]\notlp_url = \"ftp://x\"", "push.otlp_url"),
        ];
        for (text, want) in cases {
            let e = Config::parse(text, &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
