//! The recording pipeline's Python frames without root: CPython processes found (or not) by the
//! fake maps, their samples' interpreter-loop frames replaced by Python runs, on-CPU and off-CPU
//! (the fakes: common/mod.rs).

mod common;

use common::*;

use std::collections::HashMap;

use pkprof_attribution::{PyRawFrame, PyWalk};
use pkprof_attribution::{SampleContext, SampleEvent, TargetSet};
use pkprof_profile::FrameKind;
use pkprof_recording::meta;
use pkprof_recording::python::{CodeInfo, PyDetect, PyLayout, PyOffsets};
use pkprof_recording::{Extras, RingRecord};

// ---- Python frames -----------------------------------------------------------------------------

/// A CPython process (100) and one pkprof has no offsets for (200): 100's Python frames are named
/// from its code objects and each run replaces its interpreter-loop frame; a frame whose code
/// cannot be read is named so and counted; 200 stays native-only and is said once.
#[test]
fn python_runs_replace_their_interpreter_loop_frames() {
    let code = |file: &str, name: &str| CodeInfo {
        filename: format!("/srv/{file}"),
        qualname: name.into(),
        firstlineno: 1,
        linetable: Vec::new(),
        code_start: 0,
    };
    let mut maps = FakeMaps {
        python: HashMap::from([
            (
                100,
                PyDetect::Found(PyLayout {
                    version: (3, 11, 2),
                    runtime: 0x7000,
                    binary: "python3.11".into(),
                    offsets: PyOffsets::default(),
                    from_debug_offsets: false,
                }),
            ),
            (
                200,
                PyDetect::Unsupported {
                    version: "3.10.13".into(),
                    binary: "python3.10".into(),
                },
            ),
        ]),
        codes: HashMap::from([
            (0xa0, code("app.py", "<module>")),
            (0xa1, code("app.py", "pack")),
            (0xa2, code("cb.py", "on_data")),
        ]),
        ..FakeMaps::default()
    };
    let py = |code: u64, entry: bool| PyRawFrame {
        code,
        instr: 0,
        entry,
    };
    let app = served(100, "app", true);
    // Native, leaf first: u1000 <- EVAL (runs on_data) <- u2000 (a C function) <- EVAL (runs
    // <module> > pack) <- u3000.
    let native = vec![0x1000, EVAL + 1, 0x2001, EVAL + 1, 0x3001];
    let s = samples([
        SampleEvent {
            ustack: native.clone(),
            ustack_end: None,
            python: vec![py(0xa2, true), py(0xa1, false), py(0xa0, true)],
            python_walk: PyWalk::Complete,
            ..sample(100, "app", Some(app.clone()))
        },
        // The code object of on_data cannot be read: its frame says so, in its place.
        SampleEvent {
            ustack: native.clone(),
            ustack_end: None,
            python: vec![py(0xbad, true), py(0xa1, false), py(0xa0, true)],
            python_walk: PyWalk::Complete,
            ..sample(100, "app", Some(app.clone()))
        },
        SampleEvent {
            ustack: vec![0x1000, EVAL + 1, 0x3001],
            ustack_end: None,
            ..sample(200, "old", Some(served(200, "old", true)))
        },
    ]);
    let mut kernel = FakeKernel::with(vec![s]);
    let rec = record(
        &mut kernel,
        &mut maps,
        TargetSet::Kernel,
        &[100, 200],
        false,
    );
    let mut sym = symbols();
    let p = assemble(&rec, &mut sym);
    assert_eq!(
        groups(&p),
        [
            "Process User pid=100 comm=app cur=100 n=1 | u3000;app.py:<module>;app.py:pack;u2000;[unreadable Python code];u1000",
            "Process User pid=100 comm=app cur=100 n=1 | u3000;app.py:<module>;app.py:pack;u2000;cb.py:on_data;u1000",
            "Process User pid=200 comm=old cur=200 n=1 | u3000;_PyEval_EvalFrameDefault;u1000",
        ]
    );
    let f = p.frames.iter().find(|f| f.name == "app.py:pack").unwrap();
    assert_eq!(
        (f.kind, f.module.as_str()),
        (FrameKind::Python, "/srv/app.py")
    );
    let w = &p.meta.warnings;
    assert!(
        w.iter().any(|l| l.contains("pid 100: python3.11 3.11.2")),
        "{w:?}"
    );
    assert_eq!(
        w.iter()
            .filter(|l| l.contains("pid 200: python3.10 3.10.13: no structure offsets"))
            .count(),
        1,
        "{w:?}"
    );
    assert!(
        w.iter().any(|l| l.contains("1 unreadable code object")),
        "{w:?}"
    );
}

