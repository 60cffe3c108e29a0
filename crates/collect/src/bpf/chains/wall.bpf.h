/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The wall chain (docs/design.md, "Wall time"): every ns of a thread's life, from the instant it
 * starts being followed, in one class: on CPU (the core's own accounting), waiting for a CPU
 * (runnable: from its wakeup or preemption to its switch-in) or blocked, by reason
 * (block_reason.bpf.h). An observer of the core (chains/chains.h, PKPROF_OBSERVERS): it follows
 * the switches and bills no one; its state is the thread entry's `wall`. No program runs at a
 * wakeup: where the off period turned from blocked to runnable is the scheduler's own stamp, read
 * at the switch-in (sched_wait).
 *
 * A thread starts being followed at its first wakeup as a new task (sched_wakeup_new), or, for one
 * that existed before attach, at its first switch-out. Its time on CPU is measured here, switch-in
 * to switch-out by the clock of the other classes, so that the classes add up to its wall time
 * exactly; the core's on-CPU figures follow the scheduler's own clock instead (without steal
 * time), docs/design.md "Wall time" says how the two differ.
 */
#ifndef PKPROF_WALL_BPF_H
#define PKPROF_WALL_BPF_H

#include "core.bpf.h"
#include "block_reason.bpf.h"

/* include/linux/sched.h */
#define PKPROF_TASK_DEAD 0x0080

/* Set by the loader when the chain runs (its tracepoints are there): the switch hooks do nothing
 * while it is off. */
const volatile bool wall_on = false;

/* sched_wait's answer on a kernel without CONFIG_SCHED_INFO (or the run queue's clock). */
#define PKPROF_WAIT_UNKNOWN (~0ULL)

/*
 * How long next waited for its CPU, by the scheduler's own clock (what /proc/PID/schedstat's
 * run-queue time adds at this switch: rq clock at this __schedule less the task's last_queued,
 * sched_info_arrive), at most `most`; PKPROF_WAIT_UNKNOWN without CONFIG_SCHED_INFO. last_queued
 * is the rq clock when the task was enqueued: at its wakeup, or at its preemption. The
 * tracepoint runs a few microseconds after the scheduler read its clock (the pick of next lies
 * between); that part, like the same delay at the switch-out, goes to the off period's reason.
 */
static __always_inline __u64 sched_wait(struct task_struct *next, __u64 most)
{
	__u64 queued, clock;

	/* The run queue through the task's fair-class queue on this CPU (set for every task when
	 * it is placed on a CPU; `runqueues` itself is not in kallsyms without KALLSYMS_ALL).
	 * Direct loads through kernel BTF: no helper call at every switch. */
	if (!bpf_core_field_exists(next->sched_info.last_queued) ||
	    !bpf_core_field_exists(struct cfs_rq, rq))
		return PKPROF_WAIT_UNKNOWN;
	queued = next->sched_info.last_queued;
	clock = next->se.cfs_rq->rq->clock;
	if (!queued || clock < queued)
		return PKPROF_WAIT_UNKNOWN;
	return clock - queued < most ? clock - queued : most;
}

/* Two buckets per power of two: 2*floor(log2(ns)) + the bit below the top one (ns < 2: 0). */
static __always_inline __u32 runq_bucket(__u64 ns)
{
	__u32 lg = 0;
	__u64 v = ns;

	if (ns < 2)
		return 0;
	if (v >> 32) { v >>= 32; lg += 32; }
	if (v >> 16) { v >>= 16; lg += 16; }
	if (v >> 8) { v >>= 8; lg += 8; }
	if (v >> 4) { v >>= 4; lg += 4; }
	if (v >> 2) { v >>= 2; lg += 2; }
	if (v >> 1) { lg += 1; }
	lg = 2 * lg + ((ns >> (lg - 1)) & 1);
	return lg < PKPROF_RUNQ_HIST ? lg : PKPROF_RUNQ_HIST - 1;
}

/* Thread tid (entry e) leaves the CPU in c->switch_state: open its off period. */
static __always_inline void wall_switch_out(struct pkprof_cpu *c, struct pkprof_thread *e, __u32 tid)
{
	__u64 now = c->last_ns; /* the switch's instant: charge() just ran */
	struct pkprof_wall *w;
	__u32 state = c->switch_state;

	if (!wall_on || !e || !tid || !count_from_ns)
		return;
	w = &e->wall;
	if (!w->since_ns)
		w->since_ns = now; /* first seen leaving the CPU: followed from now */
	if (w->in_ns && now > w->in_ns) {
		__u64 ours = now - w->in_ns, slice, back;

		/*
		 * The scheduler may have started this slice before our switch-in: a wakeup that
		 * preempts skips the clock update of the __schedule that follows
		 * (rq_clock_skip_update), so the woken task runs, by its own clock, from the wakeup
		 * on. Its slice (se.sum_exec_runtime since the core's reading at the switch-in) then
		 * exceeds ours; that part was counted in the off period just closed, under its
		 * reason: it goes back to running (at most what that period gave its reason).
		 */
		if (c->sum_at_in && c->cur_tid == tid) {
			slice = bpf_get_current_task_btf()->se.sum_exec_runtime - (c->sum_at_in - 1);
			if (slice > ours && w->last_off_reason < PKPROF_BLOCK_NR) {
				back = slice - ours;
				if (back > w->last_off_ns)
					back = w->last_off_ns;
				w->off_class_ns[w->last_off_reason] -= back;
				ours += back;
			}
		}
		w->oncpu_ns += ours;
	}
	w->last_off_ns = 0;
	if (w->off_ns && now > w->off_ns) {
		/* Leaves the CPU without its switch-in seen (an unreported switch, see
		 * lost.missed_switch): off, then on for a while, split unknown: OTHER, counted. */
		w->off_class_ns[PKPROF_BLOCK_OTHER] += now - w->off_ns;
		w->switch_unseen++;
	}
	w->in_ns = 0;
	if (state & PKPROF_TASK_DEAD) {
		w->end_ns = now;
		w->off_ns = 0;
		return;
	}
	w->off_reason = block_reason(bpf_get_current_task_btf(), state);
	w->off_ns = now;
	/* Runnable at once when preempted; a blocked thread waits for its wakeup. */
	w->wake_ns = w->off_reason == PKPROF_BLOCK_RUNNABLE ? now : 0;
}

/* next takes the CPU: its off period ends, blocked up to its wakeup, runnable since (the
 * scheduler's run-queue stamp says when). */
static __always_inline void wall_switch_in(struct pkprof_cpu *c, struct task_struct *next)
{
	__u32 tid = next->pid;
	struct pkprof_thread *e;
	struct pkprof_wall *w;
	__u64 now = c->last_ns, off, wait;
	__u32 r;

	if (!wall_on || !tid)
		return;
	e = bpf_map_lookup_elem(&threads, &tid);
	if (!e || !e->wall.since_ns)
		return;
	w = &e->wall;
	if (w->in_ns && !w->off_ns && now > w->in_ns) {
		/* Switched in again without its switch-out seen (an unreported switch, see
		 * lost.missed_switch): what it did since is unknown, OTHER, counted. */
		w->off_class_ns[PKPROF_BLOCK_OTHER] += now - w->in_ns;
		w->switch_unseen++;
	}
	w->in_ns = now;
	if (!w->off_ns)
		return;
	off = w->off_ns < now ? w->off_ns : now;
	r = w->off_reason;
	if (r >= PKPROF_BLOCK_NR)
		r = PKPROF_BLOCK_OTHER;
	wait = sched_wait(next, now - off);
	if (wait == PKPROF_WAIT_UNKNOWN) {
		/* A preempted thread waited all along; a blocked one is counted blocked. */
		if (r == PKPROF_BLOCK_RUNNABLE) {
			wait = now - off;
		} else {
			wait = 0;
			w->wake_unseen++;
		}
	}
	w->off_class_ns[r] += now - off - wait;
	w->last_off_reason = r;
	w->last_off_ns = now - off - wait;
	w->off_count[r]++;
	w->off_class_ns[PKPROF_BLOCK_RUNNABLE] += wait;
	w->runq_waits++;
	if (wait > w->runq_max_ns)
		w->runq_max_ns = wait;
	w->runq_hist[runq_bucket(wait) & (PKPROF_RUNQ_HIST - 1)]++;
	w->off_ns = 0;
}

/* A new task is enqueued for the first time: its life starts, waiting for a CPU. */
static __always_inline int wall_wakeup_new(struct task_struct *p)
{
	__u32 tid = p->pid;
	struct pkprof_thread *e = bpf_map_lookup_elem(&threads, &tid);
	__u64 now;

	if (!e || e->wall.since_ns || !count_from_ns)
		return 0;
	now = bpf_ktime_get_ns();
	e->wall.since_ns = now;
	e->wall.off_reason = PKPROF_BLOCK_RUNNABLE;
	e->wall.off_ns = now;
	e->wall.wake_ns = now;
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_sched_wakeup_new, struct task_struct *p)
{
	return wall_wakeup_new(p);
}

#endif /* PKPROF_WALL_BPF_H */
