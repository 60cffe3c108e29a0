/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pkprof record: the cpu-clock sampling program. Each sample carries the kernel stack (the kernel's
 * walk) and the user stack (our frame-pointer walk, user_stack.bpf.h, and a copy of its bytes), the current task, and the thread the interrupted work served, read from
 * the accounting core's per-CPU registers: the current thread in task context, the queuer of the
 * work item a kworker runs (the task tag), or, under a served-event tag, a hold key resolved later
 * by link events (links.bpf.h). The sample runs inside the timer interrupt that local_timer_entry
 * already pushed on the context stack: the interrupted context is the one below it.
 */
#ifndef PKPROF_RECORD_SAMPLE_BPF_H
#define PKPROF_RECORD_SAMPLE_BPF_H

#include "core.bpf.h"
#include "record/links.bpf.h"
#include "user_stack.bpf.h"
#include "record/scratch.bpf.h"
#include "record/python.bpf.h"

/* The local timer tracepoints are attached: the sampling interrupt itself is on the ctx stack. */
const volatile bool timer_on_stack = false;
/* Bytes of user stack copied per sample (record --stack-bytes; 0: none). */
const volatile __u32 stack_bytes = PKPROF_DEFAULT_STACK_BYTES;
/* record --by client: a user thread under a task tag is labelled with its beneficiary. */
const volatile bool label_by_client = false;
/* A process whose own code (user, system calls, faults) the sampler skips (the agent's:
 * RecordConfig::skip_own_process), 0: none. Interrupt work on top of it and kworker items it
 * queued are sampled as always. */
const volatile __u32 skip_tgid = 0;



static __always_inline void label_thread(struct pkprof_sample *s, __u32 tid)
{
	struct pkprof_thread *e = tid ? bpf_map_lookup_elem(&threads, &tid) : NULL;

	s->tid = tid;
	if (!e)
		return;
	s->pid = e->pid;
	s->cgroup_id = e->cgroup_id;
	s->flags = thread_flags(e);
	__builtin_memcpy(s->comm, e->comm, sizeof(s->comm));
}

