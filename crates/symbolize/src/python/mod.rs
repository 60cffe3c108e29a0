//! CPython frames (docs/design.md, "Python frames"): finding an interpreter in a process and the
//! layout of its structures (`layout`), and naming the frames the sampling program read from its
//! frame chain (`code`).

mod code;
mod layout;

pub use code::{line_of, read_code, read_mem, CodeInfo};
pub use layout::{
    detect, detect_in_maps_text, runtime_by_offset_in_maps_text, supported_versions, table_offsets,
    PyDetect, PyLayout, PyOffsets,
};
pub(crate) use layout::{detect_in, is_candidate};

/// The name a Python frame carries in reports: `FILE:QUALNAME` with the file's base name
/// (`fib.py:fib`, `app.py:Server.handle`).
pub fn frame_name(filename: &str, qualname: &str) -> String {
    let base = filename.rsplit('/').next().unwrap_or(filename);
    format!("{base}:{qualname}")
}
