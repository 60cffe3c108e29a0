//! Building a profile: interns frames and stacks and merges samples with equal labels.

use crate::model::*;
use crate::InternMap;

/// Accumulates frames, stacks and samples, deduplicating each, into a [`Profile`].
#[derive(Default)]
pub struct ProfileBuilder {
    profile: Profile,
    frame_ids: InternMap<Frame, FrameId>,
    stack_ids: InternMap<Vec<FrameId>, StackId>,
    group_ids: InternMap<GroupKey, usize>,
}

#[derive(Hash, PartialEq, Eq)]
struct GroupKey {
    stack: StackId,
    pid: u32,
    tid: u32,
    comm: String,
    current_pid: u32,
    bucket: Bucket,
    context: Context,
    cgroup_id: u64,
}

impl ProfileBuilder {
    pub fn new(meta: Meta) -> Self {
        ProfileBuilder {
            profile: Profile {
                meta,
                ..Profile::default()
            },
            ..Self::default()
        }
    }

    pub fn meta_mut(&mut self) -> &mut Meta {
        &mut self.profile.meta
    }

    pub fn frame(&mut self, frame: Frame) -> FrameId {
        if let Some(id) = self.frame_ids.get(&frame) {
            return *id;
        }
        let id = self.profile.frames.len() as FrameId;
        self.profile.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        id
    }

    /// A frame interned earlier.
    pub fn frame_at(&self, id: FrameId) -> &Frame {
        &self.profile.frames[id as usize]
    }

    /// Interns a stack given root first.
    pub fn stack(&mut self, frames: Vec<FrameId>) -> StackId {
        if let Some(id) = self.stack_ids.get(&frames) {
            return *id;
        }
        let id = self.profile.stacks.len() as StackId;
        self.profile.stacks.push(Stack {
            frames: frames.clone(),
        });
        self.stack_ids.insert(frames, id);
        id
    }

    /// Adds `sample.count` samples, merging with an existing group of equal stack and labels.
    pub fn sample(&mut self, sample: SampleGroup) {
        let key = GroupKey {
            stack: sample.stack,
            pid: sample.pid,
            tid: sample.tid,
            comm: sample.comm.clone(),
            current_pid: sample.current_pid,
            bucket: sample.bucket,
            context: sample.context,
            cgroup_id: sample.cgroup_id,
        };
        match self.group_ids.get(&key) {
            Some(i) => self.profile.samples[*i].count += sample.count,
            None => {
                self.group_ids.insert(key, self.profile.samples.len());
                self.profile.samples.push(sample);
            }
        }
    }

    pub fn process(&mut self, info: ProcessInfo) {
        self.profile.processes.push(info);
    }

    pub fn syscall(&mut self, stat: SyscallStat) {
        self.profile.syscalls.push(stat);
    }

    /// The off-CPU samples (`record --off-cpu`), set once their stacks are interned here.
    pub fn off_cpu(&mut self, off: OffCpu) {
        self.profile.off_cpu = Some(off);
    }

    pub fn func_count(&mut self, count: FuncCount) {
        self.profile.func_counts.push(count);
    }

    pub fn finish(self) -> Profile {
        self.profile
    }
}
