//! Reflective-memory groups (`SCI_FLAG_BROADCAST`): a node's member segment of a group is
//! an ordinary segment whose id is the group, and every member on this host is backed by
//! the same memfd (the personality finds it on the other nodes of the host before it
//! creates one), so one physical copy is every member's segment. The multicast connection
//! of a group (`SCIConnectSegment` to `DIS_BROADCAST_NODEID_GROUP_ALL`) maps that memfd
//! too: a store through it is, at memory speed, in every member's local map.

use super::{ConnKind, Connection, IdSpace, Registry};
use remora_proto::{Error, MULTICAST_GROUPS};
use remora_sys::Memfd;
use std::collections::BTreeSet;

/// What makes a segment a member of a reflective-memory group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Multicast {
    /// The group (also the segment's id).
    pub group: u32,
    /// Unicast connects to the segment are allowed (`SCI_FLAG_ALLOW_UNICAST`).
    pub unicast: bool,
}

/// Check a group number.
///
/// # Errors
/// `IllegalParameter` outside 0..[`MULTICAST_GROUPS`].
pub fn check_group(group: u32) -> Result<(), Error> {
    if group < MULTICAST_GROUPS {
        Ok(())
    } else {
        Err(Error::IllegalParameter(format!("multicast group {group} (groups are 0..{MULTICAST_GROUPS})")))
    }
}

impl Registry {
    /// The memory and size of this node's member segment of `group`, if it has one.
    pub fn group_memory(&self, group: u32) -> Option<(&Memfd, u64)> {
        let s = self.segment_by_id(IdSpace::Sisci, group)?;
        match (s.multicast, s.memfd.as_ref()) {
            (Some(m), Some(memfd)) if m.group == group && !s.removed => Some((memfd, s.size)),
            _ => None,
        }
    }

    /// Whether segment id `group` is taken on this node (a member must use it).
    pub fn group_id_used(&self, group: u32) -> bool {
        self.segment_by_id(IdSpace::Sisci, group).is_some()
    }

    /// `SCICreateSegment` with `SCI_FLAG_BROADCAST`: this node's member of `group`, of
    /// `size` bytes, over `memory` (the memfd the other members of this host share, or a
    /// new one when there are none yet).
    ///
    /// # Errors
    /// `IllegalParameter` for a bad group or a zero size, or a size beyond the group's
    /// memory on this host; `SegmentIdUsed` when the node has a segment with the group's id.
    pub fn create_group_segment(
        &mut self,
        session: u64,
        group: u32,
        size: u64,
        unicast: bool,
        memory: Memfd,
    ) -> Result<&super::Segment, Error> {
        check_group(group)?;
        if size == 0 {
            return Err(Error::IllegalParameter("segment size 0".into()));
        }
        if size > memory.size() {
            return Err(Error::IllegalParameter(format!(
                "group {group} has {} bytes on this host; a member of {size} bytes does not fit",
                memory.size()
            )));
        }
        if self.group_id_used(group) {
            return Err(Error::SegmentIdUsed);
        }
        let seg = self.handle();
        self.ids.insert((IdSpace::Sisci, group), seg);
        self.segments.insert(
            seg,
            super::Segment {
                seg,
                id: Some(group),
                space: IdSpace::Sisci,
                size,
                owner: session,
                memfd: Some(memory),
                prepared: false,
                available: false,
                private: false,
                shared: false,
                removed: false,
                attached: BTreeSet::new(),
                importers: BTreeSet::new(),
                dma_map: None,
                multicast: Some(Multicast { group, unicast }),
            },
        );
        Ok(&self.segments[&seg])
    }

    /// Record `session`'s multicast connection to `group`, whose memory on this host is
    /// `memory`: it holds the memory (the DMA engine reaches it like any other) and is
    /// released by `SCIDisconnectSegment` or the session's end.
    pub fn add_group_connection(&mut self, session: u64, group: u32, memory: Memfd) -> (u64, u64) {
        let conn = self.handle();
        let size = memory.size();
        self.conns.insert(
            conn,
            Connection {
                conn,
                session,
                node: remora_proto::BROADCAST_NODE,
                importer_node: self.node,
                id: group,
                size,
                kind: ConnKind::Group,
                alive: true,
                memfd: Some(memory),
                dma_map: None,
                writable: true,
            },
        );
        (conn, size)
    }
}
