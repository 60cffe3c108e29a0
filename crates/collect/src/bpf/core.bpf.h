/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The accounting core shared by every program (docs/design.md, "Registers" and "How a chain plugs
 * in"): the per-CPU register file and its maps, the charge of elapsed time to the running context,
 * the interrupt context stack, thread entries, and the tag API the attribution chains use (open,
 * pass, merge, attribute, expire: tag_open, tag_close, task_tag_*, credit_thread, sink_link).
 *
 * The core names no chain. It calls each chain of PKPROF_CHAINS (chains/chains.h) through the hooks
 * below, and each link sink of PKPROF_SINKS through <sink>_link(); a chain header includes this
 * one and defines its hooks, maps, per-CPU state and programs.
 */
#ifndef PKPROF_CORE_BPF_H
#define PKPROF_CORE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "pkprof.h"
#include "task_reads.bpf.h"

/* task_struct.flags (include/linux/sched.h; macros, so not in vmlinux.h). */
#define PF_EXITING 0x00000004
#define PF_WQ_WORKER 0x00000020
#define PF_KTHREAD 0x00200000
/* include/uapi/asm-generic/errno-base.h */
#define EEXIST 17
/* include/linux/err.h: a syscall's return in [-MAX_ERRNO, -1] is an error. */
#define MAX_ERRNO 4095

/*
 * Where a closed tag's time went, for the link sinks: held stack samples of the tag's segment go
 * to `kind` (enum pkprof_link_to): thread `tid`, the hold key (hold, to), or KERNEL.
 */
struct pkprof_dest {
	__u32 kind;
	__u32 tid;
	__u32 hold; /* enum pkprof_hold */
	__u64 to;
};

/*
 * The hooks every chain defines (name: its PKPROF_CHAINS entry), called by the core at these points
 * of the life cycle; a chain with nothing to do at one defines it empty.
 *   name_tag_close(c, d)       a tag of this chain closes: credit c->tag_ns (to a thread, a hold of
 *                              the chain's, or KERNEL via c->kernel_irq_ns) and say where in *d
 *   name_tag_beneficiary(c)    the thread the open tag of this chain serves (0: none)
 *   name_softirq_entry(c, vec) a softirq starts (interrupts off): open a tag for it if the chain's
 *   name_switch_out(c, e, prev) task prev (entry e, NULL without one) leaves the CPU (prev is
 *                              still current: no helper call needed to find it)
 *   name_switch_in(c, next)    next takes the CPU
 * These prototypes are the plug-in interface, made from the list; the definitions follow in the
 * chain headers.
 */
#define PKPROF_CHAIN_HOOKS(name, SLOT)                                                            \
	static __always_inline void name##_tag_close(struct pkprof_cpu *c, struct pkprof_dest *d);  \
	static __always_inline __u32 name##_tag_beneficiary(struct pkprof_cpu *c);                  \
	static __always_inline void name##_softirq_entry(struct pkprof_cpu *c, unsigned int vec);  \
	static __always_inline void name##_switch_out(struct pkprof_cpu *c, struct pkprof_thread *e, \
						      struct task_struct *prev);                    \
	static __always_inline void name##_switch_in(struct pkprof_cpu *c, struct task_struct *next);
PKPROF_CHAINS(PKPROF_CHAIN_HOOKS)

/* An observer (chains/chains.h, PKPROF_OBSERVERS): sees every switch, as the chains' hooks; its
 * switch-out also gets the tracepoint's context (ctx: for the stack at the switch). */
#define PKPROF_OBSERVER_HOOKS(name)                                                               \
	static __always_inline void name##_switch_out(struct pkprof_cpu *c, struct pkprof_thread *e, \
						      struct task_struct *prev, void *ctx);         \
	static __always_inline void name##_switch_in(struct pkprof_cpu *c, struct task_struct *next);
PKPROF_OBSERVERS(PKPROF_OBSERVER_HOOKS)

