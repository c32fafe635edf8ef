//! Interrupts and data interrupts. A trigger is a store and a wake-up on a page shared with
//! the waiter (no daemon on the path); waiting spins briefly, then blocks in the kernel.

use crate::events::CallbackAction;
use crate::{check_adapter, spin, DepToken, Descriptor, Error, Result};
use remora_client::events::event_loop;
use remora_proto::{Reply, Request};
use remora_sys::intr::{IntrPage, IntrWait, TriggerError};
use remora_sys::sync::EventFd;
use remora_sys::Memfd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

mod back;
mod direct;
mod flag;
mod named;
mod owned;
mod remote;
mod wait;

pub use named::{named_interrupt_number, NAMED_INTNO_BASE};
pub use remote::{RemoteDataInterrupt, RemoteInterrupt};
use wait::watched_wait;

/// The largest payload of a data interrupt, in bytes; longer triggers fail with
/// [`Error::OutOfRange`].
pub const MAX_DATA_INTERRUPT: usize = remora_sys::intr::MAX_DATA;

/// A plain interrupt's callback (`sci_cb_interrupt_t`).
pub type InterruptCallback = Box<dyn FnMut(&Interrupt) -> CallbackAction + Send>;
/// A data interrupt's callback with the payload (`sci_cb_data_interrupt_t`).
pub type DataCallback = Box<dyn FnMut(&DataInterrupt, &[u8]) -> CallbackAction + Send>;

fn open_page(desc: &Descriptor, req: Request) -> Result<(u64, u32, Option<IntrPage>)> {
    let (reply, fds) = desc.live()?.session.request(req, &[])?;
    let Reply::Interrupt { intr, intno } = reply else {
        return Err(Error::System(format!("unexpected reply {reply:?}")));
    };
    let mut fds = fds.into_iter();
    // An interrupt of another host comes without its page: triggers then go through the
    // daemons. The page's bell follows it: the sending end, and for the owner the
    // receiving end, on which its waits sleep while other hosts are connected.
    let page = match (fds.next(), fds.next()) {
        (Some(page), Some(ev)) => Some(
            IntrPage::open(&Memfd::from_fd(page)?, EventFd::from_fd(ev))?.with_bell(fds.next(), fds.next()),
        ),
        _ => None,
    };
    Ok((intr, intno, page))
}

fn trigger_error(e: TriggerError) -> Error {
    match e {
        TriggerError::Removed => Error::NoSuchIntno,
        TriggerError::Full => Error::NoSpace,
        TriggerError::TooLong => Error::OutOfRange,
    }
}

/// The parts every interrupt handle has.
#[derive(Debug)]
struct Core {
    desc: Descriptor,
    handle: u64,
    intno: u32,
    /// The interrupt's node.
    node: u32,
    remote_page: Option<IntrPage>,
    /// For an interrupt of another host: the process's own flow to its node, if it has one.
    flow: Option<Mutex<direct::Flow>>,
    /// The process that made the handle (and its flow): a child made by `fork` never takes
    /// the flow's lock, which a thread of the parent may have held at the fork (review 106).
    made_by: u32,
    /// A trigger found the route silent since the flow last took a whole frame
    /// ([`direct::Flow::trigger`]: while the flow has no room after an outage, triggers go
    /// through the daemons).
    outage: AtomicBool,
    token: Mutex<Option<DepToken>>,
    gone: AtomicBool,
    listener: Mutex<Option<u64>>,
    /// For the owner of a plain interrupt: the trigger flows of other hosts it reads itself.
    own: Mutex<owned::OwnFlows>,
}

impl Core {
    fn new(desc: &Descriptor, handle: u64, intno: u32, page: Option<IntrPage>) -> Core {
        Core {
            token: Mutex::new(Some(desc.inner.deps.token())),
            desc: desc.clone(),
            handle,
            intno,
            node: desc.node(),
            remote_page: page,
            flow: None,
            made_by: remora_sys::sched::own_pid(),
            outage: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            listener: Mutex::new(None),
            own: Mutex::new(owned::OwnFlows::default()),
        }
    }

