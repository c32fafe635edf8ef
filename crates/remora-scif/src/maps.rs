//! `scif_mmap` as C programs use it: a map made by address, kept until `scif_munmap`
//! names the same address, whatever happens to the endpoint meanwhile.
//!
//! A window of a peer on this host is mapped directly from its memfds (the caller maps the
//! [`PeerMapping::Near`] pieces, at a fixed address if it asked for one). A window of a
//! peer on another host is a DSM map ([`Endpoint::map_far`]), kept here by address: its
//! stores go home at `scif_munmap`, and [`flush_at_exit`] sends whatever is pending when the
//! process exits without unmapping, so nothing stored is lost.

use crate::{Endpoint, Error, PeerPiece, Prot, Result};
use remora_client::dsm::DsmMap;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// What `scif_mmap` is to map.
#[derive(Debug)]
pub enum PeerMapping {
    /// A DSM map of a peer on another host, already made and kept at this address.
    Far(usize),
    /// The pieces of a peer's windows on this host, for the caller to map.
    Near(Vec<PeerPiece>),
}

fn far_maps() -> &'static Mutex<HashMap<usize, DsmMap>> {
    static MAPS: OnceLock<Mutex<HashMap<usize, DsmMap>>> = OnceLock::new();
    MAPS.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Endpoint {
    /// `scif_mmap`'s decision for the peer's registered range `offset..offset+len`: a far
    /// peer's range becomes a DSM map kept until [`munmap_peer`]; a near peer's range is
    /// returned as pieces to map. `fixed` (`SCIF_MAP_FIXED`) is honoured for near peers only.
    ///
    /// # Errors
    /// As [`Endpoint::peer_pieces`] and [`Endpoint::map_far`]; [`Error::NoMemory`] for a
    /// fixed address asked of a far peer's windows.
    pub fn mmap_peer(&self, offset: u64, len: usize, prot: Prot, fixed: bool) -> Result<PeerMapping> {
        if !self.peer_is_far() {
            return self.peer_pieces(offset, len, prot).map(PeerMapping::Near);
        }
        if fixed {
            return Err(Error::NoMemory(
                "SCIF_MAP_FIXED is not available for windows of another host".into(),
            ));
        }
        let m = self.map_far(offset, len, prot)?;
        let addr = m.as_ptr() as usize;
        far_maps().lock().unwrap_or_else(|p| p.into_inner()).insert(addr, m);
        Ok(PeerMapping::Far(addr))
    }
}

/// `scif_munmap` of a map [`Endpoint::mmap_peer`] keeps: its stores go home, then it goes.
/// `false` when `addr` is no such map (the caller unmaps it as plain memory).
pub fn munmap_peer(addr: usize) -> bool {
    let far = far_maps().lock().unwrap_or_else(|p| p.into_inner()).remove(&addr);
    match far {
        Some(m) => {
            m.release();
            true
        }
        None => false,
    }
}

/// Send the stores of every map of another host's memory home (at most 5 s), for a process
/// that exits without unmapping. Never panics; `false` when a home could not be reached.
pub fn flush_at_exit() -> bool {
    std::panic::catch_unwind(|| remora_client::dsm::flush_all(Duration::from_secs(5))).unwrap_or(false)
}
