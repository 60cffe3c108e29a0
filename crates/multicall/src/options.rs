//! [`Options`]: how a ring is opened (size, fixed-file table, SQPOLL, registered ring fd), the
//! levers issue 16 measures one by one (README, "Where a multi-call wins").

use std::time::Duration;

/// How [`MultiCall::with_options`](crate::MultiCall::with_options) opens its ring.
/// [`MultiCall::new(n)`](crate::MultiCall::new) is `with_options(&Options::new(n))`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub(crate) entries: u32,
    pub(crate) file_slots: u32,
    pub(crate) sqpoll_idle_ms: Option<u32>,
    pub(crate) register_ring_fd: bool,
    pub(crate) spin: Duration,
}

impl Options {
    /// A ring of `entries` submission entries (1..=32768, rounded up to a power of two by the
    /// kernel): no fixed-file table, no SQPOLL, ring fd registered.
    pub fn new(entries: u32) -> Options {
        Options {
            entries,
            file_slots: 0,
            sqpoll_idle_ms: None,
            register_ring_fd: true,
            spin: Duration::from_micros(50),
        }
    }

    /// A fixed-file table of `slots` empty slots (direct descriptors): see
    /// [`Call::fixed`](crate::Call::fixed) and [`Call::into_slot`](crate::Call::into_slot).
    pub fn file_slots(mut self, slots: u32) -> Options {
        self.file_slots = slots;
        self
    }

    /// SQPOLL (`Some(idle_ms)`): a kernel thread polls the submission queue, so a batch needs no
    /// `io_uring_enter` while that thread is awake, and [`run`](crate::MultiCall::run) busy-polls
    /// the completion queue for up to [`spin`](Self::spin) before it sleeps in the kernel. The
    /// thread goes to sleep after `idle_ms` without work (the next batch then costs one enter to
    /// wake it). It burns a CPU while awake: [`MultiCall::sqpoll_cpu`](crate::MultiCall::sqpoll_cpu)
    /// says how much. A kernel that refuses SQPOLL is an error, not a silent fallback.
    pub fn sqpoll(mut self, idle_ms: Option<u32>) -> Options {
        self.sqpoll_idle_ms = idle_ms;
        self
    }

    /// SQPOLL only: how long a run busy-polls the completion queue before it waits in the kernel
    /// (default 50 µs).
    pub fn spin(mut self, spin: Duration) -> Options {
        self.spin = spin;
        self
    }

    /// Register the ring's own descriptor (`IORING_REGISTER_RING_FDS`, 5.18), so each
    /// `io_uring_enter` skips the descriptor lookup (default on; a kernel without it just skips).
    pub fn register_ring_fd(mut self, on: bool) -> Options {
        self.register_ring_fd = on;
        self
    }
}
