//! `pkprof syscalls` against real programs (root and BPF needed: run with
//! `cargo test -p pkprof --test syscall_graph -- --include-ignored --nocapture --test-threads=1`).
//!
//! The counts are compared with `strace -f -c`'s on the same deterministic programs (a C workload
//! of known patterns, and Debian's tar); the clusters must name the single-call replacement each
//! pattern has and the function it comes from; the DOT output must render with Graphviz.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("syscalls-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn pkprof_syscalls(args: &[&str]) -> Output {
    let out = Command::new(pkprof_bin())
        .arg("syscalls")
        .args(args)
        .output()
        .expect("pkprof runs");
    eprintln!(
        "pkprof syscalls {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `pkprof syscalls --format json ARGS` and parses its report.
fn json_report(name: &str, args: &[&str]) -> Value {
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.json"));
    let mut all = vec!["--format", "json", "-o", file.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = pkprof_syscalls(&all);
    assert!(out.status.success(), "pkprof syscalls failed");
    serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).expect("the report is JSON")
}

/// (calls, errors) per syscall from `strace -f -c` on the same command.
fn strace_counts(name: &str, argv: &[&str]) -> BTreeMap<String, (u64, u64)> {
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.strace"));
    let status = Command::new("strace")
        .args(["-f", "-c", "-U", "name,calls,errors", "-o"])
        .arg(&file)
        .args(argv)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("strace runs (scripts/setup.sh installs it)");
    assert!(status.success(), "strace {argv:?} failed");
    let text = std::fs::read_to_string(&file).unwrap();
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let calls = f.get(1)?.parse().ok()?;
            (f[0] != "total").then(|| {
                let errors = f.get(2).and_then(|e| e.parse().ok()).unwrap_or(0);
                (f[0].to_string(), (calls, errors))
            })
        })
        .collect()
}

/// (calls, errors) per syscall from the report's `syscalls` table.
fn report_counts(report: &Value) -> BTreeMap<String, (u64, u64)> {
    report["syscalls"]
        .as_array()
        .expect("syscalls table")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                (u64_of(s, "calls"), u64_of(s, "errors")),
            )
        })
        .collect()
}

