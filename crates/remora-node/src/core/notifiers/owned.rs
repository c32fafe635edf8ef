//! Flows the owner of a plain interrupt reads itself (`remora_sys::intr`, the flows the
//! owner reads): the daemon books a duplicate of each flow that triggers the interrupt
//! from another host, and hands the set to the owner when it asks. A flow this node's
//! process dialed to another host's interrupt may carry that interrupt's owner's triggers
//! back ([`BackFlowEntry`], `inbound/back_flow.rs`): once one came, it is booked for the
//! owner of the interrupt they trigger here too.

use super::Interrupt;
use crate::core::{ConnKind, Registry};
use remora_proto::{Error, Role};
use remora_sys::intr::IntrPage;
use std::os::fd::{BorrowedFd, OwnedFd};

/// A flow set as [`Registry::interrupt_flows`] gives it: the generation, each flow's
/// connection handle and node, and a duplicate of each socket.
pub type FlowSet = (u32, Vec<u64>, Vec<u32>, Vec<OwnedFd>);

/// The most flows one interrupt's owner reads itself; the daemon alone reads any more. At
/// most what one reply may carry (a reply with more descriptors cannot be sent, and a
/// session whose reply cannot be sent is closed).
const MAX_OWNER_FLOWS: usize = remora_sys::seqpacket::MAX_FDS;

/// A flow of another host's process booked for an interrupt's owner.
#[derive(Debug)]
pub struct OwnerFlowEntry {
    /// The booking's id.
    pub id: u64,
    /// This node's handle of the connection the flow triggers through.
    pub conn: u64,
    /// The node the flow comes from.
    pub peer: u32,
    /// A flow this node dialed, whose backward direction carries `conn`'s triggers: it is
    /// not `conn`'s to end.
    pub back: bool,
    /// A duplicate of the socket.
    pub fd: OwnedFd,
}

/// This node's duplicate of a plain interrupt flow one of its processes dialed, kept to read
/// the triggers that come back on it.
#[derive(Debug)]
pub struct BackFlowEntry {
    /// The entry's id.
    pub id: u64,
    /// The dialing connection (this node's handle).
    pub conn: u64,
    /// The socket.
    pub fd: OwnedFd,
}

/// What the transport's thread of a shared flow needs: which booking, and its own map of
/// the interrupt's page.
#[derive(Debug)]
pub struct SharedBooking {
    /// The interrupt handle.
    pub intr: u64,
    /// The booking's id.
    pub id: u64,
    /// The generation of the owner's set that first holds the flow.
    pub joined: u32,
    /// The page.
    pub page: IntrPage,
}

impl Registry {
    /// Book flow `fd` of `peer`'s connection `conn` for the owner of the interrupt it
    /// triggers: only a plain interrupt of a process of this node, not removed, and not
    /// a shared number's fan-out. `back`: the flow was dialed from here and carries
    /// `conn`'s triggers back. `None`: the daemon alone reads it.
    pub fn share_flow(
        &mut self,
        peer: u32,
        conn: u64,
        fd: BorrowedFd<'_>,
        back: bool,
    ) -> Option<SharedBooking> {
        let c = self.intr_conns.get(&conn)?;
        let by_peer = self.sessions.get(&c.session).is_some_and(|s| s.role == Role::Peer { node: peer });
        let ConnKind::Local { seg: h } = c.target else { return None };
        if !by_peer || c.node != peer || c.data {
            return None;
        }
        let id = self.handle();
        let i: &mut Interrupt = self.interrupts.get_mut(&h)?;
        if i.owner == 0 || i.data || i.page.is_removed() || i.owner_flows.len() >= MAX_OWNER_FLOWS {
            return None;
        }
        let dup = fd.try_clone_to_owned().ok()?;
        let page = IntrPage::open(&i.memfd, i.event.try_clone().ok()?).ok()?;
        i.owner_flows.push(OwnerFlowEntry { id, conn, peer, back, fd: dup });
        let joined = i.page.flows_changed();
        Some(SharedBooking { intr: h, id, joined, page })
    }

    /// The flow booked as `id` for interrupt `intr` is no longer the owner's to read.
    pub fn unshare_flow(&mut self, intr: u64, id: u64) {
        if let Some(i) = self.interrupts.get_mut(&intr) {
            let before = i.owner_flows.len();
            i.owner_flows.retain(|f| f.id != id);
            if i.owner_flows.len() != before {
                i.page.flows_changed();
            }
        }
    }

    /// The flows `session`'s interrupt `intr` may read itself: the set's generation, each
    /// flow's connection handle and node, and a duplicate of each socket.
    ///
    /// # Errors
    /// `UnknownHandle` for an interrupt `session` does not own; `System` when a socket
    /// cannot be duplicated.
    pub fn interrupt_flows(&self, session: u64, intr: u64) -> Result<FlowSet, Error> {
        let i = self.interrupts.get(&intr).filter(|i| i.owner == session).ok_or(Error::UnknownHandle)?;
        let gen = i.page.flows_generation();
        let mut conns = Vec::with_capacity(i.owner_flows.len());
        let mut nodes = Vec::with_capacity(i.owner_flows.len());
        let mut fds = Vec::with_capacity(i.owner_flows.len());
        for f in &i.owner_flows {
            conns.push(f.conn);
            nodes.push(f.peer);
            fds.push(f.fd.try_clone().map_err(|e| Error::System(e.to_string()))?);
        }
        Ok((gen, conns, nodes, fds))
    }

    /// Keep `fd`, a duplicate of the flow dialed for this node's interrupt connection
    /// `conn`, to read what comes back on it; its id.
    pub fn keep_back_flow(&mut self, conn: u64, fd: OwnedFd) -> u64 {
        let id = self.handle();
        self.back_flows.push(BackFlowEntry { id, conn, fd });
        id
    }

