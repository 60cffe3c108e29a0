//! pprof's tables, filled while samples are written: strings, functions, locations (one per
//! physical frame and owner, inlined frames folded in as extra lines) and mappings (one per
//! module); and each stack's location ids, leaf first, computed once per stack and owner.

use foldhash::{HashMap, HashMapExt};

use pkprof_profile::{Bucket, Context, Frame, FrameId, Profile, SampleGroup, StackId};

use super::proto;
use super::{bucket_name, context_name};
use crate::names::{frame_label, owner, NameStyle, Owner};

pub(super) struct Tables<'p> {
    profile: &'p Profile,
    style: NameStyle,
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<(i64, i64, i64), u64>,
    locations: Vec<proto::Location>,
    /// Locations of one frame, and of a frame with the frames inlined into it.
    /// Keyed by `frame << 32 | owner index`, and by the run's frames followed by the owner index.
    frame_locations: HashMap<u64, u64>,
    run_locations: HashMap<Vec<u32>, u64>,
    run_key: Vec<u32>,
    /// Function ids by `frame << 32 | owner index`.
    frame_functions: HashMap<u64, u64>,
    mappings: Vec<Mapping>,
    mapping_ids: HashMap<&'p str, u64>,
    /// Each (stack, owner)'s location ids, leaf first, keyed by `stack << 32 | owner index`: a
    /// range (start, length) of `stack_locations`.
    stacks: HashMap<u64, (u32, u32)>,
    stack_locations: Vec<u64>,
    /// Owners seen, by index (keys above are smaller and faster with it), and the last one.
    owners: HashMap<Owner, u32>,
    owner_list: Vec<Owner>,
    last_owner: Option<(Owner, u32)>,
    contexts: HashMap<Context, i64>,
    /// The last comm seen and its string id: consecutive groups mostly share it.
    last_comm: (&'p str, i64),
    keys: LabelKeys,
}

/// A mapping and the address range its locations use.
struct Mapping {
    filename: i64,
    start: u64,
    end: u64,
    has_filenames: bool,
    has_line_numbers: bool,
    has_inline_frames: bool,
}

/// String ids of the label keys and bucket names.
#[derive(Default)]
struct LabelKeys {
    pid: i64,
    tid: i64,
    current_pid: i64,
    cgroup_id: i64,
    comm: i64,
    bucket: i64,
    context: i64,
    /// Process, other, kernel, idle.
    buckets: [i64; 4],
}

impl<'p> Tables<'p> {
    pub(super) fn new(profile: &'p Profile, style: NameStyle) -> Self {
        let mut tables = Tables {
            profile,
            style,
            strings: Vec::new(),
            string_ids: HashMap::new(),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            frame_locations: HashMap::with_capacity(profile.frames.len()),
            run_locations: HashMap::new(),
            run_key: Vec::new(),
            frame_functions: HashMap::with_capacity(profile.frames.len()),
            mappings: Vec::new(),
            mapping_ids: HashMap::new(),
            stacks: HashMap::with_capacity(profile.stacks.len()),
            stack_locations: Vec::new(),
            owners: HashMap::new(),
            owner_list: Vec::new(),
            last_owner: None,
            contexts: HashMap::new(),
            last_comm: ("", 0),
            keys: LabelKeys::default(),
        };
        tables.string(""); // pprof requires string 0 to be ""
        let mut s = |name| tables.string(name);
        let keys = LabelKeys {
            pid: s("pid"),
            tid: s("tid"),
            current_pid: s("current_pid"),
            cgroup_id: s("cgroup_id"),
            comm: s("comm"),
            bucket: s("bucket"),
            context: s("context"),
            buckets: [Bucket::Process, Bucket::Other, Bucket::Kernel, Bucket::Idle]
                .map(|b| s(bucket_name(b))),
        };
        tables.keys = keys;
        tables
    }

