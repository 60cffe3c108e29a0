//! Command-line arguments (clap derive), converted at the boundary into plain option structs so the
//! rest of the program never sees clap types.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::top::TopOptions;

#[derive(Parser)]
#[command(
    name = "pkprof",
    version,
    about = "Exact, process-labelled CPU accounting and profiling for Linux"
)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug incl. libbpf, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Live, exact per-process CPU: own time, and interrupt work Linux billed to it.
    #[command(after_help = TOP_EXAMPLES)]
    Top(TopArgs),
}

const TOP_EXAMPLES: &str = "Examples:
  pkprof top                          interactive view, refreshed every second
  pkprof top --batch -n 5             five text frames, like top -b
  pkprof top --json -d 0.5 -p 1234    JSON lines for one process, twice a second
  pkprof top -H --comm '^nginx'       per-thread rows of processes named nginx*
  pkprof top --syscalls               also measure the exact user/sys split and syscall counts
  pkprof top --batch --listen 127.0.0.1:9464   serve /metrics (Prometheus) and /stream (JSON lines)
  pkprof top --batch --udp 192.0.2.7:9999      send each frame to `nc -l -u 9999` on that host";

#[derive(Args)]
pub struct TopArgs {
    #[command(flatten)]
    refresh: RefreshArgs,
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    collect: CollectArgs,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Args)]
#[command(next_help_heading = "Refresh and output")]
struct RefreshArgs {
    /// Seconds between refreshes.
    #[arg(short = 'd', long = "delay", default_value_t = 1.0, value_parser = parse_delay)]
    delay: f64,
    /// Print text frames to stdout instead of the interactive view.
    #[arg(short = 'b', long)]
    batch: bool,
    /// Print one JSON object per refresh (JSON Lines) to stdout.
    #[arg(long, conflicts_with = "batch")]
    json: bool,
    /// Stop after this many refreshes.
    #[arg(short = 'n', long = "iterations")]
    iterations: Option<u64>,
    /// One row per thread instead of per process.
    #[arg(short = 'H', long = "threads")]
    threads: bool,
    /// Most rows per text frame (0: all).
    #[arg(long, default_value_t = 30)]
    rows: usize,
}

#[derive(Args)]
#[command(next_help_heading = "Filters")]
struct FilterArgs {
    /// Only these processes (or threads with -H); comma-separated or repeated.
    #[arg(short = 'p', long = "pid", value_delimiter = ',')]
    pids: Vec<u32>,
    /// Only commands whose name matches this regular expression.
    #[arg(long)]
    comm: Option<String>,
    /// Only tasks in this cgroup (v2 path, e.g. /sys/fs/cgroup/system.slice/nginx.service).
    #[arg(long)]
    cgroup: Option<PathBuf>,
}

#[derive(Args)]
#[command(next_help_heading = "Collection")]
struct CollectArgs {
    /// Attach the syscall tracepoints: exact USER%/SYS% and per-syscall counts (costs more per syscall).
    #[arg(long)]
    syscalls: bool,
    /// Capacity of the kernel's thread table; threads beyond it are counted as lost.
    #[arg(long, default_value_t = 32768)]
    max_threads: u32,
    /// Capacity of each attribution tag table (sockets, block requests, work items).
    #[arg(long, default_value_t = 16384)]
    max_tags: u32,
    /// Seconds receive work may wait on a socket for its reader before it is billed to KERNEL.
    #[arg(long, default_value_t = 1.0, value_parser = parse_delay)]
    tag_expire: f64,
    /// Have the kernel measure pkprof's own BPF run time (shown in JSON and metrics).
    #[arg(long)]
    bpf_stats: bool,
}

#[derive(Args)]
#[command(next_help_heading = "Remote monitoring")]
struct ServeArgs {
    /// Serve Prometheus /metrics and a JSON-lines /stream here (default address 127.0.0.1).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    listen: Option<SocketAddr>,
    /// Allow --listen on a non-loopback address.
    #[arg(long)]
    allow_remote: bool,
    /// Send every text frame as a UDP datagram to this address (watch it with `nc -l -u PORT`).
    #[arg(long, value_name = "HOST:PORT")]
    udp: Option<String>,
    /// Processes exported individually in /metrics; the rest are summed into pid="other".
    #[arg(long, default_value_t = 20)]
    metrics_top: usize,
}

fn parse_delay(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if (0.05..=3600.0).contains(&d) => Ok(d),
        Ok(_) => Err("must be between 0.05 and 3600 seconds".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// `PORT` alone or `ADDR:PORT`; a bare port binds loopback.
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse::<SocketAddr>()
        .map_err(|e| format!("{e} (expected PORT or ADDR:PORT)"))
}

impl TopArgs {
    pub fn into_options(self) -> TopOptions {
        TopOptions {
            delay: std::time::Duration::from_secs_f64(self.refresh.delay),
            batch: self.refresh.batch,
            json: self.refresh.json,
            iterations: self.refresh.iterations,
            per_thread: self.refresh.threads,
            max_rows: (self.refresh.rows > 0).then_some(self.refresh.rows),
            pids: self.filter.pids,
            comm: self.filter.comm,
            cgroup: self.filter.cgroup,
            syscalls: self.collect.syscalls,
            max_threads: self.collect.max_threads,
            max_tags: self.collect.max_tags,
            tag_expire: std::time::Duration::from_secs_f64(self.collect.tag_expire),
            bpf_stats: self.collect.bpf_stats,
            listen: self.serve.listen,
            allow_remote: self.serve.allow_remote,
            udp: self.serve.udp,
            metrics_top: self.serve.metrics_top,
        }
    }
}
