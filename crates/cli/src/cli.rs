//! Command-line arguments (clap derive), converted at the boundary into plain option structs so the
//! rest of the program never sees clap types.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::record::{self, RecordOptions, Target};
use crate::report::{DiffOptions, ReportOptions, Sections};
use crate::syscalls::{Format, SyscallsOptions, SyscallsTarget};
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
    /// Sample user and kernel stacks, each labelled with the process it served, into a profile.
    #[command(after_help = RECORD_EXAMPLES)]
    Record(RecordArgs),
    /// Print a profile as gprof flat profile and call graph or DCPI tables, or export it.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Compare two profiles: DCPI tables side by side, normalised for length and rate.
    #[command(after_help = DIFF_EXAMPLES)]
    Diff(DiffArgs),
    /// Count syscalls and "A followed by B" per thread; find the sequences a batched call would save.
    #[command(after_help = SYSCALLS_EXAMPLES)]
    Syscalls(SyscallsArgs),
    /// Run always: system-wide accounting and labelled sampling in bounded windows, kept in a local store.
    #[command(after_help = AGENT_EXAMPLES)]
    Agent(AgentArgs),
    /// Control a running agent: status, stop/start sampling, reset, dump a profile, flush.
    #[command(after_help = CTL_EXAMPLES)]
    Ctl(CtlArgs),
    /// Print a shell completion script (bash, zsh, fish, ...) generated from these options.
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions(CompletionsArgs),
    /// Print the man page pkprof(1), or write it and one page per subcommand into a directory.
    #[command(after_help = MAN_EXAMPLES)]
    Man(ManArgs),
    /// Send recorded profiles to an OpenTelemetry Collector as OTLP profiles (OTLP/HTTP, gzip).
    #[command(after_help = PUSH_EXAMPLES)]
    Push(PushArgs),
}

const PUSH_EXAMPLES: &str = "Examples:
  pkprof push --otlp http://127.0.0.1:4318 app.data      one request per file
  pkprof push --otlp http://collector:4318/v1development/profiles a.data b.data
Each file becomes one ExportProfilesServiceRequest: a resource per process (process.pid,
process.executable.name/path, host.name), the samples with pkprof's labels as attributes, and the
exact CPU time per process as a second profile. A collector that does not answer is retried with
back-off until --timeout; then pkprof says how many were sent and exits 1.";

#[derive(Args)]
pub struct PushArgs {
    /// The collector's OTLP/HTTP endpoint: http://HOST:PORT (the path /v1development/profiles is
    /// added) or the full URL.
    #[arg(long = "otlp", value_name = "URL")]
    otlp: String,
    /// Profiles written by `pkprof record`.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Give up after this many seconds of retrying.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    timeout: f64,
}

impl PushArgs {
    pub fn into_options(self) -> Result<crate::push::PushOptions, String> {
        if !(self.timeout.is_finite() && self.timeout > 0.0 && self.timeout <= 86400.0) {
            return Err(format!(
                "--timeout {}: give seconds between 0 and 86400",
                self.timeout
            ));
        }
        Ok(crate::push::PushOptions {
            endpoint: self.otlp,
            files: self.files,
            timeout: std::time::Duration::from_secs_f64(self.timeout),
        })
    }
}

const AGENT_EXAMPLES: &str = "Examples:
  pkprof agent                                defaults: 19 Hz per CPU, 10 s windows, store /var/lib/pkprof
  pkprof agent --config /etc/pkprof/agent.toml
  pkprof agent --store /tmp/pk --max-age 1h --window 5s --listen 127.0.0.1:9464
  pkprof agent --config FILE --check-config   print the configuration in effect and exit
  sudo cp packaging/pkprof-agent.service /etc/systemd/system/ && sudo systemctl enable --now pkprof-agent
Every configuration value can be given in the TOML file (packaging/agent.toml documents them all)
and overridden by a flag. SIGTERM closes the open window and exits; SIGHUP re-reads the file.";

