//! Kernel symbolization: names come from blazesym's kernel source (kallsyms, or a vmlinux image if
//! one is installed). `/proc/kallsyms` is also read here once, because blazesym reports neither
//! the kernel module a symbol belongs to nor whether an address lies in any function at all
//! (kallsyms has no sizes, so an address past the kernel's text would be named after the
//! nearest symbol below it, a data symbol or an end marker).
//!
//! JIT code (BPF programs, trampolines and dispatchers: kallsyms module `[bpf]`) is named from this
//! index, not by blazesym: such symbols come and go with the programs, and pkprof's own programs
//! are unloaded before its recording is symbolized, when blazesym reads kallsyms. The index is
//! therefore read while they are loaded ([`KernelFrames::snapshot`]), and an address under a
//! `[bpf]` symbol takes that symbol's name (blazesym would name it after whatever JIT code
//! precedes it by then, or not at all).

use std::collections::HashMap;
use std::fs;

use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer as Blaze};
use pkprof_profile::{Frame, FrameKind};

use crate::frame_cache::{FrameCache, FRAME_CACHE_MAX};
use crate::frames::{sym_frames, unknown_frame};
use crate::Warnings;

const KERNEL: &str = "[kernel]";

#[derive(Debug, Default)]
pub(crate) struct KernelFrames {
    /// Frames (module and offset set) by address.
    cache: FrameCache<u64>,
    index: Option<KallsymsIndex>,
}

impl KernelFrames {
    /// Reads `/proc/kallsyms` now (otherwise at the first `symbolize`): call it while the BPF
    /// programs whose samples are to be named are still loaded.
    pub fn snapshot(&mut self, warnings: &mut Warnings) {
        self.index = Some(KallsymsIndex::read(warnings));
    }

    /// Bounds the address cache, what the last window did not use first (a long-lived
    /// symbolizer).
    pub fn bound_cache(&mut self) {
        self.cache.bound(FRAME_CACHE_MAX);
    }

    pub fn symbolize(
        &mut self,
        blaze: &Blaze,
        addrs: &[u64],
        warnings: &mut Warnings,
    ) -> Vec<Vec<Frame>> {
        let index = self
            .index
            .get_or_insert_with(|| KallsymsIndex::read(warnings));
        let mut todo: Vec<u64> = addrs
            .iter()
            .copied()
            .filter(|a| !self.cache.contains(a))
            .collect();
        todo.sort_unstable();
        todo.dedup();
        if !todo.is_empty() {
            let src = Source::Kernel(Kernel::default());
            match blaze.symbolize(&src, Input::AbsAddr(&todo)) {
                Ok(results) => {
                    for (&addr, res) in todo.iter().zip(results) {
                        let entry = index.lookup(addr);
                        let frames = match (res, entry) {
                            (_, Some(e)) if e.jit.is_some() => jit_frames(index, e, addr),
                            // Past the end of the text, in data: no function there.
                            (_, Some(Entry { text: false, .. })) | (Symbolized::Unknown(_), _) => {
                                unknown(addr)
                            }
                            (Symbolized::Sym(sym), entry) => {
                                let module = entry
                                    .and_then(|e| e.module)
                                    .map_or(KERNEL, |m| index.modules[m].as_str());
                                let mut frames = sym_frames(&sym, FrameKind::Kernel);
                                for f in &mut frames {
                                    f.module = module.to_string();
                                    f.offset = addr;
                                }
                                frames
                            }
                        };
                        self.cache.insert(addr, frames);
                    }
                }
                Err(err) => {
                    warnings.push(format!(
                        "cannot read kernel symbols: {err}; kernel frames stay unsymbolized"
                    ));
                    for &addr in &todo {
                        self.cache.insert(addr, unknown(addr));
                    }
                }
            }
        }
        (addrs.iter())
            .map(|a| self.cache.get(a).cloned().unwrap_or_else(|| unknown(*a)))
            .collect()
    }
}

/// The frame of JIT code, named from the kallsyms snapshot.
fn jit_frames(index: &KallsymsIndex, e: Entry, addr: u64) -> Vec<Frame> {
    vec![Frame {
        kind: FrameKind::Kernel,
        name: e
            .jit
            .map_or("", |i| index.jit_names[i].as_str())
            .to_string(),
        module: e
            .module
            .map_or(KERNEL, |m| index.modules[m].as_str())
            .to_string(),
        offset: addr,
        symbolized: true,
        ..Frame::default()
    }]
}

