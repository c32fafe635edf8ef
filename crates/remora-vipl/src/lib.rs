//! The safe Rust API of Remora's VIPL personality: the VI Provider Library of the Virtual
//! Interface Architecture 1.0, on SISCI, as the VIA2SISCI paper puts it, without that
//! paper's compromises.
//!
//! A [`Nic`] is the node's VI NIC (`VipOpenNic`). Memory is registered in place under a
//! [`ProtectionTag`] (a [`MemoryRegion`] deregisters itself when dropped); a [`Vi`] is a
//! pair of work queues connected to one peer VI, through the node's connection manager
//! (client/server or peer-to-peer). Descriptors live in registered memory, laid out as
//! VIA's `VIP_DESCRIPTOR` ([`Descriptor`]); a send writes its payload straight into the
//! receive buffer the peer posted, and completions wake waiters with SISCI interrupts only
//! when they sleep. [`CompletionQueue`]s gather the completions of several VIs.
//!
//! ```no_run
//! use remora_vipl::*;
//! let nic = Nic::open("/dev/via0").unwrap();
//! let ptag = nic.create_ptag();
//! let attrs = ViAttributes { reliability: RELIABLE_DELIVERY, max_transfer: 65536, ptag, rdma_write: false, rdma_read: false };
//! let (server, client) = (Vi::create(&nic, attrs, None, None).unwrap(), Vi::create(&nic, attrs, None, None).unwrap());
//! let me = NetAddress::new(nic.node(), b"echo");
//! let waiter = { let nic = nic.clone(); let me = me.clone();
//!     std::thread::spawn(move || nic.connect_wait(&me, None).unwrap().accept(&server).map(|_| server)) };
//! loop {
//!     match client.connect_request(&NetAddress::new(nic.node(), b"cli"), &me, None) {
//!         Err(Error::NoMatch) => std::thread::sleep(std::time::Duration::from_millis(5)),
//!         other => { other.unwrap(); break }
//!     }
//! }
//! let server = waiter.join().unwrap().unwrap();
//! // Register memory, build descriptors with `nic.write_descriptor`, then
//! // `server.post_recv`, `client.post_send`, `server.recv_wait`.
//! # let _ = (server, client);
//! ```

mod cache;
mod connect;
mod cq;
mod data;
mod deliver;
mod describe;
mod dispatch;
mod error;
mod few;
pub mod fuzzing;
#[cfg(test)]
mod late_stores;
mod later;
pub mod layout;
mod link;
mod memory;
mod names;
mod nic;
mod notify;
mod posted;
mod rdma;
mod region;
mod scatter;
mod short;
#[cfg(test)]
mod testing;
mod vi;
mod window;

pub use connect::{ConnRequest, ConnectAttempt, NetAddress};
pub use cq::CompletionQueue;
pub use error::{Error, Result};
pub use layout::{DataSegment, Descriptor};
pub use memory::{MemAttributes, MemHandle, ProtectionTag};
pub use nic::{ErrorCode, ErrorEvent, ErrorHandler, Nic, NicAttributes, DEVICE_NAMES};
pub use region::MemoryRegion;
pub use remora_config::ViplTransfer;
pub use remora_sys::user_memory::UserRegion;
pub use vi::Vi;
pub use vi::{ViAttributes, ViState, MAX_TRANSFER, RELIABLE_DELIVERY, RELIABLE_RECEPTION, UNRELIABLE};