#[derive(Args)]
pub struct AgentArgs {
    /// The TOML configuration file (default: built-in defaults).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the configuration in effect and exit.
    #[arg(long)]
    check_config: bool,
    /// Samples per second on each CPU (config: frequency_hz).
    #[arg(short = 'F', long = "freq")]
    freq: Option<u64>,
    /// Length of a window, e.g. 10s (config: window).
    #[arg(long, value_name = "DURATION")]
    window: Option<String>,
    /// Store directory (config: store.dir).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// No store: keep the last windows in memory only (config: store.enabled = false).
    #[arg(long, conflicts_with = "store")]
    no_store: bool,
    /// Delete windows older than this, e.g. 24h (config: store.max_age).
    #[arg(long, value_name = "DURATION")]
    max_age: Option<String>,
    /// Delete the oldest windows beyond this size, e.g. 1GiB (config: store.max_size).
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
    /// The control socket (config: socket).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Serve /metrics here; "" for none (config: metrics.listen).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<String>,
    /// Allow --listen on a non-loopback address (config: metrics.allow_remote).
    #[arg(long)]
    allow_remote: bool,
    /// Distinct stacks kept per window (config: limits.max_stacks).
    #[arg(long)]
    max_stacks: Option<usize>,
    /// Distinct (stack, labels) groups kept per window (config: limits.max_groups).
    #[arg(long)]
    max_groups: Option<usize>,
    /// Processes kept per window (config: limits.max_processes).
    #[arg(long)]
    max_processes: Option<usize>,
    /// Processes born and gone between two reads that cost less than this share one row,
    /// `(short-lived)`; 0 keeps each (config: limits.short_lived; default 10ms).
    #[arg(long, value_name = "DURATION")]
    short_lived: Option<String>,
    /// Bytes of user stack copied per sample (config: stack_bytes).
    #[arg(long)]
    stack_bytes: Option<u32>,
    /// Push each closed window to this OTLP/HTTP endpoint (config: push.otlp_url).
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    /// Have the kernel time every BPF program run, for the BPF run time in ctl status and
    /// /metrics; it costs on every run of every BPF program (config: bpf_stats).
    #[arg(long)]
    bpf_stats: bool,
}

impl AgentArgs {
    pub fn into_options(self) -> crate::agent::AgentOptions {
        crate::agent::AgentOptions {
            config: self.config,
            check: self.check_config,
            overrides: pkprof_agent::Overrides {
                frequency_hz: self.freq,
                window: self.window,
                store_dir: self.store,
                no_store: self.no_store,
                max_age: self.max_age,
                max_size: self.max_size,
                socket: self.socket,
                listen: self.listen,
                allow_remote: self.allow_remote,
                max_stacks: self.max_stacks,
                max_groups: self.max_groups,
                max_processes: self.max_processes,
                short_lived: self.short_lived,
                otlp_url: self.otlp,
                stack_bytes: self.stack_bytes,
                bpf_stats: self.bpf_stats,
            },
        }
    }
}

const CTL_EXAMPLES: &str = "Examples:
  pkprof ctl status                       uptime, windows, samples, losses, memory, own CPU, store, push
  pkprof ctl stop ; pkprof ctl start      sampling off and on again (the accounting goes on)
  pkprof ctl dump -o last.data --since 10m   the windows of the last 10 minutes as one profile
  pkprof ctl flush                        close the open window now
  pkprof ctl reset                        drop the open window's samples
Only root can open the agent's socket.";

#[derive(Args)]
pub struct CtlArgs {
    /// The agent's control socket.
    #[arg(long, value_name = "PATH", default_value = pkprof_agent::config::DEFAULT_SOCKET, global = true)]
    socket: PathBuf,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// Uptime, windows, samples, losses, memory, own CPU, BPF run time, store and push state.
    Status,
    /// Stop stack sampling (the exact accounting goes on).
    Stop,
    /// Start stack sampling again.
    Start,
    /// Drop the open window's samples and the windows kept in memory.
    Reset,
    /// Close the open window now (it goes to the store and pushers).
    Flush,
    /// Write the windows since --since (the open one closed first) as one profile.
    Dump {
        /// Where to write the profile.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: PathBuf,
        /// How far back, e.g. 10m, 1h (default: everything kept).
        #[arg(long, value_name = "DURATION")]
        since: Option<String>,
    },
}

/// `pkprof ctl`, as plain options.
pub struct CtlOptions {
    pub socket: PathBuf,
    pub request: CtlRequest,
    pub output: Option<PathBuf>,
}

pub enum CtlRequest {
    Status,
    Stop,
    Start,
    Reset,
    Flush,
    Dump { since: Option<String> },
}

impl CtlArgs {
    pub fn into_options(self) -> CtlOptions {
        let (request, output) = match self.command {
            CtlCommand::Status => (CtlRequest::Status, None),
            CtlCommand::Stop => (CtlRequest::Stop, None),
            CtlCommand::Start => (CtlRequest::Start, None),
            CtlCommand::Reset => (CtlRequest::Reset, None),
            CtlCommand::Flush => (CtlRequest::Flush, None),
            CtlCommand::Dump { output, since } => (CtlRequest::Dump { since }, Some(output)),
        };
        CtlOptions {
            socket: self.socket,
            request,
            output,
        }
    }
}

