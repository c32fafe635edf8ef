//! Making and breaking connections: client/server (`VipConnectWait` / `Accept` / `Reject`
//! / `Request`) through the node's connection manager, peer-to-peer
//! (`VipConnectPeerRequest` / `Done` / `Wait`) on top of it, and `VipDisconnect`.

use crate::layout;
use crate::link::{direct, Link, PeerInfo};
use crate::vi::{lock, ViInner, ViState, RELIABLE_RECEPTION};
use crate::{Error, Nic, ProtectionTag, Result, Vi, ViAttributes};
use remora_client::Session;
use remora_proto::{Reply, Request, ViplAsk, ViplRequest};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Start the thread that makes VI `vi`'s peer connection. A test can make it fail as a
/// spawn can (`tests::fail_peer_spawn`), after a step of its own.
fn spawn_peer(vi: u64, work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    #[cfg(test)]
    if let Some(before) = tests::peer_spawn_fault(vi) {
        before();
        return Err(std::io::Error::other("no thread (a test's fault)"));
    }
    let _ = vi;
    std::thread::Builder::new().name("vipl-peer".into()).spawn(work).map(|_| ())
}

/// A VIA network address (`VIP_NET_ADDRESS`): a NIC address (a node) and a discriminator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetAddress {
    /// The NIC address: the node id, four bytes big-endian.
    pub host: Vec<u8>,
    /// The discriminator.
    pub disc: Vec<u8>,
}

impl NetAddress {
    /// The address of node `node` with discriminator `disc`.
    pub fn new(node: u32, disc: &[u8]) -> NetAddress {
        NetAddress { host: node.to_be_bytes().to_vec(), disc: disc.to_vec() }
    }

    /// The node it names.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when the host part is not a Remora NIC address.
    pub fn node(&self) -> Result<u32> {
        let b: [u8; 4] =
            self.host.as_slice().try_into().map_err(|_| {
                Error::InvalidParameter(format!("a host address of {} bytes", self.host.len()))
            })?;
        Ok(u32::from_be_bytes(b))
    }
}

fn millis(t: Option<Duration>) -> Option<u32> {
    t.map(|d| d.as_millis().min(u128::from(u32::MAX - 1)) as u32)
}

fn attrs_of(p: &PeerInfo) -> ViAttributes {
    ViAttributes {
        reliability: p.reliability,
        max_transfer: p.max_transfer,
        ptag: ProtectionTag(0),
        rdma_write: p.rdma_write,
        rdma_read: p.rdma_read,
    }
}

/// A connection request a server received (`VIP_CONN_HANDLE`): accept or reject it.
#[derive(Debug)]
pub struct ConnRequest {
    session: Session,
    conn: u64,
    peer: PeerInfo,
    /// Who asks.
    pub remote: NetAddress,
}

impl ConnRequest {
    /// The requesting VI's attributes (its protection tag means nothing here).
    pub fn remote_attributes(&self) -> ViAttributes {
        attrs_of(&self.peer)
    }

    /// `VipConnectAccept`: connect `vi` (idle, of the same reliability level) to the
    /// requester.
    ///
    /// # Errors
    /// [`Error::InvalidState`] unless `vi` is idle; [`Error::InvalidReliabilityLevel`]
    /// when the levels differ; [`Error::Timeout`] when the requester gave up meanwhile.
    /// Across hosts, when the requester's pair stream came but its confirmation did not
    /// (the requester may or may not have taken the connection), the call succeeds and the
    /// VI is already broken: ERROR, `VIP_ERROR_CONN_LOST` through the error handler.
    pub fn accept(self, vi: &Vi) -> Result<()> {
        let v = &vi.inner;
        {
            let mut st = lock(&v.state);
            if *st != ViState::Idle {
                return Err(Error::InvalidState);
            }
            if v.attrs().reliability != self.peer.reliability {
                return Err(Error::InvalidReliabilityLevel);
            }
            *st = ViState::ConnectPending;
        }
        v.clear_segment();
        let mut unsure = false;
        let linked = Link::open(&v.nic, v.recv_cq.is_some(), self.peer.clone()).and_then(|link| {
            let offer = offer(v, &link, &self.peer);
            let mut info = v.peer_info();
            info.direct = offer.as_ref().map(|o| (o.port(), o.token));
            let req = Request::Vipl(ViplRequest::Accept { conn: self.conn, info: info.encode() });
            match self.session.request(req, &[]) {
                Ok(_) => {
                    // The requester dials the offer once it has the answer; without it in
                    // time, every message takes the channel.
                    if let Some(o) = offer {
                        unsure = o.accept(|d| link.attach(d)) == direct::Made::Unsure;
                    }
                    Ok(link)
                }
                Err(e) => {
                    link.close();
                    Err(e.into())
                }
            }
        });
        // A requester that may hold a stream this side does not: broken before any receive
        // is described, so no message goes where nobody reads.
        establish(v, linked, unsure)
    }

