//! Starting `pkprof syscalls -- CMD` so that its count begins exactly at its execve, as
//! `strace -f -c` does: the child waits on a gate pipe after fork, pkprof makes it a target, opens
//! the gate, and the first call the child makes after that is the execve. std's `Command` cannot do
//! this (its `spawn` returns only after the exec, which would wait on the gate forever), hence the
//! hand-written fork/exec.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// A command forked and held before its exec.
pub struct Held {
    pub pid: u32,
    gate: libc::c_int,
    exec_error: libc::c_int,
    program: String,
}

/// The program as execve will be given it: a path, or the first match in PATH.
pub fn resolve(program: &str) -> Result<PathBuf> {
    let p = Path::new(program);
    let found = if program.contains('/') {
        p.is_file().then(|| p.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(p))
                .find(|c| c.is_file())
        })
    };
    found.with_context(|| format!("cannot run {program}: no such command"))
}

fn cstring(s: &OsStr) -> Result<CString> {
    CString::new(s.as_bytes()).context("an argument contains a NUL byte")
}

fn pipe() -> io::Result<[libc::c_int; 2]> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fds)
}

/// Forks the command; it waits for [`Held::release`] before its execve.
pub fn fork_held(argv: &[String]) -> Result<Held> {
    let Some(program) = argv.first() else {
        bail!("no command given after --");
    };
    let path = cstring(resolve(program)?.as_os_str())?;
    let args = argv
        .iter()
        .map(|a| cstring(OsStr::new(a)))
        .collect::<Result<Vec<_>>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let gate = pipe().context("creating the start pipe")?;
    let errp = pipe().context("creating the exec-error pipe")?;
    // SAFETY: fork in a possibly multi-threaded process: the child only calls async-signal-safe
    // functions (read, execv, write, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("cannot run {program}: fork: {}", io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; every pointer is valid and NUL-terminated, the arrays null-ended.
        unsafe {
            let mut b = 0u8;
            loop {
                let n = libc::read(gate[0], (&mut b as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                if n == 0 || *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126); // pkprof went away: do not run untraced
                }
            }
            libc::execv(path.as_ptr(), arg_ptrs.as_ptr());
            let e = *libc::__errno_location();
            libc::write(errp[1], (&e as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    // SAFETY: closing our copies of the child's ends, which we own.
    unsafe {
        libc::close(gate[0]);
        libc::close(errp[1]);
    }
    Ok(Held {
        pid: pid as u32,
        gate: gate[1],
        exec_error: errp[0],
        program: program.clone(),
    })
}

impl Held {
    /// Waits until the child is blocked in its read of the gate (per /proc/PID/syscall), so that
    /// nothing it did before (glibc's fork epilogue, entering that read) is counted once it
    /// becomes a target: its next call is the execve.
    pub fn wait_blocked(&self) -> Result<()> {
        let read_nr = syscalls::Sysno::read.id();
        let path = format!("/proc/{}/syscall", self.pid);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot run {}: reading {path}", self.program))?;
            let nr = text
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<i64>().ok());
            if nr == Some(read_nr as i64) {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                bail!(
                    "cannot run {}: the child never reached its start gate",
                    self.program
                );
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// Lets the command exec, and reports whether the exec worked.
    pub fn release(self) -> Result<()> {
        let one = 1u8;
        // SAFETY: writes one byte from a valid local to a pipe we own, then reads at most 4 bytes
        // into a valid local; both fds are ours and closed once.
        unsafe {
            libc::write(self.gate, (&one as *const u8).cast(), 1);
            libc::close(self.gate);
            let mut errno = 0i32;
            let n = loop {
                let n = libc::read(self.exec_error, (&mut errno as *mut i32).cast(), 4);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break n;
                }
            };
            libc::close(self.exec_error);
            if n == 4 {
                let mut status = 0;
                libc::waitpid(self.pid as i32, &mut status, 0);
                bail!(
                    "cannot run {}: {}",
                    self.program,
                    io::Error::from_raw_os_error(errno)
                );
            }
        }
        Ok(())
    }
}

/// Exit status of a child if it has ended (reaped), without blocking.
pub fn try_wait(pid: u32) -> Option<i32> {
    let mut status = 0;
    // SAFETY: status is a valid int; WNOHANG never blocks.
    let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
    (r == pid as i32 || r < 0).then_some(status)
}
