//! User stacks of software built without frame pointers (issue 10; docs/design.md, "User
//! stacks"), end to end: root and BPF needed, run with
//! `cargo test -p pkprof --test unwind -- --include-ignored --nocapture --test-threads=1`.
//!
//! The truth never comes from pkprof: fixture programs built `-O2 -fomit-frame-pointer` (C) and
//! `-C force-frame-pointers=no` (Rust) whose call chains are known by construction
//! (tests/workloads/unwind_chains.c, unwind_lib.c, unwind_chain_rs.rs), Debian's own python3 and xz,
//! and `perf record --call-graph dwarf` on the same fixtures (read by tests/common/perf_script.rs).
//! For each fixture, ≥ 95% of the samples whose leaf user frame is the hot function carry the whole
//! expected chain, root (`_start`, or `clone3` > `start_thread` for a thread) to leaf; a stack
//! that does not reach its entry must be marked truncated (`[truncated: <reason>]`), never shown as
//! complete. Set PKPROF_UNWIND_PERF_ALL=1 to also check every fixture's chain under perf (the
//! fixtures' own test; ~40 s more).

mod common;
#[path = "common/perf_script.rs"]
mod perf_script;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use common::*;
use perf_script::{canonical_name, PerfSample};
use pkprof_profile::{FrameKind, Profile, Truncation};

/// Seconds of CPU each fixture burns (its own CPU time, however busy the machine): enough
/// samples at 999 Hz (pkprof) and 499 Hz (perf), short enough that the whole file runs in about a
/// minute (each `pkprof record` of the debug build also spends ~5 s after its command exits).
const SECS: &str = "1.5";

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn workloads() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads")
}

/// The C fixture, built once per test binary.
fn chains_bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = build_workload_with("unwind_chains", &["-fomit-frame-pointer"]);
        bin.to_str().unwrap().to_owned()
    })
}

/// The shared object of the `dlopen` mode, built -fomit-frame-pointer.
fn unwind_lib() -> &'static str {
    static LIB: OnceLock<String> = OnceLock::new();
    LIB.get_or_init(|| {
        let out = tmp("libunwind_lib.so");
        let status = Command::new("cc")
            .args([
                "-O2",
                "-g",
                "-fomit-frame-pointer",
                "-fPIC",
                "-shared",
                "-o",
            ])
            .arg(&out)
            .arg(workloads().join("unwind_lib.c"))
            .status()
            .expect("cc runs");
        assert!(status.success(), "compiling unwind_lib.c");
        out.to_str().unwrap().to_owned()
    })
}

/// The Rust fixture: one file, no cargo project, optimized, no frame pointers.
fn rust_bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = tmp("unwind_chain_rs");
        let status = Command::new("rustc")
            .args(["--edition", "2021", "-O", "-C", "force-frame-pointers=no"])
            .args(["-C", "debuginfo=1", "-o"])
            .arg(&out)
            .arg(workloads().join("unwind_chain_rs.rs"))
            .status()
            .expect("rustc runs");
        assert!(status.success(), "compiling unwind_chain_rs.rs");
        out.to_str().unwrap().to_owned()
    })
}

/// A fixture run: the command and the expected chain of its hot function.
struct Fixture {
    /// Key for recordings and files.
    name: &'static str,
    cmd: Vec<String>,
    /// The leaf user function of the samples checked.
    leaf: &'static str,
    /// The whole user stack of those samples, root first, in the language of [`matches`].
    chain: Vec<&'static str>,
}

/// The entry of a program, down to its `main`.
const ENTRY: [&str; 4] = [
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
    "main",
];

