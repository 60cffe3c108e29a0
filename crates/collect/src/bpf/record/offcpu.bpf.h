/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pkprof record --off-cpu: off-CPU samples, their wakers and wake chains (docs/design.md,
 * "Off-CPU samples"). A thread that leaves its CPU in a sleeping state opens an off period in its
 * task storage (time, block reason); sched_waking notes who woke it (the current task, or the
 * interrupt it ran in) and the waker's own chain; its switch-in closes the period.
 *
 * Sampling by time: a block of d ns is chosen with probability min(1, d / period) and then weighs
 * max(d, period) (scaled to the whole off time), so the expected weight of every block is its
 * length and blocks of a period or more are always taken, exactly (period 0: every block). The
 * period is per CPU and doubles whenever a CPU has chosen off_cpu_max_rate / 10 samples within
 * 100 ms (halving back towards the set period in slots under half that), so that a load with hundreds of
 * threads blocked at once costs a bounded rate of samples; each block keeps the period it was
 * chosen at for its weight, which stays unbiased. Only
 * chosen blocks pay for stacks: the waker's at its wakeup (in its context), the blocked thread's
 * kernel stack at its switch-in (bpf_get_task_stack: it is unchanged while the thread sleeps),
 * and its user stack in its own context when the blocking call returns (the user registers and
 * stack are still those it blocked with), or when it blocks again first. "When the call returns"
 * is, by what the kernel offers (enum pkprof_offcpu_ustack): a task work queued for the chosen
 * thread alone at its switch-in (bpf_task_work_schedule_resume, Linux >= 6.18: it runs as the
 * thread returns to user mode); else rseq:rseq_update, which the kernel runs as a thread with an
 * rseq area returns to user mode after a switch-out (about one run per switch, not per syscall);
 * else a sys_exit program, at every syscall exit of the system.
 */
#ifndef PKPROF_RECORD_OFFCPU_BPF_H
#define PKPROF_RECORD_OFFCPU_BPF_H

#include "core.bpf.h"
#include "block_reason.bpf.h"
#include "task_reads.bpf.h"
#include "record/links.bpf.h"
#include "record/sample.bpf.h"
#include "user_stack.bpf.h"

/* record --off-cpu: follow blocks at all. */
const volatile bool off_cpu = false;
/* Every process is sampled (record -a), not only `targets`. */
const volatile bool off_cpu_all = false;
/* Sampling period of off time in ns (0: every block). */
const volatile __u64 off_cpu_period_ns = PKPROF_DEFAULT_OFFCPU_PERIOD_US * 1000ULL;
/* Wake-chain entries kept (1..PKPROF_MAX_WAKE_CHAIN). */
const volatile __u32 wake_chain_depth = PKPROF_DEFAULT_WAKE_CHAIN;
/* Chosen samples a second per CPU before its period is raised (0: never raised). */
const volatile __u32 off_cpu_max_rate = PKPROF_DEFAULT_OFFCPU_MAX_RATE;
/* How a chosen block's user stack is taken (set by the loader). */
const volatile enum pkprof_offcpu_ustack offcpu_ustack = PKPROF_OFFCPU_USTACK_SYS_EXIT;
#define offcpu_task_work (offcpu_ustack == PKPROF_OFFCPU_USTACK_TASK_WORK)

/* Linux >= 6.18; weak: unresolved (and never reached, offcpu_task_work false) on older kernels. */
extern int bpf_task_work_schedule_resume_impl(struct task_struct *task, struct bpf_task_work *tw,
					      void *map__map, int (*callback)(struct bpf_map *, void *, void *),
					      void *aux__prog) __weak __ksym;
extern void bpf_preempt_disable(void) __weak __ksym;
extern void bpf_preempt_enable(void) __weak __ksym;

