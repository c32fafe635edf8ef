//! DMA channels (`SCIRequestDMAChannel`, `SCIAssignDMAChannel`, `SCIReturnDMAChannel`).
//!
//! The node's DMA engine has [`DMA_CHANNELS`] channels per adapter. A channel is reserved
//! node-wide: the reservation is an advisory lock on a file of the runtime directory
//! (`node-<N>.dma-<adapter>-<channel>.lock`), exclusive, or shared with
//! [`DmaChannel::request`]'s `shared`. Every process of the node sees it, and it ends when
//! the channel is returned or its process exits. Assigning a channel to a [`DmaQueue`]
//! binds the two; the engine serves each queue with a worker of its own, so the channel
//! names, and reserves, the queue's share of the engine.

use crate::dma::{DmaQueue, DmaState};
use crate::{check_adapter, Descriptor, Error, Result};
use std::fs::File;
use std::sync::{Arc, Mutex};

/// How many channels the node's DMA engine has per adapter (ids `0..DMA_CHANNELS`).
pub const DMA_CHANNELS: u32 = 4;

/// The kind of engine a channel is asked of (`SCI_DMA_TYPE_*`). The node has one engine,
/// which serves every kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaKind {
    /// Any engine (`SCI_DMA_TYPE_DONTCARE`).
    DontCare,
    /// The adapter's engine (`SCI_DMA_TYPE_ADAPTER`).
    Adapter,
    /// The global engine (`SCI_DMA_TYPE_GLOBAL`).
    Global,
    /// The host's system engine (`SCI_DMA_TYPE_SYSTEM`).
    System,
    /// The transparent engine (`SCI_DMA_TYPE_TRANSPARENT`).
    Transparent,
}

#[derive(Debug)]
struct ChannelInner {
    desc: Descriptor,
    kind: DmaKind,
    id: u32,
    shared: bool,
    /// The locked file (the reservation); `None` once returned.
    lock: Mutex<Option<File>>,
    /// The queue it is assigned to.
    queue: Mutex<Option<DmaQueue>>,
}

/// A reserved channel of the node's DMA engine (`sci_dma_channel_t`).
#[derive(Debug, Clone)]
pub struct DmaChannel {
    inner: Arc<ChannelInner>,
}

/// Reserve channel `id` of `adapter` of `desc`'s node: `Ok(None)` when another holder's
/// reservation conflicts.
fn try_reserve(desc: &Descriptor, adapter: u32, id: u32, shared: bool) -> Result<Option<File>> {
    let dir = &desc.live()?.cfg.runtime_dir;
    remora_proto::paths::ensure_dir(dir)?;
    let path = dir.join(format!("node-{}.dma-{adapter}-{id}.lock", desc.node()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
    Ok(remora_sys::try_lock_file(&file, shared)?.then_some(file))
}

impl DmaChannel {
    /// `SCIRequestDMAChannel`: reserve channel `id` (`None`: the lowest free one) of the
    /// node's engine on `adapter`, exclusively or, with `shared`, together with other shared
    /// holders.
    ///
    /// # Errors
    /// [`Error::NoSuchAdapter`]; [`Error::IllegalParameter`] for an id of
    /// [`DMA_CHANNELS`] or more; [`Error::Busy`] when that channel is held (exclusively, or
    /// at all for an exclusive request); [`Error::NoSpace`] when no channel is free;
    /// [`Error::IllegalOperation`] on a closed descriptor; [`Error::System`] when the
    /// runtime directory cannot hold the reservation.
    pub fn request(
        desc: &Descriptor,
        adapter: u32,
        kind: DmaKind,
        id: Option<u32>,
        shared: bool,
    ) -> Result<Self> {
        check_adapter(adapter)?;
        let (id, file) = match id {
            Some(id) if id >= DMA_CHANNELS => {
                return Err(Error::IllegalParameter(format!("DMA channel {id} (allowed: 0..{DMA_CHANNELS})")))
            }
            Some(id) => (id, try_reserve(desc, adapter, id, shared)?.ok_or(Error::Busy)?),
            None => {
                let mut found = None;
                for id in 0..DMA_CHANNELS {
                    if let Some(f) = try_reserve(desc, adapter, id, shared)? {
                        found = Some((id, f));
                        break;
                    }
                }
                found.ok_or(Error::NoSpace)?
            }
        };
        Ok(DmaChannel {
            inner: Arc::new(ChannelInner {
                desc: desc.clone(),
                kind,
                id,
                shared,
                lock: Mutex::new(Some(file)),
                queue: Mutex::new(None),
            }),
        })
    }

    /// The descriptor it was requested through.
    pub fn descriptor(&self) -> &Descriptor {
        &self.inner.desc
    }

    /// Its channel number (`0..DMA_CHANNELS`).
    pub fn id(&self) -> u32 {
        self.inner.id
    }

    /// The kind of engine it was asked of.
    pub fn kind(&self) -> DmaKind {
        self.inner.kind
    }

    /// Whether it is held shared (`SCI_FLAG_DMA_CHANNEL_SHARED`).
    pub fn is_shared(&self) -> bool {
        self.inner.shared
    }

    /// The queue it is assigned to.
    pub fn queue(&self) -> Option<DmaQueue> {
        self.inner.queue.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn held(&self) -> Result<()> {
        match self.inner.lock.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
            true => Ok(()),
            false => Err(Error::IllegalParameter("DMA channel returned".into())),
        }
    }

    /// `SCIAssignDMAChannel`: serve `queue` with this channel. Assigning it to another queue
    /// moves it there.
    ///
    /// # Errors
    /// [`Error::Busy`] while the queue it serves now has a transfer posted;
    /// [`Error::IllegalParameter`] once the channel was returned.
    pub fn assign(&self, queue: &DmaQueue) -> Result<()> {
        self.held()?;
        let mut q = self.inner.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.as_ref().is_some_and(|old| old.state() == DmaState::Posted) {
            return Err(Error::Busy);
        }
        *q = Some(queue.clone());
        Ok(())
    }

    /// `SCIReturnDMAChannel`: end the reservation (another request may then take the
    /// channel) and detach it from its queue.
    ///
    /// # Errors
    /// [`Error::Busy`] while its queue has a transfer posted; [`Error::IllegalParameter`]
    /// when already returned.
    pub fn give_back(&self) -> Result<()> {
        let mut q = self.inner.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.as_ref().is_some_and(|old| old.state() == DmaState::Posted) {
            return Err(Error::Busy);
        }
        let file = self.inner.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
        if file.is_none() {
            return Err(Error::IllegalParameter("DMA channel returned".into()));
        }
        *q = None;
        Ok(())
    }
}
