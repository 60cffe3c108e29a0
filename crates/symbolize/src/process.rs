//! What is known about one process: its executable mappings (each file-backed one tied to a kept-open
//! file), its exe and comm, and its JIT perf map; capturing all that from `/proc` while it lives, and
//! re-capturing when code appears later (dlopen, JIT).

use std::collections::HashSet;
use std::fs::{self, File};
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::error::SymbolizeError;
use crate::files::{FileCache, FileId, OpenVia, Opened};
use crate::maps::{parse_maps, LineKind, MapsLine};
use crate::perf_map::PerfMap;
use crate::Warnings;

/// Do not re-read a process's maps more often than this because of unmapped addresses (stacks
/// walked through garbage frame pointers would otherwise trigger a re-read per sample), unless the
/// address is known to be code (a sampled ip, a return address the unwinder found): a process
/// captured at its exec, before the loader mapped its libraries, would otherwise have their code
/// unknown to the unwinder for this long. A page that stays unmapped after a re-read is not
/// tried again.
const RECAPTURE_INTERVAL: Duration = Duration::from_millis(20);

/// What an executable mapping maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// An opened file (or memory image): symbolize by file offset.
    File(FileId),
    /// Anonymous memory (JIT code, or code read from a file nobody can open).
    Anon,
    /// `[vsyscall]`, `[heap]`, a vDSO that could not be read...
    Special,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    pub target: Target,
    /// Module name for frames: the file's path, `[vdso]`, `[anon]`...
    pub module: String,
}

#[derive(Debug)]
pub(crate) struct Process {
    pub exe: Option<String>,
    pub comm: Option<String>,
    /// Sorted by start, disjoint; mappings that disappeared (dlclose) are kept.
    mappings: Vec<Mapping>,
    via: OpenVia,
    pub perf_map: PerfMap,
    /// Where the perf map can be read again (first readable wins).
    perf_map_paths: Vec<PathBuf>,
    /// Module name of JIT frames: the map's path as the process sees it.
    pub perf_map_module: String,
    /// Size and modification time of the perf map when last read (re-read only when changed).
    perf_map_stamp: Option<(u64, SystemTime)>,
    last_capture: Instant,
    /// Pages of addresses that were still unmapped after a re-capture.
    misses: HashSet<u64>,
    /// Reading its maps failed at a re-capture: it exited.
    gone: bool,
    /// Changes with `mappings`, unique across processes and captures, so an unwinder built from
    /// other mappings of the same pid (a re-capture) is never taken for current.
    generation: u64,
    /// The executable areas of the last read whose file is named like a CPython (`python3.X`,
    /// `libpython3.X.so`): what the Python detection looks at, without reading the maps again.
    /// None after an exec, until the maps are read again (they are the old image's).
    python_lines: Option<Vec<MapsLine>>,
}

impl Process {
    /// Capture a live process from `/proc/PID`.
    pub fn capture(
        pid: u32,
        files: &mut FileCache,
        warnings: &mut Warnings,
    ) -> Result<Process, SymbolizeError> {
        let maps = read_maps(pid)?;
        let mappings = build_mappings(pid, OpenVia::Process(pid), &maps, files, warnings);
        let exe = fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(|p| strip_deleted(&p.to_string_lossy()).to_string());
        let comm = fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|c| c.trim_end_matches('\n').to_string());
        // JITs in a pid namespace name the file after the pid they see. Only a process with
        // anonymous executable memory has JIT code: the others skip the reads (capture runs for
        // every new process sampled, so its cost counts in exec-heavy loads).
        let jit = mappings.iter().any(|m| matches!(m.target, Target::Anon));
        let nspid = jit
            .then(|| fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .flatten()
            .and_then(|s| ns_pid(&s))
            .unwrap_or(pid);
        let mut perf_map_paths = vec![PathBuf::from(format!(
            "/proc/{pid}/root/tmp/perf-{nspid}.map"
        ))];
        if nspid == pid {
            perf_map_paths.push(PathBuf::from(format!("/tmp/perf-{pid}.map")));
        }
        let mut p = Process::new(mappings, OpenVia::Process(pid), perf_map_paths, nspid);
        p.python_lines = Some(python_named(&maps));
        p.exe = exe;
        p.comm = comm;
        if jit {
            p.read_perf_map();
        }
        Ok(p)
    }

