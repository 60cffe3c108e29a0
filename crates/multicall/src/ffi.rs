//! The C API declared in `include/pkprof_multicall.h`: `mc_open`, `mc_open_sequential`,
//! `multi_call`, `mc_close` and helpers. Decodes `struct mc_call` arrays into [`Call`]s, maps
//! errors to negative errno, and never lets a panic cross the boundary.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_long, c_uint, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::call::{Call, Op};
use crate::{Error, MultiCall, Options};

/// Operation codes (`enum mc_op` in the header).
pub const MC_READ: c_int = 1;
/// `write(fd, buf, len)`.
pub const MC_WRITE: c_int = 2;
/// `pread(fd, buf, len, offset)`.
pub const MC_PREAD: c_int = 3;
/// `pwrite(fd, buf, len, offset)`.
pub const MC_PWRITE: c_int = 4;
/// `openat(dirfd, path, flags, mode)`.
pub const MC_OPENAT: c_int = 5;
/// `close(fd)`.
pub const MC_CLOSE: c_int = 6;
/// `fsync(fd)` / `fdatasync(fd)`.
pub const MC_FSYNC: c_int = 7;
/// `statx(dirfd, path, flags, mask, buf)`.
pub const MC_STATX: c_int = 8;
/// `sendmsg(fd, msg, flags)`.
pub const MC_SENDMSG: c_int = 9;
/// `recvmsg(fd, msg, flags)`.
pub const MC_RECVMSG: c_int = 10;
/// `args[1]` of `MC_FSYNC`: `fdatasync` instead of `fsync`.
pub const MC_FSYNC_DATASYNC: c_long = 1;
/// The operation code proper, in the low byte of `op`; the bits above are flags.
pub const MC_OP_MASK: c_int = 0xff;
/// Flag of `op`: the fd argument is a slot of the fixed-file table (`Call::fixed`).
pub const MC_FIXED: c_int = 0x100;
/// Flag of `op` for `MC_OPENAT`: `RESOLVE_CACHED` first (`Call::resolve_cached`).
pub const MC_RESOLVE_CACHED: c_int = 0x200;
/// Flag of `op` for `MC_OPENAT`: open into the slot in `args[4]` (`Call::into_slot`).
pub const MC_INTO_SLOT: c_int = 0x400;
/// `mc_open_opts` flag: SQPOLL (idle 1 s; the polling thread's CPU is the caller's).
pub const MC_OPEN_SQPOLL: c_int = 1;
/// `mc_open_opts` flag: do not register the ring's fd.
pub const MC_OPEN_NO_RING_FD: c_int = 2;

/// `struct mc_call`: one operation, its arguments, check flag and result slot.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct McCall {
    /// An `MC_*` operation code.
    pub op: c_int,
    /// Nonzero: a failure of this operation stops the batch.
    pub check: c_int,
    /// Arguments, per operation as documented in the header.
    pub args: [c_long; 6],
    /// Return value or `-errno`; `-ECANCELED` if the batch stopped before it.
    pub result: c_long,
}

// The header's layout (checked from C too, by tests/c_programs.rs).
const _: () = assert!(std::mem::size_of::<McCall>() == 64);
const _: () = assert!(std::mem::offset_of!(McCall, args) == 8);
const _: () = assert!(std::mem::offset_of!(McCall, result) == 56);

/// `struct mc_ring`: opaque to C.
pub struct McRing {
    mc: MultiCall,
    /// Reused between batches so a multi-call does not allocate.
    scratch: Vec<Call<'static>>,
}

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

fn fail_open(err: &Error) -> *mut McRing {
    let text = CString::new(err.to_string()).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = Some(text));
    set_errno(err.errno());
    std::ptr::null_mut()
}

fn boxed(mc: MultiCall) -> *mut McRing {
    Box::into_raw(Box::new(McRing {
        mc,
        scratch: Vec::new(),
    }))
}

