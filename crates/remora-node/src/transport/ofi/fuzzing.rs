//! The `ofi` transport's decoders of untrusted bytes, for the fuzz target `ofi_messages`
//! (`crate::fuzzing`): a fabric message as the progress thread decodes it (any host that
//! reaches the endpoint can send one, before its token is looked at), and the bootstrap
//! frame a peer sends after the handshake.

use super::wire::{Body, Boot, Wire};
use remora_proto::link::{LinkMsg, PeerRequest};
use remora_proto::{decode, encode};

/// Target `ofi_messages`: what decodes encodes back to the same message.
pub fn ofi_messages(data: &[u8]) {
    if let Ok(w) = decode::<Wire>(data) {
        let again = encode(&w).expect("a decoded message encodes");
        assert_eq!(decode::<Wire>(&again).expect("and decodes again"), w);
    }
    if let Ok(b) = decode::<Boot>(data) {
        let again = encode(&b).expect("a decoded bootstrap frame encodes");
        assert_eq!(decode::<Boot>(&again).expect("and decodes again"), b);
    }
}

/// The seeds of `ofi_messages`: one message of each kind, and a bootstrap frame.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let token = 0x5eed_0000_0000_0001;
    let bodies = [
        ("link", Body::Link(LinkMsg::Request { id: 1, origin: 2, req: PeerRequest::Probe })),
        ("rma_open", Body::RmaOpen { tag: 3, conn: 7, offset: 4096, len: 1 << 20, write: true }),
        ("rma_key", Body::RmaKey { tag: 3, ok: true, addr: 0x7f00_0000_0000, key: 0xfeed }),
        ("rma_close", Body::RmaClose { tag: 3 }),
        ("rma_closed", Body::RmaClosed { tag: 3 }),
        ("put", Body::Put { tag: 4, conn: 7, offset: 8, data: b"eight by".to_vec() }),
        ("get", Body::Get { tag: 5, conn: 7, offset: 8, len: 8 }),
        ("done", Body::Done { tag: 5, ok: true, data: b"eight by".to_vec() }),
    ];
    let mut v: Vec<(String, Vec<u8>)> = bodies
        .into_iter()
        .map(|(n, body)| (n.to_string(), encode(&Wire { token, body }).expect("a seed encodes")))
        .collect();
    let boot = Boot { name: b"fi_sockaddr_in://10.0.0.1:40000".to_vec(), token };
    v.push(("boot".into(), encode(&boot).expect("a seed encodes")));
    v
}
