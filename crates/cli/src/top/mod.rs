//! `pkprof top`: a sampling thread reads the kernel counters every refresh and publishes frames;
//! the main thread shows them (TUI or batch text/JSON) while the servers carry them elsewhere.

mod batch;
mod options;
mod other_fns;
mod sampler;
mod tui;

use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pkprof_accounting::Interval;

pub use options::TopOptions;

use crate::signals;

pub fn run(opts: TopOptions) -> Result<()> {
    let filter = opts.filter()?;
    let interactive = !opts.batch && !opts.json;
    if interactive && !std::io::stdout().is_terminal() {
        bail!("stdout is not a terminal: use --batch for text frames or --json for JSON lines");
    }
    let mut sinks: Vec<sampler::Sink> = Vec::new();
    if let Some(addr) = opts.listen {
        if !addr.ip().is_loopback() && !opts.allow_remote {
            bail!("--listen {addr} is not a loopback address: add --allow-remote to serve other machines");
        }
        let server = pkprof_live::http::Server::start(addr, opts.metrics_top)
            .with_context(|| format!("serving metrics on {addr}"))?;
        eprintln!(
            "pkprof: serving http://{}/metrics and /stream",
            server.local_addr()
        );
        sinks.push(Box::new(move |f: &Arc<Interval>| server.publish(f)));
    }
    if let Some(dest) = &opts.udp {
        let udp = pkprof_live::udp::UdpSink::connect(dest, opts.max_rows)
            .with_context(|| format!("sending frames to udp {dest}"))?;
        sinks.push(Box::new(move |f: &Arc<Interval>| udp.send(f)));
    }

    signals::install();
    let (frames_tx, frames_rx) = mpsc::channel::<Arc<Interval>>();
    let per_thread = Arc::new(AtomicBool::new(opts.per_thread));
    let sampler = sampler::spawn(&opts, per_thread.clone(), filter, frames_tx, sinks)?;
    let shown = if interactive {
        tui::run(&opts, &frames_rx, &per_thread)
    } else {
        batch::run(&opts, &frames_rx)
    };
    signals::request_stop();
    let sampled = sampler
        .join()
        .map_err(|_| anyhow::anyhow!("the sampling thread panicked"))?;
    shown.and(sampled)
}
