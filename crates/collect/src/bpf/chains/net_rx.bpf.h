/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * NET RX chain: NET_RX softirq time billed to the process that reads the socket.
 *
 * A NET_RX softirq opens an skb tag; each `netif_receive_skb` starts the next skb's segment (the
 * softirq's overhead before the first skb joins the first one). `tcp_probe` and `sk_data_ready`
 * link the segment to its socket, so the whole segment (including the reader's wake-up that follows
 * data_ready) is held on the socket (`socks`). When a thread reads from or writes to the socket
 * (`sock_recv_length`; a TCP sender through `tcp_sendmsg_locked`, or `sock_send_length` on kernels
 * without it; in its own context) the held time is billed to it.
 * Held time nobody claims within `tag_expire_ns` goes to KERNEL and is counted as expired.
 *
 * With RPS the skb is handed from one CPU's backlog to another's (`netif_rx`), and the handing
 * CPU's NET_RX softirq (which sends the IPI) processes no skb of its own: its time is held on the
 * last skb handed over (`skb_held`) and passed to that skb's segment when the skb is received on
 * the other CPU (the `pass` step of the tag life cycle, docs/design.md).
 */
#ifndef PKPROF_NET_RX_BPF_H
#define PKPROF_NET_RX_BPF_H

#include "core.bpf.h"

/* This chain's tag kinds. */
enum net_rx_tag {
	NET_RX_TAG_SKB = PKPROF_TAG(PKPROF_CHAIN_NET, 1),  /* work for an skb whose socket is unknown yet */
	NET_RX_TAG_SOCK = PKPROF_TAG(PKPROF_CHAIN_NET, 2), /* work for a socket (key: struct sock address) */
};
/* tag_aux of an skb tag: the segment has its skb (netif_receive_skb seen). */
#define NET_RX_HAS_SKB 1

const volatile __u64 tag_expire_ns = PKPROF_DEFAULT_TAG_EXPIRE_MS * 1000000ULL;

/* This chain's per-CPU state (one entry, one copy per CPU). */
struct net_rx_cpu {
	__u64 last_handed_skb; /* last skb this CPU handed to another CPU's backlog (netif_rx) */
	__u64 last_sk;         /* last socket an skb was linked to on this CPU */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct net_rx_cpu);
} net_rx_cpus SEC(".maps");

static __always_inline struct net_rx_cpu *net_rx_this_cpu(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&net_rx_cpus, &zero);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_DEFAULT_MAX_TAGS); /* resized by the loader (--max-tags) */
	__type(key, __u64);
	__type(value, struct pkprof_sock);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct pkprof_held);
} skb_held SEC(".maps");

/* ktime of the last hold: receives look the skb up only while holds are recent. */
__u64 held_active_ns = 0;

/* Pass: holds `ns` on the skb this CPU last handed over; returns that skb (0: nothing held). */
static __always_inline __u64 net_hold_for_skb(struct pkprof_cpu *c, struct net_rx_cpu *n, __u64 ns)
{
	__u64 skb = n->last_handed_skb;
	struct pkprof_held *h;

	if (!skb || !ns)
		return 0;
	n->last_handed_skb = 0;
	h = bpf_map_lookup_elem(&skb_held, &skb);
	if (h) {
		__sync_fetch_and_add(&h->ns, ns);
		if (c->tag_sampled)
			h->sampled = 1;
	} else {
		struct pkprof_held fresh = { .ns = ns, .since_ns = c->last_ns, .sampled = c->tag_sampled };

		if (bpf_map_update_elem(&skb_held, &skb, &fresh, BPF_NOEXIST)) {
			c->lost.tag_map_full++;
			return 0;
		}
	}
	held_active_ns = c->last_ns;
	return skb;
}

