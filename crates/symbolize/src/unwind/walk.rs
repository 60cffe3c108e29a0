//! One process's unwinder (a framehop module per executable file mapping, rebuilt when its maps
//! change) and the walk of one sampled stack, with the classification of how it ended and the
//! splice of deeper frame-pointer frames where the copied window ends.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{Error as UnwindError, FrameAddress, Module, Unwinder as _};
use pkprof_profile::Truncation;

use super::tables::{Bytes, FileTables};
use crate::files::{FileCache, FileId};
use crate::process::{Process, Target};

/// Frames kept per user stack; a deeper stack ends `depth limit`.
pub const MAX_USER_FRAMES: usize = 512;

/// The user registers a stack is unwound from (x86-64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserRegs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// One unwound user stack: frames leaf first (`[0]` = the sampled ip, then return addresses as
/// read), and why it stops before the thread's entry (None: it reached it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnwoundStack {
    pub frames: Vec<u64>,
    pub end: Option<Truncation>,
    /// The return address outside every captured mapping where the walk stopped: code mapped
    /// since the maps were read (dlopen), or garbage; worth a re-read of the maps.
    pub unmapped: Option<u64>,
}

/// A file's tables, as far as they could be had.
#[derive(Clone, Debug)]
enum Tables {
    Loaded(Arc<FileTables>),
    /// Not an ELF file, or unreadable.
    Missing,
    /// Loading them would pass the memory limit.
    OverLimit,
}

/// What a code range of the process is unwound with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coverage {
    Cfi,
    NoCfi,
    Missing,
    OverLimit,
}

/// One executable mapping of a process, as the walk needs it.
struct MappedCode {
    range: Range<u64>,
    coverage: Coverage,
    /// File mappings: the file and the file offset of `range.start` (to read code).
    file: Option<(FileId, u64)>,
    /// Mappings with tables: them, and the bias from addresses to the tables' (linked) ones.
    tables: Option<(Arc<FileTables>, u64)>,
}

struct ProcessUnwinder {
    generation: u64,
    unwinder: UnwinderX86_64<Bytes>,
    /// The executable mappings, sorted by start.
    mappings: Vec<MappedCode>,
    /// Addresses found to be (or not to be) the signal return trampoline.
    sigreturn: std::cell::RefCell<HashMap<u64, bool>>,
}

impl ProcessUnwinder {
    /// Whether `addr` is the start of the signal return trampoline (read from the file once).
    fn is_sigreturn(&self, addr: u64, files: &FileCache) -> bool {
        if let Some(known) = self.sigreturn.borrow().get(&addr) {
            return *known;
        }
        let found = self
            .find(addr)
            .and_then(|m| Some((m.range.start, m.file?)))
            .and_then(|(start, (id, offset))| {
                let file = files.get(id).file()?;
                let mut code = [0u8; SIGRETURN.len()];
                let at = offset.checked_add(addr - start)?;
                std::os::unix::fs::FileExt::read_exact_at(file, &mut code, at).ok()?;
                Some(code == SIGRETURN)
            })
            .unwrap_or(false);
        let mut known = self.sigreturn.borrow_mut();
        if known.len() >= SIGRETURN_CACHE {
            known.clear();
        }
        known.insert(addr, found);
        found
    }

    /// Whether an entry of the unwind tables covers the code at `addr` (see FileTables::covered).
    fn proven(&self, addr: u64) -> bool {
        self.find(addr)
            .and_then(|m| m.tables.as_ref())
            .is_some_and(|(t, bias)| t.covers(addr.wrapping_sub(*bias)))
    }

    fn coverage(&self, addr: u64) -> Option<Coverage> {
        self.find(addr).map(|m| m.coverage)
    }

    /// The mapping holding `addr`.
    fn find(&self, addr: u64) -> Option<&MappedCode> {
        let i = self.mappings.partition_point(|m| m.range.start <= addr);
        let m = self.mappings.get(i.checked_sub(1)?)?;
        m.range.contains(&addr).then_some(m)
    }
}

