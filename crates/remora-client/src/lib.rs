//! The Remora client runtime: what every personality library uses to reach its node.
//!
//! A [`Session`] is one control connection to the node daemon (Unix `SOCK_SEQPACKET`). If no
//! daemon plays the node yet, [`Session::open`] starts `remorad` itself and waits for its
//! socket, so a program needs no set-up step. Calls are blocking. The runtime starts threads of its own
//! only when they are needed: the event thread (started with the first registration; it
//! waits on every descriptor that can bring news and runs the callbacks, [`events`]), and,
//! once a process maps memory of another host, a DSM pager thread per home node of its maps
//! (and one for multicast maps) ([`dsm`]).
//!
//! ```no_run
//! use remora_client::{Config, Session};
//! use remora_proto::{Reply, Request};
//! let session = Session::open(&Config::from_env().unwrap()).unwrap();
//! let (reply, _fds) = session.request(Request::Probe { node: session.node() }, &[]).unwrap();
//! assert_eq!(reply, Reply::Probe { reachable: true });
//! ```

pub mod dsm;
pub mod events;
pub mod id_hash;
mod lost;
mod pump;
mod spawn;

use remora_proto::{
    decode, encode, paths, Event, LostReason, Reply, Request, RequestFrame, Role, ServerMsg, MAX_FRAME,
    NO_REPLY, VERSION,
};
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use lost::LostSeen;
pub use spawn::find_daemon;

/// Errors of the client runtime.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon refused the request.
    #[error(transparent)]
    Daemon(#[from] remora_proto::Error),
    /// A configuration value cannot be used.
    #[error(transparent)]
    Config(#[from] remora_config::ConfigError),
    /// No daemon could be reached or started.
    #[error("no node daemon: {0}")]
    NoDaemon(String),
    /// The daemon closed the session.
    #[error("the node daemon closed the session")]
    DaemonGone,
    /// The daemon sent something this side does not understand.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The daemon speaks another version of the protocol (a daemon of an older or newer
    /// build still runs for the node).
    #[error(
        "the daemon of node {node} speaks protocol {daemon}, this library {library}: stop it \
         (kill the remorad of node {node}) and a matching one starts"
    )]
    Version {
        /// The node.
        node: u32,
        /// The daemon's version.
        daemon: u16,
        /// This library's.
        library: u16,
    },
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Where a process finds its node.
#[derive(Debug, Clone)]
pub struct Config {
    /// The node this process belongs to (`REMORA_NODE`, default 4).
    pub node: u32,
    /// The runtime directory (`REMORA_RUNTIME_DIR`, ...).
    pub runtime_dir: PathBuf,
    /// The daemon binary to start (`REMORA_DAEMON`); searched for when `None`.
    pub daemon: Option<PathBuf>,
    /// Start a daemon when none runs (`REMORA_NO_SPAWN=1` turns this off).
    pub spawn: bool,
    /// How long a daemon started by the library lingers without clients
    /// (`REMORA_IDLE_EXIT` seconds, default 30).
    pub idle_exit: Duration,
    /// The cluster file a daemon started by the library uses (`REMORA_CLUSTER`).
    pub cluster: Option<PathBuf>,
}

impl Config {
    /// The configuration the environment describes (read and checked by
    /// `remora_config`). A bad value is also said once on stderr, naming the variable.
    ///
    /// # Errors
    /// [`ClientError::Config`] naming the variable, its value and what is allowed.
    pub fn from_env() -> Result<Config, ClientError> {
        let c = remora_config::Config::from_env().inspect_err(remora_config::report)?;
        Ok(Config::from(&c))
    }

    /// The same configuration for another node.
    pub fn with_node(&self, node: u32) -> Config {
        Config { node, ..self.clone() }
    }
}

impl From<&remora_config::Config> for Config {
    fn from(c: &remora_config::Config) -> Config {
        Config {
            node: c.node,
            runtime_dir: c.runtime_dir.clone(),
            daemon: c.daemon.clone(),
            spawn: c.spawn,
            idle_exit: c.idle_exit.max(Duration::from_secs(1)),
            cluster: c.cluster_file.clone(),
        }
    }
}

/// Receives the daemon's events (on the event thread).
pub type EventSink = Arc<dyn Fn(&Event) + Send + Sync>;

