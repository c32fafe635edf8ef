//! Messages of a connection across hosts over its direct flow: the two processes' own TCP
//! stream, dialed and authenticated by their daemons, which is the endpoint's descriptor
//! (so `poll` on it means what it says: readable when bytes wait, writable when the
//! socket has room, hung up once the stream ended). SCIF messages are a byte stream, so
//! the flow carries exactly the bytes sent, with no framing of its own.

use crate::conn::Conn;
use crate::endpoint::SPIN;
use crate::msg::Limit;
use crate::{Endpoint, Error, Result};
use remora_sys::{bell, flow};
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Endpoint {
    /// Whether this endpoint's messages go over a direct flow to its peer on another host
    /// (else through the shared ring: the peer's own, or this node daemon's relay).
    pub fn is_direct(&self) -> bool {
        self.inner_conn().is_some_and(|c| c.direct)
    }

    fn closed_now(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// What a call that moved `done` bytes answers when the flow ended or broke.
    fn flow_ended(&self, done: usize) -> Result<usize> {
        if done > 0 {
            return Ok(done);
        }
        Err(if self.closed_now() { Error::BadEndpoint } else { Error::Reset })
    }

    /// `scif_send` over the direct flow: blocking sends everything (resuming after partial
    /// writes), non-blocking queues what the socket takes now.
    pub(crate) fn send_direct(&self, c: &Conn, data: &[u8], block: bool, mut limit: Limit) -> Result<usize> {
        if pages_in(data) {
            // The kernel's copy into the socket cannot fault in pages a map of another
            // host's memory has not fetched yet (the userfaultfd serves user mode only):
            // copy them here first, which faults them in (the copy is the point).
            #[allow(clippy::unnecessary_to_owned)]
            return self.send_direct(c, &data.to_vec(), block, limit);
        }
        let fd = self.as_fd();
        let mut sent = 0;
        while sent < data.len() {
            if block {
                // A blocking send may sleep its socket's slice in the kernel: it counts.
                limit.begin();
            }
            match flow::send(fd, &data[sent..], block) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // The program set O_NONBLOCK on the descriptor, or a blocking send
                    // found no room for a slice (`flow::install`): wait for room, unless
                    // the time is up.
                    let Some(wait) = limit.next(block) else { break };
                    bell::wait(fd, true, Some(wait)).map_err(|e| Error::NoMemory(e.to_string()))?;
                    if self.closed_now() || c.peer_closed() {
                        return self.flow_ended(sent);
                    }
                }
                Err(_) => return self.flow_ended(sent),
            }
        }
        Ok(sent)
    }

    /// `scif_recv` over the direct flow: blocking fills `buf` (resuming after partial
    /// reads), spinning on non-blocking reads for a moment before it sleeps in the kernel;
    /// non-blocking takes what is there. The end of the stream, once every byte before it
    /// is taken, is [`Error::Reset`], and the descriptor reports hang-up from then on.
    pub(crate) fn recv_direct(
        &self,
        c: &Conn,
        buf: &mut [u8],
        block: bool,
        mut limit: Limit,
    ) -> Result<usize> {
        if pages_in(buf) {
            // As for sends: the kernel cannot fill such pages; receive here, then copy.
            let mut here = vec![0u8; buf.len()];
            let n = self.recv_direct(c, &mut here, block, limit)?;
            buf[..n].copy_from_slice(&here[..n]);
            return Ok(n);
        }
        let fd = self.as_fd();
        // A connection lost for good waits for nothing: what is there, then ECONNRESET.
        let block = block && !c.reset.load(Ordering::Acquire);
        let mut got = 0;
        let mut spin: Option<Instant> = None;
        let mut spinning = block;
        while got < buf.len() {
            if block && !spinning {
                // As for sends: the kernel's sleep counts in the slice.
                limit.begin();
            }
            match flow::recv(fd, &mut buf[got..], block && !spinning) {
                Ok(0) => {
                    flow::shutdown(fd, false);
                    return self.flow_ended(got);
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if !block {
                        // Nothing, and the node daemon is gone (or the connection is lost
                        // for good): ECONNRESET, as over the relay, rather than 0 bytes
                        // forever.
                        if got == 0 && (c.reset.load(Ordering::Acquire) || c.daemon_lost_lately()) {
                            return Err(Error::Reset);
                        }
                        break;
                    }
                    if spinning {
                        // Offer the core while spinning: the bytes we wait for may need it.
                        std::thread::yield_now();
                        spinning = spin.get_or_insert_with(Instant::now).elapsed() < SPIN;
                        continue;
                    }
                    // The program set O_NONBLOCK on the descriptor, or a blocking read
                    // saw nothing for a slice (`flow::install`): sleep in poll, unless the
                    // time is up.
                    let Some(wait) = limit.next(true) else { break };
                    bell::wait(fd, false, Some(wait)).map_err(|e| Error::NoMemory(e.to_string()))?;
                    if self.closed_now() {
                        return self.flow_ended(got);
                    }
                }
                Err(_) => {
                    flow::shutdown(fd, false);
                    return self.flow_ended(got);
                }
            }
        }
        Ok(got)
    }
}

/// Whether `buf` is (partly) memory a map of another host's memory pages in.
fn pages_in(buf: &[u8]) -> bool {
    remora_sys::uffd::overlaps_registered(buf.as_ptr() as usize, buf.len())
}
