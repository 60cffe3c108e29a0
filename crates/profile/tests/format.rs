//! The profile file format from the outside: round trips, damaged files, header errors, the
//! committed version-1 golden file and a large synthetic profile.

use std::time::Instant;

use pkprof_profile::format::{
    write_profile_with, Compression, Corruption, FormatError, FORMAT_VERSION, HEADER_LEN,
};
use pkprof_profile::synthetic::{rich, synthetic};
use pkprof_profile::*;

fn to_bytes(p: &Profile) -> Vec<u8> {
    let mut out = Vec::new();
    write_profile(p, &mut out).expect("write");
    out
}

fn read(bytes: &[u8]) -> Result<Profile, FormatError> {
    read_profile(bytes)
}

/// Every error message is one line.
fn msg(e: &FormatError) -> String {
    let m = e.to_string();
    assert!(!m.contains('\n') && !m.is_empty(), "not one line: {m:?}");
    // The message holds its cause; a chain printer (anyhow's `{:#}`) must not add it again.
    let mut parent = m.clone();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        assert!(
            !parent.contains(&text),
            "{m:?} says its cause {text:?} twice"
        );
        parent = text;
        cause = c.source();
    }
    m
}

#[test]
fn rich_profile_round_trips_with_every_target_kind_and_compression() {
    for kind in [
        TargetKind::System,
        TargetKind::Command,
        TargetKind::Pids,
        TargetKind::Cgroup,
    ] {
        for compression in [Compression::Gzip, Compression::None] {
            let mut p = rich();
            p.meta.targets.kind = kind;
            let mut out = Vec::new();
            write_profile_with(&p, &mut out, compression).expect("write");
            assert_eq!(read(&out).expect("read"), p, "{kind:?} {compression:?}");
        }
    }
}

#[test]
fn rich_profile_uses_every_variant() {
    let p = rich();
    let contexts: Vec<_> = p.samples.iter().map(|s| s.context).collect();
    for c in [
        Context::User,
        Context::Syscall,
        Context::KernelTask,
        Context::Kworker,
    ] {
        assert!(contexts.contains(&c), "{c:?}");
    }
    for c in [
        Context::HardIrq,
        Context::SoftIrq(0),
        Context::SoftIrq(255),
        Context::Idle,
    ] {
        assert!(contexts.contains(&c), "{c:?}");
    }
    for b in [Bucket::Process, Bucket::Other, Bucket::Kernel, Bucket::Idle] {
        assert!(p.samples.iter().any(|s| s.bucket == b), "{b:?}");
    }
    for k in [FrameKind::User, FrameKind::Kernel, FrameKind::Syscall] {
        assert!(p.frames.iter().any(|f| f.kind == k), "{k:?}");
    }
    assert!(p.frames.iter().any(|f| f.file.is_none()) && p.frames.iter().any(|f| f.file.is_some()));
    assert!(
        p.frames.iter().any(|f| f.file.as_deref() == Some("")),
        "Some(\"\") differs from None"
    );
    assert!(
        p.frames.iter().any(|f| f.line.is_none()) && p.frames.iter().any(|f| f.line == Some(0))
    );
}

#[test]
fn empty_and_built_profiles_round_trip() {
    let empty = Profile::default();
    assert_eq!(read(&to_bytes(&empty)).unwrap(), empty);

    let mut b = ProfileBuilder::new(Meta {
        hostname: "h".into(),
        ..Meta::default()
    });
    let f = b.frame(Frame {
        name: "main".into(),
        module: "/bin/x".into(),
        ..Frame::default()
    });
    let s = b.stack(vec![f, f]);
    for _ in 0..3 {
        b.sample(SampleGroup {
            stack: s,
            pid: 7,
            comm: "x".into(),
            count: 2,
            ..Default::default()
        });
    }
    let p = b.finish();
    assert_eq!(read(&to_bytes(&p)).unwrap(), p);
}

