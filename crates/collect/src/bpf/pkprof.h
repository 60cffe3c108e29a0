/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every record that crosses the kernel/user boundary, defined once.
 *
 * The BPF programs include this header; Rust sees the same layouts through the types that
 * libbpf-cargo generates from the programs' BTF (crates/collect/src/skel.rs). Do not copy a struct
 * from here into a #[repr(C)] twin on the Rust side.
 */
#ifndef PKPROF_H
#define PKPROF_H

#include "vmlinux.h"
#include "chains/chains.h"

#define PKPROF_COMM_LEN 16
/* HI, TIMER, NET_TX, NET_RX, BLOCK, IRQ_POLL, TASKLET, SCHED, HRTIMER, RCU */
#define PKPROF_NR_SOFTIRQS 10
/* Context nesting kept per CPU: task -> softirq -> hard IRQ, with one spare level. */
#define PKPROF_CTX_DEPTH 4

/*
 * Default capacities, read by both the BPF maps (their max_entries before the loader resizes them)
 * and the CLI's defaults (through the generated Rust type).
 */
enum pkprof_defaults {
	PKPROF_DEFAULT_MAX_THREADS = 32768,  /* `threads` (--max-threads) */
	PKPROF_DEFAULT_MAX_TAGS = 16384,     /* each chain's tag table (--max-tags) */
	PKPROF_DEFAULT_MAX_TARGETS = 8192,   /* record's `targets` (--max-targets) */
	PKPROF_DEFAULT_MAX_SYSCALLS = 16384, /* `syscalls`: (pid, syscall) pairs */
	PKPROF_DEFAULT_TAG_EXPIRE_MS = 1000, /* held receive work expires after this (--tag-expire) */
};

/* What a CPU is doing right now (the context register, docs/design.md "Registers"). */
enum pkprof_ctx {
	PKPROF_CTX_TASK = 0,
	PKPROF_CTX_HARDIRQ = 1,
	PKPROF_CTX_SOFTIRQ = 2,
};

/*
 * Attribution chains (kernel work done for a thread by someone else), one per entry of
 * PKPROF_CHAINS (chains/chains.h), in that order: the index of a chain's slot in
 * pkprof_served.ns[] and items[].
 */
#define PKPROF_CHAIN_ENUM(name, SLOT) PKPROF_CHAIN_##SLOT,
enum pkprof_chain {
	PKPROF_CHAINS(PKPROF_CHAIN_ENUM)
	PKPROF_NR_CHAINS,
};
#undef PKPROF_CHAIN_ENUM

/*
 * Served-event tags (docs/design.md, "The tag life cycle"): which beneficiary the interrupt-context
 * work running now serves. A tag is opened by a chain's event (an skb entering the stack, a block
 * request completing) at the current interrupt depth and closed by the next such event or by the
 * exit of that context; interrupt time charged in between accumulates in the tag. Each chain
 * numbers its own tag kinds with PKPROF_TAG(its chain, n); the core finds a tag's chain from it.
 */
enum pkprof_tag {
	PKPROF_TAG_NONE = 0,
	PKPROF_TAG_CHAIN_SHIFT = 8, /* a tag kind is (chain + 1) << 8 | the chain's own number */
};
#define PKPROF_TAG(chain, n) ((((chain) + 1) << PKPROF_TAG_CHAIN_SHIFT) | (n))

/* User/kernel mode of a thread, known only with the syscall tracepoints attached. */
enum pkprof_mode {
	PKPROF_MODE_UNKNOWN = 0,
	PKPROF_MODE_USER = 1,
	PKPROF_MODE_SYS = 2,
};

/*
 * Time and event counters charged to one thread while it was the CPU's current task.
 * task_ns is the thread's own time; hardirq_ns and softirq_ns are interrupt work that ran while it
 * was current, which Linux bills to it. With the syscall tracepoints, task_ns is split further into
 * user_ns + sys_ns + unsplit_ns (unsplit: mode not yet known since attach).
 */
/* Work others ran for a thread, per chain slot (enum pkprof_chain); added atomically from any CPU. */
struct pkprof_served {
	__u64 ns[PKPROF_NR_CHAINS];
	__u64 items[PKPROF_NR_CHAINS];
};

struct pkprof_acc {
	__u64 task_ns;
	__u64 hardirq_ns;
	__u64 softirq_ns[PKPROF_NR_SOFTIRQS];
	__u64 user_ns;
	__u64 sys_ns;
	__u64 unsplit_ns;
	__u64 syscalls;
	__u64 faults;
	__u64 switches;
	/* Task time spent running work items queued by others (kworkers); billed to the queuer. */
	__u64 served_out_ns;
	/* Work a chain billed to the thread while it was current (NET RX as it read its sockets),
	 * per chain slot (enum pkprof_chain), and its items. */
	struct pkprof_served claimed;
};

/*
 * Why a thread is off its CPU (docs/design.md, "Wall time"): RUNNABLE means it still wants to run
 * (preempted, or woken and waiting for a CPU: the runqueue wait); the others say what it waits
 * for. Decided at switch-out by block_reason() (block_reason.bpf.h).
 */
