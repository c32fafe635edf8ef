//! Channels: a pager flow of this process that reaches several segments of one home node
//! (`Request::DsmFlows`), for a protocol that stores into several of them and needs the
//! stores to land in the order sent without waiting for each (VIPL across hosts: a
//! payload into the receiver's buffer, then the completion into its VI's segment).
//!
//! A channel is not a map: no page of the segments is kept here, so nothing of the DSM
//! pager's bookkeeping applies. Stores are queued and sent when asked, without an answer
//! unless the caller waits; the home serves the frames in order, so a later store never
//! lands before an earlier one, whichever segment each reaches. A store the home cannot
//! make ends the flow: every later call fails, and the caller treats that as the loss of
//! the connection.

use super::flow::Direct;
use super::*;

/// Queued bytes from which a store's frames are written out before more are queued.
const SEND_AT: usize = 256 << 10;

/// A pager flow to several segments of one home node, stores landing in order.
#[derive(Debug)]
pub struct Channel {
    d: Mutex<Direct>,
    /// The home's handle of each connection, in the order they were asked.
    remotes: Vec<u64>,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct").finish_non_exhaustive()
    }
}

/// The calls of one holder of a [`Channel`] (the channel's lock held): stores queued in
/// order, then sent.
pub struct ChannelGuard<'a> {
    d: std::sync::MutexGuard<'a, Direct>,
    remotes: &'a [u64],
}

impl Channel {
    /// A channel to the segments of connections `conns` of `session` (all on one node of
    /// another host). With `watch` `(index into conns, offset)`, the home wakes futex
    /// waiters of the 4-byte word at `offset` of that segment after each store touching it,
    /// and those of the segment's first word after each store touching that.
    ///
    /// # Errors
    /// The node's refusal (a segment on this host, segments on several nodes, no pager
    /// flows there) or the dial's failure.
    pub fn open(session: &Session, conns: Vec<u64>, watch: Option<(u32, u64)>) -> std::io::Result<Channel> {
        let (d, remotes) = Direct::open_many(session, Request::DsmFlows { conns, watch })?;
        Ok(Channel { d: Mutex::new(d), remotes })
    }

    /// Take the channel for a few calls in order.
    pub fn lock(&self) -> ChannelGuard<'_> {
        ChannelGuard { d: self.d.lock().unwrap_or_else(|p| p.into_inner()), remotes: &self.remotes }
    }
}

impl ChannelGuard<'_> {
    fn aim(&mut self, target: usize) -> std::io::Result<()> {
        let r = *self.remotes.get(target).ok_or_else(|| std::io::Error::from_raw_os_error(34))?;
        self.d.aim(r);
        Ok(())
    }

    /// Queue a store of `data` at `offset` of segment `target` (its index in the
    /// connections the channel was opened with).
    ///
    /// # Errors
    /// `ERANGE` for a target the channel does not reach; the flow's error when queued
    /// bytes had to be sent and could not.
    pub fn push(&mut self, target: usize, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.push_with(target, offset, data.len(), |at, out| {
            out.copy_from_slice(&data[at..at + out.len()]);
            Ok(())
        })
    }

    /// Queue a store of `len` bytes at `offset` of segment `target`, which `fill(at, out)`
    /// writes (bytes `at..at + out.len()` of the store: a long store goes in several frames).
    ///
    /// # Errors
    /// As [`ChannelGuard::push`], and `fill`'s error (nothing of that frame is sent).
    pub fn push_with(
        &mut self,
        target: usize,
        offset: u64,
        len: usize,
        mut fill: impl FnMut(usize, &mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.aim(target)?;
        let mut at = 0;
        while at < len || len == 0 {
            let n = (len - at).min(MAX_SCIF_FRAME);
            self.d.push_with(offset + at as u64, n, |out| fill(at, out))?;
            at += n;
            if self.d.queued() >= SEND_AT {
                self.d.send(false)?;
            }
            if len == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Queue a store of `len` bytes of the program's memory `src` (from `src_off`) at
    /// `offset` of segment `target`: the next send gathers its bytes straight from `src`
    /// (for large payloads, which are not copied on the way). `src` must keep those bytes
    /// until that send.
    ///
    /// # Errors
    /// `ERANGE` for a target the channel does not reach or a range outside `src`; the
    /// flow's error.
    pub fn write_region(
        &mut self,
        target: usize,
        offset: u64,
        src: &remora_sys::user_memory::UserRegion,
        src_off: usize,
        len: usize,
    ) -> std::io::Result<()> {
        self.aim(target)?;
        self.d.queue_region(offset, src, src_off, len)?;
        if self.d.queued() >= SEND_AT {
            self.d.send(false)?;
        }
        Ok(())
    }

    /// Send what is queued; with `wait`, return once the home stored it (and everything
    /// sent before).
    ///
    /// # Errors
    /// The flow's error (the home is unreachable, or refused a store and ended the flow).
    pub fn send(&mut self, wait: bool) -> std::io::Result<()> {
        self.d.send(wait)
    }

    /// Load `out.len()` bytes at `offset` of segment `target` as the home has them once
    /// every store sent before landed.
    ///
    /// # Errors
    /// `ERANGE` for a target the channel does not reach; the flow's error;
    /// `PermissionDenied` when the home refused the read (the flow goes on).
    pub fn read(&mut self, target: usize, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.d.send(false)?;
        self.aim(target)?;
        self.d.read_many(offset, &mut Sink::Buf(out))
    }
}
