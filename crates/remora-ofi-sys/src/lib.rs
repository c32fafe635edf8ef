//! Remora's bindings to libfabric (OFI), in the syscall and mapping layer.
//!
//! Most `fi_*` calls are static inline functions of libfabric's headers, so they are
//! reached through a small C shim (`shim.c`, compiled by `build.rs` against the
//! `pkg-config` flags of `libfabric`). On top of it, safe types:
//!
//! * [`Endpoint`]: one reliable-datagram (`FI_EP_RDM`) endpoint of a provider, with its
//!   fabric, domain, address vector and completion queue; messages ([`Endpoint::send`],
//!   receive buffers it owns), RMA ([`Endpoint::write`], [`Endpoint::read`]) and the
//!   completions, read with a blocking wait that does not spin
//!   ([`Endpoint::completions`]: `fi_trywait`, then `poll` on the queue's wait fd).
//! * [`Region`]: a registered range of a [`Mapping`] (`fi_mr_reg`), closed when dropped.
//!
//! Every buffer an operation uses is kept alive by the endpoint until its completion has
//! been read, or else until the endpoint is closed, so no safe call can free memory, or
//! close a registration, the provider still uses. A registration outlives its endpoint if
//! something else holds it: the provider's domain is closed after the last one
//! ([`Endpoint::registrations`] counts them).
//!
//! An operation whose completion never comes (its peer's address removed under it, say)
//! holds its registration until the endpoint closes: a leak, bounded and counted
//! ([`Endpoint::stranded`]; why it cannot be released earlier: `keep.rs`).
//!
//! When `pkg-config` did not find libfabric at build time the crate still builds and every
//! call answers [`Error::not_installed`].

#![allow(unsafe_code)]

mod ffi;
mod keep;
mod recv;
mod region;

use region::Core;
pub use region::{Region, Registrations};

use remora_sys::Mapping;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A libfabric call that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The (positive) `FI_E*` or errno code; 0 when there is none.
    pub code: i32,
    /// What failed, with libfabric's words for it.
    pub what: String,
}

/// `FI_EAGAIN`, as [`Error::code`] holds it: the queue is full for now.
pub const EAGAIN: i32 = 11;

impl Error {
    /// Whether the operation found its queue full (`FI_EAGAIN`): it may succeed once
    /// completions are read (which drives the provider's progress); any other error is a
    /// failure.
    pub fn is_full(&self) -> bool {
        self.code == EAGAIN
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The answer of every call of a build without libfabric.
    pub fn not_installed() -> Error {
        Error {
            code: 38,
            what: "libfabric is not installed (apt-get install libfabric-dev, then rebuild)".into(),
        }
    }

    fn from_rc(call: &str, rc: i32) -> Error {
        Error { code: rc.abs(), what: format!("{call}: {} ({rc})", strerror(rc)) }
    }
}

/// libfabric's words for error code `rc`.
pub fn strerror(rc: i32) -> String {
    if !installed() {
        return format!("error {rc}");
    }
    // SAFETY: fi_strerror returns a pointer to a static NUL-terminated string for any code.
    unsafe { CStr::from_ptr(ffi::rofi_strerror(rc)) }.to_string_lossy().into_owned()
}

/// Whether libfabric can be used: this build has the shim, and the library loads.
pub fn installed() -> bool {
    load().is_ok()
}

/// Load libfabric (once; `dlopen`, so that processes that never use it do not carry it, and
/// with every signal's disposition put back as it was: see `shim.c`).
fn load() -> Result<(), Error> {
    if !ffi::INSTALLED {
        return Err(Error::not_installed());
    }
    let mut err = [0u8; 256];
    // SAFETY: the buffer is valid for its length; the shim writes a NUL-terminated message.
    let rc = unsafe { ffi::rofi_load(err.as_mut_ptr().cast(), err.len()) };
    if rc == 0 {
        return Ok(());
    }
    let why = CStr::from_bytes_until_nul(&err).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
    Err(Error { code: 38, what: format!("libfabric is not installed ({why}; apt-get install libfabric1)") })
}

/// The providers libfabric offers here that can carry an RDM endpoint with messages and
/// RMA (`fi_getinfo`), each named once (`tcp;ofi_rxm`, `shm`, `verbs;ofi_rxm`, ...).
///
/// # Errors
/// [`Error::not_installed`]; `fi_getinfo`'s failure.
pub fn providers() -> Result<Vec<String>, Error> {
    load()?;
    let mut buf = vec![0u8; 8192];
    // SAFETY: the buffer is valid for its length; the shim writes at most that many bytes.
    let n = unsafe { ffi::rofi_providers(buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        if n == -61 {
            return Ok(Vec::new()); // FI_ENODATA: none fits
        }
        return Err(Error::from_rc("fi_getinfo", n));
    }
    let text = String::from_utf8_lossy(&buf[..n as usize]).into_owned();
    Ok(text.lines().map(str::to_string).collect())
}

/// What a [`Region`] lets peers do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Local use only: the source of this endpoint's writes, the destination of its reads.
    Local,
    /// Peers may read it (`fi_read`).
    RemoteRead,
    /// Peers may write it (`fi_write`).
    RemoteWrite,
}

/// Where an RMA goes in a peer: its address handle, the address of the first byte (its
/// [`Region::remote_addr`]) and the region's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// The peer ([`Endpoint::insert`]).
    pub dest: u64,
    /// The address of the first byte.
    pub addr: u64,
    /// The region's key ([`Region::key`]).
    pub key: u64,
}

