/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pkprof record --count FUNC@BINARY: exact call counts of user functions through uprobes (gprof's
 * mcount without recompiling). One program serves every probe; the attach cookie is the probe's
 * index in the user's list.
 */
#ifndef PKPROF_RECORD_COUNT_BPF_H
#define PKPROF_RECORD_COUNT_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "pkprof.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct pkprof_func_key);
	__type(value, __u64);
} func_counts SEC(".maps");

SEC("uprobe")
int on_func_entry(struct pt_regs *ctx)
{
	struct pkprof_func_key key = {
		.pid = bpf_get_current_pid_tgid() >> 32,
		.probe = (__u32)bpf_get_attach_cookie(ctx),
	};
	__u64 one = 1, *n = bpf_map_lookup_elem(&func_counts, &key);

	if (!n && !bpf_map_update_elem(&func_counts, &key, &one, BPF_NOEXIST))
		return 0; /* the first call, counted by the insert */
	if (!n) /* inserted meanwhile by a call on another CPU */
		n = bpf_map_lookup_elem(&func_counts, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 0;
}

#endif /* PKPROF_RECORD_COUNT_BPF_H */