fn entry_and(rest: &[&'static str]) -> Vec<&'static str> {
    ENTRY.iter().chain(rest).copied().collect()
}

fn fixture(name: &str) -> Fixture {
    let c = |mode: &str, extra: &[&str]| -> Vec<String> {
        [chains_bin(), mode, SECS]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let (name, cmd, leaf, chain) = match name {
        "chain" => (
            "chain",
            c("chain", &[]),
            "chain_hot",
            entry_and(&["chain_outer", "chain_middle", "chain_inner", "chain_hot"]),
        ),
        "qsort" => (
            "qsort",
            c("qsort", &[]),
            "cmp_hot",
            // qsort tail-calls qsort_r, whose merge sort recurses a data-dependent number of times.
            entry_and(&[
                "sort_outer",
                "sort_qsort",
                "qsort_r",
                "msort_with_tmp+",
                "cmp_hot",
            ]),
        ),
        "bsearch" => (
            "bsearch",
            c("bsearch", &[]),
            "bsearch_cmp_hot",
            entry_and(&["sort_outer", "sort_bsearch", "bsearch", "bsearch_cmp_hot"]),
        ),
        "signal" => (
            "signal",
            c("signal", &[]),
            "sig_handler_hot",
            // The signal frame: the handler returns to libc's __restore_rt (which perf cannot
            // name: it looks up the return address minus one, the byte before the symbol).
            entry_and(&[
                "sig_outer",
                "sig_busy",
                "__restore_rt|[libc]",
                "sig_handler_hot",
            ]),
        ),
        "recurse150" => (
            "recurse150",
            c("recurse", &["150"]),
            "recurse_hot",
            entry_and(&["recurse_outer", "recurse{150}", "recurse_hot"]),
        ),
        "thread" => (
            "thread",
            c("thread", &[]),
            "thread_hot",
            vec![
                "clone3",
                "start_thread",
                "thread_entry",
                "thread_outer",
                "thread_hot",
            ],
        ),
        "dlopen" => (
            "dlopen",
            c("dlopen", &[unwind_lib()]),
            "lib_hot",
            entry_and(&["dl_outer", "lib_outer", "lib_hot"]),
        ),
        "rust" => (
            "rust",
            vec![rust_bin().to_owned(), SECS.to_owned()],
            "unwind_chain_rs::hot",
            // The standard library's start-up frames (lang_start and its closures) vary by
            // release: any frames between the two mains.
            entry_and(&[
                "...",
                "unwind_chain_rs::main",
                "unwind_chain_rs::outer",
                "unwind_chain_rs::middle",
                "unwind_chain_rs::inner",
                "unwind_chain_rs::hot",
            ]),
        ),
        "syscall" => (
            "syscall",
            c("syscall", &[]),
            // The leaf user frame of a sample in the kernel: libc's read().
            "read",
            entry_and(&["sys_outer", "sys_inner", "read"]),
        ),
        other => panic!("no fixture {other}"),
    };
    Fixture {
        name,
        cmd,
        leaf,
        chain,
    }
}

/// Does `frames` (root first: canonical name, module) match `pat` as a whole? Pattern items:
/// `name` one frame of that name (compared by [`canonical_name`]), `a|b` either, `name+` one or
/// more, `name{N}` exactly N, `[libc]` one frame of any name in libc.so, `...` any frames.
fn matches(pat: &[&str], frames: &[(String, String)]) -> bool {
    let one = |alts: &str, f: &(String, String)| {
        alts.split('|').any(|a| {
            if a == "[libc]" {
                Path::new(&f.1)
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
            } else {
                canonical_name(a) == f.0
            }
        })
    };
    let Some((p, rest)) = pat.split_first() else {
        return frames.is_empty();
    };
    if *p == "..." {
        return (0..=frames.len()).any(|k| matches(rest, &frames[k..]));
    }
    if let Some(name) = p.strip_suffix('+') {
        let run = frames.iter().take_while(|f| one(name, f)).count();
        return (1..=run).rev().any(|k| matches(rest, &frames[k..]));
    }
    if let Some((name, n)) = p.strip_suffix('}').and_then(|p| p.split_once('{')) {
        let n: usize = n.parse().expect("count in a pattern");
        return frames.len() >= n
            && frames[..n].iter().all(|f| one(name, f))
            && matches(rest, &frames[n..]);
    }
    !frames.is_empty() && one(p, &frames[0]) && matches(rest, &frames[1..])
}

/// One sample's user stack, root first.
struct UserStack {
    /// The name of the `[truncated: ...]` root mark, if the stack has one.
    mark: Option<String>,
    /// (canonical name, module) of each user frame.
    frames: Vec<(String, String)>,
}

impl UserStack {
    fn leaf(&self) -> Option<&str> {
        self.frames.last().map(|f| f.0.as_str())
    }

    /// Rooted at a thread's entry: `_start` (a program) or `clone3`/`clone` (a thread).
    fn rooted(&self) -> bool {
        self.frames.first().is_some_and(|f| {
            ["_start", "clone3", "clone"]
                .map(canonical_name)
                .contains(&f.0)
        })
    }

    fn names(&self) -> Vec<&str> {
        self.mark
            .iter()
            .map(String::as_str)
            .chain(self.frames.iter().map(|f| f.0.as_str()))
            .collect()
    }
}

fn user_stack(p: &Profile, stack: u32) -> UserStack {
    let mut us = UserStack {
        mark: None,
        frames: Vec::new(),
    };
    for f in p.stack_frames(stack) {
        match f.kind {
            FrameKind::Truncated if us.frames.is_empty() => us.mark = Some(f.name.clone()),
            FrameKind::User if !f.inlined => {
                us.frames.push((canonical_name(&f.name), f.module.clone()))
            }
            _ => {}
        }
    }
    us
}

/// A finished `pkprof record`: the profile and the target's pid.
struct Rec {
    p: Profile,
    pid: u32,
}

impl Rec {
    /// (user stack, count) of every sample of the target process with user frames.
    fn user_stacks(&self) -> Vec<(UserStack, u64)> {
        (self.p.samples.iter())
            .filter(|s| s.pid == self.pid)
            .map(|s| (user_stack(&self.p, s.stack), s.count))
            .filter(|(u, _)| !u.frames.is_empty() || u.mark.is_some())
            .collect()
    }
}

/// `pkprof record -F 999 -- CMD`, once per key and test binary (the perf comparison reads the
/// same recording as the chain test).
fn record(key: &str, cmd: &[String]) -> &'static Rec {
    static RECS: OnceLock<Mutex<HashMap<String, &'static Rec>>> = OnceLock::new();
    let recs = RECS.get_or_init(Default::default);
    if let Some(r) = recs.lock().unwrap().get(key) {
        return r;
    }
    let out = tmp(&format!("unwind-{key}.pkprof"));
    let _ = std::fs::remove_file(&out);
    let o = run_with_timeout(
        Command::new(pkprof_bin())
            .args(["record", "-F", "999", "-o"])
            .arg(&out)
            .arg("--")
            .args(cmd),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "pkprof record {cmd:?} failed:\n{stderr}"
    );
    let p = pkprof_profile::load(&out).expect("the profile reads back");
    let pid = p.meta.targets.pids[0];
    eprintln!(
        "{key}: {} samples; user stacks: {:?}",
        p.total_samples(),
        p.meta.user_stacks
    );
    let rec: &'static Rec = Box::leak(Box::new(Rec { p, pid }));
    recs.lock().unwrap().insert(key.to_owned(), rec);
    rec
}

/// Of `stacks` whose leaf is `leaf`: (total, matching `chain`, unmarked but not rooted at an
/// entry), printing the commonest mismatches.
fn check_chain(
    what: &str,
    stacks: &[(UserStack, u64)],
    leaf: &str,
    chain: &[&str],
) -> (u64, u64, u64) {
    let leaf = canonical_name(leaf);
    let (mut total, mut good, mut unmarked_cut) = (0, 0, 0);
    let mut bad: HashMap<String, u64> = HashMap::new();
    for (u, n) in stacks
        .iter()
        .filter(|(u, _)| u.leaf() == Some(leaf.as_str()))
    {
        total += n;
        if u.mark.is_none() && matches(chain, &u.frames) {
            good += n;
        } else {
            *bad.entry(u.names().join(" > ")).or_default() += n;
        }
        if u.mark.is_none() && !u.rooted() {
            unmarked_cut += n;
        }
    }
    let mut bad: Vec<_> = bad.into_iter().collect();
    bad.sort_by_key(|b| std::cmp::Reverse(b.1));
    eprintln!(
        "{what}: {good} of {total} samples in {leaf} carry the chain ({:.1}%); {unmarked_cut} \
         unmarked but cut short",
        good as f64 * 100.0 / total.max(1) as f64
    );
    for (s, n) in bad.iter().take(4) {
        eprintln!("  {n:5} x {s}");
    }
    (total, good, unmarked_cut)
}

/// Records a fixture with pkprof and asserts its chain (see the module comment).
fn assert_fixture_chain(name: &str) -> &'static Rec {
    let fx = fixture(name);
    let rec = record(fx.name, &fx.cmd);
    let (total, good, cut) = check_chain(fx.name, &rec.user_stacks(), fx.leaf, &fx.chain);
    assert!(total >= 300, "{name}: only {total} samples in {}", fx.leaf);
    assert_eq!(
        cut, 0,
        "{name}: stacks cut short but not marked truncated (shown as complete)"
    );
    assert!(
        good * 100 >= total * 95,
        "{name}: {good} of {total} samples carry the whole chain {:?}",
        fx.chain
    );
    // The profile's own count agrees: at least those stacks were complete.
    let us = &rec.p.meta.user_stacks;
    assert!(
        us.complete >= good,
        "{name}: meta.user_stacks {us:?} counts fewer complete stacks than the {good} seen"
    );
    rec
}

#[test]
#[ignore = "needs root and BPF"]
fn chain_several_levels_deep() {
    assert_fixture_chain("chain");
}

#[test]
#[ignore = "needs root and BPF"]
fn callback_from_inside_libc_qsort() {
    assert_fixture_chain("qsort");
}

#[test]
#[ignore = "needs root and BPF"]
fn callback_from_inside_libc_bsearch() {
    assert_fixture_chain("bsearch");
}

#[test]
#[ignore = "needs root and BPF"]
fn signal_handler_over_the_interrupted_function() {
    assert_fixture_chain("signal");
}

#[test]
#[ignore = "needs root and BPF"]
fn recursion_150_deep_is_complete() {
    assert_fixture_chain("recurse150");
}

#[test]
#[ignore = "needs root and BPF"]
fn thread_stack_ends_at_clone3() {
    assert_fixture_chain("thread");
}

#[test]
#[ignore = "needs root and BPF"]
fn dlopened_library_is_unwound() {
    let rec = assert_fixture_chain("dlopen");
    // The library's frames are named from the library mapped mid-run.
    let lib = rec.p.frames.iter().find(|f| f.name == "lib_outer");
    assert!(
        lib.is_some_and(|f| f.module.ends_with("libunwind_lib.so")),
        "{lib:?}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn rust_chain_without_frame_pointers() {
    assert_fixture_chain("rust");
}

#[test]
#[ignore = "needs root and BPF"]
fn recursion_2000_deep_is_marked_truncated() {
    let cmd: Vec<String> = [chains_bin(), "recurse", SECS, "2000"]
        .map(str::to_owned)
        .to_vec();
    let rec = record("recurse2000", &cmd);
    let stacks = rec.user_stacks();
    let leaf = canonical_name("recurse_hot");
    // 2,000 frames of 32 bytes are 64 KiB of stack: beyond the copied window (16 KiB) and beyond
    // MAX_USER_FRAMES (512). Whichever ends the walk, the stack is marked, never complete.
    let reasons = [Truncation::StackWindow, Truncation::DepthLimit].map(|t| t.frame_name());
    let (mut total, mut marked, mut deep) = (0, 0, 0);
    let mut bad: HashMap<String, u64> = HashMap::new();
    for (u, n) in stacks
        .iter()
        .filter(|(u, _)| u.leaf() == Some(leaf.as_str()))
    {
        total += n;
        let ok_mark = u.mark.as_ref().is_some_and(|m| reasons.contains(m));
        if ok_mark {
            marked += n;
        }
        assert!(
            !u.frames.iter().any(|f| f.0 == "main") && !u.rooted(),
            "a stack 2,000 frames deep reached main: {:?}",
            u.names()
        );
        // What was unwound is the recursion itself, at least a window's worth of it.
        if ok_mark && matches(&["recurse+", "recurse_hot"], &u.frames) && u.frames.len() > 100 {
            deep += n;
        } else {
            let names = u.names();
            let short = format!(
                "{:?} ... ({} frames)",
                &names[..names.len().min(4)],
                names.len()
            );
            *bad.entry(short).or_default() += n;
        }
    }
    eprintln!(
        "recurse2000: {total} samples in recurse_hot, {marked} marked {reasons:?}, {deep} with \
         > 100 recurse frames under the mark; others: {bad:?}"
    );
    assert!(total >= 300, "only {total} samples in recurse_hot");
    assert_eq!(marked, total, "2,000-deep stacks not marked truncated");
    assert!(
        deep * 100 >= total * 95,
        "{deep} of {total} unwound a window of recursion"
    );
    let us = &rec.p.meta.user_stacks;
    let counted: u64 = us
        .truncated
        .iter()
        .filter(|(t, _)| matches!(t, Truncation::StackWindow | Truncation::DepthLimit))
        .map(|(_, n)| n)
        .sum();
    assert!(
        counted >= total,
        "meta.user_stacks {us:?} counts fewer truncated stacks than the {total} seen"
    );
}

/// Samples (by command name) of a recording whose user stack reaches its program's `main` (its
/// caller `__libc_start_call_main` is there: Debian's binaries are stripped and python's `main`
/// tail-calls `Py_BytesMain`, so `main` itself may have no name or no frame) or a thread's entry,
/// unmarked. Returns (user samples, reaching, unmarked but cut short).
fn reach_main(rec: &Rec, comm: &str) -> (u64, u64, u64) {
    let entries = ["__libc_start_call_main", "start_thread"].map(canonical_name);
    let (mut total, mut reached, mut cut) = (0, 0, 0);
    let mut bad: HashMap<String, u64> = HashMap::new();
    for s in rec.p.samples.iter().filter(|s| s.comm == comm) {
        let u = user_stack(&rec.p, s.stack);
        if u.frames.is_empty() && u.mark.is_none() {
            continue;
        }
        total += s.count;
        let entry = u.frames.iter().any(|f| entries.contains(&f.0));
        if u.mark.is_none() && entry {
            reached += s.count;
        } else {
            let names = u.names();
            *bad.entry(names[..names.len().min(3)].join(" > "))
                .or_default() += s.count;
        }
        if u.mark.is_none() && !entry && !u.rooted() {
            cut += s.count;
        }
    }
    let mut bad: Vec<_> = bad.into_iter().collect();
    bad.sort_by_key(|b| std::cmp::Reverse(b.1));
    eprintln!(
        "{comm}: {reached} of {total} user samples reach main ({:.1}%), {cut} unmarked but cut \
         short; roots of the others: {:?}",
        reached as f64 * 100.0 / total.max(1) as f64,
        &bad[..bad.len().min(5)]
    );
    (total, reached, cut)
}

#[test]
#[ignore = "needs root and BPF"]
fn debian_python3_reaches_main() {
    let script = tmp("unwind-burn.py");
    std::fs::write(
        &script,
        "import sys, time\n\
         def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\
         end = time.process_time() + float(sys.argv[1])\n\
         while time.process_time() < end:\n    fib(18)\n",
    )
    .unwrap();
    let cmd = ["/usr/bin/python3", script.to_str().unwrap(), SECS].map(str::to_owned);
    let rec = record("python3", &cmd);
    let (total, reached, cut) = reach_main(rec, "python3");
    assert!(total >= 500, "only {total} user samples of python3");
    assert!(
        reached * 100 >= total * 95,
        "{reached} of {total} reach main"
    );
    assert!(cut * 100 <= total, "{cut} of {total} cut short unmarked");
}

#[test]
#[ignore = "needs root and BPF"]
fn debian_xz_reaches_main() {
    // 4.5 MB of words from a 2,000-word vocabulary: compressible, and 1.5-6 s of xz -9 here (the
    // host's speed moves 4x: 1.5 MB gave 0.5 s and 370-430 user samples on a fast day).
    let input = tmp("unwind-xz-input.txt");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let words: Vec<String> = (0..2000)
        .map(|_| {
            let len = 2 + next() % 7;
            (0..len)
                .map(|_| (b'a' + (next() % 10) as u8) as char)
                .collect()
        })
        .collect();
    let mut text = String::new();
    while text.len() < 4_500_000 {
        text.push_str(&words[(next() % 2000) as usize]);
        text.push(' ');
    }
    std::fs::write(&input, text).unwrap();
    let script = format!("exec xz -9 -T1 -c {} > /dev/null", input.display());
    let cmd = ["sh", "-c", &script].map(str::to_owned);
    let rec = record("xz", &cmd);
    let (total, reached, cut) = reach_main(rec, "xz");
    assert!(total >= 500, "only {total} user samples of xz");
    assert!(
        reached * 100 >= total * 95,
        "{reached} of {total} reach main"
    );
    assert!(cut * 100 <= total, "{cut} of {total} cut short unmarked");
}

#[test]
#[ignore = "needs root and BPF"]
fn syscall_joins_unwound_user_frames_to_kernel_frames() {
    // The fixture reads /dev/zero 1 MiB at a time through libc's read(): the time is in the
    // kernel, under main > sys_outer > sys_inner > read, all without frame pointers.
    let Fixture {
        name, cmd, chain, ..
    } = fixture("syscall");
    let rec = record(name, &cmd);
    let (mut all, mut in_read, mut joined) = (0, 0, 0);
    let mut bad: HashMap<String, u64> = HashMap::new();
    for s in rec.p.samples.iter().filter(|s| s.pid == rec.pid) {
        all += s.count;
        let frames: Vec<_> = rec.p.stack_frames(s.stack).collect();
        let Some(b) = frames
            .iter()
            .position(|f| f.kind == FrameKind::Syscall && f.name == "sys_read")
        else {
            continue;
        };
        in_read += s.count;
        let user = user_stack(&rec.p, s.stack);
        let above_ok = frames[..b]
            .iter()
            .all(|f| matches!(f.kind, FrameKind::User | FrameKind::Truncated));
        let below = &frames[b + 1..];
        let kernel_ok = !below.is_empty() && below.iter().all(|f| f.kind == FrameKind::Kernel);
        if above_ok && kernel_ok && user.mark.is_none() && matches(&chain, &user.frames) {
            joined += s.count;
        } else {
            let names: Vec<&str> = frames.iter().map(|f| f.name.as_str()).collect();
            *bad.entry(names.join(" > ")).or_default() += s.count;
        }
    }
    let mut bad: Vec<_> = bad.into_iter().collect();
    bad.sort_by_key(|b| std::cmp::Reverse(b.1));
    eprintln!(
        "syscall: {all} samples, {in_read} in sys_read, {joined} read {chain:?} > sys_read > \
         kernel; others: {:?}",
        &bad[..bad.len().min(3)]
    );
    assert!(
        in_read * 2 > all && in_read >= 300,
        "{in_read} of {all} in sys_read"
    );
    assert!(
        joined * 100 >= in_read * 95,
        "{joined} of {in_read} samples in sys_read carry the user chain above it"
    );
}

/// `perf record --call-graph dwarf,16384 -F 499 -- CMD`, then `perf script` parsed. --no-inline:
/// one frame per address, as pkprof gives without --lines; --max-stack: perf script otherwise
/// stops at kernel.perf_event_max_stack (127) frames.
fn perf_record(key: &str, cmd: &[String]) -> Vec<PerfSample> {
    let data = tmp(&format!("unwind-{key}.perf.data"));
    let o = run_with_timeout(
        Command::new("perf")
            .args(["record", "-q", "--call-graph", "dwarf,16384", "-F", "499"])
            .arg("-o")
            .arg(&data)
            .arg("--")
            .args(cmd),
        Duration::from_secs(60),
    );
    assert!(
        o.status.success(),
        "perf record failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run_with_timeout(
        Command::new("perf")
            .args(["script", "--no-inline", "--max-stack", "4096", "-i"])
            .arg(&data),
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "perf script failed");
    let samples = perf_script::parse(&String::from_utf8_lossy(&o.stdout));
    let _ = std::fs::remove_file(&data);
    samples
}

fn perf_stacks(samples: &[PerfSample]) -> Vec<(UserStack, u64)> {
    (samples.iter())
        .filter(|s| s.comm != "perf-exec")
        .map(|s| UserStack {
            mark: None,
            frames: s.user_frames(),
        })
        .filter(|u| !u.frames.is_empty())
        .map(|u| (u, 1))
        .collect()
}

/// Share of samples (%) whose stack contains each function, once per sample.
fn inclusive(stacks: &[(UserStack, u64)]) -> HashMap<String, f64> {
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    let mut m: HashMap<String, u64> = HashMap::new();
    for (u, n) in stacks {
        let names: HashSet<&str> = u.frames.iter().map(|f| f.0.as_str()).collect();
        for name in names {
            *m.entry(name.to_owned()).or_default() += n;
        }
    }
    m.into_iter()
        .map(|(k, v)| (k, v as f64 * 100.0 / total.max(1) as f64))
        .collect()
}

/// How two recordings of one fixture agree, `a` measured against `b` (the truth): the failures of
/// "≥ 95% of each one's samples have a user stack (names, root first, a truncation mark
/// included) that the other one also gave" and "every function's inclusive share (≥ 5% on
/// either side) within ±2 points". Two separate runs: stacks are compared as sets, not sample by
/// sample.
fn disagreements(what: &str, a: &[(UserStack, u64)], b: &[(UserStack, u64)]) -> Vec<String> {
    let key = |u: &UserStack| -> Vec<String> { u.names().iter().map(|s| s.to_string()).collect() };
    let set = |x: &[(UserStack, u64)]| -> HashSet<Vec<String>> {
        x.iter().map(|(u, _)| key(u)).collect()
    };
    let share = |stacks: &[(UserStack, u64)], other: &HashSet<Vec<String>>| -> (u64, u64) {
        let total: u64 = stacks.iter().map(|s| s.1).sum();
        let seen = (stacks.iter())
            .filter(|(u, _)| other.contains(&key(u)))
            .map(|s| s.1)
            .sum();
        (seen, total)
    };
    let (a_seen, a_total) = share(a, &set(b));
    let (b_seen, b_total) = share(b, &set(a));
    eprintln!(
        "{what}: {a_seen} of {a_total} stacks of the first also in the second's; {b_seen} of \
         {b_total} of the second's in the first's"
    );
    let mut off = Vec::new();
    if a_total < 500 || b_total < 300 {
        off.push(format!("too few samples: {a_total}, {b_total}"));
    }
    if a_seen * 100 < a_total * 95 {
        off.push(format!(
            "{a_seen} of {a_total} stacks are ones the truth gave"
        ));
    }
    if b_seen * 100 < b_total * 95 {
        off.push(format!(
            "{b_seen} of the truth's {b_total} stacks were given"
        ));
    }
    let (ai, bi) = (inclusive(a), inclusive(b));
    let mut funcs: Vec<&String> = (ai.keys().chain(bi.keys()))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    funcs.sort();
    for f in funcs {
        let (x, y) = (
            ai.get(f).copied().unwrap_or(0.0),
            bi.get(f).copied().unwrap_or(0.0),
        );
        if x.max(y) >= 5.0 {
            eprintln!("  {f:30} {x:5.1}%  truth {y:5.1}%");
            if (x - y).abs() > 2.0 {
                off.push(format!("{f} inclusive {x:.1}% vs {y:.1}%"));
            }
        }
    }
    off
}

/// The fixture under perf (its chain holds there: the fixture's own check) and under pkprof: see
/// [`disagreements`].
fn compare_with_perf(name: &str) {
    let fx = fixture(name);
    let perf = perf_stacks(&perf_record(fx.name, &fx.cmd));
    let (total, good, _) = check_chain(&format!("{name} under perf"), &perf, fx.leaf, &fx.chain);
    assert!(
        total >= 300 && good * 100 >= total * 95,
        "the fixture's chain does not hold under perf: {good} of {total}"
    );
    let pk = record(fx.name, &fx.cmd).user_stacks();
    let off = disagreements(&format!("{name}: pkprof vs perf"), &pk, &perf);
    assert!(
        off.is_empty(),
        "{name}: pkprof disagrees with perf: {off:?}"
    );
}

#[test]
#[ignore = "needs root, BPF and perf"]
fn chain_agrees_with_perf_dwarf() {
    compare_with_perf("chain");
}

#[test]
#[ignore = "needs root, BPF and perf"]
fn qsort_callback_agrees_with_perf_dwarf() {
    compare_with_perf("qsort");
}

/// The fixtures' own check: every chain holds under perf, and perf's agreement with itself on
/// chain and qsort meets what the comparisons above ask of pkprof. Opt-in
/// (PKPROF_UNWIND_PERF_ALL=1): the two comparisons already check chain and qsort under perf.
#[test]
#[ignore = "needs root and perf"]
fn fixtures_hold_their_chains_under_perf() {
    if std::env::var_os("PKPROF_UNWIND_PERF_ALL").is_none() {
        eprintln!("skipped: set PKPROF_UNWIND_PERF_ALL=1");
        return;
    }
    let mut failed = Vec::new();
    for name in [
        "chain",
        "qsort",
        "bsearch",
        "signal",
        "recurse150",
        "thread",
        "dlopen",
        "rust",
        "syscall",
    ] {
        let fx = fixture(name);
        let perf = perf_stacks(&perf_record(fx.name, &fx.cmd));
        let (total, good, _) =
            check_chain(&format!("{name} under perf"), &perf, fx.leaf, &fx.chain);
        if total < 300 || good * 100 < total * 95 {
            failed.push(format!("{name}: {good} of {total}"));
        }
    }
    // The agreement asked of pkprof is within reach: perf agrees so with itself, run to run.
    for name in ["chain", "qsort"] {
        let fx = fixture(name);
        let a = perf_stacks(&perf_record(&format!("{name}-again"), &fx.cmd));
        let b = perf_stacks(&perf_record(fx.name, &fx.cmd));
        let off = disagreements(&format!("{name}: perf vs perf"), &a, &b);
        if !off.is_empty() {
            failed.push(format!("{name}: perf disagrees with itself: {off:?}"));
        }
    }
    assert!(failed.is_empty(), "chains not held under perf: {failed:?}");
}
