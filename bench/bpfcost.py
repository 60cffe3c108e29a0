#!/usr/bin/env python3
"""Per-program cost of the BPF programs a process holds, by the kernel's BPF stats.

usage: bpfcost.py PID OUT -- COMMAND...

Turns the kernel's run-time statistics on for as long as it runs (BPF_ENABLE_STATS: the
descriptor it holds keeps them on; closing it turns them off again unless someone else holds
one), reads run_time_ns / run_cnt of every BPF program PID holds a descriptor of (from
/proc/PID/fdinfo), runs COMMAND with its stdout to OUT, reads them again, and prints one line per
program that ran: name, runs, ns per run, total ms, recursion misses (TSV, with a header).
The stats add two clock reads around every run (their own cost shows in the empty program's figure
in bench/core.sh, and in the workload's rate, which is slower than without them).
"""

import ctypes
import json
import os
import subprocess
import sys

SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0


def enable_stats():
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint8 * 128)()
    ctypes.c_uint32.from_buffer(attr).value = BPF_STATS_RUN_TIME
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd < 0:
        sys.exit(f"bpfcost: BPF_ENABLE_STATS failed: {os.strerror(ctypes.get_errno())}")
    return fd


def snapshot(pid):
    """prog_id -> (run_ns, run_cnt, recursion_misses) of every program `pid` holds."""
    progs = {}
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(f"{fd_dir}/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        info = {k.strip(): v.strip() for k, v in info.items()}
        progs[int(info["prog_id"])] = (
            int(info.get("run_time_ns", 0)),
            int(info.get("run_cnt", 0)),
            int(info.get("recursion_misses", 0)),
        )
    return progs


def prog_names(ids):
    names = {}
    for i in ids:
        try:
            out = subprocess.run(
                ["bpftool", "-j", "prog", "show", "id", str(i)], capture_output=True, text=True, check=True
            ).stdout
            names[i] = json.loads(out).get("name", f"id{i}")
        except (OSError, subprocess.CalledProcessError, ValueError):
            names[i] = f"id{i}"
    return names


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: bpfcost.py PID OUT -- COMMAND...")
    if SYS_BPF is None:
        sys.exit(f"bpfcost: unknown bpf syscall number on {os.uname().machine}")
    pid, out = int(sys.argv[1]), sys.argv[2]
    stats_fd = enable_stats()
    before = snapshot(pid)
    if not before:
        sys.exit(f"bpfcost: process {pid} holds no BPF program")
    with open(out, "w") as f:
        rc = subprocess.run(sys.argv[4:], stdout=f).returncode
    after = snapshot(pid)
    os.close(stats_fd)
    if rc != 0:
        sys.exit(f"bpfcost: {' '.join(sys.argv[4:])} exited with {rc}")
    names = prog_names(after)
    print("prog\truns\tns_per_run\ttotal_ms\trecursion_misses")
    rows = []
    for i, (ns, cnt, miss) in after.items():
        ns0, cnt0, miss0 = before.get(i, (0, 0, 0))
        if cnt > cnt0:
            rows.append((names[i], cnt - cnt0, (ns - ns0) / (cnt - cnt0), (ns - ns0) / 1e6, miss - miss0))
    for name, cnt, per, total, miss in sorted(rows, key=lambda r: -r[3]):
        print(f"{name}\t{cnt}\t{per:.1f}\t{total:.2f}\t{miss}")


if __name__ == "__main__":
    main()