enum pkprof_block_reason {
	PKPROF_BLOCK_RUNNABLE = 0, /* preempted or woken: waiting for a CPU */
	PKPROF_BLOCK_IO,           /* uninterruptible I/O wait (block layer, page cache) */
	PKPROF_BLOCK_NET,          /* network socket receive/accept/connect */
	PKPROF_BLOCK_IPC,          /* pipe, FIFO, unix socket */
	PKPROF_BLOCK_LOCK,         /* futex */
	PKPROF_BLOCK_SLEEP,        /* nanosleep, clock_nanosleep, pause */
	PKPROF_BLOCK_POLL,         /* poll, select, epoll wait */
	PKPROF_BLOCK_OTHER,        /* anything else */
	PKPROF_BLOCK_NR,
};

/* Runqueue-wait histogram: two buckets per power of two of ns (pkprof_wall.runq_hist). */
enum pkprof_wall_hist {
	PKPROF_RUNQ_HIST = 64,
};

/*
 * A thread's wall time by class (the wall chain, chains/wall.bpf.h; docs/design.md "Wall time").
 * From since_ns on, every ns is on CPU (oncpu_ns: switch-in to switch-out, by the same clock as
 * the rest), waiting for a CPU (off_class_ns[PKPROF_BLOCK_RUNNABLE]) or blocked
 * (off_class_ns[reason]); the period still open is added by the reader: on CPU since in_ns, or
 * off since off_ns: [off_ns, wake_ns) blocked, [wake_ns, now) runnable (wake_ns is known for a
 * preemption and a new thread; a woken thread is blocked until its switch-in says when it woke).
 */
/*
 * The wall chain's per-CPU register (`pkprof_cpu.wall`): the thread switched in last on this CPU,
 * when (ktime), and its run-queue total as schedstat will say it once this switch-in is counted
 * (sched_info.run_delay plus the wait ending now; wait_known 0: not said, a kernel without
 * CONFIG_SCHED_INFO). The switch-in needs no thread entry: it is applied to the entry at the
 * thread's switch-out, where the core holds the entry, and by the reader meanwhile.
 */
struct pkprof_wall_cpu {
	__u64 in_ns;
	__u64 run_delay_ns;
	__u32 tid;           /* 0: nothing pending (idle, or applied) */
	__u32 wait_known;
};

struct pkprof_wall {
	__u64 since_ns;      /* ktime the classes start (0: not yet) */
	__u64 oncpu_ns;      /* closed on-CPU periods since since_ns */
	__u64 in_ns;         /* 0 at rest: a thread on a CPU has its switch-in in its CPU's register */
	__u64 end_ns;        /* ktime of its final switch-out (exited), else 0 */
	__u64 off_ns;        /* ktime it left the CPU, 0 while on it */
	__u64 wake_ns;       /* ktime it became runnable; < off_ns while blocked (or not known) */
	__u64 run_delay_out; /* its sched_info.run_delay when the off period began */
	__u32 off_reason;    /* enum pkprof_block_reason of the open off period */
	__u32 wake_unseen;   /* off periods ended without the scheduler's run-queue stamp (no
			      * CONFIG_SCHED_INFO): all blocked */
	__u32 switch_unseen; /* a switch-in or -out not reported (the time it hides: OTHER) */
	__u32 pad;
	__u64 off_class_ns[PKPROF_BLOCK_NR];
	__u64 off_count[PKPROF_BLOCK_NR]; /* closed off periods by reason ([RUNNABLE]: preemptions) */
	__u64 runq_waits;    /* closed runqueue waits (each switch-in after an off period) */
	__u64 runq_max_ns;
	__u32 runq_hist[PKPROF_RUNQ_HIST];
	__u64 off_func;      /* OTHER: the kernel code it blocked in (a return address, 0: unknown) */
	/* The last OTHER function read from its stack, and where it blocked then (its state, system
	 * call and user return address): an OTHER switch-out from the same place reuses it
	 * other_span times in a row (a stack read costs 10-15 us here): PKPROF_OTHER_FN_REUSE,
	 * doubled at each read that finds the same function again, up to PKPROF_OTHER_FN_REUSE_MAX. */
	__u64 other_func;
	__u64 other_key;
	__u32 other_reuse;
	__u32 other_span;
};

/*
 * OTHER's kernel functions (the wall chain, map `wall_other_fns`; docs/design.md "Wall time"):
 * the time a thread spent blocked as OTHER, by the kernel code it blocked in: the first frame of
 * its kernel stack outside the scheduler (.sched.text), a return address named in user space.
 * Closed off periods only; a full table counts its misses (pkprof_lost.other_fn_full).
 */
enum pkprof_other_fns {
	PKPROF_OTHER_FNS = 4096, /* entries of `wall_other_fns` */
	PKPROF_OTHER_FN_DEPTH = 12, /* kernel frames read at an OTHER switch-out */
	PKPROF_OTHER_FN_REUSE = 15, /* OTHER switch-outs from one place between two stack reads */
	PKPROF_OTHER_FN_REUSE_MAX = 255, /* ... at most, once reads keep finding the same function */
};

struct pkprof_other_fn_key {
	__u32 tid;
	__u32 pid;
	__u64 func;
};

struct pkprof_other_fn {
	__u64 ns;
	__u64 count; /* closed OTHER periods */
};

