//! The map calls of segments: `SCIMapLocalSegment` and `SCIMapRemoteSegment` (a map of
//! this host's memory, of another host's segment through the DSM pager, or of a multicast
//! connection through the broadcast module).

use crate::health::HomeRoute;
use crate::map::{Backing, Map, MapFlags, MapParent, SegmentRange};
use crate::segment::{LocalSegment, RemoteSegment};
use crate::{Error, Result};
use remora_client::dsm::MapNote;
use remora_client::Session;
use remora_proto::MapTarget;
use std::sync::Arc;

impl crate::DescInner {
    /// The session of the DSM pager for this descriptor's maps of node `home`'s memory on
    /// another host: not the descriptor's own (a fault must never wait behind a long
    /// request of it, a connect, say), nor another home's (a session answers one request
    /// at a time, and a home that stopped answering holds a request for its pager flow
    /// until the dial gives up: other homes' maps must not queue behind it). Opened at the
    /// first such map of `home` and kept with the descriptor (opening one per map cost a
    /// connection and a hello, ~50 µs of each map); opened again when its daemon hung up.
    ///
    /// # Errors
    /// The session could not be opened.
    pub(crate) fn pager_session(&self, home: u32) -> Result<Arc<Session>> {
        let mut kept = self.pager.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, s)) = kept.iter().find(|(h, s)| *h == home && !s.hung_up()) {
            return Ok(s.clone());
        }
        let s = Arc::new(Session::open(&self.cfg)?);
        kept.retain(|(h, _)| *h != home);
        kept.push((home, s.clone()));
        Ok(s)
    }
}

impl LocalSegment {
    /// `SCIMapLocalSegment`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`], [`Error::IllegalAddress`] when a fixed address is taken,
    /// [`Error::IllegalOperation`] for a segment without memory.
    pub fn map(&self, offset: usize, size: usize, addr: Option<usize>, flags: MapFlags) -> Result<Map> {
        let inner = self.live()?;
        let memfd = inner.memfd.read().unwrap_or_else(|p| p.into_inner());
        let memfd = memfd.as_ref().ok_or(Error::IllegalOperation)?;
        Map::create(
            inner.desc.session().clone(),
            &inner.desc,
            memfd,
            self.size(),
            offset,
            size,
            addr,
            flags,
            MapTarget::Local { seg: inner.seg },
            &inner.deps,
            MapParent::Local(self.clone()),
        )
    }
}

impl RemoteSegment {
    /// `SCIMapRemoteSegment`: any offset and size inside the segment; read-only maps are
    /// enforced by the MMU.
    ///
    /// # Errors
    /// [`Error::OutOfRange`]; [`Error::IllegalAddress`] when a fixed address is taken;
    /// [`Error::NotConnected`] while an asynchronous connect runs; [`Error::NotSupported`]
    /// for a segment of a node on another host where userfaultfd is unavailable (the DSM's
    /// maps need it), [`Error::NoSpace`] where the process is out of descriptors or memory
    /// for one now.
    pub fn map(&self, offset: usize, size: usize, addr: Option<usize>, flags: MapFlags) -> Result<Map> {
        let l = self.link()?;
        if !l.legs.is_empty() || crate::broadcast::fanout_legs(l.conn).is_some() {
            return self.map_multicast(l, offset, size, addr, flags);
        }
        let Some(memfd) = l.memfd.as_ref() else {
            // A segment of another host: the DSM pager serves the pages.
            if addr.is_some() {
                return Err(Error::NotSupported);
            }
            match offset.checked_add(size) {
                Some(end) if size > 0 && end <= l.size => {}
                _ if size == 0 => return Err(Error::SizeAlignment),
                _ => return Err(Error::OutOfRange),
            }
            // The map's pager flow is asked for in the background on that session, once
            // the map is booked with the daemon: the map returns without waiting for the
            // dial, its first fault waits for it. The map is served by the pager of its
            // home node: a home that stops answering holds up no other home's faults. The
            // map's note to the daemon goes on that session too, just before the flow
            // request and by the same thread (`remora_client::dsm::MapNote`): sent from
            // here it woke the daemon in the middle of the map.
            let pager = self.inner.desc.inner.pager_session(self.node())?;
            let number = self.inner.desc.inner.next_map.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let target = MapTarget::Remote { conn: l.conn };
            let note = MapNote::new(pager.clone(), Map::note_of(number, target, offset, size, flags));
            let dsm = remora_client::dsm::DsmMap::on_pager_session(
                pager.clone(),
                Arc::new(HomeRoute {
                    range: SegmentRange { conn: l.conn },
                    conn: Arc::downgrade(&self.inner),
                }),
                self.node(),
                l.size as u64,
                offset as u64,
                size,
                flags.readonly,
                note.clone(),
            )
            .map_err(|e| match e {
                remora_client::dsm::DsmError::Unavailable(_) => Error::NotSupported,
                remora_client::dsm::DsmError::Resources(_) => Error::NoSpace,
            })?;
            let map = Map::wrap_noted(
                pager,
                number,
                Some(note),
                Backing::Dsm(dsm),
                size,
                flags,
                &self.inner.deps,
                MapParent::Remote(self.clone()),
            );
            map.ask_flow();
            return Ok(map);
        };
        Map::create(
            l.session.clone(),
            &self.inner.desc,
            memfd,
            l.size,
            offset,
            size,
            addr,
            flags,
            MapTarget::Remote { conn: l.conn },
            &self.inner.deps,
            MapParent::Remote(self.clone()),
        )
    }
}
