//! speedscope exporter: speedscope's JSON file format
//! (<https://www.speedscope.app/file-format-schema.json>), opened by speedscope.app and its
//! command-line viewer.
//!
//! - One `sampled` profile per process served (named `PID comm`, in PID order), then one each for
//!   `OTHER` (processes not profiled), `KERNEL` and `IDLE` when they have samples. The file opens
//!   on the profile with the most samples, IDLE aside (`activeProfileIndex`).
//! - Frames are shared by every profile: `name` is the report's frame name (`1234u:main`, or plain
//!   names), `file` the source file and `line` its line when recorded, else `file` is the module
//!   (binary, shared object, `[kernel]`) and there is no line.
//! - Stacks are root first (speedscope's order). Weights are in nanoseconds: count x
//!   `meta.period_ns`, the CPU time the samples stand for (unit `none`, sample counts, if the
//!   profile has no period). Sample groups with the same stack in a profile are merged; groups
//!   with a zero count are left out (speedscope ignores zero weights). The stacks are sorted by
//!   their names, so that speedscope's "time order" view reads like a flame graph; the profile
//!   has no timestamps to order them by time.
//! - `exporter` is `pkprof VERSION`; the file's `name` is the title given, else `pkprof HOSTNAME`,
//!   followed by the losses when there were any (`(lost: ring buffer full 761)`): the format has
//!   no comments.

use std::collections::BTreeMap;

use foldhash::{HashMap, HashMapExt};
use std::io::{BufWriter, Write};

use serde::Serialize;

use pkprof_profile::{Bucket, FrameId, Profile, StackId};

use super::{ExportOptions, Exporter};
use crate::header::lost_text;
use crate::names::{frame_label, owner, Owner};
use crate::ReportError;

/// The `$schema` every speedscope file names.
pub const SCHEMA_URL: &str = "https://www.speedscope.app/file-format-schema.json";

/// Writes speedscope JSON.
pub struct Speedscope;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(rename = "$schema")]
    schema: &'static str,
    name: String,
    exporter: String,
    active_profile_index: usize,
    shared: Shared,
    profiles: Vec<Sampled>,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<SpeedscopeFrame>,
}

#[derive(Serialize, PartialEq, Eq, Hash, Clone)]
struct SpeedscopeFrame {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Sampled {
    r#type: &'static str,
    name: String,
    unit: &'static str,
    start_value: u64,
    end_value: u64,
    samples: Vec<Vec<u32>>,
    weights: Vec<u64>,
}

impl Exporter for Speedscope {
    fn name(&self) -> &'static str {
        "speedscope"
    }

    fn extension(&self) -> &'static str {
        "speedscope.json"
    }

    fn write(
        &self,
        profile: &Profile,
        opts: &ExportOptions,
        out: &mut dyn Write,
    ) -> Result<(), ReportError> {
        // Sample counts by profile ((bucket, pid), pid 0 but for processes), then by stack.
        let mut groups: BTreeMap<(Bucket, u32), HashMap<StackId, u64>> = BTreeMap::new();
        for g in profile.samples.iter().filter(|g| g.count > 0) {
            let pid = if g.bucket == Bucket::Process {
                g.pid
            } else {
                0
            };
            let count = groups
                .entry((g.bucket, pid))
                .or_default()
                .entry(g.stack)
                .or_default();
            *count = count.saturating_add(g.count);
        }
        let period = profile.meta.period_ns;
        let (unit, scale) = if period > 0 {
            ("nanoseconds", period)
        } else {
            ("none", 1)
        };
        let mut frames = Frames::new(profile, opts);
        let mut profiles = Vec::new();
        let mut buckets = Vec::new();
        for ((bucket, pid), stacks) in groups {
            buckets.push(bucket);
            let owner = owner(opts.names, bucket, pid);
            // In stack order, so that frame indices depend on the profile only.
            let mut stacks: Vec<(StackId, u64)> = stacks.into_iter().collect();
            stacks.sort_unstable();
            let mut weighted: HashMap<Vec<u32>, u64> = HashMap::new();
            for (stack, count) in stacks {
                let ids = frames.stack(stack, owner);
                let w = weighted.entry(ids).or_default();
                *w = w.saturating_add(count.saturating_mul(scale));
            }
            let mut weighted: Vec<(Vec<u32>, u64)> = weighted.into_iter().collect();
            let names = &frames.frames;
            weighted.sort_unstable_by(|a, b| {
                let name = |i: &u32| names[*i as usize].name.as_str();
                a.0.iter()
                    .map(name)
                    .cmp(b.0.iter().map(name))
                    .then(a.0.cmp(&b.0))
            });
            let end_value = weighted.iter().fold(0u64, |s, w| s.saturating_add(w.1));
            let (samples, weights) = weighted.into_iter().unzip();
            profiles.push(Sampled {
                r#type: "sampled",
                name: profile_name(profile, bucket, pid),
                unit,
                start_value: 0,
                end_value,
                samples,
                weights,
            });
        }
        let active_profile_index = profiles
            .iter()
            .enumerate()
            .filter(|(i, _)| buckets[*i] != Bucket::Idle)
            .max_by(|a, b| a.1.end_value.cmp(&b.1.end_value).then(b.0.cmp(&a.0)))
            .map_or(0, |(i, _)| i);
        let file = File {
            schema: SCHEMA_URL,
            name: {
                let mut name = if opts.title.is_empty() {
                    format!("pkprof {}", profile.meta.hostname)
                } else {
                    opts.title.clone()
                };
                // The format has no comments: losses go into the title speedscope shows.
                if profile.meta.lost.parts().iter().any(|(_, n)| *n > 0) {
                    name.push_str(&format!(" ({})", lost_text(&profile.meta.lost)));
                }
                name
            },
            exporter: format!("pkprof {}", env!("CARGO_PKG_VERSION")),
            active_profile_index,
            shared: Shared {
                frames: frames.frames,
            },
            profiles,
        };
        let mut out = BufWriter::with_capacity(1 << 16, out);
        serde_json::to_writer(&mut out, &file).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        out.flush()?;
        Ok(())
    }
}