/// Opens a multi-call ring with `entries` submission entries. NULL with errno set on failure
/// (`ENOSYS`/`EPERM`: no io_uring; `EINVAL`: bad size); `mc_last_error()` says why.
#[no_mangle]
pub extern "C" fn mc_open(entries: c_uint) -> *mut McRing {
    catch_unwind(|| match MultiCall::new(entries) {
        Ok(mc) => boxed(mc),
        Err(e) => fail_open(&e),
    })
    .unwrap_or_else(|_| {
        set_errno(libc::ENOTRECOVERABLE);
        std::ptr::null_mut()
    })
}

/// Opens a ring with options: `file_slots` fixed-file slots (0: none), `flags` an OR of
/// `MC_OPEN_*`. Falls back to nothing: NULL with errno set, as `mc_open`.
#[no_mangle]
pub extern "C" fn mc_open_opts(entries: c_uint, file_slots: c_uint, flags: c_int) -> *mut McRing {
    catch_unwind(|| {
        if flags & !(MC_OPEN_SQPOLL | MC_OPEN_NO_RING_FD) != 0 {
            return fail_open(&Error::InvalidArgument {
                index: 0,
                what: "unknown mc_open_opts flag",
            });
        }
        let opts = Options::new(entries)
            .file_slots(file_slots)
            .sqpoll((flags & MC_OPEN_SQPOLL != 0).then_some(1000))
            .register_ring_fd(flags & MC_OPEN_NO_RING_FD == 0);
        match MultiCall::with_options(&opts) {
            Ok(mc) => boxed(mc),
            Err(e) => fail_open(&e),
        }
    })
    .unwrap_or_else(|_| {
        set_errno(libc::ENOTRECOVERABLE);
        std::ptr::null_mut()
    })
}

/// Puts `count` descriptors into the fixed-file table from slot `first` on; 0 or -errno.
///
/// # Safety
/// `r` is NULL or a live handle; `fds` points to `count` ints.
#[no_mangle]
pub unsafe extern "C" fn mc_register_files(
    r: *mut McRing,
    first: c_uint,
    fds: *const c_int,
    count: c_int,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: by the caller's contract.
        let (Some(ring), false, true) = (unsafe { r.as_mut() }, fds.is_null(), count >= 0) else {
            return -libc::EINVAL;
        };
        // SAFETY: fds points to count ints (caller's contract).
        let fds = unsafe { std::slice::from_raw_parts(fds, count as usize) };
        match ring.mc.register_files(first, fds) {
            Ok(()) => 0,
            Err(e) => -e.errno(),
        }
    }))
    .unwrap_or(-libc::ENOTRECOVERABLE)
}

/// Kernel crossings made by `r` so far (`MultiCall::enters`); -EINVAL for NULL.
///
/// # Safety
/// `r` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mc_enters(r: *const McRing) -> i64 {
    // SAFETY: by the caller's contract.
    match unsafe { r.as_ref() } {
        None => -i64::from(libc::EINVAL),
        Some(r) => r.mc.enters() as i64,
    }
}

/// Opens the fallback: same semantics, one plain system call per operation.
#[no_mangle]
pub extern "C" fn mc_open_sequential() -> *mut McRing {
    catch_unwind(|| boxed(MultiCall::sequential())).unwrap_or_else(|_| {
        set_errno(libc::ENOTRECOVERABLE);
        std::ptr::null_mut()
    })
}

/// Why the last `mc_open` on this thread failed (NULL if none did). Valid until the next failing
/// `mc_open` on the thread.
#[no_mangle]
pub extern "C" fn mc_last_error() -> *const c_char {
    catch_unwind(|| {
        LAST_ERROR.with(|slot| {
            slot.borrow()
                .as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr())
        })
    })
    .unwrap_or(std::ptr::null())
}

/// Largest batch of `r`: its ring entries, 0 for the sequential fallback (no limit), -EINVAL for
/// NULL.
///
/// # Safety
/// `r` is NULL or a live handle from `mc_open*`.
#[no_mangle]
pub unsafe extern "C" fn mc_capacity(r: *const McRing) -> c_int {
    // SAFETY: by the caller's contract r is NULL or live.
    match unsafe { r.as_ref() } {
        None => -libc::EINVAL,
        Some(r) => {
            r.mc.capacity()
                .map_or(0, |c| c.min(c_int::MAX as usize) as c_int)
        }
    }
}

