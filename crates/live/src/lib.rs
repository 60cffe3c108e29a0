//! Live outputs of `pkprof top`: every way a frame leaves the process.
//!
//! `text` renders the `top -b`-style frame (also sent over UDP), `json` one JSON object per frame,
//! `prometheus` the text exposition with bounded cardinality, `http` serves `/metrics` and
//! `/stream`, `udp` sends text frames to a remote `nc -l -u`, `wall_text` the wall-time
//! breakdown frame (`top --batch --wall`).

pub mod http;
pub mod json;
pub mod prometheus;
pub mod text;
pub mod udp;
pub mod wall_text;
