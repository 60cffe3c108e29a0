//! `pkprof syscalls --calibrate`: measures this machine's cost table (`CostTable`, see
//! `pkprof_syscall_graph::costs` for the model): each op kind pkprof can batch, on the kinds of
//! file that matter (a page-cache file, tmpfs, a pipe, a unix and a loopback TCP socket), as a
//! plain system call and inside batches of 1 and of `BATCH` through the multi-call library (the
//! batched cost per op and the fixed cost per batch follow from the two), and the single calls
//! the replacement table suggests (copy_file_range, writev, readv, preadv, pwritev,
//! close_range) against the calls they replace. See docs/design.md "Measured advice".
//!
//! Each figure is the median and quartiles of `repeats` measures of `ops` operations, the
//! plain, batch-of-1, batch-of-N (one linked chain) and unlinked batch-of-N (N independent
//! chains of one: what a link costs, `costs::Unlinked`) phases interleaved in a rotating order
//! so that drift and load spread over all four; a wide spread marks the figure noisy rather
//! than hiding it.
//! Batches go through `pkprof_multicall::MultiCall` as a program would use it (building the
//! calls included), so the library's cheaper modes are measured once it has them.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use pkprof_multicall::{Call, MultiCall, Options};
use pkprof_syscall_graph::costs::{
    CalibrationKey, CostTable, Measure, OpCost, SingleCallCost, Unlinked, COSTS_SCHEMA,
    DIRECT_DESCRIPTOR,
};

/// Ops per batch in the batch-of-N phase (and vector length of the vector calls).
pub const BATCH: usize = 16;
/// Bytes per read/write/pread/pwrite and per copy iteration.
const BLOCK: usize = 4096;
/// Bytes per sendmsg/recvmsg (a small request or response).
const MESSAGE: usize = 64;

/// How long and how carefully to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// 11 repeats of 512 ops per figure (about 15 s on a quiet machine).
    Full,
    /// 5 repeats of 256 ops per figure (about 4 s): enough to see which side wins.
    Quick,
}

impl Mode {
    fn repeats(self) -> usize {
        match self {
            Mode::Full => 11,
            Mode::Quick => 5,
        }
    }

    /// Ops per measure: a multiple of `BATCH`.
    fn ops(self) -> usize {
        match self {
            Mode::Full => 512,
            Mode::Quick => 256,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Quick => "quick",
        }
    }
}

