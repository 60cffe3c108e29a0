//! Open-file cache: every mapped binary is opened once, while its process lives, and kept open so
//! that it can be read at the end of the recording even if the process exited or the file was
//! deleted or replaced. Files are deduplicated by the (device, inode) that maps shows, by the
//! (device, inode) of the opened file and by ELF build-id, so a shared library used by many
//! processes (or the same library seen through different paths or containers) is opened and parsed
//! once. Memory images that have no file (the vDSO) are copied into anonymous temporary files.
//!
//! blazesym reads each file through `/proc/self/fd/N`, which reopens exactly the file we hold.
//!
//! A long-lived symbolizer (the agent) evicts the files that no captured process mapped and no
//! capture met since the last eviction, or, for a file that came back (met at two evictions or
//! more), for [`EVICT_AFTER`] evictions in a row ([`FileCache::evict_unused`]; the second
//! condition keeps the binary of a fork loop, `/bin/true` started back to back, and the grace
//! keeps a tool that runs now and then, a compiler in a build, from being parsed again each
//! time it comes back): their descriptors are closed and their ids reused, so the caller must
//! drop everything it keyed by those ids and by their `/proc/self/fd/N` paths.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use crate::maps::MapsLine;

pub(crate) type FileId = usize;

/// Evictions in a row a file that came back (met by captures before two evictions or more) must have
/// gone unused (no captured process mapping it, no capture meeting it) before it is closed: with
/// the agent's 10 s windows, half a minute, so that it is not read and parsed again each time it
/// comes back. A file met at one eviction only goes at the first that finds it unused.
pub(crate) const EVICT_AFTER: u32 = 3;

/// How to reach a mapped file.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OpenVia {
    /// Through the live process: `/proc/PID/map_files/START-END` (works for deleted files and
    /// other mount namespaces; needs root), then `/proc/PID/root/PATH`.
    Process(u32),
    /// By the path as written (maps snapshots registered by hand, tests).
    Path,
}

#[derive(Debug)]
pub(crate) struct OpenFile {
    /// Kept open for the lifetime of the symbolizer; `None` when it could not be opened.
    file: Option<File>,
    /// What blazesym opens: `/proc/self/fd/N`.
    fd_path: PathBuf,
    /// Set when the file could not be opened or read: its frames stay unsymbolized.
    error: Option<String>,
    /// GNU build-id in lower-case hex, empty when the file has none (kept in its frames, so
    /// that `report --symbols` can find separate debug files).
    build_id: String,
}

impl OpenFile {
    /// The open file, unless it could not be opened or read.
    pub fn file(&self) -> Option<&File> {
        match (&self.file, &self.error) {
            (Some(f), None) => Some(f),
            _ => None,
        }
    }

    /// The path to hand to blazesym, unless the file is unusable.
    pub fn readable_path(&self) -> Option<&Path> {
        match (&self.file, &self.error) {
            (Some(_), None) => Some(&self.fd_path),
            _ => None,
        }
    }

    /// The file's GNU build-id in lower-case hex ("" when it has none or was not readable).
    pub fn build_id(&self) -> &str {
        &self.build_id
    }
}

/// Outcome of [`FileCache::open_mapping`].
pub(crate) enum Opened {
    /// Already known (possibly a file that could not be opened earlier).
    Known(FileId),
    New(FileId),
    /// Could not be opened; the error is remembered for this (dev, inode).
    Failed(FileId, String),
}

