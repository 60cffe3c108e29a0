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
 *
 * The attribution chains (chains/chains.h lists them) tag interrupt and kworker time with the
 * thread it served through the core's hooks; see core.bpf.h and docs/design.md, "How a chain plugs
 * in".
 */
#include "core.bpf.h"
#include "syscall_regs.bpf.h"
#include "record/links.bpf.h"
#include "record/sample.bpf.h"
#include "record/count.bpf.h"
#include "record/offcpu.bpf.h"

#include "chains/all.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Scheduling policies (include/uapi/linux/sched.h; macros, so not in vmlinux.h). */
#define SCHED_NORMAL 0
#define SCHED_BATCH 3
#define SCHED_IDLE 5

/* The classes whose slices the fair scheduler times. */
static __always_inline bool is_fair(struct task_struct *t)
{
	__u32 policy = t->policy;

	return policy == SCHED_NORMAL || policy == SCHED_BATCH || policy == SCHED_IDLE;
}

/*
 * Bills prev's slice as long as the scheduler timed it (se.sum_exec_runtime, what the task's own
 * CPU clocks read), not from our timestamps: after a wakeup that preempts, the scheduler skips its
 * clock update (rq_clock_skip_update) and bills the woken task from the wakeup on, ending the
 * previous slice there; steal time is left out. The difference moves between this thread and the
 * CPU's idle time, so the CPU's parts still add up to wall time.
 */
static __always_inline void follow_scheduler_slice(struct pkprof_cpu *c, struct task_struct *prev)
{
	/* Measured against our own reading at switch-in: se.prev_sum_exec_runtime is reset when a
	 * running task changes group (autogroup at exit, for one). */
	__u64 slice = prev->se.sum_exec_runtime - (c->sum_at_in - 1);
	__u64 billed = 0, task, had = c->pending.task_ns;
	__s64 skew;

	if (!c->sum_at_in)
		return;
	if (c->pending_irq) {
		billed = c->pending.hardirq_ns;
#pragma unroll
		for (int i = 0; i < PKPROF_NR_SOFTIRQS; i++)
			billed += c->pending.softirq_ns[i];
	}
	/* A slice far off ours is not this slice (e.g. a policy change): keep our figure. */
	if (slice > had + billed + 10000000ULL || slice + 10000000ULL < had + billed)
		return;
	task = slice > billed ? slice - billed : 0;
	skew = (__s64)task - (__s64)had;
	/* Never drive a CPU total below zero (e.g. a slice that began before attach). */
	if ((skew < 0 && (__u64)-skew > c->task_ns) || (skew > 0 && (__u64)skew > c->idle_ns))
		return;
	c->pending.task_ns = task;
	c->task_ns += skew;
	c->idle_ns -= skew;
	c->slice_skew_ns += skew;
	if (split_modes) {
		__u64 *bucket = c->mode == PKPROF_MODE_USER ? &c->pending.user_ns :
				c->mode == PKPROF_MODE_SYS  ? &c->pending.sys_ns :
							       &c->pending.unsplit_ns;

		if (skew >= 0 || *bucket >= (__u64)-skew)
			*bucket += skew;
	}
}

/*
 * prev has no thread entry (the table is full, counted in lost.thread_map_full): its own time of
 * this slice goes to the CPU's untracked counters, OTHER or KERNEL, rather than nowhere (which
 * would leave it to the remainder, KERNEL). Work items it ran for others are credited to them.
 */
