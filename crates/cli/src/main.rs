//! pkprof: the command-line entry point. Parses arguments, sets up logging, runs a subcommand, and
//! turns any error into one line on stderr with a non-zero exit code.

mod cli;
mod self_usage;
mod signals;
mod top;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    init_logging(args.verbose);
    let result = match args.command {
        cli::Command::Top(top) => top::run(top.into_options()),
    };
    if let Err(e) = result {
        // One line: the context chain joined, never a backtrace.
        eprintln!("pkprof: {e:#}");
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
