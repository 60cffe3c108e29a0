//! Measured advice: the per-operation cost table `pkprof syscalls --calibrate` measures (plain
//! system call against the same operation in a multi-call batch, and the single-call
//! replacements), and the arithmetic that turns it and a cluster's observed counts and times into
//! an estimated saving, in ns and in % of the cluster's time. With a table, a multi-call is
//! suggested only where it is expected to save time; otherwise the single call if that wins, or
//! "leave it" with the reason (`Kind::LeaveIt`). See docs/design.md "Measured advice".
//!
//! The model (all costs are medians of repeated measures, with their p25..p75 spread):
//! - an op of kind k costs `plain(k)` as a system call (crossing included) and `batched(k)` more
//!   per extra op inside a batch, which costs `fixed(k)` once (the `io_uring_enter`, the ring's
//!   bookkeeping, an io-wq worker's wake-up): a batch of ops S costs
//!   `max(fixed over S) + sum(batched over S)`;
//! - a cluster batched as `batches` batches over `ops` ops (per path position) saves
//!   `sum over positions(ops_i * (plain_i - batched_i)) - batches * fixed`, where
//!   `ops - batches` is its `crossings_saved` (see `clusters`);
//! - `batched` is an op's cost in one linked chain (the calibration's batch of N is one chain),
//!   so it holds a link: what the op costs more when io_uring issues it from task work after
//!   the one before it completes. A batch of independent chains (`run_chains`: several
//!   iterations on different files or sockets, `Links::Chains`) pays no link into the first op
//!   of each chain but the batch's first, and saves `(chains - batches) * link` more, `link`
//!   being measured per op against the same batch as independent chains of one
//!   (`OpCost::unlinked`);
//! - a single call that replaces a read/write loop saves `iterations * (plain - single)` per
//!   calibrated iteration (4 KiB); a vector call (writev, preadv, close_range, ...) that merges a
//!   run saves `crossings_saved * (plain(op) - single)`, `single` being its cost per extra element;
//! - the cluster's time is its calls times their observed mean time (the collector's, from
//!   entry to exit) plus one calibrated crossing (`getppid`), which the collector does not see;
//!   without observed times (`--no-time`) the calibrated plain cost.
//!
//! The range of an estimate takes each cost at the end of its spread that favours (high) or
//! disfavours (low) the replacement; it is `noisy` when a cost it uses has a spread over
//! `NOISY_SPREAD` of its median. File operations are estimated on the page-cache file, reads and
//! writes on it or on a pipe and socket operations on loopback TCP or a unix socket, whichever
//! the calls' observed times match best (`Targets::pick`), the transfers at the calibrated
//! 4 KiB; `basis` says so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clusters::Cluster;
use crate::graph::Graph;
use crate::suggest::{self, Kind, Shape, Suggestion};

/// The variant of `openat` into, and `close` of, a ring's fixed-file slot: what a batch that
/// hands an openat's file to the calls after it runs (`CostTable::op_in`).
pub const DIRECT_DESCRIPTOR: &str = "direct descriptor";

/// The value of `CostTable::schema`; changes when a field changes meaning or is added.
/// `/2` added `OpCost::unlinked`.
pub const COSTS_SCHEMA: &str = "pkprof-calibration/2";

/// The schemas this pkprof reads: its own, and `/1`, whose tables lack `OpCost::unlinked`
/// (their batches are all priced as linked chains, as before, and the basis says so).
pub const COSTS_SCHEMAS_READ: [&str; 2] = ["pkprof-calibration/1", COSTS_SCHEMA];

/// The replacement of a `Kind::LeaveIt` suggestion.
pub const LEAVE_IT: &str = "keep the calls as they are";

/// A spread wider than this share of the median makes a measure noisy: (p75 - p25) / median.
pub const NOISY_SPREAD: f64 = 0.25;

/// One cost, measured `samples` times: the median and quartiles, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    pub median_ns: f64,
    pub p25_ns: f64,
    pub p75_ns: f64,
    pub samples: u32,
}

impl Measure {
    /// Median and quartiles of `samples` (sorted here); None when there are none or any is not
    /// finite.
    pub fn from_samples(samples: &mut [f64]) -> Option<Measure> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let q = |p: f64| {
            // Linear interpolation between the closest ranks.
            let x = p * (samples.len() - 1) as f64;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            samples[lo] + (samples[hi] - samples[lo]) * (x - lo as f64)
        };
        Some(Measure {
            median_ns: q(0.5),
            p25_ns: q(0.25),
            p75_ns: q(0.75),
            samples: samples.len() as u32,
        })
    }

    /// (p75 - p25) / |median|; infinite for a zero median with any spread.
    pub fn spread(&self) -> f64 {
        let width = self.p75_ns - self.p25_ns;
        if width <= 0.0 {
            0.0
        } else {
            width / self.median_ns.abs()
        }
    }

    pub fn noisy(&self) -> bool {
        self.spread() > NOISY_SPREAD
    }

    /// Whether a measure read back is one `from_samples` could have made: finite and
    /// p25 <= median <= p75. (It may be negative: some measures are differences of two costs.)
    pub fn is_valid(&self) -> bool {
        let all = [self.p25_ns, self.median_ns, self.p75_ns];
        all.iter().all(|v| v.is_finite())
            && self.p25_ns <= self.median_ns
            && self.median_ns <= self.p75_ns
    }
}

/// What the table was measured for: a cached table is used only on the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CalibrationKey {
    /// `uname -r`.
    pub kernel: String,
    /// /proc/cpuinfo's first "model name".
    pub cpu: String,
    pub pkprof_version: String,
}

/// One operation kind on one kind of file: plain and batched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpCost {
    /// The multi-call op: read, write, pread, pwrite, openat, close, statx, fsync, sendmsg,
    /// recvmsg.
    pub op: String,
    /// A key of `CostTable::targets`: file, tmpfs, pipe, unix, tcp.
    pub on: String,
    /// How the batched op was issued: "" (plain descriptors), "fixed file" (the descriptor in
    /// the ring's fixed-file table), "RESOLVE_CACHED" (openat)... The advice uses the cheapest.
    #[serde(default)]
    pub variant: String,
    /// One system call, crossing included.
    pub plain: Measure,
    /// Each op inside a batch, beyond the batch's fixed cost (None: batches unavailable).
    pub batched: Option<Measure>,
    /// The fixed cost of one batch of this op (None: batches unavailable).
    pub batch_fixed: Option<Measure>,
    /// The op batched as independent chains of one (`run_chains`), against `batched`, which is
    /// one linked chain: what a link costs (None: batches unavailable, or a table of schema
    /// `/1`, from before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlinked: Option<Unlinked>,
}

/// One op in a batch of `batch_size` independent ops (chains of one), against the same batch
/// as one linked chain. From the batch of 1 (`t1 = F + b`), the linked batch (`F + N b`) and
/// the unlinked one (`F_u + N b_u`, with `F_u + b_u = t1`): per repeat, `b_u`, `F_u = t1 - b_u`
/// and the link `b - b_u = N (t_linked - t_unlinked) / (N - 1)`, what an op costs more when it
/// waits for the one before it (io_uring issues it from task work once that one completes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Unlinked {
    /// Each op beyond the batch's fixed cost, not linked to another.
    pub batched: Measure,
    /// The fixed cost of one batch in this split (`t1 - batched`).
    pub batch_fixed: Measure,
    /// What linking the op to the one before it adds.
    pub link: Measure,
}

/// A single Linux call measured against the calls it replaces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SingleCallCost {
    /// copy_file_range, writev, readv, preadv, pwritev, close_range, ...
    pub call: String,
    /// What one unit is: "4 KiB read + write iteration", "write (one element more)".
    pub unit: String,
    pub on: String,
    /// The replaced calls, per unit.
    pub plain: Measure,
    /// The single call, per unit.
    pub single: Measure,
}

/// The table `pkprof syscalls --calibrate` measures and caches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostTable {
    pub schema: String,
    pub key: CalibrationKey,
    /// When it was measured (seconds since the epoch).
    pub measured_unix_s: u64,
    /// How long the calibration took, s.
    pub seconds: f64,
    /// "full" or "quick".
    pub mode: String,
    /// Ops per batch in the batched measures.
    pub batch_size: u32,
    /// What ran the batches (`MultiCall::describe`).
    #[serde(default)]
    pub engine: String,
    /// What each `on` is, e.g. file: "page-cache file on ext4 in /var/tmp".
    pub targets: BTreeMap<String, String>,
    /// A system call that does nothing (`getppid`): the crossing.
    pub crossing: Measure,
    /// Why batches could not be measured (io_uring unavailable), if so.
    pub batched_unavailable: Option<String>,
    pub ops: Vec<OpCost>,
    pub single_calls: Vec<SingleCallCost>,
}

impl CostTable {
    /// The op on `on`, in the variant whose batch of `batch_size` costs least per op, among
    /// those a batch can choose freely (not `DIRECT_DESCRIPTOR`: see `op_in`).
    pub fn op(&self, op: &str, on: &str) -> Option<&OpCost> {
        let n = f64::from(self.batch_size.max(1));
        let per_op = |o: &OpCost| match (o.batched, o.batch_fixed) {
            (Some(b), Some(f)) => b.median_ns + f.median_ns / n,
            _ => f64::INFINITY,
        };
        self.ops
            .iter()
            .filter(|o| o.op == op && o.on == on && o.variant != DIRECT_DESCRIPTOR)
            .min_by(|a, b| per_op(a).total_cmp(&per_op(b)))
    }

