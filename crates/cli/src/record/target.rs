//! Preparing the targets: checks that PIDs, cgroups and probed binaries exist, and starts the
//! command to profile.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use anyhow::{bail, Context, Result};

/// Starts the command. The caller has made pkprof itself a target with children followed, so the
/// command is a target from its first instruction: std's spawn returns only after the exec.
pub fn spawn(argv: &[String]) -> Result<Child> {
    let Some((prog, args)) = argv.split_first() else {
        bail!("no command given after --");
    };
    Command::new(prog)
        .args(args)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {prog}: {e}"))
}

/// Every PID must name a live process.
pub fn check_pids(pids: &[u32]) -> Result<()> {
    for pid in pids {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("no process with PID {pid}");
        }
    }
    Ok(())
}

/// A cgroup v2 directory: absolute, or relative to the cgroup2 mount.
pub fn resolve_cgroup(path: &Path) -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = if path.is_absolute() {
        vec![path.to_path_buf()]
    } else {
        cgroup2_mounts().into_iter().map(|m| m.join(path)).collect()
    };
    for c in &candidates {
        if c.is_dir() {
            return Ok(c.clone());
        }
    }
    bail!(
        "no cgroup {} (give a cgroup v2 directory, e.g. /sys/fs/cgroup/system.slice/nginx.service)",
        path.display()
    )
}

/// Mount points of cgroup2, from /proc/self/mountinfo.
fn cgroup2_mounts() -> Vec<PathBuf> {
    let mut text = String::new();
    if std::fs::File::open("/proc/self/mountinfo")
        .and_then(|mut f| f.read_to_string(&mut text))
        .is_err()
    {
        return vec![PathBuf::from("/sys/fs/cgroup")];
    }
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            post.starts_with("cgroup2 ")
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .collect()
}

/// A program as exec would find it: a path (taken as given), or a bare name looked up in PATH.
pub fn find_program(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 || name.is_absolute() {
        return Some(name.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The binary of a `--count` probe: a path, or a name looked up in PATH.
pub fn resolve_binary(bin: &Path) -> Result<PathBuf> {
    let found = find_program(bin);
    let path =
        found.with_context(|| format!("--count: no binary {} (not in PATH)", bin.display()))?;
    std::fs::File::open(&path)
        .with_context(|| format!("--count: cannot read {}", path.display()))?;
    Ok(path)
}