/* A link sink: held samples of (from_kind, from) go to d (record/links.bpf.h: record_link). */
#define PKPROF_SINK_HOOK(name)                                                                    \
	static __always_inline void name##_link(struct pkprof_cpu *c, __u32 from_kind, __u64 from, \
						const struct pkprof_dest *d);
PKPROF_SINKS(PKPROF_SINK_HOOK)

/* Set by the loader for pkprof record: the sinks want link events (and samples are held). */
const volatile bool record_mode = false;

/*
 * Programs on tracepoints that run with interrupts enabled (softirq and task context) update the
 * same per-CPU registers as the hard-IRQ programs; they run with interrupts off (Linux >= 6.14).
 */
extern void bpf_local_irq_save(unsigned long *flags) __ksym;
extern void bpf_local_irq_restore(unsigned long *flags) __ksym;

/* Evaluates CALL (an int expression) with this CPU's interrupts off and yields its value. */
#define WITH_IRQS_OFF(call)                                                                        \
	({                                                                                         \
		unsigned long __irq_flags;                                                         \
		int __rc;                                                                          \
		bpf_local_irq_save(&__irq_flags);                                                  \
		__rc = (call);                                                                     \
		bpf_local_irq_restore(&__irq_flags);                                               \
		__rc;                                                                              \
	})

/* Set by the loader before load: split task time into user/sys (syscall tracepoints attached). */
const volatile bool split_modes = false;
/*
 * CLOCK_MONOTONIC at which counting begins, set by the loader once every program is attached
 * (0 until then). Programs attached earlier follow the CPUs' state but charge nothing, so every
 * CPU's time starts at the same instant the loader reports as attach.
 */
volatile __u64 count_from_ns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkprof_cpu);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_DEFAULT_MAX_THREADS); /* resized by the loader (--max-threads) */
	__type(key, __u32);
	__type(value, struct pkprof_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PKPROF_DEFAULT_MAX_SYSCALLS);
	__type(key, struct pkprof_syscall_key);
	__type(value, struct pkprof_syscall_stat);
} syscalls SEC(".maps");

/*
 * The record types reach BTF (and so Rust) through the map definitions above; enums that are no
 * field's type reach it through these globals.
 */
enum pkprof_defaults pkprof_defaults_btf_anchor SEC(".data.btf_anchor");
enum pkprof_chain pkprof_chain_btf_anchor SEC(".data.btf_anchor");
enum pkprof_ctx pkprof_ctx_btf_anchor SEC(".data.btf_anchor");
enum pkprof_mode pkprof_mode_btf_anchor SEC(".data.btf_anchor");
enum pkprof_block_reason pkprof_block_reason_btf_anchor SEC(".data.btf_anchor");
enum pkprof_wall_hist pkprof_wall_hist_btf_anchor SEC(".data.btf_anchor");
enum pkprof_other_fns pkprof_other_fns_btf_anchor SEC(".data.btf_anchor");

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

/* The open tag serves this context (the one running now). */
static __always_inline bool tag_here(const struct pkprof_cpu *c)
{
	return c->tag != PKPROF_TAG_NONE && c->tag_depth == c->depth;
}

/* Interrupt time goes to the open served-event tag of this context, else to KERNEL. */
static __always_inline void charge_tag(struct pkprof_cpu *c, __u64 d)
{
	if (tag_here(c))
		c->tag_ns += d;
	else
		c->kernel_irq_ns += d;
}

/* A task's context switches so far; at sched_switch, the switch reported is counted in prev's. */
static __always_inline __u64 switch_count(struct task_struct *t)
{
	return t->nvcsw + t->nivcsw;
}

/*
 * Thread t, the one this CPU switched in last (c->cur_tid), left and came back without either
 * switch reported: its switch count moved on since its switch-in (docs/design.md, "lost
 * switches"). For prev, at sched_switch.
 */
