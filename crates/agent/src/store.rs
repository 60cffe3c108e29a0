//! The local store (docs/design.md, "The agent"): one pkprof profile file per closed window in a
//! directory, written atomically (a temporary file, fsync, rename, fsync of the directory), an
//! index of the windows, and retention by age and by total size.
//!
//! Layout of `DIR`:
//! - `w-<start_ns>-<end_ns>.pkprof`: a window (Unix-epoch nanoseconds); its name says its range,
//!   so the index can always be rebuilt from the directory.
//! - `index`: one line per window, `<start_ns> <end_ns> <bytes> <samples> <file>`, appended after
//!   each window's rename; rewritten (atomically) by retention and when the agent opens the store.
//!   Readers take the windows of a range from it without opening the others; a line whose file is
//!   gone is skipped, and without an index the directory is listed.
//! - `.tmp-*`: a window being written; one left by a crash is removed at the next open.
//!
//! A torn or corrupt window (the profile file's CRC) is skipped and counted, never fatal.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pkprof_profile::Profile;

use crate::merge::merge;

const INDEX: &str = "index";
const PREFIX: &str = "w-";
const SUFFIX: &str = ".pkprof";

/// A store error: what was being done and to which path.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", path.display())]
pub struct StoreError {
    what: &'static str,
    path: PathBuf,
    source: io::Error,
}

impl StoreError {
    fn new(what: &'static str, path: &Path, source: io::Error) -> Self {
        StoreError {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One stored window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    pub samples: u64,
    pub file: String,
}

impl Entry {
    fn line(&self) -> String {
        format!(
            "{} {} {} {} {}\n",
            self.start_ns, self.end_ns, self.bytes, self.samples, self.file
        )
    }

    fn parse_line(line: &str) -> Option<Entry> {
        let mut f = line.split(' ');
        let e = Entry {
            start_ns: f.next()?.parse().ok()?,
            end_ns: f.next()?.parse().ok()?,
            bytes: f.next()?.parse().ok()?,
            samples: f.next()?.parse().ok()?,
            file: f.next()?.to_string(),
        };
        (f.next().is_none() && parse_name(&e.file) == Some((e.start_ns, e.end_ns))).then_some(e)
    }
}

/// The range a window file's name says.
fn parse_name(name: &str) -> Option<(u64, u64)> {
    let mid = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let (a, b) = mid.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn file_name(start_ns: u64, end_ns: u64) -> String {
    format!("{PREFIX}{start_ns:020}-{end_ns:020}{SUFFIX}")
}

/// What a read of a range found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The merged windows (None: no window in the range).
    pub profile: Option<Profile>,
    pub windows: usize,
    /// Windows skipped: torn, corrupt or unreadable, one line each.
    pub skipped: Vec<String>,
}

/// The store, opened for writing by the agent.
pub struct Store {
    dir: PathBuf,
    max_age: Duration,
    max_bytes: u64,
    entries: Vec<Entry>,
    /// Windows that could not be written (full or read-only disk), since start.
    pub write_errors: u64,
    /// Windows deleted by retention, since start.
    pub expired: u64,
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Reads the index (None: missing or unreadable: list the directory instead).
fn read_index(dir: &Path) -> Option<Vec<Entry>> {
    let text = fs::read_to_string(dir.join(INDEX)).ok()?;
    // A torn last line (a crash mid-append) is dropped.
    Some(text.lines().filter_map(Entry::parse_line).collect())
}

/// The windows in the directory, from their names and sizes (samples unknown: 0).
fn list_dir(dir: &Path) -> Result<Vec<Entry>, StoreError> {
    let mut out = Vec::new();
    let rd = fs::read_dir(dir).map_err(|e| StoreError::new("cannot list", dir, e))?;
    for d in rd.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        if let Some((start_ns, end_ns)) = parse_name(&name) {
            let bytes = d.metadata().map(|m| m.len()).unwrap_or(0);
            out.push(Entry {
                start_ns,
                end_ns,
                bytes,
                samples: 0,
                file: name,
            });
        }
    }
    out.sort_by_key(|e| (e.start_ns, e.end_ns));
    Ok(out)
}

impl Store {
    /// Opens (creating, mode 0700) the store at `dir`: removes temporary files left by a crash
    /// and rebuilds the index from what the directory holds.
    pub fn open(dir: &Path, max_age: Duration, max_bytes: u64) -> Result<Store, StoreError> {
        fs::create_dir_all(dir).map_err(|e| StoreError::new("cannot create", dir, e))?;
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
        let rd = fs::read_dir(dir).map_err(|e| StoreError::new("cannot list", dir, e))?;
        for d in rd.flatten() {
            if d.file_name().to_string_lossy().starts_with(".tmp-") {
                let _ = fs::remove_file(d.path());
            }
        }
        let on_disk = list_dir(dir)?;
        let indexed = read_index(dir).unwrap_or_default();
        // The directory is the truth; the index adds the sample counts it knows.
        let entries = on_disk
            .into_iter()
            .map(|e| {
                indexed
                    .iter()
                    .find(|i| i.file == e.file)
                    .cloned()
                    .unwrap_or(e)
            })
            .collect();
        let s = Store {
            dir: dir.to_path_buf(),
            max_age,
            max_bytes,
            entries,
            write_errors: 0,
            expired: 0,
        };
        s.write_index()?;
        Ok(s)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Windows stored now.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Bytes stored now.
    pub fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.bytes).sum()
    }

    fn write_index(&self) -> Result<(), StoreError> {
        let tmp = self.dir.join(".tmp-index");
        let text: String = self.entries.iter().map(Entry::line).collect();
        let write = || -> io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, self.dir.join(INDEX))
        };
        write().map_err(|e| StoreError::new("cannot write the index in", &self.dir, e))
    }

    /// Writes a closed window atomically and applies retention (`now_ns`: wall clock). A failed
    /// write is counted and returned; the store stays as it was.
    pub fn write(&mut self, p: &Profile, now_ns: u64) -> Result<(), StoreError> {
        let r = self.write_window(p);
        if r.is_err() {
            self.write_errors += 1;
        }
        self.retain(now_ns)?;
        r
    }

    fn write_window(&mut self, p: &Profile) -> Result<(), StoreError> {
        let mut bytes = Vec::new();
        pkprof_profile::write_profile(p, &mut bytes).map_err(|e| {
            StoreError::new("cannot encode a window for", &self.dir, io::Error::other(e))
        })?;
        let (start_ns, end_ns) = (
            p.meta.start_unix_ns,
            p.meta.end_unix_ns.max(p.meta.start_unix_ns),
        );
        let name = file_name(start_ns, end_ns);
        let tmp = self.dir.join(format!(".tmp-{name}"));
        let path = self.dir.join(&name);
        let write = || -> io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            fsync_dir(&self.dir)
        };
        if let Err(e) = write() {
            let _ = fs::remove_file(&tmp);
            return Err(StoreError::new("cannot write a window to", &self.dir, e));
        }
        let e = Entry {
            start_ns,
            end_ns,
            bytes: bytes.len() as u64,
            samples: p.total_samples(),
            file: name,
        };
        let line = e.line();
        self.entries.retain(|x| x.file != e.file);
        self.entries.push(e);
        // Appended, not rewritten: a crash between the rename and here loses only the line, and
        // the next open rebuilds it from the directory.
        let append = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(self.dir.join(INDEX))
            .and_then(|mut f| f.write_all(line.as_bytes()));
        append.map_err(|e| StoreError::new("cannot append to the index in", &self.dir, e))
    }

    /// Deletes windows that ended before `now_ns - max_age`, then the oldest while the store holds
    /// more than `max_bytes`.
    pub fn retain(&mut self, now_ns: u64) -> Result<(), StoreError> {
        let oldest_kept = now_ns.saturating_sub(self.max_age.as_nanos() as u64);
        self.entries.sort_by_key(|e| (e.start_ns, e.end_ns));
        let mut total = self.bytes();
        let mut drop = 0;
        for e in &self.entries {
            if e.end_ns < oldest_kept || total > self.max_bytes {
                total -= e.bytes;
                drop += 1;
            } else {
                break;
            }
        }
        if drop == 0 {
            return Ok(());
        }
        for e in self.entries.drain(..drop) {
            let _ = fs::remove_file(self.dir.join(&e.file));
            self.expired += 1;
        }
        self.write_index()
    }
}