    /// `VipConnectReject`: the requester gets `VIP_REJECT`.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the requester gave up meanwhile.
    pub fn reject(self) -> Result<()> {
        self.session.request(Request::Vipl(ViplRequest::Reject { conn: self.conn }), &[])?;
        Ok(())
    }
}

/// The accepting side's offer of the pair's own stream ([`direct`]): only across hosts, to
/// a requester that said it can dial, and only where completions are not rung on a bell
/// nor waited for landed (a completion queue's receives, reliable reception), which take
/// the channel always.
fn offer(v: &ViInner, link: &Link, peer: &PeerInfo) -> Option<direct::Offer> {
    if !link.is_far()
        || peer.direct.is_none()
        || v.recv_cq.is_some()
        || link.peer.bell_always
        || v.attrs().reliability == RELIABLE_RECEPTION
    {
        return None;
    }
    let host = direct::host_of(v.nic.inner.sisci.config(), v.nic.node())?;
    direct::Offer::open(&host)
}

/// The requesting side: dial the stream the acceptor offered (see [`offer`]) within what
/// is left of the request's time (`deadline`); without it, every message takes the channel.
fn take_offer(v: &ViInner, link: &Link, peer: &PeerInfo, deadline: Option<Instant>) {
    let Some((port, token)) = peer.direct.filter(|(port, _)| *port != 0 && link.is_far()) else { return };
    let Some(host) = direct::host_of(v.nic.inner.sisci.config(), peer.node) else { return };
    let wait = deadline.map_or(direct::HANDSHAKE_WAIT, |d| d.saturating_duration_since(Instant::now()));
    if let Some(d) = direct::dial(&host, port, token, wait) {
        link.attach(d);
    }
}

/// The VI is linked (or not): finish the state change. `unsure`: the pair's stream was
/// left half made (see [`direct::Made::Unsure`]), the VI breaks at once.
fn establish(v: &Arc<ViInner>, linked: Result<Link>, unsure: bool) -> Result<()> {
    match linked {
        Ok(link) => {
            let link = Arc::new(link);
            v.peer_here.store(link.map.is_local(), std::sync::atomic::Ordering::Relaxed);
            *v.link.write().unwrap_or_else(|p| p.into_inner()) = Some(link.clone());
            let attrs = v.attrs();
            *lock(&v.state) = ViState::Connected;
            v.send.lock().link = Some((link.clone(), attrs));
            let mut q = v.recv.lock();
            q.link = Some((link.clone(), attrs.ptag));
            let published = !unsure && v.publish(&mut q, &link);
            drop(q);
            if unsure {
                v.fail(crate::ErrorCode::ConnLost, None, true);
                return Ok(());
            }
            link.store(layout::PEER_READY, link.tag(1));
            if !published || !link.push() || link.has_failed() {
                // The peer on another host did not get them: broken from the start.
                v.fail(crate::ErrorCode::ConnLost, None, false);
            }
            Ok(())
        }
        Err(e) => {
            *lock(&v.state) = ViState::Idle;
            Err(e)
        }
    }
}

/// The link to the server VI a request's answer describes.
fn link_of(v: &Arc<ViInner>, reply: Reply, deadline: Option<Instant>) -> Result<(Link, PeerInfo)> {
    match reply {
        Reply::ViplAccepted(info) => {
            let peer = PeerInfo::decode(&info)?;
            if peer.reliability != v.attrs().reliability {
                return Err(Error::InvalidReliabilityLevel);
            }
            let link = Link::open(&v.nic, v.recv_cq.is_some(), peer.clone())?;
            take_offer(v, &link, &peer, deadline);
            Ok((link, peer))
        }
        other => Err(Error::Resource(format!("unexpected answer {other:?}"))),
    }
}

