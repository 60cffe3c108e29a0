//! A known call chain in Rust for the unwinding tests (tests/unwind.rs), built by the test with
//! `rustc -O -C force-frame-pointers=no`: `unwind_chain_rs::main > outer > middle > inner > hot`,
//! under the standard library's start-up frames (`main > std::rt::lang_start...`).
//! Usage: unwind_chain_rs SECONDS; burns CPU in `hot` for that long, then prints "done".
//! Each function is `#[inline(never)]` and uses its callee's result after the call (through
//! `black_box`), so neither inlining nor a tail call removes a frame.
use std::hint::black_box;
use std::time::{Duration, Instant};

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
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut r = 0;
    while Instant::now() < end {
        r += outer(black_box(300_000));
    }
    println!("done {}", r & 1);
}