/// Runs `count` operations in one kernel crossing. Returns the 1-based index of the first
/// checked failure, or `count + 1`; negative errno for bad input (nothing submitted).
///
/// # Safety
/// `r` is NULL or a live handle, not used concurrently (a ring from `mc_open` answers -EEXIST on
/// another thread than its opener); `calls` is NULL or points to
/// `count` `mc_call`s whose pointer arguments are valid for the operation, as in the system call.
#[no_mangle]
pub unsafe extern "C" fn multi_call(r: *mut McRing, count: c_int, calls: *mut McCall) -> c_int {
    // SAFETY: forwarded caller contract.
    catch_unwind(AssertUnwindSafe(|| unsafe {
        multi_call_inner(r, count, calls)
    }))
    .unwrap_or(-libc::ENOTRECOVERABLE)
}

unsafe fn multi_call_inner(r: *mut McRing, count: c_int, calls: *mut McCall) -> c_int {
    if count <= 0 {
        return -libc::EINVAL;
    }
    let mut index = [0usize];
    // SAFETY: forwarded caller contract.
    match unsafe { run_inner(r, count, calls, &[count as usize], &mut index) } {
        Ok(()) => index[0] as c_int,
        Err(e) => e,
    }
}

/// Runs `nchains` independent multi-calls in one kernel crossing: `calls` cut into chains of
/// `lens[0]`, `lens[1]`, ... calls (their sum is `count`). `index[i]` gets chain i's 1-based index
/// of its first checked failure, or `lens[i] + 1`. Returns 0, or a negative errno for bad input
/// (nothing submitted).
///
/// # Safety
/// As `multi_call`; `lens` and `index` point to `nchains` ints each.
#[no_mangle]
pub unsafe extern "C" fn multi_call_chains(
    r: *mut McRing,
    count: c_int,
    calls: *mut McCall,
    nchains: c_int,
    lens: *const c_int,
    index: *mut c_int,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        if count <= 0 || nchains <= 0 || lens.is_null() || index.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: lens and index point to nchains ints (caller's contract).
        let (lens, index) = unsafe {
            (
                std::slice::from_raw_parts(lens, nchains as usize),
                std::slice::from_raw_parts_mut(index, nchains as usize),
            )
        };
        let Ok(lens): Result<Vec<usize>, _> = lens.iter().map(|&l| usize::try_from(l)).collect()
        else {
            return -libc::EINVAL;
        };
        let mut out = vec![0usize; lens.len()];
        // SAFETY: forwarded caller contract.
        match unsafe { run_inner(r, count, calls, &lens, &mut out) } {
            Ok(()) => {
                for (slot, i) in index.iter_mut().zip(out) {
                    *slot = i as c_int;
                }
                0
            }
            Err(e) => e,
        }
    }))
    .unwrap_or(-libc::ENOTRECOVERABLE)
}

/// Decodes and runs a batch; `Err` is the negative errno to return.
unsafe fn run_inner(
    r: *mut McRing,
    count: c_int,
    calls: *mut McCall,
    lens: &[usize],
    index: &mut [usize],
) -> Result<(), c_int> {
    // SAFETY: by the caller's contract r is NULL or live and not used concurrently.
    let (Some(ring), false) = (unsafe { r.as_mut() }, calls.is_null()) else {
        return Err(-libc::EINVAL);
    };
    // SAFETY: calls is non-null and points to count mc_calls (caller's contract).
    let slots = unsafe { std::slice::from_raw_parts_mut(calls, count as usize) };
    ring.scratch.clear();
    for (i, slot) in slots.iter().enumerate() {
        match decode_call(slot, i + 1) {
            Ok(call) => ring.scratch.push(call.check(slot.check != 0)),
            Err(e) => {
                ring.scratch.clear();
                return Err(-e.errno());
            }
        }
    }
    let outcome = ring.mc.run_chains(&mut ring.scratch, lens, index);
    for (slot, call) in slots.iter_mut().zip(&ring.scratch) {
        if let Some(result) = call.result {
            slot.result = result as c_long;
        }
    }
    ring.scratch.clear();
    outcome.map_err(|e| -e.errno())
}