/// A `VipConnectRequest` under way ([`Vi::connect_request_start`]).
#[derive(Debug)]
pub struct ConnectAttempt {
    vi: Arc<ViInner>,
    /// The private session the request went out on, and its id; `None` once answered.
    asked: Option<(Session, u64)>,
    /// When the request's timeout ends (`None`: never).
    deadline: Option<Instant>,
}

impl ConnectAttempt {
    /// Wait up to `slice` (`None`: until it comes) for the server's answer: `Ok(None)`
    /// while none came, the server VI's attributes once accepted (the VI is connected).
    ///
    /// # Errors
    /// As [`Vi::connect_request`]; [`Error::InvalidState`] once the attempt has ended.
    pub fn wait(&mut self, slice: Option<Duration>) -> Result<Option<ViAttributes>> {
        let Some((session, id)) = &self.asked else { return Err(Error::InvalidState) };
        let got = match session.answer(*id, slice) {
            Ok(None) => return Ok(None),
            Ok(Some((reply, _))) => Ok(reply),
            Err(e) => Err(Error::from(e)),
        };
        self.asked = None;
        let linked = got.and_then(|reply| link_of(&self.vi, reply, self.deadline));
        let attrs = linked.as_ref().map(|(_, p)| attrs_of(p)).ok();
        establish(&self.vi, linked.map(|(l, _)| l), false)?;
        attrs.ok_or(Error::InvalidState).map(Some)
    }
}

impl Drop for ConnectAttempt {
    fn drop(&mut self) {
        // Given up before the answer (or failed before the request left): the session's
        // end withdraws the request at the node, and the VI may connect again. An answered
        // attempt has left the VI connected or idle already.
        drop(self.asked.take());
        let mut st = lock(&self.vi.state);
        if *st == ViState::ConnectPending {
            *st = ViState::Idle;
        }
    }
}

impl Nic {
    fn session(&self) -> Result<Session> {
        Session::open(self.inner.sisci.config()).map_err(Error::from)
    }

    /// `VipConnectWait`: wait up to `timeout` (`None`: forever) for a request naming
    /// `local`'s discriminator on this node.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::InvalidParameter`] for a discriminator over 64 bytes.
    pub fn connect_wait(&self, local: &NetAddress, timeout: Option<Duration>) -> Result<ConnRequest> {
        let session = self.session()?;
        let req = Request::Vipl(ViplRequest::Wait { disc: local.disc.clone(), timeout_ms: millis(timeout) });
        match session.request(req, &[])?.0 {
            Reply::ViplIncoming { conn, node, disc, info } => {
                let peer = PeerInfo::decode(&info)?;
                Ok(ConnRequest { session, conn, peer, remote: NetAddress::new(node, &disc) })
            }
            other => Err(Error::Resource(format!("unexpected answer {other:?}"))),
        }
    }
}

impl Vi {
    /// `VipConnectRequest`: ask the server at `remote` for a connection, waiting up to
    /// `timeout` for its answer. Returns the server VI's attributes.
    ///
    /// # Errors
    /// [`Error::InvalidState`] unless idle; [`Error::NoMatch`] when nobody waits there
    /// (retry); [`Error::Rejected`]; [`Error::Timeout`].
    pub fn connect_request(
        &self,
        local: &NetAddress,
        remote: &NetAddress,
        timeout: Option<Duration>,
    ) -> Result<ViAttributes> {
        let mut attempt = self.connect_request_start(local, remote, timeout)?;
        loop {
            if let Some(attrs) = attempt.wait(None)? {
                return Ok(attrs);
            }
        }
    }

    /// `VipConnectRequest` in two steps, for a caller that waits in slices (the C library
    /// makes each slice's end a cancellation point): send the request, then
    /// [`ConnectAttempt::wait`] for the answer. Dropping the attempt before the answer
    /// came gives the request up and leaves the VI idle again.
    ///
    /// # Errors
    /// [`Error::InvalidState`] unless idle; [`Error::InvalidParameter`] for a bad address.
    pub fn connect_request_start(
        &self,
        local: &NetAddress,
        remote: &NetAddress,
        timeout: Option<Duration>,
    ) -> Result<ConnectAttempt> {
        {
            let mut st = lock(&self.inner.state);
            if *st != ViState::Idle {
                return Err(Error::InvalidState);
            }
            *st = ViState::ConnectPending;
        }
        // From here on the attempt's drop puts the VI back to idle unless it connected.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut attempt = ConnectAttempt { vi: self.inner.clone(), asked: None, deadline };
        let req = self.ask(local, remote, timeout)?;
        let session = self.inner.nic.session()?;
        let id = session.begin(req, &[])?;
        attempt.asked = Some((session, id));
        Ok(attempt)
    }