#[test]
fn save_and_load_a_file() {
    let dir = std::env::temp_dir().join(format!("pkprof-profile-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rich.pkprof");
    save(&rich(), &path).unwrap();
    assert_eq!(load(&path).unwrap(), rich());
    let missing = dir.join("missing.pkprof");
    let e = load(&missing).unwrap_err();
    assert!(matches!(e, FormatError::Io { path: Some(_), .. }), "{e:?}");
    assert!(msg(&e).contains("missing.pkprof"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    let bytes = to_bytes(&rich());
    assert!(matches!(read(&bytes[..0]), Err(FormatError::Empty)));
    for n in 1..bytes.len() {
        match read(&bytes[..n]) {
            Err(e @ FormatError::Truncated { expected, got }) => {
                assert_eq!(got, n as u64);
                assert!(expected == HEADER_LEN as u64 || expected == bytes.len() as u64);
                assert!(msg(&e).starts_with("truncated profile"), "{e}");
            }
            other => panic!("cut at {n} of {}: {other:?}", bytes.len()),
        }
    }
}

#[test]
fn flipping_any_byte_is_an_error() {
    let bytes = to_bytes(&rich());
    for i in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[i] ^= mask;
            let e = read(&damaged).expect_err(&format!("byte {i} ^ {mask:#x} read fine"));
            msg(&e);
            if i >= HEADER_LEN {
                assert!(
                    matches!(e, FormatError::Corrupt(Corruption::Checksum { .. })),
                    "{e}"
                );
            }
        }
    }
}

/// Damage behind a matching checksum reaches the protobuf decoder and the index checks: any
/// result but a panic is fine (a flipped value byte can make another valid profile).
#[test]
fn damaged_body_with_a_fixed_checksum_never_panics() {
    let mut bytes = Vec::new();
    write_profile_with(&rich(), &mut bytes, Compression::None).unwrap();
    let (mut errors, mut ok) = (0, 0);
    for i in HEADER_LEN..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[i] ^= mask;
            let crc = crc32(&damaged[HEADER_LEN..]);
            damaged[32..36].copy_from_slice(&crc.to_le_bytes());
            match read(&damaged) {
                Ok(_) => ok += 1,
                Err(e) => {
                    assert!(msg(&e).starts_with("corrupt profile"), "{e}");
                    errors += 1;
                }
            }
        }
    }
    println!("damaged uncompressed bodies: {errors} errors, {ok} still valid");
    assert!(errors > 0);
}

/// CRC-32 (IEEE), bit by bit: independent of the implementation under test.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn header_errors_name_the_problem() {
    let good = to_bytes(&rich());

    let e = read(b"").unwrap_err();
    assert_eq!(msg(&e), "empty file: not a pkprof profile");

    let e = read(b"hello, this is a text file and not a profile at all.....").unwrap_err();
    assert!(matches!(e, FormatError::BadMagic), "{e:?}");
    assert_eq!(msg(&e), "not a pkprof profile (bad magic bytes)");
    let e = read(b"\x1f\x8b").unwrap_err();
    assert!(
        matches!(e, FormatError::BadMagic),
        "a bare gzip file: {e:?}"
    );

    let mut v2 = good.clone();
    v2[8..12].copy_from_slice(&2u32.to_le_bytes());
    let e = read(&v2).unwrap_err();
    assert!(
        matches!(e, FormatError::UnsupportedVersion { found: 2 }),
        "{e:?}"
    );
    assert_eq!(
        msg(&e),
        format!(
            "unsupported profile format version 2 (this pkprof reads version {FORMAT_VERSION})"
        )
    );

    let mut lz = good.clone();
    lz[12..16].copy_from_slice(&7u32.to_le_bytes());
    let e = read(&lz).unwrap_err();
    assert!(
        matches!(e, FormatError::UnsupportedCompression { found: 7 }),
        "{e:?}"
    );

    let mut trailing = good.clone();
    trailing.extend_from_slice(b"garbage");
    let e = read(&trailing).unwrap_err();
    assert!(
        matches!(e, FormatError::Corrupt(Corruption::TrailingData(7))),
        "{e:?}"
    );
    assert_eq!(
        msg(&e),
        "corrupt profile (7 unexpected bytes after the body)"
    );

    let mut two = good.clone();
    two.extend_from_slice(&good);
    assert!(matches!(
        read(&two),
        Err(FormatError::Corrupt(Corruption::TrailingData(_)))
    ));

    let mut huge = good.clone();
    huge[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = read(&huge).unwrap_err();
    assert!(
        matches!(e, FormatError::Corrupt(Corruption::BodyTooLarge { .. })),
        "{e:?}"
    );
    msg(&e);

    let mut short = good.clone();
    short[16..24].copy_from_slice(&(1u64 << 32).to_le_bytes());
    let e = read(&short).unwrap_err();
    assert!(matches!(e, FormatError::Truncated { .. }), "{e:?}");
}

#[test]
fn a_body_that_would_expand_too_much_is_stored_uncompressed() {
    let mut p = rich();
    p.meta.warnings.push("a".repeat(1 << 20));
    let bytes = to_bytes(&p);
    assert_eq!(&bytes[12..16], &0u32.to_le_bytes(), "compression none");
    assert_eq!(read(&bytes).unwrap(), p);
    assert_eq!(
        &to_bytes(&rich())[12..16],
        &1u32.to_le_bytes(),
        "compression gzip"
    );
}