/// The key of this machine: kernel release, CPU model, pkprof version.
pub fn machine_key() -> CalibrationKey {
    let (release, _) = pkprof_recording::meta::uname();
    let kernel = if release.is_empty() {
        "unknown".into()
    } else {
        release
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    CalibrationKey {
        kernel,
        cpu,
        pkprof_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// One op kind's measure, one repeat: the ns a phase of `m` ops took.
trait Bench {
    /// Ops per measure for this op: `mode.ops()` unless it is slow (fsync waits for the disk).
    fn ops(&self, mode: Mode) -> usize {
        mode.ops()
    }
    /// `m` plain system calls.
    fn plain(&mut self, m: usize) -> Result<f64>;
    /// `m` ops in batches of `k` (`m` a multiple of `k`), linked or not as `mc` runs them.
    fn batched(&mut self, mc: &mut Runner<'_>, m: usize, k: usize) -> Result<f64>;
}

/// Runs a bench's batches: as one linked chain (`MultiCall::run`, as a multi-call of
/// dependent calls runs them) or as independent chains of one op (`run_chains`).
struct Runner<'a> {
    mc: &'a mut MultiCall,
    linked: bool,
}

impl Runner<'_> {
    fn run(&mut self, calls: &mut [Call<'_>]) -> Result<(), pkprof_multicall::Error> {
        if self.linked {
            return self.mc.run(calls).map(|_| ());
        }
        // Stack arrays: the linked run allocates nothing either.
        const ONES: [usize; BATCH] = [1; BATCH];
        let mut index = [0; BATCH];
        for part in calls.chunks_mut(BATCH) {
            let n = part.len();
            self.mc.run_chains(part, &ONES[..n], &mut index[..n])?;
        }
        Ok(())
    }
}

/// Checks a system call's return value.
fn check(ret: isize, what: &str) -> Result<usize> {
    if ret < 0 {
        bail!("{what}: {}", std::io::Error::last_os_error());
    }
    Ok(ret as usize)
}

/// Checks a batch's results: every op must have succeeded (a calibration measures the success
/// path); `what` names the op.
fn check_batch(calls: &[Call<'_>], what: &str) -> Result<()> {
    for c in calls {
        match c.result() {
            Some(r) if r >= 0 => {}
            r => bail!(
                "batched {what}: {}",
                r.map_or("no result".into(), |r| std::io::Error::from_raw_os_error(
                    -r as i32
                )
                .to_string())
            ),
        }
    }
    Ok(())
}

fn elapsed_ns(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64
}

/// read/write/pread/pwrite of `BLOCK` bytes on a file of at least `ops` blocks.
struct FileRw {
    fd: RawFd,
    /// Batched through slot 0 of the ring's fixed-file table.
    fixed: bool,
    write: bool,
    positioned: bool,
    bufs: Vec<Vec<u8>>,
}

impl FileRw {
    /// pread/pwrite offsets cycle over the first 256 blocks; read/write go through the file.
    fn offset(&self, i: usize) -> u64 {
        ((i % 256) * BLOCK) as u64
    }

    /// Back to the start; before writes at the file position the file is emptied first, so
    /// that they append to a new file as a program writing its output does (allocating blocks,
    /// which costs more than overwriting cached pages).
    fn rewind(&self) -> Result<()> {
        if self.write && !self.positioned {
            truncate(self.fd)?;
        }
        // SAFETY: plain lseek on our own descriptor.
        check(
            unsafe { libc::lseek(self.fd, 0, libc::SEEK_SET) } as isize,
            "lseek",
        )?;
        Ok(())
    }
}

impl Bench for FileRw {
    fn plain(&mut self, m: usize) -> Result<f64> {
        self.rewind()?;
        let (fd, buf) = (self.fd, self.bufs[0].as_mut_ptr());
        let t = Instant::now();
        for i in 0..m {
            let off = self.offset(i) as libc::off_t;
            // SAFETY: buf holds BLOCK bytes and outlives the call.
            let r = unsafe {
                match (self.write, self.positioned) {
                    (false, false) => libc::read(fd, buf.cast(), BLOCK),
                    (false, true) => libc::pread(fd, buf.cast(), BLOCK, off),
                    (true, false) => libc::write(fd, buf.cast(), BLOCK),
                    (true, true) => libc::pwrite(fd, buf.cast(), BLOCK, off),
                }
            };
            if r != BLOCK as isize {
                check(r, "read/write")?;
                bail!("short transfer in calibration ({r} of {BLOCK} bytes)");
            }
        }
        Ok(elapsed_ns(t))
    }

    fn batched(&mut self, mc: &mut Runner<'_>, m: usize, k: usize) -> Result<f64> {
        self.rewind()?;
        let (fd, fixed) = if self.fixed {
            (0, true)
        } else {
            (self.fd, false)
        };
        let offsets: Vec<u64> = (0..m).map(|i| self.offset(i)).collect();
        let (write, positioned) = (self.write, self.positioned);
        let t = Instant::now();
        for chunk in offsets.chunks(k) {
            let mut calls: Vec<Call> = Vec::with_capacity(k);
            for (buf, &off) in self.bufs.iter_mut().zip(chunk) {
                let call = match (write, positioned) {
                    (false, false) => Call::read(fd, buf),
                    (false, true) => Call::pread(fd, buf, off),
                    (true, false) => Call::write(fd, buf),
                    (true, true) => Call::pwrite(fd, buf, off),
                };
                calls.push(if fixed { call.fixed() } else { call });
            }
            mc.run(&mut calls)?;
            check_batch(&calls, "read/write")?;
        }
        Ok(elapsed_ns(t))
    }
}

/// Empties a file (untimed set-up of the append measures).
fn truncate(fd: RawFd) -> Result<()> {
    // SAFETY: our own descriptor.
    check(unsafe { libc::ftruncate(fd, 0) } as isize, "ftruncate")?;
    Ok(())
}

/// openat (`open` true) or close of a file, `BATCH` descriptors at a time; the other half of
/// each pair is not timed.
struct OpenClose {
    path: CString,
    open: bool,
    /// Batched openat with RESOLVE_CACHED.
    cached: bool,
    /// Batched into (openat) or out of (close) the ring's fixed-file slots `DIRECT_SLOT..`, as
    /// a multi-call that hands an openat's file to the calls after it does (a direct
    /// descriptor); the other half is batched too (a slot has no plain descriptor).
    direct: bool,
}

/// The first fixed-file slot of the direct-descriptor measures (0 and 1 are the files' and
/// streams' registered descriptors).
const DIRECT_SLOT: u32 = 2;

impl OpenClose {
    fn open_plain(&self) -> Result<RawFd> {
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::openat(libc::AT_FDCWD, self.path.as_ptr(), libc::O_RDONLY) };
        Ok(check(fd as isize, "openat")? as RawFd)
    }
}

fn close_plain(fd: RawFd) -> Result<()> {
    // SAFETY: closes a descriptor this module opened.
    check(unsafe { libc::close(fd) } as isize, "close")?;
    Ok(())
}

impl Bench for OpenClose {
    fn plain(&mut self, m: usize) -> Result<f64> {
        let mut ns = 0.0;
        let mut fds = Vec::with_capacity(BATCH);
        for _ in 0..m / BATCH {
            let t = Instant::now();
            for _ in 0..BATCH {
                fds.push(self.open_plain()?);
            }
            if self.open {
                ns += elapsed_ns(t);
            }
            let t = Instant::now();
            for fd in fds.drain(..) {
                close_plain(fd)?;
            }
            if !self.open {
                ns += elapsed_ns(t);
            }
        }
        Ok(ns)
    }

    fn batched(&mut self, mc: &mut Runner<'_>, m: usize, k: usize) -> Result<f64> {
        if self.direct {
            return self.batched_direct(mc, m, k);
        }
        let mut ns = 0.0;
        let mut fds: Vec<RawFd> = Vec::with_capacity(BATCH);
        for _ in 0..m / BATCH {
            if self.open {
                let t = Instant::now();
                for _ in 0..BATCH / k {
                    let mut calls: Vec<Call> = (0..k)
                        .map(|_| {
                            let c = Call::openat(libc::AT_FDCWD, &self.path, libc::O_RDONLY, 0);
                            if self.cached {
                                c.resolve_cached()
                            } else {
                                c
                            }
                        })
                        .collect();
                    mc.run(&mut calls)?;
                    check_batch(&calls, "openat")?;
                    fds.extend(calls.iter().filter_map(|c| c.result()).map(|r| r as RawFd));
                }
                ns += elapsed_ns(t);
                for fd in fds.drain(..) {
                    close_plain(fd)?;
                }
            } else {
                for _ in 0..BATCH {
                    fds.push(self.open_plain()?);
                }
                let t = Instant::now();
                for chunk in fds.chunks(k) {
                    let mut calls: Vec<Call> = chunk.iter().map(|&fd| Call::close(fd)).collect();
                    mc.run(&mut calls)?;
                    check_batch(&calls, "close")?;
                }
                ns += elapsed_ns(t);
                fds.clear();
            }
        }
        Ok(ns)
    }
}

impl OpenClose {
    /// `batched` into and out of direct descriptors: `BATCH` slots filled by openat, emptied
    /// by close, the half of `self.open` timed in batches of `k`.
    fn batched_direct(&mut self, mc: &mut Runner<'_>, m: usize, k: usize) -> Result<f64> {
        let path = &self.path;
        let opens = |slots: std::ops::Range<u32>| -> Vec<Call<'_>> {
            slots
                .map(|s| Call::openat(libc::AT_FDCWD, path, libc::O_RDONLY, 0).into_slot(s))
                .collect()
        };
        let closes = |slots: std::ops::Range<u32>| -> Vec<Call<'static>> {
            slots.map(|s| Call::close(s as RawFd).fixed()).collect()
        };
        let (first, n) = (DIRECT_SLOT, BATCH as u32);
        let mut ns = 0.0;
        for _ in 0..m / BATCH {
            for half in [true, false] {
                let timed = half == self.open;
                let t = Instant::now();
                let per = if timed { k as u32 } else { n };
                for g in 0..n / per {
                    let slots = first + g * per..first + (g + 1) * per;
                    if half {
                        let mut calls = opens(slots);
                        mc.run(&mut calls)?;
                        check_batch(&calls, "openat into a slot")?;
                    } else {
                        let mut calls = closes(slots);
                        mc.run(&mut calls)?;
                        check_batch(&calls, "close of a slot")?;
                    }
                }
                if timed {
                    ns += elapsed_ns(t);
                }
            }
        }
        Ok(ns)
    }
}

/// statx of a path.
struct Statx {
    path: CString,
}

impl Bench for Statx {
    fn plain(&mut self, m: usize) -> Result<f64> {
        // SAFETY: statx is plain data.
        let mut buf: libc::statx = unsafe { std::mem::zeroed() };
        let t = Instant::now();
        for _ in 0..m {
            // SAFETY: a NUL-terminated path and a statx buffer.
            let r = unsafe {
                libc::statx(
                    libc::AT_FDCWD,
                    self.path.as_ptr(),
                    0,
                    libc::STATX_BASIC_STATS,
                    &mut buf,
                )
            };
            check(r as isize, "statx")?;
        }
        Ok(elapsed_ns(t))
    }

    fn batched(&mut self, mc: &mut Runner<'_>, m: usize, k: usize) -> Result<f64> {
        // SAFETY: statx is plain data.
        let mut bufs: Vec<libc::statx> = (0..k).map(|_| unsafe { std::mem::zeroed() }).collect();
        let t = Instant::now();
        for _ in 0..m / k {
            let mut calls: Vec<Call> = bufs
                .iter_mut()
                .map(|b| Call::statx(libc::AT_FDCWD, &self.path, 0, libc::STATX_BASIC_STATS, b))
                .collect();
            mc.run(&mut calls)?;
            check_batch(&calls, "statx")?;
        }
        Ok(elapsed_ns(t))
    }
}

/// fsync of a file without dirty data: the call's own cost, not the disk's.
struct Fsync {
    fd: RawFd,
}

impl Fsync {
    /// The writes measured before leave dirty pages: written back here, untimed.
    fn clean(&self) -> Result<()> {
        // SAFETY: our own descriptor.
        check(unsafe { libc::fsync(self.fd) } as isize, "fsync")?;
        Ok(())
    }
}

impl Bench for Fsync {
    /// A clean fsync still flushes the disk's cache on some file systems (ext4: milliseconds).
    fn ops(&self, _mode: Mode) -> usize {
        BATCH
    }

    fn plain(&mut self, m: usize) -> Result<f64> {
        self.clean()?;
        let t = Instant::now();
        for _ in 0..m {
            // SAFETY: our own descriptor.
            check(unsafe { libc::fsync(self.fd) } as isize, "fsync")?;
        }
        Ok(elapsed_ns(t))
    }

    fn batched(&mut self, mc: &mut Runner<'_>, m: usize, k: usize) -> Result<f64> {
        self.clean()?;
        let t = Instant::now();
        for _ in 0..m / k {
            let mut calls: Vec<Call> = (0..k).map(|_| Call::fsync(self.fd)).collect();
            mc.run(&mut calls)?;
            check_batch(&calls, "fsync")?;
        }
        Ok(elapsed_ns(t))
    }
}

/// A connected pair (pipe or socket): `BATCH` transfers one way, then `BATCH` back out of the
/// other end; only the `send` (true) or the receive half is timed. Pipes use read/write of
/// `BLOCK` bytes, sockets sendmsg/recvmsg of `MESSAGE` bytes.
struct Stream {
    tx: OwnedFd,
    rx: OwnedFd,
    send: bool,
    socket: bool,
    /// Batched through slots 0 (tx) and 1 (rx) of the ring's fixed-file table.
    fixed: bool,
    bufs: Vec<Vec<u8>>,
}

impl Stream {
    fn len(&self) -> usize {
        if self.socket {
            MESSAGE
        } else {
            BLOCK
        }
    }

    fn send_plain(&mut self) -> Result<()> {
        let (fd, len) = (self.tx.as_raw_fd(), self.len());
        let buf = self.bufs[0].as_ptr();
        // SAFETY: buf holds at least len bytes.
        let r = unsafe {
            if self.socket {
                let mut iov = libc::iovec {
                    iov_base: buf as *mut _,
                    iov_len: len,
                };
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL)
            } else {
                libc::write(fd, buf.cast(), len)
            }
        };
        if check(r, "send")? != len {
            bail!("short send in calibration");
        }
        Ok(())
    }

    fn recv_plain(&mut self) -> Result<()> {
        let (fd, len) = (self.rx.as_raw_fd(), self.len());
        let buf = self.bufs[0].as_mut_ptr();
        // SAFETY: buf holds at least len bytes.
        let r = unsafe {
            if self.socket {
                let mut iov = libc::iovec {
                    iov_base: buf.cast(),
                    iov_len: len,
                };
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                libc::recvmsg(fd, &mut msg, libc::MSG_WAITALL)
            } else {
                libc::read(fd, buf.cast(), len)
            }
        };
        if check(r, "receive")? != len {
            bail!("short receive in calibration");
        }
        Ok(())
    }
}

