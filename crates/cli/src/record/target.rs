//! Preparing the targets: checks that probed binaries exist, and starts the command to profile
//! (PIDs and cgroups are resolved by crate::targets, shared with `top` and `syscalls`).

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
