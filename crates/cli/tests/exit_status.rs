//! How `pkprof record -- CMD` and `pkprof syscalls -- CMD` end (root and BPF needed: run with
//! `cargo test -p pkprof --test exit_status -- --include-ignored --test-threads=1`).
//!
//! The command's exit status is passed on as a shell passes it on (n, or 128+n for signal n, with
//! the signal named); SIGTERM or SIGINT to pkprof, and the end of `--duration`, end a command
//! still running (perf record and strace do the same) and pkprof exits with its status; a reader
//! that closes pkprof's stdout early (`| head -2`) ends it quietly with status 0.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{pkprof_bin, run_with_timeout};

fn scratch(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("exit-{name}-{}", std::process::id()))
}

fn pkprof(args: &[&str]) -> Output {
    let out = run_with_timeout(
        Command::new(pkprof_bin()).args(args),
        Duration::from_secs(60),
    );
    eprintln!(
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `record -o FILE ARGS`, or `syscalls --format json ARGS` (its report on stdout).
fn args_of<'a>(sub: &'a str, file: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![sub];
    if sub == "record" {
        args.extend(["-o", file]);
    } else {
        args.extend(["--format", "json"]);
    }
    args.extend(rest);
    args
}

/// Where each subcommand says how the command ended: record in its summary (stdout), syscalls on
/// stderr.
fn note(sub: &str, out: &Output) -> String {
    String::from_utf8_lossy(if sub == "record" {
        &out.stdout
    } else {
        &out.stderr
    })
    .into_owned()
}

/// The command is found and run as execvp runs it (and so as `sh -c` would): a PATH entry that is
/// not executable is passed over, and a script without `#!` is run by /bin/sh.
#[test]
#[ignore = "needs root and BPF"]
fn commands_are_found_and_run_as_execvp_does() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("path");
    let (first, second) = (dir.join("a"), dir.join("b"));
    for d in [&first, &second] {
        std::fs::create_dir_all(d).unwrap();
    }
    // The same name twice in PATH: a plain file first, then an executable script without `#!`.
    std::fs::write(first.join("pk-script"), "exit 9\n").unwrap();
    std::fs::write(second.join("pk-script"), "exit 5\n").unwrap();
    std::fs::set_permissions(
        second.join("pk-script"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}:{}",
        first.display(),
        second.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let file = scratch("path.pkprof");
    let f = file.to_str().unwrap();
    for sub in ["record", "syscalls"] {
        let out = run_with_timeout(
            Command::new(pkprof_bin())
                .args(args_of(sub, f, &["--", "pk-script"]))
                .env("PATH", &path),
            Duration::from_secs(60),
        );
        assert_eq!(
            out.status.code(),
            Some(5),
            "{sub}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&file);
}

#[test]
#[ignore = "needs root and BPF"]
fn the_commands_exit_status_is_passed_on() {
    let file = scratch("status.pkprof");
    let f = file.to_str().unwrap();
    for sub in ["record", "syscalls"] {
        let out = pkprof(&args_of(sub, f, &["--", "sh", "-c", "exit 3"]));
        assert_eq!(out.status.code(), Some(3), "{sub}: {}", out.status);
        assert!(
            note(sub, &out).contains("command exited with status 3"),
            "{sub}: {}",
            note(sub, &out)
        );
        // A shell says 137 for a command killed by SIGKILL (128 + 9).
        let out = pkprof(&args_of(sub, f, &["--", "sh", "-c", "kill -9 $$"]));
        assert_eq!(out.status.code(), Some(137), "{sub}: {}", out.status);
        assert!(
            note(sub, &out).contains("command killed by SIGKILL"),
            "{sub}: {}",
            note(sub, &out)
        );
        let out = pkprof(&args_of(sub, f, &["--", "true"]));
        assert_eq!(out.status.code(), Some(0), "{sub}: {}", out.status);
    }
    let _ = std::fs::remove_file(&file);
}

/// The PID of `pkprof`'s child once it runs `comm` (after its exec).
fn command_of(pkprof: u32, comm: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{pkprof}/task/{pkprof}/children"))
            .unwrap_or_default();
        for pid in children.split_whitespace() {
            let c = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if c.trim() == comm {
                return pid.parse().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "pkprof never started {comm}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` with a timeout; returns its output.
fn finish(mut child: Child) -> Output {
    let stdout = child.stdout.take();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(mut s) = stdout {
            let _ = s.read_to_end(&mut v);
        }
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("pkprof did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    eprintln!("{}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    out
}

/// `pkprof SUB ... -- sleep 30` ended by `how` (a signal to pkprof, or --duration): the sleep is
/// gone, and pkprof exits 128 + the signal that ended it.
fn ends_the_command(sub: &str, how: Option<i32>) {
    let file = scratch(&format!("{sub}-end.pkprof"));
    let duration: &[&str] = if how.is_none() {
        &["--duration", "1"]
    } else {
        &[]
    };
    let mut rest = duration.to_vec();
    rest.extend(["--", "sleep", "30"]);
    let mut pkprof = Command::new(pkprof_bin());
    pkprof
        .args(args_of(sub, file.to_str().unwrap(), &rest))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // pkprof starts the command with the SIGINT/SIGTERM dispositions it inherited, as strace
    // does: a suite run as a background job of a non-interactive shell ignores SIGINT, and so
    // would the sleep. The test is of pkprof's forwarding, so both start at the default.
    // SAFETY: signal(2) only, async-signal-safe, between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut pkprof, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let child = pkprof.spawn().unwrap();
    let sleep = command_of(child.id(), "sleep");
    if let Some(sig) = how {
        // Sampling or counting runs by now (the command runs after pkprof set everything up).
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
    }
    let out = finish(child);
    let sig = how.unwrap_or(libc::SIGTERM);
    let name = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    assert!(
        !Path::new(&format!("/proc/{sleep}")).exists(),
        "{sub}: sleep {sleep} still runs"
    );
    assert_eq!(out.status.code(), Some(128 + sig), "{sub}: {}", out.status);
    let note = note(sub, &out);
    assert!(
        note.contains(&format!("command killed by {name}")),
        "{note}"
    );
    if sub == "record" {
        let why = if how.is_some() {
            "interrupted"
        } else {
            "duration reached"
        };
        assert!(note.contains(why), "{note}");
        pkprof_profile::load(&file).expect("the profile is written");
        let _ = std::fs::remove_file(&file);
    } else {
        let _: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("the report is printed");
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn sigterm_sigint_and_duration_end_the_command() {
    for sub in ["record", "syscalls"] {
        ends_the_command(sub, Some(libc::SIGTERM));
        ends_the_command(sub, Some(libc::SIGINT));
        ends_the_command(sub, None);
    }
}

/// `pkprof ARGS` whose stdout reader goes away after `lines` lines: exit 0, nothing on stderr
/// but `allowed` lines.
fn quiet_on_closed_pipe(args: &[&str], lines: usize, allowed: &[&str]) {
    let mut child = Command::new(pkprof_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..lines {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
    }
    drop(stdout); // as `head` exits
    child.stdout = None;
    let out = finish(child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}: {err}",
        out.status
    );
    for l in err.lines() {
        assert!(
            allowed.iter().any(|a| l.contains(a)),
            "{args:?}: unexpected stderr line {l:?}"
        );
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn a_closed_stdout_pipe_ends_quietly() {
    // The reproduction: the status of pkprof in `pkprof top --batch | head -2` (pipefail).
    let script = format!(
        "set -o pipefail; {} top --batch -d 0.2 | head -2 >/dev/null",
        pkprof_bin().display()
    );
    let out = run_with_timeout(
        Command::new("bash").args(["-c", &script]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}: {err}", out.status);
    assert!(err.is_empty(), "{err}");

    quiet_on_closed_pipe(&["top", "--json", "-d", "0.2"], 2, &[]);
    let file = scratch("pipe.pkprof");
    let f = file.to_str().unwrap();
    // The summary and the report are written after the command ends: the pipe is closed by then.
    let slow = ["--", "sleep", "0.5"];
    let mut rec = vec!["record", "-o", f];
    rec.extend(slow);
    quiet_on_closed_pipe(&rec, 0, &["recording at"]);
    let mut sys = vec!["syscalls"];
    sys.extend(slow);
    quiet_on_closed_pipe(&sys, 0, &[]);
    quiet_on_closed_pipe(&["report", f], 1, &[]);
    let _ = std::fs::remove_file(&file);
}
