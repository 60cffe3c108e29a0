//! How long reading an hour of the store takes (issue 13's goal: `report --store --since 1h` in
//! well under a second): writes WINDOWS windows (default 360, an hour of 10 s windows) of a busy
//! 2-CPU machine at 19 Hz (synthetic: 300 stacks over 1,500 frames each, a dozen patterns) into a temporary
//! store, then times `load_range` of all of them (index, read, checksum, decode, merge).
//!
//! Usage: cargo run --release -p pkprof-agent --example store_hour [WINDOWS]

use std::time::{Duration, Instant};

use pkprof_agent::store::{load_range, Store};
use pkprof_profile::synthetic::synthetic;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(360);
    let dir = std::env::temp_dir().join(format!("pkprof-store-hour-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut st = Store::open(&dir, Duration::from_secs(86400), 1 << 40).expect("store");
    let t0 = 1_700_000_000_000_000_000u64;
    for i in 0..n {
        // The same code runs all hour: windows draw their stacks from a dozen patterns (distinct
        // seeds would make every window's 1,500 frames new, 540,000 in the hour).
        let mut p = synthetic(380, 300, 1500, i % 12);
        p.meta.start_unix_ns = t0 + i * 10_000_000_000;
        p.meta.end_unix_ns = p.meta.start_unix_ns + 10_000_000_000;
        st.write(&p, p.meta.end_unix_ns).expect("write");
    }
    let bytes = st.bytes();
    let start = Instant::now();
    let l = load_range(&dir, t0, t0 + n * 10_000_000_000).expect("load");
    let took = start.elapsed();
    let p = l.profile.expect("windows");
    println!(
        "{} windows ({} KiB): read and merged in {:.0} ms; {} samples, {} stacks, {} frames",
        l.windows,
        bytes >> 10,
        took.as_secs_f64() * 1e3,
        p.total_samples(),
        p.stacks.len(),
        p.frames.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
