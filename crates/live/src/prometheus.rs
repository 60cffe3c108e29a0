//! Prometheus text exposition (format 0.0.4) of the latest frame, with bounded cardinality.
//!
//! Each frame is observed (slots, offsets, exits: cheap bookkeeping that must see every frame to
//! keep the counters monotonic); the text is rendered only when asked for, from the latest frame,
//! and kept until the next one: a scrape every 15 s costs one rendering, not fifteen.
//!
//! Written by hand rather than through a metrics registry crate: the series are a bounded
//! snapshot rebuilt each refresh (at most N processes plus one `pid="other"` row), which a registry
//! of long-lived metric handles does not model; the format itself is a few lines.
//!
//! Every counter stays monotonic. A process keeps its own series from the refresh it gets a slot
//! until it exits or, idle for `IDLE_FRAMES` refreshes, gives its slot to a busy process; `other`
//! holds everything else. A process's series counts from when it got its slot (from attach for
//! those exported from the first refresh); what it used before stays in `other`, and what its
//! series showed moves into `other` when it leaves. So the series always sum to the total.
//!
//! A label set that left the exposition is not used again for `RETIRE_S` seconds: it would come
//! back lower (a process regaining a slot counts from then; a reused PID is another process), and
//! Prometheus reads a lower value as a counter reset.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;

use pkprof_accounting::{
    Counters, Interval, Row, BLOCK_REASONS, CHAIN_NAMES, NR_BLOCK_REASONS, SHORT_LIVED_PID,
    SOFTIRQ_NAMES,
};

/// Most OTHER kernel functions with their own series per exported process (the first seen
/// while it is exported); the rest share `function="other"`.
const MAX_OTHER_FNS: usize = 8;

/// Refreshes without CPU after which an exported process may lose its slot to a busy one.
const IDLE_FRAMES: u32 = 60;

/// Seconds a label set that left the exposition stays unused (longer than the usual `rate()` and
/// `resets()` ranges).
const RETIRE_S: f64 = 600.0;

#[derive(Default)]
struct Member {
    /// Part of the process's total already counted in `other`: none until it is first settled
    /// (most processes never are: they live a read or two in `other` and exit).
    offset: Option<Box<Counters>>,
    exported: bool,
    /// The `comm` label of its series while exported.
    comm: String,
    idle_frames: u32,
    /// The frame it was first met in (`Exposition::frames`): shown (in `other`) by an earlier
    /// refresh when lower than the current one.
    born: u64,
    /// OTHER's kernel functions (docs/design.md, "Wall time"): each function's time when the
    /// process got its slot (its series counts from then), and the functions with their own
    /// series, in the order first seen (at most MAX_OTHER_FNS, never given up: each series and
    /// the rest stay monotonic).
    fn_offset: HashMap<String, u64>,
    fn_labels: Vec<String>,
    /// What each of its function series said last: a period still open may read a little more
    /// than it closes at (its wait for a CPU once woken is known at its switch-in only), so a
    /// series holds its value until the figure passes it.
    fn_last: HashMap<String, u64>,
    /// The function series of the latest frame, in order, with their values.
    fn_series: Vec<(String, u64)>,
    /// Its wall-class series (`WallSeries`) as shown: each held at its highest value.
    wall_held: WallSeries,
}

/// The wall classes of one `pkprof_wall_seconds_total` label set, in their order (running, runq,
/// then `BLOCK_REASONS`). An open off period reads as its reason until the thread runs again;
/// then the part it waited for a CPU moves to runq, and the reason's figure comes down a little:
/// each series holds its highest value until the figure passes it (as the function series do),
/// so that no counter ever goes back.
type WallSeries = [u64; 2 + NR_BLOCK_REASONS];

/// The index of class `other` in `BLOCK_REASONS`.
const OTHER_REASON: usize = NR_BLOCK_REASONS - 1;

fn wall_series(c: &Counters) -> WallSeries {
    let w = &c.wall;
    let mut v = [0; 2 + NR_BLOCK_REASONS];
    v[0] = w.running_ns;
    v[1] = w.runq_ns;
    v[2..].copy_from_slice(&w.blocked_ns);
    v
}

fn add(sum: &mut WallSeries, v: &WallSeries) {
    for (s, v) in sum.iter_mut().zip(v) {
        *s += v;
    }
}

fn hold(held: &mut WallSeries, now: &WallSeries) {
    for (h, n) in held.iter_mut().zip(now) {
        *h = (*h).max(*n);
    }
}

