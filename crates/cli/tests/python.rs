//! CPython frames in `record` (issue 14; docs/design.md, "Python frames"), end to end: root and
//! BPF needed, run with `cargo test -p pkprof --test python -- --include-ignored --test-threads=1`.
//!
//! The truth never comes from pkprof: the workloads (tests/workloads/python_work.py) print their own
//! recursion depth (`traceback.extract_stack`), threads' native ids and the time each blocking
//! function spent in its blocking calls (`time.monotonic_ns` around each), the program's structure
//! says which function calls which, and `py-spy dump` (PyPI, scripts/setup.sh) reads the same
//! process. Interpreters: Debian's python3.11 and, when installed, pyenv's 3.12 / 3.13 (and 3.10,
//! which pkprof has no offsets for).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use pkprof_profile::{FrameKind, Profile};

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn work_py() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workloads/python_work.py")
        .display()
        .to_string()
}

/// pyenv's interpreter of minor version `minor` (`3.13`), when installed.
fn pyenv(minor: &str) -> Option<String> {
    let home = std::env::var("HOME").ok()?;
    let mut found: Vec<PathBuf> = std::fs::read_dir(format!("{home}/.pyenv/versions"))
        .ok()?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{minor}."))
        })
        .map(|e| e.path().join(format!("bin/python{minor}")))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop().map(|p| p.display().to_string())
}

/// `pkprof record -F 499 [ARGS] -- CMD`: the profile, and stdout + stderr.
fn record(key: &str, args: &[&str], cmd: &[&str]) -> (Profile, String) {
    let out = tmp(&format!("python-{key}.pkprof"));
    let _ = std::fs::remove_file(&out);
    let o = run_with_timeout(
        Command::new(pkprof_bin())
            .args(["record", "-F", "499", "-o"])
            .arg(&out)
            .args(args)
            .args(if cmd.is_empty() { &[][..] } else { &["--"][..] })
            .args(cmd),
        Duration::from_secs(300),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "pkprof record {cmd:?} failed:\n{text}");
    (
        pkprof_profile::load(&out).expect("the profile reads back"),
        text,
    )
}

/// The frames of a sample group's stack, root first: (kind, name).
fn frames(p: &Profile, stack: u32) -> Vec<(FrameKind, String)> {
    p.stack_frames(stack)
        .map(|f| (f.kind, f.name.clone()))
        .collect()
}

fn python_names(fr: &[(FrameKind, String)]) -> Vec<&str> {
    fr.iter()
        .filter(|(k, _)| *k == FrameKind::Python)
        .map(|(_, n)| n.as_str())
        .collect()
}

/// A sample's pid, its frames (kind, name) root first, and its count.
type NamedSample = (u32, Vec<(FrameKind, String)>, u64);

/// Target samples with their frames and counts (only samples served to the target processes).
fn target_samples(p: &Profile) -> Vec<NamedSample> {
    p.samples
        .iter()
        .filter(|s| {
            p.meta.targets.pids.contains(&s.pid) || s.bucket == pkprof_profile::Bucket::Process
        })
        .map(|s| (s.tid, frames(p, s.stack), s.count))
        .collect()
}

/// The printed values of `tag` lines in a program's output.
fn printed<'a>(text: &'a str, tag: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(tag).map(str::trim))
        .collect()
}

/// Pure-Python recursion: ≥ 90% of the samples in the interpreter loop carry `fib`, and the
/// samples in `bottom` carry exactly the Python depth the program printed there.
fn check_fib(python: &str) {
    let minor = python.rsplit("python").next().unwrap().to_string();
    let (p, text) = record(
        &format!("fib-{minor}"),
        &[],
        &[python, &work_py(), "fib", "1.5"],
    );
    fib_checks(python, &p, &text);
}

