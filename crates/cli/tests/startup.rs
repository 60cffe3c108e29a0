//! Start-up: pkprof mounts tracefs itself when it is not mounted, and says so. The test unmounts
//! tracefs (and debugfs, whose tracing/ directory would automount it) in a private mount
//! namespace of its own, so the rest of the machine keeps its mounts.

mod common;

use std::process::Command;

use common::pkprof_bin;

#[test]
#[ignore = "needs root and BPF"]
fn mounts_tracefs_when_missing() {
    let script = format!(
        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null; \
         umount /sys/kernel/debug 2>/dev/null; \
         if [ -d /sys/kernel/tracing/events ]; then echo 'tracefs still mounted' >&2; exit 3; fi; \
         {} top --batch -n 1 -d 0.3 >/dev/null && test -d /sys/kernel/tracing/events",
        pkprof_bin().display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "status {}, stderr {stderr}",
        out.status
    );
    assert!(
        stderr.contains("pkprof: mounted tracefs at /sys/kernel/tracing"),
        "pkprof says it mounted tracefs: {stderr}"
    );
}
