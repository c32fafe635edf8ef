//! The sending side of a bulk flow: frames leave in the order they are sent, written by the
//! thread that sends them when the flow is idle, else by the flow's writer thread.
//!
//! A sender never waits for room in the socket (a DMA worker must notice a silent link
//! within its 20 ms slices, and a bulk reader stuck writing while its peer's reader is
//! stuck the same way would deadlock the flow): when nothing is queued and no one is
//! writing, it writes what the socket takes at once, and queues the rest of the frame,
//! first in line, for the writer thread. Before, every frame went through the writer
//! thread: a DMA across hosts crossed two more threads (the worker's frame to the writer,
//! and the peer reader's acknowledgement to the peer's writer).

use remora_proto::link::{BulkFrame, BulkHeader, BULK_FRAME};
use remora_sys::Mapping;
use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpStream as StdStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A bulk frame to send: its header, and the payload (a mapping and where in it) when the
/// frame carries one.
pub(in crate::transport) struct BulkOut {
    pub(in crate::transport) hdr: BulkHeader,
    pub(in crate::transport) payload: Option<(Arc<Mapping>, usize)>,
}

/// The sending side of one bulk flow.
pub(in crate::transport) struct BulkTx {
    s: StdStream,
    st: Mutex<TxState>,
    ready: Condvar,
}

#[derive(Default)]
struct TxState {
    /// Frames waiting for the writer thread, each with how many of its bytes already left.
    queue: VecDeque<(BulkOut, usize)>,
    /// Someone is writing a frame (the writer thread or a sender).
    busy: bool,
    /// The flow failed or was replaced: nothing more is sent.
    closed: bool,
}

/// A frame's payload leaves in writes of at most this many bytes: on loopback a stream of
/// 1 MiB writes moves markedly faster than single writes of several (the sender holds the
/// socket for the whole write, and the acknowledgements wait behind it).
const WRITE_SLICE: usize = 1 << 20;

/// Write `head`, then `len` bytes of `m` at `off`: the header with the first slice in one
/// gathering write, the rest in slices of [`WRITE_SLICE`].
fn send_payload(s: &mut impl Write, head: &[u8], m: &Mapping, off: usize, len: usize) -> std::io::Result<()> {
    let first = len.min(WRITE_SLICE);
    m.write_to_after(head, off, first, s)?;
    let mut at = first;
    while at < len {
        let n = (len - at).min(WRITE_SLICE);
        m.write_to(off + at, n, s)?;
        at += n;
    }
    Ok(())
}

/// The payload's length of a frame that carries one.
fn payload_len(out: &BulkOut) -> usize {
    out.payload.as_ref().map_or(0, |_| out.hdr.len as usize)
}

/// Write a frame, but its first `skip` bytes (which already left).
fn write_frame(w: &mut impl Write, out: &BulkOut, skip: usize) -> std::io::Result<()> {
    let head = BulkFrame::from_header(&out.hdr);
    let head = zerocopy::IntoBytes::as_bytes(&head);
    match &out.payload {
        None => w.write_all(&head[skip.min(BULK_FRAME)..]),
        Some((m, off)) if skip < BULK_FRAME => send_payload(w, &head[skip..], m, *off, out.hdr.len as usize),
        Some((m, off)) => {
            let done = skip - BULK_FRAME;
            send_payload(w, &[], m, off + done, (out.hdr.len as usize).saturating_sub(done))
        }
    }
}

/// A socket written without waiting: `WouldBlock` when it takes nothing more now, and the
/// count of what it took.
struct NoWait<'a> {
    s: &'a StdStream,
    sent: usize,
}

impl Write for NoWait<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_vectored(&[std::io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        use rustix::net::{SendAncillaryBuffer, SendFlags};
        let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
        match rustix::net::sendmsg(self.s, bufs, &mut SendAncillaryBuffer::default(), flags) {
            Ok(n) => {
                self.sent += n;
                Ok(n)
            }
            Err(rustix::io::Errno::AGAIN) => Err(std::io::ErrorKind::WouldBlock.into()),
            Err(e) => Err(e.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl BulkTx {
    /// The sending side of the flow `s` (a clone of the stream the reader reads).
    pub(in crate::transport) fn new(s: StdStream) -> BulkTx {
        BulkTx { s, st: Mutex::new(TxState::default()), ready: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, TxState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Send a frame, never waiting for room in the socket. `Err` when the flow is closed
    /// (or the frame failed it).
    pub(in crate::transport) fn send(&self, out: BulkOut) -> Result<(), ()> {
        let mut st = self.lock();
        if st.closed {
            return Err(());
        }
        if st.busy || !st.queue.is_empty() {
            st.queue.push_back((out, 0));
            self.ready.notify_all();
            return Ok(());
        }
        st.busy = true;
        drop(st);
        let r = self.try_frame(&out);
        let mut st = self.lock();
        st.busy = false;
        let ok = match r {
            Ok(sent) if sent < BULK_FRAME + payload_len(&out) => {
                // The rest waits for room, first in line.
                st.queue.push_front((out, sent));
                true
            }
            Ok(_) => true,
            Err(_) => false,
        };
        if !ok {
            self.fail(&mut st);
        }
        if !st.queue.is_empty() {
            self.ready.notify_all();
        }
        if ok {
            Ok(())
        } else {
            Err(())
        }
    }

    /// Write as much of a frame as the socket takes now; the bytes written.
    fn try_frame(&self, out: &BulkOut) -> std::io::Result<usize> {
        let mut w = NoWait { s: &self.s, sent: 0 };
        match write_frame(&mut w, out, 0) {
            Ok(()) => Ok(w.sent),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(w.sent),
            Err(e) => Err(e),
        }
    }

    /// The flow failed: nothing more is sent, and the reader sees it close and fails every
    /// waiting operation.
    fn fail(&self, st: &mut TxState) {
        st.closed = true;
        st.queue.clear();
        let _ = self.s.shutdown(std::net::Shutdown::Both);
        self.ready.notify_all();
    }

    /// Close the flow (replaced, or the link reset).
    pub(in crate::transport) fn close(&self) {
        let mut st = self.lock();
        self.fail(&mut st);
    }

    /// The writer thread: write queued frames until the flow closes.
    pub(in crate::transport) fn writer(&self) {
        let mut st = self.lock();
        loop {
            if st.closed {
                return;
            }
            if st.busy || st.queue.is_empty() {
                st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let Some((out, skip)) = st.queue.pop_front() else { continue };
            st.busy = true;
            drop(st);
            let r = write_frame(&mut &self.s, &out, skip);
            st = self.lock();
            st.busy = false;
            if r.is_err() {
                self.fail(&mut st);
                return;
            }
        }
    }
}
