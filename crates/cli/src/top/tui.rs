//! placeholder for the ratatui view
use super::TopOptions;
use anyhow::Result;
use pkprof_accounting::Frame;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
pub fn run(opts: &TopOptions, frames: &Receiver<Arc<Frame>>) -> Result<()> {
    super::batch::run(opts, frames)
}
