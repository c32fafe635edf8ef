//! A node that serves nothing: the [`Inbound`] of transports' unit tests.

use super::{BoxFuture, Inbound, LinkState, PeerMemory};
use remora_proto::link::{PeerReply, PeerRequest, RangeRef};
use remora_proto::{Error, Event};
use std::sync::Arc;

/// Answers every request `NoSuchSegment`, takes every event and change, lends no memory.
pub(crate) struct Nobody;

impl Inbound for Nobody {
    fn request(&self, _: u32, _: u64, _: PeerRequest) -> BoxFuture<'static, Result<PeerReply, Error>> {
        Box::pin(async { Err(Error::NoSuchSegment) })
    }
    fn session_end(&self, _: u32, _: u64) {}
    fn event(&self, _: u32, _: u64, _: Event) {}
    fn link_changed(&self, _: u32, _: LinkState) {}
    fn route_lost(&self, _: u32, _: u64) {}
    fn memory(&self, _: u32, _: RangeRef) -> Option<Arc<dyn PeerMemory>> {
        None
    }
}
