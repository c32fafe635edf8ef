//! The safe Rust API of Remora's SCIF personality: Intel's Symmetric Communications
//! Interface, with Remora nodes as SCIF nodes.
//!
//! A [`Scif`] is the library's context (the node this process belongs to). An
//! [`Endpoint`] is `scif_open`'s endpoint: a real file descriptor ([`Endpoint::fd`]) that
//! `poll`, `select` and `epoll` understand. Endpoints bind to ports, listen, connect and
//! accept; connected endpoints exchange ordered byte messages through a shared-memory ring
//! (no daemon on the path; with a peer on another host, over a TCP stream of the two
//! processes' own, which then is the endpoint's descriptor), register windows of their
//! memory, map the peer's windows and move data between windows with RMA calls,
//! synchronised by fences.
//!
//! ```no_run
//! use remora_scif::{Endpoint, PortId, Scif};
//! let scif = Scif::new().unwrap();
//! let listener = Endpoint::open(&scif).unwrap();
//! let port = listener.bind(0).unwrap();
//! listener.listen(4).unwrap();
//! // Loopback to one's own node is ordinary SCIF use.
//! let client = Endpoint::open(&scif).unwrap();
//! let t = std::thread::spawn(move || {
//!     client.connect(PortId { node: client.scif().node(), port }).unwrap();
//!     client.send(b"ping", true).unwrap();
//!     client
//! });
//! let (server, _peer) = listener.accept(true).unwrap();
//! let mut buf = [0u8; 4];
//! server.recv(&mut buf, true).unwrap();
//! assert_eq!(&buf, b"ping");
//! t.join().unwrap();
//! ```

mod conn;
mod connecting;
mod direct;
mod endpoint;
mod error;
mod held;
mod maps;
mod msg;
mod rma;
mod window;

pub use conn::PortId;
pub use connecting::Connecting;
pub use endpoint::{Accepting, Endpoint};
pub use error::{Error, Result};
pub use held::Held;
pub use maps::{flush_at_exit, munmap_peer, PeerMapping};
pub use remora_sys::user_memory::UserRegion;
pub use rma::{FenceInit, RmaFlags};
pub use window::{PeerPiece, Prot};

use remora_client::{Config, Session};
use std::sync::{Arc, Mutex};

/// `SCIF_PORT_RSVD`: the first port `bind(0)` hands out.
pub const PORT_RSVD: u16 = 1088;

/// The SCIF library of this process: its node and a session for node-wide questions.
#[derive(Debug)]
pub struct Scif {
    cfg: Config,
    aux: Mutex<Option<Arc<Session>>>,
}

impl Scif {
    /// The library for the node named by the environment (`REMORA_NODE`, default 4; the
    /// daemon of that node is started when none runs). This is `scif_open`'s first step.
    ///
    /// # Errors
    /// [`Error::Invalid`] when a `REMORA_*` variable holds a value that cannot be used (the
    /// message names it).
    pub fn new() -> Result<Arc<Scif>> {
        let cfg = Config::from_env().map_err(|e| Error::Invalid(e.to_string()))?;
        Ok(Scif::with_config(cfg))
    }

    /// The library for an explicit configuration.
    pub fn with_config(cfg: Config) -> Arc<Scif> {
        Arc::new(Scif { cfg, aux: Mutex::new(None) })
    }

    /// This process's SCIF node id (its Remora node id).
    pub fn node(&self) -> u32 {
        self.cfg.node
    }

    pub(crate) fn config(&self) -> &Config {
        &self.cfg
    }

    /// `scif_get_nodeIDs`: the nodes this node reaches, itself included, ascending.
    ///
    /// # Errors
    /// [`Error::NoDevice`] when the node daemon cannot be reached or started.
    pub fn node_ids(&self) -> Result<Vec<u32>> {
        let s = {
            let mut aux = self.aux.lock().unwrap_or_else(|p| p.into_inner());
            match aux.as_ref() {
                Some(s) if !s.hung_up() => s.clone(),
                _ => {
                    let s = Arc::new(Session::open_scif(&self.cfg, true)?);
                    *aux = Some(s.clone());
                    s
                }
            }
        };
        match s.request(remora_proto::Request::Scif(remora_proto::ScifRequest::Nodes), &[])? {
            (remora_proto::Reply::ScifNodes(v), _) => Ok(v),
            (other, _) => Err(Error::Invalid(format!("unexpected answer {other:?}"))),
        }
    }
}
