//! Everything that can stop collection, each with a one-line message naming the cause and the fix.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum CollectError {
    #[error("permission denied: pkprof needs root, or CAP_BPF + CAP_PERFMON, to load BPF programs (run it with sudo, or `setcap cap_bpf,cap_perfmon+ep` on the binary)")]
    NotPrivileged,
    #[error("this kernel has no BTF at /sys/kernel/btf/vmlinux: pkprof needs a kernel built with CONFIG_DEBUG_INFO_BTF=y")]
    NoKernelBtf,
    #[error("this kernel lacks the tracepoint {0} that pkprof needs (not in {1}); use a kernel that has it (Linux >= 5.5 with CONFIG_TRACEPOINTS)")]
    MissingTracepoint(String, String),
    #[error("the kernel refused to load BPF program {prog}: {reason} (run with -vv to see the verifier log)")]
    Load { prog: String, reason: String },
    #[error("could not attach BPF program {prog} to its tracepoint: {reason}")]
    Attach { prog: String, reason: String },
    #[error("cannot count calls of {spec}: {reason}")]
    Probe { spec: String, reason: String },
    #[error("reading BPF map {map}: {reason}")]
    Read { map: &'static str, reason: String },
}
