/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Copying a window of a user stack for unwinding in user space (docs/design.md, "User stacks"),
 * and the frame-pointer walk whose deeper frames are spliced in where the window ends, shared by
 * record's sampler and the syscall graph's call sites. `dst` must hold
 * PKPROF_MAX_STACK_BYTES + 4096 bytes (the `stack` of struct pkprof_sample_buf or
 * pkprof_sc_site_buf).
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

/*
 * The user stack by frame pointers, leaf first, as the kernel's perf_callchain_user walks it (the
 * interrupted ip, then the return address above each saved rbp), but not into a cycle: a saved
 * frame pointer that does not increase yet still points into the live stack (at or above sp) is a
 * frame chain gone wrong, where the kernel's walk repeats one frame up to its depth limit; the
 * walk stops there and marks the stack truncated, as it does at the depth limit. The other ends
 * are the ordinary ends of a frame chain and unmarked, as in the kernel's walk: a zero frame
 * pointer (_start and clone clear rbp), or one that cannot be a frame (below sp, misaligned,
 * unreadable: the caller is code built without frame pointers, such as glibc's
 * __libc_start_call_main, which leaves rbp = 1 for main). Return addresses outside every
 * executable mapping (data read as an address) are cut in user space, which has the maps.
 * Fills `ustack` (PKPROF_MAX_STACK entries) and returns the bytes of it filled.
 */
static __always_inline __s32 walk_user_stack(__u64 *ustack, __u64 ip, __u64 fp, __u64 sp,
					      __u32 *stack_flags)
{
	__u32 n = 1, i;

	ustack[0] = ip;
	for (i = 1; i < PKPROF_MAX_STACK; i++) {
		__u64 frame[2]; /* saved rbp, return address */

		if (!fp || fp < sp || (fp & 7) ||
		    bpf_probe_read_user(frame, sizeof(frame), (void *)fp) || !frame[1])
			return n * sizeof(__u64);
		ustack[i] = frame[1];
		n = i + 1;
		if (frame[0] && frame[0] <= fp && frame[0] >= sp)
			break;
		fp = frame[0];
	}
	/* At the depth limit: a next frame pointer that cannot be a frame ends the chain there. */
	if (i == PKPROF_MAX_STACK && (!fp || fp < sp || (fp & 7)))
		return n * sizeof(__u64);
	*stack_flags |= PKPROF_STACK_USER_TRUNCATED;
	return n * sizeof(__u64);
}

#endif /* PKPROF_USER_STACK_BPF_H */
