//! A private tmux server (its own socket, so no one else's sessions are touched) with one detached
//! session of a given size running a command: the real terminal for the interactive view's tests
//! and for typing into an interactive shell (completion).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Killed, with its directory, when dropped.
pub struct Tmux {
    socket: String,
    /// A scratch directory named after the socket, for files the pane's command writes.
    pub dir: PathBuf,
}

impl Tmux {
    /// A 120x40 session.
    pub fn start(tag: &str, shell_cmd: &str) -> Tmux {
        Tmux::start_sized(tag, shell_cmd, 120, 40)
    }

    pub fn start_sized(tag: &str, shell_cmd: &str, width: u16, height: u16) -> Tmux {
        let socket = format!("pkprof-test-{tag}-{}", std::process::id());
        let dir = std::env::temp_dir().join(&socket);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let t = Tmux { socket, dir };
        let (w, h) = (width.to_string(), height.to_string());
        let out = t.tmux(&[
            "new-session",
            "-d",
            "-x",
            &w,
            "-y",
            &h,
            "-s",
            "pk",
            shell_cmd,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        // Keep the window at the requested size whatever clients attach (none do).
        t.tmux(&["set-option", "-t", "pk", "window-size", "manual"]);
        t
    }

    pub fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs (apt-get install tmux)")
    }

    /// The pane's text now.
    pub fn screen(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", "pk"]);
        assert!(out.status.success(), "capture-pane: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends keys as tmux names them (`q`, `C-z`, `Escape`, `Space`, `Tab`, or literal text).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "pk"];
        args.extend_from_slice(keys);
        let out = self.tmux(&args);
        assert!(out.status.success(), "send-keys {keys:?}: {out:?}");
    }

    /// Resizes the window (the pane's program gets SIGWINCH).
    pub fn resize(&self, width: u16, height: u16) {
        let out = self.tmux(&[
            "resize-window",
            "-t",
            "pk",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
        assert!(out.status.success(), "resize-window: {out:?}");
    }

    /// A tmux format variable of the pane, e.g. `alternate_on`.
    pub fn var(&self, name: &str) -> String {
        let out = self.tmux(&["display-message", "-p", "-t", "pk", &format!("#{{{name}}}")]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A file of the scratch directory, once written completely (ends with a newline).
    pub fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(name))
            .ok()
            .filter(|s| s.ends_with('\n'))
    }

    /// Waits until the screen satisfies `pred` and returns it (panics with the last screen).
    pub fn wait_screen(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            if Instant::now() >= deadline {
                panic!("timed out after {timeout:?} waiting for {what}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