impl Bench for Stream {
    fn plain(&mut self, m: usize) -> Result<f64> {
        let mut ns = 0.0;
        for _ in 0..m / BATCH {
            let t = Instant::now();
            for _ in 0..BATCH {
                self.send_plain()?;
            }
            if self.send {
                ns += elapsed_ns(t);
            }
            let t = Instant::now();
            for _ in 0..BATCH {
                self.recv_plain()?;
            }
            if !self.send {
                ns += elapsed_ns(t);
            }
        }
        Ok(ns)
    }

    fn batched(&mut self, mc: &mut Runner<'_>, m: usize, k: usize) -> Result<f64> {
        let (tx, rx, len, socket, fixed) = (
            self.tx.as_raw_fd(),
            self.rx.as_raw_fd(),
            self.len(),
            self.socket,
            self.fixed,
        );
        let (tx, rx) = if fixed { (0, 1) } else { (tx, rx) };
        fn fix(c: Call<'_>, fixed: bool) -> Call<'_> {
            if fixed {
                c.fixed()
            } else {
                c
            }
        }
        let mut ns = 0.0;
        for _ in 0..m / BATCH {
            if self.send {
                let t = Instant::now();
                for _ in 0..BATCH / k {
                    let iovs: Vec<[IoSlice; 1]> = self.bufs[..k]
                        .iter()
                        .map(|b| [IoSlice::new(&b[..len])])
                        .collect();
                    let mut calls: Vec<Call> = iovs
                        .iter()
                        .zip(&self.bufs)
                        .map(|(iov, b)| {
                            let c = if socket {
                                Call::sendmsg(tx, iov, 0)
                            } else {
                                Call::write(tx, &b[..len])
                            };
                            fix(c, fixed)
                        })
                        .collect();
                    mc.run(&mut calls)?;
                    check_batch(&calls, "send")?;
                }
                ns += elapsed_ns(t);
                for _ in 0..BATCH {
                    self.recv_plain()?;
                }
            } else {
                for _ in 0..BATCH {
                    self.send_plain()?;
                }
                let t = Instant::now();
                for _ in 0..BATCH / k {
                    let mut iovs: Vec<[std::io::IoSliceMut; 1]> = Vec::with_capacity(k);
                    let mut rest: &mut [Vec<u8>] = &mut self.bufs[..k];
                    while let Some((b, tail)) = rest.split_first_mut() {
                        iovs.push([std::io::IoSliceMut::new(&mut b[..len])]);
                        rest = tail;
                    }
                    let mut calls: Vec<Call> = iovs
                        .iter_mut()
                        .map(|iov| {
                            let c = if socket {
                                Call::recvmsg(rx, iov, libc::MSG_WAITALL)
                            } else {
                                let b: &mut [u8] = &mut iov[0];
                                Call::read(rx, b)
                            };
                            fix(c, fixed)
                        })
                        .collect();
                    mc.run(&mut calls)?;
                    check_batch(&calls, "receive")?;
                }
                ns += elapsed_ns(t);
            }
        }
        Ok(ns)
    }
}

/// What `measure_op` measures of the batched op: the linked split (per op, per batch) and
/// the unlinked one.
type Batched = ((Measure, Measure), Unlinked);

/// The plain, batched-per-op and fixed-per-batch figures of one op from `repeats` repeats; and
/// the same op as `BATCH` independent chains of one, whence what a link costs.
fn measure_op(
    bench: &mut dyn Bench,
    mut mc: Option<&mut MultiCall>,
    mode: Mode,
) -> Result<(Measure, Option<Batched>)> {
    let (m, n) = (bench.ops(mode), BATCH as f64);
    let (mut plain, mut per_op, mut fixed) = (Vec::new(), Vec::new(), Vec::new());
    let (mut per_op_u, mut fixed_u, mut link) = (Vec::new(), Vec::new(), Vec::new());
    // One unrecorded round first: caches, page faults, lazy kernel set-up.
    for r in 0..=mode.repeats() {
        let (mut p, mut t1, mut tn, mut tu) = (0.0, 0.0, 0.0, 0.0);
        for phase in 0..4 {
            let (k, linked) = match (phase + r) % 4 {
                0 => {
                    p = bench.plain(m)? / m as f64;
                    continue;
                }
                1 => (1, true),
                2 => (BATCH, true),
                _ => (BATCH, false),
            };
            let Some(mc) = mc.as_deref_mut() else {
                continue;
            };
            let t = bench.batched(&mut Runner { mc, linked }, m, k)? / m as f64;
            match (k, linked) {
                (1, _) => t1 = t,
                (_, true) => tn = t,
                _ => tu = t,
            }
        }
        if r == 0 {
            continue;
        }
        plain.push(p);
        // t1 = fixed + b; tn = (fixed + N b) / N; the unlinked tu = (fixed_u + N b_u) / N
        // with fixed_u + b_u = t1.
        let b = (tn * n - t1) / (n - 1.0);
        per_op.push(b);
        fixed.push(t1 - b);
        let b_u = (tu * n - t1) / (n - 1.0);
        per_op_u.push(b_u);
        fixed_u.push(t1 - b_u);
        link.push(b - b_u);
    }
    let plain = Measure::from_samples(&mut plain).context("no plain measure")?;
    let batched = match mc {
        Some(_) => {
            let m = |v: &mut Vec<f64>| Measure::from_samples(v).context("no batched measure");
            Some((
                (m(&mut per_op)?, m(&mut fixed)?),
                Unlinked {
                    batched: m(&mut per_op_u)?,
                    batch_fixed: m(&mut fixed_u)?,
                    link: m(&mut link)?,
                },
            ))
        }
        None => None,
    };
    Ok((plain, batched))
}

/// A scratch directory for the file measures, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(parent: &Path) -> Result<Scratch> {
        let dir = parent.join(format!("pkprof-calibrate-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Scratch(dir))
    }

    /// A file of `blocks` blocks, read once so that it is in the page cache.
    fn file(&self, name: &str, blocks: usize) -> Result<(PathBuf, OwnedFd)> {
        let path = self.0.join(name);
        std::fs::write(&path, vec![0x5a; blocks * BLOCK])
            .with_context(|| format!("cannot write {}", path.display()))?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        let _ = std::fs::read(&path)?;
        Ok((path, f.into()))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cstring(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL in a path we made")
}

/// The file system type of `path`, by name where known.
fn fs_type(path: &Path) -> String {
    // SAFETY: statfs is plain data; the path is NUL-terminated.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the path is NUL-terminated and lives through the call; s is a valid statfs.
    if unsafe { libc::statfs(cstring(path).as_ptr(), &mut s) } != 0 {
        return "unknown".into();
    }
    match s.f_type as i64 {
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlayfs".into(),
        t => format!("fs 0x{t:x}"),
    }
}

/// A connected loopback TCP pair (tx, rx), Nagle off.
fn tcp_pair() -> Result<(OwnedFd, OwnedFd)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("loopback TCP")?;
    let tx = std::net::TcpStream::connect(listener.local_addr()?)?;
    let (rx, _) = listener.accept()?;
    tx.set_nodelay(true)?;
    rx.set_nodelay(true)?;
    Ok((tx.into(), rx.into()))
}

fn unix_pair() -> Result<(OwnedFd, OwnedFd)> {
    let (a, b) = std::os::unix::net::UnixStream::pair().context("unix socket pair")?;
    Ok((a.into(), b.into()))
}

fn pipe_pair() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    check(unsafe { libc::pipe(fds.as_mut_ptr()) } as isize, "pipe")?;
    // SAFETY: pipe returned two new descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[1]), OwnedFd::from_raw_fd(fds[0])) })
}

fn bufs(len: usize) -> Vec<Vec<u8>> {
    (0..BATCH).map(|_| vec![0x5a; len]).collect()
}

/// The crossing: `getppid`, which does nothing else.
fn crossing(mode: Mode) -> Result<Measure> {
    let mut samples = Vec::new();
    for r in 0..=mode.repeats() {
        let t = Instant::now();
        for _ in 0..mode.ops() {
            // SAFETY: no arguments, cannot fail.
            unsafe { libc::syscall(libc::SYS_getppid) };
        }
        if r > 0 {
            samples.push(elapsed_ns(t) / mode.ops() as f64);
        }
    }
    Measure::from_samples(&mut samples).context("no crossing measure")
}

/// Measures the whole table; `progress` gets one line per figure.
pub fn calibrate(mode: Mode, progress: &mut dyn FnMut(&str)) -> Result<CostTable> {
    let started = Instant::now();
    // The library's cheapest set-up for these batches: a fixed-file table for the "fixed file"
    // variants (and the registered ring fd, its default).
    let options = Options::new((2 * BATCH) as u32).file_slots(DIRECT_SLOT + BATCH as u32);
    let mut mc = match MultiCall::with_options(&options) {
        Ok(mc) => Ok(mc),
        Err(e @ pkprof_multicall::Error::Unavailable { .. }) => Err(e.to_string()),
        Err(e) => return Err(e).context("opening an io_uring for the calibration"),
    };
    let batched_unavailable = mc.as_ref().err().cloned();
    let engine = match &mc {
        Ok(mc) => mc.describe(),
        Err(why) => format!("nothing: {why}"),
    };
    let mut targets = BTreeMap::new();
    let mut ops = Vec::new();
    let crossing = crossing(mode)?;
    progress(&format!("crossing (getppid): {:.0} ns", crossing.median_ns));

    // Page-cache file (a disk file system: /var/tmp, else the temp dir) and tmpfs.
    let mut dirs = vec![("file", PathBuf::from("/var/tmp"))];
    if !Path::new("/var/tmp").is_dir() {
        dirs[0].1 = std::env::temp_dir();
    }
    if fs_type(Path::new("/dev/shm")) == "tmpfs" {
        dirs.push(("tmpfs", PathBuf::from("/dev/shm")));
    }
    let blocks = mode.ops().max(256);
    for (on, dir) in &dirs {
        let scratch = Scratch::new(dir)?;
        let fs = fs_type(dir);
        targets.insert(
            on.to_string(),
            if *on == "file" {
                format!("page-cache file on {fs} in {}", dir.display())
            } else {
                format!("file on {fs} in {}", dir.display())
            },
        );
        let (path, file) = scratch.file("data", blocks)?;
        let fd = file.as_raw_fd();
        if let Ok(mc) = mc.as_mut() {
            mc.register_files(0, &[fd])
                .context("registering the calibration file")?;
        }
        for (op, write, positioned) in [
            ("read", false, false),
            ("write", true, false),
            ("pread", false, true),
            ("pwrite", true, true),
        ] {
            for fixed in [false, true] {
                let mut b = FileRw {
                    fd,
                    fixed,
                    write,
                    positioned,
                    bufs: bufs(BLOCK),
                };
                let variant = if fixed { "fixed file" } else { "" };
                let m = mc.as_mut().ok();
                ops.push(op_cost(op, on, variant, &mut b, m, mode, progress)?);
            }
        }
        let p = cstring(&path);
        for (op, open, cached, direct) in [
            ("openat", true, false, false),
            ("openat", true, true, false),
            ("openat", true, false, true),
            ("close", false, false, false),
            ("close", false, false, true),
        ] {
            let mut b = OpenClose {
                path: p.clone(),
                open,
                cached,
                direct,
            };
            let variant = match (cached, direct) {
                (true, _) => "RESOLVE_CACHED",
                (_, true) => DIRECT_DESCRIPTOR,
                _ => "",
            };
            let m = mc.as_mut().ok();
            ops.push(op_cost(op, on, variant, &mut b, m, mode, progress)?);
        }
        let mut b = Statx { path: p.clone() };
        let m = mc.as_mut().ok();
        ops.push(op_cost("statx", on, "", &mut b, m, mode, progress)?);
        let mut b = Fsync { fd };
        let m = mc.as_mut().ok();
        ops.push(op_cost("fsync", on, "", &mut b, m, mode, progress)?);
    }

    type Opener = fn() -> Result<(OwnedFd, OwnedFd)>;
    let streams: [(&str, &str, Opener, bool); 3] = [
        ("pipe", "pipe (4 KiB transfers)", pipe_pair, false),
        (
            "unix",
            "unix stream socket pair (64-byte messages)",
            unix_pair,
            true,
        ),
        (
            "tcp",
            "loopback TCP connection, Nagle off (64-byte messages)",
            tcp_pair,
            true,
        ),
    ];
    for (on, what, open, socket) in streams {
        targets.insert(on.to_string(), what.to_string());
        let names = if socket {
            ["sendmsg", "recvmsg"]
        } else {
            ["write", "read"]
        };
        for (op, send) in names.into_iter().zip([true, false]) {
            for fixed in [false, true] {
                let (tx, rx) = open()?;
                if let Ok(mc) = mc.as_mut() {
                    mc.register_files(0, &[tx.as_raw_fd(), rx.as_raw_fd()])
                        .context("registering the calibration pair")?;
                }
                let mut b = Stream {
                    tx,
                    rx,
                    send,
                    socket,
                    fixed,
                    bufs: bufs(BLOCK),
                };
                let variant = if fixed { "fixed file" } else { "" };
                let m = mc.as_mut().ok();
                ops.push(op_cost(op, on, variant, &mut b, m, mode, progress)?);
            }
        }
    }

    let file_dir = &dirs[0].1;
    let single_calls = single_calls(file_dir, mode, &ops, progress)?;

    Ok(CostTable {
        schema: COSTS_SCHEMA.into(),
        key: machine_key(),
        measured_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs(),
        seconds: started.elapsed().as_secs_f64(),
        mode: mode.name().into(),
        batch_size: BATCH as u32,
        engine,
        targets,
        crossing,
        batched_unavailable,
        ops,
        single_calls,
    })
}

#[allow(clippy::too_many_arguments)] // the figure's name, its bench, and where to report
fn op_cost(
    op: &str,
    on: &str,
    variant: &str,
    bench: &mut dyn Bench,
    mc: Option<&mut MultiCall>,
    mode: Mode,
    progress: &mut dyn FnMut(&str),
) -> Result<OpCost> {
    let (plain, batched) =
        measure_op(bench, mc, mode).with_context(|| format!("calibrating {op} on {on}"))?;
    progress(&format!(
        "{op} on {on} {variant}: plain {:.0} ns{}",
        plain.median_ns,
        batched.map_or(String::new(), |((b, f), u)| format!(
            ", batched {:.0} ns + {:.0} ns per batch, a link {:.0} ns",
            b.median_ns, f.median_ns, u.link.median_ns
        ))
    ));
    Ok(OpCost {
        op: op.into(),
        on: on.into(),
        variant: variant.into(),
        plain,
        batched: batched.map(|((b, _), _)| b),
        batch_fixed: batched.map(|((_, f), _)| f),
        unlinked: batched.map(|(_, u)| u),
    })
}

/// The single calls against the calls they replace, on the page-cache file.
fn single_calls(
    dir: &Path,
    mode: Mode,
    ops: &[OpCost],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<SingleCallCost>> {
    let scratch = Scratch::new(dir)?;
    let blocks = mode.ops().max(256);
    let (_, src) = scratch.file("src", blocks)?;
    let (_, dst) = scratch.file("dst", blocks)?;
    let (src, dst) = (src.as_raw_fd(), dst.as_raw_fd());
    let mut out = Vec::new();
    let plain = |op: &str| {
        ops.iter()
            .find(|o| o.op == op && o.on == "file" && o.variant.is_empty())
    };

    // copy_file_range of the whole file against the 4 KiB read + write loop, per 4 KiB.
    let mut loop_ns = Vec::new();
    let mut cfr_ns = Vec::new();
    let mut buf = vec![0u8; BLOCK];
    for r in 0..=mode.repeats() {
        // The copy goes to a new (emptied) file, as a copy program's does.
        let rewind = || -> Result<()> {
            truncate(dst)?;
            for fd in [src, dst] {
                // SAFETY: our own descriptors.
                check(
                    unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } as isize,
                    "lseek",
                )?;
            }
            Ok(())
        };
        rewind()?;
        let t = Instant::now();
        for _ in 0..blocks {
            // SAFETY: buf holds BLOCK bytes.
            let n = unsafe { libc::read(src, buf.as_mut_ptr().cast(), BLOCK) };
            check(n, "read")?;
            check(
                // SAFETY: buf holds BLOCK bytes and read returned n <= BLOCK of them.
                unsafe { libc::write(dst, buf.as_ptr().cast(), n as usize) },
                "write",
            )?;
        }
        let l = elapsed_ns(t) / blocks as f64;
        rewind()?;
        let t = Instant::now();
        let mut left = blocks * BLOCK;
        while left > 0 {
            // SAFETY: null offsets: the file positions.
            let n = unsafe {
                libc::copy_file_range(
                    src,
                    std::ptr::null_mut(),
                    dst,
                    std::ptr::null_mut(),
                    left,
                    0,
                )
            };
            if check(n, "copy_file_range")? == 0 {
                break;
            }
            left -= n as usize;
        }
        let c = elapsed_ns(t) / blocks as f64;
        if r > 0 {
            loop_ns.push(l);
            cfr_ns.push(c);
        }
    }
    out.push(SingleCallCost {
        call: "copy_file_range".into(),
        unit: "4 KiB read + write iteration".into(),
        on: "file".into(),
        plain: Measure::from_samples(&mut loop_ns).context("no copy measure")?,
        single: Measure::from_samples(&mut cfr_ns).context("no copy measure")?,
    });

    // Vector calls: the cost of one element more (BATCH elements against 1), against the
    // plain call each element replaces.
    let mut bufs: Vec<Vec<u8>> = bufs(BLOCK);
    for (call, op) in [
        ("writev", "write"),
        ("readv", "read"),
        ("pwritev", "pwrite"),
        ("preadv", "pread"),
    ] {
        let fd = if op.contains("write") { dst } else { src };
        let mut samples = Vec::new();
        for r in 0..=mode.repeats() {
            let mut per_call = [0.0; 2];
            for (slot, k) in [(0, 1), (1, BATCH)] {
                if call == "writev" {
                    truncate(fd)?; // appends to a new file, as the plain write was measured
                }
                // SAFETY: our own descriptor.
                check(
                    unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } as isize,
                    "lseek",
                )?;
                let iov: Vec<libc::iovec> = bufs[..k]
                    .iter_mut()
                    .map(|b| libc::iovec {
                        iov_base: b.as_mut_ptr().cast(),
                        iov_len: BLOCK,
                    })
                    .collect();
                let calls = mode.ops() / BATCH;
                let t = Instant::now();
                for i in 0..calls {
                    let off = ((i * k * BLOCK) % (blocks * BLOCK / 2)) as libc::off_t;
                    // SAFETY: iov names k live buffers of BLOCK bytes.
                    let n = unsafe {
                        match call {
                            "writev" => libc::writev(fd, iov.as_ptr(), k as i32),
                            "readv" => libc::readv(fd, iov.as_ptr(), k as i32),
                            "pwritev" => libc::pwritev(fd, iov.as_ptr(), k as i32, off),
                            _ => libc::preadv(fd, iov.as_ptr(), k as i32, off),
                        }
                    };
                    check(n, call)?;
                }
                per_call[slot] = elapsed_ns(t) / calls as f64;
            }
            if r > 0 {
                samples.push((per_call[1] - per_call[0]) / (BATCH - 1) as f64);
            }
        }
        let Some(p) = plain(op) else { continue };
        out.push(SingleCallCost {
            call: call.into(),
            unit: format!("{op} (one {} KiB element more)", BLOCK / 1024),
            on: "file".into(),
            plain: p.plain,
            single: Measure::from_samples(&mut samples).context("no vector measure")?,
        });
    }

