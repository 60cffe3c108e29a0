//! pkprof's own cost: CPU time (exact, from getrusage) and resident memory.

use pkprof_accounting::interval::SelfUsage;

/// Measures pkprof's CPU between successive calls.
pub struct SelfMeter {
    last_cpu_ns: u64,
    last_mono_ns: u64,
}

pub fn own_cpu_ns() -> u64 {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Bytes the allocator has handed out and not had back (glibc's `mallinfo2`: its arenas' bytes
/// in use plus its own mappings of large blocks). Set beside the resident size, it tells a leak
/// (this grows) from memory the allocator holds free but cannot return (only the RSS grows).
pub(crate) fn heap_in_use_bytes() -> u64 {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as u64
}

pub(crate) fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

impl SelfMeter {
    pub fn new(mono_ns: u64) -> Self {
        SelfMeter {
            last_cpu_ns: own_cpu_ns(),
            last_mono_ns: mono_ns,
        }
    }

    pub fn sample(&mut self, mono_ns: u64) -> SelfUsage {
        let cpu = own_cpu_ns();
        let dt = mono_ns.saturating_sub(self.last_mono_ns).max(1);
        let pct = cpu.saturating_sub(self.last_cpu_ns) as f64 * 100.0 / dt as f64;
        self.last_cpu_ns = cpu;
        self.last_mono_ns = mono_ns;
        SelfUsage {
            cpu_pct: pct,
            rss_bytes: rss_bytes(),
        }
    }
}