/// One completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The id the operation was posted with (for receives, [`Completion::slot`] says
    /// which buffer).
    pub id: u64,
    /// Bytes received (receives).
    pub len: usize,
    /// A receive buffer's slot, for [`Endpoint::received`].
    pub slot: Option<usize>,
    /// The operation failed.
    pub error: Option<Error>,
}

/// Ids at and above this are receive buffers (slot = id - RECV_ID).
const RECV_ID: u64 = 1 << 62;

/// A raw pointer the provider writes into, owned by the endpoint.
struct RecvBuf(*mut u8, usize, Option<Region>);

/// One RDM endpoint of one provider. Thread-safe (the domain is opened `FI_THREAD_SAFE`).
pub struct Endpoint {
    raw: *mut ffi::Rofi,
    /// The provider's objects under `raw`, held by every registration too.
    core: Arc<Core>,
    mr_mode: i32,
    provider: String,
    keep: keep::Keep,
    recv: Mutex<Vec<RecvBuf>>,
    /// Receive buffers whose posting failed: posted again at each read of completions, so
    /// that the endpoint never runs out of them.
    unposted: Mutex<Vec<usize>>,
    recv_size: usize,
    closed: AtomicBool,
    idle: std::sync::atomic::AtomicU32,
    next_id: AtomicU64,
    wait_fd: Option<std::os::fd::RawFd>,
}

// SAFETY: the shim's objects are opened FI_THREAD_SAFE, so every call may come from any
// thread; the Rust state beside them is behind mutexes and atomics.
unsafe impl Send for Endpoint {}
// SAFETY: as for Send.
unsafe impl Sync for Endpoint {}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("provider", &self.provider).finish()
    }
}

