//! Naming a profile's unsymbolized user frames after the fact from separate debug files
//! (`pkprof report --symbols DIR`; docs/design.md, "User stacks").
//!
//! A frame of a stripped binary keeps its module path, the module's GNU build-id and the file
//! offset of the instruction. For each directory given, in order, the debug file of a module is
//! `DIR/.build-id/xx/rest.debug` (xx: the build-id's first byte in hex, rest: the other bytes),
//! else the name in the module's `.gnu_debuglink` in `DIR` or `DIR/.debug/` (the module must be
//! readable here to know that name), else `DIR/<module file name>.debug` and
//! `DIR/.debug/<module file name>.debug`. A candidate is used only if its build-id is the frame's
//! (or, for a frame without build-id, if the debug link's CRC-32 matches): a wrong file would name
//! frames wrongly, which is worse than not naming them.
//!
//! A debug file (`objcopy --only-keep-debug`) keeps the binary's virtual addresses but not its
//! file layout: its segments' file offsets are rewritten. The frame's file offset becomes a
//! virtual address through the program headers of the binary itself when it is at hand (the
//! module path, if its build-id is the frame's, or `DIR/.build-id/xx/rest`, the layout of perf's
//! build-id cache); otherwise the binary's layout is rebuilt from the debug file's program
//! headers, which keep every load segment's address, size and alignment: linkers (GNU ld, gold,
//! lld) place each load segment at the first file offset after the previous one that is congruent
//! to its address modulo its alignment, and code segments have no bss, so their file size is
//! their memory size. The names then come from the debug file's symbols (and DWARF) by blazesym.
//!
//! Inlined functions are not split out: a renamed frame is named after its outermost function,
//! as `record` names frames without `--lines`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer as Blaze};
use object::{Object, ObjectSegment, SegmentFlags};
use pkprof_profile::{FrameKind, Profile};

/// What [`name_from_debug_files`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugFilesOutcome {
    /// Unsymbolized user frames of the profile (before).
    pub unsymbolized: usize,
    /// Of those, frames now named.
    pub named: usize,
    /// Modules (path) with unsymbolized frames for which no matching debug file was found.
    pub not_found: Vec<String>,
    /// Debug files whose offsets were placed by rebuilding the binary's layout (the binary itself
    /// was not at hand).
    pub layout_rebuilt: Vec<PathBuf>,
}

/// Renames the unsymbolized user frames of `profile` (`module+0xOFFSET`, `module!<after SYM>`)
/// that a debug file under one of `dirs` names. Frames keep their module, offset and build-id.
pub fn name_from_debug_files(profile: &mut Profile, dirs: &[PathBuf]) -> DebugFilesOutcome {
    let mut out = DebugFilesOutcome::default();
    // Frames to name, by (module, build-id).
    let mut wanted: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (i, f) in profile.frames.iter().enumerate() {
        if f.kind == FrameKind::User && !f.symbolized && !f.module.starts_with('[') {
            out.unsymbolized += 1;
            wanted
                .entry((f.module.clone(), f.build_id.clone()))
                .or_default()
                .push(i);
        }
    }
    let blaze = Blaze::builder()
        .enable_auto_reload(false)
        .enable_code_info(false)
        .enable_inlined_fns(false)
        .enable_demangling(true)
        // Only the debug file given: no lookup of its own in /usr/lib/debug.
        .set_debug_dirs(Some(Vec::<PathBuf>::new()))
        .build();
    let mut keys: Vec<_> = wanted.keys().cloned().collect();
    keys.sort();
    for key in keys {
        let (module, build_id) = &key;
        let Some(found) = find(module, build_id, dirs) else {
            out.not_found.push(module.clone());
            continue;
        };
        if found.layout_rebuilt {
            out.layout_rebuilt.push(found.debug.clone());
        }
        let ids = &wanted[&key];
        // (frame index, virtual address) of the frames whose offset lies in a code segment.
        let placed: Vec<(usize, u64)> = ids
            .iter()
            .filter_map(|&i| found.vaddr(profile.frames[i].offset).map(|a| (i, a)))
            .collect();
        let addrs: Vec<u64> = placed.iter().map(|p| p.1).collect();
        let src = Source::Elf(Elf::new(&found.debug));
        let Ok(results) = blaze.symbolize(&src, Input::VirtOffset(&addrs)) else {
            out.not_found.push(module.clone());
            continue;
        };
        for ((i, _), res) in placed.iter().zip(results) {
            if let Symbolized::Sym(sym) = res {
                let f = &mut profile.frames[*i];
                f.name = sym.name.to_string();
                f.symbolized = true;
                out.named += 1;
            }
        }
    }
    out
}

/// A debug file found for a module, and where the module's code segments were in its file.
struct Found {
    debug: PathBuf,
    /// Code segments: (file offset, size, virtual address).
    segments: Vec<(u64, u64, u64)>,
    layout_rebuilt: bool,
}

impl Found {
    fn vaddr(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, size, _)| (*off..off.saturating_add(*size)).contains(&offset))
            .map(|(off, _, addr)| addr + (offset - off))
    }
}

