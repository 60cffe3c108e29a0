//! Reads the one list of plug-ins, `chains/chains.h` (docs/design.md, "How a chain plugs in"),
//! for what is derived from it: collect's build script generates the BPF include list and the Rust
//! `CHAINS` from it, accounting's build script `NR_CHAINS` and `CHAIN_NAMES`, and the header test
//! builds each chain alone from it. Read by hand: the lists are one line of X-macro entries each,
//! no C worth a parser.
#![allow(dead_code)] // each user takes the part it needs

/// One entry of `PKPROF_CHAINS`: `CHAIN(name, SLOT)`.
pub struct ChainEntry {
    /// The chain's file stem: `chains/<name>.bpf.h` and `src/chains/<name>.rs`.
    pub name: String,
    /// Its served slot, `PKPROF_CHAIN_<SLOT>`; lower-cased, its `kind` label (`NET` -> `net`).
    pub slot: String,
}

/// The entries of `PKPROF_CHAINS`, in their order (the order of the served slots).
pub fn chains(chains_h: &str) -> Vec<ChainEntry> {
    entries(chains_h, "PKPROF_CHAINS(CHAIN)", "CHAIN(")
        .into_iter()
        .map(|inner| {
            let (name, slot) = inner.split_once(',').unwrap_or_else(|| {
                panic!("chains/chains.h: CHAIN({inner}) is not CHAIN(name, SLOT)")
            });
            ChainEntry {
                name: name.trim().to_string(),
                slot: slot.trim().to_string(),
            }
        })
        .collect()
}

/// The names in `PKPROF_OBSERVERS`, in their order.
pub fn observers(chains_h: &str) -> Vec<String> {
    entries(chains_h, "PKPROF_OBSERVERS(OBSERVER)", "OBSERVER(")
        .into_iter()
        .map(|inner| inner.trim().to_string())
        .collect()
}

/// What stands between the parentheses of each `open` in the one-line `#define <define> ...`.
fn entries(chains_h: &str, define: &str, open: &str) -> Vec<String> {
    let head = format!("#define {define}");
    let line = chains_h
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("chains/chains.h has no line `{head} ...`"));
    line[head.len()..]
        .split(open)
        .skip(1) // the text before the first entry
        .map(|entry| entry.split(')').next().unwrap_or_default().to_string())
        .collect()
}
