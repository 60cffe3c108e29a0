//! `--count FUNC@BINARY`: one uprobe per function on the binary (every process that maps it), the
//! probe's index as attach cookie.

use libbpf_rs::{Link, ProgramMut, UprobeOpts};

use super::FuncProbe;
use crate::error::{Cause, CollectError};

pub fn attach(
    prog: &ProgramMut<'_>,
    index: usize,
    probe: &FuncProbe,
) -> Result<Link, CollectError> {
    let fail = |what: &str, source: Option<Cause>| CollectError::Probe {
        spec: format!("{}@{}", probe.function, probe.binary.display()),
        what: what.into(),
        source,
    };
    if let Err(e) = std::fs::File::open(&probe.binary) {
        return Err(fail("cannot read the binary", Some(e.into())));
    }
    let opts = UprobeOpts {
        func_name: Some(probe.function.clone()),
        cookie: index as u64,
        ..Default::default()
    };
    prog.attach_uprobe_with_opts(-1, &probe.binary, 0, opts)
        .map_err(|e| {
            let msg = e.to_string();
            // libbpf reports a missing symbol as a missing file: say what it means instead.
            if msg.contains("No such file") || msg.contains("ENOENT") || msg.contains("not found") {
                fail("no such function in the binary's symbol tables", None)
            } else {
                fail("attaching the uprobe", Some(e.into()))
            }
        })
}
