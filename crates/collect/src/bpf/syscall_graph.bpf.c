// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pkprof syscalls: the per-thread syscall graph, aggregated in the kernel.
 *
 * At sys_enter a traced thread notes which node (syscall, optionally split by fd and size) it
 * entered and when; at sys_exit the transition "node before the previous -> previous node -> this
 * node" is counted in `sc_edges` with the call's time and error. Every `stack_every`-th call (and
 * the first call of each new transition) is a call-site sample: its user registers, frame-pointer
 * walk and a window of its user stack's bytes go to the `sc_events` ring, where user space unwinds
 * them from the binaries' unwind tables at once and counts (transition, stack) (docs/design.md,
 * "User stacks"). Those records do not wake the reader, except for a process not captured yet
 * (`sc_captured`); nothing else is streamed per call.
 *
 * With --no-time only sys_exit is attached (sc_exit_untimed), which halves the tracepoint cost;
 * the node comes from the registers saved at entry, still there at exit.
 *
 * Counting at exit matches strace -c: calls that never return (exit, exit_group) are not counted, a
 * successful execve is (its exit runs in the new image), and a call whose entry was not seen (it
 * started before the thread was traced) is not.
 *
 * Targets: every process (`trace_all`), or the processes in `sc_targets` (by tgid), whose children
 * join at fork when `follow_children` is set. A thread's verdict is cached in its task storage together
 * with `targets_gen`, which the loader bumps whenever it changes `sc_targets`.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "pkprof.h"
#include "syscall_regs.bpf.h"
#include "user_stack.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define E2BIG 7

/* Set by the loader before load. */
const volatile bool trace_all = false;
const volatile bool follow_children = false;
const volatile bool split_args = false;
const volatile __u32 stack_every = 64; /* 0: no stacks */
const volatile __u32 self_pid = 0;      /* pkprof itself, never traced with `trace_all` */
/* Bytes of user stack copied per call-site sample (--stack-bytes; 0: frame pointers only). */
const volatile __u32 stack_bytes = PKPROF_DEFAULT_STACK_BYTES;
/* Wake the reader anyway once this much is waiting (set by the loader: a quarter of the ring). */
const volatile __u64 wakeup_bytes = 1 << 20;

/* Bumped by the loader after each change to sc_targets (starts at 1: fresh storage holds 0). */
volatile __u32 targets_gen = 1;

/* Per-thread state, freed with the task. */
struct sc_thread {
	__u64 prev;     /* node of the last call that returned, PKPROF_SC_NONE before the first */
	__u64 prev2;    /* the one before it */
	__u64 cur;      /* node of the call in progress */
	__u64 enter_ns; /* its entry time */
	__u32 gen;      /* targets_gen when `traced` was decided */
	__u32 until_sample; /* calls left before the next stack sample */
	__u8 traced;
	__u8 in_call; /* with time: entry seen, exit not yet; without: armed after the first exit */
	__u8 pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sc_thread);
} sc_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tgid */
	__type(value, __u8);
} sc_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* --max-transitions */
	__type(key, struct pkprof_sc_edge_key);
	__type(value, struct pkprof_sc_edge);
} sc_edges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32); /* tid */
	__type(value, struct pkprof_sc_comm);
} sc_comms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PKPROF_SC_MAX_NR);
	__type(key, __u32);
	__type(value, struct pkprof_sc_argspec);
} sc_argspecs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkprof_sc_lost);
} sc_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by the loader */
} sc_events SEC(".maps");

