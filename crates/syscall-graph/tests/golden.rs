//! The three renderers on two fixed profiles, compared with golden files (`PKPROF_BLESS=1`
//! rewrites them); the DOT output must also be accepted by Graphviz and the JSON must parse back
//! with the fields docs/json.md documents.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{arg, assert_golden, raw, sc, stack};
use pkprof_syscall_graph::costs::{CalibrationKey, Measure, OpCost, SingleCallCost, COSTS_SCHEMA};
use pkprof_syscall_graph::render::{dot, json, text};
use pkprof_syscall_graph::{
    Analysis, CallSiteFrame, CostTable, Costs, Lost, Node, Options, SyscallProfile, TraceBuilder,
};

/// Time per call of each syscall in the fixtures, so that the tables' % time is worked out.
fn ns(name: &str) -> u64 {
    match name {
        "read" => 2_000,
        "write" => 3_000,
        "openat" => 1_500,
        "fstat" => 500,
        "close" => 400,
        "futex" => 10_000,
        "poll" => 50_000,
        "recvfrom" => 1_500,
        "sendto" => 2_500,
        "sendmsg" => 2_000,
        _ => 300,
    }
}

struct Script(TraceBuilder);

impl Script {
    fn new(pid: u32, tid: u32, comm: &str) -> Script {
        Script(TraceBuilder::new(pid, tid, comm))
    }

    fn call(&mut self, node: Node, stack: Option<&[CallSiteFrame]>) -> &mut Self {
        let t = ns(&node.name);
        self.0.call(&node, false, t, stack);
        self
    }

    fn fail(&mut self, node: Node) -> &mut Self {
        let t = ns(&node.name);
        self.0.call(&node, true, t, None);
        self
    }
}

