//! Where a process's CPython interpreter is and how its structures are laid out: the version and
//! the `_PyRuntime` address come from the binary's symbols (`Py_Version`, `_PyRuntime`), the
//! structure offsets from `offsets.json` (one entry per minor version, generated from each
//! version's own headers by `tools/python_offsets/gen.sh`) and, from 3.13 on, from the debug
//! offsets the interpreter exports at the start of `_PyRuntime` (docs/design.md, "Python frames").

use std::collections::HashMap;
use std::fs::File;
use std::sync::{Mutex, OnceLock};

use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};
use serde::Deserialize;

use crate::maps::{parse_maps, LineKind, MapsLine};

/// Offsets of the fields pkprof reads, in bytes (0 where a version has no such field; see
/// `tools/python_offsets/offsets.c` for what each one is).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PyOffsets {
    pub runtime_interpreters_head: u32,
    pub interp_threads_head: u32,
    pub tstate_next: u32,
    pub tstate_native_thread_id: u32,
    pub tstate_cframe: u32,
    pub tstate_current_frame: u32,
    pub frame_code: u32,
    pub frame_instr: u32,
    /// 1: `frame_instr` points at the current instruction (3.13); 0: at the last one executed.
    pub frame_instr_is_current: u32,
    pub frame_previous: u32,
    pub frame_owner: u32,
    pub frame_is_entry: u32,
    pub owned_by_cstack: u32,
    pub code_filename: u32,
    pub code_name: u32,
    pub code_qualname: u32,
    pub code_firstlineno: u32,
    pub code_linetable: u32,
    pub code_adaptive: u32,
    pub object_type: u32,
    pub bytes_size: u32,
    pub bytes_sval: u32,
    pub unicode_length: u32,
    pub unicode_state: u32,
    pub unicode_ascii_size: u32,
    pub unicode_compact_size: u32,
}

/// The offsets table, by minor version (`"3.11"`).
fn table() -> &'static HashMap<String, PyOffsets> {
    static TABLE: OnceLock<HashMap<String, PyOffsets>> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_json::from_str(include_str!("offsets.json")).expect("offsets.json is valid")
    })
}

/// The offsets of CPython `major.minor` from the table, if it covers that version.
pub fn table_offsets(major: u8, minor: u8) -> Option<PyOffsets> {
    table().get(&format!("{major}.{minor}")).copied()
}

/// The minor versions the table covers, sorted (`["3.11", "3.12", "3.13"]`).
pub fn supported_versions() -> Vec<String> {
    let mut v: Vec<String> = table().keys().cloned().collect();
    v.sort();
    v
}

/// A CPython found in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyLayout {
    /// `Py_Version`'s major, minor and micro.
    pub version: (u8, u8, u8),
    /// Address of `_PyRuntime` in the process.
    pub runtime: u64,
    /// The binary that holds it (`libpython3.12.so.1.0`, `python3.11`).
    pub binary: String,
    pub offsets: PyOffsets,
    /// The offsets came from the interpreter's own debug offsets (3.13+), not only the table.
    pub from_debug_offsets: bool,
}

impl PyLayout {
    pub fn version_string(&self) -> String {
        let (a, b, c) = self.version;
        format!("{a}.{b}.{c}")
    }
}

/// What looking for CPython in a process found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PyDetect {
    /// No mapped binary exports `_PyRuntime`.
    NotPython,
    /// A CPython pkprof has no offsets for (the version, e.g. `3.10.13`, and the binary).
    Unsupported {
        version: String,
        binary: String,
    },
    Found(PyLayout),
}

/// The first bytes of `_Py_DebugOffsets` (3.13+).
const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";

/// Looks for CPython in `pid`'s mappings: a file whose name says python (`python3.X`,
/// `libpython3.X.so`) exporting `_PyRuntime` and `Py_Version`. Errors (the process is gone, a
/// binary cannot be read) read as `NotPython`: its samples stay native-only.
pub fn detect(pid: u32) -> PyDetect {
    // The executable areas name the candidate files (crate::procmap: no text of every area,
    // whose formatting cost most of the detection of processes that map libpython without
    // running Python, such as perf's). A kernel without PROCMAP_QUERY: the whole text.
    let (lines, whole) = match crate::procmap::executable_lines(pid) {
        Some(Ok(lines)) => (lines, false),
        Some(Err(_)) => return PyDetect::NotPython,
        None => {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
                return PyDetect::NotPython;
            };
            (parse_maps(&text), true)
        }
    };
    detect_in(pid, &lines, whole)
}

