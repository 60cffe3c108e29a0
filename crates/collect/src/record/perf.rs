//! One cpu-clock sampling event per online CPU, in frequency mode, each running the sample program.
//!
//! libbpf-rs attaches perf_event programs only to an event fd we open ourselves; the libbpf link
//! takes the fd over and closes it (BUILD-NOTES pitfall 3).

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};

use libbpf_rs::libbpf_sys::{
    perf_event_attr, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC, PERF_TYPE_SOFTWARE,
};
use libbpf_rs::{Link, ProgramMut};

use crate::error::CollectError;

/// CPUs that are online now, from /sys/devices/system/cpu/online ("0-1,4").
pub fn online_cpus() -> Result<Vec<u32>, CollectError> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").map_err(|e| {
        CollectError::attach(
            "on_sample",
            "every online CPU (reading /sys/devices/system/cpu/online)",
            e,
        )
    })?;
    Ok(parse_cpu_list(&text))
}

fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<u32>().ok()),
        }
    }
    cpus
}

/// Opens a cpu-clock event sampling `freq` times a second on `cpu` and attaches `prog` to it.
/// Returns the link and the event's descriptor (owned by the link, valid while it lives) for
/// [`set_enabled`].
pub fn attach_cpu_clock(
    prog: &ProgramMut<'_>,
    cpu: u32,
    freq: u64,
) -> Result<(Link, RawFd), CollectError> {
    let mut attr = perf_event_attr {
        size: std::mem::size_of::<perf_event_attr>() as u32,
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_CPU_CLOCK as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_freq = freq;
    attr.set_freq(1);
    // SAFETY: attr is a valid, fully initialised perf_event_attr of the size it declares;
    // pid -1 with a CPU means "every task on that CPU"; no group fd.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const perf_event_attr,
            -1i32,
            cpu as i32,
            -1i32,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    let to = || format!("a cpu-clock event on cpu {cpu} ({freq} Hz)");
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(CollectError::attach("on_sample", to(), err));
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let raw = owned.into_raw_fd();
    let link = prog.attach_perf_event(raw).map_err(|e| {
        // SAFETY: the attach failed, so the fd is still ours to close.
        drop(unsafe { OwnedFd::from_raw_fd(raw) });
        CollectError::attach("on_sample", to(), e)
    })?;
    Ok((link, raw))
}

/// Stops or restarts a sampling event (`pkprof ctl stop` / `start`): a disabled event does not
/// fire, so sampling costs nothing while the accounting goes on.
pub fn set_enabled(fd: RawFd, on: bool) -> Result<(), CollectError> {
    // _IO('$', 0) and _IO('$', 1) of <linux/perf_event.h> (neither libc nor libbpf-sys has them).
    const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
    const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
    let req = if on {
        PERF_EVENT_IOC_ENABLE
    } else {
        PERF_EVENT_IOC_DISABLE
    };
    // SAFETY: fd is a perf event descriptor kept open by its link; the ioctl takes no argument.
    let r = unsafe { libc::ioctl(fd, req as _, 0) };
    if r == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        Err(CollectError::attach(
            "on_sample",
            "enable/disable of a cpu-clock event".to_string(),
            e,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), vec![0, 1]);
        assert_eq!(parse_cpu_list("0,2-3,7"), vec![0, 2, 3, 7]);
        assert_eq!(parse_cpu_list(""), Vec::<u32>::new());
    }
}