    // close_range of BATCH descriptors against 1, per descriptor more, against close. The
    // descriptors are taken with F_DUPFD (the kernel picks free ones), never dup2 onto numbers
    // that may be open, and close_range closes exactly those.
    let mut samples = Vec::new();
    let first = free_descriptor_base()?;
    for r in 0..=mode.repeats() {
        let mut per_call = [0.0; 2];
        for (slot, k) in [(0usize, 1usize), (1, BATCH)] {
            let calls = mode.ops() / BATCH;
            let mut ns = 0.0;
            for _ in 0..calls {
                let last = take_descriptors(src, first, k)?;
                let t = Instant::now();
                // SAFETY: first..=last are exactly the descriptors take_descriptors just made.
                let r = unsafe {
                    libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32)
                };
                ns += elapsed_ns(t);
                check(r as isize, "close_range")?;
            }
            per_call[slot] = ns / calls as f64;
        }
        if r > 0 {
            samples.push((per_call[1] - per_call[0]) / (BATCH - 1) as f64);
        }
    }
    if let Some(p) = plain("close") {
        out.push(SingleCallCost {
            call: "close_range".into(),
            unit: "close (one descriptor more)".into(),
            on: "file".into(),
            plain: p.plain,
            single: Measure::from_samples(&mut samples).context("no close_range measure")?,
        });
    }
    stream_single_calls(src, mode, ops, &mut out)?;
    for s in &out {
        progress(&format!(
            "{}: {:.0} ns per {} against {:.0} ns",
            s.call, s.single.median_ns, s.unit, s.plain.median_ns
        ));
    }
    Ok(out)
}