/// What a session knows from events, shared with the event thread.
#[derive(Default)]
struct EventState {
    gone: std::sync::atomic::AtomicBool,
    events: Mutex<VecDeque<Event>>,
    lost: Mutex<HashMap<u64, LostReason>>,
    /// How many batches of events have marked connections lost (bumped once per batch,
    /// under `lost`'s lock, after the batch's entries): 0 while none is lost, so that a
    /// check takes no lock then; a holder of one connection that remembers the count at
    /// which it found the connection not lost takes it again only when the count moved
    /// ([`LostSeen`]).
    lost_batches: AtomicU64,
    /// Connections whose route the daemon last reported silent (not operational).
    silent: Mutex<std::collections::HashSet<u64>>,
    sink: Mutex<Option<EventSink>>,
    on_gone: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// Events read off the event socket and not yet delivered, oldest first: the handler
    /// delivers them one at a time, so that a callback that runs for one of them and pumps
    /// the socket ([`Session::pump_events`]) finds the later ones here, in order.
    pending: Mutex<VecDeque<Event>>,
}

impl EventState {
    fn absorb(&self, ev: Event) {
        self.absorb_all(vec![ev]);
    }

    /// Apply events queued together: every connection they report lost is marked at once
    /// (a thread that sees one of them lost finds the others lost too), then each goes to
    /// the sink and the queue, in order.
    fn absorb_all(&self, evs: Vec<Event>) {
        self.mark(&evs);
        for ev in evs {
            self.deliver(ev);
        }
    }

    /// Events read together off the event socket: marked at once (as
    /// [`EventState::absorb_all`]), then queued behind those not yet delivered.
    fn read(&self, evs: Vec<Event>) {
        self.mark(&evs);
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).extend(evs);
    }

    /// The oldest event read off the event socket and not yet delivered.
    fn next_pending(&self) -> Option<Event> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).pop_front()
    }

    /// Mark the connections `evs` report lost or silent.
    fn mark(&self, evs: &[Event]) {
        let mut lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
        let mut silent = self.silent.lock().unwrap_or_else(|p| p.into_inner());
        let mut any_lost = false;
        for ev in evs {
            match ev {
                Event::ConnectionLost { conn, reason } => {
                    lost.insert(*conn, *reason);
                    any_lost = true;
                }
                Event::ConnectionLink { conn, operational: false } => {
                    silent.insert(*conn);
                }
                Event::ConnectionLink { conn, operational: true } => {
                    silent.remove(conn);
                }
                _ => {}
            }
        }
        if any_lost {
            // Still under the lock, after every entry of the batch: a thread that reads the
            // new count (Acquire) and takes the lock finds the whole batch.
            self.lost_batches.fetch_add(1, Ordering::Release);
        }
    }

    fn deliver(&self, ev: Event) {
        let sink = self.sink.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(sink) = sink {
            sink(&ev);
        }
        let mut q = self.events.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(ev);
        // Keep the backlog bounded for programs that never look at it.
        while q.len() > 1024 {
            q.pop_front();
        }
    }
}

/// One control connection to the node daemon.
pub struct Session {
    /// The socket and a receive buffer, used by one request at a time.
    fd: Mutex<(OwnedFd, Vec<u8>)>,
    node: u32,
    /// The runtime directory of the node's daemon: with a node number, it names one node
    /// of one cluster (the process may reach several clusters, each in its own directory).
    dir: std::path::PathBuf,
    next: AtomicU64,
    state: Arc<EventState>,
    token: Mutex<Option<u64>>,
    /// The session's event socket, for the asks served there ([`Session::ask_on_events`]);
    /// non-blocking.
    ev_out: std::sync::OnceLock<OwnedFd>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("node", &self.node).finish()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(t) = self.token.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if let Ok(l) = events::event_loop() {
                l.unregister(t);
            }
        }
    }
}

impl Session {
    /// Open a session as an application process, starting the daemon if needed.
    ///
    /// # Errors
    /// [`ClientError::NoDaemon`] when no daemon runs and none could be started.
    pub fn open(cfg: &Config) -> Result<Session, ClientError> {
        Session::open_as(cfg, Role::Client, cfg.spawn)
    }