/* The skb arrives: work held for it elsewhere joins its segment. */
static __always_inline void net_take_held(struct pkprof_cpu *c, __u64 skb)
{
	struct pkprof_held *h;

	if (c->last_ns - held_active_ns > tag_expire_ns)
		return;
	h = bpf_map_lookup_elem(&skb_held, &skb);
	if (!h)
		return;
	c->tag_ns += __sync_lock_test_and_set(&h->ns, 0);
	if (record_mode && h->sampled) {
		/* Samples held on the handed-over skb join this segment. */
		struct pkprof_dest d = {
			.kind = PKPROF_LINK_HOLD, .hold = PKPROF_HOLD_SEGMENT, .to = segment_hold(c)
		};

		sink_link(c, PKPROF_HOLD_SKB, skb, &d);
		c->tag_sampled = 1;
	}
	bpf_map_delete_elem(&skb_held, &skb);
}

static __always_inline int on_netif_rx_body(struct sk_buff *skb)
{
	struct net_rx_cpu *n = net_rx_this_cpu();

	if (n)
		n->last_handed_skb = (__u64)skb;
	return 0;
}

/* One aligned 8-byte store, which an interrupt cannot tear: no need to turn interrupts off (two
 * kfunc calls per packet). */
SEC("tp_btf/netif_rx")
int BPF_PROG(on_netif_rx, struct sk_buff *skb)
{
	return on_netif_rx_body(skb);
}

/* Holds `ns` on socket sk until its reader claims it; expires what waited too long. */
static __always_inline void net_credit_sock(struct pkprof_cpu *c, __u64 sk, __u64 ns)
{
	struct pkprof_sock *s = bpf_map_lookup_elem(&socks, &sk);
	__u64 now = c->last_ns;

	if (!s) {
		struct pkprof_sock fresh = {};
		long err = bpf_map_update_elem(&socks, &sk, &fresh, BPF_NOEXIST);

		if (err && err != -EEXIST) {
			c->lost.tag_map_full++;
			c->kernel_irq_ns += ns;
			return;
		}
		s = bpf_map_lookup_elem(&socks, &sk);
		if (!s) {
			c->kernel_irq_ns += ns;
			return;
		}
	}
	if (s->pending_ns && now - s->first_ns > tag_expire_ns) {
		/* Nobody read it in time: hand the old share to KERNEL, keep the new one. */
		__u64 old = __sync_lock_test_and_set(&s->pending_ns, 0);

		s->skbs = 0;
		c->expired_ns += old;
		c->expired_tags++;
		c->kernel_irq_ns += old;
		if (record_mode && s->sampled) {
			struct pkprof_dest d = { .kind = PKPROF_LINK_EXPIRED, .hold = PKPROF_HOLD_NONE };

			s->sampled = 0;
			sink_link(c, PKPROF_HOLD_SOCK, sk, &d);
		}
	}
	if (c->tag_sampled)
		s->sampled = 1;
	if (!s->pending_ns)
		s->first_ns = now;
	__sync_fetch_and_add(&s->pending_ns, ns);
	__sync_fetch_and_add(&s->skbs, 1);
	s->last_ns = now;
}

