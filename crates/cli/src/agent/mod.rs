//! `pkprof agent`: system-wide exact accounting and labelled stack sampling, all the time, in
//! bounded windows (docs/design.md, "The agent"). The parts that need no kernel are in
//! `pkprof-agent` (configuration, windows, store, merging, control socket); this module wires them
//! to the collector and the recording loop:
//!
//! one `Session` runs for the agent's whole life, driven step by step (a poll of up to 200 ms);
//! between steps the agent answers control requests, and at each window's end it takes the
//! window's samples, turns the accounting's totals into the window's own figures, symbolizes,
//! labels cgroups (`cgroups`), and hands the profile to its sinks (the store, or the memory ring;
//! then any pusher). SIGTERM/SIGINT close the open window and exit; SIGHUP re-reads the
//! configuration.

mod cgroups;
mod client;
mod otlp_sink;
mod status;

pub use client::run as ctl;
pub use otlp_sink::cgroup_labels;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use pkprof_agent::ctl::{CtlServer, Incoming, Reply, Request};
use pkprof_agent::{store, Config, Deltas, MemoryWindows, Overrides, Store, WindowSink};
use pkprof_attribution::TargetSet;
use pkprof_collect::{Collector, CollectorOptions, RecordConfig};
use pkprof_profile::{TargetKind, Targets};
use pkprof_recording::meta::{self, KernelLost};
use pkprof_recording::{Extras, Session};
use pkprof_symbolize::{Symbolizer, SymbolizerOptions};

use crate::record::{Kernel, Symbolizing};
use crate::self_usage::own_cpu_ns;
use crate::signals;
use cgroups::CgroupPaths;
use status::Health;

/// A sample of a process whose maps are not captured yet wakes the agent only once the process
/// has lived this long (RecordConfig::capture_wake_min_age_ns; docs/design.md, "The agent /
/// Cost"): a younger one is likely gone before the agent runs (under a fork loop nearly every
/// sample, each wake-up costing the agent more than the rest of the sample). Its sample is read
/// at the next poll (200 ms); a later sample of the same process may still wake the agent.
const CAPTURE_WAKE_MIN_AGE: Duration = Duration::from_millis(1);

#[derive(Clone, Debug, Default)]
pub struct AgentOptions {
    pub config: Option<PathBuf>,
    pub overrides: Overrides,
    /// Check the configuration, print it and exit.
    pub check: bool,
}

/// What the windows need beyond the session: the figures of the previous window, the store.
struct Windows {
    config: Config,
    deltas: Deltas,
    store: Option<Store>,
    memory: MemoryWindows,
    sinks: Vec<Box<dyn WindowSink>>,
    cgroups: CgroupPaths,
    /// The open window: when it started (wall clock, and monotonic for its end).
    start_unix_ns: u64,
    started: Instant,
    cpu_before: u64,
    bpf_before: (u64, u64),
    health: Health,
}

fn open_store(c: &Config) -> Result<Option<Store>> {
    c.store
        .as_ref()
        .map(|s| {
            Store::open(&s.dir, s.max_age, s.max_bytes)
                .with_context(|| format!("opening the store {}", s.dir.display()))
        })
        .transpose()
}

