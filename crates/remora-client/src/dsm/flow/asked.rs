//! A map's pager flow asked for in the background: the map returns without waiting for its
//! flow (the daemon dials and authenticates it, ~150 µs across hosts, most of a map's
//! cost), and whatever needs the flow first — the pager's first fault or send, a store
//! straight home, [`DsmMap::is_direct`](super::super::DsmMap::is_direct) — waits for it
//! here. The request is booked with the map and sent once the map is made
//! ([`DsmMap::ask_flow`](super::super::DsmMap::ask_flow)), by the asking thread of the
//! map's pager session (`remora-flow-ask`, one per session with requests, ending when idle:
//! a home that does not answer its dial holds up only its own session's requests, which the
//! session would serialise anyway; SISCI keeps a pager session per descriptor and home
//! node, so those are requests of the same home): no map waits for it and no thread is
//! started per map. The asking thread runs in the background class
//! (`remora_sys::sched::background_thread`): woken by the mapping thread on a busy core, it
//! took that core at once and the map returned only after the request, the daemons' dial
//! and the answer; now it runs on an idle core, or once the core is given up. A request it
//! has not taken yet stays booked, and whoever needs the flow first makes it.
//! A request nobody waits for any more (the map went first) is not made; one not sent yet
//! when the flow is first needed is made by the thread that needs it. Where no asking
//! thread can be started the request is made at once.

