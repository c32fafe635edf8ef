//! Reflective-memory groups (`SCI_FLAG_BROADCAST`): a node's member segment of a group is
//! an ordinary segment whose id is the group, and every member on this host is backed by
//! the same memfd (the personality finds it on the other nodes of the host before it
//! creates one), so one physical copy is every member's segment. The multicast connection
//! of a group (`SCIConnectSegment` to `DIS_BROADCAST_NODEID_GROUP_ALL`) maps that memfd
//! too: a store through it is, at memory speed, in every member's local map.
//!
//! Across hosts, a multicast connection also holds one connection (a *leg*) to a member of
//! each other host that has one (`connect_member` on that host's node, answered whatever
//! the member's `SCI_FLAG_ALLOW_UNICAST`): the caller's DSM pager sends its stores down
//! every leg, and each lands in that host's memfd. The legs are released with it.

mod membership;

use super::{ConnKind, Connection, IdSpace, Registry};
use remora_proto::{Error, MULTICAST_GROUPS};
use remora_sys::Memfd;
use std::collections::{BTreeSet, HashMap};

/// The books of group membership across hosts.
#[derive(Debug, Default)]
pub struct GroupBooks {
    /// Each leg's node and the name of the memory it reaches ([`memory_name`]).
    pub legs: HashMap<u64, (u32, u64)>,
    /// Groups whose member on this node is still copying the group's contents from
    /// another host: stores of other hosts wait until it is done.
    pub filling: BTreeSet<u32>,
    /// Legs whose process said its pager took them in (or let them go).
    pub ready: BTreeSet<u64>,
    /// The last members that joined from other hosts, numbered: (number, group, node), so
    /// a multicast connect that was under way when one joined reaches it too.
    pub joins: Vec<(u64, u32, u32)>,
    /// The number of the next join.
    pub next_join: u64,
}

impl GroupBooks {
    /// Note that node `node` of another host has a new member of `group`.
    pub fn note_join(&mut self, group: u32, node: u32) {
        self.joins.push((self.next_join, group, node));
        self.next_join += 1;
        if self.joins.len() > 64 {
            self.joins.remove(0);
        }
    }

    /// The nodes that joined `group` since the join numbered `mark` (see `next_join`).
    pub fn joined_since(&self, group: u32, mark: u64) -> Vec<u32> {
        self.joins.iter().filter(|j| j.0 >= mark && j.1 == group).map(|j| j.2).collect()
    }
}

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
                events: Default::default(),
            },
        );
        Ok(&self.segments[&seg])
    }

    /// Record `session`'s multicast connection to `group`, whose memory on this host is
    /// `memory` (`None` when this host has no member: only `legs` reach the group, and DMA
    /// through it fails): it holds the memory (the DMA engine reaches it like any other)
    /// and is released by `SCIDisconnectSegment` or the session's end. `legs` are
    /// `session`'s connections to members on other hosts, released with it
    /// ([`Registry::take_group_legs`]). Returns the handle.
    pub fn add_group_connection(
        &mut self,
        session: u64,
        group: u32,
        memory: Option<Memfd>,
        size: u64,
        legs: Vec<u64>,
    ) -> u64 {
        let conn = self.handle();
        // Forget the legs of multicast connections that went with their session.
        let conns = &self.conns;
        self.group_legs.retain(|c, _| conns.contains_key(c));
        self.group_books.legs.retain(|l, _| conns.contains_key(l));
        if !legs.is_empty() {
            self.group_legs.insert(conn, legs);
        }
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
                memfd: memory,
                dma_map: None,
                writable: true,
                readable: true,
            },
        );
        conn
    }

    /// The legs of multicast connection `conn` (connections to members on other hosts),
    /// forgotten here: the caller disconnects them.
    pub fn take_group_legs(&mut self, conn: u64) -> Vec<u64> {
        let legs = self.group_legs.remove(&conn).unwrap_or_default();
        for l in &legs {
            self.group_books.legs.remove(l);
            self.group_books.ready.remove(l);
        }
        legs
    }

    /// `PeerRequest::ConnectGroup` from a node of another host: connect `session` (the
    /// asking node's, `importer_node`) to this node's member of `group`, whatever its
    /// unicast flag; available or not (a member is ready once created, as on one host). The
    /// connection reaches the group's whole memory on this host. Returns (handle, size,
    /// the memory's name: see [`memory_name`]).
    ///
    /// # Errors
    /// `NoSuchSegment` when this node holds no member; `System` when the memory cannot be
    /// shared.
    pub fn connect_member(
        &mut self,
        session: u64,
        importer_node: u32,
        group: u32,
    ) -> Result<(u64, u64, u64), Error> {
        check_group(group)?;
        let (memfd, _) = self.group_memory(group).ok_or(Error::NoSuchSegment)?;
        let keep = memfd.try_clone().map_err(|e| Error::System(e.to_string()))?;
        let name = memory_name(&keep);
        let size = keep.size();
        let seg = *self.ids.get(&(IdSpace::Sisci, group)).ok_or(Error::NoSuchSegment)?;
        let conn = self.handle();
        if let Some(s) = self.segments.get_mut(&seg) {
            s.importers.insert(conn);
        }
        self.conns.insert(
            conn,
            Connection {
                conn,
                session,
                node: self.node,
                importer_node,
                id: group,
                size,
                kind: ConnKind::Local { seg },
                alive: true,
                memfd: Some(keep),
                dma_map: None,
                writable: true,
                readable: true,
            },
        );
        Ok((conn, size, name))
    }
}

/// A name of a group's memory on this host, equal for every node of the host that shares
/// it and (with the boot id in it) different on another machine: the memfd's inode.
pub fn memory_name(memory: &Memfd) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default().hash(&mut h);
    let meta = memory.as_fd().try_clone_to_owned().and_then(|fd| std::fs::File::from(fd).metadata());
    match meta {
        Ok(m) => (m.dev(), m.ino()).hash(&mut h),
        // Without a name, every node is a host of its own (stores may then reach one
        // memory twice, in the same order per leg).
        Err(_) => (memory as *const Memfd as usize).hash(&mut h),
    }
    h.finish()
}
