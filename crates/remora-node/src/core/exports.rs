//! Regions this node exports as segments: ids (fixed or picked), the segment state machine
//! (created, prepared, available), sharing and attaching within the node, removal, and
//! connecting an importer to an available segment.

use super::{ConnKind, ConnectWait, Connection, IdSpace, Registry, ADAPTER, AUTO_ID_BASE};
use remora_proto::{Error, Event, LostReason};
use remora_sys::{Mapping, Memfd};
use std::collections::BTreeSet;
use std::sync::Arc;

mod events;
pub use events::OwnerEvents;

/// A local segment.
#[derive(Debug)]
pub struct Segment {
    /// Handle.
    pub seg: u64,
    /// Id; `None` for private segments (and RSM exports not published).
    pub id: Option<u32>,
    /// The personality whose ids name it.
    pub space: IdSpace,
    /// Size in bytes.
    pub size: u64,
    /// Owning session (0 after removal).
    pub owner: u64,
    /// Memory; `None` while an empty segment waits for `AttachMemory`, and after removal.
    pub memfd: Option<Memfd>,
    /// Prepared on the adapter.
    pub prepared: bool,
    /// Available for connections.
    pub available: bool,
    /// Created private.
    pub private: bool,
    /// Shared for attach.
    pub shared: bool,
    /// Removed by its owner; kept while importers remain.
    pub removed: bool,
    /// Sessions that attached it.
    pub attached: BTreeSet<u64>,
    /// Connections importing it.
    pub importers: BTreeSet<u64>,
    /// The DMA engine's view of the memory, made on first use.
    pub dma_map: Option<Arc<Mapping>>,
    /// A member of a reflective-memory group (`SCI_FLAG_BROADCAST`), see `groups.rs`.
    pub multicast: Option<super::groups::Multicast>,
    /// Its events for the owner: sent, or kept until the owner asks (`exports/events.rs`).
    pub events: OwnerEvents,
}

fn adapter(a: u32) -> Result<(), Error> {
    if a == ADAPTER {
        Ok(())
    } else {
        Err(Error::NoSuchAdapter)
    }
}

impl Registry {
    /// The next automatic segment id, round-robin from the last one handed out: an id comes
    /// back only after every other one was used, so a process still holding a connection
    /// to a removed segment by (node, id) never finds the next segment made under that id
    /// (VIPL's senders keep the pieces of a peer's memory by id, and a piece deregistered
    /// and registered again would otherwise get the id of the one it replaced).
    fn next_free_seg_id(&mut self) -> Result<u32, Error> {
        let start = self.next_seg_id.max(AUTO_ID_BASE);
        let id = (start..=u32::MAX)
            .chain(AUTO_ID_BASE..start)
            .find(|i| !self.ids.contains_key(&(IdSpace::Sisci, *i)))
            .ok_or(Error::NoSpace)?;
        self.next_seg_id = id.checked_add(1).unwrap_or(AUTO_ID_BASE);
        Ok(id)
    }

    /// `SCICreateSegment`.
    ///
    /// # Errors
    /// `SegmentIdUsed`, `NoSpace` (memfd creation failed or no free auto id),
    /// `IllegalParameter` for a zero size of a non-empty segment.
    pub fn create_segment(
        &mut self,
        session: u64,
        id: Option<u32>,
        size: u64,
        private: bool,
        empty: bool,
    ) -> Result<&Segment, Error> {
        if size == 0 && !empty {
            return Err(Error::IllegalParameter("segment size 0".into()));
        }
        let id = if private {
            None
        } else {
            match id {
                Some(id) if self.ids.contains_key(&(IdSpace::Sisci, id)) => return Err(Error::SegmentIdUsed),
                Some(id) => Some(id),
                None => Some(self.next_free_seg_id()?),
            }
        };
        let memfd = if empty {
            None
        } else {
            let name =
                format!("n{}-s{}", self.node, id.map(|i| i.to_string()).unwrap_or_else(|| "private".into()));
            Some(Memfd::create(&name, size).map_err(|e| {
                // Out of memory, or beyond the daemon's file size limit (`ulimit -f`).
                if matches!(e.raw_os_error(), Some(12 | 27)) {
                    Error::NoSpace
                } else {
                    Error::System(e.to_string())
                }
            })?)
        };
        let seg = self.handle();
        if let Some(id) = id {
            self.ids.insert((IdSpace::Sisci, id), seg);
        }
        self.segments.insert(
            seg,
            Segment {
                seg,
                id,
                space: IdSpace::Sisci,
                size,
                owner: session,
                memfd,
                prepared: false,
                available: false,
                private,
                shared: false,
                removed: false,
                attached: BTreeSet::new(),
                importers: BTreeSet::new(),
                dma_map: None,
                multicast: None,
                events: OwnerEvents::default(),
            },
        );
        Ok(&self.segments[&seg])
    }

