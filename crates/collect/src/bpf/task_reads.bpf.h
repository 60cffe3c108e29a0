/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A task's open files, saved user registers and name, for the hooks that look at them at every context
 * switch or system call (block_reason.bpf.h, chains/server.bpf.h, chains/wall.bpf.h,
 * record/offcpu.bpf.h). Direct loads through kernel BTF, no helper call: a helper's call and return
 * cost 10-25 ns on this VM (its return-thunk mitigation), and replacing the descriptor slot's
 * bpf_probe_read_kernel took 28 of the wall chain's 68 ns per switch (bench/README.md, "Levers
 * measured").
 */
#ifndef PKPROF_TASK_READS_BPF_H
#define PKPROF_TASK_READS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/*
 * A descriptor table's slot (`struct file *`) read as the first member of a kernel struct that
 * begins with one: the slot's address is a run-time value, which a direct load takes only from a
 * pointer cast to a type (bpf_core_cast, free at run time), never as a variable offset.
 */
struct kiocb___fd_slot {
	struct file *ki_filp;
} __attribute__((preserve_access_index));

/* The file open as descriptor fd of task t (NULL: none, or no such descriptor). Loads that fault
 * read 0 (the verifier's probe-memory loads), so a table changing under us gives NULL or some
 * struct file (files are SLAB_TYPESAFE_BY_RCU: one reused since), never a fault. */
static __always_inline struct file *task_fd_file(struct task_struct *t, long fd)
{
	struct files_struct *files = t->files;
	struct fdtable *fdt;
	struct kiocb___fd_slot *slot;

	if (!files || fd < 0)
		return NULL;
	fdt = files->fdt;
	if (!fdt || (unsigned long)fd >= fdt->max_fds)
		return NULL;
	slot = bpf_core_cast((void *)&fdt->fd[fd], struct kiocb___fd_slot);
	return slot->ki_filp;
}

/*
 * Where a task's saved user registers lie in its kernel stack, from its base (task->stack):
 * THREAD_SIZE - TOP_OF_KERNEL_STACK_PADDING - sizeof(struct pt_regs), a constant of the running
 * kernel's build (KASAN, x86's FRED), so it is learnt from the helper's first answer rather than
 * assumed. 0: not yet learnt. Published once, by compare-and-swap, after a sanity check.
 */
__u64 task_regs_offset = 0;

/* The helper's answer turned into a number: a privileged program may store a pointer in a map
 * value and read it back as one; per CPU, so that CPUs learning at once never mix their tasks. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} task_regs_scratch SEC(".maps");

/* bpf_task_pt_regs(t) without the helper's call once the offset is learnt. */
static __always_inline struct pt_regs *task_user_regs(struct task_struct *t)
{
	__u64 stack = (__u64)t->stack, off;
	struct pt_regs *regs;
	__u32 zero = 0;
	__u64 *seen;

	if (task_regs_offset)
		return bpf_core_cast((void *)(stack + task_regs_offset), struct pt_regs);
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	seen = bpf_map_lookup_elem(&task_regs_scratch, &zero);
	if (!seen || !stack)
		return regs;
	*seen = (__u64)regs;
	/* Read back as a number (volatile: not the pointer the compiler still holds). */
	off = *(volatile __u64 *)seen;
	/* Inside the stack (at most 64 KiB here), 8-byte aligned: else not learnt. */
	if (off <= stack)
		return regs;
	off -= stack;
	if (off < 65536 && !(off & 7))
		__sync_val_compare_and_swap(&task_regs_offset, 0, off);
	return regs;
}

/* Copies t's comm (16 bytes, NUL-terminated by the kernel) to dst, 8-byte aligned: two direct
 * loads at the field's relocated offset instead of bpf_probe_read_kernel's call (the waker of every
 * wakeup of a followed thread). Not through a flavour struct of two words: CO-RE would shrink
 * each load to the target's element size (one char). */
static __always_inline void task_comm_copy(struct task_struct *t, void *dst)
{
	const __u64 *src = (const void *)t + bpf_core_field_offset(struct task_struct, comm);
	__u64 *d = dst;

	d[0] = src[0];
	d[1] = src[1];
}

#endif /* PKPROF_TASK_READS_BPF_H */
