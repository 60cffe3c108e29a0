//! Shared helpers of the symbolize tests: build the fixture programs from `tests/fixtures/`, run
//! them until they print "ready", and find where a function of theirs is, in the file and in the
//! running process.
#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use object::{Object, ObjectSection, ObjectSymbol};

pub fn fixture_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Compile `tests/fixtures/<source>` into `dir/<out>` with `compiler` and the given flags.
pub fn build(compiler: &str, source: &str, flags: &[&str], dir: &Path, out: &str) -> PathBuf {
    let out = dir.join(out);
    let status = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(fixture_source(source))
        .status()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(status.success(), "{compiler} failed on {source}");
    out
}

/// The GNU build-id of an ELF file as binutils' `readelf -n` prints it (lower-case hex), or ""
/// when it has none: the truth for the build-ids pkprof keeps in frames.
pub fn readelf_build_id(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .expect("readelf (binutils) runs");
    assert!(out.status.success(), "readelf -n {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .unwrap_or_default()
}

/// spin.c: C, -O1 -g, frame pointers.
pub fn build_spin(dir: &Path) -> PathBuf {
    build(
        "cc",
        "spin.c",
        &["-O1", "-g", "-fno-omit-frame-pointer"],
        dir,
        "spin",
    )
}

/// ns.cpp: C++, -O2 -g, frame pointers.
pub fn build_ns(dir: &Path) -> PathBuf {
    build(
        "g++",
        "ns.cpp",
        &["-O2", "-g", "-fno-omit-frame-pointer"],
        dir,
        "ns",
    )
}

/// A running fixture; killed and reaped on drop (or earlier with [`Running::kill`]).
pub struct Running {
    pub child: Child,
    /// Lines printed before "ready".
    pub lines: Vec<String>,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Running {
    pub fn start(exe: &Path, args: &[&str]) -> Running {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "fixture exited before printing ready");
            let line = line.trim_end().to_string();
            if line == "ready" {
                break;
            }
            lines.push(line);
        }
        Running {
            child,
            lines,
            stdin,
            stdout,
        }
    }

    /// Send a line to the fixture and return the line it answers.
    pub fn ask(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        answer.trim_end().to_string()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kill and reap: afterwards /proc/PID is gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        assert!(!Path::new(&format!("/proc/{}", self.pid())).exists());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A function's place in an ELF file.
#[derive(Clone, Copy, Debug)]
pub struct FnInFile {
    /// File offset of the first instruction.
    pub file_offset: u64,
    pub size: u64,
}

/// Find function `name` (as in the symbol table, i.e. mangled) in the ELF file `path`: its
/// symbol value is a virtual address; the section holding it tells the file offset.
pub fn function_in_file(path: &Path, name: &str) -> FnInFile {
    let data = fs::read(path).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let sym = elf
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("{name} not in {}", path.display()));
    let section = elf.section_by_index(sym.section_index().unwrap()).unwrap();
    let (section_offset, _) = section.file_range().unwrap();
    FnInFile {
        file_offset: sym.address() - section.address() + section_offset,
        size: sym.size(),
    }
}

/// The runtime address of file offset `file_offset` of `path` in process `pid`, from its maps.
pub fn runtime_address(pid: u32, path: &Path, file_offset: u64) -> u64 {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let path = path.to_str().unwrap();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[1].contains('x') {
            continue;
        }
        let mapped = f[5..].join(" ");
        if mapped != path && mapped != format!("{path} (deleted)") {
            continue;
        }
        let (start, end) = f[0].split_once('-').unwrap();
        let start = u64::from_str_radix(start, 16).unwrap();
        let end = u64::from_str_radix(end, 16).unwrap();
        let offset = u64::from_str_radix(f[2], 16).unwrap();
        if (offset..offset + (end - start)).contains(&file_offset) {
            return start + (file_offset - offset);
        }
    }
    panic!("offset {file_offset:#x} of {path} is not mapped executable in {pid}");
}

/// Number of the line of `path` holding the marker comment `// LINE <marker>`.
pub fn marker_line(source: &str, marker: &str) -> u32 {
    let text = fs::read_to_string(fixture_source(source)).unwrap();
    let tag = format!("// LINE {marker}");
    let i = text
        .lines()
        .position(|l| l.trim_end().ends_with(&tag))
        .unwrap_or_else(|| panic!("no {tag} in {source}"));
    i as u32 + 1
}
