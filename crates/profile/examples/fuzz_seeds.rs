//! Writes the seed corpora of the fuzz targets in `crates/profile/fuzz/`: small valid profile
//! files for `read_profile` and their uncompressed bodies for `read_body`.
//!
//! `cargo run -p pkprof-profile --example fuzz_seeds -- crates/profile/fuzz/corpus`

use std::path::PathBuf;

use pkprof_profile::format::{write_profile_with, Compression, HEADER_LEN};
use pkprof_profile::synthetic::{rich, synthetic};
use pkprof_profile::Profile;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: fuzz_seeds CORPUS_DIR")?,
    );
    let seeds = [
        ("empty", Profile::default()),
        ("rich", rich()),
        ("small", synthetic(40, 10, 30, 1)),
    ];
    for target in ["read_profile", "read_body"] {
        std::fs::create_dir_all(root.join(target))?;
    }
    for (name, p) in &seeds {
        let mut gz = Vec::new();
        write_profile_with(p, &mut gz, Compression::Gzip)?;
        std::fs::write(
            root.join("read_profile").join(format!("{name}.pkprof")),
            &gz,
        )?;
        let mut raw = Vec::new();
        write_profile_with(p, &mut raw, Compression::None)?;
        std::fs::write(
            root.join("read_profile").join(format!("{name}-raw.pkprof")),
            &raw,
        )?;
        std::fs::write(
            root.join("read_body").join(format!("{name}.pb")),
            &raw[HEADER_LEN..],
        )?;
    }
    println!("seeds written under {}", root.display());
    Ok(())
}
