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

/* The wall chain's per-CPU register, the switch-in still to apply, is the core's CPU entry's
 * `wall` (pkprof.h). */

/*
 * next's run-queue total as /proc/PID/schedstat will say it once this switch-in is counted, into
 * r (r->wait_known 0 without CONFIG_SCHED_INFO): sched_info.run_delay, the waits already counted
 * (the part of this one spent on another CPU's queue before a migration among them), plus the
 * wait ending now, the rq clock at this __schedule less last_queued (what sched_info_arrive, just
 * after the tracepoint, adds). The off period's wait is this less the total at its switch-out.
 * The tracepoint runs a few microseconds after the scheduler read its clock (the pick of next
 * lies between); that part goes to the off period's reason (and back to running when the
 * scheduler's slice says so).
 */
static __always_inline void sched_wait(struct task_struct *next, struct pkprof_wall_cpu *r)
{
	__u64 queued, clock;

	r->wait_known = 0;
	/* The run queue through the task's fair-class queue on this CPU (set for every task when
	 * it is placed on a CPU; `runqueues` itself is not in kallsyms without KALLSYMS_ALL).
	 * Direct loads through kernel BTF: no helper call at every switch. */
	if (!bpf_core_field_exists(next->sched_info.last_queued) ||
	    !bpf_core_field_exists(struct cfs_rq, rq))
		return;
	queued = next->sched_info.last_queued;
	clock = next->se.cfs_rq->rq->clock;
	r->run_delay_ns = next->sched_info.run_delay;
	if (queued && clock > queued)
		r->run_delay_ns += clock - queued;
	r->wait_known = 1;
}

/* t's run-queue total so far (0 without CONFIG_SCHED_INFO). */
static __always_inline __u64 run_delay_of(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->sched_info.run_delay))
		return 0;
	return t->sched_info.run_delay;
}

/* The scheduler's own code (.sched.text: __schedule, schedule, schedule_timeout, io_schedule,
 * the lock slow paths, ...), from kallsyms, set by the loader (0: OTHER's functions are off). */
const volatile __u64 sched_text_start = 0;
const volatile __u64 sched_text_end = 0;
/* The tracepoint's own code (__traceiter_sched_switch), set by the loader: the unwinder does not
 * always show the scheduler's frame that called it (seen here: __traceiter_sched_switch, then
 * smpboot_thread_fn, no __schedule nor schedule), so the frames above it are skipped too. */
const volatile __u64 switch_tp_start = 0;
const volatile __u64 switch_tp_end = 0;

/* OTHER blocked time by (thread, kernel function) (pkprof.h, pkprof_other_fn). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_OTHER_FNS);
	__type(key, struct pkprof_other_fn_key);
	__type(value, struct pkprof_other_fn);
} wall_other_fns SEC(".maps");

/* Scratch for an OTHER switch-out's kernel stack (too big for the BPF stack beside the core's). */
struct other_stack {
	__u64 ip[PKPROF_OTHER_FN_DEPTH];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct other_stack);
} wall_other_stack SEC(".maps");

static __always_inline bool in_sched_text(__u64 ip)
{
	return ip >= sched_text_start && ip < sched_text_end;
}

/*
 * The kernel code t (current, leaving its CPU as OTHER) blocked in, as /proc/PID/wchan finds it:
 * its kernel stack read from here goes through this program, the tracepoint, then the
 * scheduler's functions; the first frame after those is the caller that chose to sleep (a return
 * address). 0 when not found. Runs on the OTHER path only. The ranges are exclusive of their end,
 * and `switch_tp_end` is the next symbol's start (kallsyms has no sizes).
 */