    /// The page of an interrupt of this host (always present for interrupts we create).
    fn page(&self) -> &IntrPage {
        self.remote_page.as_ref().expect("interrupts of this host have their page")
    }

    /// Trigger, directly through the page or, for another host, through the daemons.
    fn fire(&self, data: Option<&[u8]>) -> Result<()> {
        let core = self.live()?;
        // Stores to maps of other hosts' segments made before the trigger reach their
        // homes before it (free when there are none on their way).
        remora_client::dsm::settle();
        // A connection to another node's interrupt whose node went away (or restarted) is
        // lost for good: its page, if it has one, reaches nobody now.
        if core.desc.session().lost(core.handle).is_some() {
            return Err(Error::NodeNotResponding);
        }
        match &core.remote_page {
            Some(p) => match data {
                Some(d) => p.send(d),
                None => p.trigger(),
            }
            .map_err(trigger_error),
            None => {
                if data.is_some_and(|d| d.len() > MAX_DATA_INTERRUPT) {
                    return Err(Error::OutOfRange);
                }
                if let Some(flow) = core.own_flow() {
                    let session = core.desc.session();
                    // A route our daemon reports silent fails at once, as through it.
                    if session.silent(core.handle) {
                        core.outage.store(true, Ordering::Relaxed);
                        return Err(Error::NodeNotResponding);
                    }
                    let down = || {
                        let down = session.silent(core.handle) || session.lost(core.handle).is_some();
                        if down {
                            core.outage.store(true, Ordering::Relaxed);
                        }
                        down
                    };
                    let mut flow = flow.lock().unwrap_or_else(|p| p.into_inner());
                    // A plain trigger goes back on a flow from the interrupt's node to one
                    // of ours when there is one (`back.rs`).
                    if data.is_none()
                        && flow.usable()
                        && back::send(core.node, back::side(&core.desc), flow.remote())
                    {
                        return Ok(());
                    }
                    if let direct::Outcome::Sent = flow.trigger(data, down, &core.outage)? {
                        return Ok(());
                    }
                }
                let req = Request::TriggerInterrupt { intr: core.handle, data: data.map(|d| d.to_vec()) };
                core.desc.session().request(req, &[])?;
                Ok(())
            }
        }
    }

    /// The flow, unless this is a child made by `fork` (its parent's socket; the lock may
    /// have been held at the fork): the child's triggers go through the daemons.
    fn own_flow(&self) -> Option<&Mutex<direct::Flow>> {
        self.flow.as_ref().filter(|_| self.made_by == remora_sys::sched::own_pid())
    }

    fn live(&self) -> Result<&Core> {
        if self.gone.load(Ordering::Acquire) {
            return Err(Error::IllegalParameter("interrupt released".into()));
        }
        Ok(self)
    }

    /// Let the owner's node serve the triggers sent over the flow (and back on another
    /// process's) before a disconnect, which goes through the daemons, can overtake them.
    fn drain_flow(&self) {
        if let Some(f) = self.own_flow() {
            let session = self.desc.session();
            let down = || session.silent(self.handle) || session.lost(self.handle).is_some();
            // Neither waits holding the flow's lock: the drain can take up to 2 s, and other
            // threads' triggers on this connection are not held up meanwhile.
            let (remote, drained) = {
                let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                (f.remote(), f.begin_drain())
            };
            back::release(self.node, back::side(&self.desc), remote, down);
            if let Some(s) = drained {
                direct::wait_drained(&s, down);
            }
        }
        // Our own interrupt's flows carry nothing back once it is gone.
        back::forget(self.handle);
    }

    /// Release: tell the daemon (`req`), stop the callback, free the descriptor.
    fn release(&self, req: Request) -> Result<()> {
        self.live()?;
        self.drain_flow();
        self.desc.session().request(req, &[])?;
        self.gone.store(true, Ordering::Release);
        self.stop_listening();
        self.token.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }

    fn stop_listening(&self) {
        if let Some(p) = &self.remote_page {
            p.set_armed(false);
        }
        if let Some(t) = self.listener.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if let Ok(l) = event_loop() {
                l.unregister(t);
            }
        }
    }

    /// Run `on_ready` on the event thread whenever the page's eventfd fires.
    fn listen(&self, mut on_ready: impl FnMut() -> bool + Send + 'static) -> Result<()> {
        let ev = self.page().event().try_clone()?;
        let drain = self.page().event().try_clone()?;
        let token = event_loop()?.register(
            ev.into_fd(),
            Box::new(move || {
                drain.drain();
                on_ready()
            }),
        )?;
        *self.listener.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
        self.page().set_armed(true);
        // Look once now: a trigger may have come before the callback was armed.
        self.page().event().signal();
        Ok(())
    }
}

#[derive(Debug)]
struct LocalIntr {
    core: Core,
    counting: bool,
    seen: Mutex<u32>,
    uses_callback: bool,
    /// The flag word whose stores trigger it (`SCIRegisterInterruptFlag`), if any.
    flag: OnceLock<flag::FlagWatch>,
}

impl Drop for LocalIntr {
    fn drop(&mut self) {
        if let Some(f) = self.flag.get() {
            f.stop();
        }
        self.core.stop_listening();
        if !self.core.gone.load(Ordering::Acquire) {
            let _ =
                self.core.desc.session().request(Request::RemoveInterrupt { intr: self.core.handle }, &[]);
        }
    }
}

/// An interrupt of this node that others trigger (`sci_local_interrupt_t`).
///
/// A trigger that comes while nobody waits is kept: the next wait returns at once. Without
/// `counting`, several such triggers count as one; with it (`SCI_FLAG_COUNTING_INT`), each
/// trigger satisfies one wait.
#[derive(Debug, Clone)]
pub struct Interrupt {
    inner: Arc<LocalIntr>,
}

