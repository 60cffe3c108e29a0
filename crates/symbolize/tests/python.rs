//! CPython layouts against real interpreters: for each installed interpreter (Debian's python3.11,
//! pyenv's 3.11/3.12/3.13 when present), a program stops at a known point in a recursion and prints
//! its own stack (`traceback.extract_stack`, the ground truth); the test finds the interpreter
//! with `python::detect`, walks the sleeping thread's frame chain from `_PyRuntime` in user space
//! as the sampling program does in BPF (record/python.bpf.h), names the frames with
//! `python::read_code` and compares functions, files and lines. Reading another process's memory
//! needs root (or ptrace rights over the child).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use pkprof_symbolize::python::{self, PyDetect, PyLayout};

/// Interpreters to try: (path, expected minor version).
fn interpreters() -> Vec<(String, (u8, u8))> {
    let mut v = vec![("/usr/bin/python3.11".to_string(), (3, 11))];
    let home = std::env::var("HOME").unwrap_or_default();
    for (dir, minor) in [("3.11", 11), ("3.12", 12), ("3.13", 13)] {
        if let Ok(rd) = std::fs::read_dir(format!("{home}/.pyenv/versions")) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(&format!("{dir}.")) {
                    v.push((
                        format!("{}/bin/python{dir}", e.path().display()),
                        (3, minor),
                    ));
                }
            }
        }
    }
    v.retain(|(p, _)| std::path::Path::new(p).exists());
    v
}

const PROGRAM: &str = r#"
import sys, threading, time, traceback
def leaf():
    for f in traceback.extract_stack():
        print("F", f.filename, f.name, f.lineno, flush=True)
    print("TID", threading.get_native_id(), flush=True)
    time.sleep(30)
def fib(n):
    if n == 0:
        return leaf()
    return fib(n - 1)
fib(7)
"#;

fn u64_at(pid: u32, addr: u64) -> u64 {
    let b = python::read_mem(pid, addr, 8).expect("readable");
    u64::from_le_bytes(b.try_into().unwrap())
}

/// The sleeping thread's frames, leaf first: (file, qualname, line).
fn walk(pid: u32, l: &PyLayout, tid: u64) -> Vec<(String, String, u32)> {
    let o = &l.offsets;
    let interp = u64_at(pid, l.runtime + u64::from(o.runtime_interpreters_head));
    let mut ts = u64_at(pid, interp + u64::from(o.interp_threads_head));
    while ts != 0 && u64_at(pid, ts + u64::from(o.tstate_native_thread_id)) != tid {
        ts = u64_at(pid, ts + u64::from(o.tstate_next));
    }
    assert_ne!(ts, 0, "thread {tid} not in the interpreter's list");
    let mut frame = if o.tstate_cframe != 0 {
        let cf = u64_at(pid, ts + u64::from(o.tstate_cframe));
        u64_at(pid, cf + u64::from(o.tstate_current_frame))
    } else {
        u64_at(pid, ts + u64::from(o.tstate_current_frame))
    };
    let mut out = Vec::new();
    while frame != 0 && out.len() < 200 {
        let owner = python::read_mem(pid, frame + u64::from(o.frame_owner), 1).unwrap()[0];
        if o.owned_by_cstack == 0 || u32::from(owner) != o.owned_by_cstack {
            let code = u64_at(pid, frame + u64::from(o.frame_code));
            let instr = u64_at(pid, frame + u64::from(o.frame_instr));
            let c = python::read_code(pid, code, o).expect("code object readable");
            out.push((
                c.filename.clone(),
                c.qualname.clone(),
                c.line(instr).unwrap_or(0),
            ));
        }
        frame = u64_at(pid, frame + u64::from(o.frame_previous));
    }
    out
}

#[test]
#[ignore = "needs root (reads another process's memory)"]
fn frames_match_the_interpreters_own_stack() {
    let found = interpreters();
    assert!(
        !found.is_empty(),
        "no CPython 3.11+ installed (scripts/setup.sh)"
    );
    for (exe, (major, minor)) in found {
        let mut child = Command::new(&exe)
            .args(["-c", PROGRAM])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut expected = Vec::new();
        let mut tid = 0;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            let parts: Vec<&str> = line.split(' ').collect();
            match parts[0] {
                "F" => expected.push((
                    parts[1].to_string(),
                    parts[2].to_string(),
                    parts[3].parse::<u32>().unwrap(),
                )),
                "TID" => {
                    tid = parts[1].parse().unwrap();
                    break;
                }
                _ => {}
            }
        }
        // Let it reach the sleep.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let layout = match python::detect(pid) {
            PyDetect::Found(l) => l,
            other => panic!("{exe}: {other:?}"),
        };
        // A kernel without PROCMAP_QUERY gives the maps' text: the same interpreter found there;
        // and `_PyRuntime`, placed by the file's load bias, is where its file offset is mapped.
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        assert_eq!(
            python::detect_in_maps_text(pid, &text),
            PyDetect::Found(layout.clone()),
            "{exe}: from the maps text"
        );
        assert_eq!(
            python::runtime_by_offset_in_maps_text(pid, &text),
            Some(layout.runtime),
            "{exe}: _PyRuntime by the load bias and by its file offset"
        );
        assert_eq!(
            (layout.version.0, layout.version.1),
            (major, minor),
            "{exe}"
        );
        if minor >= 13 {
            assert!(layout.from_debug_offsets, "{exe}: 3.13 exports its offsets");
            assert_eq!(
                Some(layout.offsets),
                python::table_offsets(major, minor),
                "{exe}: the binary's debug offsets agree with the table"
            );
        }
        let mut got = walk(pid, &layout, tid);
        child.kill().unwrap();
        child.wait().unwrap();
        // extract_stack lists root first and ends at leaf's own line (the extract_stack call);
        // the sampled thread is in leaf's sleep, so compare names and files, and lines of the
        // callers (leaf's own line differs: sleep, not extract_stack).
        got.reverse();
        assert_eq!(got.len(), expected.len(), "{exe}: {got:?} vs {expected:?}");
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!((&g.0, &g.1), (&e.0, &e.1), "{exe}: frame {i}");
            if i + 1 < got.len() {
                assert_eq!(g.2, e.2, "{exe}: line of frame {i} ({})", g.1);
            }
        }
        assert_eq!(
            got.last().unwrap().2,
            expected.last().unwrap().2 + 3,
            "{exe}: leaf sleeps three lines below its extract_stack"
        );
        eprintln!(
            "{exe}: {} frames match ({})",
            got.len(),
            layout.version_string()
        );
    }
}
