//! Made-up profiles for tests and benchmarks: [`synthetic`] of any size, deterministic from a
//! seed, and [`rich`], small but using every enum variant, optional field and odd string.

use crate::model::*;

/// splitmix64: a tiny deterministic generator, good enough to spread made-up data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0; the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const MODULES: [&str; 6] = [
    "/usr/bin/server",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libssl.so.3",
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/opt/app/libengine.so",
    "/usr/lib/x86_64-linux-gnu/libz.so.1",
];
const COMMS: [&str; 8] = [
    "server",
    "worker-1",
    "worker-2",
    "nginx",
    "postgres",
    "kworker/0:1",
    "ksoftirqd/0",
    "dd",
];
const SYSCALLS: [&str; 6] = ["read", "write", "sendto", "recvfrom", "epoll_wait", "futex"];

/// A profile of `samples` sample groups (rows: the cost driver of file size and read/write time)
/// over `stacks` stacks of 5 to 15 frames (10 on average) drawn from `frames` frames, the same
/// for the same arguments. Frames are ~60% user, ~5% syscall, ~35% kernel; stacks are user
/// frames, then sometimes a syscall frame and kernel frames. Stacks are distinct while
/// `stacks` <= (0.6 `frames`)^2, and sample groups have distinct (stack, tid). Counts are mostly
/// 1 with a long tail, so `total_samples()` is a little above `samples`.
pub fn synthetic(samples: u64, stacks: u32, frames: u32, seed: u64) -> Profile {
    let mut rng = Rng(seed);
    let frames = frames.max(3);
    let stacks = stacks.max(1);
    let n_user = (frames * 3 / 5).max(1);
    let n_sys = (frames / 20).max(1);
    let n_kernel = frames - n_user - n_sys;
    let mut p = Profile {
        meta: synthetic_meta(samples, seed),
        ..Profile::default()
    };
    for i in 0..frames {
        let (kind, name, module) = if i < n_user {
            let m = MODULES[rng.below(MODULES.len() as u64) as usize];
            (
                FrameKind::User,
                format!("app::module{}::function_{i}", i % 97),
                m.to_string(),
            )
        } else if i < n_user + n_sys {
            let name = format!("sys_{}", SYSCALLS[(i % SYSCALLS.len() as u32) as usize]);
            (FrameKind::Syscall, name, "[syscall]".to_string())
        } else {
            (
                FrameKind::Kernel,
                format!("kernel_function_{i}"),
                "[kernel]".to_string(),
            )
        };
        let symbolized = rng.below(20) != 0;
        let offset = rng.below(1 << 24);
        let name = if symbolized {
            name
        } else {
            format!("{module}+{offset:#x}")
        };
        let with_lines = kind == FrameKind::User && rng.below(2) == 0;
        p.frames.push(Frame {
            kind,
            name,
            module,
            offset,
            symbolized,
            file: with_lines.then(|| format!("src/module{}.rs", i % 97)),
            line: with_lines.then(|| rng.below(5000) as u32 + 1),
            inlined: with_lines && rng.below(4) == 0,
            build_id: String::new(),
        });
    }
    for j in 0..stacks {
        let len = 5 + rng.below(11) as u32;
        // The first two frames spell `j` in base n_user, which keeps stacks distinct.
        let mut f = vec![j % n_user, (j / n_user) % n_user];
        let user_len = if rng.below(2) == 0 {
            len
        } else {
            2 + rng.below(u64::from(len - 2)) as u32
        };
        while (f.len() as u32) < user_len {
            f.push(rng.below(n_user.into()) as u32);
        }
        if (f.len() as u32) < len {
            f.push(n_user + rng.below(n_sys.into()) as u32);
        }
        while (f.len() as u32) < len && n_kernel > 0 {
            f.push(n_user + n_sys + rng.below(n_kernel.into()) as u32);
        }
        p.stacks.push(Stack { frames: f });
    }
    let mut pids = Vec::new();
    for i in 0..samples {
        let stack = (i % u64::from(stacks)) as u32;
        let round = i / u64::from(stacks);
        // Each round uses one thread id, so (stack, tid) is distinct; 8 threads per process.
        let tid = 1000 + round as u32;
        let pid = 1000 + (round as u32 & !7);
        let (bucket, context) = match rng.below(16) {
            0 => (Bucket::Kernel, Context::SoftIrq(rng.below(10) as u8)),
            1 => (Bucket::Idle, Context::Idle),
            2 => (Bucket::Other, Context::Kworker),
            3 | 4 => (Bucket::Process, Context::SoftIrq(3)),
            5 => (Bucket::Process, Context::HardIrq),
            6 => (Bucket::Process, Context::KernelTask),
            7..=9 => (Bucket::Process, Context::Syscall),
            _ => (Bucket::Process, Context::User),
        };
        let (pid, tid) = if matches!(bucket, Bucket::Kernel | Bucket::Idle) {
            (0, tid) // tid kept so groups stay distinct
        } else {
            (pid, tid)
        };
        if pid != 0 && pids.last() != Some(&pid) {
            pids.push(pid);
        }
        let count = if rng.below(8) == 0 {
            1 + rng.below(100)
        } else {
            1
        };
        p.samples.push(SampleGroup {
            stack,
            pid,
            tid,
            comm: COMMS[(pid as usize / 8) % COMMS.len()].to_string(),
            current_pid: if rng.below(4) == 0 { pid + 8 } else { pid },
            bucket,
            context,
            cgroup_id: 4000 + u64::from(pid % 5),
            count,
        });
    }
    for &pid in &pids {
        let user_ns = rng.below(1_000_000_000);
        let sys_ns = rng.below(1_000_000_000);
        p.processes.push(ProcessInfo {
            pid,
            ppid: 1,
            comm: COMMS[(pid as usize / 8) % COMMS.len()].to_string(),
            exe: MODULES[0].to_string(),
            target: pid % 16 == 0,
            exited: rng.below(10) == 0,
            task_ns: user_ns + sys_ns,
            user_ns,
            sys_ns,
            hardirq_ns: rng.below(1_000_000),
            softirq_ns: rng.below(10_000_000),
            served_ns: rng.below(100_000_000),
        });
        for (nr, name) in SYSCALLS.iter().enumerate() {
            p.syscalls.push(SyscallStat {
                pid,
                nr: nr as u32,
                name: name.to_string(),
                count: rng.below(100_000),
                total_ns: rng.below(1_000_000_000),
                errors: rng.below(10),
            });
        }
        p.func_counts.push(FuncCount {
            pid,
            binary: MODULES[0].to_string(),
            function: "handle_request".to_string(),
            count: rng.below(1_000_000),
        });
    }
    p
}

