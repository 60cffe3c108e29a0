//! The input model: per-thread counts of "syscall B returned right after syscall A", split by the
//! call before A ("second-order transitions", trigrams), as the collector fills it, plus how
//! syscall nodes are named (`read(fd=3, 2K..4K)`).
//!
//! Trigram data: a thread carries it when any of its transitions has `before` set. A thread
//! without it (a profile from a collector that did not count trigrams) is analysed from edge
//! counts alone, see `clusters`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Everything `pkprof syscalls` collected: one list of transitions per thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyscallProfile {
    /// What was profiled, e.g. "command: tar cf x.tar dir", "pid 123", "system-wide".
    pub target: String,
    pub duration_ns: u64,
    /// Nodes are split by argument (`--args`): `Node::arg` is filled.
    pub args_split: bool,
    pub threads: Vec<Thread>,
    pub lost: Lost,
}

/// What the collector had to drop. Non-zero counts are printed by every report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lost {
    /// Transitions not counted because the kernel's transition map was full.
    pub transitions_full: u64,
    /// Call-site samples dropped because the site table was full.
    pub sites_full: u64,
    /// User stacks that could not be read, or kept (the collector's ring buffer was full).
    pub stacks_failed: u64,
    /// Calls not counted because the kernel could not allocate a thread's state.
    #[serde(default)]
    pub threads_full: u64,
    /// Child processes not followed because the kernel's target table was full.
    #[serde(default)]
    pub targets_full: u64,
}

impl Lost {
    pub fn is_empty(&self) -> bool {
        self.transitions_full == 0
            && self.sites_full == 0
            && self.stacks_failed == 0
            && self.threads_full == 0
            && self.targets_full == 0
    }
}

/// One thread's transitions. Entries with the same (pid, tid) are merged by the analysis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub transitions: Vec<Transition>,
}

/// `to` ran right after `from`, which ran right after `before`, on one thread, `count` times.
///
/// Entries with the same (from, to) and different `before` are separate; the edge from -> to is
/// their sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// The call before `from`: None when `from` is None or was the thread's first call (or the
    /// collector did not count trigrams).
    #[serde(default)]
    pub before: Option<Node>,
    /// None: `to` was the first call seen on this thread.
    pub from: Option<Node>,
    pub to: Node,
    /// Times `to` ran right after `from` (counted when `to` returned).
    pub count: u64,
    /// Of those, how many returned an error (< 0).
    pub errors: u64,
    /// Time spent in `to`, summed.
    pub total_ns: u64,
    /// Sampled user stacks of `to` on this transition.
    pub sites: Vec<CallSite>,
}

/// A syscall, optionally split by argument. Displays as `read` or `read(fd=3, 2K..4K)`.
#[derive(Debug, Hash, Eq, PartialEq, Ord, PartialOrd, Clone, Serialize, Deserialize)]
pub struct Node {
    pub nr: u32,
    pub name: String,
    pub arg: Arg,
}

/// The arguments a node is split by (`--args`); all None without it.
#[derive(
    Debug, Hash, Eq, PartialEq, Ord, PartialOrd, Clone, Copy, Default, Serialize, Deserialize,
)]
pub struct Arg {
    pub fd: Option<i64>,
    /// k = 0: size 0; else the size is in [2^(k-1), 2^k).
    pub size_class: Option<u8>,
}

/// A sampled user call stack and how many times it was seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSite {
    /// Innermost first: frame 0 is the libc wrapper or the function holding the syscall
    /// instruction.
    pub frames: Vec<CallSiteFrame>,
    pub count: u64,
}

/// One user frame.
///
/// `addr` is printed as `module+0x<addr>` when the frame has a module but no symbol, so for such
/// frames the collector should store the offset within the module's file; without a module it is
/// printed as a raw address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallSiteFrame {
    pub addr: u64,
    pub symbol: Option<String>,
    pub module: Option<String>,
}

