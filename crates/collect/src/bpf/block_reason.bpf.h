/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The block-reason classifier (docs/design.md, "Wall time"): why a thread leaving its CPU waits,
 * as an enum pkprof_block_reason. Shared by the wall chain (chains/wall.bpf.h) and the off-CPU
 * samples of `record --off-cpu`.
 *
 * Called in the sched_switch handler while prev is still current, with the state the scheduler
 * reports for it (0 when it stays runnable: preempted, or a signal cancelled its sleep). The order
 * of the tests is the order of certainty:
 *   1. a runnable state is RUNNABLE; a state that is no sleep (stopped, traced, dead) is OTHER;
 *   2. the kernel's own I/O-wait mark (task->in_iowait: io_schedule, folio and buffer waits,
 *      block-layer waits) is IO;
 *   3. a user thread blocked inside a system call is classified by the call (futex: LOCK, sleeps:
 *      SLEEP, poll/select/epoll: POLL) and, for the reads, writes, accepts and connects, by what
 *      its file descriptor is (socket of AF_UNIX or a FIFO/pipe: IPC, another socket: NET, a
 *      regular file or block device: IO);
 *   4. everything else (kernel threads, page faults, other calls, D-state sleeps on kernel locks)
 *      is OTHER.
 * Syscall numbers are x86_64's (64-bit tasks); on another architecture step 3 is skipped.
 */
#ifndef PKPROF_BLOCK_REASON_BPF_H
#define PKPROF_BLOCK_REASON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "pkprof.h"
#include "task_reads.bpf.h"

/* include/linux/sched.h (macros, so not in vmlinux.h). */
#define PKPROF_TASK_INTERRUPTIBLE 0x0001
#define PKPROF_TASK_UNINTERRUPTIBLE 0x0002
#ifndef PF_KTHREAD
#define PF_KTHREAD 0x00200000
#endif
/* include/uapi/linux/stat.h */
#define PKPROF_S_IFMT 00170000
#define PKPROF_S_IFSOCK 0140000
#define PKPROF_S_IFREG 0100000
#define PKPROF_S_IFBLK 0060000
#define PKPROF_S_IFIFO 0010000
/* include/linux/socket.h */
#define PKPROF_AF_UNIX 1

/* What file descriptor `fd` of task t is, as a reason for waiting on it (direct loads only). */
static __always_inline enum pkprof_block_reason fd_block_reason(struct task_struct *t, long fd)
{
	struct file *f = task_fd_file(t, fd);
	unsigned int mode;

	if (!f)
		return PKPROF_BLOCK_OTHER;
	mode = f->f_inode->i_mode & PKPROF_S_IFMT;
	if (mode == PKPROF_S_IFIFO)
		return PKPROF_BLOCK_IPC;
	if (mode == PKPROF_S_IFREG || mode == PKPROF_S_IFBLK)
		return PKPROF_BLOCK_IO;
	if (mode == PKPROF_S_IFSOCK) {
		struct socket *sock = bpf_core_cast(f->private_data, struct socket);

		return sock->sk->__sk_common.skc_family == PKPROF_AF_UNIX ? PKPROF_BLOCK_IPC :
									      PKPROF_BLOCK_NET;
	}
	return PKPROF_BLOCK_OTHER;
}

/* The reason of a user thread blocked in system call nr whose first argument is arg0. */
static __always_inline enum pkprof_block_reason syscall_block_reason(struct task_struct *t, long nr,
								     long arg0)
{
	switch (nr) {
	case 202: /* futex */
	case 449: /* futex_waitv */
	case 455: /* futex_wait */
		return PKPROF_BLOCK_LOCK;
	case 34:  /* pause */
	case 35:  /* nanosleep */
	case 230: /* clock_nanosleep */
		return PKPROF_BLOCK_SLEEP;
	case 7:   /* poll */
	case 23:  /* select */
	case 232: /* epoll_wait */
	case 270: /* pselect6 */
	case 271: /* ppoll */
	case 281: /* epoll_pwait */
	case 441: /* epoll_pwait2 */
		return PKPROF_BLOCK_POLL;
	case 0:   /* read */
	case 1:   /* write */
	case 17:  /* pread64 */
	case 18:  /* pwrite64 */
	case 19:  /* readv */
	case 20:  /* writev */
	case 42:  /* connect */
	case 43:  /* accept */
	case 44:  /* sendto */
	case 45:  /* recvfrom */
	case 46:  /* sendmsg */
	case 47:  /* recvmsg */
	case 288: /* accept4 */
	case 295: /* preadv */
	case 296: /* pwritev */
	case 299: /* recvmmsg */
	case 307: /* sendmmsg */
	case 327: /* preadv2 */
	case 328: /* pwritev2 */
		return fd_block_reason(t, arg0);
	}
	return PKPROF_BLOCK_OTHER;
}

static __always_inline enum pkprof_block_reason block_reason(struct task_struct *prev, long prev_state)
{
	if (!prev_state)
		return PKPROF_BLOCK_RUNNABLE;
	if (!(prev_state & (PKPROF_TASK_INTERRUPTIBLE | PKPROF_TASK_UNINTERRUPTIBLE)))
		return PKPROF_BLOCK_OTHER; /* stopped, traced, dead */
	if (BPF_CORE_READ_BITFIELD(prev, in_iowait))
		return PKPROF_BLOCK_IO;
	if (prev->flags & PF_KTHREAD)
		return PKPROF_BLOCK_OTHER;
#if defined(__TARGET_ARCH_x86)
	{
		struct pt_regs *regs = task_user_regs(prev);
		long nr = regs->orig_ax;

		if (nr >= 0)
			return syscall_block_reason(prev, nr, regs->di);
	}
#endif
	return PKPROF_BLOCK_OTHER;
}

#endif /* PKPROF_BLOCK_REASON_BPF_H */
