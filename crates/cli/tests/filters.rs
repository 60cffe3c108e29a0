//! Row filters against real processes: a cgroup v2 directory made by the test, a name regex and a
//! PID list each keep exactly the processes they name.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use common::{build_workload, rows, Top};

/// A cgroup v2 directory, removed (after its processes are gone) on drop.
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn cgroup2_root() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .expect("a cgroup2 hierarchy is mounted")
}

struct Busy(Child);

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn busy(secs: &str) -> Busy {
    Busy(
        Command::new(build_workload("serve_busy"))
            .arg(secs)
            .spawn()
            .unwrap(),
    )
}

#[test]
#[ignore = "needs root and BPF"]
fn cgroup_filter_keeps_only_its_members() {
    let cg = Cgroup(cgroup2_root().join(format!("pkprof-filter-test-{}", std::process::id())));
    std::fs::create_dir(&cg.0).expect("creating a cgroup v2 directory");
    let inside = busy("6");
    let outside = busy("6");
    // Moved after start: pkprof follows the move through cgroup_attach_task.
    std::fs::write(cg.0.join("cgroup.procs"), inside.0.id().to_string()).unwrap();
    let (i, o) = (inside.0.id() as u64, outside.0.id() as u64);

    let mut top = Top::start(&["-d", "0.5", "--cgroup", cg.0.to_str().unwrap()]);
    let frame = top.wait_for(Duration::from_secs(10), |f| {
        rows(f).iter().any(|r| r["pid"] == i)
    });
    let pids: Vec<u64> = rows(&frame)
        .iter()
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(
        pids,
        vec![i],
        "only the member of the cgroup is shown, not {o}: {pids:?}"
    );
    // Its cgroup id in the row is the directory's inode number, as the filter resolved it.
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(&cg.0).unwrap().ino();
    assert_eq!(rows(&frame)[0]["cgroup_id"].as_u64(), Some(ino));
    top.stop();
}

#[test]
#[ignore = "needs root and BPF"]
fn name_and_pid_filters() {
    let a = busy("4");
    let b = busy("4");
    let (pa, pb) = (a.0.id() as u64, b.0.id() as u64);

    let mut top = Top::start(&["-d", "0.5", "-p", &pa.to_string()]);
    let f = top.wait_for(Duration::from_secs(10), |f| !rows(f).is_empty());
    let pids: Vec<u64> = rows(&f)
        .iter()
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, vec![pa], "-p keeps only {pa}");
    top.stop();

    let mut top = Top::start(&["-d", "0.5", "--comm", "^workload-serve_"]);
    let f = top.wait_for(Duration::from_secs(10), |f| rows(f).len() >= 2);
    let mut pids: Vec<u64> = rows(&f)
        .iter()
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    pids.sort();
    let mut want = vec![pa, pb];
    want.sort();
    assert_eq!(pids, want, "--comm keeps both workloads and nothing else");
    top.stop();
}
