//! pkprof: the command-line entry point. Parses arguments, sets up logging, runs a subcommand, and
//! turns any error into one line on stderr with a non-zero exit code.

mod cli;
mod cli_docs;
mod output_file;
mod record;
mod report;
mod self_usage;
mod signals;
mod syscalls;
mod targets;
mod top;

use clap::Parser;

fn main() {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => usage_error(e),
    };
    init_logging(args.verbose);
    let result = match args.command {
        cli::Command::Top(top) => top::run(top.into_options()),
        cli::Command::Record(rec) => record::run(rec.into_options()),
        cli::Command::Report(rep) => report::run_report(rep.into_options()),
        cli::Command::Diff(diff) => report::run_diff(diff.into_options()),
        cli::Command::Syscalls(sc) => syscalls::run(sc.into_options()),
        cli::Command::Completions(c) => cli_docs::completions(c.shell),
        cli::Command::Man(m) => cli_docs::man(m.dir.as_deref()),
    };
    if let Err(e) = result {
        // One line: the context chain joined (messages of other crates may span lines), never a
        // backtrace.
        eprintln!("pkprof: {}", one_line(&format!("{e:#}")));
        std::process::exit(1);
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

/// Joins the lines of a multi-line message (e.g. a regex syntax error with its caret diagram).
fn one_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