impl Member {
    /// What of `total` its series (or its share of `other`) carries.
    fn own<'a>(&self, total: &'a Counters) -> Cow<'a, Counters> {
        match &self.offset {
            Some(o) => Cow::Owned(total.since(o)),
            None => Cow::Borrowed(total),
        }
    }
}

/// Label sets (pid, comm) that left the exposition, with when (frame time, Unix seconds); by
/// pid, so that a row is looked up without building a key.
#[derive(Default)]
struct Retired(HashMap<u32, Vec<(String, f64)>>);

impl Retired {
    fn insert(&mut self, id: u32, comm: String, now: f64) {
        let sets = self.0.entry(id).or_default();
        match sets.iter_mut().find(|(c, _)| *c == comm) {
            Some(set) => set.1 = now,
            None => sets.push((comm, now)),
        }
    }

    fn contains(&self, id: u32, comm: &str) -> bool {
        self.0
            .get(&id)
            .is_some_and(|sets| sets.iter().any(|(c, _)| c == comm))
    }

    /// Forgets the label sets retired `RETIRE_S` or more before `now`.
    fn expire(&mut self, now: f64) {
        self.0.retain(|_, sets| {
            sets.retain(|(_, at)| now - *at < RETIRE_S);
            !sets.is_empty()
        });
    }
}

pub struct Exposition {
    top_n: usize,
    members: HashMap<u32, Member>,
    /// Part of `other` no longer carried by a live unexported row.
    frozen: Counters,
    /// `other`'s wall-class series as shown (see `WallSeries`).
    other_wall_held: WallSeries,
    retired: Retired,
    /// Frames observed so far.
    frames: u64,
    /// The latest frame; its exited rows are settled when the next frame comes (the rendering
    /// still shows their series), so that what is rendered is what an eager rendering showed.
    frame: Option<Arc<Interval>>,
    /// The rendering of `frame`, made at the first request.
    text: OnceCell<String>,
}

impl Exposition {
    pub fn new(top_n: usize) -> Self {
        Exposition {
            top_n,
            members: HashMap::new(),
            frozen: Counters::default(),
            other_wall_held: [0; 2 + NR_BLOCK_REASONS],
            retired: Retired::default(),
            frames: 0,
            frame: None,
            text: OnceCell::new(),
        }
    }

    /// The exposition of the last frame observed, rendered at the first call after it.
    pub fn text(&self) -> &str {
        self.text.get_or_init(|| match &self.frame {
            Some(f) => self.render(f),
            None => String::from("# no frame yet\n"),
        })
    }

    /// Moves what `m`'s series (or its share of `other`) carried so far into `frozen`.
    fn settle(frozen: &mut Counters, m: &mut Member, total: &Counters) {
        frozen.add(&m.own(total));
        m.offset = Some(Box::new(*total));
    }

    /// Takes `m` out of the exposition: its series ends and its value moves into `other`.
    fn unexport(
        frozen: &mut Counters,
        retired: &mut Retired,
        id: u32,
        m: &mut Member,
        r: &Row,
        now: f64,
    ) {
        Self::settle(frozen, m, &r.total);
        m.exported = false;
        retired.insert(id, std::mem::take(&mut m.comm), now);
    }

