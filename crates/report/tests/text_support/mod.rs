//! Shared by the text-report tests: small profiles built in code, with numbers chosen so that
//! every expected figure can be worked out by hand, and golden-file comparison with a bless switch.

#![allow(dead_code)]

use std::path::PathBuf;

use pkprof_profile::{
    Bucket, Context, CpuTime, Frame, FrameKind, FuncCount, Meta, ProcessInfo, Profile,
    ProfileBuilder, SampleGroup, SyscallStat,
};

/// Builds a profile from stacks written as `main;handle;sys_read;vfs_read`, root first: a frame
/// named `sys_*` is the syscall boundary, the frames after it are kernel frames, and a `k:`
/// prefix makes a kernel frame anywhere (interrupts, kernel threads, idle).
pub struct Builder {
    b: ProfileBuilder,
}

impl Builder {
    /// `hz` samples per second per CPU for `secs` seconds on `cpus` CPUs.
    pub fn new(hz: u64, secs: u64, cpus: u32) -> Builder {
        let period_ns = 1_000_000_000 / hz;
        let start = 1_700_000_000_000_000_000;
        let total_ns = secs * 1_000_000_000 * u64::from(cpus);
        Builder {
            b: ProfileBuilder::new(Meta {
                pkprof_version: "0.1.0".into(),
                kernel: "6.1.0-test".into(),
                hostname: "test".into(),
                cpus,
                start_unix_ns: start,
                end_unix_ns: start + secs * 1_000_000_000,
                frequency_hz: hz,
                period_ns,
                cpu_time: CpuTime {
                    total_ns,
                    idle_ns: total_ns / 2,
                    processes_ns: total_ns * 3 / 8,
                    other_ns: total_ns / 16,
                    kernel_ns: total_ns / 16,
                    ..CpuTime::default()
                },
                ..Meta::default()
            }),
        }
    }

    /// Adds `count` samples of `stack` served to `pid` (0 for KERNEL and IDLE) in `bucket`.
    pub fn add(
        &mut self,
        pid: u32,
        comm: &str,
        bucket: Bucket,
        context: Context,
        stack: &str,
        count: u64,
    ) -> &mut Self {
        let mut frames = Vec::new();
        let mut in_kernel = false;
        for name in stack.split(';').filter(|n| !n.is_empty()) {
            let (kind, name) = if name.starts_with("[truncated") {
                (FrameKind::Truncated, name)
            } else if let Some(k) = name.strip_prefix("k:") {
                (FrameKind::Kernel, k)
            } else if name.starts_with("sys_") {
                in_kernel = true;
                (FrameKind::Syscall, name)
            } else if in_kernel {
                (FrameKind::Kernel, name)
            } else {
                (FrameKind::User, name)
            };
            let module = match kind {
                FrameKind::User => "/usr/bin/app",
                FrameKind::Kernel => "[kernel]",
                FrameKind::Syscall => "[syscall]",
                FrameKind::Truncated => "[truncated]",
                FrameKind::Python => "app.py",
            };
            frames.push(self.b.frame(Frame {
                kind,
                name: name.into(),
                module: module.into(),
                symbolized: true,
                ..Frame::default()
            }));
        }
        let stack = self.b.stack(frames);
        self.b.sample(SampleGroup {
            stack,
            pid,
            tid: pid,
            comm: comm.into(),
            current_pid: pid,
            bucket,
            context,
            cgroup_id: if pid == 0 { 0 } else { 4000 + u64::from(pid) },
            count,
        });
        self
    }

    /// Samples of a profiled process in user mode (or in a syscall when the stack has one).
    pub fn proc(&mut self, pid: u32, comm: &str, stack: &str, count: u64) -> &mut Self {
        let ctx = if stack.contains("sys_") {
            Context::Syscall
        } else {
            Context::User
        };
        self.add(pid, comm, Bucket::Process, ctx, stack, count)
    }

    pub fn process(&mut self, pid: u32, comm: &str) -> &mut Self {
        self.b.process(ProcessInfo {
            pid,
            ppid: 1,
            comm: comm.into(),
            exe: format!("/usr/bin/{comm}"),
            target: true,
            ..ProcessInfo::default()
        });
        self
    }