    /// The op as a batch whose path holds an `openat` runs it: that openat hands its file to
    /// the calls after it only through a direct descriptor, so it and the `close` of that file
    /// are the `DIRECT_DESCRIPTOR` variant when it was calibrated (a table from before it was:
    /// `op`'s choice).
    pub fn op_in(&self, op: &str, on: &str, hands_on: bool) -> Option<&OpCost> {
        let direct = hands_on && (op == "openat" || op == "close");
        direct
            .then(|| {
                self.ops
                    .iter()
                    .find(|o| o.op == op && o.on == on && o.variant == DIRECT_DESCRIPTOR)
            })
            .flatten()
            .or_else(|| self.op(op, on))
    }

    /// The plain system call `op` on `on`: every variant measures it again (the variant changes
    /// only the batched op), and a load spike only adds time, so the lowest median of them.
    pub fn plain(&self, op: &str, on: &str) -> Option<Measure> {
        self.ops
            .iter()
            .filter(|o| o.op == op && o.on == on)
            .map(|o| o.plain)
            .min_by(|a, b| a.median_ns.total_cmp(&b.median_ns))
    }

    pub fn single_call(&self, call: &str) -> Option<&SingleCallCost> {
        self.single_calls.iter().find(|s| s.call == call)
    }

    /// Every measure of the table, for its overall noise.
    fn measures(&self) -> impl Iterator<Item = &Measure> {
        self.measures_and_links(true)
    }

    /// Every measure, the links (`Unlinked::link`) only with `links`.
    fn measures_and_links(&self, links: bool) -> impl Iterator<Item = &Measure> {
        std::iter::once(&self.crossing)
            .chain(
                self.ops
                    .iter()
                    .flat_map(move |o| {
                        let u = o.unlinked.as_ref();
                        [
                            Some(&o.plain),
                            o.batched.as_ref(),
                            o.batch_fixed.as_ref(),
                            u.map(|u| &u.batched),
                            u.map(|u| &u.batch_fixed),
                            u.filter(|_| links).map(|u| &u.link),
                        ]
                    })
                    .flatten(),
            )
            .chain(self.single_calls.iter().flat_map(|s| [&s.plain, &s.single]))
    }

    /// Why a table read back cannot be used: the first measure that is not finite, or not
    /// p25 <= median <= p75, or a direct timing (the crossing, a plain call) that is negative.
    pub fn invalid_measure(&self) -> Option<String> {
        if let Some(m) = self.measures().find(|m| !m.is_valid()) {
            return Some(format!("a measure is not finite or not ordered ({m:?})"));
        }
        std::iter::once(&self.crossing)
            .chain(self.ops.iter().map(|o| &o.plain))
            .chain(self.single_calls.iter().map(|s| &s.plain))
            .find(|m| m.p25_ns < 0.0)
            .map(|m| format!("a timing is negative ({m:?})"))
    }

    /// The measures whose spread tells the machine's noise: all but the links, each a
    /// difference of tens of ns whose spread relative to it says little (its absolute spread
    /// widens an estimate's range instead).
    fn spread_measures(&self) -> impl Iterator<Item = &Measure> {
        self.measures_and_links(false)
    }

    /// The widest spread of any measure (see `Measure::spread`), the links left out.
    pub fn worst_spread(&self) -> f64 {
        self.spread_measures()
            .map(Measure::spread)
            .fold(0.0, f64::max)
    }

    /// Measures whose spread is over `NOISY_SPREAD`, of all (the links left out).
    pub fn noisy_count(&self) -> (usize, usize) {
        let all: Vec<&Measure> = self.spread_measures().collect();
        (all.iter().filter(|m| m.noisy()).count(), all.len())
    }
}

/// What the advice knows about costs.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Costs {
    /// The library's default: no advice on time, and the reports say nothing about it.
    #[default]
    NotGiven,
    /// No table for this machine: why, and how to measure one (shown by the reports).
    Missing(String),
    /// A table, and where it came from (shown by the reports).
    Table {
        table: Box<CostTable>,
        source: String,
    },
}

/// The time a cluster's suggestion is expected to save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Saving {
    /// No estimate, and why (not calibrated, nothing measured for that call...).
    Unknown {
        why: String,
    },
    Estimated(Estimate),
}

/// One replacement the advice weighed for a cluster, and its saving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alternative {
    pub kind: Kind,
    pub replacement: Option<String>,
    pub saving: Saving,
}

/// An estimated saving; negative: the replacement would cost time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Estimate {
    pub saved_ns: i64,
    /// The range from the measures' spreads (see module docs).
    pub saved_low_ns: i64,
    pub saved_high_ns: i64,
    /// The cluster's calls' time, to put the saving in proportion.
    pub cluster_ns: u64,
    /// A cost it uses had a wide spread.
    pub noisy: bool,
    /// The per-op costs it rests on, in words.
    pub basis: String,
}

impl Estimate {
    /// `saved_ns` in % of `cluster_ns` (0 when the cluster took no time).
    pub fn percent(&self) -> f64 {
        if self.cluster_ns == 0 {
            0.0
        } else {
            100.0 * self.saved_ns as f64 / self.cluster_ns as f64
        }
    }

    /// The sum of several clusters' estimates (a group's): the first's basis.
    pub fn sum<'a>(mut all: impl Iterator<Item = &'a Estimate>) -> Option<Estimate> {
        let mut total = all.next()?.clone();
        for e in all {
            total.saved_ns = total.saved_ns.saturating_add(e.saved_ns);
            total.saved_low_ns = total.saved_low_ns.saturating_add(e.saved_low_ns);
            total.saved_high_ns = total.saved_high_ns.saturating_add(e.saved_high_ns);
            total.cluster_ns = total.cluster_ns.saturating_add(e.cluster_ns);
            total.noisy |= e.noisy;
        }
        Some(total)
    }
}

/// The kinds of file a family of ops is priced on, the default first: reads and writes on the
/// page-cache file or a pipe, socket calls on loopback TCP or a unix socket.
const RW_TARGETS: [&str; 2] = ["file", "pipe"];
/// The system calls that make a pipe: reads and writes are priced on a pipe only in a process
/// seen making one (`Evidence`).
pub const PIPE_CALLS: [&str; 2] = ["pipe", "pipe2"];
const SOCKET_TARGETS: [&str; 2] = ["tcp", "unix"];

/// What the profile shows of a cluster's process beyond its thread's graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evidence {
    /// A thread of the process made a pipe (`PIPE_CALLS`). Without one, its reads and writes
    /// are priced on the page-cache file whatever their times: a copy of a large file whose
    /// reads are slowed by the disk (a source not in the page cache) or its writes sped up
    /// looks like a pipe relay by times alone, and was priced as a splice (16 MiB copy:
    /// copy_file_range estimated at 0.59 of the measured saving, the multi-call at +6 µs
    /// against -46 ms). A pipe inherited from the parent (a shell's `|`) is then priced as a
    /// file; `basis` says which.
    pub pipes: bool,
}

impl Evidence {
    /// Every kind of file possible (what the tables of the tests assume).
    pub const ANY: Evidence = Evidence { pipes: true };
}

/// Where a cluster's ops are priced (see module docs): one kind of file for its reads and
/// writes and one for its socket calls.
#[derive(Debug, Clone, Copy)]
struct Targets {
    rw: &'static str,
    socket: &'static str,
}

impl Default for Targets {
    fn default() -> Targets {
        Targets {
            rw: RW_TARGETS[0],
            socket: SOCKET_TARGETS[0],
        }
    }
}

