//! Reflective memory (`SCI_FLAG_BROADCAST`): a member segment of a multicast group on this
//! node, and the group's multicast connection. Every member of a group on this host shares
//! one memory (the node daemons see to it), and the multicast connection maps it as well,
//! so a store through a map of the multicast connection is in every member's local map at
//! once; `SCIFlush` after it is the point Dolphin programs already mark. A late member sees
//! what the group holds. Members on another host are not reached yet (see
//! [`RemoteSegment::connect_group`]).

use crate::segment::{LocalCallback, LocalSegment, RemoteSegment};
use crate::{check_adapter, timeout_ms, Descriptor, Error, Result};
use remora_proto::Request;
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
    /// exist on this host. Its node is [`BROADCAST_NODE`], its id the group, its size the
    /// group's; a map of it (`SCIMapRemoteSegment` with `SCI_FLAG_BROADCAST`) stores into
    /// every member.
    ///
    /// # Errors
    /// `SCIConnectSegment`: [`Error::NoSuchSegment`] when the time ran out with no member;
    /// [`Error::NotSupported`] when a node of another host holds a member (multicast across
    /// hosts is not implemented); [`Error::IllegalParameter`] for a group outside 0..6;
    /// [`Error::NoSuchAdapter`]; [`Error::IllegalOperation`] on a closed descriptor.
    pub fn connect_group(
        desc: &Descriptor,
        group: u32,
        adapter: u32,
        timeout: Option<Duration>,
    ) -> Result<RemoteSegment> {
        check_adapter(adapter)?;
        let req = Request::ConnectGroup { group, timeout_ms: timeout_ms(timeout) };
        let (reply, fds) = desc.live()?.session.request(req, &[]).map_err(|e| match e {
            // The daemon's answer for a group with members on another host.
            remora_client::ClientError::Daemon(remora_proto::Error::ConnRefused) => Error::NotSupported,
            other => Error::from(other),
        })?;
        RemoteSegment::adopt(desc, BROADCAST_NODE, group, &reply, fds)
    }
}
