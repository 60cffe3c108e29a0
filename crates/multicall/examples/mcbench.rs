//! The multi-call workloads of issue 16, each as a plain loop, its multi-call versions and the
//! best single-call replacement, measured side by side in one process (README, "Where a
//! multi-call wins"; driven by `bench/multicall.sh`).
//!
//! Usage: `mcbench WORKLOAD [--rounds R] [--iters N] [--batch K] [--files F] [--only MODE]`
//! Workloads: `files` (openat/read/close per small file), `sock` (recvmsg+sendmsg per request,
//! unix or `--tcp`), `pingpong` (one request in flight, a client thread), `pipe` (a relay between two pipes), `copy` (the paper's 4 KiB copy). Every round runs every mode once, in an order rotated per round, each
//! for N units; printed per mode: median wall and CPU ns per unit, kernel crossings per unit
//! (counted: `io_uring_enter`s by the library, plain calls by construction; bench/multicall.sh
//! checks them with `perf stat -e raw_syscalls:sys_enter`) and the median of the per-round
//! paired savings against the first mode (the plain loop). CPU time is getrusage(RUSAGE_SELF):
//! it includes io-wq workers and the SQPOLL thread, which are threads of the process.
//! `--only MODE` runs one mode (for counting its system calls from outside).

use std::ffi::CString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use pkprof_multicall::{Call, MultiCall, Options};

type Unit = Box<dyn FnMut() -> u64>;

/// SQPOLL threads sleep this soon after their mode's units, so they do not burn a CPU while the
/// other modes are measured.
const SQPOLL_IDLE_MS: u32 = 2;

struct Mode {
    name: String,
    run: Unit,
}

fn mode(name: impl Into<String>, run: impl FnMut() -> u64 + 'static) -> Mode {
    Mode {
        name: name.into(),
        run: Box::new(run),
    }
}

struct Args {
    workload: String,
    rounds: usize,
    iters: usize,
    batch: usize,
    files: usize,
    size: usize,
    tcp: bool,
    only: Option<String>,
    dst_null: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        workload: String::new(),
        rounds: 11,
        iters: 0,
        batch: 16,
        files: 10_000,
        size: 1024,
        tcp: false,
        only: None,
        dst_null: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = |what: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| fail(&format!("{what} needs a number")))
        };
        match arg.as_str() {
            "--rounds" => a.rounds = num("--rounds"),
            "--iters" => a.iters = num("--iters"),
            "--batch" => a.batch = num("--batch"),
            "--files" => a.files = num("--files"),
            "--size" => a.size = num("--size"),
            "--tcp" => a.tcp = true,
            "--null" => a.dst_null = true,
            "--only" => a.only = it.next(),
            w if !w.starts_with('-') && a.workload.is_empty() => a.workload = w.to_string(),
            other => fail(&format!("unknown argument {other}")),
        }
    }
    if a.workload.is_empty() {
        fail("usage: mcbench files|sock|pingpong|pipe|copy [--rounds R] [--iters N] [--batch K] [--files F] [--size B] [--tcp] [--null] [--only MODE]");
    }
    if a.batch == 0 || a.batch > 1024 {
        fail("--batch must be 1..=1024");
    }
    a
}

fn fail(msg: &str) -> ! {
    eprintln!("mcbench: {msg}");
    std::process::exit(2)
}

fn cpu_now() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Waits until the SQPOLL threads of earlier modes are asleep: their run time no longer
/// advances over 25 ms (at most a second). A polling thread still spinning when a mode's clock
/// starts is counted in that mode's CPU (`getrusage` sums the process's threads): the idle time is
/// rounded up to whole jiffies (4 ms at 250 Hz, 10 ms at 100 Hz), so a fixed 6 ms sleep after the
/// SQPOLL mode left the plain loop that follows it billed for the spin. 25 ms spans at least two
/// ticks at 100 Hz, which a spinning thread's run time (updated at ticks and switches) and the
/// 10 ms clock ticks of the `stat` fallback both show.
fn sqpoll_asleep() {
    let gap = Duration::from_millis(25);
    let mut before = MultiCall::sqpoll_cpu();
    for _ in 0..40 {
        std::thread::sleep(gap);
        let now = MultiCall::sqpoll_cpu();
        if now == before {
            return;
        }
        before = now;
    }
}

