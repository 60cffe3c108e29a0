//! The interactive view of `pkprof top`, driven inside a detached tmux session (a private tmux
//! server, so no one else's sessions are touched): it draws the per-CPU header and the process
//! table on the alternate screen, quits on `q` (and Ctrl-C) with exit code 0, and leaves the
//! terminal as it found it (main screen back, cooked mode with echo, cursor visible). The table
//! fits 80 and 160 columns; every key a top user expects does what the help says (sort, name and
//! PID filters, pause, threads, help), and Ctrl-Z suspends to the shell and `fg` redraws.

mod common;

use std::time::Duration;

use common::tmux::Tmux;
use common::{build_workload, pkprof_bin, wait_for, Proc};

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

/// Every column name the table can show; "COST TIME+" is one name with a space.
const NAMES: [&str; 16] = [
    "PID",
    "TID",
    "COMMAND",
    "CPU%",
    "USER%",
    "SYS%",
    "OWN%",
    "+NET%",
    "+BLK%",
    "+WQ%",
    "+SRV%",
    "=COST%",
    "BILLED",
    "COST TIME+",
    "WAIT%",
    "BLOCKED%",
];

/// The table's header line and the rows under it, inside the border (`│ ... │`).
struct Table {
    header: String,
    rows: Vec<String>,
}

fn inside_border(line: &str) -> Option<String> {
    let t = line.trim_end();
    let inner = t.strip_prefix('│')?.strip_suffix('│')?;
    Some(inner.to_string())
}

fn table(screen: &str) -> Option<Table> {
    let mut lines = screen.lines().skip_while(|l| !l.contains("COMMAND"));
    let header = inside_border(lines.next()?)?;
    let rows = lines
        .map_while(inside_border)
        .filter(|r| !r.trim().is_empty())
        .collect();
    Some(Table { header, rows })
}

/// The header's column names in order, with the sort arrow (▼ or ▲) taken off and returned.
fn header_names(header: &str) -> (Vec<String>, Option<(String, char)>) {
    let joined = header.replace("COST TIME+", "COST_TIME+");
    let mut sorted = None;
    let names = joined
        .split_whitespace()
        .map(|w| {
            let plain: String = w.chars().filter(|c| !matches!(c, '▼' | '▲')).collect();
            let plain = plain.replace("COST_TIME+", "COST TIME+");
            if let Some(a) = w.chars().find(|c| matches!(c, '▼' | '▲')) {
                sorted = Some((plain.clone(), a));
            }
            plain
        })
        .collect();
    (names, sorted)
}

/// Every header name is whole (none cut, e.g. "=COS" or "BILLE"), the row's numbers are whole
/// numbers, and the columns `must` are shown. Returns the names.
fn check_layout(t: &Table, width: usize, must: &[&str]) -> Vec<String> {
    let (names, _) = header_names(&t.header);
    for n in &names {
        assert!(
            NAMES.contains(&n.as_str()),
            "{width} cols: cut header {n:?} in {:?}",
            t.header
        );
    }
    for m in must {
        assert!(
            names.iter().any(|n| n == m),
            "{width} cols: {m} shown in {:?}",
            t.header
        );
    }
    assert_eq!(
        t.header.chars().count(),
        width - 2,
        "the header fills the table's width"
    );
    // The last column (numbers, or COST TIME+'s M:SS.hh) is whole on every row.
    for r in &t.rows {
        let last = r.split_whitespace().last().unwrap_or_default();
        assert!(
            last.parse::<f64>().is_ok() || last.contains(':') || last == "-",
            "{width} cols: row {r:?} ends in a whole value"
        );
    }
    names
}

