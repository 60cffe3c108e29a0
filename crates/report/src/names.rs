//! How frames are named in every report: `PIDu:func` / `PIDk:func` for a profiled process (the
//! seamless-profile naming of the design notes), `OTHERu:` / `OTHERk:` for processes not profiled,
//! `KERNEL:` and `IDLE:` for the buckets without a process; or the plain function name.

use pkprof_profile::{Bucket, Frame, FrameKind};

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
        FrameKind::User => 'u',
        FrameKind::Kernel | FrameKind::Syscall => 'k',
    };
    match bucket {
        Bucket::Process => format!("{pid}{side}:{}", frame.name),
        Bucket::Other => format!("OTHER{side}:{}", frame.name),
        Bucket::Kernel => format!("KERNEL:{}", frame.name),
        Bucket::Idle => format!("IDLE:{}", frame.name),
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
