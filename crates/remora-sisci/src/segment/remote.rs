//! Remote segments: connections to a segment of this node, another node of this host or
//! another host (`SCIConnectSegment` and the calls on a `sci_remote_segment_t`).

use super::first_memfd;
use crate::events::{Callback, EventQueue, RemoteEvent, SegmentReason};
use crate::{check_adapter, timeout_ms, DepToken, Deps, Descriptor, Error, Result};
use remora_client::Session;
use remora_proto::{Reply, Request};
use remora_sys::Memfd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// A remote segment's callback (`sci_cb_remote_segment_t`).
pub type RemoteCallback = Callback<RemoteSegment, RemoteEvent>;

/// Flags of [`RemoteSegment::connect_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectFlags {
    /// Return at once; the result comes as a `Connect` or `Disconnect` event
    /// (`SCI_FLAG_ASYNCHRONOUS_CONNECT`).
    pub asynchronous: bool,
}

/// An established connection.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) session: Arc<Session>,
    pub(crate) conn: u64,
    pub(crate) size: usize,
    /// The segment's memory when it is on this host; `None` for another host's segment.
    pub(crate) memfd: Option<Memfd>,
    /// A multicast connection's legs: this node's connections to a member of each other
    /// host that has one (`broadcast.rs`); empty otherwise.
    pub(crate) legs: Vec<u64>,
}

#[derive(Debug)]
pub(crate) struct RemoteInner {
    pub(crate) desc: Descriptor,
    node: u32,
    id: u32,
    pub(crate) link: OnceLock<Link>,
    pub(crate) deps: Arc<Deps>,
    token: Mutex<Option<DepToken>>,
    disconnected: AtomicBool,
    events: EventQueue<RemoteSegment, RemoteEvent>,
    pub(crate) watch: crate::health::LinkWatch,
    /// What `gone` last learned of the connection's loss (it runs on every RSM `put`).
    pub(crate) lost_seen: remora_client::LostSeen,
}

impl Drop for RemoteInner {
    fn drop(&mut self) {
        if let Some(l) = self.link.get() {
            self.desc.inner.dispatch.remotes.lock().unwrap_or_else(|p| p.into_inner()).remove(&l.conn);
            if !self.disconnected.load(Ordering::Acquire) {
                let _ = l.session.request(Request::Disconnect { conn: l.conn }, &[]);
            }
        }
    }
}

/// A connection to a segment of some node (`sci_remote_segment_t`).
#[derive(Debug, Clone)]
pub struct RemoteSegment {
    pub(crate) inner: Arc<RemoteInner>,
}

fn connect_on(
    session: &Session,
    node: u32,
    id: u32,
    timeout: Option<Duration>,
) -> Result<(u64, usize, Option<Memfd>)> {
    let (reply, fds) =
        session.request(Request::Connect { node, id, timeout_ms: timeout_ms(timeout) }, &[])?;
    let Reply::Connected { conn, size } = reply else {
        return Err(Error::System(format!("unexpected reply {reply:?}")));
    };
    let memfd = first_memfd(fds)?;
    Ok((conn, size as usize, memfd))
}