use super::{Direct, Flow, Key, BOOKS};
use crate::dsm::MapNote;
use crate::Session;
use remora_proto::Request;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The answer to a flow request: nothing yet, then the flow or none (`None`: the daemon
/// could not open one; the pager goes through it instead).
#[derive(Default)]
pub(in crate::dsm) struct Cell {
    got: Mutex<Option<Option<Flow>>>,
    came: Condvar,
    /// The request, booked and not made yet (also while an asking thread was told of it
    /// and has not run yet: whoever needs the flow first takes it).
    booked: Mutex<Option<Booked>>,
    /// The request as taken by an asking thread, and the process that did: a child made
    /// by fork while it was on its way makes it again (its copy of the answer never comes).
    sent: Mutex<Option<(u32, Booked)>>,
    /// The notes of the maps waiting for the request, sent just before it (`note.rs`).
    notes: Mutex<Vec<Arc<MapNote>>>,
}

/// A flow request booked with its map: the session it goes on, the request, its key.
type Booked = (Arc<Session>, Request, Key);

/// A pager flow that is there, or on its way. Clones share it.
#[derive(Clone)]
pub(in crate::dsm) struct Soon(pub(super) Arc<Cell>);

impl Soon {
    /// An answer known now.
    pub(in crate::dsm) fn ready(flow: Option<Flow>) -> Soon {
        Soon(Arc::new(Cell {
            got: Mutex::new(Some(flow)),
            came: Condvar::default(),
            booked: Mutex::default(),
            sent: Mutex::default(),
            notes: Mutex::default(),
        }))
    }

    /// Have `note` sent just before the flow request, by whoever makes it; right after
    /// the request when it is on its way (the session carries one request at a time: the
    /// mapping thread must not wait behind a dial); at once when it was answered or none
    /// is asked.
    pub(in crate::dsm) fn attach(&self, note: Arc<MapNote>) {
        let booked = self.0.booked.lock().unwrap_or_else(|p| p.into_inner());
        let mut notes = self.0.notes.lock().unwrap_or_else(|p| p.into_inner());
        // Not answered yet (looked at under the notes' lock: the answer is set before the
        // notes are looked at again, see `answer`).
        if booked.is_some() || self.peek().is_none() {
            notes.push(note);
            return;
        }
        drop((notes, booked));
        note.send();
    }

    /// Have the booked request made by the asking thread of its session, if it was not
    /// made yet. The request stays booked until that thread takes it: the asking thread
    /// runs in the background class (it never takes the core from the thread that woke
    /// it), and a thread that needs the flow before it ran makes the request itself.
    pub(in crate::dsm) fn start(&self) {
        let asker = match self.0.booked.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some((session, _, _)) => Arc::as_ptr(session) as usize,
            None => return,
        };
        send(Ask { asker, soon: self.clone() });
    }

    /// Make the booked request, unless someone took it already.
    fn take_and_answer(&self, here: bool) {
        // Marked sent while still booked (under the booking's lock): a child forked at any
        // moment finds the request either booked or sent, and makes it again.
        let b = {
            let mut booked = self.0.booked.lock().unwrap_or_else(|p| p.into_inner());
            let Some(b) = booked.take() else { return };
            *self.0.sent.lock().unwrap_or_else(|p| p.into_inner()) = Some((std::process::id(), b.clone()));
            b
        };
        answer(b, self, here);
    }

    /// The flow, once its request was answered (`None`: no flow, the daemon's path); a
    /// request not sent yet is made now, on this thread.
    pub(in crate::dsm) fn get(&self) -> Option<Flow> {
        if let Some(b) = self.booked() {
            answer(b, self, true);
        }
        if self.peek().is_none() {
            let sent = self.0.sent.lock().unwrap_or_else(|p| p.into_inner()).take();
            match sent {
                // Sent by the parent of this forked process: asked again here.
                Some((pid, b)) if pid != std::process::id() => answer(b, self, true),
                other => *self.0.sent.lock().unwrap_or_else(|p| p.into_inner()) = other,
            }
        }
        let mut g = self.0.got.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(f) = g.as_ref() {
                return f.clone();
            }
            g = self.0.came.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The answer if it came (`Some(None)`: no flow), without waiting or asking.
    pub(in crate::dsm) fn peek(&self) -> Option<Option<Flow>> {
        self.0.got.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The flow failed and a new one was opened (`pager/revive.rs`): every holder of this
    /// answer (the map, its pager) uses the new one from now on.
    pub(in crate::dsm) fn replace(&self, flow: Flow) {
        self.set(Some(flow));
    }

    fn booked(&self) -> Option<Booked> {
        self.0.booked.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn set(&self, flow: Option<Flow>) {
        // The answer before the mark goes: a child forked in between finds one of them.
        *self.0.got.lock().unwrap_or_else(|p| p.into_inner()) = Some(flow);
        self.0.sent.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.0.came.notify_all();
    }
}

/// One request for the asking thread: its session (the address of its `Arc`), and the
/// cell it is booked in.
struct Ask {
    asker: usize,
    soon: Soon,
}

/// How long an asking thread with nothing to ask waits before it ends.
const ASKER_IDLE: Duration = Duration::from_secs(1);

/// The asking threads: one per session with requests (a session answers one request at a
/// time, so one thread per session loses nothing, and a home that does not answer its
/// dial holds up only its own session's requests), each with its queue; and the process
/// they run in.
static ASKERS: Mutex<(u32, Vec<Asker>)> = Mutex::new((0, Vec::new()));

/// A session's asking thread: the session (its address) and the thread's queue.
type Asker = (usize, Sender<Ask>);

/// Book the request for the flow `req` names, for `key`, with `soon` (booked under `key`
/// in the process's books by the caller), which gets the answer: sent by
/// [`Soon::start`], or made by the first [`Soon::get`].
pub(super) fn book(session: Arc<Session>, req: Request, key: Key, soon: &Soon) {
    *soon.0.booked.lock().unwrap_or_else(|p| p.into_inner()) = Some((session, req, key));
}

/// Hand `a` to its session's asking thread (started for the session's first request, it
/// ends when it had nothing to ask for [`ASKER_IDLE`]), or make it now where that thread
/// cannot be had.
fn send(a: Ask) {
    let key = a.asker;
    let mut askers = ASKERS.lock().unwrap_or_else(|p| p.into_inner());
    // A child made by fork has none of its parent's threads.
    if askers.0 != std::process::id() {
        *askers = (std::process::id(), Vec::new());
    }
    let a = match askers.1.iter().find(|(k, _)| *k == key) {
        Some((_, tx)) => match tx.send(a) {
            Ok(()) => return,
            Err(back) => back.0,
        },
        None => a,
    };
    askers.1.retain(|(k, _)| *k != key);
    let (tx, rx) = channel::<Ask>();
    let started = std::thread::Builder::new().name("remora-flow-ask".into()).spawn(move || {
        remora_sys::sched::background_thread();
        asking(key, rx)
    });
    match started {
        Ok(_) => {
            let _ = tx.send(a);
            askers.1.push((key, tx));
        }
        Err(_) => {
            drop(askers);
            a.soon.take_and_answer(true);
        }
    }
}

/// The loop of the asking thread of session `key`: its requests, until it had none for
/// [`ASKER_IDLE`].
fn asking(key: usize, rx: std::sync::mpsc::Receiver<Ask>) {
    loop {
        match rx.recv_timeout(ASKER_IDLE) {
            Ok(a) => a.soon.take_and_answer(false),
            Err(RecvTimeoutError::Timeout) => {
                // Gone from the list first, under its lock: a request sent meanwhile is
                // still here to take.
                let mut askers = ASKERS.lock().unwrap_or_else(|p| p.into_inner());
                match rx.try_recv() {
                    Ok(a) => {
                        drop(askers);
                        a.soon.take_and_answer(false);
                    }
                    Err(_) => {
                        askers.1.retain(|(k, _)| *k != key);
                        return;
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Make the request `booked` of `soon` (unless, on the asking thread, nobody waits for its
/// answer any more), book the flow under its key, and give the answer to everyone waiting.
fn answer(booked: Booked, soon: &Soon, here: bool) {
    let (session, req, key) = booked;
    // The maps' notes first, so that the daemon reads them with the request (a note of a
    // map gone meanwhile was withdrawn: sending it does nothing).
    let notes = std::mem::take(&mut *soon.0.notes.lock().unwrap_or_else(|p| p.into_inner()));
    for n in notes {
        n.send();
    }
    // The books hold the cell weakly: held only by the asking thread, its map is gone.
    let wanted = here || Arc::strong_count(&soon.0) > 1;
    let flow = if wanted {
        // A panic must not leave a fault waiting for ever: it answers "no flow".
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Direct::open(&session, req)))
            .ok()
            .flatten()
            .map(|d| Arc::new(Mutex::new(d)))
    } else {
        None
    };
    {
        let mut books = BOOKS.lock().unwrap_or_else(|p| p.into_inner());
        books.asked.retain(|(k, w)| !(*k == key && std::ptr::eq(w.as_ptr(), Arc::as_ptr(&soon.0))));
        if let Some(f) = &flow {
            books.known.retain(|(k, _)| *k != key);
            books.known.push((key, Arc::downgrade(f)));
        }
    }
    soon.set(flow);
    // The notes of maps made while the request was on its way.
    let late = std::mem::take(&mut *soon.0.notes.lock().unwrap_or_else(|p| p.into_inner()));
    for n in late {
        n.send();
    }
}