    /// `VipDisconnect`: tell the peer, drop the link, and complete every receive still
    /// posted with `VIP_STATUS_DESC_FLUSHED_ERROR`. The VI is idle again.
    ///
    /// # Errors
    /// [`Error::InvalidState`] on an idle VI.
    pub fn disconnect(&self) -> Result<()> {
        let v = &self.inner;
        {
            let st = lock(&v.state);
            if *st == ViState::Idle {
                return Err(Error::InvalidState);
            }
        }
        v.unlink();
        if let Some(link) = v.link.write().unwrap_or_else(|p| p.into_inner()).take() {
            link.say_gone();
            link.close();
        }
        v.reset();
        *lock(&v.state) = ViState::Idle;
        v.wake();
        Ok(())
    }

    /// `VipConnectPeerRequest`: start connecting to the VI at `remote` that asks for this
    /// one in turn; [`Vi::connect_peer_done`] or [`Vi::connect_peer_wait`] learn the end.
    /// Of the two sides, the one with the smaller (node, discriminator) waits for the
    /// other's request through the node; the other requests until it is there. A peer that
    /// did not come within `timeout` makes the outcome [`Error::Timeout`] on either side,
    /// and the VI idle again.
    ///
    /// # Errors
    /// [`Error::InvalidState`] unless idle; [`Error::InvalidParameter`] for a bad address.
    pub fn connect_peer_request(
        &self,
        local: &NetAddress,
        remote: &NetAddress,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let their_node = remote.node()?;
        {
            let mut st = lock(&self.inner.state);
            if *st != ViState::Idle {
                return Err(Error::InvalidState);
            }
            *st = ViState::ConnectPending;
        }
        *lock(&self.inner.peer_connect) = Some(None);
        let me = (self.inner.nic.node(), local.disc.clone());
        let waits = me < (their_node, remote.disc.clone());
        let (vi, local, remote) = (self.clone(), local.clone(), remote.clone());
        let spawned = spawn_peer(self.inner.id, move || {
            let r = if waits {
                vi.peer_wait_side(&local, &remote, timeout)
            } else {
                vi.peer_request_side(&local, &remote, timeout)
            };
            *lock(&vi.inner.peer_connect) = Some(Some(r));
            vi.inner.peer_outcome.notify_all();
        });
        if spawned.is_err() {
            // No attempt runs: a VipConnectPeerWait finds none (it would wait forever for
            // `Some(None)` to be answered).
            *lock(&self.inner.peer_connect) = None;
            // One that began to wait meanwhile looks again, and finds none.
            self.inner.peer_outcome.notify_all();
            *lock(&self.inner.state) = ViState::Idle;
            return Err(Error::Resource("no thread for the peer connection".into()));
        }
        Ok(())
    }

    fn peer_wait_side(
        &self,
        local: &NetAddress,
        remote: &NetAddress,
        timeout: Option<Duration>,
    ) -> Result<ViAttributes> {
        let start = Instant::now();
        let their = remote.node()?;
        loop {
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            if left.is_some_and(|l| l.is_zero()) {
                *lock(&self.inner.state) = ViState::Idle;
                return Err(Error::Timeout);
            }
            let req = match self.inner.nic.connect_wait(local, left) {
                Ok(r) => r,
                Err(e) => {
                    *lock(&self.inner.state) = ViState::Idle;
                    return Err(e);
                }
            };
            if req.remote.node()? != their || req.remote.disc != remote.disc {
                let _ = req.reject();
                continue;
            }
            let attrs = req.remote_attributes();
            *lock(&self.inner.state) = ViState::Idle;
            return req.accept(self).map(|_| attrs);
        }
    }