/// Runs the agent until SIGTERM or SIGINT; returns the exit status.
pub fn run(opts: AgentOptions) -> Result<i32> {
    let config = Config::load(opts.config.as_deref(), &opts.overrides)?;
    if opts.check {
        println!("{config:#?}");
        return Ok(0);
    }
    // Refused at once when another agent holds the socket, before anything is loaded.
    let ctl = CtlServer::bind(&config.socket)?;
    let store = open_store(&config)?;
    // SAFETY: sysconf reads a system constant.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
    let mut collector = Collector::start(CollectorOptions {
        // Opt-in (config bpf_stats): the kernel's timing of every BPF run is not free.
        bpf_stats: config.bpf_stats,
        // One walk of the thread table a read (CollectorOptions::read_tries): a window is a
        // difference of totals, a slice flushed during the walk shows at the next read.
        read_tries: 1,
        // Processes born and gone between two reads share a row (docs/design.md, "The agent /
        // Cost"): under a fork loop each of them cost the agent microseconds a read.
        fold_short_lived_ns: config.limits.short_lived.as_nanos() as u64,
        record: Some(RecordConfig {
            frequency_hz: config.frequency_hz,
            // Four seconds of samples (`ring_bytes` sizes a quarter second), 8 to 256 MiB: the
            // ring must hold what comes while a window is being symbolized and written.
            ring_bytes: crate::record::ring_bytes(
                None,
                config.frequency_hz * 16,
                cpus,
                config.stack_bytes,
            ),
            follow_children: false,
            max_targets: pkprof_collect::record::DEFAULT_MAX_TARGETS,
            probes: Vec::new(),
            stack_bytes: config.stack_bytes,
            by_client: false,
            // Symbolizing its own stacks would parse and page in the agent's own debug
            // information, its largest memory (docs/design.md, "The agent / Bounded memory").
            skip_own_process: true,
            off_cpu: None,
            capture_wake_min_age_ns: CAPTURE_WAKE_MIN_AGE.as_nanos() as u64,
        }),
        ..CollectorOptions::default()
    })?;
    for off in collector.chains_off() {
        eprintln!("pkprof: {off}");
    }
    signals::install();
    signals::install_hup();
    let http = match config.listen {
        Some(addr) => Some(pkprof_live::http::Server::start(addr, config.metrics_top)?),
        None => None,
    };
    let mut symbolizer = Symbolizing(Symbolizer::new(SymbolizerOptions {
        lines: false,
        unwind_memory_bytes: (pkprof_symbolize::DEFAULT_UNWIND_MEMORY_MIB as usize) << 20,
    }));
    // The kernel's symbols read once now (the first window would otherwise pay for it while
    // the ring fills); JIT code of BPF programs loaded later is named `[bpf]+0x...`.
    symbolizer.0.snapshot_kernel_symbols();
    let bpf_stats = collector.bpf_stats_enabled();
    let mut kernel = Kernel::new(&mut collector);
    let tag_expire = Duration::from_secs_f64(pkprof_collect::DEFAULT_TAG_EXPIRE_S);
    let mut session = Session::new(
        &mut kernel,
        &mut symbolizer,
        TargetSet::System,
        &[],
        tag_expire,
        config.stack_bytes > 0,
    )
    .with_limits(config.limits.max_stacks, config.limits.max_groups)
    // Five wake-ups a second: control requests wait at most that long.
    .with_poll_every(Duration::from_millis(200));
    session.start()?;
    eprintln!(
        "pkprof: agent sampling at {} Hz per CPU, {} s windows, {}; control: {}{}",
        config.frequency_hz,
        config.window.as_secs_f64(),
        match &config.store {
            Some(s) => format!("store {}", s.dir.display()),
            None => "no store".into(),
        },
        config.socket.display(),
        http.as_ref()
            .map(|h| format!(", metrics: http://{}/metrics", h.local_addr()))
            .unwrap_or_default(),
    );
    let sinks = otlp_sink::sinks(&config).context("cannot start the OTLP push")?;
    let mut w = Windows {
        memory: MemoryWindows::new(config.memory_windows),
        deltas: Deltas::default(),
        store,
        sinks,
        cgroups: CgroupPaths::default(),
        start_unix_ns: meta::unix_ns(),
        started: Instant::now(),
        cpu_before: own_cpu_ns(),
        bpf_before: (0, 0),
        health: Health::new(bpf_stats),
        config,
    };
    let mut sampling = true;
    let mut next_publish = Instant::now();
    // Each frame of the accounting goes to /metrics and /stream once: the exposition settles a
    // process from the frame that shows it exited (a frame skipped would lose it from `other`,
    // one seen twice would count it twice).
    let mut published = 0;
    loop {
        session.step()?;
        publish_new(&http, &session, &mut published);
        while let Ok(Incoming { request, reply }) = ctl.requests.try_recv() {
            let answer = w.answer(request, &mut session, &mut sampling);
            publish_new(&http, &session, &mut published);
            let _ = reply.send(answer);
        }
        if signals::take_hup() {
            w.reload(opts.config.as_deref(), &opts.overrides);
        }
        if signals::stop_requested() {
            break;
        }
        if w.started.elapsed() >= w.config.window {
            w.close(&mut session)?;
            publish_new(&http, &session, &mut published);
        }
        if Instant::now() >= next_publish {
            next_publish = Instant::now() + Duration::from_secs(1);
            let (stacks, groups, dropped) = session.aggregate_size();
            w.health.open_window(stacks, groups, dropped);
            if let Some(h) = &http {
                h.set_extra(w.health.metrics(&w.store, &w.sinks, sampling));
            }
        }
    }
    w.close(&mut session)?;
    drop(session);
    drop(kernel);
    drop(collector);
    drop(ctl); // removes the socket
    eprintln!("pkprof: agent stopped; {} windows closed", w.health.windows);
    Ok(0)
}