static __always_inline void charge_untracked(struct pkprof_cpu *c, struct task_struct *prev)
{
	__u64 own = c->pending.task_ns - c->pending.served_out_ns;

	if (c->pending.served_out_ns > c->pending.task_ns)
		return;
	if (prev->flags & PF_KTHREAD) {
		c->untracked_kernel_ns += own;
		return;
	}
	c->untracked_ns += own;
	if (record_mode && target_flag(prev->tgid))
		c->untracked_target_ns += own;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 now = bpf_ktime_get_ns();
	struct pkprof_thread *e;

	if (!c)
		return 0;
	charge(c, now);
	if (c->tag != PKPROF_TAG_NONE)
		tag_close(c);
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
		 * (seen here for threads outside our PID namespace). The scheduler's own length of
		 * prev's slice says how much of the pending time was prev's; the rest ran in the
		 * thread we cannot see and is counted as missed.
		 */
		c->lost.missed_switch++;
		if (task_tag_runs(c, c->cur_tid))
			task_tag_close(c); /* the hidden thread's work: its time is inside missed_ns */
		if (prev->pid && is_fair(prev)) {
			__u64 slice = prev->se.sum_exec_runtime - prev->se.prev_sum_exec_runtime;
			__u64 give = slice < c->pending.task_ns ? slice : c->pending.task_ns;

			c->missed_ns += c->pending.task_ns - give;
			c->pending.task_ns = give;
			if (split_modes) {
				c->pending.user_ns = 0;
				c->pending.sys_ns = 0;
				c->pending.unsplit_ns = give;
			}
			c->cur_tid = prev->pid;
			c->cur_pid = prev->tgid;
			c->sum_at_in = 0; /* prev's switch-in was not seen */
		} else {
			c->missed_ns += c->pending.task_ns;
		}
	}
	if (c->cur_tid && c->cur_tid == (__u32)prev->pid && is_fair(prev))
		follow_scheduler_slice(c, prev);
	if (c->cur_tid && c->cur_tid == (__u32)prev->pid) {
		e = thread_entry(c, prev, now);
		c->pending.switches++;
		if (e && split_modes) {
			e->sys_enter_ns = c->sys_enter_ns;
			e->sys_nr = c->sys_nr;
		}
		if (!e)
			charge_untracked(c, prev);
	}
	c->switch_state = preempt ? 0 : prev_state;
	chains_switch_out(c, e, prev->pid);
	/* Without an entry (table full, counted in lost) the pending charges go no further. */
	flush_pending(c, e ? &e->acc : NULL);

	c->cur_tid = next->pid;
	c->cur_pid = next->tgid;
	c->sum_at_in = next->se.sum_exec_runtime + 1;
	chains_switch_in(c, next);
	c->mode = PKPROF_MODE_UNKNOWN;
	c->sys_enter_ns = 0;
	if (split_modes && next->pid) {
		__u32 tid = next->pid;

		e = bpf_map_lookup_elem(&threads, &tid);
		if (e) {
			c->sys_enter_ns = e->sys_enter_ns;
			c->sys_nr = e->sys_nr;
		}
		/*
		 * The saved registers say where the task stands now, which the saved mode may not:
		 * a syscall that returned before sys_exit was attached, a page fault (no exit
		 * tracepoint) that returned to user space.
		 */
		c->mode = infer_mode(next);
	}
	offcpu_switch(prev, next, preempt ? 0 : prev_state, now);
	return 0;
}

/*
 * Flush: charges the time since this CPU's last event to the context running now, so that its
 * registers are exact as of this instant (docs/design.md, "Registers"). Never attached: the reader
 * runs it on each CPU (BPF_PROG_TEST_RUN with BPF_F_TEST_RUN_ON_CPU; in the IPI on another CPU, with
 * preemption off on its own) before it reads the registers, instead of estimating the slice still
 * running. A CPU without an event since attach stays as it is (its time starts at its first event).
 */
static __always_inline int flush_cpu_body(void)
{
	struct pkprof_cpu *c = this_cpu();

	if (c && c->last_ns)
		charge(c, bpf_ktime_get_ns());
	return 0;
}

SEC("raw_tp")
int flush_cpu(void *ctx)
{
	return WITH_IRQS_OFF(flush_cpu_body());
}

/* A hard interrupt starts / ends on this CPU (interrupts are off in these programs). */
static __always_inline int hardirq_enter(void)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	push_ctx(c, PKPROF_CTX_HARDIRQ, 0);
	return 0;
}

static __always_inline int hardirq_exit(void)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	pop_ctx(c, PKPROF_CTX_HARDIRQ);
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq_entry, int irq, struct irqaction *action)
{
	return hardirq_enter();
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq, struct irqaction *action, int ret)
{
	return hardirq_exit();
}

/* x86's local APIC timer interrupt (the tick, hrtimers) bypasses irq_handler_entry/exit: it has
 * tracepoints of its own, used when present (loaded only where the kernel has them). */
SEC("tp_btf/local_timer_entry")
int BPF_PROG(on_local_timer_entry, int vector)
{
	return hardirq_enter();
}

SEC("tp_btf/local_timer_exit")
int BPF_PROG(on_local_timer_exit, int vector)
{
	return hardirq_exit();
}

static __always_inline int on_softirq_entry_body(unsigned int vec)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	push_ctx(c, PKPROF_CTX_SOFTIRQ, vec < PKPROF_NR_SOFTIRQS ? vec : 0);
	chains_softirq_entry(c, vec);
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq_entry, unsigned int vec)
{
	return WITH_IRQS_OFF(on_softirq_entry_body(vec));
}

