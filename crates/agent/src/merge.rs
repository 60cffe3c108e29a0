//! Merging window profiles into one (`ctl dump --since`, `report --store`, `diff --store`): frames
//! and stacks re-interned, samples of equal stack and labels summed, processes' exact times summed
//! per PID, counts and losses summed, cgroup paths united. The result is an ordinary profile that
//! every report reads.

use std::collections::BTreeMap;

use pkprof_profile::{
    CgroupInfo, FuncCount, Lost, Meta, ProcessInfo, Profile, ProfileBuilder, SampleGroup,
    SyscallStat,
};

/// Most warnings a merged profile carries (distinct ones, in order of first appearance).
const MAX_WARNINGS: usize = 50;

fn add_lost(a: &mut Lost, b: &Lost) {
    let Lost {
        ring_buffer_full,
        kernel_stack_errors,
        user_stack_errors,
        held_expired,
        maps_missing,
        bpf_missed_events,
        thread_table_full,
        target_table_full,
    } = b;
    a.ring_buffer_full += ring_buffer_full;
    a.kernel_stack_errors += kernel_stack_errors;
    a.user_stack_errors += user_stack_errors;
    a.held_expired += held_expired;
    a.maps_missing += maps_missing;
    a.bpf_missed_events += bpf_missed_events;
    a.thread_table_full += thread_table_full;
    a.target_table_full += target_table_full;
}

fn add_meta(a: &mut Meta, b: &Meta) {
    a.start_unix_ns = a.start_unix_ns.min(b.start_unix_ns);
    a.end_unix_ns = a.end_unix_ns.max(b.end_unix_ns);
    a.cpus = a.cpus.max(b.cpus);
    add_lost(&mut a.lost, &b.lost);
    let (o, p) = (&mut a.overhead, &b.overhead);
    o.pkprof_cpu_ns += p.pkprof_cpu_ns;
    o.symbolize_ns += p.symbolize_ns;
    o.bpf_run_ns = o.bpf_run_ns.zip(p.bpf_run_ns).map(|(x, y)| x + y);
    o.bpf_run_count = o.bpf_run_count.zip(p.bpf_run_count).map(|(x, y)| x + y);
    let (c, d) = (&mut a.cpu_time, &b.cpu_time);
    c.total_ns += d.total_ns;
    c.idle_ns += d.idle_ns;
    c.processes_ns += d.processes_ns;
    c.other_ns += d.other_ns;
    c.kernel_ns += d.kernel_ns;
    c.untracked_ns += d.untracked_ns;
    a.user_stacks.complete += b.user_stacks.complete;
    for (t, n) in &b.user_stacks.truncated {
        a.user_stacks.add(Some(*t), *n);
    }
    for w in &b.warnings {
        if a.warnings.len() < MAX_WARNINGS && !a.warnings.contains(w) {
            a.warnings.push(w.clone());
        }
    }
}

