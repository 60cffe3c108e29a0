//! pkprof: the command-line entry point. Parses arguments, sets up logging, runs a subcommand, and
//! turns any error into one line on stderr with a non-zero exit code.

mod agent;
mod cli;
mod cli_docs;
mod launch;
mod output_file;
mod push;
mod record;
mod report;
mod self_usage;
mod signals;
mod stdout;
mod syscalls;
mod targets;
mod top;
mod workload;

use clap::Parser;

fn main() {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => usage_error(e),
    };
    init_logging(args.verbose);
    // The exit status: 0, or the status of the command record and syscalls ran.
    let result = match args.command {
        cli::Command::Top(top) => top::run(top.into_options()).map(|()| 0),
        cli::Command::Record(rec) => record::run(rec.into_options()),
        cli::Command::Report(rep) => report::run_report(rep.into_options()).map(|()| 0),
        cli::Command::Diff(diff) => report::run_diff(diff.into_options()).map(|()| 0),
        cli::Command::Syscalls(sc) => syscalls::run(sc.into_options()),
        cli::Command::Agent(a) => agent::run(a.into_options()),
        cli::Command::Ctl(c) => agent::ctl(c.into_options()).map(|()| 0),
        cli::Command::Completions(c) => cli_docs::completions(c.shell).map(|()| 0),
        cli::Command::Man(m) => cli_docs::man(m.dir.as_deref()).map(|()| 0),
        cli::Command::Push(p) => p
            .into_options()
            .map_err(anyhow::Error::msg)
            .and_then(push::run)
            .map(|()| 0),
    };
    match result {
        Ok(0) => {}
        Ok(status) => std::process::exit(status),
        Err(e) => {
            // One line: the context chain joined (messages of other crates may span lines),
            // never a backtrace.
            eprintln!("pkprof: {}", one_line(&chain_text(&e)));
            std::process::exit(1);
        }
    }
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("PKPROF_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Logs go to stderr, never into the TUI's screen (the TUI owns stdout).
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

/// --help and --version print as clap does; a bad argument is one line, like every other error.
fn usage_error(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    // clap's first line is "error: <what>"; the usage and tips that follow are dropped.
    let text = e.to_string();
    let mut lines = text.lines();
    let mut what = lines.next().unwrap_or_default().to_string();
    // "the following required arguments were not provided:" lists them on indented lines.
    if what.ends_with(':') {
        let listed: Vec<&str> = lines
            .take_while(|l| l.starts_with("  "))
            .map(str::trim)
            .collect();
        what = format!("{what} {}", listed.join(", "));
    }
    eprintln!(
        "pkprof: {} (see pkprof --help)",
        what.strip_prefix("error: ").unwrap_or(&what)
    );
    std::process::exit(2);
}

/// The causes of `e` joined with ": " as anyhow's `{:#}` does, but a cause that its parent's
/// message already ends with (as "...: CAUSE") is said once. pkprof's own errors never both show
/// and return their cause; this keeps an error of another crate that does from printing "X: X".
/// Only the end counts: a different cause whose words happen to stand inside the parent's message
/// is still said.
fn chain_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    let mut parent = String::new();
    for cause in e.chain() {
        let msg = cause.to_string();
        if !parent.is_empty() && (parent == msg || parent.ends_with(&format!(": {msg}"))) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&msg);
        parent = msg;
    }
    text
}

/// Joins the lines of a multi-line message (e.g. a regex syntax error with its caret diagram).
fn one_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::chain_text;

    #[test]
    fn a_cause_is_said_once_and_only_a_repeated_end_is_dropped() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let repeated = anyhow::Error::new(std::io::Error::other(format!("opening x: {io}")));
        // A cause that the message before it ends with: said once.
        let e = anyhow::anyhow!("{io}").context(format!("opening x: {io}"));
        assert_eq!(
            chain_text(&e),
            "opening x: No such file or directory (os error 2)"
        );
        // A different cause whose words stand inside the message before it: still said.
        let e = anyhow::anyhow!("Invalid argument")
            .context("Invalid argument for --cgroup: not a cgroup2 directory");
        assert_eq!(
            chain_text(&e),
            "Invalid argument for --cgroup: not a cgroup2 directory: Invalid argument"
        );
        assert_eq!(
            chain_text(&repeated),
            "opening x: No such file or directory (os error 2)"
        );
    }
}
