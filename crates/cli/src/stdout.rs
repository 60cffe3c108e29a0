//! Writing results to standard output. A reader that closed the pipe (`pkprof top --batch | head
//! -2`) had what it wanted: pkprof stops writing and exits 0 without a word, as `pkprof report`
//! always did and ripgrep does (coreutils die of SIGPIPE instead, which a shell shows as 141; Rust
//! ignores SIGPIPE, so pkprof sees EPIPE). Any other write error is an error.

use std::io::{self, Write};

/// Whether `e` says the reader of the pipe went away.
pub fn is_closed_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

/// Writes `bytes` and flushes. `Ok(false)`: the reader closed the pipe, write no more.
pub fn write(bytes: &[u8]) -> io::Result<bool> {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if is_closed_pipe(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