    /// Gives free (or idle) slots to the busiest rows without one.
    fn assign_slots(&mut self, frame: &Interval) {
        let id = |r: &Row| r.tid.unwrap_or(r.pid);
        let now = frame.unix_s;
        self.retired.expire(now);
        let frames = self.frames;
        for r in &frame.rows {
            let m = match self.members.entry(id(r)) {
                Entry::Occupied(e) => e.into_mut(),
                // Met exited (most processes under a fork loop): no member unless it gets a slot
                // below; its total is in `other` now and moves into `frozen` at the next frame.
                Entry::Vacant(_) if r.exited => continue,
                Entry::Vacant(e) => e.insert(Member {
                    born: frames,
                    ..Member::default()
                }),
            };
            m.idle_frames = if r.delta.cost_ns() == 0 {
                m.idle_frames + 1
            } else {
                0
            };
            // Renamed (exec): the old label set ends; the series goes on under the new one unless
            // that one is retired.
            if m.exported && m.comm != r.comm {
                self.retired.insert(id(r), std::mem::take(&mut m.comm), now);
                if self.retired.contains(id(r), &r.comm) {
                    Self::settle(&mut self.frozen, m, &r.total);
                    m.exported = false;
                } else {
                    m.comm = r.comm.clone();
                }
            }
        }
        // Members without a row in this frame count too (`top` switched to thread rows).
        let mut exported = self.members.values().filter(|m| m.exported).count();
        let mut idle = 0;
        let mut candidates = Vec::new();
        for r in &frame.rows {
            let m = self.members.get(&id(r));
            idle += usize::from(m.is_some_and(|m| m.idle_frames >= IDLE_FRAMES));
            if !m.is_some_and(|m| m.exported) && !self.retired.contains(id(r), &r.comm) {
                let key = (
                    Reverse(r.delta.cost_ns()),
                    Reverse(r.total.cost_ns()),
                    id(r),
                );
                candidates.push((key, r));
            }
        }
        // The busiest first; only the first few can get a slot: each candidate either takes a
        // free slot, or the slot of an idle row (one each), or ends the loop. Ids are unique.
        let reach = self.top_n.saturating_sub(exported) + idle + 1;
        if reach < candidates.len() {
            candidates.select_nth_unstable_by_key(reach, |(k, _)| *k);
            candidates.truncate(reach);
        }
        candidates.sort_unstable_by_key(|(k, _)| *k);
        for (_, r) in candidates {
            if exported >= self.top_n {
                // A busy row may take the slot of an exported row idle for long enough.
                if r.delta.cost_ns() == 0 {
                    break;
                }
                let Some(idle) = frame.rows.iter().find(|o| {
                    (self.members.get(&id(o)))
                        .is_some_and(|m| m.exported && m.idle_frames >= IDLE_FRAMES)
                }) else {
                    break;
                };
                let m = self.members.get_mut(&id(idle)).expect("member of a row");
                Self::unexport(&mut self.frozen, &mut self.retired, id(idle), m, idle, now);
                exported -= 1;
            }
            let m = self.members.entry(id(r)).or_insert_with(|| Member {
                born: frames,
                idle_frames: u32::from(r.delta.cost_ns() == 0),
                ..Member::default()
            });
            let shown = m.born < self.frames;
            if shown {
                Self::settle(&mut self.frozen, m, &r.total);
            }
            m.exported = true;
            m.comm = r.comm.clone();
            // As its other series: from attach when exported from its first refresh.
            m.fn_offset = if shown {
                (r.other_fns.iter())
                    .map(|f| (f.function.clone(), f.ns))
                    .collect()
            } else {
                HashMap::new()
            };
            m.fn_labels.clear();
            m.fn_last.clear();
            m.fn_series.clear();
            m.wall_held = [0; 2 + NR_BLOCK_REASONS];
            exported += 1;
        }
    }

    /// Takes a frame (a copy of it: `observe` takes a shared one without copying).
    pub fn update(&mut self, frame: &Interval) {
        self.observe(Arc::new(frame.clone()));
    }

    /// Takes the next frame: the previous frame's exited rows are settled, slots are given, each
    /// exported process's OTHER function series are brought up to date; the text is rendered
    /// when asked for.
    pub fn observe(&mut self, frame: Arc<Interval>) {
        if let Some(prev) = self.frame.take() {
            self.settle_exits(&prev);
        }
        self.assign_slots(&frame);
        let id = |r: &Row| r.tid.unwrap_or(r.pid);
        // Only `other`'s wall classes are held here (the rest of `other` is summed at a scrape):
        // the classes of a sum are the sums of the classes.
        let mut other = wall_series(&self.frozen);
        for r in &frame.rows {
            let Some(m) = self.members.get_mut(&id(r)) else {
                add(&mut other, &wall_series(&r.total));
                continue;
            };
            let own = wall_series(&m.own(&r.total));
            if m.exported {
                note_other_fns(r, m);
                hold(&mut m.wall_held, &own);
            } else {
                add(&mut other, &own);
            }
        }
        hold(&mut self.other_wall_held, &other);
        // Every member is shown now.
        self.frames += 1;
        self.frame = Some(frame);
        self.text = OnceCell::new();
    }

    /// The rows of `frame` that exited leave: their series end, their totals move into `other`.
    fn settle_exits(&mut self, frame: &Interval) {
        let id = |r: &Row| r.tid.unwrap_or(r.pid);
        for r in frame.rows.iter().filter(|r| r.exited) {
            if let Some(mut m) = self.members.remove(&id(r)) {
                if m.exported {
                    Self::unexport(
                        &mut self.frozen,
                        &mut self.retired,
                        id(r),
                        &mut m,
                        r,
                        frame.unix_s,
                    );
                } else {
                    // Its share of `other` stays there (the member goes: no offset kept).
                    self.frozen.add(&m.own(&r.total));
                }
            } else {
                // Met exited and given no slot: all of it was in `other`.
                self.frozen.add(&r.total);
            }
        }
    }

