//! Notifiers: interrupts and data interrupts (a shared page with a futex word and an
//! eventfd), shared interrupt numbers fanned out to every member, and connections to them.

use super::{ConnKind, ConnectWait, Registry, AUTO_INTNO_BASE};
use remora_proto::{Error, Event, LostReason};
use remora_sys::intr::IntrPage;
use remora_sys::sync::EventFd;
use remora_sys::Memfd;
use std::collections::BTreeSet;
use std::os::fd::OwnedFd;

mod owned;
pub use owned::{BackFlowEntry, OwnerFlowEntry, SharedBooking};

/// An interrupt created on this node.
#[derive(Debug)]
pub struct Interrupt {
    /// Handle.
    pub intr: u64,
    /// Number.
    pub intno: u32,
    /// A data interrupt.
    pub data: bool,
    /// Owning session.
    pub owner: u64,
    /// The shared page.
    pub memfd: Memfd,
    /// The wake-up eventfd.
    pub event: EventFd,
    /// The daemon's own view of the page (to mark it removed).
    pub page: IntrPage,
    /// Connections to it.
    pub conns: BTreeSet<u64>,
    /// Flows of other hosts' processes that trigger it, which its owner reads too.
    pub owner_flows: Vec<OwnerFlowEntry>,
}

impl Interrupt {
    /// What a holder of the page gets: the page, the eventfd and the bell's sending end.
    fn page_fds(&self) -> std::io::Result<Vec<OwnedFd>> {
        Ok(vec![
            self.memfd.try_clone()?.into_fd(),
            self.event.try_clone()?.into_fd(),
            self.page
                .bell_sender()
                .ok_or_else(|| std::io::Error::other("an interrupt page without its bell"))?
                .try_clone_to_owned()?,
        ])
    }
}

/// The processes that created one shared interrupt number (`SCI_FLAG_SHARED_INT`).
/// Connections point at `fanout`, an interrupt of the daemon's own whose triggers the
/// daemon passes on to every member.
#[derive(Debug)]
pub struct SharedGroup {
    /// The daemon's interrupt that connections trigger.
    pub fanout: u64,
    /// The members' interrupts.
    pub members: BTreeSet<u64>,
}

/// A session's connection to an interrupt.
#[derive(Debug)]
pub struct IntrConn {
    /// The session.
    pub session: u64,
    /// The owning node.
    pub node: u32,
    /// The number.
    pub intno: u32,
    /// A data interrupt.
    pub data: bool,
    /// The interrupt handle on this node, or the other daemon's connection handle.
    pub target: ConnKind,
    /// The interrupt's node went away (or restarted): triggers fail from then on, and
    /// never reach whatever the other daemon's handle names after a restart.
    pub lost: Option<LostReason>,
    /// The session of the other node it stands for: for a connection another node made to
    /// an interrupt of this one, the connecting session there; for one to another node's
    /// interrupt, the interrupt's owner there (0: unknown, a shared number's). A plain flow
    /// dialed for the latter carries back only triggers of connections of the former kind
    /// whose session is that owner (`inbound/back_flow.rs`).
    pub far: u64,
    /// Counted in its interrupt's page as a connection whose triggers come through this
    /// daemon (a link transport's: another host, or a node joined over TCP), which makes
    /// the owner's blocked waits sleep on the bell; its disconnect counts it out.
    pub afar: bool,
}

