//! Where `pkprof syscalls --calibrate` keeps its cost table, and how a profile run finds it:
//! `$PKPROF_CACHE_DIR/calibration.json`, else `/var/cache/pkprof/calibration.json` for root,
//! else `$XDG_CACHE_HOME/pkprof/` (or `~/.cache/pkprof/`); under `sudo`, a profile run that
//! finds none in /var/cache/pkprof also looks in the invoking user's `~/.cache/pkprof/`. A
//! table is used only for the machine it was measured on (kernel release, CPU model, pkprof
//! version); a corrupt file is one line on stderr and "unknown" savings, never a panic.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pkprof_syscall_graph::costs::{CalibrationKey, CostTable, Costs, COSTS_SCHEMAS_READ};

const FILE: &str = "calibration.json";

/// How to get a table, for the reports.
const HOW: &str = "`pkprof syscalls --calibrate` measures one in about 15 s \
                   (`--calibrate=quick`: about 4 s)";

/// The cache file.
pub fn path() -> PathBuf {
    if let Some(dir) = std::env::var_os("PKPROF_CACHE_DIR") {
        return PathBuf::from(dir).join(FILE);
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/cache/pkprof").join(FILE);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("pkprof").join(FILE)
}

/// The cache of the user who ran `sudo` (root's own is /var/cache/pkprof): None unless root,
/// SUDO_USER set and no PKPROF_CACHE_DIR.
fn sudo_user_path() -> Option<PathBuf> {
    // SAFETY: geteuid cannot fail.
    if std::env::var_os("PKPROF_CACHE_DIR").is_some() || unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let user = std::ffi::CString::new(std::env::var("SUDO_USER").ok()?).ok()?;
    // SAFETY: user is NUL-terminated; pw (if not null) points to libc's static entry, whose
    // pw_dir is NUL-terminated and copied out before any other getpw* call.
    let home = unsafe {
        let pw = libc::getpwnam(user.as_ptr());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr((*pw).pw_dir)
            .to_string_lossy()
            .into_owned()
    };
    Some(PathBuf::from(home).join(".cache/pkprof").join(FILE))
}

/// The table for `key` where a profile run looks: `path()`, and under `sudo` when that has
/// none, the invoking user's cache (a calibration made without root).
pub fn find(key: &CalibrationKey) -> Costs {
    let own = path();
    match sudo_user_path() {
        Some(user) if !own.exists() && user.exists() => load(&user, key),
        Some(user) if !own.exists() => Costs::Missing(format!(
            "no calibration of this machine yet (none at {} or {}): {HOW}",
            own.display(),
            user.display()
        )),
        _ => load(&own, key),
    }
}

/// The table cached at `path` for `key`, or why there is none (a corrupt file is also said on
/// stderr, in one line).
pub fn load(path: &Path, key: &CalibrationKey) -> Costs {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Costs::Missing(format!(
                "no calibration of this machine yet (none at {}): {HOW}",
                path.display()
            ));
        }
        Err(e) => {
            return Costs::Missing(format!(
                "cannot read the calibration {} ({e}): {HOW}",
                path.display()
            ));
        }
    };
    let corrupt = |e: &dyn std::fmt::Display| {
        eprintln!(
            "pkprof: ignoring the corrupt calibration {} ({e}); run `pkprof syscalls \
             --calibrate` again",
            path.display()
        );
        Costs::Missing(format!("the calibration file is corrupt: {HOW}"))
    };
    // The schema first: a table of another pkprof may not deserialize as this one's.
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) => match v.get("schema").and_then(|s| s.as_str()) {
            // `/1` reads as `/2` without the unlinked batches (`COSTS_SCHEMAS_READ`).
            Some(s) if !COSTS_SCHEMAS_READ.contains(&s) => {
                return Costs::Missing(format!(
                    "the calibration {} is of another pkprof ({s}): {HOW}",
                    path.display()
                ));
            }
            Some(_) => {}
            None => return corrupt(&"no schema"),
        },
        Err(e) => return corrupt(&e),
    }
    let table: CostTable = match serde_json::from_str(&text) {
        Ok(t) => t,
        Err(e) => return corrupt(&e),
    };
    if let Some(why) = table.invalid_measure() {
        return corrupt(&why);
    }
    if &table.key != key {
        let k = &table.key;
        return Costs::Missing(format!(
            "the calibration {} was measured for kernel {}, {}, pkprof {} (this is kernel {}, {}, \
             pkprof {}): {HOW}",
            path.display(),
            k.kernel,
            k.cpu,
            k.pkprof_version,
            key.kernel,
            key.cpu,
            key.pkprof_version
        ));
    }
    Costs::Table {
        table: Box::new(table),
        source: path.display().to_string(),
    }
}

