//! Bodies no writer of ours produces, crafted from the generated types: the reader's index,
//! enum and string-table checks.

use prost::Message;

use super::header::Header;
use super::*;

/// A file around `msg`, uncompressed, with a correct header.
fn file(msg: &proto::Profile) -> Vec<u8> {
    let body = msg.encode_to_vec();
    let h = Header {
        compression: Compression::None,
        body_len: body.len() as u64,
        raw_len: body.len() as u64,
        crc32: crc32fast::hash(&body),
    };
    let mut out = h.encode().to_vec();
    out.extend_from_slice(&body);
    out
}

fn valid() -> proto::Profile {
    proto::Profile {
        strings: vec!["".into(), "main".into()],
        frames: vec![proto::Frame {
            name_str: 1,
            ..Default::default()
        }],
        stacks: vec![proto::Stack { frames: vec![0, 0] }],
        samples: vec![proto::SampleGroup {
            stack: 0,
            comm_str: 1,
            count: 3,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn corruption(msg: &proto::Profile) -> Corruption {
    match read_profile(&file(msg)[..]) {
        Err(FormatError::Corrupt(c)) => c,
        other => panic!("expected corrupt, got {other:?}"),
    }
}

#[test]
fn crafted_valid_body_reads() {
    let p = read_profile(&file(&valid())[..]).unwrap();
    assert_eq!(
        p.stack_frames(0)
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        ["main", "main"]
    );
    assert_eq!(p.samples[0].comm, "main");
}

#[test]
fn no_meta_and_no_strings_read_as_defaults() {
    let p = read_profile(&file(&proto::Profile::default())[..]).unwrap();
    assert_eq!(p, Profile::default());
    let mut m = valid();
    m.strings.clear();
    m.frames[0].name_str = 0;
    m.samples[0].comm_str = 0;
    assert_eq!(read_profile(&file(&m)[..]).unwrap().frames[0].name, "");
}

#[test]
fn out_of_range_indices_are_corrupt() {
    let mut m = valid();
    m.samples[0].stack = 1;
    assert_eq!(
        corruption(&m).to_string(),
        "stack id 1 is out of range (the table has 1 entries)"
    );
    let mut m = valid();
    m.stacks[0].frames[1] = u32::MAX;
    assert!(matches!(
        corruption(&m),
        Corruption::IndexOutOfRange {
            what: "frame id",
            ..
        }
    ));
    let mut m = valid();
    m.frames[0].file_str = Some(2);
    assert!(matches!(
        corruption(&m),
        Corruption::IndexOutOfRange {
            what: "frame file string",
            ..
        }
    ));
    let mut m = valid();
    m.samples[0].comm_str = 9;
    assert!(matches!(
        corruption(&m),
        Corruption::IndexOutOfRange {
            index: 9,
            len: 2,
            ..
        }
    ));
    let mut m = valid();
    m.processes.push(proto::ProcessInfo {
        exe_str: 2,
        ..Default::default()
    });
    assert!(matches!(corruption(&m), Corruption::IndexOutOfRange { .. }));
    let mut m = valid();
    m.syscalls.push(proto::SyscallStat {
        name_str: 2,
        ..Default::default()
    });
    assert!(matches!(corruption(&m), Corruption::IndexOutOfRange { .. }));
    let mut m = valid();
    m.func_counts.push(proto::FuncCount {
        function_str: 2,
        ..Default::default()
    });
    assert!(matches!(corruption(&m), Corruption::IndexOutOfRange { .. }));
}

#[test]
fn unknown_enum_values_are_corrupt() {
    let mut m = valid();
    m.samples[0].bucket = 4;
    assert_eq!(corruption(&m).to_string(), "unknown bucket value 4");
    let mut m = valid();
    m.samples[0].context = -1;
    assert!(matches!(
        corruption(&m),
        Corruption::UnknownEnum {
            what: "context",
            value: -1
        }
    ));
    let mut m = valid();
    m.frames[0].kind = 3;
    assert!(matches!(
        corruption(&m),
        Corruption::UnknownEnum {
            what: "frame kind",
            ..
        }
    ));
    let mut m = valid();
    m.meta = Some(proto::Meta {
        targets: Some(proto::Targets {
            kind: 9,
            ..Default::default()
        }),
        ..Default::default()
    });
    assert!(matches!(
        corruption(&m),
        Corruption::UnknownEnum {
            what: "target kind",
            ..
        }
    ));
}

#[test]
fn unknown_truncation_reasons_are_corrupt() {
    let mut m = valid();
    m.meta = Some(proto::Meta {
        user_stacks: Some(proto::UserStacks {
            complete: 1,
            truncated: vec![proto::TruncatedStacks {
                reason: 7,
                samples: 2,
            }],
        }),
        ..Default::default()
    });
    assert_eq!(
        corruption(&m).to_string(),
        "unknown truncation reason value 7"
    );
}

#[test]
fn user_stack_counts_read_as_the_model_keeps_them() {
    use crate::model::Truncation;
    let entry = |r: proto::Truncation, samples| proto::TruncatedStacks {
        reason: r as i32,
        samples,
    };
    let mut m = valid();
    m.meta = Some(proto::Meta {
        user_stacks: Some(proto::UserStacks {
            complete: 5,
            // Out of order, a reason twice and a zero: merged, sorted, zero left out.
            truncated: vec![
                entry(proto::Truncation::ReadFault, 3),
                entry(proto::Truncation::StackWindow, 0),
                entry(proto::Truncation::NoUnwindInfo, 1),
                entry(proto::Truncation::ReadFault, 4),
            ],
        }),
        ..Default::default()
    });
    let u = read_profile(&file(&m)[..]).unwrap().meta.user_stacks;
    assert_eq!(u.complete, 5);
    assert_eq!(
        u.truncated,
        [(Truncation::NoUnwindInfo, 1), (Truncation::ReadFault, 7)]
    );
}

#[test]
fn build_ids_must_be_lower_case_hex_bytes() {
    for bad in ["ABCD", "abc", "../../etc/passwd", "ab cd", "0g"] {
        let mut m = valid();
        m.strings.push(bad.into());
        m.frames[0].build_id_str = 2;
        assert_eq!(
            corruption(&m).to_string(),
            "frame 0 has a build-id that is not lower-case hex of whole bytes",
            "{bad:?}"
        );
    }
    let mut m = valid();
    m.strings.push("00ff".into());
    m.frames[0].build_id_str = 2;
    assert_eq!(
        read_profile(&file(&m)[..]).unwrap().frames[0].build_id,
        "00ff"
    );
    // The writer refuses what the reader would.
    let mut p = read_profile(&file(&valid())[..]).unwrap();
    p.frames[0].build_id = "XYZ".into();
    let e = write_profile(&p, Vec::new()).unwrap_err();
    assert!(matches!(
        e,
        FormatError::InvalidProfile(Corruption::BadBuildId { frame: 0 })
    ));
}

#[test]
fn softirq_vector_must_fit_and_belong_to_a_softirq() {
    let mut m = valid();
    m.samples[0].context = proto::Context::SoftIrq as i32;
    m.samples[0].softirq_vec = 256;
    assert_eq!(corruption(&m).to_string(), "invalid softirq vector: 256");
    m.samples[0].context = proto::Context::HardIrq as i32;
    m.samples[0].softirq_vec = 3;
    assert!(matches!(
        corruption(&m),
        Corruption::InvalidValue { value: 3, .. }
    ));
}

#[test]
fn string_table_must_start_empty() {
    let mut m = valid();
    m.strings[0] = "x".into();
    assert_eq!(corruption(&m), Corruption::StringTableStart);
}

#[test]
fn undecodable_bodies_are_corrupt() {
    for body in [
        &[0xffu8][..],
        &[0x0a, 0x05, b'a'],
        &[0x0a, 0x02, 0xc3, 0x28],
    ] {
        let h = Header {
            compression: Compression::None,
            body_len: body.len() as u64,
            raw_len: body.len() as u64,
            crc32: crc32fast::hash(body),
        };
        let mut f = h.encode().to_vec();
        f.extend_from_slice(body);
        let e = read_profile(&f[..]).unwrap_err();
        assert!(
            matches!(e, FormatError::Corrupt(Corruption::Decode(_))),
            "{body:?}: {e:?}"
        );
        assert!(!e.to_string().contains('\n'));
    }
}

#[test]
fn gzip_body_sizes_are_checked() {
    let body = valid().encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &body).unwrap();
    let mut gzipped = gz.finish().unwrap();
    let frame = |raw_len: u64, gzipped: &[u8]| {
        let h = Header {
            compression: Compression::Gzip,
            body_len: gzipped.len() as u64,
            raw_len,
            crc32: crc32fast::hash(gzipped),
        };
        let mut f = h.encode().to_vec();
        f.extend_from_slice(gzipped);
        f
    };
    let n = body.len() as u64;
    assert!(read_profile(&frame(n, &gzipped)[..]).is_ok());
    let short = read_profile(&frame(n - 1, &gzipped)[..]).unwrap_err();
    assert!(
        matches!(short, FormatError::Corrupt(Corruption::BodyLong { .. })),
        "{short:?}"
    );
    let long = read_profile(&frame(n + 1, &gzipped)[..]).unwrap_err();
    assert!(
        matches!(long, FormatError::Corrupt(Corruption::BodyShort { .. })),
        "{long:?}"
    );
    let impossible = gzipped.len() as u64 * MAX_EXPANSION + 1;
    let e = read_profile(&frame(impossible, &gzipped)[..]).unwrap_err();
    assert!(
        matches!(e, FormatError::Corrupt(Corruption::BodyTooLarge { .. })),
        "{e:?}"
    );
    gzipped.extend_from_slice(b"xx");
    let e = read_profile(&frame(n, &gzipped)[..]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "corrupt profile (cannot decompress the body: 2 bytes after the gzip stream)"
    );
}

/// A frame of a kind older readers do not know (`frame.kind`) is written as a user frame of its
/// name with a flag field set (`flag`): it round-trips, and a reader that skips the field sees a
/// user frame of that name.
fn user_frame_to_older_readers(
    frame: crate::model::Frame,
    flag: fn(&mut proto::Frame) -> &mut bool,
) {
    use crate::model::{Frame, FrameKind, Stack};
    let p = Profile {
        frames: vec![frame.clone()],
        stacks: vec![Stack { frames: vec![0] }],
        ..Profile::default()
    };
    let body = encode::encode_body(&p).unwrap();
    let mut msg = proto::Profile::decode(body.as_slice()).unwrap();
    let f = &mut msg.frames[0];
    assert_eq!(f.kind, proto::FrameKind::User as i32);
    assert!(*flag(f));
    assert_eq!(msg.strings[msg.frames[0].name_str as usize], frame.name);
    assert_eq!(decode::decode_body(&body).unwrap(), p);
    *flag(&mut msg.frames[0]) = false;
    let old = decode::decode_body(&msg.encode_to_vec()).unwrap();
    assert_eq!(
        old.frames[0],
        Frame {
            kind: FrameKind::User,
            ..frame
        }
    );
}

#[test]
fn truncated_mark_is_a_user_frame_to_older_readers() {
    use crate::model::{Frame, FrameKind};
    let mark = Frame {
        kind: FrameKind::Truncated,
        name: "[truncated]".into(),
        module: "[truncated]".into(),
        symbolized: true,
        ..Frame::default()
    };
    // Field 9.
    user_frame_to_older_readers(mark, |f| &mut f.truncated);
}

#[test]
fn python_frame_is_a_user_frame_to_older_readers() {
    use crate::model::{Frame, FrameKind};
    let py = Frame {
        kind: FrameKind::Python,
        name: "fib.py:fib".into(),
        module: "fib.py".into(),
        offset: 3,
        symbolized: true,
        ..Frame::default()
    };
    // Field 11.
    user_frame_to_older_readers(py, |f| &mut f.python);
}

/// A profile with off-CPU groups: one with a waker stack and a two-entry chain, one without.
fn with_off_cpu() -> Profile {
    use crate::model::{BlockReason, Context, OffCpu, OffCpuCounts, OffCpuGroup, Stack, WakeLink};
    Profile {
        stacks: vec![Stack { frames: vec![] }, Stack { frames: vec![] }],
        off_cpu: Some(OffCpu {
            period_ns: 10_000_000,
            wake_chain: 4,
            max_rate: 200,
            counts: OffCpuCounts {
                blocks: 9,
                chosen: 3,
                ring_full: 1,
                no_storage: 2,
                exited_pending: 4,
                chain_truncated: 5,
                period_raised: 6,
                task_work_ns: 7,
                no_rseq: 8,
            },
            groups: vec![
                OffCpuGroup {
                    stack: 1,
                    pid: 10,
                    tid: 11,
                    comm: "reader".into(),
                    reason: BlockReason::Ipc,
                    waker_stack: Some(0),
                    chain: vec![
                        WakeLink {
                            pid: 10,
                            tid: 12,
                            comm: "writer".into(),
                            context: Context::Syscall,
                            blocked: Some(BlockReason::Sleep),
                        },
                        WakeLink {
                            context: Context::SoftIrq(1),
                            ..WakeLink::default()
                        },
                    ],
                    chain_blocked_ns: vec![30_000_000, 0],
                    count: 2,
                    weight_ns: u64::MAX,
                    ..OffCpuGroup::default()
                },
                OffCpuGroup {
                    reason: BlockReason::Runnable,
                    ..OffCpuGroup::default()
                },
            ],
        }),
        ..Profile::default()
    }
}

#[test]
fn off_cpu_samples_round_trip_and_are_skipped_by_older_readers() {
    let p = with_off_cpu();
    let body = encode::encode_body(&p).unwrap();
    assert_eq!(decode::decode_body(&body).unwrap(), p);
    // A reader without field 10 reads the rest as it was.
    let mut msg = proto::Profile::decode(body.as_slice()).unwrap();
    msg.off_cpu = None;
    let old = decode::decode_body(&msg.encode_to_vec()).unwrap();
    assert_eq!(old, Profile { off_cpu: None, ..p });
}

#[test]
fn off_cpu_version_stack_ids_and_reasons_are_checked() {
    let body = encode::encode_body(&with_off_cpu()).unwrap();
    let msg = proto::Profile::decode(body.as_slice()).unwrap();
    let broken = |f: &dyn Fn(&mut proto::OffCpu)| {
        let mut m = msg.clone();
        f(m.off_cpu.as_mut().unwrap());
        decode::decode_body(&m.encode_to_vec()).unwrap_err()
    };
    assert!(matches!(
        broken(&|o| o.version = 2),
        Corruption::UnknownEnum { .. }
    ));
    assert!(matches!(
        broken(&|o| o.groups[0].stack = 2),
        Corruption::IndexOutOfRange { .. }
    ));
    assert!(matches!(
        broken(&|o| o.groups[0].waker_stack = 3),
        Corruption::IndexOutOfRange { .. }
    ));
    assert!(matches!(
        broken(&|o| o.groups[1].reason = 8),
        Corruption::UnknownEnum { .. }
    ));
    assert!(matches!(
        broken(&|o| o.groups[0].chain[1].softirq_vec = 300),
        Corruption::InvalidValue { .. }
    ));
}