/// Where close_range's descriptors start: below the soft RLIMIT_NOFILE (and below 1024, so the
/// descriptor table does not grow), with room for BATCH of them.
fn free_descriptor_base() -> Result<i32> {
    // SAFETY: rlimit is plain data; getrlimit fills it.
    let mut l: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: l is a valid rlimit to fill.
    check(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } as isize,
        "getrlimit",
    )?;
    let limit = l.rlim_cur.min(1024) as i64;
    let base = limit - 2 * BATCH as i64;
    if base < 3 {
        anyhow::bail!("the descriptor limit ({limit}) leaves no room for {BATCH} descriptors");
    }
    Ok(base as i32)
}

/// Duplicates `src` `k` times onto the lowest free descriptors from `first` (the kernel picks
/// them); they must be first, first + 1, ... (else all are closed again and it is an error).
/// Returns the last.
fn take_descriptors(src: i32, first: i32, k: usize) -> Result<i32> {
    let mut taken: Vec<i32> = Vec::with_capacity(k);
    for j in 0..k {
        // SAFETY: duplicates our own descriptor onto a free number >= first + j.
        let fd = unsafe { libc::fcntl(src, libc::F_DUPFD, first + j as i32) };
        if fd < 0 || fd != first + j as i32 {
            for &t in taken.iter().chain((fd >= 0).then_some(&fd)) {
                // SAFETY: t is a descriptor this function just made.
                unsafe { libc::close(t) };
            }
            check(fd as isize, "fcntl(F_DUPFD)")?;
            anyhow::bail!("descriptors {first}.. are not free for the close_range measure");
        }
        taken.push(fd);
    }
    Ok(first + k as i32 - 1)
}