    /// Open a control session (no resources; never starts a daemon).
    ///
    /// # Errors
    /// [`ClientError::NoDaemon`] when no daemon plays the node.
    pub fn open_control(cfg: &Config) -> Result<Session, ClientError> {
        Session::open_as(cfg, Role::Control, false)
    }

    /// Open a session for one SCIF endpoint: it holds the endpoint's port, listener or
    /// connection side, and its end releases them. Starts the daemon of `cfg.node` when
    /// `spawn` and `cfg.spawn` allow.
    ///
    /// # Errors
    /// [`ClientError::NoDaemon`] when no daemon plays the node.
    pub fn open_scif(cfg: &Config, spawn: bool) -> Result<Session, ClientError> {
        Session::open_as(cfg, Role::Scif, spawn && cfg.spawn)
    }

    /// Whether the daemon has closed this session's socket (it exited or crashed). Cheap;
    /// answers `false` while a request is in flight on another thread.
    pub fn hung_up(&self) -> bool {
        match self.fd.try_lock() {
            Ok(g) => remora_sys::seqpacket::peer_closed(g.0.as_fd()),
            Err(_) => false,
        }
    }

    fn open_as(cfg: &Config, role: Role, spawn: bool) -> Result<Session, ClientError> {
        let path = paths::socket_path(&cfg.runtime_dir, cfg.node);
        let fd = match remora_sys::seqpacket::connect(&path, false) {
            Ok(fd) => fd,
            Err(e) if spawn => {
                tracing::debug!("no daemon for node {} ({e}); starting one", cfg.node);
                spawn::start_daemon(cfg)?
            }
            Err(e) => {
                return Err(ClientError::NoDaemon(format!("node {} at {}: {e}", cfg.node, path.display())))
            }
        };
        let s = Session {
            fd: Mutex::new((fd, vec![0u8; MAX_FRAME])),
            node: cfg.node,
            dir: cfg.runtime_dir.clone(),
            next: AtomicU64::new(1),
            state: Arc::default(),
            token: Mutex::new(None),
            ev_out: std::sync::OnceLock::new(),
        };
        match s.request(Request::Hello { version: VERSION, role }, &[])? {
            (Reply::Hello { node }, fds) if node == cfg.node => {
                if let Some(ev) = fds.into_iter().next() {
                    s.listen(ev)?;
                }
                Ok(s)
            }
            (other, _) => Err(ClientError::Protocol(format!("unexpected hello answer {other:?}"))),
        }
    }

    /// What a reply that does not decode means: a daemon of another version says so
    /// once on stderr (a person must stop it), anything else is a protocol error.
    fn undecodable(&self, e: remora_proto::DecodeError) -> ClientError {
        match e {
            remora_proto::DecodeError::Version { theirs, ours } => {
                let e = ClientError::Version { node: self.node, daemon: theirs, library: ours };
                static SAID: std::sync::OnceLock<()> = std::sync::OnceLock::new();
                SAID.get_or_init(|| eprintln!("remora: {e}"));
                e
            }
            other => ClientError::Protocol(other.to_string()),
        }
    }

