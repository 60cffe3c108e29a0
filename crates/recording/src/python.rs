//! CPython frames in the recording (docs/design.md, "Python frames"): which sampled processes run
//! a CPython pkprof can walk (found once, at their first sample, and handed to the kernel side),
//! the naming of each sample's raw Python frames from the process's memory while it lives, the
//! counts of how the walks ended, and the splice of the named frames into the native stack at
//! assembly: each run of Python frames replaces the interpreter-loop frame that ran it.

use std::collections::HashMap;

use pkprof_attribution::{PyRawFrame, PyWalk};
use pkprof_profile::{Frame, FrameKind};
pub use pkprof_symbolize::python::{CodeInfo, PyDetect, PyLayout, PyOffsets};

/// The native function one run of the evaluation loop is (3.11 to 3.13).
pub const EVAL_LOOP: &str = "_PyEval_EvalFrameDefault";

/// A named Python frame of a raw stack: an index into the aggregate's Python frames, and whether
/// it began a run of the evaluation loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PyFrameRef {
    pub id: u32,
    pub entry: bool,
}

/// How the Python side of the samples went, for the profile's warnings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonStats {
    /// Samples of Python processes, by how their frame walk ended.
    pub walks: HashMap<PyWalk, u64>,
    /// Samples with a frame whose code object could not be read (the process exited mid-way, a
    /// corrupt pointer): that frame is named `[unreadable Python code]`.
    pub unnamed: u64,
    /// Samples whose Python runs did not match the native stack's interpreter-loop frames one
    /// for one (native stack truncated...): spliced from the innermost run outwards.
    pub unmatched: u64,
    /// Processes found running CPython, and those with a version pkprof has no offsets for:
    /// one line each (`pid 123: python3.10 3.10.13`).
    pub found: Vec<String>,
    pub unsupported: Vec<String>,
}

/// Per-recording Python state: the processes' layouts and the frames named so far.
pub struct Python {
    /// Look for CPython at all (`record --no-python`: no).
    pub enabled: bool,
    layouts: HashMap<u32, Option<PyLayout>>,
    /// Processes found not Python, with their captured maps' generation then: a process whose
    /// first sample came before ld.so mapped its libpython is looked at again once its maps
    /// change (`look_again`).
    not_python: HashMap<u32, u64>,
    codes: HashMap<(u32, u64), Option<CodeInfo>>,
    pub stats: PythonStats,
    /// Name frames with their source line (`record --lines`).
    pub lines: bool,
}

impl Default for Python {
    fn default() -> Self {
        Python {
            enabled: true,
            layouts: HashMap::new(),
            not_python: HashMap::new(),
            codes: HashMap::new(),
            stats: PythonStats::default(),
            lines: false,
        }
    }
}

/// Adds `line` unless it is there: a process is looked at again after its exec record, which the
/// ring may deliver after samples of the new image had it detected already (the same image found
/// twice is one line).
fn said_once(lines: &mut Vec<String>, line: String) {
    if !lines.contains(&line) {
        lines.push(line);
    }
}

impl Python {
    /// Remembers what `detect` found for `pid` with its maps at `generation`; returns the
    /// layout to hand to the kernel side.
    pub fn found(&mut self, pid: u32, d: PyDetect, generation: Option<u64>) -> Option<&PyLayout> {
        self.not_python.remove(&pid);
        let layout = match d {
            PyDetect::NotPython => {
                if let Some(g) = generation {
                    self.not_python.insert(pid, g);
                }
                None
            }
            PyDetect::Unsupported { version, binary } => {
                said_once(
                    &mut self.stats.unsupported,
                    format!("pid {pid}: {binary} {version}"),
                );
                None
            }
            PyDetect::Found(l) => {
                said_once(
                    &mut self.stats.found,
                    format!("pid {pid}: {} {}", l.binary, l.version_string()),
                );
                Some(l)
            }
        };
        self.layouts.insert(pid, layout);
        self.layouts.get(&pid).and_then(Option::as_ref)
    }

    /// Forgets an exited process: its layout and named code objects (its PID may come back as
    /// another process, another interpreter).
    pub fn forget(&mut self, pid: u32) {
        self.layouts.remove(&pid);
        self.not_python.remove(&pid);
        self.codes.retain(|(p, _), _| *p != pid);
    }

    /// Whether `pid` was looked at already.
    pub fn known(&self, pid: u32) -> bool {
        self.layouts.contains_key(&pid)
    }

    /// Whether `pid`, found not Python, has other maps now (`generation`): code mapped since,
    /// such as the libpython that ld.so maps after the exec, may make it one.
    pub fn look_again(&self, pid: u32, generation: Option<u64>) -> bool {
        matches!((self.not_python.get(&pid), generation), (Some(then), Some(now)) if *then != now)
    }

    pub fn layout(&self, pid: u32) -> Option<&PyLayout> {
        self.layouts.get(&pid).and_then(Option::as_ref)
    }

    /// The frame of a raw Python frame whose code object reads as `code`.
    pub fn frame(&self, code: &CodeInfo, raw: &PyRawFrame) -> Frame {
        let line = if self.lines {
            code.line(raw.instr)
        } else {
            None
        };
        Frame {
            kind: FrameKind::Python,
            name: pkprof_symbolize::python::frame_name(&code.filename, &code.qualname),
            module: code.filename.clone(),
            offset: u64::from(code.firstlineno),
            symbolized: true,
            file: self.lines.then(|| code.filename.clone()),
            line,
            inlined: false,
            build_id: String::new(),
        }
    }