static __always_inline int on_softirq_exit_body(unsigned int vec)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	charge(c, bpf_ktime_get_ns());
	pop_ctx(c, PKPROF_CTX_SOFTIRQ);
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	return WITH_IRQS_OFF(on_softirq_exit_body(vec));
}

static __always_inline int on_process_fork_body(struct task_struct *parent, struct task_struct *child)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c)
		return 0;
	follow_fork(c, parent, child, thread_entry(c, child, bpf_ktime_get_ns()));
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_process_fork, struct task_struct *parent, struct task_struct *child)
{
	return WITH_IRQS_OFF(on_process_fork_body(parent, child));
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tid = p->pid;
	struct pkprof_thread *e = bpf_map_lookup_elem(&threads, &tid);

	if (e)
		bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	py_exec(p); /* record: looked at again (record/python.bpf.h) */
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

static __always_inline int on_process_exit_body(struct task_struct *p)
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

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_process_exit, struct task_struct *p)
{
	return WITH_IRQS_OFF(on_process_exit_body(p));
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
	if (err && err != -EEXIST) {
		c->lost.syscall_map_full++;
		return NULL;
	}
	return bpf_map_lookup_elem(&syscalls, &key);
}

/*
 * record -- CMD: the command's process, forked held before its execve (the CLI's launch), counts
 * its calls from that execve as strace -f -c does. User space puts it here (key tgid) while it is
 * held and forgets what was counted of it before; its exits are not counted until its execve
 * returns successfully, which takes it out. (A failed exec ends the run: nothing stays behind.)
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u8);
} exec_gates SEC(".maps");

/*
 * Gates in `exec_gates` not yet passed: set by user space with each gate, so that once the
 * command has exec'ed every other exit of the system skips the lookup.
 */
volatile __u32 exec_gates_open = 0;

/* Whether the exit of call `nr` returning `ret` in process `pid` comes before its gated execve. */
static __always_inline bool before_exec_gate(__u32 pid, __u32 nr, long ret)
{
	if (!exec_gates_open || !bpf_map_lookup_elem(&exec_gates, &pid))
		return false;
	if (ret != 0 || !is_execve(nr))
		return true;
	bpf_map_delete_elem(&exec_gates, &pid);
	__sync_fetch_and_sub(&exec_gates_open, 1);
	return false;
}

static __always_inline int on_sys_enter_body(struct pt_regs *regs, long id)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 now = bpf_ktime_get_ns();

	if (!c)
		return 0;
	charge(c, now);
	c->mode = PKPROF_MODE_SYS;
	c->sys_enter_ns = now;
	c->sys_nr = (__u32)id;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	return WITH_IRQS_OFF(on_sys_enter_body(regs, id));
}

static __always_inline int on_sys_exit_body(struct pt_regs *regs, long ret)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 now = bpf_ktime_get_ns();
	struct pkprof_syscall_stat *s;
	__u32 nr, pid;

	if (!c)
		return 0;
	charge(c, now);
	c->mode = PKPROF_MODE_USER;
	/*
	 * Counted when the call returns, as strace -c counts: exit and exit_group, which never
	 * return, are not counted, a successful execve is. The number comes from the saved
	 * registers, not from this CPU's state, so a switch the kernel did not report loses no
	 * count; only the time needs the entry seen on this CPU. The process is asked of the kernel:
	 * cur_pid lags behind such a switch. A new task's return from the clone that created it is
	 * not a call of its own: strace -f counts the clone once, in the caller; nor is anything a
	 * command started by record does before its execve (exec_gates).
	 */
	nr = returning_syscall_nr(regs);
	pid = bpf_get_current_pid_tgid() >> 32;
	if (is_fork_child_return(nr, ret) || before_exec_gate(pid, nr, ret)) {
		c->sys_enter_ns = 0;
		return 0;
	}
	c->pending.syscalls++;
	s = syscall_stat(c, pid, nr);
	if (s) {
		__sync_fetch_and_add(&s->count, 1);
		if (c->sys_enter_ns && c->sys_nr == nr)
			__sync_fetch_and_add(&s->total_ns, now - c->sys_enter_ns);
		if (ret < 0 && ret >= -MAX_ERRNO)
			__sync_fetch_and_add(&s->errors, 1);
	}
	c->sys_enter_ns = 0;
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	return WITH_IRQS_OFF(on_sys_exit_body(regs, ret));
}

static __always_inline int on_page_fault_user_body(unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct pkprof_cpu *c = this_cpu();

	if (c && c->cur_tid)
		c->pending.faults++;
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(on_page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	return WITH_IRQS_OFF(on_page_fault_user_body(address, regs, error_code));
}