/// Merges `profiles` (windows, in any order) into one. None when there are none.
pub fn merge<'a>(profiles: impl IntoIterator<Item = &'a Profile>) -> Option<Profile> {
    let mut iter = profiles.into_iter();
    let first = iter.next()?;
    let mut meta = first.meta.clone();
    let mut rest: Vec<&Profile> = vec![first];
    rest.extend(iter);
    let mut b = ProfileBuilder::new(Meta::default());
    let mut processes: BTreeMap<u32, ProcessInfo> = BTreeMap::new();
    let mut syscalls: BTreeMap<(u32, u32), SyscallStat> = BTreeMap::new();
    let mut funcs: BTreeMap<(u32, String, String), u64> = BTreeMap::new();
    let mut cgroups: BTreeMap<u64, String> = BTreeMap::new();
    for (i, p) in rest.iter().enumerate() {
        if i > 0 {
            if p.meta.period_ns != meta.period_ns
                && !meta
                    .warnings
                    .iter()
                    .any(|w| w.starts_with("windows of different"))
            {
                meta.warnings.push(format!(
                    "windows of different sampling periods merged ({} and {} ns): sample counts are not CPU time",
                    meta.period_ns, p.meta.period_ns
                ));
            }
            add_meta(&mut meta, &p.meta);
        }
        let frames: Vec<u32> = p.frames.iter().map(|f| b.frame(f.clone())).collect();
        let stacks: Vec<u32> = p
            .stacks
            .iter()
            .map(|s| b.stack(s.frames.iter().map(|f| frames[*f as usize]).collect()))
            .collect();
        for s in &p.samples {
            b.sample(SampleGroup {
                stack: stacks[s.stack as usize],
                ..s.clone()
            });
        }
        for q in &p.processes {
            let e = processes.entry(q.pid).or_insert_with(|| ProcessInfo {
                pid: q.pid,
                ..ProcessInfo::default()
            });
            // The latest window names the process (a PID reused names its latest holder).
            if !q.comm.is_empty() {
                e.comm.clone_from(&q.comm);
            }
            if !q.exe.is_empty() {
                e.exe.clone_from(&q.exe);
            }
            e.ppid = q.ppid;
            e.target |= q.target;
            e.exited = q.exited;
            e.task_ns += q.task_ns;
            e.user_ns += q.user_ns;
            e.sys_ns += q.sys_ns;
            e.hardirq_ns += q.hardirq_ns;
            e.softirq_ns += q.softirq_ns;
            e.served_ns = e.served_ns.saturating_add(q.served_ns);
        }
        for s in &p.syscalls {
            let e = syscalls
                .entry((s.pid, s.nr))
                .or_insert_with(|| SyscallStat {
                    pid: s.pid,
                    nr: s.nr,
                    name: s.name.clone(),
                    ..SyscallStat::default()
                });
            e.count += s.count;
            e.total_ns += s.total_ns;
            e.errors += s.errors;
        }
        for f in &p.func_counts {
            *funcs
                .entry((f.pid, f.binary.clone(), f.function.clone()))
                .or_default() += f.count;
        }
        for c in &p.cgroups {
            cgroups.entry(c.id).or_insert_with(|| c.path.clone());
        }
    }
    *b.meta_mut() = meta;
    for p in processes.into_values() {
        b.process(p);
    }
    for s in syscalls.into_values() {
        b.syscall(s);
    }
    for ((pid, binary, function), count) in funcs {
        b.func_count(FuncCount {
            pid,
            binary,
            function,
            count,
        });
    }
    let mut out = b.finish();
    out.cgroups = cgroups
        .into_iter()
        .map(|(id, path)| CgroupInfo { id, path })
        .collect();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkprof_profile::synthetic::synthetic;
    use std::collections::HashMap;

    #[test]
    fn merged_counts_are_the_sums() {
        let a = synthetic(5000, 40, 60, 1);
        let b = synthetic(3000, 30, 50, 2);
        let m = merge([&a, &b]).unwrap();
        assert_eq!(m.total_samples(), a.total_samples() + b.total_samples());
        // Every (frames, pid, tid) sample of the inputs is in the merged profile.
        let key = |p: &Profile| {
            let mut v: HashMap<(Vec<String>, u32, u32, u64), u64> = HashMap::new();
            for s in &p.samples {
                let names = p.stack_frames(s.stack).map(|f| f.name.clone()).collect();
                *v.entry((names, s.pid, s.tid, s.cgroup_id)).or_default() += s.count;
            }
            v
        };
        let mut want = key(&a);
        for (k, n) in key(&b) {
            *want.entry(k).or_default() += n;
        }
        assert_eq!(key(&m), want);
        let task = |p: &Profile| p.processes.iter().map(|p| p.task_ns).sum::<u64>();
        assert_eq!(task(&m), task(&a) + task(&b));
        assert_eq!(
            m.meta.cpu_time.total_ns,
            a.meta.cpu_time.total_ns + b.meta.cpu_time.total_ns
        );
        assert_eq!(
            m.meta.start_unix_ns,
            a.meta.start_unix_ns.min(b.meta.start_unix_ns)
        );
        // The file format takes it.
        let mut bytes = Vec::new();
        pkprof_profile::write_profile(&m, &mut bytes).unwrap();
        assert_eq!(pkprof_profile::read_profile(&bytes[..]).unwrap(), m);
        assert!(merge(std::iter::empty()).is_none());
        assert_eq!(merge([&a]).unwrap().total_samples(), a.total_samples());
    }
}
