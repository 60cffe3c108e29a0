//! The C side: the header's layout and prototypes match the library, the paper's copy program
//! and its two multi-call variants (built with `cc` against `libpkprof_multicall.a`) copy files
//! byte for byte, strace sees exactly one `io_uring_enter` per multi-call, and syscall_cost runs.
//!
//! The static library is the one cargo builds for this very test run: the crate's lib target has
//! `crate-type = ["rlib", "staticlib", "cdylib"]`, so building the tests' dependency also writes
//! `libpkprof_multicall.a` next to the test binary's `deps/` directory (with or without
//! `CARGO_TARGET_DIR`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Scratch;
use pkprof_multicall::ffi::*;

const CRATE: &str = env!("CARGO_MANIFEST_DIR");
/// What the Rust standard library in the static archive needs (`--print native-static-libs`).
const NATIVE_LIBS: &[&str] = &["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"];
/// The paper's file sizes and the edges of a 4 KiB buffer.
const SIZES: &[usize] = &[0, 1, 4095, 4096, 4097, 81920, 947200, 2390753];
const CHUNK: usize = 4096;
/// The looped variant's K iterations per multi-call.
const LOOPED_K: usize = 16;

/// The newest `libpkprof_multicall.a` of this build profile.
fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let mut candidates = vec![
        deps.parent().unwrap().join("libpkprof_multicall.a"),
        deps.join("libpkprof_multicall.a"),
    ];
    for entry in std::fs::read_dir(deps).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("libpkprof_multicall-") && name.ends_with(".a") {
            candidates.push(entry.path());
        }
    }
    candidates
        .into_iter()
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("libpkprof_multicall.a not found near {}", exe.display()))
}

