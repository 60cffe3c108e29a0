//! `pkprof report --symbols DIR`: a stripped binary is recorded, and its frames are named later
//! from its separate debug file (root and BPF needed for the recording: run with
//! `cargo test -p pkprof --test report_symbols -- --include-ignored --nocapture`).
//!
//! The workload (`tests/workloads/hot_split.c`, `-O2 -g`, frame pointers) is split with binutils:
//! `objcopy --only-keep-debug`, `strip --strip-all`, `objcopy --add-gnu-debuglink`. The truth is
//! the workload's own source (its two hot functions `hot_seventy` and `hot_thirty`) and `nm` of the
//! unstripped binary, which must list them; `readelf -n` gives the build-id.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(out.status.success(), "{cmd} {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn report(args: &[&str]) -> (String, String) {
    let out: Output = run_with_timeout(
        &mut cmd(&pkprof_bin(), &[&["report"], args].concat()),
        Duration::from_secs(120),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "report {args:?}: {stderr}");
    (stdout, stderr)
}

/// Every output of `report` for the profile, each as text (pprof decompressed).
fn every_output(profile: &str, extra: &[&str], dir: &Path) -> Vec<(String, String)> {
    let mut outs = Vec::new();
    let (text, _) = report(&[&[profile, "--plain-names"], extra].concat());
    outs.push(("text".to_string(), text));
    for (format, ext) in [
        ("folded", "txt"),
        ("pprof", "pb.gz"),
        ("speedscope", "json"),
        ("html", "html"),
    ] {
        let path = dir.join(format!("out.{ext}"));
        let path_s = path.to_str().unwrap();
        report(&[&[profile, "--format", format, "-o", path_s], extra].concat());
        let body = if format == "pprof" {
            run("gzip", &["-dc", path_s])
        } else {
            fs::read_to_string(&path).unwrap()
        };
        outs.push((format.to_string(), body));
    }
    outs
}

#[test]
#[ignore = "needs root and BPF"]
fn stripped_binary_is_named_from_debug_files() {
    let work = tempfile_dir("report-symbols");
    let full = work.join("hot_full");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/hot_split.c");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    run(
        "cc",
        &[
            "-O2",
            "-g",
            "-fno-omit-frame-pointer",
            "-o",
            &s(&full),
            &s(&src),
        ],
    );
    // Truth: the unstripped binary's symbols name the two hot functions.
    let nm = run("nm", &[&s(&full)]);
    for f in ["hot_seventy", "hot_thirty"] {
        assert!(nm.lines().any(|l| l.ends_with(&format!(" T {f}"))), "{nm}");
    }
    let debug = work.join("hot.dbg");
    let stripped = work.join("hot");
    run("objcopy", &["--only-keep-debug", &s(&full), &s(&debug)]);
    fs::copy(&full, &stripped).unwrap();
    run("strip", &["--strip-all", &s(&stripped)]);
    run(
        "objcopy",
        &[&format!("--add-gnu-debuglink={}", s(&debug)), &s(&stripped)],
    );
    assert!(!run("nm", &["-a", &s(&stripped)]).contains("hot_seventy"));
    // Out of the binary's directory, where `record` itself (blazesym, like gdb) would follow the
    // debug link.
    let kept = work.join("kept");
    fs::create_dir_all(&kept).unwrap();
    let debug = {
        let to = kept.join("hot.dbg");
        fs::rename(&debug, &to).unwrap();
        to
    };
    let readelf = run("readelf", &["-n", &s(&stripped)]);
    let build_id = readelf
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build-id note")
        .to_string();

    let profile = work.join("hot.pkprof");
    let rec = run_with_timeout(
        &mut cmd(
            &pkprof_bin(),
            &[
                "record",
                "-o",
                &s(&profile),
                "-F",
                "499",
                "--",
                &s(&stripped),
                "2",
            ],
        ),
        Duration::from_secs(120),
    );
    assert!(
        rec.status.success(),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let p = pkprof_profile::load(&profile).unwrap();
    let module = s(&stripped);
    let ours: Vec<_> = p.frames.iter().filter(|f| f.module == module).collect();
    assert!(!ours.is_empty(), "no frame of {module}");
    assert!(ours.iter().all(|f| f.build_id == build_id), "{ours:?}");
    let profile_s = s(&profile);

    // Without --symbols: only `hot+0x..` (or `hot!<...>`) frames for the binary.
    let outs = every_output(&profile_s, &[], &work);
    for (format, body) in &outs {
        assert!(
            !body.contains("hot_seventy"),
            "{format} names a stripped function"
        );
        assert!(
            body.contains("hot+0x") || body.contains("hot!"),
            "{format}: no unnamed frame of the stripped binary"
        );
    }
    let flat = &outs[0].1;

    // By debug link: the debug file under its link name, in DIR and in DIR/.debug/.
    for sub in ["", ".debug"] {
        let syms = work.join(format!("link{sub}"));
        fs::create_dir_all(syms.join(sub)).unwrap();
        fs::copy(&debug, syms.join(sub).join("hot.dbg")).unwrap();
        let (text, stderr) = report(&[
            &profile_s,
            "--flat",
            "--plain-names",
            "--symbols",
            &s(&syms),
        ]);
        assert!(stderr.contains("--symbols named"), "{stderr}");
        assert_named(&text, flat);
    }

    // By build-id, with the stripped binary gone (another machine): every output is named.
    let syms = work.join("buildid");
    let (xx, rest) = build_id.split_at(2);
    fs::create_dir_all(syms.join(".build-id").join(xx)).unwrap();
    fs::copy(
        &debug,
        syms.join(".build-id")
            .join(xx)
            .join(format!("{rest}.debug")),
    )
    .unwrap();
    fs::remove_file(&stripped).unwrap();
    let outs = every_output(&profile_s, &["--symbols", &s(&syms)], &work);
    for (format, body) in &outs {
        for f in ["hot_seventy", "hot_thirty", "main"] {
            assert!(body.contains(f), "{format} does not name {f}");
        }
    }
    assert_named(&outs[0].1, flat);

    // A directory without the debug file leaves the frames unnamed, and says so.
    let empty = work.join("empty");
    fs::create_dir_all(&empty).unwrap();
    let (text, stderr) = report(&[
        &profile_s,
        "--flat",
        "--plain-names",
        "--symbols",
        &s(&empty),
    ]);
    assert!(!text.contains("hot_seventy"));
    assert!(stderr.contains("no matching debug file for"), "{stderr}");
    let _ = fs::remove_dir_all(&work);
}

/// The named flat profile: hot_seventy and hot_thirty lead, about 70/30 (by construction of
/// the workload), and the total is the unnamed one's.
fn assert_named(text: &str, unnamed: &str) {
    let pct = |f: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().last() == Some(f))
            .unwrap_or_else(|| panic!("no flat line for {f}:\n{text}"));
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    let (seventy, thirty) = (pct("hot_seventy"), pct("hot_thirty"));
    let share = seventy * 100.0 / (seventy + thirty);
    assert!(
        (60.0..=80.0).contains(&share),
        "{seventy} / {thirty}:\n{text}"
    );
    let total = |t: &str| {
        t.lines()
            .find(|l| l.contains("samples"))
            .map(str::to_string)
    };
    assert_eq!(total(text), total(unnamed));
}

fn tempfile_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}