#[test]
fn writer_refuses_profiles_it_could_not_read_back() {
    let mut p = rich();
    p.samples[0].stack = p.stacks.len() as u32;
    let e = write_profile(&p, Vec::new()).unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::InvalidProfile(Corruption::IndexOutOfRange { .. })
        ),
        "{e:?}"
    );
    assert!(msg(&e).contains("stack id 4 is out of range"), "{e}");

    let mut p = rich();
    p.stacks[1].frames.push(p.frames.len() as u32 + 5);
    let e = write_profile(&p, Vec::new()).unwrap_err();
    assert!(
        msg(&e).contains("frame id 11 is out of range (the table has 6 entries)"),
        "{e}"
    );
}

/// `tests/data/v1-rich.pkprof` was written by format version 1: every later pkprof must read it
/// as [`rich`]. `PKPROF_BLESS=1` rewrites it, on purpose only (the format changed compatibly and
/// `rich()` grew); it is never created silently.
#[test]
fn golden_version_1_file_still_reads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-rich.pkprof");
    if pkprof_golden::blessing() {
        save(&rich(), &path).unwrap();
    }
    let p = load(&path).unwrap_or_else(|e| panic!("{e} (PKPROF_BLESS=1 creates it)"));
    assert_eq!(p, rich());
}

/// The golden file as version 1 was first written, before frames' build-ids and the user-stack
/// counts were added (compatibly: no version change): it must still read, with those empty.
#[test]
fn version_1_file_without_build_ids_reads_them_empty() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/v1-rich-before-build-ids.pkprof");
    let mut expected = rich();
    for f in &mut expected.frames {
        f.build_id.clear();
    }
    expected.meta.user_stacks = UserStacks::default();
    expected.cgroups.clear();
    assert_eq!(load(&path).unwrap(), expected);
}

/// The golden file as version 1 was written before the cgroup path table was added (compatibly,
/// for the agent's container labels): it must still read, with no cgroup paths.
#[test]
fn version_1_file_without_cgroup_paths_reads_them_empty() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/v1-rich-before-cgroups.pkprof");
    let mut expected = rich();
    expected.cgroups.clear();
    assert_eq!(load(&path).unwrap(), expected);
}

#[test]
fn build_ids_are_stored_once_and_user_stacks_round_trip() {
    let p = rich();
    assert!(p.meta.user_stacks.truncated.len() == Truncation::ALL.len());
    let ids: std::collections::HashSet<_> = p.frames.iter().map(|f| &f.build_id).collect();
    assert!(ids.len() >= 3, "rich() has build-ids to intern: {ids:?}");
    let mut raw = Vec::new();
    write_profile_with(&p, &mut raw, Compression::None).unwrap();
    let body = &raw[HEADER_LEN..];
    for id in ids.iter().filter(|i| !i.is_empty()) {
        let n = body
            .windows(id.len())
            .filter(|w| w == &id.as_bytes())
            .count();
        assert_eq!(n, 1, "{id} stored {n} times");
    }
    assert_eq!(read(&raw).unwrap(), p);
}

#[test]
fn synthetic_is_deterministic_and_as_described() {
    let a = synthetic(10_000, 500, 200, 7);
    assert_eq!(a, synthetic(10_000, 500, 200, 7));
    assert_ne!(a, synthetic(10_000, 500, 200, 8));
    assert_eq!(
        (a.samples.len(), a.stacks.len(), a.frames.len()),
        (10_000, 500, 200)
    );
    let distinct: std::collections::HashSet<_> = a.stacks.iter().collect();
    assert_eq!(distinct.len(), a.stacks.len());
    let groups: std::collections::HashSet<_> = a.samples.iter().map(|s| (s.stack, s.tid)).collect();
    assert_eq!(groups.len(), a.samples.len());
    let mean = a.stacks.iter().map(|s| s.frames.len()).sum::<usize>() as f64 / 500.0;
    assert!((9.0..11.0).contains(&mean), "{mean}");
    assert!(a.total_samples() >= 10_000);
    assert_eq!(read(&to_bytes(&a)).unwrap(), a);
}

/// 1,000,000 sample groups over 50,000 stacks of ~10 frames from 5,000 frames. Run with
/// `--release --nocapture` for meaningful figures; nothing here asserts on time.
#[test]
fn large_synthetic_profile_round_trips() {
    let t = Instant::now();
    let p = synthetic(1_000_000, 50_000, 5_000, 1);
    let generate = t.elapsed();
    let t = Instant::now();
    let bytes = to_bytes(&p);
    let write = t.elapsed();
    let t = Instant::now();
    let back = read(&bytes).unwrap();
    let read_time = t.elapsed();
    assert!(back == p, "the large profile changed in the round trip");
    let raw = u64::from_le_bytes(bytes[24..32].try_into().unwrap());
    println!(
        "1M samples / 50k stacks / 5k frames: generate {generate:.2?}, write {write:.2?}, \
         read {read_time:.2?}, file {} bytes ({:.1} MiB, body {:.1} MiB before gzip)",
        bytes.len(),
        bytes.len() as f64 / 1048576.0,
        raw as f64 / 1048576.0
    );
}
