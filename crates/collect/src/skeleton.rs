//! The one path from a libbpf-cargo skeleton to running programs, shared by the accounting
//! collector (`loader`) and the syscall-graph tracer: open into storage that lives as long as the
//! process, configure (read-only data, map sizes, which programs load), load, prepare the loaded
//! maps, then attach the programs the caller names by their typed skeleton handles, one at a
//! time, so that a failure names the program. Every failure is a `CollectError` that keeps
//! libbpf's error as its source; libbpf's own messages go to `tracing` (shown with -vv).

use std::mem::MaybeUninit;
use std::sync::Mutex;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, OpenObject, PrintLevel, ProgramMut};

use crate::error::CollectError;

/// The program libbpf last reported as failing to load, to name it in the error.
static LAST_FAILED_PROG: Mutex<Option<String>> = Mutex::new(None);

fn libbpf_log(level: PrintLevel, msg: String) {
    let msg = msg.trim_end();
    if let Some(rest) = msg.strip_prefix("libbpf: prog '") {
        if let (Some(end), true) = (rest.find('\''), msg.contains("failed to load")) {
            if let Ok(mut last) = LAST_FAILED_PROG.lock() {
                *last = Some(rest[..end].to_string());
            }
        }
    }
    match level {
        PrintLevel::Warn => tracing::debug!(target: "libbpf", "{msg}"),
        PrintLevel::Info => tracing::debug!(target: "libbpf", "{msg}"),
        PrintLevel::Debug => tracing::trace!(target: "libbpf", "{msg}"),
    }
}

/// A failed open, configuration or load of `object`, naming the program libbpf reported as
/// failing (else the object), with what the error likely means.
fn load_error(e: libbpf_rs::Error, object: &str) -> CollectError {
    let prog = LAST_FAILED_PROG
        .lock()
        .ok()
        .and_then(|mut p| p.take())
        .unwrap_or_else(|| object.into());
    let hint = match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => ": the verifier rejected it",
        _ if e.to_string().contains("Operation not permitted") => {
            ": is the kernel locked down, or are BPF capabilities missing?"
        }
        _ => "",
    };
    CollectError::Load {
        prog,
        hint,
        source: e.into(),
    }
}

/// The programs of a skeleton by what attaches them: `start` attaches `tracepoints`; the caller
/// attaches `elsewhere` (perf events, uprobes) after `start`. A loaded program in neither list is
/// an error: a program added to the BPF side but to no list would silently never run.
pub(crate) struct AttachPlan<'a> {
    pub tracepoints: Vec<&'a ProgramMut<'static>>,
    pub elsewhere: Vec<&'a ProgramMut<'static>>,
}

/// Opens, configures, loads and attaches the skeleton built by `builder` (object `object`, for
/// errors). `configure` sets the open skeleton's read-only data, map sizes and autoload flags;
/// `prepare` fills the loaded skeleton's maps before anything runs; `attach` sorts the programs
/// (those `configure` did not load are skipped). Returns the
/// skeleton and its links (dropping them detaches); on failure the links already made are
/// dropped: no partial attach is left behind.
pub(crate) fn start<B, S>(
    object: &'static str,
    builder: B,
    configure: impl FnOnce(&mut B::Output) -> Result<(), libbpf_rs::Error>,
    prepare: impl FnOnce(&mut S) -> Result<(), CollectError>,
    attach: impl for<'a> FnOnce(&'a S) -> AttachPlan<'a>,
) -> Result<(S, Vec<Link>), CollectError>
where
    B: SkelBuilder<'static>,
    B::Output: OpenSkel<'static, Output = S>,
    S: Skel<'static>,
{
    libbpf_rs::set_print(Some((PrintLevel::Debug, libbpf_log)));
    // The skeleton borrows its object storage for as long as it lives; a skeleton lives until
    // the process exits, so the storage is leaked once per skeleton.
    let storage: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
    let mut open = builder.open(storage).map_err(|e| load_error(e, object))?;
    configure(&mut open).map_err(|e| load_error(e, object))?;
    let mut skel = open.load().map_err(|e| load_error(e, object))?;
    prepare(&mut skel)?;
    let plan = attach(&skel);
    let listed = |name: &std::ffi::OsStr| {
        (plan.tracepoints.iter())
            .chain(&plan.elsewhere)
            .any(|p| p.name() == name)
    };
    if let Some(prog) = (skel.object().progs()).find(|p| p.autoload() && !listed(p.name())) {
        return Err(CollectError::attach(
            prog.name().to_string_lossy(),
            "anything",
            format!("the {object} loader lists no attach point for it"),
        ));
    }
    let links = (plan.tracepoints.into_iter())
        .filter(|prog| prog.autoload())
        .map(|prog| {
            prog.attach().map_err(|e| {
                CollectError::attach(prog.name().to_string_lossy(), "its tracepoint", e)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((skel, links))
}

/// Possible CPUs (the size of per-CPU maps), as a load step.
pub(crate) fn possible_cpus(object: &'static str) -> Result<usize, CollectError> {
    libbpf_rs::num_possible_cpus().map_err(|e| load_error(e, object))
}
