//! `pkprof ctl`: one request to a running agent over its control socket (`pkprof_agent::ctl`).

use anyhow::{Context, Result};
use pkprof_agent::ctl::{self, Request};

use crate::cli::{CtlOptions, CtlRequest};
use crate::output_file::OutputFile;

pub fn run(opts: CtlOptions) -> Result<()> {
    let request = match &opts.request {
        CtlRequest::Status => Request::Status,
        CtlRequest::Stop => Request::Stop,
        CtlRequest::Start => Request::Start,
        CtlRequest::Reset => Request::Reset,
        CtlRequest::Flush => Request::Flush,
        CtlRequest::Dump { since } => {
            let now = pkprof_recording::meta::unix_ns();
            let since_ns = match since {
                Some(s) => pkprof_agent::config::parse_when(s, now)
                    .map_err(|e| anyhow::anyhow!("--since {e}"))?,
                None => 0,
            };
            Request::Dump { since_ns }
        }
    };
    // Checked before asking: the agent closes its open window for a dump.
    let out = match &opts.output {
        Some(path) => Some((path.clone(), OutputFile::create(path, "profile")?)),
        None => None,
    };
    let body = ctl::request(&opts.socket, request)?;
    match out {
        Some((path, file)) => {
            // Checked before it is written: a profile the reports can read.
            let p = pkprof_profile::read_profile(&body[..])
                .context("the agent sent a profile that does not read back")?;
            let bytes = file.commit(|w| Ok(w.write_all(&body)?))?;
            eprintln!(
                "pkprof: wrote {} ({} samples, {} bytes)",
                path.display(),
                p.total_samples(),
                bytes
            );
        }
        None => {
            crate::stdout::write(&body).context("writing the answer")?;
        }
    }
    Ok(())
}