/// `tar cf x.tar dir` (pid 4242) archiving 20 files with a compressor thread (tid 4243), and an
/// echo server whose comm has a quote and a backslash (pid 77), over 1.5 s.
///
/// tar main thread, 118 + 3 = 185 calls: brk, mmap x3, then per file
/// `openat fstat (read write) x3 read close` (20 files, 180 calls), then openat failing twice.
/// Reads are symbolized; writes are not (offsets in libc.so.6 and tar).
/// Compressor: (futex write write) x10. Echo server: (poll recvfrom sendto) x30, then sendmsg x8.
/// Every kind of loss is non-zero but `sites_full`.
fn sample() -> SyscallProfile {
    let read_site = stack(&["__libc_read", "read_file", "dump_file", "main"]);
    let write_site = vec![
        raw("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x11a2b3),
        raw("/usr/bin/tar", 0x4c10),
        raw("/usr/bin/tar", 0x2f00),
    ];
    let mut tar = Script::new(4242, 4242, "tar");
    tar.call(sc("brk"), None);
    for _ in 0..3 {
        tar.call(sc("mmap"), None);
    }
    for _ in 0..20 {
        tar.call(sc("openat"), None).call(sc("fstat"), None);
        for _ in 0..3 {
            tar.call(sc("read"), Some(&read_site))
                .call(sc("write"), Some(&write_site));
        }
        tar.call(sc("read"), Some(&read_site))
            .call(sc("close"), None);
    }
    tar.fail(sc("openat")).fail(sc("openat"));

    let mut zip = Script::new(4242, 4243, "tar");
    let zip_write = stack(&["__GI___libc_write", "flush_block", "compress_loop"]);
    for _ in 0..10 {
        zip.call(sc("futex"), None);
        zip.call(sc("write"), Some(&zip_write))
            .call(sc("write"), Some(&zip_write));
    }

    let mut srv = Script::new(77, 77, "we\"ird\\srv");
    let rx = stack(&["__libc_recvfrom", "serve"]);
    let tx = stack(&["__libc_sendto", "serve"]);
    for _ in 0..30 {
        srv.call(sc("poll"), None)
            .call(sc("recvfrom"), Some(&rx))
            .call(sc("sendto"), Some(&tx));
    }
    for _ in 0..8 {
        srv.call(sc("sendmsg"), None);
    }

    SyscallProfile {
        target: "command: tar cf x.tar dir".into(),
        duration_ns: 1_500_000_000,
        args_split: false,
        threads: vec![tar.0.finish(), zip.0.finish(), srv.0.finish()],
        lost: Lost {
            transitions_full: 3,
            sites_full: 0,
            stacks_failed: 12,
            threads_full: 4,
            targets_full: 2,
        },
    }
}

/// `cp` with `--args`: 10 x (read(fd=3, 4K..8K) write(fd=4, 4K..8K)), a last read of 0 bytes,
/// then close(3), close(4).
fn args_sample() -> SyscallProfile {
    let mut cp = Script::new(9, 9, "cp");
    for _ in 0..10 {
        cp.call(arg("read", 3, 13), None)
            .call(arg("write", 4, 13), None);
    }
    cp.call(arg("read", 3, 0), None)
        .call(sc("close").with_arg(Some(3), None), None)
        .call(sc("close").with_arg(Some(4), None), None);
    SyscallProfile {
        target: "pid 9".into(),
        duration_ns: 20_000_000,
        args_split: true,
        threads: vec![cp.0.finish()],
        lost: Lost::default(),
    }
}

fn render(
    a: &Analysis,
    f: fn(&Analysis, &mut dyn Write) -> Result<(), pkprof_syscall_graph::Error>,
) -> String {
    let mut out = Vec::new();
    f(a, &mut out).expect("render");
    String::from_utf8(out).expect("UTF-8")
}

fn analysis(p: &SyscallProfile) -> Analysis {
    Analysis::new(p, &Options::default())
}

#[test]
fn text_sample() {
    assert_golden("sample.txt", &render(&analysis(&sample()), text::write));
}

#[test]
fn text_args() {
    assert_golden("args.txt", &render(&analysis(&args_sample()), text::write));
}

#[test]
fn dot_sample() {
    let out = render(&analysis(&sample()), dot::write);
    assert_golden("sample.dot", &out);
    graphviz_accepts(&out);
}

#[test]
fn dot_args() {
    let out = render(&analysis(&args_sample()), dot::write);
    assert_golden("args.dot", &out);
    graphviz_accepts(&out);
}

#[test]
fn json_sample() {
    assert_golden("sample.json", &render(&analysis(&sample()), json::write));
}

/// Runs `dot -Tsvg` on the output: it must exit 0 without warnings and draw every node.
fn graphviz_accepts(dot_text: &str) {
    let mut child = match Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!(
            "Graphviz `dot` cannot be run ({e}): install graphviz (apt-get install graphviz) to \
             check the DOT report"
        ),
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(dot_text.as_bytes())
        .expect("writing to dot");
    let out = child.wait_with_output().expect("dot");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "dot -Tsvg failed: {stderr}\n{dot_text}"
    );
    assert!(stderr.trim().is_empty(), "dot -Tsvg warned: {stderr}");
    let svg = String::from_utf8(out.stdout).expect("UTF-8 SVG");
    assert!(svg.contains("<svg"), "no SVG from dot");
    let nodes = dot_text
        .lines()
        .filter(|l| l.trim_start().starts_with('p') && l.contains("[label=") && !l.contains("->"))
        .count();
    assert_eq!(svg.matches("class=\"node\"").count(), nodes, "nodes drawn");
}

