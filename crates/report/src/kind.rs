//! `report --kind on|off|both`: which of a profile's sample kinds the reports and exports see
//! (docs/design.md, "Off-CPU samples").
//!
//! Every report reads `Profile::samples`, counts of one period each. The off-CPU samples have
//! weights (ns) instead, so a view for `off` or `both` is a profile of its own whose samples
//! count microseconds (`period_ns` 1000): on-CPU counts are converted from their period, off-CPU
//! weights rounded to the nearest microsecond. Stacks say their kind in the stack itself, so
//! that every report and export (folded, pprof, speedscope, HTML) carries it without a format of
//! its own: a root frame `[on-cpu]` or `[off-cpu]`; an off-CPU stack then runs from the blocked
//! thread's root to where it blocked, a `[blocked: REASON]` frame, and, as `offwaketime` draws
//! them, a `--` frame with the waker's stack above it leaf first and the waker itself
//! (`[woken by: COMM PID]`, or the interrupt) last, followed by the chain's earlier wakers.

use pkprof_profile::{
    Context, CpuTime, Frame, FrameId, FrameKind, OffCpuGroup, Profile, SampleGroup, SampleKind,
    StackId,
};

use crate::names::softirq_name;
use crate::FastMap;

/// `--kind`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KindSelection {
    #[default]
    On,
    Off,
    Both,
}

impl KindSelection {
    pub fn parse(s: &str) -> Result<KindSelection, String> {
        match s {
            "on" => Ok(KindSelection::On),
            "off" => Ok(KindSelection::Off),
            "both" => Ok(KindSelection::Both),
            _ => Err(format!("{s:?} is not on, off or both")),
        }
    }
}

/// The period of a view's samples: one microsecond.
pub const VIEW_PERIOD_NS: u64 = 1000;

/// The profile the reports see for `kind`; `On` is the profile itself. Err: the profile has no
/// off-CPU samples (recorded without `--off-cpu`).
pub fn view(p: &Profile, kind: KindSelection) -> Result<Profile, String> {
    if kind == KindSelection::On {
        return Ok(p.clone());
    }
    let Some(off) = &p.off_cpu else {
        return Err("the profile has no off-CPU samples (record with --off-cpu)".to_string());
    };
    let mut v = Profile {
        meta: p.meta.clone(),
        frames: p.frames.clone(),
        stacks: p.stacks.clone(),
        samples: Vec::new(),
        processes: p.processes.clone(),
        syscalls: p.syscalls.clone(),
        func_counts: p.func_counts.clone(),
        off_cpu: p.off_cpu.clone(),
        cgroups: p.cgroups.clone(),
    };
    // Not CPU time any more: shares are of the view's samples.
    v.meta.cpu_time = CpuTime::default();
    v.meta.period_ns = VIEW_PERIOD_NS;
    v.meta.frequency_hz = 1_000_000_000 / VIEW_PERIOD_NS;
    let mut b = ViewBuilder {
        frames: FastMap::default(),
        stacks: FastMap::default(),
        v: &mut v,
    };
    if kind == KindSelection::Both {
        let root = b.marker(SampleKind::OnCpu.label().to_string());
        for s in &p.samples {
            let mut frames = vec![root];
            frames.extend_from_slice(&p.stacks[s.stack as usize].frames);
            let stack = b.stack(frames);
            let count = (u128::from(s.count) * u128::from(p.meta.period_ns)
                / u128::from(VIEW_PERIOD_NS)) as u64;
            b.v.samples.push(SampleGroup {
                stack,
                count,
                ..s.clone()
            });
        }
    }
    let root = b.marker(SampleKind::OffCpu.label().to_string());
    for g in &off.groups {
        let frames = off_stack(p, g, root, &mut b);
        let stack = b.stack(frames);
        b.v.samples.push(SampleGroup {
            stack,
            pid: g.pid,
            tid: g.tid,
            comm: g.comm.clone(),
            current_pid: g.pid,
            bucket: g.bucket,
            context: Context::Syscall,
            cgroup_id: g.cgroup_id,
            count: (g.weight_ns + VIEW_PERIOD_NS / 2) / VIEW_PERIOD_NS,
        });
    }
    Ok(v)
}

/// The frames of an off-CPU group in the view, root first (see the module's doc).
fn off_stack(p: &Profile, g: &OffCpuGroup, root: FrameId, b: &mut ViewBuilder) -> Vec<FrameId> {
    let mut frames = vec![root];
    frames.extend_from_slice(&p.stacks[g.stack as usize].frames);
    frames.push(b.marker(format!("blocked: {}", g.reason.label())));
    if g.chain.is_empty() && g.waker_stack.is_none() {
        return frames;
    }
    frames.push(b.marker("--".to_string()));
    if let Some(w) = g.waker_stack {
        frames.extend(p.stacks[w as usize].frames.iter().rev());
    }
    for (i, w) in g.chain.iter().enumerate() {
        let who = match w.context {
            Context::SoftIrq(vec) => format!("softirq {}", softirq_name(vec)),
            Context::HardIrq => "hardirq".to_string(),
            Context::Idle => "idle".to_string(),
            _ => format!("{} {}", w.comm, w.pid),
        };
        let blocked = match (w.blocked, g.chain_blocked_ns.get(i)) {
            (Some(r), Some(ns)) if g.count > 0 => {
                format!(
                    ", itself blocked {:.3} ms on {}",
                    *ns as f64 / 1e6 / g.count as f64,
                    r.label()
                )
            }
            _ => String::new(),
        };
        let name = if i == 0 {
            format!("woken by: {who}{blocked}")
        } else {
            format!("which was woken by: {who}{blocked}")
        };
        frames.push(b.marker(name));
    }
    frames
}