/// `PID comm` for a process (its comm from the process list, else the comm most of its samples
/// carry), `OTHER`, `KERNEL` or `IDLE` for the other buckets.
fn profile_name(profile: &Profile, bucket: Bucket, pid: u32) -> String {
    match bucket {
        Bucket::Process => {
            let known = profile
                .processes
                .iter()
                .find(|p| p.pid == pid && !p.comm.is_empty())
                .map(|p| p.comm.as_str());
            let comm = known.or_else(|| {
                let mut comms: HashMap<&str, u64> = HashMap::new();
                for g in &profile.samples {
                    if g.bucket == Bucket::Process && g.pid == pid && !g.comm.is_empty() {
                        *comms.entry(&g.comm).or_default() += g.count;
                    }
                }
                comms
                    .into_iter()
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
                    .map(|c| c.0)
            });
            match comm {
                Some(comm) => format!("{pid} {comm}"),
                None => pid.to_string(),
            }
        }
        Bucket::Other => "OTHER".into(),
        Bucket::Kernel => "KERNEL".into(),
        Bucket::Idle => "IDLE".into(),
    }
}

/// The shared frame table: one entry per distinct (name, file, line).
struct Frames<'p> {
    profile: &'p Profile,
    opts: &'p ExportOptions,
    frames: Vec<SpeedscopeFrame>,
    ids: HashMap<SpeedscopeFrame, u32>,
    by_frame: HashMap<(FrameId, Owner), u32>,
}

impl<'p> Frames<'p> {
    fn new(profile: &'p Profile, opts: &'p ExportOptions) -> Self {
        Frames {
            profile,
            opts,
            frames: Vec::new(),
            ids: HashMap::new(),
            by_frame: HashMap::new(),
        }
    }

    /// The frame indices of `stack` named for `owner`, root first.
    fn stack(&mut self, stack: StackId, owner: Owner) -> Vec<u32> {
        let profile = self.profile;
        profile.stacks[stack as usize]
            .frames
            .iter()
            .map(|&f| self.frame(f, owner))
            .collect()
    }

    fn frame(&mut self, id: FrameId, owner: Owner) -> u32 {
        if let Some(i) = self.by_frame.get(&(id, owner)) {
            return *i;
        }
        let f = &self.profile.frames[id as usize];
        let source = f.file.as_deref().filter(|file| !file.is_empty());
        let frame = SpeedscopeFrame {
            name: frame_label(owner.1, owner.0, f, self.opts.names),
            file: Some(source.unwrap_or(&f.module).to_string()).filter(|s| !s.is_empty()),
            line: source.and(f.line).filter(|l| *l > 0),
        };
        let i = match self.ids.get(&frame) {
            Some(i) => *i,
            None => {
                let i = self.frames.len() as u32;
                self.ids.insert(frame.clone(), i);
                self.frames.push(frame);
                i
            }
        };
        self.by_frame.insert((id, owner), i);
        i
    }
}