    /// The id of string `s` in the string table.
    pub(super) fn string(&mut self, s: &str) -> i64 {
        if let Some(id) = self.string_ids.get(s) {
            return *id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    /// The location ids of `stack` as served to `pid` in `bucket`, leaf first.
    pub(super) fn stack(&mut self, stack: StackId, bucket: Bucket, pid: u32) -> &[u64] {
        let owner = self.owner_index(owner(self.style, bucket, pid));
        let key = u64::from(stack) << 32 | u64::from(owner);
        let (start, len) = match self.stacks.get(&key) {
            Some(range) => *range,
            None => {
                let profile = self.profile;
                let frames = &profile.stacks[stack as usize].frames;
                let start = self.stack_locations.len();
                // Runs of a frame and the frames inlined into it, root first (an inlined frame of
                // another module than its caller's cannot be, and gets a location of its own).
                let mut i = 0;
                while i < frames.len() {
                    let module = &profile.frames[frames[i] as usize].module;
                    let mut j = i + 1;
                    while j < frames.len() && {
                        let f = &profile.frames[frames[j] as usize];
                        f.inlined && f.module == *module
                    } {
                        j += 1;
                    }
                    let id = self.location(&frames[i..j], owner);
                    self.stack_locations.push(id);
                    i = j;
                }
                self.stack_locations[start..].reverse();
                let range = (start as u32, (self.stack_locations.len() - start) as u32);
                self.stacks.insert(key, range);
                range
            }
        };
        &self.stack_locations[start as usize..(start + len) as usize]
    }

    fn owner_index(&mut self, owner: Owner) -> u32 {
        match self.last_owner {
            Some((last, i)) if last == owner => i,
            _ => {
                let next = self.owner_list.len() as u32;
                let i = *self.owners.entry(owner).or_insert(next);
                if i == next {
                    self.owner_list.push(owner);
                }
                self.last_owner = Some((owner, i));
                i
            }
        }
    }

    /// Appends the labels of `group` to `labels`.
    pub(super) fn labels(&mut self, group: &'p SampleGroup, labels: &mut Vec<proto::Label>) {
        let num = |key, num: u64| proto::Label {
            key,
            num: i64::try_from(num).unwrap_or(i64::MAX),
            ..proto::Label::default()
        };
        let str = |key, str| proto::Label {
            key,
            str,
            ..proto::Label::default()
        };
        let k = &self.keys;
        // pprof reads a zero number as no label: zeros (no process, unknown cgroup) are left out.
        let numbers = [
            (k.pid, group.pid.into()),
            (k.tid, group.tid.into()),
            (k.current_pid, group.current_pid.into()),
            (k.cgroup_id, group.cgroup_id),
        ];
        for (key, value) in numbers {
            if value != 0 {
                labels.push(num(key, value));
            }
        }
        let bucket = match group.bucket {
            Bucket::Process => k.buckets[0],
            Bucket::Other => k.buckets[1],
            Bucket::Kernel => k.buckets[2],
            Bucket::Idle => k.buckets[3],
        };
        labels.push(str(k.bucket, bucket));
        let (comm_key, context_key) = (k.comm, k.context);
        let context = match self.contexts.get(&group.context) {
            Some(id) => *id,
            None => {
                let id = self.string(&context_name(group.context));
                self.contexts.insert(group.context, id);
                id
            }
        };
        labels.push(str(context_key, context));
        if !group.comm.is_empty() {
            if self.last_comm.0 != group.comm {
                self.last_comm = (&group.comm, self.string(&group.comm));
            }
            labels.push(str(comm_key, self.last_comm.1));
        }
    }

    /// The tables as a `Profile` message, without samples (they were written already) and
    /// without the header fields the caller sets.
    pub(super) fn into_profile(self) -> proto::Profile {
        let mapping = self
            .mappings
            .iter()
            .enumerate()
            .map(|(i, m)| proto::Mapping {
                id: i as u64 + 1,
                memory_start: m.start,
                memory_limit: m.end,
                // Addresses are file offsets (user frames) or kernel addresses: with
                // file_offset = memory_start, pprof's address-to-offset arithmetic keeps them.
                file_offset: m.start,
                filename: m.filename,
                has_functions: true,
                has_filenames: m.has_filenames,
                has_line_numbers: m.has_line_numbers,
                has_inline_frames: m.has_inline_frames,
                ..proto::Mapping::default()
            })
            .collect();
        proto::Profile {
            mapping,
            location: self.locations,
            function: self.functions,
            string_table: self.strings,
            ..proto::Profile::default()
        }
    }

    /// The location of `run`: a frame, then the frames inlined into it, root first.
    fn location(&mut self, run: &[FrameId], owner: u32) -> u64 {
        let key = u64::from(run[0]) << 32 | u64::from(owner);
        let known = if run.len() == 1 {
            self.frame_locations.get(&key)
        } else {
            self.run_key.clear();
            self.run_key.extend_from_slice(run);
            self.run_key.push(owner);
            self.run_locations.get(self.run_key.as_slice())
        };
        if let Some(id) = known {
            return *id;
        }
        let profile = self.profile;
        let physical = &profile.frames[run[0] as usize];
        let mapping_id = self.mapping(physical, run);
        // pprof lists a location's lines innermost first, the function holding the address last.
        let line = run
            .iter()
            .rev()
            .map(|f| {
                let frame = &profile.frames[*f as usize];
                proto::Line {
                    function_id: self.function(*f, owner),
                    line: frame.line.map_or(0, i64::from),
                    column: 0,
                }
            })
            .collect();
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id,
            address: physical.offset,
            line,
            is_folded: false,
        });
        if run.len() == 1 {
            self.frame_locations.insert(key, id);
        } else {
            self.run_locations.insert(self.run_key.clone(), id);
        }
        id
    }