struct pkprof_offcpu_stats pkprof_offcpu_stats_btf_anchor SEC(".data.btf_anchor");
struct pkprof_offcpu pkprof_offcpu_btf_anchor SEC(".data.btf_anchor");
enum pkprof_block_reason pkprof_block_reason_btf_anchor SEC(".data.btf_anchor");
enum pkprof_offcpu_defaults pkprof_offcpu_defaults_btf_anchor SEC(".data.btf_anchor");
enum pkprof_waker_flags pkprof_waker_flags_btf_anchor SEC(".data.btf_anchor");
enum pkprof_offcpu_ustack pkprof_offcpu_ustack_btf_anchor SEC(".data.btf_anchor");

/* Where a thread stands (offcpu_task.state). */
enum offcpu_state {
	OFF_NONE = 0,    /* running, or not followed */
	OFF_BLOCKED = 1, /* off its CPU in a sleeping state */
	OFF_CHOSEN = 2,  /* ... and chosen as a sample at its wakeup (waker taken) */
	OFF_PENDING = 3, /* ran again: its sample waits for its user stack (offcpu_pending) */
};

/* Every thread's off state and wake chain (small; any thread can be a waker in a chain). */
struct offcpu_task {
	__u64 off_ns;
	__u64 woken_ns;
	__u64 blocked_ns;
	__u64 period_ns; /* the sampling period the block was chosen at */
	__u32 reason;
	__u32 state;
	__u32 in_syscall;
	/* chain[] describes the wake this thread runs for: valid from its wakeup until it blocks. */
	__u32 nr_chain;
	struct pkprof_waker chain[PKPROF_MAX_WAKE_CHAIN];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct offcpu_task);
} offcpu_tasks SEC(".maps");

/* A chosen block's record while it is built (threads that are sampled, chosen blocks only). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pkprof_offcpu);
} offcpu_pending SEC(".maps");

/* Where a record meets its user stack bytes before the ring; one slot per CPU (sized by the
 * loader), apart from sample_scratch: a cpu-clock sample may interrupt a syscall's exit. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkprof_offcpu_buf);
} offcpu_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkprof_offcpu_stats);
} offcpu_stats SEC(".maps");

/* The task work of a thread whose chosen sample waits for its user stack (key: tid; an entry per
 * thread that ever had one, deleted when it exits; sized by the loader). */
struct offcpu_work {
	struct bpf_task_work tw;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_work);
} offcpu_works SEC(".maps");

/*
 * The thread switched in on this CPU with a sample waiting for its user stack (0: none), so that
 * every syscall exit (or rseq return) of the system costs one per-CPU load, not a task storage
 * lookup. Valid from
 * its switch-in until its call returns or it leaves the CPU (where a waiting sample is written):
 * it cannot change CPU in between.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} offcpu_armed SEC(".maps");

/* A CPU's sampling period and the samples it chose in the current 100 ms slot. */
struct offcpu_rate {
	__u64 slot_ns;
	__u64 period_ns;
	__u64 chosen;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_rate);
} offcpu_rates SEC(".maps");

#define OFFCPU_SLOT_NS (100 * 1000 * 1000ULL)
/* The highest a period is raised to: about 1100 s. */
#define OFFCPU_MAX_PERIOD_NS (1ULL << 40)

static __always_inline struct pkprof_offcpu_stats *offcpu_counts(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&offcpu_stats, &zero);
}

/* Whether thread t's blocks are sampled. */
static __always_inline bool offcpu_sampled(struct task_struct *t)
{
	if (!t->pid || (t->flags & PF_KTHREAD))
		return false;
	return off_cpu_all || target_flag(t->tgid);
}

/*
 * Chooses a block of d ns: probability min(1, d / period), with this CPU's period at `now`
 * (stored in *period for the weight). A choice counts towards the CPU's rate: at
 * off_cpu_max_rate / 10 choices in a 100 ms slot the period doubles (and the count restarts);
 * a slot ending with under half of that halves it, down to the set period (so the rate settles
 * between half the cap and the cap).
 */
