//! User-space symbolization: each address is placed in its process's captured mappings; file-backed
//! ones become (file, file offset) and go to blazesym's ELF source in one batch per file (unique
//! offsets not seen before only); JIT code is looked up in the perf map; everything else gets a
//! `module+0xOFFSET` frame. Frames are cached by (file, offset), so a library shared by many
//! processes is symbolized once per offset.
//!
//! Code of a readable file that no symbol covers (a stripped library's internal functions: only
//! its exported `.dynsym` symbols are left, with their sizes) is grouped by the gap it lies in:
//! `liblzma.so.5!<after lzma_mf_is_supported>` for everything between the end of that symbol and
//! the next one, `liblzma.so.5!<unknown>` before the first. One routine per gap, rather than one
//! per address (perf 6.x shows each address alone; older perf named it after the preceding
//! symbol outright, which passes the gap off as that function).

use std::collections::{HashMap, HashSet};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer as Blaze};
use pkprof_profile::{Frame, FrameKind};

use crate::files::{FileCache, FileId};
use crate::frame_cache::{FrameCache, FRAME_CACHE_MAX};
use crate::frames::{short_name, sym_frames, unknown_frame};
use crate::process::{Process, Target};
use crate::Warnings;

/// Where an address landed.
enum Loc {
    /// In a readable file, at this file offset.
    File {
        id: FileId,
        off: u64,
        module: String,
    },
    /// Named by the perf map.
    Jit {
        name: String,
        module: String,
        addr: u64,
    },
    /// In a mapping nothing can name: `module+0xOFFSET`.
    Unnamed { module: String, off: u64 },
    /// In no mapping at all.
    Unknown { addr: u64 },
}

#[derive(Debug, Default)]
pub(crate) struct UserFrames {
    /// Frames (module and offset not set) by (file, file offset); empty when blazesym had no
    /// symbol there.
    cache: FrameCache<(FileId, u64)>,
    /// Function symbols (file offset, name) of each file, sorted, read when one of its addresses
    /// is not covered by any symbol.
    symbols: HashMap<FileId, Vec<(u64, String)>>,
}

impl UserFrames {
    pub fn symbolize(
        &mut self,
        blaze: &Blaze,
        files: &mut FileCache,
        pid: u32,
        mut process: Option<&mut Process>,
        addrs: &[u64],
        warnings: &mut Warnings,
    ) -> Vec<Vec<Frame>> {
        // Work per unique address; samples repeat the same few thousand addresses.
        let mut unique: Vec<u64> = Vec::new();
        let mut slot_of: HashMap<u64, usize> = HashMap::new();
        let slots: Vec<usize> = addrs
            .iter()
            .map(|&a| {
                *slot_of.entry(a).or_insert_with(|| {
                    unique.push(a);
                    unique.len() - 1
                })
            })
            .collect();
        let mut perf_map_read = false;
        let locs: Vec<Loc> = unique
            .iter()
            .map(|&addr| locate(process.as_deref_mut(), files, addr, &mut perf_map_read))
            .collect();

        // One batch of unique, not yet symbolized offsets per file.
        let mut batches: HashMap<FileId, (Vec<u64>, &str)> = HashMap::new();
        for loc in &locs {
            if let Loc::File { id, off, module } = loc {
                if !self.cache.contains(&(*id, *off)) {
                    batches
                        .entry(*id)
                        .or_insert_with(|| (Vec::new(), module))
                        .0
                        .push(*off);
                }
            }
        }
        for (id, (mut offs, module)) in batches {
            offs.sort_unstable();
            offs.dedup();
            if let Err(err) = self.symbolize_file(blaze, files, id, &offs, module) {
                warnings.push(format!(
                    "pid {pid}: cannot read {module}: {err}; its frames stay unsymbolized"
                ));
                files.mark_failed(id, err.to_string());
            }
        }

        let frames: Vec<Vec<Frame>> = locs.iter().map(|loc| self.frames(files, loc)).collect();
        slots.iter().map(|&i| frames[i].clone()).collect()
    }