/// check_fib's checks on a recording of the `fib` mode (`text`: its output).
fn fib_checks(python: &str, p: &Profile, text: &str) {
    assert!(
        text.contains("Python frames spliced in"),
        "{python}: interpreter found:\n{text}"
    );
    let depth: usize = printed(text, "DEPTH")
        .first()
        .expect("DEPTH printed")
        .parse()
        .unwrap();
    let (mut in_loop, mut with_fib, mut bottom, mut bottom_right) = (0, 0, 0, 0);
    for (_, fr, n) in target_samples(p) {
        let py = python_names(&fr);
        let eval = fr.iter().any(|(_, f)| f == "_PyEval_EvalFrameDefault");
        if py
            .iter()
            .any(|f| f.ends_with(":deep") || f.ends_with(":bottom"))
        {
            bottom += n;
            if py.len() == depth && py.last() == Some(&"python_work.py:bottom") {
                bottom_right += n;
            }
            continue;
        }
        if !py.is_empty() || eval {
            in_loop += n;
            if py.contains(&"python_work.py:fib") {
                with_fib += n;
            }
        }
    }
    eprintln!(
        "{python}: {with_fib} of {in_loop} interpreter samples carry fib; {bottom_right} of \
         {bottom} bottom samples at depth {depth}"
    );
    assert!(in_loop >= 100, "{python}: too few samples ({in_loop})");
    assert!(
        with_fib * 100 >= in_loop * 90,
        "{python}: {with_fib} of {in_loop} carry fib"
    );
    assert!(
        bottom >= 20,
        "{python}: too few samples in bottom ({bottom})"
    );
    assert!(
        bottom_right * 100 >= bottom * 95,
        "{python}: {bottom_right} of {bottom} bottom samples at depth {depth}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn fib_depth_debian_3_11() {
    check_fib("/usr/bin/python3.11");
}

#[test]
#[ignore = "needs root and BPF"]
fn fib_depth_other_versions() {
    let others: Vec<String> = ["3.12", "3.13"].iter().filter_map(|m| pyenv(m)).collect();
    assert!(
        !others.is_empty(),
        "no CPython 3.12 or 3.13 under ~/.pyenv (see scripts/setup.sh)"
    );
    for py in others {
        check_fib(&py);
    }
}

/// A stack deeper than 64 Python frames (a recursion 100 deep) is walked whole: the samples in
/// `bottom` carry exactly the depth the program printed there, and none says its walk was cut.
#[test]
#[ignore = "needs root and BPF"]
fn deep_recursion_is_walked_whole() {
    let (p, text) = record(
        "deep",
        &[],
        &["/usr/bin/python3.11", &work_py(), "deep", "1.0"],
    );
    let depth: usize = printed(&text, "DEPTH")
        .first()
        .expect("DEPTH printed")
        .parse()
        .unwrap();
    let (mut bottom, mut right) = (0, 0);
    for (_, fr, n) in target_samples(&p) {
        let py = python_names(&fr);
        if py.last() == Some(&"python_work.py:bottom") {
            bottom += n;
            right += n * u64::from(py.len() == depth);
        }
    }
    eprintln!("{right} of {bottom} bottom samples at depth {depth}");
    assert!(
        depth > 100,
        "the recursion is deeper than 100 frames: {depth}"
    );
    assert!(bottom >= 100, "too few samples in bottom ({bottom})");
    assert!(
        right * 100 >= bottom * 95,
        "{right} of {bottom} bottom samples at depth {depth}"
    );
    assert!(
        !text.contains(" depth limit"),
        "no walk was cut at the depth limit:\n{text}"
    );
}

/// A process looked at before it runs CPython (a shell that computes for half a second, then
/// `exec`s the interpreter in the same process) is looked at again after its exec: the shell's
/// samples come first (so it was looked at, and found not Python, before), then the interpreter's
/// carry their Python frames as check_fib wants them.
#[test]
#[ignore = "needs root and BPF"]
fn python_found_after_exec() {
    let script = format!(
        "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec /usr/bin/python3.11 {} fib 1.5",
        work_py()
    );
    let (p, text) = record("exec", &[], &["sh", "-c", &script]);
    let python_pid = p
        .samples
        .iter()
        .find(|s| s.comm.starts_with("python3"))
        .map(|s| s.pid)
        .expect("samples of the interpreter");
    let shell: u64 = p
        .samples
        .iter()
        .filter(|s| s.pid == python_pid && s.comm == "sh")
        .map(|s| s.count)
        .sum();
    eprintln!("pid {python_pid}: {shell} samples as sh before its exec");
    assert!(
        shell >= 50,
        "the shell ran before its exec: {shell} samples"
    );
    fib_checks("sh -> exec python3.11", &p, &text);
}

/// Python -> C extension -> kernel: `pack` > zlib's compress > libz's deflate, and `reader` >
/// `os.pread` > the syscall boundary > kernel frames, in that order in one stack.
#[test]
#[ignore = "needs root and BPF"]
fn python_native_kernel() {
    let (p, _) = record("io", &[], &["/usr/bin/python3.11", &work_py(), "io", "1.5"]);
    let (mut zlib, mut syscall) = (0, 0);
    for (_, fr, n) in target_samples(&p) {
        let at = |pred: &dyn Fn(&(FrameKind, String)) -> bool| fr.iter().position(pred);
        let pack = at(&|(k, f)| *k == FrameKind::Python && f == "python_work.py:pack");
        let deflate = at(&|(k, f)| *k == FrameKind::User && f.contains("deflate"));
        if let (Some(a), Some(b)) = (pack, deflate) {
            if a < b && fr[a + 1..b].iter().all(|(k, _)| *k == FrameKind::User) {
                zlib += n;
            }
        }
        let reader = at(&|(k, f)| *k == FrameKind::Python && f == "python_work.py:reader");
        let sys = at(&|(k, f)| *k == FrameKind::Syscall && f.starts_with("sys_pread"));
        if let (Some(a), Some(b)) = (reader, sys) {
            let kernel_after = fr[b + 1..].iter().any(|(k, _)| *k == FrameKind::Kernel);
            if a < b && kernel_after {
                syscall += n;
            }
        }
    }
    eprintln!("pack > deflate: {zlib} samples; reader > sys_pread64 > kernel: {syscall}");
    assert!(zlib >= 20, "Python > zlib > deflate stacks: {zlib}");
    assert!(
        syscall >= 5,
        "Python > os.pread > syscall > kernel stacks: {syscall}"
    );
}

/// `record --off-cpu`: the blocked threads' Python frames are spliced into their off-CPU stacks
/// (issue 14 with 12 §2). `napper` sleeps (time.sleep), `pipe_wait` blocks in a pipe read
/// (os.read) fed by `feeder`, each in its own thread; the off-CPU time under each function is the
/// time the function measured around its own blocking calls, within 3%, and its blocked stacks
/// run Python -> the C call -> the syscall boundary -> the kernel.
#[test]
#[ignore = "needs root and BPF"]
fn off_cpu_samples_carry_python_frames() {
    let (p, text) = record(
        "offcpu",
        &["--off-cpu"],
        &["/usr/bin/python3.11", &work_py(), "block", "1.5"],
    );
    let off = p.off_cpu.as_ref().expect("off-CPU samples recorded");
    for (func, sys) in [("napper", "sys_clock_nanosleep"), ("pipe_wait", "sys_read")] {
        let measured: u64 = printed(&text, &format!("BLOCKED {func}"))
            .first()
            .unwrap_or_else(|| panic!("BLOCKED {func} printed:\n{text}"))
            .parse()
            .unwrap();
        let name = format!("python_work.py:{func}");
        let (mut ours, mut ordered, mut samples) = (0u64, 0u64, 0u64);
        for g in &off.groups {
            let fr = frames(&p, g.stack);
            let Some(at) = fr
                .iter()
                .position(|(k, f)| *k == FrameKind::Python && *f == name)
            else {
                continue;
            };
            ours += g.weight_ns;
            samples += g.count;
            // Python, then native frames only, then the call's boundary, then the kernel.
            let boundary = fr
                .iter()
                .position(|(k, f)| *k == FrameKind::Syscall && f.starts_with(sys));
            if let Some(b) = boundary {
                let native_between = fr[at + 1..b].iter().all(|(k, _)| *k == FrameKind::User);
                let kernel_after = fr[b + 1..].iter().any(|(k, _)| *k == FrameKind::Kernel);
                if native_between && kernel_after {
                    ordered += g.weight_ns;
                }
            }
        }
        let err = rel_err(ours, measured);
        eprintln!(
            "{func}: {samples} off-CPU samples, {ours} ns blocked under it (by its stack: {ordered} ns); \
             the program measured {measured} ns ({:.2}% apart)",
            err * 100.0
        );
        assert!(samples >= 20, "{func}: too few off-CPU samples ({samples})");
        assert!(
            err.abs() <= 0.03,
            "{func}: {ours} ns off-CPU vs {measured} ns measured by the program"
        );
        assert!(
            ordered * 100 >= ours * 95,
            "{func}: {ordered} of {ours} ns run Python > native > {sys} > kernel"
        );
    }
}

/// Two threads in different functions are told apart: each thread's samples carry its own
/// function, never the other's.
#[test]
#[ignore = "needs root and BPF"]
fn two_threads() {
    let (p, text) = record(
        "threads",
        &[],
        &["/usr/bin/python3.11", &work_py(), "threads", "1.2"],
    );
    let tid = |name: &str| -> u32 {
        printed(&text, &format!("TID {name}"))
            .first()
            .unwrap_or_else(|| panic!("TID {name} printed:\n{text}"))
            .parse()
            .unwrap()
    };
    for (me, other) in [("alpha", "beta"), ("beta", "alpha")] {
        let (mut total, mut mine, mut wrong) = (0, 0, 0);
        for (t, fr, n) in target_samples(&p) {
            if t != tid(me) {
                continue;
            }
            let py = python_names(&fr);
            if py.is_empty() {
                continue;
            }
            total += n;
            mine += n * u64::from(py.contains(&format!("python_work.py:{me}").as_str()));
            wrong += n * u64::from(py.contains(&format!("python_work.py:{other}").as_str()));
        }
        eprintln!("{me}: {mine} of {total} Python samples in {me}, {wrong} in {other}");
        assert!(total >= 50, "{me}: too few samples ({total})");
        assert!(mine * 100 >= total * 95, "{me}: {mine} of {total}");
        assert_eq!(wrong, 0, "{me}'s samples never carry {other}");
    }
}

/// A process that is not Python (dd) and a Python pkprof has no offsets for (pyenv's 3.10) are
/// left native-only; the unknown version is said once.
#[test]
#[ignore = "needs root and BPF"]
fn non_python_and_unknown_version_untouched() {
    let py310 = pyenv("3.10").expect("pyenv's CPython 3.10 (an unsupported version)");
    let script = format!(
        "{py310} {} fib 0.8 & dd if=/dev/zero of=/dev/null bs=64k count=200000 2>/dev/null; wait",
        work_py()
    );
    let (p, text) = record("untouched", &[], &["sh", "-c", &script]);
    let python_frames: u64 = target_samples(&p)
        .iter()
        .filter(|(_, fr, _)| fr.iter().any(|(k, _)| *k == FrameKind::Python))
        .map(|(_, _, n)| n)
        .sum();
    let dd = p
        .samples
        .iter()
        .filter(|s| s.comm == "dd")
        .map(|s| s.count)
        .sum::<u64>();
    let eval = target_samples(&p)
        .iter()
        .filter(|(_, fr, _)| fr.iter().any(|(_, f)| f == "_PyEval_EvalFrameDefault"))
        .map(|(_, _, n)| n)
        .sum::<u64>();
    eprintln!("dd samples {dd}, 3.10 interpreter samples {eval}, Python frames {python_frames}");
    assert!(
        dd >= 20 && eval >= 20,
        "both ran: dd {dd}, python3.10 {eval}"
    );
    assert_eq!(python_frames, 0, "no Python frames anywhere");
    let said = text
        .matches("no structure offsets for this version")
        .count();
    assert_eq!(said, 1, "the unknown version is said once:\n{text}");
}

/// py-spy finds the same Python functions in the same process (a thread spinning in `c`, called
/// by `b`, by `a`, by the module).
#[test]
#[ignore = "needs root and BPF"]
fn same_functions_as_py_spy() {
    let py_spy = std::env::var("PKPROF_PY_SPY").ok().or_else(|| {
        let home = std::env::var("HOME").ok()?;
        [
            format!("{home}/.cache/pkprof/py-spy/bin/py-spy"),
            "py-spy".to_string(),
        ]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok())
    });
    let py_spy = py_spy.expect("py-spy (scripts/setup.sh installs it)");
    let mut child = Command::new("/usr/bin/python3.11")
        .args([work_py().as_str(), "spin", "4"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().starts_with("READY"));
    let dump = Command::new(&py_spy)
        .args(["dump", "--pid", &pid.to_string()])
        .output()
        .expect("py-spy dump runs");
    let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
    // `    c (python_work.py:58)` lines, leaf first.
    let spy: Vec<String> = dump
        .lines()
        .filter(|l| l.starts_with(' '))
        .filter_map(|l| {
            let l = l.trim();
            let (func, rest) = l.split_once(" (")?;
            let file = rest.split(':').next()?;
            Some(format!("{}:{func}", file.rsplit('/').next()?))
        })
        .collect();
    let (p, _) = record(
        "py-spy",
        &["-p", &pid.to_string(), "--duration", "1.5"],
        &[],
    );
    child.wait().unwrap();
    let mut best: Vec<(Vec<String>, u64)> = Vec::new();
    for (_, fr, n) in target_samples(&p) {
        let py: Vec<String> = python_names(&fr)
            .into_iter()
            .rev()
            .map(String::from)
            .collect();
        match best.iter_mut().find(|(s, _)| *s == py) {
            Some((_, c)) => *c += n,
            None => best.push((py, n)),
        }
    }
    best.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let ours = &best.first().expect("samples of the spinning process").0;
    eprintln!("py-spy: {spy:?}\npkprof: {ours:?} ({} samples)", best[0].1);
    assert!(spy.len() >= 4, "py-spy dump read the stack:\n{dump}");
    assert_eq!(ours, &spy, "the same functions, leaf first");
}