    /// A process described by a maps snapshot taken elsewhere; files are opened by path.
    pub fn from_maps_text(
        pid: u32,
        maps: &str,
        files: &mut FileCache,
        warnings: &mut Warnings,
    ) -> Process {
        let lines = parse_maps(maps);
        let mappings = build_mappings(pid, OpenVia::Path, &lines, files, warnings);
        let paths = vec![PathBuf::from(format!("/tmp/perf-{pid}.map"))];
        let mut p = Process::new(mappings, OpenVia::Path, paths, pid);
        p.python_lines = Some(python_named(&lines));
        p.gone = true;
        p.read_perf_map();
        p
    }

    fn new(mappings: Vec<Mapping>, via: OpenVia, perf_map_paths: Vec<PathBuf>, nspid: u32) -> Self {
        Process {
            exe: None,
            comm: None,
            mappings,
            via,
            perf_map: PerfMap::default(),
            perf_map_paths,
            perf_map_module: format!("/tmp/perf-{nspid}.map"),
            perf_map_stamp: None,
            last_capture: Instant::now(),
            misses: HashSet::new(),
            gone: false,
            generation: next_generation(),
            python_lines: None,
        }
    }

    /// The executable mappings, sorted by start.
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// Changes whenever the mappings change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The executable areas of files named like a CPython, as last read (None: not read since
    /// the process ran a new image).
    pub fn python_lines(&self) -> Option<&[MapsLine]> {
        self.python_lines.as_deref()
    }

    /// The process ran a new image: the areas read before are the old one's.
    pub fn executed(&mut self) {
        self.python_lines = None;
    }

    /// The mapping containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.start <= addr);
        let m = self.mappings.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }

    /// Re-capture if `addr` is in no known mapping, the process still lives, and neither this
    /// address's page nor a recent re-capture says it would be in vain.
    pub fn ensure_mapped(
        &mut self,
        pid: u32,
        addr: u64,
        files: &mut FileCache,
        warnings: &mut Warnings,
        code: bool,
    ) {
        if self.gone || self.find(addr).is_some() {
            return;
        }
        let page = addr >> 12;
        let recent = self.last_capture.elapsed() < RECAPTURE_INTERVAL;
        if self.misses.contains(&page) || (recent && !code) {
            return;
        }
        let OpenVia::Process(_) = self.via else {
            return;
        };
        let maps = match read_maps(pid) {
            Ok(m) => m,
            Err(_) => {
                self.gone = true;
                return;
            }
        };
        self.last_capture = Instant::now();
        self.python_lines = Some(python_named(&maps));
        let new = build_mappings(pid, self.via, &maps, files, warnings);
        if self.merge(new) {
            self.misses.clear();
        }
        self.read_perf_map();
        if self.find(addr).is_none() {
            self.misses.insert(page);
        }
    }

    /// Take `new` as the current mappings, keeping old ones that no new one overlaps. Returns
    /// whether anything changed.
    fn merge(&mut self, mut new: Vec<Mapping>) -> bool {
        let changed = new.iter().any(|m| !self.mappings.contains(m));
        if !changed {
            return false;
        }
        let old = std::mem::take(&mut self.mappings);
        let kept: Vec<Mapping> = old
            .into_iter()
            .filter(|o| {
                let i = new.partition_point(|m| m.end <= o.start);
                new.get(i).is_none_or(|m| m.start >= o.end)
            })
            .collect();
        new.extend(kept);
        new.sort_by_key(|m| m.start);
        self.mappings = new;
        self.generation = next_generation();
        true
    }

    /// Re-read the perf map if it changed since it was last read: JITs append to it while they
    /// run, so the copy taken at capture may be incomplete. Keeps the copy if the file is gone.
    pub fn read_perf_map(&mut self) {
        for path in &self.perf_map_paths {
            let Ok(meta) = fs::metadata(path) else {
                continue;
            };
            let stamp = (
                meta.len(),
                meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            );
            if self.perf_map_stamp == Some(stamp) {
                return;
            }
            if let Ok(data) = fs::read(path) {
                self.perf_map = PerfMap::parse(&data);
                self.perf_map_stamp = Some(stamp);
                return;
            }
        }
    }
}