/* Value of the `threads` hash map, keyed by thread id (kernel pid). */
struct pkprof_thread {
	__u32 pid;  /* thread group id: the process */
	__u32 ppid; /* its parent's thread group id when the entry was made */
	__u64 cgroup_id;
	__u64 start_ns; /* first seen (ktime) */
	__u32 kthread;  /* a kernel thread: its own time belongs to the KERNEL bucket */
	__u32 task_tag_tid; /* off-CPU inside served work (a task tag): its beneficiary, else 0 */
	__u64 exit_ns;  /* ktime of sched_process_exit, 0 while alive */
	char comm[PKPROF_COMM_LEN];
	struct pkprof_acc acc;
	struct pkprof_served served;
	/* Saved per-thread registers of syscall mode while the thread is off-CPU (the mode itself is
	 * read from the task's saved registers at switch-in). */
	__u64 sys_enter_ns;
	__u32 sys_nr;
	/* record: the process was a target when this thread was forked (see `targets`); kept after
	 * the process leaves the target set, so user space sees it in the thread's last read. */
	__u32 target;
	__u32 pad_wall;
	/* se.sum_exec_runtime at its last reported switch-out (0 = none yet), and of which task (its
	 * address: a tid can pass to another task): what it ran from then on to a reported
	 * switch-in ran unseen (recover_unseen). */
	__u64 sum_out;
	__u64 sum_task;
	/* Its process's birth (the leader's start_time, CLOCK_MONOTONIC): user space folds a process
	 * born after its last read (crates/collect/src/short_lived.rs). */
	__u64 leader_start_ns;
	struct pkprof_wall wall; /* the wall chain's classes */
};

/* Key and value of the `syscalls` hash map: exact per-process syscall counts (syscall mode). */
struct pkprof_syscall_key {
	__u32 pid;
	__u32 nr;
};

struct pkprof_syscall_stat {
	__u64 count;
	__u64 total_ns; /* wall time from sys_enter to sys_exit, blocked time included */
	__u64 errors;   /* returns in [-4095, -1] */
};

/* Events the BPF side could not account; every field is a count, shown to the user. */
struct pkprof_lost {
	__u64 thread_map_full;  /* a new thread did not fit in `threads` */
	__u64 syscall_map_full; /* a new (pid, syscall) did not fit in `syscalls` */
	__u64 ctx_overflow;     /* interrupt nesting deeper than PKPROF_CTX_DEPTH */
	__u64 unmatched_exit;   /* an IRQ/softirq exit without its entry (missed event or attach) */
	__u64 ctx_reset;        /* a context switch found interrupt contexts still open */
	__u64 missed_switch;    /* a switch the kernel never reported (see missed_ns, recovered_ns) */
	__u64 tag_map_full;     /* a socket / request / work item did not fit in its tag map */
	__u64 sample_ring_full; /* a stack sample found the ring buffer full (record) */
	__u64 link_ring_full;   /* a held sample's link event found the ring buffer full (record) */
	__u64 target_map_full;  /* a followed child did not fit in `targets` (record --max-targets) */
	__u64 other_fn_full;    /* an OTHER period's function did not fit in `wall_other_fns` */
};

/* Value of `socks`, keyed by struct sock address: NET_RX time waiting for the socket's reader. */
struct pkprof_sock {
	__u64 pending_ns;
	__u64 first_ns; /* when pending_ns became non-zero (for expiry) */
	__u64 last_ns;  /* last credit or consumption */
	__u64 skbs;     /* skbs whose processing is in pending_ns */
	__u32 sampled;  /* record: stack samples are held on this socket (see pkprof_link) */
	__u32 pad;
};

/* Value of `skb_held`: receive work done on one CPU for an skb that continues on another. */
struct pkprof_held {
	__u64 ns;
	__u64 since_ns;
	__u64 sampled; /* record: stack samples are held on this skb (see pkprof_link) */
};

/* Value of `reqs` (block requests) and `works` (work items): who the work is for. */
struct pkprof_owner {
	__u32 tid; /* 0: no beneficiary (KERNEL) */
	__u32 pad;
	__u64 since_ns;
};

/*
 * The server chain (chains/server.bpf.h, docs/design.md "Server work billed to its clients"):
 * `srv_writers` maps a channel (a pipe, the receiving end of a unix socket, a loopback TCP
 * connection's direction) to the client whose data was queued last; `srv_reads` holds the channel
 * a thread is reading in the syscall it is in; `srv_parked` the client of a marked thread that was
 * preempted (its mark resumes when it runs again).
 */
enum pkprof_srv_channel {
	PKPROF_SRV_PIPE = 1,
	PKPROF_SRV_UNIX = 2,
	PKPROF_SRV_TCP4 = 3,
};

struct pkprof_srv_key {
	__u64 a; /* pipe: struct pipe_inode_info *; unix: receiving struct sock *; tcp4: src << 32 | dst */
	__u64 b; /* channel kind (enum pkprof_srv_channel) | tcp4: src port << 16 | dst port << 32 */
};

struct pkprof_srv_mark {
	__u32 tid;      /* the client thread (the beneficiary of the writer) */
	__u32 pid;      /* its process */
	__u64 since_ns; /* when the data was queued or the read began (for the sweep) */
};

