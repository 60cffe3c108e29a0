// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor of exact accounting for bench/core.sh (mode M): the least a program can do on
 * sched_switch to know each thread's on-CPU time exactly, built the cheapest way this kernel
 * allows. One clock read (bpf_ktime_get_ns: the only clock a tracepoint program has that the
 * other events share), the time since this CPU's last switch added to the leaving thread's
 * counter, the stamp kept per CPU. The per-thread table is an array indexed by tid (sized to
 * pid_max by the loader; an array lookup is inlined by the verifier, where a hash lookup or
 * task-local storage is a helper call), the per-CPU stamp a per-CPU array (inlined too). No
 * interrupts, no modes, no chains, no losses counted: what pkprof's on_sched_switch does on top
 * of this is its own cost; what this costs, any exact per-thread accounting pays on this machine.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Resized by floor_load to /proc/sys/kernel/pid_max before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, __u64);
} acc_thread_ns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} acc_cpu_last SEC(".maps");

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_acc_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	__u32 zero = 0, tid = prev->pid;
	__u64 now = bpf_ktime_get_ns(), *last, *ns;

	last = bpf_map_lookup_elem(&acc_cpu_last, &zero);
	if (!last)
		return 0;
	/* The idle tasks (tid 0, one per CPU) share a slot: left out rather than added to racily. */
	ns = tid ? bpf_map_lookup_elem(&acc_thread_ns, &tid) : NULL;
	if (ns && *last)
		*ns += now - *last;
	*last = now;
	return 0;
}
