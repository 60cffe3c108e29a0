// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor of bench/core.sh: one EMPTY program (return 0) on each tp_btf tracepoint that
 * `pkprof top` attaches to, same attach type as pkprof's (BTF-typed raw tracepoints). What these
 * cost is what any program on those hooks costs before it does anything: the tracepoint's call
 * into BPF (the kernel's __bpf_trace_run: recursion check, RCU, the indirect call) and, with BPF
 * stats on, the two clock reads around the run. pkprof cannot go below it without attaching to
 * fewer tracepoints. No headers: the programs read nothing.
 */
#define SEC(name) __attribute__((section(name), used))

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define FLOOR(tp)                                                                                  \
	SEC("tp_btf/" #tp) int floor_##tp(void *ctx)                                               \
	{                                                                                          \
		return 0;                                                                          \
	}

/* The switch storm's only hook. */
FLOOR(sched_switch)
/* Interrupts and softirqs. */
FLOOR(irq_handler_entry)
FLOOR(irq_handler_exit)
FLOOR(local_timer_entry)
FLOOR(local_timer_exit)
FLOOR(softirq_entry)
FLOOR(softirq_exit)
/* Thread life cycle. */
FLOOR(sched_process_fork)
FLOOR(sched_process_exec)
FLOOR(sched_process_exit)
FLOOR(task_rename)
FLOOR(cgroup_attach_task)
/* NET RX chain. */
FLOOR(netif_rx)
FLOOR(netif_receive_skb)
FLOOR(tcp_probe)
FLOOR(udp_fail_queue_rcv_skb)
FLOOR(sk_data_ready)
FLOOR(sock_recv_length)
FLOOR(tcp_sendmsg_locked)
/* Block I/O and workqueue chains. */
FLOOR(block_rq_issue)
FLOOR(block_rq_complete)
FLOOR(workqueue_queue_work)
FLOOR(workqueue_execute_start)
FLOOR(workqueue_execute_end)
