//! SIGINT/SIGTERM set a stop flag so the tool can detach cleanly and print its last frame.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
/// The dispositions pkprof inherited (SIG_DFL, or SIG_IGN in a background job), for commands it
/// starts: they must start as they would without pkprof.
static INHERITED_INT: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static INHERITED_TERM: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub fn install() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
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

/// In a forked child before its exec: SIGINT and SIGTERM back to what pkprof inherited.
/// Async-signal-safe (atomic loads and signal(2)).
pub fn restore_inherited_in_child() {
    // SAFETY: signal(2) with a disposition pkprof itself received (SIG_DFL or SIG_IGN).
    unsafe {
        libc::signal(libc::SIGINT, INHERITED_INT.load(Ordering::SeqCst));
        libc::signal(libc::SIGTERM, INHERITED_TERM.load(Ordering::SeqCst));
    }
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}
