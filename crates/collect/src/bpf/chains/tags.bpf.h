/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The served-event tag life cycle shared by the chains: open a tag in interrupt context, close it
 * (credit its time to the beneficiary, or to KERNEL when there is none), and find the beneficiary
 * of work started now (a block request issued, a work item queued).
 */
#ifndef PKPROF_TAGS_BPF_H
#define PKPROF_TAGS_BPF_H

static __always_inline void net_credit_sock(struct pkprof_cpu *c, __u64 sk, __u64 ns);
static __always_inline __u64 net_hold_for_skb(struct pkprof_cpu *c, __u64 ns);

static __always_inline void close_tag(struct pkprof_cpu *c)
{
	/* Where held stack samples of this segment go (record): default KERNEL. */
	__u32 link_kind = PKPROF_LINK_KERNEL, link_tid = 0, link_hold = PKPROF_HOLD_NONE;
	__u64 link_to = 0, held_skb;

	switch (c->tag) {
	case PKPROF_TAG_NET_SOCK:
		net_credit_sock(c, c->tag_key, c->tag_ns);
		link_kind = PKPROF_LINK_HOLD;
		link_hold = PKPROF_HOLD_SOCK;
		link_to = c->tag_key;
		break;
	case PKPROF_TAG_BLOCK:
		credit_thread(c, (__u32)c->tag_key, PKPROF_CHAIN_BLOCK, c->tag_ns, 1);
		link_kind = PKPROF_LINK_THREAD;
		link_tid = (__u32)c->tag_key;
		break;
	case PKPROF_TAG_NET_SKB:
		/* No skb of its own: it handed skbs over to another CPU (RPS), pass its time on. */
		if (!c->tag_has_skb && (held_skb = net_hold_for_skb(c, c->tag_ns))) {
			link_kind = PKPROF_LINK_HOLD;
			link_hold = PKPROF_HOLD_SKB;
			link_to = held_skb;
			break;
		}
		/*
		 * An skb no event linked: e.g. TCP data put on the backlog of a socket its reader
		 * holds. Early demux has set skb->sk by now (a freed skb reads NULL: orphaned).
		 */
		if (c->tag_has_skb && c->tag_key) {
			struct sock *sk = NULL;

			bpf_probe_read_kernel(&sk, sizeof(sk), &((struct sk_buff *)c->tag_key)->sk);
			/* Merged into the backlog's tail and its memory already reused by the next
			 * packet (not demuxed yet): the flow's socket is the one last linked here. */
			if (!sk)
				sk = (struct sock *)c->last_sk;
			if (sk) {
				net_credit_sock(c, (__u64)sk, c->tag_ns);
				link_kind = PKPROF_LINK_HOLD;
				link_hold = PKPROF_HOLD_SOCK;
				link_to = (__u64)sk;
				break;
			}
		}
		/* an skb that reached no socket: forwarded, dropped, ARP, ICMP */
		c->kernel_irq_ns += c->tag_ns;
		break;
	default:
		c->kernel_irq_ns += c->tag_ns;
		break;
	}
	if (record_mode && c->tag_sampled) {
		if (link_kind == PKPROF_LINK_THREAD && !link_tid)
			link_kind = PKPROF_LINK_KERNEL;
		emit_link(c, PKPROF_HOLD_SEGMENT, segment_hold(c), link_kind, link_hold, link_to, link_tid);
	}
	c->tag = PKPROF_TAG_NONE;
	c->tag_ns = 0;
	c->tag_has_skb = 0;
	c->tag_sampled = 0;
}

/* Opens a tag for the interrupt context running now (task context serves itself: no tag). */
static __always_inline void open_tag(struct pkprof_cpu *c, __u32 tag, __u64 key)
{
	if (!c->depth)
		return;
	if (c->tag != PKPROF_TAG_NONE)
		close_tag(c);
	c->tag_seq++;
	c->tag = tag;
	c->tag_key = key;
	c->tag_depth = c->depth;
	c->tag_ns = 0;
}

/*
 * Who work started now is for, as a thread id (0: nobody, i.e. KERNEL): in interrupt context the
 * open block tag's owner; in a kworker running an attributed item, that item's owner; in any
 * other kernel thread nobody; else the current thread.
 */
static __always_inline __u32 beneficiary(struct pkprof_cpu *c)
{
	struct task_struct *cur;

	if (c->depth)
		return (c->tag == PKPROF_TAG_BLOCK && c->tag_depth == c->depth) ? (__u32)c->tag_key : 0;
	if (c->wq_tid && c->wq_worker == c->cur_tid)
		return c->wq_tid;
	cur = bpf_get_current_task_btf();
	if (cur->flags & PF_KTHREAD)
		return 0;
	return cur->pid;
}

#endif /* PKPROF_TAGS_BPF_H */
