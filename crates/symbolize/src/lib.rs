//! Symbolization for pkprof: capture each sampled process's executable mappings while it lives
//! (keeping the mapped files open), then, at the end of the recording, turn user and kernel
//! addresses into [`Frame`]s with blazesym, even for processes that exited or binaries that were
//! deleted meanwhile.
//!
//! ```no_run
//! use pkprof_symbolize::{Symbolizer, SymbolizerOptions};
//! let mut sym = Symbolizer::new(SymbolizerOptions::default());
//! // While recording, for every sample:
//! let (pid, ip) = (1234, 0x5555_5555_1234);
//! if sym.capture_process(pid).is_ok() {
//!     sym.ensure_mapped(pid, ip);
//! }
//! // At the end, once per pid with all its unique addresses:
//! let frames = sym.symbolize_user(pid, &[ip]);
//! ```
//!
//! Modules: `maps` parses `/proc/PID/maps`; `process` captures a process; `files` keeps mapped
//! files open, deduplicated by inode and build-id; `perf_map` parses JIT maps; `user` and `kernel`
//! symbolize; `frames` builds the frames; `debug_files` names frames of a saved profile later from
//! separate debug files.

mod debug_files;
mod error;
mod files;
mod frame_cache;
mod frames;
mod kernel;
mod maps;
pub mod perf_map;
mod process;
mod procmap;
pub mod python;
mod unwind;
mod user;

use std::collections::{HashMap, HashSet};

use pkprof_profile::Frame;

pub use debug_files::{name_from_debug_files, DebugFilesOutcome};
pub use error::SymbolizeError;
use files::FileCache;
use kernel::KernelFrames;
use process::Process;
use unwind::Unwinding;
pub use unwind::{UnwoundStack, UserRegs, MAX_USER_FRAMES};
use user::UserFrames;

/// What to resolve beyond function names, and the memory unwinding may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolizerOptions {
    /// Source file and line from DWARF, and frames for inlined functions.
    pub lines: bool,
    /// Most bytes of unwind tables held (`record --unwind-memory`); a binary beyond it is not
    /// loaded and stacks through it end `unwind memory limit`.
    pub unwind_memory_bytes: usize,
}

/// Default of [`SymbolizerOptions::unwind_memory_bytes`], MiB (`record --unwind-memory`).
pub const DEFAULT_UNWIND_MEMORY_MIB: u32 = 256;

impl Default for SymbolizerOptions {
    fn default() -> Self {
        SymbolizerOptions {
            lines: false,
            unwind_memory_bytes: (DEFAULT_UNWIND_MEMORY_MIB as usize) << 20,
        }
    }
}

/// Captures processes while they run and symbolizes their addresses later.
///
/// Not `Send` (blazesym's symbolizer is not): create and use it on one thread.
pub struct Symbolizer {
    blaze: blazesym::symbolize::Symbolizer,
    files: FileCache,
    processes: HashMap<u32, Process>,
    /// Processes whose capture failed, with the error to return again.
    failed: HashMap<u32, SymbolizeError>,
    user: UserFrames,
    kernel: KernelFrames,
    warnings: Warnings,
    unwinding: Unwinding,
    /// Processes found exited at the last [`Symbolizer::trim`], forgotten at the next.
    dying: HashSet<u32>,
}

/// What one [`Symbolizer::trim`] freed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trimmed {
    /// Exited processes forgotten (with those whose capture had failed).
    pub processes: usize,
    /// Files closed: no process left maps them.
    pub files: usize,
}

impl Symbolizer {
    /// Also raises the soft limit of open files to the hard limit: every binary mapped by a
    /// sampled process stays open until the symbolizer is dropped.
    pub fn new(opts: SymbolizerOptions) -> Self {
        raise_fd_limit();
        let blaze = blazesym::symbolize::Symbolizer::builder()
            // Our files never change under us (they are open descriptors): no stat per request.
            .enable_auto_reload(false)
            .enable_code_info(opts.lines)
            .enable_inlined_fns(opts.lines)
            .enable_demangling(true)
            .build();
        Symbolizer {
            blaze,
            files: FileCache::default(),
            processes: HashMap::new(),
            failed: HashMap::new(),
            user: UserFrames::default(),
            kernel: KernelFrames::default(),
            warnings: Warnings::default(),
            unwinding: Unwinding::new(opts.unwind_memory_bytes),
            dying: HashSet::new(),
        }
    }

