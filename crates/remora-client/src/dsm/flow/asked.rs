//! A map's pager flow asked for in the background: the map returns without waiting for its
//! flow (the daemon dials and authenticates it, ~150 µs across hosts, most of a map's
//! cost), and whatever needs the flow first — the pager's first fault or send, a store
//! straight home, [`DsmMap::is_direct`](super::super::DsmMap::is_direct) — waits for it
//! here. The request is made by one thread of the process (`remora-flow-ask`, started with
//! the first one), on the map's pager session, so no map waits for it and no thread is
//! started per map; a request nobody waits for any more (the map went first) is not made.
//! Where that thread cannot be started the request is made at once, as before.

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
}

/// A pager flow that is there, or on its way. Clones share it.
#[derive(Clone)]
pub(in crate::dsm) struct Soon(pub(super) Arc<Cell>);

impl Soon {
    /// An answer known now.
    pub(in crate::dsm) fn ready(flow: Option<Flow>) -> Soon {
        Soon(Arc::new(Cell { got: Mutex::new(Some(flow)), came: Condvar::new() }))
    }

    /// The flow, once its request was answered (`None`: no flow, the daemon's path).
    pub(in crate::dsm) fn get(&self) -> Option<Flow> {
        let mut g = self.0.got.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(f) = g.as_ref() {
                return f.clone();
            }
            g = self.0.came.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn set(&self, flow: Option<Flow>) {
        *self.0.got.lock().unwrap_or_else(|p| p.into_inner()) = Some(flow);
        self.0.came.notify_all();
    }
}

/// One request for the asking thread.
struct Ask {
    session: Arc<Session>,
    req: Request,
    key: Key,
    soon: Soon,
}

/// The asking thread's queue (`Err`: it could not be started).
static ASKER: OnceLock<Result<Mutex<Sender<Ask>>, String>> = OnceLock::new();

/// Ask for the flow `req` names, for `key`, in the background; `soon` (booked under `key`
/// by the caller) gets the answer.
pub(super) fn ask(session: Arc<Session>, req: Request, key: Key, soon: Soon) {
    let asker = ASKER.get_or_init(|| {
        let (tx, rx) = channel::<Ask>();
        std::thread::Builder::new()
            .name("remora-flow-ask".into())
            .spawn(move || {
                while let Ok(a) = rx.recv() {
                    answer(a);
                }
            })
            .map(|_| Mutex::new(tx))
            .map_err(|e| e.to_string())
    });
    let a = Ask { session, req, key, soon };
    let a = match asker {
        Ok(tx) => match tx.lock().unwrap_or_else(|p| p.into_inner()).send(a) {
            Ok(()) => return,
            Err(back) => back.0,
        },
        Err(_) => a,
    };
    answer(a);
}

/// Make the request of `a` (unless nobody waits for its answer any more), book the flow
/// under its key, and give the answer to everyone waiting.
fn answer(a: Ask) {
    let Ask { session, req, key, soon } = a;
    // The books hold the cell weakly: held only here, its map is gone already.
    let wanted = Arc::strong_count(&soon.0) > 1;
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