    /// One blazesym batch: the file's unique offsets, sorted. An error concerns the whole file.
    fn symbolize_file(
        &mut self,
        blaze: &Blaze,
        files: &FileCache,
        id: FileId,
        offs: &[u64],
        module: &str,
    ) -> Result<(), blazesym::Error> {
        let Some(path) = files.get(id).readable_path() else {
            return Ok(());
        };
        let src = Source::Elf(Elf::new(path));
        let results = blaze.symbolize(&src, Input::FileOffset(offs))?;
        for (off, res) in offs.iter().zip(results) {
            let frames = match res {
                Symbolized::Sym(sym) => sym_frames(&sym, FrameKind::User),
                Symbolized::Unknown(_) => {
                    let symbols = match self.symbols.entry(id) {
                        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(function_symbols(path))
                        }
                    };
                    vec![gap_frame(symbols, short_name(module), *off)]
                }
            };
            self.cache.insert((id, *off), frames);
        }
        Ok(())
    }

    /// Drops what is cached for files that were evicted (their ids will name other files), and
    /// bounds the frame cache (what the last window did not use goes first).
    pub fn evict(&mut self, ids: &HashSet<FileId>) {
        if !ids.is_empty() {
            self.cache.retain_keys(|(id, _)| !ids.contains(id));
            self.symbols.retain(|id, _| !ids.contains(id));
        }
        self.cache.bound(FRAME_CACHE_MAX);
    }

    fn frames(&mut self, files: &FileCache, loc: &Loc) -> Vec<Frame> {
        match loc {
            Loc::File { id, off, module } => {
                let build_id = files.get(*id).build_id();
                match self.cache.get(&(*id, *off)) {
                    Some(frames) if !frames.is_empty() => frames
                        .iter()
                        .map(|f| Frame {
                            module: module.clone(),
                            offset: *off,
                            build_id: build_id.to_string(),
                            ..f.clone()
                        })
                        .collect(),
                    _ => vec![Frame {
                        build_id: build_id.to_string(),
                        ..unknown_frame(FrameKind::User, short_name(module), module, *off)
                    }],
                }
            }
            Loc::Jit { name, module, addr } => vec![Frame {
                kind: FrameKind::User,
                name: name.clone(),
                module: module.clone(),
                offset: *addr,
                symbolized: true,
                ..Frame::default()
            }],
            Loc::Unnamed { module, off } => {
                vec![unknown_frame(
                    FrameKind::User,
                    short_name(module),
                    module,
                    *off,
                )]
            }
            Loc::Unknown { addr } => {
                vec![unknown_frame(
                    FrameKind::User,
                    "[unknown]",
                    "[unknown]",
                    *addr,
                )]
            }
        }
    }
}

/// Function symbols of an ELF file (`.symtab` and `.dynsym`), as (file offset, name), sorted by
/// offset. Empty if the file's symbols cannot be read (the gap frames then say `<unknown>`).
///
/// Read with `object`, not blazesym's `Inspector::for_each`: that one also builds a by-name index
/// of the whole table, which we do not use and which cost the agent 20% of its CPU when a large
/// library (libLLVM's 60k symbols) first had an address in a gap.
fn function_symbols(path: &std::path::Path) -> Vec<(u64, String)> {
    use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    // Mapped, not through `ReadCache`: that one reads every symbol name with its own `read`.
    // SAFETY: a read-only private map of a binary that processes map; blazesym maps its ELF
    // files the same way (a file truncated under us would fault there too).
    let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return Vec::new();
    };
    let Ok(obj) = object::File::parse(&*map) else {
        return Vec::new();
    };
    // (address, size, file offset) of each loaded segment: a symbol's file offset is its
    // address's place in the segment that holds it.
    let segments: Vec<(u64, u64, u64)> = obj
        .segments()
        .map(|seg| (seg.address(), seg.size(), seg.file_range().0))
        .collect();
    let offset_of = |addr: u64| {
        segments
            .iter()
            .find(|&&(start, size, _)| addr >= start && addr - start < size)
            .map(|&(start, _, off)| addr - start + off)
    };
    let mut syms: Vec<(u64, String)> = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| Some((offset_of(s.address())?, s.name().ok()?.to_string())))
        .collect();
    syms.sort_unstable();
    syms.dedup_by_key(|s| s.0);
    syms
}

/// The frame of an address in `label`'s file that no symbol covers: named after the gap between
/// function symbols it lies in (module and offset are set by the caller).
fn gap_frame(symbols: &[(u64, String)], label: &str, off: u64) -> Frame {
    let i = symbols.partition_point(|s| s.0 <= off);
    let name = match i.checked_sub(1).map(|i| &symbols[i].1) {
        Some(sym) => format!("{label}!<after {sym}>"),
        None => format!("{label}!<unknown>"),
    };
    Frame {
        kind: FrameKind::User,
        name,
        symbolized: false,
        ..Frame::default()
    }
}

/// Place `addr`; the perf map is re-read (if changed) at most once per call (`perf_map_read`).
fn locate(
    process: Option<&mut Process>,
    files: &FileCache,
    addr: u64,
    perf_map_read: &mut bool,
) -> Loc {
    let Some(p) = process else {
        return Loc::Unknown { addr };
    };
    let mapping = p.find(addr).cloned();
    if let Some(m) = &mapping {
        let off = addr - m.start + m.offset;
        if let Target::File(id) = m.target {
            if files.get(id).readable_path().is_some() {
                return Loc::File {
                    id,
                    off,
                    module: m.module.clone(),
                };
            }
            return Loc::Unnamed {
                module: m.module.clone(),
                off,
            };
        }
    }
    // Anonymous memory, special mappings and unmapped addresses: JIT code?
    if !*perf_map_read {
        *perf_map_read = true;
        p.read_perf_map();
    }
    if let Some(name) = p.perf_map.lookup(addr) {
        return Loc::Jit {
            name: name.to_string(),
            module: p.perf_map_module.clone(),
            addr,
        };
    }
    match mapping {
        // Anonymous memory has no file offset: the address is the offset.
        Some(m) if m.target == Target::Anon => Loc::Unnamed {
            module: m.module,
            off: addr,
        },
        Some(m) => Loc::Unnamed {
            off: addr - m.start + m.offset,
            module: m.module,
        },
        None => Loc::Unknown { addr },
    }
}
