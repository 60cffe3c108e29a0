//! The record ring buffer: decodes the kernel's sample and link records (pkprof.h) into the
//! attribution crate's events.

use std::time::Duration;

use libbpf_rs::{RingBuffer, RingBufferBuilder};
use pkprof_attribution::BlockReason;
use pkprof_attribution::Truncation;
use pkprof_attribution::{
    LinkEvent, LinkTarget, OffCpuEvent, PyRawFrame, PyWalk, SampleContext, SampleEvent, Served,
    WakerEvent,
};

use crate::error::CollectError;
use crate::loader::Collector;
use crate::reader::comm_str;
use crate::skel::types::{
    pkprof_event_kind as Kind, pkprof_exec, pkprof_hold as Hold, pkprof_link,
    pkprof_link_to as LinkTo, pkprof_offcpu, pkprof_py_frame,
    pkprof_py_frame_flags as PyFrameFlags, pkprof_py_frames, pkprof_py_state as PyState,
    pkprof_sample, pkprof_sample_ctx as Ctx, pkprof_sample_flags as Flags,
    pkprof_stack_flags as StackFlags, pkprof_waker, pkprof_waker_flags as WakerFlags,
};

const EV_SAMPLE: u32 = Kind::PKPROF_EV_SAMPLE.0;
const EV_LINK: u32 = Kind::PKPROF_EV_LINK.0;
const EV_OFFCPU: u32 = Kind::PKPROF_EV_OFFCPU.0;
const EV_EXEC: u32 = Kind::PKPROF_EV_EXEC.0;
const WAKER_WAS_BLOCKED: u32 = WakerFlags::PKPROF_WAKER_WAS_BLOCKED.0;
const WAKER_KTHREAD: u32 = WakerFlags::PKPROF_WAKER_KTHREAD.0;
const FLAG_KTHREAD: u32 = Flags::PKPROF_SAMPLE_KTHREAD.0;
const FLAG_TARGET: u32 = Flags::PKPROF_SAMPLE_TARGET.0;
const STACK_USER_TRUNCATED: u32 = StackFlags::PKPROF_STACK_USER_TRUNCATED.0;
const STACK_BYTES_SHORT: u32 = StackFlags::PKPROF_STACK_BYTES_SHORT.0;

/// One decoded ring buffer record.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordEvent {
    Sample(SampleEvent),
    Link(LinkEvent),
    OffCpu(Box<OffCpuEvent>),
    /// A process looked at before ran a new image (execve): look at it again.
    Exec {
        pid: u32,
    },
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

const PY_FRAME_ENTRY: u32 = PyFrameFlags::PKPROF_PY_FRAME_ENTRY.0;
/// Frames a walk keeps (PKPROF_MAX_PY_FRAMES: the length of `struct pkprof_py_frames`).
const MAX_PY_FRAMES: u32 = (size_of::<pkprof_py_frames>() / size_of::<pkprof_py_frame>()) as u32;

const PY_FRAME_BYTES: usize = size_of::<pkprof_py_frame>();