    fn own_segment(&mut self, session: u64, seg: u64) -> Result<&mut Segment, Error> {
        match self.segments.get_mut(&seg) {
            Some(s) if !s.removed && (s.owner == session || s.attached.contains(&session)) => Ok(s),
            _ => Err(Error::UnknownHandle),
        }
    }

    /// `SCIRegisterSegmentMemory`: give an empty segment its memory.
    ///
    /// # Errors
    /// `UnknownHandle`, `IllegalOperation` when the segment already has memory.
    pub fn attach_memory(&mut self, session: u64, seg: u64, memfd: Memfd) -> Result<u64, Error> {
        let s = self.own_segment(session, seg)?;
        if s.memfd.is_some() {
            return Err(Error::IllegalOperation);
        }
        s.size = memfd.size();
        s.memfd = Some(memfd);
        Ok(s.size)
    }

    /// `SCIPrepareSegment`.
    ///
    /// # Errors
    /// `UnknownHandle`, `NoSuchAdapter`, `IllegalOperation` for a segment without memory.
    pub fn prepare(&mut self, session: u64, seg: u64, a: u32) -> Result<(), Error> {
        let s = self.own_segment(session, seg)?;
        adapter(a)?;
        if s.memfd.is_none() {
            return Err(Error::IllegalOperation);
        }
        s.prepared = true;
        Ok(())
    }

    /// `SCISetSegmentAvailable`.
    ///
    /// # Errors
    /// `UnknownHandle`, `NoSuchAdapter`, `NotPrepared`, `IllegalOperation` for private ones.
    pub fn set_available(&mut self, session: u64, seg: u64, a: u32) -> Result<(), Error> {
        let s = self.own_segment(session, seg)?;
        adapter(a)?;
        if s.private {
            return Err(Error::IllegalOperation);
        }
        if !s.prepared {
            return Err(Error::NotPrepared);
        }
        s.available = true;
        Ok(())
    }

    /// `SCISetSegmentUnavailable`.
    ///
    /// # Errors
    /// `UnknownHandle`, `NoSuchAdapter`, `IllegalOperation` when not available.
    pub fn set_unavailable(
        &mut self,
        session: u64,
        seg: u64,
        a: u32,
        force: bool,
        notify: bool,
    ) -> Result<(), Error> {
        self.revoke();
        let s = self.own_segment(session, seg)?;
        adapter(a)?;
        if !s.available {
            return Err(Error::IllegalOperation);
        }
        s.available = false;
        let importers: Vec<u64> = if force {
            std::mem::take(&mut s.importers).into_iter().collect()
        } else {
            s.importers.iter().copied().collect()
        };
        for c in importers {
            let Some(conn) = self.conns.get_mut(&c) else {
                continue;
            };
            let sess = conn.session;
            if force {
                conn.alive = false;
                self.tell(sess, Event::ConnectionLost { conn: c, reason: LostReason::ForcedDisconnect });
            } else if notify {
                self.tell(sess, Event::SegmentUnavailable { conn: c });
            }
        }
        Ok(())
    }

    /// `SCIShareSegment`.
    ///
    /// # Errors
    /// `UnknownHandle`; `IllegalOperation` for private segments.
    pub fn share(&mut self, session: u64, seg: u64) -> Result<(), Error> {
        let s = self.own_segment(session, seg)?;
        if s.private {
            return Err(Error::IllegalOperation);
        }
        s.shared = true;
        Ok(())
    }

    /// `SCIAttachLocalSegment`.
    ///
    /// # Errors
    /// `NoSuchSegment`; `Access` when the segment is not shared.
    pub fn attach_shared(&mut self, session: u64, id: u32) -> Result<&Segment, Error> {
        let seg = *self.ids.get(&(IdSpace::Sisci, id)).ok_or(Error::NoSuchSegment)?;
        let s = self.segments.get_mut(&seg).ok_or(Error::NoSuchSegment)?;
        if !s.shared || s.memfd.is_none() {
            return Err(Error::Access);
        }
        if s.owner != session {
            s.attached.insert(session);
        }
        Ok(&self.segments[&seg])
    }

