//! Triggers of an interrupt of another host over the process's own flow: a TCP connection
//! to the owner's node, dialed and authenticated by our daemon and bound there to this one
//! interrupt connection (`Space::Interrupt`), so that a trigger is the triggering process →
//! the owner's daemon → the owner (two hops), not through our daemon as well (three).
//!
//! A plain interrupt's trigger is sent and not waited for (`SCITriggerInterrupt` returns
//! once it left, as an adapter's posted write does); the owner's node never answers one on
//! the flow: a refusal (the interrupt was removed, or its owner died) ends the flow, which
//! a following trigger notices (it looks for the hang-up a millisecond or more after the
//! last look, or its write fails) and takes the daemons' path, which says the error
//! (`NoSuchIntno`). So nothing is ever read from a plain flow here. A data interrupt's trigger
//! waits for its answer, so that a payload that finds the queue full is said
//! (`NoSpace`), never dropped silently. A route our daemon reports silent or lost fails the
//! trigger at once, as the daemons' path does; a flow that broke leaves the triggers to
//! that path. A plain trigger goes back on another process's flow instead when the pair
//! shares one connection ([`super::back`]).

use crate::{Descriptor, Error, Result};
use remora_proto::link::{
    BulkFrame, BulkHeader, BulkOp, BULK_FRAME, MAX_TRIGGER_DATA, TRIGGER_FULL, TRIGGER_REMOVED,
};
use remora_proto::{Reply, Request};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use zerocopy::IntoBytes;

/// How long a data trigger waits for its answer between two looks at the route.
const SLICE: Duration = Duration::from_millis(20);
/// How often posted triggers look for a refusal waiting on the flow.
const LOOK_EVERY: Duration = Duration::from_millis(1);
/// How long a trigger waits for room on a flow whose route still looks up.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long [`wait_drained`] waits for the owner's node to have served every trigger sent.
const DRAIN: Duration = Duration::from_secs(2);

/// What a trigger over the flow came to when it did not decide the call.
pub(super) enum Outcome {
    /// Sent (and, waited for, served).
    Sent,
    /// The flow cannot carry it (broken, or out of step): go through the daemons.
    Through,
}

/// The flow of one connection to an interrupt of another host.
#[derive(Debug)]
pub(super) struct Flow {
    s: TcpStream,
    /// The owner's node's handle of the connection (every frame names it).
    remote: u64,
    tag: u64,
    /// Answers with a tag up to this belong to waits given up (the route fell silent).
    stale: u64,
    /// The interrupt is known gone: every trigger answers this.
    refused: Option<Error>,
    broken: bool,
    /// Triggers were sent since the flow was last drained.
    unsynced: bool,
    /// When the flow was last looked at (a data flow's answers read, a plain flow's
    /// hang-up looked for).
    looked: Option<Instant>,
    /// The process that opened it: a child made by `fork` never writes on (or shuts) its
    /// parent's socket; its triggers go through the daemons.
    pid: u32,
}

