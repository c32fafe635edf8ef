//! What the trigger flows' unit tests share (`shared_flow`, `inbound::owner_flow`,
//! `inbound::back_flow`): an interrupt that counts its triggers, a patient wait, and a
//! loopback connection to send frames on.

use crate::transport::PeerMemory;
use remora_proto::Error;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// An interrupt that counts its triggers.
#[derive(Default)]
pub(crate) struct Counted(AtomicU64);

impl Counted {
    /// The triggers so far.
    pub(crate) fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl PeerMemory for Counted {
    fn resolve(&self, _: u64, _: u64, _: bool) -> Option<Vec<(Arc<remora_sys::Mapping>, usize, usize)>> {
        None
    }

    fn trigger(&self, _: &[u8]) -> Result<(), Error> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

pub(crate) use remora_testkit::wait_until as wait_for;

/// A loopback connection `(tx, rx)`: `tx` sends each write at once, and a write held back
/// for good fails after 10 s (the test reports it) instead of hanging.
pub(crate) fn flow_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (rx, _) = listener.accept().unwrap();
    tx.set_nodelay(true).unwrap();
    tx.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    (tx, rx)
}