/// The lines of `lines` that the Python detection looks at (`python::is_candidate`).
fn python_named(lines: &[MapsLine]) -> Vec<MapsLine> {
    (lines.iter())
        .filter(|l| crate::python::is_candidate(l))
        .cloned()
        .collect()
}

fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `pid`'s maps lines: its executable areas by `PROCMAP_QUERY` where the kernel has it (all that
/// `build_mappings` reads), else every line of the text.
fn read_maps(pid: u32) -> Result<Vec<MapsLine>, SymbolizeError> {
    if let Some(lines) = crate::procmap::executable_lines(pid) {
        return lines.map_err(|e| SymbolizeError::from_maps_read(pid, e));
    }
    let text = fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| SymbolizeError::from_maps_read(pid, e))?;
    Ok(parse_maps(&text))
}

/// Executable mappings of a maps snapshot, sorted by start, their files opened.
fn build_mappings(
    pid: u32,
    via: OpenVia,
    lines: &[MapsLine],
    files: &mut FileCache,
    warnings: &mut Warnings,
) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in lines.iter().filter(|l| l.exec) {
        let (target, module) = match line.kind() {
            LineKind::File => {
                let opened = files.open_mapping(via, line);
                if let Opened::Failed(_, err) = &opened {
                    warnings.push(format!(
                        "pid {pid}: cannot read {}: {err}; its frames stay unsymbolized",
                        line.path
                    ));
                }
                (Target::File(opened.id()), line.path.clone())
            }
            LineKind::Vdso => match read_vdso(pid, via, line, files) {
                Some(id) => (Target::File(id), line.path.clone()),
                None => (Target::Special, line.path.clone()),
            },
            LineKind::Anon => (Target::Anon, "[anon]".to_string()),
            LineKind::Special => (Target::Special, line.path.clone()),
        };
        out.push(Mapping {
            start: line.start,
            end: line.end,
            offset: line.offset,
            target,
            module,
        });
    }
    out.sort_by_key(|m| m.start);
    // The kernel never reports overlapping lines; a hand-written snapshot might.
    out.dedup_by(|b, a| b.start < a.end);
    out
}

/// The process's vDSO, copied out of its memory (it has no file). At most a few pages.
fn read_vdso(pid: u32, via: OpenVia, line: &MapsLine, files: &mut FileCache) -> Option<FileId> {
    let OpenVia::Process(_) = via else {
        return None;
    };
    let len = usize::try_from(line.end - line.start).ok()?;
    if len > 1 << 20 {
        return None;
    }
    let mem = File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, line.start).ok()?;
    files.add_image(buf).ok()
}

fn strip_deleted(p: &str) -> &str {
    p.strip_suffix(" (deleted)").unwrap_or(p)
}

/// The innermost namespace's pid from `/proc/PID/status` (`NSpid:\t4242\t7`).
fn ns_pid(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_ascii_whitespace().last()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, module: &str) -> Mapping {
        Mapping {
            start,
            end,
            offset: 0,
            target: Target::Anon,
            module: module.to_string(),
        }
    }

    #[test]
    fn find_and_merge() {
        let mut p = Process::new(
            vec![m(0x1000, 0x2000, "a"), m(0x3000, 0x4000, "b")],
            OpenVia::Path,
            vec![],
            1,
        );
        assert_eq!(p.find(0xfff), None);
        assert_eq!(p.find(0x1000).unwrap().module, "a");
        assert_eq!(p.find(0x1fff).unwrap().module, "a");
        assert_eq!(p.find(0x2000), None);
        assert_eq!(p.find(0x3fff).unwrap().module, "b");
        assert!(!p.merge(vec![m(0x1000, 0x2000, "a")]));
        // b is replaced by c; a (unmapped since, e.g. dlclose) stays.
        assert!(p.merge(vec![m(0x3800, 0x5000, "c"), m(0x6000, 0x7000, "d")]));
        let names: Vec<_> = p.mappings.iter().map(|m| m.module.as_str()).collect();
        assert_eq!(names, vec!["a", "c", "d"]);
    }

    #[test]
    fn nspid() {
        assert_eq!(ns_pid("Name:\tx\nNSpid:\t4242\t7\n"), Some(7));
        assert_eq!(ns_pid("NSpid:\t4242\n"), Some(4242));
        assert_eq!(ns_pid("NSpid:\n"), None);
        assert_eq!(ns_pid(""), None);
    }
}
