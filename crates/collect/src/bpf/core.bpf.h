/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The accounting core shared by every program: the per-CPU register file and its maps, the charge
 * of elapsed time to the running context, the interrupt context stack, thread entries, and the
 * served-event tag register that the attribution chains (chains/) open and close.
 */
#ifndef PKPROF_CORE_BPF_H
#define PKPROF_CORE_BPF_H

#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000
#define PF_WQ_WORKER 0x00000020
#define NET_RX_SOFTIRQ 3
#define BLOCK_SOFTIRQ 4

static __always_inline void close_tag(struct pkprof_cpu *c);

/*
 * Programs on tracepoints that run with interrupts enabled (softirq and task context) update the
 * same per-CPU registers as the hard-IRQ programs; they run with interrupts off (Linux >= 6.14).
 */
extern void bpf_local_irq_save(unsigned long *flags) __ksym;
extern void bpf_local_irq_restore(unsigned long *flags) __ksym;

/* Evaluates CALL (an int expression) with this CPU's interrupts off and yields its value. */
#define WITH_IRQS_OFF(call)                                                                        \
	({                                                                                         \
		unsigned long __irq_flags;                                                         \
		int __rc;                                                                          \
		bpf_local_irq_save(&__irq_flags);                                                  \
		__rc = (call);                                                                     \
		bpf_local_irq_restore(&__irq_flags);                                               \
		__rc;                                                                              \
	})

/* Set by the loader before load: split task time into user/sys (syscall tracepoints attached). */
const volatile bool split_modes = false;
/*
 * CLOCK_MONOTONIC at which counting begins, set by the loader once every program is attached
 * (0 until then). Programs attached earlier follow the CPUs' state but charge nothing, so every
 * CPU's time starts at the same instant the loader reports as attach.
 */
volatile __u64 count_from_ns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkprof_cpu);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768); /* resized by the loader (--max-threads) */
	__type(key, __u32);
	__type(value, struct pkprof_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct pkprof_syscall_key);
	__type(value, struct pkprof_syscall_stat);
} syscalls SEC(".maps");

/* The record types reach BTF (and so Rust) through the map definitions above. */

static __always_inline struct pkprof_cpu *this_cpu(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpus, &zero);
}

/*
 * User or kernel mode of a task whose mode we have not tracked yet (first seen since attach).
 * Kernel threads are always in the kernel. On x86 a user task's saved registers tell: orig_ax
 * holds the syscall number (>= 0) while it is inside a syscall or exception, and a negative value
 * when an interrupt took it from user mode.
 */
static __always_inline __u32 infer_mode(struct task_struct *t)
{
	if (t->flags & PF_KTHREAD)
		return PKPROF_MODE_SYS;
#if defined(__TARGET_ARCH_x86)
	{
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
		long orig = BPF_CORE_READ(regs, orig_ax);

		return orig >= 0 ? PKPROF_MODE_SYS : PKPROF_MODE_USER;
	}
#else
	return PKPROF_MODE_UNKNOWN;
#endif
}

/* Interrupt time goes to the open served-event tag of this context, else to KERNEL. */
static __always_inline void charge_tag(struct pkprof_cpu *c, __u64 d)
{
	if (c->tag != PKPROF_TAG_NONE && c->tag_depth == c->depth)
		c->tag_ns += d;
	else
		c->kernel_irq_ns += d;
}

/* Charges the time since the CPU's last event to the context that was running. */
static __always_inline void charge(struct pkprof_cpu *c, __u64 now)
{
	__u32 i = c->depth & (PKPROF_CTX_DEPTH - 1);
	__u64 d;
	__u8 v;

	if (!c->last_ns) {
		/* First event on this CPU since attach: learn the current task, charge nothing. */
		__u64 id = bpf_get_current_pid_tgid();

		c->last_ns = now;
		c->cur_tid = (__u32)id;
		c->cur_pid = id >> 32;
		c->depth = 0;
		c->ctx[0] = PKPROF_CTX_TASK;
		if (split_modes)
			c->mode = infer_mode(bpf_get_current_task_btf());
		return;
	}
	if (!count_from_ns) {
		/* Still attaching: follow the CPU's state, charge nothing. */
		c->last_ns = now;
		return;
	}
	if (c->last_ns < count_from_ns)
		c->last_ns = count_from_ns; /* the first charge since counting began */
	if ((__s64)(now - c->last_ns) <= 0)
		return; /* an older clock reading than the last charge: nothing to charge */
	d = now - c->last_ns;
	c->last_ns = now;

	switch (c->ctx[i]) {
	case PKPROF_CTX_TASK:
		if (!c->cur_tid) {
			c->idle_ns += d;
			return;
		}
		c->task_ns += d;
		c->pending.task_ns += d;
		if (c->wq_tid && c->cur_tid == c->wq_worker) {
			/* A kworker running an item queued by someone else: the queuer's time. */
			c->pending.served_out_ns += d;
			c->wq_ns += d;
		}
		if (split_modes) {
			if (c->mode == PKPROF_MODE_USER)
				c->pending.user_ns += d;
			else if (c->mode == PKPROF_MODE_SYS)
				c->pending.sys_ns += d;
			else
				c->pending.unsplit_ns += d;
		}
		break;
	case PKPROF_CTX_HARDIRQ:
		c->hardirq_ns += d;
		if (c->cur_tid) {
			c->pending.hardirq_ns += d;
			c->pending_irq = 1;
		}
		charge_tag(c, d);
		break;
	case PKPROF_CTX_SOFTIRQ:
		v = c->vec[i];
		if (v >= PKPROF_NR_SOFTIRQS)
			break;
		c->softirq_ns[v] += d;
		if (c->cur_tid) {
			c->pending.softirq_ns[v] += d;
			c->pending_irq = 1;
		}
		charge_tag(c, d);
		break;
	}
}

