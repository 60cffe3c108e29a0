//! The clock pkprof's kernel side stamps with (`bpf_ktime_get_ns` is CLOCK_MONOTONIC), read from
//! user space: attach time, snapshot time, and the stamps the CLI compares with them.

/// CLOCK_MONOTONIC now, in ns: the clock of every stamp the BPF programs write.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