fn assert_same_counts(ours: &BTreeMap<String, (u64, u64)>, strace: &BTreeMap<String, (u64, u64)>) {
    let names: std::collections::BTreeSet<&String> = ours.keys().chain(strace.keys()).collect();
    let mut diffs = Vec::new();
    for n in names {
        let (a, b) = (ours.get(n), strace.get(n));
        if a != b {
            diffs.push(format!("{n}: pkprof {a:?}, strace {b:?}"));
        }
    }
    let total = |m: &BTreeMap<String, (u64, u64)>| m.values().map(|v| v.0).sum::<u64>();
    eprintln!(
        "counts: pkprof {} calls in {} syscalls, strace {} in {}",
        total(ours),
        ours.len(),
        total(strace),
        strace.len()
    );
    assert!(
        diffs.is_empty(),
        "counts differ from strace -f -c:\n{}",
        diffs.join("\n")
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn counts_equal_strace_on_the_pattern_workload() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("strace");
    let argv = [bin.to_str().unwrap(), dir.to_str().unwrap()];
    let strace = strace_counts("patterns", &argv);
    let mut args = vec!["--"];
    args.extend_from_slice(&argv);
    let report = json_report("patterns-counts", &args);
    assert_same_counts(&report_counts(&report), &strace);
    assert_eq!(strace["sendmsg"], (200, 0), "strace saw the workload");
    assert_eq!(strace["rt_sigreturn"], (20, 0), "strace saw the signals");
    assert_eq!(
        u64_of(&report, "total_calls"),
        strace.values().map(|v| v.0).sum::<u64>()
    );
    // --no-time counts with the sys_exit program alone (the first exit of a thread that just
    // became traced is not counted, its entry came before): the same counts.
    let mut untimed = vec!["--no-time"];
    untimed.extend_from_slice(&args);
    let report = json_report("patterns-counts-untimed", &untimed);
    assert_same_counts(&report_counts(&report), &strace);
    assert_eq!(u64_of(&report, "total_ns"), 0, "--no-time measured time");
}

/// strace -f counts until every traced process has exited: so does pkprof, for a child that
/// outlives the command.
#[test]
#[ignore = "needs root and BPF"]
fn counts_include_descendants_that_outlive_the_command() {
    let argv = ["sh", "-c", "(sleep 0.3; /bin/true) & exit 0"];
    let strace = strace_counts("outlive", &argv);
    let mut args = vec!["--"];
    args.extend_from_slice(&argv);
    let report = json_report("outlive", &args);
    assert_same_counts(&report_counts(&report), &strace);
    assert_eq!(report_counts(&report)["execve"].0, 3, "sh, sleep and true");
}

#[test]
#[ignore = "needs root and BPF"]
fn counts_equal_strace_on_debian_tar() {
    let dir = scratch("tar");
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for i in 0..20 {
        std::fs::write(src.join(format!("f{i}")), vec![b'a'; 1000 * i]).unwrap();
        std::fs::write(src.join("sub").join(format!("g{i}")), vec![b'b'; 333 * i]).unwrap();
    }
    let archive = dir.join("x.tar");
    let tar = |name: &str| {
        vec![
            "tar".to_string(),
            "cf".into(),
            dir.join(name).to_str().unwrap().to_string(),
            "-C".into(),
            dir.to_str().unwrap().to_string(),
            "src".into(),
        ]
    };
    let strace_argv = tar("strace.tar");
    let strace = strace_counts(
        "tar",
        &strace_argv.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let ours_argv = tar(archive.file_name().unwrap().to_str().unwrap());
    let mut args = vec!["--"];
    args.extend(ours_argv.iter().map(String::as_str));
    let report = json_report("tar", &args);
    assert_same_counts(&report_counts(&report), &strace);
    assert!(strace.get("write").is_some_and(|w| w.0 > 0), "tar wrote");
}

/// The clusters each pattern makes, keyed by the function of the workload it comes from.
#[test]
#[ignore = "needs root and BPF"]
fn clusters_name_their_replacement_and_call_site() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("clusters");
    let report = json_report(
        "patterns-clusters",
        &[
            "--stack-every",
            "1",
            "--",
            bin.to_str().unwrap(),
            dir.to_str().unwrap(),
        ],
    );
    let clusters = report["clusters"].as_array().expect("clusters");
    for c in clusters {
        eprintln!(
            "cluster {:?} x{} saves {}: {} ({}) at {}",
            c["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect::<Vec<_>>(),
            c["count"],
            c["crossings_saved"],
            c["suggestion"]["replacement"],
            c["suggestion"]["kind"],
            c["sites"]
        );
    }
    // (syscalls in the cluster, a word of its replacement, the workload function it comes from)
    let expected: &[(&[&str], &str, &str)] = &[
        (&["read", "write"], "copy_file_range", "copy_file"),
        (&["write"], "writev", "many_writes"),
        (&["close"], "close_range", "many_closes"),
        (&["sendmsg"], "sendmmsg", "datagrams"),
        (&["recvmsg"], "recvmmsg", "datagrams"),
        (&["poll"], "epoll", "polls"),
        (&["openat", "newfstatat", "read", "close"], "multi", "stats"),
    ];
    for (calls, replacement, function) in expected {
        let found = clusters.iter().find(|c| {
            let path: Vec<&str> = c["path"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p.as_str())
                .collect();
            calls.iter().all(|s| path.contains(s))
                && c["suggestion"]
                    .to_string()
                    .to_lowercase()
                    .contains(replacement)
        });
        let c = found.unwrap_or_else(|| panic!("no cluster of {calls:?} suggesting {replacement}"));
        // epoll saves work per call (no fd set copied and scanned each time), not crossings.
        if *replacement != "epoll" {
            assert!(u64_of(c, "crossings_saved") > 0, "{calls:?} saves nothing");
        }
        assert!(
            c["sites"].to_string().contains(function),
            "{calls:?}: call sites do not name {function}: {}",
            c["sites"]
        );
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn threads_and_children_have_their_own_graphs() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("threads");
    let report = json_report(
        "patterns-threads",
        &[
            "--",
            bin.to_str().unwrap(),
            dir.to_str().unwrap(),
            "thread",
            "child",
        ],
    );
    let threads = report["threads"].as_array().expect("threads");
    let main_pid = threads.iter().map(|t| u64_of(t, "pid")).min().unwrap();
    // Edges name their nodes by id; the thread's node list gives the names.
    let edge_count = |t: &Value, from: &str, to: &str| -> u64 {
        let name = |id: &Value| {
            t["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["id"] == *id)
                .and_then(|n| n["name"].as_str().map(str::to_string))
        };
        t["edges"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                name(&e["from"]).as_deref() == Some(from) && name(&e["to"]).as_deref() == Some(to)
            })
            .map(|e| u64_of(e, "count"))
            .sum()
    };
    let worker = threads
        .iter()
        .find(|t| u64_of(t, "pid") == main_pid && u64_of(t, "tid") != main_pid)
        .expect("a thread of the main process");
    assert_eq!(edge_count(worker, "getppid", "getppid"), 49, "{worker}");
    let child = threads
        .iter()
        .find(|t| u64_of(t, "pid") != main_pid)
        .expect("the forked child");
    assert_eq!(edge_count(child, "getpid", "getpid"), 39, "{child}");
}

#[test]
#[ignore = "needs root and BPF"]
fn args_split_nodes_by_fd_and_size() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("args");
    let report = json_report(
        "patterns-args",
        &[
            "--args",
            "--",
            bin.to_str().unwrap(),
            dir.to_str().unwrap(),
            "copy",
        ],
    );
    let text = report.to_string();
    // The copy loop reads 4096 bytes at a time (size class [4K, 8K)) from the source it opened
    // first and writes them to the destination opened next: descriptors 3 and 4, one more each
    // when the suite runs with a descriptor of its own inherited (`flock FILE bash
    // scripts/test.sh` hands its lock down as 3).
    let src = (3..8)
        .find(|fd| text.contains(&format!("read(fd={fd}, 4K..8K)")))
        .unwrap_or_else(|| panic!("no split read node: {text}"));
    assert!(
        text.contains(&format!("write(fd={}, 4K..8K)", src + 1)),
        "no split write node on the descriptor after the read's ({src})"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn dot_output_renders_with_graphviz() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("dot");
    let dot_file = dir.join("g.dot");
    let out = pkprof_syscalls(&[
        "--format",
        "dot",
        "-o",
        dot_file.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let svg = Command::new("dot")
        .arg("-Tsvg")
        .arg(&dot_file)
        .output()
        .expect("Graphviz dot runs (scripts/setup.sh installs graphviz)");
    assert!(
        svg.status.success(),
        "dot: {}",
        String::from_utf8_lossy(&svg.stderr)
    );
    let svg = String::from_utf8_lossy(&svg.stdout);
    assert!(
        svg.contains("sendmsg") && svg.contains("copy") || svg.contains("read"),
        "{svg}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn text_report_is_a_strace_table_with_clusters() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("text");
    let out = pkprof_syscalls(&["--", bin.to_str().unwrap(), dir.to_str().unwrap(), "writes"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    let line = text
        .lines()
        .find(|l| l.split_whitespace().last() == Some("write"))
        .expect("a write row");
    // 300 writes of the pattern, plus the 51 of make_file (200 KiB in 4 KiB blocks, one 100 B).
    assert!(line.split_whitespace().any(|f| f == "351"), "{line}");
    assert!(text.contains("writev"), "no writev suggestion");
}

#[test]
#[ignore = "needs root and BPF"]
fn bad_input_is_one_line_and_non_zero() {
    let out = pkprof_syscalls(&["--", "/nonexistent/cmd"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no such command"), "{err}");

    // An unwritable report path is an error before the command runs.
    let marker = scratch("bad-output").join("ran");
    let out = pkprof_syscalls(&[
        "-o",
        "/nonexistent/dir/report.txt",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cannot write the report"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        !marker.exists(),
        "the command ran although the report could not be written"
    );

    let out = pkprof_syscalls(&["-p", "4194303"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no process with PID 4194303"),
        "{err}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn a_pid_that_exits_midway_still_gets_its_report() {
    let mut sleeper = Command::new("sh")
        .args([
            "-c",
            "for i in 1 2 3 4 5 6 7 8; do /bin/true; sleep 0.1; done",
        ])
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    let report = json_report("exits", &["-p", &pid, "--duration", "30"]);
    sleeper.wait().unwrap();
    // The shell forked children that ran /bin/true (followed) and waited for them.
    let counts = report_counts(&report);
    assert!(counts.get("wait4").is_some_and(|c| c.0 >= 1), "{counts:?}");
    assert!(
        counts.get("execve").is_some_and(|c| c.0 >= 1),
        "children not followed: {counts:?}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn a_full_transition_table_is_counted_and_reported() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("full");
    let out = pkprof_syscalls(&[
        "--max-transitions",
        "8",
        "--",
        bin.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lost") && err.contains("--max-transitions"),
        "{err}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.to_lowercase().contains("lost"),
        "the report does not show the loss"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn system_wide_sees_other_processes_but_not_pkprof() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("system");
    // The workload starts after pkprof attached (it sleeps first) and runs the datagram pattern.
    let script = format!("sleep 1; {} {} dgrams", bin.display(), dir.display());
    let mut load = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let report = json_report("system", &["-a", "--duration", "3"]);
    load.wait().unwrap();
    let processes = report["processes"].as_array().expect("processes");
    let workload = processes
        .iter()
        .find(|p| {
            p["comm"]
                .as_str()
                .is_some_and(|c| c.starts_with("workload-sysca"))
        })
        .unwrap_or_else(|| panic!("the workload is not in the system-wide report: {processes:?}"));
    let sendmsg = workload["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "sendmsg")
        .map(|s| u64_of(s, "calls"));
    assert_eq!(sendmsg, Some(200), "{workload}");
    assert!(
        processes.iter().all(|p| p["comm"] != "pkprof"),
        "pkprof counted itself"
    );
}

/// (syscall, frames' (symbol, module) innermost first, sampled calls).
type ChainSite = (String, Vec<(String, String)>, u64);

/// The call sites of the read/write cluster of `sc_chain` (main -> outer -> inner -> read, write
/// in a loop) built without frame pointers. Every 61st call is sampled: an odd period, since an
/// even one (the default 64) falls on the same call of a 2-call loop every time.
fn frameless_chain_sites(name: &str) -> Vec<ChainSite> {
    let bin = build_workload_with("sc_chain", &["-fomit-frame-pointer"]);
    let args = ["--stack-every", "61", "--", bin.to_str().unwrap(), "20000"];
    let report = json_report(name, &args);
    let clusters = report["clusters"].as_array().expect("clusters");
    let cluster = clusters
        .iter()
        .find(|c| {
            let path = c["path"].to_string();
            path.contains("\"read\"") && path.contains("\"write\"")
        })
        .unwrap_or_else(|| panic!("no read/write cluster in {clusters:?}"));
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    cluster["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .map(|s| {
            let frames = s["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| (text(&f["symbol"]), text(&f["module"])))
                .collect();
            (text(&s["syscall"]), frames, u64_of(s, "count"))
        })
        .collect()
}

/// Holds with any unwinder: the sampled calls are there (20,000 of each, 1 in 61 sampled) and
/// their leaf frame is libc's wrapper of the syscall (the ip right after its syscall
/// instruction; libc's own symbol table names it).
#[test]
#[ignore = "needs root and BPF"]
fn frameless_call_sites_start_in_the_libc_wrapper() {
    let sites = frameless_chain_sites("sc-chain-leaf");
    for (syscall, frames, count) in &sites {
        eprintln!("{count:>5} {syscall}: {frames:?}");
    }
    for syscall in ["read", "write"] {
        let calls: u64 = sites.iter().filter(|s| s.0 == syscall).map(|s| s.2).sum();
        // 20,000 calls of each, every 61st call of the thread sampled: ~328 of each.
        assert!(calls >= 250, "{syscall}: {calls} sampled calls");
    }
    for (syscall, frames, _) in &sites {
        let (symbol, module) = &frames[0];
        assert!(
            module.contains("libc.so") && symbol.contains(syscall.as_str()),
            "{syscall}'s leaf frame is not libc's {syscall}: {frames:?}"
        );
    }
}

/// Needs the unwinder (docs/design.md, "User stacks"): without frame pointers only .eh_frame
/// leads from the syscall back to main. For >= 95% of the sampled calls, the frames after the
/// libc wrapper are the source's chain inner < outer < main, and the stack is complete (no
/// `[truncated: ...]` root).
#[test]
#[ignore = "needs root and BPF"]
fn frameless_call_sites_carry_the_whole_chain() {
    let sites = frameless_chain_sites("sc-chain-whole");
    let (mut total, mut whole) = (0, 0);
    for (syscall, frames, count) in &sites {
        eprintln!("{count:>5} {syscall}: {frames:?}");
        let names: Vec<&str> = frames.iter().map(|f| f.0.as_str()).collect();
        total += count;
        if names.get(1..4) == Some(&["inner", "outer", "main"][..])
            && !names.iter().any(|n| n.starts_with("[truncated"))
        {
            whole += count;
        }
    }
    assert!(total > 0, "no call sites");
    assert!(
        whole as f64 >= 0.95 * total as f64,
        "{whole} of {total} sampled calls carry main -> outer -> inner"
    );
}