#[test]
fn dot_escapes_names() {
    let out = render(&analysis(&sample()), dot::write);
    assert!(
        out.contains(r#"label="pid 77 (we\"ird\\srv): 98 calls";"#),
        "{out}"
    );
}

/// The JSON parses back into the schema's types and into plain JSON with the documented fields,
/// whose figures agree with each other; every key it uses is documented in docs/json.md.
#[test]
fn json_parses_back_with_documented_fields() {
    let a = analysis(&sample());
    let out = render(&a, json::write);
    let typed: json::Report = serde_json::from_str(&out).expect("JSON parses as json::Report");
    assert_eq!(typed, json::report(&a));

    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON parses");
    assert_eq!(v["schema"], "pkprof-syscalls/1");
    assert_eq!(v["target"], "command: tar cf x.tar dir");
    assert_eq!(v["duration_ns"], 1_500_000_000u64);
    assert_eq!(v["total_calls"], 334);
    assert_eq!(v["total_errors"], 2);
    let syscalls = v["syscalls"].as_array().expect("syscalls");
    let calls: Vec<u64> = syscalls
        .iter()
        .map(|s| s["calls"].as_u64().unwrap())
        .collect();
    assert_eq!(calls.iter().sum::<u64>(), 334);
    assert!(
        calls.windows(2).all(|w| w[0] >= w[1]),
        "sorted by calls: {calls:?}"
    );
    let openat = syscalls
        .iter()
        .find(|s| s["name"] == "openat")
        .expect("openat");
    assert_eq!(
        (openat["calls"].as_u64(), openat["errors"].as_u64()),
        (Some(22), Some(2))
    );
    assert_eq!(openat["total_ns"], 22 * 1500);

    let processes = v["processes"].as_array().expect("processes");
    assert_eq!(processes.len(), 2);
    assert_eq!(processes[0]["pid"], 4242);
    assert_eq!(processes[0]["tids"], serde_json::json!([4242, 4243]));
    assert_eq!(processes[1]["comm"], "we\"ird\\srv");

    let threads = v["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 3);
    for t in threads {
        let nodes = t["nodes"].as_array().expect("nodes");
        let edges = t["edges"].as_array().expect("edges");
        let edge_sum: u64 = edges.iter().map(|e| e["count"].as_u64().unwrap()).sum();
        assert_eq!(
            Some(edge_sum),
            t["calls"].as_u64(),
            "a thread's calls are its edges' counts"
        );
        for (i, n) in nodes.iter().enumerate() {
            assert_eq!(n["id"], i);
            let into: u64 = edges
                .iter()
                .filter(|e| e["to"] == i)
                .map(|e| e["count"].as_u64().unwrap())
                .sum();
            assert_eq!(
                n["calls"].as_u64(),
                Some(into),
                "node calls = sum of in-edges"
            );
        }
        assert_eq!(edges.iter().filter(|e| e["from"].is_null()).count(), 1);
    }

    let clusters = v["clusters"].as_array().expect("clusters");
    assert_eq!(clusters.len(), 8);
    assert_eq!(v["clusters_found"], 8);
    let c = &clusters[0];
    assert_eq!(c["path"], serde_json::json!(["read", "write"]));
    assert_eq!(
        (c["pid"].as_u64(), c["tid"].as_u64()),
        (Some(4242), Some(4242))
    );
    assert_eq!(
        (c["count"].as_u64(), c["crossings_saved"].as_u64()),
        (Some(60), Some(120))
    );
    assert_eq!(c["shape"], "loop");
    assert_eq!(c["suggestion"]["kind"], "single_call");
    assert_eq!(
        c["suggestion"]["replacement"],
        "copy_file_range / sendfile / splice"
    );
    assert!(c["suggestion"]["why"]
        .as_str()
        .unwrap()
        .contains("copy_file_range"));
    assert_eq!(c["sites"][1]["frames"][0]["text"], "libc.so.6+0x11a2b3");
    let none = clusters
        .iter()
        .find(|c| c["suggestion"]["kind"] == "none")
        .expect("a none");
    assert!(none["suggestion"]["replacement"].is_null());
    assert_eq!(v["lost"]["transitions_full"], 3);
    assert_eq!(v["lost"]["stacks_failed"], 12);
    assert_eq!(v["lost"]["threads_full"], 4);
    assert_eq!(v["lost"]["targets_full"], 2);

    assert_keys_documented(&v);

    // With a (fixed) cost table: the costs, savings and alternatives, also parsed back and
    // documented.
    let a = analysis(&sample()).with_costs(Costs::Table {
        table: Box::new(cost_table()),
        source: "test table".into(),
    });
    let out = render(&a, json::write);
    let typed: json::Report = serde_json::from_str(&out).expect("JSON parses as json::Report");
    assert_eq!(typed, json::report(&a));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON parses");
    assert_eq!(v["costs"]["source"], "test table");
    assert_eq!(v["costs"]["table"]["batch_size"], 16);
    let mut keys = std::collections::BTreeSet::new();
    collect_keys(&v, &mut keys);
    for k in [
        "costs",
        "saving",
        "alternatives",
        "status",
        "saved_ns",
        "cluster_ns",
        "basis",
        "median_ns",
        "single_calls",
    ] {
        assert!(keys.contains(k), "no {k} in {out}");
    }
    assert_keys_documented(&v);
}

/// Quartiles a whole number of ns apart (the table reads back exactly either way since
/// serde_json's `float_roundtrip`; see costs.rs, the_cached_table_round_trips_exactly).
fn measure(median: f64) -> Measure {
    Measure {
        median_ns: median,
        p25_ns: median - 10.0,
        p75_ns: median + 10.0,
        samples: 9,
    }
}

/// A fixed cost table: batches win for statx and openat, lose for read and write;
/// copy_file_range wins over read + write.
fn cost_table() -> CostTable {
    let op = |op: &str, plain: f64, batched: f64| OpCost {
        op: op.into(),
        on: "file".into(),
        variant: String::new(),
        plain: measure(plain),
        batched: Some(measure(batched)),
        batch_fixed: Some(measure(700.0)),
        unlinked: None,
    };
    CostTable {
        schema: COSTS_SCHEMA.into(),
        key: CalibrationKey {
            kernel: "6.18".into(),
            cpu: "test".into(),
            pkprof_version: "0".into(),
        },
        measured_unix_s: 0,
        seconds: 1.0,
        mode: "quick".into(),
        batch_size: 16,
        engine: "io_uring".into(),
        targets: [("file".to_string(), "page-cache file".to_string())].into(),
        crossing: measure(100.0),
        batched_unavailable: None,
        ops: vec![
            op("read", 1000.0, 1600.0),
            op("write", 1500.0, 4000.0),
            op("openat", 2000.0, 600.0),
            op("statx", 2000.0, 600.0),
            op("close", 300.0, 200.0),
        ],
        single_calls: vec![SingleCallCost {
            call: "copy_file_range".into(),
            unit: "4 KiB read + write iteration".into(),
            on: "file".into(),
            plain: measure(2500.0),
            single: measure(900.0),
        }],
    }
}

fn assert_keys_documented(v: &serde_json::Value) {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/json.md"))
        .expect("docs/json.md");
    let mut keys = std::collections::BTreeSet::new();
    collect_keys(v, &mut keys);
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "keys not documented in docs/json.md: {missing:?}"
    );
}

fn collect_keys(v: &serde_json::Value, keys: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                keys.insert(k.clone());
                collect_keys(v, keys);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| collect_keys(v, keys)),
        _ => {}
    }
}

