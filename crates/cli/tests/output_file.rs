//! `-o` of `pkprof record` and `pkprof syscalls` (root and BPF needed: run with
//! `cargo test -p pkprof --test output_file -- --include-ignored --test-threads=1`).
//!
//! A regular file is replaced atomically (a new inode renamed over it); a symbolic link is
//! followed (its target gets the profile, the link stays); a device or a FIFO is written through,
//! never replaced; a write error (ENOSPC from a full device) is one line and a non-zero exit; the
//! temporary a pkprof killed with SIGKILL leaves behind is removed by the next run, while a running
//! pkprof's is kept. Devices are private nodes (`mknod`) of /dev/null and /dev/full, so that the
//! machine's own /dev/null is not at risk if this ever regresses.

mod common;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{pkprof_bin, run_with_timeout};

/// A fresh directory under the target directory; removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("output-{name}-{}", std::process::id()));
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

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// A character device node like /dev/null (1, 3) or /dev/full (1, 7).
fn mknod_char(path: &Path, major: u32, minor: u32) {
    // SAFETY: a NUL-terminated path; mknod only reads it.
    let r = unsafe {
        libc::mknod(
            cpath(path).as_ptr(),
            libc::S_IFCHR | 0o666,
            libc::makedev(major, minor),
        )
    };
    assert_eq!(r, 0, "mknod {}", path.display());
}

fn mkfifo(path: &Path) {
    // SAFETY: a NUL-terminated path; mkfifo only reads it.
    assert_eq!(unsafe { libc::mkfifo(cpath(path).as_ptr(), 0o644) }, 0);
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

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `record -o PATH -- CMD`, or `syscalls -o PATH --format json -- CMD`.
fn run_to(sub: &str, out: &Path, cmd: &[&str]) -> Output {
    let mut args = vec![sub, "-o", arg(out)];
    if sub == "syscalls" {
        args.extend(["--format", "json"]);
    }
    args.push("--");
    args.extend(cmd);
    pkprof(&args)
}

/// Checks what `sub` wrote: a profile that decodes, or a JSON report of the command.
fn check_content(sub: &str, bytes: &[u8]) {
    if sub == "record" {
        let p = pkprof_profile::read_profile(bytes).expect("the profile decodes");
        assert!(!p.meta.targets.pids.is_empty(), "{:?}", p.meta.targets);
    } else {
        let v: serde_json::Value = serde_json::from_slice(bytes).expect("the report is JSON");
        assert!(v.is_object(), "{v}");
    }
}

/// Names of the hidden files in `dir` (temporaries).
fn hidden(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

const WORK: &[&str] = &[
    "sh",
    "-c",
    "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
];

#[test]
#[ignore = "needs root and BPF"]
fn a_device_is_written_through_not_replaced() {
    let dir = Scratch::new("dev");
    let null = dir.path("null");
    mknod_char(&null, 1, 3);
    for sub in ["record", "syscalls"] {
        let out = run_to(sub, &null, &["true"]);
        assert!(out.status.success(), "{sub} -o null: {}", out.status);
        let m = std::fs::symlink_metadata(&null).unwrap();
        assert!(
            m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 3),
            "{sub} -o null replaced the device: {m:?}"
        );
        assert!(hidden(&dir.0).is_empty(), "{:?}", hidden(&dir.0));
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn a_full_device_is_a_one_line_error() {
    let dir = Scratch::new("full");
    let full = dir.path("full");
    mknod_char(&full, 1, 7);
    for sub in ["record", "syscalls"] {
        let out = run_to(sub, &full, &["true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{sub} -o full: {err}");
        // Apart from record's "recording at" banner, one line: the error.
        let errors: Vec<_> = err
            .lines()
            .filter(|l| !l.contains("recording at"))
            .collect();
        assert_eq!(errors.len(), 1, "{sub}: {err}");
        let line = errors[0];
        assert!(
            line.starts_with("pkprof: cannot write the ")
                && line.matches("No space left on device").count() == 1,
            "{sub}: {line}"
        );
        assert!(std::fs::symlink_metadata(&full)
            .unwrap()
            .file_type()
            .is_char_device());
        assert!(!String::from_utf8_lossy(&out.stdout).contains("wrote"));
    }
}

/// Reads the FIFO to its end on a thread (the open waits for a writer).
fn read_fifo(path: &Path) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .expect("read the FIFO");
        let _ = tx.send(bytes);
    });
    rx
}

#[test]
#[ignore = "needs root and BPF"]
fn a_fifo_with_a_reader_gets_the_bytes() {
    let dir = Scratch::new("fifo");
    let fifo = dir.path("fifo");
    mkfifo(&fifo);
    for sub in ["record", "syscalls"] {
        let got = read_fifo(&fifo);
        let out = run_to(sub, &fifo, WORK);
        assert!(out.status.success(), "{sub} -o fifo: {}", out.status);
        let bytes = got
            .recv_timeout(Duration::from_secs(10))
            .expect("the reader got its end of file");
        check_content(sub, &bytes);
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn a_fifo_read_only_at_the_end_waits_for_its_reader() {
    let dir = Scratch::new("fifo-late");
    let fifo = dir.path("fifo");
    mkfifo(&fifo);
    let mut child = Command::new(pkprof_bin())
        .args(["record", "-F", "499", "-o", arg(&fifo), "--"])
        .args(WORK)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            eprintln!("{line}");
            let _ = tx.send(line);
        }
    });
    // The recording ends, then pkprof waits for a reader, saying so.
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("pkprof says it waits for a reader");
        if line.contains("waiting for a reader") {
            break;
        }
    }
    let bytes = read_fifo(&fifo)
        .recv_timeout(Duration::from_secs(30))
        .expect("the profile arrives");
    assert!(child.wait().unwrap().success());
    check_content("record", &bytes);
}

