/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Copying a window of a user stack for unwinding in user space (docs/design.md, "User stacks"),
 * shared by record's sampler and the syscall graph's call sites. `dst` must hold
 * PKPROF_MAX_STACK_BYTES + 4096 bytes (struct pkprof_sample_buf's `stack`).
 */
#ifndef PKPROF_USER_STACK_BPF_H
#define PKPROF_USER_STACK_BPF_H

#include "pkprof.h"

/*
 * Copies up to `want` bytes of the user stack from `sp` upwards into `dst`, page by page: one
 * read is all or nothing, and a stack's last page is followed by unmapped memory. Stops at the
 * first page that cannot be read (not resident, or the end of the mapping). Returns the bytes
 * copied and sets PKPROF_STACK_BYTES_SHORT when that is less than asked.
 */
static __noinline __u32 copy_user_stack(__u8 *dst, __u64 sp, __u32 want, __u32 *stack_flags)
{
	__u32 off = 0, i;

	if (want > PKPROF_MAX_STACK_BYTES)
		want = PKPROF_MAX_STACK_BYTES;
	for (i = 0; i < PKPROF_MAX_STACK_BYTES / 4096 + 1 && off < want; i++) {
		__u32 chunk = 4096 - ((sp + off) & 4095);

		if (chunk > want - off)
			chunk = want - off;
		if (off >= PKPROF_MAX_STACK_BYTES || chunk > 4096)
			break;
		if (bpf_probe_read_user(dst + off, chunk, (void *)(sp + off)))
			break;
		off += chunk;
	}
	if (off < want)
		*stack_flags |= PKPROF_STACK_BYTES_SHORT;
	return off;
}

#endif /* PKPROF_USER_STACK_BPF_H */