const COMPLETIONS_EXAMPLES: &str = "Examples:
  pkprof completions bash > /usr/share/bash-completion/completions/pkprof
  pkprof completions zsh > /usr/share/zsh/vendor-completions/_pkprof
  pkprof completions fish > /usr/share/fish/vendor_completions.d/pkprof.fish
scripts/install.sh installs all three and the man pages.";

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

const MAN_EXAMPLES: &str = "Examples:
  pkprof man | man -l -                     read it now
  pkprof man --dir /usr/share/man/man1      pkprof.1, pkprof-top.1, pkprof-record.1, ...";

#[derive(Args)]
pub struct ManArgs {
    /// Write pkprof.1 and pkprof-SUBCOMMAND.1 for every subcommand here instead of pkprof.1 to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

const SYSCALLS_EXAMPLES: &str = "Examples:
  pkprof syscalls -- cp big.iso /tmp/      count a command (and its children) like strace -f -c
  pkprof syscalls --args -- tar cf x.tar dir   nodes split by fd and size (read(fd=3, 8K..16K))
  pkprof syscalls -p 1234 --duration 10   attach to a process for 10 s (Ctrl-C stops early)
  pkprof syscalls -a --duration 5 --format json -o sys.json   the whole system, as JSON
  pkprof syscalls --format dot -o g.dot -- ./app && dot -Tsvg g.dot > g.svg   the graph
  pkprof syscalls --calibrate             measure this machine's cost table (~15 s), cached
Counts are taken when a call returns, as strace -c does (exit and exit_group never return). Each
cluster says how many kernel crossings one batched call would save, what Linux call could replace
it (copy_file_range, writev, sendmmsg, close_range, epoll...) or else an io_uring multi-call
(crates/multicall), and the user call sites it comes from. With a cost table measured by
--calibrate, each suggestion carries its estimated saving in time, and a replacement that would
not save time here is replaced by one that does, or by \"leave it\" with the reason.";

#[derive(Args)]
pub struct SyscallsArgs {
    /// Stop after this many seconds (default: when the command exits, or at Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<f64>,
    /// Split each syscall by its fd and size class (read(fd=3, 2K..4K)).
    #[arg(long)]
    args: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the report here instead of stdout.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Clusters and edges shown in the text report.
    #[arg(long, default_value_t = 10, value_parser = count_parser(1, 100_000))]
    top: usize,
    /// Keep the user stack of every Nth call of a thread (and each transition's first); 0: none.
    #[arg(long, default_value_t = 64)]
    stack_every: u32,
    /// Bytes of user stack copied per kept stack to unwind it from the binaries' unwind tables
    /// (a multiple of 8; 0: frame pointers only). Deeper frames come from frame pointers where valid.
    #[arg(long, default_value_t = pkprof_collect::record::DEFAULT_STACK_BYTES, value_parser = parse_stack_bytes)]
    stack_bytes: u32,
    /// Count without timing each call: one tracepoint (sys_exit) instead of two, less overhead.
    #[arg(long)]
    no_time: bool,
    /// Capacity of the kernel's transition table (thread x call before x previous call x call).
    #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    max_transitions: u32,
    #[command(flatten)]
    target: SyscallsTargetArgs,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
#[command(next_help_heading = "Targets (one of)")]
struct SyscallsTargetArgs {
    /// Processes to trace (comma-separated or repeated); children they start are traced too.
    #[arg(short = 'p', long = "pid", value_delimiter = ',')]
    pids: Vec<u32>,
    /// Every process but pkprof (as in `record`; `--all` works too).
    #[arg(short = 'a', long = "all-cpus", visible_alias = "all")]
    all: bool,
    /// The command to run, after `--`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
    /// Trace nothing: measure this machine's per-op costs (plain vs batched) that the advice
    /// estimates savings from, print them and cache them for later runs (full ~15 s, quick ~4 s; more on a busy machine).
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1, default_missing_value = "full")]
    calibrate: Option<crate::syscalls::calibrate::Mode>,
}

impl SyscallsArgs {
    pub fn into_options(self) -> SyscallsOptions {
        let t = self.target;
        let target = if !t.command.is_empty() {
            SyscallsTarget::Command(t.command)
        } else if !t.pids.is_empty() {
            SyscallsTarget::Pids(t.pids)
        } else {
            SyscallsTarget::System
        };
        SyscallsOptions {
            target,
            duration: self.duration.map(std::time::Duration::from_secs_f64),
            split_args: self.args,
            format: self.format,
            output: self.output,
            top: self.top,
            stack_every: self.stack_every,
            stack_bytes: self.stack_bytes,
            max_transitions: self.max_transitions,
            timed: !self.no_time,
            calibrate: t.calibrate,
        }
    }
}