    /// The flow kept as `id` ended.
    pub fn forget_back_flow(&mut self, id: u64) {
        self.back_flows.retain(|f| f.id != id);
    }

    /// Connection `conn` ended: the flows dialed for it are shut for writing, so that the
    /// far node ends them once it served what came before (what comes back meanwhile is
    /// still read).
    pub(super) fn end_back_flows(&mut self, conn: u64) {
        for f in self.back_flows.iter().filter(|f| f.conn == conn) {
            let _ = rustix::net::shutdown(&f.fd, rustix::net::Shutdown::Write);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use tokio::sync::mpsc::unbounded_channel;

    /// Books with an owner (a process of node 4) and a session standing for node 9's.
    fn books() -> (Registry, u64, u64) {
        let mut r = Registry::new(4);
        let (tx, _) = unbounded_channel();
        let owner = r.add_session(1, Role::Client, tx);
        let (tx, _) = unbounded_channel();
        let peer = r.add_session(0, Role::Peer { node: 9 }, tx);
        (r, owner, peer)
    }

    #[test]
    fn a_flow_is_booked_for_the_owner_and_ends_with_its_connection() {
        let (mut r, owner, peer) = books();
        let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
        let (data, dno, _, _) = r.create_interrupt(owner, Some(6), true, false).unwrap();
        let Ok((conn, _)) = r.connect_interrupt(peer, 9, intno, false) else { panic!("connect") };
        let Ok((dconn, _)) = r.connect_interrupt(peer, 9, dno, true) else { panic!("connect") };
        let (mine, mut far) = UnixStream::pair().unwrap();
        // Only the connecting node's session books; data interrupts stay the daemon's.
        assert!(r.share_flow(8, conn, mine.as_fd(), false).is_none());
        assert!(r.share_flow(9, dconn, mine.as_fd(), false).is_none());
        let before = r.interrupt_flows(owner, intr).unwrap().0;
        let b = r.share_flow(9, conn, mine.as_fd(), false).unwrap();
        assert_eq!(b.intr, intr);
        let (gen, conns, nodes, fds) = r.interrupt_flows(owner, intr).unwrap();
        assert_eq!(nodes, vec![9]);
        assert_ne!(gen, before);
        assert_eq!(b.joined, gen);
        assert_eq!((conns, fds.len()), (vec![conn], 1));
        // Only the owner asks for them.
        assert_eq!(r.interrupt_flows(peer, intr).unwrap_err(), Error::UnknownHandle);
        assert!(r.interrupt_flows(owner, data).unwrap().1.is_empty());
        // The connection's end ends the flow for its owner too.
        r.disconnect_interrupt(peer, conn).unwrap();
        let mut sink = [0u8; 1];
        assert_eq!(far.read(&mut sink).unwrap(), 0, "the flow was shut");
        r.unshare_flow(b.intr, b.id);
        assert!(r.interrupt_flows(owner, intr).unwrap().1.is_empty());
        assert_ne!(r.interrupt_flows(owner, intr).unwrap().0, gen);
    }

    #[test]
    fn a_flow_carrying_triggers_back_is_not_its_connections_to_end() {
        let (mut r, owner, peer) = books();
        let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
        let Ok((conn, _)) = r.connect_interrupt(peer, 9, intno, false) else { panic!("connect") };
        // A flow our process dialed to node 9 for its own connection `mine`, whose backward
        // direction carries node 9's connection `conn` to our interrupt.
        let mine = r.add_proxied_interrupt(owner, 9, 7, false, 77, true);
        let (dialed, mut far) = UnixStream::pair().unwrap();
        r.keep_back_flow(mine, dialed.as_fd().try_clone_to_owned().unwrap());
        r.share_flow(9, conn, dialed.as_fd(), true).unwrap();
        let (_, conns, nodes, _) = r.interrupt_flows(owner, intr).unwrap();
        assert_eq!((conns, nodes), (vec![conn], vec![9]));
        // The carried connection's end takes it from the owner's set, and leaves it open.
        r.disconnect_interrupt(peer, conn).unwrap();
        assert!(r.interrupt_flows(owner, intr).unwrap().1.is_empty());
        far.set_nonblocking(true).unwrap();
        let mut sink = [0u8; 1];
        assert_eq!(far.read(&mut sink).unwrap_err().kind(), std::io::ErrorKind::WouldBlock, "still open");
        // The dialing connection's end shuts it for writing: the far node sees its end.
        r.disconnect_interrupt(owner, mine).unwrap();
        assert_eq!(far.read(&mut sink).unwrap(), 0, "shut for writing");
        assert_eq!(r.back_flows.len(), 1, "kept until its reader ends");
    }

    #[test]
    fn no_more_flows_are_booked_than_one_reply_carries() {
        let (mut r, owner, peer) = books();
        let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
        let socks: Vec<_> = (0..MAX_OWNER_FLOWS + 1).map(|_| UnixStream::pair().unwrap()).collect();
        let booked: Vec<_> = socks
            .iter()
            .map(|(mine, _)| {
                let Ok((conn, _)) = r.connect_interrupt(peer, 9, intno, false) else { panic!("connect") };
                r.share_flow(9, conn, mine.as_fd(), false)
            })
            .collect();
        assert!(booked[..MAX_OWNER_FLOWS].iter().all(Option::is_some));
        assert!(booked[MAX_OWNER_FLOWS].is_none(), "the daemon alone reads one more");
        assert_eq!(r.interrupt_flows(owner, intr).unwrap().3.len(), remora_sys::seqpacket::MAX_FDS);
    }
}