#[test]
#[ignore = "needs root and BPF"]
fn a_symlink_is_followed_and_stays() {
    let dir = Scratch::new("link");
    std::fs::create_dir_all(dir.path("a")).unwrap();
    std::fs::create_dir_all(dir.path("b")).unwrap();
    for sub in ["record", "syscalls"] {
        // A link to an existing file, and a link to a file not yet created (as `>` creates it).
        for (link, target, existing) in [("a/link", "b/target", true), ("a/new", "b/new", false)] {
            let (link, target) = (
                dir.path(&format!("{link}-{sub}")),
                format!("{target}-{sub}"),
            );
            if existing {
                std::fs::write(dir.path(&target), "old content").unwrap();
            }
            std::os::unix::fs::symlink(format!("../{target}"), &link).unwrap();
            let out = run_to(sub, &link, &["true"]);
            assert!(
                out.status.success(),
                "{sub} -o {}: {}",
                link.display(),
                out.status
            );
            assert!(
                std::fs::symlink_metadata(&link)
                    .unwrap()
                    .file_type()
                    .is_symlink(),
                "{sub}: the link was replaced"
            );
            assert_eq!(
                std::fs::read_link(&link).unwrap(),
                Path::new(&format!("../{target}"))
            );
            check_content(sub, &std::fs::read(dir.path(&target)).unwrap());
        }
        assert!(hidden(&dir.path("a")).is_empty() && hidden(&dir.path("b")).is_empty());
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn a_regular_file_is_replaced_atomically() {
    let dir = Scratch::new("regular");
    for sub in ["record", "syscalls"] {
        let file = dir.path(&format!("out-{sub}"));
        std::fs::write(&file, "old content").unwrap();
        let old_inode = std::fs::metadata(&file).unwrap().ino();
        let out = run_to(sub, &file, &["true"]);
        assert!(out.status.success(), "{sub}: {}", out.status);
        let m = std::fs::symlink_metadata(&file).unwrap();
        // Renamed over the old file: another inode, never the old one rewritten in place.
        assert!(m.is_file() && m.ino() != old_inode, "{sub}: {m:?}");
        check_content(sub, &std::fs::read(&file).unwrap());
        assert!(hidden(&dir.0).is_empty(), "{:?}", hidden(&dir.0));
    }
    // A directory is refused before anything runs.
    let out = pkprof(&["record", "-o", arg(&dir.0), "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.lines().count() == 1, "{err}");
    assert!(err.contains("Is a directory"), "{err}");
}

/// `pkprof record -a -o PATH`, returned once it records.
fn start_recording(path: &Path) -> Child {
    let mut child = Command::new(pkprof_bin())
        .args(["record", "-a", "-o", arg(path)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("recording at") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "pkprof record ended before recording"
        );
    }
    child
}

#[test]
#[ignore = "needs root and BPF"]
fn stale_temporaries_of_killed_runs_are_removed() {
    let dir = Scratch::new("stale");
    // A recording killed with SIGKILL leaves its temporary: nothing can remove it then.
    let mut killed = start_recording(&dir.path("killed.pkprof"));
    let stale = hidden(&dir.0);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert!(stale[0].contains(&killed.id().to_string()), "{stale:?}");
    killed.kill().unwrap(); // SIGKILL
    killed.wait().unwrap();
    assert_eq!(hidden(&dir.0), stale, "the killed run's temporary stays");
    // A recording still running keeps its own.
    let mut live = start_recording(&dir.path("live.pkprof"));
    let live_tmp: Vec<_> = hidden(&dir.0)
        .into_iter()
        .filter(|n| !stale.contains(n))
        .collect();
    assert_eq!(live_tmp.len(), 1, "{live_tmp:?}");

    // The next run beside them, to another name, removes the stale one only.
    let out = pkprof(&["record", "-o", arg(&dir.path("next.pkprof")), "--", "true"]);
    assert!(out.status.success());
    assert_eq!(
        hidden(&dir.0),
        live_tmp,
        "only the running pkprof's temporary is left"
    );

    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(live.id() as i32, libc::SIGINT) };
    assert!(live.wait().unwrap().success());
    let p = pkprof_profile::load(dir.path("live.pkprof")).expect("the live run's profile");
    assert!(p.meta.end_unix_ns > p.meta.start_unix_ns);
    assert!(hidden(&dir.0).is_empty(), "{:?}", hidden(&dir.0));
}