    /// The node this session belongs to.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// The runtime directory of the session's daemon: what tells the nodes of one cluster
    /// from the nodes of the same numbers of another.
    pub(crate) fn runtime_dir(&self) -> &std::path::Path {
        &self.dir
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (OwnedFd, Vec<u8>)> {
        self.fd.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hand the event socket to the event thread.
    fn listen(&self, ev: OwnedFd) -> Result<(), ClientError> {
        let state = Arc::downgrade(&self.state);
        let sock = ev.try_clone()?;
        // Only the event thread reads the socket, and only what `readable_now` saw: it
        // may be non-blocking, so that an ask never blocks on a full socket.
        let out = ev.try_clone()?;
        remora_sys::seqpacket::set_nonblocking(out.as_fd(), true)?;
        let _ = self.ev_out.set(out);
        let mut buf = vec![0u8; MAX_FRAME];
        let handler: events::Handler = Box::new(move || {
            let Some(state) = state.upgrade() else { return false };
            loop {
                // What was read before (by this loop, or by a handler that pumped the
                // socket) first, one at a time: a callback of one may pump the rest.
                if let Some(ev) = state.next_pending() {
                    state.deliver(ev);
                    continue;
                }
                match remora_sys::seqpacket::readable_now(sock.as_fd()) {
                    Ok(true) => {}
                    _ => return true,
                }
                match remora_sys::seqpacket::recv(sock.as_fd(), &mut buf) {
                    Ok((n, _)) if n > 0 => match decode::<ServerMsg>(&buf[..n]) {
                        Ok(ServerMsg::Event(e)) => state.read(vec![e]),
                        Ok(ServerMsg::Events(evs)) => state.read(evs),
                        Ok(other) => tracing::warn!("unexpected message on the event socket: {other:?}"),
                        Err(e) => {
                            tracing::warn!("malformed event from the daemon: {e}");
                            return false;
                        }
                    },
                    // The socket is non-blocking (`ev_out`): nothing after all, for now.
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                    // The daemon went away: nothing more will come.
                    _ => {
                        state.gone.store(true, Ordering::SeqCst);
                        let hook = state.on_gone.lock().unwrap_or_else(|p| p.into_inner()).clone();
                        if let Some(hook) = hook {
                            hook();
                        }
                        return false;
                    }
                }
            }
        });
        let token = events::event_loop()?.register(ev, handler)?;
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        Ok(())
    }

    /// Send every event of this session to `sink` (on the event thread) from now on.
    pub fn set_event_sink(&self, sink: EventSink) {
        *self.state.sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(sink);
    }

    /// Run `hook` (on the event thread) when the daemon closes this session: it exited or
    /// crashed, and no event will come any more.
    pub fn on_daemon_gone(&self, hook: Arc<dyn Fn() + Send + Sync>) {
        *self.state.on_gone.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook.clone());
        // Gone already (before the hook was set): run it now.
        if self.state.gone.load(Ordering::SeqCst) {
            hook();
        }
    }

    fn absorb(&self, ev: Event) {
        self.state.absorb(ev);
    }

    /// Send a request and wait for its reply (events that arrive meanwhile are queued).
    ///
    /// # Errors
    /// [`ClientError::Daemon`] with the daemon's reason, [`ClientError::DaemonGone`] when
    /// the daemon closed the session, or the I/O error.
    pub fn request(
        &self,
        req: Request,
        fds: &[BorrowedFd<'_>],
    ) -> Result<(Reply, Vec<OwnedFd>), ClientError> {
        let mut guard = self.lock();
        let id = self.send_on(&mut guard, req, fds)?;
        // Without a deadline the wait ends only with the reply or an error.
        self.receive(&mut guard, id, None)?.ok_or_else(|| ClientError::Protocol("no reply".into()))
    }

    /// [`Session::request`], unless another thread's request holds the session now:
    /// `None` then, and nothing is sent (for a look that must not wait behind a long
    /// request, such as an interrupt wait refreshing what it polls).
    ///
    /// # Errors
    /// As [`Session::request`].
    pub fn try_request(
        &self,
        req: Request,
        fds: &[BorrowedFd<'_>],
    ) -> Option<Result<(Reply, Vec<OwnedFd>), ClientError>> {
        let mut guard = match self.fd.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let asked = self.send_on(&mut guard, req, fds).and_then(|id| {
            self.receive(&mut guard, id, None)?.ok_or_else(|| ClientError::Protocol("no reply".into()))
        });
        Some(asked)
    }

    /// Send a request whose reply [`Session::answer`] waits for, in as many slices as the
    /// caller likes (a call that must stay a cancellation point while it waits). Meant
    /// for a session that has one request in flight at a time: a request sent later on
    /// the same session treats this one's reply as abandoned.
    ///
    /// # Errors
    /// [`ClientError::DaemonGone`] or the I/O error of sending.
    pub fn begin(&self, req: Request, fds: &[BorrowedFd<'_>]) -> Result<u64, ClientError> {
        let mut guard = self.lock();
        self.send_on(&mut guard, req, fds)
    }

    /// Wait up to `timeout` (`None`: until it comes) for the reply to request `id` of
    /// [`Session::begin`]; `Ok(None)` when the time passed first.
    ///
    /// # Errors
    /// As [`Session::request`].
    pub fn answer(
        &self,
        id: u64,
        timeout: Option<Duration>,
    ) -> Result<Option<(Reply, Vec<OwnedFd>)>, ClientError> {
        let mut guard = self.lock();
        self.receive(&mut guard, id, timeout)
    }

    fn send_on(
        &self,
        guard: &mut (OwnedFd, Vec<u8>),
        req: Request,
        fds: &[BorrowedFd<'_>],
    ) -> Result<u64, ClientError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let bytes = encode(&RequestFrame { id, req }).map_err(|e| ClientError::Protocol(e.to_string()))?;
        remora_sys::seqpacket::send(guard.0.as_fd(), &bytes, fds).map_err(gone)?;
        Ok(id)
    }

    /// Read until the reply to `id` (queueing events), or until `timeout` passes.
    fn receive(
        &self,
        guard: &mut (OwnedFd, Vec<u8>),
        id: u64,
        timeout: Option<Duration>,
    ) -> Result<Option<(Reply, Vec<OwnedFd>)>, ClientError> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let (sock, buf) = guard;
        loop {
            if let Some(d) = deadline {
                // An interrupted wait answers "nothing ready": look at the clock again.
                let left = d.saturating_duration_since(std::time::Instant::now());
                if remora_sys::poller::wait_ready(&[sock.as_fd()], Some(left))? == 0 {
                    if left.is_zero() {
                        return Ok(None);
                    }
                    continue;
                }
            }
            let (n, got) = remora_sys::seqpacket::recv(sock.as_fd(), buf).map_err(gone)?;
            if n == 0 {
                return Err(ClientError::DaemonGone);
            }
            match decode::<ServerMsg>(&buf[..n]).map_err(|e| self.undecodable(e))? {
                ServerMsg::Reply { id: rid, result } if rid == id => return Ok(Some((result?, got))),
                // The answer to a request whose caller gave up waiting (a thread cancelled
                // inside the call): it is nobody's now.
                ServerMsg::Reply { id: rid, .. } if rid < id => continue,
                ServerMsg::Reply { id: rid, .. } => {
                    return Err(ClientError::Protocol(format!("reply to {rid} while waiting for {id}")))
                }
                ServerMsg::Event(ev) => self.absorb(ev),
                ServerMsg::Events(evs) => self.state.absorb_all(evs),
            }
        }
    }

    /// Send `req` to the daemon on the session's event socket, with no reply: what the
    /// daemon serves there ([`Request::SegmentEvents`]) is answered by an event, after the
    /// events it concerns. No request of this session, however long, holds it up. A
    /// session without an event socket (or whose event socket is full) sends it as a
    /// request instead, whose answer is [`Reply::Ok`] (the events still come as events).
    ///
    /// # Errors
    /// [`ClientError::DaemonGone`], or the I/O error of sending.
    pub fn ask_on_events(&self, req: Request) -> Result<(), ClientError> {
        if let Some(out) = self.ev_out.get() {
            let bytes = encode(&RequestFrame { id: NO_REPLY, req: req.clone() })
                .map_err(|e| ClientError::Protocol(e.to_string()))?;
            match remora_sys::seqpacket::send(out.as_fd(), &bytes, &[]) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(gone(e)),
            }
        }
        self.request(req, &[]).map(|_| ())
    }

    /// Send a one-way note (no reply).
    ///
    /// # Errors
    /// The I/O error of sending.
    pub fn note(&self, req: Request) -> Result<(), ClientError> {
        let bytes =
            encode(&RequestFrame { id: NO_REPLY, req }).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let guard = self.lock();
        remora_sys::seqpacket::send(guard.0.as_fd(), &bytes, &[]).map_err(gone)
    }

    /// Whether the daemon has closed this session (it exited or crashed).
    pub fn daemon_gone(&self) -> bool {
        self.state.gone.load(Ordering::SeqCst)
    }

    /// Take the queued events (the last 1024 at most).
    pub fn take_events(&self) -> Vec<Event> {
        self.state.events.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect()
    }

    /// Whether the daemon last reported the route of connection `conn` silent (not
    /// operational; it said so again when the route answered).
    pub fn silent(&self, conn: u64) -> bool {
        self.state.silent.lock().unwrap_or_else(|p| p.into_inner()).contains(&conn)
    }
}

fn gone(e: std::io::Error) -> ClientError {
    match e.raw_os_error() {
        Some(32) | Some(104) => ClientError::DaemonGone,
        _ => ClientError::Io(e),
    }
}
