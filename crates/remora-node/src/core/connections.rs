//! Connections of this node's sessions to exports of this node or of other nodes (through
//! a transport that shares memory, or one that moves bytes), what the DMA engine reaches
//! through them, their loss, and the maps processes note on them.

use super::Registry;
use remora_proto::{Error, Event, LostReason, MapStatus, MapTarget};
use remora_sys::dma::{DMA_ERR_NOT_CONNECTED, DMA_ERR_NOT_PREPARED};
use remora_sys::{AsFd, Mapping, Memfd};
use std::sync::Arc;

/// What a connection reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnKind {
    /// A segment of this node.
    Local {
        /// Segment handle.
        seg: u64,
    },
    /// A segment of another node through a transport that shares memory (this host).
    Proxied {
        /// The other daemon's connection handle.
        remote: u64,
    },
    /// A segment of another node through a transport that moves bytes (another host).
    Remote {
        /// The other daemon's connection handle.
        remote: u64,
    },
    /// The multicast connection of a reflective-memory group: the memory every member of
    /// the group on this host shares (see `groups.rs`).
    Group,
}

impl ConnKind {
    /// The other daemon's handle, for connections that go through another daemon.
    pub fn remote(&self) -> Option<u64> {
        match *self {
            ConnKind::Proxied { remote } | ConnKind::Remote { remote } => Some(remote),
            ConnKind::Local { .. } | ConnKind::Group => None,
        }
    }
}

/// Where the DMA engine finds a connection's memory.
#[derive(Debug, Clone)]
pub enum DmaTarget {
    /// Mapped here (this host's memory).
    Map(Arc<Mapping>),
    /// Memory of another node that a transport moves bytes to and from.
    Far {
        /// The node.
        node: u32,
        /// Its connection handle.
        remote: u64,
        /// The segment's size.
        size: u64,
    },
}

/// A connection held by a session of this node.
#[derive(Debug)]
pub struct Connection {
    /// Handle.
    pub conn: u64,
    /// The session that holds it.
    pub session: u64,
    /// The node that owns the segment.
    pub node: u32,
    /// The node of the importer (differs from ours for peer sessions).
    pub importer_node: u32,
    /// Segment id.
    pub id: u32,
    /// Size.
    pub size: u64,
    /// Where it goes.
    pub kind: ConnKind,
    /// Not lost.
    pub alive: bool,
    /// The segment's memory (a duplicate), for the DMA engine.
    pub memfd: Option<Memfd>,
    /// The DMA engine's view of the memory, made on first use.
    pub dma_map: Option<Arc<Mapping>>,
    /// Stores are allowed (an RSM import may be read-only: the engine's view of it is then
    /// a read-only mapping, so no transfer or peer frame can write through it).
    pub writable: bool,
    /// Loads are allowed (an RSM import may be granted no read: then the node hands it no
    /// memory, refuses its reads, and serves no peer read or page fetch of it).
    pub readable: bool,
}

impl Registry {
    /// Record a connection to another node's segment made through a proxy.
    pub fn add_proxied(
        &mut self,
        session: u64,
        node: u32,
        id: u32,
        size: u64,
        remote: u64,
        memfd: Option<Memfd>,
    ) -> u64 {
        let kind = if memfd.is_some() { ConnKind::Proxied { remote } } else { ConnKind::Remote { remote } };
        let conn = self.handle();
        self.conns.insert(
            conn,
            Connection {
                conn,
                session,
                node,
                importer_node: self.node,
                id,
                size,
                kind,
                alive: true,
                memfd,
                dma_map: None,
                writable: true,
                readable: true,
            },
        );
        conn
    }

    /// The DMA engine's mapping of a local segment `session` may use: owned or attached,
    /// prepared, with memory. Errors are `DMA_ERR_*` codes.
    pub fn dma_local(&mut self, session: u64, seg: u64) -> Result<Arc<Mapping>, u32> {
        let mine = |o: u64, r: &Registry| r.same_process(o, session);
        let ok = match self.segments.get(&seg) {
            Some(s) => !s.removed && (mine(s.owner, self) || s.attached.iter().any(|a| mine(*a, self))),
            None => false,
        };
        let s = match self.segments.get_mut(&seg) {
            Some(s) if ok => s,
            _ => return Err(DMA_ERR_NOT_PREPARED),
        };
        if !s.prepared {
            return Err(DMA_ERR_NOT_PREPARED);
        }
        if s.dma_map.is_none() {
            let m = s.memfd.as_ref().ok_or(DMA_ERR_NOT_PREPARED)?;
            let map = Mapping::new(m.as_fd(), 0, s.size as usize, Default::default())
                .map_err(|_| DMA_ERR_NOT_PREPARED)?;
            s.dma_map = Some(Arc::new(map));
        }
        Ok(s.dma_map.clone().expect("made above"))
    }