    /// The exposition of `frame`, observed last.
    fn render(&self, frame: &Interval) -> String {
        let id = |r: &Row| r.tid.unwrap_or(r.pid);
        let mut exported: Vec<(&Row, Counters)> = Vec::new();
        let mut other = self.frozen;
        for r in &frame.rows {
            let Some(m) = self.members.get(&id(r)) else {
                other.add(&r.total);
                continue;
            };
            let own = m.own(&r.total);
            if m.exported {
                exported.push((r, own.into_owned()));
            } else {
                other.add(&own);
            }
        }
        exported.sort_by(|a, b| {
            b.1.cost_ns()
                .cmp(&a.1.cost_ns())
                .then(id(a.0).cmp(&id(b.0)))
        });
        let mut s = String::with_capacity(8192);
        let split = frame.split_modes;
        let _ = writeln!(s, "# HELP pkprof_cpu_seconds_total CPU time by kind. While the process was current: own (or user/sys/unsplit with --syscalls), served_out (work items it ran for others), hardirq and softirq (interrupt work Linux billed to it). Done for it elsewhere: net, block, workq, server (a server's work for it as its client). own+net+block+workq+server is what the process cost the machine.");
        let _ = writeln!(s, "# TYPE pkprof_cpu_seconds_total counter");
        for (r, own) in &exported {
            write_kinds(&mut s, &pid_label(id(r)), &r.comm, own, split);
        }
        write_kinds(&mut s, "other", "other", &other, split);

        let _ = writeln!(s, "# HELP pkprof_wall_seconds_total Wall time of the process's threads by class since each was first seen: running, runq (runnable, waiting for a CPU) and blocked by reason; the classes add up to the threads' wall time.");
        let _ = writeln!(s, "# TYPE pkprof_wall_seconds_total counter");
        for (r, _) in &exported {
            let held = &self.members[&id(r)].wall_held;
            write_wall(&mut s, &pid_label(id(r)), &r.comm, held);
        }
        write_wall(&mut s, "other", "other", &self.other_wall_held);
        let _ = writeln!(s, "# HELP pkprof_wall_other_function_seconds_total Blocked time in class other by the kernel function the process's threads blocked in (the first outside the scheduler), since it got its series; at most 8 functions a process, the rest as function=\"other\".");
        let _ = writeln!(s, "# TYPE pkprof_wall_other_function_seconds_total counter");
        for (r, _) in &exported {
            write_other_fns(&mut s, &pid_label(id(r)), r, &self.members[&id(r)]);
        }
        // The processes without their own series, as every family has them: their class
        // `other` time, not broken down by function (held with their wall classes).
        let _ = writeln!(
            s,
            "pkprof_wall_other_function_seconds_total{{pid=\"other\",comm=\"other\",function=\"other\"}} {}",
            secs(self.other_wall_held[2 + OTHER_REASON])
        );
        let _ = writeln!(s, "# HELP pkprof_runq_wait_seconds Runqueue waits of the process's threads (runnable until switched in), since start; buckets at powers of 4 from 1.024 us.");
        let _ = writeln!(s, "# TYPE pkprof_runq_wait_seconds histogram");
        for (r, own) in &exported {
            write_runq_hist(&mut s, &pid_label(id(r)), &r.comm, own);
        }
        write_runq_hist(&mut s, "other", "other", &other);
        let _ = writeln!(s, "# HELP pkprof_runq_wait_max_seconds Longest runqueue wait of the process's threads since start.");
        let _ = writeln!(s, "# TYPE pkprof_runq_wait_max_seconds gauge");
        for (r, _) in &exported {
            let _ = writeln!(
                s,
                "pkprof_runq_wait_max_seconds{{pid=\"{}\",comm=\"{}\"}} {}",
                pid_label(id(r)),
                escape(&r.comm),
                secs(r.runq_max_ns)
            );
        }

        let _ = writeln!(s, "# HELP pkprof_cpu_mode_seconds_total Exclusive time of each CPU by context; the modes add up to wall time.");
        let _ = writeln!(s, "# TYPE pkprof_cpu_mode_seconds_total counter");
        for c in &frame.cpus {
            let t = &c.total;
            for (mode, ns) in [
                ("idle", t.idle_ns),
                ("task", t.task_ns),
                ("hardirq", t.hardirq_ns),
                ("softirq", t.softirq_total_ns()),
            ] {
                let _ = writeln!(
                    s,
                    "pkprof_cpu_mode_seconds_total{{cpu=\"{}\",mode=\"{mode}\"}} {}",
                    c.cpu,
                    secs(ns)
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP pkprof_softirq_seconds_total Softirq time of each CPU by vector."
        );
        let _ = writeln!(s, "# TYPE pkprof_softirq_seconds_total counter");
        for c in &frame.cpus {
            for (v, ns) in c.total.softirq_ns.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "pkprof_softirq_seconds_total{{cpu=\"{}\",vec=\"{}\"}} {}",
                    c.cpu,
                    SOFTIRQ_NAMES[v],
                    secs(*ns)
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP pkprof_lost_events_total Events pkprof could not account, by reason."
        );
        let _ = writeln!(s, "# TYPE pkprof_lost_events_total counter");
        for (reason, v) in frame.lost.fields() {
            let _ = writeln!(s, "pkprof_lost_events_total{{reason=\"{reason}\"}} {v}");
        }
        let _ = writeln!(s, "# HELP pkprof_bpf_prog_run_seconds_total Run time of pkprof's BPF programs (0 without --bpf-stats).");
        let _ = writeln!(s, "# TYPE pkprof_bpf_prog_run_seconds_total counter");
        for p in &frame.progs {
            let _ = writeln!(
                s,
                "pkprof_bpf_prog_run_seconds_total{{prog=\"{}\"}} {}",
                escape(&p.name),
                secs(p.run_ns)
            );
        }
        let _ = writeln!(s, "# HELP pkprof_self_cpu_percent pkprof's own CPU over the last interval, percent of one CPU.");
        let _ = writeln!(s, "# TYPE pkprof_self_cpu_percent gauge");
        let _ = writeln!(s, "pkprof_self_cpu_percent {}", frame.self_usage.cpu_pct);
        let _ = writeln!(s, "# HELP pkprof_self_rss_bytes pkprof's resident memory.");
        let _ = writeln!(s, "# TYPE pkprof_self_rss_bytes gauge");
        let _ = writeln!(s, "pkprof_self_rss_bytes {}", frame.self_usage.rss_bytes);
        s
    }
}

/// The OTHER functions of exported row `r` (member `m`) in this frame: their own series for the
/// first MAX_OTHER_FNS seen, the rest summed as `function="other"` (a function never moves
/// between the two, so every series is monotonic); each holds its highest value so far.
fn note_other_fns(r: &Row, m: &mut Member) {
    let since = |m: &Member, f: &pkprof_accounting::OtherFn| {
        f.ns.saturating_sub(m.fn_offset.get(&f.function).copied().unwrap_or(0))
    };
    for f in &r.other_fns {
        if m.fn_labels.len() < MAX_OTHER_FNS
            && since(m, f) > 0
            && !m.fn_labels.contains(&f.function)
        {
            m.fn_labels.push(f.function.clone());
        }
    }
    let mut rest = 0;
    let mut own: Vec<(String, u64)> = m.fn_labels.iter().map(|l| (l.clone(), 0)).collect();
    for f in &r.other_fns {
        match own.iter_mut().find(|(l, _)| *l == f.function) {
            Some(o) => o.1 = since(m, f),
            None => rest += since(m, f),
        }
    }
    if m.fn_labels.len() == MAX_OTHER_FNS || rest > 0 {
        own.push(("other".to_string(), rest));
    }
    for (function, ns) in &mut own {
        let last = m.fn_last.entry(function.clone()).or_default();
        *last = (*ns).max(*last);
        *ns = *last;
    }
    m.fn_series = own;
}

/// The OTHER function series of exported row `r` (member `m`), as `note_other_fns` left them.
fn write_other_fns(s: &mut String, pid: &str, r: &Row, m: &Member) {
    let comm = escape(&r.comm);
    for (function, ns) in &m.fn_series {
        let _ = writeln!(
            s,
            "pkprof_wall_other_function_seconds_total{{pid=\"{pid}\",comm=\"{comm}\",function=\"{}\"}} {}",
            escape(function),
            secs(*ns)
        );
    }
}

/// A row's `pid` label: its number, or `short-lived` for the row of the processes the agent's
/// reader folded (`SHORT_LIVED_PID`).
fn pid_label(id: u32) -> String {
    if id == SHORT_LIVED_PID {
        "short-lived".to_string()
    } else {
        id.to_string()
    }
}

fn write_kinds(s: &mut String, pid: &str, comm: &str, c: &Counters, split: bool) {
    let comm = escape(comm);
    let mut kind = |k: &str, ns: u64| {
        let _ = writeln!(
            s,
            "pkprof_cpu_seconds_total{{pid=\"{pid}\",comm=\"{comm}\",kind=\"{k}\"}} {}",
            secs(ns)
        );
    };
    if split {
        // Work items run for others are kernel time of the kworker: taken out of sys.
        kind("user", c.user_ns);
        kind("sys", c.sys_ns.saturating_sub(c.served_out_ns));
        kind("unsplit", c.unsplit_ns);
    } else {
        kind("own", c.own_ns());
    }
    kind("served_out", c.served_out_ns);
    kind("hardirq", c.hardirq_ns);
    kind("softirq", c.softirq_ns.iter().sum());
    for (chain, ns) in CHAIN_NAMES.iter().zip(c.served_ns) {
        kind(chain, ns);
    }
}

/// The wall-time classes (docs/design.md, "Wall time") as `class` series, held (`WallSeries`).
fn write_wall(s: &mut String, pid: &str, comm: &str, held: &WallSeries) {
    let comm = escape(comm);
    let classes = ["running", "runq"].into_iter().chain(BLOCK_REASONS);
    for (class, ns) in classes.zip(held) {
        let _ = writeln!(
            s,
            "pkprof_wall_seconds_total{{pid=\"{pid}\",comm=\"{comm}\",class=\"{class}\"}} {}",
            secs(*ns)
        );
    }
}

/// The runqueue-wait histogram of `c` as cumulative `le` buckets at 2^10, 2^12, ... 2^32 ns (each
/// the lower bound of an even histogram bucket), `+Inf`, `_sum` and `_count`.
fn write_runq_hist(s: &mut String, pid: &str, comm: &str, c: &Counters) {
    let comm = escape(comm);
    let h = &c.wall.runq_hist.0;
    let mut below = 0u64;
    let mut next = 0usize;
    for k in (10..=32).step_by(2) {
        let bound = 2 * k; // the first histogram bucket at or above 2^k ns
        while next < bound.min(h.len()) {
            below += h[next];
            next += 1;
        }
        let _ = writeln!(
            s,
            "pkprof_runq_wait_seconds_bucket{{pid=\"{pid}\",comm=\"{comm}\",le=\"{}\"}} {below}",
            (1u64 << k) as f64 / 1e9
        );
    }
    let count = c.wall.runq_hist.count();
    let _ = writeln!(
        s,
        "pkprof_runq_wait_seconds_bucket{{pid=\"{pid}\",comm=\"{comm}\",le=\"+Inf\"}} {count}"
    );
    let _ = writeln!(
        s,
        "pkprof_runq_wait_seconds_sum{{pid=\"{pid}\",comm=\"{comm}\"}} {}",
        secs(c.wall.runq_ns)
    );
    let _ = writeln!(
        s,
        "pkprof_runq_wait_seconds_count{{pid=\"{pid}\",comm=\"{comm}\"}} {count}"
    );
}

fn secs(ns: u64) -> String {
    format!("{:.9}", ns as f64 / 1e9)
}

/// Label value escaping of the text format: backslash, double quote, newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn row(pid: u32, total_s: u64, delta_s: u64) -> Row {
        let mut r = Row {
            pid,
            comm: format!("p{pid}"),
            ..Row::default()
        };
        r.total.task_ns = total_s * S;
        r.delta.task_ns = delta_s * S;
        r
    }

