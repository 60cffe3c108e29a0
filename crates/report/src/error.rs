//! Report errors: each one line naming the problem.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("writing the report: {0}")]
    Io(#[from] std::io::Error),
    #[error("--group {spec:?}: {reason}")]
    BadGroup { spec: String, reason: String },
    #[error("{0}")]
    Selection(String),
    #[error("unknown output format {0:?} (known: pprof, folded, speedscope, html)")]
    UnknownFormat(String),
    #[error("the profile has no samples{0}")]
    Empty(String),
}
