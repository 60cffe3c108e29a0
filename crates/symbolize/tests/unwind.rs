//! Unwinding without root: this test process samples its own stack (registers by inline asm, the
//! stack's bytes copied from the stack pointer up, as the BPF sampler copies them), describes
//! itself to the symbolizer from /proc/self/maps, and checks the unwound chain against the
//! functions it is known to be in. Then the bad inputs: a window too small, a stack pointer into
//! nothing, a binary whose `.eh_frame` is garbage, an unwind-memory limit of one byte. Each must
//! end with its named reason; none may be called complete unless it is the true stack.

#![cfg(target_arch = "x86_64")]

use std::hint::black_box;

use object::{Object, ObjectSection};
use pkprof_profile::Truncation;
use pkprof_symbolize::{Symbolizer, SymbolizerOptions, UnwoundStack, UserRegs};

struct Sample {
    regs: UserRegs,
    stack: Vec<u8>,
}

/// The end of the mapping holding `addr` in /proc/self/maps.
fn mapping_end(addr: u64) -> u64 {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let range = line.split_whitespace().next().unwrap();
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        if (a..b).contains(&addr) {
            return b;
        }
    }
    panic!("{addr:#x} is in no mapping");
}

#[inline(never)]
fn sample_here(out: &mut Option<Sample>) {
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: reads three registers; touches no memory.
    unsafe {
        std::arch::asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
        );
    }
    let len = (mapping_end(sp) - sp).min(16384) as usize;
    let mut stack = vec![0u8; len];
    // SAFETY: [sp, sp + len) lies in this thread's mapped stack (checked above) and is only read.
    unsafe { std::ptr::copy_nonoverlapping(sp as *const u8, stack.as_mut_ptr(), len) };
    *out = Some(Sample {
        regs: UserRegs { ip, sp, bp },
        stack,
    });
}

#[inline(never)]
fn pkprof_unwind_level2(out: &mut Option<Sample>) {
    sample_here(black_box(out));
    black_box(());
}

#[inline(never)]
fn pkprof_unwind_level1(out: &mut Option<Sample>) {
    pkprof_unwind_level2(black_box(out));
    black_box(());
}

fn take_sample() -> Sample {
    let mut out = None;
    pkprof_unwind_level1(&mut out);
    out.unwrap()
}

fn symbolizer(limit: usize, maps: &str) -> Symbolizer {
    let mut sym = Symbolizer::new(SymbolizerOptions {
        unwind_memory_bytes: limit,
        ..Default::default()
    });
    sym.capture_from_maps(std::process::id(), maps);
    sym
}

fn own_maps() -> String {
    std::fs::read_to_string("/proc/self/maps").unwrap()
}

/// Names of the unwound frames, leaf first.
fn names(sym: &mut Symbolizer, u: &UnwoundStack) -> Vec<String> {
    let addrs: Vec<u64> = u
        .frames
        .iter()
        .enumerate()
        .map(|(i, a)| if i == 0 { *a } else { a - 1 })
        .collect();
    sym.symbolize_user(std::process::id(), &addrs)
        .into_iter()
        .map(|f| f.last().map(|f| f.name.clone()).unwrap_or_default())
        .collect()
}

#[test]
fn own_stack_unwinds_whole_to_the_thread_entry() {
    let s = take_sample();
    let mut sym = symbolizer(256 << 20, &own_maps());
    let u = sym.unwind(std::process::id(), s.regs, &s.stack, true, &[s.regs.ip]);
    let n = names(&mut sym, &u);
    let at = |f: &str| n.iter().position(|x| x.ends_with(f));
    let (here, l2, l1) = (
        at("sample_here").unwrap_or(usize::MAX),
        at("pkprof_unwind_level2").unwrap_or(usize::MAX),
        at("pkprof_unwind_level1").unwrap_or(usize::MAX),
    );
    assert!(here == 0 && l2 == 1 && l1 == 2, "{n:?}");
    assert_eq!(u.end, None, "{n:?}");
    // The test harness runs each test on a thread of its own: the stack ends at its entry.
    assert!(
        n.last().is_some_and(|f| f.contains("clone")),
        "the stack does not end at the thread's entry: {n:?}"
    );
}