static __always_inline bool returned_unreported(const struct pkprof_cpu *c, struct task_struct *t)
{
	return c->csw_at_in && switch_count(t) != c->csw_at_in;
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
	if (!count_from_ns) {
		/* Still attaching: follow the CPU's state, charge nothing. */
		c->last_ns = now;
		return;
	}
	if (c->last_ns < count_from_ns)
		c->last_ns = count_from_ns; /* the first charge since counting began */
	if ((__s64)(now - c->last_ns) <= 0)
		return; /* an older clock reading than the last charge: nothing to charge */
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
		if (c->task_tag_tid && c->cur_tid == c->task_tag_worker) {
			/* Under a task tag (a kworker running an item queued by someone else): the
			 * beneficiary's time, credited by the tag's chain. */
			c->pending.served_out_ns += d;
			c->task_tag_ns += d;
		}
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
		charge_tag(c, d);
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
		charge_tag(c, d);
		break;
	}
}

/*
 * Attribute: credits work done for thread `tid` by someone else to its slot of `chain`, from any
 * CPU. A thread whose entry is gone (exited and read for the last time) cannot be billed: returns
 * false, and the caller puts the time where its kind of orphan goes (KERNEL, counted).
 */
static __always_inline bool credit_thread(__u32 tid, __u32 chain, __u64 ns, __u64 items)
{
	struct pkprof_thread *e = tid ? bpf_map_lookup_elem(&threads, &tid) : NULL;

	if (!e || chain >= PKPROF_NR_CHAINS)
		return false;
	__sync_fetch_and_add(&e->served.ns[chain], ns);
	if (items)
		__sync_fetch_and_add(&e->served.items[chain], items);
	return true;
}

/* Interrupt time for `tid` (0: nobody): its slot of `chain`, else KERNEL. */
static __always_inline void credit_irq(struct pkprof_cpu *c, __u32 tid, __u32 chain, __u64 ns,
				       __u64 items)
{
	if (!credit_thread(tid, chain, ns, items))
		c->kernel_irq_ns += ns;
}

/* ---- the tag API: the served-event registers' life cycle (docs/design.md, "The tag life cycle") */

/* The chain a tag kind belongs to (PKPROF_NR_CHAINS or more for none). */
static __always_inline __u32 tag_chain(__u32 tag)
{
	return (tag >> PKPROF_TAG_CHAIN_SHIFT) - 1;
}


/* The open tag's segment as a hold key: (cpu << 48 | segment number). */
static __always_inline __u64 segment_hold(const struct pkprof_cpu *c)
{
	return ((__u64)bpf_get_smp_processor_id() << 48) | (c->tag_seq & 0xffffffffffffULL);
}

/* Tells every link sink that held samples of (from_kind, from) go to d. */
static __always_inline void sink_link(struct pkprof_cpu *c, __u32 from_kind, __u64 from,
				      const struct pkprof_dest *d)
{
#define PKPROF_SINK_CALL(name) name##_link(c, from_kind, from, d);
	PKPROF_SINKS(PKPROF_SINK_CALL)
#undef PKPROF_SINK_CALL
}

/*
 * Closes the open tag: its chain credits the time (to a thread, to a hold of its own that a later
 * event passes on, or to KERNEL) and says where; then the sinks learn where the segment's held
 * samples go.
 */
