//! Paths of the cgroups samples name by id: a cgroup v2 id is its directory's inode number, so
//! the cgroup2 mount is walked to map ids to paths (docs/design.md, "The agent": container
//! labels). The walk is redone when a window names an id not seen yet (at most once a second);
//! ids of cgroups removed since (a container that exited) keep their last known path while
//! windows still name them.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use pkprof_profile::CgroupInfo;

/// Most directories one walk visits (a bound on a machine with a pathological cgroup tree).
const MAX_DIRS: usize = 200_000;

#[derive(Default)]
pub struct CgroupPaths {
    paths: HashMap<u64, String>,
    last_walk: Option<Instant>,
}

fn walk(root: &Path, rel: &str, out: &mut HashMap<u64, String>, budget: &mut usize) {
    let Ok(rd) = std::fs::read_dir(root.join(rel.trim_start_matches('/'))) else {
        return;
    };
    for d in rd.flatten() {
        if *budget == 0 {
            return;
        }
        let Ok(ft) = d.file_type() else { continue };
        if !ft.is_dir() {
            continue;
        }
        *budget -= 1;
        let child = format!("{rel}/{}", d.file_name().to_string_lossy());
        if let Ok(m) = d.metadata() {
            out.insert(m.ino(), child.clone());
        }
        walk(root, &child, out, budget);
    }
}

impl CgroupPaths {
    /// The paths of `ids` (those found).
    pub fn paths(&mut self, ids: &BTreeSet<u64>) -> Vec<CgroupInfo> {
        let unknown = ids.iter().any(|id| !self.paths.contains_key(id));
        let due = self
            .last_walk
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if unknown && due {
            let mut fresh = HashMap::new();
            // The cgroup2 mount: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid system
            // (where /sys/fs/cgroup holds v1 hierarchies, whose inodes are no cgroup v2 ids).
            if let Some(root) = crate::targets::cgroup2_mounts().first() {
                if let Ok(m) = std::fs::metadata(root) {
                    fresh.insert(m.ino(), "/".to_string());
                }
                walk(root, "", &mut fresh, &mut MAX_DIRS.clone());
            }
            // Removed cgroups that this window still names keep their path.
            for id in ids {
                if let (false, Some(p)) = (fresh.contains_key(id), self.paths.get(id)) {
                    fresh.insert(*id, p.clone());
                }
            }
            self.paths = fresh;
            self.last_walk = Some(Instant::now());
        }
        ids.iter()
            .filter_map(|id| {
                self.paths.get(id).map(|p| CgroupInfo {
                    id: *id,
                    path: p.clone(),
                })
            })
            .collect()
    }
}