impl Registry {
    /// `SCICreateInterrupt`: returns the handle, number, page memfd and eventfd.
    ///
    /// # Errors
    /// `IntnoUsed`; `NoSpace` when no number is free; `System` when the page cannot be made.
    pub fn create_interrupt(
        &mut self,
        session: u64,
        intno: Option<u32>,
        data: bool,
        shared: bool,
    ) -> Result<(u64, u32, Vec<OwnedFd>, Option<u64>), Error> {
        let group = |n: u32| (data, n);
        let intno = match intno {
            Some(n) if shared && self.shared_ints.contains_key(&group(n)) => n,
            Some(n) if self.intnos.contains_key(&(data, n)) => return Err(Error::IntnoUsed),
            Some(n) => n,
            None => self.next_free_intno(data)?,
        };
        let mut new_fanout = None;
        if shared && !self.shared_ints.contains_key(&group(intno)) {
            // The first sharer: the number names the daemon's fan-out interrupt (of the
            // same kind), whose page is armed so that every trigger signals its eventfd.
            // Nobody waits on a fan-out page: its bell's receiving end is not kept.
            let (fanout, _) = self.new_interrupt(0, intno, data)?;
            if let Some(f) = self.interrupts.get(&fanout) {
                f.page.set_armed(true);
            }
            self.intnos.insert((data, intno), fanout);
            self.shared_ints.insert(group(intno), SharedGroup { fanout, members: BTreeSet::new() });
            new_fanout = Some(fanout);
        }
        let (intr, bell_rx) = self.new_interrupt(session, intno, data)?;
        if shared {
            self.shared_ints.get_mut(&group(intno)).expect("made above").members.insert(intr);
        } else {
            self.intnos.insert((data, intno), intr);
        }
        let i = &self.interrupts[&intr];
        let sys = |e: std::io::Error| Error::System(e.to_string());
        let mut fds = i.page_fds().map_err(sys)?;
        fds.push(bell_rx);
        Ok((intr, intno, fds, new_fanout))
    }

    /// The next automatic number of the kind, round-robin from the last one handed out: a
    /// number comes back only after every other one was used, so a post addressed by
    /// (node, number) to an interrupt that went away finds no interrupt (or, across hosts,
    /// an interrupt of the same owner's), never the next one made (RSMAPI's signals are
    /// addressed so, and numbers are shared by every personality).
    fn next_free_intno(&mut self, data: bool) -> Result<u32, Error> {
        let start = self.next_intno.max(AUTO_INTNO_BASE);
        let n = (start..=u32::MAX)
            .chain(AUTO_INTNO_BASE..start)
            .find(|n| !self.intnos.contains_key(&(data, *n)))
            .ok_or(Error::NoSpace)?;
        self.next_intno = n.checked_add(1).unwrap_or(AUTO_INTNO_BASE);
        Ok(n)
    }

    /// A new interrupt page for `owner` (0: the daemon), not yet numbered in `intnos`, and
    /// the receiving end of its bell (`remora_sys::intr::bell`), the owner's.
    fn new_interrupt(&mut self, owner: u64, intno: u32, data: bool) -> Result<(u64, OwnedFd), Error> {
        let sys = |e: std::io::Error| Error::System(e.to_string());
        let memfd = IntrPage::create(&format!("n{}-intr{}", self.node, intno)).map_err(sys)?;
        let event = EventFd::new().map_err(sys)?;
        let (bell_tx, bell_rx) = remora_sys::intr::bell().map_err(sys)?;
        let page = IntrPage::open(&memfd, event.try_clone().map_err(sys)?)
            .map_err(sys)?
            .with_bell(Some(bell_tx), None);
        let intr = self.handle();
        self.interrupts.insert(
            intr,
            Interrupt {
                intr,
                intno,
                data,
                owner,
                memfd,
                event,
                page,
                conns: BTreeSet::new(),
                owner_flows: Vec::new(),
            },
        );
        Ok((intr, bell_rx))
    }

    /// Pass `n` triggers of shared number `intno`'s fan-out on to every member. `false`
    /// when the group is gone.
    pub fn fan_out(&self, intno: u32, fanout: u64, n: u32) -> bool {
        let Some(g) = self.shared_ints.get(&(false, intno)).filter(|g| g.fanout == fanout) else {
            return false;
        };
        for m in &g.members {
            if let Some(i) = self.interrupts.get(m) {
                for _ in 0..n.min(64) {
                    let _ = i.page.trigger();
                }
            }
        }
        true
    }

    /// Pass every payload waiting in the fan-out page of shared data-interrupt number
    /// `intno` on to every member (a member whose queue is full misses it). `false` when
    /// the group is gone.
    pub fn fan_out_data(&self, intno: u32, fanout: u64) -> bool {
        let Some(g) = self.shared_ints.get(&(true, intno)).filter(|g| g.fanout == fanout) else {
            return false;
        };
        let Some(f) = self.interrupts.get(&fanout) else { return false };
        let mut buf = vec![0u8; remora_sys::intr::MAX_DATA];
        // Bounded: the queue holds at most DATA_SLOTS payloads, but producers may refill it.
        for _ in 0..4 * remora_sys::intr::DATA_SLOTS {
            let Some(len) = f.page.recv(&mut buf) else { break };
            self.deliver_shared(g, &buf[..len]);
        }
        true
    }

