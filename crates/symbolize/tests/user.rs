//! User-space symbolization of fixture processes that are captured while they run and symbolized
//! after they were killed and reaped (as pkprof does at the end of a recording).
//!
//! Fixtures are built here from `tests/fixtures/` (see the comments there). Capturing reads
//! `/proc/PID/map_files`, which needs root: those tests are ignored unless run with
//! `--include-ignored` as root.

mod common;

use std::fs;

use common::*;
use pkprof_profile::{Frame, FrameKind};
use pkprof_symbolize::{Symbolizer, SymbolizerOptions};

fn names(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.name.as_str()).collect()
}

/// Capture a running C fixture, kill it, then symbolize two addresses inside
/// `pkprof_fixture_middle` and `pkprof_fixture_leaf`.
///
/// Expected: one frame each (no inlining, lines off), named after the function, `module` the
/// binary's path, `offset` the file offset of the address (symbol's file offset + delta),
/// `build_id` the binary's GNU build-id as `readelf -n` prints it.
#[test]
#[ignore = "needs root"]
fn exited_process_is_symbolized() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_spin(dir.path());
    let middle = function_in_file(&exe, "pkprof_fixture_middle");
    let leaf = function_in_file(&exe, "pkprof_fixture_leaf");

    let mut fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions {
        lines: false,
        ..Default::default()
    });
    sym.capture_process(pid).unwrap();
    // Idempotent.
    sym.capture_process(pid).unwrap();
    let middle_addr = runtime_address(pid, &exe, middle.file_offset) + 4;
    let leaf_addr = runtime_address(pid, &exe, leaf.file_offset) + 1;
    fixture.kill();

    let frames = sym.symbolize_user(pid, &[middle_addr, leaf_addr, middle_addr]);
    assert_eq!(frames.len(), 3);
    let exe_path = exe.to_str().unwrap();
    let build_id = readelf_build_id(&exe);
    assert_eq!(build_id.len(), 40, "the toolchain links a sha1 build-id");
    for (f, (name, offset)) in frames.iter().zip([
        ("pkprof_fixture_middle", middle.file_offset + 4),
        ("pkprof_fixture_leaf", leaf.file_offset + 1),
        ("pkprof_fixture_middle", middle.file_offset + 4),
    ]) {
        assert_eq!(
            f,
            &vec![Frame {
                kind: FrameKind::User,
                name: name.to_string(),
                module: exe_path.to_string(),
                offset,
                symbolized: true,
                file: None,
                line: None,
                inlined: false,
                build_id: build_id.clone(),
            }]
        );
    }
    assert_eq!(sym.exe(pid).as_deref(), Some(exe_path));
    assert_eq!(sym.comm(pid).as_deref(), Some("spin"));
    assert!(sym.warnings().is_empty(), "{:?}", sym.warnings());
}

/// The executable is copied, started, and deleted before the capture: maps shows
/// `PATH (deleted)` and only `/proc/PID/map_files` still reaches the file.
///
/// Expected: `pkprof_fixture_leaf`, module = the copied path without ` (deleted)`.
#[test]
#[ignore = "needs root"]
fn deleted_executable_is_symbolized() {
    let build_dir = tempfile::tempdir().unwrap();
    let built = build_spin(build_dir.path());
    let run_dir = tempfile::tempdir().unwrap();
    let exe = run_dir.path().join("doomed");
    fs::copy(&built, &exe).unwrap();
    let leaf = function_in_file(&exe, "pkprof_fixture_leaf");

    let mut fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    fs::remove_file(&exe).unwrap();
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    let addr = runtime_address(pid, &exe, leaf.file_offset) + 2;
    fixture.kill();

    let frames = sym.symbolize_user(pid, &[addr]);
    let f = &frames[0];
    assert_eq!(names(f), vec!["pkprof_fixture_leaf"]);
    assert_eq!(f[0].module, exe.to_str().unwrap());
    assert_eq!(f[0].offset, leaf.file_offset + 2);
    assert!(f[0].symbolized);
    assert_eq!(f[0].build_id, readelf_build_id(&built));
    assert_eq!(sym.exe(pid).as_deref(), exe.to_str());
}

