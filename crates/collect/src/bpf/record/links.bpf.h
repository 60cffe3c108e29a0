/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pkprof record: the ring buffer every record event goes through, the target set, and the link
 * events that carry held stack samples along the served-event tag life cycle (docs/design.md,
 * "The tag life cycle"): a sample taken under a tag is held on the tag's segment; when the segment
 * closes, a link says where its work went (a thread, a socket, an skb handed to another CPU, or
 * KERNEL); a socket held on is linked to the thread that reads it. Links are emitted only for tags,
 * sockets and skbs that hold samples (core.bpf.h's record_mode and the `sampled` flags), so the
 * per-packet cost without samples is one branch. This header is the core's `record` link sink
 * (PKPROF_SINKS, chains/chains.h): the core calls record_link(), never the other way round.
 */
#ifndef PKPROF_RECORD_LINKS_BPF_H
#define PKPROF_RECORD_LINKS_BPF_H

#include "core.bpf.h"

/* record -- CMD: children of a target process become targets at fork. */
const volatile bool follow_children = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by the loader */
} events SEC(".maps");

/*
 * Processes whose memory maps user space has captured (key tgid). A sample of a process not in it
 * wakes the reader so it can capture the maps while the process lives (once the process is old
 * enough: capture_wakeup); other records wait for the reader's next poll (or for the ring to fill
 * up), which saves a wake-up per sample.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} captured SEC(".maps");

/* Wake the reader anyway once this much is waiting (set by the loader: a quarter of the ring). */
const volatile __u64 wakeup_bytes = 1 << 20;

/*
 * A sample of a process not yet `captured` wakes the reader only once the process has lived this
 * long (ns, from its leader's start; set by the loader, 0: at once). A process sampled younger
 * is likely gone before the reader runs (a shell's `/bin/true` lives under a millisecond here):
 * under a fork loop nearly every sample was of such a process, most of their wake-ups found it
 * gone, and each cost the agent more than the rest of the sample (docs/design.md, "The agent /
 * Cost"). Its sample waits for the reader's next poll, as other records do, and a later sample of
 * the same process may still wake it.
 */
const volatile __u64 capture_wake_min_age_ns = 0;

/* Whether a sample at `now` of process `owner` (task t, running it) wakes the reader: not yet
 * captured, and old enough. */
static __always_inline bool capture_wakeup(__u32 owner, struct task_struct *t, __u64 now)
{
	__u64 start;

	if (bpf_map_lookup_elem(&captured, &owner))
		return false;
	if (!capture_wake_min_age_ns)
		return true;
	start = t->group_leader->start_time;
	return now > start && now - start >= capture_wake_min_age_ns;
}