/// [`detect`] from the text of `/proc/PID/maps` as a kernel without `PROCMAP_QUERY` gives it
/// (candidates from its executable areas): for tests that compare the two paths.
#[doc(hidden)]
pub fn detect_in_maps_text(pid: u32, text: &str) -> PyDetect {
    detect_in(pid, &parse_maps(text), true)
}

/// Where `_PyRuntime` is by its file offset among the areas of a maps text (the lookup that
/// [`runtime_by_bias`] spares): for tests that check the load-bias arithmetic against it.
#[doc(hidden)]
pub fn runtime_by_offset_in_maps_text(pid: u32, text: &str) -> Option<u64> {
    let lines = parse_maps(text);
    for l in lines.iter().filter(|l| is_candidate(l)) {
        if let Some(Inspected::Found(found)) = inspect_area(pid, l) {
            return mapped_at(&lines, l, found.runtime_file_off);
        }
    }
    None
}

/// Whether the detection looks at area `l`: an executable area of a file named like a CPython
/// (`python3.X`, `libpython3.X.so`); the one [`runtime_by_bias`] places its file from (in the
/// text, a file's first line is often a read-only area at the same offset).
pub(crate) fn is_candidate(l: &MapsLine) -> bool {
    l.exec
        && l.kind() == LineKind::File
        && l.path.rsplit('/').next().unwrap_or("").contains("python")
}

/// Where byte `file_off` of the file that area `l` maps lies, among `lines`' areas of that file.
fn mapped_at(lines: &[MapsLine], l: &MapsLine, file_off: u64) -> Option<u64> {
    (lines.iter())
        .filter(|m| m.dev == l.dev && m.inode == l.inode)
        .find_map(|m| m.address_of(file_off))
}

/// [`detect`] over maps lines already read: the executable areas (`whole` false), or every line
/// of the text (`whole`). The symbolizer passes the areas it captured, so a process is not read
/// twice. `_PyRuntime` (data) is placed from the executable area of its file by the file's load
/// bias ([`runtime_by_bias`]); failing that, looked up by file offset among the lines in hand
/// (`whole`) or the process's areas (crate::procmap, else the text read now).
pub(crate) fn detect_in(pid: u32, lines: &[MapsLine], whole: bool) -> PyDetect {
    let mut seen = Vec::new();
    for l in lines {
        if !is_candidate(l) || seen.contains(&l.path) {
            continue;
        }
        let name = l.path.rsplit('/').next().unwrap_or("");
        seen.push(l.path.clone());
        let Some(inspected) = inspect_area(pid, l) else {
            continue;
        };
        let found = match inspected {
            Inspected::NotPython => continue,
            // Before 3.11 there is no `Py_Version`: the file name tells the version.
            Inspected::Unversioned => {
                return PyDetect::Unsupported {
                    version: version_in_name(name).unwrap_or_else(|| "unknown".into()),
                    binary: name.to_string(),
                }
            }
            Inspected::Found(f) => f,
        };
        // `_PyRuntime`'s bytes in the file, and where that file offset is mapped.
        let off = found.runtime_file_off;
        let runtime = match runtime_by_bias(&found, l, page_size()) {
            Some(at) => Some(at),
            None if whole => mapped_at(lines, l, off),
            None => match crate::procmap::file_offset_address(pid, l.dev, l.inode, off) {
                Some(Ok(at)) => at,
                Some(Err(_)) => None, // gone
                // The kernel refused the query this time: the text, read now.
                None => std::fs::read_to_string(format!("/proc/{pid}/maps"))
                    .ok()
                    .and_then(|text| mapped_at(&parse_maps(&text), l, off)),
            },
        };
        let Some(runtime) = runtime else {
            continue;
        };
        let (major, minor, micro) = found.version;
        let version = format!("{major}.{minor}.{micro}");
        let mut offsets = match table_offsets(major, minor) {
            Some(o) => o,
            None => {
                return PyDetect::Unsupported {
                    version,
                    binary: name.to_string(),
                }
            }
        };
        let mut from_debug_offsets = false;
        if let Some(d) = found.debug_offsets {
            if let Some(o) = debug_offsets(&d, major, minor, &offsets) {
                offsets = o;
                from_debug_offsets = true;
            }
        }
        return PyDetect::Found(PyLayout {
            version: found.version,
            runtime,
            binary: name.to_string(),
            offsets,
            from_debug_offsets,
        });
    }
    PyDetect::NotPython
}

