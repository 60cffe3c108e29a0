/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Server chain (docs/design.md, "Server work billed to its clients"): a thread that reads data
 * another process queued on a pipe, a unix socket or a loopback TCP connection runs, from then on,
 * for that process (the client), until it blocks or reads data from someone else.
 *
 * - Writing (raw sys_enter of write, writev, sendto, sendmsg): the channel the data is queued on (the
 *   pipe, the peer unix socket, the TCP connection's direction) is marked with the writer's
 *   beneficiary (`srv_writers`): the writer itself, or the client a marked server writes for, so
 *   that a server's reply never marks its own client with the server. On a socket whose other
 *   direction carries another process's data, the write is a reply to that process.
 * - Reading (raw sys_enter of read, readv, recvfrom, recvmsg notes the channel in `srv_reads`; the
 *   sys_exit of a read that returned data takes the mark): the reader opens the core's task tag
 *   for the client. The core then charges its task time to the tag (the reader's served_out_ns,
 *   as a kworker's), and work it starts (block requests, work items) has the client as
 *   beneficiary. Data of its own process, or of no known writer, ends the mark.
 * - At switch-out the tag's time is credited to the client's SERVER slot (a client gone by then:
 *   the time stays the server's own). A thread that blocks loses its mark; one preempted keeps
 *   it (`srv_parked`) until it runs again.
 */
#ifndef PKPROF_SERVER_BPF_H
#define PKPROF_SERVER_BPF_H

#include "core.bpf.h"
#include "syscall_regs.bpf.h"
#include "task_reads.bpf.h"

/* include/uapi/linux/stat.h, include/linux/socket.h, include/uapi/linux/in.h */
#define SRV_S_IFMT 00170000
#define SRV_S_IFSOCK 0140000
#define SRV_S_IFIFO 0010000
#define SRV_AF_UNIX 1
#define SRV_AF_INET 2
#define SRV_IPPROTO_TCP 6

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_DEFAULT_MAX_TAGS); /* resized by the loader (--max-tags) */
	__type(key, struct pkprof_srv_key);
	__type(value, struct pkprof_srv_mark);
} srv_writers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_DEFAULT_MAX_TAGS);
	__type(key, __u32);
	__type(value, struct pkprof_srv_read);
} srv_reads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_DEFAULT_MAX_TAGS);
	__type(key, __u32);
	__type(value, struct pkprof_srv_mark);
} srv_parked SEC(".maps");

/* Entries of srv_parked (an upper bound: the sweep's deletions of marks of threads that never ran
 * again are not subtracted); 0 lets switch-in skip the lookup. */
__u64 srv_nparked = 0;

enum pkprof_srv_channel pkprof_srv_channel_btf_anchor SEC(".data.btf_anchor");

/*
 * The channel behind `fd` of task t: `wr`, the key of the data it writes (the same as its
 * reader's key), and `rd`, the key of the data it reads (for a socket, what its peer writes; for
 * a pipe the same as wr). False for anything else (files, remote TCP; an unconnected unix
 * datagram sender has no wr: wr->b stays 0).
 */
static __always_inline bool srv_channel(struct task_struct *t, long fd, struct pkprof_srv_key *wr,
					struct pkprof_srv_key *rd)
{
	/* Direct loads through kernel BTF only (task_reads.bpf.h says why): this runs at every read
	 * and write system call of the machine. */
	struct file *f = task_fd_file(t, fd);
	struct socket *sock;
	struct sock *sk;
	__u16 family, mode;

