//! speedscope exporter: validated against speedscope's own file-format JSON schema (vendored from
//! the `speedscope` npm package, see `tests/golden/export/README.md`), a golden file of the small
//! profile, and the numbers speedscope would show (profiles, weights, root-first stacks).

mod export_common;

use serde_json::Value;

use export_common::*;
use pkprof_profile::synthetic;
use pkprof_report::names::NameStyle;

fn speedscope(profile: &pkprof_profile::Profile, names: NameStyle) -> Value {
    serde_json::from_slice(&export("speedscope", profile, names)).expect("valid JSON")
}

fn validator() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/export/speedscope-schema.json"
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("speedscope's schema compiles")
}

fn assert_valid(what: &str, doc: &Value) {
    let errors: Vec<String> = validator()
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} is not a valid speedscope file:\n{}",
        errors.join("\n")
    );
}

#[test]
fn the_schema_rejects_what_speedscope_rejects() {
    // The validator really checks: a profile without weights, a frame without a name.
    let mut doc = speedscope(&small(), NameStyle::Labelled);
    assert_valid("the small profile", &doc);
    doc["profiles"][0]
        .as_object_mut()
        .unwrap()
        .remove("weights");
    assert!(!validator().is_valid(&doc));
    let mut doc = speedscope(&small(), NameStyle::Labelled);
    doc["shared"]["frames"][0]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert!(!validator().is_valid(&doc));
}

#[test]
fn small_profile_matches_the_golden_file() {
    let doc = speedscope(&small(), NameStyle::Labelled);
    let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
    check_golden(
        "speedscope-small.json",
        &text.replace(env!("CARGO_PKG_VERSION"), "VERSION"),
    );
}

#[test]
fn small_profile_numbers() {
    let doc = speedscope(&small(), NameStyle::Labelled);
    assert_eq!(
        doc["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    assert_eq!(
        doc["exporter"],
        format!("pkprof {}", env!("CARGO_PKG_VERSION"))
    );
    let frames: Vec<&str> = doc["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let profiles = doc["profiles"].as_array().unwrap();
    let names: Vec<&str> = profiles
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["100 srv", "200 cat", "OTHER", "KERNEL", "IDLE"]);
    // Weights in ns: 90 samples of process 100, 7 of 200, 3, 7 and 50 of 10 ms each.
    for (p, samples) in profiles.iter().zip([90u64, 7, 3, 7, 50]) {
        assert_eq!(p["unit"], "nanoseconds");
        let weights: u64 = p["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .sum();
        assert_eq!(weights, samples * PERIOD_NS, "{}", p["name"]);
        assert_eq!(p["endValue"].as_u64().unwrap(), weights);
        assert_eq!(p["startValue"], 0);
    }
    // The file opens on the heaviest profile, IDLE aside.
    assert_eq!(doc["activeProfileIndex"], 0);
    // Stacks are root first; the two threads of 100 share one stack (40 + 10 samples).
    let srv = &profiles[0];
    let stacks: Vec<(Vec<&str>, u64)> = srv["samples"]
        .as_array()
        .unwrap()
        .iter()
        .zip(srv["weights"].as_array().unwrap())
        .map(|(s, w)| {
            let s = s
                .as_array()
                .unwrap()
                .iter()
                .map(|i| frames[i.as_u64().unwrap() as usize]);
            (s.collect(), w.as_u64().unwrap())
        })
        .collect();
    let copy = vec!["100u:main", "100u:handle", "100u:parse", "100u:memcpy"];
    assert!(stacks.contains(&(copy, 50 * PERIOD_NS)), "{stacks:?}");
    // Source files and lines where recorded, the module otherwise.
    let frame = |name: &str| {
        doc["shared"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap()
    };
    assert_eq!(frame("100u:parse")["file"], "src/parse.rs");
    assert_eq!(frame("100u:parse")["line"], 5);
    assert_eq!(frame("100u:memcpy")["file"], "/lib/libc.so.6");
    assert!(frame("100u:memcpy").get("line").is_none());
}

#[test]
fn odd_and_plain_profiles_are_valid() {
    // u64::MAX counts and addresses, unicode, an empty stack, empty comms and files.
    let rich = speedscope(&synthetic::rich(), NameStyle::Labelled);
    assert_valid("the rich profile", &rich);
    assert_valid("plain names", &speedscope(&small(), NameStyle::Plain));
    // A profile without a period: sample counts.
    let mut p = small();
    p.meta.period_ns = 0;
    let doc = speedscope(&p, NameStyle::Labelled);
    assert_valid("no period", &doc);
    assert_eq!(doc["profiles"][0]["unit"], "none");
    assert_eq!(doc["profiles"][0]["endValue"], 90);
}

#[test]
fn a_larger_profile_is_valid() {
    let profile = synthetic::synthetic(100_000, 10_000, 2_000, 3);
    let started = std::time::Instant::now();
    let doc = speedscope(&profile, NameStyle::Labelled);
    eprintln!(
        "speedscope export of 100k sample groups: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_valid("the synthetic profile", &doc);
    let total: u64 = doc["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["endValue"].as_u64().unwrap())
        .sum();
    assert_eq!(total, profile.total_samples() * profile.meta.period_ns);
}
