//! When `pkprof record` stops: Ctrl-C, the duration, the command's exit, or every target PID
//! gone; asked by the recording loop between polls.

use std::time::Instant;

use pkprof_recording::StopReason;

use crate::signals;
use crate::workload::Workload;

/// Stop conditions checked between polls.
pub struct StopWhen<'a> {
    pub deadline: Option<Instant>,
    pub child: Option<&'a mut Workload>,
    pub pids: Vec<u32>,
}

impl StopWhen<'_> {
    pub fn check(&mut self) -> Option<StopReason> {
        if signals::stop_requested() {
            return Some(StopReason::Interrupted);
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(StopReason::Duration);
        }
        if let Some(child) = self.child.as_mut() {
            if child.try_wait().is_some() {
                return Some(StopReason::CommandExited);
            }
        }
        if !self.pids.is_empty()
            && self
                .pids
                .iter()
                .all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        {
            return Some(StopReason::TargetsGone);
        }
        None
    }
}