impl Opened {
    pub fn id(&self) -> FileId {
        match self {
            Opened::Known(id) | Opened::New(id) | Opened::Failed(id, _) => *id,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct FileCache {
    files: Vec<OpenFile>,
    /// (dev, inode) as printed in maps.
    by_maps_key: HashMap<(u64, u64), FileId>,
    /// (st_dev, st_ino) of the opened file.
    by_stat: HashMap<(u64, u64), FileId>,
    by_build_id: HashMap<Vec<u8>, FileId>,
    /// In-memory images by content (there is usually one vDSO image per machine).
    images: Vec<(Vec<u8>, FileId)>,
    /// Ids of evicted files, to be reused.
    free: Vec<FileId>,
    /// Files a capture met since the last eviction.
    touched: HashSet<FileId>,
    /// Evictions in a row each held file has gone unused (absent: used at the last one).
    unused_for: HashMap<FileId, u32>,
    /// Evictions since which a capture met each held file (the grace is for those met at two).
    met_at: HashMap<FileId, u32>,
}

impl FileCache {
    pub fn get(&self, id: FileId) -> &OpenFile {
        &self.files[id]
    }

    /// Remember that a file could not be read (by blazesym); later lookups skip it.
    pub fn mark_failed(&mut self, id: FileId, error: String) {
        self.files[id].error = Some(error);
    }

    /// The file behind a file-backed maps line, opened now if it was not known yet.
    pub fn open_mapping(&mut self, via: OpenVia, line: &MapsLine) -> Opened {
        let key = (line.dev, line.inode);
        if let Some(&id) = self.by_maps_key.get(&key) {
            self.touched.insert(id);
            return Opened::Known(id);
        }
        let opened = match open_mapped_file(via, line).and_then(check_elf) {
            Ok(file) => self.add_file(file),
            Err(err) => {
                let msg = err.to_string();
                let id = self.push(OpenFile {
                    file: None,
                    fd_path: PathBuf::new(),
                    error: Some(msg.clone()),
                    build_id: String::new(),
                });
                Opened::Failed(id, msg)
            }
        };
        self.by_maps_key.insert(key, opened.id());
        self.touched.insert(opened.id());
        opened
    }

    /// A memory image without a file (the vDSO read from a process), copied into an anonymous
    /// temporary file so that blazesym can read it like any ELF file.
    pub fn add_image(&mut self, bytes: Vec<u8>) -> io::Result<FileId> {
        if let Some((_, id)) = self.images.iter().find(|(b, _)| *b == bytes) {
            self.touched.insert(*id);
            return Ok(*id);
        }
        let mut file = tempfile::tempfile()?;
        file.write_all(&bytes)?;
        let id = self.add_file(file).id();
        self.touched.insert(id);
        self.images.push((bytes, id));
        Ok(id)
    }

    /// Register an opened file, or return the entry of the same file (by inode or build-id)
    /// opened earlier, closing this one.
    fn add_file(&mut self, file: File) -> Opened {
        let stat_key = file.metadata().ok().map(|m| (m.dev(), m.ino()));
        if let Some(id) = stat_key.and_then(|k| self.by_stat.get(&k)) {
            return Opened::Known(*id);
        }
        let fd_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        // A broken ELF file: no build-id; blazesym will say what is wrong when symbolizing.
        let build_id = blazesym::helper::read_elf_build_id(&fd_path)
            .ok()
            .flatten()
            .map(|b| b.into_owned());
        if let Some(id) = build_id.as_ref().and_then(|b| self.by_build_id.get(b)) {
            let id = *id;
            if let Some(k) = stat_key {
                self.by_stat.insert(k, id);
            }
            return Opened::Known(id);
        }
        let id = self.push(OpenFile {
            file: Some(file),
            fd_path,
            error: None,
            build_id: build_id.as_deref().map(hex).unwrap_or_default(),
        });
        if let Some(k) = stat_key {
            self.by_stat.insert(k, id);
        }
        if let Some(b) = build_id {
            self.by_build_id.insert(b, id);
        }
        Opened::New(id)
    }

    fn push(&mut self, f: OpenFile) -> FileId {
        if let Some(id) = self.free.pop() {
            self.files[id] = f;
            return id;
        }
        self.files.push(f);
        self.files.len() - 1
    }

    /// Number of distinct files held (tests, statistics).
    pub fn len(&self) -> usize {
        self.files.len() - self.free.len()
    }

    /// Closes every file that `used` did not hold and no capture met at this call and the
    /// `EVICT_AFTER - 1` before it, and forgets it (its id is reused later). Returns the ids
    /// evicted with the paths blazesym knew them by (empty for files that could not be opened),
    /// for the caller to drop what it cached under them.
    pub fn evict_unused(&mut self, used: &HashSet<FileId>) -> Vec<(FileId, PathBuf)> {
        let free: HashSet<FileId> = self.free.iter().copied().collect();
        let touched = std::mem::take(&mut self.touched);
        let mut evicted = Vec::new();
        for id in 0..self.files.len() {
            if free.contains(&id) {
                continue;
            }
            // A file that could not be opened (often a process that exited under the capture)
            // is forgotten once no process maps it: the next capture tries it again.
            let failed = self.files[id].file.is_none();
            if touched.contains(&id) && !failed {
                let met = self.met_at.entry(id).or_default();
                *met = met.saturating_add(1);
            }
            if used.contains(&id) || (touched.contains(&id) && !failed) {
                self.unused_for.remove(&id);
                continue;
            }
            // The grace is for files that came back: one that captures met at a single eviction
            // (a binary run once, as most of a churn's are, however long its process lived)
            // goes at the first that finds it unused.
            let grace = if self.met_at.get(&id).copied().unwrap_or(0) >= 2 {
                EVICT_AFTER
            } else {
                1
            };
            let n = self.unused_for.entry(id).or_default();
            *n += 1;
            if *n < grace && !failed {
                continue;
            }
            self.unused_for.remove(&id);
            self.met_at.remove(&id);
            let f = std::mem::replace(&mut self.files[id], OpenFile::evicted());
            evicted.push((id, f.fd_path));
            self.free.push(id);
        }
        if !evicted.is_empty() {
            let gone: HashSet<FileId> = evicted.iter().map(|(id, _)| *id).collect();
            self.by_maps_key.retain(|_, id| !gone.contains(id));
            self.by_stat.retain(|_, id| !gone.contains(id));
            self.by_build_id.retain(|_, id| !gone.contains(id));
            self.images.retain(|(_, id)| !gone.contains(id));
        }
        evicted
    }
}

impl OpenFile {
    /// The slot of an evicted file until its id is reused.
    fn evicted() -> OpenFile {
        OpenFile {
            file: None,
            fd_path: PathBuf::new(),
            error: Some("evicted".to_string()),
            build_id: String::new(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Only ELF files can be symbolized; say so plainly rather than with blazesym's parse error.
fn check_elf(file: File) -> io::Result<File> {
    let mut magic = [0u8; 4];
    match file.read_exact_at(&mut magic, 0) {
        Ok(()) if magic == *b"\x7fELF" => Ok(file),
        Ok(()) => Err(io::Error::other("not an ELF file")),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            Err(io::Error::other("not an ELF file"))
        }
        Err(e) => Err(e),
    }
}

fn open_mapped_file(via: OpenVia, line: &MapsLine) -> io::Result<File> {
    match via {
        OpenVia::Path => File::open(&line.path),
        OpenVia::Process(pid) => {
            let map_file = format!("/proc/{pid}/map_files/{:x}-{:x}", line.start, line.end);
            match File::open(map_file) {
                Ok(f) => Ok(f),
                // A deleted file can only be reached through map_files.
                Err(e) if line.deleted => Err(e),
                Err(_) => {
                    let f = File::open(format!("/proc/{pid}/root{}", line.path))?;
                    if f.metadata()?.ino() != line.inode {
                        return Err(io::Error::other(
                            "the file was replaced since it was mapped",
                        ));
                    }
                    Ok(f)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(path: &str, inode: u64) -> MapsLine {
        MapsLine {
            start: 0x1000,
            end: 0x2000,
            exec: true,
            offset: 0,
            dev: 1,
            inode,
            path: path.to_string(),
            deleted: false,
        }
    }

    #[test]
    fn eviction_closes_unused_files_and_reuses_their_ids() {
        let mut c = FileCache::default();
        let a = c.open_mapping(OpenVia::Path, &line("/bin/true", 1)).id();
        let b = c.open_mapping(OpenVia::Path, &line("/bin/ls", 2)).id();
        assert_ne!(a, b);
        // Both met since the last eviction: kept.
        assert!(c.evict_unused(&HashSet::new()).is_empty());
        // Then only `a` is used: `b`, met at one eviction only, is closed.
        let evicted = c.evict_unused(&HashSet::from([a]));
        assert_eq!(evicted.len(), 1);
        assert_eq!(evicted[0].0, b);
        assert!(!evicted[0].1.as_os_str().is_empty());
        assert_eq!(c.len(), 1);
        assert!(c.get(b).file().is_none());
        // `b` opened again gets a fresh entry in the freed slot; `a` is still known.
        assert!(matches!(
            c.open_mapping(OpenVia::Path, &line("/bin/ls", 2)),
            Opened::New(id) if id == b
        ));
        assert!(matches!(
            c.open_mapping(OpenVia::Path, &line("/bin/true", 1)),
            Opened::Known(id) if id == a
        ));
        assert_eq!(c.len(), 2);
    }

    /// A file that could not be opened is forgotten at the first eviction that finds no process
    /// mapping it, met or not: the next process that maps it tries again.
    #[test]
    fn a_failed_file_is_tried_again() {
        let mut c = FileCache::default();
        let bad = line("/nonexistent/pkprof-test", 3);
        assert!(matches!(
            c.open_mapping(OpenVia::Path, &bad),
            Opened::Failed(..)
        ));
        assert_eq!(c.evict_unused(&HashSet::new()).len(), 1);
        assert!(matches!(
            c.open_mapping(OpenVia::Path, &bad),
            Opened::Failed(..)
        ));
    }

    /// A file that came back (met at two evictions) is kept EVICT_AFTER - 1 evictions unused;
    /// met again within them, it starts its count over.
    #[test]
    fn a_file_that_came_back_is_kept() {
        let mut c = FileCache::default();
        let a = c.open_mapping(OpenVia::Path, &line("/bin/true", 1)).id();
        assert!(c.evict_unused(&HashSet::new()).is_empty()); // met since the last
        c.open_mapping(OpenVia::Path, &line("/bin/true", 1));
        assert!(c.evict_unused(&HashSet::new()).is_empty()); // met again: came back
        for _ in 1..EVICT_AFTER {
            assert!(c.evict_unused(&HashSet::new()).is_empty());
        }
        // Met once more just before it would go.
        assert!(matches!(
            c.open_mapping(OpenVia::Path, &line("/bin/true", 1)),
            Opened::Known(id) if id == a
        ));
        for _ in 0..EVICT_AFTER {
            assert!(c.evict_unused(&HashSet::new()).is_empty());
        }
        assert_eq!(c.evict_unused(&HashSet::new()).len(), 1);
        assert_eq!(c.len(), 0);
    }
}
