//! One cpu-clock sampling event per online CPU, in frequency mode, each running the sample program.
//!
//! libbpf-rs attaches perf_event programs only to an event fd we open ourselves; the libbpf link
//! takes the fd over and closes it (BUILD-NOTES pitfall 3).

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

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
pub fn attach_cpu_clock(prog: &ProgramMut<'_>, cpu: u32, freq: u64) -> Result<Link, CollectError> {
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
    prog.attach_perf_event(raw).map_err(|e| {
        // SAFETY: the attach failed, so the fd is still ours to close.
        drop(unsafe { OwnedFd::from_raw_fd(raw) });
        CollectError::attach("on_sample", to(), e)
    })
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