/// A process is looked at for a CPython once per image: again after an exec record (it ran a new
/// image since), not at every sample.
#[test]
fn a_process_is_looked_at_again_after_its_exec() {
    let mut maps = FakeMaps::default();
    let app = served(300, "app", true);
    let one = || SampleEvent {
        ustack: vec![0x1000],
        ..sample(300, "app", Some(app.clone()))
    };
    let mut batch = samples([one(), one()]);
    batch.push(RingRecord::Exec(300));
    batch.extend(samples([one(), one()]));
    let mut kernel = FakeKernel::with(vec![batch]);
    record(&mut kernel, &mut maps, TargetSet::Kernel, &[300], false);
    assert_eq!(maps.detections, [300, 300]);
    assert_eq!(maps.captures, [300, 300]);
    // The maps side is told, so that its detection no longer takes the old image's areas.
    assert_eq!(maps.executed, [300]);
}

/// A process found not Python at its first sample is looked at again when its maps change (its
/// libpython mapped by ld.so after that sample), and not again while they stay as they are.
#[test]
fn a_process_is_looked_at_again_when_its_maps_change() {
    let mut maps = FakeMaps {
        mapped_later: HashMap::from([(
            400,
            PyDetect::Unsupported {
                version: "3.10.13".into(),
                binary: "libpython3.10.so.1.0".into(),
            },
        )]),
        ..FakeMaps::default()
    };
    let app = served(400, "py", true);
    let one = || SampleEvent {
        ustack: vec![0x1000],
        ..sample(400, "py", Some(app.clone()))
    };
    let mut kernel = FakeKernel::with(vec![samples([one(), one(), one()])]);
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[400], false);
    assert_eq!(maps.detections, [400, 400]);
    let p = assemble(&rec, &mut FakeSymbols::default());
    let w = &p.meta.warnings;
    assert_eq!(
        w.iter()
            .filter(|l| l.contains("pid 400: libpython3.10.so.1.0 3.10.13: no structure offsets"))
            .count(),
        1,
        "{w:?}"
    );
}

