//! Plain options of `pkprof record`, converted from the command line (cli.rs).

use std::path::PathBuf;
use std::time::Duration;

use pkprof_collect::FuncProbe;

/// Default sampling frequency per CPU. 99 Hz, as bpftrace's and BCC's profilers use: prime to the
/// 250 Hz tick and to the 100 Hz / 1 kHz timers of common workloads, so periodic work does not
/// alias with the sampler, and cheap enough to leave on system-wide (~200 samples/s on 2 CPUs).
pub const DEFAULT_FREQUENCY_HZ: u64 = 99;

/// Where the profile goes when `-o` is not given.
pub const DEFAULT_OUTPUT: &str = "pkprof.data";

/// What to profile.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// Run this command, follow its children, stop when it exits.
    Command(Vec<String>),
    Pids(Vec<u32>),
    Cgroup(PathBuf),
    System,
}

#[derive(Clone, Debug)]
pub struct RecordOptions {
    pub target: Target,
    pub duration: Option<Duration>,
    pub frequency_hz: u64,
    pub output: PathBuf,
    pub syscalls: bool,
    pub probes: Vec<FuncProbe>,
    /// DWARF file:line and inlined frames.
    pub lines: bool,
    /// Splice CPython frames into the stacks of Python processes (docs/design.md, "Python frames").
    pub python: bool,
    pub bpf_stats: bool,
    pub max_threads: u32,
    /// Capacity of the kernel's set of target processes alive at once.
    pub max_targets: u32,
    pub max_tags: u32,
    pub tag_expire: Duration,
    /// Ring buffer size in MiB (None: sized by `ring_bytes`).
    pub ring_mib: Option<u32>,
    /// User stack bytes copied per sample for unwinding (0: frame pointers only).
    pub stack_bytes: u32,
    /// Memory for unwind tables, MiB.
    pub unwind_memory_mib: u32,
    /// Entries in the end-of-run summary.
    pub summary_rows: usize,
    /// `--by client`: a server's samples carry the client it serves.
    pub by_client: bool,
    /// `--off-cpu`.
    pub off_cpu: Option<pkprof_collect::OffCpuConfig>,
}

/// Bytes of the sample ring buffer: `ring_mib` when given, else room for a quarter second of
/// samples at the rate (each up to a record plus `stack_bytes`), so that the reader, which polls
/// every 50 ms, keeps up without losses; between 8 and 256 MiB; a power of two.
pub fn ring_bytes(ring_mib: Option<u32>, frequency_hz: u64, cpus: u64, stack_bytes: u32) -> u32 {
    // struct pkprof_sample, rounded up to 256 bytes.
    const RECORD: u64 = (pkprof_collect::record::SAMPLE_RECORD_BYTES as u64).next_multiple_of(256);
    let bytes = match ring_mib {
        Some(mib) => u64::from(mib) << 20,
        None => {
            (frequency_hz * cpus * (RECORD + u64::from(stack_bytes)) / 4).clamp(8 << 20, 256 << 20)
        }
    };
    bytes.next_power_of_two().min(1 << 30) as u32
}

/// Parses `FUNC@BINARY`.
pub fn parse_probe(spec: &str) -> Result<FuncProbe, String> {
    let (func, bin) = spec
        .rsplit_once('@')
        .ok_or_else(|| format!("{spec:?} is not FUNC@BINARY"))?;
    if func.is_empty() || bin.is_empty() {
        return Err(format!("{spec:?} is not FUNC@BINARY"));
    }
    Ok(FuncProbe {
        function: func.to_string(),
        binary: PathBuf::from(bin),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_holds_a_quarter_second_of_samples() {
        // 99 Hz on 2 CPUs with 16 KiB stacks: 0.9 MB a quarter second, so the 8 MiB floor.
        assert_eq!(ring_bytes(None, 99, 2, 16384), 8 << 20);
        // 9999 Hz on 2 CPUs: 93 MB a quarter second -> 128 MiB.
        assert_eq!(ring_bytes(None, 9999, 2, 16384), 128 << 20);
        assert_eq!(ring_bytes(None, 100_000, 64, 65536), 256 << 20);
        assert_eq!(ring_bytes(Some(3), 9999, 2, 16384), 4 << 20);
    }

    #[test]
    fn probes() {
        let p = parse_probe("malloc@/lib/x86_64-linux-gnu/libc.so.6").unwrap();
        assert_eq!(p.function, "malloc");
        assert_eq!(p.binary, PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(parse_probe("malloc").is_err());
        assert!(parse_probe("@/bin/ls").is_err());
        assert!(parse_probe("f@").is_err());
    }
}
