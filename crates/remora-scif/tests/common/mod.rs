//! What the SCIF integration tests share: a node's library, connected pairs, clusters
//! over TCP.
#![allow(dead_code)] // each test binary uses its own part

use remora_scif::*;
use remora_testkit::Harness;
use std::sync::Arc;

/// The library of node `node` of a test harness.
pub trait ScifOf {
    fn scif(&self, node: u32) -> Arc<Scif>;
}

impl ScifOf for Harness {
    fn scif(&self, node: u32) -> Arc<Scif> {
        Scif::with_config(self.config(node))
    }
}

/// A connected pair: (client on node `a`, server endpoint on node `b`).
pub fn pair(h: &Harness, a: u32, b: u32) -> (Endpoint, Endpoint) {
    let sb = h.scif(b);
    let l = Endpoint::open(&sb).unwrap();
    let port = l.bind(0).unwrap();
    assert!(port >= PORT_RSVD);
    l.listen(4).unwrap();
    let sa = h.scif(a);
    let c = Endpoint::open(&sa).unwrap();
    let t = std::thread::spawn(move || {
        let p = c.connect(PortId { node: b, port }).unwrap();
        assert_eq!(c.local_port().unwrap().port, p);
        c
    });
    let (s, peer) = l.accept(true).unwrap();
    let c = t.join().unwrap();
    assert_eq!(peer.node, a);
    assert_eq!(peer, c.local_port().unwrap());
    assert_eq!(c.peer().unwrap(), PortId { node: b, port });
    (c, s)
}

/// Nodes joined by a cluster file on loopback that forces TCP between them: the path
/// endpoints on two hosts take.
pub fn over_tcp(nodes: &[u32]) -> Harness {
    Harness::with_cluster(nodes, true)
}
