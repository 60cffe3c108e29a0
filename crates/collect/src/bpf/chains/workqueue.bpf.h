/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Workqueue chain: a kworker's execution of a work item billed to the thread that queued it
 * (keyed by the work_struct address). Items queued in interrupt context inherit the open block
 * tag's owner; items queued by an attributed item inherit its owner. A running item is the core's
 * task tag (its time is charged there); while a kworker sleeps inside an item, the item's owner is
 * parked in the kworker's thread entry and restored when it runs again.
 */
#ifndef PKPROF_WORKQUEUE_BPF_H
#define PKPROF_WORKQUEUE_BPF_H

#include "core.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_DEFAULT_MAX_TAGS); /* resized by the loader (--max-tags) */
	__type(key, __u64);
	__type(value, struct pkprof_owner);
} works SEC(".maps");

static __always_inline int on_workqueue_queue_work_body(int req_cpu, struct pool_workqueue *pwq, struct work_struct *work)
{
	struct pkprof_cpu *c = this_cpu();
	struct pkprof_owner o = {};
	__u64 key = (__u64)work;

	if (!c)
		return 0;
	o.tid = beneficiary(c);
	if (!o.tid)
		return 0; /* system work: the kworker's own time stays KERNEL */
	o.since_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&works, &key, &o, BPF_ANY))
		c->lost.tag_map_full++;
	return 0;
}

SEC("tp_btf/workqueue_queue_work")
int BPF_PROG(on_workqueue_queue_work, int req_cpu, struct pool_workqueue *pwq, struct work_struct *work)
{
	return WITH_IRQS_OFF(on_workqueue_queue_work_body(req_cpu, pwq, work));
}

static __always_inline int on_workqueue_execute_start_body(struct work_struct *work)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 key = (__u64)work;
	struct pkprof_owner *o;
	__u32 tid;

	if (!c)
		return 0;
	o = bpf_map_lookup_elem(&works, &key);
	if (!o)
		return 0;
	tid = o->tid;
	bpf_map_delete_elem(&works, &key);
	charge(c, bpf_ktime_get_ns());
	task_tag_open(c, PKPROF_CHAIN_WORKQ, tid, c->cur_tid);
	return 0;
}

SEC("tp_btf/workqueue_execute_start")
int BPF_PROG(on_workqueue_execute_start, struct work_struct *work)
{
	return WITH_IRQS_OFF(on_workqueue_execute_start_body(work));
}

/* The item's time so far goes to its owner (`items`: the item ends), or orphaned if gone. */
static __always_inline void workqueue_credit(struct pkprof_cpu *c, __u64 items)
{
	if (!credit_thread(c->task_tag_tid, PKPROF_CHAIN_WORKQ, c->task_tag_ns, items))
		c->orphan_wq_ns += c->task_tag_ns;
}

static __always_inline int on_workqueue_execute_end_body(struct work_struct *work, work_func_t function)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c || !task_tag_runs_for(c, PKPROF_CHAIN_WORKQ, c->cur_tid))
		return 0;
	charge(c, bpf_ktime_get_ns());
	workqueue_credit(c, 1);
	task_tag_close(c);
	return 0;
}

SEC("tp_btf/workqueue_execute_end")
int BPF_PROG(on_workqueue_execute_end, struct work_struct *work, work_func_t function)
{
	return WITH_IRQS_OFF(on_workqueue_execute_end_body(work, function));
}

/* ---- the chain's hooks (core.bpf.h, PKPROF_CHAIN_HOOKS) ---- */

/* The chain opens no interrupt tag. */
static __always_inline void workqueue_tag_close(struct pkprof_cpu *c, struct pkprof_dest *d)
{
	c->kernel_irq_ns += c->tag_ns;
}

static __always_inline __u32 workqueue_tag_beneficiary(struct pkprof_cpu *c)
{
	return 0;
}

static __always_inline void workqueue_softirq_entry(struct pkprof_cpu *c, unsigned int vec)
{
}

/* At a context switch: credit a kworker's item time so far and park the item's owner. */
static __always_inline void workqueue_switch_out(struct pkprof_cpu *c, struct pkprof_thread *prev_entry,
						 struct task_struct *prev)
{
	if (!task_tag_runs_for(c, PKPROF_CHAIN_WORKQ, prev->pid))
		return;
	workqueue_credit(c, 0);
	if (prev_entry)
		prev_entry->task_tag_tid = c->task_tag_tid;
	task_tag_close(c);
}

/* A kworker resuming inside an item gets its owner back. */
static __always_inline void workqueue_switch_in(struct pkprof_cpu *c, struct task_struct *next)
{
	__u32 tid = next->pid;
	struct pkprof_thread *e;

	if (!(next->flags & PF_WQ_WORKER))
		return;
	e = bpf_map_lookup_elem(&threads, &tid);
	if (!e || !e->task_tag_tid)
		return;
	task_tag_open(c, PKPROF_CHAIN_WORKQ, e->task_tag_tid, tid);
	e->task_tag_tid = 0;
}

#endif /* PKPROF_WORKQUEUE_BPF_H */