static __always_inline void push_ctx(struct pkprof_cpu *c, __u8 ctx, __u8 vec)
{
	__u32 next = c->depth + 1;

	if (next >= PKPROF_CTX_DEPTH) {
		c->overflow++; /* swallowed nesting level, matched by its exit below */
		c->lost.ctx_overflow++;
		return;
	}
	c->depth = next;
	/* Hide the range check from clang so it keeps the mask the verifier needs. */
	barrier_var(next);
	next &= PKPROF_CTX_DEPTH - 1;
	c->ctx[next] = ctx;
	c->vec[next] = vec;
}

static __always_inline void pop_ctx(struct pkprof_cpu *c, __u8 ctx)
{
	if (c->overflow) {
		c->overflow--;
		return;
	}
	if (!c->depth || c->ctx[c->depth & (PKPROF_CTX_DEPTH - 1)] != ctx) {
		c->lost.unmatched_exit++;
		return;
	}
	if (c->tag != PKPROF_TAG_NONE && c->tag_depth == c->depth)
		close_tag(c);
	c->depth--;
}

/*
 * Moves the CPU's pending charges into the thread's entry and clears them. This runs at every
 * context switch, so it touches only what can be non-zero: interrupt fields when interrupts were
 * charged, syscall-mode fields in syscall mode.
 */
static __always_inline void flush_pending(struct pkprof_cpu *c, struct pkprof_acc *dst)
{
	struct pkprof_acc *src = &c->pending;

	if (dst) {
		dst->task_ns += src->task_ns;
		dst->switches += src->switches;
	}
	src->task_ns = 0;
	src->switches = 0;
	if (c->pending_irq) {
		if (dst) {
			dst->hardirq_ns += src->hardirq_ns;
#pragma unroll
			for (int i = 0; i < PKPROF_NR_SOFTIRQS; i++)
				dst->softirq_ns[i] += src->softirq_ns[i];
		}
		src->hardirq_ns = 0;
		__builtin_memset(src->softirq_ns, 0, sizeof(src->softirq_ns));
		c->pending_irq = 0;
	}
	if (src->served_out_ns) {
		if (dst)
			dst->served_out_ns += src->served_out_ns;
		src->served_out_ns = 0;
	}
	if (src->served_net_ns) {
		if (dst) {
			dst->served_net_ns += src->served_net_ns;
			dst->served_net_items += src->served_net_items;
		} else {
			c->kernel_irq_ns += src->served_net_ns; /* nobody to bill: KERNEL */
		}
		src->served_net_ns = 0;
		src->served_net_items = 0;
	}
	if (split_modes) {
		if (dst) {
			dst->user_ns += src->user_ns;
			dst->sys_ns += src->sys_ns;
			dst->unsplit_ns += src->unsplit_ns;
			dst->syscalls += src->syscalls;
			dst->faults += src->faults;
		}
		src->user_ns = 0;
		src->sys_ns = 0;
		src->unsplit_ns = 0;
		src->syscalls = 0;
		src->faults = 0;
	}
}

/* Finds the thread's entry, creating it from the given task when it is new. */
static __always_inline struct pkprof_thread *thread_entry(struct pkprof_cpu *c, struct task_struct *t,
							    __u64 now)
{
	__u32 tid = t->pid;
	struct pkprof_thread *e = bpf_map_lookup_elem(&threads, &tid);
	struct pkprof_thread fresh = {};
	long err;

	if (e)
		return e;
	fresh.pid = t->tgid;
	fresh.ppid = BPF_CORE_READ(t, real_parent, tgid);
	fresh.start_ns = now;
	/* Later moves are followed by the cgroup_attach_task program. */
	fresh.cgroup_id = bpf_get_current_cgroup_id();
	fresh.kthread = !!(t->flags & PF_KTHREAD);
	/* A dying thread switched out after user space freed its entry (it ran late in its exit
	 * path): the new entry is stamped too, or it would never be freed. */
	if (t->flags & PF_EXITING)
		fresh.exit_ns = now;
	bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), t->comm);
	err = bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: created meanwhile on another CPU */) {
		c->lost.thread_map_full++;
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}


/*
 * Credits work done for thread `tid` by someone else, from any CPU. A thread whose entry is gone
 * (exited and read for the last time) cannot be billed: its share goes to KERNEL and is counted.
 */
static __always_inline void credit_thread(struct pkprof_cpu *c, __u32 tid, __u32 chain, __u64 ns,
					  __u64 items)
{
	struct pkprof_thread *e = tid ? bpf_map_lookup_elem(&threads, &tid) : NULL;

	if (!e || chain >= PKPROF_NR_CHAINS) {
		if (chain == PKPROF_CHAIN_WORKQ)
			c->orphan_wq_ns += ns;
		else
			c->kernel_irq_ns += ns;
		return;
	}
	__sync_fetch_and_add(&e->served.ns[chain], ns);
	if (items)
		__sync_fetch_and_add(&e->served.items[chain], items);
}

#endif /* PKPROF_CORE_BPF_H */
