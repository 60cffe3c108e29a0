//! Writes a synthetic profile file for benchmarks:
//! `cargo run --release -p pkprof-profile --example synthetic -- OUT SAMPLE_GROUPS STACKS FRAMES [SEED]`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| -> Option<u64> {
        args.get(i).map_or(Some(default), |v| v.parse().ok())
    };
    let (Some(out), Some(samples), Some(stacks), Some(frames), Some(seed)) = (
        args.first(),
        num(1, 1_000_000),
        num(2, 50_000),
        num(3, 5_000),
        num(4, 1),
    ) else {
        eprintln!("usage: synthetic OUT [SAMPLE_GROUPS STACKS FRAMES SEED]");
        return ExitCode::from(2);
    };
    let p = pkprof_profile::synthetic::synthetic(samples, stacks as u32, frames as u32, seed);
    if let Err(e) = pkprof_profile::save(&p, std::path::Path::new(out)) {
        eprintln!("synthetic: {e}");
        return ExitCode::FAILURE;
    }
    println!(
        "{out}: {} sample groups, {} samples, {} stacks, {} frames",
        p.samples.len(),
        p.total_samples(),
        p.stacks.len(),
        p.frames.len()
    );
    ExitCode::SUCCESS
}