/// `3.10` in `libpython3.10.so.1.0` or `python3.10`.
fn version_in_name(name: &str) -> Option<String> {
    let rest = &name[name.find("python")? + "python".len()..];
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let v = v.trim_end_matches('.');
    v.contains('.').then(|| v.to_string())
}

/// What a binary says about itself.
#[derive(Clone)]
enum Inspected {
    /// No `_PyRuntime`.
    NotPython,
    /// `_PyRuntime` but no `Py_Version` (CPython before 3.11).
    Unversioned,
    Found(Found),
}

#[derive(Clone)]
struct Found {
    version: (u8, u8, u8),
    runtime_file_off: u64,
    /// `_PyRuntime`'s address in the file's own layout (its symbol's value).
    runtime_vaddr: u64,
    /// The file's executable loadable segments.
    exec_segments: Vec<LoadSegment>,
    /// The first bytes of `_PyRuntime` as initialised in the file (its debug offsets from 3.13).
    debug_offsets: Option<Vec<u8>>,
}

/// A loadable segment of an ELF file: its bytes in the file and where they go in its layout.
#[derive(Clone, Debug)]
struct LoadSegment {
    file_off: u64,
    file_end: u64,
    /// Address less file offset (wrapping).
    vaddr_less_off: u64,
}

/// Where `_PyRuntime` is in memory, from `l`, an executable area of its file: the loader maps
/// every loadable segment of an ELF file with one load bias, so the area's start and file offset
/// place the whole file (no query of the process's other areas, which was most of the detection's
/// cost in processes that link libpython without running Python). The area maps an executable
/// segment from its offset rounded down to a page (`page`: the loader's, the system's page
/// size), or from further in (an area split since). None when no executable segment holds the
/// area's offset.
fn runtime_by_bias(found: &Found, l: &MapsLine, page: u64) -> Option<u64> {
    let seg = (found.exec_segments.iter())
        .find(|s| s.file_off & !(page - 1) <= l.offset && l.offset < s.file_end)?;
    let bias = l
        .start
        .wrapping_sub(l.offset.wrapping_add(seg.vaddr_less_off));
    Some(bias.wrapping_add(found.runtime_vaddr))
}

/// The system's page size (4 KiB where it cannot be read).
fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the running system.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 && (n as u64).is_power_of_two() {
        n as u64
    } else {
        4096
    }
}

/// A file's identity and version: device, inode, size, modification time (s, ns).
type FileId = (u64, u64, u64, i64, i64);

/// Binaries inspected so far, by identity: every process that maps the same `libpython` (perf
/// links one; so does every process of a Python service) asks once, not once per process (a
/// scan of its symbols is milliseconds), and is answered from a `stat` alone. Bounded:
/// forgotten wholesale at `INSPECTED_MAX`.
static INSPECTED: Mutex<Option<HashMap<FileId, Inspected>>> = Mutex::new(None);
const INSPECTED_MAX: usize = 64;

/// What the file that area `l` of `pid` maps says about itself: the mapped file itself
/// (`/proc/PID/map_files/START-END`, which reaches a file deleted or replaced since; it needs
/// CAP_SYS_ADMIN), else the path through the process's root (its own view of the file system:
/// containers) while it still names that file: not deleted, the same inode (not the device too:
/// btrfs subvolumes and older overlayfs report another device to `stat` than maps shows). A file
/// inspected before is known by its `stat` alone; one opened is inspected only if it is the file
/// that was `stat`ed (a rename between the two would cache another file's answer). None when it
/// cannot be read.
fn inspect_area(pid: u32, l: &MapsLine) -> Option<Inspected> {
    use std::os::unix::fs::MetadataExt;

    let id_of = |m: &std::fs::Metadata| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec());
    let mapped = format!("/proc/{pid}/map_files/{:x}-{:x}", l.start, l.end);
    let by_path = (!l.deleted).then(|| format!("/proc/{pid}/root{}", l.path));
    for path in [Some(mapped), by_path].into_iter().flatten() {
        let Ok(m) = std::fs::metadata(&path) else {
            continue;
        };
        if m.ino() != l.inode {
            continue; // replaced since it was mapped: not the file mapped
        }
        let id = id_of(&m);
        if let Some(known) = INSPECTED
            .lock()
            .ok()
            .and_then(|c| c.as_ref().and_then(|c| c.get(&id).cloned()))
        {
            return Some(known);
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        if file.metadata().ok().map(|m| id_of(&m)) != Some(id) {
            continue;
        }
        let found = inspect_file(&file);
        if let Ok(mut c) = INSPECTED.lock() {
            let c = c.get_or_insert_with(HashMap::new);
            if c.len() >= INSPECTED_MAX {
                c.clear();
            }
            c.insert(id, found.clone());
        }
        return Some(found);
    }
    None
}

