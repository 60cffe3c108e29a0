//! `pkprof report` and `pkprof diff` as a user runs them, on profile files written here (no root):
//! the text reports and exports succeed, and every bad input (unreadable, truncated, corrupt or
//! empty profile, a regex that does not compile, a PID not in the profile) is one line on stderr,
//! a non-zero exit and no panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pkprof_profile::{
    Bucket, Context, Frame, FrameKind, Meta, ProfileBuilder, SampleGroup, SyscallStat,
};

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("pkprof-report-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A profile of pid 100 (`server`): main;handle (10 samples) and main;handle;sys_read;vfs_read
/// (30), plus 60 idle samples, at 100 Hz for `secs` seconds; 400 read syscalls counted.
fn profile(secs: u64, with_samples: bool) -> pkprof_profile::Profile {
    let mut b = ProfileBuilder::new(Meta {
        cpus: 1,
        start_unix_ns: 1_000_000_000,
        end_unix_ns: 1_000_000_000 + secs * 1_000_000_000,
        frequency_hz: 100,
        period_ns: 10_000_000,
        ..Meta::default()
    });
    let mut frame = |kind, name: &str| {
        b.frame(Frame {
            kind,
            name: name.into(),
            module: "/usr/bin/server".into(),
            symbolized: true,
            ..Frame::default()
        })
    };
    let main = frame(FrameKind::User, "main");
    let handle = frame(FrameKind::User, "handle");
    let read = frame(FrameKind::Syscall, "sys_read");
    let vfs = frame(FrameKind::Kernel, "vfs_read");
    let idle = frame(FrameKind::Kernel, "do_idle");
    if with_samples {
        let stacks = [
            (vec![main, handle], 10 * secs, 100, Bucket::Process),
            (
                vec![main, handle, read, vfs],
                30 * secs,
                100,
                Bucket::Process,
            ),
            (vec![idle], 60 * secs, 0, Bucket::Idle),
        ];
        for (frames, count, pid, bucket) in stacks {
            let stack = b.stack(frames);
            b.sample(SampleGroup {
                stack,
                pid,
                tid: pid,
                comm: if pid == 0 { "swapper/0" } else { "server" }.into(),
                current_pid: pid,
                bucket,
                context: if pid == 0 {
                    Context::Idle
                } else {
                    Context::User
                },
                cgroup_id: 0,
                count,
            });
        }
    }
    b.syscall(SyscallStat {
        pid: 100,
        nr: 0,
        name: "read".into(),
        count: 400,
        total_ns: 1,
        errors: 0,
    });
    b.finish()
}

fn save(dir: &Scratch, name: &str, p: &pkprof_profile::Profile) -> PathBuf {
    let path = dir.path(name);
    pkprof_profile::save(p, &path).unwrap();
    path
}

fn pkprof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pkprof"))
        .args(args)
        .output()
        .expect("run pkprof")
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "status {}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A refusal: non-zero exit, nothing on stdout, one line `pkprof: ...` on stderr naming `must`.
fn refused(out: &Output, must: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let what = format!("status {}, stderr {stderr:?}", out.status);
    assert!(!out.status.success(), "must fail: {what}");
    assert!(out.status.code().is_some(), "exits, not killed: {what}");
    assert!(!stderr.contains("panicked"), "no panic: {what}");
    assert!(out.stdout.is_empty(), "nothing on stdout: {what}");
    assert_eq!(stderr.lines().count(), 1, "one line: {what}");
    assert!(stderr.starts_with("pkprof: "), "{what}");
    for m in must {
        assert!(stderr.contains(m), "names {m:?}: {what}");
    }
    stderr
}

#[test]
fn report_prints_flat_profile_and_call_graph() {
    let dir = Scratch::new("text");
    let file = save(&dir, "p.pkprof", &profile(1, true));
    let text = ok(&pkprof(&["report", arg(&file)]));
    assert!(text.starts_with("Flat profile:\n"), "{text}");
    assert!(text.contains("\t\t\tCall graph\n"), "{text}");
    // sys_read: 30 samples of 10 ms over 400 exact calls = 750 us each (gprof's unit choice).
    assert!(
        text.contains(" time   seconds   seconds    calls  us/call  us/call  non-idle  name\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "  0.00      1.00     0.00      400     0.00   750.00            100k:sys_read"
        ),
        "{text}"
    );
    assert!(text.contains("index % time    self  children    called     name"));

    let dcpi = ok(&pkprof(&[
        "report",
        arg(&file),
        "--dcpi",
        "--by",
        "process",
    ]));
    assert!(dcpi.starts_with("DCPI profile: 100 samples"), "{dcpi}");
    assert!(dcpi.contains("by process:"), "{dcpi}");
    assert!(!dcpi.contains("Flat profile"), "{dcpi}");

    let plain = ok(&pkprof(&[
        "report",
        arg(&file),
        "--flat",
        "--plain-names",
        "-p",
        "100",
        "--user-only",
        "--group",
        "request=^handle$",
    ]));
    assert!(plain.contains("  request\n"), "{plain}");
    assert!(!plain.contains("Call graph"), "{plain}");
}

#[test]
fn report_exports_every_format() {
    let dir = Scratch::new("export");
    let file = save(&dir, "p.pkprof", &profile(1, true));
    for format in ["pprof", "folded", "speedscope", "html"] {
        let out = dir.path(&format!("out.{format}"));
        ok(&pkprof(&[
            "report",
            arg(&file),
            "--format",
            format,
            "-o",
            arg(&out),
        ]));
        let len = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{format}: nothing written");
    }
    let folded = ok(&pkprof(&[
        "report",
        arg(&file),
        "--format",
        "folded",
        "--kernel-only",
    ]));
    assert!(
        folded.contains("100k:sys_read;100k:vfs_read 30"),
        "{folded}"
    );
}

#[test]
fn diff_says_how_it_normalised() {
    let dir = Scratch::new("diff");
    let a = save(&dir, "a.pkprof", &profile(1, true));
    let b = save(&dir, "b.pkprof", &profile(3, true));
    let text = ok(&pkprof(&["diff", arg(&a), arg(&b)]));
    assert!(
        text.contains("normalised: the profiles differ in length"),
        "{text}"
    );
    // Rows match by plain names (two runs of a program have different PIDs); --by process keeps
    // the PIDs.
    assert!(text.contains("  vfs_read\n"), "{text}");
    assert!(!text.contains("100k:"), "{text}");
    let by_process = ok(&pkprof(&["diff", arg(&a), arg(&b), "--by", "process"]));
    assert!(by_process.contains("100k:vfs_read"), "{by_process}");
    let html = dir.path("diff.html");
    ok(&pkprof(&[
        "diff",
        arg(&a),
        arg(&b),
        "--format",
        "html",
        "-o",
        arg(&html),
    ]));
    assert!(std::fs::metadata(&html).unwrap().len() > 0);
}

#[test]
fn bad_profile_files_are_one_line_errors() {
    let dir = Scratch::new("bad");
    let good = save(&dir, "good.pkprof", &profile(1, true));
    let bytes = std::fs::read(&good).unwrap();

    let truncated = dir.path("truncated.pkprof");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    refused(
        &pkprof(&["report", arg(&truncated)]),
        &["truncated profile"],
    );

    let corrupt = dir.path("corrupt.pkprof");
    let mut c = bytes.clone();
    let last = c.len() - 1;
    c[40] ^= 0xff;
    c[last] ^= 0xff;
    std::fs::write(&corrupt, &c).unwrap();
    refused(&pkprof(&["report", arg(&corrupt)]), &["corrupt profile"]);

    let version = dir.path("version.pkprof");
    let mut v = bytes.clone();
    v[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&version, &v).unwrap();
    refused(
        &pkprof(&["report", arg(&version)]),
        &["unsupported profile format version 99"],
    );

    let empty_file = dir.path("empty-file");
    std::fs::write(&empty_file, b"").unwrap();
    refused(&pkprof(&["report", arg(&empty_file)]), &["empty file"]);

    let garbage = dir.path("garbage");
    std::fs::write(&garbage, b"this is not a profile at all, just some text").unwrap();
    refused(
        &pkprof(&["report", arg(&garbage)]),
        &["not a pkprof profile"],
    );

    refused(
        &pkprof(&["report", arg(&dir.path("missing.pkprof"))]),
        &["missing.pkprof"],
    );

    let no_samples = save(&dir, "no-samples.pkprof", &profile(1, false));
    refused(&pkprof(&["report", arg(&no_samples)]), &["no samples"]);
    refused(
        &pkprof(&["report", arg(&no_samples), "--format", "folded"]),
        &["no samples"],
    );
    refused(
        &pkprof(&["diff", arg(&good), arg(&no_samples)]),
        &["no samples"],
    );
    refused(
        &pkprof(&["diff", arg(&truncated), arg(&good)]),
        &["truncated"],
    );
}

#[test]
fn bad_selections_are_one_line_errors() {
    let dir = Scratch::new("select");
    let file = save(&dir, "p.pkprof", &profile(1, true));
    let f = arg(&file);
    refused(
        &pkprof(&["report", f, "--group", "x=("]),
        &["--group", "invalid regular expression"],
    );
    refused(
        &pkprof(&["report", f, "--group", "noequals"]),
        &["NAME=REGEX"],
    );
    refused(
        &pkprof(&["report", f, "--comm", "[a-"]),
        &["--comm", "invalid regular expression"],
    );
    refused(
        &pkprof(&["report", f, "-p", "4242"]),
        &["PID 4242 is not in the profile"],
    );
    refused(
        &pkprof(&[
            "report",
            f,
            "-p",
            "4242",
            "--format",
            "pprof",
            "-o",
            "/dev/null",
        ]),
        &["PID 4242"],
    );
    refused(&pkprof(&["diff", f, f, "-p", "7"]), &["PID 7"]);
    refused(
        &pkprof(&["report", f, "--comm", "^nobody$"]),
        &["no samples matching the filters"],
    );
    // Argument errors are one line too (clap's, exit 2).
    refused(&pkprof(&["report", f, "--format", "svg"]), &["svg"]);
    refused(&pkprof(&["report", f, "--min-percent", "200"]), &["200"]);
    refused(&pkprof(&["report", f, "--by", "planet"]), &["planet"]);
    refused(&pkprof(&["report", f, "--bucket", "nobody"]), &["nobody"]);
    refused(
        &pkprof(&["report", f, "--kernel-only", "--user-only"]),
        &["--user-only"],
    );
}

/// Every cause is said once: neither the error nor the line that prints its chain repeats it
/// (they said "checksum mismatch: ...: checksum mismatch: ..." and "No such file or directory
/// (os error 2): No such file or directory (os error 2)").
#[test]
fn each_cause_is_said_once() {
    let dir = Scratch::new("once");
    let good = save(&dir, "good.pkprof", &profile(1, true));
    let bytes = std::fs::read(&good).unwrap();
    let corrupt = dir.path("corrupt.pkprof");
    let mut c = bytes.clone();
    let last = c.len() - 1;
    c[last] ^= 0xff;
    std::fs::write(&corrupt, &c).unwrap();
    let truncated = dir.path("truncated.pkprof");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let missing = dir.path("missing.pkprof");
    let once = |line: &str, cause: &str| {
        assert_eq!(line.matches(cause).count(), 1, "{cause:?} once: {line}");
    };
    let line = refused(&pkprof(&["report", arg(&corrupt)]), &["corrupt profile"]);
    once(&line, "checksum mismatch");
    let line = refused(&pkprof(&["report", arg(&truncated)]), &["truncated"]);
    once(&line, "truncated profile");
    let line = refused(&pkprof(&["report", arg(&missing)]), &["missing.pkprof"]);
    once(&line, "No such file or directory");
    let line = refused(&pkprof(&["diff", arg(&good), arg(&missing)]), &[]);
    once(&line, "No such file or directory");
    // A write error of a report: /dev/full takes the open and fails the write with ENOSPC.
    let line = refused(&pkprof(&["report", arg(&good), "-o", "/dev/full"]), &[]);
    once(&line, "No space left on device");
}