const RECORD_EXAMPLES: &str = "Examples:
  pkprof record -- make -j2              run a command (and its children), stop when it exits
  pkprof record -p 1234,1240 --duration 30   attach to processes for 30 s (Ctrl-C stops early)
  pkprof record --cgroup system.slice/nginx.service --duration 10
  pkprof record -a --duration 10 -F 999  the whole system, 999 samples/s per CPU
  pkprof record --syscalls --count compress@./app -- ./app   exact syscall and call counts too
  pkprof record --by client -a --duration 10   a server's samples labelled with the client it serves
  pkprof record --off-cpu -- ./server    where it blocked too, for how long, and who woke it
Work done for the targets in interrupts (network receive, block I/O completion) and by kworkers is
labelled with the target; work for other processes is OTHER, system work KERNEL.";

#[derive(Args)]
pub struct RecordArgs {
    #[command(flatten)]
    target: RecordTargetArgs,
    /// Stop after this many seconds (default: when the command exits, or at Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<f64>,
    /// Samples per second on each CPU.
    #[arg(short = 'F', long = "freq", default_value_t = record::DEFAULT_FREQUENCY_HZ, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    freq: u64,
    /// Where to write the profile.
    #[arg(short = 'o', long, default_value = record::DEFAULT_OUTPUT)]
    output: PathBuf,
    /// Also count every syscall exactly per process (fills the `calls` column for PIDk:sys_*).
    #[arg(long)]
    syscalls: bool,
    /// Count calls of a user function exactly with a uprobe: FUNC@BINARY (repeatable).
    #[arg(long = "count", value_name = "FUNC@BINARY", value_parser = record::parse_probe)]
    counts: Vec<pkprof_collect::FuncProbe>,
    /// Symbolize with DWARF source lines and inlined frames (slower); Python frames get their lines.
    #[arg(long)]
    lines: bool,
    /// Leave CPython processes native-only: no Python frames spliced in (their walk costs each
    /// sample a few µs more).
    #[arg(long)]
    no_python: bool,
    /// Do not have the kernel time pkprof's BPF programs (their run time is then not in the profile).
    #[arg(long)]
    no_bpf_stats: bool,
    /// Ring buffer for samples, MiB (rounded up to a power of two). Default: a quarter second of
    /// samples at the rate and --stack-bytes, 8 to 256 MiB.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    ring_mib: Option<u32>,
    /// Bytes of user stack copied per sample to unwind it from the binaries' unwind tables
    /// (a multiple of 8; 0: frame pointers only). Deeper frames come from frame pointers where valid.
    #[arg(long, default_value_t = pkprof_collect::record::DEFAULT_STACK_BYTES, value_parser = parse_stack_bytes)]
    stack_bytes: u32,
    /// Memory for the binaries' unwind tables, MiB; stacks needing more end `[truncated: unwind memory limit]`.
    #[arg(long, default_value_t = pkprof_symbolize::DEFAULT_UNWIND_MEMORY_MIB, value_parser = clap::value_parser!(u32).range(1..=65536))]
    unwind_memory: u32,
    /// Seconds receive work may wait on a socket for its reader before it counts as KERNEL.
    #[arg(long, default_value_t = pkprof_collect::DEFAULT_TAG_EXPIRE_S, value_parser = parse_delay)]
    tag_expire: f64,
    /// Capacity of the kernel's thread table.
    #[arg(long, default_value_t = pkprof_collect::DEFAULT_MAX_THREADS, value_parser = table_size())]
    max_threads: u32,
    /// Capacity of the kernel's set of target processes alive at once (-- CMD and its children).
    #[arg(long, default_value_t = pkprof_collect::record::DEFAULT_MAX_TARGETS, value_parser = clap::value_parser!(u32).range(1..))]
    max_targets: u32,
    /// Capacity of each attribution tag table.
    #[arg(long, default_value_t = pkprof_collect::DEFAULT_MAX_TAGS, value_parser = table_size())]
    max_tags: u32,
    /// Entries in the summary printed at the end.
    #[arg(long, default_value_t = 15, value_parser = count_parser(1, 100_000))]
    summary_rows: usize,
    /// `client`: label a server's samples, from when it reads a client's request (pipe, unix
    /// socket, loopback TCP) until it blocks, with that client instead of the server.
    #[arg(long, value_enum)]
    by: Option<RecordBy>,
    /// Off-CPU samples too: where each thread blocked (user + kernel stack, reason), weighted by
    /// the time until it ran again, with who woke it and the chain of wakers before.
    #[arg(long)]
    off_cpu: bool,
    /// Off-CPU sampling period, µs: a block of d µs is taken with probability d/period and then
    /// stands for the period; blocks of a period or more are all taken (0: every block).
    #[arg(long, value_name = "US", default_value_t = pkprof_collect::record::DEFAULT_OFFCPU_PERIOD_US, requires = "off_cpu")]
    off_cpu_period: u32,
    /// Off-CPU samples a second per CPU at most, about: a CPU that chooses more doubles its
    /// period for the next ones (each sample weighs by the period it was taken at) and halves
    /// it back when quieter (0: no cap).
    #[arg(long, value_name = "N", default_value_t = pkprof_collect::record::DEFAULT_OFFCPU_MAX_RATE, requires = "off_cpu")]
    off_cpu_max_rate: u32,
    /// Where an off-CPU sample's user stack is taken, as its call returns: `auto` (the best
    /// way this kernel offers), `task-work` (Linux >= 6.18), `rseq` (cheap; threads without an
    /// rseq area, such as Go's or static musl's, get none) or `sys-exit` (every thread, at a
    /// program on every syscall exit of the machine).
    #[arg(long, value_enum, value_name = "WAY", default_value_t = OffCpuUserStacksArg::Auto, requires = "off_cpu")]
    off_cpu_user_stacks: OffCpuUserStacksArg,
    /// Wakers kept per off-CPU sample: who woke it, who woke that one just before, ...
    #[arg(long, value_name = "N", default_value_t = pkprof_collect::record::DEFAULT_WAKE_CHAIN, value_parser = clap::value_parser!(u32).range(1..=pkprof_collect::record::MAX_WAKE_CHAIN as i64), requires = "off_cpu")]
    wake_chain: u32,
}