struct ViewBuilder<'a> {
    frames: FastMap<String, FrameId>,
    stacks: FastMap<Vec<FrameId>, StackId>,
    v: &'a mut Profile,
}

impl ViewBuilder<'_> {
    /// A frame that is no code: `[NAME]`.
    fn marker(&mut self, name: String) -> FrameId {
        if let Some(id) = self.frames.get(&name) {
            return *id;
        }
        let id = self.v.frames.len() as FrameId;
        self.v.frames.push(Frame {
            kind: FrameKind::Truncated,
            name: format!("[{name}]"),
            module: "[pkprof]".to_string(),
            symbolized: true,
            ..Frame::default()
        });
        self.frames.insert(name, id);
        id
    }

    fn stack(&mut self, frames: Vec<FrameId>) -> StackId {
        if let Some(id) = self.stacks.get(&frames) {
            return *id;
        }
        let id = self.v.stacks.len() as StackId;
        self.v.stacks.push(pkprof_profile::Stack {
            frames: frames.clone(),
        });
        self.stacks.insert(frames, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkprof_profile::{BlockReason, Meta, OffCpu, OffCpuGroup, Stack, WakeLink};

    fn frame(name: &str, kind: FrameKind) -> Frame {
        Frame {
            kind,
            name: name.into(),
            module: "m".into(),
            symbolized: true,
            ..Frame::default()
        }
    }

    /// One on-CPU group (3 samples of 10 ms) in `work`, and one off-CPU group of 1.5 ms blocked
    /// in `read` -> `pipe_read`, woken by `writer` from `pipe_write`, itself woken by a softirq.
    fn profile() -> Profile {
        Profile {
            meta: Meta {
                period_ns: 10_000_000,
                ..Meta::default()
            },
            frames: vec![
                frame("work", FrameKind::User),
                frame("read", FrameKind::User),
                frame("pipe_read", FrameKind::Kernel),
                frame("pipe_write", FrameKind::Kernel),
                frame("write", FrameKind::User),
            ],
            stacks: vec![
                Stack { frames: vec![0] },
                Stack { frames: vec![1, 2] },
                Stack { frames: vec![4, 3] },
            ],
            samples: vec![SampleGroup {
                stack: 0,
                pid: 7,
                count: 3,
                ..SampleGroup::default()
            }],
            off_cpu: Some(OffCpu {
                groups: vec![OffCpuGroup {
                    stack: 1,
                    pid: 7,
                    reason: BlockReason::Ipc,
                    waker_stack: Some(2),
                    chain: vec![
                        WakeLink {
                            pid: 8,
                            comm: "writer".into(),
                            context: Context::Syscall,
                            blocked: Some(BlockReason::Sleep),
                            ..WakeLink::default()
                        },
                        WakeLink {
                            context: Context::SoftIrq(1),
                            ..WakeLink::default()
                        },
                    ],
                    chain_blocked_ns: vec![2_000_000, 0],
                    count: 1,
                    weight_ns: 1_500_400,
                    ..OffCpuGroup::default()
                }],
                ..OffCpu::default()
            }),
            ..Profile::default()
        }
    }

    fn names(p: &Profile, s: &SampleGroup) -> Vec<String> {
        p.stack_frames(s.stack).map(|f| f.name.clone()).collect()
    }

    #[test]
    fn off_view_draws_the_waker_above_the_blocked_stack() {
        let v = view(&profile(), KindSelection::Off).unwrap();
        assert_eq!(v.samples.len(), 1);
        assert_eq!(v.samples[0].count, 1500); // µs, rounded
        assert_eq!(v.meta.period_ns, VIEW_PERIOD_NS);
        assert_eq!(
            names(&v, &v.samples[0]),
            [
                "[off-cpu]",
                "read",
                "pipe_read",
                "[blocked: ipc]",
                "[--]",
                "pipe_write",
                "write",
                "[woken by: writer 8, itself blocked 2.000 ms on sleep]",
                "[which was woken by: softirq TIMER]",
            ]
        );
    }

    #[test]
    fn both_view_counts_microseconds_under_kind_roots() {
        let v = view(&profile(), KindSelection::Both).unwrap();
        let on = &v.samples[0];
        assert_eq!(names(&v, on), ["[on-cpu]", "work"]);
        assert_eq!(on.count, 30_000); // 3 x 10 ms
        assert_eq!(v.samples[1].count, 1500);
        assert_eq!(v.meta.cpu_time.total_ns, 0);
    }

    #[test]
    fn on_view_is_the_profile_and_off_needs_off_cpu_samples() {
        let p = profile();
        assert_eq!(view(&p, KindSelection::On).unwrap(), p);
        let none = Profile { off_cpu: None, ..p };
        assert!(view(&none, KindSelection::Off).is_err());
        assert!(KindSelection::parse("sideways").is_err());
    }
}