fn unknown(addr: u64) -> Vec<Frame> {
    vec![unknown_frame(FrameKind::Kernel, KERNEL, KERNEL, addr)]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    addr: u64,
    /// A function (`t`/`T`/`w`/`W`), not data or an end marker.
    text: bool,
    /// Index into `modules`.
    module: Option<usize>,
    /// JIT code (module `[bpf]`): index of its name in `jit_names`.
    jit: Option<usize>,
}

/// Sorted kallsyms addresses with their kind and module.
#[derive(Debug, Default)]
struct KallsymsIndex {
    entries: Vec<Entry>,
    /// `[ext4]`, `[bpf]`...
    modules: Vec<String>,
    /// Names of the `[bpf]` symbols (only those: the others are blazesym's to name).
    jit_names: Vec<String>,
}

impl KallsymsIndex {
    fn read(warnings: &mut Warnings) -> Self {
        match fs::read_to_string("/proc/kallsyms") {
            Ok(text) => {
                let index = Self::parse(&text);
                if index.entries.is_empty() {
                    warnings.push(
                        "/proc/kallsyms shows no addresses (not root?); kernel frames stay \
                         unsymbolized"
                            .to_string(),
                    );
                }
                index
            }
            Err(err) => {
                warnings.push(format!("cannot read /proc/kallsyms: {err}"));
                Self::default()
            }
        }
    }

    /// `ADDR TYPE NAME [MODULE]` lines; addresses 0 (hidden from non-root) are skipped.
    fn parse(text: &str) -> Self {
        let mut index = KallsymsIndex::default();
        let mut module_ids: HashMap<&str, usize> = HashMap::new();
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(typ), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let Some(addr) = crate::maps::parse_hex(addr).filter(|&a| a != 0) else {
                continue;
            };
            let text = matches!(typ, "t" | "T" | "w" | "W") && !is_end_marker(name);
            let module = it.next().map(|m| {
                *module_ids.entry(m).or_insert_with(|| {
                    index.modules.push(m.to_string());
                    index.modules.len() - 1
                })
            });
            let jit = (text && module.is_some_and(|m| index.modules[m] == "[bpf]")).then(|| {
                index.jit_names.push(name.to_string());
                index.jit_names.len() - 1
            });
            index.entries.push(Entry {
                addr,
                text,
                module,
                jit,
            });
        }
        // At one address, a function wins over data or markers.
        index
            .entries
            .sort_unstable_by_key(|e| (e.addr, std::cmp::Reverse(e.text)));
        index.entries.dedup_by_key(|e| e.addr);
        index
    }

    /// The symbol at or below `addr`.
    fn lookup(&self, addr: u64) -> Option<Entry> {
        let i = self.entries.partition_point(|e| e.addr <= addr);
        self.entries.get(i.checked_sub(1)?).copied()
    }
}

/// Text symbols that mark the end of a text section rather than start a function.
fn is_end_marker(name: &str) -> bool {
    // `__irqentry_text_end`, `__entry_text_end`, `__split_text_end`... (many real functions end
    // in `_end`, so nothing broader).
    name == "_etext"
        || name == "_einittext"
        || (name.starts_with("__") && name.ends_with("_text_end"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_index() {
        let index = KallsymsIndex::parse(
            "0000000000000000 A fixed_percpu_data\n\
             ffffffff81000000 T _stext\n\
             ffffffff81000000 T _text\n\
             ffffffff816bab70 T vfs_read\n\
             ffffffff82000000 T _etext\n\
             ffffffff82200000 D some_data\n\
             ffffffffc0200000 t ext4_read\t[ext4]\n\
             ffffffffc0201000 t bpf_prog_abc_handler\t[bpf]\n\
             garbage\n",
        );
        assert_eq!(index.modules, vec!["[ext4]", "[bpf]"]);
        assert_eq!(index.lookup(0x1000), None);
        let e = index.lookup(0xffffffff816bab71).unwrap();
        assert!(e.text && e.module.is_none() && e.addr == 0xffffffff816bab70);
        assert!(!index.lookup(0xffffffff82000010).unwrap().text);
        assert!(!index.lookup(0xffffffff82200010).unwrap().text);
        let e = index.lookup(0xffffffffc0200010).unwrap();
        assert_eq!(e.module, Some(0));
        let e = index.lookup(0xffffffffc0201010).unwrap();
        assert_eq!(e.module, Some(1));
        let f = jit_frames(&index, e, 0xffffffffc0201010);
        assert_eq!(f[0].name, "bpf_prog_abc_handler");
        assert_eq!(
            (f[0].module.as_str(), f[0].offset),
            ("[bpf]", 0xffffffffc0201010)
        );
        assert!(index.lookup(0xffffffffc0200010).unwrap().jit.is_none());
    }
}
