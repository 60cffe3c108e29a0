//! Report errors: each one line naming the problem, its cause included. So that a printer of the
//! whole chain (anyhow's `{:#}`) does not say the cause twice, no variant also returns its cause
//! from `source()`: `From<io::Error>` is written by hand (thiserror's `#[from]` makes a source).

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("writing the report: {0}")]
    Io(std::io::Error),
    #[error("--group {spec:?}: {reason}")]
    BadGroup { spec: String, reason: String },
    #[error("{0}")]
    Selection(String),
    #[error("unknown output format {0:?} (known: pprof, folded, speedscope, html)")]
    UnknownFormat(String),
    #[error("the profile has no samples{0}")]
    Empty(String),
}

impl From<std::io::Error> for ReportError {
    fn from(e: std::io::Error) -> Self {
        ReportError::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_said_once() {
        let e = ReportError::from(std::io::Error::from_raw_os_error(28)); // ENOSPC
        let text = e.to_string();
        assert!(text.contains("No space left on device"), "{text}");
        // Shown in the message, so not returned again to a chain printer.
        assert!(std::error::Error::source(&e).is_none(), "{text}");
    }
}