/*
 * Processes whose memory maps user space has captured (key tgid). A call site of a process not in
 * it wakes the reader at once so it can capture the maps while the process lives; other call
 * sites wait for the reader's next poll (or for `wakeup_bytes`), which saves a wake-up per record.
 * A process leaves it at exec (a new image to capture).
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} sc_captured SEC(".maps");

/*
 * Where each CPU builds a call-site record before it goes to the ring with its variable-length
 * stack bytes (bpf_ringbuf_reserve needs a constant size). An array indexed by CPU rather than a
 * per-CPU array: a per-CPU value may not exceed 32 KiB. The syscall tracepoints run their BPF
 * programs with preemption disabled, and a program does not nest in itself on a CPU, so one slot a
 * CPU is enough. Sized to the possible CPUs by the loader.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkprof_sc_site_buf);
} sc_scratch SEC(".maps");

/* A ring buffer has no value type: these put the records' types into BTF, and so into Rust. */
struct pkprof_sc_event pkprof_sc_event_btf_anchor SEC(".data.btf_anchor");
struct pkprof_sc_site pkprof_sc_site_btf_anchor SEC(".data.btf_anchor");
enum pkprof_sc_event_kind pkprof_sc_event_kind_btf_anchor SEC(".data.btf_anchor");
enum pkprof_stack_flags pkprof_stack_flags_btf_anchor SEC(".data.btf_anchor");
enum pkprof_sc_node pkprof_sc_node_btf_anchor SEC(".data.btf_anchor");
enum pkprof_sc_limits pkprof_sc_limits_btf_anchor SEC(".data.btf_anchor");
enum pkprof_sc_node_layout pkprof_sc_node_layout_btf_anchor SEC(".data.btf_anchor");

static __always_inline struct pkprof_sc_lost *lost(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&sc_lost, &zero);
}

/*
 * Records the thread's command and tells user space to capture the process's mappings, at once
 * (the ring may hold call sites that did not wake it).
 */
static __always_inline void note_comm(__u32 pid, __u32 tid, __u32 kind)
{
	struct pkprof_sc_comm c = { .pid = pid };
	struct pkprof_sc_event ev = { .kind = kind, .pid = pid, .tid = tid };

	bpf_get_current_comm(c.comm, sizeof(c.comm));
	bpf_map_update_elem(&sc_comms, &tid, &c, BPF_ANY);
	if (kind == PKPROF_SC_EXEC)
		bpf_map_delete_elem(&sc_captured, &pid);
	if (bpf_ringbuf_output(&sc_events, &ev, sizeof(ev), BPF_RB_FORCE_WAKEUP)) {
		struct pkprof_sc_lost *l = lost();

		if (l)
			l->events_lost++;
	}
}

/* Whether a process is traced now. */
static __always_inline bool is_target(__u32 pid)
{
	if (trace_all)
		return pid != self_pid;
	return bpf_map_lookup_elem(&sc_targets, &pid) != NULL;
}

/* The thread's state if it is traced, deciding (and caching) the verdict when targets changed. */
static __always_inline struct sc_thread *traced_thread(struct task_struct *task, __u64 id)
{
	__u32 gen = targets_gen;
	struct sc_thread *st;
	bool traced;

	st = bpf_task_storage_get(&sc_threads, task, 0, 0);
	if (st && st->gen == gen)
		return st->traced ? st : NULL;
	traced = is_target(id >> 32);
	if (!st && !traced && !trace_all)
		return NULL; /* not traced and never was: no storage for bystanders */
	if (!st) {
		st = bpf_task_storage_get(&sc_threads, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!st) {
			struct pkprof_sc_lost *l = lost();

			if (l)
				l->threads_full++;
			return NULL;
		}
	}
	st->gen = gen;
	if (traced && !st->traced) {
		st->prev = PKPROF_SC_NONE;
		st->prev2 = PKPROF_SC_NONE;
		st->until_sample = 1;
		st->in_call = 0;
		note_comm(id >> 32, (__u32)id, PKPROF_SC_NEW_THREAD);
	}
	st->traced = traced;
	return traced ? st : NULL;
}

/* Argument i of the call, read straight from the saved registers (a trusted tp_btf pointer). */
static __always_inline __u64 syscall_arg(struct pt_regs *regs, __u8 i)
{
	switch (i) {
	case 0:
		return PT_REGS_PARM1_SYSCALL(regs);
	case 1:
		return PT_REGS_PARM2_SYSCALL(regs);
	case 2:
		return PT_REGS_PARM3_SYSCALL(regs);
	case 3:
		return PT_REGS_PARM4_SYSCALL(regs);
	case 4:
		return PT_REGS_PARM5_SYSCALL(regs);
	default:
		return 0;
	}
}

