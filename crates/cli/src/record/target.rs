//! Preparing the targets: finds programs and checks that probed binaries exist (the command is
//! started by crate::launch, PIDs and cgroups are resolved by crate::targets, shared with `top`
//! and `syscalls`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A program as exec would find it: a path (taken as given), or a bare name looked up in PATH.
pub fn find_program(name: &Path, to_run: bool) -> Option<PathBuf> {
    if name.components().count() > 1 || name.is_absolute() {
        return Some(name.to_path_buf());
    }
    // As execvp searches for a program to run: the first regular file with an execute bit (a
    // `--count` binary, a library perhaps, need only be a file).
    let executable = |p: &Path| {
        std::fs::metadata(p)
            .is_ok_and(|m| m.is_file() && (!to_run || m.permissions().mode() & 0o111 != 0))
    };
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| executable(p))
    })
}

/// The binary of a `--count` probe: a path, or a name looked up in PATH.
pub fn resolve_binary(bin: &Path) -> Result<PathBuf> {
    let found = find_program(bin, false);
    let path =
        found.with_context(|| format!("--count: no binary {} (not in PATH)", bin.display()))?;
    std::fs::File::open(&path)
        .with_context(|| format!("--count: cannot read {}", path.display()))?;
    Ok(path)
}
