/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The number of the syscall returning, read at sys_exit from the registers saved at entry, for
 * the accounting (cpu_account) and the syscall graph (syscall_graph) alike. Each object sets its
 * `rt_sigreturn_nr` before load: rt_sigreturn restores the interrupted context, whose saved number
 * reads -1.
 */
#ifndef PKPROF_SYSCALL_REGS_BPF_H
#define PKPROF_SYSCALL_REGS_BPF_H

const volatile __u32 rt_sigreturn_nr = 0xffff;

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

#endif /* PKPROF_SYSCALL_REGS_BPF_H */
