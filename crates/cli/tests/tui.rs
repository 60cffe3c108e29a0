//! The interactive view of `pkprof top`, driven inside a detached tmux session (a private tmux
//! server, so no one else's sessions are touched): it draws the per-CPU header and the process
//! table on the alternate screen, quits on `q` (and Ctrl-C) with exit code 0, and leaves the
//! terminal as it found it (main screen back, cooked mode with echo, cursor visible).

mod common;

use std::time::Duration;

use common::pkprof_bin;
use common::tmux::{wait_for, Tmux};

/// Runs `pkprof top -d 0.5` in a pane, checks the screen, sends `key`, checks the exit and the
/// terminal afterwards. The pane's shell records pkprof's exit code and `stty -a` once it is done,
/// then stays (so the pane can be inspected).
fn view_then_quit_with(key: &str) {
    let tag = key.replace('-', "");
    let dir = std::env::temp_dir().join(format!("pkprof-test-{tag}-{}", std::process::id()));
    let cmd = format!(
        "{} top -d 0.5; echo \"exit=$?\" > {d}/status; stty -a > {d}/stty; sleep 120",
        pkprof_bin().display(),
        d = dir.display()
    );
    let t = Tmux::start(&tag, &cmd);
    assert_eq!(t.dir, dir);

    // A few refreshes: the header, per-CPU lines and the process table are drawn.
    let screen = wait_for(
        "the process table on screen",
        Duration::from_secs(30),
        || {
            let s = t.screen();
            (s.contains("COMMAND") && s.contains("%Cpu0")).then_some(s)
        },
    );
    std::thread::sleep(Duration::from_millis(2500));
    let screen = {
        let now = t.screen();
        if now.contains("COMMAND") {
            now
        } else {
            screen
        }
    };
    assert_eq!(t.file("status"), None, "pkprof still runs:\n{screen}");
    assert_eq!(t.var("alternate_on"), "1", "drawn on the alternate screen");
    let header = screen
        .lines()
        .find(|l| l.contains("COMMAND"))
        .unwrap_or_else(|| panic!("no table header:\n{screen}"));
    for col in ["PID", "COMMAND", "CPU%"] {
        assert!(header.contains(col), "header {header:?} has {col}");
    }
    let cpus = std::thread::available_parallelism().unwrap().get();
    for c in 0..cpus {
        assert!(
            screen
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("%Cpu{c} "))),
            "a line for CPU {c}:\n{screen}"
        );
    }
    assert!(
        screen.starts_with("pkprof top - "),
        "title line first:\n{screen}"
    );
    // Rows under the header (inside the table's border): at least one, with a numeric PID.
    let rows: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains("COMMAND"))
        .skip(1)
        .map(|l| l.trim_start_matches(|c: char| !c.is_ascii_alphanumeric()))
        .collect();
    assert!(
        rows.iter().any(|l| l
            .split_whitespace()
            .next()
            .is_some_and(|p| p.parse::<u32>().is_ok())),
        "process rows under the header:\n{screen}"
    );
    assert!(!screen.contains("panicked"), "{screen}");

    let out = t.tmux(&["send-keys", "-t", "pk", key]);
    assert!(out.status.success(), "send-keys: {out:?}");
    let status = wait_for("pkprof to exit", Duration::from_secs(10), || {
        t.file("status")
    });
    assert_eq!(status.trim(), "exit=0", "{key} quits with exit code 0");
    let stty = wait_for("stty -a", Duration::from_secs(5), || t.file("stty"));

    // The terminal is back: main screen, cooked mode with echo, cursor shown, view gone.
    assert_eq!(t.var("alternate_on"), "0", "alternate screen left");
    assert_eq!(t.var("cursor_flag"), "1", "cursor visible again");
    let flags: Vec<&str> = stty
        .split(|c: char| c.is_whitespace() || c == ';')
        .collect();
    for f in ["icanon", "echo", "isig", "icrnl", "opost"] {
        assert!(
            flags.contains(&f),
            "stty shows {f} (not -{f}) after pkprof: {stty}"
        );
    }
    let after = t.screen();
    assert!(
        !after.contains("%Cpu0") && !after.contains("COMMAND"),
        "view cleared:\n{after}"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn q_quits_and_restores_the_terminal() {
    view_then_quit_with("q");
}

#[test]
#[ignore = "needs root and BPF"]
fn ctrl_c_quits_and_restores_the_terminal() {
    view_then_quit_with("C-c");
}