/// Every non-zero loss is in the text report and the DOT title; the JSON has all five.
#[test]
fn every_loss_is_reported() {
    let lost = "Lost: 3 transitions (transition map full), 12 user stacks unreadable, 4 calls not \
                counted (thread state could not be allocated), 2 child processes not followed \
                (target table full)";
    let a = analysis(&sample());
    let t = render(&a, text::write);
    assert!(t.contains(&format!("\n{lost}\n")), "{t}");
    assert!(!t.contains("call-site samples"), "{t}");
    let d = render(&a, dot::write);
    assert!(d.contains(&format!("\\n{lost}\", labelloc=t")), "{d}");

    let mut p = sample();
    p.lost = Lost {
        threads_full: 1,
        targets_full: 1,
        ..Lost::default()
    };
    let a = analysis(&p);
    let t = render(&a, text::write);
    assert!(
        t.contains(
            "\nLost: 1 call not counted (thread state could not be allocated), 1 child process \
             not followed (target table full)\n"
        ),
        "{t}"
    );
    let v: serde_json::Value = serde_json::from_str(&render(&a, json::write)).expect("JSON");
    assert_eq!(
        v["lost"],
        serde_json::json!({
            "transitions_full": 0,
            "sites_full": 0,
            "stacks_failed": 0,
            "threads_full": 1,
            "targets_full": 1,
        })
    );
    // A report written before the two thread/target counts existed still reads back.
    let old: Lost =
        serde_json::from_str(r#"{"transitions_full": 1, "sites_full": 0, "stacks_failed": 0}"#)
            .expect("old lost object");
    assert_eq!(old.threads_full + old.targets_full, 0);
    assert!(!old.is_empty());
    assert!(!Lost {
        targets_full: 1,
        ..Lost::default()
    }
    .is_empty());
}

/// A profile with no calls still gives a valid report in every format.
#[test]
fn empty_profile_renders() {
    let a = analysis(&SyscallProfile {
        target: "pid 1".into(),
        ..SyscallProfile::default()
    });
    let t = render(&a, text::write);
    assert!(t.contains("0 calls, 0 errors"), "{t}");
    assert!(
        t.contains("No cluster: no path or loop ran at least 2 times."),
        "{t}"
    );
    assert!(!t.contains("Lost"), "{t}");
    graphviz_accepts(&render(&a, dot::write));
    let v: serde_json::Value = serde_json::from_str(&render(&a, json::write)).expect("JSON");
    assert_eq!(v["total_calls"], 0);
    assert_eq!(v["clusters"], serde_json::json!([]));
}
