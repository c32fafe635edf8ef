//! Flows the owner of a plain interrupt reads itself (`remora_sys::intr`, the flows the
//! owner reads): the daemon books a duplicate of each flow that triggers the interrupt
//! from another host, and hands the set to the owner when it asks. A flow this node's
//! process dialed to another host's interrupt may carry that interrupt's owner's triggers
//! back ([`BackFlowEntry`], `inbound/back_flow.rs`): once one came, it is booked for the
//! owner of the interrupt they trigger here too.

use super::Interrupt;
use crate::core::{ConnKind, IntrConn, Registry};
use remora_proto::{Error, Role};
use remora_sys::intr::IntrPage;
use std::os::fd::{BorrowedFd, OwnedFd};

/// The most ended connections a back flow that carries none yet remembers.
pub const ENDED_KEPT: usize = 64;

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
    /// Taken from the owner to be read by the daemon alone ([`Registry::read_flow_alone`]):
    /// not in the owner's set, but kept so that `conn`'s end still ends it.
    pub alone: bool,
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
    /// The session that dialed it (the process whose socket it is).
    pub dialer: u64,
    /// The node it was dialed to.
    pub peer: u32,
    /// That node's session that owns the interrupt it was dialed to ([`IntrConn::far`]).
    pub far: u64,
    /// The connection whose triggers it carries back once one came, and that connection's
    /// interrupt here: kept while the flow lives, so that triggers sent before that
    /// connection's disconnect, which the disconnect overtook, are still counted.
    pub carries: Option<(u64, u64)>,
    /// While it carries none: that process's connections that ended meanwhile, with their
    /// interrupts here (at most `ENDED_KEPT`), so that triggers of one sent back before its
    /// disconnect, which overtook them, are still counted.
    pub ended: Vec<(u64, u64)>,
    /// The socket.
    pub fd: OwnedFd,
    /// Signalled when the dialing connection ends (`end_back_flows`): the reader blocks on
    /// the socket and this, with no periodic look (`None`: none could be made; it looks).
    pub bell: Option<remora_sys::sync::EventFd>,
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
    /// a shared number's fan-out. `back`: the flow was dialed from here by that session and
    /// carries `conn`'s triggers back; it is booked only when the interrupt is that
    /// session's own (another process never gets its socket). `None`: the daemon alone
    /// reads it.
    pub fn share_flow(
        &mut self,
        peer: u32,
        conn: u64,
        fd: BorrowedFd<'_>,
        back: Option<u64>,
    ) -> Option<SharedBooking> {
        let c = self.intr_conns.get(&conn)?;
        let by_peer = self.sessions.get(&c.session).is_some_and(|s| s.role == Role::Peer { node: peer });
        let ConnKind::Local { seg: h } = c.target else { return None };
        // A flow implies the connection counted far: the owner's waits are on the bell.
        if !by_peer || !c.afar || c.node != peer || c.data {
            return None;
        }
        let id = self.handle();
        let i: &mut Interrupt = self.interrupts.get_mut(&h)?;
        let offered = i.owner_flows.iter().filter(|f| !f.alone).count();
        if i.owner == 0 || i.data || i.page.is_removed() || offered >= MAX_OWNER_FLOWS {
            return None;
        }
        if back.is_some_and(|dialer| dialer != i.owner) {
            return None;
        }
        let back = back.is_some();
        let dup = fd.try_clone_to_owned().ok()?;
        let page = IntrPage::open(&i.memfd, i.event.try_clone().ok()?).ok()?;
        i.owner_flows.push(OwnerFlowEntry { id, conn, peer, back, alone: false, fd: dup });
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

    /// The flow booked as `id` for interrupt `intr` is read by the daemon alone from now on
    /// (`SharedFlow::leave`): it leaves the owner's set (its generation moves on), and stays
    /// in the books until the flow ends ([`Registry::unshare_flow`]), so that its
    /// connection's end shuts it for writing as it does the flows still shared
    /// (`disconnect_interrupt`). Forgotten here, the daemon's thread read it on until the
    /// far end closed it, which a far host that stayed silent never did.
    pub fn read_flow_alone(&mut self, intr: u64, id: u64) {
        if let Some(i) = self.interrupts.get_mut(&intr) {
            if let Some(f) = i.owner_flows.iter_mut().find(|f| f.id == id && !f.alone) {
                f.alone = true;
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
        for f in i.owner_flows.iter().filter(|f| !f.alone) {
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
        let (dialer, peer, far) =
            self.intr_conns.get(&conn).map_or((0, 0, 0), |c| (c.session, c.node, c.far));
        let ended = Vec::new();
        let bell = remora_sys::sync::EventFd::new().ok();
        self.back_flows.push(BackFlowEntry { id, conn, dialer, peer, far, carries: None, ended, fd, bell });
        id
    }

    /// A duplicate of back flow `id`'s bell, which rings when its dialing connection ends.
    pub fn back_flow_bell(&self, id: u64) -> Option<remora_sys::sync::EventFd> {
        self.back_flows.iter().find(|f| f.id == id)?.bell.as_ref()?.try_clone().ok()
    }

    /// The session that dialed back flow `id` (0: none kept).
    pub fn back_flow_dialer(&self, id: u64) -> u64 {
        self.back_flows.iter().find(|f| f.id == id).map_or(0, |f| f.dialer)
    }

    /// Connection `conn` (this node's handle) was made by `peer`'s session `far`: note it;
    /// the owner of the interrupt it reaches (0: a shared number's).
    pub fn bind_far_session(&mut self, conn: u64, far: u64) -> u64 {
        let Some(c) = self.intr_conns.get_mut(&conn) else { return 0 };
        c.far = far;
        let ConnKind::Local { seg: h } = c.target else { return 0 };
        self.interrupts.get(&h).map_or(0, |i| i.owner)
    }

    /// Whether back flow `id`, dialed from here to `peer`, may carry connection `conn`'s
    /// triggers: a plain connection `peer` made to an interrupt of this node, made by the
    /// very session there that owns the interrupt the flow was dialed to (another process
    /// of `peer` never triggers through it what it did not connect to). Why not, if not.
    ///
    /// # Errors
    /// What is wrong with the frame, for the log.
    pub fn may_carry_back(&self, id: u64, peer: u32, conn: u64) -> Result<(), &'static str> {
        let f = self.back_flows.iter().find(|f| f.id == id).ok_or("the flow is no longer kept")?;
        if f.peer == peer && f.carries.is_none() && f.ended.iter().any(|(c, _)| *c == conn) {
            // Ended since it was sent (`trigger_carried` counts it).
            return Ok(());
        }
        let c: &IntrConn = self.intr_conns.get(&conn).ok_or("no such connection")?;
        let by_peer = self.sessions.get(&c.session).is_some_and(|s| s.role == Role::Peer { node: peer });
        if !by_peer || c.node != peer || !matches!(c.target, ConnKind::Local { .. }) {
            return Err("not a connection of the flow's node to an interrupt of this one");
        }
        if c.data {
            return Err("a data interrupt's connection");
        }
        if f.far == 0 || c.far != f.far {
            return Err("a connection of another process than the one the flow was dialed to");
        }
        if f.carries.is_some_and(|(carried, _)| carried != conn) {
            return Err("a second connection on a flow that carries another");
        }
        Ok(())
    }

    /// Back flow `id` carries connection `conn`'s triggers from now on (the first time).
    pub fn carry_back(&mut self, id: u64, conn: u64) {
        let Some(ConnKind::Local { seg: h }) = self.intr_conns.get(&conn).map(|c| c.target) else { return };
        if let Some(f) = self.back_flows.iter_mut().find(|f| f.id == id && f.carries.is_none()) {
            f.carries = Some((conn, h));
        }
    }

    /// A plain trigger of connection `conn` that came back on flow `id` after `conn`
    /// ended: counted on the interrupt the flow carried it to (the disconnect, through the
    /// daemons, overtook it).
    ///
    /// # Errors
    /// `NoSuchIntno` when the flow did not carry `conn`, or the interrupt is gone.
    pub fn trigger_carried(&mut self, id: u64, conn: u64) -> Result<(), Error> {
        let f = self.back_flows.iter_mut().find(|f| f.id == id).ok_or(Error::NoSuchIntno)?;
        let h = match f.carries {
            Some((c, h)) if c == conn => h,
            Some(_) => return Err(Error::NoSuchIntno),
            // Its first trigger back, and its connection ended meanwhile.
            None => {
                let (_, h) = *f.ended.iter().find(|(c, _)| *c == conn).ok_or(Error::NoSuchIntno)?;
                f.carries = Some((conn, h));
                f.ended = Vec::new();
                h
            }
        };
        self.trigger_target(h, None)
    }

    /// Plain connection `conn` (`c`), which another node's process made to an interrupt of
    /// this node, ended: the back flows dialed to that process that carry nothing yet
    /// remember it ([`BackFlowEntry::ended`]).
    pub(super) fn note_ended_for_back_flows(&mut self, conn: u64, c: &IntrConn) {
        let ConnKind::Local { seg: h } = c.target else { return };
        if c.data || c.far == 0 {
            return;
        }
        for f in
            self.back_flows.iter_mut().filter(|f| f.carries.is_none() && f.peer == c.node && f.far == c.far)
        {
            if f.ended.len() >= ENDED_KEPT {
                f.ended.remove(0);
            }
            f.ended.push((conn, h));
        }
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
            if let Some(b) = &f.bell {
                b.signal();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
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
        let Ok((conn, _)) = r.connect_interrupt(peer, 9, intno, false, true) else { panic!("connect") };
        let Ok((dconn, _)) = r.connect_interrupt(peer, 9, dno, true, true) else { panic!("connect") };
        let (mine, mut far) = UnixStream::pair().unwrap();
        // Only the connecting node's session books; data interrupts stay the daemon's.
        assert!(r.share_flow(8, conn, mine.as_fd(), None).is_none());
        assert!(r.share_flow(9, dconn, mine.as_fd(), None).is_none());
        let before = r.interrupt_flows(owner, intr).unwrap().0;
        let b = r.share_flow(9, conn, mine.as_fd(), None).unwrap();
        assert_eq!(b.intr, intr);
        let (gen, conns, nodes, fds) = r.interrupt_flows(owner, intr).unwrap();
        assert_eq!(nodes, vec![9]);
        assert_ne!(gen, before);
        assert_eq!(b.joined, gen);
        assert_eq!((conns, fds.len()), (vec![conn], 1));
        // Only the owner asks for them.
        assert_eq!(r.interrupt_flows(peer, intr).unwrap_err(), Error::UnknownHandle);
        assert!(r.interrupt_flows(owner, data).unwrap().1.is_empty());
        // The connection's end takes the flow from its owner at once, and ends it for
        // writing only: the far end may still send (a socket shut for reading answered
        // with a reset, which threw away what the owner had sent back on it).
        r.disconnect_interrupt(peer, conn).unwrap();
        let (moved, conns, _, _) = r.interrupt_flows(owner, intr).unwrap();
        assert!(conns.is_empty());
        assert_ne!(moved, gen);
        let mut sink = [0u8; 1];
        assert_eq!(far.read(&mut sink).unwrap(), 0, "the flow was shut");
        far.write_all(b"late").expect("the flow was shut for reading");
        r.unshare_flow(b.intr, b.id);
        assert!(r.interrupt_flows(owner, intr).unwrap().1.is_empty());
        assert_ne!(r.interrupt_flows(owner, intr).unwrap().0, gen);
    }

    #[test]
    fn a_flow_carrying_triggers_back_is_not_its_connections_to_end() {
        let (mut r, owner, peer) = books();
        let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
        let Ok((conn, _)) = r.connect_interrupt(peer, 9, intno, false, true) else { panic!("connect") };
        // A flow our process dialed to node 9 for its own connection `mine`, whose backward
        // direction carries node 9's connection `conn` to our interrupt.
        let mine = r.add_proxied_interrupt(owner, 9, 7, false, 77, true, 0);
        let (dialed, mut far) = UnixStream::pair().unwrap();
        r.keep_back_flow(mine, dialed.as_fd().try_clone_to_owned().unwrap());
        r.share_flow(9, conn, dialed.as_fd(), Some(owner)).unwrap();
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

    /// Review 99: what comes back on a flow is bound to the far process the flow was dialed
    /// to (not any process of its node), the flow is booked only for the process that
    /// dialed it, it carries one connection, and a trigger of that connection that its
    /// disconnect overtook is still counted while the flow lives.
    #[test]
    fn what_comes_back_is_bound_to_the_processes_of_the_flow() {
        let (mut r, owner, x) = books();
        let (tx, _) = unbounded_channel();
        let y = r.add_session(0, Role::Peer { node: 9 }, tx);
        let (tx, _) = unbounded_channel();
        let other = r.add_session(2, Role::Client, tx);
        let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
        let (theirs, tno, _, _) = r.create_interrupt(other, Some(6), false, false).unwrap();
        let (_, dno, _, _) = r.create_interrupt(owner, Some(7), true, false).unwrap();
        // Node 9's process X (session 100 there) and Y (200) connect to our interrupts.
        let connect = |r: &mut Registry, s: u64, no: u32, data: bool, far: u64| {
            let Ok((c, _)) = r.connect_interrupt(s, 9, no, data, true) else { panic!("connect") };
            (c, r.bind_far_session(c, far))
        };
        let (cx, named) = connect(&mut r, x, intno, false, 100);
        assert_eq!(named, owner, "the connect's answer names the interrupt's owner");
        let (cy, _) = connect(&mut r, y, intno, false, 200);
        let (cx_theirs, _) = connect(&mut r, x, tno, false, 100);
        let (cx_data, _) = connect(&mut r, x, dno, true, 100);
        // Our process dialed a flow to X's interrupt.
        let mine = r.add_proxied_interrupt(owner, 9, 8, false, 77, true, 100);
        let (dialed, _far) = UnixStream::pair().unwrap();
        let id = r.keep_back_flow(mine, dialed.as_fd().try_clone_to_owned().unwrap());
        assert!(r.may_carry_back(id, 9, cy).unwrap_err().contains("another process"));
        assert!(r.may_carry_back(id, 8, cx).is_err(), "another node");
        assert!(r.may_carry_back(id, 9, cx_data).unwrap_err().contains("data"));
        assert!(r.may_carry_back(id, 9, 12345).is_err(), "no such connection");
        assert!(r.may_carry_back(id, 9, cx_theirs).is_ok());
        // Another process's interrupt: the daemon reads the flow alone.
        assert!(r.share_flow(9, cx_theirs, dialed.as_fd(), Some(owner)).is_none());
        assert!(r.interrupt_flows(other, theirs).unwrap().1.is_empty());
        assert!(r.may_carry_back(id, 9, cx).is_ok());
        r.trigger_interrupt(x, cx, None).unwrap();
        r.carry_back(id, cx);
        assert!(r.may_carry_back(id, 9, cx_theirs).unwrap_err().contains("second connection"));
        assert!(r.share_flow(9, cx, dialed.as_fd(), Some(owner)).is_some());
        // The disconnect overtook a trigger: still counted, on our interrupt.
        r.disconnect_interrupt(x, cx).unwrap();
        let pending = |r: &Registry| r.interrupts[&intr].page.pending();
        let before = pending(&r);
        r.trigger_carried(id, cx).unwrap();
        assert_eq!(pending(&r), before + 1);
        assert_eq!(r.trigger_carried(id, cy).unwrap_err(), Error::NoSuchIntno, "not what it carried");
        r.disconnect_interrupt(y, cy).unwrap();
        assert_eq!(r.trigger_carried(id, cy).unwrap_err(), Error::NoSuchIntno, "nor another process's");
        // Until the flow ends.
        r.forget_back_flow(id);
        assert_eq!(r.trigger_carried(id, cx).unwrap_err(), Error::NoSuchIntno);
    }

    /// A connection whose very first triggers back its disconnect overtook: still counted.
    #[test]
    fn a_first_trigger_back_that_its_disconnect_overtook_is_counted() {
        let (mut r, owner, x) = books();
        let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
        let Ok((cx, _)) = r.connect_interrupt(x, 9, intno, false, true) else { panic!("connect") };
        r.bind_far_session(cx, 100);
        let mine = r.add_proxied_interrupt(owner, 9, 8, false, 77, true, 100);
        let other = r.add_proxied_interrupt(owner, 9, 8, false, 78, true, 300);
        let (dialed, _far) = UnixStream::pair().unwrap();
        let id = r.keep_back_flow(mine, dialed.as_fd().try_clone_to_owned().unwrap());
        let id2 = r.keep_back_flow(other, dialed.as_fd().try_clone_to_owned().unwrap());
        r.disconnect_interrupt(x, cx).unwrap();
        assert!(r.may_carry_back(id, 9, cx).is_ok());
        assert!(r.may_carry_back(id2, 9, cx).is_err(), "a flow dialed to another process");
        let before = r.interrupts[&intr].page.pending();
        r.trigger_carried(id, cx).unwrap();
        r.trigger_carried(id, cx).unwrap();
        assert_eq!(r.interrupts[&intr].page.pending(), before + 2);
        assert_eq!(r.back_flows.iter().find(|f| f.id == id).unwrap().carries, Some((cx, intr)));
    }

    #[test]
    fn no_more_flows_are_booked_than_one_reply_carries() {
        let (mut r, owner, peer) = books();
        let (intr, intno, _, _) = r.create_interrupt(owner, Some(5), false, false).unwrap();
        let socks: Vec<_> = (0..MAX_OWNER_FLOWS + 1).map(|_| UnixStream::pair().unwrap()).collect();
        let booked: Vec<_> = socks
            .iter()
            .map(|(mine, _)| {
                let Ok((conn, _)) = r.connect_interrupt(peer, 9, intno, false, true) else {
                    panic!("connect")
                };
                r.share_flow(9, conn, mine.as_fd(), None)
            })
            .collect();
        assert!(booked[..MAX_OWNER_FLOWS].iter().all(Option::is_some));
        assert!(booked[MAX_OWNER_FLOWS].is_none(), "the daemon alone reads one more");
        assert_eq!(r.interrupt_flows(owner, intr).unwrap().3.len(), remora_sys::seqpacket::MAX_FDS);
        // A flow the daemon took to read alone leaves the set, and makes room for another.
        let first = booked[0].as_ref().unwrap();
        let gen = r.interrupt_flows(owner, intr).unwrap().0;
        r.read_flow_alone(first.intr, first.id);
        let (moved, _, _, fds) = r.interrupt_flows(owner, intr).unwrap();
        assert_ne!(moved, gen);
        assert_eq!(fds.len(), MAX_OWNER_FLOWS - 1);
        let Ok((conn, _)) = r.connect_interrupt(peer, 9, intno, false, true) else { panic!("connect") };
        assert!(r.share_flow(9, conn, socks[0].0.as_fd(), None).is_some());
        assert_eq!(r.interrupt_flows(owner, intr).unwrap().3.len(), MAX_OWNER_FLOWS);
    }
}
