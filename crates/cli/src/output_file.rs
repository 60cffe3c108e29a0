//! An output file written whole or not at all: created under a hidden temporary name before any
//! work starts (an unwritable path is an error before anything runs), then written, synced and
//! renamed into place. A failed write, a full disk or an early error leaves nothing behind.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

pub struct OutputFile {
    file: Option<File>,
    tmp: PathBuf,
    path: PathBuf,
    /// What the file holds, for error messages ("profile", "report").
    what: &'static str,
}

impl OutputFile {
    /// Creates `.NAME.tmp` beside `path`.
    pub fn create(path: &Path, what: &'static str) -> Result<OutputFile> {
        let tmp = path.with_file_name(format!(
            ".{}.tmp",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        let file = File::create(&tmp)
            .with_context(|| format!("cannot write the {what} to {}", path.display()))?;
        Ok(OutputFile {
            file: Some(file),
            tmp,
            path: path.to_path_buf(),
            what,
        })
    }

    /// Writes the content with `write`, syncs, and renames the file into place.
    pub fn commit(mut self, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
        let fail = |e: &dyn std::fmt::Display| {
            anyhow!(
                "cannot write the {} to {}: {e}",
                self.what,
                self.path.display()
            )
        };
        let file = self.file.take().ok_or_else(|| fail(&"written twice"))?;
        let mut w = BufWriter::new(file);
        write(&mut w).map_err(|e| fail(&e))?;
        let file = w.into_inner().map_err(|e| fail(&e.into_error()))?;
        file.sync_all().map_err(|e| fail(&e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| fail(&e))
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // After a rename there is no temporary left; after any failure this removes it.
        let _ = std::fs::remove_file(&self.tmp);
    }
}
