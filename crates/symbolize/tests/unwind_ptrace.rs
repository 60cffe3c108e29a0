//! User-stack unwinding (`Symbolizer::unwind`) on real stacks: a fixture built without frame
//! pointers (tests/fixtures/unwind.c, chain explained there) burns CPU in a known call chain; the
//! test stops it with ptrace, takes its registers and copies its stack from /proc/PID/mem (as the
//! BPF program copies a window from the user sp), then unwinds and symbolizes. The truth is the
//! fixture's own call chain and its ELF symbols, not pkprof.
//!
//! No root needed: the fixture is our child (ptrace and /proc/PID/mem are allowed), and
//! capturing falls back from /proc/PID/map_files to the mapped paths.

mod common;

use std::fs::{self, File};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use object::{Object as _, ObjectSection as _};
use pkprof_profile::Truncation;
use pkprof_symbolize::{Symbolizer, SymbolizerOptions, UnwoundStack, UserRegs, MAX_USER_FRAMES};

const WINDOW: usize = 16 << 10;

fn build_unwind(dir: &Path) -> PathBuf {
    build(
        "cc",
        "unwind.c",
        &["-O2", "-fomit-frame-pointer", "-pthread"],
        dir,
        "unwind",
    )
}

/// One stopped moment of a thread: its registers and its stack from sp upwards, copied page by
/// page up to `WINDOW` bytes, stopping at the first unreadable page (like the BPF program).
struct Sample {
    regs: UserRegs,
    stack: Vec<u8>,
    window_full: bool,
}

/// Stop thread `tid` of process `pid` with ptrace (seize + interrupt), copy its registers and
/// stack, and let it run again.
fn sample(pid: u32, tid: u32) -> Sample {
    let tid = tid as libc::pid_t;
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: plain ptrace/waitpid calls on our own child's thread; `regs` is a valid
    // user_regs_struct for PTRACE_GETREGS to fill.
    let regs = unsafe {
        assert_eq!(
            libc::ptrace(libc::PTRACE_SEIZE, tid, null, null),
            0,
            "seize"
        );
        assert_eq!(libc::ptrace(libc::PTRACE_INTERRUPT, tid, null, null), 0);
        let mut status = 0;
        assert_eq!(libc::waitpid(tid, &mut status, libc::__WALL), tid);
        let mut regs: libc::user_regs_struct = std::mem::zeroed();
        let r = libc::ptrace(
            libc::PTRACE_GETREGS,
            tid,
            null,
            &mut regs as *mut _ as *mut libc::c_void,
        );
        assert_eq!(r, 0, "getregs");
        regs
    };
    let mem = File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut stack = vec![0u8; WINDOW];
    let mut got = 0;
    while got < WINDOW {
        let addr = regs.rsp + got as u64;
        let chunk = ((4096 - (addr % 4096)) as usize).min(WINDOW - got);
        match mem.read_at(&mut stack[got..got + chunk], addr) {
            Ok(n) if n == chunk => got += n,
            _ => break,
        }
    }
    stack.truncate(got);
    // SAFETY: detaching the thread we seized.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, null, null) };
    Sample {
        regs: UserRegs {
            ip: regs.rip,
            sp: regs.rsp,
            bp: regs.rbp,
        },
        window_full: got == WINDOW,
        stack,
    }
}

/// (name, module) of each frame, leaf first (return addresses looked up at address - 1).
fn symbolize(sym: &mut Symbolizer, pid: u32, frames: &[u64]) -> Vec<(String, String)> {
    let addrs: Vec<u64> = frames
        .iter()
        .enumerate()
        .map(|(i, &a)| if i == 0 { a } else { a - 1 })
        .collect();
    sym.symbolize_user(pid, &addrs)
        .into_iter()
        .map(|f| (f[0].name.clone(), f[0].module.clone()))
        .collect()
}