impl Flow {
    /// Ask our daemon for the flow of interrupt connection `conn` (`None`: none can be had,
    /// triggers go through the daemons).
    pub(super) fn open(desc: &Descriptor, conn: u64) -> Option<Flow> {
        if !remora_config::Config::get().pager_flows {
            return None;
        }
        let (reply, mut fds) = desc.session().request(Request::DsmFlow { conn }, &[]).ok()?;
        let (Reply::DsmFlow { remote, .. }, Some(fd)) = (reply, fds.pop()) else { return None };
        let s = TcpStream::from(fd);
        s.set_nodelay(true).ok()?;
        // A trigger waits for room in slices, looking at the route between them (`send`).
        s.set_write_timeout(Some(SLICE)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        Some(Flow {
            s,
            remote,
            tag: 0,
            stale: 0,
            refused: None,
            broken: false,
            unsynced: false,
            looked: None,
            pid: remora_sys::sched::own_pid(),
        })
    }

    /// The owner's node's handle of the connection.
    pub(super) fn remote(&self) -> u64 {
        self.remote
    }

    /// Whether triggers may go: the interrupt is not known gone, and the flow did not break
    /// (a trigger carried back on another flow follows the same path's verdicts).
    pub(super) fn usable(&self) -> bool {
        self.refused.is_none() && !self.broken && self.pid == remora_sys::sched::own_pid()
    }

    /// Trigger with `data` (a data interrupt's payload, waited for) or none (posted).
    /// `silent` says whether our daemon reports the route down now; `outage` whether a
    /// trigger found it so since the flow last took a whole frame (cleared here once one
    /// goes): while the flow has no room then, the trigger takes the daemons' path, see
    /// [`Flow::send`].
    pub(super) fn trigger(
        &mut self,
        data: Option<&[u8]>,
        silent: impl Fn() -> bool,
        outage: &AtomicBool,
    ) -> Result<Outcome> {
        if let Some(e) = &self.refused {
            return Err(e.clone());
        }
        if self.broken || self.pid != remora_sys::sched::own_pid() {
            return Ok(Outcome::Through);
        }
        if data.is_some_and(|d| d.len() > MAX_TRIGGER_DATA) {
            return Err(Error::OutOfRange);
        }
        // Before every data trigger, the answers of waits given up are read (its own
        // follows). Between posted ones, at most every millisecond (a look is a system
        // call, as long as the send itself), the flow is looked at for its end: the
        // owner's node ends a plain flow on a refusal, and the daemons' path says why.
        if data.is_some() {
            self.read_stale()?;
        } else if self.looked.is_none_or(|t| t.elapsed() >= LOOK_EVERY) {
            self.looked = Some(Instant::now());
            if remora_sys::intr::sender_gone(self.s.as_fd()) {
                self.broken = true;
            }
        }
        if self.broken {
            return Ok(Outcome::Through);
        }
        let payload = data.unwrap_or(&[]);
        self.tag += 1;
        let head = BulkFrame::from_header(&BulkHeader {
            op: BulkOp::Trigger,
            tag: self.tag,
            conn: self.remote,
            offset: 0,
            len: payload.len() as u64,
            ok: data.is_some(),
        });
        let sent = if payload.is_empty() {
            self.send(head.as_bytes(), &silent, outage)?
        } else {
            let mut frame = [0u8; BULK_FRAME + MAX_TRIGGER_DATA];
            frame[..BULK_FRAME].copy_from_slice(head.as_bytes());
            frame[BULK_FRAME..BULK_FRAME + payload.len()].copy_from_slice(payload);
            self.send(&frame[..BULK_FRAME + payload.len()], &silent, outage)?
        };
        if !sent {
            return Ok(Outcome::Through);
        }
        self.unsynced = true;
        if data.is_none() {
            return Ok(Outcome::Sent);
        }
        // A data trigger: its answer, looking at the route between slices of the wait.
        loop {
            match remora_sys::poller::wait_ready(&[self.s.as_fd()], Some(SLICE)) {
                Ok(n) if n > 0 => {}
                _ if silent() => {
                    // Its answer, if it comes, is nobody's now.
                    self.stale = self.tag;
                    return Err(Error::NodeNotResponding);
                }
                _ => continue,
            }
            let h = self.answer()?;
            if h.tag <= self.stale && h.tag != self.tag {
                continue;
            }
            if h.op != BulkOp::Ack || h.tag != self.tag {
                self.broken = true;
                return Err(Error::NodeNotResponding);
            }
            if h.ok {
                return Ok(Outcome::Sent);
            }
            return self.refusal(h.offset).map_or(Ok(Outcome::Through), Err);
        }
    }

    /// Write one frame whole; `false` when it was not sent (the caller goes through the
    /// daemons this time). A flow with no room (the owner's node stopped
    /// taking triggers: a cable cut fills the socket within a moment) is waited on in
    /// slices, looking at the route between them: once our daemon reports it silent or
    /// lost the trigger fails at once, as one made after would, instead of waiting for the
    /// socket's patience (and the flow stays usable when no byte of the frame went;
    /// otherwise it is out of step, broken, and later triggers take the daemons' path).
    /// After an outage (`outage`: the route was silent since the flow last took a frame)
    /// a frame goes on the flow only when it has room at once; otherwise this trigger goes
    /// through the daemons (`false`, no byte sent; the flow is kept, and the next trigger
    /// tries it again): its connection may sit in TCP's retry back-off for seconds after
    /// the route came back (a trigger waited the 10 s patience there), where the daemons'
    /// link has reconnected.
    fn send(&mut self, frame: &[u8], silent: &impl Fn() -> bool, outage: &AtomicBool) -> Result<bool> {
        use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
        let after_outage = || outage.load(Ordering::Relaxed) && !silent();
        if after_outage() {
            let now = remora_sys::bell::wait(self.s.as_fd(), true, Some(Duration::ZERO));
            if !now.is_ok_and(|r| r.writable && !r.hung_up) {
                return Ok(false);
            }
        }
        let t = Instant::now();
        let mut at = 0;
        while at < frame.len() {
            match self.s.write(&frame[at..]) {
                Ok(0) => break,
                Ok(n) => at += n,
                Err(e) if matches!(e.kind(), WouldBlock | TimedOut | Interrupted) => {
                    if at == 0 && after_outage() {
                        return Ok(false);
                    }
                    if !silent() && t.elapsed() < PATIENCE {
                        continue;
                    }
                    self.broken |= at > 0;
                    return Err(Error::NodeNotResponding);
                }
                // The flow ended (a plain flow's refusal ends it) or broke: the frame, whole
                // or not, was not served (only whole frames are); the daemons' path says
                // what became of the interrupt. (`TcpStream`'s writes pass `MSG_NOSIGNAL`:
                // no `SIGPIPE` for a C program.)
                Err(_) => {
                    self.broken = true;
                    return Ok(false);
                }
            }
        }
        if at < frame.len() {
            self.broken = true;
            return Err(Error::NodeNotResponding);
        }
        outage.store(false, Ordering::Relaxed);
        Ok(true)
    }

    /// Read one answer (a whole header).
    fn answer(&mut self) -> Result<BulkHeader> {
        let mut raw = [0u8; BULK_FRAME];
        let got =
            self.s.read_exact(&mut raw).map_err(|_| ()).and_then(|()| BulkFrame::parse(&raw).map_err(|_| ()));
        got.map_err(|()| {
            self.broken = true;
            Error::NodeNotResponding
        })
    }

    /// The answers waiting on a data flow before a data trigger: those of waits given up
    /// (a refusal among them, of a trigger whose caller was told the route failed, is
    /// read as such). A refusal that removed the interrupt is the error of this trigger
    /// and every later one; another leaves the triggers to the daemons' path.
    fn read_stale(&mut self) -> Result<()> {
        while remora_sys::seqpacket::readable_now(self.s.as_fd()).unwrap_or(false) {
            let h = self.answer()?;
            if h.op != BulkOp::Ack {
                self.broken = true;
                return Err(Error::NodeNotResponding);
            }
            if !h.ok && h.tag > self.stale {
                if let Some(Error::NoSuchIntno) = self.refusal(h.offset) {
                    return Err(Error::NoSuchIntno);
                }
            }
        }
        Ok(())
    }

    /// The error of a refusal `code` (a removed interrupt stays refused); `None` for a
    /// reason the owner's books know better than the code says: the flow is left, and our
    /// daemon asks them from now on.
    fn refusal(&mut self, code: u64) -> Option<Error> {
        match code {
            TRIGGER_REMOVED => {
                self.refused = Some(Error::NoSuchIntno);
                self.refused.clone()
            }
            TRIGGER_FULL => Some(Error::NoSpace),
            _ => {
                self.broken = true;
                None
            }
        }
    }

    /// Before a disconnect, which goes through the daemons and must not overtake the
    /// triggers sent on the flow: shut the flow for writing (nothing more goes on it) and
    /// give a duplicate of it to wait on, without this flow's lock, until the owner's node
    /// served them ([`wait_drained`]); `None` when nothing needs waiting for (nothing sent
    /// since the last drain, the flow broken, or this a child made by `fork`).
    pub(super) fn begin_drain(&mut self) -> Option<TcpStream> {
        if !self.unsynced || self.broken || self.pid != remora_sys::sched::own_pid() {
            return None;
        }
        self.unsynced = false;
        // The owner's node closes its end once it read our end's close and everything
        // before it ([`wait_drained`]); nothing more goes on this flow.
        self.broken = true;
        let s = self.s.try_clone().ok()?;
        s.shutdown(std::net::Shutdown::Write).ok()?;
        Some(s)
    }
}

/// Wait (at most [`DRAIN`]) until the owner's node closed flow `s`, which
/// [`Flow::begin_drain`] shut for writing: it served everything before. Not while `silent`
/// says our daemon reports the route down (nothing would come back, and the disconnect
/// must not wait for it). Nothing is read meanwhile: what else comes on the socket is not
/// this connection's to take.
pub(super) fn wait_drained(s: &TcpStream, silent: impl Fn() -> bool) {
    let t = Instant::now();
    while t.elapsed() < DRAIN && !silent() {
        if remora_sys::intr::wait_sender_gone(s.as_fd(), SLICE) {
            break;
        }
    }
}