static __always_inline __u64 other_func(void *ctx)
{
	struct other_stack *s;
	__u32 key = 0, i;
	long n;
	bool seen_sched = false;

	if (!sched_text_end)
		return 0;
	s = bpf_map_lookup_elem(&wall_other_stack, &key);
	if (!s)
		return 0;
	/* The stack at the tracepoint's caller (bpf_get_stack with the program's context), not
	 * bpf_get_task_stack of the current task: that one unwinds from the helper through the
	 * program's JIT code, which 6.18.44-fc-v1252 does not (no scheduler frame came back). */
	n = bpf_get_stack(ctx, s->ip, sizeof(s->ip), 0);
	if (n <= 0)
		return 0;
	n /= sizeof(__u64);
	for (i = 0; i < PKPROF_OTHER_FN_DEPTH; i++) {
		__u64 ip;

		if (i >= n)
			break;
		ip = s->ip[i];
		if (in_sched_text(ip) || (ip >= switch_tp_start && ip < switch_tp_end))
			seen_sched = true;
		else if (seen_sched)
			return ip;
	}
	return 0;
}

/*
 * other_func(ctx), read from the stack once in other_span + 1 OTHER switch-outs of a thread that
 * blocks again from the same place: the same state, system call and user return address (outside
 * a system call, or a kernel thread: the same state); other_span runs from PKPROF_OTHER_FN_REUSE
 * to PKPROF_OTHER_FN_REUSE_MAX. Measured here, a stack read costs 10-15 us in this virtual
 * machine; a thread stopped and continued in a loop, a kernel thread's wait loop, or a shell
 * waiting for each child, blocks from one place each time. The user return address is often
 * inside a libc wrapper: a thread that blocks in one function from there, and now and then in
 * another, has those periods named after the first for up to PKPROF_OTHER_FN_REUSE_MAX periods.
 */
static __always_inline __u64 other_func_cached(struct pkprof_wall *w, struct task_struct *t,
					       __u32 state, void *ctx)
{
	__u64 key = state;

#if defined(__TARGET_ARCH_x86)
	if (!(t->flags & PF_KTHREAD)) {
		struct pt_regs *regs = task_user_regs(t);
		long nr = regs->orig_ax;

		/* In a system call, from its call site; else (an interrupt, a fault, a signal on the
		 * way back to user space) wherever it was interrupted: not a place. */
		if (nr >= 0)
			key ^= ((__u64)nr << 16) ^ ((__u64)regs->ip << 28);
		else
			key ^= 0xffffULL << 16;
	}
#endif
	__u32 span = w->other_span ? w->other_span : PKPROF_OTHER_FN_REUSE;
	__u64 fn;

	if (key && w->other_key == key && w->other_reuse < span) {
		w->other_reuse++;
		return w->other_func;
	}
	fn = other_func(ctx);
	/* A thread that keeps blocking in one place and function (a shell's waitpid under a fork
	 * loop: 15 us a read, one in 16 of its waits, was half of a switch's average cost) is read
	 * less and less often; a change of function starts over. */
	if (key && w->other_key == key && fn == w->other_func)
		span = span * 2 > PKPROF_OTHER_FN_REUSE_MAX ? PKPROF_OTHER_FN_REUSE_MAX : span * 2;
	else
		span = PKPROF_OTHER_FN_REUSE;
	w->other_key = key;
	w->other_reuse = 0;
	w->other_span = span;
	w->other_func = fn;
	return fn;
}

