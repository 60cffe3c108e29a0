//! User stacks unwound from the binaries' own unwind tables (docs/design.md, "User stacks"): each
//! sample brings its user registers and a copy of the stack's top bytes; framehop walks them with
//! the `.eh_frame` (or `.debug_frame`) of every mapped file, falling back to frame pointers for
//! code without tables (JIT). How the walk ended is told truthfully: complete only when the
//! unwinder reached the end the tables mark (`_start`, `clone3`) in code that has tables; every
//! other end has a reason ([`Truncation`]).
//!
//! `tables` reads one file's tables once (shared by every process mapping it, bounded in memory);
//! `walk` builds a process's unwinder from its mappings and walks one stack.

mod tables;
mod walk;

pub(crate) use walk::Unwinding;
pub use walk::{UnwoundStack, UserRegs, MAX_USER_FRAMES};
