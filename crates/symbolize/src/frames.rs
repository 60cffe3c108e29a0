//! Turning blazesym's answers into profile [`Frame`]s: the function and its inlined callees
//! (outermost first), and the `module+0xOFFSET` fallback for addresses nobody can name.

use blazesym::symbolize::{CodeInfo, Sym};
use pkprof_profile::{Frame, FrameKind};

/// Frames for one symbolized address, outermost first: the function, then the functions inlined
/// into it at that address, each marked `inlined`. `module` and `offset` are left for the caller.
///
/// blazesym puts in `sym.code_info` the position in the outer function (the call site of the
/// first inlined function, if any) and in each inlined function's `code_info` the position inside
/// that function, which is what each frame needs.
pub(crate) fn sym_frames(sym: &Sym<'_>, kind: FrameKind) -> Vec<Frame> {
    let mut frames = Vec::with_capacity(1 + sym.inlined.len());
    let (file, line) = position(sym.code_info.as_deref());
    frames.push(Frame {
        kind,
        name: sym.name.to_string(),
        symbolized: true,
        file,
        line,
        ..Frame::default()
    });
    for f in sym.inlined.iter() {
        let (file, line) = position(f.code_info.as_ref());
        frames.push(Frame {
            kind,
            name: f.name.to_string(),
            symbolized: true,
            file,
            line,
            inlined: true,
            ..Frame::default()
        });
    }
    frames
}

fn position(info: Option<&CodeInfo<'_>>) -> (Option<String>, Option<u32>) {
    match info {
        Some(ci) => (Some(ci.to_path().to_string_lossy().into_owned()), ci.line),
        None => (None, None),
    }
}

/// The frame of an address nobody could name: `label+0xOFFSET`.
pub(crate) fn unknown_frame(kind: FrameKind, label: &str, module: &str, offset: u64) -> Frame {
    Frame {
        kind,
        name: format!("{label}+{offset:#x}"),
        module: module.to_string(),
        offset,
        symbolized: false,
        ..Frame::default()
    }
}

/// The short name used in fallback frame names: the file name of a path, or the whole string for
/// `[vdso]`-like names.
pub(crate) fn short_name(module: &str) -> &str {
    if module.starts_with('[') {
        return module;
    }
    match module.rsplit_once('/') {
        Some((_, base)) if !base.is_empty() => base,
        _ => module,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_names() {
        let f = unknown_frame(
            FrameKind::User,
            short_name("/usr/lib/libfoo.so.1"),
            "/usr/lib/libfoo.so.1",
            0x1a2b,
        );
        assert_eq!(f.name, "libfoo.so.1+0x1a2b");
        assert_eq!(f.module, "/usr/lib/libfoo.so.1");
        assert_eq!(f.offset, 0x1a2b);
        assert!(!f.symbolized);
        assert_eq!(short_name("[vdso]"), "[vdso]");
        assert_eq!(short_name("[anon:x/y]"), "[anon:x/y]");
        assert_eq!(short_name("a.out"), "a.out");
        assert_eq!(short_name("/dir/"), "/dir/");
    }
}
