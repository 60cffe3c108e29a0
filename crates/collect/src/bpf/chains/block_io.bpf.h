/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Block I/O chain: completion work (BLOCK softirq, or the device's hard IRQ) billed to the thread
 * that issued the request. `block_rq_issue` records the issuer by request address; each
 * `block_rq_complete` in interrupt context opens a tag for that issuer, closed by the next
 * completion or the end of the context. A BLOCK softirq opens an owner-less tag at entry that its
 * first completion adopts, so the work before that first event is billed too.
 */
#ifndef PKPROF_BLOCK_IO_BPF_H
#define PKPROF_BLOCK_IO_BPF_H

#include "core.bpf.h"

/* This chain's tag kind: completion work for a request's issuer (key: tid; 0 until known). */
#define BLOCK_IO_TAG PKPROF_TAG(PKPROF_CHAIN_BLOCK, 1)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_DEFAULT_MAX_TAGS); /* resized by the loader (--max-tags) */
	__type(key, __u64);
	__type(value, struct pkprof_owner);
} reqs SEC(".maps");

static __always_inline int on_block_rq_issue_body(struct request *rq)
{
	struct pkprof_cpu *c = this_cpu();
	struct pkprof_owner o = {};
	__u64 key = (__u64)rq;

	if (!c)
		return 0;
	o.tid = beneficiary(c);
	o.since_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&reqs, &key, &o, BPF_ANY))
		c->lost.tag_map_full++;
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_block_rq_issue, struct request *rq)
{
	return WITH_IRQS_OFF(on_block_rq_issue_body(rq));
}

static __always_inline int on_block_rq_complete_body(struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 key = (__u64)rq;
	struct pkprof_owner *o;
	__u32 tid = 0;

	if (!c)
		return 0;
	o = bpf_map_lookup_elem(&reqs, &key);
	if (o) {
		tid = o->tid;
		bpf_map_delete_elem(&reqs, &key);
	}
	if (!c->depth)
		return 0; /* completed in the task's own context: its own time */
	charge(c, bpf_ktime_get_ns());
	if (c->tag == BLOCK_IO_TAG && c->tag_depth == c->depth && !c->tag_key) {
		/* The softirq's first request: it also owns the work done before this event. */
		c->tag_key = tid;
		return 0;
	}
	tag_open(c, BLOCK_IO_TAG, tid);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	return WITH_IRQS_OFF(on_block_rq_complete_body(rq, error, nr_bytes));
}

/* ---- the chain's hooks (core.bpf.h, PKPROF_CHAIN_HOOKS) ---- */

static __always_inline void block_io_tag_close(struct pkprof_cpu *c, struct pkprof_dest *d)
{
	credit_irq(c, (__u32)c->tag_key, PKPROF_CHAIN_BLOCK, c->tag_ns, 1);
	d->kind = PKPROF_LINK_THREAD;
	d->tid = (__u32)c->tag_key;
}

/* Work started by completion work (a work item it queues, a request it issues) is the issuer's. */
static __always_inline __u32 block_io_tag_beneficiary(struct pkprof_cpu *c)
{
	return (__u32)c->tag_key;
}

static __always_inline void block_io_softirq_entry(struct pkprof_cpu *c, unsigned int vec)
{
	if (vec == BLOCK_SOFTIRQ)
		tag_open(c, BLOCK_IO_TAG, 0); /* owner: the first request it completes */
}

static __always_inline void block_io_switch_out(struct pkprof_cpu *c, struct pkprof_thread *e,
						struct task_struct *prev)
{
}

static __always_inline void block_io_switch_in(struct pkprof_cpu *c, struct task_struct *next)
{
}

#endif /* PKPROF_BLOCK_IO_BPF_H */