/// Hands the accounting's latest frame to /metrics and /stream if it is one they have not had
/// (`published`: the session's read count they had it at).
fn publish_new(
    http: &Option<pkprof_live::http::Server>,
    session: &AgentSession<'_, '_>,
    published: &mut u64,
) {
    if let (Some(h), Some(frame)) = (http, session.last_frame_shared()) {
        if session.frames_read() != *published {
            *published = session.frames_read();
            h.publish(frame);
        }
    }
}

/// What the profile of a window says it profiled: the whole system.
fn system_targets() -> Targets {
    Targets {
        kind: TargetKind::System,
        ..Targets::default()
    }
}

/// The agent's recording loop over the real kernel side and symbolizer.
type AgentSession<'a, 'c> = Session<'a, Kernel<'c>, Symbolizing>;

impl Windows {
    /// Closes the open window and hands it to the sinks.
    fn close(&mut self, session: &mut AgentSession<'_, '_>) -> Result<()> {
        let closing = Instant::now();
        let mut recorded = session.take_window()?;
        let end_unix_ns = meta::unix_ns();
        let start_unix_ns = std::mem::replace(&mut self.start_unix_ns, end_unix_ns);
        self.started = Instant::now();
        let cpu_now = own_cpu_ns();
        let own_cpu = cpu_now.saturating_sub(std::mem::replace(&mut self.cpu_before, cpu_now));
        let frame = recorded.last_frame.clone().unwrap_or_default();
        let collector = session.kernel_mut().collector();
        let record_lost = collector.record_lost().unwrap_or_default();
        let bpf_stats = collector.bpf_stats_enabled();
        // The window's processes: their share of the totals since attach, the busiest kept.
        let sampled: std::collections::HashSet<u32> = recorded
            .aggregate
            .groups()
            .filter_map(|(_, l, _)| l.served.as_ref().map(|s| s.pid))
            .collect();
        let totals = std::mem::take(&mut recorded.processes);
        let wp = self.deltas.processes(
            &totals,
            &|pid| sampled.contains(&pid),
            self.config.limits.max_processes,
        );
        let exited: Vec<u32> = wp
            .processes
            .iter()
            .filter(|p| p.exited)
            .map(|p| p.pid)
            .collect();
        recorded.processes = wp.processes.into_iter().map(|p| (p.pid, p)).collect();
        let mut m = meta::build(meta::Inputs {
            pkprof_version: env!("CARGO_PKG_VERSION"),
            frequency_hz: self.config.frequency_hz,
            targets: system_targets(),
            start_unix_ns,
            end_unix_ns,
            frame: &frame,
            recorded: &recorded,
            kernel_lost: KernelLost {
                ring_buffer_full: record_lost.samples + record_lost.links,
                target_table_full: record_lost.targets,
            },
            pkprof_cpu_ns: own_cpu,
            bpf_stats,
        });
        m.cpu_time = self.window_cpu_time(&frame, &recorded);
        m.lost = self.deltas.lost(&m.lost);
        let bpf_now = (
            m.overhead.bpf_run_ns.unwrap_or(0),
            m.overhead.bpf_run_count.unwrap_or(0),
        );
        let (ns0, n0) = std::mem::replace(&mut self.bpf_before, bpf_now);
        if bpf_stats {
            m.overhead.bpf_run_ns = Some(bpf_now.0.saturating_sub(ns0));
            m.overhead.bpf_run_count = Some(bpf_now.1.saturating_sub(n0));
        }
        let dropped = recorded.aggregate.dropped();
        let extras = Extras {
            func_counts: Vec::new(),
            bpf_stats_unmeasured: self.config.bpf_stats && !bpf_stats,
            off_cpu: None,
        };
        let symbolizer = session.maps_mut();
        let mut profile = pkprof_recording::profile(m, &recorded, symbolizer, extras);
        for pid in exited {
            symbolizer.0.forget(pid);
        }
        // What only exited processes needed goes (docs/design.md, "The agent / Bounded memory").
        let trimmed = symbolizer.0.trim();
        let y = &mut self.health.symbolizer;
        y.processes_freed += trimmed.processes as u64;
        y.files_freed += trimmed.files as u64;
        y.open_files = symbolizer.0.open_files();
        y.unwind_bytes = symbolizer.0.unwind_table_bytes();
        // What was freed goes back to the system: glibc keeps freed heap (and raises its mmap
        // threshold after large frees), so the resident size would not come down otherwise.
        // SAFETY: malloc_trim only walks the allocator's own free lists.
        unsafe { libc::malloc_trim(0) };
        if dropped > 0 {
            profile.meta.warnings.push(format!(
                "{dropped} samples dropped: the window's stack or label limit was reached \
                 (limits.max_stacks, limits.max_groups)"
            ));
        }
        if wp.left_out > 0 {
            profile.meta.warnings.push(format!(
                "{} processes left out of the window's table (limits.max_processes)",
                wp.left_out
            ));
        }
        let ids: std::collections::BTreeSet<u64> = profile
            .samples
            .iter()
            .map(|s| s.cgroup_id)
            .filter(|id| *id != 0)
            .collect();
        profile.cgroups = self.cgroups.paths(&ids);
        self.health
            .closed(&profile, dropped, own_cpu, closing.elapsed());
        match &mut self.store {
            Some(st) => {
                if let Err(e) = st.write(&profile, end_unix_ns) {
                    self.health.store_error(e.to_string());
                }
            }
            None => self.memory.window(&profile),
        }
        for sink in &mut self.sinks {
            sink.window(&profile);
        }
        Ok(())
    }

