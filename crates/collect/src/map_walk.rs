//! A complete read of a BPF hash map, batch by batch (`BPF_MAP_LOOKUP_BATCH`), and the one
//! walk-decode-delete helper every map reader uses: [`walk`] hands each entry's bytes over from
//! the batch buffers, [`walk_decoded`] / [`decoded`] as its key and value types, [`sweep`] also
//! deletes the entries its caller's verdict lets go, [`delete`] deletes keys collected earlier.
//! Deletes always come after the walk: deleting the key a hash-map walk stands on restarts the
//! walk.
//!
//! Hand-written rather than libbpf-rs's `MapCore::lookup_batch`: its iterator (0.27, and upstream
//! at the time of writing) ends the walk at the first batch shorter than asked for, and ends it
//! silently on any error. The kernel returns a short batch whenever the next hash bucket does not
//! fit in the space left, so with a few hundred entries a walk could stop part way: threads went
//! missing from a read, a live process looked exited, and its totals (and its Prometheus counters)
//! went backwards. This walk goes on until the kernel answers ENOENT, grows its buffer when a
//! bucket is larger than it (ENOSPC), and reports any other error.

use std::os::fd::AsRawFd;

use libbpf_rs::libbpf_sys;
use libbpf_rs::MapCore;

use crate::error::{CollectError, LayoutMismatch};

/// Entries asked for per bpf() call at first.
const BATCH: usize = 512;

/// Options of a batch operation with no flags, sized as this libbpf knows them.
fn batch_opts() -> libbpf_sys::bpf_map_batch_opts {
    // Padding fields on some targets: the default fills them.
    #[allow(clippy::needless_update)]
    libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        elem_flags: 0,
        flags: 0,
        ..Default::default()
    }
}

/// Calls `each` with every (key bytes, value bytes) of the hash map `map` (named `name` in
/// errors), straight from the batch buffers: no copy per entry (the agent reads a thread table
/// of a few thousand 1 KiB entries a second). The walk stops at `each`'s first error.
pub(crate) fn walk<M: MapCore>(
    map: &M,
    name: &'static str,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<(), CollectError>,
) -> Result<(), CollectError> {
    let key_size = map.key_size() as usize;
    let value_size = map.value_size() as usize;
    let mut batch = BATCH;
    let mut keys = vec![0u8; key_size * batch];
    let mut values = vec![0u8; value_size * batch];
    // The position tokens of a hash map are bucket numbers (u32); room for any key-sized token.
    let token_size = key_size.max(8);
    let mut position: Option<Vec<u8>> = None;
    let mut next = vec![0u8; token_size];
    let opts = batch_opts();
    loop {
        let mut count = batch as u32;
        let in_batch = position
            .as_mut()
            .map_or(std::ptr::null_mut(), |p| p.as_mut_ptr().cast());
        // SAFETY: `keys` and `values` hold `batch` entries of the map's key and value sizes, the
        // count passed is `batch`; `in_batch` is null or a token buffer of `token_size` bytes the
        // kernel filled in the previous call, and `next` has room for one; `opts` is initialised
        // with its own size. All outlive the call.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                map.as_fd().as_raw_fd(),
                in_batch,
                next.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let errno = if ret < 0 { -ret } else { 0 };
        match errno {
            0 | libc::ENOENT => {
                let n = (count as usize).min(batch);
                for i in 0..n {
                    each(
                        &keys[i * key_size..(i + 1) * key_size],
                        &values[i * value_size..(i + 1) * value_size],
                    )?;
                }
                if errno == libc::ENOENT {
                    return Ok(());
                }
                position = Some(next.clone());
            }
            // One bucket holds more entries than the buffer: retry it with a larger one.
            libc::ENOSPC => {
                batch *= 2;
                keys.resize(key_size * batch, 0);
                values.resize(value_size * batch, 0);
            }
            libc::EINTR => {}
            e => {
                return Err(CollectError::read(
                    name,
                    std::io::Error::from_raw_os_error(e),
                ))
            }
        }
    }
}

/// `bytes` as a `T` (a `#[repr(C)]` type of pkprof.h, or an integer).
pub(crate) fn decode<T: plain::Plain + Default>(bytes: &[u8]) -> Result<T, LayoutMismatch> {
    let mut v = T::default();
    plain::copy_from_bytes(&mut v, bytes).map_err(|_| LayoutMismatch {
        ty: std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or_default(),
        bytes: bytes.len(),
        size: std::mem::size_of::<T>(),
    })?;
    Ok(v)
}

