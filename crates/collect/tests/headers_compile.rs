//! Every BPF header compiles alone (docs/design.md, "How a chain plugs in"): each header under
//! src/bpf/ is the only include of a translation unit compiled with clang for the BPF target, with
//! the flags build.rs uses. The core is built with no chain, each chain header with the core and
//! itself only (PKPROF_CHAINS narrowed to its own entry), and record's headers with their link sink:
//! so a chain depends on nothing but the core, and the core on no chain. Needs no root.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags the build gives clang for the BPF programs (build.rs); libbpf-cargo adds these three.
const LIBBPF_CARGO_ARGS: &[&str] = &["-g", "-O2", "-fno-stack-protector"];

fn bpf_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bpf")
}

/// Every `.h` under src/bpf, the pinned vmlinux.h excepted, as paths relative to src/bpf.
fn headers(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().expect("a file name").to_owned();
        if path.is_dir() {
            if name != "vmlinux" {
                headers(&path, &rel.join(&name), out);
            }
        } else if path.extension().is_some_and(|x| x == "h") {
            out.push(rel.join(name));
        }
    }
}

/// The entries of PKPROF_CHAINS in chains/chains.h: (name, slot).
fn chain_list() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(bpf_dir().join("chains/chains.h")).expect("chains/chains.h");
    let line = text
        .lines()
        .find(|l| l.starts_with("#define PKPROF_CHAINS(CHAIN)"))
        .expect("chains/chains.h defines PKPROF_CHAINS(CHAIN)");
    line.split("CHAIN(")
        .skip(1) // the text before the first entry
        .map(|entry| {
            let inner = entry.split(')').next().unwrap_or_default();
            let (name, slot) = inner.split_once(',').expect("CHAIN(name, SLOT)");
            (name.trim().to_string(), slot.trim().to_string())
        })
        .collect()
}

/// The entries of PKPROF_OBSERVERS in chains/chains.h: their names.
fn observer_list() -> Vec<String> {
    let text = std::fs::read_to_string(bpf_dir().join("chains/chains.h")).expect("chains/chains.h");
    let line = text
        .lines()
        .find(|l| l.starts_with("#define PKPROF_OBSERVERS(OBSERVER)"))
        .expect("chains/chains.h defines PKPROF_OBSERVERS(OBSERVER)");
    line.split("OBSERVER(")
        .skip(1) // the text before the first entry
        .map(|entry| {
            entry
                .split(')')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect()
}

/// libbpf's API headers (<bpf/bpf_helpers.h>...), as libbpf-cargo provides them to the build.
fn libbpf_headers(dir: &Path) -> PathBuf {
    let bpf = dir.join("bpf");
    std::fs::create_dir_all(&bpf).expect("a directory for libbpf's headers");
    for (name, contents) in libbpf_rs::libbpf_sys::API_HEADERS.iter() {
        std::fs::write(bpf.join(name), contents).expect("writing a libbpf header");
    }
    dir.to_path_buf()
}

#[test]
fn every_bpf_header_compiles_alone() {
    let dir = bpf_dir();
    let mut list = Vec::new();
    headers(&dir, Path::new(""), &mut list);
    assert!(
        list.len() >= 10,
        "found only {list:?} under {}",
        dir.display()
    );
    let chains = chain_list();
    assert!(!chains.is_empty(), "no chain in chains/chains.h");
    let all_chains: String = chains
        .iter()
        .map(|(n, s)| format!("CHAIN({n}, {s}) "))
        .collect();
    let observers = observer_list();
    assert!(!observers.is_empty(), "no observer in chains/chains.h");
    let all_observers: String = observers
        .iter()
        .map(|n| format!("OBSERVER({n}) "))
        .collect();
    let tmp = std::env::temp_dir().join(format!("pkprof-headers-{}", std::process::id()));
    let include = libbpf_headers(&tmp.join("libbpf"));
    let build_args: Vec<&str> = env!("PKPROF_BPF_CLANG_ARGS").split('\u{1f}').collect();
    let mut failures = Vec::new();
    for header in &list {
        let rel = header.to_string_lossy().into_owned();
        // Which chains and sinks this header is built with: its own, or all for the list of them.
        let own_chain = chains
            .iter()
            .find(|(n, _)| rel == format!("chains/{n}.bpf.h"))
            .map(|(n, s)| format!("CHAIN({n}, {s})"));
        let chains_arg = match (own_chain, rel.as_str()) {
            (Some(own), _) => own,
            (None, "chains/all.bpf.h") => all_chains.clone(),
            _ => String::new(),
        };
        // Observers likewise: an observer's header with itself, the list with all, else none.
        let observers_arg = match rel.as_str() {
            "chains/all.bpf.h" => all_observers.clone(),
            _ => (observers.iter())
                .find(|n| rel == format!("chains/{n}.bpf.h"))
                .map(|n| format!("OBSERVER({n})"))
                .unwrap_or_default(),
        };
        let sinks_arg = if rel.starts_with("record/") {
            "SINK(record)"
        } else {
            ""
        };
        let unit = tmp.join(format!("{}.c", rel.replace('/', "_")));
        std::fs::write(&unit, format!("#include \"{rel}\"\n")).expect("writing the unit");
        let out = Command::new("clang")
            .args(LIBBPF_CARGO_ARGS)
            .args(["-target", "bpf"])
            .args(&build_args)
            // A static non-inline helper its users call is unused in a unit of its own.
            .arg("-Wno-unused-function")
            .arg(format!("-I{}", include.display()))
            .arg(format!("-DPKPROF_CHAINS(CHAIN)={chains_arg}"))
            .arg(format!("-DPKPROF_SINKS(SINK)={sinks_arg}"))
            .arg(format!("-DPKPROF_OBSERVERS(OBSERVER)={observers_arg}"))
            .arg("-c")
            .arg(&unit)
            .arg("-o")
            .arg(unit.with_extension("o"))
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
            .output()
            .expect("running clang (scripts/setup.sh installs it)");
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err.lines().find(|l| l.contains("error")).unwrap_or("");
            failures.push(format!("{rel}: {first}"));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        failures.is_empty(),
        "BPF headers that do not compile alone:\n{}",
        failures.join("\n")
    );
}