struct pkprof_srv_read {
	struct pkprof_srv_key key;
	__u64 since_ns;
	/* At the read's entry: the CPU's switch count and the thread's task time in this run, so a
	 * read that did not block bills its own time to the client it reads from. */
	__u64 switches;
	__u64 run_ns;
	__u32 cpu;
	__u32 pad;
};

/* Value of the per-CPU `cpus` array (one entry, one copy per CPU). */
struct pkprof_cpu {
	/* Registers: what this CPU is doing now. */
	__u64 last_ns; /* ktime of the last charge; 0 until the first event */
	__u32 cur_tid; /* current task, 0 = idle */
	__u32 cur_pid;
	__u32 depth; /* index of the innermost open context in ctx/vec */
	enum pkprof_mode mode; /* of the current task (syscall mode) */
	__u32 pending_irq; /* `pending` holds interrupt time (so the flush must copy it) */
	__u32 pad0;
	__u8 ctx[PKPROF_CTX_DEPTH];
	__u8 vec[PKPROF_CTX_DEPTH];
	__u64 sys_enter_ns;
	__u32 sys_nr;
	__u32 overflow; /* nesting levels swallowed after a ctx_overflow */
	/* Charged to cur_tid but not yet flushed into its `threads` entry (flushed at every switch). */
	struct pkprof_acc pending;
	/* Totals of this CPU since attach; they add up to the time since the CPU's first event. */
	__u64 idle_ns;
	__u64 task_ns;
	__u64 hardirq_ns;
	__u64 softirq_ns[PKPROF_NR_SOFTIRQS];
	__u64 switches;
	/* The wall chain's register (chains/wall.bpf.h): held here, in the CPU entry the switch has
	 * in hand, rather than in a map of its own looked up twice a switch (about 6 ns a switch;
	 * docs/design.md "Wall time"). After `switches`, which the switch counts after writing
	 * it: a reader's copy (in address order) that meets the register mid-write has the old
	 * count, and its copy after the walk tells (reader.rs retries).
	 */
	struct pkprof_wall_cpu wall;
	/* Served-event register, interrupt context: the open tag. */
	__u32 tag;       /* enum pkprof_tag: PKPROF_TAG(chain, n), or NONE */
	__u32 tag_depth; /* context depth the tag belongs to */
	__u64 tag_key;   /* the chain's key (a tid, a socket, an skb) */
	__u64 tag_ns;    /* interrupt time accumulated for the open tag */
	__u32 tag_aux;   /* the open tag's chain's own use (net_rx: the segment has its skb) */
	__u32 tag_sampled; /* record: stack samples are held on the open tag's segment */
	__u64 tag_seq;     /* segment number of the open tag (record's hold key, with the CPU) */
	/* Served-event register, task context: the current task (task_tag_worker) runs work for
	 * thread task_tag_tid (a kworker's work item); its task time also accumulates here. */
	__u32 task_tag_tid;    /* beneficiary thread, 0 = none */
	__u32 task_tag_worker; /* the thread running the work */
	__u64 task_tag_ns;     /* task time of the work not yet credited */
	/* Interrupt time that served no known thread: untagged, tags without owner, expired, orphans. */
	__u64 kernel_irq_ns;
	/* Task-tag time (work items) whose beneficiary was gone when credited. */
	__u64 orphan_wq_ns;
	/* Socket time nobody read within the expiry time (also in KERNEL), and how many times. */
	__u64 expired_ns;
	__u64 expired_tags;
	/* Task time of threads whose switch-out was never reported: who ran is unknown. */
	__u64 missed_ns;
	/* Own task time of threads without a `threads` entry (table full, counted in
	 * lost.thread_map_full): user threads (OTHER; the part of record's targets also in
	 * untracked_target_ns) and kernel threads (KERNEL). */
	__u64 untracked_ns;
	__u64 untracked_target_ns;
	__u64 untracked_kernel_ns;
	/* Sum of (scheduler's slice - ours) moved between threads and idle (see follow_scheduler_slice). */
	__s64 slice_skew_ns;
	/* cur_tid's se.sum_exec_runtime when it was switched in (+1; 0 = unknown). */
	__u64 sum_at_in;
	/* cur_tid's context switches (nvcsw + nivcsw) after that switch-in (0 = unknown): more at
	 * its switch-out means it left and came back unreported (see follow_scheduler_slice). */
	__u64 csw_at_in;
	/* Task time of threads that ran unreported, found at their next reported switch-out and
	 * billed to them there (taken back from missed_ns, of any CPU; see recover_unseen). */
	__u64 recovered_ns;
	/* This CPU's steal time (rq->prev_steal_time_rq) at that switch-in (+1; 0 = unknown). */
	__u64 steal_at_in;
	/* During a switch: the state prev leaves in, 0 when it stays runnable (preempted). */
	__u32 switch_state;
	__u32 pad_switch;
	struct pkprof_lost lost;
	/* The chain (enum pkprof_chain) that opened the task tag: its hooks credit it. */
	__u32 task_tag_chain;
	__u32 pad_task_tag;
};

/* ---- pkprof record: stack samples and the events that label held ones ---- */

#define PKPROF_MAX_STACK 127