static __always_inline int sample_body(struct bpf_perf_event_data *ctx)
{
	struct pkprof_cpu *c = this_cpu();
	struct task_struct *cur = bpf_get_current_task_btf();
	struct pkprof_sample_buf *buf;
	struct pkprof_sample *s;
	/* The context allows only 8-byte loads of the registers: read cs (with its padding) whole. */
	bool user = (*(volatile __u64 *)((void *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs)) & 3) == 3;
	__u32 depth, i, cpu = bpf_get_smp_processor_id();
	__u64 uip = 0, usp = 0, ubp = 0;
	bool ustack = false;

	if (!c)
		return 0;
	buf = bpf_map_lookup_elem(&sample_scratch, &cpu);
	if (!buf)
		return 0;
	s = &buf->s;
	s->kind = PKPROF_EV_SAMPLE;
	s->cpu = bpf_get_smp_processor_id();
	s->time_ns = bpf_ktime_get_ns();
	s->cur_pid = cur->tgid;
	s->cur_tid = cur->pid;
	s->pid = 0;
	s->tid = 0;
	s->cgroup_id = 0;
	s->hold = 0;
	s->hold_kind = PKPROF_HOLD_NONE;
	s->stack_flags = 0;
	s->vec = 0;
	s->orig_ax = -1;
	s->flags = 0;
	s->ustack_len = 0;
	s->ustack_bytes_len = 0;
	s->user_ip = 0;
	s->user_sp = 0;
	s->user_bp = 0;
	s->py_len = 0;
	s->py_state = PKPROF_PY_NONE;
	bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), cur->comm);

	depth = c->depth;
	if (timer_on_stack && depth && c->ctx[depth & (PKPROF_CTX_DEPTH - 1)] == PKPROF_CTX_HARDIRQ)
		depth--;
	i = depth & (PKPROF_CTX_DEPTH - 1);
	if (!c->last_ns || !depth || c->ctx[i] == PKPROF_CTX_TASK) {
		/* Task context: the current thread, or the queuer of the item a kworker runs. */
		if (!cur->pid) {
			s->ctx = PKPROF_SCTX_IDLE;
		} else if (task_tag_runs(c, (__u32)cur->pid) && (cur->flags & PF_KTHREAD)) {
			s->ctx = PKPROF_SCTX_KWORKER;
			label_thread(s, c->task_tag_tid);
		} else {
			/* Its own code only: interrupt work on top of it serves others. */
			if (skip_tgid && cur->tgid == skip_tgid)
				return 0;
			s->ctx = user ? PKPROF_SCTX_USER : PKPROF_SCTX_KERNEL;
			/* record --by client: a user thread under a task tag (a server serving a
			 * client) runs its own code for the tag's beneficiary: its stacks, the
			 * beneficiary's label. */
			__u32 who = cur->pid, tagged = c->task_tag_tid;

			/* Both loaded first: one load from either pointer fails the verifier. */
			barrier_var(who);
			barrier_var(tagged);
			if (label_by_client && task_tag_runs(c, who))
				who = tagged;
			label_thread(s, who);
			if (!s->pid) { /* no entry yet (first slice since attach): ask the task */
				s->pid = cur->tgid;
				s->cgroup_id = bpf_get_current_cgroup_id();
				s->flags = ((cur->flags & PF_KTHREAD) ? PKPROF_SAMPLE_KTHREAD : 0) |
					   target_flag(cur->tgid);
			}
			if (!user && !(cur->flags & PF_KTHREAD)) {
				struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);

				s->orig_ax = BPF_CORE_READ(regs, orig_ax);
			}
		}
	} else {
		s->ctx = c->ctx[i] == PKPROF_CTX_SOFTIRQ ? PKPROF_SCTX_SOFTIRQ : PKPROF_SCTX_HARDIRQ;
		s->vec = c->vec[i];
		if (c->tag != PKPROF_TAG_NONE && c->tag_depth == depth) {
			/* Held until the tag's segment closes (links.bpf.h). */
			s->hold_kind = PKPROF_HOLD_SEGMENT;
			s->hold = segment_hold(c);
			c->tag_sampled = 1;
			__builtin_memset(s->comm, 0, sizeof(s->comm));
		}
	}

	s->kstack_len = user ? 0 : bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), 0);
	/* Interrupt work serves someone else: the interrupted task's user stack is not its caller. */
	if (s->ctx == PKPROF_SCTX_USER) {
		uip = ctx->regs.ip;
		usp = ctx->regs.sp;
		ubp = ctx->regs.bp;
		ustack = true;
	} else if (s->ctx == PKPROF_SCTX_KERNEL && !(cur->flags & PF_KTHREAD)) {
		/* In a syscall or exception: the user registers saved at kernel entry. */
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);

		uip = BPF_CORE_READ(regs, ip);
		usp = BPF_CORE_READ(regs, sp);
		ubp = BPF_CORE_READ(regs, bp);
		ustack = true;
	}
	if (ustack) {
		s->user_ip = uip;
		s->user_sp = usp;
		s->user_bp = ubp;
		if (stack_bytes)
			s->ustack_bytes_len = copy_user_stack(buf->stack, usp, stack_bytes, &s->stack_flags);
		s->ustack_len = walk_user_stack(s->ustack, buf->stack, s->ustack_bytes_len, uip, ubp, usp,
						&s->stack_flags);
		py_walk_sample(s, py_slot(PY_SLOT_SAMPLE), cur->tgid, cur->pid);
	}
	{
		__u32 owner = s->cur_pid;
		bool urgent = s->ustack_len > 0 && capture_wakeup(owner, cur, s->time_ns);

		s->build_ns = bpf_ktime_get_ns() - s->time_ns;
		if (py_emit(s, sizeof(*s), s, py_slot(PY_SLOT_SAMPLE), buf->stack, submit_flags(urgent)))
			c->lost.sample_ring_full++;
	}
	return 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	return sample_body(ctx);
}

#endif /* PKPROF_RECORD_SAMPLE_BPF_H */