    /// `SCIRemoveSegment`: the owner removes (the id is free at once; the memory lives on
    /// in the importers' mappings); an attacher detaches.
    ///
    /// # Errors
    /// `UnknownHandle`; `Busy` while other processes have it attached, unless `force`
    /// (`SCI_FLAG_FORCE_REMOVE`): then it goes all the same.
    pub fn remove_segment(&mut self, session: u64, seg: u64, force: bool) -> Result<(), Error> {
        self.revoke();
        let s = self.own_segment(session, seg)?;
        if s.owner != session {
            s.attached.remove(&session);
            return Ok(());
        }
        if !s.attached.is_empty() {
            if !force {
                return Err(Error::Busy);
            }
            s.attached.clear();
        }
        self.retire(seg, None);
        Ok(())
    }

    /// Take a segment out of use: free its id, drop the daemon's memory reference, and
    /// (when its owner died) tell the importers.
    pub(super) fn retire(&mut self, seg: u64, lost: Option<LostReason>) {
        self.revoke();
        let Some(s) = self.segments.get_mut(&seg) else {
            return;
        };
        if let Some(id) = s.id {
            if self.ids.get(&(s.space, id)) == Some(&seg) {
                self.ids.remove(&(s.space, id));
            }
        }
        s.removed = true;
        s.available = false;
        s.owner = 0;
        s.memfd = None;
        s.events = OwnerEvents::default();
        let importers: Vec<u64> = s.importers.iter().copied().collect();
        if importers.is_empty() {
            self.segments.remove(&seg);
        }
        if let Some(reason) = lost {
            for c in importers {
                if let Some(conn) = self.conns.get_mut(&c) {
                    conn.alive = false;
                    let sess = conn.session;
                    self.tell(sess, Event::ConnectionLost { conn: c, reason });
                }
            }
        }
    }

    /// Try to connect `session` to segment `id` of this node.
    ///
    /// # Errors
    /// `NoSuchSegment` while no segment has the id, `NotAvailable`-like `Timeout`
    /// is decided by the caller; `ConnectionRefused` is reported as `Access` for private.
    pub fn connect_local(
        &mut self,
        session: u64,
        importer_node: u32,
        id: u32,
    ) -> Result<(u64, u64, Memfd), ConnectWait> {
        self.connect_in(session, importer_node, IdSpace::Sisci, id)
    }

    /// [`Registry::connect_local`] for a session of another host's node: the connection's
    /// memory stays here, so no descriptor of it is made to be handed out (two system
    /// calls less on the connect's path, issue 19). Returns the connection and the size.
    ///
    /// # Errors
    /// As [`Registry::connect_local`].
    pub fn connect_for_peer(
        &mut self,
        session: u64,
        importer_node: u32,
        id: u32,
    ) -> Result<(u64, u64), ConnectWait> {
        self.connect_with(session, importer_node, IdSpace::Sisci, id, false)
            .map(|(conn, size, _)| (conn, size))
    }

    /// Connect `session` to the available segment named `id` in `space`.
    ///
    /// # Errors
    /// As [`Registry::connect_local`].
    pub fn connect_in(
        &mut self,
        session: u64,
        importer_node: u32,
        space: IdSpace,
        id: u32,
    ) -> Result<(u64, u64, Memfd), ConnectWait> {
        match self.connect_with(session, importer_node, space, id, true)? {
            (conn, size, Some(fd)) => Ok((conn, size, fd)),
            _ => Err(ConnectWait::Failed(Error::System("no descriptor of the segment was made".into()))),
        }
    }