    /// Ask the server at `remote` and wait for the answer: the link to its VI.
    fn request_link(
        &self,
        local: &NetAddress,
        remote: &NetAddress,
        timeout: Option<Duration>,
    ) -> Result<(Link, PeerInfo)> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let req = self.ask(local, remote, timeout)?;
        let reply = self.inner.nic.session()?.request(req, &[])?.0;
        link_of(&self.inner, reply, deadline)
    }

    /// The connection request from `local` to `remote`, answered within `timeout`.
    fn ask(&self, local: &NetAddress, remote: &NetAddress, timeout: Option<Duration>) -> Result<Request> {
        self.inner.clear_segment();
        let node = remote.node()?;
        let mut info = self.inner.peer_info();
        // Whether this side can dial the acceptor's stream: it finds the acceptor's host
        // (else the acceptor offers none, and waits for no dial).
        if direct::host_of(self.inner.nic.inner.sisci.config(), node).is_some() {
            info.direct = Some(direct::CAN_DIAL);
        }
        let ask = ViplAsk {
            disc: remote.disc.clone(),
            from_disc: local.disc.clone(),
            info: info.encode(),
            timeout_ms: millis(timeout),
        };
        Ok(Request::Vipl(ViplRequest::Request { node, ask }))
    }

    fn peer_request_side(
        &self,
        local: &NetAddress,
        remote: &NetAddress,
        timeout: Option<Duration>,
    ) -> Result<ViAttributes> {
        let start = Instant::now();
        loop {
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            let r = self.request_link(local, remote, left.map(|l| l.max(Duration::from_millis(1))));
            match r {
                Err(Error::NoMatch) if left.is_none_or(|l| l > Duration::from_millis(10)) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => {
                    // Nobody waiting to the end is a peer that never came: a timeout, as
                    // on the waiting side.
                    let other =
                        other.map_err(|e| if matches!(e, Error::NoMatch) { Error::Timeout } else { e });
                    let attrs = other.as_ref().map(|(_, p)| attrs_of(p)).ok();
                    establish(&self.inner, other.map(|(l, _)| l), false)?;
                    return attrs.ok_or(Error::InvalidState);
                }
            }
        }
    }

    /// `VipConnectPeerDone`: the peer connection's outcome, once known.
    ///
    /// # Errors
    /// [`Error::NotDone`] while it is being made; [`Error::InvalidState`] without a
    /// request; the request's error.
    pub fn connect_peer_done(&self) -> Result<ViAttributes> {
        self.connect_peer_wait_for(Some(Duration::ZERO))
    }

    /// `VipConnectPeerWait`: wait for the peer connection's outcome (asleep until the
    /// thread that makes the connection tells it).
    ///
    /// # Errors
    /// As [`Vi::connect_peer_done`], without `NotDone`.
    pub fn connect_peer_wait(&self) -> Result<ViAttributes> {
        self.connect_peer_wait_for(None)
    }

    /// [`Vi::connect_peer_wait`] for at most `limit` (`None`: until the outcome is known),
    /// asleep meanwhile: the outcome, taken by this call, once known.
    ///
    /// # Errors
    /// As [`Vi::connect_peer_done`]: [`Error::NotDone`] when `limit` passed first.
    pub fn connect_peer_wait_for(&self, limit: Option<Duration>) -> Result<ViAttributes> {
        let deadline = limit.map(|l| Instant::now().checked_add(l));
        let mut g = lock(&self.inner.peer_connect);
        loop {
            match g.as_mut() {
                None => return Err(Error::InvalidState),
                Some(Some(_)) => {
                    return match g.take() {
                        Some(Some(r)) => r,
                        _ => Err(Error::InvalidState),
                    }
                }
                Some(None) => {}
            }
            // A wake-up without the outcome (spurious, a signal) looks again.
            g = match deadline {
                None | Some(None) => self.sleep_on_outcome(g, None),
                Some(Some(d)) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::NotDone);
                    }
                    self.sleep_on_outcome(g, Some(left))
                }
            };
        }
    }

    /// Sleep on the peer connection's outcome up to `left` (`None`: until notified),
    /// counted among its sleepers meanwhile (tests wait for a sleeper).
    fn sleep_on_outcome<'a>(&self, g: PeerGuard<'a>, left: Option<Duration>) -> PeerGuard<'a> {
        #[cfg(test)]
        self.inner.peer_sleepers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let cv = &self.inner.peer_outcome;
        let g = match left {
            None => cv.wait(g).unwrap_or_else(|p| p.into_inner()),
            Some(l) => cv.wait_timeout(g, l).unwrap_or_else(|p| p.into_inner()).0,
        };
        #[cfg(test)]
        self.inner.peer_sleepers.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        g
    }
}

/// The lock of a VI's peer connection outcome ([`ViInner::peer_connect`]).
type PeerGuard<'a> = std::sync::MutexGuard<'a, Option<Option<Result<ViAttributes>>>>;

#[cfg(test)]
mod tests;