/// Every entry of `map` (named `name` in errors), decoded as (key, value).
pub(crate) fn decoded<M, K, V>(map: &M, name: &'static str) -> Result<Vec<(K, V)>, CollectError>
where
    M: MapCore,
    K: plain::Plain + Default,
    V: plain::Plain + Default,
{
    let mut out = Vec::new();
    walk_decoded(map, name, |k, v| {
        out.push((k, v));
        Ok(())
    })?;
    Ok(out)
}

/// Calls `each` with every entry of `map` (named `name` in errors), decoded as (key, value),
/// without collecting them first.
pub(crate) fn walk_decoded<M, K, V>(
    map: &M,
    name: &'static str,
    mut each: impl FnMut(K, V) -> Result<(), CollectError>,
) -> Result<(), CollectError>
where
    M: MapCore,
    K: plain::Plain + Default,
    V: plain::Plain + Default,
{
    walk(map, name, |kb, vb| {
        each(decode_entry(name, kb)?, decode_entry(name, vb)?)
    })
}

/// [`decode`], its error named after the map `name`.
fn decode_entry<T: plain::Plain + Default>(
    name: &'static str,
    bytes: &[u8],
) -> Result<T, CollectError> {
    decode(bytes).map_err(|e| CollectError::read(name, e))
}

/// Deletes `keys` (as the map's key bytes) from `map`; a key already gone is no error (a racing
/// BPF path may delete it). In batches (`BPF_MAP_DELETE_BATCH`): the agent deletes the entries
/// of a few thousand exited threads a second, one system call each before.
pub(crate) fn delete<M: MapCore>(
    map: &M,
    name: &'static str,
    keys: impl IntoIterator<Item = impl AsRef<[u8]>>,
) -> Result<(), CollectError> {
    let key_size = map.key_size() as usize;
    let bytes: Vec<u8> = keys.into_iter().flat_map(|k| k.as_ref().to_vec()).collect();
    let n = bytes.len() / key_size.max(1);
    let opts = batch_opts();
    let mut done = 0;
    while done < n {
        let mut count = (n - done) as u32;
        // SAFETY: `bytes` holds `n` keys of the map's key size; from key `done` on, `count` of
        // them; the kernel writes back how many it deleted into `count`. `opts` is initialised
        // with its own size.
        let ret = unsafe {
            libbpf_sys::bpf_map_delete_batch(
                map.as_fd().as_raw_fd(),
                bytes[done * key_size..].as_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        // The kernel stops at the first key it cannot delete, `count` keys after `done`.
        done += (count as usize).min(n - done);
        match if ret < 0 { -ret } else { 0 } {
            0 => break,
            libc::ENOENT => done += 1, // that key was gone already
            libc::EINTR => {}
            e => {
                return Err(CollectError::read(
                    name,
                    std::io::Error::from_raw_os_error(e),
                ))
            }
        }
    }
    Ok(())
}

/// Walks `map`, decoding each entry; `keep` sees each (key, value) and returns whether it stays;
/// those it lets go are deleted after the walk (by their bytes as read: a key struct's padding
/// is part of a hash map's key).
pub(crate) fn sweep<M, K, V>(
    map: &M,
    name: &'static str,
    mut keep: impl FnMut(&K, &V) -> bool,
) -> Result<(), CollectError>
where
    M: MapCore,
    K: plain::Plain + Default,
    V: plain::Plain + Default,
{
    let mut gone = Vec::new();
    walk(map, name, |kb, vb| {
        let (k, v): (K, V) = (decode_entry(name, kb)?, decode_entry(name, vb)?);
        if !keep(&k, &v) {
            gone.push(kb.to_vec());
        }
        Ok(())
    })?;
    delete(map, name, gone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::{MapFlags, MapHandle, MapType};

    /// One entry's key and value bytes.
    type Entry = (Vec<u8>, Vec<u8>);

    /// Every (key, value) of the hash map `map`, as bytes.
    fn entries<M: MapCore>(map: &M, name: &'static str) -> Result<Vec<Entry>, CollectError> {
        let mut out = Vec::new();
        walk(map, name, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            Ok(())
        })?;
        Ok(out)
    }

    /// Reproduces the short-walk defect: a hash map of a few thousand entries, whose buckets do not
    /// line up with the batch size, is read whole (libbpf-rs's iterator stopped at the first short
    /// batch and returned only part of it).
    #[test]
    #[ignore = "needs root and BPF"]
    fn reads_every_entry_of_a_large_hash_map() {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let map = MapHandle::create(MapType::Hash, Some("walk_test"), 4, 16, 8192, &opts)
            .expect("creating a BPF hash map (root?)");
        let n: u32 = 5000;
        for k in 0..n {
            let v = [k.to_ne_bytes(), k.to_ne_bytes(), [7; 4], [9; 4]].concat();
            map.update(&k.to_ne_bytes(), &v, MapFlags::ANY).unwrap();
        }
        let got = entries(&map, "walk_test").unwrap();
        let mut keys: Vec<u32> = got
            .iter()
            .map(|(k, v)| {
                let k = u32::from_ne_bytes(k[..4].try_into().unwrap());
                assert_eq!(v[..4], k.to_ne_bytes(), "the value read with its key");
                k
            })
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, (0..n).collect::<Vec<_>>(), "every key exactly once");
        // What libbpf-rs's own iterator returns for the same map, for the record.
        let theirs = map
            .lookup_batch(BATCH as u32, MapFlags::ANY, MapFlags::ANY)
            .unwrap()
            .count();
        eprintln!("libbpf-rs lookup_batch returned {theirs} of {n} entries");
    }

    #[test]
    #[ignore = "needs root and BPF"]
    fn reads_an_empty_map() {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let map = MapHandle::create(MapType::Hash, Some("walk_empty"), 8, 8, 64, &opts).unwrap();
        assert!(entries(&map, "walk_empty").unwrap().is_empty());
    }
}