static __always_inline bool offcpu_choose(__u64 d, __u64 now, __u64 *period)
{
	__u64 budget = off_cpu_max_rate / 10, p = off_cpu_period_ns;
	struct offcpu_rate *r = NULL;
	__u32 zero = 0;

	if (p && budget)
		r = bpf_map_lookup_elem(&offcpu_rates, &zero);
	if (r) {
		if (r->period_ns < p)
			r->period_ns = p;
		if (now - r->slot_ns >= OFFCPU_SLOT_NS) {
			if (r->chosen < budget / 2 && r->period_ns > p)
				r->period_ns /= 2;
			r->slot_ns = now;
			r->chosen = 0;
		}
		p = r->period_ns;
	}
	*period = p;
	if (p && d < p) {
		__u64 x = bpf_get_prandom_u32();

		if (p >> 32) /* a raised period beyond 32 bits: 64 random bits */
			x = (x << 32) | bpf_get_prandom_u32();
		if (x % p >= d)
			return false;
	}
	if (r && ++r->chosen >= budget && r->period_ns < OFFCPU_MAX_PERIOD_NS) {
		struct pkprof_offcpu_stats *n = offcpu_counts();

		r->period_ns *= 2;
		r->chosen = 0;
		if (n)
			n->period_raised++;
	}
	return true;
}

/* The weight of a chosen block off for `off` ns, chosen on `chosen_on` ns of it at `period`. */
static __always_inline __u64 offcpu_weight(__u64 off, __u64 chosen_on, __u64 period)
{
	if (!period || chosen_on >= period)
		return off;
	if (!chosen_on)
		chosen_on = 1;
	/* off * period / chosen_on, without overflow while off / chosen_on * period fits */
	return off / chosen_on * period + (off % chosen_on) * period / chosen_on;
}

/*
 * Writes the pending sample of the current thread, with its user stack when `regs` (its user
 * registers) is given, and clears it.
 */
static __always_inline void offcpu_emit(struct task_struct *cur, struct offcpu_task *t,
					struct pt_regs *regs)
{
	struct pkprof_offcpu_stats *n = offcpu_counts();
	__u32 cpu = bpf_get_smp_processor_id();
	struct pkprof_offcpu_buf *buf;
	struct pkprof_offcpu *p;

	t->state = OFF_NONE;
	p = bpf_task_storage_get(&offcpu_pending, cur, NULL, 0);
	buf = bpf_map_lookup_elem(&offcpu_scratch, &cpu);
	if (!p || !buf || bpf_probe_read_kernel(&buf->o, sizeof(buf->o), p)) {
		if (n)
			n->no_storage++; /* a chosen sample lost before its record was built */
		return;
	}
	buf->o.s.ustack_len = 0;
	buf->o.s.ustack_bytes_len = 0;
	buf->o.s.user_ip = 0;
	buf->o.s.user_sp = 0;
	buf->o.s.user_bp = 0;
	buf->o.s.py_len = 0;
	buf->o.s.py_state = PKPROF_PY_NONE;
	if (regs) {
		__u64 uip = regs->ip, usp = regs->sp, ubp = regs->bp;

		buf->o.s.user_ip = uip;
		buf->o.s.user_sp = usp;
		buf->o.s.user_bp = ubp;
		if (stack_bytes)
			buf->o.s.ustack_bytes_len =
				copy_user_stack(buf->stack, usp, stack_bytes, &buf->o.s.stack_flags);
		buf->o.s.ustack_len = walk_user_stack(buf->o.s.ustack, buf->stack, buf->o.s.ustack_bytes_len,
						      uip, ubp, usp, &buf->o.s.stack_flags);
		/* Its Python frames too: it has not run since it blocked (docs/design.md, "Python
		 * frames"). */
		py_walk_sample(&buf->o.s, py_slot(PY_SLOT_OFFCPU), cur->tgid, cur->pid);
	} else if (n) {
		n->exited_pending++;
	}
	{
		__u32 owner = buf->o.s.cur_pid;
		/* time_ns is the block's end (its switch-in), a little before now: the age it gives
		 * is at most that much short. */
		bool urgent = buf->o.s.ustack_len > 0 && capture_wakeup(owner, cur, buf->o.s.time_ns);

		if (py_emit(&buf->o, sizeof(buf->o), &buf->o.s, py_slot(PY_SLOT_OFFCPU), buf->stack,
			    submit_flags(urgent))) {
			if (n)
				n->ring_full++;
		} else if (n) {
			n->emitted++;
		}
	}
}

