//! Whole files: arbitrary bytes must give a profile or an error, never a panic, a hang or an
//! unbounded allocation. Mostly explores the header, lengths and checksum, since a mutated body
//! rarely keeps its CRC (`read_body` goes past it).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = pkprof_profile::read_profile(data) {
        assert!(!e.to_string().contains('\n'), "error not on one line: {e}");
    }
});