/// C++: `_ZN6pkprof7fixture7computeEi` is demangled to `pkprof::fixture::compute(int)`, and with
/// `lines` it gets the fixture's file and a line inside `compute`.
///
/// `outer` has `helper` always-inlined into it twice (-O2). Among all its instruction addresses,
/// those in the inlined copies give two frames, outermost first:
///   `pkprof::fixture::outer(int)` at a line of `outer` (the call site), inlined = false
///   `helper` (as DWARF names it) at a line of `helper`,                   inlined = true
#[test]
#[ignore = "needs root"]
fn cpp_demangling_lines_and_inlined_frames() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_ns(dir.path());
    let compute = function_in_file(&exe, "_ZN6pkprof7fixture7computeEi");
    let outer = function_in_file(&exe, "_ZN6pkprof7fixture5outerEi");
    assert!(outer.size > 0);

    let mut fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions {
        lines: true,
        ..Default::default()
    });
    let mut plain = Symbolizer::new(SymbolizerOptions {
        lines: false,
        ..Default::default()
    });
    sym.capture_process(pid).unwrap();
    plain.capture_process(pid).unwrap();
    let compute_addr = runtime_address(pid, &exe, compute.file_offset);
    let outer_start = runtime_address(pid, &exe, outer.file_offset);
    fixture.kill();

    let src = fixture_source("ns.cpp");
    let src_name = src.file_name().unwrap().to_str().unwrap();
    let (compute_first, compute_last) = (
        marker_line("ns.cpp", "compute-start"),
        marker_line("ns.cpp", "compute-end"),
    );
    let (helper_first, helper_last) = (
        marker_line("ns.cpp", "helper-start"),
        marker_line("ns.cpp", "helper-end"),
    );
    let (outer_first, outer_last) = (
        marker_line("ns.cpp", "outer-start"),
        marker_line("ns.cpp", "outer-end"),
    );

    // Without lines: the demangled name only.
    let f = &plain.symbolize_user(pid, &[compute_addr])[0];
    assert_eq!(names(f), vec!["pkprof::fixture::compute(int)"]);
    assert_eq!((f[0].file.as_ref(), f[0].line), (None, None));

    // With lines.
    let f = &sym.symbolize_user(pid, &[compute_addr])[0];
    assert_eq!(names(f), vec!["pkprof::fixture::compute(int)"]);
    assert!(f[0].file.as_deref().unwrap().ends_with(src_name), "{f:?}");
    let line = f[0].line.unwrap();
    assert!((compute_first..=compute_last).contains(&line), "{f:?}");

    // Every instruction address of `outer`.
    let addrs: Vec<u64> = (0..outer.size).map(|d| outer_start + d).collect();
    let all = sym.symbolize_user(pid, &addrs);
    let mut inlined_seen = 0;
    for frames in &all {
        assert_eq!(frames[0].name, "pkprof::fixture::outer(int)", "{frames:?}");
        assert!(!frames[0].inlined);
        if frames.len() == 1 {
            continue;
        }
        assert_eq!(frames.len(), 2, "{frames:?}");
        let (o, h) = (&frames[0], &frames[1]);
        // DWARF names the inlined subroutine by its plain name.
        assert_eq!(h.name, "helper", "{h:?}");
        assert!(h.inlined && h.symbolized);
        assert_eq!((h.module.as_str(), h.offset), (o.module.as_str(), o.offset));
        assert!(
            (outer_first..=outer_last).contains(&o.line.unwrap()),
            "{frames:?}"
        );
        assert!(
            (helper_first..=helper_last).contains(&h.line.unwrap()),
            "{frames:?}"
        );
        assert!(h.file.as_deref().unwrap().ends_with(src_name));
        inlined_seen += 1;
    }
    assert!(
        inlined_seen > 0,
        "no address of outer showed helper inlined"
    );
}