/// Reads `Py_Version` and `_PyRuntime` from a binary's dynamic symbols (or its symbol table).
fn inspect_file(file: &File) -> Inspected {
    let cache = ReadCache::new(file);
    let Ok(obj) = object::File::parse(&cache) else {
        return Inspected::NotPython;
    };
    match inspect_object(&obj) {
        Ok(f) => Inspected::Found(f),
        Err(runtime) if runtime => Inspected::Unversioned,
        Err(_) => Inspected::NotPython,
    }
}

/// The binary's version and runtime, or whether it has a `_PyRuntime` at all.
fn inspect_object<'a>(obj: &object::File<'a, &'a ReadCache<&'a File>>) -> Result<Found, bool> {
    let find = |name: &str| {
        obj.dynamic_symbols()
            .chain(obj.symbols())
            .find(|s| s.name() == Ok(name) && s.address() != 0)
    };
    let runtime = find("_PyRuntime").ok_or(false)?;
    let version = find("Py_Version").ok_or(true)?;
    // The file bytes of a symbol: its section's data at the symbol's place.
    let bytes =
        |sym: &object::Symbol<'_, '_, &ReadCache<&File>>, len: u64| -> Option<(u64, Vec<u8>)> {
            let sec = obj.section_by_index(sym.section_index()?).ok()?;
            let (off, size) = sec.file_range()?;
            let rel = sym.address().checked_sub(sec.address())?;
            let data = sec.data().ok()?;
            let want = len.min(size.saturating_sub(rel)) as usize;
            Some((
                off + rel,
                data.get(rel as usize..rel as usize + want)?.to_vec(),
            ))
        };
    let (_, v) = bytes(&version, 4).ok_or(true)?;
    let hex = u32::from_le_bytes(v.get(..4).ok_or(true)?.try_into().map_err(|_| true)?);
    let version = ((hex >> 24) as u8, (hex >> 16) as u8, (hex >> 8) as u8);
    let (runtime_file_off, head) = bytes(&runtime, 71 * 8).ok_or(true)?;
    let debug_offsets = head.starts_with(DEBUG_COOKIE).then_some(head);
    let exec_segments = (obj.segments())
        .filter(|seg| {
            matches!(seg.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0)
        })
        .filter_map(|seg| {
            let (off, size) = seg.file_range();
            (size > 0).then(|| LoadSegment {
                file_off: off,
                file_end: off.saturating_add(size),
                vaddr_less_off: seg.address().wrapping_sub(off),
            })
        })
        .collect();
    Ok(Found {
        version,
        runtime_file_off,
        runtime_vaddr: runtime.address(),
        exec_segments,
        debug_offsets,
    })
}

/// The offsets `_Py_DebugOffsets` gives, over `base` (the table's, for what it does not give).
/// Its layout is 3.13's (`Include/internal/pycore_runtime.h`): 8-byte words, indexed here; other
/// versions (3.14 changed it) keep the table's. `None` when the version word disagrees with the
/// symbol's version.
fn debug_offsets(d: &[u8], major: u8, minor: u8, base: &PyOffsets) -> Option<PyOffsets> {
    if (major, minor) != (3, 13) {
        return None;
    }
    let w = |i: usize| -> Option<u32> {
        let b = d.get(i * 8..i * 8 + 8)?;
        u32::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok()
    };
    let version = u64::from_le_bytes(d.get(8..16)?.try_into().ok()?);
    if (version >> 24) as u8 != major || (version >> 16) as u8 != minor {
        return None;
    }
    Some(PyOffsets {
        runtime_interpreters_head: w(5)?,
        interp_threads_head: w(9)?,
        tstate_next: w(21)?,
        tstate_current_frame: w(23)?,
        tstate_native_thread_id: w(25)?,
        tstate_cframe: 0,
        frame_previous: w(29)?,
        frame_code: w(30)?,
        frame_instr: w(31)?,
        frame_owner: w(33)?,
        code_filename: w(35)?,
        code_name: w(36)?,
        code_qualname: w(37)?,
        code_linetable: w(38)?,
        code_firstlineno: w(39)?,
        code_adaptive: w(43)?,
        object_type: w(45)?,
        bytes_size: w(65)?,
        bytes_sval: w(66)?,
        unicode_state: w(68)?,
        unicode_length: w(69)?,
        unicode_ascii_size: w(70)?,
        ..*base
    })
}