fn find(module: &str, build_id: &str, dirs: &[PathBuf]) -> Option<Found> {
    // The binary itself, for its debug link and its layout: only if it is the recorded one.
    let mut binary: Option<Vec<u8>> = fs::read(module)
        .ok()
        .filter(|data| build_id.is_empty() || elf_build_id(data).as_deref() == Some(build_id));
    if binary.is_none() && !build_id.is_empty() {
        binary = dirs
            .iter()
            .map(|d| build_id_path(d, build_id, ""))
            .find_map(|p| fs::read(p).ok())
            .filter(|data| elf_build_id(data).as_deref() == Some(build_id));
    }
    let debug = find_debug_file(module, build_id, binary.as_deref(), dirs)?;
    let debug_data = fs::read(&debug).ok()?;
    let (segments, layout_rebuilt) = match binary.as_deref().and_then(code_segments) {
        Some(s) => (s, false),
        None => (rebuilt_code_segments(&debug_data)?, true),
    };
    Some(Found {
        debug,
        segments,
        layout_rebuilt,
    })
}

fn find_debug_file(
    module: &str,
    build_id: &str,
    binary: Option<&[u8]>,
    dirs: &[PathBuf],
) -> Option<PathBuf> {
    let link = binary.and_then(|b| {
        let file = object::File::parse(b).ok()?;
        let (name, crc) = file.gnu_debuglink().ok()??;
        // A link is a file name; anything with a path separator is not followed.
        let name = std::str::from_utf8(name).ok()?;
        (!name.is_empty() && !name.contains('/')).then(|| (name.to_string(), crc))
    });
    let base = Path::new(module).file_name()?.to_str()?.to_string();
    for dir in dirs {
        if !build_id.is_empty() {
            let p = build_id_path(dir, build_id, ".debug");
            if matches(&p, build_id, None) {
                return Some(p);
            }
        }
        let mut names: Vec<(String, Option<u32>)> = Vec::new();
        if let Some((name, crc)) = &link {
            names.push((name.clone(), Some(*crc)));
        }
        // Without the binary, the usual link name; only a build-id match can confirm it.
        if !build_id.is_empty() {
            names.push((format!("{base}.debug"), None));
        }
        for (name, crc) in names {
            for p in [dir.join(&name), dir.join(".debug").join(&name)] {
                if matches(&p, build_id, crc) {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// `dir/.build-id/xx/rest<suffix>`.
fn build_id_path(dir: &Path, build_id: &str, suffix: &str) -> PathBuf {
    let (xx, rest) = build_id.split_at(2.min(build_id.len()));
    dir.join(".build-id")
        .join(xx)
        .join(format!("{rest}{suffix}"))
}

/// The candidate is the debug file of the frame's module: same build-id, or (a frame without
/// one) the debug link's CRC-32 of the whole file.
fn matches(path: &Path, build_id: &str, crc: Option<u32>) -> bool {
    let Ok(data) = fs::read(path) else {
        return false;
    };
    if !build_id.is_empty() {
        return elf_build_id(&data).as_deref() == Some(build_id);
    }
    crc.is_some_and(|c| crc32fast::hash(&data) == c)
}

fn elf_build_id(data: &[u8]) -> Option<String> {
    let file = object::File::parse(data).ok()?;
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

fn executable(flags: SegmentFlags) -> bool {
    matches!(flags, SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0)
}

/// The binary's code segments as its program headers say.
fn code_segments(binary: &[u8]) -> Option<Vec<(u64, u64, u64)>> {
    let file = object::File::parse(binary).ok()?;
    let segs: Vec<_> = file
        .segments()
        .filter(|s| executable(s.flags()))
        .map(|s| {
            let (off, size) = s.file_range();
            (off, size, s.address())
        })
        .collect();
    (!segs.is_empty()).then_some(segs)
}

/// The binary's code segments rebuilt from a debug file's load segments (address, memory size,
/// alignment kept; file offsets rewritten): each at the first offset after the previous segment
/// that is congruent to its address modulo its alignment (the linkers' rule; see the module doc).
fn rebuilt_code_segments(debug: &[u8]) -> Option<Vec<(u64, u64, u64)>> {
    let file = object::File::parse(debug).ok()?;
    let mut loads: Vec<_> = file.segments().collect();
    loads.sort_by_key(|s| s.address());
    let mut end = 0u64; // file offset after the previous segment
    let mut out = Vec::new();
    for (i, s) in loads.iter().enumerate() {
        let align = s.align().max(1);
        let want = s.address() % align;
        let off = if i == 0 {
            want
        } else {
            let base = end - end % align;
            let off = base + want;
            if off < end {
                off + align
            } else {
                off
            }
        };
        // Only the last load segment (data) can have a bss; a code segment's file size is its
        // memory size.
        end = off + s.size();
        if executable(s.flags()) {
            out.push((off, s.size(), s.address()));
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths() {
        let p = build_id_path(Path::new("/d"), "33b40f27", ".debug");
        assert_eq!(p, Path::new("/d/.build-id/33/b40f27.debug"));
        let p = build_id_path(Path::new("/d"), "33b40f27", "");
        assert_eq!(p, Path::new("/d/.build-id/33/b40f27"));
    }
}
