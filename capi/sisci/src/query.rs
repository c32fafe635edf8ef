//! `SCIQuery`: the answers about the library, the adapter, the system, segments, maps
//! and DMA.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::adapter_facts::{adapter_fact, system_fact};
use crate::consts::*;
use crate::errors::{check_flags, run, ErrorOut, Fail, Outcome};
use crate::handles::{self, key};
use crate::library::sisci;
use crate::types::sci_error_t;
use remora_sisci::{AdapterInfo, LocalSegment, Map, RemoteSegment};
use std::ffi::{c_uint, c_void};

/// The `SCI_Q_ADAPTER_CARD_TYPE` answer: Remora's software adapter (a Remora-chosen
/// value; `SCIGetAdapterTypeString` names it).
pub const REMORA_CARD_TYPE: u32 = 0x5244;

/// Below this many bytes a plain store loop (PIO, `SCIMemCpy`) beats a round trip to the
/// daemon's DMA engine: the `SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE` answer.
const SUGGESTED_MIN_DMA_SIZE: u32 = 64 * 1024;

/// The `SCI_Q_ADAPTER_SUGGESTED_MIN_BLOCK_SIZE` answer: one page. A block transfer
/// (`SCITransferBlock`) between maps of another host's segment moves whole pages through
/// the DSM pager, so a smaller block costs what a page does; between maps of this host's
/// memory it is a plain copy plus two handle look-ups, which a page amortises.
fn suggested_min_block_size() -> u32 {
    u32::try_from(remora_sys::page_size()).unwrap_or(4096)
}

/// The most entries a DMA queue (and so one vector transfer) may have.
const DMA_MAX_QUEUE_ENTRIES: u32 = remora_sys::dma::MAX_ENTRIES;

/// The synthetic global address of segment `id` of `node` (`SCI_Q_*_SEGMENT_IOADDR`).
///
/// Remora has no bus addresses; it answers with a value that names the segment across the
/// cluster, `(node << 32) | id`, so programs that print or compare I/O addresses work.
pub fn segment_ioaddr(node: u32, id: u32) -> sci_ioaddr_t {
    (u64::from(node) << 32) | u64::from(id)
}

/// The `T` a query's `data` pointer points to.
///
/// # Safety
/// `data` is NULL or points to a `T` that is readable and writable for the rest of the
/// call and not accessed by anyone else meanwhile.
unsafe fn arg<'a, T>(data: *mut c_void) -> Outcome<&'a mut T> {
    let p = data.cast::<T>();
    if p.is_null() || !p.is_aligned() {
        return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
    }
    // SAFETY: non-NULL and aligned; the caller guarantees a valid, unshared `T`.
    Ok(unsafe { &mut *p })
}

/// Store `value` as the `unsigned int` answer at `data`.
///
/// # Safety
/// `data` is NULL or points to a writable `unsigned int`.
unsafe fn answer_uint(data: *mut c_void, value: u32) -> Outcome<()> {
    // SAFETY: forwarded from this function's contract.
    *unsafe { arg::<c_uint>(data) }? = value;
    Ok(())
}

/// Copy `text` into the caller's string buffer, truncated to fit, NUL-terminated.
fn answer_string(q: &mut sci_query_string_t, text: &str) -> Outcome<()> {
    if q.str.is_null() || q.length == 0 {
        return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
    }
    let room = q.length as usize - 1;
    let n = text.len().min(room);
    // SAFETY: the caller of SCIQuery guarantees `str` points to `length` writable bytes;
    // we write `n + 1 <= length` of them, from a distinct Rust string.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), q.str.cast::<u8>(), n);
        q.str.cast::<u8>().add(n).write(0);
    }
    Ok(())
}

