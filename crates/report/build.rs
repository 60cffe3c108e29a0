//! Compiles pprof's profile schema (`proto/profile.proto`) into Rust in `OUT_DIR`, with protox
//! (pure Rust: no system `protoc`) feeding prost-build.

fn main() {
    const PROTO: &str = "proto/profile.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    println!("cargo:rerun-if-changed=build.rs");
    let fds = match protox::compile([PROTO], ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("cannot compile {PROTO}: {e}"),
    };
    let mut config = prost_build::Config::new();
    // The generated types are private to the pprof exporter; the schema carries the docs.
    config.disable_comments(["."]);
    if let Err(e) = config.compile_fds(fds) {
        panic!("cannot generate Rust from {PROTO}: {e}");
    }
}
