//! From a profile's labelled samples to named stacks, through the pipeline shared with the call
//! graph ([`crate::stacks`]): every frame gets its report name once per label context (`PIDu:` /
//! `PIDk:` / `OTHER` / `KERNEL:` / `IDLE:`, or plain), and samples are summed by (stack, labels),
//! so the tree and the tables never look at a sample group again.

use std::collections::HashMap;

use pkprof_profile::{Bucket, Frame, FrameKind, Profile};

use crate::names::{frame_label, owner, NameStyle};
use crate::stacks::{name_stacks, sum_by_stack};

/// What a name stands for, for colours and the tables' kind column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    User,
    Kernel,
    /// The syscall boundary frame (`sys_read`).
    Syscall,
    /// A CPython function (`fib.py:fib`).
    Python,
    /// Any frame of a sample of the IDLE bucket (labelled names only).
    Idle,
}

impl Kind {
    /// One letter for the page's data (`u`, `k`, `s`, `p`, `i`).
    pub(crate) fn letter(self) -> char {
        match self {
            Kind::User => 'u',
            Kind::Kernel => 'k',
            Kind::Syscall => 's',
            Kind::Python => 'p',
            Kind::Idle => 'i',
        }
    }
}

/// Interned report names; ids are indexes.
#[derive(Default)]
pub(crate) struct Names {
    pub(crate) names: Vec<String>,
    pub(crate) kinds: Vec<Kind>,
    by_name: HashMap<String, u32>,
}

impl Names {
    fn intern(&mut self, name: String, kind: Kind) -> u32 {
        if let Some(&id) = self.by_name.get(&name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.clone());
        self.kinds.push(kind);
        self.by_name.insert(name, id);
        id
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

/// A profile's samples as named stacks (root first), summed.
pub(crate) struct Folded {
    /// All stacks' name ids back to back; `stacks[i]` is a range of it and a count.
    ids: Vec<u32>,
    stacks: Vec<(u32, u32, u128)>,
    /// All samples, and those not in the IDLE bucket.
    pub(crate) total: u128,
    pub(crate) non_idle: u128,
}

impl Folded {
    /// Each stack's names (root first) and sample count.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u32], u128)> + '_ {
        self.stacks
            .iter()
            .map(|&(start, end, n)| (&self.ids[start as usize..end as usize], n))
    }
}

/// Makes a name fit the folded-stack format inferno reads: `;` separates frames and the line
/// ends in a count, so `;` becomes `,`, control characters become spaces and the name is trimmed.
pub(crate) fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| match c {
            ';' => ',',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    let s = s.trim();
    if s.is_empty() {
        "[unnamed]".to_string()
    } else {
        s.to_string()
    }
}

/// Sums `profile`'s samples by named stack ([`crate::stacks`]), interning names into `names`
/// (shared by the two profiles of a diff, so equal names get equal ids).
pub(crate) fn fold(profile: &Profile, style: NameStyle, names: &mut Names) -> Folded {
    let mut total = 0u128;
    let mut non_idle = 0u128;
    let sums = sum_by_stack(
        profile,
        |s| {
            if s.count == 0 || s.stack as usize >= profile.stacks.len() {
                return false;
            }
            let n = u128::from(s.count);
            total += n;
            if s.bucket != Bucket::Idle {
                non_idle += n;
            }
            true
        },
        |s| owner(style, s.bucket, s.pid),
        false,
    );
    let no_stack = Frame {
        name: "[no stack]".to_string(),
        ..Frame::default()
    };
    let mut ids = Vec::new();
    let mut stacks = Vec::with_capacity(sums.pairs.len());
    name_stacks(
        profile,
        &sums,
        |f, s| {
            let frame = f.map_or(&no_stack, |f| &profile.frames[f as usize]);
            let kind = match (frame.kind, s.bucket) {
                (_, Bucket::Idle) if style == NameStyle::Labelled => Kind::Idle,
                (FrameKind::User | FrameKind::Truncated, _) => Kind::User,
                (FrameKind::Kernel, _) => Kind::Kernel,
                (FrameKind::Syscall, _) => Kind::Syscall,
                (FrameKind::Python, _) => Kind::Python,
            };
            let label = sanitize(&frame_label(s.pid, s.bucket, frame, style));
            Some((names.intern(label, kind), false))
        },
        |pi, stack| {
            let start = ids.len() as u32;
            ids.extend_from_slice(stack);
            stacks.push((start, ids.len() as u32, sums.pairs[pi].count));
        },
    );
    Folded {
        ids,
        stacks,
        total,
        non_idle,
    }
}