static __always_inline int on_netif_receive_skb_body(struct sk_buff *skb)
{
	struct pkprof_cpu *c = this_cpu();

	if (!c || !c->depth)
		return 0; /* process-context receive is the process's own time */
	charge(c, bpf_ktime_get_ns());
	if (c->tag == NET_RX_TAG_SKB && c->tag_depth == c->depth && !c->tag_aux) {
		c->tag_aux = NET_RX_HAS_SKB; /* the softirq's first skb: keeps the overhead before it */
	} else {
		tag_open(c, NET_RX_TAG_SKB, 0);
		c->tag_aux = NET_RX_HAS_SKB;
	}
	c->tag_key = (__u64)skb; /* read for its socket at close if no event links it */
	net_take_held(c, (__u64)skb);
	return 0;
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(on_netif_receive_skb, struct sk_buff *skb)
{
	return WITH_IRQS_OFF(on_netif_receive_skb_body(skb));
}

/* Merge: the skb in the open segment belongs to socket sk. */
static __always_inline void net_link(const struct sock *sk)
{
	struct pkprof_cpu *c = this_cpu();
	struct net_rx_cpu *n;
	__u64 key = (__u64)sk;

	if (!c || !c->depth || c->tag_depth != c->depth)
		return;
	n = net_rx_this_cpu();
	if (n)
		n->last_sk = key;
	if (c->tag == NET_RX_TAG_SKB) {
		c->tag = NET_RX_TAG_SOCK;
		c->tag_key = key;
	} else if (c->tag == NET_RX_TAG_SOCK && c->tag_key != key) {
		/* Delivered to another socket too (e.g. a listener and its child). */
		charge(c, bpf_ktime_get_ns());
		tag_open(c, NET_RX_TAG_SOCK, key);
	}
}

static __always_inline int on_tcp_probe_body(struct sock *sk, const struct sk_buff *skb)
{
	net_link(sk);
	return 0;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(on_tcp_probe, struct sock *sk, const struct sk_buff *skb)
{
	return WITH_IRQS_OFF(on_tcp_probe_body(sk, skb));
}

/* A datagram for sk dropped (receive buffer full): the work was still done for sk. */
static __always_inline int on_udp_fail_queue_rcv_skb_body(int rc, struct sock *sk, struct sk_buff *skb)
{
	net_link(sk);
	return 0;
}

SEC("tp_btf/udp_fail_queue_rcv_skb")
int BPF_PROG(on_udp_fail_queue_rcv_skb, int rc, struct sock *sk, struct sk_buff *skb)
{
	return WITH_IRQS_OFF(on_udp_fail_queue_rcv_skb_body(rc, sk, skb));
}

static __always_inline int on_sk_data_ready_body(const struct sock *sk)
{
	net_link(sk);
	return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(on_sk_data_ready, const struct sock *sk)
{
	return WITH_IRQS_OFF(on_sk_data_ready_body(sk));
}

/* The current thread uses socket sk: the receive work held on it is its cost. */
static __always_inline void net_consume(struct sock *sk)
{
	__u64 key = (__u64)sk;
	struct pkprof_sock *s = bpf_map_lookup_elem(&socks, &key);
	struct pkprof_cpu *c;
	__u64 ns, skbs;

	if (!s || !(c = this_cpu()))
		return;
	if (record_mode && s->sampled) {
		/* The current thread reads the socket: samples held on it are its. */
		struct pkprof_dest d = { .kind = PKPROF_LINK_THREAD, .tid = c->cur_tid, .hold = PKPROF_HOLD_NONE };

		s->sampled = 0;
		sink_link(c, PKPROF_HOLD_SOCK, key, &d);
	}
	if (!s->pending_ns)
		return;
	ns = __sync_lock_test_and_set(&s->pending_ns, 0);
	/* The skb count is informational: a racing increment may land in the next batch. */
	skbs = s->skbs;
	s->skbs = 0;
	s->last_ns = c->last_ns;
	/* The reader is the current thread: its share rides with its pending charges. */
	c->pending.claimed.ns[PKPROF_CHAIN_NET] += ns;
	c->pending.claimed.items[PKPROF_CHAIN_NET] += skbs;
}

static __always_inline int on_sock_recv_length_body(struct sock *sk, int ret, int flags)
{
	net_consume(sk);
	return 0;
}

/*
 * In task context net_consume writes, of this CPU's registers, only pending.claimed (its NET slot), which no
 * interrupt-context program touches (their only other writer is flush_pending at the context
 * switch; flush_cpu only charges), and the socket's entry with atomics: interrupts can stay on
 * (saving two kfunc calls, ~40 ns a run). Except for record, whose link event counts a full ring
 * in a per-CPU counter that interrupt programs bump.
 */
#define NET_CONSUME_IRQS(call) (record_mode ? WITH_IRQS_OFF(call) : (call))

SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_sock_recv_length, struct sock *sk, int ret, int flags)
{
	return NET_CONSUME_IRQS(on_sock_recv_length_body(sk, ret, flags));
}

/* A TCP sender claims the ACK processing held on its socket (UDP sends have none to claim). */
static __always_inline int on_sock_send_length_body(struct sock *sk, int ret, int flags)
{
	if (sk->sk_protocol == IPPROTO_TCP)
		net_consume(sk);
	return 0;
}

/* Where the kernel has it: only TCP sends run a program (UDP floods pay nothing on send). */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(on_tcp_sendmsg_locked, const struct sock *sk, const struct msghdr *msg, const struct sk_buff *skb,
	     int size_goal)
{
	return NET_CONSUME_IRQS((net_consume((struct sock *)sk), 0));
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(on_sock_send_length, struct sock *sk, int ret, int flags)
{
	return NET_CONSUME_IRQS(on_sock_send_length_body(sk, ret, flags));
}

/* ---- the chain's hooks (core.bpf.h, PKPROF_CHAIN_HOOKS) ---- */

static __always_inline void net_rx_tag_close(struct pkprof_cpu *c, struct pkprof_dest *d)
{
	struct net_rx_cpu *n;
	__u64 held_skb;

	if (c->tag == NET_RX_TAG_SOCK) {
		net_credit_sock(c, c->tag_key, c->tag_ns);
		d->kind = PKPROF_LINK_HOLD;
		d->hold = PKPROF_HOLD_SOCK;
		d->to = c->tag_key;
		return;
	}
	/* Only an skb tag needs this CPU's chain state (a socket tag, the common case, does not). */
	n = c->tag == NET_RX_TAG_SKB ? net_rx_this_cpu() : NULL;
	if (!n) {
		c->kernel_irq_ns += c->tag_ns;
		return;
	}
	/* No skb of its own: it handed skbs over to another CPU (RPS), pass its time on. */
	if (!c->tag_aux && (held_skb = net_hold_for_skb(c, n, c->tag_ns))) {
		d->kind = PKPROF_LINK_HOLD;
		d->hold = PKPROF_HOLD_SKB;
		d->to = held_skb;
		return;
	}
	/*
	 * An skb no event linked: e.g. TCP data put on the backlog of a socket its reader holds.
	 * Early demux has set skb->sk by now (a freed skb reads NULL: orphaned).
	 */
	if (c->tag_aux && c->tag_key) {
		struct sock *sk = NULL;

		bpf_probe_read_kernel(&sk, sizeof(sk), &((struct sk_buff *)c->tag_key)->sk);
		/* Merged into the backlog's tail and its memory already reused by the next packet
		 * (not demuxed yet): the flow's socket is the one last linked here. */
		if (!sk)
			sk = (struct sock *)n->last_sk;
		if (sk) {
			net_credit_sock(c, (__u64)sk, c->tag_ns);
			d->kind = PKPROF_LINK_HOLD;
			d->hold = PKPROF_HOLD_SOCK;
			d->to = (__u64)sk;
			return;
		}
	}
	/* an skb that reached no socket: forwarded, dropped, ARP, ICMP */
	c->kernel_irq_ns += c->tag_ns;
}

/* Receive work is for a socket's reader, not known until it reads: no thread now. */
static __always_inline __u32 net_rx_tag_beneficiary(struct pkprof_cpu *c)
{
	return 0;
}

static __always_inline void net_rx_softirq_entry(struct pkprof_cpu *c, unsigned int vec)
{
	if (vec == NET_RX_SOFTIRQ)
		tag_open(c, NET_RX_TAG_SKB, 0);
}

static __always_inline void net_rx_switch_out(struct pkprof_cpu *c, struct pkprof_thread *e,
					      struct task_struct *prev)
{
}

static __always_inline void net_rx_switch_in(struct pkprof_cpu *c, struct task_struct *next)
{
}

#endif /* PKPROF_NET_RX_BPF_H */
