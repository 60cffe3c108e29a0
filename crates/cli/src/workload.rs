//! The command pkprof runs (`record -- CMD`, `syscalls -- CMD`): ended when pkprof stops first, and
//! its end passed on as a shell does.
//!
//! As perf record and strace do, a command still running when pkprof stops (Ctrl-C, SIGTERM,
//! `--duration`) gets a signal: the SIGINT or SIGTERM pkprof received (as strace forwards it), or
//! SIGTERM at the end of `--duration` (as perf sends). If it has not exited after
//! [`GRACE`], or at a further SIGINT/SIGTERM to pkprof, it gets SIGKILL (as `docker stop` does).
//! pkprof's exit status is the command's: its code, or 128+n when signal n ended it.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgid, getpgrp, tcgetpgrp, Pid};

use crate::signals;

/// How long a command has to exit after the signal that asks it to, before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(10);

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Killed(Signal),
}

impl Ended {
    /// The shell's `$?` for it: the exit code, or 128+n for signal n.
    pub fn exit_code(self) -> i32 {
        match self {
            Ended::Exited(code) => code,
            Ended::Killed(sig) => 128 + sig as i32,
        }
    }

    /// "exited with status 3", "killed by SIGKILL".
    pub fn describe(self) -> String {
        match self {
            Ended::Exited(code) => format!("exited with status {code}"),
            Ended::Killed(sig) => format!("killed by {}", sig.as_str()),
        }
    }
}

/// A command pkprof started and reaps.
pub struct Workload {
    pid: Pid,
    program: String,
    ended: Option<Ended>,
}

impl Workload {
    pub fn new(pid: u32, program: &str) -> Workload {
        Workload {
            pid: Pid::from_raw(pid as i32),
            program: program.to_string(),
            ended: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid.as_raw() as u32
    }

    /// How it ended, if it has (reaping it), without blocking.
    pub fn try_wait(&mut self) -> Option<Ended> {
        if self.ended.is_none() {
            self.ended = match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(_, code)) => Some(Ended::Exited(code)),
                Ok(WaitStatus::Signaled(_, sig, _)) => Some(Ended::Killed(sig)),
                Ok(_) => None,
                // Only pkprof reaps its child: ECHILD cannot happen; if it did, the command is
                // gone without a status to pass on.
                Err(e) => {
                    tracing::warn!("waiting for {}: {e}", self.program);
                    Some(Ended::Exited(0))
                }
            };
        }
        self.ended
    }

    /// Whether the command shares pkprof's process group and that group is its terminal's
    /// foreground group (where Ctrl-C is delivered to every member).
    fn in_foreground_group(&self) -> bool {
        let ours = getpgrp();
        getpgid(Some(self.pid)).is_ok_and(|g| g == ours)
            && tcgetpgrp(std::io::stdin()).is_ok_and(|g| g == ours)
    }

    /// Ends the command if it still runs (see the module's doc), and returns how it ended.
    pub fn stop(&mut self) -> Ended {
        if let Some(ended) = self.try_wait() {
            return ended;
        }
        let sig = signals::last_received()
            .and_then(|s| Signal::try_from(s).ok())
            .unwrap_or(Signal::SIGTERM);
        let asked = signals::received_count();
        // Ctrl-C at a terminal reaches the whole foreground process group, the command too: a
        // second SIGINT could cut short the cleanup it started on the first (Python's
        // KeyboardInterrupt). Forwarded only when it did not come from the terminal that way.
        if !(sig == Signal::SIGINT && self.in_foreground_group()) {
            // The PID is ours until reaped: it cannot name another process.
            let _ = kill(self.pid, sig);
        }
        let start = Instant::now();
        let (mut told, mut killed) = (false, false);
        loop {
            if let Some(ended) = self.try_wait() {
                return ended;
            }
            if !killed && (signals::received_count() > asked || start.elapsed() >= GRACE) {
                eprintln!(
                    "pkprof: killing {} (PID {}) with SIGKILL",
                    self.program, self.pid
                );
                let _ = kill(self.pid, Signal::SIGKILL);
                killed = true;
            }
            if !told && !killed && start.elapsed() >= Duration::from_secs(1) {
                eprintln!(
                    "pkprof: waiting for {} (PID {}) to exit after {}; Ctrl-C again kills it",
                    self.program,
                    self.pid,
                    sig.as_str()
                );
                told = true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
