//! The runtime's one thread: it waits on every descriptor that can bring news (the daemon's
//! event sockets, interrupt and DMA eventfds) and runs the handler registered for it.
//!
//! Handlers run on this thread, never in a signal handler, and may call the API again
//! (including registering or unregistering handlers, their own among them). A handler
//! returns `false` to be removed. The thread starts with the first registration and then
//! sleeps in `epoll_wait` while nothing happens. A handler can also be run once more
//! without its descriptor being readable ([`EventLoop::run_soon`]): a session's handler
//! whose events another handler read off its socket, to deliver them after that one.

use remora_sys::poller::Poller;
use remora_sys::sync::EventFd;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, OnceLock};

/// What runs when a registered descriptor becomes readable. Return `false` to unregister.
pub type Handler = Box<dyn FnMut() -> bool + Send>;

struct Entry {
    fd: OwnedFd,
    handler: Option<Handler>,
}

/// The event loop.
pub struct EventLoop {
    poller: Poller,
    waker: EventFd,
    entries: Mutex<(u64, HashMap<u64, Entry>)>,
    /// Handlers to run at the thread's next turn, readable or not ([`EventLoop::run_soon`]).
    soon: Mutex<Vec<u64>>,
}

const WAKER: u64 = 0;

thread_local! {
    static ON_LOOP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the caller runs on the event thread (inside a callback).
pub fn on_event_thread() -> bool {
    ON_LOOP.with(|c| c.get())
}

/// The process's event loop, started on first use.
///
/// # Errors
/// The errno of creating the epoll instance, the waker or the thread.
pub fn event_loop() -> std::io::Result<&'static Arc<EventLoop>> {
    static LOOP: OnceLock<Arc<EventLoop>> = OnceLock::new();
    static INIT: Mutex<()> = Mutex::new(());
    if let Some(l) = LOOP.get() {
        return Ok(l);
    }
    let _g = INIT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(l) = LOOP.get() {
        return Ok(l);
    }
    let l = Arc::new(EventLoop {
        poller: Poller::new()?,
        waker: EventFd::new()?,
        entries: Mutex::new((1, HashMap::new())),
        soon: Mutex::new(Vec::new()),
    });
    l.poller.add(l.waker.as_fd(), WAKER)?;
    let runner = l.clone();
    std::thread::Builder::new().name("remora-events".into()).spawn(move || runner.run())?;
    Ok(LOOP.get_or_init(|| l))
}

impl EventLoop {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, HashMap<u64, Entry>)> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `handler` whenever `fd` is readable. Returns a token for [`EventLoop::unregister`].
    ///
    /// # Errors
    /// The errno of `epoll_ctl`.
    pub fn register(&self, fd: OwnedFd, handler: Handler) -> std::io::Result<u64> {
        let mut g = self.lock();
        let token = g.0;
        g.0 += 1;
        self.poller.add(fd.as_fd(), token)?;
        g.1.insert(token, Entry { fd, handler: Some(handler) });
        Ok(token)
    }

    /// Stop running the handler of `token` (a handler running right now finishes first).
    pub fn unregister(&self, token: u64) {
        let removed = self.lock().1.remove(&token);
        if let Some(e) = removed {
            let _ = self.poller.delete(e.fd.as_fd());
        }
    }

    /// Wake the thread (it looks at every descriptor again).
    pub fn kick(&self) {
        self.waker.signal();
    }

    /// Run the handler of `token` at the thread's next turn, as if its descriptor were
    /// readable (once; nothing when it is unregistered by then). Called on the event thread
    /// inside a handler, it runs after that handler returns.
    pub fn run_soon(&self, token: u64) {
        self.soon.lock().unwrap_or_else(|p| p.into_inner()).push(token);
        self.waker.signal();
    }

    fn run(&self) {
        ON_LOOP.with(|c| c.set(true));
        loop {
            let tokens = match self.poller.wait(None) {
                Ok(t) => t,
                Err(e) => {
                    tracing::error!("event loop stopped: {e}");
                    return;
                }
            };
            for t in tokens {
                if t == WAKER {
                    self.waker.drain();
                    let soon = std::mem::take(&mut *self.soon.lock().unwrap_or_else(|p| p.into_inner()));
                    for t in soon {
                        self.run_handler(t);
                    }
                    continue;
                }
                self.run_handler(t);
            }
        }
    }

    /// Run the handler of `token` once (none when it is running or unregistered); remove it
    /// when it says so or panics.
    fn run_handler(&self, t: u64) {
        let handler = self.lock().1.get_mut(&t).and_then(|e| e.handler.take());
        let Some(mut h) = handler else { return };
        let keep = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut h)).unwrap_or_else(|_| {
            tracing::error!("an event handler panicked; it is removed");
            false
        });
        let mut g = self.lock();
        match g.1.get_mut(&t) {
            Some(e) if keep => e.handler = Some(h),
            Some(_) => {
                if let Some(e) = g.1.remove(&t) {
                    let _ = self.poller.delete(e.fd.as_fd());
                }
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn handlers_run_and_unregister() {
        let l = event_loop().unwrap();
        let e = EventFd::new().unwrap();
        let hits = Arc::new(AtomicU32::new(0));
        let h2 = hits.clone();
        let e2 = e.try_clone().unwrap();
        l.register(
            e.try_clone().unwrap().into_fd(),
            Box::new(move || {
                e2.drain();
                h2.fetch_add(1, Ordering::SeqCst) < 1
            }),
        )
        .unwrap();
        e.signal();
        let t = std::time::Instant::now();
        while hits.load(Ordering::SeqCst) < 1 && t.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        e.signal();
        while hits.load(Ordering::SeqCst) < 2 && t.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        e.signal();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(hits.load(Ordering::SeqCst), 2, "unregistered after returning false");
    }
}