/* Submit flags for a record: wake the reader only when needed (see `captured`). */
static __always_inline __u64 submit_flags(bool urgent)
{
	if (urgent || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/*
 * Target processes (record -- CMD, -p): key tgid. A process leaves when its task is freed
 * (on_target_free), so the table holds the targets alive at once, not every target ever seen.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	/* Set by the loader when recording (--max-targets, default PKPROF_DEFAULT_MAX_TARGETS). */
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

/* The ring buffer's record types reach BTF (and so Rust) only through globals of their type. */
struct pkprof_sample pkprof_sample_btf_anchor SEC(".data.btf_anchor");
struct pkprof_link pkprof_link_btf_anchor SEC(".data.btf_anchor");
enum pkprof_stack_bytes pkprof_stack_bytes_btf_anchor SEC(".data.btf_anchor");
enum pkprof_event_kind pkprof_event_kind_btf_anchor SEC(".data.btf_anchor");
enum pkprof_sample_ctx pkprof_sample_ctx_btf_anchor SEC(".data.btf_anchor");
enum pkprof_sample_flags pkprof_sample_flags_btf_anchor SEC(".data.btf_anchor");
enum pkprof_stack_flags pkprof_stack_flags_btf_anchor SEC(".data.btf_anchor");
enum pkprof_hold pkprof_hold_btf_anchor SEC(".data.btf_anchor");
enum pkprof_link_to pkprof_link_to_btf_anchor SEC(".data.btf_anchor");

static __always_inline __u32 target_flag(__u32 pid)
{
	return pid && bpf_map_lookup_elem(&targets, &pid) ? PKPROF_SAMPLE_TARGET : 0;
}

/* PKPROF_SAMPLE_* flags of a thread entry (a thread forked into a target needs no lookup). */
static __always_inline __u32 thread_flags(const struct pkprof_thread *e)
{
	return (e->kthread ? PKPROF_SAMPLE_KTHREAD : 0) |
	       (e->target ? PKPROF_SAMPLE_TARGET : target_flag(e->pid));
}

/*
 * A task forks: a new thread of a target, or with follow_children a new process forked by a
 * target, is a target too. Its thread entry (`child`, NULL when the thread table is full) keeps
 * the mark, so user space learns of targets that come and go between two of its reads.
 */
static __always_inline void follow_fork(struct pkprof_cpu *c, struct task_struct *parent,
					struct task_struct *child, struct pkprof_thread *e)
{
	__u32 ppid = parent->tgid, pid = child->tgid;
	__u8 one = 1;

	if (!record_mode || !bpf_map_lookup_elem(&targets, &ppid))
		return;
	if (pid != ppid) {
		if (!follow_children)
			return;
		if (bpf_map_update_elem(&targets, &pid, &one, BPF_ANY))
			c->lost.target_map_full++; /* its children are not followed */
	}
	if (e)
		e->target = 1;
}

/*
 * A process leaves the target set when its main thread's task is freed: after every thread of it
 * has run for the last time and its parent has reaped it (as `pkprof syscalls` drops its targets,
 * but late enough that the exit path, exit_mm and all, is still labelled). The PID itself was
 * freed earlier, at release_task, an RCU grace period before this: a child that took the same PID
 * inside that window would be dropped here and not followed. PIDs are handed out cyclically, so
 * that takes a wrap of the PID space within milliseconds; comparing the task's start time with
 * one kept in the map would close it.
 */
SEC("tp_btf/sched_process_free")
int BPF_PROG(on_target_free, struct task_struct *p)
{
	__u32 pid = p->tgid;

	if (p->pid == p->tgid)
		bpf_map_delete_elem(&targets, &pid);
	return 0;
}

/*
 * The sink hook: emits "held samples of (from_kind, from) go to d->kind": the hold key
 * (d->hold, d->to), or thread d->tid.
 */
static __always_inline void record_link(struct pkprof_cpu *c, __u32 from_kind, __u64 from,
					const struct pkprof_dest *d)
{
	struct pkprof_link *l = bpf_ringbuf_reserve(&events, sizeof(*l), 0);
	__u32 to_kind = d->kind, tid = d->tid;
	struct pkprof_thread *e;

	if (!l) {
		c->lost.link_ring_full++;
		return;
	}
	l->kind = PKPROF_EV_LINK;
	l->to_kind = to_kind;
	l->time_ns = bpf_ktime_get_ns();
	l->from_kind = from_kind;
	l->from = from;
	l->to_hold_kind = d->hold;
	l->to = d->to;
	l->pid = 0;
	l->tid = tid;
	l->cgroup_id = 0;
	l->flags = 0;
	l->pad = 0;
	__builtin_memset(l->comm, 0, sizeof(l->comm));
	e = tid ? bpf_map_lookup_elem(&threads, &tid) : NULL;
	if (e) {
		l->pid = e->pid;
		l->cgroup_id = e->cgroup_id;
		l->flags = thread_flags(e);
		__builtin_memcpy(l->comm, e->comm, sizeof(l->comm));
	} else if (to_kind == PKPROF_LINK_THREAD) {
		l->to_kind = PKPROF_LINK_KERNEL; /* a beneficiary already gone */
	}
	bpf_ringbuf_submit(l, submit_flags(false));
}

#endif /* PKPROF_RECORD_LINKS_BPF_H */