impl Interrupt {
    /// The descriptor it was made through (`SCIClose` of it with this still open tears this down).
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.core.desc
    }

    /// `SCICreateInterrupt`: `intno` `Some` asks for that number (`SCI_FLAG_FIXED_INTNO`).
    ///
    /// # Errors
    /// [`Error::IntnoUsed`], [`Error::NoSuchAdapter`].
    pub fn create(
        desc: &Descriptor,
        adapter: u32,
        intno: Option<u32>,
        counting: bool,
        callback: Option<InterruptCallback>,
    ) -> Result<Interrupt> {
        Interrupt::create_with(desc, adapter, intno, counting, false, callback)
    }

    /// [`Interrupt::create`], with `shared` (`SCI_FLAG_SHARED_INT`): other processes may
    /// create the same number with `shared` too, and each trigger reaches every one of
    /// them (a connection to the number triggers them all).
    ///
    /// # Errors
    /// As [`Interrupt::create`]; [`Error::IntnoUsed`] when the number is taken by an
    /// interrupt that is not shared.
    pub fn create_with(
        desc: &Descriptor,
        adapter: u32,
        intno: Option<u32>,
        counting: bool,
        shared: bool,
        callback: Option<InterruptCallback>,
    ) -> Result<Interrupt> {
        check_adapter(adapter)?;
        let (handle, intno, page) = open_page(desc, Request::CreateInterrupt { intno, data: false, shared })?;
        let page = page.ok_or_else(|| Error::System("interrupt created without its page".into()))?;
        // Count from the page's start (the daemon makes every interrupt page with its
        // counter at 0), not from what it holds now: a process waiting in
        // SCIConnectInterrupt for this number is connected the moment it exists, and its
        // trigger may land before this line runs. It must not be lost.
        let seen = 0;
        let intr = Interrupt {
            inner: Arc::new(LocalIntr {
                core: Core::new(desc, handle, intno, Some(page)),
                counting,
                seen: Mutex::new(seen),
                uses_callback: callback.is_some(),
                flag: OnceLock::new(),
            }),
        };
        if let Some(mut cb) = callback {
            let weak = Arc::downgrade(&intr.inner);
            intr.inner.core.listen(move || {
                let Some(inner) = weak.upgrade() else { return false };
                let me = Interrupt { inner };
                while me.take_trigger() {
                    if cb(&me) == CallbackAction::Cancel {
                        me.inner.core.page().set_armed(false);
                        return false;
                    }
                }
                !me.inner.core.page().is_removed()
            })?;
        }
        Ok(intr)
    }

    /// Consume one pending trigger, if any.
    fn take_trigger(&self) -> bool {
        let now = self.inner.core.page().triggers();
        let mut seen = self.inner.seen.lock().unwrap_or_else(|p| p.into_inner());
        if now == *seen || self.inner.core.page().is_removed() {
            return false;
        }
        *seen = if self.inner.counting { seen.wrapping_add(1) } else { now };
        true
    }

    /// The interrupt number.
    pub fn number(&self) -> u32 {
        self.inner.core.intno
    }

    /// `SCIWaitForInterrupt` (`None` waits forever).
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::Cancelled`] when the interrupt is removed meanwhile;
    /// [`Error::IllegalOperation`] when it has a callback.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        self.wait_with_spin(timeout, spin())
    }

    /// [`Interrupt::wait`] that spins for `spin` (instead of `REMORA_SPIN_US`) before it
    /// blocks: zero blocks at once, which costs no CPU but a kernel wake-up per trigger.
    ///
    /// # Errors
    /// As [`Interrupt::wait`].
    pub fn wait_with_spin(&self, timeout: Option<Duration>, spin: Duration) -> Result<()> {
        let core = self.inner.core.live()?;
        if self.inner.uses_callback {
            return Err(Error::IllegalOperation);
        }
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            let seen = *self.inner.seen.lock().unwrap_or_else(|p| p.into_inner());
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            match watched_wait(core, spin, left, |n| n != seen)? {
                // Another thread waiting on it may have taken the trigger first: wait on.
                IntrWait::Triggered(_) if !self.take_trigger() => {
                    if left.is_some_and(|l| l.is_zero()) {
                        return Err(Error::Timeout);
                    }
                }
                IntrWait::Triggered(_) => return Ok(()),
                IntrWait::TimedOut => return Err(Error::Timeout),
                IntrWait::Removed => return Err(Error::Cancelled),
            }
        }
    }

    /// How many triggers came so far (wrapping), for [`Interrupt::wait_past`].
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when removed by this process.
    pub fn triggers(&self) -> Result<u32> {
        Ok(self.inner.core.live()?.page().triggers())
    }

    /// Wait up to `timeout` (`None`: forever; spinning `spin` first) until a trigger came
    /// after `seen` (a count [`Interrupt::triggers`] gave), consuming none: every thread
    /// waiting so wakes at every trigger, and none takes one another waited for. For
    /// waiters that each look for work of their own after a trigger (a bell shared by
    /// several queues). It leaves the count [`Interrupt::wait`] consumes from alone: a
    /// thread in `wait` on the same interrupt still takes every trigger once. The count it
    /// returns is the next wait's `seen`.
    ///
    /// # Errors
    /// As [`Interrupt::wait`].
    pub fn wait_past(&self, seen: u32, timeout: Option<Duration>, spin: Duration) -> Result<u32> {
        let core = self.inner.core.live()?;
        if self.inner.uses_callback {
            return Err(Error::IllegalOperation);
        }
        match watched_wait(core, spin, timeout, |n| n != seen)? {
            IntrWait::Triggered(n) => Ok(n),
            IntrWait::TimedOut => Err(Error::Timeout),
            IntrWait::Removed => Err(Error::Cancelled),
        }
    }

    /// `SCIRemoveInterrupt`: blocked waiters return [`Error::Cancelled`]; triggers fail.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when already removed.
    pub fn remove(&self) -> Result<()> {
        self.inner.core.release(Request::RemoveInterrupt { intr: self.inner.core.handle })?;
        if let Some(f) = self.inner.flag.get() {
            f.stop();
        }
        Ok(())
    }
}

#[derive(Debug)]
struct LocalData {
    core: Core,
    uses_callback: bool,
    recv: Mutex<()>,
}

impl Drop for LocalData {
    fn drop(&mut self) {
        self.core.stop_listening();
        if !self.core.gone.load(Ordering::Acquire) {
            let _ =
                self.core.desc.session().request(Request::RemoveInterrupt { intr: self.core.handle }, &[]);
        }
    }
}

/// A data interrupt of this node: each trigger carries up to [`MAX_DATA_INTERRUPT`] bytes,
/// delivered in order (`sci_local_data_interrupt_t`). Up to 64 can wait unconsumed.
#[derive(Debug, Clone)]
pub struct DataInterrupt {
    inner: Arc<LocalData>,
}

impl DataInterrupt {
    /// The descriptor it was made through (`SCIClose` of it with this still open tears this down).
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.core.desc
    }

    /// `SCICreateDataInterrupt`.
    ///
    /// # Errors
    /// [`Error::IntnoUsed`], [`Error::NoSuchAdapter`].
    pub fn create(
        desc: &Descriptor,
        adapter: u32,
        intno: Option<u32>,
        callback: Option<DataCallback>,
    ) -> Result<DataInterrupt> {
        DataInterrupt::create_with(desc, adapter, intno, false, callback)
    }

    /// `SCICreateDataInterrupt` with `shared` (`SCI_FLAG_SHARED_INT`): other processes of
    /// the node may create the same number with `shared` too, and every payload sent to
    /// the number reaches each of them (the node copies it into every member's queue; a
    /// member with 64 payloads unconsumed misses it).
    ///
    /// # Errors
    /// As [`DataInterrupt::create`]; [`Error::IntnoUsed`] when the number is taken by a
    /// data interrupt that is not shared.
    pub fn create_with(
        desc: &Descriptor,
        adapter: u32,
        intno: Option<u32>,
        shared: bool,
        callback: Option<DataCallback>,
    ) -> Result<DataInterrupt> {
        check_adapter(adapter)?;
        let (handle, intno, page) = open_page(desc, Request::CreateInterrupt { intno, data: true, shared })?;
        if page.is_none() {
            return Err(Error::System("interrupt created without its page".into()));
        }
        let intr = DataInterrupt {
            inner: Arc::new(LocalData {
                core: Core::new(desc, handle, intno, page),
                uses_callback: callback.is_some(),
                recv: Mutex::new(()),
            }),
        };
        if let Some(mut cb) = callback {
            let weak = Arc::downgrade(&intr.inner);
            let mut buf = vec![0u8; MAX_DATA_INTERRUPT];
            intr.inner.core.listen(move || {
                let Some(inner) = weak.upgrade() else { return false };
                let me = DataInterrupt { inner };
                loop {
                    let got = {
                        let _g = me.inner.recv.lock().unwrap_or_else(|p| p.into_inner());
                        me.inner.core.page().recv(&mut buf)
                    };
                    let Some(n) = got else { break };
                    if cb(&me, &buf[..n]) == CallbackAction::Cancel {
                        me.inner.core.page().set_armed(false);
                        return false;
                    }
                }
                !me.inner.core.page().is_removed()
            })?;
        }
        Ok(intr)
    }

    /// The interrupt number.
    pub fn number(&self) -> u32 {
        self.inner.core.intno
    }

    /// `SCIWaitForDataInterrupt`: the next payload into `buf`; returns its length.
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::Cancelled`] when removed meanwhile;
    /// [`Error::OutOfRange`] when `buf` is shorter than the payload (which stays queued);
    /// [`Error::IllegalOperation`] when it has a callback.
    pub fn wait(&self, buf: &mut [u8], timeout: Option<Duration>) -> Result<usize> {
        let core = self.inner.core.live()?;
        if self.inner.uses_callback {
            return Err(Error::IllegalOperation);
        }
        let _g = self.inner.recv.lock().unwrap_or_else(|p| p.into_inner());
        match watched_wait(core, spin(), timeout, |_| core.page().has_data())? {
            IntrWait::Triggered(_) => {}
            IntrWait::TimedOut => return Err(Error::Timeout),
            IntrWait::Removed => return Err(Error::Cancelled),
        }
        match core.page().peek_len() {
            Some(n) if n > buf.len() => Err(Error::OutOfRange),
            Some(_) => core.page().recv(buf).ok_or(Error::Timeout),
            None => Err(Error::Timeout),
        }
    }

    /// `SCIRemoveDataInterrupt`.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when already removed.
    pub fn remove(&self) -> Result<()> {
        self.inner.core.release(Request::RemoveInterrupt { intr: self.inner.core.handle })
    }
}