    /// Send `payload` to every member of a shared data-interrupt group.
    fn deliver_shared(&self, g: &SharedGroup, payload: &[u8]) {
        for m in &g.members {
            if let Some(i) = self.interrupts.get(m) {
                let _ = i.page.send(payload);
            }
        }
    }

    /// `SCIRemoveInterrupt`: waiters wake with "cancelled", triggers fail from now on.
    ///
    /// # Errors
    /// `UnknownHandle`.
    pub fn remove_interrupt(&mut self, session: u64, intr: u64) -> Result<(), Error> {
        match self.interrupts.get(&intr) {
            Some(i) if i.owner == session => {}
            _ => return Err(Error::UnknownHandle),
        }
        let i = self.interrupts.remove(&intr).expect("checked");
        i.page.remove();
        let group = (i.data, i.intno);
        match self.shared_ints.get_mut(&group).filter(|g| g.members.contains(&intr)) {
            Some(g) => {
                g.members.remove(&intr);
                if g.members.is_empty() {
                    let fanout = g.fanout;
                    self.shared_ints.remove(&group);
                    if let Some(f) = self.interrupts.remove(&fanout) {
                        f.page.remove();
                    }
                    self.intnos.remove(&group);
                }
            }
            None => {
                self.intnos.remove(&(i.data, i.intno));
            }
        }
        Ok(())
    }

    /// Connect `session` to interrupt `intno` of this node. `afar`: the connection's
    /// triggers come through this daemon's threads (a link transport's peer, which cannot
    /// hold the page); else the connecting process, of this node or of another node of
    /// this host reached over the `local` transport, holds the page and triggers it itself.
    pub fn connect_interrupt(
        &mut self,
        session: u64,
        importer_node: u32,
        intno: u32,
        data: bool,
        afar: bool,
    ) -> Result<(u64, Vec<OwnedFd>), ConnectWait> {
        let h = *self.intnos.get(&(data, intno)).ok_or(ConnectWait::Missing)?;
        let sys = |e: std::io::Error| ConnectWait::Failed(Error::System(e.to_string()));
        let i = self.interrupts.get(&h).ok_or(ConnectWait::Missing)?;
        let fds = i.page_fds().map_err(sys)?;
        if afar {
            // Its triggers come through this daemon's threads, which read them from a
            // socket: the owner waits on the bell now (a socket's synchronous wake-up may
            // run the owner on the reading thread's core; a futex wake-up goes to an idle
            // one). A process holding the page (this host's) futex-wakes the owner itself.
            i.page.far_connection(true);
        }
        let conn = self.handle();
        self.interrupts.get_mut(&h).expect("present").conns.insert(conn);
        self.intr_conns.insert(
            conn,
            IntrConn {
                session,
                node: importer_node,
                intno,
                data,
                target: ConnKind::Local { seg: h },
                lost: None,
                far: 0,
                afar,
            },
        );
        Ok((conn, fds))
    }

    /// Record an interrupt connection made through a proxy; `far`: the interrupt's owner's
    /// session on `node` ([`IntrConn::far`]).
    #[allow(clippy::too_many_arguments)]
    pub fn add_proxied_interrupt(
        &mut self,
        session: u64,
        node: u32,
        intno: u32,
        data: bool,
        remote: u64,
        moves_bytes: bool,
        far: u64,
    ) -> u64 {
        let conn = self.handle();
        let target = if moves_bytes { ConnKind::Remote { remote } } else { ConnKind::Proxied { remote } };
        self.intr_conns
            .insert(conn, IntrConn { session, node, intno, data, target, lost: None, far, afar: false });
        conn
    }

    /// Mark every interrupt connection of `session` to an interrupt of `node` (another
    /// node) lost, and tell the session (`ConnectionLost`, as for segments).
    pub fn lose_interrupts(&mut self, session: u64, node: u32, reason: LostReason) {
        let mut told = Vec::new();
        for (conn, c) in self.intr_conns.iter_mut() {
            let far = !matches!(c.target, ConnKind::Local { .. });
            if c.session == session && c.node == node && far && c.lost.is_none() {
                c.lost = Some(reason);
                told.push(*conn);
            }
        }
        for conn in told {
            self.tell(session, Event::ConnectionLost { conn, reason });
        }
    }

