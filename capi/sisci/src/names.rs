//! Host names to node ids: `SCIGetNodeIdByAdapterName` and `SCIGetNodeInfoByAdapterName`.
//!
//! The "adapter name" programs pass is a host name (a program reads it from the command
//! line or `gethostname`). Remora resolves it through the cluster file; this host's name
//! gives this host's nodes (see `remora_sisci::Sisci::nodes_of_host`). Each node is reached
//! through adapter `remora_sisci::ADAPTER`, of kind `REMORA_CARD_TYPE`.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::consts::*;
use crate::errors::{check_flags, run, ErrorOut, Fail, Out, Outcome};
use crate::library::sisci;
use crate::types::{dis_adapter_type_t, dis_nodeId_list_t, dis_virt_adapter_t, sci_error_t};
use crate::REMORA_CARD_TYPE;
use std::ffi::{c_char, c_uint, CStr};

/// How many node ids a list holds: one entry fewer than `dis_nodeId_list_t`, so that a 0
/// always ends it.
const LISTED: usize = DIS_MAX_NSCIS as usize;

/// The nodes of host `name`, at most [`LISTED`], lowest first.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string readable for the rest of the call.
unsafe fn nodes_named(name: *mut c_char) -> Outcome<Vec<u32>> {
    if name.is_null() {
        return Err(Fail(SCI_ERR_ILLEGAL_PARAMETER));
    }
    // SAFETY: non-NULL and, by this function's contract, a readable C string.
    let text = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| Fail(SCI_ERR_ILLEGAL_PARAMETER))?;
    let mut ids = sisci()?.nodes_of_host(text)?;
    ids.truncate(LISTED);
    Ok(ids)
}

/// The list as C holds it: the ids, then zeros.
fn id_list(ids: &[u32]) -> dis_nodeId_list_t {
    let mut list: dis_nodeId_list_t = [0; 5];
    list.iter_mut().zip(ids).for_each(|(slot, id)| *slot = *id);
    list
}

/// `SCIGetNodeIdByAdapterName`: the node ids of host `name` (resolved through the cluster
/// file; this host's name or `localhost` gives this host's nodes), lowest first, at most
/// `DIS_MAX_NSCIS` and ended by a 0, into `*node_id_list`; the adapter kind
/// (`REMORA_CARD_TYPE`, the `SCI_Q_ADAPTER_CARD_TYPE` answer) into `*adapter_type`, which
/// may be NULL.
///
/// # Errors
/// `SCI_ERR_NO_SUCH_NODEID` when no node belongs to the name (the list is then all 0);
/// `SCI_ERR_ILLEGAL_PARAMETER` for a NULL or empty name, one that is not UTF-8, a NULL
/// list or a malformed cluster file; `SCI_ERR_NOT_INITIALIZED` before `SCIInitialize`;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `node_id_list`, `adapter_type` and `error`
/// are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIGetNodeIdByAdapterName(
    name: *mut c_char,
    node_id_list: *mut dis_nodeId_list_t,
    adapter_type: *mut dis_virt_adapter_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        // SAFETY: `node_id_list` is NULL or writable (this function's contract).
        let list = unsafe { Out::new(node_id_list) }?;
        // SAFETY: `name` is NULL or a readable C string (this function's contract).
        let found = unsafe { nodes_named(name) };
        let ids = found.as_deref().unwrap_or(&[]);
        list.set(id_list(ids));
        if !adapter_type.is_null() {
            // SAFETY: `adapter_type` is non-NULL here, and writable (this function's contract).
            let kind = unsafe { Out::new(adapter_type) }?;
            kind.set(REMORA_CARD_TYPE);
        }
        found.map(|_| ())
    })
}

/// `SCIGetNodeInfoByAdapterName`: as `SCIGetNodeIdByAdapterName`, one entry per node:
/// `adapter_list[i]` (an array of `DIS_MAX_NSCIS`) is the adapter through which node
/// `(*node_id_list)[i]` is reached (`0`), `(*type_list)[i]` its kind (`REMORA_CARD_TYPE`);
/// entries past the last node are 0. `adapter_list` and `type_list` may be NULL.
///
/// # Errors
/// As `SCIGetNodeIdByAdapterName`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `adapter_list` is NULL or writable for
/// `DIS_MAX_NSCIS` entries; `node_id_list`, `type_list` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIGetNodeInfoByAdapterName(
    name: *mut c_char,
    adapter_list: *mut c_uint,
    node_id_list: *mut dis_nodeId_list_t,
    type_list: *mut dis_adapter_type_t,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        // SAFETY: `node_id_list` is NULL or writable (this function's contract).
        let list = unsafe { Out::new(node_id_list) }?;
        // SAFETY: `name` is NULL or a readable C string (this function's contract).
        let found = unsafe { nodes_named(name) };
        let ids = found.as_deref().unwrap_or(&[]);
        list.set(id_list(ids));
        let mut kinds: dis_adapter_type_t = [0; LISTED];
        kinds.iter_mut().take(ids.len()).for_each(|k| *k = REMORA_CARD_TYPE);
        if !type_list.is_null() {
            // SAFETY: `type_list` is non-NULL here, and writable (this function's contract).
            unsafe { Out::new(type_list) }?.set(kinds);
        }
        if !adapter_list.is_null() {
            // The adapter of every listed node, and of every empty entry, is adapter 0.
            let adapters: [c_uint; LISTED] = [remora_sisci::ADAPTER; LISTED];
            // SAFETY: `adapter_list` is non-NULL here and, by this function's contract,
            // points to `DIS_MAX_NSCIS` writable entries.
            unsafe { Out::new(adapter_list.cast::<[c_uint; LISTED]>()) }?.set(adapters);
        }
        found.map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_end_with_a_zero() {
        assert_eq!(id_list(&[4, 8]), [4, 8, 0, 0, 0]);
        assert_eq!(id_list(&[1, 2, 3, 4]), [1, 2, 3, 4, 0]);
    }
}
