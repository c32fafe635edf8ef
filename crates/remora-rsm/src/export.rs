//! Export segments: a process's own memory, moved in place into memory the node can hand
//! to importers, published under an id with an access list.

use crate::signal::{Inbox, Outbox};
use crate::{AccessEntry, Controller, Error, Result};
use remora_proto::{Reply, Request, RsmRequest};
use remora_sys::user_memory::UserRegion;
use remora_sys::{AsFd, Memfd};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

/// Flags of [`ExportSegment::create`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreateFlags {
    /// The memory behind the segment may be replaced (`RSM_ALLOW_REBIND`).
    pub allow_rebind: bool,
    /// Do not wait for resources (`RSM_CREATE_SEG_DONTWAIT`); creation never waits here.
    pub dont_wait: bool,
}

#[derive(Debug)]
struct State {
    /// The memory bound to each part of the segment: (offset, region), in offset order,
    /// covering the segment; each region is a shared mapping of the segment's memfd.
    bindings: Vec<(usize, UserRegion)>,
    published: Option<u32>,
    destroyed: bool,
    /// Connections to importers' signals, by (node, interrupt number).
    outboxes: HashMap<(u32, u32), Outbox>,
}

#[derive(Debug)]
struct Inner {
    ctl: Controller,
    seg: u64,
    size: usize,
    memfd: Memfd,
    flags: CreateFlags,
    inbox: Inbox,
    state: Mutex<State>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if !st.destroyed {
            let _ = self.ctl.session().request(Request::Rsm(RsmRequest::Destroy { seg: self.seg }), &[]);
            unshare_all(&mut st.bindings);
        }
    }
}

/// A segment of this process's memory that other nodes may import
/// (`rsm_memseg_export_handle_t`).
#[derive(Debug, Clone)]
pub struct ExportSegment {
    inner: Arc<Inner>,
}

/// The permissions the process's umask leaves of `0o666`.
fn umask_mode() -> u32 {
    0o666 & !current_umask()
}

/// The process's umask, read from the `Umask:` line of `/proc/self/status` (Linux 4.7 on):
/// setting it, the only other way to learn it, changes it for every thread of the process
/// meanwhile. Without that line it is set and put straight back.
fn current_umask() -> u32 {
    let from_status = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        let line = s.lines().find_map(|l| l.strip_prefix("Umask:"))?;
        u32::from_str_radix(line.trim(), 8).ok()
    });
    from_status.unwrap_or_else(|| {
        let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
        rustix::process::umask(old);
        old.as_raw_mode()
    })
}

fn check_region(region: &UserRegion) -> Result<()> {
    let page = remora_sys::page_size();
    if region.addr() == 0 {
        return Err(Error::BadAddress);
    }
    if region.is_empty() {
        return Err(Error::BadLength);
    }
    if !region.addr().is_multiple_of(page) || !region.len().is_multiple_of(page) {
        return Err(Error::BadMemAlignment);
    }
    Ok(())
}

impl ExportSegment {
    /// `rsm_memseg_export_create` of a page-aligned slice this process gives up for good.
    ///
    /// # Errors
    /// As [`ExportSegment::create_region`].
    pub fn create(ctl: &Controller, mem: &'static mut [u8], flags: CreateFlags) -> Result<ExportSegment> {
        ExportSegment::create_region(ctl, UserRegion::from_static(mem), flags)
    }

