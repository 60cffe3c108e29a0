//! How frames are named in every report: `PIDu:func` / `PIDk:func` for a profiled process (the
//! seamless-profile naming of docs/design.md, "Frame names"), `OTHERu:` / `OTHERk:` for processes not profiled,
//! `KERNEL:` and `IDLE:` for the buckets without a process; or the plain function name.

use pkprof_profile::{Bucket, Context, Frame, FrameKind};

/// Labelled (`1234u:main`) or plain (`main`) names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NameStyle {
    #[default]
    Labelled,
    Plain,
}

/// The name of `frame` in a sample served to `pid` in `bucket`.
pub fn frame_label(pid: u32, bucket: Bucket, frame: &Frame, style: NameStyle) -> String {
    if style == NameStyle::Plain {
        return frame.name.clone();
    }
    let side = match frame.kind {
        // The `[truncated]` mark stands where the missing user callers would be.
        FrameKind::User | FrameKind::Truncated | FrameKind::Python => 'u',
        FrameKind::Kernel | FrameKind::Syscall => 'k',
    };
    match bucket {
        Bucket::Process => format!("{pid}{side}:{}", frame.name),
        Bucket::Other => format!("OTHER{side}:{}", frame.name),
        Bucket::Kernel => format!("KERNEL:{}", frame.name),
        Bucket::Idle => format!("IDLE:{}", frame.name),
    }
}

/// Whose name a frame carries: `(bucket, pid)`, with the pid kept only where the label shows it
/// (`1234u:`) and nothing kept for plain names, so that frames of equal names are merged.
pub(crate) type Owner = (Bucket, u32);

/// The owner of frames sampled for `pid` in `bucket`; `frame_label(owner.1, owner.0, ..)` names them.
pub(crate) fn owner(style: NameStyle, bucket: Bucket, pid: u32) -> Owner {
    match (style, bucket) {
        (NameStyle::Plain, _) => (Bucket::Process, 0),
        (NameStyle::Labelled, Bucket::Process) => (bucket, pid),
        (NameStyle::Labelled, _) => (bucket, 0),
    }
}

/// A bucket's name in filters, labels and tables: `process`, `other`, `kernel`, `idle`.
pub fn bucket_name(b: Bucket) -> &'static str {
    match b {
        Bucket::Process => "process",
        Bucket::Other => "other",
        Bucket::Kernel => "kernel",
        Bucket::Idle => "idle",
    }
}

/// A softirq vector's name as in `/proc/softirqs` (`NET_RX`), or its number.
pub fn softirq_name(vec: u8) -> String {
    const NAMES: [&str; 10] = [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ];
    match NAMES.get(vec as usize) {
        Some(n) => n.to_string(),
        None => vec.to_string(),
    }
}

/// A context's name in labels and tables, without spaces so it can be typed in filters
/// (`-tagfocus=context=softirq:NET_RX`): `user`, `syscall`, `kernel-task`, `kworker`, `hardirq`,
/// `softirq:NET_RX`, `idle`.
pub fn context_name(c: Context) -> String {
    match c {
        Context::User => "user".into(),
        Context::Syscall => "syscall".into(),
        Context::KernelTask => "kernel-task".into(),
        Context::Kworker => "kworker".into(),
        Context::HardIrq => "hardirq".into(),
        Context::SoftIrq(v) => format!("softirq:{}", softirq_name(v)),
        Context::Idle => "idle".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let f = |kind, name: &str| Frame {
            kind,
            name: name.into(),
            ..Frame::default()
        };
        let read = f(FrameKind::Syscall, "sys_read");
        assert_eq!(
            frame_label(137, Bucket::Process, &read, NameStyle::Labelled),
            "137k:sys_read"
        );
        let main = f(FrameKind::User, "main");
        assert_eq!(
            frame_label(137, Bucket::Process, &main, NameStyle::Labelled),
            "137u:main"
        );
        assert_eq!(
            frame_label(9, Bucket::Other, &main, NameStyle::Labelled),
            "OTHERu:main"
        );
        assert_eq!(
            frame_label(0, Bucket::Kernel, &read, NameStyle::Labelled),
            "KERNEL:sys_read"
        );
        assert_eq!(
            frame_label(137, Bucket::Process, &main, NameStyle::Plain),
            "main"
        );
    }
}
