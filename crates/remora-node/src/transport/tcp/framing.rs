//! Framing on the wire: control frames (a 4-byte little-endian length, then a frame as
//! `remora_proto::encode` makes it) and bulk frame headers (`remora_proto::link::BulkFrame`).
//! A frame that does not decode is an `InvalidData` error: the flow that sent it is closed.

use remora_proto::link::{BulkFrame, BulkHeader, LinkMsg, BULK_FRAME, MAX_LINK_FRAME};
use remora_proto::{decode, encode};
use std::io::{Read, Write};
use tokio::io::AsyncReadExt;

pub(in crate::transport) fn write_frame(
    w: &mut impl Write,
    msg: &impl serde::Serialize,
) -> std::io::Result<usize> {
    let out = framed(msg)?;
    w.write_all(&out)?;
    Ok(out.len())
}

/// `msg` encoded behind its length: the bytes of one frame.
fn framed(msg: &impl serde::Serialize) -> std::io::Result<Vec<u8>> {
    let body = encode(msg).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// [`write_frame`] on an asynchronous stream.
pub(in crate::transport) async fn write_frame_async(
    w: &mut (impl tokio::io::AsyncWriteExt + Unpin),
    msg: &impl serde::Serialize,
) -> std::io::Result<usize> {
    let out = framed(msg)?;
    w.write_all(&out).await?;
    Ok(out.len())
}

pub(in crate::transport) fn read_frame<T: serde::de::DeserializeOwned>(
    r: &mut impl Read,
) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_LINK_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame of {n} bytes")));
    }
    let mut buf = vec![0u8; n];
    r.read_exact(&mut buf)?;
    decode(&buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

pub(in crate::transport) async fn read_frame_async(
    r: &mut (impl AsyncReadExt + Unpin),
) -> std::io::Result<(LinkMsg, usize)> {
    let n = r.read_u32_le().await? as usize;
    if n > MAX_LINK_FRAME {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame of {n} bytes")));
    }
    let mut buf = vec![0u8; n];
    r.read_exact(&mut buf).await?;
    let m = decode(&buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok((m, n + 4))
}

/// The control frames of a stream, read so that a wait for the next one may be dropped
/// (a `select!` that takes another branch: a heartbeat tick) without losing anything: the
/// bytes of a frame read in part stay here for the next call. A frame read with
/// [`read_frame_async`] inside such a `select!` lost the part already read when the tick
/// came first, and the stream's next length was read from the middle of a frame (the link
/// closed as malformed, failing every relayed SCIF connection on it).
///
/// One read takes all the socket holds, up to a frame and more: frames are small and come
/// in bursts (a request and a reply, a relayed message and the next).
pub(in crate::transport) struct FrameReader<R> {
    rd: R,
    /// Bytes read: from `at` on, those not taken as frames yet.
    buf: Vec<u8>,
    at: usize,
}

impl<R: tokio::io::AsyncRead + Unpin> FrameReader<R> {
    /// A reader of `rd`'s frames.
    pub(in crate::transport) fn new(rd: R) -> FrameReader<R> {
        FrameReader { rd, buf: Vec::with_capacity(2 * (4 + MAX_LINK_FRAME)), at: 0 }
    }

    /// The next frame, and its length on the wire. Cancel-safe: dropped before it is
    /// ready, it read nothing or kept what it read.
    ///
    /// # Errors
    /// The stream's error, `UnexpectedEof` when it ends (also within a frame),
    /// `InvalidData` for a frame over [`MAX_LINK_FRAME`] or one that does not decode.
    pub(in crate::transport) async fn next(&mut self) -> std::io::Result<(LinkMsg, usize)> {
        loop {
            if let Some(frame) = self.take()? {
                return Ok(frame);
            }
            if self.at > 0 {
                self.buf.drain(..self.at);
                self.at = 0;
            }
            if self.buf.capacity() - self.buf.len() < 4 + MAX_LINK_FRAME {
                self.buf.reserve(4 + MAX_LINK_FRAME);
            }
            // `read_buf` is cancel-safe: a read that is not ready took no bytes.
            if self.rd.read_buf(&mut self.buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// A whole frame from the bytes read, if they hold one.
    fn take(&mut self) -> std::io::Result<Option<(LinkMsg, usize)>> {
        let have = &self.buf[self.at..];
        let Some(len) = have.first_chunk::<4>() else { return Ok(None) };
        let n = u32::from_le_bytes(*len) as usize;
        if n > MAX_LINK_FRAME {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame of {n} bytes")));
        }
        let Some(body) = have.get(4..4 + n) else { return Ok(None) };
        let m = decode(body).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        self.at += 4 + n;
        if self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        }
        Ok(Some((m, n + 4)))
    }
}

/// The next bulk frame header of a flow; `None` when the flow ended or sent a malformed
/// header (logged: the flow is then closed).
pub(super) fn read_header(r: &mut impl Read, peer: u32, flow: &str) -> Option<BulkHeader> {
    let mut raw = [0u8; BULK_FRAME];
    r.read_exact(&mut raw).ok()?;
    match BulkFrame::parse(&raw) {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!(peer, "malformed {flow} frame, closing the flow: {e}");
            None
        }
    }
}

pub(super) fn discard(s: &mut impl Read, mut len: u64, scratch: &mut [u8]) -> std::io::Result<()> {
    while len > 0 {
        let n = (len as usize).min(scratch.len());
        s.read_exact(&mut scratch[..n])?;
        len -= n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use remora_proto::link::{PeerRequest, ScifPeerRequest};
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Waker};

    fn frame(data: Vec<u8>) -> (LinkMsg, Vec<u8>) {
        let m = LinkMsg::Request {
            id: 7,
            origin: 9,
            req: PeerRequest::Scif(ScifPeerRequest::Data { conn: 3, data }),
        };
        (m.clone(), framed(&m).unwrap())
    }

    /// A wait for the next frame dropped while the frame came in part (the control loop's
    /// `select!` took its heartbeat tick) loses nothing: the next wait reads that frame
    /// whole, and the one after it.
    #[test]
    fn a_wait_dropped_in_the_middle_of_a_frame_keeps_what_it_read() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (mut tx, rx) = tokio::io::duplex(1 << 20);
            let mut rd = FrameReader::new(rx);
            let (first, wire) = frame((0..40_000u32).map(|i| (i % 251) as u8).collect());
            let (second, wire2) = frame(vec![5; 100]);
            // The length and part of the body, then the wait is dropped as `select!` does.
            tokio::io::AsyncWriteExt::write_all(&mut tx, &wire[..20_000]).await.unwrap();
            {
                let mut wait = pin!(rd.next());
                let mut cx = Context::from_waker(Waker::noop());
                assert!(wait.as_mut().poll(&mut cx).is_pending(), "half a frame is not a frame");
            }
            tokio::io::AsyncWriteExt::write_all(&mut tx, &wire[20_000..]).await.unwrap();
            tokio::io::AsyncWriteExt::write_all(&mut tx, &wire2).await.unwrap();
            assert_eq!(rd.next().await.unwrap(), (first, wire.len()));
            assert_eq!(rd.next().await.unwrap(), (second, wire2.len()));
            drop(tx);
            assert_eq!(rd.next().await.unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
        });
    }

    /// Frames that came in one read are each taken; a length over the limit is refused.
    #[test]
    fn frames_in_one_read_are_all_taken_and_an_oversized_length_is_refused() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let (a, wa) = frame(vec![1; 10]);
            let (b, wb) = frame(vec![2; 48 << 10]);
            let mut bytes = [wa.clone(), wb.clone()].concat();
            bytes.extend_from_slice(&((MAX_LINK_FRAME as u32) + 1).to_le_bytes());
            let mut rd = FrameReader::new(&bytes[..]);
            assert_eq!(rd.next().await.unwrap(), (a, wa.len()));
            assert_eq!(rd.next().await.unwrap(), (b, wb.len()));
            assert_eq!(rd.next().await.unwrap_err().kind(), std::io::ErrorKind::InvalidData);
        });
    }
}