    /// The value of the one line starting with `series` (a full label set).
    fn value(text: &str, series: &str) -> f64 {
        let l = text.lines().find(|l| l.starts_with(series)).unwrap();
        l.rsplit(' ').next().unwrap().parse().unwrap()
    }

    /// An open off period reads as its reason (poll) until the thread runs; then part of it
    /// turns out to have been runqueue wait and poll's figure comes down: the series holds its
    /// highest value (exported and in `other`), and runq shows the wait.
    #[test]
    fn wall_classes_never_go_back() {
        let mut e = Exposition::new(1);
        let frame = |poll: u64, runq: u64| {
            let mut busy = row(1, 10, 10);
            busy.total.wall.blocked_ns[5] = poll;
            busy.total.wall.runq_ns = runq;
            let mut idle = row(2, 0, 0);
            idle.total.wall.blocked_ns[5] = poll;
            idle.total.wall.runq_ns = runq;
            Interval {
                rows: vec![busy, idle],
                ..Interval::default()
            }
        };
        let poll = |t: &str, pid: &str| {
            value(
                t,
                &format!(
                    "pkprof_wall_seconds_total{{pid=\"{pid}\",comm=\"{}\",class=\"{}\"}}",
                    if pid == "other" {
                        "other".to_string()
                    } else {
                        format!("p{pid}")
                    },
                    BLOCK_REASONS[5]
                ),
            )
        };
        e.update(&frame(9 * S, 0));
        assert_eq!(poll(e.text(), "1"), 9.0);
        assert_eq!(poll(e.text(), "other"), 9.0);
        e.update(&frame(8 * S, S));
        assert_eq!(poll(e.text(), "1"), 9.0, "held");
        assert_eq!(poll(e.text(), "other"), 9.0, "held");
        e.update(&frame(12 * S, S));
        assert_eq!(poll(e.text(), "1"), 12.0, "passed");
        assert_eq!(poll(e.text(), "other"), 12.0, "passed");
    }