/// Addresses nobody can name are kept, with a fallback name:
/// - in no mapping of a captured process: `[unknown]+0xADDR`;
/// - of a process never captured: `[unknown]+0xADDR`;
/// - in a file that cannot be opened (`/nonexistent/libgone.so`) or is not ELF (a text file):
///   `libgone.so+0xOFF` / `notelf.so+0xOFF` (file offset), each with a warning;
///
/// while the other addresses of the same call are still named. Uses a maps snapshot registered
/// with `capture_from_maps`: the fixture's real lines plus two made-up ones.
#[test]
#[ignore = "needs root"]
fn unknown_and_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_spin(dir.path());
    let leaf = function_in_file(&exe, "pkprof_fixture_leaf");
    let not_elf = dir.path().join("notelf.so");
    fs::write(&not_elf, "this is not an ELF file\n".repeat(1000)).unwrap();

    let mut fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    let mut maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.push_str("10000-20000 r-xp 00001000 fe:01 987654321 /nonexistent/libgone.so\n");
    maps.push_str(&format!(
        "30000-40000 r-xp 00000000 fe:01 987654322 {}\n",
        not_elf.display()
    ));
    let leaf_addr = runtime_address(pid, &exe, leaf.file_offset);
    fixture.kill();

    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_from_maps(pid, &maps);
    let frames = sym.symbolize_user(pid, &[0x10, 0x10010, leaf_addr, 0x30020]);
    assert_eq!(
        frames[0],
        vec![Frame {
            kind: FrameKind::User,
            name: "[unknown]+0x10".into(),
            module: "[unknown]".into(),
            offset: 0x10,
            symbolized: false,
            ..Frame::default()
        }]
    );
    // 0x10010 is 0x10 into a mapping of file offset 0x1000.
    assert_eq!(
        frames[1],
        vec![Frame {
            kind: FrameKind::User,
            name: "libgone.so+0x1010".into(),
            module: "/nonexistent/libgone.so".into(),
            offset: 0x1010,
            symbolized: false,
            ..Frame::default()
        }]
    );
    assert_eq!(names(&frames[2]), vec!["pkprof_fixture_leaf"]);
    assert_eq!(names(&frames[3]), vec!["notelf.so+0x20"]);
    assert!(!frames[3][0].symbolized);

    let warnings = sym.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("/nonexistent/libgone.so") && w.contains(&format!("pid {pid}"))),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("notelf.so")),
        "{warnings:?}"
    );
    // Asking again adds no duplicate warning.
    sym.symbolize_user(pid, &[0x10010, 0x30020]);
    assert_eq!(sym.warnings(), warnings);

    // A pid never captured.
    let f = &sym.symbolize_user(u32::MAX, &[0xdead])[0];
    assert_eq!(names(f), vec!["[unknown]+0xdead"]);
}

/// JIT code: the fixture maps anonymous executable memory; the test describes it in
/// /tmp/perf-PID.map as a JIT would. `jitted_one` is written before the capture, `jitted_two`
/// appended after the process exited (read again at symbolization time). An address of that
/// memory not in the map is `[anon]+0xADDR`.
///
/// Then a second symbolizer: the map is deleted after the capture; the copy read at capture time
/// still names `jitted_one`.
#[test]
#[ignore = "needs root"]
fn perf_map_names_jit_code() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_spin(dir.path());
    let mut fixture = Running::start(&exe, &["jit"]);
    let pid = fixture.pid();
    let jit = fixture.lines[0].strip_prefix("jit 0x").unwrap();
    let jit = u64::from_str_radix(jit, 16).unwrap();
    let map_path = format!("/tmp/perf-{pid}.map");
    let _cleanup = RemoveOnDrop(map_path.clone());
    fs::write(&map_path, format!("{jit:x} 40 jitted_one\n")).unwrap();

    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    let mut early = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    early.capture_process(pid).unwrap();
    fixture.kill();
    fs::write(
        &map_path,
        format!(
            "{jit:x} 40 jitted_one\n0x{:x} 0x40 jitted_two (LazyCompile)\n",
            jit + 0x40
        ),
    )
    .unwrap();

    let frames = sym.symbolize_user(pid, &[jit + 0x10, jit + 0x50, jit + 0x100]);
    assert_eq!(
        frames[0],
        vec![Frame {
            kind: FrameKind::User,
            name: "jitted_one".into(),
            module: map_path.clone(),
            offset: jit + 0x10,
            symbolized: true,
            ..Frame::default()
        }]
    );
    assert_eq!(names(&frames[1]), vec!["jitted_two (LazyCompile)"]);
    assert_eq!(
        names(&frames[2]),
        vec![format!("[anon]+{:#x}", jit + 0x100)]
    );
    assert_eq!(frames[2][0].module, "[anon]");

    fs::remove_file(&map_path).unwrap();
    let frames = early.symbolize_user(pid, &[jit + 0x10, jit + 0x50]);
    assert_eq!(names(&frames[0]), vec!["jitted_one"]);
    assert_eq!(names(&frames[1]), vec![format!("[anon]+{:#x}", jit + 0x50)]);
}

