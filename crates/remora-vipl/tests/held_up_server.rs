//! A connection request to a server whose node is held up keeps the caller's time.
//!
//! Nodes 4 (the server's) and 8 (the client's) joined over TCP as two hosts are; node 4's
//! daemon stopped with `SIGSTOP` is the held-up node (to node 8, a silent link, as a cable
//! cut is). Before, `VipConnectRequest` with a timeout waited until node 8 gave the link
//! up: the time limit was kept only by the server's node, which could not keep it.

mod common;

use remora_testkit::{daemon_pid, Harness, Watched};
use remora_vipl::*;
use std::time::{Duration, Instant};

#[test]
fn a_request_to_a_held_up_server_node_times_out_and_the_vi_can_connect_after() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (h, snic, cnic, _sp, _cp, server, client) = common::reliable_vis(h);
    let addr = NetAddress::new(snic.node(), b"held");
    let me = NetAddress::new(cnic.node(), b"c");
    // No one waits yet: refused at once, and the link stands.
    assert_eq!(client.connect_request(&me, &addr, Some(Duration::from_secs(5))), Err(Error::NoMatch));

    let held = Watched::stop(daemon_pid(&h, 4), Duration::from_secs(30));
    let t = Instant::now();
    let asked = client.connect_request(&me, &addr, Some(Duration::from_secs(2)));
    let took = t.elapsed();
    let late = held.resume();
    assert_eq!(asked, Err(Error::Timeout), "after {took:?}");
    assert!(!late && took < Duration::from_secs(15), "the request waited {took:?} for node 4");
    assert_eq!(client.state(), ViState::Idle);

    // Node 4 runs again (it refuses the request given up: no one waits there), the link
    // goes on, and the VI connects as any other.
    common::connect(&snic, &server, &cnic, &client, b"after");
    assert_eq!(client.state(), ViState::Connected);
    assert_eq!(server.state(), ViState::Connected);
    drop(h);
}