/// Off-CPU samples carry Python frames as cpu-clock samples do: spliced in place of their
/// interpreter-loop frame, and counted in the profile's warnings when they do not match it.
#[test]
fn off_cpu_samples_splice_their_python_frames() {
    let mut maps = FakeMaps {
        python: HashMap::from([(
            100,
            PyDetect::Found(PyLayout {
                version: (3, 11, 2),
                runtime: 0x7000,
                binary: "python3.11".into(),
                offsets: PyOffsets::default(),
                from_debug_offsets: false,
            }),
        )]),
        codes: HashMap::from([(
            0xa1,
            CodeInfo {
                filename: "/srv/app.py".into(),
                qualname: "nap".into(),
                firstlineno: 1,
                linetable: Vec::new(),
                code_start: 0,
            },
        )]),
        ..FakeMaps::default()
    };
    let app = served(100, "app", true);
    let off = |ustack: Vec<u64>| {
        RingRecord::OffCpu(Box::new(pkprof_attribution::OffCpuEvent {
            sample: SampleEvent {
                ustack,
                ustack_end: None,
                python: vec![PyRawFrame {
                    code: 0xa1,
                    instr: 0,
                    entry: true,
                }],
                python_walk: PyWalk::Complete,
                ..sample(100, "app", Some(app.clone()))
            },
            off_ns: 0,
            offcpu_ns: 20_000_000,
            blocked_ns: 20_000_000,
            weight_ns: 20_000_000,
            reason: pkprof_profile::BlockReason::Sleep,
            chain: Vec::new(),
            waker_kstack: Vec::new(),
            waker_ustack: Vec::new(),
        }))
    };
    // Leaf first: u1000 (libc's sleep) <- EVAL (runs nap) <- u3000; then a stack without its
    // loop frame (cut short): its Python frame goes at the root and the sample is counted.
    let batch = vec![off(vec![0x1000, EVAL + 1, 0x3001]), off(vec![0x1000])];
    let mut kernel = FakeKernel::with(vec![batch]);
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[100], false);
    let mut sym = symbols();
    let frame = rec.last_frame.clone().unwrap_or_default();
    let meta = meta::build(meta_inputs(&rec, &frame));
    let extras = Extras {
        func_counts: Vec::new(),
        bpf_stats_unmeasured: false,
        off_cpu: Some(pkprof_profile::OffCpu::default()),
    };
    let p = pkprof_recording::profile(meta, &rec, &mut sym, extras);
    let off = p.off_cpu.as_ref().expect("off-CPU groups");
    let mut stacks: Vec<String> = off
        .groups
        .iter()
        .map(|g| {
            p.stack_frames(g.stack)
                .map(|f| f.name.clone())
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect();
    stacks.sort();
    assert_eq!(stacks, ["app.py:nap;u1000", "u3000;app.py:nap;u1000"]);
    let w = &p.meta.warnings;
    assert!(
        w.iter()
            .any(|l| l.contains("1 not matching the native stack")),
        "{w:?}"
    );
}

#[test]
fn a_kernel_thread_waker_is_not_labelled_as_in_a_system_call() {
    let mut maps = FakeMaps::default();
    let app = served(100, "app", true);
    let woken_by = |pid: u32, comm: &str, kthread: bool| {
        RingRecord::OffCpu(Box::new(pkprof_attribution::OffCpuEvent {
            sample: SampleEvent {
                ustack: vec![0x1000],
                ..sample(100, "app", Some(app.clone()))
            },
            off_ns: 0,
            offcpu_ns: 1_000_000,
            blocked_ns: 1_000_000,
            weight_ns: 1_000_000,
            reason: pkprof_profile::BlockReason::Io,
            chain: vec![pkprof_attribution::WakerEvent {
                pid,
                tid: pid,
                comm: comm.into(),
                context: SampleContext::Kernel,
                kthread,
                blocked: None,
            }],
            waker_kstack: Vec::new(),
            waker_ustack: Vec::new(),
        }))
    };
    let batch = vec![
        woken_by(7, "kworker/0:1", true),
        woken_by(200, "writer", false),
    ];
    let mut kernel = FakeKernel::with(vec![batch]);
    let rec = record(&mut kernel, &mut maps, TargetSet::Kernel, &[100], false);
    let mut sym = symbols();
    let frame = rec.last_frame.clone().unwrap_or_default();
    let meta = meta::build(meta_inputs(&rec, &frame));
    let extras = Extras {
        func_counts: Vec::new(),
        bpf_stats_unmeasured: false,
        off_cpu: Some(pkprof_profile::OffCpu::default()),
    };
    let p = pkprof_recording::profile(meta, &rec, &mut sym, extras);
    let off = p.off_cpu.as_ref().expect("off-CPU groups");
    let mut wakers: Vec<(String, pkprof_profile::Context)> = off
        .groups
        .iter()
        .flat_map(|g| g.chain.iter().map(|w| (w.comm.clone(), w.context)))
        .collect();
    wakers.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        wakers,
        [
            (
                "kworker/0:1".to_string(),
                pkprof_profile::Context::KernelTask
            ),
            ("writer".to_string(), pkprof_profile::Context::Syscall),
        ]
    );
}