struct RemoveOnDrop(String);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// A shared library used by several processes is opened once: two fixtures share libc and their
/// binary (same inode), so capturing the second opens nothing new.
#[test]
#[ignore = "needs root"]
fn shared_files_are_opened_once() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_spin(dir.path());
    let a = Running::start(&exe, &[]);
    let b = Running::start(&exe, &[]);
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(a.pid()).unwrap();
    let after_first = sym.open_files();
    sym.capture_process(b.pid()).unwrap();
    assert_eq!(sym.open_files(), after_first);
    // A copy of the binary at another path (other inode, same build-id) adds nothing either.
    let copy = dir.path().join("spin-copy");
    fs::copy(&exe, &copy).unwrap();
    let c = Running::start(&copy, &[]);
    sym.capture_process(c.pid()).unwrap();
    assert_eq!(sym.open_files(), after_first);
    let leaf = function_in_file(&copy, "pkprof_fixture_leaf");
    let addr = runtime_address(c.pid(), &copy, leaf.file_offset);
    let f = &sym.symbolize_user(c.pid(), &[addr])[0];
    assert_eq!(names(f), vec!["pkprof_fixture_leaf"]);
    assert_eq!(f[0].module, copy.to_str().unwrap());
}

/// Capturing a pid that does not exist fails with a one-line error, again on the next call.
#[test]
fn missing_process() {
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    let pid = u32::MAX - 1;
    let err = sym.capture_process(pid).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("process {pid} is gone: cannot read /proc/{pid}/maps")
    );
    assert!(sym.capture_process(pid).is_err());
    sym.ensure_mapped(pid, 0x1000);
    assert_eq!(
        names(&sym.symbolize_user(pid, &[0x1000])[0]),
        vec!["[unknown]+0x1000"]
    );
}

/// The vDSO has no file: it is copied out of the process's memory at capture time. An address in
/// its `clock_gettime` (found in that same image: the vDSO is mapped from file offset 0) is named
/// after it (`__vdso_clock_gettime` or its alias `clock_gettime`), module `[vdso]`.
#[test]
#[ignore = "needs root"]
fn vdso_is_symbolized() {
    use object::{Object, ObjectSection, ObjectSymbol};
    use std::os::unix::fs::FileExt;

    let dir = tempfile::tempdir().unwrap();
    let exe = build_spin(dir.path());
    let mut fixture = Running::start(&exe, &[]);
    let pid = fixture.pid();
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps.lines().find(|l| l.ends_with("[vdso]")).unwrap();
    let (start, end) = line
        .split_whitespace()
        .next()
        .unwrap()
        .split_once('-')
        .unwrap();
    let start = u64::from_str_radix(start, 16).unwrap();
    let end = u64::from_str_radix(end, 16).unwrap();
    let mut image = vec![0u8; (end - start) as usize];
    fs::File::open(format!("/proc/{pid}/mem"))
        .unwrap()
        .read_exact_at(&mut image, start)
        .unwrap();
    let elf = object::File::parse(&*image).unwrap();
    let s = elf
        .dynamic_symbols()
        .find(|s| s.name() == Ok("__vdso_clock_gettime"))
        .unwrap();
    let section = elf.section_by_index(s.section_index().unwrap()).unwrap();
    let file_offset = s.address() - section.address() + section.file_range().unwrap().0;

    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    fixture.kill();
    let f = &sym.symbolize_user(pid, &[start + file_offset + 1])[0];
    assert!(
        f[0].name == "__vdso_clock_gettime" || f[0].name == "clock_gettime",
        "{f:?}"
    );
    assert_eq!(
        (f[0].module.as_str(), f[0].offset),
        ("[vdso]", file_offset + 1)
    );
}

/// Code mapped after the capture (here: the fixture maps its own executable once more, at offset
/// 0, as a dlopen would map a library). Before `ensure_mapped` an address there is
/// `[unknown]+0xADDR`; `ensure_mapped` re-captures the live process and the address becomes
/// `pkprof_fixture_leaf` (file offset = symbol's file offset, since the mapping starts at offset
/// 0). Mappings captured first stay known.
#[test]
#[ignore = "needs root"]
fn late_mappings_are_captured_by_ensure_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_spin(dir.path());
    let leaf = function_in_file(&exe, "pkprof_fixture_leaf");
    let mut fixture = Running::start(&exe, &["late"]);
    let pid = fixture.pid();
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_process(pid).unwrap();
    let first_addr = runtime_address(pid, &exe, leaf.file_offset);

    let late = fixture.ask("go");
    let late = u64::from_str_radix(late.strip_prefix("late 0x").unwrap(), 16).unwrap();
    let late_addr = late + leaf.file_offset;
    assert_eq!(
        names(&sym.symbolize_user(pid, &[late_addr])[0]),
        vec![format!("[unknown]+{late_addr:#x}")]
    );
    // Re-captures are rate-limited (20 ms per process).
    std::thread::sleep(std::time::Duration::from_millis(30));
    sym.ensure_mapped(pid, late_addr);
    sym.ensure_mapped(pid, first_addr);
    fixture.kill();

    let frames = sym.symbolize_user(pid, &[late_addr, first_addr]);
    for f in &frames {
        assert_eq!(names(f), vec!["pkprof_fixture_leaf"]);
        assert_eq!(f[0].module, exe.to_str().unwrap());
        assert_eq!(f[0].offset, leaf.file_offset);
    }
}

