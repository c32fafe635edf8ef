//! The PIO helpers of the guide: `SCIFlush` and `SCIMemCpy` (both directions) on a map,
//! with the optional check of a sequence.

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