/// Unwinding state of a symbolizer: tables per file, an unwinder per process, one rule cache.
pub(crate) struct Unwinding {
    tables: HashMap<FileId, Tables>,
    held_bytes: usize,
    limit_bytes: usize,
    processes: HashMap<u32, ProcessUnwinder>,
    cache: CacheX86_64,
    /// For the question whether a walk really ended (see `walk`): framehop caches the rule it
    /// falls back to when a rule cannot be evaluated, and that question reads nothing, so its
    /// answers must not reach the cache of real walks.
    probe_cache: CacheX86_64,
    /// Modules added since `cache` was made (see MODULES_PER_CACHE).
    modules_added: usize,
}

impl Unwinding {
    pub fn new(limit_bytes: usize) -> Self {
        Unwinding {
            tables: HashMap::new(),
            held_bytes: 0,
            limit_bytes,
            processes: HashMap::new(),
            cache: CacheX86_64::new(),
            probe_cache: CacheX86_64::new(),
            modules_added: 0,
        }
    }

    /// Bytes of unwind tables held.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    fn tables(&mut self, id: FileId, files: &FileCache) -> Tables {
        if let Some(t) = self.tables.get(&id) {
            return t.clone();
        }
        let t = match files.get(id).file().map(FileTables::read) {
            Some(Ok(t)) if self.held_bytes + t.bytes() > self.limit_bytes => Tables::OverLimit,
            Some(Ok(t)) => {
                self.held_bytes += t.bytes();
                Tables::Loaded(Arc::new(t))
            }
            _ => Tables::Missing,
        };
        // Tables are dropped only with their file (`evict`): until then a file over the limit
        // stays over it.
        self.tables.insert(id, t.clone());
        t
    }

    fn build(&mut self, process: &Process, files: &FileCache) -> ProcessUnwinder {
        let mut unwinder = UnwinderX86_64::new();
        let mut mappings = Vec::new();
        for m in process.mappings() {
            let mut tables = None;
            let coverage = match m.target {
                Target::File(id) => match self.tables(id, files) {
                    Tables::Loaded(t) => match t
                        .svma_of_mapping(m.offset, m.end - m.start)
                        .filter(|_| t.has_cfi())
                    {
                        Some(svma) => {
                            let bias = m.start.wrapping_sub(svma);
                            unwinder.add_module(Module::new(
                                m.module.clone(),
                                m.start..m.end,
                                bias,
                                t.section_info(),
                            ));
                            tables = Some((t.clone(), bias));
                            Coverage::Cfi
                        }
                        None => Coverage::NoCfi,
                    },
                    Tables::Missing => Coverage::Missing,
                    Tables::OverLimit => Coverage::OverLimit,
                },
                Target::Anon | Target::Special => Coverage::NoCfi,
            };
            mappings.push(MappedCode {
                range: m.start..m.end,
                coverage,
                file: match m.target {
                    Target::File(id) => Some((id, m.offset)),
                    Target::Anon | Target::Special => None,
                },
                tables,
            });
        }
        ProcessUnwinder {
            generation: process.generation(),
            unwinder,
            mappings,
            sigreturn: Default::default(),
        }
    }

    /// Forget a process's unwinder (it executed a new image).
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }

    /// Drops the tables of evicted files (no process left maps them; their ids will name other
    /// files): their bytes no longer count against the limit.
    pub fn evict(&mut self, ids: &std::collections::HashSet<FileId>) {
        for id in ids {
            if let Some(Tables::Loaded(t)) = self.tables.remove(id) {
                self.held_bytes = self.held_bytes.saturating_sub(t.bytes());
            }
        }
    }

    /// Unwinds one stack of `pid` (see `Symbolizer::unwind`, whose arguments these are, with
    /// the symbolizer's process and files).
    #[allow(clippy::too_many_arguments)]
    pub fn unwind(
        &mut self,
        pid: u32,
        process: Option<&Process>,
        files: &FileCache,
        regs: UserRegs,
        stack: &[u8],
        window_full: bool,
        fp_chain: &[u64],
    ) -> UnwoundStack {
        let Some(process) = process else {
            return UnwoundStack {
                frames: vec![regs.ip],
                end: Some(Truncation::TablesMissing),
                unmapped: None,
            };
        };
        if stack.len() < 8 {
            return UnwoundStack {
                frames: vec![regs.ip],
                end: Some(Truncation::ReadFault),
                unmapped: None,
            };
        }
        let stale = self
            .processes
            .get(&pid)
            .is_none_or(|p| p.generation != process.generation());
        if stale {
            if self.modules_added + process.mappings().len() > MODULES_PER_CACHE {
                self.cache = CacheX86_64::new();
                self.probe_cache = CacheX86_64::new();
                self.processes.clear();
                self.modules_added = 0;
            }
            self.modules_added += process.mappings().len();
            let built = self.build(process, files);
            self.processes.insert(pid, built);
        }
        let Unwinding {
            processes,
            cache,
            probe_cache,
            ..
        } = self;
        let pu = &processes[&pid];
        walk(
            pu,
            cache,
            probe_cache,
            files,
            regs,
            stack,
            window_full,
            fp_chain,
        )
    }
}