/// Reads exactly `len` bytes from `fd` (untimed draining of a pipe or socket).
fn drain(fd: RawFd, len: usize, buf: &mut [u8]) -> Result<()> {
    let mut left = len;
    while left > 0 {
        let want = left.min(buf.len());
        // SAFETY: buf holds at least `want` bytes.
        let n = check(
            unsafe { libc::read(fd, buf.as_mut_ptr().cast(), want) },
            "draining",
        )?;
        if n == 0 {
            bail!("end of stream while draining");
        }
        left -= n;
    }
    Ok(())
}

/// Writes all of `buf` to `fd` (untimed filling of a pipe or socket).
fn fill(fd: RawFd, buf: &[u8]) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the rest of buf is valid for reads.
        done += check(
            unsafe { libc::write(fd, buf[done..].as_ptr().cast(), buf.len() - done) },
            "filling",
        )?;
    }
    Ok(())
}

/// Room for `BATCH` blocks in a pipe (the default 64 KiB is just that; doubled for slack).
fn widen_pipe(fd: RawFd) -> Result<()> {
    // SAFETY: F_SETPIPE_SZ on our own pipe.
    check(
        unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, (2 * BATCH * BLOCK) as libc::c_int) } as isize,
        "F_SETPIPE_SZ",
    )?;
    Ok(())
}

