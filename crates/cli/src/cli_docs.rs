//! Shell completions and man pages, generated from the command-line definition (cli.rs) by
//! clap_complete and clap_mangen, so they cannot drift from the options pkprof really takes.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;

/// The completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "pkprof", &mut buf);
    write_stdout(&buf)
}

/// pkprof(1) on stdout, or every page (pkprof.1, pkprof-top.1, ...) written into `dir`.
pub fn man(dir: Option<&Path>) -> Result<()> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let Some(dir) = dir else {
        return write_stdout(&page(&cmd)?);
    };
    let mut cmds = vec![cmd];
    while let Some(cmd) = cmds.pop() {
        let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, page(&cmd)?)
            .with_context(|| format!("writing the man page {}", path.display()))?;
        cmds.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    }
    Ok(())
}

/// One page as clap_mangen renders it, except that the help's closing text is an EXAMPLES section
/// set line for line (clap_mangen's EXTRA section fills it into a paragraph, which scrambles
/// the aligned examples).
fn page(cmd: &clap::Command) -> Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut buf)?;
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut buf)?;
    }
    if let Some(after) = cmd.get_after_help() {
        let mut roff = roff::Roff::new();
        roff.control("SH", ["EXAMPLES"]).control("nf", []);
        let text = after.to_string();
        for line in text.lines().filter(|l| *l != "Examples:") {
            roff.text([roff::roman(line)]);
        }
        roff.control("fi", []);
        roff.to_writer(&mut buf)?;
    }
    if cmd.get_version().is_some() {
        man.render_version_section(&mut buf)?;
    }
    Ok(buf)
}

fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .context("writing to stdout")
}