/* Thread tid of process pid was blocked ns as OTHER in w->off_func: into `wall_other_fns`. */
static __always_inline void other_fn_add(struct pkprof_cpu *c, __u32 tid, __u32 pid,
					 const struct pkprof_wall *w, __u64 ns)
{
	struct pkprof_other_fn_key k = { .tid = tid, .pid = pid, .func = w->off_func };
	struct pkprof_other_fn *v, fresh = { .ns = ns, .count = 1 };

	if (!w->off_func || !ns)
		return;
	v = bpf_map_lookup_elem(&wall_other_fns, &k);
	if (v) {
		__sync_fetch_and_add(&v->ns, ns);
		__sync_fetch_and_add(&v->count, 1);
		return;
	}
	if (bpf_map_update_elem(&wall_other_fns, &k, &fresh, BPF_NOEXIST)) {
		v = bpf_map_lookup_elem(&wall_other_fns, &k); /* a racing insert */
		if (v)
			__sync_fetch_and_add(&v->ns, ns);
		else if (c)
			c->lost.other_fn_full++;
	}
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

/*
 * The off period of w ends at its switch-in r->in_ns: waiting for the CPU as long as the
 * scheduler says, the rest under its reason. Returns the part under its reason (not the wait).
 */
static __always_inline __u64 wall_close_off(struct pkprof_wall *w, const struct pkprof_wall_cpu *r)
{
	__u64 in = r->in_ns, off = w->off_ns, wait, own;
	__u32 reason = w->off_reason;

	if (reason >= PKPROF_BLOCK_NR)
		reason = PKPROF_BLOCK_OTHER;
	if (r->wait_known && r->run_delay_ns >= w->run_delay_out)
		wait = r->run_delay_ns - w->run_delay_out < in - off ? r->run_delay_ns - w->run_delay_out :
									in - off;
	else if (reason == PKPROF_BLOCK_RUNNABLE)
		wait = in - off; /* preempted: waited all along */
	else {
		wait = 0; /* woken when, unknown: blocked all along */
		w->wake_unseen++;
	}
	own = in - off - wait;
	w->off_class_ns[reason] += own;
	w->off_count[reason]++;
	w->off_class_ns[PKPROF_BLOCK_RUNNABLE] += wait;
	w->runq_waits++;
	if (wait > w->runq_max_ns)
		w->runq_max_ns = wait;
	w->runq_hist[runq_bucket(wait) & (PKPROF_RUNQ_HIST - 1)]++;
	w->off_ns = 0;
	return reason == PKPROF_BLOCK_RUNNABLE ? 0 : own;
}

/*
 * The thread in register r was switched in at r->in_ns and its switch-out was never reported
 * (lost.missed_switch): its off period ends there as usual; what it did from then to `now` is
 * unknown (on this CPU for a while, then off), OTHER, counted; it is off from now, reason
 * unknown (OTHER). A rare path: its entry is looked up here.
 */
static __always_inline void wall_switch_out_unseen(struct pkprof_cpu *c, struct pkprof_wall_cpu *r,
						   __u64 now)
{
	__u32 tid = r->tid;
	struct pkprof_thread *x = bpf_map_lookup_elem(&threads, &tid);
	struct pkprof_wall *w;

	if (!x)
		return;
	w = &x->wall;
	if (!w->since_ns || w->end_ns || r->in_ns < w->since_ns || r->in_ns > now)
		return;
	if (w->off_ns && r->in_ns < w->off_ns)
		return; /* an older switch-in than its last switch-out: nothing pending */
	if (w->off_ns) {
		__u64 own = wall_close_off(w, r);

		if (w->off_reason == PKPROF_BLOCK_OTHER)
			other_fn_add(c, tid, x->pid, w, own);
	}
	w->off_class_ns[PKPROF_BLOCK_OTHER] += now - r->in_ns;
	w->switch_unseen++;
	w->off_reason = PKPROF_BLOCK_OTHER;
	w->off_func = 0; /* not known */
	w->off_ns = now;
	w->wake_ns = 0;
	w->run_delay_out = r->run_delay_ns;
}

/*
 * Task cur (entry e) leaves the CPU in c->switch_state: its switch-in, kept in this CPU's
 * register, closes the off period before it; the slice since is running; a new off period opens.
 */
static __always_inline void wall_switch_out(struct pkprof_cpu *c, struct pkprof_thread *e,
					    struct task_struct *cur, void *ctx)
{
	__u64 now = c->last_ns; /* the switch's instant: charge() just ran */
	struct pkprof_wall_cpu *r;
	struct pkprof_wall *w;
	__u32 state = c->switch_state, tid = cur->pid;
	__u64 in = 0, own = 0, reason_part = 0;

	if (!wall_on || !tid || !count_from_ns)
		return;
	r = &c->wall;
	if (r->tid == tid) {
		in = r->in_ns;
	} else if (r->tid) {
		wall_switch_out_unseen(c, r, now);
		in = 0;
	}
	if (!e) {
		r->tid = 0;
		return;
	}
	w = &e->wall;
	if (!w->since_ns)
		w->since_ns = now; /* first seen leaving the CPU: followed from now */
	else if (in && in >= w->since_ns && in <= now && (!w->off_ns || in >= w->off_ns)) {
		if (w->off_ns) {
			reason_part = w->off_reason;
			own = wall_close_off(w, r);
		}
		/*
		 * The scheduler may have started this slice before our switch-in: a wakeup that
		 * preempts skips the clock update of the __schedule that follows
		 * (rq_clock_skip_update), so the woken task runs, by its own clock, from the wakeup
		 * on. Its slice (se.sum_exec_runtime since the core's reading at the switch-in) then
		 * exceeds ours; that part was counted in the off period just closed, under its
		 * reason: it goes back to running (at most what that period gave its reason).
		 */
		if (own && c->sum_at_in && c->cur_tid == tid) {
			__u64 slice = cur->se.sum_exec_runtime - (c->sum_at_in - 1);

			if (slice > now - in) {
				__u64 back = slice - (now - in);

				if (back > own)
					back = own;
				if (reason_part >= PKPROF_BLOCK_NR)
					reason_part = PKPROF_BLOCK_OTHER;
				w->off_class_ns[reason_part] -= back;
				own -= back;
				in -= back;
			}
		}
		if (reason_part == PKPROF_BLOCK_OTHER)
			other_fn_add(c, tid, e->pid, w, own);
		/* It left and came back unreported (its switch count moved on, see the core's
		 * follow_scheduler_slice): it ran what the scheduler timed; the rest of the slice it
		 * was off, when and why unknown: OTHER, counted. */
		if (c->sum_at_in && c->cur_tid == tid && returned_unreported(c, cur)) {
			__u64 ran = cur->se.sum_exec_runtime - (c->sum_at_in - 1);

			if (ran < now - in) {
				w->off_class_ns[PKPROF_BLOCK_OTHER] += now - in - ran;
				w->switch_unseen++;
				in = now - ran;
			}
		}
		w->oncpu_ns += now - in;
	}
	r->tid = 0;
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
	w->off_reason = block_reason(cur, state);
	/* OTHER says no more than "blocked": where in the kernel, from its stack (this path only). */
	w->off_func = w->off_reason == PKPROF_BLOCK_OTHER ? other_func_cached(w, cur, state, ctx) : 0;
	w->off_ns = now;
	w->run_delay_out = run_delay_of(cur);
	/* Runnable at once when preempted; a blocked thread waits for its wakeup. */
	w->wake_ns = w->off_reason == PKPROF_BLOCK_RUNNABLE ? now : 0;
}

/*
 * next takes the CPU: its switch-in, and how long it waited for the CPU, go to this CPU's
 * register; its entry is not looked up (wall_switch_out applies them).
 */
static __always_inline void wall_switch_in(struct pkprof_cpu *c, struct task_struct *next)
{
	struct pkprof_wall_cpu *r;

	if (!wall_on)
		return;
	r = &c->wall;
	/* A reader that copies the register mid-write (tid old or 0 with in_ns new, or the new tid
	 * with part of the rest old) copied the CPU's switch count before this switch counts it, at
	 * the end of the core's program: its copy after the walk differs and it reads again. */
	r->tid = 0;
	r->in_ns = c->last_ns;
	sched_wait(next, r);
	r->tid = next->pid;
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
	e->wall.run_delay_out = run_delay_of(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_sched_wakeup_new, struct task_struct *p)
{
	return wall_wakeup_new(p);
}

#endif /* PKPROF_WALL_BPF_H */
