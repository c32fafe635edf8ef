//! Library initialisation, descriptors, node ids, probing and the string helpers.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use crate::consts::*;
use crate::errors::{check_flags, error_string, run, ErrorOut, Fail, Out, Outcome};
use crate::handles;
use crate::types::{sci_desc_t, sci_error_t};
use remora_sisci::{Descriptor, Sisci};
use std::ffi::{c_char, c_int, c_uint};
use std::sync::Mutex;

/// The library-wide state `SCIInitialize` creates.
#[derive(Debug)]
struct Library {
    /// The initialised library, while `users > 0`.
    sci: Option<Sisci>,
    /// `SCIInitialize` calls not yet matched by `SCITerminate`.
    users: usize,
}

static LIBRARY: Mutex<Library> = Mutex::new(Library { sci: None, users: 0 });

fn library() -> std::sync::MutexGuard<'static, Library> {
    LIBRARY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The initialised library.
///
/// # Errors
/// `SCI_ERR_NOT_INITIALIZED` before `SCIInitialize` (or after the last `SCITerminate`).
pub(crate) fn sisci() -> Outcome<Sisci> {
    library().sci.clone().ok_or(Fail(SCI_ERR_NOT_INITIALIZED))
}

static AT_EXIT: std::sync::Once = std::sync::Once::new();

extern "C" {
    fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
}

/// Run at process exit: stores made through maps of other hosts' segments reach their home
/// even when the program exits without unmapping. Never unwinds into C.
extern "C" fn flush_at_exit() {
    let _ = std::panic::catch_unwind(|| remora_client::dsm::flush_all(std::time::Duration::from_secs(2)));
}

/// `SCIInitialize`: read the node and runtime directory from the environment
/// (`REMORA_NODE`, `REMORA_RUNTIME_DIR`, …). May be called several times; each call needs
/// its own `SCITerminate`.
///
/// # Errors
/// `SCI_ERR_ILLEGAL_FLAG` for any flag; `SCI_ERR_ILLEGAL_PARAMETER` when the environment
/// is malformed; `SCI_ERR_SYSTEM` on a panic.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIInitialize(flags: c_uint, error: *mut sci_error_t) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        let mut lib = library();
        if lib.sci.is_none() {
            lib.sci = Some(Sisci::initialize()?);
        }
        lib.users += 1;
        AT_EXIT.call_once(|| {
            // SAFETY: atexit(3) only stores the function pointer; `flush_at_exit` is an
            // `extern "C"` function of this library, which stays loaded until exit.
            unsafe {
                atexit(flush_at_exit);
            }
        });
        Ok(())
    })
}

/// `SCITerminate`: undo one `SCIInitialize`; the last one drops the library state.
/// Descriptors and other handles still open stay valid until they are released.
///
/// # Errors
/// None reported (no error argument); an unmatched call does nothing.
#[no_mangle]
pub extern "C-unwind" fn SCITerminate() {
    crate::errors::run_quiet((), || {
        // Stores into maps of other hosts' segments go home now, not a flush interval later.
        remora_client::dsm::flush_all(std::time::Duration::from_secs(2));
        let mut lib = library();
        lib.users = lib.users.saturating_sub(1);
        if lib.users == 0 {
            lib.sci = None;
        }
        Ok(())
    })
}

/// `SCIOpen`: open a virtual device (a session with the node daemon, which is started if
/// none runs) and store its handle in `*sd`.
///
/// # Errors
/// `SCI_ERR_NOT_INITIALIZED`; `SCI_ERR_ILLEGAL_PARAMETER` for a NULL `sd`;
/// `SCI_ERR_ILLEGAL_FLAG` for flags other than `SCI_FLAG_THREAD_SAFE` (descriptors are
/// always thread-safe); `SCI_ERR_SYSTEM` when no daemon runs or could be started.
///
/// # Safety
/// `sd` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIOpen(sd: *mut sci_desc_t, flags: c_uint, error: *mut sci_error_t) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let sci = sisci()?;
        check_flags(flags, SCI_FLAG_THREAD_SAFE, 0)?;
        // SAFETY: `sd` is NULL or writable (this function's contract).
        let out = unsafe { Out::new(sd) }?;
        let desc = Descriptor::open(&sci)?;
        out.set(handles::handle(handles::insert(desc)?));
        Ok(())
    })
}