/// The `SCI_Q_ADAPTER` answer for `sub` on link `port`.
fn adapter_answer(info: &AdapterInfo, sub: u32, port: u32) -> Outcome<u32> {
    let link = |v: u32| {
        if port < info.number_of_links {
            Ok(v)
        } else {
            Err(Fail(SCI_ERR_ILLEGAL_PARAMETER))
        }
    };
    Ok(match sub {
        SCI_Q_ADAPTER_NODEID => info.node_id,
        SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT => info.dma_size_alignment,
        SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT => info.dma_offset_alignment,
        SCI_Q_ADAPTER_DMA_MTU => info.dma_mtu,
        SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE => SUGGESTED_MIN_DMA_SIZE,
        SCI_Q_ADAPTER_SUGGESTED_MIN_BLOCK_SIZE => suggested_min_block_size(),
        SCI_Q_ADAPTER_SERIAL_NUMBER => 0,
        SCI_Q_ADAPTER_CARD_TYPE => REMORA_CARD_TYPE,
        SCI_Q_ADAPTER_CONFIGURED => u32::from(info.configured),
        SCI_Q_ADAPTER_NUMBER | SCI_Q_ADAPTER_INSTANCE_NUMBER => remora_sisci::ADAPTER,
        SCI_Q_ADAPTER_FIRMWARE_OK => 1,
        SCI_Q_ADAPTER_CONNECTED_TO_SWITCH => 0,
        SCI_Q_ADAPTER_MCAST_MAX_GROUPS => remora_sisci::MULTICAST_GROUPS,
        SCI_Q_ADAPTER_NUMBER_OF_LINKS => info.number_of_links,
        SCI_Q_ADAPTER_LINK_OPERATIONAL | SCI_Q_ADAPTER_HW_LINK_STATUS_IS_OK => {
            link(u32::from(info.link_operational))?
        }
        SCI_Q_ADAPTER_LINK_ENABLED | SCI_Q_ADAPTER_LINK_CABLE_INSERTED => link(1)?,
        _ => return Err(Fail(SCI_ERR_ILLEGAL_QUERY)),
    })
}

/// `SCIQuery`: answer query `command` about the object `data` points to.
///
/// * `SCI_Q_VENDORID`, `SCI_Q_API`, `SCI_Q_SISCI_DRIVER_VERSION`: a
///   `sci_query_string_t`, filled with a NUL-terminated (possibly truncated) string.
/// * `SCI_Q_ADAPTER` (`sci_query_adapter_t`, the answer an `unsigned int` at `data`):
///   `NODEID`, `DMA_SIZE_ALIGNMENT`, `DMA_OFFSET_ALIGNMENT`, `DMA_MTU`,
///   `SUGGESTED_MIN_DMA_SIZE`, `SUGGESTED_MIN_BLOCK_SIZE` (the page size), `SERIAL_NUMBER` (0), `CARD_TYPE` ([`REMORA_CARD_TYPE`]),
///   `CONFIGURED`, `NUMBER`, `INSTANCE_NUMBER`, `FIRMWARE_OK`, `CONNECTED_TO_SWITCH` (0),
///   `MCAST_MAX_GROUPS` (6: multicast is offered, groups 0–5), `NUMBER_OF_LINKS`, and per link (`portNo` below the number
///   of links) `LINK_OPERATIONAL`, `HW_LINK_STATUS_IS_OK`, `LINK_ENABLED`,
///   `LINK_CABLE_INSERTED`; the hardware sub-commands of the reference as
///   `adapter_facts::adapter_fact` answers them (streams, switch, address translation,
///   SCI-era node ids, link uptime/downtime/partner port; `SCI_ERR_NOT_SUPPORTED` for
///   frequencies, `BDF`, `LINK_WIDTH`, `LINK_SPEED`).
/// * `SCI_Q_SYSTEM` (`sci_query_system_t`): `CPU_CACHE_LINE_SIZE`, `WRITE_POSTING_ENABLED`
///   and `WRITE_COMBINING_ENABLED` (1); `HOSTBRIDGE` is `SCI_ERR_NOT_SUPPORTED`.
/// * `SCI_Q_LOCAL_SEGMENT`/`SCI_Q_REMOTE_SEGMENT` with `..._IOADDR`: the synthetic
///   address `(node << 32) | segment id` ([`segment_ioaddr`]) in `data.ioaddr`.
/// * `SCI_Q_MAP` with `MAPPED_TO_LOCAL_TARGET` or `QUERY_REMOTE_MAPPED_TO_LOCAL_TARGET`:
///   1 when the map reaches memory of this host, 0 for a map of another host's segment.
/// * `SCI_Q_DMA` (`sci_query_dma_t`, DMA kind in `flags`; every kind is the node's one
///   engine): `AVAILABLE` is 1; `CAPABILITIES` fills a `sci_dma_capabilities_t`
///   (`remora_sisci::DMA_CHANNELS` channels, transfers up to 4 GiB - 1 per element, vectors as long as the queue, local
///   memory to remote and back, byte alignment).
///
/// # Errors
/// `SCI_ERR_ILLEGAL_QUERY` for unknown commands and sub-commands (including one given
/// with the wrong command); `SCI_ERR_ILLEGAL_PARAMETER` for NULL `data`, a NULL answer
/// pointer, a zero-length string buffer, a bad handle or a `portNo` past the last link;
/// `SCI_ERR_NOT_INITIALIZED` for the library-wide commands before `SCIInitialize`;
/// `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_NOT_SUPPORTED` for hardware facts (physical and
/// kernel addresses, map bus addresses, `SCI_Q_DEVICE`, the card-only adapter and system
/// sub-commands above); `SCI_ERR_ILLEGAL_FLAG` for flags
/// (other than the DMA kinds with `SCI_Q_DMA`).
///
/// # Safety
/// `error` is NULL or writable; `data` is NULL or points to the structure `command`
/// names, with the pointers inside it valid as that structure describes.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIQuery(
    command: c_uint,
    data: *mut c_void,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        // SAFETY: `data` is NULL or points to the structure `command` names.
        unsafe { query(command, data, flags) }
    })
}