impl Targets {
    /// The target op `op` is estimated on.
    fn of(&self, op: &str) -> &'static str {
        match op {
            "sendmsg" | "recvmsg" => self.socket,
            "read" | "write" => self.rw,
            _ => "file",
        }
    }

    /// The profile does not say what a descriptor is, but the calls' observed times do: each
    /// family is priced on the kind of file whose calibrated plain costs match the observed
    /// ones best (observed mean + one crossing; least squares of the log ratios over the
    /// family's positions, about their mean when it has two kinds of call or more), among the
    /// kinds where all of them are calibrated and that `evidence` allows. Without observed
    /// times (`--no-time`), the defaults.
    fn pick(table: &CostTable, c: &Cluster, obs: &Observed, evidence: Evidence) -> Targets {
        let pick = |family: &[&'static str], ops: &[&str]| -> &'static str {
            let seen: Vec<(&str, f64)> = c
                .path
                .iter()
                .zip(&obs.mean_ns)
                .filter_map(|(n, &mean)| {
                    let (op, _) = suggest::multicall_op(&n.name)?;
                    (ops.contains(&op) && mean > 0.0)
                        .then_some((op, mean + table.crossing.median_ns))
                })
                .collect();
            // The log ratios observed / calibrated; with two kinds of call or more, only their
            // spread counts: a loaded machine stretches every call by about the same factor,
            // so the ratio of a write to a read tells a pipe from a file where their absolute
            // times may not.
            let score = |t: &str| -> Option<f64> {
                let d: Vec<f64> = seen
                    .iter()
                    .map(|&(op, ns)| {
                        let plain = table.plain(op, t)?.median_ns;
                        (plain > 0.0).then(|| ns.ln() - plain.ln())
                    })
                    .collect::<Option<_>>()?;
                let distinct = seen.iter().any(|&(op, _)| op != seen[0].0);
                let mean = if distinct {
                    d.iter().sum::<f64>() / d.len() as f64
                } else {
                    0.0
                };
                Some(d.iter().map(|x| (x - mean).powi(2)).sum())
            };
            if seen.is_empty() {
                return family[0];
            }
            family
                .iter()
                .filter(|&&t| t != "pipe" || evidence.pipes)
                .filter_map(|&t| score(t).map(|s| (t, s)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(family[0], |(t, _)| t)
        };
        Targets {
            rw: pick(&RW_TARGETS, &["read", "write"]),
            socket: pick(&SOCKET_TARGETS, &["sendmsg", "recvmsg"]),
        }
    }
}

/// `1.52 µs` / `820 ns`.
pub fn format_ns(ns: f64) -> String {
    if ns.abs() >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if ns.abs() >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// `2026-11-24 20:31 UTC` from seconds since the epoch (civil-from-days, H. Hinnant's algorithm:
/// the one date the reports print does not warrant a date crate).
pub fn format_time(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60
    )
}

/// How a cluster's calls are spread over its path, from the thread's graph.
struct Observed {
    /// Mean time per call of each path position (collector's time, no crossing), ns.
    mean_ns: Vec<f64>,
    /// Calls of each path position in the cluster.
    calls: Vec<f64>,
    /// Where its ops are priced (`Targets::pick`).
    targets: Targets,
}

fn observe(c: &Cluster, g: &Graph) -> Observed {
    let mean_ns = c
        .path
        .iter()
        .map(|n| {
            g.index_of(n)
                .map(|i| &g.nodes[i])
                .filter(|s| s.calls > 0)
                .map_or(0.0, |s| s.total_ns as f64 / s.calls as f64)
        })
        .collect();
    let calls = match c.shape {
        // Every call of the syscall is taken to be in a run (see `batches`).
        Shape::SelfLoop => vec![g
            .index_of(&c.path[0])
            .map_or(c.count + 1, |i| g.nodes[i].calls.max(c.count + 1))
            as f64],
        _ => vec![c.count as f64; c.path.len()],
    };
    Observed {
        mean_ns,
        calls,
        targets: Targets::default(),
    }
}

/// The cluster's time: calls x (observed mean + one crossing), or the plain cost without times.
fn cluster_ns(table: &CostTable, c: &Cluster, obs: &Observed) -> u64 {
    let mut total = 0.0;
    for (i, n) in c.path.iter().enumerate() {
        let calls = obs.calls[i.min(obs.calls.len() - 1)];
        let per = if obs.mean_ns[i] > 0.0 {
            obs.mean_ns[i] + table.crossing.median_ns
        } else {
            suggest::multicall_op(&n.name)
                .and_then(|(op, _)| table.op(op, obs.targets.of(op)))
                .and_then(|o| table.plain(&o.op, &o.on))
                .map_or(table.crossing.median_ns, |p| p.median_ns)
        };
        total += calls * per;
    }
    total.max(0.0) as u64
}

/// (median, low, high) of a saving; low and high take the spread's ends.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Triple {
    mid: f64,
    low: f64,
    high: f64,
}

impl Triple {
    /// `gain - cost`, each scaled by `n`.
    fn gain(gain: &Measure, cost: &Measure, n: f64) -> Triple {
        Triple {
            mid: n * (gain.median_ns - cost.median_ns),
            low: n * (gain.p25_ns - cost.p75_ns),
            high: n * (gain.p75_ns - cost.p25_ns),
        }
    }

    fn add(self, o: Triple) -> Triple {
        Triple {
            mid: self.mid + o.mid,
            low: self.low + o.low,
            high: self.high + o.high,
        }
    }
}

/// How the ops of a batch are linked.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Links {
    /// One linked chain per batch (`MultiCall::run`): what the table's `batched` measures.
    OneChain,
    /// Independent chains (`run_chains`), this many in all the batches: each chain after the
    /// first of its batch does not wait for the one before it, and saves the link into its
    /// first op (`OpCost::unlinked`).
    Chains(f64),
}

/// The estimate of batching the cluster as `suggestion` (Multicall or PartialMulticall) says,
/// the batches' ops linked as `links` says.
fn estimate_batch(
    table: &CostTable,
    c: &Cluster,
    obs: &Observed,
    crossings_saved: u64,
    links: Links,
) -> Result<Estimate, String> {
    if let Some(why) = &table.batched_unavailable {
        return Err(format!("batched ops are unavailable here: {why}"));
    }
    let mut saving = Triple::default();
    let mut ops_total = 0.0;
    let (mut fixed_mid, mut fixed_low, mut fixed_high, mut fixed_n) = (0.0, 0.0, 0.0, 0.0);
    let mut noisy = false;
    let mut basis = Vec::new();
    let mut targets: Vec<&str> = Vec::new();
    // The link of the op that starts each iteration's chain (see `Links::Chains`), and
    // whether the table measured it (not in a table of schema /1).
    let mut start_link: Option<Option<Measure>> = None;
    let hands_on = c
        .path
        .iter()
        .any(|n| suggest::multicall_op(&n.name).is_some_and(|(op, _)| op == "openat"));
    for (i, n) in c.path.iter().enumerate() {
        let Some((op, _)) = suggest::multicall_op(&n.name) else {
            continue; // stays a plain call: no change
        };
        let on = obs.targets.of(op);
        if !targets.contains(&on) {
            targets.push(on);
        }
        let cost = table
            .op_in(op, on, hands_on)
            .ok_or_else(|| format!("{op} on a {on} was not calibrated"))?;
        let (Some(batched), Some(fixed)) = (cost.batched, cost.batch_fixed) else {
            return Err(format!("a batched {op} was not calibrated"));
        };
        let ops = obs.calls[i.min(obs.calls.len() - 1)];
        ops_total += ops;
        let plain = table.plain(op, on).unwrap_or(cost.plain);
        saving = saving.add(Triple::gain(&plain, &batched, ops));
        // A batch pays the dearest set-up of its ops (an op handed to an io-wq worker makes the
        // whole batch wait for that worker's wake-up), not their average.
        if fixed.median_ns > fixed_mid {
            fixed_mid = fixed.median_ns;
            fixed_low = fixed.p75_ns;
            fixed_high = fixed.p25_ns;
        }
        fixed_n += ops;
        // An iteration starts with its openat (whose file the others use), else with the
        // path's first call.
        if start_link.is_none() || (hands_on && op == "openat") {
            start_link = Some(cost.unlinked.map(|u| u.link));
        }
        noisy |= plain.noisy() || batched.noisy() || fixed.noisy();
        let variant = if cost.variant.is_empty() {
            String::new()
        } else {
            format!(" ({})", cost.variant)
        };
        let line = format!(
            "a batched {op}{variant} costs {} here against {} plain",
            format_ns(batched.median_ns),
            format_ns(plain.median_ns)
        );
        if !basis.contains(&line) {
            basis.push(line);
        }
    }
    if fixed_n == 0.0 {
        return Err("no call of it can be batched".into());
    }
    // ops - batches = crossings saved (see `clusters`); at least one batch.
    let batches = (ops_total - crossings_saved as f64).max(1.0);
    let (fm, fl, fh) = (fixed_mid, fixed_low, fixed_high);
    saving.mid -= batches * fm;
    saving.low -= batches * fl;
    saving.high -= batches * fh;
    let on: Vec<&str> = targets
        .iter()
        .map(|t| table.targets.get(*t).map_or(*t, |s| s.as_str()))
        .collect();
    let mut chains_basis = String::new();
    if let Links::Chains(chains) = links {
        // The table's batched cost is an op's in one linked chain: each chain of a batch
        // after its first does not wait for the one before it and saves the link into its
        // first op. (An op handed to io-wq links dearly, a wake-up of the worker and one of
        // the caller per op, 10 µs here; the first ops of independent chains go to the
        // workers together and save that too.)
        let unlinked = (chains - batches).max(0.0);
        match start_link.flatten() {
            Some(l) => {
                saving = saving.add(Triple {
                    mid: unlinked * l.median_ns,
                    low: unlinked * l.p25_ns,
                    high: unlinked * l.p75_ns,
                });
                chains_basis = format!(
                    "; {} independent chains, one per iteration: each not linked to the one \
                     before saves the link into its first op ({})",
                    chains.round(),
                    format_ns(l.median_ns)
                );
            }
            _ => {
                chains_basis = "; priced as one linked chain per batch: links were not \
                                calibrated (a table of pkprof-calibration/1; calibrate again)"
                    .into();
            }
        }
    }
    let basis = format!(
        "{}, plus {} per batch ({} batches of {:.1} ops; on a {}){chains_basis}",
        basis.join(", "),
        format_ns(fm),
        batches.round(),
        ops_total / batches,
        on.join(" and a ")
    );
    Ok(estimate(table, c, obs, saving, noisy, basis))
}

/// The single call of `replacement` (as `suggest` names it) that the table measured.
fn single_call_name(replacement: &str) -> &str {
    // A read -> write loop: the file-to-file case is the one calibrated.
    if replacement.starts_with("copy_file_range") {
        "copy_file_range"
    } else {
        replacement
    }
}

/// The estimate of the single call `suggestion` names.
fn estimate_single(
    table: &CostTable,
    c: &Cluster,
    obs: &Observed,
    replacement: &str,
    crossings_saved: u64,
) -> Result<Estimate, String> {
    // A read -> write loop between pipes is a splice; elsewhere the file-to-file copy.
    let call = if replacement.starts_with("copy_file_range") && obs.targets.rw == "pipe" {
        "splice (pipe)"
    } else {
        single_call_name(replacement)
    };
    if call == "splice" {
        // `suggest` names splice alone for data read from a socket: socket -> pipe -> fd, two
        // calls per chunk, which the pipe-to-pipe figure does not measure.
        return Err(
            "splice was calibrated between two pipes only; from a socket it takes two \
                    calls per chunk (socket -> pipe -> fd): not estimated"
                .into(),
        );
    }
    let call = call.strip_suffix(" (pipe)").unwrap_or(call);
    let cost = table
        .single_call(call)
        .ok_or_else(|| format!("{call} was not calibrated"))?;
    // A copy loop saves per iteration; a merged run per crossing saved.
    let units = if call == "copy_file_range" || call == "sendfile" || call == "splice" {
        c.count as f64
    } else {
        crossings_saved as f64
    };
    let saving = Triple::gain(&cost.plain, &cost.single, units);
    let basis = format!(
        "{call} costs {} per {} here against {} for the calls it replaces ({})",
        format_ns(cost.single.median_ns),
        cost.unit,
        format_ns(cost.plain.median_ns),
        table
            .targets
            .get(&cost.on)
            .map_or(cost.on.as_str(), |s| s.as_str())
    );
    let noisy = cost.plain.noisy() || cost.single.noisy();
    Ok(estimate(table, c, obs, saving, noisy, basis))
}

