//! pkprof record's collection: cpu-clock sampling on every CPU, uprobes for exact call counts,
//! the target set, and the ring buffer of samples and links (decoded in `ring`).

pub mod perf;
pub mod ring;
pub mod uprobes;

use std::path::PathBuf;

use libbpf_rs::{MapCore, MapFlags};

use crate::error::CollectError;
use crate::loader::Collector;
use crate::skel::types::pkprof_func_key;

/// What `record` adds to the accounting programs.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    /// Samples per second on each CPU.
    pub frequency_hz: u64,
    /// Ring buffer size in bytes (a power of two, multiple of the page size).
    pub ring_bytes: u32,
    /// Children of a target become targets when they fork (record -- CMD).
    pub follow_children: bool,
    /// User functions to count exactly (uprobes).
    pub probes: Vec<FuncProbe>,
}

/// `--count FUNC@BINARY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncProbe {
    pub function: String,
    pub binary: PathBuf,
}

/// Counts of samples and links the kernel side could not deliver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingLost {
    pub samples: u64,
    pub links: u64,
}

/// One probe's exact count in one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncCountRead {
    pub pid: u32,
    pub probe: usize,
    pub count: u64,
}

fn read_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> CollectError {
    move |e| CollectError::Read {
        map,
        reason: e.to_string(),
    }
}

impl Collector {
    /// Makes `pid` a target (its samples are labelled as profiled; with follow_children its
    /// future children too).
    pub fn add_target(&self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .targets
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(read_err("targets"))
    }

    /// Takes `pid` out of the target set (its children already followed stay in).
    pub fn remove_target(&self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .targets
            .delete(&pid.to_ne_bytes())
            .map_err(read_err("targets"))
    }

    /// Tells the sampler that `pid`'s maps are captured: its samples need not wake the reader.
    pub fn mark_captured(&self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .captured
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(read_err("captured"))
    }

    /// Processes in the kernel's target set now.
    pub fn targets(&self) -> Vec<u32> {
        self.skel
            .maps
            .targets
            .keys()
            .filter_map(|k| {
                k.get(..4)
                    .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            })
            .collect()
    }

    /// Samples and links dropped on a full ring buffer, summed over CPUs.
    pub fn ring_lost(&self) -> Result<RingLost, CollectError> {
        let mut lost = RingLost::default();
        for c in self.read_cpus()? {
            lost.samples += c.lost.sample_ring_full;
            lost.links += c.lost.link_ring_full;
        }
        Ok(lost)
    }

    /// Exact call counts of the `--count` probes so far.
    pub fn func_counts(&self) -> Vec<FuncCountRead> {
        let map = &self.skel.maps.func_counts;
        map.keys()
            .filter_map(|k| {
                let key = plain::from_bytes::<pkprof_func_key>(&k).ok()?;
                let v = map.lookup(&k, MapFlags::ANY).ok()??;
                let count = u64::from_ne_bytes(v.get(..8)?.try_into().ok()?);
                Some(FuncCountRead {
                    pid: key.pid,
                    probe: key.probe as usize,
                    count,
                })
            })
            .collect()
    }
}
