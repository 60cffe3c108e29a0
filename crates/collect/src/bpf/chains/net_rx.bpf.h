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
 * the other CPU (the `pass` step of the tag life cycle).
 */
#ifndef PKPROF_NET_RX_BPF_H
#define PKPROF_NET_RX_BPF_H

const volatile __u64 tag_expire_ns = 1000000000ULL;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* resized by the loader */
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

/* Holds `ns` on the skb this CPU last handed over; returns that skb (0: nothing held). */
static __always_inline __u64 net_hold_for_skb(struct pkprof_cpu *c, __u64 ns)
{
	__u64 skb = c->rx_last_skb;
	struct pkprof_held *h;

	if (!skb || !ns)
		return 0;
	c->rx_last_skb = 0;
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
		emit_link(c, PKPROF_HOLD_SKB, skb, PKPROF_LINK_HOLD, PKPROF_HOLD_SEGMENT, segment_hold(c), 0);
		c->tag_sampled = 1;
	}
	bpf_map_delete_elem(&skb_held, &skb);
}

static __always_inline int on_netif_rx_body(struct sk_buff *skb)
{
	struct pkprof_cpu *c = this_cpu();

	if (c)
		c->rx_last_skb = (__u64)skb;
	return 0;
}

/* One aligned 8-byte store, which an interrupt cannot tear: no need to turn interrupts off (two
 * kfunc calls per packet). */
SEC("tp_btf/netif_rx")
int BPF_PROG(on_netif_rx, struct sk_buff *skb)
{
	return on_netif_rx_body(skb);
}

static __always_inline void net_credit_sock(struct pkprof_cpu *c, __u64 sk, __u64 ns)
{
	struct pkprof_sock *s = bpf_map_lookup_elem(&socks, &sk);
	__u64 now = c->last_ns;

	if (!s) {
		struct pkprof_sock fresh = {};
		long err = bpf_map_update_elem(&socks, &sk, &fresh, BPF_NOEXIST);

		if (err && err != -17) {
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
			s->sampled = 0;
			emit_link(c, PKPROF_HOLD_SOCK, sk, PKPROF_LINK_EXPIRED, PKPROF_HOLD_NONE, 0, 0);
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
	if (c->tag == PKPROF_TAG_NET_SKB && c->tag_depth == c->depth && !c->tag_has_skb) {
		c->tag_has_skb = 1; /* the softirq's first skb: keeps the overhead before it */
	} else {
		open_tag(c, PKPROF_TAG_NET_SKB, 0);
		c->tag_has_skb = 1;
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

/* The skb in the open segment belongs to socket sk. */
static __always_inline void net_link(const struct sock *sk)
{
	struct pkprof_cpu *c = this_cpu();
	__u64 key = (__u64)sk;

	if (!c || !c->depth || c->tag_depth != c->depth)
		return;
	c->last_sk = key;
	if (c->tag == PKPROF_TAG_NET_SKB) {
		c->tag = PKPROF_TAG_NET_SOCK;
		c->tag_key = key;
	} else if (c->tag == PKPROF_TAG_NET_SOCK && c->tag_key != key) {
		/* Delivered to another socket too (e.g. a listener and its child). */
		charge(c, bpf_ktime_get_ns());
		open_tag(c, PKPROF_TAG_NET_SOCK, key);
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
		s->sampled = 0;
		link_sock_to_current(c, key);
	}
	if (!s->pending_ns)
		return;
	ns = __sync_lock_test_and_set(&s->pending_ns, 0);
	/* The skb count is informational: a racing increment may land in the next batch. */
	skbs = s->skbs;
	s->skbs = 0;
	s->last_ns = c->last_ns;
	/* The reader is the current thread: its share rides with its pending charges. */
	c->pending.served_net_ns += ns;
	c->pending.served_net_items += skbs;
}

static __always_inline int on_sock_recv_length_body(struct sock *sk, int ret, int flags)
{
	net_consume(sk);
	return 0;
}

/*
 * In task context net_consume writes, of this CPU's registers, only pending.served_net_*, which no
 * interrupt-context program touches (they are flushed at the context switch), and the socket's
 * entry with atomics: interrupts can stay on (saving two kfunc calls, ~40 ns a run). Except for
 * record, whose link event counts a full ring in a per-CPU counter that interrupt programs bump.
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
	if (sk->sk_protocol == 6 /* IPPROTO_TCP */)
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

#endif /* PKPROF_NET_RX_BPF_H */