impl RemoteSegment {
    /// The descriptor it was made through (`SCIClose` of it with this still open tears this down).
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.desc
    }

    pub(crate) fn from_inner(inner: Arc<RemoteInner>) -> RemoteSegment {
        RemoteSegment { inner }
    }

    /// `SCIConnectSegment`: wait up to `timeout` (`None`: forever) for segment `id` of
    /// `node` to become available, then connect. Connecting to one's own node works.
    ///
    /// # Errors
    /// [`Error::NoSuchNode`] at once for an unknown node; [`Error::NoSuchSegment`] when the
    /// time ran out and no segment had the id; [`Error::Timeout`] when it existed but was
    /// not available; [`Error::NoSuchAdapter`].
    pub fn connect(
        desc: &Descriptor,
        node: u32,
        id: u32,
        adapter: u32,
        timeout: Option<Duration>,
    ) -> Result<RemoteSegment> {
        RemoteSegment::connect_with(desc, node, id, adapter, timeout, ConnectFlags::default(), None)
    }

    /// `SCIConnectSegment` with a callback and/or `SCI_FLAG_ASYNCHRONOUS_CONNECT`. An
    /// asynchronous connect returns at once; its result arrives as a `Connect` event (the
    /// handle is now usable) or a `Disconnect` event with the reason (release the handle
    /// with [`RemoteSegment::disconnect`]).
    ///
    /// # Errors
    /// As [`RemoteSegment::connect`] for a synchronous connect; an asynchronous one fails
    /// at once only for a bad adapter or a closed descriptor.
    pub fn connect_with(
        desc: &Descriptor,
        node: u32,
        id: u32,
        adapter: u32,
        timeout: Option<Duration>,
        flags: ConnectFlags,
        callback: Option<RemoteCallback>,
    ) -> Result<RemoteSegment> {
        check_adapter(adapter)?;
        let live = desc.live()?;
        let inner = Arc::new(RemoteInner {
            token: Mutex::new(Some(desc.inner.deps.token())),
            desc: desc.clone(),
            node,
            id,
            link: OnceLock::new(),
            deps: Arc::default(),
            disconnected: AtomicBool::new(false),
            events: EventQueue::new(callback),
            watch: Default::default(),
            lost_seen: Default::default(),
        });
        if !flags.asynchronous {
            let (conn, size, memfd) = connect_on(&live.session, node, id, timeout)?;
            RemoteSegment::attach_link(
                &inner,
                Link { session: live.session.clone(), conn, size, memfd, legs: vec![] },
            );
            return Ok(RemoteSegment { inner });
        }
        // Asynchronous: a private session does the (possibly long) wait, so the
        // descriptor's own session stays free for other calls.
        let weak = Arc::downgrade(&inner);
        let cfg = live.cfg.clone();
        std::thread::Builder::new()
            .name("remora-connect".into())
            .spawn(move || {
                let result = Session::open(&cfg).map_err(Error::from).and_then(|s| {
                    let s = Arc::new(s);
                    connect_on(&s, node, id, timeout).map(|(conn, size, memfd)| Link {
                        session: s,
                        conn,
                        size,
                        memfd,
                        legs: vec![],
                    })
                });
                let Some(inner) = weak.upgrade() else { return };
                let seg = RemoteSegment { inner };
                match result {
                    Ok(link) if !seg.inner.disconnected.load(Ordering::Acquire) => {
                        let d = Arc::downgrade(&seg.inner.desc.inner.dispatch);
                        link.session.set_event_sink(Arc::new(move |ev| {
                            if let Some(d) = d.upgrade() {
                                d.deliver(ev);
                            }
                        }));
                        RemoteSegment::attach_link(&seg.inner, link);
                        seg.deliver(RemoteEvent { reason: SegmentReason::Connect, status: None });
                    }
                    Ok(link) => {
                        let _ = link.session.request(Request::Disconnect { conn: link.conn }, &[]);
                    }
                    Err(e) => seg.deliver(RemoteEvent { reason: SegmentReason::Disconnect, status: Some(e) }),
                }
            })
            .map_err(|e| Error::System(e.to_string()))?;
        Ok(RemoteSegment { inner })
    }

    /// A remote segment from the answer to a connect request of a personality layered on
    /// SISCI (RSM's connect carries permissions and signals): the answer names a core
    /// connection ([`Reply::Connected`], [`Reply::RsmConnected`], or a multicast
    /// connection's [`Reply::GroupConnected`]) and `fds` holds the
    /// segment's memory when it is on this host. The segment is then a remote segment like
    /// any other: maps (through the DSM for another host's), DMA, events, disconnect.
    ///
    /// # Errors
    /// [`Error::System`] for another answer; [`Error::IllegalOperation`] on a closed
    /// descriptor.
    pub fn adopt(
        desc: &Descriptor,
        node: u32,
        id: u32,
        reply: &Reply,
        fds: Vec<std::os::fd::OwnedFd>,
    ) -> Result<RemoteSegment> {
        let live = desc.live()?;
        let (conn, size, legs) = match reply {
            Reply::Connected { conn, size } | Reply::RsmConnected { conn, size, .. } => {
                (*conn, *size as usize, vec![])
            }
            Reply::GroupConnected { conn, size, legs } => (*conn, *size as usize, legs.clone()),
            other => return Err(Error::System(format!("unexpected reply {other:?}"))),
        };
        let memfd = first_memfd(fds)?;
        let inner = Arc::new(RemoteInner {
            token: Mutex::new(Some(desc.inner.deps.token())),
            desc: desc.clone(),
            node,
            id,
            link: OnceLock::new(),
            deps: Arc::default(),
            disconnected: AtomicBool::new(false),
            events: EventQueue::new(None),
            watch: Default::default(),
            lost_seen: Default::default(),
        });
        RemoteSegment::attach_link(&inner, Link { session: live.session.clone(), conn, size, memfd, legs });
        Ok(RemoteSegment { inner })
    }

    fn attach_link(inner: &Arc<RemoteInner>, link: Link) {
        let conn = link.conn;
        if inner.link.set(link).is_ok() {
            inner
                .desc
                .inner
                .dispatch
                .remotes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(conn, Arc::downgrade(inner));
        }
    }

    pub(crate) fn deliver(&self, e: RemoteEvent) {
        self.inner.watch.note(e.reason);
        self.inner.events.push(self, e);
    }

    pub(crate) fn link(&self) -> Result<&Link> {
        if self.inner.disconnected.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("segment disconnected".into()));
        }
        self.inner.link.get().ok_or(Error::NotConnected)
    }

    /// Whether the connection is established (an asynchronous connect may still run).
    pub fn is_connected(&self) -> bool {
        self.link().is_ok()
    }

    /// `SCIGetRemoteSegmentSize` (0 while an asynchronous connect runs).
    pub fn size(&self) -> usize {
        self.inner.link.get().map(|l| l.size).unwrap_or(0)
    }

    /// `SCIGetRemoteSegmentId`.
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// `SCIGetRemoteSegmentNodeId`.
    pub fn node(&self) -> u32 {
        self.inner.node
    }

    /// The node's connection handle (0 while an asynchronous connect runs).
    pub fn handle(&self) -> u64 {
        self.inner.link.get().map(|l| l.conn).unwrap_or(0)
    }

    /// `SCIWaitForRemoteSegmentEvent` (`None` waits forever).
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::Cancelled`] when disconnected meanwhile;
    /// [`Error::IllegalOperation`] when the connection has a callback.
    pub fn wait_event(&self, timeout: Option<Duration>) -> Result<RemoteEvent> {
        if self.inner.disconnected.load(Ordering::Acquire) {
            return Err(Error::Cancelled);
        }
        if let (true, Some(l)) = (remora_client::events::on_event_thread(), self.inner.link.get()) {
            // Inside another resource's callback: the event thread reads the event socket
            // again only after it returns, so this wait reads the socket itself and takes
            // this connection's events as they come (the others are delivered after the
            // running callback); a wait here used to miss them until its time ran out.
            let conn = l.conn;
            let pick = move |ev: &remora_proto::Event| {
                use remora_proto::Event::{ConnectionLink, ConnectionLost, SegmentUnavailable};
                matches!(*ev, ConnectionLink { conn: c, .. } | SegmentUnavailable { conn: c }
                    | ConnectionLost { conn: c, .. } if c == conn)
            };
            let pump = |left| match l.session.pump_events(&pick, left) {
                Ok(_) => Ok(()),
                Err(remora_client::ClientError::DaemonGone) => Err(Error::Cancelled),
                Err(e) => Err(Error::from(e)),
            };
            return self.inner.events.wait_pumping(timeout, || Ok(()), Some(pump));
        }
        self.inner.events.wait(timeout, || Ok(()))
    }

    /// `SCIDisconnectSegment` (also releases a failed or running asynchronous connect).
    ///
    /// # Errors
    /// [`Error::Busy`] while maps of it or posted DMA transfers exist.
    pub fn disconnect(&self) -> Result<()> {
        if self.inner.disconnected.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("segment disconnected".into()));
        }
        if self.inner.deps.busy() {
            return Err(Error::Busy);
        }
        if let Some(l) = self.inner.link.get() {
            l.session.request(Request::Disconnect { conn: l.conn }, &[])?;
        }
        self.inner.disconnected.store(true, Ordering::Release);
        self.inner.events.cancel();
        self.inner.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }

    /// The segment's memory, when it is on this host (a map of it placed by the caller, as
    /// RSM's `RSM_MAP_FIXED` over the program's own range).
    pub fn memory(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.link().ok().and_then(|l| l.memfd.as_ref()).map(std::os::fd::AsFd::as_fd)
    }

    /// Whether the segment's memory is on this host (nodes of other hosts are reached over
    /// the network: DMA, interrupts and events work, maps do not yet).
    pub fn is_on_this_host(&self) -> bool {
        self.inner.link.get().is_some_and(|l| l.memfd.is_some())
    }

    /// A channel of this process's own to the memories of `segs` (connections of one
    /// descriptor to segments of one node of another host), whose stores land in the order
    /// they were sent, whichever segment each reaches (`remora_client::dsm::Channel`).
    /// With `watch` `(index into segs, offset)`, the home wakes futex waiters of the
    /// 4-byte word at `offset` of that segment after each store touching it, and those of
    /// the segment's first word after each store touching that.
    ///
    /// # Errors
    /// [`Error::NotConnected`] for a segment not connected; [`Error::IllegalParameter`] for
    /// a segment on this host, segments of several nodes or descriptors; the dial's failure.
    pub fn channel(
        segs: &[&RemoteSegment],
        watch: Option<(usize, u64)>,
    ) -> Result<remora_client::dsm::Channel> {
        let mut session: Option<&Arc<Session>> = None;
        let mut conns = Vec::with_capacity(segs.len());
        for s in segs {
            let l = s.inner.link.get().ok_or(Error::NotConnected)?;
            if l.memfd.is_some() || !l.legs.is_empty() {
                return Err(Error::IllegalParameter("a channel reaches segments of another host".into()));
            }
            if !Arc::ptr_eq(session.get_or_insert(&l.session), &l.session) {
                return Err(Error::IllegalParameter("a channel's segments come from one descriptor".into()));
            }
            conns.push(l.conn);
        }
        let session = session.ok_or_else(|| Error::IllegalParameter("a channel to no segment".into()))?;
        let watch = watch.map(|(i, off)| (i as u32, off));
        remora_client::dsm::Channel::open(session, conns, watch).map_err(Error::from)
    }
}
