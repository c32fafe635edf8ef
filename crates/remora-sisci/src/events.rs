//! Events of segments and the callback rules: a resource either has a callback, which runs
//! on the runtime's event thread, or its events queue up for the matching wait call.
//!
//! A local segment's events are kept by the node daemon until the process asks for them
//! (`remora_proto::Event`, `Request::SegmentEvents`): at the callback's registration, or at
//! the first wait. The daemon answers with the events it kept, in order, then
//! `SegmentEventsOn` (which makes the queue *ready*), then each event as it happens, all
//! down the session's one event socket, so they come once and in order. A first wait whose
//! time runs out before that answer waits for it [`ASK_GRACE`] longer, so that no event that
//! happened before the wait is missed by it. A wait on the event thread (inside another
//! resource's callback) cannot count on that thread to read the socket: it reads it itself
//! ([`EventQueue::wait_pumping`], `remora_client::Session::pump_events`), takes its
//! resource's events and leaves the others, in order, for after the running callback.

use crate::{Error, Result};
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a callback tells the library (`sci_callback_action_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackAction {
    /// Keep the callback (`SCI_CALLBACK_CONTINUE`).
    Continue,
    /// Remove the callback (`SCI_CALLBACK_CANCEL`).
    Cancel,
}

/// Why a segment callback runs or a segment wait returns (`sci_segment_cb_reason_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentReason {
    /// A connection was made (`SCI_CB_CONNECT`).
    Connect,
    /// A connection was released or refused (`SCI_CB_DISCONNECT`).
    Disconnect,
    /// The route to the other node is down for now (`SCI_CB_NOT_OPERATIONAL`).
    NotOperational,
    /// The route works (again) (`SCI_CB_OPERATIONAL`).
    Operational,
    /// The other side is gone for good (`SCI_CB_LOST`).
    Lost,
}

/// An event of a local segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalEvent {
    /// What happened.
    pub reason: SegmentReason,
    /// The node concerned.
    pub node: u32,
    /// The local adapter that saw it.
    pub adapter: u32,
}

/// An event of a remote segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteEvent {
    /// What happened.
    pub reason: SegmentReason,
    /// `None`, or why an asynchronous connect failed.
    pub status: Option<Error>,
}

/// A callback on handle `H` for events `E`.
pub type Callback<H, E> = Box<dyn FnMut(&H, E) -> CallbackAction + Send>;

struct State<H, E> {
    queue: VecDeque<E>,
    callback: Option<Callback<H, E>>,
    uses_callback: bool,
    running: bool,
    cancelled: bool,
    /// The events kept elsewhere were asked for (always, for a queue nothing is kept for).
    asked: bool,
    /// Every event that happened before the ask is in `queue` (or was delivered).
    ready: bool,
}

/// How much longer than its timeout a first wait for a local segment's events waits for
/// the daemon's answer to the ask for them (the answer is one round trip to the node's own
/// daemon; this bounds a wait whose answer cannot come, the event thread being busy).
pub(crate) const ASK_GRACE: Duration = Duration::from_secs(1);

/// The events of one resource.
pub(crate) struct EventQueue<H, E> {
    state: Mutex<State<H, E>>,
    cond: Condvar,
}

impl<H, E> std::fmt::Debug for EventQueue<H, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventQueue")
    }
}

impl<H, E> EventQueue<H, E> {
    pub(crate) fn new(callback: Option<Callback<H, E>>) -> Self {
        EventQueue::with_state(callback, true)
    }

    /// The queue of a resource whose events are kept by the daemon until the first wait
    /// asks for them (the ask is [`EventQueue::wait`]'s `ask`; a resource with a callback
    /// asks when it is made).
    pub(crate) fn kept_until_asked(callback: Option<Callback<H, E>>) -> Self {
        EventQueue::with_state(callback, false)
    }

    fn with_state(callback: Option<Callback<H, E>>, ready: bool) -> Self {
        EventQueue {
            state: Mutex::new(State {
                uses_callback: callback.is_some(),
                queue: VecDeque::new(),
                callback,
                running: false,
                cancelled: false,
                asked: ready,
                ready,
            }),
            cond: Condvar::new(),
        }
    }

