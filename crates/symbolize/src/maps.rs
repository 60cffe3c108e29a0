//! Parsing `/proc/PID/maps` lines into mappings (address range, permissions, file offset, device,
//! inode, path). Pure text handling: reading `/proc` happens in `process.rs`.

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MapsLine {
    pub start: u64,
    /// Exclusive.
    pub end: u64,
    pub exec: bool,
    /// File offset of `start`.
    pub offset: u64,
    /// Device (`major << 32 | minor`) and inode of the mapped file; 0 for anonymous memory.
    pub dev: u64,
    pub inode: u64,
    /// Path with the kernel's ` (deleted)` suffix removed; empty for anonymous memory,
    /// `[vdso]`, `[heap]`... for special mappings.
    pub path: String,
    /// The mapped file was deleted (or replaced) after it was mapped.
    pub deleted: bool,
}

impl MapsLine {
    /// Where byte `file_off` of the mapped file lies in memory, if this line maps it.
    pub fn address_of(&self, file_off: u64) -> Option<u64> {
        (self.offset <= file_off && file_off < self.offset + (self.end - self.start))
            .then(|| self.start + (file_off - self.offset))
    }

    /// What kind of memory this line maps.
    pub fn kind(&self) -> LineKind {
        if self.path.is_empty() {
            LineKind::Anon
        } else if self.path == "[vdso]" {
            LineKind::Vdso
        } else if self.path.starts_with('[') || self.inode == 0 {
            // `[heap]`, `[stack]`, `[vsyscall]`, `[anon:NAME]`, and files without an inode
            // (nothing there that could be opened and read as ELF).
            LineKind::Special
        } else {
            LineKind::File
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineKind {
    File,
    Anon,
    Vdso,
    Special,
}

pub(crate) const DELETED_SUFFIX: &str = " (deleted)";

/// Parse the text of a maps file; lines that do not parse are skipped.
pub(crate) fn parse_maps(text: &str) -> Vec<MapsLine> {
    text.lines().filter_map(parse_line).collect()
}

/// Parse one line: `START-END PERMS OFFSET MAJOR:MINOR INODE   [PATH]`.
pub(crate) fn parse_line(line: &str) -> Option<MapsLine> {
    let (range, rest) = next_field(line)?;
    let (perms, rest) = next_field(rest)?;
    let (offset, rest) = next_field(rest)?;
    let (dev, rest) = next_field(rest)?;
    let (inode, rest) = match next_field(rest) {
        Some(x) => x,
        None => (rest.trim(), ""),
    };

    let (start, end) = range.split_once('-')?;
    let start = parse_hex(start)?;
    let end = parse_hex(end)?;
    if end <= start {
        return None;
    }
    let exec = perms.as_bytes().get(2) == Some(&b'x');
    let offset = parse_hex(offset)?;
    let (major, minor) = dev.split_once(':')?;
    let dev = (parse_hex(major)? << 32) | (parse_hex(minor)? & 0xffff_ffff);
    let inode = inode.parse::<u64>().ok()?;

    let path = rest.trim_start();
    let (path, deleted) = match path.strip_suffix(DELETED_SUFFIX) {
        Some(p) => (p, true),
        None => (path, false),
    };
    Some(MapsLine {
        start,
        end,
        exec,
        offset,
        dev,
        inode,
        path: path.to_string(),
        deleted,
    })
}

/// Split off the first whitespace-separated field; `None` when there is none.
fn next_field(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    if s.is_empty() {
        return None;
    }
    Some(match s.find(|c: char| c.is_ascii_whitespace()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    })
}

/// Hex digits only (no sign, no prefix), at most 16 of them.
pub(crate) fn parse_hex(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_line() {
        let l = parse_line(
            "7f12a4c28000-7f12a4dbd000 r-xp 00028000 fe:01 1837281                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(l.start, 0x7f12a4c28000);
        assert_eq!(l.end, 0x7f12a4dbd000);
        assert!(l.exec);
        assert_eq!(l.offset, 0x28000);
        assert_eq!(l.dev, (0xfe << 32) | 1);
        assert_eq!(l.inode, 1837281);
        assert_eq!(l.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert!(!l.deleted);
        assert_eq!(l.kind(), LineKind::File);
    }

    #[test]
    fn deleted_path_with_spaces() {
        let l =
            parse_line("400000-401000 r-xp 00001000 08:01 42 /tmp/my dir/a b (deleted)").unwrap();
        assert_eq!(l.path, "/tmp/my dir/a b");
        assert!(l.deleted);
    }

    #[test]
    fn anonymous_and_special() {
        let anon = parse_line("7f0000000000-7f0000001000 rwxp 00000000 00:00 0 ").unwrap();
        assert_eq!(anon.kind(), LineKind::Anon);
        let anon = parse_line("7f0000000000-7f0000001000 rwxp 00000000 00:00 0").unwrap();
        assert_eq!(anon.kind(), LineKind::Anon);
        let vdso =
            parse_line("7ffd1b5f2000-7ffd1b5f4000 r-xp 00000000 00:00 0      [vdso]").unwrap();
        assert_eq!(vdso.kind(), LineKind::Vdso);
        let stack = parse_line("7ffd1b5f2000-7ffd1b5f4000 rw-p 00000000 00:00 0 [stack]").unwrap();
        assert_eq!(stack.kind(), LineKind::Special);
        assert!(!stack.exec);
    }

    #[test]
    fn garbage_is_skipped() {
        let text = "\n\
            nonsense\n\
            1000-0800 r-xp 0 00:00 0\n\
            zz-1000 r-xp 0 00:00 0\n\
            1000-2000 r-xp 0 0000 0\n\
            1000-2000 r-xp 0 00:00 -1\n\
            1000-2000\n\
            1000-2000 r-xp 00000000 00:00 0\n";
        let lines = parse_maps(text);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].start, 0x1000);
    }
}