impl Endpoint {
    /// Open an RDM endpoint of `provider` (`"tcp;ofi_rxm"`, `"shm"`, ...), bound to
    /// `node`'s address where the provider takes one, and post `recvs` receive buffers of
    /// `recv_size` bytes each.
    ///
    /// # Errors
    /// [`Error::not_installed`]; the provider is missing or cannot open an endpoint with
    /// messages and RMA, or a receive buffer cannot be posted (the failing call is named;
    /// a full queue is not a failure: that buffer is posted at the next read of
    /// completions, [`Endpoint::unposted`]).
    pub fn open(
        provider: &str,
        node: Option<&str>,
        recvs: usize,
        recv_size: usize,
    ) -> Result<Arc<Endpoint>, Error> {
        load()?;
        let prov =
            CString::new(provider).map_err(|_| Error { code: 22, what: "provider name has a NUL".into() })?;
        let node = node
            .map(CString::new)
            .transpose()
            .map_err(|_| Error { code: 22, what: "node has a NUL".into() })?;
        let mut raw = std::ptr::null_mut();
        let mut err = vec![0u8; 256];
        // SAFETY: the strings are NUL-terminated and live across the call; `raw` and `err`
        // are valid for writes of their sizes.
        let rc = unsafe {
            ffi::rofi_open(
                prov.as_ptr(),
                node.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
                &mut raw,
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        if rc != 0 || raw.is_null() {
            let msg = CStr::from_bytes_until_nul(&err)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            let what = match msg.is_empty() {
                true => format!("provider {provider}: {}", strerror(rc)),
                false => format!("provider {provider}: {msg}"),
            };
            return Err(Error { code: rc.abs(), what });
        }
        // SAFETY: `raw` is a live endpoint from rofi_open.
        let (mr_mode, fd, name) = unsafe {
            (ffi::rofi_mr_mode(raw), ffi::rofi_wait_fd(raw), CStr::from_ptr(ffi::rofi_provider(raw)))
        };
        let core = Arc::new(Core { raw, open: Arc::default() });
        let ep = Arc::new(Endpoint {
            raw,
            core,
            mr_mode,
            provider: name.to_string_lossy().into_owned(),
            keep: keep::Keep::default(),
            recv: Mutex::new(Vec::new()),
            unposted: Mutex::new(Vec::new()),
            recv_size,
            closed: AtomicBool::new(false),
            idle: std::sync::atomic::AtomicU32::new(0),
            next_id: AtomicU64::new(1),
            wait_fd: (fd >= 0).then_some(fd),
        });
        for slot in 0..recvs {
            let buf = Box::into_raw(vec![0u8; recv_size].into_boxed_slice()).cast::<u8>();
            let region = match mr_mode & 1 {
                0 => None,
                _ => Some(ep.register_raw(buf, recv_size, Access::Local, None)?),
            };
            ep.recv.lock().unwrap_or_else(|p| p.into_inner()).push(RecvBuf(buf, recv_size, region));
            ep.post_first(slot)?;
        }
        Ok(ep)
    }

    /// The provider's name as libfabric gives it.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The count of this endpoint's open registrations (its receive buffers', where the
    /// provider wants them registered, among them), readable after the endpoint is gone.
    pub fn registrations(&self) -> Registrations {
        Registrations(self.core.open.clone())
    }

    /// Whether completions are waited for on a file descriptor (else in the provider).
    pub fn has_wait_fd(&self) -> bool {
        self.wait_fd.is_some()
    }

    /// A fresh operation id (below the receive ids).
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// This endpoint's address, to give peers.
    ///
    /// # Errors
    /// `fi_getname`'s failure.
    pub fn name(&self) -> Result<Vec<u8>, Error> {
        let mut buf = vec![0u8; 512];
        let mut len = buf.len();
        // SAFETY: buf is valid for `len` bytes; the shim writes at most that and sets len.
        let rc = unsafe { ffi::rofi_name(self.raw, buf.as_mut_ptr().cast(), &mut len) };
        if rc != 0 {
            return Err(Error::from_rc("fi_getname", rc));
        }
        buf.truncate(len);
        Ok(buf)
    }

    /// Insert a peer's address (from its [`Endpoint::name`]); returns its handle.
    ///
    /// # Errors
    /// `fi_av_insert`'s failure (a malformed address).
    pub fn insert(&self, name: &[u8]) -> Result<u64, Error> {
        let mut buf = name.to_vec();
        buf.resize(buf.len().max(512), 0);
        let mut a = 0u64;
        // SAFETY: the address buffer is at least as long as any address of the provider
        // (padded to 512 bytes); `a` is valid for a write.
        let rc = unsafe { ffi::rofi_av_insert(self.raw, buf.as_ptr().cast(), &mut a) };
        match rc {
            0 => Ok(a),
            _ => Err(Error::from_rc("fi_av_insert", rc)),
        }
    }

    /// The size of each receive buffer (the largest message that can be received).
    pub fn recv_size(&self) -> usize {
        self.recv_size
    }

    /// Send a copy of `msg` to `dest` (an [`Endpoint::insert`] handle); its completion comes
    /// with `id`.
    ///
    /// # Errors
    /// `id` is taken ([`Endpoint::write`]); `fi_send`'s failure (`code` 11 when the queue is
    /// full: try again after reading completions).
    pub fn send(&self, dest: u64, msg: &[u8], id: u64) -> Result<(), Error> {
        self.keep.hold(id, dest, None)?;
        // SAFETY: the shim copies the message before it returns.
        let rc = unsafe { ffi::rofi_send(self.raw, msg.as_ptr().cast(), msg.len(), dest, id) };
        if rc != 0 {
            self.keep.release([id]);
            return Err(Error::from_rc("fi_send", rc));
        }
        Ok(())
    }

    fn register_raw(
        &self,
        ptr: *mut u8,
        len: usize,
        access: Access,
        keep: Option<Arc<Mapping>>,
    ) -> Result<Region, Error> {
        let kind = match access {
            Access::Local => 0,
            Access::RemoteRead => 1,
            Access::RemoteWrite => 2,
        };
        let (mut mr, mut key, mut desc) = (std::ptr::null_mut(), 0u64, std::ptr::null_mut());
        let mut want = [0u8; 8];
        let _ = rustix::rand::getrandom(&mut want, rustix::rand::GetRandomFlags::empty());
        // SAFETY: ptr..ptr+len is memory that outlives the registration (a mapping the
        // region holds, or a receive buffer freed after the endpoint is closed).
        let rc = unsafe {
            ffi::rofi_mr_reg(
                self.raw,
                ptr.cast(),
                len.max(1),
                kind,
                u64::from_le_bytes(want),
                &mut mr,
                &mut key,
                &mut desc,
            )
        };
        if rc != 0 {
            return Err(Error::from_rc("fi_mr_reg", rc));
        }
        self.core.open.fetch_add(1, Ordering::SeqCst);
        let virt = self.mr_mode & 2 != 0;
        Ok(Region { mr, key, desc, ptr, len, mapping: keep, virt, core: self.core.clone() })
    }

    /// Register `len` bytes of `map` at `off` for `access`.
    ///
    /// # Errors
    /// The range is outside the mapping, or `fi_mr_reg` failed.
    pub fn register(
        self: &Arc<Self>,
        map: &Arc<Mapping>,
        off: usize,
        len: usize,
        access: Access,
    ) -> Result<Arc<Region>, Error> {
        let end = off.checked_add(len).filter(|&e| e <= map.len());
        if end.is_none() || (access == Access::RemoteWrite && map.is_readonly()) {
            return Err(Error {
                code: 22,
                what: format!("register {len} bytes at {off} of a mapping of {}", map.len()),
            });
        }
        // SAFETY: off + len is within the mapping (checked above).
        let ptr = unsafe { map.as_ptr().add(off) };
        Ok(Arc::new(self.register_raw(ptr, len, access, Some(map.clone()))?))
    }

    /// Write `len` bytes of `local` at `off` to a peer's region at `to`; completes with
    /// `id`.
    ///
    /// # Errors
    /// The range is outside `local`, or `local` was registered on another endpoint; `id` is
    /// in flight already (`code` 17: each operation needs its own, [`Endpoint::next_id`]) or
    /// is a receive buffer's; `fi_write`'s failure (`code` 11: queue full).
    pub fn write(
        &self,
        local: &Arc<Region>,
        off: usize,
        len: usize,
        to: Remote,
        id: u64,
    ) -> Result<(), Error> {
        self.rma(true, local, off, len, to.dest, to.addr, to.key, id)
    }

    /// Read `len` bytes of a peer's region into `local` at `off`; completes with `id`.
    ///
    /// # Errors
    /// As [`Endpoint::write`].
    pub fn read(
        &self,
        local: &Arc<Region>,
        off: usize,
        len: usize,
        from: Remote,
        id: u64,
    ) -> Result<(), Error> {
        self.rma(false, local, off, len, from.dest, from.addr, from.key, id)
    }

    #[allow(clippy::too_many_arguments)]
    fn rma(
        &self,
        write: bool,
        local: &Arc<Region>,
        off: usize,
        len: usize,
        dest: u64,
        addr: u64,
        key: u64,
        id: u64,
    ) -> Result<(), Error> {
        if off.checked_add(len).is_none_or(|e| e > local.len)
            || (!write && local.mapping.as_ref().is_some_and(|m| m.is_readonly()))
        {
            return Err(Error {
                code: 22,
                what: format!("{len} bytes at {off} of a region of {}", local.len),
            });
        }
        if !Arc::ptr_eq(&local.core, &self.core) {
            // Its key and descriptor belong to another domain, which this endpoint's
            // operations would not hold open.
            return Err(Error { code: 22, what: "the region is registered on another endpoint".into() });
        }
        self.keep.hold(id, dest, Some(local))?;
        // SAFETY: the range is within the region (checked above), whose memory the keep
        // table holds alive until the completion is read.
        let rc = unsafe {
            let p = local.ptr.add(off).cast();
            match write {
                true => ffi::rofi_write(self.raw, p, len, local.desc, dest, addr, key, id),
                false => ffi::rofi_read(self.raw, p, len, local.desc, dest, addr, key, id),
            }
        };
        if rc != 0 {
            self.keep.release([id]);
            return Err(Error::from_rc(if write { "fi_write" } else { "fi_read" }, rc));
        }
        Ok(())
    }

    /// Read the completions there are; when there are none, wait up to `timeout` for some
    /// without spinning (`fi_trywait`, then `poll` on the wait fd; or a blocking read in the
    /// provider when it has no fd: sleeps that grow while nothing comes). Returns the completions
    /// read (maybe none).
    ///
    /// # Errors
    /// `fi_cq_read`'s failure (other than "nothing yet").
    pub fn completions(&self, timeout: Duration) -> Result<Vec<Completion>, Error> {
        let got = self.read_cq()?;
        self.repost_failed();
        if !got.is_empty() || self.closed.load(Ordering::Relaxed) {
            self.idle.store(0, Ordering::Relaxed);
            return Ok(got);
        }
        match self.wait_fd {
            Some(fd) => {
                // SAFETY: the endpoint is live.
                if unsafe { ffi::rofi_trywait(self.raw) } == 0 {
                    // SAFETY: the wait fd belongs to the completion queue, which lives as
                    // long as the endpoint.
                    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
                    let mut p = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
                    let ts = rustix::time::Timespec::try_from(timeout).ok();
                    match rustix::event::poll(&mut p, ts.as_ref()) {
                        Ok(_) | Err(rustix::io::Errno::INTR) => {}
                        Err(e) => return Err(Error { code: e.raw_os_error(), what: format!("poll: {e}") }),
                    }
                }
                self.read_cq()
            }
            None => {
                // No fd to sleep on (shm): libfabric's own blocking read yields in a loop,
                // which spins a core, so sleep instead, longer the longer nothing comes
                // (from 50 µs up to 20 ms, and never past the caller's timeout).
                let idle = self.idle.fetch_add(1, Ordering::Relaxed).min(9);
                std::thread::sleep(
                    Duration::from_micros(50 << idle).min(Duration::from_millis(20)).min(timeout),
                );
                let got = self.read_cq()?;
                if !got.is_empty() {
                    self.idle.store(0, Ordering::Relaxed);
                }
                Ok(got)
            }
        }
    }

    fn read_cq(&self) -> Result<Vec<Completion>, Error> {
        let mut raw = [ffi::RofiComp::default(); 32];
        // SAFETY: `raw` is valid for 32 entries; the shim writes at most that many.
        let n = unsafe { ffi::rofi_cq_read(self.raw, raw.as_mut_ptr(), raw.len()) };
        if n < 0 {
            return Err(Error::from_rc("fi_cq_read", n));
        }
        self.keep.release(raw[..n as usize].iter().filter(|c| c.id < RECV_ID).map(|c| c.id));
        Ok(raw[..n as usize]
            .iter()
            .map(|c| {
                let slot = (c.id >= RECV_ID).then(|| (c.id - RECV_ID) as usize);
                Completion {
                    id: c.id,
                    len: c.len as usize,
                    slot,
                    error: (c.err != 0).then(|| Error {
                        code: c.err,
                        what: format!("{} (provider error {})", strerror(c.err), c.prov_err),
                    }),
                }
            })
            .collect())
    }
}