/// A stripped shared library (`strip --strip-all`: only the exported `.dynsym` symbols, with
/// their sizes, are left; see `tests/fixtures/stripped.c`). Its internal functions are covered by
/// no symbol: each gap between exported functions is one routine named after the symbol before
/// it, not one `libpkstripped.so+0xOFFSET` routine per address; code before the first exported
/// function is `libpkstripped.so!<unknown>`. The offsets come from the unstripped build (strip
/// moves no code). No process is needed: the mapping is described as /proc/PID/maps would.
#[test]
fn stripped_library_code_is_named_by_its_gap() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["-O1", "-fPIC", "-shared", "-fno-toplevel-reorder"];
    let full = build("cc", "stripped.c", &flags, dir.path(), "libfull.so");
    let lib = dir.path().join("libpkstripped.so");
    fs::copy(&full, &lib).unwrap();
    let status = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg(&lib)
        .status()
        .expect("strip (binutils) runs");
    assert!(status.success());

    use std::os::unix::fs::MetadataExt;
    let inode = fs::metadata(&lib).unwrap().ino();
    let base = 0x7f00_0000_0000u64;
    let maps = format!(
        "{base:x}-{:x} r-xp 00000000 fe:01 {inode} {}\n",
        base + 0x10000,
        lib.display()
    );
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_from_maps(4_000_000, &maps);
    let at = |f: &str| base + function_in_file(&full, f).file_offset + 2;
    let frames = sym.symbolize_user(
        4_000_000,
        &[
            at("internal_first"),
            at("pk_exported"),
            at("internal_a"),
            at("internal_b"),
            at("internal_c"),
        ],
    );
    let got: Vec<&str> = frames.iter().map(|f| f[0].name.as_str()).collect();
    assert_eq!(
        got,
        vec![
            "libpkstripped.so!<unknown>",
            "pk_exported",
            "libpkstripped.so!<after pk_exported>",
            "libpkstripped.so!<after pk_exported>",
            "libpkstripped.so!<after pk_exported_two>",
        ]
    );
    // Still not a symbol of its own: the file offset is kept, and the frame says it is unnamed.
    let f = &frames[2][0];
    assert!(!f.symbolized && f.module == lib.display().to_string());
    assert_eq!(
        f.offset,
        function_in_file(&full, "internal_a").file_offset + 2
    );
    // What `report --symbols` needs to find the debug file later: strip keeps the build-id note.
    let build_id = readelf_build_id(&full);
    assert!(!build_id.is_empty());
    assert!(frames.iter().all(|f| f[0].build_id == build_id));
    assert!(sym.warnings().is_empty(), "{:?}", sym.warnings());
}

/// A binary linked without a build-id note (`-Wl,--build-id=none`): its frames carry an empty
/// build-id, as `readelf -n` finds none.
#[test]
fn binary_without_build_id_has_frames_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["-O1", "-fPIC", "-shared", "-Wl,--build-id=none"];
    let lib = build("cc", "stripped.c", &flags, dir.path(), "libnoid.so");
    assert_eq!(readelf_build_id(&lib), "");

    use std::os::unix::fs::MetadataExt;
    let inode = fs::metadata(&lib).unwrap().ino();
    let base = 0x7f00_0000_0000u64;
    let maps = format!(
        "{base:x}-{:x} r-xp 00000000 fe:01 {inode} {}\n",
        base + 0x10000,
        lib.display()
    );
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.capture_from_maps(4_000_001, &maps);
    let addr = base + function_in_file(&lib, "pk_exported").file_offset;
    let frames = sym.symbolize_user(4_000_001, &[addr]);
    assert_eq!(names(&frames[0]), vec!["pk_exported"]);
    assert_eq!(frames[0][0].build_id, "");
}
