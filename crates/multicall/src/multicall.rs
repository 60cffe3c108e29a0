//! [`MultiCall`]: the handle callers hold, its two engines (io_uring, sequential), and the checks
//! every batch passes before any operation reaches the kernel.

use std::marker::PhantomData;

use crate::call::{first_checked_failure, Call};
use crate::uring::Ring;
use crate::{sequential, Error};

/// Runs batches of system calls with the paper's multi-call semantics (see the crate docs).
///
/// Belongs to the thread that created it (`!Send`): the ring is set up single-issuer, and the
/// kernel refuses submissions from another thread.
pub struct MultiCall {
    engine: Engine,
    _thread_bound: PhantomData<*const ()>,
}

enum Engine {
    Ring(Box<Ring>),
    Sequential,
}

impl MultiCall {
    /// A multi-call on a new io_uring with `entries` submission entries (1..=32768; the kernel
    /// rounds up to a power of two). A batch may hold up to [`capacity`](Self::capacity)
    /// operations. Fails with [`Error::Unavailable`] when the kernel refuses io_uring.
    pub fn new(entries: u32) -> Result<MultiCall, Error> {
        Ok(MultiCall {
            engine: Engine::Ring(Box::new(Ring::new(entries)?)),
            _thread_bound: PhantomData,
        })
    }

    /// The documented fallback: the same semantics with one plain system call per operation
    /// (one kernel crossing each instead of one per batch). Never fails; no size limit.
    pub fn sequential() -> MultiCall {
        MultiCall {
            engine: Engine::Sequential,
            _thread_bound: PhantomData,
        }
    }

    /// [`new`](Self::new), or [`sequential`](Self::sequential) when io_uring is unavailable.
    /// Other errors (bad size, out of memory) are returned.
    pub fn new_or_sequential(entries: u32) -> Result<MultiCall, Error> {
        match MultiCall::new(entries) {
            Err(Error::Unavailable { .. }) => Ok(MultiCall::sequential()),
            other => other,
        }
    }

    /// Whether this runs operations one by one (the fallback).
    pub fn is_sequential(&self) -> bool {
        matches!(self.engine, Engine::Sequential)
    }

    /// The largest batch: the ring's submission entries (`None`: unlimited, sequential).
    pub fn capacity(&self) -> Option<usize> {
        match &self.engine {
            Engine::Ring(ring) => Some(ring.capacity()),
            Engine::Sequential => None,
        }
    }

    /// Runs `calls` in order in one kernel crossing and fills every result slot. Returns the
    /// 1-based index of the first checked operation that failed, or `calls.len() + 1` if none
    /// did. Errors mean nothing was submitted, except [`Error::Submit`] (see there).
    pub fn run(&mut self, calls: &mut [Call<'_>]) -> Result<usize, Error> {
        if calls.is_empty() {
            return Err(Error::EmptyBatch);
        }
        if let Some(capacity) = self.capacity() {
            if calls.len() > capacity {
                return Err(Error::BatchTooLarge {
                    len: calls.len(),
                    capacity,
                });
            }
        }
        for (i, call) in calls.iter().enumerate() {
            call.validate(i + 1)?;
        }
        for call in calls.iter_mut() {
            call.result = None;
        }
        match &mut self.engine {
            Engine::Ring(ring) => ring.run(calls)?,
            Engine::Sequential => sequential::run(calls),
        }
        Ok(first_checked_failure(calls))
    }
}

impl std::fmt::Debug for MultiCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiCall")
            .field("sequential", &self.is_sequential())
            .field("capacity", &self.capacity())
            .finish()
    }
}
