//! Members that join or leave a group after its multicast connections were made (across
//! hosts): the legs added to, or dropped from, those connections, the members still copying
//! the group's contents, and the processes' word that their pagers took a leg in. The
//! waiting is the personality's (`personality/multicast/members.rs`).

use super::super::{ConnKind, Registry};
use remora_proto::Error;

impl Registry {
    /// The live multicast connections of `group` on this node: (handle, session, size).
    pub fn group_connections(&self, group: u32) -> Vec<(u64, u64, u64)> {
        self.conns
            .values()
            .filter(|c| c.kind == ConnKind::Group && c.id == group && c.alive)
            .map(|c| (c.conn, c.session, c.size))
            .collect()
    }

    /// The legs of multicast connection `conn`: (leg, its node, the name of the memory it
    /// reaches; 0 when unknown).
    pub fn legs_of(&self, conn: u64) -> Vec<(u64, u32, u64)> {
        let Some(legs) = self.group_legs.get(&conn) else { return vec![] };
        legs.iter()
            .filter_map(|l| {
                let c = self.conns.get(l)?;
                let memory = self.group_books.legs.get(l).map_or(0, |&(_, m)| m);
                Some((*l, c.node, memory))
            })
            .collect()
    }

    /// Record a leg of multicast connection `conn` (of `session`): the connection `remote`
    /// of node `node` (another host) to its member of `group`, `size` bytes of the memory
    /// named `memory`. Returns the leg's handle.
    #[allow(clippy::too_many_arguments)]
    pub fn add_group_leg(
        &mut self,
        conn: u64,
        session: u64,
        node: u32,
        group: u32,
        size: u64,
        remote: u64,
        memory: u64,
    ) -> u64 {
        let leg = self.add_proxied(session, node, group, size, remote, None);
        self.group_legs.entry(conn).or_default().push(leg);
        self.group_books.legs.insert(leg, (node, memory));
        leg
    }

    /// Forget leg `leg` of multicast connection `conn` (the caller disconnects it).
    pub fn drop_group_leg(&mut self, conn: u64, leg: u64) {
        if let Some(legs) = self.group_legs.get_mut(&conn) {
            legs.retain(|l| *l != leg);
        }
        self.group_books.legs.remove(&leg);
        self.group_books.ready.remove(&leg);
    }

    /// Whether stores through connection `conn` (a peer's) must wait: it reaches this
    /// node's member of a group that is still copying its contents from another host.
    pub fn group_filling(&self, conn: u64) -> bool {
        if self.group_books.filling.is_empty() {
            return false;
        }
        let Some(ConnKind::Local { seg }) = self.conns.get(&conn).map(|c| c.kind) else { return false };
        self.segments
            .get(&seg)
            .and_then(|s| s.multicast)
            .is_some_and(|m| self.group_books.filling.contains(&m.group))
    }

    /// `Request::GroupLegReady` from `session`: its process's pager took leg `leg` of
    /// multicast connection `conn` in (or let it go). Any session of the process that
    /// holds `conn` may say it.
    ///
    /// # Errors
    /// `UnknownHandle` when `leg` is no leg of `conn`, or `conn` belongs to another process.
    pub fn group_leg_ready(&mut self, session: u64, conn: u64, leg: u64) -> Result<(), Error> {
        let pid = |s: u64| self.sessions.get(&s).map(|s| s.pid);
        let owner = self.conns.get(&conn).map(|c| c.session).ok_or(Error::UnknownHandle)?;
        if pid(owner).is_none() || pid(owner) != pid(session) {
            return Err(Error::UnknownHandle);
        }
        if !self.group_legs.get(&conn).is_some_and(|l| l.contains(&leg)) {
            return Err(Error::UnknownHandle);
        }
        self.group_books.ready.insert(leg);
        Ok(())
    }

    /// Whether every one of `legs` was said ready (or is gone with its connection).
    pub fn legs_ready(&self, legs: &[u64]) -> bool {
        legs.iter().all(|l| self.group_books.ready.contains(l) || !self.conns.contains_key(l))
    }
}
