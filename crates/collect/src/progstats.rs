//! Run-time statistics of our own BPF programs, as the kernel keeps them (`bpf_prog_info`).

use pkprof_accounting::ProgStat;

/// Reads run time, run count and recursion misses of each (name, fd).
pub fn read(progs: &[(String, i32)]) -> Vec<ProgStat> {
    progs
        .iter()
        .filter_map(|(name, fd)| {
            let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: fd is a live program fd owned by the skeleton; info/len describe a valid,
            // writable bpf_prog_info of the size passed.
            let rc =
                unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(*fd, &mut info, &mut len) };
            (rc == 0).then(|| ProgStat {
                name: name.clone(),
                run_ns: info.run_time_ns,
                run_cnt: info.run_cnt,
                recursion_misses: info.recursion_misses,
            })
        })
        .collect()
}
