//! A real OpenTelemetry Collector on loopback for the OTLP tests, and what its file exporter wrote,
//! decoded with nothing of pkprof's (also used by crates/cli/tests/push.rs).
//!
//! The collector is the one `scripts/setup.sh` builds (scripts/otelcol/build.sh):
//! `$PKPROF_OTELCOL`, else `$PKPROF_DEV_CACHE/otelcol/otelcol-pkprof` (default
//! `~/.cache/pkprof-dev`). Its file exporter writes one JSON line per request it accepted;
//! attribute keys and some string values are references into the request's string table.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The collector binary, or a panic saying how to get it.
pub fn collector_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("PKPROF_OTELCOL") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("PKPROF_DEV_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("pkprof-dev")))
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/pkprof-dev")
        });
    let bin = cache.join("otelcol/otelcol-pkprof");
    assert!(
        bin.exists(),
        "no OpenTelemetry Collector at {}: run scripts/setup.sh (or set PKPROF_OTELCOL)",
        bin.display()
    );
    bin
}

/// A free loopback port (free when asked; the collector binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A running collector: OTLP/HTTP on `http_port`, its file exporter writing `output`.
pub struct Collector {
    child: Option<Child>,
    pub dir: PathBuf,
    pub output: PathBuf,
    pub http_port: u16,
    grpc_port: u16,
    /// What earlier runs wrote (a restarted file exporter starts its file again).
    earlier: String,
}