fn check(r: isize, what: &str) -> isize {
    if r < 0 {
        fail(&format!("{what}: {}", std::io::Error::last_os_error()));
    }
    r
}

/// Runs every mode `rounds` times, interleaved, `iters` units each; prints the table.
fn measure(title: &str, unit: &str, mut modes: Vec<Mode>, args: &Args, iters: usize) {
    if let Some(only) = &args.only {
        modes.retain(|m| &m.name == only);
        if modes.is_empty() {
            fail(&format!("--only {only}: no such mode"));
        }
    }
    let n = modes.len();
    // Warm-up: one unit of each mode (page cache, ring set-up, lazy allocation).
    for m in &mut modes {
        (m.run)();
    }
    // [mode][round] = (wall ns/unit, cpu ns/unit, crossings/unit)
    let mut res = vec![Vec::new(); n];
    let mut sqpoll = vec![Vec::new(); n];
    for r in 0..args.rounds {
        for k in 0..n {
            let i = (r + k) % n;
            let m = &mut modes[i];
            sqpoll_asleep();
            let sq0 = MultiCall::sqpoll_cpu().unwrap_or_default();
            let (c0, t0) = (cpu_now(), Instant::now());
            let mut crossings = 0;
            for _ in 0..iters {
                crossings += (m.run)();
            }
            let wall = t0.elapsed().as_nanos() as f64 / iters as f64;
            let cpu = (cpu_now() - c0).as_nanos() as f64 / iters as f64;
            let sq = MultiCall::sqpoll_cpu()
                .unwrap_or_default()
                .saturating_sub(sq0)
                .as_nanos() as f64;
            res[i].push((wall, cpu, crossings as f64 / iters as f64));
            sqpoll[i].push(sq / iters as f64);
        }
    }
    if args.only.is_some() {
        return;
    }
    println!("== {title}");
    println!(
        "   {} rounds x {iters} units per mode; unit = {unit}; savings vs {} = median over rounds of (plain - mode) / plain [p25, p75]",
        args.rounds, modes[0].name
    );
    println!(
        "   {:<34} {:>11} {:>11} {:>10} {:>22} {:>22}",
        "mode", "wall ns", "cpu ns", "crossings", "wall saving", "cpu saving"
    );
    for i in 0..n {
        let med = |f: fn(&(f64, f64, f64)) -> f64| median(res[i].iter().map(f).collect());
        let sq = median(sqpoll[i].clone());
        let saving = |f: fn(&(f64, f64, f64)) -> f64| {
            let v: Vec<f64> = (0..args.rounds)
                .map(|r| 100.0 * (f(&res[0][r]) - f(&res[i][r])) / f(&res[0][r]))
                .collect();
            format!(
                "{:+6.1}% [{:+5.1},{:+5.1}]",
                median(v.clone()),
                quantile(v.clone(), 0.25),
                quantile(v, 0.75)
            )
        };
        println!(
            "   {:<34} {:>11.0} {:>11.0} {:>10.2} {:>22} {:>22}{}",
            modes[i].name,
            med(|x| x.0),
            med(|x| x.1),
            med(|x| x.2),
            if i == 0 {
                String::new()
            } else {
                saving(|x| x.0)
            },
            if i == 0 {
                String::new()
            } else {
                saving(|x| x.1)
            },
            if sq > 0.0 {
                format!("  (SQPOLL thread: {sq:.0} ns of the cpu)")
            } else {
                String::new()
            },
        );
        // The paired wall saving in ns per unit (median, p25, p75), for bench/advice.sh.
        let saved_ns: Vec<f64> = (0..args.rounds)
            .map(|r| res[0][r].0 - res[i][r].0)
            .collect();
        // Machine-readable line for bench/multicall.sh and bench/advice.sh: title, mode, wall,
        // cpu, crossings, wall and cpu saving %, wall saving ns [p25, p75].
        eprintln!(
            "TSV\t{title}\t{}\t{:.0}\t{:.0}\t{:.2}\t{:.2}\t{:.2}\t{:.0}\t{:.0}\t{:.0}",
            modes[i].name,
            med(|x| x.0),
            med(|x| x.1),
            med(|x| x.2),
            if i == 0 {
                0.0
            } else {
                median(
                    (0..args.rounds)
                        .map(|r| 100.0 * (res[0][r].0 - res[i][r].0) / res[0][r].0)
                        .collect(),
                )
            },
            if i == 0 {
                0.0
            } else {
                median(
                    (0..args.rounds)
                        .map(|r| 100.0 * (res[0][r].1 - res[i][r].1) / res[0][r].1)
                        .collect(),
                )
            },
            median(saved_ns.clone()),
            quantile(saved_ns.clone(), 0.25),
            quantile(saved_ns, 0.75),
        );
    }
}

