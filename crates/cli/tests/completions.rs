//! Shell completions and man pages, installed by scripts/install.sh (into a staging DESTDIR here)
//! and checked with their real consumers: bash completes a subcommand (the function called as
//! bash calls it, and Tab typed into an interactive bash), fish completes one, zsh parses its
//! file, and `man -l` renders every page without a groff warning. No root or BPF needed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::pkprof_bin;
use common::tmux::Tmux;

/// scripts/install.sh run with this build's binary into a fresh staging root; removed on drop.
struct Staged(PathBuf);

impl Staged {
    fn install(test: &str) -> Staged {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("install-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install.sh");
        let out = Command::new("bash")
            .arg(&script)
            .env("DESTDIR", &root)
            .env("PREFIX", "/usr/local")
            .env("PKPROF_BIN", pkprof_bin())
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "install.sh: {out:?}");
        Staged(root)
    }

    fn path(&self, p: &str) -> PathBuf {
        let p = self.0.join(p.trim_start_matches('/'));
        assert!(p.is_file(), "installed: {}", p.display());
        p
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn have(shell: &str) -> bool {
    Command::new(shell)
        .arg("-c")
        .arg("true")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The installed bash completion, run as bash runs it: the function named by `complete -p`, with
/// the command, the word and the previous word as arguments.
#[test]
fn bash_completes_subcommands_and_options() {
    let s = Staged::install("bash");
    let file = s.path("/usr/share/bash-completion/completions/pkprof");
    let complete = |words: &str, cword: usize| -> String {
        let script = format!(
            "source {f}; spec=$(complete -p pkprof); func=${{spec#*-F }}; func=${{func%% *}}; \
             COMP_WORDS=({words}); COMP_CWORD={cword}; \
             \"$func\" pkprof \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[@]}}\"",
            f = file.display()
        );
        stdout_of(Command::new("bash").arg("-c").arg(script))
            .trim()
            .to_string()
    };
    assert_eq!(complete("pkprof rec", 1), "record");
    assert_eq!(complete("pkprof re", 1), "record report");
    let opts = complete("pkprof record --max", 2);
    assert_eq!(opts, "--max-threads --max-targets --max-tags", "{opts}");
    assert_eq!(complete("pkprof completions f", 2), "fish");
}

/// Tab typed into a real interactive bash that loaded the installed file completes the word.
#[test]
fn tab_in_interactive_bash_completes() {
    let s = Staged::install("tab");
    let file = s.path("/usr/share/bash-completion/completions/pkprof");
    let bin_dir = s
        .path("/usr/local/bin/pkprof")
        .parent()
        .unwrap()
        .to_path_buf();
    let t = Tmux::start_sized(
        "bash-tab",
        &format!(
            "env -i TERM=screen PATH={}:/usr/bin:/bin PS1='$ ' bash --norc --noprofile -i",
            bin_dir.display()
        ),
        100,
        10,
    );
    t.wait_screen("the prompt", Duration::from_secs(10), |s| {
        s.lines().any(|l| l.trim_end() == "$")
    });
    t.keys(&[&format!("source {}", file.display()), "Enter"]);
    // Typed only once bash prompts again: typed ahead, the text is echoed before the prompt.
    t.wait_screen("the prompt after source", Duration::from_secs(10), |s| {
        s.contains("$ source") && s.lines().map(str::trim_end).rfind(|l| !l.is_empty()) == Some("$")
    });
    t.keys(&["pkprof sys", "Tab"]);
    t.wait_screen("pkprof sys<Tab> completed", Duration::from_secs(10), |s| {
        s.lines().any(|l| l.trim_end() == "$ pkprof syscalls")
    });
}

#[test]
fn fish_completes_and_zsh_parses() {
    let s = Staged::install("fish");
    if have("fish") {
        let file = s.path("/usr/share/fish/vendor_completions.d/pkprof.fish");
        let out = stdout_of(Command::new("fish").arg("-c").arg(format!(
            "source {}; complete -C 'pkprof rec'",
            file.display()
        )));
        let words: Vec<&str> = out.lines().filter_map(|l| l.split('\t').next()).collect();
        assert_eq!(words, ["record"], "{out}");
    } else {
        eprintln!("fish not installed (scripts/setup.sh installs it): skipped");
    }
    if have("zsh") {
        let file = s.path("/usr/share/zsh/vendor-completions/_pkprof");
        stdout_of(Command::new("zsh").arg("-n").arg(&file));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("#compdef pkprof"), "{text}");
    } else {
        eprintln!("zsh not installed (scripts/setup.sh installs it): skipped");
    }
}

/// Every installed page renders with `man -l` without a warning; pkprof(1) lists the subcommands,
/// each subcommand's page its options and examples.
#[test]
fn man_pages_render() {
    let s = Staged::install("man");
    let pages = [
        "pkprof",
        "pkprof-top",
        "pkprof-record",
        "pkprof-report",
        "pkprof-diff",
        "pkprof-syscalls",
        "pkprof-agent",
        "pkprof-ctl",
    ];
    for page in pages {
        let path = s.path(&format!("/usr/share/man/man1/{page}.1.gz"));
        let out = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(&path)
            .env("MANWIDTH", "100")
            .output()
            .expect("man runs (apt-get install man-db)");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && err.is_empty(),
            "man -l {page}: {err}"
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("NAME") && text.contains(page),
            "{page}:\n{text}"
        );
        let expect: &[&str] = match page {
            "pkprof" => &["pkprof-top(1)", "pkprof-record(1)", "pkprof-syscalls(1)"],
            "pkprof-record" => &["--max-threads", "--cgroup", "pkprof record -- make -j2"],
            "pkprof-top" => &["--metrics-top", "--batch"],
            "pkprof-agent" => &["--config", "--store", "systemctl enable --now pkprof-agent"],
            "pkprof-ctl" => &["status", "dump", "--since"],
            _ => &["--help"],
        };
        for e in expect {
            assert!(text.contains(e), "{page} has {e}:\n{text}");
        }
    }
}