    pub fn syscall(&mut self, pid: u32, name: &str, count: u64) -> &mut Self {
        self.b.syscall(SyscallStat {
            pid,
            nr: 0,
            name: name.into(),
            count,
            total_ns: count * 1000,
            errors: 0,
        });
        self
    }

    pub fn func_count(&mut self, pid: u32, function: &str, count: u64) -> &mut Self {
        self.b.func_count(FuncCount {
            pid,
            binary: "/usr/bin/app".into(),
            function: function.into(),
            count,
        });
        self
    }

    pub fn meta(&mut self) -> &mut Meta {
        self.b.meta_mut()
    }

    pub fn build(self) -> Profile {
        self.b.finish()
    }
}

/// One busy CPU of two for 1 s at 100 Hz, on a machine whose idle CPU took almost no samples, with
/// losses and exact counts of routines that were never sampled:
///
/// | stack                                  | samples |
/// | -------------------------------------- | ------- |
/// | pid 100 `gz`: main;deflate_slow        | 94      |
/// | pid 100: main;sys_read;vfs_read        | 2       |
/// | IDLE: do_idle                          | 4       |
///
/// The accounting: 2 s of CPU, 1 s idle (50%), where the samples say 4%. `deflate_slow`'s share of
/// all CPU is 94 x 10 ms / 2 s = 47%, not 94%. Lost: ring buffer full 761, user stacks 3.
/// Exact counts of pid 100: deflate 600 calls (never sampled), read 12 (sampled), write 7, openat
/// 3, close 3, mmap 9 (never sampled); of pid 200 (`helper`, not profiled): futex 5.
pub fn counted_lossy() -> Profile {
    let mut b = Builder::new(100, 1, 2);
    b.process(100, "gz").process(200, "helper");
    b.meta().lost.ring_buffer_full = 761;
    b.meta().lost.user_stack_errors = 3;
    let c = &mut b.meta().cpu_time;
    (c.idle_ns, c.processes_ns, c.other_ns, c.kernel_ns) =
        (1_000_000_000, 960_000_000, 20_000_000, 20_000_000);
    b.proc(100, "gz", "main;deflate_slow", 94)
        .proc(100, "gz", "main;sys_read;vfs_read", 2)
        .add(0, "swapper/1", Bucket::Idle, Context::Idle, "k:do_idle", 4);
    b.func_count(100, "deflate", 600)
        .syscall(100, "read", 12)
        .syscall(100, "write", 7)
        .syscall(100, "openat", 3)
        .syscall(100, "close", 3)
        .syscall(100, "mmap", 9)
        .syscall(200, "futex", 5);
    let mut p = b.build();
    // pid 200 is not a target: its counts belong to the OTHER bucket.
    p.processes[1].target = false;
    p
}

/// A small profile of one server (pid 100) and one client (pid 200) over 1 s on 2 CPUs at
/// 100 Hz (10 ms a sample): 200 samples, 100 of them idle.
///
/// | stack (pid 100 unless said)                   | samples |
/// | --------------------------------------------- | ------- |
/// | main;handle;parse                             | 30      |
/// | main;handle;sys_read;vfs_read;copy_to_user    | 20      |
/// | main;handle                                   | 10      |
/// | main;log;sys_write;vfs_write                  | 10      |
/// | pid 200: main;work                            | 20      |
/// | OTHER pid 300: net_rx_action;udp_rcv          | 5       |
/// | KERNEL: rcu_core                              | 5       |
/// | IDLE: do_idle;default_idle                    | 100     |
///
/// Exact counts: pid 100 made 400 read and 50 write syscalls and called `handle` 1000 times.
pub fn small() -> Profile {
    let mut b = Builder::new(100, 1, 2);
    b.process(100, "server").process(200, "client");
    b.proc(100, "server", "main;handle;parse", 30)
        .proc(
            100,
            "server",
            "main;handle;sys_read;vfs_read;copy_to_user",
            20,
        )
        .proc(100, "server", "main;handle", 10)
        .proc(100, "server", "main;log;sys_write;vfs_write", 10)
        .proc(200, "client", "main;work", 20)
        .add(
            300,
            "nginx",
            Bucket::Other,
            Context::SoftIrq(3),
            "k:net_rx_action;k:udp_rcv",
            5,
        )
        .add(
            0,
            "swapper/0",
            Bucket::Kernel,
            Context::SoftIrq(9),
            "k:rcu_core",
            5,
        )
        .add(
            0,
            "swapper/0",
            Bucket::Idle,
            Context::Idle,
            "k:do_idle;k:default_idle",
            100,
        );
    b.syscall(100, "read", 400)
        .syscall(100, "write", 50)
        .syscall(100, "openat", 3)
        .func_count(100, "handle", 1000);
    b.build()
}