	if (!f)
		return false;
	mode = f->f_inode->i_mode & SRV_S_IFMT;
	if (mode == SRV_S_IFIFO) {
		wr->a = rd->a = (__u64)f->private_data;
		wr->b = rd->b = PKPROF_SRV_PIPE;
		return rd->a != 0;
	}
	if (mode != SRV_S_IFSOCK)
		return false;
	sock = bpf_core_cast(f->private_data, struct socket);
	sk = sock->sk;
	if (!sk)
		return false;
	family = sk->__sk_common.skc_family;
	if (family == SRV_AF_UNIX) {
		struct sock *peer = bpf_core_cast(sk, struct unix_sock)->peer;

		rd->a = (__u64)sk;
		rd->b = PKPROF_SRV_UNIX;
		if (peer) {
			wr->a = (__u64)peer;
			wr->b = PKPROF_SRV_UNIX;
		}
		return true;
	}
	if (family == SRV_AF_INET && sk->sk_protocol == SRV_IPPROTO_TCP) {
		__u32 local = sk->__sk_common.skc_rcv_saddr;
		__u32 remote = sk->__sk_common.skc_daddr;
		__u64 lport = sk->__sk_common.skc_num;
		__u64 rport = __builtin_bswap16(sk->__sk_common.skc_dport);

		/* Loopback only: 127.0.0.0/8 (network order: the first byte is the low one), or a
		 * connection to the host's own address. */
		if ((remote & 0xff) != 127 && remote != local)
			return false;
		wr->a = (__u64)local << 32 | remote;
		wr->b = PKPROF_SRV_TCP4 | lport << 16 | rport << 32;
		rd->a = (__u64)remote << 32 | local;
		rd->b = PKPROF_SRV_TCP4 | rport << 16 | lport << 32;
		return true;
	}
	return false;
}

/* The process of thread tid (the current one's without a lookup). */
static __always_inline __u32 srv_pid_of(struct pkprof_cpu *c, __u32 tid)
{
	struct pkprof_thread *e;

	if (tid == c->cur_tid)
		return c->cur_pid;
	e = bpf_map_lookup_elem(&threads, &tid);
	return e ? e->pid : 0;
}

/*
 * The mark's time so far goes to the client (`items` requests more); a client gone meanwhile
 * cannot be billed, so the time stays the server's own.
 */
static __always_inline void srv_credit(struct pkprof_cpu *c, __u64 items)
{
	__u64 ns = c->task_tag_ns;

	if (!credit_thread(c->task_tag_tid, PKPROF_CHAIN_SERVER, ns, items))
		c->pending.served_out_ns -= ns < c->pending.served_out_ns ? ns : c->pending.served_out_ns;
	c->task_tag_ns = 0;
}

/*
 * The current thread now works for `client` (0: for itself): the mark it held is credited and
 * replaced. Returns whether a new mark was opened (the thread held none for this client).
 */
static __always_inline bool srv_mark(struct pkprof_cpu *c, __u32 client, __u64 items)
{
	__u32 tid = c->cur_tid;
	bool mine = task_tag_runs_for(c, PKPROF_CHAIN_SERVER, tid);

	if (mine && c->task_tag_tid == client) {
		if (items)
			credit_thread(client, PKPROF_CHAIN_SERVER, 0, items);
		return false;
	}
	charge(c, bpf_ktime_get_ns());
	if (mine) {
		srv_credit(c, 0);
		task_tag_close(c);
	}
	if (!client || task_tag_runs(c, tid))
		return false;
	task_tag_open(c, PKPROF_CHAIN_SERVER, client, tid);
	if (items)
		credit_thread(client, PKPROF_CHAIN_SERVER, 0, items);
	return true;
}

/*
 * A write: the channel's data now comes from the writer's beneficiary; but on a socket whose
 * other direction carries another process's data, the write answers that process (a server
 * replying on the connection it read the request from), whatever mark the writer holds now: a
 * server that batches its replies (redis) would otherwise mark each client with the last one it
 * read, and that client's next request with it.
 */
static __always_inline int srv_write(struct task_struct *cur, struct pkprof_srv_key *k,
				     const struct pkprof_srv_key *back)
{
	struct pkprof_cpu *c = this_cpu();
	struct pkprof_srv_mark m = {}, *peer;

	if (!c)
		return 0;
	peer = back->b != PKPROF_SRV_PIPE ? bpf_map_lookup_elem(&srv_writers, back) : NULL;
	if (peer && peer->pid && peer->pid != c->cur_pid) {
		m.tid = peer->tid;
		m.pid = peer->pid;
		srv_mark(c, m.tid, 0); /* the reply is work for it */
	} else {
		m.tid = beneficiary(c);
		if (!m.tid)
			return 0;
		m.pid = srv_pid_of(c, m.tid);
	}
	m.since_ns = bpf_ktime_get_ns();
	/* A client that has not left a CPU since attach has no entry yet: the server's bill for
	 * this data needs one. */
	if (m.tid == c->cur_tid)
		thread_entry(c, cur, m.since_ns);
	if (bpf_map_update_elem(&srv_writers, k, &m, BPF_ANY))
		c->lost.tag_map_full++;
	return 0;
}