/* 0 for 0, else the number of bits of n: n is in [2^(k-1), 2^k). */
static __always_inline __u64 size_class(__u64 n)
{
	__u64 k = 0;

	if (n >> 32) { k += 32; n >>= 32; }
	if (n >> 16) { k += 16; n >>= 16; }
	if (n >> 8) { k += 8; n >>= 8; }
	if (n >> 4) { k += 4; n >>= 4; }
	if (n >> 2) { k += 2; n >>= 2; }
	if (n >> 1) { k += 1; n >>= 1; }
	return k + n;
}

static __always_inline __u64 node_of(struct pt_regs *regs, long id)
{
	__u32 nr = (__u32)id;
	struct pkprof_sc_argspec *spec;
	__u64 node = nr & PKPROF_SC_NODE_NR_MASK;

	if (!split_args)
		return node;
	spec = bpf_map_lookup_elem(&sc_argspecs, &nr);
	if (!spec)
		return node;
	if (spec->fd_arg)
		node |= PKPROF_SC_NODE_FD | (syscall_arg(regs, spec->fd_arg - 1) << PKPROF_SC_NODE_FD_SHIFT);
	if (spec->size_arg)
		node |= PKPROF_SC_NODE_SIZE | (size_class(syscall_arg(regs, spec->size_arg - 1)) << PKPROF_SC_NODE_SIZE_SHIFT);
	return node;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sc_enter, struct pt_regs *regs, long id)
{
	struct sc_thread *st = traced_thread(bpf_get_current_task_btf(), bpf_get_current_pid_tgid());

	if (!st)
		return 0;
	st->cur = node_of(regs, id);
	st->enter_ns = bpf_ktime_get_ns();
	st->in_call = 1;
	return 0;
}

#define LEAF_SCAN_WORDS 8

/*
 * The return address nearest the top of the user stack: the first of its top 8 words (from the
 * copied bytes, else read again) that points just after a rel32 call (0xe8 five bytes before it),
 * else 0. A syscall wrapper without a frame pointer keeps its return address there, maybe under a
 * few words of locals (see pkprof.h). Only the frame-pointer walk needs it.
 */
static __always_inline __u64 leaf_return(struct pkprof_sc_site_buf *buf, __u64 sp)
{
	__u64 words[LEAF_SCAN_WORDS] = {};
	__u8 op;

	if (buf->s.stack_bytes_len >= sizeof(words))
		__builtin_memcpy(words, buf->stack, sizeof(words));
	else if (bpf_probe_read_user(words, sizeof(words), (void *)sp))
		return 0;
	for (int i = 0; i < LEAF_SCAN_WORDS; i++) {
		if (words[i] < 4096)
			continue;
		op = 0;
		if (!bpf_probe_read_user(&op, 1, (void *)(words[i] - 5)) && op == 0xe8)
			return words[i];
	}
	return 0;
}

