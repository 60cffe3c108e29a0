//! What converting and gzipping one window costs the caller of `Pusher::push` (the agent's thread):
//! `cargo run --release -p pkprof-otlp --example encode_cost -- FILE...` prints, per profile, its
//! sample groups, the request's size and the median of 20 encodings.

use std::time::Instant;

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: encode_cost PROFILE...");
        std::process::exit(2);
    }
    for f in files {
        let p = match pkprof_profile::load(std::path::Path::new(&f)) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("encode_cost: cannot read {f}: {e}");
                std::process::exit(1);
            }
        };
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..20 {
            let t = Instant::now();
            size = pkprof_otlp::encode(&p, &Default::default()).len();
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        if std::env::var_os("PARTS").is_some() {
            use prost::Message;
            let t = Instant::now();
            let r = pkprof_otlp::to_request(&p, &Default::default());
            let conv = t.elapsed();
            let t = Instant::now();
            let raw = r.encode_to_vec();
            eprintln!(
                "convert {conv:?}, protobuf {:?} ({} bytes)",
                t.elapsed(),
                raw.len()
            );
        }
        println!(
            "{f}: {} sample groups, {} stacks, {} processes -> {size} bytes gzip, {:.2} ms median ({:.2} .. {:.2})",
            p.samples.len(),
            p.stacks.len(),
            p.processes.len(),
            times[10],
            times[0],
            times[19]
        );
    }
}
