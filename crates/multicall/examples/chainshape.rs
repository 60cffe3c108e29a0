//! Experiment (issue 16): what a batch costs by its chain shape. Per shape (chain lengths),
//! median ns per batch of pread (page-cache file in /var/tmp) and unix sendmsg, through a
//! fixed file and a plain descriptor; a chain of 16 against 16 chains of 1 is what a link
//! costs (docs/design.md, "Measured advice").
//! Usage: `flock /tmp/pkprof-bench.lock target/release/examples/chainshape`
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::time::Instant;

use pkprof_multicall::{Call, MultiCall, Options};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let shapes: Vec<(&str, Vec<usize>)> = vec![
        ("1", vec![1]),
        ("2 chains of 1", vec![1, 1]),
        ("chain of 2", vec![2]),
        ("chain of 3", vec![3]),
        ("3 chains of 1", vec![1, 1, 1]),
        ("chain of 4", vec![4]),
        ("chain of 8", vec![8]),
        ("chain of 16", vec![16]),
        ("16 chains of 1", vec![1; 16]),
        ("8 chains of 2", vec![2; 8]),
        ("2 chains of 8", vec![8, 8]),
        ("5 chains of 3", vec![3; 5]),
        ("32 chains of 1", vec![1; 32]),
        ("48 chains of 1", vec![1; 48]),
        ("16 chains of 3", vec![3; 16]),
        ("chain of 32", vec![32]),
    ];
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open("/var/tmp/chainshape.dat")
        .unwrap();
    std::fs::write("/var/tmp/chainshape.dat", vec![1u8; 1 << 20]).unwrap();
    let _ = std::fs::read("/var/tmp/chainshape.dat");
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut mc = MultiCall::with_options(&Options::new(64).file_slots(4)).unwrap();
    mc.register_files(0, &[f.as_raw_fd(), a.as_raw_fd()])
        .unwrap();
    println!("{}", mc.describe());
    let reps = 400;
    let rounds = 15;
    for op in ["pread", "sendmsg", "pread-unfixed", "sendmsg-unfixed"] {
        let mut res: Vec<Vec<f64>> = vec![Vec::new(); shapes.len()];
        let mut bufs = vec![vec![0u8; 4096]; 48];
        let msg = [7u8; 64];
        let iov = [IoSlice::new(&msg)];
        let mut sink = vec![0u8; 64 * 16 * 64];
        let fixed = !op.ends_with("unfixed");
        for r in 0..rounds + 1 {
            for k in 0..shapes.len() {
                let i = (k + r) % shapes.len();
                let lens = &shapes[i].1;
                let n: usize = lens.iter().sum();
                let mut index = vec![0; lens.len()];
                let mut ns = 0.0;
                for rep in 0..reps {
                    let t = Instant::now();
                    let mut calls: Vec<Call> = Vec::with_capacity(n);
                    if op.starts_with("pread") {
                        for (j, buf) in bufs[..n].iter_mut().enumerate() {
                            let c = if fixed {
                                Call::pread(0, buf, (j * 4096) as u64).fixed()
                            } else {
                                Call::pread(f.as_raw_fd(), buf, (j * 4096) as u64)
                            };
                            calls.push(c);
                        }
                    } else {
                        for _ in 0..n {
                            let c = if fixed {
                                Call::sendmsg(1, &iov, 0).fixed()
                            } else {
                                Call::sendmsg(a.as_raw_fd(), &iov, 0)
                            };
                            calls.push(c);
                        }
                    }
                    mc.run_chains(&mut calls, lens, &mut index).unwrap();
                    ns += t.elapsed().as_nanos() as f64;
                    for c in &calls {
                        assert!(c.result().unwrap() > 0);
                    }
                    drop(calls);
                    if op.starts_with("sendmsg") && rep % 4 == 3 {
                        use std::io::Read;
                        let mut got = 0;
                        let want = 4 * n * 64;
                        while got < want {
                            got += (&b).read(&mut sink[..want - got]).unwrap();
                        }
                    }
                }
                if op.starts_with("sendmsg") {
                    use std::io::Read;
                    let want = (reps % 4) * n * 64;
                    let mut got = 0;
                    while got < want {
                        got += (&b).read(&mut sink[..want - got]).unwrap();
                    }
                }
                if r > 0 {
                    res[i].push(ns / reps as f64);
                }
            }
        }
        println!("== {op}");
        let one = median(res[0].clone());
        for (i, (name, lens)) in shapes.iter().enumerate() {
            let n: usize = lens.iter().sum();
            let m = median(res[i].clone());
            println!(
                "  {name:<16} {m:8.0} ns/batch  {:7.0} ns/op  (batch - 1-op batch) / (ops-1) = {:6.0}",
                m / n as f64,
                if n > 1 { (m - one) / (n - 1) as f64 } else { 0.0 }
            );
        }
    }
    let _ = std::fs::remove_file("/var/tmp/chainshape.dat");
}