/// C called from A in 40 samples and from B in 60 (pid 1, 10 ms a sample).
pub fn two_parents() -> Profile {
    let mut b = Builder::new(100, 1, 1);
    b.proc(1, "app", "main;A;C", 40)
        .proc(1, "app", "main;B;C", 60);
    b.build()
}

/// A and B call each other (a cycle), A also calls itself, both call C (pid 1, 10 ms a sample).
///
/// | stack          | samples | leaf | leaves the cycle from |
/// | -------------- | ------- | ---- | --------------------- |
/// | main;A;B       | 10      | B    | -                     |
/// | main;A;B;A     | 20      | A    | -                     |
/// | main;A;B;C     | 5       | C    | B                     |
/// | main;A;B;A;C   | 7       | C    | A                     |
/// | main;C         | 3       | C    | -                     |
/// | main;A;A       | 4       | A    | -                     |
///
/// Cycle {A, B}: total 46, self 34, children 12; member A self 24 children 7, B self 10
/// children 5. C: self 15 from main 3, B 5, A 7. main: total 49, all children.
pub fn cycle() -> Profile {
    let mut b = Builder::new(100, 1, 1);
    b.proc(1, "app", "main;A;B", 10)
        .proc(1, "app", "main;A;B;A", 20)
        .proc(1, "app", "main;A;B;C", 5)
        .proc(1, "app", "main;A;B;A;C", 7)
        .proc(1, "app", "main;C", 3)
        .proc(1, "app", "main;A;A", 4);
    b.build()
}

/// `small()`'s programs recorded for 4 s at 50 Hz (20 ms a sample) on 2 CPUs after a change:
/// 400 samples, 200 idle; `parse` now takes 90 samples (22.5% of all, was 15%), `work` 20 (5%,
/// was 10%), and `compress` (new) 30.
pub fn changed() -> Profile {
    let mut b = Builder::new(50, 4, 2);
    b.process(100, "server").process(200, "client");
    b.proc(100, "server", "main;handle;parse", 90)
        .proc(
            100,
            "server",
            "main;handle;sys_read;vfs_read;copy_to_user",
            40,
        )
        .proc(100, "server", "main;handle", 10)
        .proc(100, "server", "main;handle;compress", 30)
        .proc(200, "client", "main;work", 20)
        .add(
            0,
            "swapper/0",
            Bucket::Kernel,
            Context::SoftIrq(9),
            "k:rcu_core",
            10,
        )
        .add(
            0,
            "swapper/0",
            Bucket::Idle,
            Context::Idle,
            "k:do_idle;k:default_idle",
            200,
        );
    b.build()
}

/// Compares `actual` with `tests/golden/NAME` ([`pkprof_golden::assert_golden`]).
#[track_caller]
pub fn assert_golden(name: &str, actual: &str) {
    pkprof_golden::assert_golden(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name),
        actual,
    );
}

/// Runs a report writer into a string.
pub fn render(
    f: impl FnOnce(&mut dyn std::io::Write) -> Result<(), pkprof_report::ReportError>,
) -> String {
    let mut out = Vec::new();
    f(&mut out).expect("report");
    String::from_utf8(out).expect("UTF-8 report")
}
