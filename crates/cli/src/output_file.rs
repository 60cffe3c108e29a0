//! The file `-o` names (record's profile, syscalls' report), checked before any work starts:
//!
//! - a regular file or a new path is written whole or not at all: created at once under a hidden
//!   temporary name beside it (`.NAME.pkprof-PID.tmp`, so an unwritable directory is an error
//!   before anything runs), then written, synced and renamed into place. A failed write, a full
//!   disk or an early error leaves nothing behind;
//! - a symbolic link is followed: the temporary goes beside its target and the rename replaces the
//!   target; the link stays, as a shell's `>` writes through it;
//! - a device or a FIFO (`/dev/null`, `/dev/full`, a named pipe) is written through, never
//!   replaced. A device is opened for writing at once. A FIFO is checked for write permission at
//!   once and opened at the end, when there is something to write: its open waits for a reader.
//!
//! Temporaries of pkprof processes that no longer run (killed by SIGKILL: nothing could remove
//! them) are removed when the next output file beside them is created.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

pub struct OutputFile {
    kind: Kind,
    /// As the user gave it, for messages.
    path: PathBuf,
    /// What the file holds, for error messages ("profile", "report").
    what: &'static str,
}

enum Kind {
    /// Written to `tmp` and renamed to `target` (the path with its links followed).
    Replace {
        file: Option<File>,
        tmp: PathBuf,
        target: PathBuf,
    },
    /// A device, opened at once and written through.
    Device(Option<File>),
    /// A FIFO, opened when written.
    Fifo(PathBuf),
}

impl OutputFile {
    pub fn create(path: &Path, what: &'static str) -> Result<OutputFile> {
        let fail = || format!("cannot write the {what} to {}", path.display());
        let target = follow_links(path).with_context(fail)?;
        let kind = match std::fs::metadata(&target) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => replace(&target),
            Err(e) => Err(e),
            Ok(m) if m.is_file() => replace(&target),
            Ok(m) if m.is_dir() => Err(io::Error::from_raw_os_error(libc::EISDIR)),
            Ok(m) if m.file_type().is_fifo() => writable(&target).map(|()| Kind::Fifo(target)),
            // Character and block devices; a socket refuses the open (ENXIO).
            Ok(_) => OpenOptions::new()
                .write(true)
                .open(&target)
                .map(|f| Kind::Device(Some(f))),
        }
        .with_context(fail)?;
        Ok(OutputFile {
            kind,
            path: path.to_path_buf(),
            what,
        })
    }

    /// Writes the content with `write` and puts it in place (flushed, synced and renamed, for a
    /// regular file). Returns the bytes written.
    pub fn commit(mut self, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<u64> {
        let fail = |e: &dyn std::fmt::Display| {
            anyhow!(
                "cannot write the {} to {}: {e}",
                self.what,
                self.path.display()
            )
        };
        let file = match &mut self.kind {
            Kind::Replace { file, .. } | Kind::Device(file) => file.take(),
            Kind::Fifo(path) => Some(open_fifo(path).map_err(|e| fail(&e))?),
        };
        let file = file.ok_or_else(|| fail(&"written twice"))?;
        let mut w = Counted {
            inner: BufWriter::new(file),
            bytes: 0,
        };
        write(&mut w).map_err(|e| fail(&e))?;
        let file = w.inner.into_inner().map_err(|e| fail(&e.into_error()))?;
        if let Kind::Replace { tmp, target, .. } = &self.kind {
            file.sync_all().map_err(|e| fail(&e))?;
            std::fs::rename(tmp, target).map_err(|e| fail(&e))?;
        }
        Ok(w.bytes)
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // After a rename there is no temporary left; after any failure this removes it.
        if let Kind::Replace { tmp, .. } = &self.kind {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Counts what goes through (a device or FIFO has no length to read back).
struct Counted<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The temporary beside `target`, stale ones of dead pkprof processes removed first.
fn replace(target: &Path) -> io::Result<Kind> {
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EISDIR))?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    remove_stale_temporaries(dir);
    let tmp = dir.join(format!(
        ".{}{TMP_MARK}{}{TMP_END}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let file = File::create(&tmp)?;
    Ok(Kind::Replace {
        file: Some(file),
        tmp,
        target: target.to_path_buf(),
    })
}

const TMP_MARK: &str = ".pkprof-";
const TMP_END: &str = ".tmp";

/// Removes `.NAME.pkprof-PID.tmp` files in `dir` whose PID is not a running pkprof.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return; // creating the temporary will say what is wrong with the directory
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.starts_with('.'))
            .and_then(|n| n.strip_suffix(TMP_END))
            .and_then(|n| n.rsplit_once(TMP_MARK))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !is_running_pkprof(pid) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(
                    "removed {}, left by pkprof process {pid} that no longer runs",
                    entry.path().display()
                ),
                Err(e) => tracing::info!("cannot remove {}: {e}", entry.path().display()),
            }
        }
    }
}

/// A process `pid` runs and is a pkprof (same command name or same executable as this one): a
/// reused PID of another program does not protect a stale temporary, nor does a pkprof that is
/// exiting (killed, its memory already gone: no `/proc/PID/exe`) or a zombie.
fn is_running_pkprof(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else {
        return false;
    };
    let own_comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    match std::fs::read_link(format!("/proc/{pid}/exe")) {
        Ok(exe) => comm == own_comm || std::fs::read_link("/proc/self/exe").is_ok_and(|e| e == exe),
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        // Another user's process: the name is all there is to go by.
        Err(_) => comm == own_comm,
    }
}

/// `path` with symbolic links followed, up to the kernel's limit of 40. Written here because
/// `std::fs::canonicalize` fails on a link to a file not yet created, which `>` would create.
fn follow_links(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)?;
                // A relative target is relative to the link's directory (an absolute one replaces).
                p = p.parent().map(|d| d.join(&to)).unwrap_or(to);
            }
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => return Ok(p),
        }
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// Whether this process may write `path` (checked with the effective IDs, as open does).
fn writable(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a NUL-terminated path; faccessat only reads it.
    let r = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens a FIFO for writing. A non-blocking open tells whether a reader is there (and is kept,
/// made blocking, for the writes: closing it would give that reader its end of file). When none
/// is, the user is told, and a blocking open waits for one. SIGINT and SIGTERM get back the
/// dispositions pkprof inherited first (the work is done), so Ctrl-C ends the wait as it ends
/// `cat > FIFO`.
fn open_fifo(path: &Path) -> io::Result<File> {
    match OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => {
            let fd = f.as_raw_fd();
            // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL read and set its flags only.
            let r = unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                if flags < 0 {
                    flags
                } else {
                    libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK)
                }
            };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(f)
        }
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            eprintln!(
                "pkprof: waiting for a reader of the FIFO {}",
                path.display()
            );
            crate::signals::restore_inherited();
            OpenOptions::new().write(true).open(path)
        }
        Err(e) => Err(e),
    }
}
