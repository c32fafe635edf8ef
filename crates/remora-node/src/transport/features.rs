//! What feature word and kernel each peer said in its last link handshake.
//!
//! A node gives its transports a bit set of its features (`Env::features`); the link
//! handshake carries it both ways (`LinkMsg::Hello`, `LinkMsg::Challenge`, both covered by
//! the handshake's MACs), with each side's kernel (`remora_sys::flow::kernel_id`), and each
//! side notes the other's here once the other's proof checked. The transports neither set
//! nor read any bit: what a bit means is the node's (`Node::intr_pair_with`). The kernels
//! are the transports' own: a link whose peer runs on this kernel crosses no wire.

use std::collections::HashMap;
use std::sync::Mutex;

/// The peers' last said feature words and kernels.
#[derive(Debug, Default)]
pub struct PeerFeatures {
    said: Mutex<HashMap<u32, (u32, u64)>>,
}

impl PeerFeatures {
    /// Peer `node` said `features` and `kernel` in a handshake that just succeeded.
    pub fn note(&self, node: u32, features: u32, kernel: u64) {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).insert(node, (features, kernel));
    }

    /// The feature word peer `node` said in its last handshake (none yet: 0, no feature).
    pub fn of(&self, node: u32) -> u32 {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).get(&node).map_or(0, |s| s.0)
    }

    /// Whether peer `node` said, in its last handshake, that it runs on this kernel (no
    /// handshake yet, or a kernel that does not say its id: no).
    pub fn same_kernel(&self, node: u32) -> bool {
        let mine = remora_sys::flow::kernel_id();
        let said = self.said.lock().unwrap_or_else(|p| p.into_inner()).get(&node).map(|s| s.1);
        mine != 0 && said == Some(mine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_word_of_each_peer_counts_and_silence_is_none() {
        let p = PeerFeatures::default();
        assert_eq!(p.of(8), 0, "no handshake yet");
        p.note(8, 0b101, 1);
        p.note(12, 0, 1);
        assert_eq!(p.of(8), 0b101);
        assert_eq!(p.of(12), 0);
        p.note(8, 0b100, 1);
        assert_eq!(p.of(8), 0b100, "a restart with a feature off");
    }

    #[test]
    fn a_peer_is_on_this_kernel_only_when_it_said_this_kernel() {
        let p = PeerFeatures::default();
        let mine = remora_sys::flow::kernel_id();
        assert!(!p.same_kernel(8), "no handshake yet");
        p.note(8, 0, mine);
        p.note(12, 0, mine ^ 1);
        p.note(16, 0, 0);
        assert!(p.same_kernel(8));
        assert!(!p.same_kernel(12), "another machine");
        assert!(!p.same_kernel(16), "a kernel that did not say");
    }
}