/// Why a walk that stopped at `last` (the last frame's address) stopped there, given what the
/// unwinder said.
fn reason_at(pu: &ProcessUnwinder, last: u64, fallback: Truncation) -> Truncation {
    match pu.coverage(last) {
        Some(Coverage::Missing) => Truncation::TablesMissing,
        Some(Coverage::OverLimit) => Truncation::TableLimit,
        Some(Coverage::NoCfi) => Truncation::NoUnwindInfo,
        None => Truncation::BadFrame,
        Some(Coverage::Cfi) => fallback,
    }
}

/// x86-64 Linux's signal return trampoline (`__restore_rt`: `mov $15, %rax; syscall`), where a
/// signal handler returns. framehop cannot unwind through it (its CFI restores registers from the
/// signal frame with DWARF expressions), so the walk does what the kernel's `rt_sigreturn` will:
/// it takes the interrupted registers from the `ucontext` the handler's return left `sp` at.
const SIGRETURN: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];
/// Offsets in the `ucontext` of the saved rbp, rsp and rip (uc_mcontext at 40, then the kernel's
/// `struct sigcontext_64`: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip).
const UC_RBP: u64 = 40 + 10 * 8;
const UC_RSP: u64 = 40 + 15 * 8;
const UC_RIP: u64 = 40 + 16 * 8;
/// Return addresses remembered per process as (not) the trampoline before the memory is dropped.
const SIGRETURN_CACHE: usize = 1 << 16;
/// framehop's rule cache is keyed by a global 16-bit count of modules added: well before it
/// wraps, the cache is replaced and every unwinder rebuilt (a wrapped count could hit another
/// process's rules).
const MODULES_PER_CACHE: usize = 30_000;

