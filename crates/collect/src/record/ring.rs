//! The record ring buffer: decodes the kernel's sample and link records (pkprof.h) into the
//! attribution crate's events.

use std::time::Duration;

use libbpf_rs::{RingBuffer, RingBufferBuilder};
use pkprof_attribution::Truncation;
use pkprof_attribution::{LinkEvent, LinkTarget, SampleContext, SampleEvent, Served};

use crate::error::CollectError;
use crate::loader::Collector;
use crate::reader::comm_str;
use crate::skel::types::{
    pkprof_event_kind as Kind, pkprof_hold as Hold, pkprof_link, pkprof_link_to as LinkTo,
    pkprof_sample, pkprof_sample_ctx as Ctx, pkprof_sample_flags as Flags,
    pkprof_stack_flags as StackFlags,
};

const EV_SAMPLE: u32 = Kind::PKPROF_EV_SAMPLE.0;
const EV_LINK: u32 = Kind::PKPROF_EV_LINK.0;
const FLAG_KTHREAD: u32 = Flags::PKPROF_SAMPLE_KTHREAD.0;
const FLAG_TARGET: u32 = Flags::PKPROF_SAMPLE_TARGET.0;
const STACK_USER_TRUNCATED: u32 = StackFlags::PKPROF_STACK_USER_TRUNCATED.0;
const STACK_BYTES_SHORT: u32 = StackFlags::PKPROF_STACK_BYTES_SHORT.0;

/// One decoded ring buffer record.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordEvent {
    Sample(SampleEvent),
    Link(LinkEvent),
}

/// One u64 for a hold key (kind, value): the kind in the top byte. Values are kernel addresses
/// (top byte all ones) or segment numbers (< 2^56), so the low 56 bits keep them apart.
fn hold_key(kind: Hold, value: u64) -> u64 {
    ((kind.0 as u64) << 56) | (value & 0x00ff_ffff_ffff_ffff)
}

/// Addresses of a stack the kernel filled `len` bytes of (negative: an error).
fn stack(ips: &[u64], len: i32) -> Vec<u64> {
    let n = (len.max(0) as usize / 8).min(ips.len());
    ips[..n].to_vec()
}

fn served(pid: u32, tid: u32, cgroup_id: u64, flags: u32, comm: &[i8]) -> Served {
    Served {
        pid,
        tid,
        cgroup_id,
        comm: comm_str(comm),
        kthread: flags & FLAG_KTHREAD != 0,
        target: flags & FLAG_TARGET != 0,
    }
}

/// Decodes one record; None for a record of unknown kind or size.
pub fn decode(bytes: &[u8]) -> Option<RecordEvent> {
    let kind = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?);
    match kind {
        EV_SAMPLE => {
            let s = plain::from_bytes::<pkprof_sample>(bytes).ok()?;
            let context = match s.ctx {
                Ctx::PKPROF_SCTX_USER => SampleContext::User,
                Ctx::PKPROF_SCTX_KERNEL => SampleContext::Kernel,
                Ctx::PKPROF_SCTX_KWORKER => SampleContext::Kworker,
                Ctx::PKPROF_SCTX_HARDIRQ => SampleContext::HardIrq,
                Ctx::PKPROF_SCTX_SOFTIRQ => SampleContext::SoftIrq(s.vec as u8),
                _ => SampleContext::Idle,
            };
            let hold = if s.hold_kind == Hold::PKPROF_HOLD_NONE {
                0
            } else {
                hold_key(s.hold_kind, s.hold)
            };
            let served = (hold == 0 && s.pid != 0)
                .then(|| served(s.pid, s.tid, s.cgroup_id, s.flags, &s.comm));
            Some(RecordEvent::Sample(SampleEvent {
                cpu: s.cpu,
                time_ns: s.time_ns,
                cur_pid: s.cur_pid,
                cur_tid: s.cur_tid,
                current_comm: comm_str(&s.comm),
                served,
                hold,
                context,
                orig_ax: s.orig_ax,
                kstack: stack(&s.kstack, s.kstack_len),
                ustack: stack(&s.ustack, s.ustack_len),
                kstack_error: s.kstack_len < 0,
                ustack_error: s.ustack_len < 0,
                ustack_end: Some(Truncation::frame_pointer_walk(
                    s.stack_flags & STACK_USER_TRUNCATED != 0,
                )),
                user_ip: s.user_ip,
                user_sp: s.user_sp,
                user_bp: s.user_bp,
                ustack_bytes: bytes
                    .get(size_of::<pkprof_sample>()..)?
                    .get(..s.ustack_bytes_len as usize)?
                    .to_vec(),
                ustack_bytes_short: s.stack_flags & STACK_BYTES_SHORT != 0,
                build_ns: s.build_ns,
            }))
        }
        EV_LINK => {
            let l = plain::from_bytes::<pkprof_link>(bytes).ok()?;
            let to = match l.to_kind {
                LinkTo::PKPROF_LINK_THREAD => {
                    LinkTarget::Thread(served(l.pid, l.tid, l.cgroup_id, l.flags, &l.comm))
                }
                LinkTo::PKPROF_LINK_HOLD => LinkTarget::Hold(hold_key(l.to_hold_kind, l.to)),
                LinkTo::PKPROF_LINK_EXPIRED => LinkTarget::Expired,
                _ => LinkTarget::Kernel,
            };
            Some(RecordEvent::Link(LinkEvent {
                time_ns: l.time_ns,
                from: hold_key(l.from_kind, l.from),
                to,
            }))
        }
        _ => None,
    }
}

/// Reads the record ring buffer.
pub struct EventRing<'cb> {
    ring: RingBuffer<'cb>,
}

impl<'cb> EventRing<'cb> {
    /// Waits up to `timeout` for records and hands each decoded one to the callback given at
    /// creation.
    /// A signal (Ctrl-C) ends the wait early without an error.
    pub fn poll(&self, timeout: Duration) -> Result<(), CollectError> {
        match self.ring.poll(timeout) {
            Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => Ok(()),
            other => other.map_err(|e| CollectError::Read {
                map: "events",
                reason: e.to_string(),
            }),
        }
    }

    /// Hands over every record already in the buffer.
    pub fn drain(&self) -> Result<(), CollectError> {
        self.ring.consume().map_err(|e| CollectError::Read {
            map: "events",
            reason: e.to_string(),
        })
    }
}

impl Collector {
    /// A reader of the record ring buffer calling `on_event` for each record (undecodable
    /// records are counted by the caller through `None`).
    pub fn event_ring<'cb, F>(&self, mut on_event: F) -> Result<EventRing<'cb>, CollectError>
    where
        F: FnMut(Option<RecordEvent>) + 'cb,
    {
        let err = |e: libbpf_rs::Error| CollectError::Read {
            map: "events",
            reason: e.to_string(),
        };
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&self.skel.maps.events, move |bytes: &[u8]| {
                on_event(decode(bytes));
                0
            })
            .map_err(err)?;
        Ok(EventRing {
            ring: builder.build().map_err(err)?,
        })
    }
}