fn median(v: Vec<f64>) -> f64 {
    quantile(v, 0.5)
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

fn ring(opts: Options) -> MultiCall {
    MultiCall::with_options(&opts).unwrap_or_else(|e| fail(&format!("io_uring: {e}")))
}

// ---------------------------------------------------------------------------------------------
// files: openat + read + close per small file (the per-file chain of tar/cat/grep -r)

fn files(args: &Args) {
    let dir = std::env::var_os("BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("mcbench-files-{}", std::process::id()));
    let nfiles = args.files;
    let content = vec![b'x'; args.size];
    let mut names = Vec::new();
    for i in 0..nfiles {
        let sub = format!("d{:03}", i / 100);
        std::fs::create_dir_all(dir.join(&sub)).unwrap();
        let rel = format!("{sub}/f{i:05}");
        std::fs::write(dir.join(&rel), &content).unwrap();
        names.push(CString::new(rel).unwrap());
    }
    let dirfd = std::fs::File::open(&dir).unwrap();
    let dfd = dirfd.as_raw_fd();
    let names: &'static [CString] = Box::leak(names.into_boxed_slice());
    let k = args.batch;
    let bufsize = args.size.next_power_of_two().max(4096);
    let want = args.size as i64;
    // A unit is K files, taken round-robin from the tree.
    let next = move |pos: &mut usize| {
        let i = *pos;
        *pos = (*pos + 1) % names.len();
        &names[i]
    };

    let plain = {
        let mut buf = vec![0u8; bufsize];
        let mut pos = 0;
        move || {
            for _ in 0..k {
                let name = next(&mut pos);
                // SAFETY: plain system calls on our own buffer and a NUL-terminated name.
                let fd =
                    unsafe { libc::openat(dfd, name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                check(fd as isize, "openat");
                let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                assert_eq!(n as i64, want);
                unsafe { libc::close(fd) };
            }
            3 * k as u64
        }
    };
    let plain_stat = {
        let mut buf = vec![0u8; bufsize];
        let mut pos = 0;
        move || {
            for _ in 0..k {
                let name = next(&mut pos);
                // SAFETY: as above; stx is ours.
                let mut stx: libc::statx = unsafe { std::mem::zeroed() };
                unsafe { libc::statx(dfd, name.as_ptr(), 0, libc::STATX_BASIC_STATS, &mut stx) };
                let fd =
                    unsafe { libc::openat(dfd, name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                check(fd as isize, "openat");
                let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                assert_eq!(n as i64, want);
                unsafe { libc::close(fd) };
            }
            4 * k as u64
        }
    };
    // Without direct descriptors: the openat's fd is only known after its crossing, so each
    // file takes two: [openat], then [read, close].
    let handoff_by_fd = {
        let mut mc = ring(Options::new(4));
        let mut buf = vec![0u8; bufsize];
        let mut pos = 0;
        move || {
            let e0 = mc.enters();
            for _ in 0..k {
                let name = next(&mut pos);
                let mut open =
                    [Call::openat(dfd, name, libc::O_RDONLY | libc::O_CLOEXEC, 0).checked()];
                mc.run(&mut open).unwrap();
                let fd = open[0].result().unwrap() as RawFd;
                let mut rest = [Call::read(fd, &mut buf), Call::close(fd)];
                mc.run(&mut rest).unwrap();
                assert_eq!(rest[0].result(), Some(want));
            }
            mc.enters() - e0
        }
    };
    // Direct descriptors: [openat -> slot, read slot, close slot] per file, K files as K
    // independent chains in one crossing.
    let chains = |opts: Options, cached: bool, per: usize| {
        let mut mc = ring(opts.file_slots(per as u32));
        let mut bufs = vec![vec![0u8; bufsize]; per];
        let lens = vec![3usize; per];
        let mut index = vec![0usize; per];
        let mut pos = 0;
        move || {
            let e0 = mc.enters();
            for _ in 0..k / per {
                let mut calls = Vec::with_capacity(3 * per);
                for (s, buf) in bufs.iter_mut().enumerate() {
                    let name = next(&mut pos);
                    let mut open = Call::openat(dfd, name, libc::O_RDONLY, 0)
                        .into_slot(s as u32)
                        .checked();
                    if cached {
                        open = open.resolve_cached();
                    }
                    calls.push(open);
                    calls.push(Call::read(s as RawFd, buf).fixed());
                    calls.push(Call::close(s as RawFd).fixed());
                }
                mc.run_chains(&mut calls, &lens, &mut index).unwrap();
                for c in calls.chunks(3) {
                    assert_eq!(c[1].result(), Some(want), "{:?}", c[0].result());
                }
            }
            mc.enters() - e0
        }
    };
    let e = 3 * k as u32;
    let modes = vec![
        mode("plain openat+read+close", plain),
        mode("plain statx+openat+read+close", plain_stat),
        mode("multicall, fd handed back (2/file)", handoff_by_fd),
        mode(
            "multicall 1 file/crossing",
            chains(Options::new(4), false, 1),
        ),
        mode(
            format!("multicall {k} files/crossing"),
            chains(Options::new(e), false, k),
        ),
        mode("  + RESOLVE_CACHED", chains(Options::new(e), true, k)),
        mode(
            "  + no registered ring fd",
            chains(Options::new(e).register_ring_fd(false), true, k),
        ),
        mode(
            "  + SQPOLL",
            chains(Options::new(e).sqpoll(Some(SQPOLL_IDLE_MS)), true, k),
        ),
    ];
    let iters = if args.iters > 0 {
        args.iters
    } else {
        (2000 / k).max(1)
    };
    measure(
        &format!("files: {nfiles} files of {} B, page cache warm", args.size),
        &format!("{k} files"),
        modes,
        args,
        iters,
    );
    drop(dirfd);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// sock: K connections, each with a request waiting; the server answers each with recvmsg +
// sendmsg; the client side (writes of the requests, reads of the replies) is the same plain code
// in every mode.

fn sock_pairs(n: usize, tcp: bool) -> Vec<(OwnedFd, OwnedFd)> {
    (0..n)
        .map(|_| {
            if tcp {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (s, _) = l.accept().unwrap();
                c.set_nodelay(true).unwrap();
                s.set_nodelay(true).unwrap();
                (OwnedFd::from(c), OwnedFd::from(s))
            } else {
                let mut fds = [0; 2];
                // SAFETY: fds has room for two descriptors.
                check(
                    unsafe {
                        libc::socketpair(
                            libc::AF_UNIX,
                            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                            0,
                            fds.as_mut_ptr(),
                        )
                    } as isize,
                    "socketpair",
                );
                // SAFETY: just created, owned by nobody else.
                unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
            }
        })
        .collect()
}

const REQ: usize = 64;

fn sock(args: &Args) {
    let k = args.batch;
    let pairs: &'static [(OwnedFd, OwnedFd)] =
        Box::leak(sock_pairs(k, args.tcp).into_boxed_slice());
    let client = |fds: &[(OwnedFd, OwnedFd)]| {
        let req = [7u8; REQ];
        for (c, _) in fds {
            // SAFETY: plain write of our buffer.
            let n = unsafe { libc::write(c.as_raw_fd(), req.as_ptr().cast(), REQ) };
            assert_eq!(n, REQ as isize);
        }
    };
    let client_back = |fds: &[(OwnedFd, OwnedFd)]| {
        let mut rep = [0u8; REQ];
        for (c, _) in fds {
            // SAFETY: plain read into our buffer (MSG_WAITALL: the whole reply).
            let n = unsafe {
                libc::recv(
                    c.as_raw_fd(),
                    rep.as_mut_ptr().cast(),
                    REQ,
                    libc::MSG_WAITALL,
                )
            };
            assert_eq!(n, REQ as isize);
        }
    };
    let plain = move || {
        client(pairs);
        let mut buf = [0u8; REQ];
        for (_, s) in pairs {
            let mut iov = [IoSliceMut::new(&mut buf)];
            // SAFETY: msghdr over our iovec.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr().cast();
            msg.msg_iovlen = 1;
            let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_WAITALL) };
            assert_eq!(n, REQ as isize);
            let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
            assert_eq!(n, REQ as isize);
        }
        client_back(pairs);
        4 * k as u64
    };
    // The single-call replacement: none exists for a recv and a send on one socket; for K
    // sockets the closest is one read per socket... so the "best single call" is the plain loop
    // with read/write instead of recvmsg/sendmsg (no msghdr to copy).
    let plain_rw = move || {
        client(pairs);
        let mut buf = [0u8; REQ];
        for (_, s) in pairs {
            // SAFETY: plain calls on our buffer.
            let n = unsafe { libc::read(s.as_raw_fd(), buf.as_mut_ptr().cast(), REQ) };
            assert_eq!(n, REQ as isize);
            let n = unsafe { libc::write(s.as_raw_fd(), buf.as_ptr().cast(), REQ) };
            assert_eq!(n, REQ as isize);
        }
        client_back(pairs);
        4 * k as u64
    };
    let batched = |opts: Options, per: usize, fixed: bool| {
        let mut mc = ring(opts.file_slots(if fixed { k as u32 } else { 0 }));
        if fixed {
            let fds: Vec<RawFd> = pairs.iter().map(|(_, s)| s.as_raw_fd()).collect();
            mc.register_files(0, &fds).unwrap();
        }
        let mut bufs = vec![[0u8; REQ]; k];
        let lens = vec![2usize; per];
        let mut index = vec![0usize; per];
        move || {
            client(pairs);
            let e0 = mc.enters();
            for g in 0..k / per {
                let range = g * per..(g + 1) * per;
                let mut iovs: Vec<[IoSliceMut; 1]> = bufs[range.clone()]
                    .iter_mut()
                    .map(|b| [IoSliceMut::new(b)])
                    .collect();
                let mut calls = Vec::with_capacity(2 * per);
                for (j, iov) in iovs.iter_mut().enumerate() {
                    let i = range.start + j;
                    let fd = if fixed {
                        i as RawFd
                    } else {
                        pairs[i].1.as_raw_fd()
                    };
                    // recvmsg then sendmsg of the same buffer: the reply echoes the request.
                    let p = iov.as_mut_ptr() as *const IoSlice;
                    // SAFETY: the send's iovec is the recv's, read only after the recv completed
                    // (the two are linked), and both live until run_chains returns.
                    let send_iov: &[IoSlice] = unsafe { std::slice::from_raw_parts(p, 1) };
                    let mut r = Call::recvmsg(fd, iov, libc::MSG_WAITALL).checked();
                    let mut s = Call::sendmsg(fd, send_iov, 0);
                    if fixed {
                        r = r.fixed();
                        s = s.fixed();
                    }
                    calls.push(r);
                    calls.push(s);
                }
                mc.run_chains(&mut calls, &lens, &mut index).unwrap();
                for c in calls.chunks(2) {
                    assert_eq!(c[1].result(), Some(REQ as i64), "{:?}", c[0].result());
                }
            }
            client_back(pairs);
            2 * k as u64 + mc.enters() - e0
        }
    };
    let e = 2 * k as u32;
    let modes = vec![
        mode("plain recvmsg+sendmsg", plain),
        mode("plain read+write", plain_rw),
        mode(
            "multicall 1 request/crossing",
            batched(Options::new(2), 1, false),
        ),
        mode(
            format!("multicall {k} requests/crossing"),
            batched(Options::new(e), k, false),
        ),
        mode("  + fixed files", batched(Options::new(e), k, true)),
        mode(
            "  + SQPOLL",
            batched(Options::new(e).sqpoll(Some(SQPOLL_IDLE_MS)), k, true),
        ),
    ];
    let iters = if args.iters > 0 {
        args.iters
    } else {
        (4000 / k).max(1)
    };
    measure(
        &format!(
            "sock: {k} {} connections, a {REQ}-byte request waiting on each; answered with recvmsg+sendmsg (client side included, plain in every mode)",
            if args.tcp { "loopback TCP" } else { "unix stream" }
        ),
        &format!("{k} requests"),
        modes,
        args,
        iters,
    );
}

// ---------------------------------------------------------------------------------------------
// pingpong: one connection, one request in flight: a client thread writes a request and blocks
// for the reply; the server (measured, the client's CPU included) answers with recvmsg + sendmsg.
// A batch can only hold one request here: the recvmsg waits inside the io_uring_enter.

fn pingpong(args: &Args) {
    let (c, srv) = sock_pairs(1, args.tcp).pop().unwrap();
    let cfd = c.as_raw_fd();
    std::thread::spawn(move || {
        let _keep = c;
        let mut buf = [0u8; REQ];
        loop {
            // SAFETY: plain calls on our buffer; the loop ends when the server side closes.
            if unsafe { libc::write(cfd, buf.as_ptr().cast(), REQ) } != REQ as isize {
                return;
            }
            if unsafe { libc::recv(cfd, buf.as_mut_ptr().cast(), REQ, libc::MSG_WAITALL) }
                != REQ as isize
            {
                return;
            }
        }
    });
    let s: &'static OwnedFd = Box::leak(Box::new(srv));
    let sfd = s.as_raw_fd();
    let n = 100;
    let plain = move || {
        let mut buf = [0u8; REQ];
        for _ in 0..n {
            let mut iov = [IoSliceMut::new(&mut buf)];
            // SAFETY: msghdr over our iovec.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr().cast();
            msg.msg_iovlen = 1;
            assert_eq!(
                unsafe { libc::recvmsg(sfd, &mut msg, libc::MSG_WAITALL) },
                REQ as isize
            );
            assert_eq!(
                unsafe { libc::sendmsg(sfd, &msg, libc::MSG_NOSIGNAL) },
                REQ as isize
            );
        }
        2 * n as u64
    };
    let batched = |opts: Options, fixed: bool| {
        let mut mc = ring(opts.file_slots(u32::from(fixed)));
        if fixed {
            mc.register_files(0, &[sfd]).unwrap();
        }
        let fd = if fixed { 0 } else { sfd };
        let mut buf = [0u8; REQ];
        move || {
            let e0 = mc.enters();
            for _ in 0..n {
                let mut iov = [IoSliceMut::new(&mut buf)];
                let p = iov.as_mut_ptr() as *const IoSlice;
                // SAFETY: the send reads the buffer after the linked recv filled it.
                let send_iov: &[IoSlice] = unsafe { std::slice::from_raw_parts(p, 1) };
                let mut r = Call::recvmsg(fd, &mut iov, libc::MSG_WAITALL).checked();
                let mut w = Call::sendmsg(fd, send_iov, 0);
                if fixed {
                    r = r.fixed();
                    w = w.fixed();
                }
                let mut calls = [r, w];
                assert_eq!(mc.run(&mut calls).unwrap(), 3);
            }
            mc.enters() - e0
        }
    };
    let modes = vec![
        mode("plain recvmsg+sendmsg", plain),
        mode(
            "multicall 1 request/crossing",
            batched(Options::new(2), false),
        ),
        mode("  + fixed files", batched(Options::new(2), true)),
    ];
    let iters = if args.iters > 0 { args.iters } else { 20 };
    measure(
        &format!(
            "pingpong: one {} connection, one request in flight; server recvmsg+sendmsg, client thread included",
            if args.tcp { "loopback TCP" } else { "unix stream" }
        ),
        &format!("{n} round trips"),
        modes,
        args,
        iters,
    );
}

// ---------------------------------------------------------------------------------------------
// pipe: relay 4 KiB chunks from pipe A to pipe B (a filter's inner loop); the producer's write
// into A and the consumer's read from B are one plain call each in every mode.

fn pipe2() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    check(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } as isize,
        "pipe2",
    );
    // SAFETY: just created.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

const CHUNK: usize = 4096;

fn pipe(args: &Args) {
    let k = args.batch.min(15); // the relay holds at most a pipe's 64 KiB
    let total = k * CHUNK;
    let a = Box::leak(Box::new(pipe2()));
    let b = Box::leak(Box::new(pipe2()));
    let (ar, aw, br, bw) = (
        a.0.as_raw_fd(),
        a.1.as_raw_fd(),
        b.0.as_raw_fd(),
        b.1.as_raw_fd(),
    );
    let produce = move || {
        let data = vec![1u8; total];
        // SAFETY: plain write of our buffer.
        assert_eq!(
            unsafe { libc::write(aw, data.as_ptr().cast(), total) },
            total as isize
        );
    };
    let consume = move || {
        let mut data = vec![0u8; total];
        let mut got = 0;
        while got < total {
            // SAFETY: plain read into our buffer.
            let n = unsafe { libc::read(br, data[got..].as_mut_ptr().cast(), total - got) };
            assert!(n > 0);
            got += n as usize;
        }
    };
    let plain = move || {
        produce();
        let mut buf = [0u8; CHUNK];
        for _ in 0..k {
            // SAFETY: plain calls on our buffer.
            let n = unsafe { libc::read(ar, buf.as_mut_ptr().cast(), CHUNK) };
            assert_eq!(n, CHUNK as isize);
            let n = unsafe { libc::write(bw, buf.as_ptr().cast(), CHUNK) };
            assert_eq!(n, CHUNK as isize);
        }
        consume();
        2 + 2 * k as u64
    };
    let single = move || {
        produce();
        // SAFETY: splice between two pipes we own.
        let n =
            unsafe { libc::splice(ar, std::ptr::null_mut(), bw, std::ptr::null_mut(), total, 0) };
        assert_eq!(n, total as isize);
        consume();
        3
    };
    let batched = |opts: Options, fixed: bool| {
        let mut mc = ring(opts.file_slots(if fixed { 2 } else { 0 }));
        if fixed {
            mc.register_files(0, &[ar, bw]).unwrap();
        }
        let (r, w) = if fixed { (0, 1) } else { (ar, bw) };
        let mut bufs = vec![[0u8; CHUNK]; k];
        move || {
            produce();
            let e0 = mc.enters();
            let mut calls = Vec::with_capacity(2 * k);
            let (rd, wr): (Vec<_>, Vec<_>) = bufs
                .iter_mut()
                .map(|b| {
                    let p = b.as_mut_ptr();
                    // SAFETY: the write reads the chunk only after the linked read filled it.
                    (b, unsafe {
                        std::slice::from_raw_parts(p as *const u8, CHUNK)
                    })
                })
                .unzip();
            for (b, wb) in rd.into_iter().zip(wr) {
                let (mut rc, mut wc) = (Call::read(r, b).checked(), Call::write(w, wb).checked());
                if fixed {
                    rc = rc.fixed();
                    wc = wc.fixed();
                }
                calls.push(rc);
                calls.push(wc);
            }
            let idx = mc.run(&mut calls).unwrap();
            assert_eq!(idx, calls.len() + 1);
            consume();
            2 + mc.enters() - e0
        }
    };
    let e = 2 * k as u32;
    let modes = vec![
        mode("plain read+write", plain),
        mode("single call: splice", single),
        mode(
            format!("multicall ({k} read+write linked)"),
            batched(Options::new(e), false),
        ),
        mode("  + fixed files", batched(Options::new(e), true)),
        mode(
            "  + SQPOLL",
            batched(Options::new(e).sqpoll(Some(SQPOLL_IDLE_MS)), true),
        ),
    ];
    let iters = if args.iters > 0 { args.iters } else { 2000 };
    measure(
        &format!("pipe: relay {k} x 4 KiB from pipe A to pipe B (producer write + consumer read included)"),
        &format!("{} KiB relayed", total / 1024),
        modes,
        args,
        iters,
    );
}

// ---------------------------------------------------------------------------------------------
// copy: the paper's 4 KiB copy loop

fn copy(args: &Args) {
    let size = if args.size == 1024 {
        1 << 20
    } else {
        args.size
    };
    let dir = std::env::var_os("BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let src_path = dir.join(format!("mcbench-src-{}", std::process::id()));
    let dst_path = dir.join(format!("mcbench-dst-{}", std::process::id()));
    std::fs::write(&src_path, vec![3u8; size]).unwrap();
    let src: &'static std::fs::File = Box::leak(Box::new(std::fs::File::open(&src_path).unwrap()));
    let dst: &'static std::fs::File = Box::leak(Box::new(if args.dst_null {
        std::fs::File::options()
            .write(true)
            .open("/dev/null")
            .unwrap()
    } else {
        std::fs::File::create(&dst_path).unwrap()
    }));
    let (sfd, dfd) = (src.as_raw_fd(), dst.as_raw_fd());
    let chunks = size.div_ceil(CHUNK);
    let plain = move || {
        let mut buf = [0u8; CHUNK];
        let mut off = 0;
        let mut n = 0;
        loop {
            // SAFETY: plain calls on our buffer.
            let r = unsafe { libc::pread(sfd, buf.as_mut_ptr().cast(), CHUNK, off) };
            n += 1;
            if r <= 0 {
                break;
            }
            unsafe { libc::pwrite(dfd, buf.as_ptr().cast(), r as usize, off) };
            n += 1;
            off += r as i64;
        }
        n
    };
    // copy_file_range, or sendfile where it refuses (to /dev/null: EINVAL), as pkprof suggests.
    let single = move || {
        let (mut i, mut o) = (0i64, 0i64);
        let (mut n, mut done) = (0, 0usize);
        while done < size {
            // SAFETY: copy_file_range / sendfile between our two files.
            let mut r = unsafe { libc::copy_file_range(sfd, &mut i, dfd, &mut o, size - done, 0) };
            n += 1;
            if r < 0 {
                let mut off = done as i64;
                r = unsafe { libc::sendfile(dfd, sfd, &mut off, size - done) };
                n += 1;
                i = off;
                o = off;
            }
            assert!(
                r > 0,
                "copy_file_range/sendfile: {}",
                std::io::Error::last_os_error()
            );
            done += r as usize;
        }
        n
    };
    let k = args.batch;
    let batched = |opts: Options, fixed: bool| {
        let mut mc = ring(opts.file_slots(if fixed { 2 } else { 0 }));
        if fixed {
            mc.register_files(0, &[sfd, dfd]).unwrap();
        }
        let (s, d) = if fixed { (0, 1) } else { (sfd, dfd) };
        let mut bufs = vec![vec![0u8; CHUNK]; k];
        if fixed {
            let iov: Vec<libc::iovec> = bufs
                .iter_mut()
                .map(|b| libc::iovec {
                    iov_base: b.as_mut_ptr().cast(),
                    iov_len: CHUNK,
                })
                .collect();
            // SAFETY: the buffers live as long as the closure that owns both them and the ring.
            unsafe { mc.register_buffers(&iov) }.unwrap();
        }
        let lens = vec![2usize; k];
        let mut index = vec![0usize; k];
        move || {
            let e0 = mc.enters();
            let mut chunk = 0;
            while chunk < chunks {
                let per = k.min(chunks - chunk);
                let mut calls = Vec::with_capacity(2 * per);
                for (j, b) in bufs.iter_mut().take(per).enumerate() {
                    let off = ((chunk + j) * CHUNK) as u64;
                    let len = CHUNK.min(size - (chunk + j) * CHUNK);
                    let p = b.as_mut_ptr();
                    // SAFETY: the linked write reads the chunk after the read filled it.
                    let wb = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
                    if fixed {
                        calls.push(
                            Call::read_fixed(s, &mut b[..len], j as u16, Some(off))
                                .fixed()
                                .checked(),
                        );
                        calls.push(
                            Call::write_fixed(d, wb, j as u16, Some(off))
                                .fixed()
                                .checked(),
                        );
                    } else {
                        calls.push(Call::pread(s, &mut b[..len], off).checked());
                        calls.push(Call::pwrite(d, wb, off).checked());
                    }
                }
                mc.run_chains(&mut calls, &lens[..per], &mut index[..per])
                    .unwrap();
                assert!(index[..per].iter().all(|&i| i == 3), "{:?}", &index[..per]);
                chunk += per;
            }
            mc.enters() - e0
        }
    };
    let e = 2 * k as u32;
    let modes = vec![
        mode("plain pread+pwrite 4 KiB", plain),
        mode("single call: copy_file_range/sendfile", single),
        mode(
            format!("multicall {k} chunks/crossing"),
            batched(Options::new(e), false),
        ),
        mode(
            "  + fixed files and buffers",
            batched(Options::new(e), true),
        ),
        mode(
            "  + SQPOLL",
            batched(Options::new(e).sqpoll(Some(SQPOLL_IDLE_MS)), true),
        ),
    ];
    let iters = if args.iters > 0 {
        args.iters
    } else {
        (64 << 20) / size.max(1) / 8 + 1
    };
    measure(
        &format!(
            "copy: {size} B file to {}, 4 KiB chunks, page cache warm",
            if args.dst_null {
                "/dev/null"
            } else {
                "a file (same fs)"
            }
        ),
        "one copy",
        modes,
        args,
        iters,
    );
    let _ = std::fs::remove_file(&src_path);
    let _ = std::fs::remove_file(&dst_path);
}

fn main() {
    let args = parse_args();
    match args.workload.as_str() {
        "files" => files(&args),
        "sock" => sock(&args),
        "pingpong" => pingpong(&args),
        "pipe" => pipe(&args),
        "copy" => copy(&args),
        w => fail(&format!("unknown workload {w}")),
    }
}
