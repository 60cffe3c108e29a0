//! Naming frames of a stripped binary later from its separate debug file
//! (`name_from_debug_files`, behind `pkprof report --symbols DIR`). The fixture is built with
//! `-g`, split with binutils (`objcopy --only-keep-debug`, `strip --strip-all`,
//! `objcopy --add-gnu-debuglink`); the truth is the unstripped binary's own symbol table (its
//! function's address and section give the file offset) and `readelf -n` for the build-id.
//! No process is run: frames are written as `record` writes them for a stripped binary.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use pkprof_profile::{Frame, FrameKind, Profile, Stack};
use pkprof_symbolize::name_from_debug_files;

fn run(cmd: &str, args: &[&str]) {
    let status = Command::new(cmd).args(args).status().expect(cmd);
    assert!(status.success(), "{cmd} {args:?}");
}

/// `dir/full` (unstripped), `dir/stripped` (with a debug link to `full.debug`) and
/// `dir/full.debug`.
struct Split {
    full: PathBuf,
    stripped: PathBuf,
    debug: PathBuf,
    build_id: String,
}

fn split(dir: &Path, flags: &[&str]) -> Split {
    let mut all = vec!["-O1", "-g"];
    all.extend_from_slice(flags);
    let full = build("cc", "spin.c", &all, dir, "full");
    let debug = dir.join("full.debug");
    let stripped = dir.join("stripped");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    run("objcopy", &["--only-keep-debug", &s(&full), &s(&debug)]);
    fs::copy(&full, &stripped).unwrap();
    run("strip", &["--strip-all", &s(&stripped)]);
    // The link is the debug file's name; objcopy reads it to store its CRC.
    run(
        "objcopy",
        &[&format!("--add-gnu-debuglink={}", s(&debug)), &s(&stripped)],
    );
    let build_id = readelf_build_id(&full);
    assert!(!build_id.is_empty());
    assert_eq!(readelf_build_id(&stripped), build_id);
    Split {
        full,
        stripped,
        debug,
        build_id,
    }
}

/// A profile of one stack through `leaf` and `middle` of the stripped binary, as `record` names
/// them: `stripped+0xOFFSET`, unsymbolized, with the build-id.
fn profile(sp: &Split) -> Profile {
    let frame = |name: &str| {
        let off = function_in_file(&sp.full, name).file_offset + 1;
        Frame {
            kind: FrameKind::User,
            name: format!("stripped+{off:#x}"),
            module: sp.stripped.to_str().unwrap().to_string(),
            offset: off,
            symbolized: false,
            build_id: sp.build_id.clone(),
            ..Frame::default()
        }
    };
    Profile {
        frames: vec![frame("pkprof_fixture_middle"), frame("pkprof_fixture_leaf")],
        stacks: vec![Stack { frames: vec![0, 1] }],
        ..Profile::default()
    }
}

fn names(p: &Profile) -> Vec<(&str, bool)> {
    p.frames
        .iter()
        .map(|f| (f.name.as_str(), f.symbolized))
        .collect()
}

const NAMED: [(&str, bool); 2] = [
    ("pkprof_fixture_middle", true),
    ("pkprof_fixture_leaf", true),
];

/// `DIR/.build-id/xx/rest.debug`, the binary gone (another machine): the binary's layout is
/// rebuilt from the debug file. PIE and not (`-no-pie` loads at 0x400000), GNU ld and gold.
#[test]
fn build_id_layout_names_frames_without_the_binary() {
    for flags in [
        &[][..],
        &["-no-pie"][..],
        &["-fuse-ld=gold"][..],
        &["-no-pie", "-fuse-ld=gold"][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let sp = split(dir.path(), flags);
        let mut p = profile(&sp);
        fs::remove_file(&sp.stripped).unwrap();
        let syms = tempfile::tempdir().unwrap();
        let (xx, rest) = sp.build_id.split_at(2);
        let at = syms.path().join(".build-id").join(xx);
        fs::create_dir_all(&at).unwrap();
        fs::copy(&sp.debug, at.join(format!("{rest}.debug"))).unwrap();

        let out = name_from_debug_files(&mut p, &[syms.path().to_path_buf()]);
        assert_eq!(names(&p), NAMED, "{flags:?}");
        assert_eq!((out.unsymbolized, out.named), (2, 2));
        assert_eq!(out.layout_rebuilt.len(), 1);
        // Module, offset and build-id stay.
        assert_eq!(p.frames[1].module, sp.stripped.to_str().unwrap());
        assert_eq!(
            p.frames[1].offset,
            function_in_file(&sp.full, "pkprof_fixture_leaf").file_offset + 1
        );
        assert_eq!(p.frames[1].build_id, sp.build_id);
    }
}

/// `.gnu_debuglink` of the binary at hand, the debug file in `DIR` or `DIR/.debug/`.
#[test]
fn debug_link_names_frames() {
    for sub in ["", ".debug"] {
        let dir = tempfile::tempdir().unwrap();
        let sp = split(dir.path(), &[]);
        let mut p = profile(&sp);
        let syms = tempfile::tempdir().unwrap();
        let at = syms.path().join(sub);
        fs::create_dir_all(&at).unwrap();
        fs::rename(&sp.debug, at.join("full.debug")).unwrap();
        let out = name_from_debug_files(&mut p, &[syms.path().to_path_buf()]);
        assert_eq!(names(&p), NAMED, "{sub:?}");
        assert!(out.layout_rebuilt.is_empty());
    }
}

/// A debug file of another build (same source built -O2: another build-id) is never used; nothing found
/// leaves the frames as they were and names the module.
#[test]
fn debug_file_of_another_build_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let sp = split(dir.path(), &[]);
    let other_dir = tempfile::tempdir().unwrap();
    let other = split(other_dir.path(), &["-O2"]);
    assert_ne!(other.build_id, sp.build_id);
    let mut p = profile(&sp);
    let before = p.clone();
    let syms = tempfile::tempdir().unwrap();
    let (xx, rest) = sp.build_id.split_at(2);
    fs::create_dir_all(syms.path().join(".build-id").join(xx)).unwrap();
    fs::copy(
        &other.debug,
        syms.path()
            .join(".build-id")
            .join(xx)
            .join(format!("{rest}.debug")),
    )
    .unwrap();
    fs::copy(&other.debug, syms.path().join("full.debug")).unwrap();
    let out = name_from_debug_files(&mut p, &[syms.path().to_path_buf()]);
    assert_eq!(p, before);
    assert_eq!(out.named, 0);
    assert_eq!(out.not_found, [sp.stripped.to_str().unwrap()]);
}
