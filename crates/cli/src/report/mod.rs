//! `pkprof report` and `pkprof diff`: read profile files and print gprof flat profiles and call
//! graphs, DCPI tables and diffs, or write them in another tool's format (pprof, folded stacks,
//! speedscope, HTML). Everything here reads files only: no root needed.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use pkprof_profile::Profile;
use pkprof_report::export::{self, ExportOptions};
use pkprof_report::kind::{self, KindSelection};
use pkprof_report::{
    write_callgraph, write_dcpi, write_diff, write_flat, CallGraph, ReportError, SelectOptions,
    Selection,
};

/// Which text reports `pkprof report` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sections {
    pub flat: bool,
    pub graph: bool,
    pub dcpi: bool,
}

/// A time range of an agent's store (`--since`, `--until`), as given.
#[derive(Clone, Debug, Default)]
pub struct StoreRange {
    pub since: Option<String>,
    pub until: Option<String>,
}

#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// The profile file, or with `store` the store's directory.
    pub file: PathBuf,
    /// Read the windows of an agent's store in this range (`--store DIR --since 1h`).
    pub store: Option<StoreRange>,
    /// `--since`/`--until` given with a file (refused: they select an agent's windows).
    pub range_without_store: bool,
    /// Directories of separate debug files to name unsymbolized user frames from (`--symbols`).
    pub symbols: Vec<PathBuf>,
    /// None of them asked: flat profile and call graph.
    pub sections: Sections,
    pub select: SelectOptions,
    /// Write the (filtered) profile in this exchange format instead of text reports.
    pub format: Option<String>,
    /// Where to write (default: standard output).
    pub output: Option<PathBuf>,
    /// `--kind`: on-CPU samples, off-CPU samples, or both.
    pub kind: KindSelection,
}

#[derive(Clone, Debug)]
pub struct DiffOptions {
    pub a: PathBuf,
    pub b: PathBuf,
    /// Compare two ranges (`FROM..TO`) of an agent's store instead of two files.
    pub store: Option<(PathBuf, Vec<String>)>,
    pub select: SelectOptions,
    /// `html`: a page with a differential flame graph instead of the text table.
    pub format: Option<String>,
    pub output: Option<PathBuf>,
}

