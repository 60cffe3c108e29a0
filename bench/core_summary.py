#!/usr/bin/env python3
"""Summarizes bench/core.sh: usage: core_summary.py RAW.tsv COST_DIR NCPU

RAW.tsv: pair, workload (storm, udp, build), mode, value (the workload's rate). COST_DIR holds one
<workload>-<mode>.tsv per BPF-stats run (bench/bpfcost.py output) and <workload>-<mode>.out (the
workload's own output in that run).
"""

import os
import statistics
import sys

MODES = {
    "A": "nothing attached",
    "P": "pkprof top --batch -d 1",
    "S": "pkprof top --batch --bpf-stats -d 1 (P plus the kernel's run-time stats)",
    "T": "bpftrace on-CPU ns accumulator (tracepoint:sched:sched_switch)",
    "R": "perf record -e sched:sched_switch -a (to a file)",
    "E": "floor: one empty tp_btf program on sched_switch",
    "F": "floor: empty tp_btf programs on all of pkprof's tracepoints",
    "M": "floor of exact accounting: a clock read and a tid-indexed add per switch (floor_acc.bpf.c)",
}
# pkprof's programs whose tracepoint is not their name without "on_".
FLOOR_OF = {
    "on_irq_entry": "irq_handler_entry",
    "on_irq_exit": "irq_handler_exit",
    "on_process_fork": "sched_process_fork",
    "on_process_exec": "sched_process_exec",
    "on_process_exit": "sched_process_exit",
}
WORKLOADS = [
    ("storm", "pinned switch storm (taskset -c CPU perf bench sched pipe)", "sw/s", 0.02),
    ("udp", "UDP 64 B loopback flood, full attribution", "rx pkt/s", 0.05),
    ("build", "compile loop (cc -O2 -c, one loop per CPU)", "compiles/s", 0.02),
]


def load(path):
    data = {}
    with open(path) as f:
        next(f)
        for line in f:
            pair, wl, mode, value = line.rstrip("\n").split("\t")
            if value:
                data.setdefault((wl, mode), {})[int(pair)] = float(value)
    return data


def pairs_lines(data, ncpu):
    out = []
    for wl, title, unit, goal in WORKLOADS:
        a = data.get((wl, "A"), {})
        if not a:
            continue
        out.append(f"== {title}: median of per-pair ratios X/A ({len(a)} pairs, BPF stats off)")
        out.append(f"   A  {statistics.median(a.values()):>12,.0f} {unit}   {MODES['A']}")
        for mode in "PSTREFM":
            x = data.get((wl, mode), {})
            pairs = sorted(set(a) & set(x))
            if not pairs:
                continue
            ratios = [x[p] / a[p] for p in pairs]
            r = statistics.median(ratios)
            extra = ""
            if wl == "storm":
                # Wall time each switch costs more: per-pair 1/X - 1/A, one CPU doing all switches.
                added = statistics.median(1e9 / x[p] - 1e9 / a[p] for p in pairs)
                extra = f"  {added:+6.0f} ns/switch"
            verdict = ""
            if mode == "P":
                verdict = f"  [goal <= {goal:.0%} loss: {'MET' if r >= 1 - goal else 'MISSED'}]"
            out.append(
                f"   {mode}  {statistics.median(x[p] for p in pairs):>12,.0f} {unit}  ratio {r:.3f}"
                f" ({(r - 1) * 100:+5.1f}%){extra}   {MODES[mode]}{verdict}"
            )
            out.append(f"        per pair: {' '.join(f'{v:.3f}' for v in ratios)}")
        out.append("")
    return out


def cost_table(path):
    rows = []
    try:
        with open(path) as f:
            next(f)
            for line in f:
                name, runs, per, total, miss = line.rstrip("\n").split("\t")
                rows.append((name, int(runs), float(per), float(total), int(miss)))
    except (OSError, StopIteration, ValueError):
        return None
    return rows


def workload_rate(path, wl):
    try:
        with open(path) as f:
            for line in f:
                if wl == "storm" and "usecs/op" in line:
                    return f"{2e6 / float(line.split()[0]):,.0f} sw/s"
                if wl == "udp" and "rx_pps=" in line:
                    return f"{float(line.split('rx_pps=')[1].split()[0]):,.0f} rx pkt/s"
    except (OSError, ValueError, IndexError):
        pass
    return "?"


def cost_lines(cost_dir):
    out = ["== per-event cost by the kernel's BPF stats (run_time_ns / run_cnt; stats on, which adds",
           "   two clock reads per run: the empty program's figure is mostly that)"]
    # The empty program on the same tracepoint as each program (bpftool names are cut at 15
    # characters, so names are matched by prefix).
    floors = {}
    for wl, mode in [("storm", "E"), ("udp", "F")]:
        floors[wl] = {r[0]: r[2] for r in cost_table(os.path.join(cost_dir, f"{wl}-{mode}.tsv")) or []}
    # The exact floor's ns/run on the storm (mode M), when it ran.
    exact = {"storm": next((r[2] for r in cost_table(os.path.join(cost_dir, "storm-M.tsv")) or []
                            if r[0].startswith("floor_acc")), None)}

    def floor_of(wl, name):
        tp = FLOOR_OF.get(name, name.removeprefix("on_"))
        if name == "sched_switch":  # bpftrace's program
            tp = "sched_switch"
        for fname, per in floors.get(wl, {}).items():
            if ("floor_" + tp).startswith(fname) or fname.startswith("floor_" + tp):
                return per
        return None
    for wl, mode in [("storm", "P"), ("storm", "T"), ("storm", "M"), ("storm", "E"), ("udp", "P"),
                     ("udp", "F")]:
        rows = cost_table(os.path.join(cost_dir, f"{wl}-{mode}.tsv"))
        if rows is None:
            continue
        rate = workload_rate(os.path.join(cost_dir, f"{wl}-{mode}.out"), wl)
        out.append(f"-- {wl}, {MODES[mode]} (workload at {rate} with stats on)")
        total_per_event = 0.0
        events = max((r[1] for r in rows), default=0)
        for name, runs, per, total, miss in rows:
            if runs < events / 1000:
                continue  # background programs (timer ticks, a few forks): not per event
            # The exact floor (M) is an on_sched_switch of its own: placed against the empty one.
            floor = floor_of(wl, "sched_switch" if mode == "M" else name)
            dist = f"   floor {floor:5.0f}, above it {per - floor:+6.0f}" if floor and mode in "PTM" else ""
            if mode == "P" and name == "on_sched_switch" and exact.get(wl):
                dist += f", above the exact floor {per - exact[wl]:+6.0f}"
            out.append(f"   {name:<28} {runs:>10,} runs  {per:7.1f} ns/run  {total:9.2f} ms{dist}"
                       + (f"  recursion misses {miss}" if miss else ""))
        if wl == "udp":
            # Per packet: every program's time over the skbs received (netif_receive_skb runs,
            # one per packet on loopback); the flood's rx counts only its measured window.
            skbs = max((r[1] for r in rows if "netif_rec" in r[0]), default=0)
            if skbs:
                total_ns = sum(r[3] for r in rows) * 1e6
                runs = sum(r[1] for r in rows)
                out.append(f"   per skb received: {total_ns / skbs:.0f} ns in {runs / skbs:.1f} program runs")
        out.append("")
    return out


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: core_summary.py RAW.tsv COST_DIR NCPU")
    data = load(sys.argv[1])
    print("\n".join(pairs_lines(data, int(sys.argv[3])) + cost_lines(sys.argv[2])))


if __name__ == "__main__":
    main()
