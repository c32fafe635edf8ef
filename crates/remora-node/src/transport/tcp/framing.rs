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