/// The single calls of the pipe and socket replacements: splice (a pipe-to-pipe relay) and
/// sendfile (file to loopback TCP), each one call for `BATCH` blocks against the 4 KiB read +
/// write loop it replaces, per 4 KiB; sendmmsg and recvmmsg of `BATCH` 64-byte messages against
/// 1 on loopback TCP, per message more, against the plain sendmsg / recvmsg of the table. The
/// receiving end is drained (or the sending end filled) outside the timed calls.
fn stream_single_calls(
    file: RawFd,
    mode: Mode,
    ops: &[OpCost],
    out: &mut Vec<SingleCallCost>,
) -> Result<()> {
    let total = BATCH * BLOCK;
    let data = vec![0x5au8; total];
    let mut buf = vec![0u8; total];
    let calls = (mode.ops() / BATCH).max(1);

    // splice: pipe A -> pipe B, against read(A) + write(B) per 4 KiB.
    let (aw, ar) = pipe_pair()?;
    let (bw, br) = pipe_pair()?;
    for fd in [&aw, &bw] {
        widen_pipe(fd.as_raw_fd())?;
    }
    let (aw, ar, bw, br) = (
        aw.as_raw_fd(),
        ar.as_raw_fd(),
        bw.as_raw_fd(),
        br.as_raw_fd(),
    );
    let (mut plain, mut single) = (Vec::new(), Vec::new());
    for r in 0..=mode.repeats() {
        let (mut p, mut s1) = (0.0, 0.0);
        for _ in 0..calls {
            fill(aw, &data)?;
            let t = Instant::now();
            for _ in 0..BATCH {
                // SAFETY: buf holds BLOCK bytes.
                let n = check(
                    unsafe { libc::read(ar, buf.as_mut_ptr().cast(), BLOCK) },
                    "read",
                )?;
                // SAFETY: buf holds the n bytes read.
                check(unsafe { libc::write(bw, buf.as_ptr().cast(), n) }, "write")?;
            }
            p += elapsed_ns(t);
            drain(br, total, &mut buf)?;
            fill(aw, &data)?;
            let t = Instant::now();
            let mut left = total;
            while left > 0 {
                // SAFETY: null offsets: pipes have none.
                let n = unsafe {
                    libc::splice(ar, std::ptr::null_mut(), bw, std::ptr::null_mut(), left, 0)
                };
                if check(n, "splice")? == 0 {
                    bail!("splice moved nothing");
                }
                left -= n as usize;
            }
            s1 += elapsed_ns(t);
            drain(br, total, &mut buf)?;
        }
        if r > 0 {
            plain.push(p / (calls * BATCH) as f64);
            single.push(s1 / (calls * BATCH) as f64);
        }
    }
    out.push(SingleCallCost {
        call: "splice".into(),
        unit: "4 KiB read + write iteration".into(),
        on: "pipe".into(),
        plain: Measure::from_samples(&mut plain).context("no splice measure")?,
        single: Measure::from_samples(&mut single).context("no splice measure")?,
    });

    // sendfile: the page-cache file to loopback TCP, against read + write per 4 KiB.
    let (tx, rx) = tcp_pair()?;
    let (tx, rx) = (tx.as_raw_fd(), rx.as_raw_fd());
    let (mut plain, mut single) = (Vec::new(), Vec::new());
    for r in 0..=mode.repeats() {
        let (mut p, mut s1) = (0.0, 0.0);
        for _ in 0..calls {
            let t = Instant::now();
            for i in 0..BATCH {
                // SAFETY: buf holds BLOCK bytes.
                let n = check(
                    unsafe {
                        libc::pread(
                            file,
                            buf.as_mut_ptr().cast(),
                            BLOCK,
                            (i * BLOCK) as libc::off_t,
                        )
                    },
                    "pread",
                )?;
                // SAFETY: buf holds the n bytes read.
                check(unsafe { libc::write(tx, buf.as_ptr().cast(), n) }, "write")?;
            }
            p += elapsed_ns(t);
            drain(rx, total, &mut buf)?;
            let t = Instant::now();
            let (mut off, mut left): (libc::off_t, usize) = (0, total);
            while left > 0 {
                // SAFETY: off is ours; the descriptors are open.
                let n = unsafe { libc::sendfile(tx, file, &mut off, left) };
                if check(n, "sendfile")? == 0 {
                    bail!("sendfile sent nothing");
                }
                left -= n as usize;
            }
            s1 += elapsed_ns(t);
            drain(rx, total, &mut buf)?;
        }
        if r > 0 {
            plain.push(p / (calls * BATCH) as f64);
            single.push(s1 / (calls * BATCH) as f64);
        }
    }
    out.push(SingleCallCost {
        call: "sendfile".into(),
        unit: "4 KiB read + send iteration".into(),
        on: "tcp".into(),
        plain: Measure::from_samples(&mut plain).context("no sendfile measure")?,
        single: Measure::from_samples(&mut single).context("no sendfile measure")?,
    });

    // sendmmsg / recvmmsg: BATCH messages per call against 1, per message more.
    let plain_of = |op: &str| {
        ops.iter()
            .find(|o| o.op == op && o.on == "tcp" && o.variant.is_empty())
            .map(|o| o.plain)
    };
    let mut msgs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0x5a; MESSAGE]).collect();
    for (call, op) in [("sendmmsg", "sendmsg"), ("recvmmsg", "recvmsg")] {
        let mut samples = Vec::new();
        for r in 0..=mode.repeats() {
            let mut per_call = [0.0; 2];
            for (slot, k) in [(0usize, 1usize), (1, BATCH)] {
                let mut iovs: Vec<libc::iovec> = msgs
                    .iter_mut()
                    .map(|m| libc::iovec {
                        iov_base: m.as_mut_ptr().cast(),
                        iov_len: MESSAGE,
                    })
                    .collect();
                let mut hdrs: Vec<libc::mmsghdr> = iovs
                    .iter_mut()
                    .map(|iov| {
                        // SAFETY: mmsghdr is plain data.
                        let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                        h.msg_hdr.msg_iov = iov;
                        h.msg_hdr.msg_iovlen = 1;
                        h
                    })
                    .collect();
                let mut ns = 0.0;
                for _ in 0..calls {
                    if call == "recvmmsg" {
                        fill(tx, &data[..BATCH * MESSAGE])?;
                        // Everything queued before the timed receive (loopback delivers at
                        // once; the wait is bounded).
                        let mut queued: libc::c_int = 0;
                        for _ in 0..1000 {
                            // SAFETY: FIONREAD writes an int.
                            unsafe { libc::ioctl(rx, libc::FIONREAD, &mut queued) };
                            if queued as usize >= BATCH * MESSAGE {
                                break;
                            }
                            std::thread::yield_now();
                        }
                    }
                    let t = Instant::now();
                    for _ in 0..BATCH / k {
                        // SAFETY: hdrs[..k] point at live iovecs over live buffers.
                        let n = unsafe {
                            if call == "sendmmsg" {
                                libc::sendmmsg(tx, hdrs.as_mut_ptr(), k as u32, 0)
                            } else {
                                libc::recvmmsg(
                                    rx,
                                    hdrs.as_mut_ptr(),
                                    k as u32,
                                    libc::MSG_WAITFORONE,
                                    std::ptr::null_mut(),
                                )
                            }
                        };
                        if check(n as isize, call)? != k {
                            bail!("{call}: {n} of {k} messages");
                        }
                    }
                    ns += elapsed_ns(t);
                    if call == "sendmmsg" {
                        drain(rx, BATCH * MESSAGE, &mut buf)?;
                    }
                }
                // ns per call of k messages.
                per_call[slot] = ns / (calls * (BATCH / k)) as f64;
            }
            if r > 0 {
                samples.push((per_call[1] - per_call[0]) / (BATCH - 1) as f64);
            }
        }
        let Some(p) = plain_of(op) else { continue };
        out.push(SingleCallCost {
            call: call.into(),
            unit: format!("{op} (one {MESSAGE}-byte message more)"),
            on: "tcp".into(),
            plain: p,
            single: Measure::from_samples(&mut samples).context("no vector measure")?,
        });
    }
    Ok(())
}
