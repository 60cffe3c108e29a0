//! Reads `perf script` text (default fields, with call chains) into samples, the ground truth of
//! the unwinding tests (tests/unwind.rs), and names functions the same way on both sides
//! ([`canonical_name`]). Included by tests/unwind.rs only (`#[path]`), so its unit test runs once.
#![allow(dead_code)]

/// One frame of a perf call chain: `ADDR SYMBOL+0xOFF (DSO)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfFrame {
    pub addr: u64,
    /// The symbol without its `+0x...` offset; `[unknown]` when perf could not name it.
    pub name: String,
    /// The DSO in the parentheses: a path, `[kernel.kallsyms]`, `[vdso]`, `[unknown]`.
    pub dso: String,
}

impl PerfFrame {
    pub fn is_kernel(&self) -> bool {
        self.dso.starts_with("[kernel") || self.dso.ends_with(".ko") || self.addr >= 1 << 63
    }
}

/// One sample: the header's command and thread, and the call chain leaf first (as printed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfSample {
    pub comm: String,
    pub tid: u32,
    pub frames: Vec<PerfFrame>,
}

impl PerfSample {
    /// The user frames, root (outermost caller) first, as (canonical name, DSO) pairs. perf marks
    /// the end of a walk cut by the stack copy with an `[unknown]` frame at -1: left out, like
    /// the kernel frames.
    pub fn user_frames(&self) -> Vec<(String, String)> {
        self.frames
            .iter()
            .rev()
            .filter(|f| !f.is_kernel() && f.dso != "[unknown]")
            .map(|f| (canonical_name(&f.name), f.dso.clone()))
            .collect()
    }
}

/// Parses `perf script` output: a header line per sample (`comm tid time: period event:`), then
/// one indented line per frame, then a blank line.
pub fn parse(text: &str) -> Vec<PerfSample> {
    let header = regex::Regex::new(r"^(.+?)\s+(\d+)(?:/\d+)?\s+\d+\.\d+:").unwrap();
    let mut out: Vec<PerfSample> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            open = false;
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            let c = header
                .captures(line)
                .unwrap_or_else(|| panic!("unparsed perf script header {line:?}"));
            out.push(PerfSample {
                comm: c[1].trim().to_owned(),
                tid: c[2].parse().unwrap(),
                frames: Vec::new(),
            });
            open = true;
            continue;
        }
        assert!(open, "a frame line outside a sample: {line:?}");
        out.last_mut().unwrap().frames.push(parse_frame(line));
    }
    out
}

fn parse_frame(line: &str) -> PerfFrame {
    let line = line.trim();
    let (addr, rest) = line
        .split_once(char::is_whitespace)
        .unwrap_or_else(|| panic!("unparsed perf frame {line:?}"));
    let addr = u64::from_str_radix(addr, 16).unwrap_or_else(|_| panic!("address in {line:?}"));
    let rest = rest.trim();
    // The DSO is the last parenthesized group; symbols may hold parentheses and spaces themselves.
    let (sym, dso) = match rest.strip_suffix(')').and_then(|r| r.rsplit_once(" (")) {
        Some((sym, dso)) => (sym.trim(), dso),
        None => (rest, ""),
    };
    let name = match sym.rsplit_once("+0x") {
        Some((n, off)) if !n.is_empty() && off.bytes().all(|b| b.is_ascii_hexdigit()) => n,
        _ => sym,
    };
    PerfFrame {
        addr,
        name: name.to_owned(),
        dso: dso.to_owned(),
    }
}

