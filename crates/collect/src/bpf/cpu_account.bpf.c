// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Exact CPU accounting on stable tracepoints (tp_btf).
 *
 * Each CPU keeps a small register file (struct pkprof_cpu): the current task and a stack of the
 * interrupt contexts open on top of it. At every event (context switch, hard IRQ entry/exit, softirq
 * entry/exit, syscall entry/exit) the time since the previous event is charged to the context that
 * was running, so the per-CPU totals add up to wall time exactly. Time charged to the current thread
 * is kept per CPU in `pending` and flushed into the thread's `threads` entry at the next context
 * switch: interrupt handlers touch no hash map.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "pkprof.h"

#define PF_KTHREAD 0x00200000

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load: split task time into user/sys (syscall tracepoints attached). */
const volatile bool split_modes = false;

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
	fresh.mode = (t->flags & PF_KTHREAD) ? PKPROF_MODE_SYS : PKPROF_MODE_UNKNOWN;
	bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), t->comm);
	err = bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: created meanwhile on another CPU */) {
		c->lost.thread_map_full++;
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 now = bpf_ktime_get_ns();
	struct pkprof_thread *e;

	if (!c)
		return 0;
	charge(c, now);
	if (c->depth || c->overflow) {
		c->lost.ctx_reset++;
		c->depth = 0;
		c->overflow = 0;
	}
	c->ctx[0] = PKPROF_CTX_TASK;
	c->switches++;

	e = NULL;
	if (c->cur_tid != (__u32)prev->pid) {
		/*
		 * The CPU is not running the thread we last switched to: a switch went unreported
		 * (seen here for threads outside our PID namespace). The pending slice cannot be
		 * split between that thread and whoever ran after it: it is counted as missed.
		 */
		c->lost.missed_switch++;
		c->missed_ns += c->pending.task_ns;
	}
	if (c->cur_tid && c->cur_tid == (__u32)prev->pid) {
		e = thread_entry(c, prev, now);
		c->pending.switches++;
		if (e && split_modes) {
			e->mode = c->mode;
			e->sys_enter_ns = c->sys_enter_ns;
			e->sys_nr = c->sys_nr;
		}
	}
	/* Pending charges of a thread without an entry (table full) are counted there, then dropped. */
	flush_pending(c, e ? &e->acc : NULL);

	c->cur_tid = next->pid;
	c->cur_pid = next->tgid;
	c->mode = PKPROF_MODE_UNKNOWN;
	c->sys_enter_ns = 0;
	if (split_modes && next->pid) {
		__u32 tid = next->pid;

		e = bpf_map_lookup_elem(&threads, &tid);
		if (e) {
			c->mode = e->mode;
			c->sys_enter_ns = e->sys_enter_ns;
			c->sys_nr = e->sys_nr;
		}
		if (c->mode == PKPROF_MODE_UNKNOWN)
			c->mode = infer_mode(next);
	}
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq, struct irqaction *action)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	push_ctx(c, PKPROF_CTX_HARDIRQ, 0);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq, struct irqaction *action, int ret)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	pop_ctx(c, PKPROF_CTX_HARDIRQ);
	return 0;
}

/* x86's local APIC timer interrupt (the tick, hrtimers) bypasses irq_handler_entry/exit: it has
 * tracepoints of its own, used when present (loaded only where the kernel has them). */
SEC("tp_btf/local_timer_entry")
int BPF_PROG(on_local_timer_entry, int vector)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	push_ctx(c, PKPROF_CTX_HARDIRQ, 0);
	return 0;
}

SEC("tp_btf/local_timer_exit")
int BPF_PROG(on_local_timer_exit, int vector)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	pop_ctx(c, PKPROF_CTX_HARDIRQ);
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	push_ctx(c, PKPROF_CTX_SOFTIRQ, vec < PKPROF_NR_SOFTIRQS ? vec : 0);
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	pop_ctx(c, PKPROF_CTX_SOFTIRQ);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_process_fork, struct task_struct *parent, struct task_struct *child)
{
	struct pkprof_cpu *c = this_cpu();
	struct pkprof_thread *e;

	if (!c)
		return 0;
	e = thread_entry(c, child, bpf_ktime_get_ns());
	/* A new task starts in the kernel, returning from fork. */
	if (e && e->mode == PKPROF_MODE_UNKNOWN)
		e->mode = PKPROF_MODE_SYS;
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tid = p->pid;
	struct pkprof_thread *e = bpf_map_lookup_elem(&threads, &tid);

	if (e)
		bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(on_task_rename, struct task_struct *task, const char *comm)
{
	__u32 tid = task->pid;
	struct pkprof_thread *e = bpf_map_lookup_elem(&threads, &tid);

	if (e)
		bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm);
	return 0;
}

SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(on_cgroup_attach_task, struct cgroup *dst, const char *path, struct task_struct *task, bool threadgroup)
{
	__u32 tid = task->pid;
	struct pkprof_thread *e = bpf_map_lookup_elem(&threads, &tid);

	if (e)
		e->cgroup_id = BPF_CORE_READ(dst, kn, id);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_process_exit, struct task_struct *p)
{
	struct pkprof_cpu *c = this_cpu();
	struct pkprof_thread *e;

	if (!c)
		return 0;
	/* Create the entry if needed: its last slice is flushed at the final switch, and the
	 * exit stamp tells user space when the entry can be read one last time and deleted. */
	e = thread_entry(c, p, bpf_ktime_get_ns());
	if (e)
		e->exit_ns = bpf_ktime_get_ns();
	return 0;
}

/* ---- syscall mode: loaded only with --syscalls ---- */

static __always_inline struct pkprof_syscall_stat *syscall_stat(struct pkprof_cpu *c, __u32 pid,
								 __u32 nr)
{
	struct pkprof_syscall_key key = { .pid = pid, .nr = nr };
	struct pkprof_syscall_stat *s = bpf_map_lookup_elem(&syscalls, &key);
	struct pkprof_syscall_stat zero = {};
	long err;

	if (s)
		return s;
	err = bpf_map_update_elem(&syscalls, &key, &zero, BPF_NOEXIST);
	if (err && err != -17) {
		c->lost.syscall_map_full++;
		return NULL;
	}
	return bpf_map_lookup_elem(&syscalls, &key);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 now = bpf_ktime_get_ns();
	struct pkprof_syscall_stat *s;

	if (!c)
		return 0;
	charge(c, now);
	c->mode = PKPROF_MODE_SYS;
	c->sys_enter_ns = now;
	c->sys_nr = (__u32)id;
	c->pending.syscalls++;
	/* Counted at entry, as strace -c does: exit and exit_group never return. */
	s = syscall_stat(c, c->cur_pid, (__u32)id);
	if (s)
		__sync_fetch_and_add(&s->count, 1);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 now = bpf_ktime_get_ns();
	struct pkprof_syscall_key key;
	struct pkprof_syscall_stat *s;

	if (!c)
		return 0;
	charge(c, now);
	c->mode = PKPROF_MODE_USER;
	if (!c->sys_enter_ns)
		return 0;
	key.pid = c->cur_pid;
	key.nr = c->sys_nr;
	s = bpf_map_lookup_elem(&syscalls, &key);
	if (s) {
		__sync_fetch_and_add(&s->total_ns, now - c->sys_enter_ns);
		if (ret < 0 && ret >= -4095)
			__sync_fetch_and_add(&s->errors, 1);
	}
	c->sys_enter_ns = 0;
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(on_page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct pkprof_cpu *c = this_cpu();

	if (c && c->cur_tid)
		c->pending.faults++;
	return 0;
}