#[cfg(test)]
mod tests {
    use super::{runtime_by_bias, version_in_name, Found, LoadSegment};
    use crate::maps::MapsLine;

    /// `_PyRuntime` placed from an executable area, for the layouts linkers write. Each case:
    /// the file's executable segments (offset, size, address), `_PyRuntime`'s address in the
    /// file, the area (start, file offset), the page size, and where the loader put it.
    #[test]
    fn the_runtime_is_placed_by_the_files_load_bias() {
        type Seg = (u64, u64, u64);
        type Case<'a> = (&'a str, &'a [Seg], u64, (u64, u64), u64, Option<u64>);
        let cases: [Case; 7] = [
            // GNU ld, -z separate-code (a PIE or a shared libpython): text page-aligned.
            (
                "gnu pie",
                &[(0x1000, 0x2000, 0x1000)],
                0x5e00,
                (0x7f00_0000_1000, 0x1000),
                4096,
                Some(0x7f00_0000_5e00),
            ),
            // A non-PIE executable (Debian's python3 of old): bias 0.
            (
                "non-pie",
                &[(0x1000, 0x8000, 0x40_1000)],
                0x9a_0000,
                (0x40_1000, 0x1000),
                4096,
                Some(0x9a_0000),
            ),
            // lld, -z noseparate-code: text at file offset 0x5b0, address 0x15b0, mapped from
            // offset 0 at address page 0x1000 (the R segment before it is not executable).
            (
                "lld",
                &[(0x5b0, 0x3000, 0x15b0)],
                0x8000,
                (0x5555_0000_1000, 0),
                4096,
                Some(0x5555_0000_8000),
            ),
            // lld on 16 KiB pages (arm64): text at 0x5b0, address 0x45b0, mapped from offset 0
            // at address page 0x4000.
            (
                "lld 16k",
                &[(0x5b0, 0x3000, 0x45b0)],
                0x8000,
                (0x5555_0000_4000, 0),
                16384,
                Some(0x5555_0000_8000),
            ),
            // An area that starts inside its segment (split since it was mapped).
            (
                "split",
                &[(0x1000, 0x8000, 0x1000)],
                0x20_000,
                (0x7f00_0000_5000, 0x5000),
                4096,
                Some(0x7f00_0002_0000),
            ),
            // Two executable segments: the area's is the second.
            (
                "two",
                &[(0x1000, 0x1000, 0x1000), (0x3000, 0x1000, 0x5000)],
                0x9000,
                (0x7f00_0000_5000, 0x3000),
                4096,
                Some(0x7f00_0000_9000),
            ),
            // No executable segment holds the area's offset.
            (
                "none",
                &[(0x1000, 0x1000, 0x1000)],
                0x9000,
                (0x7f00_0000_8000, 0x8000),
                4096,
                None,
            ),
        ];
        for (name, segs, runtime_vaddr, (start, offset), page, want) in cases {
            let found = Found {
                version: (3, 13, 0),
                runtime_file_off: 0,
                runtime_vaddr,
                exec_segments: (segs.iter())
                    .map(|&(off, size, vaddr)| LoadSegment {
                        file_off: off,
                        file_end: off + size,
                        vaddr_less_off: vaddr.wrapping_sub(off),
                    })
                    .collect(),
                debug_offsets: None,
            };
            let area = MapsLine {
                start,
                end: start + 0x1000,
                exec: true,
                offset,
                dev: 0,
                inode: 1,
                path: "/usr/lib/libpython3.13.so.1.0".into(),
                deleted: false,
            };
            assert_eq!(runtime_by_bias(&found, &area, page), want, "{name}");
        }
    }

    #[test]
    fn version_from_file_names() {
        assert_eq!(
            version_in_name("libpython3.10.so.1.0").as_deref(),
            Some("3.10")
        );
        assert_eq!(version_in_name("python3.9").as_deref(), Some("3.9"));
        assert_eq!(version_in_name("python3").as_deref(), None);
    }
}