impl Node {
    pub fn new(nr: u32, name: impl Into<String>) -> Node {
        Node {
            nr,
            name: name.into(),
            arg: Arg::default(),
        }
    }

    pub fn with_arg(mut self, fd: Option<i64>, size_class: Option<u8>) -> Node {
        self.arg = Arg { fd, size_class };
        self
    }

    /// The same syscall without its argument split.
    pub fn without_arg(&self) -> Node {
        Node::new(self.nr, self.name.clone())
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.arg.is_empty() {
            write!(f, "({})", self.arg)?;
        }
        Ok(())
    }
}

impl Arg {
    pub fn is_empty(&self) -> bool {
        self.fd.is_none() && self.size_class.is_none()
    }
}

/// `fd=3, 2K..4K`, `fd=3`, `0` (size 0), `1`, `2..4`, `1M..2M`.
impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(fd) = self.fd {
            write!(f, "fd={fd}")?;
        }
        if let Some(k) = self.size_class {
            if self.fd.is_some() {
                f.write_str(", ")?;
            }
            f.write_str(&size_class_range(k))?;
        }
        Ok(())
    }
}

/// The sizes of class k: "0", "1", "2..4" ([2, 4)), "2K..4K", up to "8E..16E" (k = 64).
pub fn size_class_range(k: u8) -> String {
    match k {
        0 => "0".into(),
        1 => "1".into(),
        2..=64 => format!(
            "{}..{}",
            binary_size(k - 1),
            if k == 64 {
                "16E".into()
            } else {
                binary_size(k)
            }
        ),
        _ => format!("size-class-{k}"),
    }
}

/// 2^p with a binary unit: 512, 1K, 2M, 8E.
fn binary_size(p: u8) -> String {
    const UNITS: [&str; 7] = ["", "K", "M", "G", "T", "P", "E"];
    let unit = usize::from(p / 10).min(UNITS.len() - 1);
    let mantissa = 1u64 << (u32::from(p) - 10 * unit as u32);
    format!("{mantissa}{}", UNITS[unit])
}

impl CallSiteFrame {
    /// `symbol`, else `module+0xoff`, else `0xaddr`.
    pub fn describe(&self) -> String {
        match (&self.symbol, &self.module) {
            (Some(s), _) => s.clone(),
            (None, Some(m)) => format!("{}+{:#x}", basename(m), self.addr),
            (None, None) => format!("{:#x}", self.addr),
        }
    }
}

/// The last path component of a module path.
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_labels() {
        let read = Node::new(0, "read");
        assert_eq!(read.to_string(), "read");
        assert_eq!(
            read.clone().with_arg(Some(3), Some(12)).to_string(),
            "read(fd=3, 2K..4K)"
        );
        assert_eq!(
            read.clone().with_arg(Some(-100), None).to_string(),
            "read(fd=-100)"
        );
        assert_eq!(read.clone().with_arg(None, Some(0)).to_string(), "read(0)");
        assert_eq!(read.with_arg(None, Some(1)).to_string(), "read(1)");
    }

    #[test]
    fn size_classes() {
        assert_eq!(size_class_range(2), "2..4");
        assert_eq!(size_class_range(10), "512..1K");
        assert_eq!(size_class_range(21), "1M..2M");
        assert_eq!(size_class_range(64), "8E..16E");
        assert_eq!(size_class_range(65), "size-class-65");
    }

    #[test]
    fn frames() {
        let f = |symbol: Option<&str>, module: Option<&str>| CallSiteFrame {
            addr: 0x1a2b,
            symbol: symbol.map(Into::into),
            module: module.map(Into::into),
        };
        assert_eq!(f(Some("main"), Some("/bin/tar")).describe(), "main");
        assert_eq!(
            f(None, Some("/usr/lib/libc.so.6")).describe(),
            "libc.so.6+0x1a2b"
        );
        assert_eq!(f(None, None).describe(), "0x1a2b");
    }
}