/* Ring buffer record kinds (first field of every record). */
enum pkprof_event_kind {
	PKPROF_EV_NONE = 0,
	PKPROF_EV_SAMPLE = 1,
	PKPROF_EV_LINK = 2,
	PKPROF_EV_OFFCPU = 3, /* struct pkprof_offcpu (record --off-cpu) */
	PKPROF_EV_EXEC = 4,   /* struct pkprof_exec */
};

/* Where the sampled CPU was (the interrupted context, not the sampling timer's interrupt). */
enum pkprof_sample_ctx {
	PKPROF_SCTX_USER = 0,
	PKPROF_SCTX_KERNEL = 1,  /* kernel mode in task context (syscall or exception) */
	PKPROF_SCTX_KWORKER = 2, /* a kworker running an item queued by the served thread */
	PKPROF_SCTX_HARDIRQ = 3,
	PKPROF_SCTX_SOFTIRQ = 4,
	PKPROF_SCTX_IDLE = 5,
};

/* Bits of pkprof_sample.flags and pkprof_link.flags. */
enum pkprof_sample_flags {
	PKPROF_SAMPLE_KTHREAD = 1, /* the served thread is a kernel thread */
	PKPROF_SAMPLE_TARGET = 2,  /* the served process is in `targets` (record -- CMD / -p) */
};

/* Bits of pkprof_sample.stack_flags and pkprof_sc_site.stack_flags. */
enum pkprof_stack_flags {
	/* The user stack's walk stopped where the frame chain went wrong. */
	PKPROF_STACK_USER_TRUNCATED = 1,
	/* The copy of the user stack's bytes stopped at an unreadable page (the end of the stack
	 * mapping, or a stack pointer into unmapped memory) before the window was full. */
	PKPROF_STACK_BYTES_SHORT = 2,
};

/*
 * User stack bytes copied after each sample, for unwinding from the binaries' unwind tables in
 * user space (docs/design.md, "User stacks"): `record --stack-bytes`, a multiple of 8 up to the
 * maximum (the per-CPU scratch buffer's size).
 */
enum pkprof_stack_bytes {
	PKPROF_DEFAULT_STACK_BYTES = 16384,
	PKPROF_MAX_STACK_BYTES = 65536,
};

/*
 * Hold keys: a sample whose beneficiary is not known yet (interrupt work under a served-event
 * tag) names what it waits on, as (kind, value); pkprof_link records move it on until it reaches
 * a thread or expires.
 */
enum pkprof_hold {
	PKPROF_HOLD_NONE = 0,
	PKPROF_HOLD_SEGMENT = 1, /* (cpu << 48 | seq): one tag segment on one CPU */
	PKPROF_HOLD_SOCK = 2,    /* a struct sock address */
	PKPROF_HOLD_SKB = 3,     /* an skb handed to another CPU (RPS) */
};

/* A held sample's next step. */
enum pkprof_link_to {
	PKPROF_LINK_NONE = 0,
	PKPROF_LINK_THREAD = 1,  /* attributed: to pid/tid */
	PKPROF_LINK_HOLD = 2,    /* passed on to another hold key (`to`) */
	PKPROF_LINK_KERNEL = 3,  /* nobody: KERNEL */
	PKPROF_LINK_EXPIRED = 4, /* nobody consumed it in time: KERNEL, counted as expired */
};

/*
 * ---- CPython frames (docs/design.md, "Python frames") ----
 * For a process running CPython, the sampling program walks the interpreter's frame chain of the
 * sampled thread with the offsets user space found in the binary (pkprof_py_proc, one per
 * process in `py_procs`), and the sample carries each frame's code object and instruction; user
 * space names them from the process's memory and splices them into the native stack.
 */
#define PKPROF_MAX_PY_FRAMES 128 /* a power of two */
/* Threads searched for the sampled one in the interpreter's thread list. */
#define PKPROF_PY_MAX_THREADS 64

/* How the Python walk of a sample went. */
enum pkprof_py_state {
	PKPROF_PY_NONE = 0,      /* not a Python process (or no user stack taken) */
	PKPROF_PY_OK = 1,        /* the whole chain, up to the thread's first frame */
	PKPROF_PY_NO_THREAD = 2, /* the thread has no Python thread state (yet, or any more) */
	PKPROF_PY_READ_FAULT = 3, /* a frame or thread state could not be read */
	PKPROF_PY_DEPTH = 4,     /* more than PKPROF_MAX_PY_FRAMES frames: the innermost kept */
};

/* Bits of pkprof_py_frame.flags. */
enum pkprof_py_frame_flags {
	/* The first frame of an evaluation loop's run (a `_PyEval_EvalFrameDefault` native frame). */
	PKPROF_PY_FRAME_ENTRY = 1,
};

struct pkprof_py_frame {
	__u64 code;  /* the frame's code object (PyCodeObject *) */
	__u64 instr; /* its instruction pointer (3.11/3.12: the last executed; 3.13: the current) */
	__u32 flags; /* enum pkprof_py_frame_flags bits */
	__u32 pad;
};

/* The Python frames of one sample while it is built (map `py_scratch`, two slots per CPU: one
 * for cpu-clock samples, one for off-CPU samples, which a cpu-clock sample may interrupt). */
struct pkprof_py_frames {
	struct pkprof_py_frame f[PKPROF_MAX_PY_FRAMES];
};

