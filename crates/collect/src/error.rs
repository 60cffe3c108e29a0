//! Everything that can stop collection, each with a one-line message naming the cause and the fix.
//!
//! Errors that wrap a lower-level failure (libbpf, the OS) keep it as their `source`: the message
//! itself never repeats it, so a caller printing the chain (`pkprof: what: cause`) says each part
//! once, and one that wants the cause can downcast it.

use thiserror::Error;

/// The lower-level failure behind a `CollectError`: a libbpf error, an OS error, or a record
/// whose bytes do not match its type.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, Error)]
pub enum CollectError {
    #[error("permission denied: pkprof needs root, or CAP_BPF + CAP_PERFMON, to load BPF programs (run it with sudo, or `setcap cap_bpf,cap_perfmon+ep` on the binary)")]
    NotPrivileged,
    #[error("this kernel has no BTF at /sys/kernel/btf/vmlinux: pkprof needs a kernel built with CONFIG_DEBUG_INFO_BTF=y")]
    NoKernelBtf,
    #[error("this kernel lacks the tracepoint {0} that pkprof needs (not in {1}); use a kernel that has it (Linux >= 5.5 with CONFIG_TRACEPOINTS)")]
    MissingTracepoint(String, String),
    /// `hint` says what the cause likely means ("the verifier rejected it"), or is empty.
    #[error("the kernel refused to load BPF program {prog}{hint} (run with -vv to see the verifier log)")]
    Load {
        prog: String,
        hint: &'static str,
        #[source]
        source: Cause,
    },
    /// `to`: what the program was to be attached to ("its tracepoint", a CPU's sampling event).
    #[error("could not attach BPF program {prog} to {to}")]
    Attach {
        prog: String,
        to: String,
        #[source]
        source: Cause,
    },
    /// `what` says which step failed; `source`, when there is one worth showing, why.
    #[error("cannot count calls of {spec}: {what}")]
    Probe {
        spec: String,
        what: String,
        #[source]
        source: Option<Cause>,
    },
    /// `way`: where the user stacks were asked to be taken; `why`: what this kernel lacks, or
    /// that it refused the way's program (`source`).
    #[error("off-CPU user stacks cannot be taken {way} on this kernel: {why} (--off-cpu-user-stacks auto picks the best way it offers)")]
    OffCpuUserStacks {
        way: &'static str,
        why: &'static str,
        #[source]
        source: Option<Box<CollectError>>,
    },
    #[error("reading BPF map {map}")]
    Read {
        map: &'static str,
        #[source]
        source: Cause,
    },
}

/// A record of a map or ring whose bytes do not hold its type (pkprof.h and the Rust side
/// disagree: a bug, reported rather than misread).
#[derive(Debug, Error)]
#[error("{bytes} bytes do not hold a {ty} ({size} bytes)")]
pub struct LayoutMismatch {
    pub ty: &'static str,
    pub bytes: usize,
    pub size: usize,
}

impl CollectError {
    /// A failed read of map `map`.
    pub(crate) fn read(map: &'static str, source: impl Into<Cause>) -> Self {
        CollectError::Read {
            map,
            source: source.into(),
        }
    }

    /// The `Read` error maker for `map_err` on a libbpf call.
    pub(crate) fn reading(map: &'static str) -> impl Fn(libbpf_rs::Error) -> CollectError {
        move |e| CollectError::read(map, e)
    }

    /// A failed attach of program `prog` to `to`.
    pub(crate) fn attach(
        prog: impl Into<String>,
        to: impl Into<String>,
        source: impl Into<Cause>,
    ) -> Self {
        CollectError::Attach {
            prog: prog.into(),
            to: to.into(),
            source: source.into(),
        }
    }
}