    fn function(&mut self, frame_id: FrameId, owner: u32) -> u64 {
        let cache_key = u64::from(frame_id) << 32 | u64::from(owner);
        if let Some(id) = self.frame_functions.get(&cache_key) {
            return *id;
        }
        let frame = &self.profile.frames[frame_id as usize];
        let (bucket, pid) = self.owner_list[owner as usize];
        let label = frame_label(pid, bucket, frame, self.style);
        let name = self.string(&label);
        let system_name = self.string(&frame.name);
        let filename = self.string(frame.file.as_deref().unwrap_or(""));
        let key = (name, system_name, filename);
        let id = match self.function_ids.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.functions.len() as u64 + 1;
                self.functions.push(proto::Function {
                    id,
                    name,
                    system_name,
                    filename,
                    start_line: 0,
                });
                self.function_ids.insert(key, id);
                id
            }
        };
        self.frame_functions.insert(cache_key, id);
        id
    }

    /// The mapping of `physical`'s module, widened to its address; notes what `run` brings.
    fn mapping(&mut self, physical: &'p Frame, run: &[FrameId]) -> u64 {
        let id = match self.mapping_ids.get(physical.module.as_str()) {
            Some(id) => *id,
            None => {
                let filename = self.string(&physical.module);
                self.mappings.push(Mapping {
                    filename,
                    start: physical.offset,
                    end: physical.offset,
                    has_filenames: false,
                    has_line_numbers: false,
                    has_inline_frames: false,
                });
                let id = self.mappings.len() as u64;
                self.mapping_ids.insert(&physical.module, id);
                id
            }
        };
        let m = &mut self.mappings[id as usize - 1];
        m.start = m.start.min(physical.offset);
        m.end = m.end.max(physical.offset.saturating_add(1));
        for f in run {
            let frame = &self.profile.frames[*f as usize];
            m.has_filenames |= frame.file.is_some();
            m.has_line_numbers |= frame.line.is_some();
        }
        m.has_inline_frames |= run.len() > 1;
        id
    }
}
