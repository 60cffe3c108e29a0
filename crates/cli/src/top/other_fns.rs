//! Names OTHER's kernel functions in each frame (docs/design.md, "Wall time"): the wall chain
//! reads return addresses; the symbolizer's kernel side (kallsyms) names the function each lies
//! in, and a row's addresses in one function are merged.

use std::collections::HashMap;

use pkprof_accounting::{name_other_fns, Interval};
use pkprof_symbolize::{Symbolizer, SymbolizerOptions};

/// Most addresses remembered before the cache starts over (the kernel table holds at most
/// `PKPROF_OTHER_FNS` entries, most of them a few call sites each).
const MAX_NAMES: usize = 16_384;

pub struct Namer {
    sym: Symbolizer,
    names: HashMap<u64, String>,
}

impl Namer {
    pub fn new() -> Self {
        Namer {
            sym: Symbolizer::new(SymbolizerOptions::default()),
            names: HashMap::new(),
        }
    }

    /// Names every row's OTHER functions in `frame`.
    pub fn name(&mut self, frame: &mut Interval) {
        if self.names.len() > MAX_NAMES {
            self.names.clear();
        }
        let mut todo: Vec<u64> = (frame.rows.iter().flat_map(|r| &r.other_fns))
            .map(|f| f.addr)
            .filter(|a| !self.names.contains_key(a))
            .collect();
        todo.sort_unstable();
        todo.dedup();
        if !todo.is_empty() {
            // A return address: the call is the byte before it (a call that never returns may
            // end its function).
            let calls: Vec<u64> = todo.iter().map(|a| a.saturating_sub(1)).collect();
            for (addr, frames) in todo.iter().zip(self.sym.symbolize_kernel(&calls)) {
                let name = (frames.first())
                    .filter(|f| f.symbolized)
                    .map_or_else(|| format!("[kernel]+{addr:#x}"), |f| f.name.clone());
                self.names.insert(*addr, name);
            }
        }
        for r in &mut frame.rows {
            name_other_fns(&mut r.other_fns, |a| self.names[&a].clone());
        }
    }
}