    /// `rsm_memseg_export_create`: the memory at `region` (heap, anonymous `mmap`, a stack
    /// — any writable private memory, page-aligned) is moved in place into memory the
    /// node can share, keeping its addresses and bytes: the program goes on using its
    /// pointers and importers see the same bytes.
    ///
    /// # Errors
    /// [`Error::BadAddress`] for a null address or memory that cannot be moved (a file
    /// mapping, read-only memory); [`Error::BadLength`] for an empty length;
    /// [`Error::BadMemAlignment`] when the address or the length is not page-aligned.
    pub fn create_region(ctl: &Controller, region: UserRegion, flags: CreateFlags) -> Result<ExportSegment> {
        check_region(&region)?;
        let inbox = Inbox::create(ctl.session())?;
        let memfd = remora_sys::user_memory::move_region(region, "rsm-export").map_err(|e| {
            match e.raw_os_error() {
                Some(14) | Some(22) => Error::BadAddress,
                _ => Error::from(e),
            }
        })?;
        let fd: OwnedFd = memfd.try_clone()?.into_fd();
        let req = Request::Rsm(RsmRequest::Create { mode: umask_mode(), signal: inbox.number() });
        let reply = ctl.session().request(req, &[fd.as_fd()]);
        let seg = match reply {
            Ok((Reply::Segment { seg, .. }, _)) => seg,
            Ok((other, _)) => {
                let _ = remora_sys::user_memory::unshare_region(region);
                return Err(Error::Internal(format!("unexpected reply {other:?}")));
            }
            Err(e) => {
                let _ = remora_sys::user_memory::unshare_region(region);
                return Err(e.into());
            }
        };
        Ok(ExportSegment {
            inner: Arc::new(Inner {
                ctl: ctl.clone(),
                seg,
                size: region.len(),
                memfd,
                flags,
                inbox,
                state: Mutex::new(State {
                    bindings: vec![(0, region)],
                    published: None,
                    destroyed: false,
                    outboxes: HashMap::new(),
                }),
            }),
        })
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        let st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.destroyed {
            return Err(Error::BadSegment);
        }
        Ok(st)
    }

