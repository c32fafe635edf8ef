//! What feature word and kernel each peer said in its last link handshake.
//!
//! A node gives its transports a bit set of its features (`Env::features`); the link
//! handshake carries it both ways (`LinkMsg::Hello`, `LinkMsg::Challenge`, both covered by
//! the handshake's MACs), with each side's kernel word (`remora_sys::flow::kernel_id`,
//! keyed with the cluster's secret), and each side notes the other's here once the other's
//! proof checked. The transports neither set nor read any bit: what a bit means is the
//! node's (`Node::intr_pair_with`). The kernels are the transports' own: a link whose peer
//! runs on this kernel crosses no wire.

use std::collections::HashMap;
use std::sync::Mutex;

/// The peers' last said feature words, and whether each said this kernel.
#[derive(Debug, Default)]
pub struct PeerFeatures {
    said: Mutex<HashMap<u32, (u32, bool)>>,
}

impl PeerFeatures {
    /// Peer `node` said `features` in a handshake that just succeeded, and a kernel word
    /// that was this node's own (`same_kernel`) or not.
    pub fn note(&self, node: u32, features: u32, same_kernel: bool) {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).insert(node, (features, same_kernel));
    }

    /// The feature word peer `node` said in its last handshake (none yet: 0, no feature).
    pub fn of(&self, node: u32) -> u32 {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).get(&node).map_or(0, |s| s.0)
    }

    /// Whether peer `node` said, in its last handshake, that it runs on this kernel (no
    /// handshake yet: no).
    pub fn same_kernel(&self, node: u32) -> bool {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).get(&node).is_some_and(|s| s.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_word_of_each_peer_counts_and_silence_is_none() {
        let p = PeerFeatures::default();
        assert_eq!(p.of(8), 0, "no handshake yet");
        p.note(8, 0b101, false);
        p.note(12, 0, false);
        assert_eq!(p.of(8), 0b101);
        assert_eq!(p.of(12), 0);
        p.note(8, 0b100, false);
        assert_eq!(p.of(8), 0b100, "a restart with a feature off");
    }

    #[test]
    fn a_peer_is_on_this_kernel_only_when_its_last_handshake_said_so() {
        let p = PeerFeatures::default();
        assert!(!p.same_kernel(8), "no handshake yet");
        p.note(8, 0, true);
        p.note(12, 0, false);
        assert!(p.same_kernel(8));
        assert!(!p.same_kernel(12), "another machine");
        p.note(8, 0, false);
        assert!(!p.same_kernel(8), "moved to another machine");
    }
}