static __always_inline void tag_close(struct pkprof_cpu *c)
{
	struct pkprof_dest d = { .kind = PKPROF_LINK_KERNEL, .hold = PKPROF_HOLD_NONE };
	__u32 chain = tag_chain(c->tag);

	(void)chain; /* a core built without chains */
#define PKPROF_CHAIN_CLOSE(name, SLOT)                                                            \
	if (chain == PKPROF_CHAIN_##SLOT)                                                          \
		name##_tag_close(c, &d);                                                           \
	else
	PKPROF_CHAINS(PKPROF_CHAIN_CLOSE)
#undef PKPROF_CHAIN_CLOSE
		c->kernel_irq_ns += c->tag_ns; /* a tag of no chain: KERNEL */
	if (record_mode && c->tag_sampled) {
		if (d.kind == PKPROF_LINK_THREAD && !d.tid)
			d.kind = PKPROF_LINK_KERNEL;
		sink_link(c, PKPROF_HOLD_SEGMENT, segment_hold(c), &d);
	}
	c->tag = PKPROF_TAG_NONE;
	c->tag_ns = 0;
	c->tag_aux = 0;
	c->tag_sampled = 0;
}

/* Opens a tag for the interrupt context running now (task context serves itself: no tag). */
static __always_inline void tag_open(struct pkprof_cpu *c, __u32 tag, __u64 key)
{
	if (!c->depth)
		return;
	if (c->tag != PKPROF_TAG_NONE)
		tag_close(c);
	c->tag_seq++;
	c->tag = tag;
	c->tag_key = key;
	c->tag_depth = c->depth;
	c->tag_ns = 0;
}

/*
 * Task context: the current thread now runs work for thread `tid` (a work item's queuer, a
 * server's client), on behalf of `chain`, whose hooks credit it.
 */
static __always_inline void task_tag_open(struct pkprof_cpu *c, __u32 chain, __u32 tid, __u32 worker)
{
	c->task_tag_chain = chain;
	c->task_tag_tid = tid;
	c->task_tag_worker = worker;
	c->task_tag_ns = 0;
}

/* The task tag is open and thread `tid` is the one running its work. */
static __always_inline bool task_tag_runs(const struct pkprof_cpu *c, __u32 tid)
{
	return c->task_tag_tid && c->task_tag_worker == tid;
}

/* The task tag of `chain` is open and thread `tid` is the one running its work. */
static __always_inline bool task_tag_runs_for(const struct pkprof_cpu *c, __u32 chain, __u32 tid)
{
	return task_tag_runs(c, tid) && c->task_tag_chain == chain;
}

static __always_inline void task_tag_close(struct pkprof_cpu *c)
{
	c->task_tag_tid = 0;
	c->task_tag_ns = 0;
}

/*
 * Who work started now is for, as a thread id (0: nobody, i.e. KERNEL): in interrupt context the
 * open tag's beneficiary, as its chain says; under a task tag its beneficiary; in any other kernel
 * thread nobody; else the current thread.
 */
static __always_inline __u32 beneficiary(struct pkprof_cpu *c)
{
	struct task_struct *cur;

	if (c->depth) {
		__u32 chain = tag_chain(c->tag);

		(void)chain; /* a core built without chains */
		if (!tag_here(c))
			return 0;
#define PKPROF_CHAIN_BENEFICIARY(name, SLOT)                                                      \
	if (chain == PKPROF_CHAIN_##SLOT)                                                          \
		return name##_tag_beneficiary(c);
		PKPROF_CHAINS(PKPROF_CHAIN_BENEFICIARY)
#undef PKPROF_CHAIN_BENEFICIARY
		return 0;
	}
	if (task_tag_runs(c, c->cur_tid))
		return c->task_tag_tid;
	cur = bpf_get_current_task_btf();
	if (cur->flags & PF_KTHREAD)
		return 0;
	return cur->pid;
}

/* A softirq starts: each chain may open a tag for it. */
static __always_inline void chains_softirq_entry(struct pkprof_cpu *c, unsigned int vec)
{
#define PKPROF_CHAIN_SOFTIRQ(name, SLOT) name##_softirq_entry(c, vec);
	PKPROF_CHAINS(PKPROF_CHAIN_SOFTIRQ)
#undef PKPROF_CHAIN_SOFTIRQ
}

/* Task prev (entry e, NULL without one) leaves the CPU. */
static __always_inline void chains_switch_out(struct pkprof_cpu *c, struct pkprof_thread *e,
					      struct task_struct *prev, void *ctx)
{
#define PKPROF_CHAIN_SWITCH_OUT(name, SLOT) name##_switch_out(c, e, prev);
	PKPROF_CHAINS(PKPROF_CHAIN_SWITCH_OUT)
#undef PKPROF_CHAIN_SWITCH_OUT
#define PKPROF_OBSERVER_SWITCH_OUT(name) name##_switch_out(c, e, prev, ctx);
	PKPROF_OBSERVERS(PKPROF_OBSERVER_SWITCH_OUT)
#undef PKPROF_OBSERVER_SWITCH_OUT
}

static __always_inline void chains_switch_in(struct pkprof_cpu *c, struct task_struct *next)
{
#define PKPROF_CHAIN_SWITCH_IN(name, SLOT) name##_switch_in(c, next);
	PKPROF_CHAINS(PKPROF_CHAIN_SWITCH_IN)
#undef PKPROF_CHAIN_SWITCH_IN
#define PKPROF_OBSERVER_SWITCH_IN(name) name##_switch_in(c, next);
	PKPROF_OBSERVERS(PKPROF_OBSERVER_SWITCH_IN)
#undef PKPROF_OBSERVER_SWITCH_IN
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
	if (tag_here(c))
		tag_close(c);
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
	if (src->served_out_ns) {
		if (dst)
			dst->served_out_ns += src->served_out_ns;
		src->served_out_ns = 0;
	}
#pragma unroll
	for (int i = 0; i < PKPROF_NR_CHAINS; i++) {
		if (!src->claimed.ns[i])
			continue;
		if (dst) {
			dst->claimed.ns[i] += src->claimed.ns[i];
			dst->claimed.items[i] += src->claimed.items[i];
		} else {
			c->kernel_irq_ns += src->claimed.ns[i]; /* nobody to bill: KERNEL */
		}
		src->claimed.ns[i] = 0;
		src->claimed.items[i] = 0;
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

/*
 * A new thread entry is built here (one per CPU) rather than on the stack: the entry is larger
 * than the BPF stack allows. Programs that create entries run with interrupts off or in the
 * switch, so one slot per CPU is never used twice at once.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkprof_thread);
} thread_scratch SEC(".maps");

/* Finds the thread's entry, creating it from the given task when it is new. */
static __always_inline struct pkprof_thread *thread_entry(struct pkprof_cpu *c, struct task_struct *t,
							    __u64 now)
{
	__u32 tid = t->pid, zero = 0;
	struct pkprof_thread *e = bpf_map_lookup_elem(&threads, &tid);
	struct pkprof_thread *fresh;
	long err;

	if (e)
		return e;
	/* All zero between uses (a per-CPU array starts so, and the fields set here are cleared
	 * after the copy): the entry, most of a kilobyte, is not cleared at every new thread. */
	fresh = bpf_map_lookup_elem(&thread_scratch, &zero);
	if (!fresh)
		return NULL;
	fresh->pid = t->tgid;
	fresh->ppid = t->real_parent->tgid;
	fresh->start_ns = now;
	fresh->leader_start_ns = t->group_leader->start_time;
	/* Later moves are followed by the cgroup_attach_task program. */
	fresh->cgroup_id = bpf_get_current_cgroup_id();
	fresh->kthread = !!(t->flags & PF_KTHREAD);
	/* A dying thread switched out after user space freed its entry (it ran late in its exit
	 * path): the new entry is stamped too, or it would never be freed. */
	if (t->flags & PF_EXITING)
		fresh->exit_ns = now;
	_Static_assert(sizeof(fresh->comm) == 16 &&
			       __builtin_offsetof(struct pkprof_thread, comm) % 8 == 0,
		       "comm: two aligned words");
	task_comm_copy(t, fresh->comm); /* the kernel pads a comm with NULs */
	err = bpf_map_update_elem(&threads, &tid, fresh, BPF_NOEXIST);
	fresh->pid = 0;
	fresh->ppid = 0;
	fresh->start_ns = 0;
	fresh->leader_start_ns = 0;
	fresh->cgroup_id = 0;
	fresh->kthread = 0;
	fresh->exit_ns = 0;
	__builtin_memset(fresh->comm, 0, sizeof(fresh->comm));
	if (err && err != -EEXIST /* created meanwhile on another CPU */) {
		c->lost.thread_map_full++;
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

#endif /* PKPROF_CORE_BPF_H */
