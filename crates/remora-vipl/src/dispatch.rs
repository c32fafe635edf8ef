//! The error callback's thread: one per NIC, started on its first error and ended with the
//! NIC, calling the handler with each event in the order they were reported and never under
//! a lock of the library (a report only queues the event, so a flood of completions a full
//! queue dropped makes no threads). When no thread can be started the events queued are
//! dropped (they hold the NIC), and the next report tries again; a handler that panics
//! loses only its own call.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};

/// A call of the handler with one event (`nic.rs` makes it; this module knows neither).
pub(crate) type Queued = Box<dyn FnOnce() + Send>;

/// The queue of one NIC's errors to its dispatch thread. Dropping it (with the NIC) ends the
/// thread once it has called the handler with every event queued.
#[derive(Default)]
pub(crate) struct ErrorDispatch {
    inner: Mutex<Option<Queue>>,
}

struct Queue {
    tx: Sender<Queued>,
    /// The receiving end until a thread took it (kept here when starting one failed).
    rx: Arc<Mutex<Option<Receiver<Queued>>>>,
    running: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ErrorDispatch {
    /// Queue `call` (the handler with one event), starting the thread if none runs yet.
    pub(crate) fn report(&self, call: Queued) {
        let mut g = lock(&self.inner);
        let q = g.get_or_insert_with(|| {
            let (tx, rx) = channel();
            Queue { tx, rx: Arc::new(Mutex::new(Some(rx))), running: false }
        });
        // The receiver lives (here or on the thread) as long as the sender: this never fails.
        let _ = q.tx.send(call);
        if !q.running {
            let rx = Arc::clone(&q.rx);
            let started = std::thread::Builder::new().name("vipl-error".into()).spawn(move || {
                let Some(rx) = lock(&rx).take() else { return };
                // Ends when the NIC's sender is dropped and every event has been handled.
                while let Ok(call) = rx.recv() {
                    // A handler that panics loses its own call, not the thread (the calls
                    // after it would all be lost).
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
                }
            });
            q.running = started.is_ok();
            if !q.running {
                // No thread: the events go (they hold the NIC, which would never be freed
                // if no later error came to start one).
                *g = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    /// A call that panics does not end the thread: the next call still runs.
    #[test]
    fn a_panicking_call_loses_only_itself() {
        let d = ErrorDispatch::default();
        d.report(Box::new(|| panic!("a handler's panic")));
        let (tx, rx) = sync_channel(1);
        d.report(Box::new(move || {
            let _ = tx.send(());
        }));
        assert!(
            rx.recv_timeout(std::time::Duration::from_secs(20)).is_ok(),
            "the call after a panic never ran"
        );
    }

    /// Many reports are handled in their order on one thread, which ends with the queue.
    #[test]
    fn events_are_handled_in_order_on_one_thread_that_ends_with_the_queue() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let d = ErrorDispatch::default();
        for i in 0..2000 {
            let s = Arc::clone(&seen);
            d.report(Box::new(move || lock(&s).push((i, std::thread::current().id()))));
        }
        // A last call that says when it ran; dropping the queue lets the thread finish.
        let (done_tx, done_rx) = sync_channel(1);
        d.report(Box::new(move || {
            let _ = done_tx.send(std::thread::current().id());
        }));
        drop(d);
        let thread = done_rx.recv().unwrap();
        let seen = lock(&seen);
        assert_eq!(seen.iter().map(|(d, _)| *d).collect::<Vec<_>>(), (0..2000).collect::<Vec<_>>());
        assert!(seen.iter().all(|(_, t)| *t == thread), "every event on the one thread");
        assert_ne!(thread, std::thread::current().id());
    }
}
