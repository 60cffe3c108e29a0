//! Exporters: one module per exchange format, each behind [`Exporter`], writing to any `Write`.

pub mod folded;
pub mod pprof;
pub mod speedscope;

pub mod html;

use std::io::Write;

use pkprof_profile::Profile;

use crate::kind::KindSelection;
use crate::names::NameStyle;
use crate::ReportError;

/// Options every exporter understands.
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    pub names: NameStyle,
    /// Shown where the format has a title (HTML page, speedscope profile name).
    pub title: String,
    /// The sample kinds the profile is a view of ([`crate::kind::view`]): on-CPU samples, or
    /// microseconds of off-CPU (or on- and off-CPU) time; names what a format's values measure.
    pub kind: KindSelection,
}

/// A format a profile can be written in.
pub trait Exporter {
    /// The name `--format` selects it by (`pprof`, `folded`, `speedscope`, `html`).
    fn name(&self) -> &'static str;
    /// The usual file extension.
    fn extension(&self) -> &'static str;
    fn write(
        &self,
        profile: &Profile,
        opts: &ExportOptions,
        out: &mut dyn Write,
    ) -> Result<(), ReportError>;
}

/// Every exporter, by name.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(pprof::Pprof),
        Box::new(folded::Folded),
        Box::new(speedscope::Speedscope),
        Box::new(html::HtmlExporter),
    ]
}

/// The exporter named `name`.
pub fn exporter(name: &str) -> Result<Box<dyn Exporter>, ReportError> {
    exporters()
        .into_iter()
        .find(|e| e.name() == name)
        .ok_or_else(|| ReportError::UnknownFormat(name.to_string()))
}