/* Submit flags for a call site: wake the reader only when needed (see `sc_captured`). */
static __always_inline __u64 submit_flags(__u32 pid)
{
	if (!bpf_map_lookup_elem(&sc_captured, &pid) ||
	    bpf_ringbuf_query(&sc_events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/*
 * Sends a sampled call of this transition to user space: the user registers saved at the
 * syscall's entry (`regs`, the tracepoint's trusted pointer), the frame-pointer walk from them,
 * and a window of the stack's bytes.
 */
static __always_inline void sample_site(struct pt_regs *regs, struct pkprof_sc_edge_key *key)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct pkprof_sc_site_buf *buf = bpf_map_lookup_elem(&sc_scratch, &cpu);
	struct pkprof_sc_site *s;
	struct pkprof_sc_lost *l;
	__u64 len;

	if (!buf)
		return;
	s = &buf->s;
	s->kind = PKPROF_SC_SITE;
	s->stack_flags = 0;
	s->edge = *key;
	s->user_ip = PT_REGS_IP(regs);
	s->user_sp = PT_REGS_SP(regs);
	s->user_bp = PT_REGS_FP(regs);
	s->stack_bytes_len = 0;
	if (stack_bytes)
		s->stack_bytes_len = copy_user_stack(buf->stack, s->user_sp, stack_bytes,
						     &s->stack_flags);
	s->ustack_len = walk_user_stack(s->ustack, buf->stack, s->stack_bytes_len, s->user_ip,
					s->user_bp, s->user_sp, &s->stack_flags);
	s->leaf_return = leaf_return(buf, s->user_sp);
	len = sizeof(*s) + (s->stack_bytes_len & (2 * PKPROF_MAX_STACK_BYTES - 1));
	if (len > sizeof(*buf))
		len = sizeof(*buf);
	if (bpf_ringbuf_output(&sc_events, buf, len, submit_flags(key->pid))) {
		l = lost();
		if (l)
			l->sites_ring_full++;
	}
}

/* Counts one returned call on the transition prev -> `to`, and maybe samples its call site. */
static __always_inline void count_call(struct pt_regs *regs, struct sc_thread *st,
				       __u64 id, __u64 to, __u64 ns, long ret)
{
	struct pkprof_sc_edge_key key = {
		.pid = id >> 32,
		.tid = (__u32)id,
		.before = st->prev2,
		.from = st->prev,
		.to = to,
	};
	struct pkprof_sc_edge *e;
	bool fresh = false;

	st->prev2 = st->prev;
	st->prev = to;
	e = bpf_map_lookup_elem(&sc_edges, &key);
	if (e) {
		/* The key holds the thread, which runs on one CPU at a time: plain adds are safe. */
		e->count++;
		e->total_ns += ns;
		if (ret < 0)
			e->errors++;
	} else {
		struct pkprof_sc_edge first = { .count = 1, .total_ns = ns, .errors = ret < 0 };

		if (bpf_map_update_elem(&sc_edges, &key, &first, BPF_NOEXIST)) {
			struct pkprof_sc_lost *l = lost();

			if (l)
				l->edges_full++;
			return;
		}
		fresh = true;
	}
	if (ret >= 0 && is_execve(to & PKPROF_SC_NODE_NR_MASK))
		note_comm(key.pid, key.tid, PKPROF_SC_EXEC); /* a new image, maybe a new thread id */
	if (stack_every && (fresh || --st->until_sample == 0)) {
		st->until_sample = stack_every;
		sample_site(regs, &key);
	}
}

/* With time (sc_enter attached): the call whose entry sc_enter saw returns. */
SEC("tp_btf/sys_exit")
int BPF_PROG(sc_exit, struct pt_regs *regs, long ret)
{
	struct sc_thread *st = bpf_task_storage_get(&sc_threads, bpf_get_current_task_btf(), 0, 0);

	if (!st || !st->traced || !st->in_call)
		return 0;
	st->in_call = 0;
	count_call(regs, st, bpf_get_current_pid_tgid(), st->cur,
		   bpf_ktime_get_ns() - st->enter_ns, ret);
	return 0;
}

/*
 * Without time (--no-time: only this program is attached, halving the tracepoint cost): the node
 * is taken from the saved registers at exit. A thread's first exit after it became traced is not
 * counted: its entry came before (the gate read of `-- CMD`, a new thread's return from clone).
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(sc_exit_untimed, struct pt_regs *regs, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sc_thread *st = traced_thread(bpf_get_current_task_btf(), id);

	if (!st)
		return 0;
	if (!st->in_call) {
		st->in_call = 1; /* from now on every exit is of a call entered while traced */
		return 0;
	}
	count_call(regs, st, id, node_of(regs, returning_syscall_nr(regs)), 0, ret);
	return 0;
}

/* A traced process is gone: it leaves the targets (user space stops when none is left). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sc_exit_process, struct task_struct *p, bool group_dead)
{
	__u32 pid = p->tgid;

	if (group_dead && !trace_all)
		bpf_map_delete_elem(&sc_targets, &pid);
	return 0;
}

/* A traced process's child becomes a target (threads share the tgid and need nothing). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = parent->tgid, cpid = child->tgid;
	__u8 one = 1;

	if (!follow_children || trace_all || ppid == cpid)
		return 0;
	if (bpf_map_lookup_elem(&sc_targets, &ppid) &&
	    bpf_map_update_elem(&sc_targets, &cpid, &one, BPF_ANY)) {
		struct pkprof_sc_lost *l = lost();

		if (l)
			l->targets_full++;
	}
	return 0;
}
