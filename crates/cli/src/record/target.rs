//! Preparing the targets: finds programs and checks that probed binaries exist (the command is
//! started by crate::launch, PIDs and cgroups are resolved by crate::targets, shared with `top`
//! and `syscalls`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

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