/// One name per function for comparing perf's names with pkprof's. glibc gives a function several
/// symbols at one address (`__GI___libc_read`, `__libc_read`, `read`; `__libc_start_main_impl`,
/// `__libc_start_main@@GLIBC_2.34`) and perf and blazesym pick different ones; GCC's clones carry
/// suffixes (`msort_with_tmp.part.0`); Rust symbols may keep their hash (`::h0123...`). So: drop
/// a symbol version, clone suffixes, a Rust hash, glibc's `__GI_` prefix and `_impl` suffix, then
/// leading underscores and a `libc_` prefix. Lossy on purpose; used on both sides alike.
pub fn canonical_name(name: &str) -> String {
    let mut n = name.split('@').next().unwrap_or(name);
    if n.is_empty() {
        n = name;
    }
    let mut n = n.to_owned();
    loop {
        let before = n.len();
        for suffix in [".part.", ".isra.", ".constprop.", ".lto_priv.", ".cold"] {
            if let Some(i) = n.rfind(suffix) {
                if n[i + suffix.len()..].bytes().all(|b| b.is_ascii_digit()) {
                    n.truncate(i);
                }
            }
        }
        if let Some(i) = n.rfind("::h") {
            let hash = &n[i + 3..];
            if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                n.truncate(i);
            }
        }
        if n.len() == before {
            break;
        }
    }
    let mut s = n.as_str();
    s = s.strip_prefix("__GI_").unwrap_or(s);
    s = s.strip_suffix("_impl").unwrap_or(s);
    s = s.trim_start_matches('_');
    s = s.strip_prefix("libc_").unwrap_or(s);
    if s.is_empty() {
        return name.to_owned();
    }
    s.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from `perf script --no-inline` (perf 6.1) on unwind_chains (chain, signal, syscall
    // and thread modes), unwind_chain_rs, and the 2,000-deep recursion cut by the stack copy.
    const CAPTURED: &str = "\
workload-unwind  504 11792.231152:    2004008 cpu-clock:ppp: 
\t            1833 chain_hot+0x33 (/tmp/uw/chains)
\t            1854 chain_inner+0x4 (/tmp/uw/chains)
\t            1864 chain_middle+0x4 (/tmp/uw/chains)
\t            1874 chain_outer+0x4 (/tmp/uw/chains)
\t            11e9 main+0x89 (/tmp/uw/chains)
\t           27249 __libc_start_call_main+0x79 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           27304 __libc_start_main@@GLIBC_2.34+0x84 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            15a0 _start+0x20 (/tmp/uw/chains)

chains  1769 11812.058065:    2004008 cpu-clock:ppp: 
\t            179f sig_handler_hot+0x2f (/tmp/uw/chains)
\t           3c04f [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            19ad sig_busy+0x2d (/tmp/uw/chains)

chains  7073 11862.684674:    2004008 cpu-clock:ppp: 
\tffffffff81d7f497 read_zero+0x77 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe+0x76 ([kernel.kallsyms])
\t           f82ad read+0xd (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            1b94 sys_inner+0x14 (/tmp/uw/chains)

chains  2097 11815.999330:    2004008 cpu-clock:ppp: 
\t            1ac3 thread_hot+0x33 (/tmp/uw/chains)
\t           891f4 start_thread+0x304 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t          1098eb clone3+0x2b (/usr/lib/x86_64-linux-gnu/libc.so.6)

chain_rs 14557 11951.696412:    2004008 cpu-clock:ppp: 
\t           1709c unwind_chain_rs::hot+0x3c (/tmp/uw/chain_rs)
\t           174d8 std::rt::lang_start::{{closure}}+0x8 (/tmp/uw/chain_rs)
\t           3fd35 __GI___qsort_r+0xb5 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           3fbf3 msort_with_tmp.part.0+0x293 (/usr/lib/x86_64-linux-gnu/libc.so.6)

chains  9000 11900.000001:    2004008 cpu-clock:ppp: 
\t            1a38 recurse+0x18 (/tmp/uw/chains)
\tffffffffffffffff [unknown] ([unknown])
";

    #[test]
    fn parses_captured_perf_script() {
        let s = parse(CAPTURED);
        assert_eq!(s.len(), 6);
        assert_eq!((s[0].comm.as_str(), s[0].tid), ("workload-unwind", 504));
        assert_eq!(s[0].frames.len(), 8);
        assert_eq!(
            s[0].frames[0],
            PerfFrame {
                addr: 0x1833,
                name: "chain_hot".into(),
                dso: "/tmp/uw/chains".into()
            }
        );
        let names: Vec<String> = s[0].user_frames().into_iter().map(|f| f.0).collect();
        assert_eq!(
            names,
            [
                "start",
                "start_main",
                "start_call_main",
                "main",
                "chain_outer",
                "chain_middle",
                "chain_inner",
                "chain_hot"
            ]
        );
        // The signal frame perf cannot name stays, as [unknown] in libc.
        assert_eq!(s[1].frames[1].name, "[unknown]");
        assert!(s[1].frames[1].dso.ends_with("libc.so.6"));
        // Kernel frames are not user frames; `read` is.
        assert!(s[2].frames[0].is_kernel() && !s[2].frames[2].is_kernel());
        let user: Vec<String> = s[2].user_frames().into_iter().map(|f| f.0).collect();
        assert_eq!(user, ["sys_inner", "read"]);
        assert_eq!(s[3].frames[2].name, "clone3");
        assert_eq!(s[4].frames[1].name, "std::rt::lang_start::{{closure}}");
        assert_eq!(canonical_name(&s[4].frames[2].name), "qsort_r");
        assert_eq!(canonical_name(&s[4].frames[3].name), "msort_with_tmp");
        // perf's end-of-walk marker is no frame.
        assert_eq!(s[5].user_frames().len(), 1);
    }

    #[test]
    fn canonical_names_join_glibc_aliases() {
        for (a, b) in [
            ("__GI___libc_read", "read"),
            ("__libc_read", "read"),
            ("__libc_start_main_impl", "__libc_start_main@@GLIBC_2.34"),
            ("__GI___qsort_r", "qsort_r"),
            ("msort_with_tmp.part.0", "msort_with_tmp"),
            (
                "unwind_chain_rs::hot::h0123456789abcdef",
                "unwind_chain_rs::hot",
            ),
            ("foo.cold", "foo"),
        ] {
            assert_eq!(canonical_name(a), canonical_name(b), "{a} vs {b}");
        }
        assert_ne!(
            canonical_name("main"),
            canonical_name("__libc_start_call_main")
        );
        assert_eq!(canonical_name("[unknown]"), "[unknown]");
    }
}