    /// The DMA engine's mapping of a connection of `session` that is alive.
    pub fn dma_remote(&mut self, session: u64, conn: u64) -> Result<DmaTarget, u32> {
        let ok = self.conns.get(&conn).is_some_and(|c| c.alive && self.same_process(c.session, session));
        let c = match self.conns.get_mut(&conn) {
            Some(c) if ok => c,
            _ => return Err(DMA_ERR_NOT_CONNECTED),
        };
        if let ConnKind::Remote { remote } = c.kind {
            return Ok(DmaTarget::Far { node: c.node, remote, size: c.size });
        }
        if c.dma_map.is_none() {
            let m = c.memfd.as_ref().ok_or(DMA_ERR_NOT_CONNECTED)?;
            let opts = remora_sys::MapOptions { readonly: !c.writable, fixed_addr: None };
            let map = Mapping::new(m.as_fd(), 0, c.size as usize, opts).map_err(|_| DMA_ERR_NOT_CONNECTED)?;
            c.dma_map = Some(Arc::new(map));
        }
        Ok(DmaTarget::Map(c.dma_map.clone().expect("made above")))
    }

    /// `SCIDisconnectSegment`. Returns the connection's kind (a proxied one must also be
    /// disconnected at its node).
    ///
    /// # Errors
    /// `UnknownHandle`.
    pub fn disconnect(&mut self, session: u64, conn: u64) -> Result<(ConnKind, u32), Error> {
        self.revoke();
        match self.conns.get(&conn) {
            Some(c) if c.session == session => {}
            _ => return Err(Error::UnknownHandle),
        }
        let c = self.conns.remove(&conn).expect("checked above");
        self.maps.retain(|_, m| m.target != MapTarget::Remote { conn });
        if let ConnKind::Local { seg } = c.kind {
            if let Some(s) = self.segments.get_mut(&seg) {
                s.importers.remove(&conn);
                if s.removed && s.importers.is_empty() {
                    self.segments.remove(&seg);
                } else {
                    self.tell_owner(seg, Event::SegmentDisconnected { seg, node: c.importer_node });
                }
            }
        }
        Ok((c.kind, c.node))
    }

    /// Mark the proxied connections with these remote handles lost, and tell their sessions.
    pub fn lose_proxied(&mut self, session: u64, remote: &[u64], reason: LostReason) {
        self.revoke();
        let hit: Vec<u64> = self
            .conns
            .values()
            .filter(|c| c.session == session && c.kind.remote().is_some_and(|r| remote.contains(&r)))
            .map(|c| c.conn)
            .collect();
        for conn in hit {
            if let Some(c) = self.conns.get_mut(&conn) {
                if c.alive {
                    c.alive = false;
                    self.tell(session, Event::ConnectionLost { conn, reason });
                }
            }
        }
    }

    /// Mark every proxied connection of `session` to `node` lost (its interrupt
    /// connections too), and tell the session.
    pub fn lose_node(&mut self, session: u64, node: u32, reason: LostReason) {
        self.lose_interrupts(session, node, reason);
        let remotes: Vec<u64> = self
            .conns
            .values()
            .filter(|c| c.session == session && c.node == node)
            .filter_map(|c| c.kind.remote())
            .collect();
        self.lose_proxied(session, &remotes, reason);
    }

    /// The local handle of a proxied connection.
    pub fn local_of_remote(&self, session: u64, remote: u64) -> Option<u64> {
        self.conns.values().find(|c| c.session == session && c.kind.remote() == Some(remote)).map(|c| c.conn)
    }

    /// Record a map (bookkeeping only: the mapping itself is the process's).
    pub fn map_note(&mut self, session: u64, m: MapStatus) {
        self.maps.insert((session, m.map), MapStatus { session, ..m });
    }

    /// Forget a map.
    pub fn unmap_note(&mut self, session: u64, map: u64) {
        self.maps.remove(&(session, map));
    }
}
