//! Bodies: the input is taken as an uncompressed protobuf body and given a correct header, so
//! every input reaches the decoder and the index checks. Whatever reads must also survive a
//! write and read back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pkprof_profile::format::{Compression, FORMAT_VERSION, MAGIC};

fuzz_target!(|body: &[u8]| {
    // The 36-byte header of docs/profile-format.md, compression 0 (none).
    let mut file = Vec::with_capacity(36 + body.len());
    file.extend_from_slice(&MAGIC);
    file.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    file.extend_from_slice(&0u32.to_le_bytes());
    file.extend_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    file.extend_from_slice(body);
    match pkprof_profile::read_profile(&file[..]) {
        Ok(p) => {
            for compression in [Compression::None, Compression::Gzip] {
                let mut out = Vec::new();
                pkprof_profile::format::write_profile_with(&p, &mut out, compression)
                    .expect("a profile that was read can be written");
                let back = pkprof_profile::read_profile(&out[..]).expect("what was written reads");
                assert_eq!(back, p);
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "error not on one line: {e}"),
    }
});
