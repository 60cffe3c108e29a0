//! What each sample cost (`pkprof_recording::SampleCosts`: the kernel side's time to build it,
//! user space's time to unwind it), printed after the summary as median and p99.

use std::fmt::Write as _;

use pkprof_recording::SampleCosts;

fn us(ns: Option<f64>) -> String {
    ns.map_or_else(|| "-".to_string(), |v| format!("{:.1}", v / 1000.0))
}

/// One line for the end-of-run summary. `sampler_mean_ns`: the sampling program's mean run time
/// from the kernel's BPF statistics (its ring-buffer output included), when measured.
pub fn render(costs: &SampleCosts, sampler_mean_ns: Option<f64>) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "per sample: kernel side {} µs median / {} µs p99 ({} samples; up to the ring output)",
        us(costs.build.quantile(0.5)),
        us(costs.build.quantile(0.99)),
        costs.build.len()
    );
    if let Some(mean) = sampler_mean_ns {
        let _ = write!(out, ", {} µs mean by BPF stats", us(Some(mean)));
    }
    if !costs.unwind.is_empty() {
        let _ = write!(
                out,
                "; unwinding {} µs median / {} µs p99 ({} stacks); first stack of a process {:.1} ms at most ({} processes)",
                us(costs.unwind.quantile(0.5)),
                us(costs.unwind.quantile(0.99)),
                costs.unwind.len(),
                costs.slowest_first.as_secs_f64() * 1000.0,
                costs.processes
            );
    }
    out.push('\n');
    out
}
