/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a sys_exit is, read from the registers saved at entry, for the accounting (cpu_account)
 * and the syscall graph (syscall_graph) alike: the number of the syscall returning, and whether it
 * is a new task's return from the call that created it, or a successful exec. Each object sets the numbers below before
 * load (PKPROF_NO_SYSCALL: no such call on this architecture): rt_sigreturn restores the interrupted context,
 * whose saved number reads -1.
 */
#ifndef PKPROF_SYSCALL_REGS_BPF_H
#define PKPROF_SYSCALL_REGS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "pkprof.h"

enum pkprof_syscall_nr pkprof_syscall_nr_btf_anchor SEC(".data.btf_anchor");

const volatile __u32 rt_sigreturn_nr = PKPROF_NO_SYSCALL;
const volatile __u32 execve_nr = PKPROF_NO_SYSCALL;
const volatile __u32 execveat_nr = PKPROF_NO_SYSCALL;
const volatile __u32 clone_nr = PKPROF_NO_SYSCALL;
const volatile __u32 clone3_nr = PKPROF_NO_SYSCALL;
const volatile __u32 fork_nr = PKPROF_NO_SYSCALL;
const volatile __u32 vfork_nr = PKPROF_NO_SYSCALL;

static __always_inline __u32 returning_syscall_nr(struct pt_regs *regs)
{
	long nr;

#if defined(__TARGET_ARCH_x86)
	nr = regs->orig_ax;
#elif defined(__TARGET_ARCH_arm64)
	nr = regs->syscallno;
#else
#error "returning_syscall_nr: unsupported architecture"
#endif
	return nr < 0 ? rt_sigreturn_nr : (__u32)nr;
}

/*
 * Whether this sys_exit of call `nr` returning `ret` is a new task (process or thread) leaving
 * through ret_from_fork: it returns from the clone, clone3, fork or vfork that created it without
 * having entered it, with 0, where the caller gets the child's id (> 0) or an error. strace -f
 * counts the call once, in the caller; counted at every sys_exit, it would count twice. The syscall
 * graph, which counts only exits whose entry it saw, never counts these exits anyway.
 */
static __always_inline bool is_fork_child_return(__u32 nr, long ret)
{
	return ret == 0 && (nr == clone_nr || nr == clone3_nr || nr == fork_nr || nr == vfork_nr);
}

/* Whether call `nr` replaces the process's image: returning 0, it is the first call of the new one. */
static __always_inline bool is_execve(__u32 nr)
{
	return nr == execve_nr || nr == execveat_nr;
}

#endif /* PKPROF_SYSCALL_REGS_BPF_H */
