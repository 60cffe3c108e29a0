//! Kernel symbolization through kallsyms. `/proc/kallsyms` shows addresses to root only, so these
//! tests are ignored unless run with `--include-ignored` as root.

use std::fs;

use pkprof_profile::{Frame, FrameKind};
use pkprof_symbolize::{Symbolizer, SymbolizerOptions};

/// The address of a text symbol, from /proc/kallsyms.
fn kallsyms_addr(name: &str) -> u64 {
    let text = fs::read_to_string("/proc/kallsyms").unwrap();
    text.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && f[2] == name && matches!(f[1], "t" | "T"))
                .then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("{name} not in /proc/kallsyms"))
}

/// `vfs_read + 0x10` is in `vfs_read`: one frame, module `[kernel]`, offset = the address.
/// `_etext + 0x10` lies past the end of the kernel's text, in no function: `[kernel]+0xADDR`.
#[test]
#[ignore = "needs root"]
fn kernel_addresses() {
    let vfs_read = kallsyms_addr("vfs_read");
    assert_ne!(vfs_read, 0, "kallsyms hides addresses: not root?");
    let past_text = kallsyms_addr("_etext") + 0x10;
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    let frames = sym.symbolize_kernel(&[vfs_read + 0x10, past_text, vfs_read + 0x10]);
    assert_eq!(
        frames[0],
        vec![Frame {
            kind: FrameKind::Kernel,
            name: "vfs_read".into(),
            module: "[kernel]".into(),
            offset: vfs_read + 0x10,
            symbolized: true,
            ..Frame::default()
        }]
    );
    assert_eq!(frames[2], frames[0]);
    assert_eq!(
        frames[1],
        vec![Frame {
            kind: FrameKind::Kernel,
            name: format!("[kernel]+{past_text:#x}"),
            module: "[kernel]".into(),
            offset: past_text,
            symbolized: false,
            ..Frame::default()
        }]
    );
    // Below every kernel symbol.
    let f = &sym.symbolize_kernel(&[0x10])[0];
    assert_eq!(f[0].name, "[kernel]+0x10");
    assert!(sym.warnings().is_empty(), "{:?}", sym.warnings());
}

/// A symbol of a loaded kernel module or BPF program (kallsyms lines ending in `[name]`) gets that
/// name as its module. Skipped silently when nothing such is loaded.
#[test]
#[ignore = "needs root"]
fn module_symbols_name_their_module() {
    let text = fs::read_to_string("/proc/kallsyms").unwrap();
    let Some((addr, name, module)) = text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() == 4 && matches!(f[1], "t" | "T")).then(|| {
            (
                u64::from_str_radix(f[0], 16).unwrap(),
                f[2].to_string(),
                f[3].to_string(),
            )
        })
    }) else {
        eprintln!("no module text symbol in /proc/kallsyms; nothing to check");
        return;
    };
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    let f = &sym.symbolize_kernel(&[addr])[0];
    assert_eq!(f[0].module, module, "{f:?}");
    assert!(f[0].symbolized);
    // Several symbols may share the address; blazesym picks one of them.
    let at_addr: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{addr:016x} ")))
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert!(
        at_addr.contains(&f[0].name.as_str()) || f[0].name == name,
        "{f:?} {at_addr:?}"
    );
}
