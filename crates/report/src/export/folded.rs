//! Folded stacks, the input of Brendan Gregg's `flamegraph.pl` and of inferno: one line per
//! distinct stack, `root;caller;...;leaf COUNT`, root first.
//!
//! - Names are the report's (`1234u:main;1234k:sys_read;1234k:vfs_read 17`, or plain names with
//!   `--names plain`), so a flame graph keeps each process's tower apart, and the kernel work done
//!   for it on top of it.
//! - COUNT is the number of samples (each stands for `meta.period_ns` of CPU); sample groups with
//!   the same named stack (other threads, contexts, or frames of equal names) are summed into one
//!   line; groups with a zero count are left out. Lines are sorted by stack, byte-wise, so the
//!   output depends only on the profile.
//! - The format has no escaping: a `;` inside a name would split the frame, and a line break would
//!   split the line. Such characters are replaced: `;` by `:` (as FlameGraph's stackcollapse
//!   scripts do), control characters (line breaks, tabs...) by a space.
//! - A sample with no frames at all (both stack reads failed) is written as the one frame
//!   `[no stack]`.
//! - The format has no header or comment, so the losses cannot be stated in it: `pkprof report`
//!   says them on standard error instead when there were any.

use std::cell::RefCell;
use std::io::{BufWriter, Write};

use pkprof_profile::Profile;

use super::{ExportOptions, Exporter};
use crate::names::{frame_label, owner};
use crate::stacks::{name_stacks, sum_by_stack};
use crate::ReportError;

/// The one frame written for a sample that has none.
pub const NO_STACK: &str = "[no stack]";

/// Writes folded stacks.
pub struct Folded;

impl Exporter for Folded {
    fn name(&self) -> &'static str {
        "folded"
    }

    fn extension(&self) -> &'static str {
        "folded"
    }

    fn write(
        &self,
        profile: &Profile,
        opts: &ExportOptions,
        out: &mut dyn Write,
    ) -> Result<(), ReportError> {
        let sums = sum_by_stack(
            profile,
            |g| g.count > 0,
            |g| owner(opts.names, g.bucket, g.pid),
            false,
        );
        // Each frame's name, once per owner.
        let names: RefCell<Vec<String>> = RefCell::new(Vec::new());
        let mut lines: Vec<(String, u64)> = Vec::with_capacity(sums.pairs.len());
        name_stacks(
            profile,
            &sums,
            |f, g| {
                let (bucket, pid) = owner(opts.names, g.bucket, g.pid);
                let mut names = names.borrow_mut();
                names.push(match f {
                    Some(f) => escape(&frame_label(
                        pid,
                        bucket,
                        &profile.frames[f as usize],
                        opts.names,
                    )),
                    None => NO_STACK.to_string(),
                });
                Some((names.len() as u32 - 1, false))
            },
            |pi, stack| {
                let names = names.borrow();
                let mut line = String::new();
                for (i, &n) in stack.iter().enumerate() {
                    if i > 0 {
                        line.push(';');
                    }
                    line.push_str(&names[n as usize]);
                }
                let count = u64::try_from(sums.pairs[pi].count).unwrap_or(u64::MAX);
                lines.push((line, count));
            },
        );
        lines.sort_unstable();
        let mut out = BufWriter::with_capacity(1 << 16, out);
        let mut i = 0;
        while i < lines.len() {
            let (stack, mut count) = (&lines[i].0, lines[i].1);
            let mut j = i + 1;
            while j < lines.len() && lines[j].0 == *stack {
                count = count.saturating_add(lines[j].1);
                j += 1;
            }
            writeln!(out, "{stack} {count}")?;
            i = j;
        }
        out.flush()?;
        Ok(())
    }
}

/// `name` made safe for one frame of a folded line: `;` becomes `:`, control characters a space.
pub fn escape(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape("a;b\nc\td"), "a:b c d");
        assert_eq!(escape("ünï::<'_> (x)"), "ünï::<'_> (x)");
    }
}