    /// [`Registry::connect_in`], making a descriptor of the memory to hand out when
    /// `hand_out`.
    fn connect_with(
        &mut self,
        session: u64,
        importer_node: u32,
        space: IdSpace,
        id: u32,
        hand_out: bool,
    ) -> Result<(u64, u64, Option<Memfd>), ConnectWait> {
        let seg = *self.ids.get(&(space, id)).ok_or(ConnectWait::Missing)?;
        let s = self.segments.get_mut(&seg).ok_or(ConnectWait::Missing)?;
        if s.multicast.is_some_and(|m| !m.unicast) {
            // A group member takes unicast connects only with `SCI_FLAG_ALLOW_UNICAST`.
            return Err(ConnectWait::Failed(Error::Access));
        }
        if !s.available {
            return Err(ConnectWait::Unavailable);
        }
        let Some(memfd) = s.memfd.as_ref() else {
            return Err(ConnectWait::Unavailable);
        };
        let dup = || memfd.try_clone().map_err(|e| ConnectWait::Failed(Error::System(e.to_string())));
        let fd = if hand_out { Some(dup()?) } else { None };
        let keep = dup()?;
        let size = s.size;
        let conn = self.next;
        self.next += 1;
        s.importers.insert(conn);
        self.conns.insert(
            conn,
            Connection {
                conn,
                session,
                node: self.node,
                importer_node,
                id,
                size,
                kind: ConnKind::Local { seg },
                alive: true,
                memfd: Some(keep),
                dma_map: None,
                writable: true,
                readable: true,
            },
        );
        self.tell_owner(seg, Event::SegmentConnected { seg, node: importer_node });
        Ok((conn, size, fd))
    }
}

impl Registry {
    /// The segment named `id` in `space`, if one has it.
    pub fn segment_by_id(&self, space: IdSpace, id: u32) -> Option<&Segment> {
        self.ids.get(&(space, id)).and_then(|s| self.segments.get(s))
    }

    /// Create a segment of `space` over `memfd`, without an id (RSM's
    /// `rsm_memseg_export_create`): prepared, not available until it gets an id.
    pub fn create_unnamed(&mut self, session: u64, space: IdSpace, memfd: Memfd) -> &Segment {
        let seg = self.handle();
        let size = memfd.size();
        self.segments.insert(
            seg,
            Segment {
                seg,
                id: None,
                space,
                size,
                owner: session,
                memfd: Some(memfd),
                prepared: true,
                available: false,
                private: false,
                shared: false,
                removed: false,
                attached: BTreeSet::new(),
                importers: BTreeSet::new(),
                dma_map: None,
                multicast: None,
                events: OwnerEvents::default(),
            },
        );
        &self.segments[&seg]
    }

    /// Name segment `seg` of `session` with `id` in its space (or, for `None`, the first
    /// free id at or above `auto_from`) and make it available.
    ///
    /// # Errors
    /// `UnknownHandle`; `IllegalOperation` when it already has an id; `SegmentIdUsed`;
    /// `NoSpace` when no id is free.
    pub fn name_segment(
        &mut self,
        session: u64,
        seg: u64,
        id: Option<u32>,
        auto_from: u32,
    ) -> Result<u32, Error> {
        let space = self.own_segment(session, seg)?.space;
        if self.segments[&seg].id.is_some() {
            return Err(Error::IllegalOperation);
        }
        let id = match id {
            Some(id) if self.ids.contains_key(&(space, id)) => return Err(Error::SegmentIdUsed),
            Some(id) => id,
            None => {
                (auto_from..=u32::MAX).find(|i| !self.ids.contains_key(&(space, *i))).ok_or(Error::NoSpace)?
            }
        };
        self.ids.insert((space, id), seg);
        let s = self.segments.get_mut(&seg).expect("checked above");
        s.id = Some(id);
        s.available = true;
        Ok(id)
    }

    /// Take segment `seg`'s id away (it may be used again at once) and cut every importer
    /// off, telling them why.
    ///
    /// # Errors
    /// `UnknownHandle`; `IllegalOperation` when it has no id.
    pub fn unname_segment(&mut self, session: u64, seg: u64, reason: LostReason) -> Result<(), Error> {
        self.revoke();
        let s = self.own_segment(session, seg)?;
        let id = s.id.take().ok_or(Error::IllegalOperation)?;
        let space = s.space;
        s.available = false;
        let importers: Vec<u64> = std::mem::take(&mut s.importers).into_iter().collect();
        self.ids.remove(&(space, id));
        for c in importers {
            if let Some(conn) = self.conns.get_mut(&c) {
                conn.alive = false;
                let sess = conn.session;
                self.tell(sess, Event::ConnectionLost { conn: c, reason });
            }
        }
        Ok(())
    }
}
