//! Shared by the exporter tests (`export_pprof`, `export_folded`, `export_speedscope`): a small
//! profile with exact, hand-checkable numbers, running an exporter, and golden files.
#![allow(dead_code)] // each test binary uses its own part

use std::path::PathBuf;

use pkprof_profile::{
    Bucket, Context, Frame, FrameKind, Meta, Profile, ProfileBuilder, SampleGroup,
};
use pkprof_report::export::{exporter, ExportOptions};
use pkprof_report::names::NameStyle;

/// 10 ms: each sample of [`small`] stands for 10 ms of CPU.
pub const PERIOD_NS: u64 = 10_000_000;

/// A profile small enough to check by hand (157 samples, 1.57 s of CPU):
///
/// | who (bucket, pid, comm)        | stack (root first)                             | samples |
/// |--------------------------------|------------------------------------------------|---------|
/// | process 100 `srv`, tid 100     | main;handle;[parse inlined];memcpy (user)       | 40      |
/// | process 100 `srv-worker`, 101  | the same                                       | 10      |
/// | process 100 `srv`, tid 100     | main;handle;sys_read;vfs_read (syscall)         | 25      |
/// | process 100 `srv`, current 300 | net_rx_action;e1000_clean (softirq NET_RX)      | 15      |
/// | process 200 `cat`              | main;handle;sys_read;vfs_read (syscall)         | 5       |
/// | process 200 `cat`              | main;`odd;name` (user)                          | 2       |
/// | process 200 `cat`              | main;handle;[parse];memcpy, count 0 (left out)  | 0       |
/// | other 300 `other`              | main;handle;[parse];memcpy                      | 3       |
/// | kernel                         | net_rx_action;e1000_clean (softirq NET_RX)      | 7       |
/// | idle                           | do_idle                                        | 50      |
///
/// So, by leaf (the flat profile): IDLE:do_idle 50, 100u:memcpy 50, 100k:vfs_read 25,
/// 100k:e1000_clean 15, KERNEL:e1000_clean 7, 200k:vfs_read 5, OTHERu:memcpy 3,
/// `200u:odd;name` 2.
pub fn small() -> Profile {
    let start = 1_700_000_000_000_000_000;
    let mut b = ProfileBuilder::new(Meta {
        pkprof_version: "0.1.0".into(),
        kernel: "6.1.0-test".into(),
        hostname: "testhost".into(),
        cpus: 2,
        start_unix_ns: start,
        end_unix_ns: start + 2_000_000_000,
        frequency_hz: 100,
        period_ns: PERIOD_NS,
        ..Meta::default()
    });
    let mut frame = |kind: FrameKind,
                     name: &str,
                     module: &str,
                     offset: u64,
                     src: Option<(&str, u32)>,
                     inl: bool| {
        b.frame(Frame {
            kind,
            name: name.into(),
            module: module.into(),
            offset,
            symbolized: true,
            file: src.map(|s| s.0.to_string()),
            line: src.map(|s| s.1),
            inlined: inl,
            build_id: String::new(),
        })
    };
    use FrameKind::*;
    let main = frame(
        User,
        "main",
        "/usr/bin/srv",
        0x1040,
        Some(("src/main.rs", 10)),
        false,
    );
    let handle = frame(
        User,
        "handle",
        "/usr/bin/srv",
        0x1180,
        Some(("src/srv.rs", 20)),
        false,
    );
    // `parse` was inlined into `handle`: one pprof location with two lines.
    let parse = frame(
        User,
        "parse",
        "/usr/bin/srv",
        0x1180,
        Some(("src/parse.rs", 5)),
        true,
    );
    let memcpy = frame(User, "memcpy", "/lib/libc.so.6", 0x9a0c0, None, false);
    let odd = frame(User, "odd;name", "/usr/bin/srv", 0x1300, None, false);
    let sys_read = frame(Syscall, "sys_read", "[syscall]", 0, None, false);
    let kernel = 0xffff_ffff_8100_0000;
    let vfs_read = frame(Kernel, "vfs_read", "[kernel]", kernel + 0x3a0, None, false);
    let net_rx = frame(
        Kernel,
        "net_rx_action",
        "[kernel]",
        kernel + 0x9100,
        None,
        false,
    );
    let e1000 = frame(
        Kernel,
        "e1000_clean",
        "e1000",
        0xffff_ffff_c000_0040,
        None,
        false,
    );
    let do_idle = frame(Kernel, "do_idle", "[kernel]", kernel + 0x200, None, false);
    let copy = b.stack(vec![main, handle, parse, memcpy]);
    let read = b.stack(vec![main, handle, sys_read, vfs_read]);
    let net = b.stack(vec![net_rx, e1000]);
    let idle = b.stack(vec![do_idle]);
    let weird = b.stack(vec![main, odd]);
    let group = |stack, bucket, pid, tid, comm: &str, context, count| SampleGroup {
        stack,
        pid,
        tid,
        comm: comm.into(),
        current_pid: pid,
        bucket,
        context,
        cgroup_id: if pid == 0 { 0 } else { 7000 + u64::from(pid) },
        count,
    };
    b.sample(group(
        copy,
        Bucket::Process,
        100,
        100,
        "srv",
        Context::User,
        40,
    ));
    b.sample(group(
        copy,
        Bucket::Process,
        100,
        101,
        "srv-worker",
        Context::User,
        10,
    ));
    b.sample(group(
        read,
        Bucket::Process,
        100,
        100,
        "srv",
        Context::Syscall,
        25,
    ));
    b.sample(SampleGroup {
        current_pid: 300,
        ..group(
            net,
            Bucket::Process,
            100,
            100,
            "srv",
            Context::SoftIrq(3),
            15,
        )
    });
    b.sample(group(
        read,
        Bucket::Process,
        200,
        200,
        "cat",
        Context::Syscall,
        5,
    ));
    b.sample(group(
        weird,
        Bucket::Process,
        200,
        200,
        "cat",
        Context::User,
        2,
    ));
    b.sample(group(
        copy,
        Bucket::Process,
        200,
        200,
        "cat",
        Context::User,
        0,
    ));
    b.sample(group(
        copy,
        Bucket::Other,
        300,
        300,
        "other",
        Context::User,
        3,
    ));
    b.sample(group(
        net,
        Bucket::Kernel,
        0,
        0,
        "ksoftirqd/0",
        Context::SoftIrq(3),
        7,
    ));
    b.sample(group(
        idle,
        Bucket::Idle,
        0,
        0,
        "swapper/0",
        Context::Idle,
        50,
    ));
    b.finish()
}

/// Runs exporter `name` on `profile`.
pub fn export(name: &str, profile: &Profile, names: NameStyle) -> Vec<u8> {
    let opts = ExportOptions {
        names,
        title: String::new(),
        ..ExportOptions::default()
    };
    let mut out = Vec::new();
    exporter(name)
        .unwrap()
        .write(profile, &opts, &mut out)
        .unwrap_or_else(|e| panic!("{name} export: {e}"));
    out
}

/// A directory for this test binary's files, emptied.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compares `actual` with golden file `tests/golden/export/NAME` ([`pkprof_golden::assert_golden`]).
#[track_caller]
pub fn check_golden(name: &str, actual: &str) {
    pkprof_golden::assert_golden(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/export")
            .join(name),
        actual,
    );
}
