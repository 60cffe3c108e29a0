//! A process's executable mappings through the `PROCMAP_QUERY` ioctl of `/proc/PID/maps` (Linux
//! 6.11): the kernel walks the process's memory areas and returns only the executable ones, where
//! reading the text formats every area's line, path included (under `perf bench sched messaging`
//! that text was 54% of `record --off-cpu`'s own CPU). Hand-written because blazesym reads it
//! only inside its normalizer, not as an API. A kernel without the ioctl (ENOTTY) is remembered,
//! and the caller reads the text.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::maps::{parse_maps, MapsLine, DELETED_SUFFIX};

/// `_IOWR('f', 17, struct procmap_query)` of include/uapi/linux/fs.h (104-byte argument).
const PROCMAP_QUERY: libc::c_ulong = 0xC068_6611;
/// enum procmap_query_flags: executable areas only; the first at or after the address; areas
/// that map a file only.
const QUERY_VMA_EXECUTABLE: u64 = 0x04;
const QUERY_COVERING_OR_NEXT_VMA: u64 = 0x10;
const QUERY_FILE_BACKED_VMA: u64 = 0x20;

/// struct procmap_query (include/uapi/linux/fs.h).
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

const _: () = {
    assert!(std::mem::size_of::<ProcmapQuery>() == 0x68);
    assert!(std::mem::offset_of!(ProcmapQuery, inode) == 0x40);
    assert!(std::mem::offset_of!(ProcmapQuery, vma_name_size) == 0x50);
    assert!(std::mem::offset_of!(ProcmapQuery, vma_name_addr) == 0x58);
    assert!(std::mem::offset_of!(ProcmapQuery, build_id_addr) == 0x60);
};

impl ProcmapQuery {
    /// The device as maps lines hold it (`major << 32 | minor`).
    fn dev(&self) -> u64 {
        u64::from(self.dev_major) << 32 | u64::from(self.dev_minor)
    }
}

/// The kernel said ENOTTY once: it has no such ioctl.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// x86-64's `[vsyscall]` page, which the text lists (in 64-bit processes) but the ioctl does not
/// (it is no memory area of the process): taken from this process's own maps once.
fn vsyscall() -> Option<&'static MapsLine> {
    static LINE: OnceLock<Option<MapsLine>> = OnceLock::new();
    LINE.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/self/maps").ok()?;
        parse_maps(&text)
            .into_iter()
            .find(|l| l.exec && l.path == "[vsyscall]")
    })
    .as_ref()
}

/// Calls `each` with every area of the process behind `file` that matches `flags`, in address
/// order, and its name when `names` (`each` returns false to stop). None: ask the text instead,
/// because the kernel has no `PROCMAP_QUERY` (remembered), or this answer is one the text may
/// not share (a name longer than the buffer, a security module refusing the ioctl).
fn for_each_area(
    file: &File,
    flags: u64,
    names: bool,
    mut each: impl FnMut(&ProcmapQuery, &[u8]) -> bool,
) -> Option<io::Result<()>> {
    let mut name = vec![
        0u8;
        if names {
            libc::PATH_MAX as usize // the kernel's cap (longer: ENAMETOOLONG, the text is read)
        } else {
            0
        }
    ];
    let mut addr = 0u64;
    let mut first = true;
    loop {
        let mut q = ProcmapQuery {
            size: std::mem::size_of::<ProcmapQuery>() as u64,
            query_flags: flags | QUERY_COVERING_OR_NEXT_VMA,
            query_addr: addr,
            vma_name_size: name.len() as u32,
            vma_name_addr: if names { name.as_mut_ptr() as u64 } else { 0 },
            ..ProcmapQuery::default()
        };
        // SAFETY: `q` is a valid procmap_query of the size it declares; `name` outlives the call
        // and is as long as `vma_name_size` says (0 and a null address: no name asked).
        let r = unsafe { libc::ioctl(file.as_raw_fd(), PROCMAP_QUERY as _, &mut q) };
        if r < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::ENOENT) => Some(Ok(())), // no area at or after addr
                Some(libc::ENOTTY) | Some(libc::EINVAL) if first => {
                    UNSUPPORTED.store(true, Ordering::Relaxed);
                    None
                }
                Some(libc::ESRCH) => Some(Err(err)), // the process is gone
                _ => None,
            };
        }
        first = false;
        // The name's size counts its NUL; 0: an area without a name (anonymous memory).
        let len = (q.vma_name_size as usize).saturating_sub(1).min(name.len());
        if !each(&q, &name[..len]) || q.vma_end <= addr {
            return Some(Ok(())); // stopped, or a kernel that answers the same area again
        }
        addr = q.vma_end;
    }
}