#[allow(clippy::too_many_arguments)]
fn walk(
    pu: &ProcessUnwinder,
    cache: &mut CacheX86_64,
    probe_cache: &mut CacheX86_64,
    files: &FileCache,
    regs: UserRegs,
    stack: &[u8],
    window_full: bool,
    fp_chain: &[u64],
) -> UnwoundStack {
    let top = regs.sp.saturating_add(stack.len() as u64);
    let mut read = |addr: u64| -> Result<u64, ()> {
        let off = addr.checked_sub(regs.sp).ok_or(())? as usize;
        let bytes = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
    };
    let mut frames = vec![regs.ip];
    let mut uregs = UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp);
    let mut address = FrameAddress::from_instruction_pointer(regs.ip);
    // A frame of code no table entry covers was unwound by framehop's frame-pointer fallback:
    // the stack may still end well, but it is not proven whole.
    let mut guessed = false;
    let mut unmapped = None;
    let end = loop {
        let last = *frames.last().unwrap_or(&regs.ip);
        // Return addresses point after the call: the call is one byte before.
        let last_code = address.address_for_lookup();
        let step = if frames.len() > 1 && pu.is_sigreturn(last, files) {
            // The handler returned here: the interrupted context is in the ucontext at sp.
            let sp = uregs.sp();
            let at = |off: u64| sp.checked_add(off).ok_or(());
            match (
                at(UC_RIP).and_then(&mut read),
                at(UC_RSP).and_then(&mut read),
                at(UC_RBP).and_then(&mut read),
            ) {
                (Ok(ip), Ok(rsp), Ok(rbp)) => {
                    uregs = UnwindRegsX86_64::new(ip, rsp, rbp);
                    if pu.coverage(ip).is_none() {
                        break Some(Truncation::BadFrame);
                    }
                    if frames.len() >= MAX_USER_FRAMES {
                        break Some(Truncation::DepthLimit);
                    }
                    // The interrupted instruction itself, not a return address.
                    frames.push(ip);
                    address = FrameAddress::from_instruction_pointer(ip);
                    continue;
                }
                _ => Err(UnwindError::CouldNotReadStack(sp.saturating_add(UC_RIP))),
            }
        } else {
            guessed |= !pu.proven(last_code);
            pu.unwinder
                .unwind_frame(address, &mut uregs, cache, &mut read)
        };
        match step {
            Ok(Some(a)) => {
                let Some(next) = FrameAddress::from_return_address(a) else {
                    break Some(reason_at(pu, last_code, Truncation::BadFrame));
                };
                if pu.coverage(next.address_for_lookup()).is_none() {
                    // Data read as a return address, or code nobody mapped.
                    unmapped = Some(a);
                    break Some(reason_at(pu, last_code, Truncation::BadFrame));
                }
                if frames.len() >= MAX_USER_FRAMES {
                    break Some(Truncation::DepthLimit);
                }
                frames.push(a);
                address = next;
            }
            // framehop ends a walk (Ok(None)) where the tables say the return address is
            // undefined (`_start`, `clone3`), but also where a frame-pointer step meets rbp = 0
            // or a null return address is read: garbage, not an end. Asked again with nothing
            // readable and a non-null rbp, only the tables' end still ends: complete only there,
            // above the leaf (the entry calls on).
            Ok(None) => {
                let mut probe = UnwindRegsX86_64::new(uregs.ip(), uregs.sp(), 1);
                let proven = matches!(
                    pu.unwinder
                        .unwind_frame(address, &mut probe, probe_cache, &mut |_| Err(())),
                    Ok(None)
                );
                match pu.coverage(last_code) {
                    Some(Coverage::Cfi) if proven && frames.len() > 1 => break None,
                    _ => break Some(reason_at(pu, last_code, Truncation::BadFrame)),
                }
            }
            Err(UnwindError::CouldNotReadStack(addr)) if addr >= top => {
                let why = if window_full {
                    Truncation::StackWindow
                } else {
                    Truncation::ReadFault
                };
                break Some(reason_at(pu, last_code, why));
            }
            Err(_) => break Some(reason_at(pu, last_code, Truncation::BadFrame)),
        }
    };
    if end == Some(Truncation::StackWindow) {
        splice(pu, &mut frames, fp_chain);
    }
    let end = match end {
        None if guessed => Some(Truncation::NoUnwindInfo),
        end => end,
    };
    UnwoundStack {
        frames,
        end,
        unmapped,
    }
}

/// Appends the frame-pointer walk's frames beyond the last unwound address, where the walk has
/// it (its frames from there on are real frame-pointer frames). Under recursion an address occurs
/// several times: the k-th occurrence in the unwound frames is matched with the k-th in the walk.
fn splice(pu: &ProcessUnwinder, frames: &mut Vec<u64>, fp_chain: &[u64]) {
    let Some(&last) = frames.last() else {
        return;
    };
    let k = frames.iter().filter(|a| **a == last).count();
    let Some(at) = fp_chain
        .iter()
        .enumerate()
        .filter(|(_, a)| **a == last)
        .nth(k - 1)
        .map(|(i, _)| i)
    else {
        return;
    };
    for &a in &fp_chain[at + 1..] {
        if frames.len() >= MAX_USER_FRAMES || pu.coverage(a.wrapping_sub(1)).is_none() {
            break;
        }
        frames.push(a);
    }
}