    /// The window's exact CPU time by bucket: the accounting's buckets since attach made into the
    /// window's by difference, with the user processes' time split between those in the window's
    /// table (every user process is a target of the agent) and the rest (left out by the limit,
    /// untracked threads), as `meta::cpu_time` splits a recording's.
    fn window_cpu_time(
        &mut self,
        frame: &pkprof_accounting::Interval,
        recorded: &pkprof_recording::Recorded,
    ) -> pkprof_profile::CpuTime {
        let b = &frame.buckets;
        let user = b.processes_ns + b.other_ns;
        let since_attach = pkprof_profile::CpuTime {
            total_ns: b.wall_ns,
            idle_ns: b.idle_ns,
            processes_ns: 0,
            other_ns: user,
            kernel_ns: b.wall_ns.saturating_sub(b.idle_ns + user),
            untracked_ns: b.untracked_ns,
        };
        let mut w = self.deltas.cpu_time(&since_attach);
        let listed: u64 = (recorded.processes.values())
            .filter(|p| p.target)
            .map(|p| p.task_ns.saturating_add(p.served_ns))
            .sum();
        w.processes_ns = listed.min(w.other_ns);
        w.other_ns -= w.processes_ns;
        w
    }

    /// Answers a control request between steps.
    fn answer(
        &mut self,
        request: Request,
        session: &mut AgentSession<'_, '_>,
        sampling: &mut bool,
    ) -> Reply {
        match request {
            Request::Status => Ok(self
                .health
                .status_text(
                    &self.config,
                    &self.store,
                    &self.memory,
                    &self.sinks,
                    *sampling,
                )
                .into_bytes()),
            Request::Stop | Request::Start => {
                let on = request == Request::Start;
                let c = session.kernel_mut().collector();
                c.set_sampling(on).map_err(|e| e.to_string())?;
                *sampling = on;
                Ok(format!("sampling {}\n", if on { "on" } else { "off" }).into_bytes())
            }
            Request::Reset => {
                session.reset_window();
                self.memory.clear();
                Ok(b"open window and windows in memory dropped\n".to_vec())
            }
            Request::Flush => {
                self.close(session).map_err(|e| format!("{e:#}"))?;
                Ok(b"window closed\n".to_vec())
            }
            Request::Dump { since_ns } => {
                self.close(session).map_err(|e| format!("{e:#}"))?;
                let now = meta::unix_ns();
                let merged = match &self.store {
                    Some(st) => {
                        let l = store::load_range(st.dir(), since_ns, now)
                            .map_err(|e| e.to_string())?;
                        for s in &l.skipped {
                            tracing::warn!("dump skipped a window: {s}");
                        }
                        l.profile
                    }
                    None => {
                        let ws = self.memory.range(since_ns, now);
                        pkprof_agent::merge(ws.iter().map(|p| p.as_ref()))
                    }
                };
                let p = merged.ok_or("no window in that range")?;
                let mut bytes = Vec::new();
                pkprof_profile::write_profile(&p, &mut bytes).map_err(|e| e.to_string())?;
                Ok(bytes)
            }
        }
    }