/// Check the symbolized chain (leaf first) against the fixture's: from the root, `entry` frames
/// (the thread's entry, by name in the fixture or by module libc), then the fixture's functions
/// in order, then anything in libc (qsort's internals) and at most the comparator as the leaf.
/// The chain may stop early (the sample landed in `outer` or `inner` themselves).
fn check_chain(chain: &[(String, String)], exe: &str, thread: bool) -> bool {
    let root_first: Vec<&(String, String)> = chain.iter().rev().collect();
    let is_libc = |m: &str| m.contains("/libc.so");
    let mut i = 0;
    if thread {
        // clone3 -> start_thread, both in libc.
        while i < root_first.len() && is_libc(&root_first[i].1) {
            i += 1;
        }
        assert!(i >= 1, "thread root is not in libc: {chain:?}");
        assert_eq!(root_first[i].0, "pkprof_unwind_thread", "{chain:?}");
        i += 1;
    } else {
        assert_eq!(
            root_first[0],
            &("_start".to_string(), exe.to_string()),
            "{chain:?}"
        );
        i = 1;
        let libc_start = i;
        while i < root_first.len() && is_libc(&root_first[i].1) {
            i += 1;
        }
        assert!(i > libc_start, "no __libc_start_main frames: {chain:?}");
        assert_eq!(root_first[i].0, "main", "{chain:?}");
        i += 1;
    }
    for f in [
        "pkprof_unwind_outer",
        "pkprof_unwind_middle",
        "pkprof_unwind_inner",
    ] {
        if i == root_first.len() {
            return false;
        }
        assert_eq!(root_first[i].0, f, "{chain:?}");
        assert_eq!(root_first[i].1, exe, "{chain:?}");
        i += 1;
    }
    let mut cmp_leaf = false;
    for (j, (name, module)) in root_first.iter().enumerate().skip(i) {
        if name == "pkprof_unwind_cmp" {
            assert_eq!(
                j,
                root_first.len() - 1,
                "comparator not the leaf: {chain:?}"
            );
            cmp_leaf = true;
        } else {
            assert!(
                is_libc(module),
                "unexpected frame {name} in {module}: {chain:?}"
            );
        }
    }
    cmp_leaf
}

/// The task id of the fixture's second thread.
fn other_thread(pid: u32) -> u32 {
    for _ in 0..100 {
        let tids: Vec<u32> = fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&t| t != pid)
            .collect();
        if let Some(&t) = tids.first() {
            return t;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("fixture started no thread");
}

fn samples(pid: u32, tid: u32, n: usize) -> Vec<Sample> {
    (0..n)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(3));
            sample(pid, tid)
        })
        .collect()
}

/// The main thread's stacks are complete down to `_start`, through libc's qsort, whatever the
/// sampled instruction; the full window reaches the top of `[stack]` (not full).
///
/// Expected: end == None, the chain of unwind.c, the comparator as the leaf in some samples.
#[test]
fn main_thread_stack_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_unwind(dir.path());
    let fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    let mut cmp_leaves = 0;
    for s in samples(pid, pid, 30) {
        sym.ensure_mapped(pid, s.regs.ip);
        let u = sym.unwind(pid, s.regs, &s.stack, s.window_full, &[]);
        let chain = symbolize(&mut sym, pid, &u.frames);
        assert_eq!(u.end, None, "{chain:?}");
        cmp_leaves += check_chain(&chain, exe.to_str().unwrap(), false) as usize;
    }
    assert!(cmp_leaves > 0, "no sample in the comparator");
}

/// A second thread's stack ends at libc's clone3 (its CFI marks the entry): complete.
#[test]
fn thread_stack_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_unwind(dir.path());
    let fixture = Running::start(&exe, &["thread"]);
    let pid = fixture.pid();
    let tid = other_thread(pid);
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    let mut cmp_leaves = 0;
    for s in samples(pid, tid, 30) {
        let u = sym.unwind(pid, s.regs, &s.stack, s.window_full, &[]);
        let chain = symbolize(&mut sym, pid, &u.frames);
        assert_eq!(u.end, None, "{chain:?}");
        cmp_leaves += check_chain(&chain, exe.to_str().unwrap(), true) as usize;
    }
    assert!(cmp_leaves > 0, "no sample in the comparator");
}

/// More than `MAX_USER_FRAMES` frames (601 of pkprof_unwind_deep): the walk keeps the 512 leaf
/// frames and ends `DepthLimit`.
#[test]
fn deep_stack_ends_at_depth_limit() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_unwind(dir.path());
    let fixture = Running::start(&exe, &["deep"]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    // Let it get deep (it printed "ready" before recursing).
    std::thread::sleep(Duration::from_millis(50));
    let s = sample(pid, pid);
    let u = sym.unwind(pid, s.regs, &s.stack, s.window_full, &[]);
    assert_eq!(u.end, Some(Truncation::DepthLimit));
    assert_eq!(u.frames.len(), MAX_USER_FRAMES);
    let chain = symbolize(&mut sym, pid, &u.frames);
    assert_eq!(chain.last().unwrap().0, "pkprof_unwind_deep");
}