impl Collector {
    /// Starts a collector in a fresh directory named `name` under the test's temporary dir.
    pub fn start(tmp: &Path, name: &str) -> Collector {
        let dir = tmp.join(format!("otelcol-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Collector {
            child: None,
            output: dir.join("profiles.json"),
            dir,
            http_port: free_port(),
            grpc_port: free_port(),
            earlier: String::new(),
        };
        c.restart();
        c
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Starts it again on the same ports and file (after [`Collector::stop`]).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the collector is running");
        let config = self.dir.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
exporters:
  file:
    path: {out}
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
",
                grpc = self.grpc_port,
                http = self.http_port,
                out = self.output.display()
            ),
        )
        .unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("collector.log"))
            .unwrap();
        let child = Command::new(collector_binary())
            .arg("--config")
            .arg(&config)
            .arg("--feature-gates=service.profilesSupport")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the collector starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.http_port)).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "the collector exited ({status}): {}",
                    std::fs::read_to_string(self.dir.join("collector.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "the collector never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills it (as a crash or a network cut would end it: no goodbye).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let text = std::fs::read_to_string(&self.output).unwrap_or_default();
            self.earlier += complete_lines(&text);
            let _ = std::fs::remove_file(&self.output);
        }
    }

    /// Every request the file exporter wrote so far.
    pub fn requests(&self) -> Vec<Request> {
        let now = std::fs::read_to_string(&self.output).unwrap_or_default();
        let text = self.earlier.clone() + complete_lines(&now);
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                Request::parse(&serde_json::from_str(l).expect("the file exporter wrote JSON"))
            })
            .collect()
    }

    /// Waits until the file holds at least `n` requests (the exporter flushes every 100 ms).
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Request> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.requests();
            if r.len() >= n || Instant::now() >= deadline {
                return r;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An attribute value as the JSON had it, strings resolved.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Val {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl Val {
    pub fn int(&self) -> Option<i64> {
        match self {
            Val::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// One frame of a sample's stack.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Function names of the location, innermost first.
    pub functions: Vec<String>,
    pub attrs: HashMap<String, Val>,
    pub mapping_file: String,
    pub mapping_attrs: HashMap<String, Val>,
}

#[derive(Clone, Debug)]
pub struct Sample {
    pub values: Vec<i64>,
    pub attrs: HashMap<String, Val>,
    /// Leaf first.
    pub frames: Vec<Frame>,
}

#[derive(Clone, Debug)]
pub struct Profile {
    pub sample_type: (String, String),
    pub period_type: (String, String),
    pub period: i64,
    pub time_unix_nano: u64,
    pub samples: Vec<Sample>,
}

impl Profile {
    /// The sum of every value (wide: values may be saturated at `i64::MAX`).
    pub fn total(&self) -> i128 {
        let values = self.samples.iter().flat_map(|s| &s.values);
        values.map(|v| *v as i128).sum()
    }
}

#[derive(Clone, Debug)]
pub struct Resource {
    pub attrs: HashMap<String, Val>,
    pub scope: String,
    pub profiles: Vec<Profile>,
}

impl Resource {
    pub fn pid(&self) -> Option<i64> {
        self.attrs.get("process.pid").and_then(Val::int)
    }

    /// The profile of this sample type (`samples` or `cpu`).
    pub fn profile(&self, sample_type: &str) -> Option<&Profile> {
        self.profiles
            .iter()
            .find(|p| p.sample_type.0 == sample_type)
    }
}

/// One request as the collector wrote it.
#[derive(Clone, Debug)]
pub struct Request {
    pub resources: Vec<Resource>,
}

fn num(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n.as_i64().expect("an integer"),
        Value::String(s) => s.parse().expect("an integer in a string"),
        Value::Null => 0,
        other => panic!("not a number: {other}"),
    }
}

fn idx(v: &Value, key: &str) -> usize {
    num(v.get(key).unwrap_or(&Value::Null)) as usize
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], |a| a)
}

impl Request {
    pub fn parse(v: &Value) -> Request {
        let dict = &v["dictionary"];
        let strings: Vec<String> = list(dict, "stringTable")
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect();
        let s = |i: usize| strings[i].clone();
        let value = |v: &Value| -> Val {
            let v = v.get("value").unwrap_or(v);
            if let Some(x) = v.get("stringValue") {
                Val::Str(x.as_str().unwrap().to_owned())
            } else if v.get("stringValueStrindex").is_some() {
                Val::Str(s(idx(v, "stringValueStrindex")))
            } else if let Some(x) = v.get("intValue") {
                Val::Int(num(x))
            } else if let Some(x) = v.get("boolValue") {
                Val::Bool(x.as_bool().unwrap())
            } else {
                panic!("unexpected attribute value {v}")
            }
        };
        let key = |kv: &Value| -> String {
            match kv.get("key") {
                Some(k) => k.as_str().unwrap().to_owned(),
                None => s(idx(kv, "keyStrindex")),
            }
        };
        let table_attrs: Vec<(String, Val)> = list(dict, "attributeTable")
            .iter()
            .map(|a| {
                if a.get("value")
                    .is_some_and(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                {
                    (key(a), value(a))
                } else {
                    (String::new(), Val::Str(String::new()))
                }
            })
            .collect();
        let attrs_of = |v: &Value| -> HashMap<String, Val> {
            list(v, "attributeIndices")
                .iter()
                .map(|i| table_attrs[num(i) as usize].clone())
                .collect()
        };
        let functions: Vec<String> = list(dict, "functionTable")
            .iter()
            .map(|f| s(idx(f, "nameStrindex")))
            .collect();
        let mappings: Vec<(String, HashMap<String, Val>)> = list(dict, "mappingTable")
            .iter()
            .map(|m| (s(idx(m, "filenameStrindex")), attrs_of(m)))
            .collect();
        let locations: Vec<Frame> = list(dict, "locationTable")
            .iter()
            .map(|l| {
                let (file, mattrs) = mappings[idx(l, "mappingIndex")].clone();
                Frame {
                    functions: list(l, "lines")
                        .iter()
                        .map(|line| functions[idx(line, "functionIndex")].clone())
                        .collect(),
                    attrs: attrs_of(l),
                    mapping_file: file,
                    mapping_attrs: mattrs,
                }
            })
            .collect();
        let stacks: Vec<Vec<Frame>> = list(dict, "stackTable")
            .iter()
            .map(|st| {
                list(st, "locationIndices")
                    .iter()
                    .map(|i| locations[num(i) as usize].clone())
                    .collect()
            })
            .collect();
        let value_type = |v: Option<&Value>| -> (String, String) {
            v.map_or((String::new(), String::new()), |v| {
                (s(idx(v, "typeStrindex")), s(idx(v, "unitStrindex")))
            })
        };
        let resources = list(v, "resourceProfiles")
            .iter()
            .map(|r| {
                let attrs = list(&r["resource"], "attributes")
                    .iter()
                    .map(|kv| (key(kv), value(kv)))
                    .collect();
                let mut scope = String::new();
                let mut profiles = Vec::new();
                for sp in list(r, "scopeProfiles") {
                    scope = sp["scope"]["name"].as_str().unwrap_or("").to_owned();
                    for p in list(sp, "profiles") {
                        profiles.push(Profile {
                            sample_type: value_type(p.get("sampleType")),
                            period_type: value_type(p.get("periodType")),
                            period: num(p.get("period").unwrap_or(&Value::Null)),
                            time_unix_nano: num(p.get("timeUnixNano").unwrap_or(&Value::Null))
                                as u64,
                            samples: list(p, "samples")
                                .iter()
                                .map(|smp| Sample {
                                    values: list(smp, "values").iter().map(num).collect(),
                                    attrs: attrs_of(smp),
                                    frames: stacks[idx(smp, "stackIndex")].clone(),
                                })
                                .collect(),
                        });
                    }
                }
                Resource {
                    attrs,
                    scope,
                    profiles,
                }
            })
            .collect();
        Request { resources }
    }
}

/// The lines the file exporter finished writing: a line without its newline is still being
/// written (or was cut by a kill) and is no request yet.
fn complete_lines(text: &str) -> &str {
    text.rfind('\n').map_or("", |end| &text[..=end])
}