    /// Re-reads the configuration (SIGHUP): the window length, the process limit, the store and
    /// its retention and the memory windows take effect; the rate, stack bytes, stack and group
    /// limits, the short-lived fold, socket and metrics address need a restart (said). A bad file keeps the running configuration.
    fn reload(&mut self, path: Option<&std::path::Path>, over: &Overrides) {
        let new = match Config::load(path, over) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("pkprof: SIGHUP: configuration not changed: {e}");
                return;
            }
        };
        let old = &self.config;
        if new.frequency_hz != old.frequency_hz
            || new.stack_bytes != old.stack_bytes
            || new.socket != old.socket
            || new.listen != old.listen
            || new.limits.max_stacks != old.limits.max_stacks
            || new.limits.max_groups != old.limits.max_groups
            || new.limits.short_lived != old.limits.short_lived
            || new.bpf_stats != old.bpf_stats
        {
            eprintln!(
                "pkprof: SIGHUP: frequency_hz, stack_bytes, bpf_stats, limits.max_stacks, \
                 limits.max_groups, limits.short_lived, socket and metrics.listen change at the \
                 next start"
            );
        }
        if new.store != old.store {
            match open_store(&new) {
                Ok(s) => self.store = s,
                Err(e) => {
                    eprintln!("pkprof: SIGHUP: store not changed: {e:#}");
                    return;
                }
            }
        }
        if new.push != old.push || new.labels != old.labels {
            match otlp_sink::sinks(&new) {
                Ok(s) => self.sinks = s,
                Err(e) => {
                    eprintln!("pkprof: SIGHUP: push not changed: {e}");
                    return;
                }
            }
        }
        self.memory = MemoryWindows::new(new.memory_windows);
        eprintln!("pkprof: SIGHUP: configuration re-read");
        self.config = Config {
            frequency_hz: old.frequency_hz,
            stack_bytes: old.stack_bytes,
            bpf_stats: old.bpf_stats,
            socket: old.socket.clone(),
            listen: old.listen,
            limits: pkprof_agent::config::Limits {
                max_processes: new.limits.max_processes,
                ..old.limits
            },
            ..new
        };
    }
}
