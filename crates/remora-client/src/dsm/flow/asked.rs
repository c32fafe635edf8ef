//! A map's pager flow asked for in the background: the map returns without waiting for its
//! flow (the daemon dials and authenticates it, ~150 µs across hosts, most of a map's
//! cost), and whatever needs the flow first — the pager's first fault or send, a store
//! straight home, [`DsmMap::is_direct`](super::super::DsmMap::is_direct) — waits for it
//! here. The request is booked with the map and sent once the map is made
//! ([`DsmMap::ask_flow`](super::super::DsmMap::ask_flow)), by one thread of the process
//! (`remora-flow-ask`, started with the first one), on the map's pager session: no map
//! waits for it and no thread is started per map. A request nobody waits for any more (the
//! map went first) is not made; one not sent yet when the flow is first needed is made by
//! the thread that needs it. Where the asking thread cannot be started the request is made
//! at once.

use super::{Direct, Flow, Key, BOOKS};
use crate::Session;
use remora_proto::Request;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// The answer to a flow request: nothing yet, then the flow or none (`None`: the daemon
/// could not open one; the pager goes through it instead).
#[derive(Default)]
pub(in crate::dsm) struct Cell {
    got: Mutex<Option<Option<Flow>>>,
    came: Condvar,
    /// The request, booked and not sent yet.
    booked: Mutex<Option<Booked>>,
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
        }))
    }

    /// Send the booked request (on the asking thread), if it was not sent yet.
    pub(in crate::dsm) fn start(&self) {
        if let Some(b) = self.booked() {
            send(Ask { booked: b, soon: self.clone() });
        }
    }

    /// The flow, once its request was answered (`None`: no flow, the daemon's path); a
    /// request not sent yet is made now, on this thread.
    pub(in crate::dsm) fn get(&self) -> Option<Flow> {
        if let Some(b) = self.booked() {
            answer(b, self, true);
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

    fn booked(&self) -> Option<Booked> {
        self.0.booked.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn set(&self, flow: Option<Flow>) {
        *self.0.got.lock().unwrap_or_else(|p| p.into_inner()) = Some(flow);
        self.0.came.notify_all();
    }
}

/// One request for the asking thread.
struct Ask {
    booked: Booked,
    soon: Soon,
}

/// The asking thread's queue, with the process it runs in.
type Asker = (u32, Mutex<Sender<Ask>>);

/// The asking thread (`Err`: it could not be started).
static ASKER: OnceLock<Result<Asker, String>> = OnceLock::new();

/// Book the request for the flow `req` names, for `key`, with `soon` (booked under `key`
/// in the process's books by the caller), which gets the answer: sent by
/// [`Soon::start`], or made by the first [`Soon::get`].
pub(super) fn book(session: Arc<Session>, req: Request, key: Key, soon: &Soon) {
    *soon.0.booked.lock().unwrap_or_else(|p| p.into_inner()) = Some((session, req, key));
}

/// Hand `a` to the asking thread (started with the first request), or make it now where
/// that thread cannot be had.
fn send(a: Ask) {
    let asker = ASKER.get_or_init(|| {
        let (tx, rx) = channel::<Ask>();
        std::thread::Builder::new()
            .name("remora-flow-ask".into())
            .spawn(move || {
                while let Ok(a) = rx.recv() {
                    answer(a.booked, &a.soon, false);
                }
            })
            .map(|_| (std::process::id(), Mutex::new(tx)))
            .map_err(|e| e.to_string())
    });
    let a = match asker {
        // A child made by fork has no asking thread (its queue would never be read).
        Ok((pid, tx)) if *pid == std::process::id() => {
            match tx.lock().unwrap_or_else(|p| p.into_inner()).send(a) {
                Ok(()) => return,
                Err(back) => back.0,
            }
        }
        _ => a,
    };
    answer(a.booked, &a.soon, true);
}

/// Make the request `booked` of `soon` (unless, on the asking thread, nobody waits for its
/// answer any more), book the flow under its key, and give the answer to everyone waiting.
fn answer(booked: Booked, soon: &Soon, here: bool) {
    let (session, req, key) = booked;
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
}
