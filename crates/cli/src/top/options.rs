//! The plain options of `pkprof top`, and their checks that need the system (regex, cgroup, PIDs).

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use pkprof_accounting::Filter;
use pkprof_collect::CollectorOptions;

use crate::targets;

#[derive(Clone, Debug)]
pub struct TopOptions {
    pub delay: Duration,
    pub batch: bool,
    pub json: bool,
    pub iterations: Option<u64>,
    pub per_thread: bool,
    /// Text frames show the wall-time breakdown (`--wall`).
    pub wall: bool,
    pub max_rows: Option<usize>,
    pub pids: Vec<u32>,
    pub comm: Option<String>,
    pub cgroup: Option<PathBuf>,
    pub syscalls: bool,
    pub max_threads: u32,
    pub max_tags: u32,
    pub tag_expire: Duration,
    pub bpf_stats: bool,
    /// `--server`: the server chain runs (+SRV%).
    pub server: bool,
    pub listen: Option<SocketAddr>,
    pub allow_remote: bool,
    pub udp: Option<String>,
    pub metrics_top: usize,
}

impl TopOptions {
    pub fn collector(&self) -> CollectorOptions {
        CollectorOptions {
            syscalls: self.syscalls,
            max_threads: self.max_threads,
            max_tags: self.max_tags,
            tag_expire_ns: self.tag_expire.as_nanos() as u64,
            bpf_stats: self.bpf_stats,
            record: None,
            opt_in_chains: if self.server {
                vec!["server"]
            } else {
                Vec::new()
            },
            ..CollectorOptions::default()
        }
    }

    /// Builds the row filter; a bad regex, a missing cgroup or a PID that does not exist is an error.
    /// Rows are processes unless -H: then a thread id selects its process (said on stderr), as in
    /// `record`; with -H it selects that thread's row.
    pub fn filter(&self) -> Result<Filter> {
        let pids = if self.per_thread {
            targets::check_tasks(&self.pids)?;
            self.pids.clone()
        } else {
            targets::resolve_pids(&self.pids, "showing")?
        };
        let comm = match &self.comm {
            Some(re) => Some(
                regex::Regex::new(re)
                    .with_context(|| format!("--comm {re:?} is not a valid regular expression"))?,
            ),
            None => None,
        };
        let cgroup_ids = match &self.cgroup {
            Some(path) => vec![cgroup_id(&targets::resolve_cgroup(path)?)?],
            None => Vec::new(),
        };
        Ok(Filter {
            pids,
            comm,
            cgroup_ids,
        })
    }
}

/// A cgroup v2 directory's id is its inode number (what bpf_get_current_cgroup_id returns).
fn cgroup_id(dir: &Path) -> Result<u64> {
    let meta = std::fs::metadata(dir).with_context(|| format!("cgroup {}", dir.display()))?;
    Ok(meta.ino())
}
