//! The call sites of `pkprof syscalls` while it traces: each process's maps are captured when it
//! first shows up (a new thread, an exec, its first call site), and each sampled call's user stack
//! is unwound from its copied bytes as soon as its record is read, then counted in the
//! collector's `SiteTable` (docs/design.md, "User stacks"); the bytes are never kept.

use std::collections::HashMap;

use pkprof_collect::syscall_graph::{SiteSample, SiteTable, SyscallTracer, TraceEvent};
use pkprof_profile::Truncation;
use pkprof_symbolize::{Symbolizer, UserRegs};

/// Captures, unwinding and the site table of one run.
pub struct Sites {
    symbolizer: Symbolizer,
    /// pid -> whether its maps were captured (a failed capture is not tried again until exec).
    captures: HashMap<u32, bool>,
    table: SiteTable,
    /// Sampled calls carry stack bytes to unwind (`--stack-bytes` > 0); else frame pointers.
    unwinding: bool,
}

impl Sites {
    pub fn new(symbolizer: Symbolizer, unwinding: bool) -> Self {
        Sites {
            symbolizer,
            captures: HashMap::new(),
            table: SiteTable::default(),
            unwinding,
        }
    }

    /// Captures `pid`'s maps now (again if they were), and tells the programs its call sites
    /// need not wake pkprof any more.
    pub fn capture(&mut self, tracer: &SyscallTracer, pid: u32) {
        let ok = match self.symbolizer.capture_process(pid) {
            Ok(()) => true,
            Err(e) => {
                tracing::info!("{e}");
                false
            }
        };
        self.captures.insert(pid, ok);
        if let Err(e) = tracer.mark_captured(pid) {
            tracing::info!("{e}");
        }
    }

    /// One record of the ring, in the order the kernel wrote them.
    pub fn event(&mut self, tracer: &SyscallTracer, event: TraceEvent) {
        match event {
            // Cheap when the process was captured already (by another thread).
            TraceEvent::NewThread { pid, .. } => self.capture(tracer, pid),
            TraceEvent::Exec { pid } => {
                self.symbolizer.forget(pid);
                self.capture(tracer, pid);
            }
            TraceEvent::Site(site) => self.site(tracer, *site),
        }
    }

    fn site(&mut self, tracer: &SyscallTracer, s: SiteSample) {
        if !self.captures.contains_key(&s.pid) {
            self.capture(tracer, s.pid);
        }
        let captured = self.captures.get(&s.pid) == Some(&true);
        if captured {
            // The call's own code outside the captured maps (dlopen since): the maps are read
            // again (at most so often per process) before the unwinder looks for its tables.
            self.symbolizer.ensure_code_mapped(s.pid, s.ip);
        }
        let (frames, end) = if self.unwinding {
            let regs = UserRegs {
                ip: s.ip,
                sp: s.sp,
                bp: s.bp,
            };
            let unwound = self
                .symbolizer
                .unwind(s.pid, regs, &s.stack, s.window_full, &s.fp_chain);
            // A caller outside the maps: read them again for the next calls.
            if let Some(addr) = unwound.unmapped.filter(|_| captured) {
                self.symbolizer
                    .ensure_code_mapped(s.pid, addr.saturating_sub(1));
            }
            (unwound.frames, unwound.end)
        } else {
            (
                s.fp_chain,
                Some(Truncation::frame_pointer_walk(s.fp_truncated)),
            )
        };
        if captured && !self.unwinding {
            for addr in frames.iter().skip(1) {
                self.symbolizer.ensure_mapped(s.pid, addr.saturating_sub(1));
            }
        }
        self.table.add(s.edge, frames, end);
    }

    /// The counted sites, and the symbolizer with every process captured, to name the frames.
    pub fn finish(self) -> (SiteTable, Symbolizer) {
        (self.table, self.symbolizer)
    }
}
