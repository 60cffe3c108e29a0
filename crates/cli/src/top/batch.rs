//! Batch output: text frames like `top -b`, or JSON lines, on stdout.

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use anyhow::{Context, Result};
use pkprof_accounting::Interval;

use super::TopOptions;
use crate::signals;

pub fn run(opts: &TopOptions, frames: &Receiver<Arc<Interval>>) -> Result<()> {
    for (shown, frame) in (1u64..).zip(frames.iter()) {
        let text = if opts.json {
            pkprof_live::json::render(&frame) + "\n"
        } else if opts.wall {
            pkprof_live::wall_text::render(&frame, opts.max_rows) + "\n"
        } else {
            pkprof_live::text::render(&frame, opts.max_rows) + "\n"
        };
        if !crate::stdout::write(text.as_bytes()).context("writing to stdout")? {
            break; // the reader closed the pipe (| head)
        }
        if opts.iterations.is_some_and(|n| shown >= n) || signals::stop_requested() {
            break;
        }
    }
    Ok(())
}