/*
 * The task work of a chosen thread (offcpu_works): it runs in the thread's own context as the
 * thread returns to user mode from the call it blocked in (before any signal frame is set up), so
 * its user registers and stack are those it blocked with. Preemption is off while the per-CPU
 * scratch is in use: a task work may be preempted, and a switch on this CPU may use the scratch.
 */
static int offcpu_work_done(struct bpf_map *map, void *key, void *value)
{
	__u64 start = bpf_ktime_get_ns();
	struct pkprof_offcpu_stats *n;
	struct task_struct *cur;
	struct offcpu_task *t;

	bpf_preempt_disable();
	cur = bpf_get_current_task_btf();
	t = bpf_task_storage_get(&offcpu_tasks, cur, NULL, 0);
	if (t && t->state == OFF_PENDING)
		offcpu_emit(cur, t, (struct pt_regs *)bpf_task_pt_regs(cur));
	n = offcpu_counts();
	if (n)
		n->task_work_ns += bpf_ktime_get_ns() - start;
	bpf_preempt_enable();
	return 0;
}

#ifndef EBUSY
#define EBUSY 16
#endif

/*
 * Queues the task work that takes task's user stack when it returns to user mode. A work still
 * queued (-EBUSY: the thread blocked again in the same call, its first sample written at that
 * switch-out) serves the new sample as well.
 */
static __always_inline bool offcpu_queue_work(struct task_struct *task)
{
	struct offcpu_work *w, empty = {};
	__u32 tid = task->pid;
	long err;

	w = bpf_map_lookup_elem(&offcpu_works, &tid);
	if (!w) {
		bpf_map_update_elem(&offcpu_works, &tid, &empty, BPF_NOEXIST);
		w = bpf_map_lookup_elem(&offcpu_works, &tid);
		if (!w)
			return false;
	}
	err = bpf_task_work_schedule_resume_impl(task, &w->tw, &offcpu_works, offcpu_work_done, NULL);
	return !err || err == -EBUSY;
}

/* Fills the identity of the waker running now on this CPU (c: its registers). */
static __always_inline void offcpu_waker(struct pkprof_cpu *c, struct task_struct *cur,
					 struct pkprof_waker *w)
{
	__u32 depth = c ? c->depth : 0, i = depth & (PKPROF_CTX_DEPTH - 1);

	w->pid = cur->tgid;
	w->tid = cur->pid;
	w->vec = 0;
	w->flags = (cur->flags & PF_KTHREAD) ? PKPROF_WAKER_KTHREAD : 0;
	w->reason = 0;
	w->blocked_ns = 0;
	/* This runs at every wakeup of a blocked thread: direct loads (task_reads.bpf.h). */
	_Static_assert(sizeof(w->comm) == 16 && __builtin_offsetof(struct pkprof_waker, comm) % 8 == 0,
		       "comm: two aligned words");
	task_comm_copy(cur, w->comm);
	if (c && depth && c->ctx[i] != PKPROF_CTX_TASK) {
		w->ctx = c->ctx[i] == PKPROF_CTX_SOFTIRQ ? PKPROF_SCTX_SOFTIRQ : PKPROF_SCTX_HARDIRQ;
		w->vec = c->vec[i];
	} else if (!cur->pid) {
		w->ctx = PKPROF_SCTX_IDLE;
	} else {
		w->ctx = PKPROF_SCTX_KERNEL;
	}
}

/*
 * sched_waking of p (ctx: the tracepoint's, for the waker's stacks). The woken thread's chain
 * becomes: its waker, then the waker's own chain when the waker runs for a wake of its own
 * (it was woken and has not blocked since); interrupt work starts a chain.
 */