/// `SCIClose`: close a descriptor; its handle becomes invalid.
///
/// # Errors
/// `SCI_ERR_BUSY` only when objects made through it stay held (a transfer in flight) 2 s after
/// they were torn down;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a NULL, stale or wrong-kind handle;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIClose(sd: sci_desc_t, flags: c_uint, error: *mut sci_error_t) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        check_flags(flags, 0, 0)?;
        let key = handles::key(sd);
        let desc: Descriptor = handles::get(key)?;
        // Dolphin's library closes a descriptor with segments, maps, queues or interrupts
        // still open by tearing them down (programs rely on it): sequences and maps first
        // (their drop order follows the dependencies), then the rest.
        if desc.is_busy() {
            let children = handles::take_children(&desc);
            drop(children);
            let t = std::time::Instant::now();
            // A transfer in flight or a callback running holds its object a moment longer.
            while desc.is_busy() && t.elapsed() < std::time::Duration::from_secs(2) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        desc.close()?;
        handles::remove(key);
        Ok(())
    })
}

/// `SCIGetErrorString`: a static, NUL-terminated description of `error`
/// ("Unknown error" for values that are no `SCI_ERR_*` code). Never NULL.
///
/// # Errors
/// None reported (no error argument).
#[no_mangle]
pub extern "C-unwind" fn SCIGetErrorString(error: sci_error_t) -> *const c_char {
    crate::errors::run_quiet(crate::errors::UNKNOWN_ERROR.as_ptr(), || Ok(error_string(error)))
}

/// `SCIGetLocalNodeId`: the node id of adapter `adapter_no` (the node of this process).
///
/// # Errors
/// `SCI_ERR_NOT_INITIALIZED`; `SCI_ERR_NO_SUCH_ADAPTERNO` for an adapter other than 0;
/// `SCI_ERR_ILLEGAL_PARAMETER` for a NULL `node_id`; `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `node_id` and `error` are NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIGetLocalNodeId(
    adapter_no: c_uint,
    node_id: *mut c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, (), || {
        let sci = sisci()?;
        check_flags(flags, 0, 0)?;
        if adapter_no != remora_sisci::ADAPTER {
            return Err(remora_sisci::Error::NoSuchAdapter.into());
        }
        // SAFETY: `node_id` is NULL or writable (this function's contract).
        unsafe { Out::new(node_id) }?.set(sci.local_node_id());
        Ok(())
    })
}

/// `SCIProbeNode`: 1 when node `node_id` answers, else 0 with the reason in `*error`.
///
/// # Errors
/// `SCI_ERR_NO_SUCH_NODEID` when the node is unknown or silent;
/// `SCI_ERR_NO_SUCH_ADAPTERNO`; `SCI_ERR_ILLEGAL_PARAMETER` for a bad descriptor;
/// `SCI_ERR_ILLEGAL_FLAG` for any flag.
///
/// # Safety
/// `error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn SCIProbeNode(
    sd: sci_desc_t,
    local_adapter_no: c_uint,
    node_id: c_uint,
    flags: c_uint,
    error: *mut sci_error_t,
) -> c_int {
    // SAFETY: `error` is NULL or writable (this function's contract).
    let status = unsafe { ErrorOut::new(error) };
    run(status, 0, || {
        check_flags(flags, 0, 0)?;
        let desc: Descriptor = handles::get(handles::key(sd))?;
        match desc.probe_node(local_adapter_no, node_id)? {
            true => Ok(1),
            false => Err(remora_sisci::Error::NoSuchNode.into()),
        }
    })
}

/// `SCIGetAdapterTypeString`: the printable name of an adapter type. Remora has one kind
/// of adapter ([`crate::REMORA_CARD_TYPE`]), so every value names it.
///
/// # Errors
/// None reported (no error argument).
#[no_mangle]
pub extern "C-unwind" fn SCIGetAdapterTypeString(card_type: c_uint) -> *const c_char {
    let _ = card_type;
    crate::errors::run_quiet(c"".as_ptr(), || Ok(c"Remora software adapter".as_ptr()))
}

/// `SCIGetAdapterFamilyString`: the printable name of an adapter family; Remora's adapters
/// form one family.
///
/// # Errors
/// None reported (no error argument).
#[no_mangle]
pub extern "C-unwind" fn SCIGetAdapterFamilyString(family: c_uint) -> *const c_char {
    let _ = family;
    crate::errors::run_quiet(c"".as_ptr(), || Ok(c"Remora".as_ptr()))
}
