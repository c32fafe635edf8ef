//! The PIO helpers of the guide: `SCIFlush` and `SCIMemCpy` (both directions) on a map,
//! with the optional check of a sequence, and the store routines `SetSciMemCopyFunction`
//! chooses between.

use crate::map::Map;
use crate::sequence::{Sequence, SequenceStatus};
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// `SCIFlush`: drain this CPU's store buffers (a full memory fence), and put the stores
/// made so far to maps of other hosts' segments on their way home: stores made later reach
/// each home after them (what a program storing data, flushing, then storing a flag needs).
pub fn flush() {
    std::sync::atomic::fence(Ordering::SeqCst);
    remora_client::dsm::send_all();
}

/// `SCIMemCpy`: store `data` into `map` at `offset`; then, when a sequence is given and
/// `error_check` is set (`SCI_FLAG_ERROR_CHECK`), check it.
///
/// # Errors
/// [`Error::OutOfRange`]; [`Error::IllegalOperation`] writing a read-only map;
/// [`Error::TransferFailed`] when the checked sequence reports an error.
pub fn mem_copy(
    seq: Option<&Sequence>,
    data: &[u8],
    map: &Map,
    offset: usize,
    error_check: bool,
) -> Result<()> {
    map.write(offset, data)?;
    std::sync::atomic::fence(Ordering::Release);
    checked(seq, error_check)
}

/// `SCIMemCpy` with `SCI_FLAG_BLOCK_READ`: load from `map` at `offset` into `out`; then
/// check the sequence as [`mem_copy`] does.
///
/// # Errors
/// [`Error::OutOfRange`]; [`Error::TransferFailed`] when the checked sequence reports an
/// error.
pub fn mem_read(
    seq: Option<&Sequence>,
    out: &mut [u8],
    map: &Map,
    offset: usize,
    error_check: bool,
) -> Result<()> {
    map.read(offset, out)?;
    checked(seq, error_check)
}

fn checked(seq: Option<&Sequence>, error_check: bool) -> Result<()> {
    if let (Some(s), true) = (seq, error_check) {
        if s.check(false, false)? != SequenceStatus::Ok {
            return Err(Error::TransferFailed);
        }
    }
    Ok(())
}

/// How the store direction of `SCIMemCpy` moves bytes into a map (the routine that
/// `SetSciMemCopyFunction` selects). Each gives the same bytes; they differ in the stores
/// the memory sees and in when the copy counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CopyRoutine {
    /// One block copy of the whole range (what `memcpy` does), then a release fence.
    #[default]
    Memcpy,
    /// Aligned 8-byte stores in address order (bytes only at an unaligned head or tail),
    /// as a programmed-I/O store loop does: an aligned 8-byte field is never torn.
    Words64,
    /// 64-byte pieces (aligned to the map's cache lines), each followed by a full fence,
    /// as a copy through a write-combining map that drains its buffer line by line.
    CacheLines,
    /// [`CopyRoutine::Memcpy`], then a flush of the map: the call returns once the bytes
    /// are in the segment's memory (for another host's segment: at home).
    Flushed,
}

/// Store `data` into `map` at `offset` the way `routine` does (`SCIMemCpy`, store
/// direction, after `SetSciMemCopyFunction`).
///
/// # Errors
/// [`Error::OutOfRange`]; [`Error::IllegalOperation`] writing a read-only map;
/// [`Error::TransferFailed`] when [`CopyRoutine::Flushed`] cannot reach the memory.
pub fn store_with(routine: CopyRoutine, data: &[u8], map: &Map, offset: usize) -> Result<()> {
    if offset.checked_add(data.len()).is_none_or(|end| end > map.size()) {
        return Err(Error::OutOfRange);
    }
    match routine {
        CopyRoutine::Memcpy => map.write(offset, data)?,
        CopyRoutine::Words64 => {
            let base = map.as_ptr() as usize;
            let head = ((8 - (base.wrapping_add(offset) % 8)) % 8).min(data.len());
            map.write(offset, &data[..head])?;
            let words = data[head..].chunks_exact(8);
            let tail = words.remainder();
            let mut at = offset + head;
            for w in words {
                let value = u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]));
                map.with_atomic(at, |a| a.store(value, Ordering::Relaxed))?;
                at += 8;
            }
            map.write(at, tail)?;
        }
        CopyRoutine::CacheLines => {
            const LINE: usize = 64;
            let base = map.as_ptr() as usize;
            let mut at = offset;
            let mut rest = data;
            while !rest.is_empty() {
                let to_line = LINE - (base.wrapping_add(at) % LINE);
                let (piece, more) = rest.split_at(to_line.min(rest.len()));
                map.write(at, piece)?;
                std::sync::atomic::fence(Ordering::SeqCst);
                at += piece.len();
                rest = more;
            }
        }
        CopyRoutine::Flushed => {
            map.write(offset, data)?;
            if !map.flush() {
                return Err(Error::TransferFailed);
            }
        }
    }
    std::sync::atomic::fence(Ordering::Release);
    Ok(())
}
