//! Signals (`rsm_intr_signal_post` / `rsm_intr_signal_wait`): every export and every import
//! owns a core interrupt of its node; a post triggers the other side's. A trigger on this
//! host is a store and a wake-up on the interrupt's shared page; across hosts it goes
//! through the daemons. Consumption is counted in the page itself, so a post with
//! `RSM_SIGPOST_NO_ACCUMULATE` sees whether an event is still pending.

use crate::{Error, Result};
use remora_client::Session;
use remora_proto::{Reply, Request};
use remora_sys::intr::{IntrPage, IntrWait};
use remora_sys::sync::EventFd;
use remora_sys::Memfd;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a wait spins before it blocks.
const SPIN: Duration = Duration::from_micros(50);

fn page_of(fds: Vec<OwnedFd>) -> Result<Option<IntrPage>> {
    let mut fds = fds.into_iter();
    match (fds.next(), fds.next()) {
        // The bell's sending end (a post must ring it); its receiving end, which the
        // creator gets, is not kept: a signal's waits sleep on the futex word.
        (Some(page), Some(ev)) => Ok(Some(
            IntrPage::open(&Memfd::from_fd(page)?, EventFd::from_fd(ev))?.with_bell(fds.next(), None),
        )),
        _ => Ok(None),
    }
}

/// The interrupt an export or import is signalled through.
#[derive(Debug)]
pub(crate) struct Inbox {
    session: Arc<Session>,
    handle: u64,
    intno: u32,
    page: IntrPage,
    pollfds: AtomicU32,
    removed: AtomicBool,
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.remove();
    }
}

impl Inbox {
    /// A new interrupt of the session's node.
    pub(crate) fn create(session: &Arc<Session>) -> Result<Inbox> {
        let (reply, fds) =
            session.request(Request::CreateInterrupt { intno: None, data: false, shared: false }, &[])?;
        let Reply::Interrupt { intr, intno } = reply else {
            return Err(Error::Internal(format!("unexpected reply {reply:?}")));
        };
        let page = page_of(fds)?.ok_or_else(|| Error::Internal("interrupt without its page".into()))?;
        Ok(Inbox {
            session: session.clone(),
            handle: intr,
            intno,
            page,
            pollfds: AtomicU32::new(0),
            removed: AtomicBool::new(false),
        })
    }

    /// Remove the interrupt from its node (once): posts connected to it fail from then on.
    pub(crate) fn remove(&self) {
        if !self.removed.swap(true, Ordering::SeqCst) {
            let _ = self.session.request(Request::RemoveInterrupt { intr: self.handle }, &[]);
        }
    }

    /// Its number on its node.
    pub(crate) fn number(&self) -> u32 {
        self.intno
    }

    /// Consume one pending signal; keep the poll descriptor readable while more are pending.
    fn take(&self) -> bool {
        if !self.page.consume_one() {
            return false;
        }
        if self.pollfds.load(Ordering::SeqCst) > 0 {
            self.page.event().drain();
            if self.page.pending() > 0 {
                self.page.event().signal();
            }
        }
        true
    }

    /// Consume a pending signal without waiting (after `poll` said one is there).
    pub(crate) fn try_take(&self) -> bool {
        self.take()
    }

    /// `rsm_intr_signal_wait`: wait for a signal (`None`: forever) and consume it.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        const SLICE: Duration = Duration::from_millis(200);
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut spin = SPIN;
        loop {
            if self.take() {
                return Ok(());
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(Error::Timeout);
            }
            let slice = left.map_or(SLICE, |l| l.min(SLICE));
            match self.page.wait(spin, Some(slice), |_| self.page.pending() > 0) {
                IntrWait::Removed => return Err(Error::BadSegment),
                IntrWait::Triggered(_) | IntrWait::TimedOut => {}
            }
            if self.session.daemon_gone() {
                return Err(Error::ConnAborted);
            }
            spin = Duration::ZERO;
        }
    }

    /// `rsm_memseg_get_pollfd`: a descriptor `poll(2)` finds readable while a signal is
    /// pending. Each call counts; [`Inbox::release_pollfd`] undoes one.
    pub(crate) fn pollfd(&self) -> Result<OwnedFd> {
        let fd = self.page.event().try_clone()?.into_fd();
        if self.pollfds.fetch_add(1, Ordering::SeqCst) == 0 {
            self.page.set_armed(true);
        }
        if self.page.pending() > 0 {
            self.page.event().signal();
        }
        Ok(fd)
    }

    /// `rsm_memseg_release_pollfd`.
    pub(crate) fn release_pollfd(&self) -> Result<()> {
        let r = self.pollfds.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match r {
            Ok(1) => {
                self.page.set_armed(false);
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(_) => Err(Error::BadSegment),
        }
    }

    /// Poll descriptors handed out and not released.
    pub(crate) fn pollfds(&self) -> u32 {
        self.pollfds.load(Ordering::SeqCst)
    }
}

/// A connection to another side's interrupt, to post to it.
#[derive(Debug)]
pub(crate) struct Outbox {
    session: Arc<Session>,
    handle: u64,
    page: Option<IntrPage>,
}

impl Drop for Outbox {
    fn drop(&mut self) {
        let _ = self.session.request(Request::DisconnectInterrupt { intr: self.handle }, &[]);
    }
}

impl Outbox {
    /// Connect to interrupt `intno` of `node`.
    pub(crate) fn connect(session: &Arc<Session>, node: u32, intno: u32) -> Result<Outbox> {
        let req = Request::ConnectInterrupt { node, intno, data: false, timeout_ms: Some(0) };
        let (reply, fds) = session.request(req, &[]).map_err(|e| match Error::from(e) {
            Error::NotPublished | Error::Internal(_) => Error::ConnAborted,
            other => other,
        })?;
        let Reply::Interrupt { intr, .. } = reply else {
            return Err(Error::Internal(format!("unexpected reply {reply:?}")));
        };
        Ok(Outbox { session: session.clone(), handle: intr, page: page_of(fds)? })
    }

    /// Post one signal; with `no_accumulate`, not while one is pending (on this host; a
    /// post across hosts always counts).
    pub(crate) fn post(&self, no_accumulate: bool) -> Result<()> {
        // Stores to maps of other hosts' segments reach their homes before the signal.
        remora_client::dsm::settle();
        match &self.page {
            Some(p) => {
                let r = if no_accumulate { p.trigger_unless_pending().map(|_| ()) } else { p.trigger() };
                r.map_err(|_| Error::ConnAborted)
            }
            None => {
                self.session.request(Request::TriggerInterrupt { intr: self.handle, data: None }, &[])?;
                Ok(())
            }
        }
    }
}