/// A stack whose leaf is in the vDSO (an in-memory image the symbolizer copies to a temporary
/// file; placed by its own load segment): complete, through libc's clock_gettime and the fixture.
#[test]
fn vdso_stack_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_unwind(dir.path());
    let fixture = Running::start(&exe, &["vdso"]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    let mut in_vdso = 0;
    for s in samples(pid, pid, 50) {
        let u = sym.unwind(pid, s.regs, &s.stack, s.window_full, &[]);
        let chain = symbolize(&mut sym, pid, &u.frames);
        assert_eq!(u.end, None, "{chain:?}");
        let names: Vec<&str> = chain.iter().rev().map(|(n, _)| n.as_str()).collect();
        let main = names.iter().position(|&n| n == "main").expect("main");
        assert_eq!(names[0], "_start");
        assert_eq!(names[main + 1], "pkprof_unwind_clock", "{chain:?}");
        if chain[0].1 == "[vdso]" {
            in_vdso += 1;
            // vDSO <- libc's clock_gettime <- pkprof_unwind_clock.
            assert_eq!(names.len(), main + 4, "{chain:?}");
            assert!(chain[1].1.contains("/libc.so"), "{chain:?}");
        }
    }
    assert!(in_vdso > 0, "no sample in the vDSO");
}

/// The same stacks, with the window cut to 256 bytes (full): never complete, always
/// `StackWindow`, and the frames found are the leaf end of the complete stack. With the complete
/// stack as the frame-pointer chain (what the BPF walk gives for code with frame pointers), the
/// splice restores every frame, and the end stays `StackWindow`. Cut short by an unreadable page
/// instead (window not full): `ReadFault`.
#[test]
fn cut_window_is_never_complete() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_unwind(dir.path());
    let fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    let mut spliced = 0;
    for s in samples(pid, pid, 30) {
        let full = sym.unwind(pid, s.regs, &s.stack, s.window_full, &[]);
        assert_eq!(full.end, None);
        for cut in [16, 64, 256, 1024] {
            let short = &s.stack[..cut];
            let u = sym.unwind(pid, s.regs, short, true, &[]);
            if u.end.is_none() {
                // The walk did not need more than `cut` bytes: not cut, the whole stack.
                assert_eq!(u.frames, full.frames, "cut {cut}");
                continue;
            }
            assert_eq!(u.end, Some(Truncation::StackWindow), "cut {cut}");
            assert_eq!(u.frames[..], full.frames[..u.frames.len()], "cut {cut}");
            let u = sym.unwind(pid, s.regs, short, false, &[]);
            assert_eq!(u.end, Some(Truncation::ReadFault), "cut {cut}");

            let u = sym.unwind(pid, s.regs, short, true, &full.frames);
            assert_eq!(u.end, Some(Truncation::StackWindow));
            assert_eq!(u.frames, full.frames, "cut {cut}: splice");
            spliced += 1;
        }
    }
    assert!(spliced > 0);
}

/// Nothing copied (sp in unmapped memory), or a stack pointer that is garbage: `ReadFault`, and
/// frames = [ip].
#[test]
fn unreadable_stack_is_read_fault() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_unwind(dir.path());
    let fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    let s = sample(pid, pid);
    let u = sym.unwind(pid, s.regs, &[], false, &[]);
    assert_eq!(
        u,
        UnwoundStack {
            frames: vec![s.regs.ip],
            end: Some(Truncation::ReadFault),
            unmapped: None,
        }
    );
    let garbage = UserRegs { sp: 0x10, ..s.regs };
    let u = sym.unwind(pid, garbage, &[], false, &[]);
    assert_eq!(u.end, Some(Truncation::ReadFault));
    // A process never captured: its tables are missing.
    let u = sym.unwind(pid + 1_000_000, s.regs, &s.stack, s.window_full, &[]);
    assert_eq!(u.end, Some(Truncation::TablesMissing));
}

/// With a 1-byte table budget no file's tables are loaded: the walk stops at the leaf with
/// `TableLimit`.
#[test]
fn table_limit_stops_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_unwind(dir.path());
    let fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions {
        unwind_memory_bytes: 1,
        ..Default::default()
    });
    sym.capture_process(pid).unwrap();
    let s = sample(pid, pid);
    let u = sym.unwind(pid, s.regs, &s.stack, s.window_full, &[]);
    assert_eq!(
        u,
        UnwoundStack {
            frames: vec![s.regs.ip],
            end: Some(Truncation::TableLimit),
            unmapped: None,
        }
    );
    assert_eq!(sym.unwind_table_bytes(), 0);
}