/* A read of channel key begins: note it, for its exit. */
static __always_inline int srv_read_enter(const struct pkprof_srv_key *key)
{
	struct pkprof_cpu *c = this_cpu();
	struct pkprof_srv_read r = { .key = *key };
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (!c)
		return 0;
	r.since_ns = bpf_ktime_get_ns();
	charge(c, r.since_ns);
	r.switches = c->switches;
	r.run_ns = c->pending.task_ns;
	r.cpu = bpf_get_smp_processor_id();
	if (bpf_map_update_elem(&srv_reads, &tid, &r, BPF_ANY))
		c->lost.tag_map_full++;
	return 0;
}


/* Thread tid's read noted in rd returned `ret`: data from a client marks the reader; other data
 * ends its mark. */
static __always_inline int srv_read_exit(const struct pkprof_srv_read *rd, __u32 tid, long ret)
{
	struct pkprof_cpu *c = this_cpu();
	struct pkprof_srv_mark *m;
	__u32 client = 0;
	bool held;

	if (!c || ret <= 0 || c->cur_tid != tid)
		return 0; /* nothing read: the mark stays as it was */
	m = bpf_map_lookup_elem(&srv_writers, &rd->key);
	if (m && m->pid != c->cur_pid)
		client = m->tid;
	held = task_tag_runs_for(c, PKPROF_CHAIN_SERVER, tid);
	if (srv_mark(c, client, 1) && !held && rd->cpu == bpf_get_smp_processor_id() &&
	    rd->switches == c->switches && c->pending.task_ns >= rd->run_ns) {
		/* The read ran without blocking, for nobody: its own time is the client's too. */
		__u64 ns = c->pending.task_ns - rd->run_ns;

		if (credit_thread(client, PKPROF_CHAIN_SERVER, ns, 0))
			c->pending.served_out_ns += ns;
	}
	return 0;
}

/*
 * The syscall numbers the chain follows, set by the loader (PKPROF_NO_SYSCALL: none such). The
 * raw syscall tracepoints call the programs directly; the per-syscall ones (syscalls:sys_enter_read)
 * go through perf's buffers, measured at several microseconds a call here (bench/server_cost.sh).
 */
const volatile __u32 srv_nr_read = PKPROF_NO_SYSCALL;
const volatile __u32 srv_nr_readv = PKPROF_NO_SYSCALL;
const volatile __u32 srv_nr_recvfrom = PKPROF_NO_SYSCALL;
const volatile __u32 srv_nr_recvmsg = PKPROF_NO_SYSCALL;
const volatile __u32 srv_nr_write = PKPROF_NO_SYSCALL;
const volatile __u32 srv_nr_writev = PKPROF_NO_SYSCALL;
const volatile __u32 srv_nr_sendto = PKPROF_NO_SYSCALL;
const volatile __u32 srv_nr_sendmsg = PKPROF_NO_SYSCALL;

static __always_inline bool srv_is_read(__u32 nr)
{
	return nr == srv_nr_read || nr == srv_nr_readv || nr == srv_nr_recvfrom || nr == srv_nr_recvmsg;
}

static __always_inline bool srv_is_write(__u32 nr)
{
	return nr == srv_nr_write || nr == srv_nr_writev || nr == srv_nr_sendto || nr == srv_nr_sendmsg;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_srv_sys_enter, struct pt_regs *regs, long id)
{
	__u32 nr = (__u32)id;
	struct pkprof_srv_key wr = {}, rd = {};
	struct task_struct *cur;
	long fd;

	if (!srv_is_read(nr) && !srv_is_write(nr))
		return 0;
	fd = (long)(int)PT_REGS_PARM1_SYSCALL(regs); /* libbpf's per-architecture first argument */
	/* The descriptor's channel with interrupts on (it reads only the task's own files): most
	 * reads and writes (files, UDP, remote TCP) end here, without the two kfunc calls that
	 * turn them off. */
	cur = bpf_get_current_task_btf();
	if (!srv_channel(cur, fd, &wr, &rd))
		return 0;
	if (srv_is_write(nr))
		return wr.b ? WITH_IRQS_OFF(srv_write(cur, &wr, &rd)) : 0;
	return WITH_IRQS_OFF(srv_read_enter(&rd));
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_srv_sys_exit, struct pt_regs *regs, long ret)
{
	struct pkprof_srv_read rd, *r;
	__u32 tid;

	if (!srv_is_read(returning_syscall_nr(regs)))
		return 0;
	/* The thread's own noted read, with interrupts on: no read of a channel, no more work. */
	tid = (__u32)bpf_get_current_pid_tgid();
	r = bpf_map_lookup_elem(&srv_reads, &tid);
	if (!r)
		return 0;
	rd = *r;
	bpf_map_delete_elem(&srv_reads, &tid);
	return WITH_IRQS_OFF(srv_read_exit(&rd, tid, ret));
}