    fn task_series(text: &str) -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| l.starts_with("pkprof_cpu_seconds_total{") && l.contains("kind=\"own\""))
            .map(|l| {
                let pid = l
                    .split("pid=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_string();
                (pid, l.rsplit(' ').next().unwrap().parse().unwrap())
            })
            .collect()
    }

    /// Whatever the ranking does, `other` never drops and the series add up to the totals.
    #[test]
    fn other_stays_monotonic_and_series_sum_to_totals() {
        let mut e = Exposition::new(1);
        let frames = [
            vec![row(1, 10, 10), row(2, 5, 5)],
            vec![row(1, 10, 0), row(2, 20, 15)],
            vec![row(1, 30, 20), row(2, 20, 0)],
        ];
        let mut last_other = 0.0;
        for rows in frames {
            let sum: u64 = rows.iter().map(|r| r.total.task_ns).sum();
            e.update(&Interval {
                rows,
                ..Interval::default()
            });
            let series = task_series(e.text());
            let other = series.iter().find(|(p, _)| p == "other").unwrap().1;
            assert!(
                other >= last_other,
                "other dropped: {last_other} -> {other}"
            );
            last_other = other;
            let total: f64 = series.iter().map(|(_, v)| v).sum();
            assert!((total - sum as f64 / S as f64).abs() < 1e-6, "{}", e.text());
        }
        // A busy process takes the slot of one idle for IDLE_FRAMES refreshes; still monotonic.
        for i in 0..=IDLE_FRAMES as u64 {
            e.update(&Interval {
                rows: vec![row(1, 30, 0), row(2, 21 + i, 1)],
                ..Interval::default()
            });
            let series = task_series(e.text());
            let other = series.iter().find(|(p, _)| p == "other").unwrap().1;
            assert!(other >= last_other);
            last_other = other;
        }
        let series = task_series(e.text());
        assert!(
            series.iter().any(|(p, _)| p == "2"),
            "busy pid 2 got the slot: {series:?}"
        );
        assert!(!series.iter().any(|(p, _)| p == "1"));
    }

    /// Every `pkprof_cpu_seconds_total` series (full label set) and its value.
    fn all_series(text: &str) -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| l.starts_with("pkprof_cpu_seconds_total{"))
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect()
    }

    /// Feeds `frames` (each a list of rows, `exited` marking a process's last row) and checks what
    /// Prometheus's `resets()` checks, across gaps too: no label set is ever seen lower than
    /// before. Also checks that the `own` series add up to everything the processes ran.
    fn assert_no_resets(top_n: usize, frames: Vec<Vec<Row>>) -> Vec<String> {
        let mut e = Exposition::new(top_n);
        let mut last: HashMap<String, f64> = HashMap::new();
        let mut gone_ns = 0;
        for (i, rows) in frames.into_iter().enumerate() {
            let live: u64 = rows.iter().map(|r| r.total.task_ns).sum();
            e.update(&Interval {
                rows: rows.clone(),
                unix_s: i as f64,
                ..Interval::default()
            });
            for (k, v) in all_series(e.text()) {
                if let Some(&was) = last.get(&k) {
                    assert!(
                        v >= was,
                        "frame {i}: {k} went back {was} -> {v}\n{}",
                        e.text()
                    );
                }
                last.insert(k, v);
            }
            let sum: f64 = task_series(e.text()).iter().map(|(_, v)| v).sum();
            let want = (live + gone_ns) as f64 / S as f64;
            assert!(
                (sum - want).abs() < 1e-6,
                "frame {i}: series sum {sum}, ran {want}"
            );
            gone_ns += rows
                .iter()
                .filter(|r| r.exited)
                .map(|r| r.total.task_ns)
                .sum::<u64>();
        }
        let mut keys: Vec<String> = last.into_keys().collect();
        keys.sort();
        keys
    }

    fn exited(mut r: Row) -> Row {
        r.exited = true;
        r
    }

    /// A process that gave its slot up while idle and gets busy again: its series restarted from
    /// zero under the same labels (a counter reset to Prometheus). It now stays in `other` (for
    /// `RETIRE_S` at least).
    #[test]
    fn a_process_that_lost_its_slot_never_comes_back_lower() {
        let mut frames = vec![vec![row(1, 10, 10), row(2, 5, 5)]];
        // Process 1 idles while 2 is busy: 2 takes the slot, then idles in turn while 1 is busy.
        for i in 0..=IDLE_FRAMES as u64 + 1 {
            frames.push(vec![row(1, 10, 0), row(2, 6 + i, 1)]);
        }
        for i in 0..=IDLE_FRAMES as u64 + 1 {
            frames.push(vec![
                row(1, 11 + i, 1),
                row(2, 6 + IDLE_FRAMES as u64 + 1, 0),
            ]);
        }
        let keys = assert_no_resets(1, frames);
        assert!(keys.iter().any(|k| k.contains("pid=\"2\"")), "{keys:?}");
    }

    /// A reused PID is another process with the same labels: its series would start lower.
    #[test]
    fn a_reused_pid_does_not_reuse_the_series_of_the_process_before() {
        let sh = |total: u64, delta: u64| Row {
            comm: "sh".into(),
            ..row(7, total, delta)
        };
        let frames = vec![
            vec![sh(20, 20), row(1, 1, 1)],
            vec![sh(30, 10), row(1, 1, 0)],
            vec![exited(sh(31, 1)), row(1, 1, 0)],
            // A new sh got PID 7 again.
            vec![sh(2, 2), row(1, 1, 0)],
            vec![sh(4, 2), row(1, 1, 0)],
            vec![sh(6, 2), row(1, 1, 0)],
        ];
        assert_no_resets(2, frames);
    }

    /// Processes met only exited (a fork loop's): in `other` when not given a slot, with a
    /// series of their own for their one frame when one is free; either way the series add up.
    #[test]
    fn processes_met_exited_add_up_with_or_without_a_slot() {
        let mut frames = vec![vec![row(1, 10, 10)]];
        for i in 0..4u32 {
            frames.push(vec![
                row(1, 11 + u64::from(i), 1),
                exited(row(100 + 2 * i, 3, 3)),
                exited(row(101 + 2 * i, 2, 2)),
            ]);
        }
        frames.push(vec![row(1, 20, 1)]);
        let keys = assert_no_resets(2, frames);
        assert!(keys.iter().any(|k| k.contains("pid=\"100\"")), "{keys:?}");
    }

    /// OTHER's functions: at most MAX_OTHER_FNS of their own a process plus `other`, each
    /// monotonic, adding up to the process's OTHER function time since it got its slot.
    #[test]
    fn other_functions_are_bounded_monotonic_and_add_up() {
        let mut e = Exposition::new(1);
        let mut last: HashMap<String, f64> = HashMap::new();
        for frame in 1..=12u64 {
            let mut r = row(1, frame, 1);
            // Function k appears at frame k, and every function grows by 1 s a frame.
            r.other_fns = (1..=frame)
                .map(|k| pkprof_accounting::OtherFn {
                    function: format!("f{k}"),
                    ns: (frame - k + 1) * S,
                    count: 1,
                    ..Default::default()
                })
                .collect();
            // Exported from its first refresh: its series count from attach.
            let want: u64 = r.other_fns.iter().map(|f| f.ns).sum::<u64>();
            e.update(&Interval {
                rows: vec![r],
                unix_s: frame as f64,
                ..Interval::default()
            });
            // The process's own series (`pid="other"` holds the processes without theirs).
            let series: Vec<(String, f64)> = (e.text().lines())
                .filter(|l| l.starts_with("pkprof_wall_other_function_seconds_total{pid=\"1\""))
                .map(|l| {
                    let (k, v) = l.rsplit_once(' ').unwrap();
                    (k.to_string(), v.parse().unwrap())
                })
                .collect();
            assert!(series.len() <= MAX_OTHER_FNS + 1, "{series:?}");
            let sum: f64 = series.iter().map(|(_, v)| v).sum();
            assert!(
                (sum - want as f64 / S as f64).abs() < 1e-6,
                "{sum} vs {want}"
            );
            for (k, v) in series {
                if let Some(was) = last.insert(k.clone(), v) {
                    assert!(v >= was, "{k}: {was} -> {v}");
                }
            }
        }
        assert!(last.keys().any(|k| k.contains("function=\"other\"")));
    }
}