fn estimate(
    table: &CostTable,
    c: &Cluster,
    obs: &Observed,
    saving: Triple,
    noisy: bool,
    basis: String,
) -> Estimate {
    Estimate {
        saved_ns: saving.mid.round() as i64,
        saved_low_ns: saving.low.round() as i64,
        saved_high_ns: saving.high.round() as i64,
        cluster_ns: cluster_ns(table, c, obs),
        noisy,
        basis,
    }
}

/// What an estimate shows: no change saves more than the calls it changes took, so a saving (or
/// its range) above the cluster's time is capped there, saying so. (A calibrated plain cost above
/// the observed one, the calibration colder or busier than the program, would promise more.)
/// Applied after the alternatives are ranked, so two that both exceed it keep their order.
fn capped(mut e: Estimate) -> Estimate {
    let cap = i64::try_from(e.cluster_ns).unwrap_or(i64::MAX);
    if e.saved_high_ns > cap {
        e.basis.push_str(
            "; capped at the cluster's measured time (the calibrated plain cost exceeds what \
             was observed)",
        );
        e.saved_ns = e.saved_ns.min(cap);
        e.saved_low_ns = e.saved_low_ns.min(cap);
        e.saved_high_ns = cap;
    }
    e
}

/// The measured advice for one cluster of the thread graph `g`: its suggestion (kept, replaced
/// by the batch or single call that wins, or `Kind::LeaveIt`) and the saving expected.
pub(crate) fn advise(
    table: &CostTable,
    c: &Cluster,
    g: &Graph,
    evidence: Evidence,
) -> (Suggestion, Saving, Vec<Alternative>) {
    let (s, saving, tried) = choose(table, c, g, evidence);
    let saving = match saving {
        Saving::Estimated(e) => Saving::Estimated(capped(e)),
        other => other,
    };
    let alternatives = tried
        .into_iter()
        .map(|(s, e)| Alternative {
            kind: s.kind,
            replacement: s.replacement,
            saving: match e {
                Ok(e) => Saving::Estimated(capped(e)),
                Err(why) => Saving::Unknown { why },
            },
        })
        .collect();
    (s, saving, alternatives)
}

type Tried = Vec<(Suggestion, Result<Estimate, String>)>;

/// ` of N iterations per batch` for a batch of several iterations, else nothing.
fn per_batch(s: &Suggestion) -> String {
    s.replacement
        .as_deref()
        .and_then(|r| r.split_once(", "))
        .map_or(String::new(), |(_, per)| format!(" of {per}"))
}

/// Iterations of loop cluster `c` in a row (occurrences of a chain one right after the other),
/// on average: its count over the times it was entered. A loop is entered by a start of an
/// iteration (p0 -> p1) that did not follow its last call (without trigram data: a call of p0
/// that did not follow it); a chain's occurrence is an entry unless its last call led straight
/// into the next one's first (the edge last -> p0). At least 1.
fn iterations_per_run(c: &Cluster, g: &Graph) -> f64 {
    let idx: Option<Vec<usize>> = c.path.iter().map(|n| g.index_of(n)).collect();
    let Some(idx) = idx.filter(|i| i.len() >= 2) else {
        return 1.0;
    };
    let (p0, p1, last) = (idx[0], idx[1], idx[idx.len() - 1]);
    let entries = match c.shape {
        Shape::Chain => c.count.saturating_sub(g.weight(last, p0)),
        _ if g.has_trigrams() => g.weight(p0, p1).saturating_sub(g.trigram(last, p0, p1)),
        _ => g.nodes[p0].calls.saturating_sub(g.weight(last, p0)),
    };
    (c.count as f64 / entries.max(1) as f64).max(1.0)
}

/// The batch of several iterations of loop `c` (occurrences of chain `c` that follow each
/// other) per multi-call, up to the calibrated batch size and at most the iterations seen in a
/// row: the suggestion and the crossings it saves. None for a self-loop (its run is batched
/// whole already), a path with calls the library cannot batch, or one that runs one iteration
/// at a time. The batch's links: independent chains, one per iteration, where the iterations
/// work on different files or sockets (`independent_iterations`), else one linked chain.
fn iterations_batch(table: &CostTable, c: &Cluster, g: &Graph) -> Option<(Suggestion, u64, Links)> {
    if c.shape == Shape::SelfLoop
        || c.path
            .iter()
            .any(|n| suggest::multicall_op(&n.name).is_none())
    {
        return None;
    }
    let run = iterations_per_run(c, g);
    let k = run.min(f64::from(table.batch_size.max(1))).floor();
    if k < 2.0 {
        return None;
    }
    let calls = c.count * c.path.len() as u64;
    let batches = (c.count as f64 / k).ceil() as u64;
    let suggestion = Suggestion {
        kind: Kind::Multicall,
        replacement: Some(format!(
            "pkprof multi-call (io_uring), {k:.0} iterations per batch"
        )),
        why: format!(
            "all its calls are ops of pkprof's multi-call library and the loop runs about \
             {run:.0} iterations in a row: one multi-call runs {k:.0} of them, as independent \
             chains (run_chains; a direct descriptor hands an openat's file to the calls after \
             it) where the iterations work on different files or sockets, or as one linked chain \
             where each needs the one before (the same descriptors, in order)"
        ),
        unbatchable: Vec::new(),
    };
    let links = if independent_iterations(c) {
        Links::Chains(c.count as f64)
    } else {
        Links::OneChain
    };
    Some((suggestion, calls.saturating_sub(batches), links))
}

/// Whether a batch of the loop's iterations runs them as independent chains: the profile does
/// not say which descriptors the calls used (without `--args`), so by the ops. An iteration
/// that opens its file hands it on through a direct descriptor and needs nothing of the one
/// before; socket calls batched several at a time answer requests on different connections
/// (on one connection the next request is rarely there yet). Reads and writes otherwise are
/// taken to use the same descriptors in order (a copy, a pipe relay): one linked chain.
fn independent_iterations(c: &Cluster) -> bool {
    c.path.iter().any(|n| {
        suggest::multicall_op(&n.name)
            .is_some_and(|(op, _)| matches!(op, "openat" | "sendmsg" | "recvmsg"))
    })
}