    /// The size in bytes.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// The id it is published under.
    pub fn id(&self) -> Option<u32> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner()).published
    }

    /// The node's handle of the export.
    pub fn handle(&self) -> u64 {
        self.inner.seg
    }

    /// `rsm_memseg_export_publish`: `id` 0 lets the node pick a free id at or above
    /// `0x8000_0000`; `acl` `None` admits every node with the permissions the creator's
    /// umask left. Returns the id.
    ///
    /// # Errors
    /// [`Error::AlreadyPublished`]; [`Error::ReservedSegId`] for an explicit id up to
    /// `0x3F_FFFF` or from `0x8000_0000` on; [`Error::SegIdInUse`]; [`Error::BadAcl`] for an
    /// entry whose permission is not of the 0o666 bits; [`Error::BadSegment`] once
    /// destroyed.
    pub fn publish(&self, id: u32, acl: Option<&[AccessEntry]>) -> Result<u32> {
        let mut st = self.state()?;
        if st.published.is_some() {
            return Err(Error::AlreadyPublished);
        }
        check_acl(acl)?;
        let req = Request::Rsm(RsmRequest::Publish { seg: self.inner.seg, id, acl: acl.map(|a| a.to_vec()) });
        match self.inner.ctl.session().request(req, &[]) {
            Ok((Reply::RsmPublished { id }, _)) => {
                st.published = Some(id);
                Ok(id)
            }
            Ok((other, _)) => Err(Error::Internal(format!("unexpected reply {other:?}"))),
            Err(e) => Err(match Error::from(e) {
                Error::Internal(_) => Error::BadAcl,
                other => other,
            }),
        }
    }

    /// `rsm_memseg_export_republish`: a new access list for future connects (importers
    /// connected already keep their access).
    ///
    /// # Errors
    /// [`Error::NotPublished`]; [`Error::BadAcl`].
    pub fn republish(&self, acl: Option<&[AccessEntry]>) -> Result<()> {
        let st = self.state()?;
        if st.published.is_none() {
            return Err(Error::NotPublished);
        }
        check_acl(acl)?;
        let req = Request::Rsm(RsmRequest::Republish { seg: self.inner.seg, acl: acl.map(|a| a.to_vec()) });
        self.inner.ctl.session().request(req, &[])?;
        Ok(())
    }

    /// `rsm_memseg_export_unpublish`: the id is free again and every importer is cut off
    /// (their next access fails with [`Error::ConnAborted`]).
    ///
    /// # Errors
    /// [`Error::NotPublished`].
    pub fn unpublish(&self) -> Result<()> {
        let mut st = self.state()?;
        if st.published.is_none() {
            return Err(Error::NotPublished);
        }
        self.inner.ctl.session().request(Request::Rsm(RsmRequest::Unpublish { seg: self.inner.seg }), &[])?;
        st.published = None;
        st.outboxes.clear();
        Ok(())
    }

    /// `rsm_memseg_export_rebind`: the segment's bytes from `offset` on are now the memory
    /// at `region` (whose bytes they take); every importer's existing map shows it. The
    /// memory bound before to that part (by the create or earlier rebinds, whole or in
    /// part) gets private pages again, with what it held; memory bound to other parts stays.
    ///
    /// # Errors
    /// [`Error::RebindNotAllowed`] without `allow_rebind`; [`Error::BadMemAlignment`],
    /// [`Error::BadLength`] (also beyond the segment), [`Error::BadOffset`] for an offset
    /// that is not page-aligned; [`Error::BadAddress`].
    pub fn rebind(&self, region: UserRegion, offset: usize) -> Result<()> {
        let mut st = self.state()?;
        if !self.inner.flags.allow_rebind {
            return Err(Error::RebindNotAllowed);
        }
        check_region(&region)?;
        if !offset.is_multiple_of(remora_sys::page_size()) {
            return Err(Error::BadOffset);
        }
        if offset.checked_add(region.len()).is_none_or(|e| e > self.inner.size) {
            return Err(Error::BadLength);
        }
        let end = offset + region.len();
        // The memory bound to that part before becomes the program's own again, keeping
        // the bytes it holds now, before the segment takes the new memory's bytes.
        let mut kept = Vec::with_capacity(st.bindings.len() + 2);
        let mut still_shared = Vec::new();
        for (at, bound) in std::mem::take(&mut st.bindings) {
            let bound_end = at + bound.len();
            if bound_end <= offset || at >= end {
                kept.push((at, bound));
                continue;
            }
            if at < offset {
                kept.push((at, bound.sub(0, offset - at)));
            }
            if bound_end > end {
                kept.push((end, bound.sub(end - at, bound_end - end)));
            }
            let (lo, hi) = (at.max(offset), bound_end.min(end));
            let part = bound.sub(lo - at, hi - lo);
            if part.addr() == region.addr() + (lo - offset) {
                // The same memory bound to the same place again.
                still_shared.push((lo, part));
            } else {
                let _ = remora_sys::user_memory::unshare_region(part);
            }
        }
        let r = remora_sys::user_memory::rebind_region(region, &self.inner.memfd, offset as u64);
        match r {
            Ok(()) => {
                // Memory bound elsewhere in the segment that the new memory overlaps (a
                // program rebinding a buffer to another offset) shows this part now.
                kept = kept.into_iter().flat_map(|b| outside(b, region)).collect();
                kept.push((offset, region));
            }
            Err(_) => kept.extend(still_shared),
        }
        kept.sort_by_key(|(at, _)| *at);
        st.bindings = kept;
        r.map_err(|e| match e.raw_os_error() {
            Some(14) | Some(22) => Error::BadAddress,
            _ => Error::from(e),
        })?;
        Ok(())
    }

    /// `rsm_memseg_export_destroy`: unpublish (cutting importers off) and release the
    /// segment; the memory becomes the program's own again, with what it holds.
    ///
    /// # Errors
    /// [`Error::PollFdInUse`] while a poll descriptor is held; [`Error::BadSegment`] once
    /// destroyed.
    pub fn destroy(&self) -> Result<()> {
        let mut st = self.state()?;
        if self.inner.inbox.pollfds() > 0 {
            return Err(Error::PollFdInUse);
        }
        self.inner.ctl.session().request(Request::Rsm(RsmRequest::Destroy { seg: self.inner.seg }), &[])?;
        st.destroyed = true;
        st.outboxes.clear();
        unshare_all(&mut st.bindings);
        // Importers' posts fail from now on (their kept connections see it removed).
        self.inner.inbox.remove();
        Ok(())
    }

    /// `rsm_intr_signal_post` on an export: signal every importer connected now.
    ///
    /// Importers are named by their signal's (node, interrupt number); nodes hand out
    /// numbers round-robin, so a pair names one importer's interrupt until it goes. A kept
    /// connection whose interrupt went (its importer left) is dropped, and the pair, if an
    /// importer holds it now, connected anew.
    ///
    /// # Errors
    /// [`Error::BadSegment`] once destroyed; [`Error::Unreachable`] when an importer's node
    /// cannot be reached. An importer that leaves meanwhile is not an error.
    pub fn signal_post(&self, no_accumulate: bool) -> Result<()> {
        let mut st = self.state()?;
        let req = Request::Rsm(RsmRequest::Importers { seg: self.inner.seg });
        let (reply, _) = self.inner.ctl.session().request(req, &[])?;
        let Reply::RsmSignals(list) = reply else {
            return Err(Error::Internal(format!("unexpected reply {reply:?}")));
        };
        st.outboxes.retain(|k, _| list.contains(k));
        let session = self.inner.ctl.session();
        let mut result = Ok(());
        for key in list {
            let mut outcome = match st.outboxes.get(&key) {
                Some(o) => o.post(no_accumulate),
                None => Err(Error::ConnAborted),
            };
            if outcome == Err(Error::ConnAborted) {
                // Not connected yet, or the interrupt kept went away: connect to the one
                // the importer holds now.
                st.outboxes.remove(&key);
                outcome = Outbox::connect(session, key.0, key.1).and_then(|o| {
                    let r = o.post(no_accumulate);
                    if r.is_ok() {
                        st.outboxes.insert(key, o);
                    }
                    r
                });
            }
            match outcome {
                // The importer left between the list and the post.
                Ok(()) | Err(Error::ConnAborted) => {}
                Err(e) => result = Err(e),
            }
        }
        result
    }

    /// `rsm_intr_signal_wait` on an export: wait for an importer's signal (`None`: forever).
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::BadSegment`] once destroyed.
    pub fn signal_wait(&self, timeout: Option<std::time::Duration>) -> Result<()> {
        drop(self.state()?);
        self.inner.inbox.wait(timeout)
    }

    /// Consume a pending signal without waiting; whether there was one.
    pub fn signal_take(&self) -> bool {
        self.inner.inbox.try_take()
    }

    /// `rsm_memseg_get_pollfd`.
    ///
    /// # Errors
    /// [`Error::BadSegment`] once destroyed.
    pub fn pollfd(&self) -> Result<OwnedFd> {
        drop(self.state()?);
        self.inner.inbox.pollfd()
    }

    /// `rsm_memseg_release_pollfd`.
    ///
    /// # Errors
    /// [`Error::BadSegment`] when none is held.
    pub fn release_pollfd(&self) -> Result<()> {
        self.inner.inbox.release_pollfd()
    }
}

/// The parts of binding `(at, bound)` whose addresses lie outside `region`.
fn outside((at, bound): (usize, UserRegion), region: UserRegion) -> Vec<(usize, UserRegion)> {
    let (start, end) = (bound.addr(), bound.addr() + bound.len());
    let (lo, hi) = (region.addr().max(start), (region.addr() + region.len()).min(end));
    if lo >= hi {
        return vec![(at, bound)];
    }
    let mut parts = Vec::new();
    if lo > start {
        parts.push((at, bound.sub(0, lo - start)));
    }
    if hi < end {
        parts.push((at + (hi - start), bound.sub(hi - start, end - hi)));
    }
    parts
}

/// Give every binding private pages again, with what it holds.
fn unshare_all(bindings: &mut Vec<(usize, UserRegion)>) {
    for (_, region) in bindings.drain(..) {
        let _ = remora_sys::user_memory::unshare_region(region);
    }
}

fn check_acl(acl: Option<&[AccessEntry]>) -> Result<()> {
    match acl {
        Some(list) if list.iter().any(|e| e.perm & !0o666 != 0) => Err(Error::BadAcl),
        _ => Ok(()),
    }
}