    /// The daemon's answer to the ask came: every event kept before it was delivered.
    pub(crate) fn set_ready(&self) {
        let mut g = self.lock();
        g.ready = true;
        self.cond.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<H, E>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Deliver `e`: to the callback if there is one (outside the lock, so it may call the
    /// API), else to the queue for a waiter.
    pub(crate) fn push(&self, handle: &H, e: E) {
        let mut g = self.lock();
        if g.cancelled {
            return;
        }
        if g.uses_callback {
            let Some(mut cb) = g.callback.take() else {
                // The callback is running on this thread or was cancelled: queue it for
                // the running callback's caller to see later, or drop it after cancel.
                if g.running {
                    g.queue.push_back(e);
                }
                return;
            };
            g.running = true;
            drop(g);
            let mut ev = e;
            loop {
                if cb(handle, ev) == CallbackAction::Cancel {
                    let mut g = self.lock();
                    g.running = false;
                    g.queue.clear();
                    return;
                }
                // Take the next event and, when there is none, hand the callback back under
                // the same lock, so an event pushed meanwhile is never stranded.
                let mut g = self.lock();
                match g.queue.pop_front() {
                    Some(next) => ev = next,
                    None => {
                        g.running = false;
                        g.callback = Some(cb);
                        return;
                    }
                }
            }
        }
        g.queue.push_back(e);
        self.cond.notify_all();
    }

    /// Wait for the next event (the `SCIWaitFor…Event` calls). The first wait of a queue
    /// made by [`EventQueue::kept_until_asked`] calls `ask` first (outside the lock), and
    /// waits for the answer up to [`ASK_GRACE`] past `timeout` (not on the event thread,
    /// which is the one that would deliver it).
    ///
    /// # Errors
    /// [`Error::IllegalOperation`] when the resource uses a callback, [`Error::Timeout`],
    /// [`Error::Cancelled`] when the resource is removed meanwhile; the error of `ask`.
    pub(crate) fn wait(&self, timeout: Option<Duration>, ask: impl FnOnce() -> Result<()>) -> Result<E> {
        self.wait_pumping(timeout, ask, None::<fn(Option<Duration>) -> Result<()>>)
    }

    /// [`EventQueue::wait`], where the events do not come by themselves: instead of
    /// sleeping, the wait calls `pump` (outside the lock) with the time left, which
    /// delivers what comes within it (a wait on the event thread, which reads the event
    /// socket itself). A first wait waits for the answer to its ask [`ASK_GRACE`] longer
    /// here too.
    ///
    /// # Errors
    /// As [`EventQueue::wait`]; the error of `pump`.
    pub(crate) fn wait_pumping(
        &self,
        timeout: Option<Duration>,
        ask: impl FnOnce() -> Result<()>,
        mut pump: Option<impl FnMut(Option<Duration>) -> Result<()>>,
    ) -> Result<E> {
        let start = Instant::now();
        let mut g = self.lock();
        if g.uses_callback {
            return Err(Error::IllegalOperation);
        }
        if !g.asked {
            g.asked = true;
            drop(g);
            if let Err(e) = ask() {
                self.lock().asked = false;
                return Err(e);
            }
            g = self.lock();
        }
        // Whether the answer to the ask can come during this wait.
        let answer_can_come = pump.is_some() || !remora_client::events::on_event_thread();
        loop {
            if g.cancelled {
                return Err(Error::Cancelled);
            }
            if let Some(e) = g.queue.pop_front() {
                return Ok(e);
            }
            let left = match timeout {
                None => None,
                Some(t) => {
                    let elapsed = start.elapsed();
                    Some(match t.checked_sub(elapsed).filter(|l| !l.is_zero()) {
                        Some(left) => left,
                        // Time is up. A first wait still waits a moment for the answer to
                        // its ask, after the events that happened before it.
                        None if !g.ready && answer_can_come => (t + ASK_GRACE)
                            .checked_sub(elapsed)
                            .filter(|l| !l.is_zero())
                            .ok_or(Error::Timeout)?,
                        None => return Err(Error::Timeout),
                    })
                }
            };
            g = match (&mut pump, left) {
                (Some(pump), left) => {
                    drop(g);
                    pump(left)?;
                    self.lock()
                }
                (None, None) => self.cond.wait(g).unwrap_or_else(|p| p.into_inner()),
                (None, Some(left)) => self.cond.wait_timeout(g, left).unwrap_or_else(|p| p.into_inner()).0,
            };
        }
    }

    /// The resource is gone: waiters return [`Error::Cancelled`]; no more callbacks.
    pub(crate) fn cancel(&self) {
        let mut g = self.lock();
        g.cancelled = true;
        g.callback = None;
        self.cond.notify_all();
    }
}