/// The windows of `dir` that overlap `[since_ns, until_ns]`, oldest first.
pub fn windows_in(dir: &Path, since_ns: u64, until_ns: u64) -> Result<Vec<Entry>, StoreError> {
    if !dir.is_dir() {
        return Err(StoreError::new(
            "no store at",
            dir,
            io::Error::from(io::ErrorKind::NotFound),
        ));
    }
    let mut all = match read_index(dir) {
        Some(e) => e,
        None => list_dir(dir)?,
    };
    all.retain(|e| e.end_ns >= since_ns && e.start_ns <= until_ns);
    all.sort_by_key(|e| (e.start_ns, e.end_ns));
    all.dedup_by(|a, b| a.file == b.file);
    Ok(all)
}

/// Loads and merges the windows of `dir` overlapping `[since_ns, until_ns]`; a window that cannot
/// be read is skipped and said.
pub fn load_range(dir: &Path, since_ns: u64, until_ns: u64) -> Result<Loaded, StoreError> {
    let entries = windows_in(dir, since_ns, until_ns)?;
    let mut profiles = Vec::with_capacity(entries.len());
    let mut skipped = Vec::new();
    for e in &entries {
        let path = dir.join(&e.file);
        match pkprof_profile::load(&path) {
            Ok(p) => profiles.push(p),
            // Deleted by retention since the index was read: not an error.
            Err(_) if !path.exists() => {}
            Err(err) => skipped.push(format!("{}: {err}", e.file)),
        }
    }
    Ok(Loaded {
        windows: profiles.len(),
        profile: merge(&profiles),
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkprof_profile::synthetic::synthetic;

    const S: u64 = 1_000_000_000;

    fn window(start_s: u64, seed: u64) -> Profile {
        let mut p = synthetic(200, 10, 20, seed);
        p.meta.start_unix_ns = start_s * S;
        p.meta.end_unix_ns = (start_s + 10) * S;
        p
    }

    #[test]
    fn windows_are_written_indexed_and_merged_by_range() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(dir.path(), Duration::from_secs(3600), 1 << 30).unwrap();
        let ps: Vec<Profile> = (0..6).map(|i| window(1000 + 10 * i, i)).collect();
        for p in &ps {
            st.write(p, p.meta.end_unix_ns).unwrap();
        }
        assert_eq!(st.entries().len(), 6);
        // 1020..1040 overlaps the windows starting at 1010 (ends 1020), 1020 and 1030.
        let l = load_range(dir.path(), 1020 * S, 1040 * S - 1).unwrap();
        assert_eq!(l.windows, 3);
        let want: u64 = ps[1..4].iter().map(Profile::total_samples).sum();
        assert_eq!(l.profile.unwrap().total_samples(), want);
        // Index lines carry the counts; a reopened store keeps them.
        let st = Store::open(dir.path(), Duration::from_secs(3600), 1 << 30).unwrap();
        assert_eq!(st.entries()[2].samples, ps[2].total_samples());
        // Without an index, the directory is listed.
        fs::remove_file(dir.path().join(INDEX)).unwrap();
        assert_eq!(windows_in(dir.path(), 0, u64::MAX).unwrap().len(), 6);
    }

    #[test]
    fn retention_by_age_and_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(dir.path(), Duration::from_secs(35), 1 << 30).unwrap();
        for i in 0..6 {
            let p = window(1000 + 10 * i, i);
            st.write(&p, p.meta.end_unix_ns).unwrap();
        }
        // now = 1060 s: windows ending before 1025 s are gone (1010, 1020 ends).
        let kept: Vec<u64> = st.entries().iter().map(|e| e.start_ns / S).collect();
        assert_eq!(kept, [1020, 1030, 1040, 1050]);
        assert_eq!(windows_in(dir.path(), 0, u64::MAX).unwrap().len(), 4);
        let on_disk = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(on_disk, 5, "4 windows and the index");
        // Size: keep at most two windows' worth.
        let two = st.entries()[2..].iter().map(|e| e.bytes).sum::<u64>();
        let mut st = Store::open(dir.path(), Duration::from_secs(3600), two).unwrap();
        st.retain(1060 * S).unwrap();
        let kept: Vec<u64> = st.entries().iter().map(|e| e.start_ns / S).collect();
        assert_eq!(kept, [1040, 1050]);
        assert!(st.bytes() <= two);
    }

    #[test]
    fn torn_windows_and_crash_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = Store::open(dir.path(), Duration::from_secs(3600), 1 << 30).unwrap();
        for i in 0..3 {
            let p = window(1000 + 10 * i, i);
            st.write(&p, p.meta.end_unix_ns).unwrap();
        }
        // A torn window (as if the disk lost its tail), a torn index line, a temporary file.
        let victim = dir.path().join(&st.entries()[1].file);
        let len = fs::metadata(&victim).unwrap().len();
        let f = OpenOptions::new().write(true).open(&victim).unwrap();
        f.set_len(len / 2).unwrap();
        let mut idx = OpenOptions::new()
            .append(true)
            .open(dir.path().join(INDEX))
            .unwrap();
        idx.write_all(b"1030000000000 10400").unwrap();
        fs::write(dir.path().join(".tmp-w-x.pkprof"), b"half").unwrap();
        let l = load_range(dir.path(), 0, u64::MAX).unwrap();
        assert_eq!(l.windows, 2);
        assert_eq!(l.skipped.len(), 1, "{:?}", l.skipped);
        assert!(l.skipped[0].contains(&st.entries()[1].file));
        let st = Store::open(dir.path(), Duration::from_secs(3600), 1 << 30).unwrap();
        assert_eq!(st.entries().len(), 3);
        assert!(!dir.path().join(".tmp-w-x.pkprof").exists());
        // A store whose directory went away under it (root ignores a read-only mode, so the
        // directory is replaced by a file): the write fails, is counted, and the agent goes on.
        let blocked = dir.path().join("sub");
        let mut st2 = Store::open(&blocked, Duration::from_secs(3600), 1 << 30).unwrap();
        fs::remove_dir_all(&blocked).unwrap();
        fs::write(&blocked, b"not a directory").unwrap();
        let p = window(2000, 9);
        assert!(st2.write(&p, p.meta.end_unix_ns).is_err());
        assert_eq!(st2.write_errors, 1);
    }
}