/// The executable areas of `pid` as maps lines (sorted by start), or None when the kernel has no
/// `PROCMAP_QUERY`. An error opening the file is the process's (gone, or not ours to read).
pub(crate) fn executable_lines(pid: u32) -> Option<io::Result<Vec<MapsLine>>> {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return None;
    }
    let file = match File::open(format!("/proc/{pid}/maps")) {
        Ok(f) => f,
        Err(e) => return Some(Err(e)),
    };
    let mut lines = Vec::new();
    let done = for_each_area(&file, QUERY_VMA_EXECUTABLE, true, |q, name| {
        let raw = String::from_utf8_lossy(name);
        // As parse_maps does with the text's.
        let (path, deleted) = match raw.strip_suffix(DELETED_SUFFIX) {
            Some(p) => (p.to_string(), true),
            None => (raw.into_owned(), false),
        };
        lines.push(MapsLine {
            start: q.vma_start,
            end: q.vma_end,
            exec: true,
            offset: q.vma_offset,
            dev: q.dev(),
            inode: q.inode,
            path,
            deleted,
        });
        true
    })?;
    Some(done.map(|()| {
        lines.extend(vsyscall().cloned());
        lines
    }))
}

/// Where byte `file_off` of the file (`dev`, `inode`) is mapped in `pid` (None inside: nowhere),
/// looked up over its file-backed areas without their names; None: no `PROCMAP_QUERY`.
pub(crate) fn file_offset_address(
    pid: u32,
    dev: u64,
    inode: u64,
    file_off: u64,
) -> Option<io::Result<Option<u64>>> {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return None;
    }
    let file = match File::open(format!("/proc/{pid}/maps")) {
        Ok(f) => f,
        Err(e) => return Some(Err(e)),
    };
    let mut found = None;
    let done = for_each_area(&file, QUERY_FILE_BACKED_VMA, false, |q, _| {
        if q.dev() == dev
            && q.inode == inode
            && q.vma_offset <= file_off
            && file_off < q.vma_offset + (q.vma_end - q.vma_start)
        {
            found = Some(q.vma_start + (file_off - q.vma_offset));
            return false;
        }
        true
    })?;
    Some(done.map(|()| found))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ioctl's executable areas of this test process are the text's executable lines.
    #[test]
    fn same_lines_as_the_text() {
        let pid = std::process::id();
        let Some(got) = executable_lines(pid) else {
            eprintln!("no PROCMAP_QUERY on this kernel: nothing to compare");
            return;
        };
        let got = got.expect("our own maps");
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let want: Vec<MapsLine> = parse_maps(&text).into_iter().filter(|l| l.exec).collect();
        assert!(!want.is_empty());
        assert_eq!(got, want);
    }

    /// A byte of this test's own executable is found where the text says it is mapped.
    #[test]
    fn file_offset_found_where_the_text_maps_it() {
        let pid = std::process::id();
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let lines = parse_maps(&text);
        let data = lines
            .iter()
            .find(|l| !l.exec && l.inode != 0 && l.offset > 0)
            .expect("a file-backed data mapping");
        let off = data.offset + 8;
        let Some(got) = file_offset_address(pid, data.dev, data.inode, off) else {
            eprintln!("no PROCMAP_QUERY on this kernel: nothing to compare");
            return;
        };
        let want = lines.iter().find(|m| {
            m.dev == data.dev
                && m.inode == data.inode
                && m.offset <= off
                && off < m.offset + (m.end - m.start)
        });
        assert_eq!(got.unwrap(), want.map(|m| m.start + (off - m.offset)));
        assert_eq!(
            file_offset_address(pid, data.dev, data.inode, u64::MAX / 2).map(|r| r.unwrap()),
            Some(None)
        );
    }
}