/// The call an `mc_call` describes, with the flags of its `op` applied.
fn decode_call(c: &McCall, index: usize) -> Result<Call<'static>, Error> {
    let flags = c.op & !MC_OP_MASK;
    if flags & !(MC_FIXED | MC_RESOLVE_CACHED | MC_INTO_SLOT) != 0 {
        return Err(Error::Unsupported { index, code: c.op });
    }
    let plain = McCall {
        op: c.op & MC_OP_MASK,
        ..*c
    };
    let mut call = Call::from_op(decode(&plain, index)?);
    if flags & MC_FIXED != 0 {
        call = call.fixed();
    }
    if flags & MC_RESOLVE_CACHED != 0 {
        call = call.resolve_cached();
    }
    if flags & MC_INTO_SLOT != 0 {
        let slot = u32::try_from(c.args[4]).map_err(|_| Error::InvalidArgument {
            index,
            what: "slot out of range",
        })?;
        call = call.into_slot(slot);
    }
    Ok(call)
}

/// The operation an `mc_call` describes (`index` is 1-based, for errors).
fn decode(c: &McCall, index: usize) -> Result<Op, Error> {
    let bad = |what| Error::InvalidArgument { index, what };
    let a = c.args;
    let int = |v: c_long, what| i32::try_from(v).map_err(|_| bad(what));
    let fd = |v| int(v, "file descriptor out of int range");
    let len = |v: c_long| usize::try_from(v).map_err(|_| bad("negative length"));
    let offset = |v: c_long| u64::try_from(v).map_err(|_| bad("negative offset"));
    let op = match c.op {
        MC_READ => Op::Read {
            fd: fd(a[0])?,
            buf: a[1] as *mut u8,
            len: len(a[2])?,
            offset: None,
        },
        MC_WRITE => Op::Write {
            fd: fd(a[0])?,
            buf: a[1] as *const u8,
            len: len(a[2])?,
            offset: None,
        },
        MC_PREAD => Op::Read {
            fd: fd(a[0])?,
            buf: a[1] as *mut u8,
            len: len(a[2])?,
            offset: Some(offset(a[3])?),
        },
        MC_PWRITE => Op::Write {
            fd: fd(a[0])?,
            buf: a[1] as *const u8,
            len: len(a[2])?,
            offset: Some(offset(a[3])?),
        },
        MC_OPENAT => Op::OpenAt {
            dirfd: fd(a[0])?,
            path: a[1] as *const c_char,
            flags: int(a[2], "open flags out of int range")?,
            mode: u32::try_from(a[3]).map_err(|_| bad("mode out of range"))?,
        },
        MC_CLOSE => Op::Close { fd: fd(a[0])? },
        MC_FSYNC => Op::Fsync {
            fd: fd(a[0])?,
            datasync: match a[1] {
                0 => false,
                MC_FSYNC_DATASYNC => true,
                _ => return Err(bad("fsync flags must be 0 or MC_FSYNC_DATASYNC")),
            },
        },
        MC_STATX => Op::Statx {
            dirfd: fd(a[0])?,
            path: a[1] as *const c_char,
            flags: int(a[2], "statx flags out of int range")?,
            mask: u32::try_from(a[3]).map_err(|_| bad("statx mask out of range"))?,
            buf: a[4] as *mut libc::statx,
        },
        MC_SENDMSG => Op::SendMsg {
            fd: fd(a[0])?,
            msg: a[1] as *const libc::msghdr,
            flags: int(a[2], "message flags out of int range")?,
        },
        MC_RECVMSG => Op::RecvMsg {
            fd: fd(a[0])?,
            msg: a[1] as *mut libc::msghdr,
            flags: int(a[2], "message flags out of int range")?,
        },
        code => return Err(Error::Unsupported { index, code }),
    };
    Ok(op)
}

/// Closes a handle from `mc_open*` (NULL is ignored). Nothing is in flight between calls.
///
/// # Safety
/// `r` is NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn mc_close(r: *mut McRing) {
    if r.is_null() {
        return;
    }
    // SAFETY: r came from Box::into_raw in mc_open* and is closed once (caller's contract).
    let ring = unsafe { Box::from_raw(r) };
    // A panic in a destructor must not unwind into C; the handle is gone either way.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(ring)));
}
