//! The unwind tables of one mapped file: its `.eh_frame` / `.eh_frame_hdr` (or `.debug_frame`)
//! bytes and the section and segment addresses framehop needs, read once per file (the symbolizer
//! keeps one open file per binary, shared by every process that maps it) and held in `Arc`s, so
//! that a process's modules cost no copy. Only the headers and these sections are read
//! (`object`'s `ReadCache`), never the whole binary. docs/design.md, "User stacks".

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use gimli::{
    BaseAddresses, CieOrFde, DebugFrame, EhFrame, EndianSlice, LittleEndian, UnwindSection,
};
use object::{Object, ObjectSection, ObjectSegment, ReadCache};

fn collect_entries<'a, S>(section: &S, bases: &BaseAddresses, out: &mut Vec<Range<u64>>)
where
    S: UnwindSection<EndianSlice<'a, LittleEndian>>,
{
    let mut entries = section.entries(bases);
    while let Ok(Some(entry)) = entries.next() {
        if let CieOrFde::Fde(partial) = entry {
            match partial.parse(|s, b, o| s.cie_from_offset(b, o)) {
                Ok(fde) => out.push(fde.initial_address()..fde.end_address()),
                Err(_) => return,
            }
        }
    }
}

/// Section bytes as framehop takes them.
pub(crate) type Bytes = Arc<[u8]>;

/// What one file offers to unwind its code.
#[derive(Debug)]
pub(crate) struct FileTables {
    pub eh_frame: Option<(Range<u64>, Bytes)>,
    pub eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    pub debug_frame: Option<Bytes>,
    pub text_svma: Option<Range<u64>>,
    pub got_svma: Option<Range<u64>>,
    /// Loadable segments: (file offset, file size, virtual address), to place a mapping.
    pub segments: Vec<(u64, u64, u64)>,
    /// The code ranges (as linked) that an entry of the tables describes, sorted. framehop
    /// falls back to frame pointers, silently, for code no entry covers and for an entry it
    /// cannot read; a walk through such code is not proven whole (walk.rs).
    pub covered: Vec<Range<u64>>,
}

impl FileTables {
    /// Reads the tables of an ELF file. Err: the file is not a readable ELF file.
    pub fn read(file: &File) -> Result<FileTables, String> {
        let cache = ReadCache::new(file);
        let obj = object::File::parse(&cache).map_err(|e| e.to_string())?;
        let section = |name: &str| -> Option<(Range<u64>, Bytes)> {
            let s = obj.section_by_name(name)?;
            let data = s.data().ok()?;
            (!data.is_empty()).then(|| {
                (
                    s.address()..s.address().saturating_add(s.size()),
                    Arc::from(data),
                )
            })
        };
        let range = |name: &str| {
            obj.section_by_name(name)
                .map(|s| s.address()..s.address().saturating_add(s.size()))
        };
        let segments = obj
            .segments()
            .filter_map(|s| {
                let (off, size) = s.file_range();
                (size > 0).then_some((off, size, s.address()))
            })
            .collect();
        let mut t = FileTables {
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            // Unlike .eh_frame, .debug_frame may be compressed (SHF_COMPRESSED).
            debug_frame: obj
                .section_by_name(".debug_frame")
                .and_then(|s| s.uncompressed_data().ok())
                .filter(|d| !d.is_empty())
                .map(|d| Arc::from(&*d)),
            text_svma: range(".text"),
            got_svma: range(".got"),
            segments,
            covered: Vec::new(),
        };
        t.covered = t.list_entries();
        Ok(t)
    }

    /// The code ranges of the entries of `.eh_frame` (or `.debug_frame`) up to the first entry
    /// that cannot be read (what follows a damaged entry cannot be trusted to be found).
    fn list_entries(&self) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        if let Some((svma, bytes)) = &self.eh_frame {
            let mut section = EhFrame::new(bytes, LittleEndian);
            section.set_address_size(8);
            let mut bases = BaseAddresses::default().set_eh_frame(svma.start);
            if let Some(text) = &self.text_svma {
                bases = bases.set_text(text.start);
            }
            if let Some((hdr, _)) = &self.eh_frame_hdr {
                bases = bases.set_eh_frame_hdr(hdr.start);
            }
            collect_entries(&section, &bases, &mut out);
        } else if let Some(bytes) = &self.debug_frame {
            let mut section = DebugFrame::new(bytes, LittleEndian);
            section.set_address_size(8);
            collect_entries(&section, &BaseAddresses::default(), &mut out);
        }
        out.sort_by_key(|r| r.start);
        out
    }

    /// Whether an entry of the tables covers `svma`.
    pub fn covers(&self, svma: u64) -> bool {
        let i = self.covered.partition_point(|r| r.start <= svma);
        i > 0 && self.covered[i - 1].contains(&svma)
    }

    /// Whether the file has any unwind table.
    pub fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// Bytes held for this file.
    pub fn bytes(&self) -> usize {
        self.covered.len() * std::mem::size_of::<Range<u64>>()
            + self.eh_frame.as_ref().map_or(0, |s| s.1.len())
            + self.eh_frame_hdr.as_ref().map_or(0, |s| s.1.len())
            + self.debug_frame.as_ref().map_or(0, |b| b.len())
    }

    /// The virtual address (as linked) that a mapping of `len` bytes from file offset `offset`
    /// starts at, through the loadable segment it maps most of. A mapping starts at a page
    /// boundary, so it may begin with the end of the segment before (a Rust binary's text
    /// segment at file offset 0x164b0 is mapped from 0x16000, where the read-only segment ends).
    pub fn svma_of_mapping(&self, offset: u64, len: u64) -> Option<u64> {
        let end = offset.saturating_add(len);
        let (off, _, vaddr) = self
            .segments
            .iter()
            .filter(|(off, size, _)| *off < end && off.saturating_add(*size) > offset)
            .max_by_key(|(off, size, _)| off.saturating_add(*size).min(end) - (*off).max(offset))?;
        // The mapping's start is `off - offset` bytes before the segment's (or after it).
        Some(vaddr.wrapping_sub(off.wrapping_sub(offset)))
    }

    /// framehop's description of the file (section addresses as linked, base 0).
    pub fn section_info(&self) -> framehop::ExplicitModuleSectionInfo<Bytes> {
        framehop::ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text_svma.clone(),
            got_svma: self.got_svma.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|s| s.0.clone()),
            eh_frame: self.eh_frame.as_ref().map(|s| s.1.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|s| s.0.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|s| s.1.clone()),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        }
    }
}
