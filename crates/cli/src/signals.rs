//! SIGINT/SIGTERM set a stop flag so the tool can detach cleanly and print its last frame; which
//! signal came, and how many, tell how to end a command pkprof started (see `workload`).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
/// The last SIGINT or SIGTERM received (0: none), and how many were.
static LAST: AtomicI32 = AtomicI32::new(0);
static RECEIVED: AtomicUsize = AtomicUsize::new(0);
/// The dispositions pkprof inherited (SIG_DFL, or SIG_IGN in a background job), for commands it
/// starts: they must start as they would without pkprof.
static INHERITED_INT: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static INHERITED_TERM: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);

extern "C" fn on_signal(sig: libc::c_int) {
    LAST.store(sig, Ordering::SeqCst);
    RECEIVED.fetch_add(1, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

pub fn install() {
    // SAFETY: the handler only stores to atomics, which is async-signal-safe.
    unsafe {
        let int = libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        let term = libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        // A second install must not record pkprof's own handler as inherited.
        let ours = on_signal as *const () as libc::sighandler_t;
        if int != ours && int != libc::SIG_ERR {
            INHERITED_INT.store(int, Ordering::SeqCst);
        }
        if term != ours && term != libc::SIG_ERR {
            INHERITED_TERM.store(term, Ordering::SeqCst);
        }
    }
}

/// SIGINT and SIGTERM back to what pkprof inherited: in a forked child before its exec, or when
/// pkprof has nothing left to clean up and may die of them. Async-signal-safe (atomic loads and
/// signal(2)).
pub fn restore_inherited() {
    // SAFETY: signal(2) with a disposition pkprof itself received (SIG_DFL or SIG_IGN).
    unsafe {
        libc::signal(libc::SIGINT, INHERITED_INT.load(Ordering::SeqCst));
        libc::signal(libc::SIGTERM, INHERITED_TERM.load(Ordering::SeqCst));
    }
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The last SIGINT or SIGTERM pkprof received.
pub fn last_received() -> Option<libc::c_int> {
    Some(LAST.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// How many SIGINTs and SIGTERMs pkprof has received.
pub fn received_count() -> usize {
    RECEIVED.load(Ordering::SeqCst)
}

pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// SIGHUP received since the last `take_hup` (the agent re-reads its configuration).
static HUP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_hup(_sig: libc::c_int) {
    HUP.store(true, Ordering::SeqCst);
}

/// Catches SIGHUP (instead of dying of it) for `take_hup`.
pub fn install_hup() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGHUP, on_hup as *const () as libc::sighandler_t);
    }
}

/// Whether SIGHUP came since the last call.
pub fn take_hup() -> bool {
    HUP.swap(false, Ordering::SeqCst)
}
