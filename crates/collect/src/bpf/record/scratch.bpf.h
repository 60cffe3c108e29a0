/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pkprof record: the per-CPU buffer a sample is built in (sample.bpf.h); its Python frames are
 * built apart, in `py_scratch` (python.bpf.h).
 */
#ifndef PKPROF_RECORD_SCRATCH_BPF_H
#define PKPROF_RECORD_SCRATCH_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "pkprof.h"

/*
 * Where each CPU builds its sample before it goes to the ring with its variable-length stack
 * bytes (bpf_ringbuf_reserve needs a constant size). An array indexed by CPU rather than a
 * per-CPU array: a per-CPU value may not exceed 32 KiB. The sampling program does not nest on a
 * CPU (the kernel runs one BPF program per CPU at a time in this context), so one slot a CPU is
 * enough. Sized to the possible CPUs by the loader.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkprof_sample_buf);
} sample_scratch SEC(".maps");

#endif /* PKPROF_RECORD_SCRATCH_BPF_H */