static __always_inline void offcpu_waking(void *ctx, struct task_struct *p)
{
	struct pkprof_cpu *c = this_cpu();
	struct task_struct *cur = bpf_get_current_task_btf();
	struct offcpu_task *t, *wt = NULL;
	struct pkprof_offcpu *pend;
	__u64 now;
	__u32 n = 0;
	bool task_ctx;

	t = bpf_task_storage_get(&offcpu_tasks, p, NULL, 0);
	if (!t || t->state != OFF_BLOCKED)
		return;
	now = bpf_ktime_get_ns();
	t->woken_ns = now;
	t->blocked_ns = now - t->off_ns;
	offcpu_waker(c, cur, &t->chain[0]);
	task_ctx = t->chain[0].ctx == PKPROF_SCTX_KERNEL;
	n = 1;
	if (task_ctx)
		wt = bpf_task_storage_get(&offcpu_tasks, cur, NULL, 0);
	if (wt && wt->nr_chain) {
		t->chain[0].flags |= PKPROF_WAKER_WAS_BLOCKED;
		t->chain[0].blocked_ns = wt->blocked_ns;
		t->chain[0].reason = wt->reason;
#pragma unroll
		for (int i = 0; i < PKPROF_MAX_WAKE_CHAIN - 1; i++) {
			if (i + 1 >= wake_chain_depth)
				break;
			if (i >= wt->nr_chain)
				break;
			t->chain[i + 1] = wt->chain[i];
			n = i + 2;
		}
		if (wt->nr_chain + 1 > wake_chain_depth) {
			struct pkprof_offcpu_stats *s = offcpu_counts();

			if (s)
				s->chain_truncated++;
		}
	}
	t->nr_chain = n;
	if (!offcpu_sampled(p) || !offcpu_choose(t->blocked_ns, now, &t->period_ns))
		return;
	pend = bpf_task_storage_get(&offcpu_pending, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!pend) {
		struct pkprof_offcpu_stats *s = offcpu_counts();

		if (s)
			s->no_storage++; /* a chosen block lost: no storage for its sample */
		return;
	}
	t->state = OFF_CHOSEN;
	/* Skipping this program and bpf_trace_run1: the stack starts at try_to_wake_up. */
	pend->waker_kstack_len = bpf_get_stack(ctx, pend->waker_kstack, sizeof(pend->waker_kstack), 2);
	pend->waker_ustack_len = 0;
	if (task_ctx && !(cur->flags & PF_KTHREAD))
		pend->waker_ustack_len = bpf_get_stack(ctx, pend->waker_ustack, sizeof(pend->waker_ustack),
						       BPF_F_USER_STACK);
}

/* task_struct.rseq as a pointer (CONFIG_RSEQ); a kernel whose field has another shape does not
 * match it, and the loader does not pick PKPROF_OFFCPU_USTACK_RSEQ there. */
struct task_struct___rseq {
	void *rseq;
} __attribute__((preserve_access_index));

/* Whether t registered an rseq area: its returns to user mode after a switch run rseq_update. */
static __always_inline bool offcpu_has_rseq(struct task_struct *t)
{
	struct task_struct___rseq *r = (void *)t;

	if (!bpf_core_field_exists(r->rseq))
		return false;
	return r->rseq != NULL; /* a direct load: t is a trusted task pointer */
}

/*
 * The core's sched_switch, after its own work: prev leaves (state: its sleeping state, 0 when it
 * stays runnable), next comes in.
 */
