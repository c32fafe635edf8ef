//! Reflective memory (`SCI_FLAG_BROADCAST`): a member segment of a multicast group on this
//! node, and the group's multicast connection. Every member of a group on this host shares
//! one memory (the node daemons see to it), and the multicast connection maps it as well,
//! so a store through a map of the multicast connection is in every member's local map at
//! once; `SCIFlush` after it is the point Dolphin programs already mark. A late member sees
//! what the group holds.
//!
//! Across hosts, the multicast connection also holds a connection (a *leg*) to one member
//! of each other host that has one, and a map of it is a DSM map
//! ([`remora_client::dsm::DsmMap::multicast`]): the pager sends each picture's changed
//! bytes down every leg, where they land in that host's group memory (so in every member
//! of that host), and writes them straight into this host's group memory. `SCIFlush` sends
//! them at once; `SCIStoreBarrier` waits until every member host has them.

mod legs;

pub(crate) use legs::{fanout_legs, on_leg};

use crate::map::{Backing, Map, MapFlags, MapParent, SegmentRange};
use crate::segment::{Link, LocalCallback, LocalSegment, RemoteSegment};
use crate::{check_adapter, timeout_ms, Descriptor, Error, Result};
use remora_proto::{MapTarget, Request};
use remora_sys::{AsFd, Mapping};
use std::sync::Arc;
use std::time::Duration;

/// The node id that names every member of a group (`DIS_BROADCAST_NODEID_GROUP_ALL`).
pub const BROADCAST_NODE: u32 = remora_proto::BROADCAST_NODE;
/// How many multicast groups a node offers (ids 0..6, `SCI_Q_ADAPTER_MCAST_MAX_GROUPS`).
pub const MULTICAST_GROUPS: u32 = remora_proto::MULTICAST_GROUPS;

impl LocalSegment {
    /// `SCICreateSegment` with `SCI_FLAG_BROADCAST`: this node's member segment of group
    /// `group`, whose id is the group. Its memory is the group's on this host: a member made
    /// while others exist shows what they hold, and the first member's size is the group's
    /// (a later member may be as large or smaller). Without `allow_unicast`
    /// (`SCI_FLAG_ALLOW_UNICAST`) only the multicast connection reaches it; an ordinary
    /// connect is refused with [`Error::Access`].
    ///
    /// # Errors
    /// `SCICreateSegment`: [`Error::IllegalParameter`] for a group outside 0..6, a zero
    /// size or a size beyond the group's memory; [`Error::SegmentIdUsed`] when the node has
    /// a segment with that id; [`Error::NoSpace`]; [`Error::IllegalOperation`] on a closed
    /// descriptor.
    pub fn create_broadcast(
        desc: &Descriptor,
        group: u32,
        size: usize,
        allow_unicast: bool,
        callback: Option<LocalCallback>,
    ) -> Result<LocalSegment> {
        let req = Request::CreateGroupSegment { group, size: size as u64, unicast: allow_unicast };
        let (reply, fds) = desc.live()?.session.request(req, &[])?;
        LocalSegment::from_reply(desc, reply, fds, callback)
    }
}

impl RemoteSegment {
    /// `SCIConnectSegment` to [`BROADCAST_NODE`] with `SCI_FLAG_BROADCAST`: the multicast
    /// connection of `group`, waiting up to `timeout` (`None`: forever) for a member to
    /// exist on this host or on a node of another host of the cluster (every node of the
    /// cluster file is asked; links not up yet are dialed). Its node is
    /// [`BROADCAST_NODE`], its id the group, its size the group's (the smallest among the
    /// hosts); a map of it (`SCIMapRemoteSegment` with `SCI_FLAG_BROADCAST`) stores into
    /// every member. A host whose first member joins later is added to it (and a host
    /// whose member is removed dropped) while it lives: a store flushed after that
    /// member's create returned reaches it. Where the cluster names other hosts, its maps
    /// are DSM maps even while every member is on this host (`broadcast/legs.rs`).
    ///
    /// # Errors
    /// `SCIConnectSegment`: [`Error::NoSuchSegment`] when the time ran out with no member;
    /// [`Error::IllegalParameter`] for a group outside 0..6; [`Error::NoSuchAdapter`];
    /// [`Error::IllegalOperation`] on a closed descriptor.
    pub fn connect_group(
        desc: &Descriptor,
        group: u32,
        adapter: u32,
        timeout: Option<Duration>,
    ) -> Result<RemoteSegment> {
        check_adapter(adapter)?;
        let req = Request::ConnectGroup { group, timeout_ms: timeout_ms(timeout) };
        let (reply, fds) = desc.live()?.session.request(req, &[])?;
        let seg = RemoteSegment::adopt(desc, BROADCAST_NODE, group, &reply, fds)?;
        if let remora_proto::Reply::GroupConnected { conn, legs, .. } = reply {
            legs::register(&seg, &desc.inner.cfg, conn, legs);
        }
        Ok(seg)
    }

    /// `SCIMapRemoteSegment` of a multicast connection whose group has members on other
    /// hosts: a DSM map whose stores go down every leg and into this host's group memory.
    pub(crate) fn map_multicast(
        &self,
        l: &Link,
        offset: usize,
        size: usize,
        addr: Option<usize>,
        flags: MapFlags,
    ) -> Result<Map> {
        if addr.is_some() {
            return Err(Error::NotSupported);
        }
        match offset.checked_add(size) {
            Some(end) if size > 0 && end <= l.size => {}
            _ if size == 0 => return Err(Error::SizeAlignment),
            _ => return Err(Error::OutOfRange),
        }
        if flags.readonly {
            // Nothing to send: reads come from this host's members (or the first leg).
            return Err(Error::NotSupported);
        }
        let local = match &l.memfd {
            Some(m) => Some(Arc::new(Mapping::new(m.as_fd(), 0, m.size() as usize, Default::default())?)),
            None => None,
        };
        // The pager's session of the descriptor for the group (its node number), as for
        // any map of another host.
        let pager_session = self.inner.desc.inner.pager_session(self.node())?;
        // No leg may change between reading them and the pager taking the map in.
        let _held = legs::mapping();
        let homes: Vec<Arc<dyn remora_client::dsm::RemoteRange>> = fanout_legs(l.conn)
            .unwrap_or_else(|| l.legs.clone())
            .into_iter()
            .map(|conn| Arc::new(SegmentRange { conn }) as _)
            .collect();
        let dsm = remora_client::dsm::DsmMap::multicast(
            pager_session,
            l.conn,
            homes,
            local,
            l.size as u64,
            offset as u64,
            size,
        )
        .map_err(|e| match e {
            remora_client::dsm::DsmError::Unavailable(_) => Error::NotSupported,
            remora_client::dsm::DsmError::Resources(_) => Error::NoSpace,
        })?;
        Ok(Map::wrap(
            l.session.clone(),
            &self.inner.desc,
            Backing::Dsm(dsm),
            offset,
            size,
            flags,
            MapTarget::Remote { conn: l.conn },
            &self.inner.deps,
            MapParent::Remote(self.clone()),
        ))
    }
}