/* Where a process's interpreter is and how to walk it (0 offsets: the field does not exist). */
struct pkprof_py_proc {
	__u64 runtime;                   /* address of _PyRuntime */
	__u32 runtime_interpreters_head; /* _PyRuntimeState.interpreters.head */
	__u32 interp_threads_head;       /* PyInterpreterState.threads.head */
	__u32 tstate_next;
	__u32 tstate_native_thread_id;
	__u32 tstate_cframe;        /* 3.11/3.12: PyThreadState.cframe (0: none, 3.13) */
	__u32 tstate_current_frame; /* in the cframe (3.11/3.12) or the thread state (3.13) */
	__u32 frame_code;
	__u32 frame_previous;
	__u32 frame_instr;
	__u32 frame_owner;
	__u32 frame_is_entry;  /* 3.11: _PyInterpreterFrame.is_entry (0: none) */
	__u32 owned_by_cstack; /* 3.12+: the owner of an entry shim frame (0: none) */
};

/*
 * A process user space had looked at (in `captured`) ran a new image (execve): what it found of
 * the old one (its maps' capture, its interpreter) no longer holds; it looks again at the
 * process's next sample. The kernel side has forgotten the process's Python layout already.
 */
struct pkprof_exec {
	enum pkprof_event_kind kind; /* PKPROF_EV_EXEC */
	__u32 pid;
	__u64 time_ns;
};

/* One stack sample (cpu-clock), labelled with the thread it served. */
struct pkprof_sample {
	enum pkprof_event_kind kind; /* PKPROF_EV_SAMPLE */
	__u32 cpu;
	__u64 time_ns;  /* ktime */
	__u32 cur_pid;  /* current task (the victim in interrupt context) */
	__u32 cur_tid;
	__u32 pid;      /* served thread: known now (0 with hold != 0, or for no one) */
	__u32 tid;
	__u64 cgroup_id; /* of the served thread */
	__u64 hold;     /* with hold_kind != NONE: the served thread comes later (pkprof_link) */
	enum pkprof_hold hold_kind;
	enum pkprof_sample_ctx ctx;
	__u32 vec;      /* softirq vector */
	__u32 stack_flags; /* enum pkprof_stack_flags bits */
	__s64 orig_ax;  /* task context, kernel mode: the task's saved orig_ax (syscall nr if >= 0) */
	__u32 flags;    /* enum pkprof_sample_flags bits */
	__s32 kstack_len; /* bytes of kstack filled, or a negative errno */
	__s32 ustack_len; /* bytes of ustack filled, or a negative errno (0: not taken) */
	/* Bytes of the user stack, copied from user_sp upwards, that follow the record. */
	__u32 ustack_bytes_len;
	/* ns the program took to build this record (before it went to the ring). */
	__u32 build_ns;
	char comm[PKPROF_COMM_LEN]; /* served thread's command when known, else the current one */
	/* The user registers the stack is unwound from (0 when no user stack was taken). */
	__u64 user_ip;
	__u64 user_sp;
	__u64 user_bp;
	__u64 kstack[PKPROF_MAX_STACK]; /* leaf first */
	__u64 ustack[PKPROF_MAX_STACK]; /* leaf first: the frame-pointer walk */
	/*
	 * CPython frames of the sampled thread (record/python.bpf.h), leaf first: py_len
	 * struct pkprof_py_frame follow the record (the one that holds this sample: pkprof_sample
	 * or pkprof_offcpu), before its user stack bytes, so that a native sample carries none.
	 */
	__u32 py_len;   /* frames that follow the record (at most PKPROF_MAX_PY_FRAMES) */
	__u32 py_state; /* enum pkprof_py_state */
};

/* A sample and its stack bytes, as built in the scratch buffer (its Python frames are built in
 * `py_scratch`); the ring gets the record, then its Python frames, then its stack bytes. */
struct pkprof_sample_buf {
	struct pkprof_sample s;
	/* One page more than the maximum: each page-sized copy starts below the maximum. */
	__u8 stack[PKPROF_MAX_STACK_BYTES + 4096];
};

/* The fate of held samples: `from` (a hold key) goes to a thread, another key, or KERNEL. */
struct pkprof_link {
	enum pkprof_event_kind kind; /* PKPROF_EV_LINK */
	enum pkprof_link_to to_kind;
	__u64 time_ns;
	enum pkprof_hold from_kind;
	enum pkprof_hold to_hold_kind; /* PKPROF_LINK_HOLD: the kind of `to` */
	__u64 from;
	__u64 to;   /* PKPROF_LINK_HOLD: the next hold key */
	__u32 pid;  /* PKPROF_LINK_THREAD */
	__u32 tid;
	__u64 cgroup_id;
	__u32 flags; /* enum pkprof_sample_flags bits of the thread */
	__u32 pad;
	char comm[PKPROF_COMM_LEN];
};

/* ---- pkprof record --off-cpu: off-CPU samples, their wakers and wake chains ---- */

enum pkprof_offcpu_defaults {
	/* Wake-chain entries a record can hold (record --wake-chain: at most this). */
	PKPROF_MAX_WAKE_CHAIN = 8,
	PKPROF_DEFAULT_WAKE_CHAIN = 4,
	/* Off-CPU sampling period (record --off-cpu-period; 0: every block). */
	PKPROF_DEFAULT_OFFCPU_PERIOD_US = 10000,
	/* Chosen samples a second per CPU above which the period is raised (record
	 * --off-cpu-max-rate; 0: never raised). */
	PKPROF_DEFAULT_OFFCPU_MAX_RATE = 200,
};