/// Width of the COMMAND column: from its start to the first numeric column's start (right-aligned
/// numbers end where their cell ends; CPU% is 6 wide), less the space between columns.
fn command_width(header: &str) -> usize {
    let chars: Vec<char> = header.chars().collect();
    let find = |s: &str| {
        let s: Vec<char> = s.chars().collect();
        (0..chars.len())
            .find(|&i| chars[i..].starts_with(&s))
            .unwrap()
    };
    let cmd = find("COMMAND");
    let cpu_end = find("CPU%") + 4;
    cpu_end - 6 - 1 - cmd
}

fn wait_table(t: &Tmux, what: &str, pred: impl Fn(&Table) -> bool) -> Table {
    let screen = t.wait_screen(what, Duration::from_secs(20), |s| {
        table(s).is_some_and(|t| pred(&t))
    });
    table(&screen).unwrap()
}

#[test]
#[ignore = "needs root and BPF"]
fn the_table_fits_80_and_180_columns() {
    let cmd = format!("{} top -d 0.5; sleep 120", pkprof_bin().display());
    let t = Tmux::start_sized("layout", &cmd, 80, 40);
    let at80 = wait_table(&t, "the table at 80 columns", |t| !t.rows.is_empty());
    let names = check_layout(
        &at80,
        80,
        &["PID", "COMMAND", "CPU%", "=COST%", "COST TIME+"],
    );
    eprintln!("80 columns: {names:?}");
    // Wider: every column comes back, COMMAND does not take the rest of the line.
    t.resize(180, 40);
    let at180 = wait_table(&t, "the table at 180 columns", |t| {
        t.header.chars().count() == 178
    });
    let names = check_layout(&at180, 180, &NAMES[2..]);
    let w = command_width(&at180.header);
    eprintln!("180 columns: {names:?}, COMMAND {w} wide");
    assert!((15..=24).contains(&w), "COMMAND is {w} characters wide");
    // Very narrow: PID, COMMAND and the sort column stay whole; nothing is cut.
    t.resize(50, 40);
    let at50 = wait_table(&t, "the table at 50 columns", |t| {
        t.header.chars().count() == 48
    });
    let names = check_layout(&at50, 50, &["PID", "COMMAND", "=COST%"]);
    eprintln!("50 columns: {names:?}");
    t.keys(&["q"]);
}

