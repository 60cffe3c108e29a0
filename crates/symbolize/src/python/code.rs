//! Names of CPython frames: a sampled frame is a code object's address and an instruction
//! pointer; the code object's file, function and line table are read from the process's memory
//! (`process_vm_readv`); the recording keeps what was read per code object (docs/design.md,
//! "Python frames").

use super::layout::PyOffsets;

/// The longest string (file or function name) read; a longer one reads as corrupt.
const MAX_STRING: usize = 4096;
/// The largest line table read.
const MAX_LINETABLE: usize = 1 << 20;

/// Reads `len` bytes at `addr` of process `pid` (all or nothing).
pub fn read_mem(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    if addr == 0 {
        return None;
    }
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` covers `buf`, owned and `len` bytes long; the remote side is only read by
    // the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(buf)
}

fn u64_at(b: &[u8], off: u32) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(off as usize..off as usize + 8)?.try_into().ok()?,
    ))
}

fn i32_at(b: &[u8], off: u32) -> Option<i32> {
    Some(i32::from_le_bytes(
        b.get(off as usize..off as usize + 4)?.try_into().ok()?,
    ))
}

/// A code object as read: what names its frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeInfo {
    /// `co_filename` (the source path) and `co_qualname` (`Class.method`).
    pub filename: String,
    pub qualname: String,
    pub firstlineno: u32,
    /// `co_linetable` (PEP 626/657 location table, 3.11+).
    pub linetable: Vec<u8>,
    /// Address of the first instruction (`co_code_adaptive`).
    pub code_start: u64,
}

impl CodeInfo {
    /// The source line of the instruction at `instr` (None: not in this code's table, or the
    /// instruction has no line).
    pub fn line(&self, instr: u64) -> Option<u32> {
        let idx = instr.checked_sub(self.code_start)? / 2;
        line_of(&self.linetable, self.firstlineno, idx)
    }
}

/// Reads a `str` object (compact: ASCII, Latin-1, UCS-2 or UCS-4).
fn read_str(pid: u32, addr: u64, o: &PyOffsets) -> Option<String> {
    let head = read_mem(pid, addr, o.unicode_compact_size as usize)?;
    let len = usize::try_from(u64_at(&head, o.unicode_length)?).ok()?;
    let state = u32::from_le_bytes(
        head.get(o.unicode_state as usize..o.unicode_state as usize + 4)?
            .try_into()
            .ok()?,
    );
    // `state`: interned (2 bits), kind (3), compact (1), ascii (1) in 3.11 to 3.13.
    let kind = (state >> 2) & 7;
    let compact = (state >> 5) & 1 == 1;
    let ascii = (state >> 6) & 1 == 1;
    if !compact || len > MAX_STRING || !matches!(kind, 1 | 2 | 4) {
        return None;
    }
    let data = if ascii {
        o.unicode_ascii_size
    } else {
        o.unicode_compact_size
    };
    let bytes = read_mem(pid, addr + u64::from(data), len * kind as usize)?;
    Some(match kind {
        1 => bytes.iter().map(|&b| b as char).collect(),
        2 => bytes
            .chunks_exact(2)
            .map(|c| char::from_u32(u32::from(u16::from_le_bytes([c[0], c[1]]))).unwrap_or('?'))
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).unwrap_or('?'))
            .collect(),
    })
}

/// Reads a `bytes` object's contents.
fn read_bytes(pid: u32, addr: u64, o: &PyOffsets) -> Option<Vec<u8>> {
    let head = read_mem(pid, addr, o.bytes_sval as usize)?;
    let len = usize::try_from(u64_at(&head, o.bytes_size)?).ok()?;
    if len > MAX_LINETABLE {
        return None;
    }
    read_mem(pid, addr + u64::from(o.bytes_sval), len)
}

/// Reads the code object at `addr`.
pub fn read_code(pid: u32, addr: u64, o: &PyOffsets) -> Option<CodeInfo> {
    let head = read_mem(pid, addr, o.code_adaptive as usize)?;
    let filename = read_str(pid, u64_at(&head, o.code_filename)?, o)?;
    let qualname = read_str(pid, u64_at(&head, o.code_qualname)?, o)
        .or_else(|| read_str(pid, u64_at(&head, o.code_name)?, o))?;
    let firstlineno = u32::try_from(i32_at(&head, o.code_firstlineno)?).ok()?;
    let linetable = read_bytes(pid, u64_at(&head, o.code_linetable)?, o).unwrap_or_default();
    Some(CodeInfo {
        filename,
        qualname,
        firstlineno,
        linetable,
        code_start: addr + u64::from(o.code_adaptive),
    })
}

/// Reads a PEP 657 varint (6-bit chunks, bit 6 continues).
fn varint(t: &[u8], i: &mut usize) -> Option<u32> {
    let mut b = *t.get(*i)?;
    *i += 1;
    let mut val = u32::from(b & 63);
    let mut shift = 0;
    while b & 64 != 0 {
        b = *t.get(*i)?;
        *i += 1;
        shift += 6;
        if shift > 30 {
            return None;
        }
        val |= u32::from(b & 63) << shift;
    }
    Some(val)
}

fn svarint(t: &[u8], i: &mut usize) -> Option<i64> {
    let v = varint(t, i)?;
    Some(if v & 1 != 0 {
        -i64::from(v >> 1)
    } else {
        i64::from(v >> 1)
    })
}

/// The line of code unit `idx` in a 3.11+ location table (`Objects/locations.md` in CPython).
/// The table is decoded by hand: no crate reads it. `idx` is what CPython calls the frame's
/// `LASTI` (3.11/3.12 `prev_instr`, 3.13 `instr_ptr`, less the first instruction, in code
/// units): `PyFrame_GetLineNumber` looks that up as this does.
pub fn line_of(t: &[u8], firstlineno: u32, idx: u64) -> Option<u32> {
    let mut line = i64::from(firstlineno);
    let mut addr = 0u64;
    let mut i = 0;
    while i < t.len() {
        let first = t[i];
        i += 1;
        if first & 0x80 == 0 {
            return None; // not at an entry's start: corrupt
        }
        let code = (first >> 3) & 15;
        let len = u64::from(first & 7) + 1;
        let mut has_line = true;
        match code {
            0..=9 => i += 1,
            10..=12 => {
                line += i64::from(code - 10);
                i += 2;
            }
            13 => line += svarint(t, &mut i)?,
            14 => {
                line += svarint(t, &mut i)?;
                varint(t, &mut i)?;
                varint(t, &mut i)?;
                varint(t, &mut i)?;
            }
            _ => has_line = false,
        }
        if idx < addr + len {
            return if has_line {
                u32::try_from(line).ok()
            } else {
                None
            };
        }
        addr += len;
    }
    None
}
