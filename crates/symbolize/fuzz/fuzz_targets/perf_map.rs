//! Perf maps: arbitrary bytes must parse without panicking into entries that keep the parser's
//! promises, and the lookup must agree with a brute-force reading of the map (the last line
//! covering an address names it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pkprof_symbolize::perf_map::{parse_perf_map, PerfMap};

fuzz_target!(|data: &[u8]| {
    let entries = parse_perf_map(data);
    for e in &entries {
        assert!(e.size > 0);
        assert!(e.start.checked_add(e.size).is_some());
        assert!(!e.name.is_empty());
        assert_eq!(e.name.trim(), e.name);
        assert!(!e.name.contains('\n'));
    }
    let map = PerfMap::new(entries.clone());
    if entries.len() > 64 {
        return;
    }
    let probes = entries.iter().flat_map(|e| {
        let end = e.start + e.size;
        [e.start.wrapping_sub(1), e.start, e.start + e.size / 2, end - 1, end]
    });
    for addr in probes {
        let expected = entries
            .iter()
            .rev()
            .find(|e| e.start <= addr && addr - e.start < e.size)
            .map(|e| e.name.as_str());
        assert_eq!(map.lookup(addr), expected, "address {addr:#x}");
    }
});
