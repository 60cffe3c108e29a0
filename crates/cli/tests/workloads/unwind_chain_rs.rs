//! A known call chain in Rust for the unwinding tests (tests/unwind.rs), built by the test with
//! `rustc -O -C force-frame-pointers=no`: `unwind_chain_rs::main > outer > middle > inner > hot`,
//! under the standard library's start-up frames (`main > std::rt::lang_start...`).
//! Usage: unwind_chain_rs SECONDS; burns that much CPU time in `hot`, then prints "done".
//! Each function is `#[inline(never)]` and uses its callee's result after the call (through
//! `black_box`), so neither inlining nor a tail call removes a frame.
use std::hint::black_box;

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// The process's CPU time (CLOCK_PROCESS_CPUTIME_ID), seconds: the number of samples does not
/// depend on how busy the machine is. (A single file built by rustc alone: no libc crate.)
fn cpu_secs() -> f64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes the struct we pass, laid out as the C timespec on x86_64.
    unsafe { clock_gettime(2, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 / 1e9
}

#[inline(never)]
fn hot(n: u64) -> u64 {
    let mut x = black_box(1u64);
    for _ in 0..n {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
    }
    x & 1
}

#[inline(never)]
fn inner(n: u64) -> u64 {
    black_box(hot(n)) + 1
}

#[inline(never)]
fn middle(n: u64) -> u64 {
    black_box(inner(n)) + 1
}

#[inline(never)]
fn outer(n: u64) -> u64 {
    black_box(middle(n)) + 1
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("usage: unwind_chain_rs SECONDS");
    let end = cpu_secs() + secs;
    let mut r = 0;
    while cpu_secs() < end {
        r += outer(black_box(300_000));
    }
    println!("done {}", r & 1);
}