    /// Frees what only exited processes needed, for a symbolizer that lives for weeks (the agent,
    /// docs/design.md "The agent / Bounded memory"); call it between windows, after the window's
    /// addresses were symbolized. A process found exited (no `/proc/PID`) is forgotten at the
    /// next trim, not this one, so that samples still in the ring are named in the next window.
    /// Then every file that no remaining process maps and no capture met at this trim and the
    /// `files::EVICT_AFTER - 1` before it (a binary started back to back stays, one that comes
    /// back within them is not parsed again) is closed, and what was cached for it goes:
    /// blazesym's parsed file and mapping, its frames and symbols, its unwind tables. The frame
    /// caches start over past a fixed size, and the warnings met so far are cleared (each
    /// window reports its own).
    pub fn trim(&mut self) -> Trimmed {
        let dead: HashSet<u32> = (self.processes.keys().chain(self.failed.keys()))
            .copied()
            .filter(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        let mut trimmed = Trimmed::default();
        let gone: Vec<u32> = dead.intersection(&self.dying).copied().collect();
        for pid in gone {
            self.forget(pid);
            trimmed.processes += 1;
        }
        self.dying = dead.difference(&self.dying).copied().collect();
        let used: HashSet<files::FileId> = (self.processes.values())
            .flat_map(|p| p.mappings())
            .filter_map(|m| match m.target {
                process::Target::File(id) => Some(id),
                _ => None,
            })
            .collect();
        let evicted = self.files.evict_unused(&used);
        trimmed.files = evicted.len();
        for (_, path) in &evicted {
            if !path.as_os_str().is_empty() {
                // Never fails for an ELF source; a path it does not know is no error either.
                let _ = self.blaze.evict(&blazesym::symbolize::evict::Evict::Elf(
                    blazesym::symbolize::evict::Elf::new(path),
                ));
            }
        }
        let ids: HashSet<files::FileId> = evicted.iter().map(|(id, _)| *id).collect();
        self.user.evict(&ids);
        self.unwinding.evict(&ids);
        self.kernel.bound_cache();
        self.warnings = Warnings::default();
        trimmed
    }

    /// Snapshot `pid`'s executable mappings and keep the mapped files open (through
    /// `/proc/PID/map_files`, which reaches deleted binaries too; needs root), so that it can be
    /// symbolized after it exits. Also remembers its exe, comm and JIT perf map. Cheap when `pid`
    /// was captured already (or failed already: the same error is returned).
    pub fn capture_process(&mut self, pid: u32) -> Result<(), SymbolizeError> {
        if self.processes.contains_key(&pid) {
            return Ok(());
        }
        if let Some(err) = self.failed.get(&pid) {
            return Err(err.clone());
        }
        match Process::capture(pid, &mut self.files, &mut self.warnings) {
            Ok(p) => {
                self.processes.insert(pid, p);
                Ok(())
            }
            Err(err) => {
                self.failed.insert(pid, err.clone());
                Err(err)
            }
        }
    }

    /// Forget what was captured for `pid` (it executed a new image): the next capture reads its
    /// mappings again. Files already open stay cached for the addresses captured before.
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
        self.unwinding.forget(pid);
        self.failed.remove(&pid);
    }

    /// Register a process from a maps snapshot taken elsewhere (the text of a `/proc/PID/maps`),
    /// for replays and tests: files are opened by the paths written there and nothing is read
    /// from `/proc/PID`. Replaces what was captured for `pid`.
    pub fn capture_from_maps(&mut self, pid: u32, maps: &str) {
        let p = Process::from_maps_text(pid, maps, &mut self.files, &mut self.warnings);
        self.failed.remove(&pid);
        self.processes.insert(pid, p);
    }

    /// Make sure `addr` can be placed: if it lies outside every captured mapping of `pid` and
    /// `pid` still lives, re-capture (code mapped later: dlopen, JIT). Cheap when the address is
    /// mapped; re-captures are rate-limited per process.
    pub fn ensure_mapped(&mut self, pid: u32, addr: u64) {
        self.ensure_mapped_as(pid, addr, false);
    }

    /// [`Symbolizer::ensure_mapped`] for an address known to be code (a sampled instruction
    /// pointer, a return address found by unwinding): the maps are re-read at once, not at most
    /// every 20 ms, unless its page stayed unmapped after a re-read before.
    pub fn ensure_code_mapped(&mut self, pid: u32, addr: u64) {
        self.ensure_mapped_as(pid, addr, true);
    }

    fn ensure_mapped_as(&mut self, pid: u32, addr: u64, code: bool) {
        match self.processes.get_mut(&pid) {
            Some(p) => p.ensure_mapped(pid, addr, &mut self.files, &mut self.warnings, code),
            None => {
                if !self.failed.contains_key(&pid) {
                    // The error is kept in `failed` and returned by `capture_process`.
                    let _ = self.capture_process(pid);
                }
            }
        }
    }

    /// Unwinds one sampled user stack of `pid` from the unwind tables of its mapped files
    /// (docs/design.md, "User stacks"). `stack` holds the bytes copied from `regs.sp` upwards;
    /// `window_full`: the copy filled its whole window (false: it stopped at an unreadable page);
    /// `fp_chain`: the frame-pointer walk, leaf first, whose deeper frames are spliced in where
    /// the window ends. Call [`Symbolizer::capture_process`] first; a process that could not be
    /// captured gives its ip alone, ended `tables missing`.
    pub fn unwind(
        &mut self,
        pid: u32,
        regs: UserRegs,
        stack: &[u8],
        window_full: bool,
        fp_chain: &[u64],
    ) -> UnwoundStack {
        self.unwinding.unwind(
            pid,
            self.processes.get(&pid),
            &self.files,
            regs,
            stack,
            window_full,
            fp_chain,
        )
    }