static __always_inline void offcpu_switch(struct task_struct *prev, struct task_struct *next,
					  unsigned int state, __u64 now)
{
	struct pkprof_offcpu_stats *n;
	struct offcpu_task *t;
	struct pkprof_offcpu *p;
	bool chosen;
	__u64 off;

	if (!off_cpu)
		return;
	/* A preempted thread with a sample waiting keeps it for its task work (the rseq and
	 * sys_exit ways write it now: the per-CPU arming does not follow the thread). */
	if (prev->pid && (state || !offcpu_task_work)) {
		t = bpf_task_storage_get(&offcpu_tasks, prev, NULL,
					 state ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
		if (t && t->state == OFF_PENDING)
			/* Blocks again before its call returned: prev is current, its user
			 * registers and stack are still those of the first block. */
			offcpu_emit(prev, t, task_user_regs(prev));
		if (t && state) {
			t->nr_chain = 0; /* no longer runs for its last wake */
			t->off_ns = now;
			t->woken_ns = 0;
			t->blocked_ns = 0;
			t->reason = block_reason(prev, state);
			/* orig_ax is unsigned: -1 (no call: a page fault) only reads so as a long. */
			t->in_syscall = !(prev->flags & PF_KTHREAD) &&
					(long)task_user_regs(prev)->orig_ax >= 0;
			t->state = OFF_BLOCKED;
			if (offcpu_sampled(prev) && (n = offcpu_counts()))
				n->blocks++;
		} else if (!t && state && offcpu_sampled(prev) && (n = offcpu_counts())) {
			n->no_storage++;
		}
	}
	if (!offcpu_task_work) {
		__u32 zero = 0, *armed = bpf_map_lookup_elem(&offcpu_armed, &zero);

		if (armed)
			*armed = 0;
	}
	if (!next->pid)
		return;
	t = bpf_task_storage_get(&offcpu_tasks, next, NULL, 0);
	if (!t || (t->state != OFF_BLOCKED && t->state != OFF_CHOSEN))
		return;
	off = now - t->off_ns;
	chosen = t->state == OFF_CHOSEN;
	t->state = OFF_NONE;
	if (!offcpu_sampled(next))
		return;
	if (!chosen) {
		if (t->woken_ns || !offcpu_choose(off, now, &t->period_ns))
			return; /* not chosen at its wakeup, or no wakeup seen and not chosen now */
		p = bpf_task_storage_get(&offcpu_pending, next, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!p) {
			n = offcpu_counts();
			if (n)
				n->no_storage++;
			return;
		}
		p->waker_kstack_len = 0;
		p->waker_ustack_len = 0;
		p->nr_chain = 0;
	}
	p = bpf_task_storage_get(&offcpu_pending, next, NULL, 0);
	if (!p)
		return;
	n = offcpu_counts();
	if (n)
		n->chosen++;
	p->off_ns = t->off_ns;
	p->offcpu_ns = off;
	p->blocked_ns = t->woken_ns ? t->blocked_ns : 0;
	p->weight_ns = offcpu_weight(off, t->woken_ns ? t->blocked_ns : off, t->period_ns);
	p->reason = t->reason;
	if (chosen) {
		p->nr_chain = t->nr_chain;
		__builtin_memcpy(p->chain, t->chain, sizeof(p->chain));
	}
	p->s.kind = PKPROF_EV_OFFCPU;
	p->s.cpu = bpf_get_smp_processor_id();
	p->s.time_ns = now;
	p->s.cur_pid = next->tgid;
	p->s.cur_tid = next->pid;
	p->s.pid = 0;
	p->s.tid = 0;
	p->s.cgroup_id = 0;
	p->s.hold = 0;
	p->s.hold_kind = PKPROF_HOLD_NONE;
	p->s.stack_flags = 0;
	p->s.vec = 0;
	p->s.flags = 0;
	p->s.build_ns = 0;
	p->s.ctx = PKPROF_SCTX_KERNEL;
	p->s.py_len = 0; /* its Python frames: with its user stack (offcpu_emit) */
	p->s.py_state = PKPROF_PY_NONE;
	label_thread(&p->s, next->pid);
	if (!p->s.pid) {
		p->s.pid = next->tgid;
		p->s.flags = target_flag(next->tgid);
	}
	bpf_probe_read_kernel_str(p->s.comm, sizeof(p->s.comm), next->comm);
	p->s.orig_ax = t->in_syscall ? task_user_regs(next)->orig_ax : -1;
	p->s.kstack_len = bpf_get_task_stack(next, p->s.kstack, sizeof(p->s.kstack), 0);
	p->s.ustack_len = 0;
	p->s.ustack_bytes_len = 0;
	if (t->in_syscall && offcpu_task_work) {
		t->state = OFF_PENDING; /* the user stack, at its return (offcpu_work_done) */
		if (!offcpu_queue_work(next)) {
			t->state = OFF_NONE; /* no task work could be had: the sample is lost */
			if (n)
				n->no_storage++;
		}
	} else if (t->in_syscall &&
		   (offcpu_ustack != PKPROF_OFFCPU_USTACK_RSEQ || offcpu_has_rseq(next))) {
		__u32 zero = 0, *armed = bpf_map_lookup_elem(&offcpu_armed, &zero);

		t->state = OFF_PENDING; /* the user stack, at its return (offcpu_user_return) */
		if (armed)
			*armed = next->pid;
	} else {
		/* Blocked outside a call (a page fault), or its return to user mode runs no
		 * rseq_update: its user registers are not at hand now; written without a user
		 * stack. */
		if (t->in_syscall && n)
			n->no_rseq++;
		__u32 cpu = bpf_get_smp_processor_id();
		struct pkprof_offcpu_buf *buf = bpf_map_lookup_elem(&offcpu_scratch, &cpu);

		if (buf && !bpf_probe_read_kernel(&buf->o, sizeof(buf->o), p)) {
			if (bpf_ringbuf_output(&events, buf, sizeof(buf->o), submit_flags(false))) {
				if (n)
					n->ring_full++;
			} else if (n) {
				n->emitted++;
			}
		}
	}
}

/* Whether the current thread (cur, or NULL: asked of a helper) is this CPU's armed one (its
 * chosen block awaits its user stack); disarms it. One per-CPU load when nothing is armed: this
 * runs at every syscall exit or return to user mode of the machine, so no helper call comes
 * before that test. */
static __always_inline bool offcpu_take_armed(struct task_struct *cur)
{
	__u32 zero = 0, *armed, tid;

	if (!off_cpu)
		return false;
	armed = bpf_map_lookup_elem(&offcpu_armed, &zero);
	if (!armed || !*armed)
		return false;
	tid = cur ? (__u32)cur->pid : (__u32)bpf_get_current_pid_tgid();
	if (*armed != tid)
		return false;
	*armed = 0;
	return true;
}

/* The armed thread cur returns from its call (sys_exit, or rseq_update on its way to user
 * mode): its pending sample takes its user stack now. */
static __always_inline void offcpu_user_return(struct task_struct *cur, struct pt_regs *regs)
{
	struct offcpu_task *t = bpf_task_storage_get(&offcpu_tasks, cur, NULL, 0);

	if (t && t->state == OFF_PENDING)
		offcpu_emit(cur, t, regs);
}

/* The current thread exits: a pending sample is written without its user stack, and its task
 * work entry goes (which cancels a work still queued). */
static __always_inline void offcpu_exit(void)
{
	struct task_struct *cur;
	struct offcpu_task *t;

	if (!off_cpu)
		return;
	cur = bpf_get_current_task_btf();
	t = bpf_task_storage_get(&offcpu_tasks, cur, NULL, 0);
	if (t && t->state == OFF_PENDING)
		offcpu_emit(cur, t, NULL);
	if (offcpu_task_work) {
		__u32 tid = cur->pid;

		bpf_map_delete_elem(&offcpu_works, &tid);
	}
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_offcpu_sys_exit, struct pt_regs *regs, long ret)
{
	if (offcpu_take_armed(NULL))
		offcpu_user_return(bpf_get_current_task_btf(), regs);
	return 0;
}

/* Runs as a thread with an rseq area returns to user mode after a switch-out (or a signal, a
 * migration), before any signal frame is set up: its user registers are the saved ones. */
SEC("tp_btf/rseq_update")
int BPF_PROG(on_offcpu_rseq_update, struct task_struct *t)
{
	/* t is current (the tracepoint runs on the thread's own way out). */
	if (offcpu_take_armed(t))
		offcpu_user_return(t, task_user_regs(t));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_offcpu_exit, struct task_struct *p)
{
	offcpu_exit();
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_offcpu_waking, struct task_struct *p)
{
	offcpu_waking(ctx, p);
	return 0;
}

#endif /* PKPROF_RECORD_OFFCPU_BPF_H */