/*
 * Where record --off-cpu takes a chosen block's user stack, in the blocked thread's own context as
 * its call returns (record/offcpu.bpf.h); the loader picks the first the kernel offers.
 */
enum pkprof_offcpu_ustack {
	/* A task work queued for the chosen thread alone (bpf_task_work_schedule_resume, Linux >= 6.18,
	 * where the verifier accepts it from a tracepoint program). */
	PKPROF_OFFCPU_USTACK_TASK_WORK = 0,
	/* rseq:rseq_update, which runs as a thread with an rseq area (glibc >= 2.35 registers one
	 * for every thread) returns to user mode after each switch-out: about one run per switch. */
	PKPROF_OFFCPU_USTACK_RSEQ = 1,
	/* raw_syscalls:sys_exit: a run at every syscall exit of the system. */
	PKPROF_OFFCPU_USTACK_SYS_EXIT = 2,
};

/* Bits of pkprof_waker.flags. */
enum pkprof_waker_flags {
	/* The waker had itself been woken and not blocked since: blocked_ns and reason are the
	 * block it was woken from (the next link of the chain). */
	PKPROF_WAKER_WAS_BLOCKED = 1,
	PKPROF_WAKER_KTHREAD = 2,
};

/*
 * Who woke a thread (at sched_waking): the task that was current, or the interrupt it ran in
 * (ctx SOFTIRQ with vec, HARDIRQ; pid/tid are then the interrupted task's and say nothing).
 */
struct pkprof_waker {
	__u32 pid;
	__u32 tid;
	enum pkprof_sample_ctx ctx;
	__u32 vec;
	__u32 flags;  /* enum pkprof_waker_flags bits */
	__u32 reason; /* PKPROF_WAKER_WAS_BLOCKED: the waker's own block (enum pkprof_block_reason) */
	__u64 blocked_ns;
	char comm[PKPROF_COMM_LEN];
};

/*
 * One off-CPU sample: a thread blocked (switched out in a sleeping state) and ran again. `s` holds
 * the blocked thread's labels and stacks as a cpu-clock sample would (kind PKPROF_EV_OFFCPU,
 * time_ns its switch-in): the kernel stack it blocked in, and its user stack and Python frames,
 * taken in its own context when the blocking call returns (s.py_len Python frames, then
 * s.ustack_bytes_len stack bytes follow this record).
 * chain[0] is the waker, chain[i + 1] the waker of chain[i] when chain[i] was woken just before.
 */
struct pkprof_offcpu {
	struct pkprof_sample s;
	__u64 off_ns;     /* switch-out (ktime) */
	__u64 offcpu_ns;  /* switch-out to switch-in */
	__u64 blocked_ns; /* switch-out to wakeup (0: no wakeup seen) */
	__u64 weight_ns;  /* the off-CPU time this sample stands for (sampling scaled) */
	__u32 reason;     /* enum pkprof_block_reason */
	__u32 nr_chain;   /* entries of chain[] filled */
	__s32 waker_kstack_len; /* bytes of waker_kstack (negative: an errno; 0: not taken) */
	__s32 waker_ustack_len; /* bytes of waker_ustack (frame-pointer walk) */
	struct pkprof_waker chain[PKPROF_MAX_WAKE_CHAIN];
	__u64 waker_kstack[PKPROF_MAX_STACK]; /* leaf first */
	__u64 waker_ustack[PKPROF_MAX_STACK];
};

struct pkprof_offcpu_buf {
	struct pkprof_offcpu o;
	__u8 stack[PKPROF_MAX_STACK_BYTES + 4096];
};

/* Per-CPU counts of the off-CPU side (map `offcpu_stats`), summed by user space. */
struct pkprof_offcpu_stats {
	__u64 blocks;          /* blocking switch-outs of sampled threads */
	__u64 chosen;          /* blocks chosen as samples */
	__u64 emitted;         /* samples written to the ring */
	__u64 ring_full;       /* samples lost: the ring buffer was full */
	__u64 no_storage;      /* blocks not followed or chosen samples lost: no task storage could be had */
	__u64 exited_pending;  /* samples whose thread exited before its user stack was taken
				* (written without it) */
	__u64 chain_truncated; /* wake chains cut at the depth limit */
	__u64 period_raised;   /* doublings of a CPU's sampling period at the rate cap */
	__u64 task_work_ns;    /* run time of the task works that took user stacks (BPF stats
				* do not see them: they are not a program's runs) */
	__u64 no_rseq;         /* samples written without a user stack: taken at rseq's return to
				* user mode (PKPROF_OFFCPU_USTACK_RSEQ), and the thread has no rseq area */
};

/* Key of `func_counts` (record --count FUNC@BINARY): probe index (attach cookie) and process. */
struct pkprof_func_key {
	__u32 pid;
	__u32 probe;
};


/*
 * pkprof syscalls (syscall_graph.bpf.c): per-thread transition counts.
 *
 * A node is a syscall, optionally split by one fd and one size argument (--args), packed in a u64:
 * bits 0-15 the syscall number, bit 16 "has fd", bit 17 "has size class", bits 24-31 the size
 * class (0: size 0, k: size in [2^(k-1), 2^k)), bits 32-63 the fd (low 32 bits).
 */
