//! The bodies of the fuzz targets: one function per decoder of bytes a daemon (or a client
//! library) takes from somebody it does not trust. `fuzz/fuzz_targets/*.rs` hand each one
//! libFuzzer's input; `tests/fuzz_smoke.rs` runs each on its seeds (`fuzz/seeds/`) and a
//! few thousand mutations of them on stable, in `cargo test`. A body must return for any
//! input, never panic and never touch memory outside what it was given; where a decoded
//! value can be checked (it encodes back to itself, a ring returns what was queued) it is.
//!
//! | target | decoder |
//! | --- | --- |
//! | `client_requests` | a daemon's decoding of client frames (`remora_proto::decode::<RequestFrame>`, `serve.rs`) |
//! | `client_replies` | a library's decoding of replies and events (`decode::<ServerMsg>`; also the local transport's proxies) |
//! | `peer_handshake` | both sides of the TCP handshake (`transport/tcp/handshake.rs`) |
//! | `peer_frames` | an established control flow (`transport/tcp/framing.rs`, `LinkMsg`) |
//! | `bulk_frames` | bulk frame headers and payload skipping (`BulkFrame::parse`, `framing.rs`) |
//! | `pager_stream` | a node's server of a pager flow (`transport/tcp/pager.rs`) |
//! | `scif_ring` | SCIF message rings in a region a peer process writes (`remora_sys::msgring`) |
//! | `dma_page` | the DMA queue page, descriptors taken by the engine (`remora_sys::dma`) |
//! | `intr_page` | interrupt pages and data-interrupt queues (`remora_sys::intr`) |
//! | `cluster_file` | the cluster file (`remora_config::cluster`) |
//! | `ofi_messages` | the ofi transport's fabric messages and bootstrap frame (`transport/ofi/wire.rs`) |

mod kept;
mod scripts;
mod seeds;
mod shm;

pub use crate::transport::ofi::fuzzing::ofi_messages;
pub use crate::transport::tcp::fuzzing::{bulk_frames, pager_stream, peer_frames, peer_handshake};
pub use seeds::seeds;
pub use shm::{dma_page, intr_page, scif_ring};

use crate::cluster::Cluster;
use remora_proto::{decode, encode, RequestFrame, ServerMsg};

/// The segment handle the seeds and scripts name.
const SEG: u64 = 0x1_0000_0003;
/// The connection handle the seeds and scripts name.
const CONN: u64 = 0x2_0000_0011;

/// The body of a target: takes the input, returns or panics.
pub type Body = fn(&[u8]);

/// Every target: its name (the file under `fuzz/fuzz_targets/` and the folder under
/// `fuzz/seeds/`) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("client_requests", client_requests),
    ("client_replies", client_replies),
    ("peer_handshake", peer_handshake),
    ("peer_frames", peer_frames),
    ("bulk_frames", bulk_frames),
    ("pager_stream", pager_stream),
    ("scif_ring", scif_ring),
    ("dma_page", dma_page),
    ("intr_page", intr_page),
    ("cluster_file", cluster_file),
    ("ofi_messages", ofi_messages),
];

/// Target `client_requests`: one datagram from a process, as the daemon decodes it; what
/// decodes encodes back to the same frame.
pub fn client_requests(data: &[u8]) {
    if let Ok(f) = decode::<RequestFrame>(data) {
        let again = encode(&f).expect("a decoded frame encodes");
        assert_eq!(decode::<RequestFrame>(&again).expect("and decodes again"), f);
    }
}

/// Target `client_replies`: one datagram from a daemon, as a library (or a daemon's proxy
/// of the local transport) decodes it; what decodes encodes back to the same message.
pub fn client_replies(data: &[u8]) {
    if let Ok(m) = decode::<ServerMsg>(data) {
        let again = encode(&m).expect("a decoded message encodes");
        assert_eq!(decode::<ServerMsg>(&again).expect("and decodes again"), m);
    }
}

/// Target `cluster_file`: the text of a cluster file (a `secret_file` reads as a fixed
/// secret; no file is opened). What parses keeps the file's rules.
pub fn cluster_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let read = |_: &std::path::Path| Ok(b"  a secret of a secret_file \n".to_vec());
    if let Ok(c) = Cluster::parse_with(text, std::path::Path::new("/etc/remora"), read) {
        assert!(c.secret.len() >= 16);
        let mut ids: Vec<u32> = c.nodes.iter().map(|n| n.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), c.nodes.len(), "node ids are unique");
        assert!(c.nodes.iter().all(|n| n.id != 0 && n.port != 0 && !n.host.trim().is_empty()));
        assert!((10..=60_000).contains(&c.heartbeat.as_millis()));
    }
}

/// A reader of the little structure a shared-memory target's input has: operation codes
/// and their arguments, taken from the front; zeros once the input is used up.
pub(crate) struct Ops<'a>(pub(crate) &'a [u8]);

impl<'a> Ops<'a> {
    /// Whether input is left.
    pub(crate) fn more(&self) -> bool {
        !self.0.is_empty()
    }

    /// The next byte.
    pub(crate) fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map(|(b, r)| (*b, r)).unwrap_or((0, &[]));
        self.0 = rest;
        b
    }

    /// The next little-endian `u16`.
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// The next little-endian `u32`.
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// The next little-endian `u64`.
    pub(crate) fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    /// Up to `n` next bytes.
    pub(crate) fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
}