/// Compiles `sources` (in the crate's `c/` unless absolute) into `out`, linked with the library.
fn cc(out: &Path, source: &Path, link_lib: bool) {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let mut cmd = Command::new(&compiler);
    cmd.args(["-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(Path::new(CRATE).join("include"));
    cmd.arg("-o").arg(out).arg(source);
    if link_lib {
        cmd.arg(static_lib()).args(NATIVE_LIBS);
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {compiler} (a C compiler is needed): {e}"));
    assert!(
        output.status.success(),
        "{compiler} {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn c_source(name: &str) -> PathBuf {
    Path::new(CRATE).join("c").join(name)
}

/// Builds the copy programs into `dir`: the loop, the two multi-call versions, and the single
/// Linux call `pkprof syscalls` suggests for the loop (copy_file_range).
fn build_copies(dir: &Path) -> Vec<PathBuf> {
    [
        "copy_loop",
        "copy_multicall",
        "copy_multicall_looped",
        "copy_single_call",
    ]
    .iter()
    .map(|name| {
        let exe = dir.join(name);
        cc(&exe, &c_source(&format!("{name}.c")), true);
        exe
    })
    .collect()
}

/// Deterministic, non-repeating content (so a misplaced chunk shows).
fn content(size: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_header_matches_the_library() {
    let s = Scratch::new();
    let src = s.path("layout.c");
    std::fs::write(
        &src,
        format!(
            r#"#include <errno.h>
#include <stddef.h>
#include "pkprof_multicall.h"
_Static_assert(sizeof(struct mc_call) == {size}, "size");
_Static_assert(offsetof(struct mc_call, check) == {check}, "check");
_Static_assert(offsetof(struct mc_call, args) == {args}, "args");
_Static_assert(offsetof(struct mc_call, result) == {result}, "result");
_Static_assert(MC_READ == {read} && MC_WRITE == {write} && MC_PREAD == {pread} && MC_PWRITE == {pwrite}, "rw");
_Static_assert(MC_OPENAT == {openat} && MC_CLOSE == {close} && MC_FSYNC == {fsync} && MC_STATX == {statx}, "fs");
_Static_assert(MC_SENDMSG == {sendmsg} && MC_RECVMSG == {recvmsg} && MC_FSYNC_DATASYNC == {datasync}, "net");
int main(void)
{{
    struct mc_ring *r = mc_open_sequential();
    struct mc_call c = {{ .op = 99, .check = 1 }};
    int ret = multi_call(r, 1, &c);
    mc_close(r);
    return ret == -EOPNOTSUPP && mc_capacity(0) == -EINVAL && mc_last_error() == 0 ? 0 : 1;
}}
"#,
            size = std::mem::size_of::<McCall>(),
            check = std::mem::offset_of!(McCall, check),
            args = std::mem::offset_of!(McCall, args),
            result = std::mem::offset_of!(McCall, result),
            read = MC_READ,
            write = MC_WRITE,
            pread = MC_PREAD,
            pwrite = MC_PWRITE,
            openat = MC_OPENAT,
            close = MC_CLOSE,
            fsync = MC_FSYNC,
            statx = MC_STATX,
            sendmsg = MC_SENDMSG,
            recvmsg = MC_RECVMSG,
            datasync = MC_FSYNC_DATASYNC,
        ),
    )
    .unwrap();
    let exe = s.path("layout");
    cc(&exe, &src, true);
    run_ok(&mut Command::new(&exe));
}

#[test]
fn the_copy_programs_copy_byte_for_byte() {
    let s = Scratch::new();
    let programs = build_copies(s.dir.path());
    for &size in SIZES {
        let src = s.path(&format!("src-{size}"));
        let data = content(size);
        std::fs::write(&src, &data).unwrap();
        for exe in &programs {
            let dst = s.path("dst");
            // A longer stale destination must be truncated.
            std::fs::write(&dst, vec![b'!'; size + 5000]).unwrap();
            let out = run_ok(Command::new(exe).arg(&src).arg(&dst));
            assert!(
                out.stderr.is_empty(),
                "{}: {}",
                exe.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                std::fs::read(&dst).unwrap() == data,
                "{} size {size}: copy differs",
                exe.display()
            );
        }
    }
}

/// Counts the calls of `syscall` a program made, with `strace -f -e trace=SYSCALL`.
fn strace_count(exe: &Path, args: &[&Path], syscall: &str, filter: &str, s: &Scratch) -> usize {
    let log = s.path("strace.log");
    run_ok(
        Command::new("strace")
            .args(["-f", "-qq", "-e", &format!("trace={syscall}"), "-o"])
            .arg(&log)
            .arg(exe)
            .args(args),
    );
    let text = std::fs::read_to_string(&log).unwrap();
    text.lines()
        .filter(|l| l.contains(&format!("{syscall}(")) && l.contains(filter))
        .count()
}

#[test]
fn strace_sees_one_io_uring_enter_per_multi_call() {
    if Command::new("strace").arg("-V").output().is_err() {
        eprintln!("skipped: strace is not installed");
        return;
    }
    let s = Scratch::new();
    let programs = build_copies(s.dir.path());
    let dst = s.path("dst");
    for &size in SIZES {
        let src = s.path(&format!("src-{size}"));
        std::fs::write(&src, content(size)).unwrap();
        let tail = usize::from(size % CHUNK != 0);
        // copy_multicall: one multi-call per full 4 KiB, one for the short read of the tail (its
        // bytes then written with write(2)), one reading 0 at end of file.
        let enters = strace_count(&programs[1], &[&src, &dst], "io_uring_enter", "", &s);
        assert_eq!(
            enters,
            size / CHUNK + tail + 1,
            "copy_multicall, size {size}"
        );
        // copy_multicall_looped: one per K * 4 KiB, then the same tail logic.
        let enters = strace_count(&programs[2], &[&src, &dst], "io_uring_enter", "", &s);
        assert_eq!(
            enters,
            size / (CHUNK * LOOPED_K) + tail + 1,
            "looped, size {size}"
        );
        // copy_loop: plain read(2)s of 4 KiB, one per chunk, no io_uring at all.
        let reads = strace_count(&programs[0], &[&src, &dst], "read", ", 4096)", &s);
        assert_eq!(
            reads,
            size / CHUNK + tail + 1,
            "copy_loop reads, size {size}"
        );
        assert_eq!(
            strace_count(&programs[0], &[&src, &dst], "io_uring_enter", "", &s),
            0
        );
        // copy_single_call: one copy_file_range moving the whole file, one returning 0 (just the
        // one returning 0 for an empty file).
        let calls = strace_count(&programs[3], &[&src, &dst], "copy_file_range", "", &s);
        assert_eq!(
            calls,
            1 + usize::from(size > 0),
            "copy_single_call, size {size}"
        );
    }
}

#[test]
fn the_copy_programs_time_repeated_copies() {
    let s = Scratch::new();
    let programs = build_copies(s.dir.path());
    let src = s.path("src");
    std::fs::write(&src, content(81920)).unwrap();
    for exe in &programs {
        let out = run_ok(Command::new(exe).arg(&src).arg(s.path("dst")).arg("3"));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("copies=3 total_ns="),
            "{}: {text}",
            exe.display()
        );
        assert_eq!(std::fs::read(s.path("dst")).unwrap(), content(81920));
    }
    // Repeated copies go to a new file each (never rewrite DST in place: on ext4 that times the
    // disk, see copy_common.h): a hard link to the old DST keeps the old bytes.
    for exe in &programs {
        std::fs::write(s.path("dst"), b"old").unwrap();
        let _ = std::fs::remove_file(s.path("old"));
        std::fs::hard_link(s.path("dst"), s.path("old")).unwrap();
        run_ok(Command::new(exe).arg(&src).arg(s.path("dst")).arg("2"));
        assert_eq!(
            std::fs::read(s.path("old")).unwrap(),
            b"old",
            "{}",
            exe.display()
        );
        assert_eq!(std::fs::read(s.path("dst")).unwrap(), content(81920));
    }
}

#[test]
fn syscall_cost_prints_both_costs_and_the_ratio() {
    let s = Scratch::new();
    let exe = s.path("syscall_cost");
    cc(&exe, &c_source("syscall_cost.c"), false);
    let out = run_ok(Command::new(&exe).arg("10000"));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("getppid syscall:") && lines[0].ends_with(" ns"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("procedure call:") && lines[1].ends_with(" ns"),
        "{text}"
    );
    assert!(lines[2].starts_with("ratio:"), "{text}");
}

#[test]
fn from_c_an_openat_hands_its_file_on_through_a_slot_in_independent_chains() {
    let s = Scratch::new();
    std::fs::write(s.path("a"), b"first").unwrap();
    std::fs::write(s.path("b"), b"second").unwrap();
    let src = s.path("slots.c");
    std::fs::write(
        &src,
        format!(
            r#"#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include "pkprof_multicall.h"
_Static_assert(MC_OP_MASK == {mask} && MC_FIXED == {fixed} && MC_RESOLVE_CACHED == {cached} && MC_INTO_SLOT == {into}, "flags");
_Static_assert(MC_OPEN_SQPOLL == {sqpoll} && MC_OPEN_NO_RING_FD == {noringfd}, "open flags");
int main(void)
{{
    struct mc_ring *r = mc_open_opts(8, 2, 0);
    if (!r) {{ perror(mc_last_error()); return 2; }}
    char a[16] = {{0}}, b[16] = {{0}};
    struct mc_call c[6] = {{
        {{ .op = MC_OPENAT | MC_INTO_SLOT | MC_RESOLVE_CACHED, .check = 1,
           .args = {{ AT_FDCWD, (long)"{dir}/a", O_RDONLY | O_CLOEXEC, 0, 0 }} }},
        {{ .op = MC_READ | MC_FIXED, .args = {{ 0, (long)a, sizeof a }} }},
        {{ .op = MC_CLOSE | MC_FIXED, .args = {{ 0 }} }},
        {{ .op = MC_OPENAT | MC_INTO_SLOT, .check = 1,
           .args = {{ AT_FDCWD, (long)"{dir}/missing", O_RDONLY, 0, 1 }} }},
        {{ .op = MC_READ | MC_FIXED, .args = {{ 1, (long)b, sizeof b }} }},
        {{ .op = MC_OPENAT | MC_INTO_SLOT, .check = 1,
           .args = {{ AT_FDCWD, (long)"{dir}/b", O_RDONLY, 0, 2 }} }}, /* slot 2: out of the table */
    }};
    int lens[2] = {{ 3, 2 }}, index[2] = {{ 0, 0 }};
    if (multi_call_chains(r, 6, c, 2, lens, index) != -EINVAL) return 3; /* lens sum 5 != 6 */
    if (multi_call_chains(r, 6, c, 3, (int[]){{3, 2, 1}}, (int[3]){{0}}) != -EINVAL) return 4;
    if (multi_call_chains(r, 5, c, 2, lens, index) != 0) return 5;
    if (index[0] != 4 || index[1] != 1) return 6;
    if (c[0].result != 0 || c[1].result != 5 || c[2].result != 0) return 7;
    if (c[3].result != -ENOENT || c[4].result != -ECANCELED || strcmp(a, "first")) return 8;
    if (mc_enters(r) < 1) return 9;
    struct mc_call bad = {{ .op = MC_READ | 0x800, .args = {{ 0 }} }};
    if (multi_call(r, 1, &bad) != -EOPNOTSUPP) return 10;
    mc_close(r);
    return 0;
}}
"#,
            dir = s.dir.path().display(),
            mask = MC_OP_MASK,
            fixed = MC_FIXED,
            cached = MC_RESOLVE_CACHED,
            into = MC_INTO_SLOT,
            sqpoll = MC_OPEN_SQPOLL,
            noringfd = MC_OPEN_NO_RING_FD,
        ),
    )
    .unwrap();
    let exe = s.path("slots");
    cc(&exe, &src, true);
    run_ok(&mut Command::new(&exe));
}
