//! Compiles the BPF programs in src/bpf/ into libbpf-rs skeletons in OUT_DIR.
use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: &[&str] = &["cpu_account", "syscall_graph"];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("target arch is set by cargo");
    let vmlinux_dir = PathBuf::from("src/bpf/vmlinux").join(&arch);
    assert!(
        vmlinux_dir.join("vmlinux.h").exists(),
        "no pinned vmlinux.h for {arch}: run tools/gen_vmlinux_h.sh on such a machine"
    );
    let bpf_arch = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => other,
    };
    let clang_args = [
        "-Wall".to_string(),
        "-Werror".to_string(),
        "-mcpu=v3".to_string(),
        format!("-I{}", vmlinux_dir.display()),
        "-Isrc/bpf".to_string(),
        format!("-D__TARGET_ARCH_{bpf_arch}"),
    ];
    // The same flags for tests/headers_compile.rs, which compiles each header alone.
    println!(
        "cargo:rustc-env=PKPROF_BPF_CLANG_ARGS={}",
        clang_args.join("\u{1f}")
    );
    for name in PROGRAMS {
        let src = format!("src/bpf/{name}.bpf.c");
        SkeletonBuilder::new()
            .source(&src)
            .clang_args(&clang_args)
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building BPF program {src}: {e:#}"));
        println!("cargo:rerun-if-changed={src}");
    }
    // The whole directory: the shared header, the core and chain headers, the vmlinux header.
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=build.rs");
}
