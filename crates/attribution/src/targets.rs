//! What is profiled, and the bucket each sample falls in: a profiled process, OTHER (a process
//! that is not profiled), KERNEL (work with no beneficiary, kernel threads) or IDLE.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use pkprof_profile::Bucket;

use crate::events::{SampleContext, Served};

/// The profiled processes.
#[derive(Clone, Debug)]
pub enum TargetSet {
    /// `-a`: every process.
    System,
    /// `-- CMD` and `-p`: the kernel's target set (children followed at fork for a command).
    Kernel,
    /// `--cgroup PATH`: threads in the cgroup (v2) or any cgroup below it.
    Cgroup(CgroupTree),
}

impl TargetSet {
    /// The bucket of work done in `context` for `served` (None: nobody known).
    pub fn bucket(&mut self, context: SampleContext, served: Option<&Served>) -> Bucket {
        if context == SampleContext::Idle {
            return Bucket::Idle;
        }
        let Some(s) = served else {
            return Bucket::Kernel;
        };
        if s.kthread || s.pid == 0 {
            return Bucket::Kernel;
        }
        let target = match self {
            TargetSet::System => true,
            TargetSet::Kernel => s.target,
            TargetSet::Cgroup(tree) => tree.contains(s.cgroup_id),
        };
        if target {
            Bucket::Process
        } else {
            Bucket::Other
        }
    }
}

/// The ids (directory inode numbers) of a cgroup v2 directory and its descendants; rescanned when
/// an unknown id is asked about, so cgroups created during the recording count too.
#[derive(Clone, Debug)]
pub struct CgroupTree {
    root: PathBuf,
    ids: HashSet<u64>,
    misses: HashSet<u64>,
}

impl CgroupTree {
    pub fn new(root: &Path) -> std::io::Result<Self> {
        let mut tree = CgroupTree {
            root: root.to_path_buf(),
            ids: HashSet::new(),
            misses: HashSet::new(),
        };
        tree.rescan()?;
        Ok(tree)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn rescan(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let mut stack = vec![self.root.clone()];
        let mut first = true;
        while let Some(dir) = stack.pop() {
            let meta = match std::fs::metadata(&dir) {
                Ok(m) => m,
                Err(e) if first => return Err(e),
                Err(_) => continue,
            };
            first = false;
            self.ids.insert(meta.ino());
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        stack.push(e.path());
                    }
                }
            }
        }
        Ok(())
    }

    pub fn contains(&mut self, id: u64) -> bool {
        if self.ids.contains(&id) {
            return true;
        }
        if id == 0 || self.misses.contains(&id) {
            return false;
        }
        let _ = self.rescan();
        if self.ids.contains(&id) {
            return true;
        }
        self.misses.insert(id);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(pid: u32, target: bool, kthread: bool) -> Served {
        Served {
            pid,
            tid: pid,
            target,
            kthread,
            ..Served::default()
        }
    }

    #[test]
    fn buckets() {
        let mut t = TargetSet::Kernel;
        let ctx = SampleContext::User;
        assert_eq!(
            t.bucket(ctx, Some(&served(5, true, false))),
            Bucket::Process
        );
        assert_eq!(t.bucket(ctx, Some(&served(6, false, false))), Bucket::Other);
        assert_eq!(t.bucket(ctx, Some(&served(7, false, true))), Bucket::Kernel);
        assert_eq!(t.bucket(SampleContext::SoftIrq(3), None), Bucket::Kernel);
        assert_eq!(t.bucket(SampleContext::Idle, None), Bucket::Idle);
        let mut all = TargetSet::System;
        assert_eq!(
            all.bucket(ctx, Some(&served(6, false, false))),
            Bucket::Process
        );
    }

    #[test]
    fn cgroup_tree_follows_new_directories() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("pkprof-cg-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        let mut tree = CgroupTree::new(&dir).unwrap();
        let a = std::fs::metadata(dir.join("a")).unwrap().ino();
        assert!(tree.contains(a));
        std::fs::create_dir_all(dir.join("b")).unwrap();
        let b = std::fs::metadata(dir.join("b")).unwrap().ino();
        assert!(tree.contains(b));
        assert!(!tree.contains(1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