/// A copy of the fixture whose `.eh_frame` is zeroed (all of it, or its second half, as a
/// truncated table would read): stacks through its code end with a named reason (`BadFrame`),
/// never complete, never a panic; the frames before are still the real ones (in libc).
#[test]
fn corrupt_eh_frame_gives_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let built = build_unwind(dir.path());
    for (name, from_half) in [("zeroed", false), ("halved", true)] {
        let exe = dir.path().join(name);
        let mut data = fs::read(&built).unwrap();
        let (off, size) = {
            let elf = object::File::parse(&*data).unwrap();
            elf.section_by_name(".eh_frame")
                .unwrap()
                .file_range()
                .unwrap()
        };
        let (off, size) = (off as usize, size as usize);
        let start = if from_half { off + size / 2 } else { off };
        data[start..off + size].fill(0);
        fs::write(&exe, &data).unwrap();
        fs::set_permissions(&exe, fs::metadata(&built).unwrap().permissions()).unwrap();

        let fixture = Running::start(&exe, &[]);
        let pid = fixture.pid();
        let mut sym = Symbolizer::new(SymbolizerOptions::default());
        sym.capture_process(pid).unwrap();
        for s in samples(pid, pid, 10) {
            let u = sym.unwind(pid, s.regs, &s.stack, s.window_full, &[]);
            let chain = symbolize(&mut sym, pid, &u.frames);
            assert!(
                matches!(u.end, Some(Truncation::BadFrame | Truncation::NoUnwindInfo)),
                "{name}: {:?} {chain:?}",
                u.end
            );
            // Only true frames, in order: the binary's frames are a run of its known chain
            // (entries that survived the damage may carry the walk on for a while).
            let in_exe: Vec<&str> = chain
                .iter()
                .filter(|(_, m)| m == exe.to_str().unwrap())
                .map(|(n, _)| n.as_str())
                .collect();
            let known = [
                "pkprof_unwind_cmp",
                "pkprof_unwind_inner",
                "pkprof_unwind_middle",
                "pkprof_unwind_outer",
                "main",
            ];
            assert!(
                !in_exe.is_empty() && known.windows(in_exe.len()).any(|w| w == &in_exe[..]),
                "{name}: {chain:?}"
            );
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Costs, printed (run with --nocapture): building the unwinder of a Debian python3 process (its
/// files' tables read for the first time) and of a second python3 process (tables shared), and
/// unwinding real sampled stacks of a CPU-bound python3 and of the fixture. Not asserted: timing
/// depends on the machine. Its stacks must still be complete (perf --call-graph dwarf reaches
/// main in 98% of python3's samples).
#[test]
fn unwind_costs() {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("no /usr/bin/python3: skipped");
        return;
    }
    let script = "import sys\nprint('ready', flush=True)\n\
                  def f(n):\n    return 1 if n < 2 else f(n - 1) + f(n - 2)\n\
                  while True:\n    f(20)\n";
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    let mut build_times = Vec::new();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let p = Running::start(python, &["-c", script]);
        let pid = p.pid();
        sym.capture_process(pid).unwrap();
        let t = Instant::now();
        // The first stack of a process builds its unwinder.
        sym.unwind(pid, UserRegs::default(), &[], false, &[]);
        build_times.push(t.elapsed());
        runs.push(p);
    }
    let maps = fs::read_to_string(format!("/proc/{}/maps", runs[0].pid()))
        .unwrap()
        .lines()
        .count();
    eprintln!(
        "python3 unwinder build ({maps} mappings, {} KiB of tables): first process {:?}, second {:?}",
        sym.unwind_table_bytes() >> 10,
        build_times[0],
        build_times[1]
    );

    let dir = tempfile::tempdir().unwrap();
    let exe = build_unwind(dir.path());
    let fixture = Running::start(&exe, &[]);
    sym.capture_process(fixture.pid()).unwrap();
    for (what, pid) in [("python3", runs[0].pid()), ("fixture", fixture.pid())] {
        let samples = samples(pid, pid, 100);
        let mut times = Vec::new();
        let mut complete = 0;
        let mut depth = 0;
        for _ in 0..20 {
            for s in &samples {
                let t = Instant::now();
                let u = sym.unwind(pid, s.regs, &s.stack, s.window_full, &[]);
                times.push(t.elapsed());
                complete += u.end.is_none() as usize;
                depth += u.frames.len();
            }
        }
        times.sort();
        eprintln!(
            "{what}: {} unwinds, mean depth {}, complete {:.1}%, median {:?}, p99 {:?}",
            times.len(),
            depth / times.len(),
            100.0 * complete as f64 / times.len() as f64,
            percentile(&times, 0.5),
            percentile(&times, 0.99)
        );
        assert!(
            complete * 10 >= times.len() * 9,
            "{what}: fewer than 90% complete"
        );
    }
}
