//! Connections to interrupts and data interrupts of some node: triggers through the
//! interrupt's page (this host), over the process's own flow ([`super::direct`], another
//! host), or through the daemons.

use super::{direct, open_page, Core};
use crate::{check_adapter, timeout_ms, Descriptor, Result};
#[allow(unused_imports)] // the docs name them
use crate::{Error, MAX_DATA_INTERRUPT};
use remora_proto::Request;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug)]
struct RemoteIntr {
    core: Core,
}

impl Drop for RemoteIntr {
    fn drop(&mut self) {
        if !self.core.gone.load(Ordering::Acquire) {
            self.core.drain_flow();
            let _ = self
                .core
                .desc
                .session()
                .request(Request::DisconnectInterrupt { intr: self.core.handle }, &[]);
        }
    }
}

fn connect(
    desc: &Descriptor,
    node: u32,
    adapter: u32,
    intno: u32,
    data: bool,
    timeout: Option<Duration>,
) -> Result<Core> {
    check_adapter(adapter)?;
    let (handle, intno, page) =
        open_page(desc, Request::ConnectInterrupt { node, intno, data, timeout_ms: timeout_ms(timeout) })?;
    // An interrupt of another host comes without its page: its triggers go over a flow
    // of this process's own when one can be had.
    let flow = if page.is_none() { direct::Flow::open(desc, handle) } else { None };
    Ok(Core { flow: flow.map(Mutex::new), node, ..Core::new(desc, handle, intno, page) })
}

/// A connection to an interrupt of some node (`sci_remote_interrupt_t`).
#[derive(Debug, Clone)]
pub struct RemoteInterrupt {
    inner: Arc<RemoteIntr>,
}

impl RemoteInterrupt {
    /// How many plain triggers this process sent back on a flow that another host's
    /// process dialed to one of its interrupts (both directions of a process pair on one
    /// connection), for diagnostics and tests.
    pub fn triggers_sent_back() -> u64 {
        super::back::sent()
    }

    /// The descriptor it was made through (`SCIClose` of it with this still open tears this down).
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.core.desc
    }

    /// `SCIConnectInterrupt`: waits up to `timeout` (`None`: forever) for the interrupt.
    ///
    /// # Errors
    /// [`Error::NoSuchNode`]; [`Error::NoSuchIntno`] when the time ran out.
    pub fn connect(
        desc: &Descriptor,
        node: u32,
        adapter: u32,
        intno: u32,
        timeout: Option<Duration>,
    ) -> Result<RemoteInterrupt> {
        Ok(RemoteInterrupt {
            inner: Arc::new(RemoteIntr { core: connect(desc, node, adapter, intno, false, timeout)? }),
        })
    }

    /// `SCITriggerInterrupt`: wakes the waiter directly.
    ///
    /// # Errors
    /// [`Error::NoSuchIntno`] when the interrupt was removed; [`Error::NodeNotResponding`]
    /// when the interrupt's node went away or restarted (the connection is lost for good:
    /// connect again), or the route to it is down.
    pub fn trigger(&self) -> Result<()> {
        self.inner.core.fire(None)
    }

    /// The interrupt number.
    pub fn number(&self) -> u32 {
        self.inner.core.intno
    }

    /// `SCIDisconnectInterrupt`.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when already disconnected.
    pub fn disconnect(&self) -> Result<()> {
        self.inner.core.release(Request::DisconnectInterrupt { intr: self.inner.core.handle })
    }
}

/// A connection to a data interrupt of some node (`sci_remote_data_interrupt_t`).
#[derive(Debug, Clone)]
pub struct RemoteDataInterrupt {
    inner: Arc<RemoteIntr>,
}

impl RemoteDataInterrupt {
    /// The descriptor it was made through (`SCIClose` of it with this still open tears this down).
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.core.desc
    }

    /// `SCIConnectDataInterrupt`.
    ///
    /// # Errors
    /// [`Error::NoSuchNode`]; [`Error::NoSuchIntno`] when the time ran out.
    pub fn connect(
        desc: &Descriptor,
        node: u32,
        adapter: u32,
        intno: u32,
        timeout: Option<Duration>,
    ) -> Result<RemoteDataInterrupt> {
        Ok(RemoteDataInterrupt {
            inner: Arc::new(RemoteIntr { core: connect(desc, node, adapter, intno, true, timeout)? }),
        })
    }

    /// `SCITriggerDataInterrupt`: deliver `data` to the owner.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for more than [`MAX_DATA_INTERRUPT`] bytes; [`Error::NoSpace`]
    /// when 64 interrupts wait unconsumed; [`Error::NoSuchIntno`] when it was removed;
    /// [`Error::NodeNotResponding`] as for [`RemoteInterrupt::trigger`].
    pub fn trigger(&self, data: &[u8]) -> Result<()> {
        self.inner.core.fire(Some(data))
    }

    /// The interrupt number.
    pub fn number(&self) -> u32 {
        self.inner.core.intno
    }

    /// `SCIDisconnectDataInterrupt`.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] when already disconnected.
    pub fn disconnect(&self) -> Result<()> {
        self.inner.core.release(Request::DisconnectInterrupt { intr: self.inner.core.handle })
    }
}