/// Writes `table` to `path` whole or not at all (a temporary beside it, renamed).
pub fn store(path: &Path, table: &CostTable) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".{FILE}.{}.tmp", std::process::id()));
    let json = serde_json::to_string_pretty(table).context("encoding the table")?;
    std::fs::write(&tmp, json + "\n").with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::Error::new(e).context(format!("renaming it to {}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkprof_syscall_graph::costs::{OpCost, Unlinked, COSTS_SCHEMA};

    fn key() -> CalibrationKey {
        CalibrationKey {
            kernel: "6.18".into(),
            cpu: "cpu".into(),
            pkprof_version: "1".into(),
        }
    }

    fn table() -> CostTable {
        let m = pkprof_syscall_graph::costs::Measure {
            median_ns: 100.0,
            p25_ns: 90.0,
            p75_ns: 110.0,
            samples: 3,
        };
        CostTable {
            schema: COSTS_SCHEMA.into(),
            key: key(),
            measured_unix_s: 1,
            seconds: 1.0,
            mode: "quick".into(),
            batch_size: 16,
            engine: String::new(),
            targets: Default::default(),
            crossing: m,
            batched_unavailable: None,
            ops: vec![],
            single_calls: vec![],
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pkprof-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_table_is_used_only_on_its_machine() {
        let d = dir("key");
        let p = d.join(FILE);
        assert!(matches!(load(&p, &key()), Costs::Missing(w) if w.contains("--calibrate")));
        store(&p, &table()).unwrap();
        assert!(matches!(load(&p, &key()), Costs::Table { table: t, .. } if *t == table()));
        let other = CalibrationKey {
            kernel: "6.19".into(),
            ..key()
        };
        assert!(
            matches!(load(&p, &other), Costs::Missing(w) if w.contains("kernel 6.18") && w.contains("kernel 6.19"))
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_corrupt_file_is_unknown_not_a_panic() {
        let d = dir("corrupt");
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(FILE);
        for junk in ["", "{", "[1,2]", "{\"schema\": 3}", "\u{0}\u{1}garbage"] {
            std::fs::write(&p, junk).unwrap();
            assert!(
                matches!(load(&p, &key()), Costs::Missing(w) if w.contains("corrupt")),
                "{junk:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A file with absurd but well-formed measures (1e30 ns) is used; one whose measures are
    /// out of order or negative is corrupt: one line, never a panic.
    #[test]
    fn absurd_or_invalid_measures_do_not_panic() {
        let d = dir("absurd");
        let p = d.join(FILE);
        let mut t = table();
        t.crossing.median_ns = 1e30;
        t.crossing.p75_ns = 1e30;
        store(&p, &t).unwrap();
        assert!(matches!(load(&p, &key()), Costs::Table { .. }));
        t.crossing.p25_ns = 2e30;
        store(&p, &t).unwrap();
        assert!(matches!(load(&p, &key()), Costs::Missing(w) if w.contains("corrupt")));
        let mut t = table();
        t.crossing.median_ns = -1e30;
        t.crossing.p25_ns = -2e30;
        store(&p, &t).unwrap();
        assert!(matches!(load(&p, &key()), Costs::Missing(w) if w.contains("corrupt")));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A table of another pkprof (another schema, fields this one does not know) is said to be
    /// so, not corrupt.
    #[test]
    fn another_schema_is_another_pkprof_not_corrupt() {
        let d = dir("schema");
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(FILE);
        std::fs::write(&p, r#"{"schema": "pkprof-calibration/0", "rows": [1, 2]}"#).unwrap();
        assert!(
            matches!(load(&p, &key()), Costs::Missing(w) if w.contains("another pkprof (pkprof-calibration/0)") && !w.contains("corrupt"))
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A table of schema `/1` (before the unlinked batches were measured: its ops have no
    /// `unlinked` field) is read and used, its ops without the link figures; a `/2` table
    /// keeps them.
    #[test]
    fn a_table_of_schema_1_is_read_without_the_links() {
        let d = dir("schema1");
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(FILE);
        let mut t = table();
        let m = t.crossing;
        t.ops.push(OpCost {
            op: "read".into(),
            on: "file".into(),
            variant: String::new(),
            plain: m,
            batched: Some(m),
            batch_fixed: Some(m),
            unlinked: Some(Unlinked {
                batched: m,
                batch_fixed: m,
                link: m,
            }),
        });
        store(&p, &t).unwrap();
        assert!(matches!(load(&p, &key()), Costs::Table { table, .. } if *table == t));
        // What pkprof wrote before: schema /1, no `unlinked`.
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["schema"] = "pkprof-calibration/1".into();
        v["ops"][0].as_object_mut().unwrap().remove("unlinked");
        std::fs::write(&p, v.to_string()).unwrap();
        let Costs::Table { table: old, .. } = load(&p, &key()) else {
            panic!("a /1 table is not read")
        };
        assert_eq!(old.schema, "pkprof-calibration/1");
        assert_eq!(old.ops[0].unlinked, None);
        assert_eq!(old.ops[0].batched, t.ops[0].batched);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_unwritable_directory_is_an_error() {
        let e = store(Path::new("/dev/null/pkprof/calibration.json"), &table()).unwrap_err();
        assert!(format!("{e:#}").contains("/dev/null/pkprof"), "{e:#}");
    }
}