/// The body of `SCIQuery`.
///
/// # Safety
/// As `SCIQuery` (for `data`).
unsafe fn query(command: u32, data: *mut c_void, flags: u32) -> Outcome<()> {
    let dma_kinds = SCI_FLAG_DMA_ADAPTER | SCI_FLAG_DMA_GLOBAL | SCI_FLAG_DMA_SYSDMA;
    check_flags(flags, if command == SCI_Q_DMA { dma_kinds } else { 0 }, 0)?;
    match command {
        SCI_Q_VENDORID | SCI_Q_API | SCI_Q_SISCI_DRIVER_VERSION => {
            let sci = sisci()?;
            // SAFETY: `data` points to a sci_query_string_t (this function's contract).
            let q = unsafe { arg::<sci_query_string_t>(data) }?;
            let text = match command {
                SCI_Q_VENDORID => sci.vendor_string().to_string(),
                SCI_Q_API => sci.api_string(),
                _ => format!("Remora {}", env!("CARGO_PKG_VERSION")),
            };
            answer_string(q, &text)
        }
        SCI_Q_ADAPTER => {
            let sci = sisci()?;
            // SAFETY: `data` points to a sci_query_adapter_t (this function's contract).
            let q = unsafe { arg::<sci_query_adapter_t>(data) }?;
            let info = sci.adapter_info(q.localAdapterNo)?;
            let value = match adapter_answer(&info, q.subcommand, q.portNo) {
                Err(Fail(SCI_ERR_ILLEGAL_QUERY)) => adapter_fact(&sci, &info, q.subcommand, q.portNo)?,
                other => other?,
            };
            // SAFETY: `q.data` points to the unsigned int answer (this function's contract).
            unsafe { answer_uint(q.data, value) }
        }
        SCI_Q_SYSTEM => {
            let sci = sisci()?;
            // SAFETY: `data` points to a sci_query_system_t (this function's contract).
            let q = unsafe { arg::<sci_query_system_t>(data) }?;
            let value = match q.subcommand {
                SCI_Q_SYSTEM_CPU_CACHE_LINE_SIZE => sci.cache_line_size(),
                other => system_fact(other)?,
            };
            // SAFETY: `q.data` points to the unsigned int answer (this function's contract).
            unsafe { answer_uint(q.data, value) }
        }
        SCI_Q_LOCAL_SEGMENT => {
            // SAFETY: `data` points to a sci_query_local_segment_t (this function's contract).
            let q = unsafe { arg::<sci_query_local_segment_t>(data) }?;
            match q.subcommand {
                SCI_Q_LOCAL_SEGMENT_IOADDR => {}
                SCI_Q_LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR | SCI_Q_LOCAL_SEGMENT_PHYS_ADDR => {
                    return Err(Fail(SCI_ERR_NOT_SUPPORTED))
                }
                _ => return Err(Fail(SCI_ERR_ILLEGAL_QUERY)),
            }
            let seg: LocalSegment = handles::get(key(q.segment))?;
            q.data.ioaddr = segment_ioaddr(seg.node(), seg.id());
            Ok(())
        }
        SCI_Q_REMOTE_SEGMENT => {
            // SAFETY: `data` points to a sci_query_remote_segment_t (this function's contract).
            let q = unsafe { arg::<sci_query_remote_segment_t>(data) }?;
            if q.subcommand != SCI_Q_REMOTE_SEGMENT_IOADDR {
                return Err(Fail(SCI_ERR_ILLEGAL_QUERY));
            }
            let seg: RemoteSegment = handles::get(key(q.segment))?;
            q.data.ioaddr = segment_ioaddr(seg.node(), seg.id());
            Ok(())
        }
        SCI_Q_MAP => {
            // SAFETY: `data` points to a sci_query_map_t (this function's contract).
            let q = unsafe { arg::<sci_query_map_t>(data) }?;
            match q.subcommand {
                SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET | SCI_Q_MAP_QUERY_REMOTE_MAPPED_TO_LOCAL_TARGET => {}
                SCI_Q_MAP_IOADDR | SCI_Q_MAP_PHYS_ADDR => return Err(Fail(SCI_ERR_NOT_SUPPORTED)),
                _ => return Err(Fail(SCI_ERR_ILLEGAL_QUERY)),
            }
            let map: Map = handles::get(key(q.map))?;
            q.data = u64::from(map.is_local_target());
            Ok(())
        }
        SCI_Q_DMA => {
            // SAFETY: `data` points to a sci_query_dma_t (this function's contract).
            let q = unsafe { arg::<sci_query_dma_t>(data) }?;
            if q.localAdapterNo != remora_sisci::ADAPTER {
                return Err(remora_sisci::Error::NoSuchAdapter.into());
            }
            match q.subcommand {
                // SAFETY: `q.data` points to the unsigned int answer (this function's contract).
                SCI_Q_DMA_AVAILABLE => unsafe { answer_uint(q.data, 1) },
                SCI_Q_DMA_CAPABILITIES => {
                    let caps = q.data.cast::<sci_dma_capabilities_t>();
                    if caps.is_null() || !caps.is_aligned() {
                        return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
                    }
                    let answer = sci_dma_capabilities_t {
                        num_channels: remora_sisci::DMA_CHANNELS,
                        max_transfer_size: u32::MAX,
                        max_vector_length: DMA_MAX_QUEUE_ENTRIES,
                        support_mem2io: 1,
                        support_io2mem: 1,
                        support_io2io: 0,
                        min_align_bytes: 1,
                        suggested_align_bytes: 64,
                    };
                    // SAFETY: non-NULL and aligned; `q.data` points to a writable
                    // sci_dma_capabilities_t for this sub-command (this function's contract).
                    unsafe { caps.write(answer) };
                    Ok(())
                }
                _ => Err(Fail(SCI_ERR_ILLEGAL_QUERY)),
            }
        }
        SCI_Q_DEVICE => Err(Fail(SCI_ERR_NOT_SUPPORTED)),
        _ => Err(Fail(SCI_ERR_ILLEGAL_QUERY)),
    }
}