/// `record --off-cpu-user-stacks` (pkprof_collect::OffCpuUserStacks, which says what each costs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OffCpuUserStacksArg {
    Auto,
    TaskWork,
    Rseq,
    SysExit,
}

impl From<OffCpuUserStacksArg> for pkprof_collect::OffCpuUserStacks {
    fn from(a: OffCpuUserStacksArg) -> Self {
        match a {
            OffCpuUserStacksArg::Auto => Self::Auto,
            OffCpuUserStacksArg::TaskWork => Self::TaskWork,
            OffCpuUserStacksArg::Rseq => Self::Rseq,
            OffCpuUserStacksArg::SysExit => Self::SysExit,
        }
    }
}

/// Whom `record --by` labels samples with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordBy {
    /// The client a server is working for (the server chain's marks).
    Client,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
#[command(next_help_heading = "Targets (one of)")]
struct RecordTargetArgs {
    /// Processes to profile (comma-separated or repeated).
    #[arg(short = 'p', long = "pid", value_delimiter = ',')]
    pids: Vec<u32>,
    /// Every process in this cgroup v2 directory and below (absolute or relative to the cgroup2 mount).
    #[arg(long)]
    cgroup: Option<PathBuf>,
    /// The whole system.
    #[arg(short = 'a', long = "all-cpus")]
    all: bool,
    /// The command to run, after `--`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

fn parse_stack_bytes(s: &str) -> Result<u32, String> {
    let max = pkprof_collect::record::MAX_STACK_BYTES;
    match s.parse::<u32>() {
        Ok(n) if n <= max && n % 8 == 0 => Ok(n),
        Ok(_) => Err(format!("must be a multiple of 8 from 0 to {max}")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_duration(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if d > 0.0 && d <= 86400.0 * 365.0 => Ok(d),
        Ok(_) => Err("must be a positive number of seconds".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl RecordArgs {
    pub fn into_options(self) -> RecordOptions {
        let t = self.target;
        let target = if !t.command.is_empty() {
            Target::Command(t.command)
        } else if !t.pids.is_empty() {
            Target::Pids(t.pids)
        } else if let Some(cg) = t.cgroup {
            Target::Cgroup(cg)
        } else {
            Target::System
        };
        let off_cpu = self.off_cpu.then(|| pkprof_collect::OffCpuConfig {
            period_ns: u64::from(self.off_cpu_period) * 1000,
            wake_chain: self.wake_chain,
            all: matches!(target, Target::System | Target::Cgroup(_)),
            max_rate: self.off_cpu_max_rate,
            user_stacks: self.off_cpu_user_stacks.into(),
        });
        RecordOptions {
            off_cpu,
            target,
            duration: self.duration.map(std::time::Duration::from_secs_f64),
            frequency_hz: self.freq,
            output: self.output,
            syscalls: self.syscalls,
            probes: self.counts,
            lines: self.lines,
            python: !self.no_python,
            bpf_stats: !self.no_bpf_stats,
            max_threads: self.max_threads,
            max_targets: self.max_targets,
            max_tags: self.max_tags,
            tag_expire: std::time::Duration::from_secs_f64(self.tag_expire),
            ring_mib: self.ring_mib,
            stack_bytes: self.stack_bytes,
            unwind_memory_mib: self.unwind_memory,
            summary_rows: self.summary_rows,
            by_client: self.by == Some(RecordBy::Client),
        }
    }
}

const TOP_EXAMPLES: &str = "Examples:
  pkprof top                          interactive view, refreshed every second
  pkprof top --batch -n 5             five text frames, like top -b
  pkprof top --json -d 0.5 -p 1234    JSON lines for one process, twice a second
  pkprof top -H --comm '^nginx'       per-thread rows of processes named nginx*
  pkprof top -b -H --wall -p 1234     where each thread's wall time went (running, runqueue, blocked)
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
    #[arg(short = 'n', long = "iterations", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    iterations: Option<u64>,
    /// One row per thread instead of per process.
    #[arg(short = 'H', long = "threads")]
    threads: bool,
    /// Text frames show where the wall time went instead of the cost columns: running, waiting
    /// for a CPU, blocked by reason, and the runqueue waits' p50/p99/longest.
    #[arg(long, requires = "batch")]
    wall: bool,
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
    /// Only tasks in this cgroup v2 directory (absolute or relative to the cgroup2 mount).
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
    #[arg(long, default_value_t = pkprof_collect::DEFAULT_MAX_THREADS, value_parser = table_size())]
    max_threads: u32,
    /// Capacity of each attribution tag table (sockets, block requests, work items).
    #[arg(long, default_value_t = pkprof_collect::DEFAULT_MAX_TAGS, value_parser = table_size())]
    max_tags: u32,
    /// Seconds receive work may wait on a socket for its reader before it is billed to KERNEL.
    #[arg(long, default_value_t = pkprof_collect::DEFAULT_TAG_EXPIRE_S, value_parser = parse_delay)]
    tag_expire: f64,
    /// Have the kernel measure pkprof's own BPF run time (shown in JSON and metrics).
    #[arg(long)]
    bpf_stats: bool,
    /// Bill a server's work to its clients (+SRV%): a thread that reads a client's data from a
    /// pipe, unix socket or loopback TCP works for it until it blocks. Off by default: it costs
    /// about half a microsecond on every read and write of the machine.
    #[arg(long)]
    server: bool,
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
    #[arg(long, default_value_t = 20, value_parser = count_parser(1, 100_000))]
    metrics_top: usize,
}

/// Most entries of a kernel table (thread table, tag tables): PID_MAX_LIMIT, the most tasks Linux
/// can have. 0 would make the kernel refuse the map; more is memory for nothing.
const MAX_TABLE: u32 = 4 * 1024 * 1024;

fn table_size() -> impl clap::builder::TypedValueParser<Value = u32> {
    clap::value_parser!(u32).range(1..=i64::from(MAX_TABLE))
}

/// A count of rows or entries, `min..=max`.
fn count_parser(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(min..=max)
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
            wall: self.refresh.wall,
            max_rows: (self.refresh.rows > 0).then_some(self.refresh.rows),
            pids: self.filter.pids,
            comm: self.filter.comm,
            cgroup: self.filter.cgroup,
            syscalls: self.collect.syscalls,
            max_threads: self.collect.max_threads,
            max_tags: self.collect.max_tags,
            tag_expire: std::time::Duration::from_secs_f64(self.collect.tag_expire),
            bpf_stats: self.collect.bpf_stats,
            server: self.collect.server,
            listen: self.serve.listen,
            allow_remote: self.serve.allow_remote,
            udp: self.serve.udp,
            metrics_top: self.serve.metrics_top,
        }
    }
}

const REPORT_EXAMPLES: &str = "Examples:
  pkprof report pkprof.data                  gprof flat profile and call graph
  pkprof report pkprof.data --dcpi --by process --min-percent 0.5
  pkprof report pkprof.data --flat -p 1234 --user-only --plain-names
  pkprof report pkprof.data --dcpi --group 'select() and related=sys_(p?select|poll)|do_select|do_sys_poll'
  pkprof report pkprof.data --bucket process,other --comm '^nginx'
  pkprof report pkprof.data --format pprof -o cpu.pb.gz     then: go tool pprof -top cpu.pb.gz
  pkprof report pkprof.data --kind off --format folded       off-CPU stacks with their wakers
  pkprof report pkprof.data --format folded | inferno-flamegraph > flame.svg
  pkprof report pkprof.data --format speedscope -o p.speedscope.json
  pkprof report pkprof.data --format html -o profile.html
  pkprof report pkprof.data --symbols /usr/lib/debug --symbols ./debug   names for stripped binaries
  pkprof report --store /var/lib/pkprof --since 1h --dcpi --by container   the agent's last hour
Names are PIDu:func / PIDk:func (OTHER, KERNEL, IDLE for the other buckets). Times are measured
from the sampled stacks; calls are shown only where counted exactly (record --syscalls, --count).";

const DIFF_EXAMPLES: &str = "Examples:
  pkprof diff before.data after.data                 every procedure, by change of share
  pkprof diff before.data after.data --by process --min-percent 1   keep PIDs (PIDu:func)
  pkprof diff a.data b.data --format html -o diff.html   differential flame graph
  pkprof diff --store /var/lib/pkprof --range 2h..1h --range 1h..now   the agent's last hour vs the one before
Rows match by plain function names, so two runs of one program (different PIDs) line up; --by
process or --by thread keeps the PIDs. Profiles of different lengths, rates or CPU counts are
compared by share of their own CPU time and by CPU seconds per wall second; the header says how.";

const FORMATS: [&str; 4] = ["pprof", "folded", "speedscope", "html"];

#[derive(Args)]
pub struct ReportArgs {
    /// A profile written by `pkprof record` (or `pkprof ctl dump`).
    #[arg(required_unless_present = "store")]
    file: Option<PathBuf>,
    #[command(flatten)]
    from_store: StoreArgs,
    /// Name frames of stripped binaries from separate debug files in DIR (repeatable): by
    /// build-id (DIR/.build-id/xx/rest.debug), else by the binary's .gnu_debuglink name in DIR or
    /// DIR/.debug/.
    #[arg(long = "symbols", value_name = "DIR")]
    symbols: Vec<PathBuf>,
    /// Which samples: on-CPU, off-CPU (record --off-cpu: blocked time, with the waker's stack
    /// above the blocked one after a `--` frame), or both (counts in µs, roots `[on-cpu]` and
    /// `[off-cpu]`).
    #[arg(long, value_name = "on|off|both", default_value = "on", value_parser = pkprof_report::kind::KindSelection::parse)]
    kind: pkprof_report::kind::KindSelection,
    #[command(flatten)]
    sections: SectionArgs,
    #[command(flatten)]
    select: SelectArgs,
    #[command(flatten)]
    output: ExportArgs,
}

#[derive(Args)]
#[command(next_help_heading = "The agent's store")]
struct StoreArgs {
    /// Read the windows of an agent's store instead of a file, merged into one profile.
    #[arg(long, value_name = "DIR", conflicts_with = "file")]
    store: Option<PathBuf>,
    /// From this long ago (1h, 30m), `now` or @UNIX_SECONDS (default: the oldest window).
    #[arg(long, value_name = "WHEN", requires = "store")]
    since: Option<String>,
    /// Until this long ago, `now` or @UNIX_SECONDS (default: now).
    #[arg(long, value_name = "WHEN", requires = "store")]
    until: Option<String>,
}

#[derive(Args)]
#[command(next_help_heading = "Reports (default: --flat --graph)")]
struct SectionArgs {
    /// gprof flat profile: self time by routine, with exact calls where counted.
    #[arg(long)]
    flat: bool,
    /// gprof call graph: parents and children of every routine, cycles.
    #[arg(long)]
    graph: bool,
    /// DCPI table: % of all CPU and of non-idle CPU by procedure.
    #[arg(long)]
    dcpi: bool,
}

#[derive(Args)]
#[command(next_help_heading = "Selection and naming")]
struct SelectArgs {
    /// Only samples served to these processes (comma-separated or repeated).
    #[arg(short = 'p', long = "pid", value_delimiter = ',')]
    pids: Vec<u32>,
    /// Only samples whose command name matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    comm: Option<String>,
    /// Only samples in these buckets: process, other, kernel, idle (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = pkprof_report::select::parse_bucket)]
    bucket: Vec<pkprof_profile::Bucket>,
    /// Keep only kernel frames (and the syscall boundary) of each stack.
    #[arg(long, conflicts_with = "user_only")]
    kernel_only: bool,
    /// Keep only user frames of each stack.
    #[arg(long)]
    user_only: bool,
    /// Fold routines whose name matches REGEX into one named NAME (repeatable; first match wins).
    #[arg(long = "group", value_name = "NAME=REGEX")]
    groups: Vec<String>,
    /// Split DCPI tables by process, thread, bucket, context, cgroup, container or (systemd) unit.
    #[arg(long, value_name = "KEY")]
    by: Option<pkprof_report::select::ByKey>,
    /// Leave out rows and entries under this percentage.
    #[arg(long, value_name = "F", default_value_t = 0.0, value_parser = parse_percent)]
    min_percent: f64,
    /// Plain function names instead of PIDu:func / PIDk:func.
    #[arg(long)]
    plain_names: bool,
}

#[derive(Args)]
#[command(next_help_heading = "Output")]
struct ExportArgs {
    /// Write the selected samples in this format instead of text reports.
    #[arg(long, value_parser = FORMATS, conflicts_with_all = ["flat", "graph", "dcpi"])]
    format: Option<String>,
    /// Write here instead of standard output.
    #[arg(short = 'o', long, value_name = "OUT")]
    output: Option<PathBuf>,
}

#[derive(Args)]
pub struct DiffArgs {
    /// The baseline profile.
    #[arg(required_unless_present = "store")]
    a: Option<PathBuf>,
    /// The profile compared with it.
    #[arg(required_unless_present = "store")]
    b: Option<PathBuf>,
    /// Compare two time ranges of an agent's store instead of two files (with --range twice).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["a", "b"], requires = "ranges")]
    store: Option<PathBuf>,
    /// A time range FROM..TO of the store (2h..1h, 1h..now, @SECONDS..@SECONDS): give it twice,
    /// the baseline first.
    #[arg(
        long = "range",
        value_name = "FROM..TO",
        requires = "store",
        num_args = 1
    )]
    ranges: Vec<String>,
    #[command(flatten)]
    select: SelectArgs,
    #[command(flatten)]
    output: DiffOutputArgs,
}

#[derive(Args)]
#[command(next_help_heading = "Output")]
struct DiffOutputArgs {
    /// html: a page with a differential flame graph instead of the text table.
    #[arg(long, value_parser = ["html"])]
    format: Option<String>,
    /// Write here instead of standard output.
    #[arg(short = 'o', long, value_name = "OUT")]
    output: Option<PathBuf>,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        Ok(_) => Err("must be between 0 and 100".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl SelectArgs {
    fn into_options(self) -> pkprof_report::SelectOptions {
        use pkprof_report::select::FrameFilter;
        pkprof_report::SelectOptions {
            pids: self.pids,
            comm: self.comm,
            buckets: self.bucket,
            frames: if self.kernel_only {
                FrameFilter::KernelOnly
            } else if self.user_only {
                FrameFilter::UserOnly
            } else {
                FrameFilter::All
            },
            min_percent: self.min_percent,
            groups: self.groups,
            by: self.by,
            names: if self.plain_names {
                pkprof_report::names::NameStyle::Plain
            } else {
                pkprof_report::names::NameStyle::Labelled
            },
        }
    }
}

impl ReportArgs {
    pub fn into_options(self) -> ReportOptions {
        ReportOptions {
            file: self
                .from_store
                .store
                .clone()
                .or(self.file)
                .unwrap_or_default(),
            range_without_store: self.from_store.store.is_none()
                && (self.from_store.since.is_some() || self.from_store.until.is_some()),
            store: self.from_store.store.map(|_| crate::report::StoreRange {
                since: self.from_store.since,
                until: self.from_store.until,
            }),
            symbols: self.symbols,
            sections: Sections {
                flat: self.sections.flat,
                graph: self.sections.graph,
                dcpi: self.sections.dcpi,
            },
            select: self.select.into_options(),
            format: self.output.format,
            output: self.output.output,
            kind: self.kind,
        }
    }
}

impl DiffArgs {
    pub fn into_options(self) -> DiffOptions {
        use pkprof_report::select::ByKey;
        let mut select = self.select.into_options();
        // Two runs of one program have different PIDs: rows match by plain names (as perf diff
        // matches by module and symbol) unless --by process / thread asks to keep the PIDs.
        if !matches!(select.by, Some(ByKey::Process | ByKey::Thread)) {
            select.names = pkprof_report::names::NameStyle::Plain;
        }
        DiffOptions {
            a: self.a.unwrap_or_default(),
            b: self.b.unwrap_or_default(),
            store: self.store.map(|dir| (dir, self.ranges)),
            select,
            format: self.output.format,
            output: self.output.output,
        }
    }
}