/// The ids (first column) of the table's rows.
fn ids(t: &Table) -> Vec<u32> {
    t.rows
        .iter()
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The COMMAND cells of the rows (from the header's COMMAND position, as wide as the column).
fn commands(t: &Table) -> Vec<String> {
    let start = t.header.chars().collect::<Vec<_>>();
    let at = (0..start.len())
        .find(|&i| start[i..].starts_with(&['C', 'O', 'M', 'M', 'A', 'N', 'D']))
        .unwrap();
    let width = command_width(&t.header);
    t.rows
        .iter()
        .map(|r| {
            r.chars()
                .skip(at)
                .take(width)
                .collect::<String>()
                .trim()
                .to_string()
        })
        .collect()
}

fn sorted_by(t: &Table) -> Option<(String, char)> {
    header_names(&t.header).1
}

#[test]
#[ignore = "needs root and BPF"]
fn keys_sort_filter_pause_switch_to_threads_and_help() {
    // Two threads busy 20% of every 50 ms for a minute.
    let mut w = Proc::spawn(common::cmd(
        &build_workload("thread_duty"),
        &["60", "50", "0.2", "0.2"],
    ));
    w.send_line("go");
    let pid = w.pid();
    let cmd = format!(
        "{} top -d 0.5; echo \"exit=$?\" > {d}/status; sleep 120",
        pkprof_bin().display(),
        d = std::env::temp_dir()
            .join(format!("pkprof-test-keys-{}", std::process::id()))
            .display()
    );
    let t = Tmux::start_sized("keys", &cmd, 160, 50);
    let first = wait_table(&t, "the table", |t| ids(t).contains(&pid));
    assert_eq!(
        sorted_by(&first),
        Some(("=COST%".into(), '▼')),
        "{}",
        first.header
    );

    // Sort column: > moves right, < left, N sorts by PID (largest first), R reverses.
    t.keys(&[">"]);
    wait_table(&t, "sorted by BILLED", |t| {
        sorted_by(t) == Some(("BILLED".into(), '▼'))
    });
    t.keys(&["<", "<"]);
    wait_table(&t, "sorted by +SRV%", |t| {
        sorted_by(t) == Some(("+SRV%".into(), '▼'))
    });
    t.keys(&["N"]);
    let by_pid = wait_table(&t, "sorted by PID", |t| {
        sorted_by(t) == Some(("PID".into(), '▼'))
    });
    let p = ids(&by_pid);
    assert!(
        p.len() > 2 && p.windows(2).all(|w| w[0] >= w[1]),
        "PIDs largest first: {p:?}"
    );
    t.keys(&["R"]);
    let up = wait_table(&t, "PID reversed", |t| {
        sorted_by(t) == Some(("PID".into(), '▲'))
    });
    let p = ids(&up);
    assert!(
        p.windows(2).all(|w| w[0] <= w[1]),
        "PIDs smallest first: {p:?}"
    );
    t.keys(&["P"]);
    let by_cpu = wait_table(&t, "sorted by CPU%", |t| {
        sorted_by(t) == Some(("CPU%".into(), '▼'))
    });
    eprintln!(
        "sorted by CPU%: {:?}",
        &by_cpu.rows[..3.min(by_cpu.rows.len())]
    );

    // `/` name filter, typed in the prompt line; Esc cancels a second one.
    t.keys(&["/"]);
    t.wait_screen("the name prompt", Duration::from_secs(5), |s| {
        s.contains("show names matching")
    });
    t.keys(&["-l", "WORKLOAD-thr"]);
    t.keys(&["Enter"]);
    let named = wait_table(&t, "only the workload", |t| {
        let c = commands(t);
        !c.is_empty() && c.iter().all(|c| c.starts_with("workload-thr"))
    });
    assert_eq!(
        ids(&named),
        [pid],
        "case-insensitive match of the workload only"
    );
    t.keys(&["/"]);
    t.wait_screen("the name prompt again", Duration::from_secs(5), |s| {
        s.contains("show names matching")
    });
    t.keys(&["-l", "zzz"]);
    t.keys(&["Escape"]);
    // Wait until the prompt is gone, not only until the filter shows (it showed before): a key
    // sent while Escape is still unread arrives with it and reads as Alt+key.
    let s = t.wait_screen("prompt closed", Duration::from_secs(5), |s| {
        !s.contains("show names matching") && s.contains("names ~ WORKLOAD-thr")
    });
    assert_eq!(ids(&table(&s).unwrap()), [pid], "Esc kept the filter");

    // H: one row per thread (the two busy threads and the main one), and back.
    t.keys(&["H"]);
    let threads = wait_table(&t, "thread rows", |t| {
        t.header.contains("TID") && ids(t).len() >= 2
    });
    let tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for id in ids(&threads) {
        assert!(
            tids.contains(&id),
            "row {id} is a thread of {pid} ({tids:?})"
        );
    }
    t.keys(&["H"]);
    wait_table(&t, "process rows again", |t| {
        t.header.contains("PID") && ids(t) == [pid]
    });

    // = clears the name filter; p shows one PID.
    t.keys(&["="]);
    wait_table(&t, "every process again", |t| ids(t).len() > 1);
    t.keys(&["p"]);
    t.keys(&["-l", &pid.to_string()]);
    t.keys(&["Enter"]);
    wait_table(&t, "only that PID", |t| ids(t) == [pid]);
    t.keys(&["="]);
    wait_table(&t, "every process again", |t| ids(t).len() > 1);

    // Space pauses: the table stays as it is over several refreshes; space again goes on.
    t.keys(&["Space"]);
    let paused = t.wait_screen("paused", Duration::from_secs(5), |s| s.contains("PAUSED"));
    std::thread::sleep(Duration::from_millis(1600));
    let still = t.screen();
    assert_eq!(
        table(&still).unwrap().rows,
        table(&paused).unwrap().rows,
        "paused: same rows"
    );
    t.keys(&["Space"]);
    let before = table(&paused).unwrap().rows;
    wait_table(&t, "moving again", |t| t.rows != before);
    assert!(!t.screen().contains("PAUSED"));

    // h and ? show the help; any key closes it.
    for k in ["h", "?"] {
        t.keys(&[k]);
        t.wait_screen("the help", Duration::from_secs(5), |s| {
            s.contains("pkprof top keys")
        });
        t.keys(&["x"]);
        t.wait_screen("help closed", Duration::from_secs(5), |s| {
            !s.contains("pkprof top keys")
        });
    }
    t.keys(&["q"]);
    let status = wait_for("pkprof to exit", Duration::from_secs(10), || {
        t.file("status")
    });
    assert_eq!(status.trim(), "exit=0");
}

/// Ctrl-Z in the view stops pkprof as a job (the shell says Stopped) with the terminal given back;
/// `fg` takes the screen again and redraws; q then quits with 0.
#[test]
#[ignore = "needs root and BPF"]
fn ctrl_z_suspends_and_fg_redraws() {
    let t = Tmux::start_sized(
        "ctrlz",
        "env -i TERM=screen PATH=/usr/sbin:/usr/bin:/sbin:/bin PS1='$ ' bash --norc --noprofile -i",
        120,
        40,
    );
    t.wait_screen("the prompt", Duration::from_secs(10), |s| {
        s.lines().any(|l| l.trim_end() == "$")
    });
    t.keys(&["-l", &format!("{} top -d 0.5", pkprof_bin().display())]);
    t.keys(&["Enter"]);
    wait_table(&t, "the table", |t| !t.rows.is_empty());
    assert_eq!(t.var("alternate_on"), "1");
    t.keys(&["C-z"]);
    let s = t.wait_screen("the job stopped", Duration::from_secs(10), |s| {
        s.contains("Stopped")
    });
    assert_eq!(t.var("alternate_on"), "0", "main screen back:\n{s}");
    assert_eq!(t.var("cursor_flag"), "1", "cursor shown");
    assert!(
        !s.contains("COMMAND"),
        "the view is gone while stopped:\n{s}"
    );
    t.keys(&["fg", "Enter"]);
    wait_table(&t, "the table redrawn", |t| !t.rows.is_empty());
    assert_eq!(t.var("alternate_on"), "1");
    t.keys(&["q"]);
    t.wait_screen("the prompt again", Duration::from_secs(10), |s| {
        s.lines().filter(|l| l.trim_end() == "$").count() >= 1 && !s.contains("COMMAND")
    });
    t.keys(&["echo exit=$?", "Enter"]);
    t.wait_screen("pkprof's exit code", Duration::from_secs(5), |s| {
        s.contains("exit=0")
    });
}

/// `b` on a process: its threads, each with its wall-time classes over the interval adding up to
/// WALL% (100 for a thread alive throughout), and each blocked for the reason its code gives it
/// (tests/workloads/wall_classes.c: sleep, a pipe read, a mutex, poll; two spinners sharing a
/// CPU wait for it). `b` again: back to the process table.
#[test]
#[ignore = "needs root and BPF"]
fn b_shows_a_processs_threads_and_where_their_time_went() {
    let mut w = Proc::spawn(common::cmd(&build_workload("wall_classes"), &["4"]));
    let pid = w.pid();
    let cmd = format!(
        "{} top -d 0.5 -p {pid}; echo \"exit=$?\" > {d}/status; sleep 120",
        pkprof_bin().display(),
        d = std::env::temp_dir()
            .join(format!("pkprof-test-breakdown-{}", std::process::id()))
            .display()
    );
    let t = Tmux::start_sized("breakdown", &cmd, 220, 50);
    wait_table(&t, "the process table", |t| t.header.contains("CPU%"));
    // The process has a row from its first switch-out after the gate.
    w.send_line("go");
    wait_table(&t, "the workload's row", |t| ids(t).contains(&pid));
    t.keys(&["b"]);
    let title = format!("threads of PID {pid}");
    // Rows under the breakdown's header (TID ... OTHER IN), inside the border.
    let thread_rows = |s: &str| -> Vec<Vec<String>> {
        (s.lines().skip_while(|l| !l.contains("OTHER IN")).skip(1))
            .map_while(inside_border)
            .filter(|r| !r.trim().is_empty())
            .map(|r| r.split_whitespace().map(str::to_owned).collect())
            .collect()
    };
    // Two refreshes later, still within the run: the six threads (and the feeder, and main)
    // each have a row over a whole interval.
    std::thread::sleep(Duration::from_millis(1200));
    let screen = t.wait_screen("the breakdown", Duration::from_secs(10), |s| {
        s.contains(&title) && thread_rows(s).len() >= 7
    });
    eprintln!("{screen}");
    let mut kinds: std::collections::HashMap<String, String> = Default::default();
    for _ in 0..6 {
        let l = w.expect("thread", Duration::from_secs(20));
        kinds.insert(l[0].clone(), l[1].clone());
    }
    w.wait(Duration::from_secs(10));
    // Columns: TID COMMAND RUN% USER% SYS% IRQ% WAIT% P50 P99 MAX IO% NET% IPC% LOCK% SLEEP%
    // POLL% OTHER% WALL% +NET% +BLK% +WQ% +SRV% (then OTHER IN).
    let col = |name: &str| {
        [
            "TID", "COMMAND", "RUN%", "USER%", "SYS%", "IRQ%", "WAIT%", "P50", "P99", "MAX", "IO%",
            "NET%", "IPC%", "LOCK%", "SLEEP%", "POLL%", "OTHER%", "WALL%",
        ]
        .iter()
        .position(|n| *n == name)
        .unwrap()
    };
    let mut checked = 0;
    for row in thread_rows(&screen) {
        let Some(kind) = kinds.get(&row[0]) else {
            continue; // main, feeder
        };
        let v = |name: &str| row[col(name)].parse::<f64>().unwrap();
        let classes = [
            "RUN%", "WAIT%", "IO%", "NET%", "IPC%", "LOCK%", "SLEEP%", "POLL%",
        ]
        .iter()
        .chain(["OTHER%"].iter())
        .map(|n| v(n))
        .sum::<f64>();
        // Nine cells rounded to 0.1 each.
        assert!(
            (classes - v("WALL%")).abs() <= 0.5,
            "{kind}: classes {classes:.1} vs WALL% {} in {row:?}",
            v("WALL%")
        );
        assert!(
            (v("WALL%") - 100.0).abs() <= 1.0,
            "{kind}: alive throughout, WALL% {}",
            v("WALL%")
        );
        let own = match kind.as_str() {
            "sleep" => Some("SLEEP%"),
            "pipe" => Some("IPC%"),
            "lock" => Some("LOCK%"),
            "poll" => Some("POLL%"),
            _ => None,
        };
        let blocked = ["IO%", "NET%", "IPC%", "LOCK%", "SLEEP%", "POLL%", "OTHER%"];
        match own {
            Some(c) => assert!(
                blocked.iter().all(|b| v(b) <= v(c)),
                "{kind}: {c} is not its largest blocked class in {row:?}"
            ),
            None => assert!(v("WAIT%") >= 20.0, "{kind}: spinner WAIT% in {row:?}"),
        }
        checked += 1;
    }
    assert_eq!(checked, 6, "every workload thread has a row:\n{screen}");
    t.keys(&["b"]);
    wait_table(&t, "the process table again", |t| t.header.contains("CPU%"));
}
