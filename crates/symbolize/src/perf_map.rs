//! JIT symbol maps: `/tmp/perf-PID.map`, one `START SIZE name` line per compiled function (hex
//! numbers, optional `0x`), written by JITs (V8/node `--perf-basic-prof`, the JVM with perf-map-agent,
//! CPython 3.12 `-X perf`, LuaJIT...).
//!
//! Hand-written rather than taken from blazesym: blazesym reads perf maps only inside its
//! live-process source (`Source::Process`), which needs the process alive at symbolization time.
//! pkprof symbolizes after the recording, when the process may have exited and its map file may be
//! gone, so the file is read at capture time (and again at the end if it is still there) and looked
//! up here. The parser takes untrusted bytes and is fuzzed (`fuzz/fuzz_targets/perf_map.rs`).

use std::collections::BTreeMap;

/// One parsed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfMapEntry {
    pub start: u64,
    pub size: u64,
    pub name: String,
}

/// Parse a perf map. Lines that do not parse (missing fields, bad hex, empty name, zero size, a
/// range that overflows) are skipped; invalid UTF-8 in names is replaced.
pub fn parse_perf_map(data: &[u8]) -> Vec<PerfMapEntry> {
    data.split(|&b| b == b'\n')
        .filter_map(|line| parse_line(&String::from_utf8_lossy(line)))
        .collect()
}

fn parse_line(line: &str) -> Option<PerfMapEntry> {
    let line = line.trim();
    let (start, rest) = line.split_once(|c: char| c.is_ascii_whitespace())?;
    let (size, name) = rest
        .trim_start()
        .split_once(|c: char| c.is_ascii_whitespace())?;
    let name = name.trim();
    let start = parse_hex(start)?;
    let size = parse_hex(size)?;
    if name.is_empty() || size == 0 || start.checked_add(size).is_none() {
        return None;
    }
    Some(PerfMapEntry {
        start,
        size,
        name: name.to_string(),
    })
}

fn parse_hex(s: &str) -> Option<u64> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    crate::maps::parse_hex(digits)
}

/// Address lookup over a perf map. When entries overlap (a JIT reusing memory), the later line
/// wins, as it describes the newer code.
#[derive(Clone, Debug, Default)]
pub struct PerfMap {
    /// Disjoint ranges: start -> (end, index into `names`).
    ranges: BTreeMap<u64, (u64, usize)>,
    names: Vec<String>,
}

impl PerfMap {
    pub fn new(entries: Vec<PerfMapEntry>) -> Self {
        let mut map = PerfMap::default();
        for e in entries {
            map.insert(e);
        }
        map
    }

    /// Parse and index in one go.
    pub fn parse(data: &[u8]) -> Self {
        Self::new(parse_perf_map(data))
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The function containing `addr`, if any.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let (_, &(end, name)) = self.ranges.range(..=addr).next_back()?;
        (addr < end).then(|| self.names[name].as_str())
    }

    fn insert(&mut self, e: PerfMapEntry) {
        // parse_line guarantees size > 0 and no overflow; entries built by hand may not.
        let Some(end) = e.start.checked_add(e.size).filter(|&end| end > e.start) else {
            return;
        };
        let start = e.start;
        let mut keep = Vec::new();
        // A range starting before `start` that reaches into the new one: keep its head (and its
        // tail if the new range sits inside it).
        if let Some((&s, &(old_end, n))) = self.ranges.range(..start).next_back() {
            if old_end > start {
                self.ranges.remove(&s);
                keep.push((s, start, n));
                if old_end > end {
                    keep.push((end, old_end, n));
                }
            }
        }
        // Ranges starting inside the new one: drop them, keep a tail reaching past its end.
        let inside: Vec<u64> = self.ranges.range(start..end).map(|(&s, _)| s).collect();
        for s in inside {
            if let Some((old_end, n)) = self.ranges.remove(&s) {
                if old_end > end {
                    keep.push((end, old_end, n));
                }
            }
        }
        self.names.push(e.name);
        self.ranges.insert(start, (end, self.names.len() - 1));
        for (s, old_end, n) in keep {
            self.ranges.insert(s, (old_end, n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_lines() {
        let text = b"7f0000001000 40 LazyCompile:~foo /app/a.js:1\n\
            0x7f0000002000 0x10 bar\r\n\
            7F0000003000   8   baz  \n";
        let e = parse_perf_map(text);
        assert_eq!(
            e,
            vec![
                PerfMapEntry {
                    start: 0x7f0000001000,
                    size: 0x40,
                    name: "LazyCompile:~foo /app/a.js:1".into()
                },
                PerfMapEntry {
                    start: 0x7f0000002000,
                    size: 0x10,
                    name: "bar".into()
                },
                PerfMapEntry {
                    start: 0x7f0000003000,
                    size: 8,
                    name: "baz".into()
                },
            ]
        );
    }

    #[test]
    fn bad_lines_are_skipped() {
        let text = b"\n\
            garbage\n\
            1000\n\
            1000 10\n\
            1000 10   \n\
            xyz 10 name\n\
            1000 -10 name\n\
            +1000 10 name\n\
            1000 0 empty\n\
            ffffffffffffffff 2 overflow\n\
            11112222333344445 10 toolong\n\
            0x 10 noprefixdigits\n\
            2000 10 ok\n\
            \xff\xfe 10 bad\n\
            3000 10 caf\xc3\xa9 \xff\n";
        let e = parse_perf_map(text);
        let names: Vec<_> = e.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, vec!["ok", "caf\u{e9} \u{fffd}"]);
    }

    #[test]
    fn lookup_and_overlaps() {
        let map = PerfMap::parse(
            b"1000 100 a\n\
              2000 100 b\n\
              1080 10 c\n\
              1ff0 20 d\n",
        );
        assert_eq!(map.lookup(0xfff), None);
        assert_eq!(map.lookup(0x1000), Some("a"));
        assert_eq!(map.lookup(0x107f), Some("a"));
        // c was written later and sits inside a.
        assert_eq!(map.lookup(0x1080), Some("c"));
        assert_eq!(map.lookup(0x108f), Some("c"));
        assert_eq!(map.lookup(0x1090), Some("a"));
        assert_eq!(map.lookup(0x10ff), Some("a"));
        assert_eq!(map.lookup(0x1100), None);
        // d overlaps the start of b.
        assert_eq!(map.lookup(0x1ff0), Some("d"));
        assert_eq!(map.lookup(0x200f), Some("d"));
        assert_eq!(map.lookup(0x2010), Some("b"));
        assert_eq!(map.lookup(0x20ff), Some("b"));
        assert_eq!(map.lookup(0x2100), None);
    }

    #[test]
    fn later_entry_replaces_covered_ones() {
        let map = PerfMap::parse(b"1000 10 a\n1010 10 b\n1020 10 c\n0ff0 100 big\n1010 8 small\n");
        assert_eq!(map.lookup(0x1000), Some("big"));
        assert_eq!(map.lookup(0x1010), Some("small"));
        assert_eq!(map.lookup(0x1018), Some("big"));
        assert_eq!(map.lookup(0x10ef), Some("big"));
        assert_eq!(map.lookup(0x10f0), None);
    }

    #[test]
    fn edge_of_address_space() {
        let map = PerfMap::parse(b"fffffffffffffff0 f top\n");
        assert_eq!(map.lookup(0xfffffffffffffffe), Some("top"));
        assert_eq!(map.lookup(u64::MAX), None);
        let map = PerfMap::new(vec![PerfMapEntry {
            start: u64::MAX,
            size: 1,
            name: "x".into(),
        }]);
        assert!(map.is_empty());
    }
}
