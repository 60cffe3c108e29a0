//! Starting the command of `pkprof syscalls -- CMD` and `pkprof record -- CMD` so that its
//! syscalls count from its execve exactly, as `strace -f -c` counts them: the child waits on a
//! gate pipe after fork, pkprof makes it a target (and has what it counted of it forgotten), opens
//! the gate, and the first call the child makes after that is the execve. std's `Command` cannot
//! do this (its `spawn` returns only after the exec, which would wait on the gate forever), hence
//! the hand-written fork/exec.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// A command forked and held before its exec. Dropped before [`Held::release`] (an error on the
/// way), the child is killed and reaped: it never runs untraced, and never waits forever.
pub struct Held {
    pub pid: u32,
    gate: Option<File>,
    exec_error: Option<File>,
    program: String,
}

/// The program as execve will be given it: a path, or the first match in PATH.
pub fn resolve(program: &str) -> Result<PathBuf> {
    crate::record::find_program(Path::new(program), true)
        .filter(|p| p.is_file())
        .with_context(|| format!("cannot run {program}: no such command"))
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

/// Forks the command (`path`, resolved by [`resolve`]; `argv[0]` as given); it waits for
/// [`Held::release`] before its execve.
pub fn fork_held(path: &Path, argv: &[String]) -> Result<Held> {
    let Some(program) = argv.first() else {
        bail!("no command given after --");
    };
    let path = cstring(path.as_os_str())?;
    let args = argv
        .iter()
        .map(|a| cstring(OsStr::new(a)))
        .collect::<Result<Vec<_>>>()?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    // A file execve refuses as not executable in any known format (ENOEXEC: a script without
    // `#!`) is run by /bin/sh, as execvp and the shells do.
    let sh = cstring(OsStr::new("/bin/sh"))?;
    let mut sh_ptrs: Vec<*const libc::c_char> = vec![sh.as_ptr(), path.as_ptr()];
    sh_ptrs.extend(args.iter().skip(1).map(|a| a.as_ptr()));
    sh_ptrs.push(std::ptr::null());
    let gate = pipe().context("creating the start pipe")?;
    let errp = pipe().context("creating the exec-error pipe")?;
    // SAFETY: fork in a possibly multi-threaded process: the child only calls async-signal-safe
    // functions (close, signal, read, execv, write, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("cannot run {program}: fork: {}", io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; every pointer is valid and NUL-terminated, the arrays null-ended.
        unsafe {
            // Only the parent's ends may keep the pipes open: when pkprof goes away the read
            // below sees end of file. pkprof's SIGINT/SIGTERM handlers are not the command's:
            // it starts with what pkprof inherited (SIG_IGN in a background job), as under strace.
            libc::close(gate[1]);
            libc::close(errp[0]);
            crate::signals::restore_inherited();
            // Rust ignores SIGPIPE and an ignored signal stays ignored across exec: the command
            // gets the default back, as std's Command gives it.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
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
            if *libc::__errno_location() == libc::ENOEXEC {
                libc::execv(sh.as_ptr(), sh_ptrs.as_ptr());
            }
            let e = *libc::__errno_location();
            libc::write(errp[1], (&e as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    // SAFETY: the child's ends are closed here once; the parent's ends are fresh fds we own.
    let (gate, exec_error) = unsafe {
        libc::close(gate[0]);
        libc::close(errp[1]);
        (
            File::from(OwnedFd::from_raw_fd(gate[1])),
            File::from(OwnedFd::from_raw_fd(errp[0])),
        )
    };
    Ok(Held {
        pid: pid as u32,
        gate: Some(gate),
        exec_error: Some(exec_error),
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
    pub fn release(mut self) -> Result<()> {
        let (Some(mut gate), Some(mut exec_error)) = (self.gate.take(), self.exec_error.take())
        else {
            bail!("cannot run {}: released twice", self.program);
        };
        gate.write_all(&[1])
            .with_context(|| format!("cannot run {}: opening its start gate", self.program))?;
        drop(gate);
        // End of file: the exec closed the pipe (close-on-exec). Four bytes: its errno.
        let mut errno = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match exec_error.read(&mut errno[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => bail!("cannot run {}: {e}", self.program),
            }
        }
        let pid = self.pid;
        let program = std::mem::take(&mut self.program);
        std::mem::forget(self); // released: the child is the command now, not ours to kill
        if got == 4 {
            let mut status = 0;
            // SAFETY: reaps our own child, which exits right after reporting the error.
            unsafe { libc::waitpid(pid as i32, &mut status, 0) };
            bail!(
                "cannot run {program}: {}",
                io::Error::from_raw_os_error(i32::from_ne_bytes(errno))
            );
        }
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: kills and reaps our own child, held before its exec.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid as i32, &mut status, 0);
        }
    }
}
