//! How long symbolization takes at the end of a big recording: 100,000 sampled user addresses
//! (3,000 unique, spread over the test binary, libc and the other libraries this test process
//! maps) and 100,000 kernel addresses (2,000 unique). Prints the times; the bounds asserted are
//! loose enough for a debug build on a slow machine. Needs root (map_files, kallsyms).

use std::fs;
use std::time::Instant;

use pkprof_symbolize::{Symbolizer, SymbolizerOptions};

const SAMPLES: usize = 100_000;

/// `n` addresses spread evenly over the executable file mappings of this process.
fn own_code_addresses(n: usize) -> Vec<u64> {
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    let ranges: Vec<(u64, u64)> = maps
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && f[1].contains('x') && f[5].starts_with('/')).then(|| {
                let (s, e) = f[0].split_once('-').unwrap();
                (
                    u64::from_str_radix(s, 16).unwrap(),
                    u64::from_str_radix(e, 16).unwrap(),
                )
            })
        })
        .collect();
    let total: u64 = ranges.iter().map(|(s, e)| e - s).sum();
    let step = total / n as u64;
    let mut out = Vec::new();
    for (s, e) in ranges {
        let mut a = s;
        while a < e && out.len() < n {
            out.push(a);
            a += step;
        }
    }
    out
}

/// `n` kernel text addresses (function starts + 4) from kallsyms.
fn kernel_addresses(n: usize) -> Vec<u64> {
    let text = fs::read_to_string("/proc/kallsyms").unwrap();
    let all: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && matches!(f[1], "t" | "T"))
                .then(|| u64::from_str_radix(f[0], 16).unwrap() + 4)
        })
        .collect();
    let step = (all.len() / n).max(1);
    all.into_iter().step_by(step).take(n).collect()
}

/// Samples drawn from `unique` (each used many times, in a scrambled order).
fn samples(unique: &[u64]) -> Vec<u64> {
    (0..SAMPLES)
        .map(|i| unique[(i * 7919) % unique.len()])
        .collect()
}

fn run(lines: bool) {
    let pid = std::process::id();
    let user_unique = own_code_addresses(3000);
    let kernel_unique = kernel_addresses(2000);
    let user = samples(&user_unique);
    let kernel = samples(&kernel_unique);

    let mut sym = Symbolizer::new(SymbolizerOptions {
        lines,
        ..Default::default()
    });
    let t = Instant::now();
    sym.capture_process(pid).unwrap();
    let capture = t.elapsed();

    let t = Instant::now();
    let frames = sym.symbolize_user(pid, &user);
    let user_time = t.elapsed();
    assert_eq!(frames.len(), SAMPLES);
    let named = frames.iter().filter(|f| f[0].symbolized).count();
    let per_addr = frames.iter().map(Vec::len).sum::<usize>() as f64 / SAMPLES as f64;

    let t = Instant::now();
    let kframes = sym.symbolize_kernel(&kernel);
    let kernel_time = t.elapsed();
    assert_eq!(kframes.len(), SAMPLES);
    let knamed = kframes.iter().filter(|f| f[0].symbolized).count();

    // A second pass hits the caches only.
    let t = Instant::now();
    sym.symbolize_user(pid, &user);
    let again = t.elapsed();

    eprintln!(
        "lines={lines}: capture {capture:?}; user {SAMPLES} addrs / {} unique in {user_time:?} \
         ({named} named, {per_addr:.1} frames each), again {again:?}; kernel {SAMPLES} / {} unique in {kernel_time:?} \
         ({knamed} named); {} files open",
        user_unique.len(),
        kernel_unique.len(),
        sym.open_files(),
    );
    assert!(named > SAMPLES / 2, "only {named} user addresses named");
    assert_eq!(knamed, SAMPLES);
    assert!(user_time.as_secs() < 30 && kernel_time.as_secs() < 30);
}

#[test]
#[ignore = "needs root"]
fn hundred_thousand_addresses() {
    run(false);
}

#[test]
#[ignore = "needs root"]
fn hundred_thousand_addresses_with_lines() {
    run(true);
}
