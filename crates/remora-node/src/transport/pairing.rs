//! What each peer said of the interrupt pairing (issue 19) in its last link handshake.
//!
//! A process pair's plain interrupt triggers share one connection both ways only when both
//! nodes' cluster files allow it (`intr_pair`): the lower node's daemon must read what
//! comes back on the flow it dialed, and the higher node's must offer that flow to its
//! owner. Each side says its setting in the handshake of every flow
//! (`LinkMsg::Hello`, `LinkMsg::Challenge`, both covered by the handshake's MACs), and
//! notes the other's here; the node asks [`Pairing::agreed`] before it pairs.

use std::collections::HashMap;
use std::sync::Mutex;

/// The peers' last said `intr_pair` settings.
#[derive(Debug, Default)]
pub struct Pairing {
    said: Mutex<HashMap<u32, bool>>,
}

impl Pairing {
    /// Peer `node` said `yes` (or no) in a handshake that just succeeded.
    pub fn note(&self, node: u32, yes: bool) {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).insert(node, yes);
    }

    /// Whether peer `node` said yes in its last handshake (no handshake yet: no).
    pub fn agreed(&self, node: u32) -> bool {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).get(&node).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_word_of_each_peer_counts_and_silence_is_no() {
        let p = Pairing::default();
        assert!(!p.agreed(8), "no handshake yet");
        p.note(8, true);
        p.note(12, false);
        assert!(p.agreed(8));
        assert!(!p.agreed(12));
        p.note(8, false);
        assert!(!p.agreed(8), "a restart with the pairing off");
    }
}
