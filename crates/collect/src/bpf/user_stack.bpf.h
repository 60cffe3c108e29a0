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

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
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
 * Frames inside the `copied` bytes of `copy` (the stack's bytes from sp up, copy_user_stack) are
 * read from it, which costs a load instead of a user read. Fills `ustack` (PKPROF_MAX_STACK
 * entries) and returns the bytes of it filled.
 */

/* The walk's state across bpf_loop steps (a plain loop of 126 steps, with its two read paths, is
 * more than the verifier's budget in the sampling program). */
struct fp_walk {
	__u64 *ustack;
	const __u8 *copy;
	__u64 fp;
	__u64 sp;
	__u32 copied;
	__u32 n;      /* addresses in ustack */
	__u32 ended;  /* the chain ended normally */
	__u32 cycled; /* a frame pointer did not increase */
};

static long fp_step(__u64 index, void *ctx)
{
	struct fp_walk *w = ctx;
	__u64 frame[2]; /* saved rbp, return address */
	__u64 fp = w->fp, sp = w->sp, off = fp - sp;
	__u32 i = index + 1;

	if (i >= PKPROF_MAX_STACK || !fp || fp < sp || (fp & 7)) {
		w->ended = i < PKPROF_MAX_STACK;
		return 1;
	}
	if (off + sizeof(frame) <= w->copied && off < PKPROF_MAX_STACK_BYTES) {
		__builtin_memcpy(frame, w->copy + off, sizeof(frame));
	} else if (bpf_probe_read_user(frame, sizeof(frame), (void *)fp)) {
		w->ended = 1;
		return 1;
	}
	if (!frame[1]) {
		w->ended = 1;
		return 1;
	}
	w->ustack[i] = frame[1];
	w->n = i + 1;
	if (frame[0] && frame[0] <= fp && frame[0] >= sp) {
		w->cycled = 1;
		return 1;
	}
	w->fp = frame[0];
	return 0;
}

static __always_inline __s32 walk_user_stack(__u64 *ustack, const __u8 *copy, __u32 copied,
					      __u64 ip, __u64 fp, __u64 sp, __u32 *stack_flags)
{
	struct fp_walk w = {
		.ustack = ustack, .copy = copy, .fp = fp, .sp = sp, .copied = copied, .n = 1,
	};

	ustack[0] = ip;
	bpf_loop(PKPROF_MAX_STACK - 1, fp_step, &w, 0);
	if (w.ended)
		return w.n * sizeof(__u64);
	/* At the depth limit: a next frame pointer that cannot be a frame ends the chain there. */
	if (!w.cycled && (!w.fp || w.fp < sp || (w.fp & 7)))
		return w.n * sizeof(__u64);
	*stack_flags |= PKPROF_STACK_USER_TRUNCATED;
	return w.n * sizeof(__u64);
}

#endif /* PKPROF_USER_STACK_BPF_H */