/*
 * An exec ends the mark: the new image serves no one the old one read from. (`record -- CMD`
 * starts CMD through a gate pipe: the child reads pkprof's byte, then execs; without this the
 * command's whole run, CPU-bound and never blocking, was billed to pkprof.)
 */
static __always_inline int srv_exec(void)
{
	struct pkprof_cpu *c = this_cpu();

	if (c && task_tag_runs_for(c, PKPROF_CHAIN_SERVER, c->cur_tid))
		srv_mark(c, 0, 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_srv_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return WITH_IRQS_OFF(srv_exec());
}

/* ---- the chain's hooks (core.bpf.h, PKPROF_CHAIN_HOOKS) ---- */

/* The chain opens no interrupt tag. */
static __always_inline void server_tag_close(struct pkprof_cpu *c, struct pkprof_dest *d)
{
	c->kernel_irq_ns += c->tag_ns;
}

static __always_inline __u32 server_tag_beneficiary(struct pkprof_cpu *c)
{
	return 0;
}

static __always_inline void server_softirq_entry(struct pkprof_cpu *c, unsigned int vec)
{
}

/*
 * A marked thread leaves the CPU (the sched_switch tracepoint runs while it is still current):
 * its time so far goes to the client; preempted, it keeps the mark for its next run.
 */
static __always_inline void server_switch_out(struct pkprof_cpu *c, struct pkprof_thread *prev_entry,
					      struct task_struct *prev)
{
	__u32 prev_tid = prev->pid;
	struct pkprof_srv_mark m = {};

	if (!task_tag_runs_for(c, PKPROF_CHAIN_SERVER, prev_tid))
		return;
	/* The core has just replaced the slice's task time by the scheduler's own figure
	 * (follow_scheduler_slice): served-out time never exceeds it. */
	if (c->pending.served_out_ns > c->pending.task_ns) {
		__u64 over = c->pending.served_out_ns - c->pending.task_ns;

		if (over > c->task_tag_ns)
			over = c->task_tag_ns;
		c->task_tag_ns -= over;
		c->pending.served_out_ns -= over;
	}
	srv_credit(c, 0);
	if (!prev->__state && !(prev->flags & PF_EXITING)) {
		m.tid = c->task_tag_tid;
		m.since_ns = c->last_ns;
		/* Counted only when new: a mark parked again over one the switch-in never took
		 * (its switch unreported) would otherwise count twice and never reach 0 again. */
		if (!bpf_map_update_elem(&srv_parked, &prev_tid, &m, BPF_NOEXIST))
			__sync_fetch_and_add(&srv_nparked, 1);
		else if (bpf_map_update_elem(&srv_parked, &prev_tid, &m, BPF_EXIST))
			c->lost.tag_map_full++;
	}
	task_tag_close(c);
}

/* A preempted marked thread runs again: its mark resumes. */
static __always_inline void server_switch_in(struct pkprof_cpu *c, struct task_struct *next)
{
	__u32 tid = next->pid;
	struct pkprof_srv_mark *m;
	__u32 client;

	if (!srv_nparked || !tid)
		return;
	m = bpf_map_lookup_elem(&srv_parked, &tid);
	if (!m)
		return;
	client = m->tid;
	bpf_map_delete_elem(&srv_parked, &tid);
	__sync_fetch_and_sub(&srv_nparked, 1);
	if (!task_tag_runs(c, tid))
		task_tag_open(c, PKPROF_CHAIN_SERVER, client, tid);
}

#endif /* PKPROF_SERVER_BPF_H */