fn synthetic_meta(samples: u64, seed: u64) -> Meta {
    let start = 1_700_000_000_000_000_000 + seed % 1_000_000_000;
    let duration = 10_000_000_000;
    Meta {
        pkprof_version: "0.1.0".to_string(),
        kernel: "6.1.0-synthetic".to_string(),
        hostname: "synthetic".to_string(),
        cpus: 8,
        start_unix_ns: start,
        end_unix_ns: start + duration,
        frequency_hz: 999,
        period_ns: 1_001_001,
        targets: Targets {
            kind: TargetKind::System,
            ..Targets::default()
        },
        lost: Lost {
            ring_buffer_full: samples / 1000,
            ..Lost::default()
        },
        overhead: Overhead {
            pkprof_cpu_ns: duration / 100,
            ..Overhead::default()
        },
        cpu_time: CpuTime {
            total_ns: 8 * duration,
            idle_ns: 4 * duration,
            processes_ns: 2 * duration,
            other_ns: duration,
            kernel_ns: duration,
            ..CpuTime::default()
        },
        warnings: Vec::new(),
        user_stacks: Default::default(),
    }
}

/// A small profile that uses every enum variant, optional fields set and unset, extreme integers
/// and unicode strings: for round-trip tests, golden files and fuzz seeds.
pub fn rich() -> Profile {
    let frame = |kind, name: &str, module: &str, offset, file: Option<&str>, line| Frame {
        kind,
        name: name.to_string(),
        module: module.to_string(),
        offset,
        symbolized: !name.contains("+0x"),
        file: file.map(str::to_string),
        line,
        inlined: line == Some(7),
        // Each user module has one build-id (20 bytes, as GNU ld's sha1), shared by its frames.
        build_id: match module {
            "/usr/bin/srv" => "0f1e2d3c4b5a69788796a5b4c3d2e1f000112233".to_string(),
            "/opt/ü/lib.so" => "deadbeef00000000".to_string(),
            _ => String::new(),
        },
    };
    let frames = vec![
        frame(
            FrameKind::User,
            "main",
            "/usr/bin/srv",
            0x1040,
            Some("src/main.rs"),
            Some(12),
        ),
        frame(
            FrameKind::User,
            "ünïcødé::处理::<'_>",
            "/opt/ü/lib.so",
            0,
            Some(""),
            Some(7),
        ),
        frame(
            FrameKind::User,
            "/opt/ü/lib.so+0xdead",
            "/opt/ü/lib.so",
            0xdead,
            None,
            None,
        ),
        frame(
            FrameKind::Syscall,
            "sys_read",
            "[syscall]",
            0,
            None,
            Some(0),
        ),
        frame(
            FrameKind::Kernel,
            "vfs_read",
            "[kernel]",
            u64::MAX,
            Some("fs/read_write.c"),
            None,
        ),
        frame(
            FrameKind::Kernel,
            "e1000_clean",
            "e1000",
            0xffff_ffff_c000_0000,
            None,
            None,
        ),
    ];
    let stacks = vec![
        Stack {
            frames: vec![0, 1, 2],
        },
        Stack {
            frames: vec![0, 3, 4],
        },
        Stack { frames: vec![5] },
        Stack { frames: vec![] },
    ];
    let contexts = [
        Context::User,
        Context::Syscall,
        Context::KernelTask,
        Context::Kworker,
        Context::HardIrq,
        Context::SoftIrq(0),
        Context::SoftIrq(3),
        Context::SoftIrq(255),
        Context::Idle,
    ];
    let buckets = [Bucket::Process, Bucket::Other, Bucket::Kernel, Bucket::Idle];
    let mut samples = Vec::new();
    for (i, context) in contexts.iter().enumerate() {
        samples.push(SampleGroup {
            stack: (i % stacks.len()) as u32,
            pid: if i == 0 { u32::MAX } else { 100 + i as u32 },
            tid: 200 + i as u32,
            comm: ["srv", "", "工作者", "kworker/u16:2", "x"][i % 5].to_string(),
            current_pid: 300 + i as u32,
            bucket: buckets[i % buckets.len()],
            context: *context,
            cgroup_id: if i == 1 { u64::MAX } else { i as u64 },
            count: if i == 2 { u64::MAX } else { i as u64 },
        });
    }
    Profile {
        off_cpu: None,
        meta: Meta {
            pkprof_version: "0.1.0".to_string(),
            kernel: "6.1.0-18-amd64".to_string(),
            hostname: "höst-名前".to_string(),
            cpus: 4,
            start_unix_ns: 1_700_000_000_123_456_789,
            end_unix_ns: u64::MAX,
            frequency_hz: 99,
            period_ns: 10_101_010,
            targets: Targets {
                kind: TargetKind::Command,
                command: vec!["srv".into(), "--name=é \"q\"".into(), "".into()],
                pids: vec![1, 0, u32::MAX],
                cgroup: String::new(),
            },
            lost: Lost {
                ring_buffer_full: 1,
                kernel_stack_errors: 2,
                user_stack_errors: 3,
                held_expired: 4,
                maps_missing: 5,
                bpf_missed_events: u64::MAX,
                // Added after version 1 of the golden file (read back as 0).
                thread_table_full: 0,
                target_table_full: 0,
            },
            overhead: Overhead {
                pkprof_cpu_ns: 10,
                symbolize_ns: 20,
                bpf_run_ns: Some(30),
                bpf_run_count: Some(40),
            },
            cpu_time: CpuTime {
                total_ns: 400,
                idle_ns: 100,
                processes_ns: 150,
                other_ns: 100,
                kernel_ns: 50,
                untracked_ns: 0,
            },
            warnings: vec![
                "cannot read /proc/42/maps: no such process ⚠".into(),
                "".into(),
            ],
            user_stacks: UserStacks {
                complete: 9_812,
                truncated: Truncation::ALL
                    .iter()
                    .enumerate()
                    .map(|(i, &t)| (t, if i == 6 { u64::MAX } else { 10 * i as u64 + 1 }))
                    .collect(),
            },
        },
        frames,
        stacks,
        samples,
        processes: (0..4)
            .map(|i| ProcessInfo {
                pid: 100 + i as u32,
                ppid: 1,
                comm: ["srv", "工作者", "", "dd"][i].to_string(),
                exe: ["/usr/bin/srv", "", "/opt/ü/bin", "/usr/bin/dd"][i].to_string(),
                target: i % 2 == 0,
                exited: i == 3,
                task_ns: 1000 * i as u64,
                user_ns: 600 * i as u64,
                sys_ns: 400 * i as u64,
                hardirq_ns: i as u64,
                softirq_ns: 2 * i as u64,
                served_ns: if i == 3 { u64::MAX } else { 3 * i as u64 },
            })
            .collect(),
        syscalls: vec![
            SyscallStat {
                pid: 100,
                nr: 0,
                name: "read".into(),
                count: 10,
                total_ns: 1234,
                errors: 0,
            },
            SyscallStat {
                pid: 101,
                nr: u32::MAX,
                name: "".into(),
                count: u64::MAX,
                total_ns: 0,
                errors: 1,
            },
        ],
        func_counts: vec![FuncCount {
            pid: 100,
            binary: "/usr/bin/srv".into(),
            function: "handle_请求".into(),
            count: 77,
        }],
        cgroups: vec![
            CgroupInfo {
                id: 1,
                path: "/system.slice/srv.service".into(),
            },
            CgroupInfo {
                id: u64::MAX,
                path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8a3c2e1f_7b6d_4c5e_9f0a_1b2c3d4e5f60.slice/cri-containerd-4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c.scope".into(),
            },
        ],
    }
}