fn load(path: &Path) -> Result<Profile> {
    pkprof_profile::load(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The windows of the store at `dir` between `since_ns` and `until_ns`, merged; windows that
/// cannot be read are skipped and said on standard error.
fn load_store(dir: &Path, since_ns: u64, until_ns: u64, what: &str) -> Result<Profile> {
    let l = pkprof_agent::store::load_range(dir, since_ns, until_ns)
        .with_context(|| format!("cannot read the store {}", dir.display()))?;
    for s in &l.skipped {
        eprintln!("pkprof: skipped an unreadable window: {s}");
    }
    l.profile.ok_or_else(|| {
        anyhow::anyhow!(
            "no window in the store {} for {what}{}",
            dir.display(),
            if l.skipped.is_empty() {
                ""
            } else {
                " (every window in it was unreadable)"
            }
        )
    })
}

/// The profile a report reads: the file, or the store's windows in the range given.
fn load_input(opts: &ReportOptions) -> Result<Profile> {
    if opts.range_without_store {
        bail!("--since and --until select windows of an agent's store: give --store DIR");
    }
    let Some(range) = &opts.store else {
        return load(&opts.file);
    };
    let now = pkprof_recording::meta::unix_ns();
    let when = |flag: &str, v: &Option<String>, default: u64| match v {
        Some(s) => {
            pkprof_agent::config::parse_when(s, now).map_err(|e| anyhow::anyhow!("{flag} {e}"))
        }
        None => Ok(default),
    };
    let since = when("--since", &range.since, 0)?;
    let until = when("--until", &range.until, now)?;
    if since > until {
        bail!("--since is after --until");
    }
    let what = match (&range.since, &range.until) {
        (None, None) => "any time".to_string(),
        (s, u) => format!(
            "{}..{}",
            s.as_deref().unwrap_or("start"),
            u.as_deref().unwrap_or("now")
        ),
    };
    load_store(&opts.file, since, until, &what)
}

/// Standard output, or the file `-o` names.
fn open_output(output: &Option<PathBuf>) -> Result<Box<dyn Write>> {
    Ok(match output {
        Some(p) if p.as_os_str() != "-" => Box::new(BufWriter::with_capacity(
            1 << 16,
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        _ => Box::new(BufWriter::with_capacity(1 << 16, io::stdout().lock())),
    })
}

fn to_stdout(output: &Option<PathBuf>) -> bool {
    output.as_ref().is_none_or(|p| p.as_os_str() == "-")
}

/// A closed pipe (`pkprof report ... | head`) ends the report quietly.
fn finish(result: Result<(), ReportError>, out: &mut dyn Write, what: &str) -> Result<()> {
    let result = result.and_then(|()| out.flush().map_err(ReportError::from));
    match result {
        Err(ReportError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r.with_context(|| what.to_string()),
    }
}

fn title(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Names unsymbolized user frames from the debug files under `dirs`, before any report or
/// export sees the profile, and says on standard error what was and was not found.
fn name_from_debug_files(profile: &mut Profile, dirs: &[PathBuf]) {
    if dirs.is_empty() {
        return;
    }
    let out = pkprof_symbolize::name_from_debug_files(profile, dirs);
    let mut msg = format!(
        "pkprof: --symbols named {} of {} unsymbolized user frames",
        out.named, out.unsymbolized
    );
    if !out.not_found.is_empty() {
        let shown = out.not_found.len().min(5);
        msg.push_str(&format!(
            "; no matching debug file for {}",
            out.not_found[..shown].join(", ")
        ));
        if out.not_found.len() > shown {
            msg.push_str(&format!(" and {} more", out.not_found.len() - shown));
        }
    }
    eprintln!("{msg}");
}

pub fn run_report(opts: ReportOptions) -> Result<()> {
    let mut profile = load_input(&opts)?;
    name_from_debug_files(&mut profile, &opts.symbols);
    let name = opts.file.display().to_string();
    let profile = kind::view(&profile, opts.kind)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("cannot report {name}"))?;
    let sel = Selection::new(&opts.select, &[&profile])
        .with_context(|| format!("cannot report {name}"))?;
    if profile.samples.iter().all(|s| s.count == 0) {
        return Err(ReportError::Empty(String::new())).context(format!("cannot report {name}"));
    }

    if let Some(format) = &opts.format {
        let exporter = export::exporter(format)?;
        if to_stdout(&opts.output) && format != "folded" && io::stdout().is_terminal() {
            bail!(
                "--format {format} writes a file: give -o FILE.{}",
                exporter.extension()
            );
        }
        let filtered = sel.apply(&profile);
        if filtered.samples.iter().all(|s| s.count == 0) {
            return Err(pkprof_report::ReportError::Empty(format!(
                " matching the filters ({})",
                sel.filters_text().unwrap_or_default()
            )))
            .context(format!("cannot export {name}"));
        }
        if format == "folded" && profile.meta.lost.parts().iter().any(|(_, n)| *n > 0) {
            // Folded stacks have no header to say it in.
            eprintln!(
                "pkprof: {} (folded stacks have no header to state it)",
                pkprof_report::header::lost_text(&profile.meta.lost)
            );
        }
        let u = &profile.meta.user_stacks;
        if format == "folded" && u.truncated.iter().any(|(_, n)| *n > 0) {
            if let Some(line) = pkprof_report::header::user_stacks_text(u) {
                eprintln!("pkprof: {line} (folded stacks have no header to state it)");
            }
        }
        let mut out = open_output(&opts.output)?;
        let eopts = ExportOptions {
            names: opts.select.names,
            title: title(&opts.file),
            kind: opts.kind,
        };
        return finish(
            exporter.write(&filtered, &eopts, &mut out),
            &mut out,
            &format!("cannot write {format}"),
        );
    }

    let mut s = opts.sections;
    if !(s.flat || s.graph || s.dcpi) {
        s.flat = true;
        s.graph = true;
    }
    let mut out = open_output(&opts.output)?;
    let result = (|| -> Result<(), ReportError> {
        if s.flat || s.graph {
            let g = CallGraph::build(&profile, &sel)?;
            if s.flat {
                write_flat(&g, &sel, &mut out)?;
            }
            if s.graph {
                if s.flat {
                    writeln!(out)?;
                }
                write_callgraph(&g, &sel, &mut out)?;
            }
        }
        if s.dcpi {
            if s.flat || s.graph {
                writeln!(out)?;
            }
            write_dcpi(&profile, &sel, &mut out)?;
        }
        Ok(())
    })();
    finish(result, &mut out, &format!("cannot report {name}"))
}

pub fn run_diff(mut opts: DiffOptions) -> Result<()> {
    let (a, b) = match &opts.store {
        None => (load(&opts.a)?, load(&opts.b)?),
        Some((dir, ranges)) => {
            if ranges.len() != 2 {
                bail!("diff --store compares two ranges: give --range FROM..TO twice");
            }
            let now = pkprof_recording::meta::unix_ns();
            let mut out = Vec::new();
            for r in ranges {
                let (since, until) = pkprof_agent::config::parse_range(r, now)
                    .map_err(|e| anyhow::anyhow!("--range {e}"))?;
                out.push(load_store(dir, since, until, r)?);
            }
            opts.a = PathBuf::from(&ranges[0]);
            opts.b = PathBuf::from(&ranges[1]);
            let b = out.pop().unwrap_or_default();
            (out.pop().unwrap_or_default(), b)
        }
    };
    let sel = Selection::new(&opts.select, &[&a, &b]).context("cannot compare the profiles")?;
    let (na, nb) = (opts.a.display().to_string(), opts.b.display().to_string());
    for (p, n) in [(&a, &na), (&b, &nb)] {
        if p.samples.iter().all(|s| s.count == 0) {
            return Err(ReportError::Empty(String::new())).context(format!("cannot compare {n}"));
        }
    }
    match opts.format.as_deref() {
        None => {
            let mut out = open_output(&opts.output)?;
            let r = write_diff(&a, &b, (&na, &nb), &sel, &mut out);
            finish(r, &mut out, "cannot compare the profiles")
        }
        Some("html") => {
            if to_stdout(&opts.output) && io::stdout().is_terminal() {
                bail!("--format html writes a file: give -o FILE.html");
            }
            let (fa, fb) = (sel.apply(&a), sel.apply(&b));
            let eopts = ExportOptions {
                names: opts.select.names,
                title: format!("{} vs {}", title(&opts.a), title(&opts.b)),
                ..ExportOptions::default()
            };
            let mut out = open_output(&opts.output)?;
            let r = export::html::write_diff(&fa, &fb, &eopts, &mut out);
            finish(r, &mut out, "cannot write the HTML diff")
        }
        Some(other) => Err(ReportError::UnknownFormat(other.to_string()))
            .context("pkprof diff writes text or --format html"),
    }
}