#[test]
fn a_window_too_small_is_never_complete() {
    let s = take_sample();
    let mut sym = symbolizer(256 << 20, &own_maps());
    for cut in [8, 64, 256, 1024] {
        let u = sym.unwind(
            std::process::id(),
            s.regs,
            &s.stack[..cut],
            true,
            &[s.regs.ip],
        );
        assert_eq!(u.end, Some(Truncation::StackWindow), "cut at {cut}: {u:?}");
        // The same bytes read to an unreadable page: the stack itself could not be read.
        let u = sym.unwind(
            std::process::id(),
            s.regs,
            &s.stack[..cut],
            false,
            &[s.regs.ip],
        );
        assert_eq!(u.end, Some(Truncation::ReadFault), "cut at {cut}: {u:?}");
    }
}

#[test]
fn nothing_to_read_is_a_read_fault_and_no_process_is_tables_missing() {
    let s = take_sample();
    let mut sym = symbolizer(256 << 20, &own_maps());
    let regs = UserRegs { sp: 0x10, ..s.regs };
    let u = sym.unwind(std::process::id(), regs, &[], false, &[regs.ip]);
    assert_eq!(u.frames, vec![regs.ip]);
    assert_eq!(u.end, Some(Truncation::ReadFault));
    let u = sym.unwind(1, s.regs, &s.stack, true, &[s.regs.ip]);
    assert_eq!(u.end, Some(Truncation::TablesMissing));
}

#[test]
fn a_memory_limit_of_one_byte_loads_no_table() {
    let s = take_sample();
    let mut sym = symbolizer(1, &own_maps());
    let u = sym.unwind(std::process::id(), s.regs, &s.stack, true, &[s.regs.ip]);
    assert_eq!(u.end, Some(Truncation::TableLimit), "{u:?}");
    assert_eq!(sym.unwind_table_bytes(), 0);
}

#[test]
fn garbage_unwind_tables_give_a_reason_not_a_panic() {
    let s = take_sample();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let mut bytes = std::fs::read(&exe).unwrap();
    let (start, size) = {
        let obj = object::File::parse(&*bytes).unwrap();
        let sec = obj.section_by_name(".eh_frame").unwrap();
        let (off, size) = sec.file_range().unwrap();
        (off as usize, size as usize)
    };
    let intact = symbolizer(256 << 20, &own_maps()).unwind(
        std::process::id(),
        s.regs,
        &s.stack,
        true,
        &[s.regs.ip],
    );
    assert_eq!(intact.end, None);
    let dir = tempfile::tempdir().unwrap();
    let mut marked = 0;
    for (i, fill) in [0x00u8, 0xff, 0x5a].into_iter().enumerate() {
        // Garbage in the middle of the section (its first entries stay readable), then all of it.
        for range in [start + size / 2..start + size, start..start + size] {
            bytes[range].fill(fill);
            let copy = dir.path().join(format!("garbage-{i}"));
            std::fs::write(&copy, &bytes).unwrap();
            let maps = own_maps().replace(exe.to_str().unwrap(), copy.to_str().unwrap());
            let mut sym = symbolizer(256 << 20, &maps);
            let u = sym.unwind(std::process::id(), s.regs, &s.stack, true, &[s.regs.ip]);
            // Entries nobody needed may be garbage; a stack called complete must be the true one.
            if u.end.is_none() {
                assert_eq!(u.frames, intact.frames, "a wrong stack called complete");
            } else {
                marked += 1;
            }
        }
    }
    // With the whole section garbage, the frames of this binary cannot be unwound.
    assert!(
        marked >= 3,
        "{marked} of 6 walks over garbage tables marked"
    );
}