    /// Bytes of unwind tables held now.
    pub fn unwind_table_bytes(&self) -> usize {
        self.unwinding.held_bytes()
    }

    /// Whether `addr` lies in an executable mapping captured for `pid`; `None` when nothing was
    /// captured for it (the question cannot be answered).
    pub fn is_executable(&self, pid: u32, addr: u64) -> Option<bool> {
        Some(self.processes.get(&pid)?.find(addr).is_some())
    }

    /// Symbolize user addresses of `pid` (already adjusted by the caller: return address - 1 for
    /// non-leaf frames). Returns, for each address, one or more frames, outermost first (with
    /// `lines`, functions inlined at that address follow the function they are inlined into,
    /// marked `inlined`). Never drops an address: unknown ones become `module+0xOFFSET` (file
    /// offset), `[anon]+0xADDR` for anonymous memory, `[unknown]+0xADDR` outside every mapping.
    /// JIT code named by `/tmp/perf-PID.map` gets that name, module = the map's path.
    ///
    /// `Frame::offset` is the file offset in `module`; for JIT, anonymous and unknown addresses,
    /// which have no file, it is the address itself.
    ///
    /// Best called once per pid with all its unique addresses; results are cached by (file,
    /// offset), so repeated calls only pay for new addresses.
    pub fn symbolize_user(&mut self, pid: u32, addrs: &[u64]) -> Vec<Vec<Frame>> {
        let process = self.processes.get_mut(&pid);
        self.user.symbolize(
            &self.blaze,
            &mut self.files,
            pid,
            process,
            addrs,
            &mut self.warnings,
        )
    }

    /// Reads the kernel's symbol table now rather than at the first `symbolize_kernel`: call it
    /// before unloading BPF programs whose samples are to be named (pkprof's own, at the end of
    /// a recording). JIT code (`[bpf]`) is named from this snapshot.
    pub fn snapshot_kernel_symbols(&mut self) {
        self.kernel.snapshot(&mut self.warnings);
    }

    /// Symbolize kernel addresses through kallsyms (needs root). `module` is `[kernel]` or the
    /// kernel module's name (`[ext4]`, `[bpf]` for BPF programs); unknown addresses become
    /// `[kernel]+0xADDR`. Frame offsets are the addresses.
    pub fn symbolize_kernel(&mut self, addrs: &[u64]) -> Vec<Vec<Frame>> {
        self.kernel
            .symbolize(&self.blaze, addrs, &mut self.warnings)
    }

    /// Problems met so far, one line each, each once, in the order met.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.list.clone()
    }

    /// Executable path of a captured process (`/proc/PID/exe`, without ` (deleted)`).
    pub fn exe(&self, pid: u32) -> Option<String> {
        self.processes.get(&pid)?.exe.clone()
    }

    /// Looks for CPython in `pid` ([`python::detect`]): in the executable areas captured for it
    /// (their last read: no second read of its maps, and none at all when no file it maps as
    /// code is named like a CPython), else (not captured, or not read since it ran a new image)
    /// in what `/proc/PID/maps` says now.
    pub fn detect_python(&self, pid: u32) -> python::PyDetect {
        match self.processes.get(&pid).and_then(|p| p.python_lines()) {
            Some([]) => python::PyDetect::NotPython,
            Some(lines) => python::detect_in(pid, lines, false),
            None => python::detect(pid),
        }
    }

    /// `pid` ran a new image, or exited (its PID may come back): its captured mappings stay
    /// (they name its samples from before, and code outside them is captured as it appears), but
    /// the Python detection no longer takes them for current.
    pub fn executed(&mut self, pid: u32) {
        if let Some(p) = self.processes.get_mut(&pid) {
            p.executed();
        }
    }

    /// Changes whenever the captured mappings of `pid` change (None: not captured).
    pub fn maps_generation(&self, pid: u32) -> Option<u64> {
        Some(self.processes.get(&pid)?.generation())
    }

    /// Command name of a captured process (`/proc/PID/comm`).
    pub fn comm(&self, pid: u32) -> Option<String> {
        self.processes.get(&pid)?.comm.clone()
    }

    /// Number of distinct files held open (shared libraries count once).
    pub fn open_files(&self) -> usize {
        self.files.len()
    }
}

/// Warnings, each kept once.
#[derive(Debug, Default)]
pub(crate) struct Warnings {
    list: Vec<String>,
    seen: HashSet<String>,
}

impl Warnings {
    pub fn push(&mut self, msg: String) {
        if self.seen.insert(msg.clone()) {
            self.list.push(msg);
        }
    }
}

fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit we own; setrlimit only reads it.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