    /// The code object at `addr` of `pid`, read through `read` once and kept (None: unreadable,
    /// remembered too). A code object lives as long as its function (module code for the
    /// program's life), so an address names the same code while sampled; one freed and replaced
    /// at the same address mid-recording would keep the first name (as in py-spy's cache).
    pub fn code(
        &mut self,
        pid: u32,
        addr: u64,
        read: impl FnOnce(&PyOffsets) -> Option<CodeInfo>,
    ) -> Option<&CodeInfo> {
        let layout = self.layouts.get(&pid)?.as_ref()?;
        if !self.codes.contains_key(&(pid, addr)) {
            let info = read(&layout.offsets);
            if self.codes.len() >= MAX_CODES {
                self.codes.clear();
            }
            self.codes.insert((pid, addr), info);
        }
        self.codes.get(&(pid, addr)).and_then(Option::as_ref)
    }
}

/// The frame of a Python frame whose code object could not be read.
pub fn unreadable_frame() -> Frame {
    Frame {
        kind: FrameKind::Python,
        name: "[unreadable Python code]".into(),
        module: "[python]".into(),
        symbolized: false,
        ..Frame::default()
    }
}

/// Most code objects kept (a bounded table: beyond it, it starts again).
const MAX_CODES: usize = 1 << 16;

/// Splices Python frames into a user stack (both root first): `native` the user frames with
/// `is_eval` telling the interpreter-loop ones, `python` the named Python frames leaf first.
/// The Python frames are cut into runs, each ending (outwards) at an entry frame; the k-th
/// interpreter-loop frame from the leaf is replaced by the k-th run from the leaf. Runs beyond
/// the loop frames (a native stack cut short) go where the outermost loop frame was, or at the
/// root when the native stack shows none; returns whether runs and loop frames matched one for one.
pub fn splice<F: Copy>(
    native: &[F],
    is_eval: impl Fn(F) -> bool,
    python: &[(F, bool)],
    out: &mut Vec<F>,
) -> bool {
    // Runs, innermost first, each root first.
    let mut runs: Vec<Vec<F>> = Vec::new();
    let mut run = Vec::new();
    for (f, entry) in python {
        run.push(*f);
        if *entry {
            run.reverse();
            runs.push(std::mem::take(&mut run));
        }
    }
    if !run.is_empty() {
        run.reverse();
        runs.push(run);
    }
    let evals: Vec<usize> = (0..native.len()).filter(|&i| is_eval(native[i])).collect();
    let matched = evals.len() == runs.len();
    // evals root first; runs innermost first: pair the innermost loop frame with run 0.
    let mut replace: HashMap<usize, Vec<F>> = HashMap::new();
    let paired = evals.len().min(runs.len());
    for k in 0..paired {
        replace.insert(evals[evals.len() - 1 - k], std::mem::take(&mut runs[k]));
    }
    // The outer runs left over, root first.
    let mut extra: Vec<F> = Vec::new();
    for r in runs[paired..].iter().rev() {
        extra.extend_from_slice(r);
    }
    let outermost = if paired > 0 {
        Some(evals[evals.len() - paired])
    } else {
        None
    };
    if outermost.is_none() {
        out.extend_from_slice(&extra);
    }
    for (i, f) in native.iter().enumerate() {
        if Some(i) == outermost {
            out.extend_from_slice(&extra);
        }
        match replace.get(&i) {
            Some(run) => out.extend_from_slice(run),
            None => out.push(*f),
        }
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::{splice, PyDetect, Python};

    /// A process detected again after its exec record (the same image) is said once; another
    /// process of the same binary has its own line.
    #[test]
    fn an_image_found_twice_is_said_once() {
        let mut py = Python::default();
        let unsupported = || PyDetect::Unsupported {
            version: "3.10".into(),
            binary: "libpython3.10.so.1.0".into(),
        };
        py.found(7, unsupported(), None);
        py.forget(7); // the exec record, read after samples of the new image
        py.found(7, unsupported(), None);
        py.found(8, unsupported(), None);
        assert_eq!(
            py.stats.unsupported,
            [
                "pid 7: libpython3.10.so.1.0 3.10",
                "pid 8: libpython3.10.so.1.0 3.10"
            ]
        );
    }

    /// Native frames are numbers, the loop frames 100+; Python frames letters as numbers 200+.
    fn run(native: &[u32], python: &[(u32, bool)]) -> (Vec<u32>, bool) {
        let mut out = Vec::new();
        let ok = splice(native, |f| (100..200).contains(&f), python, &mut out);
        (out, ok)
    }

    #[test]
    fn each_loop_frame_gets_its_run() {
        // main > 100 (runs <module>=201 > pack=202) > zlib_compress=5 > 101 (runs cb=203) > leaf=6
        let (out, ok) = run(
            &[1, 100, 5, 101, 6],
            &[(203, true), (202, false), (201, true)],
        );
        assert!(ok);
        assert_eq!(out, vec![1, 201, 202, 5, 203, 6]);
    }

    #[test]
    fn leftover_runs_go_to_the_outermost_loop_frame() {
        // The native stack was cut above the first loop: two runs, one loop frame.
        let (out, ok) = run(&[100, 6], &[(202, true), (201, true)]);
        assert!(!ok);
        assert_eq!(out, vec![201, 202, 6]);
        // No loop frame at all: the Python frames go at the root.
        let (out, ok) = run(&[6], &[(202, false), (201, true)]);
        assert!(!ok);
        assert_eq!(out, vec![201, 202, 6]);
    }

    #[test]
    fn no_python_leaves_the_stack_alone() {
        let (out, ok) = run(&[1, 2, 3], &[]);
        assert!(ok);
        assert_eq!(out, vec![1, 2, 3]);
    }
}
