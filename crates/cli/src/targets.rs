//! What the user names as a target, resolved the same way by every subcommand (`top`, `record`,
//! `syscalls`): a PID or thread id to the process it belongs to, and a `--cgroup` path to a
//! directory of the cgroup v2 hierarchy.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// The process a thread id belongs to (`Tgid:` of /proc/TID/status; a process id is its own).
/// None when no such task exists.
pub fn process_of(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Every id must name a live task; a thread id stands for its process (targets are processes),
/// which is said once on stderr (`doing`: "recording", "showing", "tracing"). Returns the
/// processes, in the order given, without repeats.
pub fn resolve_pids(ids: &[u32], doing: &str) -> Result<Vec<u32>> {
    let mut pids = Vec::with_capacity(ids.len());
    for &id in ids {
        let Some(pid) = process_of(id) else {
            bail!("no process with PID {id}");
        };
        if pid != id {
            eprintln!("pkprof: {id} is a thread of process {pid}; {doing} the process");
        }
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// Only the existence check of [`resolve_pids`]: for `top -H`, where a thread id selects that
/// thread's row.
pub fn check_tasks(ids: &[u32]) -> Result<()> {
    match ids.iter().find(|&&id| process_of(id).is_none()) {
        Some(id) => bail!("no process with PID {id}"),
        None => Ok(()),
    }
}

/// A `--cgroup` directory: absolute, or relative to the cgroup2 mount (wherever it is: on a
/// hybrid system it is /sys/fs/cgroup/unified, and /sys/fs/cgroup holds the v1 controllers). A
/// directory that is not on a cgroup2 filesystem is refused: its inode is no cgroup id the kernel
/// reports, so it would match nothing (or, by accident, something unrelated).
pub fn resolve_cgroup(path: &Path) -> Result<PathBuf> {
    let mounts = cgroup2_mounts();
    let dir = if path.is_absolute() {
        path.to_path_buf()
    } else {
        let Some(found) = mounts.iter().map(|m| m.join(path)).find(|c| c.is_dir()) else {
            match mounts.first() {
                Some(m) => bail!(
                    "no cgroup {} under the cgroup2 mount {} (give a cgroup v2 directory, e.g. \
                     system.slice/nginx.service)",
                    path.display(),
                    m.display()
                ),
                None => {
                    bail!("no cgroup2 filesystem is mounted (mount -t cgroup2 none /sys/fs/cgroup)")
                }
            }
        };
        found
    };
    if !dir.is_dir() {
        bail!(
            "no cgroup {} (give a cgroup v2 directory, e.g. {}/system.slice/nginx.service)",
            path.display(),
            mounts
                .first()
                .map(|m| m.display().to_string())
                .unwrap_or_else(|| "/sys/fs/cgroup".into())
        );
    }
    let fs = fs_type(&dir)?;
    if fs == CGROUP2_SUPER_MAGIC {
        return Ok(dir);
    }
    let what = if fs == CGROUP_SUPER_MAGIC {
        "it is cgroup v1; "
    } else {
        ""
    };
    let mount = match mounts.first() {
        Some(m) => format!("the cgroup2 hierarchy is mounted at {}", m.display()),
        None => "no cgroup2 filesystem is mounted".into(),
    };
    bail!(
        "{} is not a cgroup v2 directory ({what}{mount})",
        dir.display()
    )
}

/// Magic numbers of statfs' f_type (linux/magic.h).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;

/// The filesystem type of `path` (statfs f_type).
fn fs_type(path: &Path) -> Result<i64> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| anyhow::anyhow!("cgroup path {} contains a NUL byte", path.display()))?;
    // SAFETY: a zeroed statfs is a valid value of this plain C struct; statfs only writes to it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is NUL-terminated and st is a valid statfs to fill.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        let e = std::io::Error::last_os_error();
        bail!("cgroup {}: {e}", path.display());
    }
    Ok(st.f_type as i64)
}

/// Mount points of cgroup2, from /proc/self/mountinfo (the kernel's list, as findmnt reads it).
pub(crate) fn cgroup2_mounts() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            post.starts_with("cgroup2 ")
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_its_process() {
        let me = std::process::id();
        assert_eq!(process_of(me), Some(me));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = done_rx.recv(); // alive until the checks are done
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, me);
        assert_eq!(process_of(tid), Some(me));
        assert_eq!(resolve_pids(&[tid, me], "testing").unwrap(), vec![me]);
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn plain_directories_are_not_cgroups() {
        let e = resolve_cgroup(&std::env::temp_dir()).unwrap_err();
        assert!(e.to_string().contains("not a cgroup v2 directory"), "{e}");
        let e = resolve_cgroup(Path::new("/nonexistent-pkprof")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent-pkprof"), "{e}");
    }
}