fn choose(
    table: &CostTable,
    c: &Cluster,
    g: &Graph,
    evidence: Evidence,
) -> (Suggestion, Saving, Tried) {
    let mut obs = observe(c, g);
    obs.targets = Targets::pick(table, c, &obs, evidence);
    let s = &c.suggestion;
    let mut tried: Tried = Vec::new();
    match s.kind {
        Kind::Multicall | Kind::PartialMulticall => {
            let one = Links::OneChain;
            tried.push((
                s.clone(),
                estimate_batch(table, c, &obs, c.crossings_saved, one),
            ));
            if let Some((batch, saved, links)) = iterations_batch(table, c, g) {
                tried.push((batch, estimate_batch(table, c, &obs, saved, links)));
            }
        }
        Kind::SingleCall => {
            let replacement = s.replacement.as_deref().unwrap_or_default();
            let single = estimate_single(table, c, &obs, replacement, c.crossings_saved);
            tried.push((s.clone(), single));
            // The batch the table would suggest without the single call, per occurrence.
            if let Some(batch) = suggest::batch_plan(c.shape, &c.path) {
                let saved = batch.saved_per_count * c.count;
                let e = estimate_batch(table, c, &obs, saved, Links::OneChain);
                tried.push((batch.suggestion, e));
            }
            if let Some((batch, saved, links)) = iterations_batch(table, c, g) {
                tried.push((batch, estimate_batch(table, c, &obs, saved, links)));
            }
        }
        Kind::Epoll => {
            let why = "epoll saves work per call, not crossings: not estimated".to_string();
            return (s.clone(), Saving::Unknown { why }, tried);
        }
        Kind::None | Kind::LeaveIt => {
            let why = "nothing replaces it".to_string();
            return (s.clone(), Saving::Unknown { why }, tried);
        }
    }
    let best = tried
        .iter()
        .filter_map(|(s, e)| e.as_ref().ok().map(|e| (s, e)))
        .max_by_key(|(_, e)| e.saved_ns);
    // An unmeasured single call is kept unless a batch is measured to win: nothing shows that
    // a batch that loses would beat it.
    let unmeasured_single = match &tried[..] {
        [(first, Err(why)), ..] if first.kind == Kind::SingleCall => Some(why.clone()),
        _ => None,
    };
    match best {
        Some((s, e)) if e.saved_ns > 0 => {
            let (s, e) = (s.clone(), e.clone());
            (s, Saving::Estimated(e), tried)
        }
        _ if unmeasured_single.is_some() => {
            let why = unmeasured_single.unwrap_or_default();
            (s.clone(), Saving::Unknown { why }, tried)
        }
        Some((best, e)) => {
            let what = match best.kind {
                Kind::SingleCall => best.replacement.clone().unwrap_or_default(),
                _ => format!("a pkprof multi-call (io_uring){}", per_batch(best)),
            };
            let others: Vec<String> = tried
                .iter()
                .filter(|(s, _)| s != best)
                .map(|(s, e)| {
                    let name = match s.kind {
                        Kind::SingleCall => s.replacement.clone().unwrap_or_default(),
                        _ => format!("a multi-call{}", per_batch(s)),
                    };
                    match e {
                        Ok(e) => format!("{name} would save {}", format_ns(e.saved_ns as f64)),
                        Err(why) => format!("{name}: {why}"),
                    }
                })
                .collect();
            let others = if others.is_empty() {
                String::new()
            } else {
                format!("; {}", others.join("; "))
            };
            let why = format!(
                "{what} would cost {} more than the calls it replaces here: {}{others}",
                format_ns(-(e.saved_ns as f64)),
                e.basis
            );
            let leave = Suggestion {
                kind: Kind::LeaveIt,
                replacement: Some(LEAVE_IT.into()),
                why,
                unbatchable: best.unbatchable.clone(),
            };
            let e = e.clone();
            (leave, Saving::Estimated(e), tried)
        }
        None => {
            let reasons: Vec<&str> = tried
                .iter()
                .filter_map(|(_, e)| e.as_ref().err().map(String::as_str))
                .collect();
            let why = reasons.join("; ");
            // A batch that cannot be run here is never suggested.
            if table.batched_unavailable.is_some() && s.kind != Kind::SingleCall {
                let leave = Suggestion {
                    kind: Kind::LeaveIt,
                    replacement: Some(LEAVE_IT.into()),
                    why: why.clone(),
                    unbatchable: s.unbatchable.clone(),
                };
                return (leave, Saving::Unknown { why }, tried);
            }
            (s.clone(), Saving::Unknown { why }, tried)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Node;
    use crate::{Analysis, Options, SyscallProfile, TraceBuilder};

    fn m(median: f64) -> Measure {
        Measure {
            median_ns: median,
            p25_ns: median * 0.9,
            p75_ns: median * 1.1,
            samples: 9,
        }
    }

    fn op(op: &str, on: &str, plain: f64, batched: f64, fixed: f64) -> OpCost {
        OpCost {
            op: op.into(),
            on: on.into(),
            variant: String::new(),
            plain: m(plain),
            batched: Some(m(batched)),
            batch_fixed: Some(m(fixed)),
            unlinked: None,
        }
    }

    /// pread 800 ns plain, 1500 batched: never worth it. statx 2000 plain, 600 batched + 700
    /// per batch. copy_file_range 900 ns per 4 KiB against 2500 for read + write.
    /// How long each call of the fixtures' traces took: above every calibrated plain cost of
    /// `table()`, as a program's calls are when the calibration ran on the same machine.
    const OBSERVED_NS: u64 = 2500;

    fn table() -> CostTable {
        CostTable {
            schema: COSTS_SCHEMA.into(),
            key: CalibrationKey {
                kernel: "6.18".into(),
                cpu: "test".into(),
                pkprof_version: "0".into(),
            },
            measured_unix_s: 0,
            seconds: 1.0,
            mode: "quick".into(),
            batch_size: 16,
            engine: "io_uring".into(),
            targets: BTreeMap::new(),
            crossing: m(100.0),
            batched_unavailable: None,
            ops: vec![
                op("pread", "file", 800.0, 1500.0, 700.0),
                op("read", "file", 1000.0, 1600.0, 700.0),
                op("write", "file", 1500.0, 4000.0, 700.0),
                op("statx", "file", 2000.0, 600.0, 700.0),
                op("close", "file", 300.0, 200.0, 700.0),
            ],
            single_calls: vec![SingleCallCost {
                call: "copy_file_range".into(),
                unit: "4 KiB read + write iteration".into(),
                on: "file".into(),
                plain: m(2500.0),
                single: m(900.0),
            }],
        }
    }

    /// A thread of `rounds` repeats of `names`, each call taking `ns`.
    fn analysis(names: &[&str], rounds: usize, ns: u64) -> Analysis {
        let mut t = TraceBuilder::new(1, 1, "t");
        for _ in 0..rounds {
            for (i, n) in names.iter().enumerate() {
                t.call(&Node::new(i as u32, *n), false, ns, None);
            }
        }
        let profile = SyscallProfile {
            target: "test".into(),
            threads: vec![t.finish()],
            ..SyscallProfile::default()
        };
        Analysis::new(&profile, &Options::default())
    }

    fn advised(names: &[&str], rounds: usize) -> (Suggestion, Saving) {
        let a = analysis(names, rounds, OBSERVED_NS);
        let c = &a.clusters[0];
        let (s, saving, _) = advise(&table(), c, &a.threads[0].graph, Evidence::ANY);
        (s, saving)
    }

    /// Absurd costs (1e30 ns, as a hand-edited cache file may hold) give absurd estimates, never
    /// an overflow panic, in the advice, the sums and both reports.
    #[test]
    fn absurd_costs_do_not_panic() {
        let mut t = table();
        t.crossing = m(1e30);
        t.ops.push(op("statx", "file", 1e30, -1e30, 1e30));
        t.single_calls[0].plain = m(-1e30);
        let a = analysis(&["statx", "close"], 100, OBSERVED_NS).with_costs(Costs::Table {
            table: Box::new(t.clone()),
            source: "test".into(),
        });
        let mut out = Vec::new();
        crate::render::text::write(&a, &mut out).unwrap();
        crate::render::json::write(&a, &mut out).unwrap();
        let (_, saving, _) = advise(&t, &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        if let Saving::Estimated(e) = saving {
            let sum = Estimate::sum([&e, &e, &e].into_iter()).unwrap();
            assert!(sum.saved_ns.unsigned_abs() >= e.saved_ns.unsigned_abs());
        }
        let huge = Estimate {
            saved_ns: i64::MAX,
            saved_low_ns: i64::MIN,
            saved_high_ns: i64::MAX,
            cluster_ns: u64::MAX,
            noisy: false,
            basis: String::new(),
        };
        let sum = Estimate::sum([&huge, &huge].into_iter()).unwrap();
        assert_eq!((sum.saved_ns, sum.saved_low_ns), (i64::MAX, i64::MIN));
    }

    /// A measure read back must be finite and ordered; a direct timing must not be negative.
    #[test]
    fn invalid_measures_are_named() {
        assert!(table().invalid_measure().is_none());
        let mut t = table();
        t.ops[0].batched = Some(Measure {
            median_ns: 1.0,
            p25_ns: 2.0,
            p75_ns: 3.0,
            samples: 3,
        });
        assert!(t.invalid_measure().is_some());
        let mut t = table();
        t.crossing.p75_ns = f64::NAN;
        assert!(t.invalid_measure().is_some());
        let mut t = table();
        t.crossing = m(-5.0);
        t.crossing.p25_ns = -6.0;
        t.crossing.p75_ns = -4.0;
        assert!(t.invalid_measure().unwrap().contains("negative"));
    }

    /// The cheapest variant of an op is the one estimated with, and named.
    #[test]
    fn the_cheapest_variant_is_used() {
        let mut t = table();
        let mut fixed = op("statx", "file", 2000.0, 500.0, 700.0);
        fixed.variant = "fixed file".into();
        t.ops.push(fixed);
        assert_eq!(t.op("statx", "file").unwrap().variant, "fixed file");
        assert_eq!(t.op("pread", "file").unwrap().variant, "");
        let a = analysis(&["statx", "close"], 100, OBSERVED_NS);
        let (_, saving, _) = advise(&t, &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        let Saving::Estimated(e) = saving else {
            panic!("{saving:?}")
        };
        assert!(
            e.basis
                .contains("a batched statx (fixed file) costs 500 ns"),
            "{}",
            e.basis
        );
        // Its plain statx came out at 20 µs (a load spike): the other variant's 2 µs is used.
        t.ops.last_mut().unwrap().plain = m(20_000.0);
        assert_eq!(t.plain("statx", "file").unwrap().median_ns, 2000.0);
        let (_, saving, _) = advise(&t, &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        let Saving::Estimated(e2) = saving else {
            panic!("{saving:?}")
        };
        assert_eq!(e2.saved_ns, e.saved_ns, "{}", e2.basis);
        assert!(
            e2.basis.contains("costs 500 ns here against 2.00 µs plain"),
            "{}",
            e2.basis
        );
    }

    /// A batch whose path holds an openat hands its file on through a direct descriptor: the
    /// openat and the close are priced as the direct-descriptor variant even where the plain
    /// descriptor's is cheaper; a batch without an openat never uses that variant.
    #[test]
    fn an_openat_that_hands_its_file_on_is_priced_as_a_direct_descriptor() {
        let mut t = table();
        t.ops.push(op("openat", "file", 2500.0, 1000.0, 700.0));
        let mut direct = op("openat", "file", 2500.0, 1400.0, 900.0);
        direct.variant = DIRECT_DESCRIPTOR.into();
        t.ops.push(direct);
        let mut direct = op("close", "file", 300.0, 100.0, 500.0);
        direct.variant = DIRECT_DESCRIPTOR.into();
        t.ops.push(direct);
        assert_eq!(t.op("openat", "file").unwrap().variant, "");
        assert_eq!(t.op("close", "file").unwrap().variant, "");
        let a = analysis(&["openat", "read", "close"], 100, OBSERVED_NS);
        let c = &a.clusters[0];
        let (_, _, tried) = advise(&t, c, &a.threads[0].graph, Evidence::ANY);
        let Saving::Estimated(e) = &tried[0].saving else {
            panic!("{tried:?}")
        };
        assert!(
            e.basis.contains(
                "a batched openat (direct descriptor) costs 1.40 µs here against 2.50 µs"
            ),
            "{}",
            e.basis
        );
        assert!(
            e.basis
                .contains("a batched close (direct descriptor) costs 100 ns"),
            "{}",
            e.basis
        );
        // Per iteration: openat 2500 - 1400, read 1000 - 1600, close 300 - 100; the dearest
        // fixed cost of the three (the direct openat's 900) once per batch.
        let ops = 3 * c.count as i64;
        let batches = ops - c.crossings_saved as i64;
        let want = c.count as i64 * (1100 - 600 + 200) - batches * 900;
        assert_eq!(e.saved_ns, want, "{}", e.basis);
        // Without an openat, the close is the plain descriptor's.
        let a = analysis(&["statx", "close"], 100, OBSERVED_NS);
        let (_, saving, _) = advise(&t, &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        let Saving::Estimated(e) = saving else {
            panic!("{saving:?}")
        };
        assert!(!e.basis.contains("direct descriptor"), "{}", e.basis);
    }

    /// No change saves more than its calls took: with calls observed at 500 ns, below the
    /// calibrated plain costs, the batch's 145.1 µs is capped at the cluster's 120 µs, its range
    /// too, and the basis says so.
    #[test]
    fn a_saving_is_capped_at_the_clusters_time() {
        let a = analysis(&["statx", "close"], 100, 500);
        let c = &a.clusters[0];
        let (_, _, tried) = advise(&table(), c, &a.threads[0].graph, Evidence::ANY);
        let e = tried
            .iter()
            .find_map(|alt| match &alt.saving {
                Saving::Estimated(e) if e.basis.contains("capped") => Some(e),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no capped estimate in {tried:?}"));
        // 100 occurrences x 2 calls x (500 observed + 100 crossing).
        assert_eq!(e.cluster_ns, 120_000);
        assert_eq!(e.saved_ns, 120_000);
        assert!(
            e.saved_low_ns <= 120_000 && e.saved_high_ns == 120_000,
            "{e:?}"
        );
        assert!((e.percent() - 100.0).abs() < 1e-9);
    }

    /// The text report says which table it used, each cluster's time saved, and "unknown"
    /// without a table; without costs it says nothing about time (the library's default).
    #[test]
    fn reports_show_the_table_and_the_savings() {
        let text = |costs: Costs| {
            let a = analysis(&["statx", "close"], 100, OBSERVED_NS).with_costs(costs);
            let mut out = Vec::new();
            crate::render::text::write(&a, &mut out).unwrap();
            let mut json = Vec::new();
            crate::render::json::write(&a, &mut json).unwrap();
            (
                String::from_utf8(out).unwrap(),
                String::from_utf8(json).unwrap(),
            )
        };
        let (t, j) = text(Costs::NotGiven);
        assert!(
            !t.contains("Time saved") && !t.contains("time saved"),
            "{t}"
        );
        assert!(!j.contains("\"costs\"") && !j.contains("\"saving\""), "{j}");
        let (t, j) = text(Costs::Missing("run --calibrate".into()));
        assert!(t.contains("Time saved: unknown: run --calibrate"), "{t}");
        assert!(
            t.contains("time saved: unknown (no cost table for this machine)"),
            "{t}"
        );
        assert!(j.contains("\"missing\": \"run --calibrate\""), "{j}");
        let (t, j) = text(Costs::Table {
            table: Box::new(table()),
            source: "/tmp/c.json".into(),
        });
        assert!(
            t.contains(
                "Time saved: estimated from the quick calibration of 1970-01-01 00:00 UTC \
                        (/tmp/c.json, kernel 6.18; spread (p25..p75 / median) at most 20%)"
            ),
            "{t}"
        );
        // The 100 statx -> close in a row are batched 16 to a multi-call: (2000 - 600) +
        // (300 - 200) = 1500 ns per occurrence, less 7 batches of 700 ns.
        assert!(
            t.contains("    time saved: 145.10 µs (27.9% of the cluster's 520.00 µs"),
            "{t}"
        );
        assert!(!t.contains("capped"), "{t}");
        let back: crate::render::json::Report = serde_json::from_str(&j).unwrap();
        // (serde_json parses floats to the nearest value but one, so compare what is exact.)
        let back_table = back.costs.unwrap().table.unwrap();
        assert_eq!(
            (back_table.key, back_table.ops.len()),
            (table().key, table().ops.len())
        );
        assert!(matches!(
            back.clusters[0].saving,
            Some(Saving::Estimated(_))
        ));
        // One multi-call per occurrence, and 16 occurrences per multi-call.
        assert_eq!(back.clusters[0].alternatives.len(), 2);
    }

    #[test]
    fn quartiles_interpolate() {
        let m = Measure::from_samples(&mut [5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((m.p25_ns, m.median_ns, m.p75_ns), (2.0, 3.0, 4.0));
        assert!((m.spread() - 2.0 / 3.0).abs() < 1e-9);
        assert!(m.noisy());
        let m = Measure::from_samples(&mut [1.0, 2.0]).unwrap();
        assert_eq!((m.p25_ns, m.median_ns, m.p75_ns), (1.25, 1.5, 1.75));
        assert!(Measure::from_samples(&mut []).is_none());
        assert!(Measure::from_samples(&mut [f64::NAN]).is_none());
    }

    /// A chain of 3 statx per occurrence: 3 ops x (2000 - 600) - 700 per batch = 3500 ns saved
    /// per occurrence.
    #[test]
    fn a_batch_that_wins_keeps_its_suggestion_and_carries_the_saving() {
        let a = analysis(&["statx", "openat", "statx", "close"], 100, OBSERVED_NS);
        let c = a
            .clusters
            .iter()
            .find(|c| c.suggestion.kind == Kind::Multicall)
            .expect("a multi-call cluster");
        let (s, saving, _) = advise(&table(), c, &a.threads[0].graph, Evidence::ANY);
        // openat is not in the table: unknown, and the suggestion stays.
        assert_eq!(s, c.suggestion);
        assert!(
            matches!(&saving, Saving::Unknown { why } if why.contains("openat on a file")),
            "{saving:?}"
        );

        let a = analysis(&["statx", "close"], 100, OBSERVED_NS);
        let (s, saving, alternatives) =
            advise(&table(), &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        assert_eq!(s.kind, Kind::Multicall);
        // The occurrences follow each other: 16 of them per multi-call saves the most, 7
        // batches for 100 occurrences: 100 x ((2000 - 600) + (300 - 200)) - 7 x 700.
        assert_eq!(
            s.replacement.as_deref(),
            Some("pkprof multi-call (io_uring), 16 iterations per batch")
        );
        let Saving::Estimated(best) = saving else {
            panic!("{saving:?}")
        };
        assert_eq!(best.saved_ns, 100 * 1500 - 7 * 700);
        assert!(
            best.basis.contains("(7 batches of 28.6 ops"),
            "{}",
            best.basis
        );
        // One multi-call per occurrence, the first alternative weighed, saves less.
        assert_eq!(alternatives.len(), 2, "{alternatives:?}");
        assert_eq!(
            alternatives[0].replacement.as_deref(),
            Some("pkprof multi-call (io_uring)")
        );
        let Saving::Estimated(e) = alternatives[0].saving.clone() else {
            panic!("{alternatives:?}")
        };
        // A loop statx -> close, 99 iterations (the loop count), one batch each: per iteration
        // (2000 - 600) + (300 - 200) - 700 = 800 ns.
        let iterations = a_count(&["statx", "close"], 100) as i64;
        assert_eq!(e.saved_ns, iterations * 800);
        // Low end: (1800 - 660) + (270 - 220) - 770 = 420; high: (2200 - 540) + (330 - 180) - 630.
        assert_eq!(e.saved_low_ns, iterations * 420);
        assert_eq!(e.saved_high_ns, iterations * 1180);
        // Cluster time: 2 calls x (2500 observed + 100 crossing) per iteration.
        assert_eq!(e.cluster_ns, iterations as u64 * 5200);
        assert!((e.percent() - 800.0 / 5200.0 * 100.0).abs() < 1e-9);
        assert!(!e.noisy);
        assert!(e
            .basis
            .contains("a batched statx costs 600 ns here against 2.00 µs plain"));
    }

    /// Runs of `run` statx -> close separated by a getpid, `runs` times.
    fn runs_of(run: usize, runs: usize) -> Analysis {
        let mut t = TraceBuilder::new(1, 1, "t");
        for _ in 0..runs {
            for _ in 0..run {
                t.call(&Node::new(332, "statx"), false, 500, None);
                t.call(&Node::new(3, "close"), false, 500, None);
            }
            t.call(&Node::new(39, "getpid"), false, 500, None);
        }
        let profile = SyscallProfile {
            target: "test".into(),
            threads: vec![t.finish()],
            ..SyscallProfile::default()
        };
        Analysis::new(&profile, &Options::default())
    }

    /// A batch holds at most the iterations that run in a row: runs of 5 are batched 5 at a
    /// time (not 16); runs of 1 get no such alternative.
    #[test]
    fn a_batch_of_iterations_holds_one_run() {
        let a = runs_of(5, 40);
        let c = a
            .clusters
            .iter()
            .find(|c| c.path.iter().any(|n| n.name == "statx"))
            .expect("a statx cluster");
        assert!(
            (iterations_per_run(c, &a.threads[0].graph) - 5.0).abs() < 0.5,
            "{c:?}"
        );
        let (_, _, alternatives) = advise(&table(), c, &a.threads[0].graph, Evidence::ANY);
        let batch = alternatives
            .iter()
            .find(|a| {
                a.replacement
                    .as_deref()
                    .is_some_and(|r| r.ends_with("per batch"))
            })
            .expect("a batch of iterations");
        assert_eq!(
            batch.replacement.as_deref(),
            Some("pkprof multi-call (io_uring), 5 iterations per batch")
        );

        let a = runs_of(1, 100);
        for c in &a.clusters {
            let (_, _, alternatives) = advise(&table(), c, &a.threads[0].graph, Evidence::ANY);
            assert!(
                alternatives.iter().all(|a| !a
                    .replacement
                    .as_deref()
                    .unwrap_or("")
                    .ends_with("per batch")),
                "{alternatives:?}"
            );
        }
    }

    /// `op` with its unlinked split: per op `batched - link`, a link `link`.
    fn with_link(mut o: OpCost, link: f64) -> OpCost {
        let (b, f) = (o.batched.unwrap(), o.batch_fixed.unwrap());
        o.unlinked = Some(Unlinked {
            batched: m(b.median_ns - link),
            batch_fixed: m(f.median_ns + link),
            link: m(link),
        });
        o
    }

    /// The estimate of the alternative whose replacement ends with `suffix`.
    fn estimate_of(alternatives: &[Alternative], suffix: &str) -> Estimate {
        let a = alternatives
            .iter()
            .find(|a| {
                a.replacement
                    .as_deref()
                    .is_some_and(|r| r.ends_with(suffix))
            })
            .unwrap_or_else(|| panic!("no {suffix} in {alternatives:?}"));
        match &a.saving {
            Saving::Estimated(e) => e.clone(),
            Saving::Unknown { why } => panic!("{why}"),
        }
    }

    /// A batch of several iterations of a socket loop runs them as independent chains (one per
    /// request, on different connections): each chain after the first of a batch does not wait
    /// for the one before it and saves the link into its first op (recvmsg, the path's first);
    /// one multi-call per iteration is one chain and is priced as before. A table without
    /// links (schema /1) prices every batch as one linked chain and says so.
    #[test]
    fn independent_chains_save_their_links() {
        let a = analysis(&["recvmsg", "sendmsg"], 100, OBSERVED_NS);
        let c = &a.clusters[0];
        let g = &a.threads[0].graph;
        let mut old = table();
        old.ops.push(op("recvmsg", "tcp", 2000.0, 500.0, 700.0));
        old.ops.push(op("sendmsg", "tcp", 2000.0, 500.0, 700.0));
        let mut new = table();
        new.ops
            .push(with_link(op("recvmsg", "tcp", 2000.0, 500.0, 700.0), 40.0));
        new.ops
            .push(with_link(op("sendmsg", "tcp", 2000.0, 500.0, 700.0), 60.0));
        let (_, _, before) = advise(&old, c, g, Evidence::ANY);
        let (_, _, after) = advise(&new, c, g, Evidence::ANY);
        let per_batch = "iterations per batch";
        let (b, n) = (
            estimate_of(&before, per_batch),
            estimate_of(&after, per_batch),
        );
        // c.count chains in ceil(count / 16) batches: all but each batch's first save the
        // recvmsg's link, 40 ns; low and high take its quartiles (36, 44).
        assert_eq!(c.path[0].name, "recvmsg");
        let batches = (c.count as f64 / 16.0).ceil() as i64;
        let unlinked = c.count as i64 - batches;
        assert_eq!(n.saved_ns - b.saved_ns, unlinked * 40, "{n:?}");
        assert_eq!(n.saved_low_ns - b.saved_low_ns, unlinked * 36, "{n:?}");
        assert_eq!(n.saved_high_ns - b.saved_high_ns, unlinked * 44, "{n:?}");
        assert!(n.basis.contains("independent chains"), "{}", n.basis);
        assert!(n.basis.contains("into its first op (40 ns)"), "{}", n.basis);
        assert!(b.basis.contains("links were not calibrated"), "{}", b.basis);
        // One multi-call per iteration: one chain, the same estimate either way.
        let one = |alts: &[Alternative]| match &alts
            .iter()
            .find(|a| {
                a.kind == Kind::Multicall
                    && !a.replacement.as_deref().unwrap_or("").ends_with(per_batch)
            })
            .expect("one multi-call per iteration")
            .saving
        {
            Saving::Estimated(e) => e.clone(),
            Saving::Unknown { why } => panic!("{why}"),
        };
        let (b1, n1) = (one(&before), one(&after));
        assert_eq!(
            (b1.saved_ns, b1.saved_low_ns, b1.saved_high_ns),
            (n1.saved_ns, n1.saved_low_ns, n1.saved_high_ns)
        );
        assert!(!n1.basis.contains("chains"), "{}", n1.basis);
    }

    /// A loop that opens a file per iteration is batched as independent chains, each
    /// starting with its openat wherever the path starts: the chains save the openat's link.
    #[test]
    fn an_iteration_that_opens_its_file_starts_with_the_openat() {
        let a = analysis(&["read", "close", "openat"], 100, OBSERVED_NS);
        let c = &a.clusters[0];
        let g = &a.threads[0].graph;
        let mut old = table();
        old.ops.push(op("openat", "file", 3000.0, 500.0, 700.0));
        let mut new = old.clone();
        for o in &mut new.ops {
            let link = match o.op.as_str() {
                "openat" => 90.0,
                "read" => 30.0,
                _ => 20.0,
            };
            *o = with_link(o.clone(), link);
        }
        let (_, _, before) = advise(&old, c, g, Evidence::ANY);
        let (_, _, after) = advise(&new, c, g, Evidence::ANY);
        let suffix = "iterations per batch";
        let (b, n) = (estimate_of(&before, suffix), estimate_of(&after, suffix));
        let batches = (c.count as f64 / 16.0).ceil() as i64;
        assert_eq!(
            n.saved_ns - b.saved_ns,
            (c.count as i64 - batches) * 90,
            "{n:?}"
        );
        assert!(n.basis.contains("into its first op (90 ns)"), "{}", n.basis);
    }

    /// A read -> write loop batched several iterations at a time is one linked chain (the same
    /// descriptors in order: a copy, a pipe relay): its links are all paid, as the table's
    /// linked batch measures, whatever the unlinked split says.
    #[test]
    fn iterations_on_the_same_descriptors_stay_one_chain() {
        let a = analysis(&["read", "write"], 100, OBSERVED_NS);
        let c = &a.clusters[0];
        let g = &a.threads[0].graph;
        let mut linked = table();
        for o in &mut linked.ops {
            *o = with_link(o.clone(), 100.0);
        }
        let (_, _, before) = advise(&table(), c, g, Evidence::ANY);
        let (_, _, after) = advise(&linked, c, g, Evidence::ANY);
        let suffix = "iterations per batch";
        let (b, n) = (estimate_of(&before, suffix), estimate_of(&after, suffix));
        assert_eq!(
            (b.saved_ns, b.saved_low_ns, b.saved_high_ns),
            (n.saved_ns, n.saved_low_ns, n.saved_high_ns)
        );
        assert!(!n.basis.contains("chains"), "{}", n.basis);
    }

    /// The links are left out of the table's noise: a link of 20 ns with quartiles 0..40 is
    /// not a noisy machine.
    #[test]
    fn links_are_not_counted_as_noise() {
        let mut t = table();
        let before = t.noisy_count();
        t.ops[0] = with_link(t.ops[0].clone(), 20.0);
        t.ops[0].unlinked.as_mut().unwrap().link = Measure {
            median_ns: 20.0,
            p25_ns: 0.0,
            p75_ns: 40.0,
            samples: 9,
        };
        assert_eq!(t.noisy_count(), (before.0, before.1 + 2));
        assert!(t.worst_spread() < 1.0);
        assert!(t.invalid_measure().is_none());
    }

    /// A recvmsg -> sendmsg loop is suggested splice, which is not in the table; a batch that is
    /// measured to win is suggested instead, the unknown splice listed with its reason.
    #[test]
    fn a_batch_measured_to_win_beats_an_unmeasured_single_call() {
        let a = analysis(&["recvmsg", "sendmsg"], 100, OBSERVED_NS);
        let c = &a.clusters[0];
        assert_eq!(c.suggestion.replacement.as_deref(), Some("splice"));
        let mut t = table();
        t.ops.push(op("recvmsg", "tcp", 2000.0, 500.0, 700.0));
        t.ops.push(op("sendmsg", "tcp", 2000.0, 500.0, 700.0));
        let (s, saving, alternatives) = advise(&t, c, &a.threads[0].graph, Evidence::ANY);
        assert_eq!(s.kind, Kind::Multicall, "{s:?}");
        assert!(
            matches!(saving, Saving::Estimated(ref e) if e.saved_ns > 0),
            "{saving:?}"
        );
        assert!(
            matches!(&alternatives[0].saving, Saving::Unknown { why } if why.starts_with("splice was calibrated between two pipes only")),
            "{alternatives:?}"
        );
    }

    /// A read -> write loop is priced on the kind of file its observed times match: a read and
    /// a write of the same time look like the pipe (900 and 900 ns plain) rather than the file
    /// (read 1000, write 4000 ns), and the loop's single call is then splice.
    #[test]
    fn the_observed_times_pick_the_kind_of_file() {
        let mut t = table();
        t.ops.push(op("read", "pipe", 900.0, 1100.0, 700.0));
        t.ops.push(op("write", "pipe", 900.0, 1100.0, 700.0));
        t.ops[2].plain = m(4000.0);
        t.targets.insert("pipe".into(), "test pipe".into());
        t.single_calls.push(SingleCallCost {
            call: "splice".into(),
            unit: "4 KiB read + write iteration".into(),
            on: "pipe".into(),
            plain: m(1800.0),
            single: m(100.0),
        });
        let priced = |read_ns: u64, write_ns: u64, evidence: Evidence| {
            let mut tr = TraceBuilder::new(1, 1, "t");
            for _ in 0..100 {
                tr.call(&Node::new(0, "read"), false, read_ns, None);
                tr.call(&Node::new(1, "write"), false, write_ns, None);
            }
            let profile = SyscallProfile {
                target: "test".into(),
                threads: vec![tr.finish()],
                ..SyscallProfile::default()
            };
            let a = Analysis::new(&profile, &Options::default());
            let (_, _, alternatives) = advise(&t, &a.clusters[0], &a.threads[0].graph, evidence);
            alternatives
                .iter()
                .map(|a| match &a.saving {
                    Saving::Estimated(e) => e.basis.clone(),
                    Saving::Unknown { why } => why.clone(),
                })
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let basis = |read_ns: u64, write_ns: u64| priced(read_ns, write_ns, Evidence::ANY);
        let pipe = basis(800, 800);
        assert!(pipe.contains("splice costs 100 ns per 4 KiB"), "{pipe}");
        assert!(pipe.contains("on a test pipe"), "{pipe}");
        // A write 4 times a read: the file's 1000 and 4000, not the pipe's 900 and 900.
        let file = basis(900, 3900);
        assert!(file.contains("copy_file_range costs 900 ns"), "{file}");
        // The same on a machine that stretches every call 5 times: the ratios still tell.
        let pipe = basis(4500, 4500);
        assert!(pipe.contains("splice costs 100 ns per 4 KiB"), "{pipe}");
        let file = basis(5000, 20000);
        assert!(file.contains("copy_file_range costs 900 ns"), "{file}");
        // Times like a pipe's in a process that made no pipe (a copy whose reads wait for the
        // disk): the page-cache file, on both the single call and the batch.
        let file = priced(800, 800, Evidence { pipes: false });
        assert!(file.contains("copy_file_range costs 900 ns"), "{file}");
        assert!(!file.contains("pipe"), "{file}");
        assert!(file.contains("on a file"), "{file}");
    }

    fn a_count(names: &[&str], rounds: usize) -> u64 {
        analysis(names, rounds, OBSERVED_NS).clusters[0].count
    }

    /// A pread self-loop: an unmeasured single call (preadv) is kept, its saving unknown; with
    /// preadv measured as losing, and a batched pread losing too, it is left with the reasons.
    #[test]
    fn a_batch_that_loses_is_left_with_its_reason() {
        let (s, saving) = advised(&["pread64"], 50);
        assert_eq!(s.replacement.as_deref(), Some("preadv"));
        assert!(
            matches!(&saving, Saving::Unknown { why } if why == "preadv was not calibrated"),
            "{saving:?}"
        );
        let mut t = table();
        t.single_calls.push(SingleCallCost {
            call: "preadv".into(),
            unit: "pread (one 4 KiB element more)".into(),
            on: "file".into(),
            plain: m(800.0),
            single: m(900.0),
        });
        let a = analysis(&["pread64"], 50, OBSERVED_NS);
        let (s, saving, alternatives) =
            advise(&t, &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        // preadv: 49 crossings saved x (800 - 900) = -4.9 µs; the batch: 50 calls x
        // (800 - 1500) - 1 batch x 700 = -35.7 µs. The least bad is named, with the other.
        assert_eq!(s.kind, Kind::LeaveIt, "{s:?}");
        assert_eq!(s.replacement.as_deref(), Some(LEAVE_IT));
        assert!(
            s.why
                .starts_with("preadv would cost 4.90 µs more than the calls it replaces here"),
            "{}",
            s.why
        );
        assert!(
            s.why.contains("a multi-call would save -35.70 µs"),
            "{}",
            s.why
        );
        let Saving::Estimated(e) = saving else {
            panic!("{saving:?}")
        };
        assert_eq!(e.saved_ns, 49 * (800 - 900));
        let Saving::Estimated(batch) = &alternatives[1].saving else {
            panic!("{alternatives:?}")
        };
        assert_eq!(batch.saved_ns, 50 * (800 - 1500) - 700);
        assert!(batch
            .basis
            .contains("a batched pread costs 1.50 µs here against 800 ns plain"));
    }

    /// A read -> write loop: copy_file_range saves 1600 ns per iteration; the batch would lose.
    #[test]
    fn the_single_call_that_wins_is_kept() {
        let (s, saving) = advised(&["read", "write"], 100);
        assert_eq!(s.kind, Kind::SingleCall);
        let Saving::Estimated(e) = saving else {
            panic!("{saving:?}")
        };
        let iterations = a_count(&["read", "write"], 100) as i64;
        assert_eq!(e.saved_ns, iterations * 1600);
        assert!(e.basis.contains("copy_file_range costs 900 ns per 4 KiB"));
    }

    /// Without io_uring no batch is suggested, whatever else the table says.
    #[test]
    fn no_batch_without_io_uring() {
        let mut t = table();
        t.batched_unavailable = Some("kernel.io_uring_disabled = 2".into());
        let a = analysis(&["statx", "close"], 100, OBSERVED_NS);
        let (s, saving, _) = advise(&t, &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        assert_eq!(s.kind, Kind::LeaveIt);
        assert!(s.why.contains("io_uring_disabled = 2"), "{}", s.why);
        assert!(matches!(saving, Saving::Unknown { .. }));
        // A single call is still measured and kept.
        let a = analysis(&["read", "write"], 100, OBSERVED_NS);
        let (s, _, _) = advise(&t, &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        assert_eq!(s.kind, Kind::SingleCall);
    }

    #[test]
    fn noisy_measures_make_noisy_estimates() {
        let mut t = table();
        t.ops[3].plain = Measure {
            median_ns: 2000.0,
            p25_ns: 1000.0,
            p75_ns: 3000.0,
            samples: 5,
        };
        let a = analysis(&["statx", "close"], 100, OBSERVED_NS);
        let (_, saving, _) = advise(&t, &a.clusters[0], &a.threads[0].graph, Evidence::ANY);
        let Saving::Estimated(e) = saving else {
            panic!("{saving:?}")
        };
        assert!(e.noisy);
        // statx's p25..p75 spread (2000 ns) on each of the 100 occurrences widens the range.
        assert!(e.saved_low_ns < e.saved_ns && e.saved_high_ns > e.saved_ns);
        assert!(e.saved_high_ns - e.saved_low_ns > 100 * 2000, "{e:?}");
        assert_eq!(t.noisy_count().0, 1);
    }

    #[test]
    fn group_estimates_add_up() {
        let e = |s: i64| Estimate {
            saved_ns: s,
            saved_low_ns: s - 1,
            saved_high_ns: s + 1,
            cluster_ns: 10,
            noisy: s < 0,
            basis: format!("b{s}"),
        };
        let all = [e(5), e(-2)];
        let sum = Estimate::sum(all.iter()).unwrap();
        assert_eq!(
            (sum.saved_ns, sum.saved_low_ns, sum.saved_high_ns),
            (3, 1, 5)
        );
        assert_eq!(sum.cluster_ns, 20);
        assert!(sum.noisy);
        assert_eq!(sum.basis, "b5");
        assert!(Estimate::sum([].iter()).is_none());
    }

    /// The cached table reads back bit for bit: every measure of a table filled with awkward
    /// doubles (long decimal expansions, subnormals, huge and tiny magnitudes, -0.0) survives
    /// `to_string_pretty` and `from_str` (serde_json's `float_roundtrip`; without it the
    /// parser may land one ulp off).
    #[test]
    fn the_cached_table_round_trips_exactly() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || loop {
            // xorshift64*: a spread of bit patterns, the non-finite ones skipped.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let v = f64::from_bits(x.wrapping_mul(0x2545_f491_4f6c_dd1d));
            if v.is_finite() {
                return v;
            }
        };
        let fixed = [
            0.1 + 0.2,
            1.1 * 100.0,
            5e-324,
            2.2250738585072014e-308,
            1.7976931348623157e308,
            -0.0,
            1.0 / 3.0,
        ];
        let mut t = table();
        t.seconds = 1.0 / 3.0;
        for round in 0..200 {
            let mut values: Vec<f64> = (0..12).map(|_| next()).collect();
            if round == 0 {
                values[..fixed.len()].copy_from_slice(&fixed);
            }
            let mut v = values.iter().copied();
            let mut fill = |m: &mut Measure| {
                m.p25_ns = v.next().unwrap();
                m.median_ns = v.next().unwrap();
                m.p75_ns = v.next().unwrap();
            };
            fill(&mut t.crossing);
            fill(&mut t.single_calls[0].plain);
            fill(&mut t.single_calls[0].single);
            fill(t.ops[0].batched.as_mut().unwrap());
            let text = serde_json::to_string_pretty(&t).unwrap();
            let back: CostTable = serde_json::from_str(&text).unwrap();
            let bits = |t: &CostTable| -> Vec<u64> {
                let ms = [
                    &t.crossing,
                    &t.single_calls[0].plain,
                    &t.single_calls[0].single,
                ];
                ms.into_iter()
                    .chain(t.ops[0].batched.as_ref())
                    .flat_map(|m| [m.p25_ns, m.median_ns, m.p75_ns])
                    .chain([t.seconds])
                    .map(f64::to_bits)
                    .collect()
            };
            assert_eq!(bits(&back), bits(&t), "{text}");
        }
    }

    #[test]
    fn dates_read_well() {
        assert_eq!(format_time(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_time(1_795_552_260), "2026-11-24 20:31 UTC");
        assert_eq!(format_time(951_782_400), "2000-02-29 00:00 UTC");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_ns(820.4), "820 ns");
        assert_eq!(format_ns(1520.0), "1.52 µs");
        assert_eq!(format_ns(-2_500_000.0), "-2.5 ms");
    }
}
