//! Folded-stacks exporter: golden files of the small profile (labelled and plain names), the
//! format's invariants on odd input, and inferno (the Rust FlameGraph) rendering the output.

mod export_common;

use export_common::*;
use pkprof_profile::synthetic;
use pkprof_report::names::NameStyle;

fn folded(profile: &pkprof_profile::Profile, names: NameStyle) -> String {
    String::from_utf8(export("folded", profile, names)).expect("UTF-8")
}

/// `(stack, count)` of each line; panics on a line that is not `frames COUNT`.
fn lines(text: &str) -> Vec<(&str, u64)> {
    text.lines()
        .map(|l| {
            let (stack, count) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("no count: {l:?}"));
            (
                stack,
                count.parse().unwrap_or_else(|_| panic!("bad count: {l:?}")),
            )
        })
        .collect()
}

#[test]
fn small_profile_matches_the_golden_files() {
    let labelled = folded(&small(), NameStyle::Labelled);
    check_golden("folded-small.txt", &labelled);
    check_golden(
        "folded-small-plain.txt",
        &folded(&small(), NameStyle::Plain),
    );
    // Independently of the golden file: the two threads of process 100 on one line, the count-0
    // group absent, `;` in a name replaced, every sample counted once.
    let l = lines(&labelled);
    assert!(
        l.contains(&("100u:main;100u:handle;100u:parse;100u:memcpy", 50)),
        "{l:?}"
    );
    assert!(l.contains(&("200u:main;200u:odd:name", 2)), "{l:?}");
    assert!(!l
        .iter()
        .any(|(s, _)| s.starts_with("200u:main;200u:handle;200u:parse")));
    assert_eq!(l.iter().map(|x| x.1).sum::<u64>(), 157);
    let mut sorted = l.clone();
    sorted.sort();
    assert_eq!(l, sorted, "lines are sorted");
}

#[test]
fn plain_names_merge_processes() {
    let text = folded(&small(), NameStyle::Plain);
    let l = lines(&text);
    // 100u, 200u and OTHERu's copy stacks are one plain stack: 50 + 3 (200's group has count 0).
    assert!(l.contains(&("main;handle;parse;memcpy", 53)), "{l:?}");
    assert!(l.contains(&("net_rx_action;e1000_clean", 22)), "{l:?}");
}

#[test]
fn odd_input_keeps_the_format() {
    // Unicode, `module+0x` names, an empty stack, u64::MAX counts (saturated when summed).
    let text = folded(&synthetic::rich(), NameStyle::Labelled);
    let l = lines(&text);
    assert!(l.iter().any(|(s, _)| s.ends_with("[no stack]")), "{text}");
    assert!(
        l.iter()
            .any(|(s, _)| s.contains("104u:ünïcødé::处理::<'_>")),
        "{text}"
    );
    assert!(l.iter().any(|(_, c)| *c == u64::MAX), "{text}");
    assert!(l.iter().all(|(_, c)| *c > 0));
}

#[test]
fn inferno_renders_the_folded_stacks() {
    let text = folded(&small(), NameStyle::Labelled);
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = "pkprof test".into();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, text.lines(), &mut svg).expect("inferno renders");
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.starts_with("<?xml"), "{}", &svg[..100.min(svg.len())]);
    // Every frame is a rectangle titled with its name and samples.
    for (frame, samples) in [
        ("all", 157),
        ("100u:main", 75),
        ("100u:memcpy", 50),
        ("100k:e1000_clean", 15),
        ("200u:odd:name", 2),
        ("KERNEL:e1000_clean", 7),
        ("IDLE:do_idle", 50),
        ("OTHERu:memcpy", 3),
    ] {
        let title = format!("<title>{frame} ({samples} samples, ");
        assert!(svg.contains(&title), "the flame graph lacks {title:?}");
    }
}

/// Scaling: 1M sample groups fold in seconds, and every sample is on some line.
#[test]
fn large_profile_folds() {
    let profile = synthetic::synthetic(1_000_000, 50_000, 5_000, 1);
    let started = std::time::Instant::now();
    let text = folded(&profile, NameStyle::Labelled);
    eprintln!(
        "folded export of 1M sample groups: {:.2} s, {} lines",
        started.elapsed().as_secs_f64(),
        text.lines().count()
    );
    let total: u64 = lines(&text).iter().map(|x| x.1).sum();
    assert_eq!(total, profile.total_samples());
}