    /// Whether interrupt connection `conn` of `session` is lost.
    ///
    /// # Errors
    /// `UnknownHandle` for a connection `session` does not hold; `NodeNotResponding` when
    /// the interrupt's node went away.
    pub fn interrupt_live(&self, session: u64, conn: u64) -> Result<(), Error> {
        match self.intr_conns.get(&conn) {
            Some(c) if c.session == session && c.lost.is_some() => Err(Error::NodeNotResponding),
            Some(c) if c.session == session => Ok(()),
            _ => Err(Error::UnknownHandle),
        }
    }

    /// Trigger interrupt connection `conn` of `session` (a connection to an interrupt of
    /// this node), with a payload for data interrupts.
    ///
    /// # Errors
    /// `UnknownHandle`; `NoSuchIntno` when the interrupt was removed; `NoSpace` when a
    /// data interrupt's queue is full; `IllegalParameter` for a payload too long.
    pub fn trigger_interrupt(&mut self, session: u64, conn: u64, data: Option<&[u8]>) -> Result<(), Error> {
        let c = match self.intr_conns.get(&conn) {
            Some(c) if c.session == session => c,
            _ => return Err(Error::UnknownHandle),
        };
        let ConnKind::Local { seg: h } = c.target else { return Err(Error::UnknownHandle) };
        self.trigger_target(h, data)
    }

    /// Trigger interrupt `h` of this node (every member of a shared number's fan-out).
    pub(crate) fn trigger_target(&mut self, h: u64, data: Option<&[u8]>) -> Result<(), Error> {
        let i = self.interrupts.get(&h).ok_or(Error::NoSuchIntno)?;
        if i.owner == 0 && !i.page.is_removed() {
            // A shared number: every member hears it.
            match (data, self.shared_ints.get(&(i.data, i.intno)).filter(|g| g.fanout == h)) {
                (None, Some(_)) if self.fan_out(i.intno, h, 1) => return Ok(()),
                (Some(d), Some(g)) if d.len() <= remora_sys::intr::MAX_DATA => {
                    self.deliver_shared(g, d);
                    return Ok(());
                }
                _ => {}
            }
        }
        let r = match data {
            Some(d) => i.page.send(d),
            None => i.page.trigger(),
        };
        r.map_err(|e| match e {
            remora_sys::intr::TriggerError::Removed => Error::NoSuchIntno,
            remora_sys::intr::TriggerError::Full => Error::NoSpace,
            remora_sys::intr::TriggerError::TooLong => {
                Error::IllegalParameter("data interrupt payload too long".into())
            }
        })
    }

    /// `SCIDisconnectInterrupt`: returns the connection's target.
    ///
    /// # Errors
    /// `UnknownHandle`.
    pub fn disconnect_interrupt(&mut self, session: u64, conn: u64) -> Result<IntrConn, Error> {
        match self.intr_conns.get(&conn) {
            Some(c) if c.session == session => {}
            _ => return Err(Error::UnknownHandle),
        }
        let c = self.intr_conns.remove(&conn).expect("checked");
        if let ConnKind::Local { seg: h } = c.target {
            if let Some(i) = self.interrupts.get_mut(&h) {
                i.conns.remove(&conn);
                if c.afar {
                    i.page.far_connection(false);
                }
                // Its flows are taken from the owner's set, and those it dialed end too,
                // shut for writing only: the far end ends its side on seeing ours, and the
                // flow's reader then ends it (`remora_sys::flow::end`; what comes meanwhile
                // is refused there). Shut for reading, the far end's next bytes were answered
                // with a reset, which threw away the owner's triggers back to the far
                // process's interrupt on that flow that it had not yet acknowledged. A flow
                // that carried the connection's triggers back is another connection's: its
                // reader ends it if more come for this one.
                for f in i.owner_flows.iter().filter(|f| f.conn == conn && !f.back) {
                    remora_sys::flow::shutdown(std::os::fd::AsFd::as_fd(&f.fd), true);
                }
                let before = i.owner_flows.len();
                i.owner_flows.retain(|f| f.conn != conn);
                if i.owner_flows.len() != before {
                    i.page.flows_changed();
                }
            }
        }
        self.end_back_flows(conn);
        self.note_ended_for_back_flows(conn, &c);
        Ok(c)
    }
}
