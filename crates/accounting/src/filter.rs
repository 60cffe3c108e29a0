//! Which rows an interval keeps: by PID/TID, by command name, by cgroup.

use regex::Regex;

/// An empty filter keeps everything; each set criterion must match.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Keep rows whose pid (or tid) is listed.
    pub pids: Vec<u32>,
    /// Keep rows whose command name matches.
    pub comm: Option<Regex>,
    /// Keep rows whose cgroup id (the cgroup directory's inode number) is listed.
    pub cgroup_ids: Vec<u64>,
}

impl Filter {
    pub fn keeps(&self, pid: u32, tid: Option<u32>, comm: &str, cgroup_id: u64) -> bool {
        (self.pids.is_empty()
            || self.pids.contains(&pid)
            || tid.is_some_and(|t| self.pids.contains(&t)))
            && self.comm.as_ref().is_none_or(|re| re.is_match(comm))
            && (self.cgroup_ids.is_empty() || self.cgroup_ids.contains(&cgroup_id))
    }
}