/// The `len` Python frames at the start of `after` (the bytes that follow a record) and how the
/// walk went; None when fewer bytes follow than `len` frames take, or more frames are claimed
/// than a walk keeps.
fn python(after: &[u8], len: u32, state: u32) -> Option<(Vec<PyRawFrame>, PyWalk)> {
    let walk = match PyState(state) {
        PyState::PKPROF_PY_OK => PyWalk::Complete,
        PyState::PKPROF_PY_NO_THREAD => PyWalk::NoThread,
        PyState::PKPROF_PY_READ_FAULT => PyWalk::ReadFault,
        PyState::PKPROF_PY_DEPTH => PyWalk::DepthLimit,
        _ => PyWalk::None,
    };
    if len > MAX_PY_FRAMES {
        return None;
    }
    let bytes = after.get(..len as usize * PY_FRAME_BYTES)?;
    let frames = bytes
        .chunks_exact(PY_FRAME_BYTES)
        .map(|b| {
            // The frames follow an 8-aligned record of a multiple of 8 bytes: aligned.
            let f = plain::from_bytes::<pkprof_py_frame>(b).ok()?;
            Some(PyRawFrame {
                code: f.code,
                instr: f.instr,
                entry: f.flags & PY_FRAME_ENTRY != 0,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((frames, walk))
}

/// A sample record's fields; `after`: the bytes that follow the record (its Python frames, then
/// its user stack's bytes).
fn sample(s: &pkprof_sample, after: &[u8]) -> Option<SampleEvent> {
    let context = context(s.ctx, s.vec);
    let hold = if s.hold_kind == Hold::PKPROF_HOLD_NONE {
        0
    } else {
        hold_key(s.hold_kind, s.hold)
    };
    let served =
        (hold == 0 && s.pid != 0).then(|| served(s.pid, s.tid, s.cgroup_id, s.flags, &s.comm));
    let (python, python_walk) = python(after, s.py_len, s.py_state)?;
    let after = &after[python.len() * PY_FRAME_BYTES..];
    Some(SampleEvent {
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
        ustack_bytes: after.get(..s.ustack_bytes_len as usize)?.to_vec(),
        ustack_bytes_short: s.stack_flags & STACK_BYTES_SHORT != 0,
        build_ns: s.build_ns,
        python,
        python_walk,
    })
}

fn waker(w: &pkprof_waker) -> WakerEvent {
    WakerEvent {
        pid: w.pid,
        tid: w.tid,
        comm: comm_str(&w.comm),
        context: context(w.ctx, w.vec),
        kthread: w.flags & WAKER_KTHREAD != 0,
        blocked: (w.flags & WAKER_WAS_BLOCKED != 0)
            .then(|| (w.blocked_ns, BlockReason::from_index(w.reason))),
    }
}

fn context(ctx: Ctx, vec: u32) -> SampleContext {
    match ctx {
        Ctx::PKPROF_SCTX_USER => SampleContext::User,
        Ctx::PKPROF_SCTX_KERNEL => SampleContext::Kernel,
        Ctx::PKPROF_SCTX_KWORKER => SampleContext::Kworker,
        Ctx::PKPROF_SCTX_HARDIRQ => SampleContext::HardIrq,
        Ctx::PKPROF_SCTX_SOFTIRQ => SampleContext::SoftIrq(vec as u8),
        _ => SampleContext::Idle,
    }
}

/// Decodes one record; None for a record of unknown kind or size.
pub fn decode(bytes: &[u8]) -> Option<RecordEvent> {
    let kind = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?);
    match kind {
        EV_SAMPLE => {
            let s = plain::from_bytes::<pkprof_sample>(bytes).ok()?;
            let after = bytes.get(size_of::<pkprof_sample>()..)?;
            Some(RecordEvent::Sample(sample(s, after)?))
        }
        EV_OFFCPU => {
            let o = plain::from_bytes::<pkprof_offcpu>(bytes).ok()?;
            let after = bytes.get(size_of::<pkprof_offcpu>()..)?;
            let n = (o.nr_chain as usize).min(o.chain.len());
            Some(RecordEvent::OffCpu(Box::new(OffCpuEvent {
                sample: sample(&o.s, after)?,
                off_ns: o.off_ns,
                offcpu_ns: o.offcpu_ns,
                blocked_ns: o.blocked_ns,
                weight_ns: o.weight_ns,
                reason: BlockReason::from_index(o.reason),
                chain: o.chain[..n].iter().map(waker).collect(),
                waker_kstack: stack(&o.waker_kstack, o.waker_kstack_len),
                waker_ustack: stack(&o.waker_ustack, o.waker_ustack_len),
            })))
        }
        EV_EXEC => {
            let e = plain::from_bytes::<pkprof_exec>(bytes).ok()?;
            Some(RecordEvent::Exec { pid: e.pid })
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
            other => other.map_err(CollectError::reading("events")),
        }
    }

    /// Hands over every record already in the buffer.
    pub fn drain(&self) -> Result<(), CollectError> {
        self.ring.consume().map_err(CollectError::reading("events"))
    }
}

impl Collector {
    /// A reader of the record ring buffer calling `on_event` for each record (undecodable
    /// records are counted by the caller through `None`).
    pub fn event_ring<'cb, F>(&self, mut on_event: F) -> Result<EventRing<'cb>, CollectError>
    where
        F: FnMut(Option<RecordEvent>) + 'cb,
    {
        let err = CollectError::reading("events");
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&self.skel.maps.events, move |bytes: &[u8]| {
                on_event(decode(bytes));
                0
            })
            .map_err(&err)?;
        Ok(EventRing {
            ring: builder.build().map_err(&err)?,
        })
    }
}

#[cfg(test)]
mod tests {
    //! The decoder on records built as the kernel writes them: a record in an 8-aligned buffer
    //! (the ring's alignment), optionally followed by stack bytes.
    use super::*;

    /// A zeroed, 8-aligned buffer of `len` bytes.
    fn buffer(len: usize) -> Vec<u64> {
        vec![0u64; len.div_ceil(8)]
    }

    fn bytes(buf: &[u64], len: usize) -> &[u8] {
        assert!(len <= buf.len() * 8);
        // SAFETY: u64s are plain bytes; `len` is at most the buffer's size in bytes (checked).
        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len) }
    }

    fn bytes_mut(buf: &mut [u64]) -> &mut [u8] {
        // SAFETY: as above, over the whole buffer.
        unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) }
    }

    fn set_comm(comm: &mut [i8], name: &str) {
        for (c, b) in comm.iter_mut().zip(name.bytes()) {
            *c = b as i8;
        }
    }

    const SAMPLE: usize = size_of::<pkprof_sample>();

    /// A softirq sample served to pid 100 / tid 101 with two kernel and three user addresses,
    /// followed by `stack_bytes` bytes of user stack (0x00, 0x01, ...).
    fn sample_record(stack_bytes: usize) -> (Vec<u64>, usize) {
        let len = SAMPLE + stack_bytes;
        let mut buf = buffer(len);
        let raw = bytes_mut(&mut buf);
        for (i, b) in raw[SAMPLE..len].iter_mut().enumerate() {
            *b = i as u8;
        }
        let s = plain::from_mut_bytes::<pkprof_sample>(&mut raw[..SAMPLE]).unwrap();
        s.kind = Kind::PKPROF_EV_SAMPLE;
        s.cpu = 1;
        s.time_ns = 5_000;
        s.cur_pid = 7;
        s.cur_tid = 8;
        s.pid = 100;
        s.tid = 101;
        s.cgroup_id = 42;
        s.ctx = Ctx::PKPROF_SCTX_SOFTIRQ;
        s.vec = 3;
        s.flags = FLAG_TARGET;
        s.orig_ax = -1;
        s.kstack[..2].copy_from_slice(&[0xffff_ffff_8100_0010, 0xffff_ffff_8100_0020]);
        s.kstack_len = 16;
        s.ustack[..3].copy_from_slice(&[0x40_1000, 0x40_2000, 0x40_3000]);
        s.ustack_len = 24;
        s.stack_flags = STACK_USER_TRUNCATED;
        s.user_ip = 0x40_1000;
        s.user_sp = 0x7ffd_0000;
        s.user_bp = 0x7ffd_0040;
        s.ustack_bytes_len = stack_bytes as u32;
        s.build_ns = 1234;
        set_comm(&mut s.comm, "server");
        (buf, len)
    }

    #[test]
    fn decodes_a_sample_with_its_stack_bytes() {
        let (buf, len) = sample_record(16);
        let Some(RecordEvent::Sample(s)) = decode(bytes(&buf, len)) else {
            panic!("not decoded as a sample");
        };
        let served = Served {
            pid: 100,
            tid: 101,
            cgroup_id: 42,
            comm: "server".into(),
            kthread: false,
            target: true,
        };
        assert_eq!(
            s,
            SampleEvent {
                cpu: 1,
                time_ns: 5_000,
                cur_pid: 7,
                cur_tid: 8,
                current_comm: "server".into(),
                served: Some(served),
                hold: 0,
                context: SampleContext::SoftIrq(3),
                orig_ax: -1,
                kstack: vec![0xffff_ffff_8100_0010, 0xffff_ffff_8100_0020],
                ustack: vec![0x40_1000, 0x40_2000, 0x40_3000],
                kstack_error: false,
                ustack_error: false,
                // The frame-pointer walk went wrong (STACK_USER_TRUNCATED).
                ustack_end: Some(Truncation::BadFrame),
                user_ip: 0x40_1000,
                user_sp: 0x7ffd_0000,
                user_bp: 0x7ffd_0040,
                ustack_bytes: (0..16).collect(),
                ustack_bytes_short: false,
                build_ns: 1234,
                python: Vec::new(),
                python_walk: PyWalk::None,
            }
        );
    }

    /// A sample record followed by `frames` Python frames (code, instr, flags), then 8 bytes
    /// of user stack (0x00..0x07).
    fn python_record(frames: &[(u64, u64, u32)], py_len: u32) -> (Vec<u64>, usize) {
        const F: usize = size_of::<pkprof_py_frame>();
        let len = SAMPLE + frames.len() * F + 8;
        let mut buf = buffer(len);
        let (record, _) = sample_record(0);
        let raw = bytes_mut(&mut buf);
        raw[..SAMPLE].copy_from_slice(bytes(&record, SAMPLE));
        for (i, &(code, instr, flags)) in frames.iter().enumerate() {
            let at = SAMPLE + i * F;
            let f = plain::from_mut_bytes::<pkprof_py_frame>(&mut raw[at..at + F]).unwrap();
            f.code = code;
            f.instr = instr;
            f.flags = flags;
        }
        for (i, b) in raw[len - 8..len].iter_mut().enumerate() {
            *b = i as u8;
        }
        let s = plain::from_mut_bytes::<pkprof_sample>(&mut raw[..SAMPLE]).unwrap();
        s.py_len = py_len;
        s.py_state = PyState::PKPROF_PY_DEPTH.0;
        s.ustack_bytes_len = 8;
        (buf, len)
    }

    #[test]
    fn python_frames_follow_the_record_before_its_stack_bytes() {
        let frames = [
            (0x7f00_1000, 0x7f00_1040, 0),
            (0x7f00_2000, 0x7f00_2010, PY_FRAME_ENTRY),
        ];
        let (buf, len) = python_record(&frames, 2);
        let Some(RecordEvent::Sample(s)) = decode(bytes(&buf, len)) else {
            panic!("not decoded as a sample");
        };
        assert_eq!(s.python_walk, PyWalk::DepthLimit);
        assert_eq!(
            s.python,
            vec![
                PyRawFrame {
                    code: 0x7f00_1000,
                    instr: 0x7f00_1040,
                    entry: false
                },
                PyRawFrame {
                    code: 0x7f00_2000,
                    instr: 0x7f00_2010,
                    entry: true
                },
            ]
        );
        // The stack bytes start after the frames, not after the record.
        assert_eq!(s.ustack_bytes, (0..8).collect::<Vec<u8>>());
    }

    #[test]
    fn python_frames_claimed_beyond_the_record_are_not_decoded() {
        // Two frames present, three claimed: the stack bytes would be read as a frame.
        let frames = [(0x10, 0x20, 0), (0x30, 0x40, 0)];
        let (buf, len) = python_record(&frames, 3);
        assert_eq!(decode(bytes(&buf, len)), None);
        // More than a walk keeps, whatever follows: refused before any allocation.
        let (buf, len) = python_record(&frames, u32::MAX);
        assert_eq!(decode(bytes(&buf, len)), None);
    }

    #[test]
    fn a_held_sample_has_no_served_thread_and_stack_errors_are_flagged() {
        let (mut buf, len) = sample_record(0);
        let s = plain::from_mut_bytes::<pkprof_sample>(&mut bytes_mut(&mut buf)[..SAMPLE]).unwrap();
        s.hold_kind = Hold::PKPROF_HOLD_SOCK;
        s.hold = 0xffff_8880_1234_5678;
        s.kstack_len = -14; // -EFAULT
        s.ustack_len = -14;
        s.ctx = Ctx::PKPROF_SCTX_KERNEL;
        s.stack_flags = STACK_BYTES_SHORT;
        let Some(RecordEvent::Sample(s)) = decode(bytes(&buf, len)) else {
            panic!("not decoded as a sample");
        };
        // The kind in the top byte, the address's low 56 bits below it.
        assert_eq!(s.hold, (2 << 56) | 0x00ff_8880_1234_5678);
        assert_eq!(s.served, None);
        assert_eq!(s.context, SampleContext::Kernel);
        assert!(s.kstack.is_empty() && s.kstack_error);
        assert!(s.ustack.is_empty() && s.ustack_error);
        // A walk that did not go wrong is never called complete.
        assert_eq!(s.ustack_end, Some(Truncation::NoUnwindInfo));
        assert!(s.ustack_bytes_short);
    }

    #[test]
    fn a_stack_length_beyond_its_array_is_clamped() {
        let (mut buf, len) = sample_record(0);
        let s = plain::from_mut_bytes::<pkprof_sample>(&mut bytes_mut(&mut buf)[..SAMPLE]).unwrap();
        s.kstack_len = i32::MAX;
        let Some(RecordEvent::Sample(s)) = decode(bytes(&buf, len)) else {
            panic!("not decoded as a sample");
        };
        assert_eq!(s.kstack.len(), 127); // PKPROF_MAX_STACK
    }

    #[test]
    fn decodes_links_to_each_target() {
        let link = |to_kind: LinkTo| {
            let mut buf = buffer(size_of::<pkprof_link>());
            let l = plain::from_mut_bytes::<pkprof_link>(bytes_mut(&mut buf)).unwrap();
            l.kind = Kind::PKPROF_EV_LINK;
            l.to_kind = to_kind;
            l.time_ns = 9_000;
            l.from_kind = Hold::PKPROF_HOLD_SEGMENT;
            l.from = (1 << 48) | 5;
            l.to_hold_kind = Hold::PKPROF_HOLD_SKB;
            l.to = 0xffff_8880_0000_1000;
            l.pid = 100;
            l.tid = 102;
            l.cgroup_id = 42;
            l.flags = FLAG_KTHREAD;
            set_comm(&mut l.comm, "kworker/0:1");
            decode(bytes(&buf, size_of::<pkprof_link>()))
        };
        let from = (1 << 56) | (1 << 48) | 5;
        let expect = |to| {
            Some(RecordEvent::Link(LinkEvent {
                time_ns: 9_000,
                from,
                to,
            }))
        };
        assert_eq!(
            link(LinkTo::PKPROF_LINK_THREAD),
            expect(LinkTarget::Thread(Served {
                pid: 100,
                tid: 102,
                cgroup_id: 42,
                comm: "kworker/0:1".into(),
                kthread: true,
                target: false,
            }))
        );
        assert_eq!(
            link(LinkTo::PKPROF_LINK_HOLD),
            expect(LinkTarget::Hold((3 << 56) | 0x00ff_8880_0000_1000))
        );
        assert_eq!(link(LinkTo::PKPROF_LINK_KERNEL), expect(LinkTarget::Kernel));
        assert_eq!(
            link(LinkTo::PKPROF_LINK_EXPIRED),
            expect(LinkTarget::Expired)
        );
    }

    #[test]
    fn a_truncated_record_is_not_decoded() {
        let (buf, _) = sample_record(0);
        assert_eq!(decode(bytes(&buf, SAMPLE - 8)), None);
        assert_eq!(decode(bytes(&buf, 3)), None);
        assert_eq!(decode(&[]), None);
        let mut link = buffer(size_of::<pkprof_link>());
        bytes_mut(&mut link)[..4].copy_from_slice(&EV_LINK.to_ne_bytes());
        assert_eq!(decode(bytes(&link, size_of::<pkprof_link>() - 1)), None);
    }

    #[test]
    fn decodes_an_exec() {
        let mut buf = buffer(size_of::<pkprof_exec>());
        let e = plain::from_mut_bytes::<pkprof_exec>(bytes_mut(&mut buf)).unwrap();
        e.kind = Kind::PKPROF_EV_EXEC;
        e.pid = 4242;
        e.time_ns = 7;
        let len = size_of::<pkprof_exec>();
        assert_eq!(
            decode(bytes(&buf, len)),
            Some(RecordEvent::Exec { pid: 4242 })
        );
        assert_eq!(decode(bytes(&buf, len - 1)), None);
    }

    #[test]
    fn a_record_of_unknown_kind_is_not_decoded() {
        let (mut buf, len) = sample_record(0);
        bytes_mut(&mut buf)[..4].copy_from_slice(&7u32.to_ne_bytes());
        assert_eq!(decode(bytes(&buf, len)), None);
        bytes_mut(&mut buf)[..4].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(decode(bytes(&buf, len)), None);
    }

    #[test]
    fn stack_bytes_overrunning_the_record_are_not_decoded() {
        // The length field claims 64 bytes; only 16 follow the record.
        let (mut buf, len) = sample_record(16);
        let s = plain::from_mut_bytes::<pkprof_sample>(&mut bytes_mut(&mut buf)[..SAMPLE]).unwrap();
        s.ustack_bytes_len = 64;
        assert_eq!(decode(bytes(&buf, len)), None);
        // The largest length the field can hold: no panic, no allocation.
        let s = plain::from_mut_bytes::<pkprof_sample>(&mut bytes_mut(&mut buf)[..SAMPLE]).unwrap();
        s.ustack_bytes_len = u32::MAX;
        assert_eq!(decode(bytes(&buf, len)), None);
    }

    #[test]
    fn a_record_off_its_alignment_is_not_decoded() {
        // The ring aligns records to 8 bytes; the same record one byte off is refused, not read.
        let (buf, len) = sample_record(8);
        let mut shifted = buffer(len + 8);
        bytes_mut(&mut shifted)[1..=len].copy_from_slice(bytes(&buf, len));
        assert!(decode(bytes(&buf, len)).is_some());
        assert_eq!(decode(&bytes(&shifted, len + 1)[1..]), None);
    }

    /// An off-CPU record: a blocked thread's sample (4 bytes of user stack after the record),
    /// woken by a writer that a softirq had woken, the waker's kernel stack taken.
    #[test]
    fn decodes_an_off_cpu_sample_with_its_chain() {
        const OFF: usize = size_of::<pkprof_offcpu>();
        let mut buf = buffer(OFF + 4);
        {
            let b = bytes_mut(&mut buf);
            for (i, x) in b[OFF..OFF + 4].iter_mut().enumerate() {
                *x = i as u8 + 1;
            }
            let o = plain::from_mut_bytes::<pkprof_offcpu>(&mut b[..OFF]).unwrap();
            o.s.kind = Kind::PKPROF_EV_OFFCPU;
            o.s.pid = 10;
            o.s.tid = 11;
            o.s.cur_pid = 10;
            o.s.cur_tid = 11;
            o.s.ctx = Ctx::PKPROF_SCTX_KERNEL;
            o.s.orig_ax = 0;
            o.s.kstack[0] = 0xffff_ffff_8100_0030;
            o.s.kstack_len = 8;
            o.s.user_sp = 0x7ffd_0000;
            o.s.ustack_bytes_len = 4;
            set_comm(&mut o.s.comm, "reader");
            o.off_ns = 1_000;
            o.offcpu_ns = 30_000_000;
            o.blocked_ns = 29_000_000;
            o.weight_ns = 30_000_000;
            o.reason = 3; // IPC
            o.nr_chain = 2;
            o.chain[0].pid = 10;
            o.chain[0].tid = 12;
            o.chain[0].ctx = Ctx::PKPROF_SCTX_KERNEL;
            o.chain[0].flags = WAKER_WAS_BLOCKED;
            o.chain[0].blocked_ns = 20_000_000;
            o.chain[0].reason = 5; // SLEEP
            set_comm(&mut o.chain[0].comm, "writer");
            o.chain[1].ctx = Ctx::PKPROF_SCTX_SOFTIRQ;
            o.chain[1].vec = 1;
            o.chain[2].pid = 99; // beyond nr_chain: not read
            o.waker_kstack[..2].copy_from_slice(&[0xffff_ffff_8100_0040, 0xffff_ffff_8100_0050]);
            o.waker_kstack_len = 16;
            o.waker_ustack_len = -14;
        }
        let Some(RecordEvent::OffCpu(o)) = decode(bytes(&buf, OFF + 4)) else {
            panic!("not decoded as an off-CPU sample");
        };
        assert_eq!(o.sample.kstack, vec![0xffff_ffff_8100_0030]);
        assert_eq!(o.sample.ustack_bytes, vec![1, 2, 3, 4]);
        assert_eq!(o.sample.served.as_ref().map(|s| s.tid), Some(11));
        assert_eq!(
            (o.offcpu_ns, o.blocked_ns, o.weight_ns),
            (30_000_000, 29_000_000, 30_000_000)
        );
        assert_eq!(o.reason, BlockReason::Ipc);
        assert_eq!(
            o.chain,
            vec![
                WakerEvent {
                    pid: 10,
                    tid: 12,
                    comm: "writer".into(),
                    context: SampleContext::Kernel,
                    kthread: false,
                    blocked: Some((20_000_000, BlockReason::Sleep)),
                },
                WakerEvent {
                    pid: 0,
                    tid: 0,
                    comm: String::new(),
                    context: SampleContext::SoftIrq(1),
                    kthread: false,
                    blocked: None,
                },
            ]
        );
        assert_eq!(
            o.waker_kstack,
            vec![0xffff_ffff_8100_0040, 0xffff_ffff_8100_0050]
        );
        assert!(o.waker_ustack.is_empty());
        // Cut short of its stack bytes: not decodable.
        assert_eq!(decode(bytes(&buf, OFF + 2)), None);
    }
}
