// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The wall chain's wall_close_off, run by BPF_PROG_TEST_RUN on the case the test wrote in
 * `cases` (read back after the run; the program's context cannot be indexed by a variable):
 * reader.rs's mirror test feeds it and the reader's close_off the same cases and compares.
 */
#include "chains/wall.bpf.h"

struct wall_close_off_case {
	struct pkprof_wall w;
	struct pkprof_wall_cpu r;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wall_close_off_case);
} cases SEC(".maps");

SEC("syscall")
int close_off(void *ctx)
{
	__u32 key = 0;
	struct wall_close_off_case *c = bpf_map_lookup_elem(&cases, &key);

	if (!c)
		return 1;
	wall_close_off(&c->w, &c->r);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