enum pkprof_sc_node {
	PKPROF_SC_NODE_FD = 1 << 16,
	PKPROF_SC_NODE_SIZE = 1 << 17,
};
/*
 * How a node packs (syscall_graph.bpf.c, unpacked by the Rust side with the same values): the
 * syscall number in the low 16 bits, the size class in bits 24-31, the fd in the high 32 bits.
 */
enum pkprof_sc_node_layout {
	PKPROF_SC_NODE_NR_MASK = 0xffff,
	PKPROF_SC_NODE_SIZE_SHIFT = 24,
	PKPROF_SC_NODE_FD_SHIFT = 32,
};
/* A syscall number no call has (syscall_regs.bpf.h: a call this architecture lacks). */
enum pkprof_syscall_nr {
	PKPROF_NO_SYSCALL = 0xffff,
};
#define PKPROF_SC_NONE 0xffffffffffffffffULL /* `from` of a thread's first call (u64::MAX) */
enum pkprof_sc_limits {
	PKPROF_SC_MAX_NR = 512, /* syscall numbers with an argument spec */
};

/*
 * Key of `sc_edges`: syscall `to` returned right after `from`, which returned right after `before`,
 * on thread tid of process pid. Second-order, so that the frequency of a 3-call sequence is exact
 * rather than bounded by its two edges.
 */
struct pkprof_sc_edge_key {
	__u32 pid;
	__u32 tid;
	__u64 before; /* PKPROF_SC_NONE when `from` was the thread's first call (or is NONE) */
	__u64 from;
	__u64 to;
};

/* Value of `sc_edges`: counted when `to` returns, as strace -c does (exit, exit_group never do). */
struct pkprof_sc_edge {
	__u64 count;
	__u64 errors;   /* returned a negative value */
	__u64 total_ns; /* time inside `to`, entry to exit */
};

/* Which arguments split a syscall's node (--args): argument index + 1, 0 for none. */
struct pkprof_sc_argspec {
	__u8 fd_arg;
	__u8 size_arg;
};

/* Value of `sc_comms`: the thread's process and command, at its first traced call and at exec. */
struct pkprof_sc_comm {
	__u32 pid;
	__u32 pad;
	char comm[PKPROF_COMM_LEN];
};

/*
 * Ring records of `sc_events` (first field: kind): a process to capture for symbolization, or a
 * sampled call site to unwind while the process lives. User space reads them as they come.
 */
enum pkprof_sc_event_kind {
	PKPROF_SC_NEW_THREAD = 1, /* a thread's first traced call */
	PKPROF_SC_EXEC = 2,       /* a traced process has a new image */
	PKPROF_SC_SITE = 3,       /* struct pkprof_sc_site */
};

struct pkprof_sc_event {
	enum pkprof_sc_event_kind kind;
	__u32 pid;
	__u32 tid;
	__u32 pad;
};

/*
 * A sampled call (every stack_every-th call of a thread, and each transition's first), taken at
 * its sys_exit: the transition, the user registers saved at the syscall's entry (ip just after the
 * syscall instruction), the frame-pointer walk, and `stack_bytes_len` bytes of the user stack from
 * user_sp upwards, which follow the record; user space unwinds them at once and counts
 * (transition, stack) as the call site (docs/design.md, "User stacks").
 */
struct pkprof_sc_site {
	enum pkprof_sc_event_kind kind; /* PKPROF_SC_SITE */
	__u32 stack_flags; /* enum pkprof_stack_flags bits */
	struct pkprof_sc_edge_key edge;
	__u64 user_ip;
	__u64 user_sp;
	__u64 user_bp;
	/*
	 * The first of the top words of the user stack that looks like a return address (the byte 5
	 * before it is a rel32 call, 0xe8), else 0: the caller of a syscall wrapper without a frame
	 * pointer, which a frame-pointer walk skips (it goes from the wrapper to its caller's caller).
	 * Only the frame-pointer walk needs it.
	 */
	__u64 leaf_return;
	__u32 ustack_len;      /* bytes of ustack filled */
	__u32 stack_bytes_len; /* bytes of user stack after the record */
	__u64 ustack[PKPROF_MAX_STACK]; /* leaf first: the frame-pointer walk, [0] = user_ip */
};

/* A call site and its stack bytes, as built in the scratch buffer and emitted to the ring. */
struct pkprof_sc_site_buf {
	struct pkprof_sc_site s;
	/* One page more than the maximum: each page-sized copy starts below the maximum. */
	__u8 stack[PKPROF_MAX_STACK_BYTES + 4096];
};

/* Losses, one slot per CPU in `sc_lost`. */
struct pkprof_sc_lost {
	__u64 edges_full;   /* a new transition did not fit in sc_edges (raise --max-transitions) */
	__u64 sites_ring_full; /* a sampled call site found sc_events full */
	__u64 threads_full; /* no per-thread state could be allocated */
	__u64 targets_full; /* a traced process's child did not fit in sc_targets */
	__u64 events_lost;  /* sc_events was full: a process may not be symbolized */
};

#endif /* PKPROF_H */
