//! What feature word each peer said in its last link handshake.
//!
//! A node gives its transports a bit set of its features (`Env::features`); the link
//! handshake carries it both ways (`LinkMsg::Hello`, `LinkMsg::Challenge`, both covered by
//! the handshake's MACs), and each side notes the other's here once the other's proof
//! checked. The transports neither set nor read any bit: what a bit means is the node's
//! (`Node::intr_pair_with`).

use std::collections::HashMap;
use std::sync::Mutex;

/// The peers' last said feature words.
#[derive(Debug, Default)]
pub struct PeerFeatures {
    said: Mutex<HashMap<u32, u32>>,
}

impl PeerFeatures {
    /// Peer `node` said `features` in a handshake that just succeeded.
    pub fn note(&self, node: u32, features: u32) {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).insert(node, features);
    }

    /// The feature word peer `node` said in its last handshake (none yet: 0, no feature).
    pub fn of(&self, node: u32) -> u32 {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).get(&node).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_word_of_each_peer_counts_and_silence_is_none() {
        let p = PeerFeatures::default();
        assert_eq!(p.of(8), 0, "no handshake yet");
        p.note(8, 0b101);
        p.note(12, 0);
        assert_eq!(p.of(8), 0b101);
        assert_eq!(p.of(12), 0);
        p.note(8, 0b100);
        assert_eq!(p.of(8), 0b100, "a restart with a feature off");
    }
}
